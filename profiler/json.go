package profiler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// JSONFormat is the value of the "format" member of an exported profile.
const JSONFormat = "fikit-profile"

// jsonProfile is the export format (see doc.go). Members marked derived are
// written for people and ignored on import.
type jsonProfile struct {
	Format        string       `json:"format"`
	Version       int          `json:"version"`
	TaskKey       string       `json:"task_key"`
	GPU           string       `json:"gpu"`
	Phase         Phase        `json:"phase"`
	Runs          uint32       `json:"runs"`
	TargetRuns    uint32       `json:"target_runs"`
	DiscardedRuns uint32       `json:"discarded_runs"`
	RunTime       jsonDist     `json:"run_time"`
	Duration      jsonDist     `json:"duration"`
	Gap           jsonDist     `json:"gap"`
	Kernels       []jsonKernel `json:"kernels"`
	Sequence      *jsonSeq     `json:"sequence,omitempty"`
	// Discards by reason (DiscardReason's names), the profile's version,
	// why it came, and the completed versions: absent in older exports.
	Discards       map[string]uint32 `json:"discards,omitempty"`
	ProfileVersion uint32            `json:"profile_version,omitempty"`
	Reason         string            `json:"reason,omitempty"`
	Versions       []jsonVersion     `json:"versions,omitempty"`
	// BesideRuns: absent in older exports and when none.
	BesideRuns uint32 `json:"beside_runs,omitempty"`
}

type jsonVersion struct {
	Version   uint32  `json:"version"`
	UnixNs    int64   `json:"unix_ns"`
	Reason    string  `json:"reason"`
	Runs      uint32  `json:"runs"`
	Discarded uint32  `json:"discarded_runs"`
	MeanRunNs float64 `json:"mean_run_ns"`
}

// jsonSeq is the positional sequence: the kernel at each position of a run
// with its mean duration and following gap.
type jsonSeq struct {
	Runs    uint32       `json:"runs"`
	Kernels []jsonSeqPos `json:"kernels"`
}

type jsonSeqPos struct {
	ID         string  `json:"id"`
	DurationNs float64 `json:"duration_ns"`
	GapNs      float64 `json:"gap_ns"`
}

type jsonKernel struct {
	ID       string    `json:"id"` // 16 lowercase hex digits
	Name     string    `json:"name"`
	Grid     [3]uint32 `json:"grid"`
	Block    [3]uint32 `json:"block"`
	Duration jsonDist  `json:"duration"`
	Gap      jsonDist  `json:"gap"`
}

type jsonDist struct {
	Count    uint64     `json:"count"`
	MeanNs   float64    `json:"mean_ns"`
	M2       float64    `json:"m2"`
	MinNs    uint64     `json:"min_ns"`
	MaxNs    uint64     `json:"max_ns"`
	StddevNs float64    `json:"stddev_ns"` // derived
	P50Ns    float64    `json:"p50_ns"`    // derived
	P90Ns    float64    `json:"p90_ns"`    // derived
	Sketch   jsonSketch `json:"sketch"`
}

type jsonSketch struct {
	ZeroCount uint64     `json:"zero_count"`
	Bins      [][2]int64 `json:"bins"` // [index, count] pairs, index increasing
}

func toJSONDist(d *Dist) jsonDist {
	j := jsonDist{
		Count: d.Count, MeanNs: d.Mean, M2: d.M2, MinNs: d.Min, MaxNs: d.Max,
		StddevNs: d.Stddev(), P50Ns: d.P50, P90Ns: d.P90,
		Sketch: jsonSketch{ZeroCount: d.Sketch.ZeroCount(), Bins: [][2]int64{}},
	}
	for _, b := range d.Sketch.Bins() {
		j.Sketch.Bins = append(j.Sketch.Bins, [2]int64{int64(b.Index), int64(b.Count)})
	}
	return j
}

func fromJSONDist(what string, j *jsonDist) (Dist, error) {
	bins := make([]SketchBin, 0, len(j.Sketch.Bins))
	for _, b := range j.Sketch.Bins {
		if b[0] < math.MinInt32 || b[0] > math.MaxInt32 || b[1] < 0 {
			return Dist{}, fmt.Errorf("%s: sketch bin %v: %w", what, b, ErrInvalid)
		}
		bins = append(bins, SketchBin{Index: int32(b[0]), Count: uint64(b[1])})
	}
	s, err := sketchFromBins(j.Sketch.ZeroCount, bins)
	if err != nil {
		return Dist{}, fmt.Errorf("%s: %w", what, err)
	}
	return Dist{Count: j.Count, Mean: j.MeanNs, M2: j.M2, Min: j.MinNs, Max: j.MaxNs, Sketch: s}, nil
}

// MarshalJSON encodes p in the export format (see doc.go). Kernels are
// ordered by ID, so equal profiles encode to equal bytes.
func (p *Profile) MarshalJSON() ([]byte, error) {
	j := jsonProfile{
		Format: JSONFormat, Version: FormatVersion,
		TaskKey: p.TaskKey, GPU: p.GPU, Phase: p.Phase,
		Runs: p.Runs, TargetRuns: p.TargetRuns, DiscardedRuns: p.DiscardedRuns, BesideRuns: p.BesideRuns,
		RunTime: toJSONDist(&p.RunTime), Duration: toJSONDist(&p.Duration), Gap: toJSONDist(&p.Gap),
		Kernels: make([]jsonKernel, 0, len(p.Kernels)),
	}
	for _, k := range p.SortedKernels() {
		j.Kernels = append(j.Kernels, jsonKernel{
			ID: FormatKernelID(k.ID), Name: k.Name, Grid: k.Grid, Block: k.Block,
			Duration: toJSONDist(&k.Duration), Gap: toJSONDist(&k.Gap),
		})
	}
	if m := p.Discards.Map(); len(m) > 0 {
		j.Discards = m
	}
	j.ProfileVersion, j.Reason = p.Version, p.Reason
	for _, h := range p.History {
		j.Versions = append(j.Versions, jsonVersion(h))
	}
	if len(p.Sequence) > 0 {
		j.Sequence = &jsonSeq{Runs: p.SeqRuns, Kernels: make([]jsonSeqPos, len(p.Sequence))}
		for i, s := range p.Sequence {
			j.Sequence.Kernels[i] = jsonSeqPos{ID: FormatKernelID(s.ID), DurationNs: s.DurationNs, GapNs: s.GapNs}
		}
	}
	return json.Marshal(&j)
}

