package harness

import (
	"fmt"
	"os"
)

// RecordTo records the daemon's decisions (`fikit serve --record`, read by
// `fikit trace --decisions`) to path, created or truncated, ending any
// recording in progress; "" only ends it. The daemon closes the file when
// the recording ends or it stops.
func (d *Daemon) RecordTo(path string) error {
	if path == "" {
		return d.srv.Record(nil)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("harness: decision record: %w", err)
	}
	return d.srv.Record(f)
}
