package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

func readTorch(t *testing.T, file string) *TorchProfile {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := ReadTorchProfile(f, file)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A small handwritten torch.profiler trace of an eager service: kernels
// join their launch calls by correlation id (runtime or driver API), fall
// into the run their launch was in, in launch order whatever the event
// order; host time runs from the previous launch call's start (the first
// from the run's start); durations keep their nanoseconds; geometry comes
// from the args. A copy inside a run, a kernel whose launch is missing and
// one launched after the last run are counted, not replayed.
func TestTorchProfileEager(t *testing.T) {
	p := readTorch(t, "testdata/torch/eager.json")
	if len(p.Runs) != 2 || p.Copies != 1 || p.Unlaunched != 1 || p.Outside != 1 {
		t.Fatalf("runs %d, copies %d, unlaunched %d, outside %d", len(p.Runs), p.Copies, p.Unlaunched, p.Outside)
	}
	r0 := p.Runs[0]
	conv := Kernel{Name: `void cudnn::conv_fwd<float, 128>("x", 2)`, DurationNs: 40125, HostNs: 20250,
		Grid: [3]uint32{98, 1, 1}, Block: [3]uint32{128, 1, 1}, Profile: ProfileUnknown}
	ew := Kernel{Name: "void at::vectorized_elementwise_kernel<4>", DurationNs: 4500, HostNs: 15000,
		Grid: [3]uint32{64, 2, 1}, Block: [3]uint32{256, 1, 1}, Profile: ProfileUnknown}
	if r0.Index != 0 || r0.Graph || len(r0.Kernels) != 2 || r0.Kernels[0] != conv || r0.Kernels[1] != ew || r0.Ns != 400500 {
		t.Fatalf("run 0: %+v", r0)
	}
	r1 := p.Runs[1]
	if r1.Index != 1 || len(r1.Kernels) != 2 || r1.Kernels[0].HostNs != 12000 || r1.Kernels[1].HostNs != 18000 ||
		r1.Kernels[0].DurationNs != 39900 || r1.DeviceTimeNs != 39900+4400 {
		t.Fatalf("run 1: %+v", r1)
	}
	// The typical run (same kernel count: median device time) and a chosen one.
	tr, run, err := p.Trace(-1)
	if err != nil || run.Index != 1 || !tr.HasHostTime || len(tr.Kernels) != 2 {
		t.Fatalf("typical run %v %+v: %v", run, tr, err)
	}
	if _, run, err := p.Trace(0); err != nil || run.Index != 0 {
		t.Fatalf("run 0: %v %v", run, err)
	}
	if _, _, err := p.Trace(7); !errors.Is(err, ErrNotFound) {
		t.Errorf("run 7: %v", err)
	}
	// What it writes the replayer reads back unchanged.
	var buf bytes.Buffer
	if err := Write(&buf, tr); err != nil {
		t.Fatal(err)
	}
	back, err := Read(&buf, "x")
	if err != nil || !sameKernels(back, tr) {
		t.Fatalf("round trip: %v", err)
	}
}

// A CUDA graph's kernels share one launch (the graph launch): in the order
// they ran, the first after the host time to the launch, the rest none;
// missing geometry is (1,1,1)×(256,1,1); a profile without run annotations
// is one run.
func TestTorchProfileGraph(t *testing.T) {
	p := readTorch(t, "testdata/torch/graph.json")
	if len(p.Runs) != 1 || !p.Runs[0].Graph || p.Runs[0].Index != 5 {
		t.Fatalf("runs %+v", p.Runs)
	}
	ks := p.Runs[0].Kernels
	if len(ks) != 3 || ks[0].Name != "k1" || ks[1].Name != "k2" || ks[2].Name != "k3" || ks[0].HostNs != 30500 ||
		ks[1].HostNs != 0 || ks[2].HostNs != 0 || ks[2].DurationNs != 500001 || ks[2].Grid != [3]uint32{1, 1, 1} ||
		ks[2].Block != [3]uint32{256, 1, 1} || ks[1].Grid != [3]uint32{2, 1, 1} {
		t.Fatalf("graph kernels %+v", ks)
	}
	noRuns := `{"traceEvents": [
	  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10, "dur": 3, "args": {"correlation": 1}},
	  {"ph": "X", "cat": "kernel", "name": "a", "ts": 15, "dur": 2, "args": {"correlation": 1}},
	  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 30, "dur": 3, "args": {"correlation": 2}},
	  {"ph": "X", "cat": "kernel", "name": "b", "ts": 35, "dur": 2, "args": {"correlation": 2}}]}`
	q, err := ReadTorchProfile(strings.NewReader(noRuns), "x.json")
	if err != nil || len(q.Runs) != 1 || len(q.Runs[0].Kernels) != 2 || q.Runs[0].Kernels[1].HostNs != 20000 {
		t.Fatalf("profile without annotations: %+v, %v", q, err)
	}
}

// Broken input is refused with a parse error naming the file.
func TestTorchProfileErrors(t *testing.T) {
	for name, in := range map[string]string{
		"not json":      `{"traceEvents": [`,
		"no events":     `{"other": 1}`,
		"no kernels":    `{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "x", "ts": 1, "dur": 1}]}`,
		"bad ts":        `{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "x", "ts": "1.5e", "dur": 1}]}`,
		"bad geometry":  `{"traceEvents": [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1, "dur": 1, "args": {"correlation": 1}}, {"ph": "X", "cat": "kernel", "name": "x", "ts": 2, "dur": 1, "args": {"correlation": 1, "grid": [0, 1, 1]}}]}`,
		"bad run label": `{"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "fikit.run x", "ts": 1, "dur": 1}]}`,
		"outside runs":  `{"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "fikit.run 1", "ts": 100, "dur": 1}, {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1, "dur": 1, "args": {"correlation": 1}}, {"ph": "X", "cat": "kernel", "name": "x", "ts": 2, "dur": 1, "args": {"correlation": 1}}]}`,
	} {
		_, err := ReadTorchProfile(strings.NewReader(in), "p.json")
		var pe *ParseError
		if !errors.As(err, &pe) || pe.File != "p.json" {
			t.Errorf("%s: %v, want a ParseError naming p.json", name, err)
		}
	}
}

func TestMicros(t *testing.T) {
	for in, want := range map[string]int64{"1732600000020.250": 1732600000020250, "3": 3000, "4.5004": 4500, "4.5005": 4501,
		"0.001": 1, "-2.5": -2500, "1e3": 1000000} {
		got, err := micros(jsonNumber(in))
		if err != nil || got != want {
			t.Errorf("micros(%s) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"x", "1.2.3", "1.x", "99999999999999999999"} {
		if _, err := micros(jsonNumber(bad)); err == nil {
			t.Errorf("micros(%s) accepted", bad)
		}
	}
}

func jsonNumber(s string) (n json.Number) { return json.Number(s) }
