package replay

import "testing"

func TestParseRunq(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"123 4567 8\n", 4567, true},
		{"0 0 0", 0, true},
		{"123\n", 0, false},
		{"1 x 2", 0, false},
		{"1 -5 2", 0, false},
		{"", 0, false},
	} {
		got, ok := parseRunq([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("parseRunq(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// The replay's own thread has a run-queue clock where the kernel keeps
// schedstat, and it never runs backwards.
func TestRunqClockReads(t *testing.T) {
	c := openRunq()
	if c == nil {
		t.Skip("no /proc/thread-self/schedstat here")
	}
	defer c.close()
	a, ok1 := c.read()
	b, ok2 := c.read()
	if !ok1 || !ok2 || b < a {
		t.Errorf("reads %d (%v) then %d (%v)", a, ok1, b, ok2)
	}
}
