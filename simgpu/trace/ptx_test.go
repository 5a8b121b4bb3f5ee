package trace

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fikit/fikit/kernelid"
)

var (
	entryRE = regexp.MustCompile(`(?m)^\.visible \.entry ([^(\s]+)\(\n\t\.param \.u64 (\S+)\n\)\n\{\n`)
	// A PTX identifier: a letter followed by letters, digits, '_' or '$', or
	// '_', '$' or '%' followed by at least one of them.
	identRE = regexp.MustCompile(`^(?:[a-zA-Z][a-zA-Z0-9_$]*|[_$%][a-zA-Z0-9_$]+)$`)
	regRE   = regexp.MustCompile(`%(p|rd|r)(\d+)`)
	declRE  = regexp.MustCompile(`\.reg \.\w+\s+%(p|rd|r)<(\d+)>;`)
)

func TestPTX(t *testing.T) {
	for _, name := range append(EmbeddedNames(), "gen") {
		var tr *Trace
		if name == "gen" {
			tr, _ = Gen(3, GenOptions{LayerKernels: 12})
		} else {
			tr, _ = Embedded(name)
		}
		ptx, entries := PTX(tr)
		checkPTX(t, name, ptx, entries, tr.Names())
	}
}

func TestPTXOddNames(t *testing.T) {
	names := []string{"a", "_", "void f<int, 2>(x*)", "ünï", "$x", "%r1", "a b", "a_b", "a b"}
	ptx, entries := PTXForNames(names)
	checkPTX(t, "odd", ptx, entries, names[:len(names)-1])
}

func checkPTX(t *testing.T, what, ptx string, entries map[string]string, names []string) {
	t.Helper()
	for _, l := range []string{".version 7.0\n", ".target sm_70\n", ".address_size 64\n"} {
		if !strings.Contains(ptx, "\n"+l) {
			t.Errorf("%s: no %q line", what, l)
		}
	}
	for i := 0; i < len(ptx); i++ {
		if ptx[i] >= 0x80 || ptx[i] < 0x20 && ptx[i] != '\n' && ptx[i] != '\t' {
			t.Fatalf("%s: byte 0x%02x at %d: PTX must be plain ASCII", what, ptx[i], i)
		}
	}
	m := entryRE.FindAllStringSubmatch(ptx, -1)
	if len(m) != len(names) || len(entries) != len(names) {
		t.Fatalf("%s: %d entries, %d in map, %d distinct names", what, len(m), len(entries), len(names))
	}
	if got := strings.Count(ptx, ".entry "); got != len(names) {
		t.Errorf("%s: %d .entry directives", what, got)
	}
	for i, e := range m {
		entry, param := e[1], e[2]
		if !identRE.MatchString(entry) || !identRE.MatchString(param) {
			t.Errorf("%s: invalid identifier %q or %q", what, entry, param)
		}
		if !strings.HasSuffix(param, "_ns") {
			t.Errorf("%s: parameter %q does not end in _ns (simgpu's spin-kernel convention)", what, param)
		}
		if orig, ok := kernelid.ReplayOriginalName(entry); !ok || orig != names[i] || entries[entry] != names[i] {
			t.Errorf("%s: entry %d %q is not for %q (map %q)", what, i, entry, names[i], entries[entry])
		}
		if !strings.Contains(ptx, "// "+strconv.QuoteToASCII(names[i])+"\n.visible .entry "+entry+"(") {
			t.Errorf("%s: no name comment before %s", what, entry)
		}
	}
	// Every entry body: balanced braces, the spin on %globaltimer against the
	// parameter, and only declared registers.
	bodies := strings.Split(ptx, ".visible .entry ")[1:]
	for _, b := range bodies {
		if strings.Count(b, "{") != 1 || strings.Count(b, "}") != 1 {
			t.Fatalf("%s: unbalanced body", what)
		}
		for _, want := range []string{"ld.param.u64 \t%rd1, [duration_ns];", "mov.u64 \t%rd2, %globaltimer;",
			"setp.lt.u64 \t%p2, %rd4, %rd3;", "@%p2 bra \t$L__spin;", "mov.u32 \t%r4, %ctaid.x;", "ret;"} {
			if !strings.Contains(b, want) {
				t.Fatalf("%s: body lacks %q", what, want)
			}
		}
		decl := map[string]int{}
		for _, d := range declRE.FindAllStringSubmatch(b, -1) {
			decl[d[1]], _ = strconv.Atoi(d[2])
		}
		for _, r := range regRE.FindAllStringSubmatch(b, -1) {
			n, _ := strconv.Atoi(r[2])
			if n >= decl[r[1]] {
				t.Fatalf("%s: register %%%s%d beyond declaration %%%s<%d>", what, r[1], n, r[1], decl[r[1]])
			}
		}
	}
}
