package daemon

import "testing"

// A hook's reply socket names its process (fk-PID-TAG-N): the prefix the
// daemon removes a killed process's sockets by, and nothing else.
func TestReplyPrefix(t *testing.T) {
	for name, want := range map[string]string{
		"fk-4061-a998ed90-1": "fk-4061-a998ed90-",
		"fk-7-0000000f-12":   "fk-7-0000000f-",
		"fk-4061-1-a998ed90": "", // an older hook's name: its own path only
		"fk-7-0000000f-":     "",
		"fk-x-0000000f-1":    "",
		"forger":             "",
		"fk-7-0000000f-1-2":  "",
		"fk-7-000000zz-1":    "",
		"fk-7-00000000f-1":   "",
	} {
		got, ok := replyPrefix(name)
		if got != want || ok != (want != "") {
			t.Errorf("replyPrefix(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}
