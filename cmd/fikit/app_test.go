package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A misspelled flag is one error line naming the flag as typed and the
// command's help, status 2; the help itself is not printed (it was, ~70
// lines, between two copies of the error).
func TestMisspelledFlagIsOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "unknown flag --bogus (see 'fikit --help')"},
		{[]string{"serve", "--data-dirr", "x"}, "serve: unknown flag --data-dirr (see 'fikit serve --help')"},
		{[]string{"status", "-x"}, "status: unknown flag -x (see 'fikit status --help')"},
		{[]string{"profile", "ls", "--bogus"}, "profile ls: unknown flag --bogus (see 'fikit profile ls --help')"},
		{[]string{"profile", "show", "KEY", "--bogus"}, "profile show: unknown flag --bogus (see 'fikit profile show --help')"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"fikit"}, tc.args...), &out)
		if err == nil {
			t.Errorf("%q: no error", tc.args)
			continue
		}
		if err.Error() != tc.want || exitCode(err) != 2 {
			t.Errorf("%q: error %q (status %d), want %q (status 2)", tc.args, err, exitCode(err), tc.want)
		}
		if out.Len() != 0 {
			t.Errorf("%q: printed besides the error:\n%s", tc.args, out.String())
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: the error is more than one line: %q", tc.args, err)
		}
	}
}
