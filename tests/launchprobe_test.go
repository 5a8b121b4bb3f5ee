package tests

// `fikit launches` (eBPF uprobes on simgpu's libcuda.so.1) as the hook's
// independent witness: through every launch path, the driver must receive
// each launch exactly once, on the entry point the application called,
// whether or not the hook is in between.

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fikit/fikit/udp"
)

// launchesJSON is `fikit launches --json`.
type launchesJSON struct {
	Library string   `json:"library"`
	Symbols []string `json:"symbols"`
	Counts  []struct {
		PID    int    `json:"pid"`
		Comm   string `json:"comm"`
		Symbol string `json:"symbol"`
		Calls  uint64 `json:"calls"`
	} `json:"counts"`
}

// requireProbes skips unless this process may attach uprobes (root, and not
// a container that denies bpf()).
func requireProbes(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("launch probes need root")
	}
}

func TestLaunchProbeWitnessesHook(t *testing.T) {
	requireProbes(t)
	bins := requireBins(t, "fikit", "hook-launcher", "libfikit_hook.so", "simgpu/libcuda.so.1")
	fikit, launcher, hook, libcuda := bins[0], bins[1], bins[2], bins[3]
	const runs = 3
	// The entry point each path reaches (graphs launch through cuGraphLaunch,
	// which is not a kernel launch entry point).
	paths := map[string]string{
		"direct": "cuLaunchKernel", "dlsym": "cuLaunchKernel", "gpa1": "cuLaunchKernel",
		"gpa2": "cuLaunchKernel", "gpa2-ptds": "cuLaunchKernel_ptsz", "ptsz": "cuLaunchKernel_ptsz",
		"ex": "cuLaunchKernelEx", "coop": "cuLaunchCooperativeKernel", "library": "cuLaunchKernel",
		"enumerate": "cuLaunchKernel", "threads": "cuLaunchKernel", "fork": "cuLaunchKernel",
	}
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			sched := newFakeSched(t, schedPolicy{Role: udp.RoleHolder, Phase: udp.PhaseSharing})
			counted := func(hooked bool) (map[string]uint64, map[string]int) {
				shm := uniqueShm(t)
				child := []string{launcher, kernelsPTX(t), path, fmt.Sprint(runs)}
				if hooked {
					child = append([]string{"/usr/bin/env", "LD_PRELOAD=" + hook, "FIKIT_SCHEDULER=" + sched.Addr(),
						"FIKIT_PRIORITY=0", "FIKIT_CONNECT_TIMEOUT_MS=3000"}, child...)
				}
				r := runCmd(t, hookTimeout, simgpuEnv(t, shm), fikit,
					append([]string{"launches", "--lib", libcuda, "--json", "--"}, child...)...)
				if r.ExitCode != 0 && strings.Contains(r.Stderr, "operation not permitted") {
					t.Skipf("uprobes denied here: %s", r.Stderr)
				}
				if r.ExitCode != 0 {
					t.Fatalf("fikit launches: %v", r)
				}
				out, js, ok := strings.Cut("\n"+r.Stdout, "\n{")
				if !ok {
					t.Fatalf("no JSON in output: %v", r)
				}
				var got launchesJSON
				if err := json.Unmarshal([]byte("{"+js), &got); err != nil {
					t.Fatalf("fikit launches --json: %v\n%s", err, js)
				}
				if want, _ := filepath.EvalSymlinks(libcuda); got.Library != libcuda && got.Library != want {
					t.Errorf("probed %s, want %s", got.Library, libcuda)
				}
				// Each process's calls, by entry point; the launcher's kernel units, by pid.
				// The probes see every process using the library (parallel
				// subtests too): keep the launcher's.
				calls, units := map[string]uint64{}, map[string]int{}
				for _, u := range parseLauncher(t, strings.TrimSpace(out)) {
					units[fmt.Sprint(u.Pid)]++ // no graph paths here: every unit is one launch
				}
				for _, c := range got.Counts {
					if _, ok := units[fmt.Sprint(c.PID)]; ok {
						calls[fmt.Sprintf("%d %s", c.PID, c.Symbol)] += c.Calls
					}
				}
				return calls, units
			}
			for _, hooked := range []bool{false, true} {
				calls, units := counted(hooked)
				want := map[string]uint64{}
				for pid, n := range units {
					want[pid+" "+paths[path]] = uint64(n)
				}
				if !maps.Equal(calls, want) {
					t.Errorf("hooked %v: the driver received %v, the launcher made %v", hooked, calls, want)
				}
			}
		})
	}
}
