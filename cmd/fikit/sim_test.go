package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A --service value carries its own commas: they must not split it.
func TestSimServiceFlagKeepsCommas(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"fikit", "sim",
		"--service", "trace=h100/resnet50_4_fwd,prio=0,cpu=12us,every=5ms,runs=5",
		"--service", "trace=h100/mobilenet_4_fwd,prio=5,runs=3"}, &out)
	if err != nil {
		t.Fatalf("fikit sim: %v\n%s", err, out.String())
	}
	for _, want := range []string{"h100/resnet50_4_fwd", "h100/mobilenet_4_fwd", "fikit"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
