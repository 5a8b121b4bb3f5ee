package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fikit/fikit/bench/sim"
)

// A --service value carries its own commas: they must not split it.
func TestSimServiceFlagKeepsCommas(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"fikit", "sim",
		"--service", "trace=h100/resnet50_4_fwd,prio=0,cpu=12us,every=5ms,runs=5",
		"--service", "trace=h100/mobilenet_4_fwd,prio=5,runs=3"}, &out)
	if err != nil {
		t.Fatalf("fikit sim: %v\n%s", err, out.String())
	}
	for _, want := range []string{"h100/resnet50_4_fwd", "h100/mobilenet_4_fwd", "fikit"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// --device picks the preset the flags override; an unknown one is a usage
// error; graph=true makes each run one CUDA graph launch.
func TestSimDevicePresets(t *testing.T) {
	svc := []string{"--service", "trace=scenario/graph_resnet50_b1,graph=true,prio=0,every=8ms,runs=20",
		"--service", "trace=scenario/bert_base_b16,prio=5,runs=5", "--mode", "exclusive", "--json"}
	for _, tc := range []struct {
		args    []string
		switch_ int64
		launch  int64
	}{
		{nil, 140000, 5000},
		{[]string{"--device", "legacy"}, 25000, 4000},
		{[]string{"--device", "legacy", "--switch", "60us"}, 60000, 4000},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), append(append([]string{"fikit", "sim"}, tc.args...), svc...), &out); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		var rep sim.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.SwitchNs != tc.switch_ || rep.LaunchNs != tc.launch || len(rep.Modes) != 1 {
			t.Errorf("%v: %+v", tc.args, rep)
		}
		// One graph launch of 0.875 ms of device time a request.
		if p50 := rep.Modes[0].Services[0].P50Ns; p50 < 0.875e6 || p50 > 0.885e6 {
			t.Errorf("%v: the graph service's p50 %v ns", tc.args, p50)
		}
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"fikit", "sim", "--device", "h900"}, &out)
	if err == nil || !strings.Contains(err.Error(), "h900") {
		t.Errorf("unknown preset: %v", err)
	}
}

// --variants adds a fikit row per ablation of the gate (all: every one of
// variant.Variants); an unknown name is a usage error.
func TestSimVariants(t *testing.T) {
	svc := []string{"fikit", "sim", "--service", "trace=scenario/graph_resnet50_b1,graph=true,prio=0,every=8ms,runs=20",
		"--service", "trace=scenario/bert_base_b16,prio=5", "--mode", "fikit", "--json"}
	var out bytes.Buffer
	if err := run(context.Background(), append(svc, "--variants", "today,all"), &out); err != nil {
		t.Fatalf("fikit sim: %v\n%s", err, out.String())
	}
	var rep sim.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	var modes []string
	for _, m := range rep.Modes {
		modes = append(modes, m.Mode)
	}
	if strings.Join(modes, " ") != "fikit fikit/today fikit/all" {
		t.Errorf("modes %v, want fikit fikit/today fikit/all", modes)
	}
	// all is the defaults: the same as plain fikit.
	if a, b := rep.Modes[0].Services[0].P99Ns, rep.Modes[2].Services[0].P99Ns; a != b {
		t.Errorf("fikit/all's HP p99 %v, plain fikit's %v", b, a)
	}
	out.Reset()
	if err := run(context.Background(), append(svc, "--variants", "today,nope"), &out); err == nil ||
		!strings.Contains(err.Error(), "nope") {
		t.Errorf("an unknown variant: %v", err)
	}
}

// A back-to-back service and no runs= anywhere: the first service runs
// --runs times (default 100) instead of for the whole simulated horizon
// (18,034 runs and 18 s of wall time for this trace, exclusive, before).
// Where a service sets runs=, it bounds the shared modes; alone (exclusive)
// a service without runs= runs --runs times.
func TestSimBoundsRunsByDefault(t *testing.T) {
	simRuns := func(args ...string) []int {
		t.Helper()
		var out bytes.Buffer
		if err := run(context.Background(), append([]string{"fikit", "sim", "--mode", "exclusive", "--json"}, args...), &out); err != nil {
			t.Fatalf("fikit sim %q: %v\n%s", args, err, out.String())
		}
		var rep sim.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		var runs []int
		for _, s := range rep.Modes[0].Services {
			runs = append(runs, s.Runs)
		}
		return runs
	}
	if got := simRuns("--service", "trace=h100/bert_2_fwd,prio=5"); len(got) != 1 || got[0] != defaultSimRuns {
		t.Errorf("back-to-back service without runs=: runs %v, want [%d]", got, defaultSimRuns)
	}
	if got := simRuns("--runs", "7", "--service", "trace=h100/bert_2_fwd,prio=5"); len(got) != 1 || got[0] != 7 {
		t.Errorf("--runs 7: runs %v", got)
	}
	if got := simRuns("--service", "trace=h100/resnet50_4_fwd,prio=0,every=5ms", "--service", "trace=h100/bert_2_fwd,prio=5,runs=3"); len(got) != 2 || got[0] != defaultSimRuns || got[1] != 3 {
		t.Errorf("alone, runs=3 and none: runs %v, want [%d 3]", got, defaultSimRuns)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"fikit", "sim", "--runs", "0"}, &out); err == nil || exitCode(err) != 2 {
		t.Errorf("--runs 0: %v, want a usage error", err)
	}
}
