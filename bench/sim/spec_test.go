package sim

import (
	"strings"
	"testing"
	"time"
)

func TestServiceFromSpec(t *testing.T) {
	sv, err := ServiceFromSpec("trace=h100/resnet50_4_fwd,prio=3,cpu=12us,every=5ms,runs=7,name=hp,weight=2")
	if err != nil {
		t.Fatal(err)
	}
	if sv.Name != "hp" || sv.Priority != 3 || sv.Every != 5*time.Millisecond || sv.Runs != 7 || sv.Weight != 2 || len(sv.Kernels) == 0 {
		t.Errorf("service %+v", sv)
	}
	for spec, want := range map[string]string{
		"prio=1":                               "trace= is required",
		"trace=h100/resnet50_4_fwd,prio=10":    "prio: must be 0–9",
		"trace=h100/resnet50_4_fwd,colour=red": `unknown option "colour"`,
		"trace=h100/resnet50_4_fwd,every":      "is not key=value",
		"trace=h100/resnet50_4_fwd,burst=-1":   "burst: must be ≥ 0",
	} {
		if _, err := ServiceFromSpec(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", spec, err, want)
		}
	}
}
