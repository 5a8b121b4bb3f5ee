package trace

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// orionFS holds copies of ../shared/traces/orion-{h100,v100} (eth-easl/orion,
// MIT license; see orion/README.md and orion/LICENSE) and the frozen
// scenario traces derived from them (scenario/, ScenarioTraces).
//
//go:embed orion/h100/*.csv orion/v100/*.csv scenario/*.csv
var orionFS embed.FS

// scenarioPrefix names the embedded scenario traces: "scenario/graph_resnet50_b1".
const scenarioPrefix = "scenario/"

// Read reads a trace in either format, telling them apart by the first line:
// "# fikit-trace …" is fikit's format, anything else Orion's CSV. file names the
// input in errors.
func Read(r io.Reader, file string) (*Trace, error) {
	br := bufio.NewReader(r)
	bom := stripBOM(br)
	if head, _ := br.Peek(len(FikitMagic)); bytes.Equal(head, []byte(FikitMagic)) {
		return readFikit(br, file, bom)
	}
	return readOrion(br, file, bom)
}

// ReadFile reads the trace file at path in either format.
func ReadFile(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open trace: %w", err)
	}
	defer f.Close()
	return Read(f, path)
}

// EmbeddedNames lists the embedded traces, sorted: the Orion traces
// "h100/bert_2_fwd", …, "v100/transformer_xl_4_fwd", then the scenario
// traces "scenario/bert_base_b16", ….
func EmbeddedNames() []string {
	var names []string
	for _, dir := range []string{"orion", "scenario"} {
		_ = fs.WalkDir(orionFS, dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".csv") {
				names = append(names, strings.TrimSuffix(strings.TrimPrefix(p, "orion/"), ".csv"))
			}
			return nil
		})
	}
	sort.SliceStable(names, func(i, j int) bool {
		si, sj := strings.HasPrefix(names[i], scenarioPrefix), strings.HasPrefix(names[j], scenarioPrefix)
		if si != sj {
			return sj
		}
		return names[i] < names[j]
	})
	return names
}

// embeddedPath maps a name such as "h100/resnet50_4_fwd",
// "orion-h100/resnet50_4_fwd.csv", "orion/h100/resnet50_4_fwd" or
// "scenario/bert_base_b16" to its path in orionFS.
func embeddedPath(name string) string {
	n := path.Clean(strings.TrimSpace(name))
	if strings.HasPrefix(n, scenarioPrefix) {
		return strings.TrimSuffix(n, ".csv") + ".csv"
	}
	n = strings.TrimPrefix(n, "orion/")
	n = strings.TrimPrefix(n, "orion-")
	n = strings.TrimSuffix(n, ".csv")
	return "orion/" + n + ".csv"
}

// Embedded returns the embedded trace of that name (see EmbeddedNames).
func Embedded(name string) (*Trace, error) {
	p := embeddedPath(name)
	b, err := orionFS.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%w: no embedded trace %q (have %s)", ErrNotFound, name,
			strings.Join(EmbeddedNames(), ", "))
	}
	return Read(bytes.NewReader(b), p)
}

// Load reads a trace file, or, when no file of that name exists, the
// embedded trace of that name.
func Load(nameOrPath string) (*Trace, error) {
	t, err := ReadFile(nameOrPath)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return t, err
	}
	if _, eerr := orionFS.Open(embeddedPath(nameOrPath)); eerr == nil {
		return Embedded(nameOrPath)
	}
	return nil, fmt.Errorf("%w: %q is neither a file nor an embedded trace (%s): %w", ErrNotFound,
		nameOrPath, strings.Join(EmbeddedNames(), ", "), err)
}
