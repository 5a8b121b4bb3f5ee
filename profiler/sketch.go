package profiler

import (
	"fmt"
	"math"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"
)

// SketchRelativeAccuracy is the relative accuracy of every quantile this
// package reports: a returned quantile q̂ of a true value q satisfies
// |q̂ − q| ≤ 1 % · q.
const SketchRelativeAccuracy = 0.01

// maxSketchIndex bounds the bin indices a decoded sketch may use: values are
// nanoseconds in a uint64, so no bin beyond the index of 2^64 can be filled.
// Index 0 holds values in (γ^-1, 1]; integer nanosecond values never map
// below it (0 goes to the zero bin).
var maxSketchIndex = sketchMapping.Index(math.Ldexp(1, 64)) + 1

// sketchMapping is the one index mapping of every sketch: logarithmic,
// γ = (1+α)/(1−α) with α = SketchRelativeAccuracy, index offset 0. It is
// part of the encoded format (see doc.go) and must not change within a
// format version.
var sketchMapping = func() mapping.IndexMapping {
	m, err := mapping.NewLogarithmicMapping(SketchRelativeAccuracy)
	if err != nil {
		panic(err)
	}
	return m
}()

// Sketch is a DDSketch (sketches-go) of non-negative nanosecond values with
// 1 % relative accuracy. The zero value is not usable; use NewSketch.
type Sketch struct {
	dd *ddsketch.DDSketch
}

// SketchBin is one non-empty bin of a sketch: Count values whose bin index is
// Index under the logarithmic mapping described in doc.go.
type SketchBin struct {
	Index int32
	Count uint64
}

// NewSketch returns an empty sketch.
func NewSketch() *Sketch {
	return &Sketch{dd: ddsketch.NewDDSketch(sketchMapping, store.NewDenseStore(), store.NewDenseStore())}
}

// Add inserts one value in nanoseconds.
func (s *Sketch) Add(ns uint64) {
	// Values are finite and non-negative, so AddWithCount cannot fail.
	_ = s.dd.Add(float64(ns))
}

// Count is the number of values in the sketch.
func (s *Sketch) Count() uint64 {
	if s == nil || s.dd == nil {
		return 0
	}
	return uint64(s.dd.GetCount())
}

// Quantile returns the value at quantile q (0 ≤ q ≤ 1) within 1 % relative
// accuracy, using the lower-rank convention of sketches-go: the value of
// rank ⌊q·(n−1)⌋ among the n sorted values. It returns 0 for an empty sketch
// or an invalid q.
func (s *Sketch) Quantile(q float64) float64 {
	if s == nil || s.dd == nil || s.dd.IsEmpty() {
		return 0
	}
	v, err := s.dd.GetValueAtQuantile(q)
	if err != nil {
		return 0
	}
	return v
}

// Merge adds every value of o to s.
func (s *Sketch) Merge(o *Sketch) {
	if o == nil || o.dd == nil {
		return
	}
	// Both sketches share sketchMapping, so MergeWith cannot fail.
	_ = s.dd.MergeWith(o.dd)
}

// Clone returns an independent copy of s.
func (s *Sketch) Clone() *Sketch {
	if s == nil || s.dd == nil {
		return NewSketch()
	}
	return &Sketch{dd: s.dd.Copy()}
}

// ZeroCount is the number of values equal to 0.
func (s *Sketch) ZeroCount() uint64 {
	if s == nil || s.dd == nil {
		return 0
	}
	return uint64(s.dd.GetZeroCount())
}

// Bins returns the non-empty bins of positive values in increasing index
// order.
func (s *Sketch) Bins() []SketchBin {
	if s == nil || s.dd == nil {
		return nil
	}
	var bins []SketchBin
	s.dd.GetPositiveValueStore().ForEach(func(index int, count float64) bool {
		bins = append(bins, SketchBin{Index: int32(index), Count: uint64(count)})
		return false
	})
	return bins
}

// sketchFromBins rebuilds a sketch from its zero count and bins, as decoded
// from storage or an export file, and checks that they could have been
// produced by Add: indices strictly increasing within the range of uint64
// nanoseconds, every count positive and at most 2^53 in total.
func sketchFromBins(zero uint64, bins []SketchBin) (*Sketch, error) {
	const maxCount = 1 << 53 // counts are float64 inside sketches-go
	total := zero
	if total > maxCount {
		return nil, fmt.Errorf("sketch zero count %d too large: %w", zero, ErrInvalid)
	}
	s := NewSketch()
	pos := s.dd.GetPositiveValueStore()
	prev := int64(-1)
	for _, b := range bins {
		if int64(b.Index) <= prev {
			return nil, fmt.Errorf("sketch bin index %d not increasing: %w", b.Index, ErrInvalid)
		}
		if b.Index < 0 || int(b.Index) > maxSketchIndex {
			return nil, fmt.Errorf("sketch bin index %d out of range: %w", b.Index, ErrInvalid)
		}
		if b.Count == 0 {
			return nil, fmt.Errorf("sketch bin %d empty: %w", b.Index, ErrInvalid)
		}
		if b.Count > maxCount-total {
			return nil, fmt.Errorf("sketch count too large: %w", ErrInvalid)
		}
		total += b.Count
		prev = int64(b.Index)
		pos.AddWithCount(int(b.Index), float64(b.Count))
	}
	if zero > 0 {
		_ = s.dd.AddWithCount(0, float64(zero))
	}
	return s, nil
}
