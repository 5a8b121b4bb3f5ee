// Command circles finds files of the hook that depend on each other in a
// circle: strongly connected components of the graph whose nodes are the
// library's C files and whose edges go from a file to each file defining a
// symbol it uses. The uses are read from the compiled objects (nm: a
// file's undefined symbols, and which object defines each), in two views:
// calls (functions only) and calls with data (functions and variables); a
// third graph is the #include graph of the sources. `make test-hook` runs
// it and fails on any circle.
//
//	go run ./hookclient/tools/circles [-max N] [-src DIR] OBJECT.o…
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

type graph map[string]map[string][]string // from → to → the symbols (or headers) behind the edge

func (g graph) add(from, to, why string) {
	if from == to {
		return
	}
	if g[from] == nil {
		g[from] = map[string][]string{}
	}
	g[from][to] = append(g[from][to], why)
}

// sccs returns the strongly connected components of g over nodes (Tarjan).
func (g graph) sccs(nodes []string) [][]string {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string
	n := 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = n, n
		n++
		stack = append(stack, v)
		onStack[v] = true
		var next []string
		for w := range g[v] {
			next = append(next, w)
		}
		sort.Strings(next)
		for _, w := range next {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var c []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				c = append(c, w)
				if w == v {
					break
				}
			}
			sort.Strings(c)
			out = append(out, c)
		}
	}
	for _, v := range nodes {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	return out
}

// objectGraphs reads the objects' symbols: calls only, and calls with data.
func objectGraphs(objs []string) (calls, all graph, nodes []string, err error) {
	type sym struct{ file, kind string }
	defined := map[string]sym{}
	undefined := map[string][]string{}
	for _, o := range objs {
		file := strings.TrimSuffix(filepath.Base(o), ".o") + ".c"
		nodes = append(nodes, file)
		out, err := exec.Command("nm", o).Output()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("nm %s: %w", o, err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 2 && f[0] == "U":
				undefined[file] = append(undefined[file], f[1])
			case len(f) == 3 && f[1] != "U" && strings.ToUpper(f[1]) == f[1]: // global
				defined[f[2]] = sym{file, f[1]}
			}
		}
	}
	calls, all = graph{}, graph{}
	for file, syms := range undefined {
		for _, s := range syms {
			d, ok := defined[s]
			if !ok {
				continue // libc, the driver
			}
			all.add(file, d.file, s)
			if d.kind == "T" {
				calls.add(file, d.file, s)
			}
		}
	}
	return calls, all, nodes, nil
}

var includeRE = regexp.MustCompile(`^\s*#\s*include\s+"([^"]+)"`)

// includeGraph is the #include "…" graph of the files in dir.
func includeGraph(dir string) (graph, []string, error) {
	g := graph{}
	var nodes []string
	for _, pat := range []string{"*.c", "*.h", "*.def"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, path := range m {
			name := filepath.Base(path)
			nodes = append(nodes, name)
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, nil, err
			}
			for _, line := range strings.Split(string(b), "\n") {
				if m := includeRE.FindStringSubmatch(line); m != nil {
					g.add(name, filepath.Base(m[1]), m[1])
				}
			}
		}
	}
	return g, nodes, nil
}

func report(name string, g graph, nodes []string, max int) (bad int) {
	circles := 0
	for _, c := range g.sccs(nodes) {
		if len(c) < 2 {
			continue
		}
		circles++
		fmt.Printf("%s: a circle of %d files: %s\n", name, len(c), strings.Join(c, " "))
		for _, a := range c {
			for _, b := range c {
				if why, ok := g[a][b]; ok {
					fmt.Printf("\t%s → %s: %s\n", a, b, strings.Join(why, " "))
				}
			}
		}
		if len(c) >= max {
			bad++
		}
	}
	if circles == 0 {
		fmt.Printf("%s: no circles among %d files\n", name, len(nodes))
	}
	return bad
}

func main() {
	max := flag.Int("max", 2, "fail on a circle of this many files or more")
	src := flag.String("src", "hookclient", "the sources, for the #include graph")
	flag.Parse()
	calls, all, nodes, err := objectGraphs(flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "circles:", err)
		os.Exit(2)
	}
	inc, incNodes, err := includeGraph(*src)
	if err != nil {
		fmt.Fprintln(os.Stderr, "circles:", err)
		os.Exit(2)
	}
	bad := report("calls", calls, nodes, *max) + report("calls and data", all, nodes, *max) +
		report("includes", inc, incNodes, *max)
	if bad > 0 {
		os.Exit(1)
	}
}