// UnmarshalJSON decodes the export format into p, checking the result as
// ValidateProfile does.
func (p *Profile) UnmarshalJSON(data []byte) error {
	q, err := DecodeJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	*p = *q
	return nil
}

// DecodeJSON reads one profile in the export format from r. Unknown members
// are ignored; a different format or version is an error.
func DecodeJSON(r io.Reader) (*Profile, error) {
	p, err := decodeJSON(r)
	if err != nil {
		return nil, fmt.Errorf("decode profile json: %w", err)
	}
	return p, nil
}

func decodeJSON(r io.Reader) (*Profile, error) {
	dec := json.NewDecoder(r)
	var head struct {
		Format  string `json:"format"`
		Version int    `json:"version"`
	}
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, errors.Join(ErrMalformed, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the profile: %w", ErrMalformed)
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, errors.Join(ErrMalformed, err)
	}
	if head.Format != JSONFormat {
		return nil, fmt.Errorf("format %q, want %q: %w", head.Format, JSONFormat, ErrMalformed)
	}
	if head.Version != FormatVersion {
		return nil, fmt.Errorf("version %d: %w", head.Version, ErrVersion)
	}
	var j jsonProfile
	if err := json.Unmarshal(raw, &j); err != nil {
		if errors.Is(err, ErrInvalid) {
			return nil, err
		}
		return nil, errors.Join(ErrMalformed, err)
	}
	p := &Profile{
		TaskKey: j.TaskKey, GPU: j.GPU, Phase: j.Phase,
		Runs: j.Runs, TargetRuns: j.TargetRuns, DiscardedRuns: j.DiscardedRuns, BesideRuns: j.BesideRuns,
		Kernels: make(map[uint64]*KernelStats, len(j.Kernels)),
	}
	var err error
	if p.RunTime, err = fromJSONDist("run time", &j.RunTime); err != nil {
		return nil, err
	}
	if p.Duration, err = fromJSONDist("duration", &j.Duration); err != nil {
		return nil, err
	}
	if p.Gap, err = fromJSONDist("gap", &j.Gap); err != nil {
		return nil, err
	}
	for i := range j.Kernels {
		jk := &j.Kernels[i]
		id, err := ParseKernelID(jk.ID)
		if err != nil {
			return nil, fmt.Errorf("kernel %d: %w", i, err)
		}
		if _, dup := p.Kernels[id]; dup {
			return nil, fmt.Errorf("kernel %016x twice: %w", id, ErrInvalid)
		}
		k := &KernelStats{ID: id, Name: jk.Name, Grid: jk.Grid, Block: jk.Block}
		if k.Duration, err = fromJSONDist(jk.ID+" duration", &jk.Duration); err != nil {
			return nil, err
		}
		if k.Gap, err = fromJSONDist(jk.ID+" gap", &jk.Gap); err != nil {
			return nil, err
		}
		p.Kernels[id] = k
	}
	if j.Sequence != nil {
		if len(j.Sequence.Kernels) > MaxSequence {
			return nil, fmt.Errorf("sequence of %d kernels: %w", len(j.Sequence.Kernels), ErrInvalid)
		}
		p.SeqRuns = j.Sequence.Runs
		if len(j.Sequence.Kernels) > 0 {
			p.Sequence = make([]SeqKernel, len(j.Sequence.Kernels))
		}
		for i, s := range j.Sequence.Kernels {
			id, err := ParseKernelID(s.ID)
			if err != nil {
				return nil, fmt.Errorf("sequence position %d: %w", i, err)
			}
			p.Sequence[i] = SeqKernel{ID: id, DurationNs: s.DurationNs, GapNs: s.GapNs}
		}
	}
	for name, c := range j.Discards {
		if d, ok := ParseDiscardReason(name); ok {
			p.Discards[d] = c
		}
	}
	p.Version, p.Reason = max(j.ProfileVersion, 1), j.Reason
	if len(j.Versions) > MaxHistory {
		return nil, fmt.Errorf("%d versions: %w", len(j.Versions), ErrInvalid)
	}
	for _, v := range j.Versions {
		p.History = append(p.History, VersionInfo(v))
	}
	if err := ValidateProfile(p); err != nil {
		return nil, err
	}
	p.refresh()
	return p, nil
}

// FormatKernelID writes a kernel ID as 16 lowercase hex digits, as in
// kernelid/testdata/kernel_ids.tsv and the export format.
func FormatKernelID(id uint64) string {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[id&0xf]
		id >>= 4
	}
	return string(b[:])
}

// ParseKernelID parses 16 hex digits (either case), with or without a 0x
// prefix.
func ParseKernelID(s string) (uint64, error) {
	h := s
	if len(h) > 2 && (h[:2] == "0x" || h[:2] == "0X") {
		h = h[2:]
	}
	if len(h) != 16 {
		return 0, fmt.Errorf("kernel id %q: want 16 hex digits: %w", s, ErrInvalid)
	}
	id, err := strconv.ParseUint(h, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("kernel id %q: %w", s, ErrInvalid)
	}
	return id, nil
}
