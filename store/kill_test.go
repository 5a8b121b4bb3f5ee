package store_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fikit/fikit/profiler"
	"github.com/fikit/fikit/store"
	"github.com/fikit/fikit/store/storetest"
)

const killChildEnv = "FIKIT_STORE_KILL_CHILD"

// killProfile is the profile the child writes as its n-th Put: every third
// one overwrites an earlier key, and some are large enough (many kernels)
// to go through Badger's value log rather than its LSM tree.
func killProfile(n int) *profiler.Profile {
	if n%5 == 4 {
		// Over 1 MiB encoded: 1100 kernels with long (templated) names.
		p := storetest.Profile(killKey(n), "GPU", uint64(n), 1100)
		for _, k := range p.Kernels {
			k.Name += strings.Repeat("<float, 4>", 100)
		}
		return p
	}
	return storetest.Profile(killKey(n), "GPU", uint64(n), 1+n%7)
}

func killKey(n int) string {
	if n%3 == 0 {
		n /= 3
	}
	return fmt.Sprintf("task %d", n)
}

// TestKill9Child is the child process of TestKill9: it Puts profiles forever,
// printing "acked N" after each Put of profile N has returned.
func TestKill9Child(t *testing.T) {
	spec := os.Getenv(killChildEnv)
	if spec == "" {
		t.Skip("child of TestKill9")
	}
	dir, startS, _ := strings.Cut(spec, ",")
	start, _ := strconv.Atoi(startS)
	s, err := store.OpenBadger(dir, &store.BadgerOptions{Logger: quietLogger()})
	if err != nil {
		fmt.Printf("open failed: %v\n", err)
		os.Exit(1)
	}
	for n := start; ; n++ {
		if err := s.Put(killProfile(n)); err != nil {
			fmt.Printf("put failed: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("acked %d\n", n) // os.Stdout is unbuffered
	}
}

func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	acked := map[string]int{} // task key → n of its last acknowledged Put
	want := map[int]*profiler.Profile{}
	wantProfile := func(n int) *profiler.Profile {
		if want[n] == nil {
			want[n] = killProfile(n)
		}
		return want[n]
	}
	next := 1
	for round := 0; round < 4; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Child$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d", killChildEnv, dir, next))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill after a random number of acks, at a random moment after it.
		killAt := 3 + r.IntN(20)
		delay := time.Duration(r.IntN(int(5 * time.Millisecond)))
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			nStr, ok := strings.CutPrefix(line, "acked ")
			if !ok {
				if strings.HasPrefix(line, "open failed") || strings.HasPrefix(line, "put failed") {
					t.Fatalf("child: %s", line)
				}
				continue
			}
			n, err := strconv.Atoi(nStr)
			if err != nil {
				t.Fatalf("child printed %q", line)
			}
			acked[killKey(n)] = n
			next = n + 1
			if killAt--; killAt == 0 {
				time.Sleep(delay)
				cmd.Process.Signal(syscall.SIGKILL)
			}
		}
		// Every "acked" line the child wrote before dying has been read.
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("child did not die of SIGKILL: %v", err)
		}
		if len(acked) == 0 {
			t.Fatal("child acknowledged nothing")
		}

		s := openBadger(t, dir)
		inFlight := wantProfile(next)
		for key, n := range acked {
			got, err := s.Get("GPU", key)
			if err != nil {
				t.Fatalf("round %d: acknowledged Put %d (%q) lost: %v", round, n, key, err)
			}
			// The Put in flight at the kill may have overwritten it.
			if !storetest.Equal(got, wantProfile(n)) && !(inFlight.TaskKey == key && storetest.Equal(got, inFlight)) {
				t.Fatalf("round %d: %q is not Put %d: got %d kernels", round, key, n, len(got.Kernels))
			}
		}
		list, err := s.List()
		if err != nil {
			t.Fatal(err)
		}
		// A Put in flight at the kill may or may not have landed.
		if len(list) < len(acked) || len(list) > len(acked)+1 {
			t.Fatalf("round %d: %d profiles stored, %d acknowledged", round, len(list), len(acked))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
