package main

import "testing"

// Bad demo flags are usage errors, found before anything starts.
func TestDemoUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--board", "maybe"},
		{"demo", "--gpu", "--model", "fifo"},
		{"demo", "extra"},
	} {
		_, err := runFikit(t, args...)
		if exitCode(err) != 2 {
			t.Errorf("%q: %v (exit %d), want a usage error (exit 2)", args, err, exitCode(err))
		}
	}
}
