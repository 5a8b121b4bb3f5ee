package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

func TestCheckListen(t *testing.T) {
	for _, c := range []struct {
		addr            string
		insecure        bool
		remote, refused bool
		keyed           bool
	}{
		{"127.0.0.1:7070", false, false, false, false},
		{"127.0.0.2:7070", false, false, false, false},
		{"[::1]:7070", false, false, false, false},
		{"localhost:7070", false, false, false, false},
		{"0.0.0.0:7070", false, true, true, false},
		{":7070", false, true, true, false},
		{"[::]:7070", false, true, true, false},
		{"192.0.2.1:7070", false, true, true, false},
		{"0.0.0.0:7070", true, true, false, false},
		{"192.0.2.1:7070", true, true, false, false},
		{"127.0.0.1", false, false, true, false}, // no port
		{"0.0.0.0:7070", false, true, false, true},
		{"192.0.2.1:7070", false, true, false, true},
		{"127.0.0.1:7070", false, false, false, true},
		{"127.0.0.1", false, false, true, true},
	} {
		remote, err := checkListen(c.addr, c.keyed, c.insecure)
		if (err != nil) != c.refused || (err == nil && remote != c.remote) {
			t.Errorf("checkListen(%q, insecure %v) = %v, %v; want remote %v, refused %v", c.addr, c.insecure, remote, err, c.remote, c.refused)
		}
	}
}

// fikit serve refuses an address other hosts can reach before it touches
// the data directory, with status 2 and a line saying what to do.
func TestServeRefusesRemoteListen(t *testing.T) {
	dir := t.TempDir() + "/data"
	var out bytes.Buffer
	err := run(context.Background(), []string{"fikit", "serve", "--data-dir", dir, "--listen", "0.0.0.0:0"}, &out)
	if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("serve --listen 0.0.0.0:0 = %v (status %d), want status 2 naming --insecure", err, exitCode(err))
	}
	if _, statErr := os.Stat(dir); !os.IsNotExist(statErr) {
		t.Errorf("the refused serve created its data directory: %v", statErr)
	}
}
