package decisions

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/fikit/fikit/simgpu/timeline"
)

// Parse reads decision records from rd (blank lines are skipped) and
// returns them sorted by T (stable: records of one instant keep their
// order); name labels errors. Unknown kinds and fields are kept or
// ignored (a newer daemon's additions); a line that is not a JSON object,
// or lacks t_ns or kind, is an error.
func Parse(rd io.Reader, name string) ([]Record, error) {
	recs, err := timeline.ParseLines(rd, name, maxLine, ErrFormat, parseLine)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].T < recs[j].T })
	return recs, nil
}

// ParseLive is Parse for a record the daemon may still be writing: an
// unterminated last line that does not parse (the daemon had written part
// of it) is skipped and described by torn; any other bad line is an error.
func ParseLive(rd io.Reader, name string) (recs []Record, torn *timeline.Torn, err error) {
	recs, torn, err = timeline.ParseLinesLive(rd, name, maxLine, ErrFormat, parseLine)
	if err != nil {
		return nil, nil, err
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].T < recs[j].T })
	return recs, torn, nil
}

// maxLine bounds one record's line.
const maxLine = 1 << 20

func parseLine(line []byte) (Record, error) {
	var r Record
	var required struct {
		T    *int64  `json:"t_ns"`
		Kind *string `json:"kind"`
	}
	if err := json.Unmarshal(line, &required); err != nil {
		return r, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	if required.T == nil || required.Kind == nil || *required.Kind == "" {
		return r, fmt.Errorf("%w: t_ns and kind are required", ErrFormat)
	}
	if err := json.Unmarshal(line, &r); err != nil {
		if !errors.Is(err, ErrFormat) {
			err = fmt.Errorf("%w: %w", ErrFormat, err)
		}
		return r, err
	}
	return r, nil
}

// Read reads a decision record file (Parse).
func Read(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("decisions: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// ReadLive reads a decision record file that may still be being written
// (ParseLive).
func ReadLive(path string) ([]Record, *timeline.Torn, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("decisions: %w", err)
	}
	defer f.Close()
	return ParseLive(f, path)
}
