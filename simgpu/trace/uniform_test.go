package trace

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestUniform(t *testing.T) {
	a, err := Uniform(1, EqualsShort)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Uniform(1, EqualsShort)
	c, _ := Uniform(2, EqualsShort)
	if !reflect.DeepEqual(a, b) {
		t.Error("the same seed gave two traces")
	}
	if reflect.DeepEqual(a.Kernels, c.Kernels) {
		t.Error("two seeds gave the same trace")
	}
	if len(a.Kernels) != EqualsShort.Kernels || len(a.Names()) != EqualsShort.Distinct {
		t.Errorf("%d kernels, %d names", len(a.Kernels), len(a.Names()))
	}
	var sum int64
	for _, k := range a.Kernels {
		if k.DurationNs < EqualsShort.MinNs || k.DurationNs > EqualsShort.MaxNs {
			t.Errorf("%s: %d ns outside [%d, %d]", k.Name, k.DurationNs, EqualsShort.MinNs, EqualsShort.MaxNs)
		}
		sum += k.DurationNs
	}
	// Uniform: the mean is near the middle.
	if mid := (EqualsShort.MinNs + EqualsShort.MaxNs) / 2; sum/int64(len(a.Kernels)) < mid*8/10 || sum/int64(len(a.Kernels)) > mid*12/10 {
		t.Errorf("mean %d ns, want about %d", sum/int64(len(a.Kernels)), mid)
	}
	var buf bytes.Buffer
	if err := Write(&buf, a); err != nil {
		t.Fatal(err)
	}
	back, err := ReadFikit(&buf, "x")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Kernels, a.Kernels) {
		t.Error("written and read back, the trace differs")
	}
	for _, bad := range []UniformOptions{{}, {Name: "x", Kernels: 1, Distinct: 2, MinNs: 1, MaxNs: 1},
		{Name: "x", Kernels: 1, Distinct: 1, MinNs: 5, MaxNs: 4}} {
		if _, err := Uniform(1, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
}
