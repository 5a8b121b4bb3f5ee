package kernelid

import (
	"hash/fnv"
	"strings"
	"testing"
)

func TestTaskKey(t *testing.T) {
	for _, v := range []struct {
		argv []string
		want string
	}{
		{nil, ""},
		{[]string{"python3"}, "python3"},
		{[]string{"/usr/bin/python3", "serve.py", "--port", "8000"}, "python3 serve.py --port 8000"},
		{[]string{"/usr/bin/"}, ""},
		{[]string{"a", "b c", "", "d"}, "a b c  d"},
	} {
		if got := TaskKey(v.argv); got != v.want {
			t.Errorf("TaskKey(%q) = %q, want %q", v.argv, got, v.want)
		}
	}
}

func TestTruncateKeyPinned(t *testing.T) {
	// Computed outside Go from the rule in docs/design.md.
	key := strings.Repeat("x", 250)
	want := strings.Repeat("x", 183) + "~3b5ad17216035bad"
	if got := TruncateKey(key); got != want {
		t.Errorf("TruncateKey(250 × x) = %q, want %q", got, want)
	}
}

func TestTruncateKey(t *testing.T) {
	for n := 195; n <= 205; n++ {
		key := strings.Repeat("k", n)
		got := TruncateKey(key)
		if n <= MaxTaskKeyLen {
			if got != key {
				t.Errorf("TruncateKey of %d bytes changed it", n)
			}
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(key))
		if len(got) != MaxTaskKeyLen || got[:183] != key[:183] || got[183] != '~' || got[184:] != FormatID(h.Sum64()) {
			t.Errorf("TruncateKey of %d bytes = %q", n, got)
		}
	}
	if ResolveTaskKey("", []string{"/bin/x", "y"}) != "x y" {
		t.Error("empty override was not ignored")
	}
	long := strings.Repeat("o", 300)
	if got := ResolveTaskKey(long, []string{"x"}); got != TruncateKey(long) {
		t.Errorf("override not truncated: %q", got)
	}
	if got := ResolveTaskKey("my service", []string{"x"}); got != "my service" {
		t.Errorf("override = %q", got)
	}
}
