package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
)

// Segment is one executed piece of a kernel, as simgpu's timeline records it.
type Segment struct {
	PID     int       `json:"pid"`
	Ctx     int       `json:"ctx"`
	Stream  int64     `json:"stream"`
	Seq     uint64    `json:"seq"`
	Name    string    `json:"name"`
	Grid    [3]uint32 `json:"grid"`
	Block   [3]uint32 `json:"block"`
	StartNs int64     `json:"start_ns"`
	EndNs   int64     `json:"end_ns"`
	Seg     int       `json:"seg"`
	Last    bool      `json:"last"`
}

// ReadTimeline reads a simgpu timeline, sorted by start time.
func ReadTimeline(path string) ([]Segment, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	defer f.Close()
	var segs []Segment
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		var s Segment
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return nil, fmt.Errorf("timeline %s:%d: %w", path, line, err)
		}
		segs = append(segs, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].StartNs < segs[j].StartNs })
	return segs, nil
}

// BusyNs sums the device time of the segments of pid within [from, to]
// (pid < 0: every process).
func BusyNs(segs []Segment, pid int, from, to int64) int64 {
	var busy int64
	for _, s := range segs {
		if pid >= 0 && s.PID != pid {
			continue
		}
		a, b := max(s.StartNs, from), min(s.EndNs, to)
		if b > a {
			busy += b - a
		}
	}
	return busy
}
