package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/store"
)

// Profile builds a complete profile (T = 10 committed runs) whose contents
// are determined by seed. kernels is the number of distinct kernels (at
// least 1).
func Profile(taskKey, gpu string, seed uint64, kernels int) *profiler.Profile {
	r := rand.New(rand.NewPCG(seed, 0x570e))
	b, err := profiler.NewBuilder(taskKey, gpu, profiler.MinProfileRuns)
	if err != nil {
		panic(err)
	}
	kernels = max(kernels, 1)
	ids := make([]uint64, kernels)
	for i := range ids {
		ids[i] = r.Uint64()
		b.AddKernelInfo(profiler.KernelInfo{
			ID: ids[i], Name: fmt.Sprintf("_Z%dk%dPf", len(fmt.Sprint(i))+1, i),
			Grid: [3]uint32{uint32(1 + r.IntN(4096)), 1, 1}, Block: [3]uint32{uint32(32 << r.IntN(5)), 1, 1},
		})
	}
	for run := uint32(1); !b.Complete(); run++ {
		n := kernels + r.IntN(kernels+1)
		recs := make([]profiler.Record, n)
		for i := range recs {
			recs[i] = profiler.Record{KernelID: ids[i%kernels], DurationNs: 1000 + r.Uint64N(1e6), GapNs: r.Uint64N(1e5)}
		}
		recs[n-1].Flags = profiler.FlagGapSpansRunEnd
		b.AddRecords(run, recs)
		b.EndRun(run, uint32(n), 1e6+r.Uint64N(1e7), true)
	}
	return b.Profile()
}

// Equal reports whether two profiles encode to the same bytes.
func Equal(a, b *profiler.Profile) bool {
	ab, err1 := a.MarshalBinary()
	bb, err2 := b.MarshalBinary()
	return err1 == nil && err2 == nil && bytes.Equal(ab, bb)
}

// Run runs the suite; open returns a new, empty store for each test and
// closes it through t.Cleanup if it needs to (Run closes it too).
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"GetMissing", testGetMissing},
		{"PutGet", testPutGet},
		{"Overwrite", testOverwrite},
		{"ModelsAndList", testModelsAndList},
		{"Delete", testDelete},
		{"OddKeys", testOddKeys},
		{"InvalidKeys", testInvalidKeys},
		{"InvalidProfile", testInvalidProfile},
		{"Independent", testIndependent},
		{"Concurrent", testConcurrent},
		{"Closed", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			tc.fn(t, s)
		})
	}
}

func mustPut(t *testing.T, s store.Store, p *profiler.Profile) {
	t.Helper()
	if err := s.Put(p); err != nil {
		t.Fatalf("Put(%q, %q): %v", p.GPU, p.TaskKey, err)
	}
}

func mustGet(t *testing.T, s store.Store, model, key string, want *profiler.Profile) {
	t.Helper()
	got, err := s.Get(model, key)
	if err != nil {
		t.Fatalf("Get(%q, %q): %v", model, key, err)
	}
	if !Equal(got, want) {
		t.Fatalf("Get(%q, %q) returned another profile", model, key)
	}
}

func testGetMissing(t *testing.T, s store.Store) {
	if _, err := s.Get("GPU", "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of a missing profile: %v", err)
	}
	list, err := s.List()
	if err != nil || list == nil || len(list) != 0 {
		t.Fatalf("List of an empty store: %v, %v", list, err)
	}
}

func testPutGet(t *testing.T, s store.Store) {
	p := Profile("python serve.py", "NVIDIA H100 80GB HBM3", 1, 5)
	mustPut(t, s, p)
	mustGet(t, s, p.GPU, p.TaskKey, p)
	got, _ := s.Get(p.GPU, p.TaskKey)
	if got.Phase != profiler.PhaseSharing || got.Runs != 10 || len(got.Kernels) != 5 {
		t.Fatalf("stored profile: phase %v runs %d kernels %d", got.Phase, got.Runs, len(got.Kernels))
	}
	for id, k := range p.Kernels {
		g, ok := got.Kernel(id)
		if !ok || g.Duration.P90 != k.Duration.P90 || g.Gap.Mean != k.Gap.Mean || g.Name != k.Name {
			t.Fatalf("kernel %x differs after a round trip", id)
		}
	}
}

func testOverwrite(t *testing.T, s store.Store) {
	p1 := Profile("task", "GPU", 1, 3)
	p2 := Profile("task", "GPU", 2, 7)
	mustPut(t, s, p1)
	mustPut(t, s, p2)
	mustGet(t, s, "GPU", "task", p2)
	list, _ := s.List()
	if len(list) != 1 || list[0].Kernels != 7 {
		t.Fatalf("after overwrite: %+v", list)
	}
}

