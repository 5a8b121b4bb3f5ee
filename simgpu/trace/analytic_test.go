package trace

import (
	"testing"
)

func k(d int64) Kernel {
	return Kernel{Name: "k", DurationNs: d, Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{1, 1, 1}}
}

func TestAnalyticJCTHand(t *testing.T) {
	tr := &Trace{Kernels: []Kernel{k(10), k(2), k(50), k(1)}}
	// cpu 5, latency 3: launches at 5, 10, 15, 20.
	// k0: start 8, end 18. k1: start max(13,18)=18, end 20. k2: start max(18,20)=20, end 70.
	// k3: start max(23,70)=70, end 71.
	s := AnalyticJCT(tr, 5, 3)
	want := []Span{{5, 8, 18}, {10, 18, 20}, {15, 20, 70}, {20, 70, 71}}
	for i, sp := range s.Kernels {
		if sp != want[i] {
			t.Errorf("kernel %d: %+v, want %+v", i, sp, want[i])
		}
	}
	if s.JCTNs != 71 || s.BusyNs != 63 || s.IdleNs != 8 {
		t.Errorf("JCT %d busy %d idle %d", s.JCTNs, s.BusyNs, s.IdleNs)
	}
	for i, g := range s.GapsNs {
		if g != 0 {
			t.Errorf("gap %d = %d", i, g)
		}
	}
	// Host-bound: cpu 100, latency 3 → launches every 100, kernels never queue.
	s = AnalyticJCT(tr, 100, 3)
	if s.JCTNs != 400+3+1 || s.GapsNs[0] != 100-10 || s.GapsNs[1] != 100-2 || s.GapsNs[2] != 100-50 {
		t.Errorf("host-bound: JCT %d gaps %v", s.JCTNs, s.GapsNs)
	}
	// The trace's own host times when cpuNs < 0.
	tr = &Trace{HasHostTime: true, Kernels: []Kernel{k(10), k(10)}}
	tr.Kernels[0].HostNs, tr.Kernels[1].HostNs = 7, 30
	s = AnalyticJCT(tr, -1, 0)
	if s.Kernels[0].StartNs != 7 || s.Kernels[1].LaunchNs != 37 || s.JCTNs != 47 || s.GapsNs[0] != 20 {
		t.Errorf("own host times: %+v", s)
	}
	if s = AnalyticJCT(tr, 0, 0); s.JCTNs != 20 {
		t.Errorf("cpu 0 overrides own host times: JCT %d", s.JCTNs)
	}
}

func TestAnalyticJCTProperties(t *testing.T) {
	for _, name := range EmbeddedNames() {
		tr, _ := Embedded(name)
		gpu := tr.GPUTimeNs()
		if s := AnalyticJCT(tr, 0, 0); s.JCTNs != gpu || s.IdleNs != 0 {
			t.Errorf("%s: no host time, no latency: JCT %d, GPU time %d", name, s.JCTNs, gpu)
		}
		const cpu, lat = 8000, 4000
		s := AnalyticJCT(tr, cpu, lat)
		n := int64(len(tr.Kernels))
		last := tr.Kernels[n-1].DurationNs
		if s.JCTNs < gpu+cpu+lat || s.JCTNs < n*cpu+lat+last || s.JCTNs > gpu+n*cpu+lat {
			t.Errorf("%s: JCT %d outside bounds (gpu %d, host %d)", name, s.JCTNs, gpu, n*cpu)
		}
		var gaps int64
		for _, g := range s.GapsNs {
			if g < 0 {
				t.Fatalf("%s: negative gap", name)
			}
			gaps += g
		}
		if gaps+s.Kernels[0].StartNs != s.IdleNs {
			t.Errorf("%s: gaps %d + head %d != idle %d", name, gaps, s.Kernels[0].StartNs, s.IdleNs)
		}
		for i := 1; i < len(s.Kernels); i++ {
			if s.Kernels[i].StartNs < s.Kernels[i-1].EndNs || s.Kernels[i].StartNs < s.Kernels[i].LaunchNs+lat {
				t.Fatalf("%s: kernel %d starts too early", name, i)
			}
		}
	}
}
