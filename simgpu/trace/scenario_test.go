package trace

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fikit/fikit/internal/stats"
)

var rewriteScenarios = flag.Bool("rewrite-scenarios", false, "rewrite scenario/*.csv from their derivations")

// TestScenarioTracesFrozen: every frozen scenario trace is exactly what its
// derivation (ScenarioTraces) makes of its embedded source, and embedded
// under scenario/NAME. go test ./simgpu/trace -run ScenarioTracesFrozen
// -rewrite-scenarios regenerates them after a derivation changed.
func TestScenarioTracesFrozen(t *testing.T) {
	if *rewriteScenarios {
		for i := range ScenarioTraces {
			s := &ScenarioTraces[i]
			text, err := s.Frozen()
			if err != nil {
				t.Fatalf("%s: %v", s.Name, err)
			}
			if err := os.WriteFile(filepath.Join("scenario", s.Name+".csv"), text, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Skip("rewrote scenario/*.csv: run the tests again to check what is embedded")
	}
	var want []string
	for i := range ScenarioTraces {
		s := &ScenarioTraces[i]
		want = append(want, scenarioPrefix+s.Name)
		text, err := s.Frozen()
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		file := filepath.Join("scenario", s.Name+".csv")
		got, err := orionFS.ReadFile("scenario/" + s.Name + ".csv")
		if err != nil {
			t.Fatalf("%s is not embedded: %v (run with -rewrite-scenarios, then again)", s.Name, err)
		}
		if !bytes.Equal(got, text) {
			t.Errorf("%s: the frozen file is not its derivation's output (run with -rewrite-scenarios)", file)
		}
		tr, err := Load(scenarioPrefix + s.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !tr.HasHostTime || len(tr.Kernels) == 0 || tr.Validate() != nil {
			t.Errorf("%s: loaded %d kernels, host times %v", s.Name, len(tr.Kernels), tr.HasHostTime)
		}
	}
	var have []string
	for _, n := range EmbeddedNames() {
		if strings.HasPrefix(n, scenarioPrefix) {
			have = append(have, n)
		}
	}
	if strings.Join(have, " ") != strings.Join(sortedCopy(want), " ") {
		t.Errorf("embedded scenario traces %v, want %v", have, want)
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c
}

// TestScenarioTraceShapes pins what each derivation promises: the
// CUDA-graph request's device time, the eager one's launch-bound request
// time, BERT-base's and the training step's size and longest kernels.
func TestScenarioTraceShapes(t *testing.T) {
	get := func(name string) *Trace {
		s, err := Scenario(name)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := s.Derive()
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	g := get("graph_resnet50_b1")
	if d := g.GPUTimeNs(); d < graphResNetDeviceNs-200 || d > graphResNetDeviceNs+200 || len(g.Kernels) != 174 {
		t.Errorf("graph: %d kernels, %d ns of device time", len(g.Kernels), d)
	}
	e := get("scenario/eager_resnet50_b1")
	if a := AnalyticJCT(e, -1, 5000).JCTNs; a < 3_050_000 || a > 3_150_000 {
		t.Errorf("eager: analytic JCT %d ns, want about 3.1 ms", a)
	}
	if e.Kernels[10].HostNs <= 5*median(e) {
		t.Errorf("eager: host time %d ns per launch is not well above the median kernel %d ns", e.Kernels[10].HostNs, median(e))
	}
	b := get("bert_base_b16")
	longest := int64(0)
	for _, k := range b.Kernels {
		longest = max(longest, k.DurationNs)
	}
	if n := len(b.Kernels); n < 200 || n > 250 || b.GPUTimeNs() < 12e6 || b.GPUTimeNs() > 24e6 || longest < 300e3 {
		t.Errorf("bert: %d kernels, %d ns, longest %d ns", n, b.GPUTimeNs(), longest)
	}
	tr := get("train_resnet50_b16")
	if n := len(tr.Kernels); n < 400 || tr.GPUTimeNs() < 20e6 {
		t.Errorf("training step: %d kernels, %d ns", n, tr.GPUTimeNs())
	}
	if _, err := Scenario("nope"); err == nil {
		t.Error("an unknown scenario trace was found")
	}
}

func median(t *Trace) int64 {
	d := make([]int64, len(t.Kernels))
	for i, k := range t.Kernels {
		d[i] = k.DurationNs
	}
	return stats.Quantile(d, 0.5)
}