func testModelsAndList(t *testing.T, s store.Store) {
	a := Profile("b-task", "NVIDIA A100", 1, 2)
	h := Profile("b-task", "NVIDIA H100", 2, 3)
	o := Profile("a-task", "NVIDIA H100", 3, 4)
	profiling := func() *profiler.Profile {
		b, _ := profiler.NewBuilder("c-task", "NVIDIA H100", 10)
		b.AddRecords(1, []profiler.Record{{KernelID: 1, DurationNs: 5, Flags: profiler.FlagGapSpansRunEnd}})
		b.EndRun(1, 1, 10, true)
		return b.Profile()
	}()
	for _, p := range []*profiler.Profile{h, profiling, a, o} {
		mustPut(t, s, p)
	}
	mustGet(t, s, "NVIDIA A100", "b-task", a)
	mustGet(t, s, "NVIDIA H100", "b-task", h)
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Summary{
		{TaskKey: "a-task", GPU: "NVIDIA H100", Phase: profiler.PhaseSharing, Runs: 10, Kernels: 4},
		{TaskKey: "b-task", GPU: "NVIDIA A100", Phase: profiler.PhaseSharing, Runs: 10, Kernels: 2},
		{TaskKey: "b-task", GPU: "NVIDIA H100", Phase: profiler.PhaseSharing, Runs: 10, Kernels: 3},
		{TaskKey: "c-task", GPU: "NVIDIA H100", Phase: profiler.PhaseProfiling, Runs: 1, Kernels: 1},
	}
	if fmt.Sprint(list) != fmt.Sprint(want) {
		t.Fatalf("List:\n got %+v\nwant %+v", list, want)
	}
}

func testDelete(t *testing.T, s store.Store) {
	a := Profile("task", "A", 1, 2)
	b := Profile("task", "B", 2, 2)
	mustPut(t, s, a)
	mustPut(t, s, b)
	if err := s.Delete("A", "task"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("A", "task"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	mustGet(t, s, "B", "task", b)
	if err := s.Delete("A", "task"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second Delete: %v", err)
	}
	if list, _ := s.List(); len(list) != 1 || list[0].GPU != "B" {
		t.Fatalf("List after Delete: %+v", list)
	}
}

func testOddKeys(t *testing.T, s store.Store) {
	keys := []string{
		"python3 -m vllm.entrypoints.api_server --model /models/llama-7b",
		"a/b", "/", "..", ".", "a//b", "%2F", "100%", "?x=1#y", "tab\tnew\nline", "ünïcödé ✓",
		"\x01\x7f", strings.Repeat("k", 4000), " leading and trailing ",
	}
	models := []string{"NVIDIA GeForce RTX 4090", "m/../x", "%", "."}
	for i, k := range keys {
		p := Profile(k, models[i%len(models)], uint64(i), 1)
		mustPut(t, s, p)
		mustGet(t, s, p.GPU, k, p)
	}
	list, _ := s.List()
	if len(list) != len(keys) {
		t.Fatalf("List has %d profiles, want %d", len(list), len(keys))
	}
	for i, k := range keys {
		if err := s.Delete(models[i%len(models)], k); err != nil {
			t.Fatalf("Delete(%q): %v", k, err)
		}
	}
}

func testInvalidKeys(t *testing.T, s store.Store) {
	for _, k := range [][2]string{{"", "task"}, {"GPU", ""}, {"G\x00PU", "task"}} {
		if _, err := s.Get(k[0], k[1]); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("Get(%q, %q): %v", k[0], k[1], err)
		}
		if err := s.Delete(k[0], k[1]); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("Delete(%q, %q): %v", k[0], k[1], err)
		}
	}
	for _, model := range []string{"", "G\x00PU"} {
		if err := s.Put(Profile("task", model, 1, 1)); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("Put on model %q: %v", model, err)
		}
	}
}

func testInvalidProfile(t *testing.T, s store.Store) {
	p := Profile("task", "GPU", 1, 2)
	p.Runs = 3 // disagrees with the run-time count and the phase
	if err := s.Put(p); !errors.Is(err, profiler.ErrInvalid) {
		t.Fatalf("Put of an invalid profile: %v", err)
	}
	if _, err := s.Get("GPU", "task"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("invalid profile stored: %v", err)
	}
}

func testIndependent(t *testing.T, s store.Store) {
	p := Profile("task", "GPU", 1, 2)
	want := p.Clone()
	mustPut(t, s, p)
	p.TaskKey = "changed"
	for _, k := range p.Kernels {
		k.Duration.Mean = -1
	}
	mustGet(t, s, "GPU", "task", want)
	got, _ := s.Get("GPU", "task")
	for _, k := range got.Kernels {
		k.Name = "changed"
	}
	mustGet(t, s, "GPU", "task", want)
}

func testConcurrent(t *testing.T, s store.Store) {
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				p := Profile(fmt.Sprintf("task-%d-%d", w, i), "GPU", uint64(w*100+i), 2)
				if err := s.Put(p); err != nil {
					errs <- err
					return
				}
				got, err := s.Get("GPU", p.TaskKey)
				if err != nil || !Equal(got, p) {
					errs <- fmt.Errorf("get %s: %v", p.TaskKey, err)
					return
				}
				if _, err := s.List(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if list, _ := s.List(); len(list) != 32 {
		t.Fatalf("%d profiles after concurrent puts", len(list))
	}
}

func testClosed(t *testing.T, s store.Store) {
	mustPut(t, s, Profile("task", "GPU", 1, 1))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("GPU", "task"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if err := s.Put(Profile("task", "GPU", 1, 1)); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Put after Close: %v", err)
	}
	if _, err := s.List(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("List after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
