package k8s

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	kruntime "k8s.io/apimachinery/pkg/runtime"
)

// Here is this package's directory (tests/k8s).
func Here() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// ChartDir is the chart.
func ChartDir() string { return filepath.Join(Here(), "..", "..", "deploy", "helm", "fikit") }

// Manifest is one rendered object.
type Manifest struct {
	Source string // template file
	YAML   string
	Object kruntime.Object // strictly decoded (nil: a kind client-go lacks, e.g. cert-manager's)
	Kind   string
	Name   string
}

// Render renders the chart as `helm template` does (release name and
// namespace given, values over values.yaml), with cfg for the chart's
// lookup (nil: none, as helm template without --dry-run=server), and
// decodes every object strictly: an unknown or misspelt field is an error.
func Render(release, namespace string, values map[string]any, cfg *rest.Config) ([]Manifest, error) {
	ch, err := loader.Load(ChartDir())
	if err != nil {
		return nil, fmt.Errorf("chart: %w", err)
	}
	opts := chartutil.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: true, Revision: 1}
	vals, err := chartutil.ToRenderValues(ch, values, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	var files map[string]string
	if cfg != nil {
		files, err = engine.RenderWithClient(ch, vals, cfg)
	} else {
		files, err = engine.Render(ch, vals)
	}
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	strict := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	var out []Manifest
	for _, n := range names {
		if strings.HasSuffix(n, "NOTES.txt") || strings.HasPrefix(filepath.Base(n), "_") {
			continue
		}
		for _, doc := range strings.Split(files[n], "\n---") {
			if strings.TrimSpace(strings.Trim(doc, "-")) == "" || isComment(doc) {
				continue
			}
			var meta struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				return nil, fmt.Errorf("%s: %w\n%s", n, err, doc)
			}
			m := Manifest{Source: n, YAML: doc, Kind: meta.Kind, Name: meta.Metadata.Name}
			if !strings.HasPrefix(strings.TrimSpace(doc), "apiVersion: cert-manager.io/") {
				obj, _, err := strict.Decode([]byte(doc), nil, nil)
				if err != nil {
					return nil, fmt.Errorf("%s: %s %s: %w", n, m.Kind, m.Name, err)
				}
				m.Object = obj
			}
			out = append(out, m)
		}
	}
	return out, nil
}

func isComment(doc string) bool {
	for _, l := range strings.Split(doc, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}
