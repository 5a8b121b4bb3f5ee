// Command wiregen writes what the hook (C) and the docs need of udp's message
// table and of the board's layout, so that each is written once, in Go:
//
//	hookclient/wire_gen.h          the message types, value enums, message
//	                               structs and the table the C encoder and
//	                               decoder are driven by
//	hookclient/board_gen.h         the board's structs, checked offsets
//	udp/board/testdata/layout.txt  the board's layout for the C test
//	docs/design.md                 the message tables (between markers)
//
// Run by `go generate ./udp`; its test fails while any of them is stale.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("root", "", "the repository root (default: the directory of go.mod above the working directory)")
	flag.Parse()
	if *root == "" {
		r, err := findRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, "wiregen:", err)
			os.Exit(1)
		}
		*root = r
	}
	files, err := Generate(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wiregen:", err)
		os.Exit(1)
	}
	for _, f := range files {
		path := filepath.Join(*root, f.Path)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, f.Data) {
			continue
		}
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "wiregen:", err)
			os.Exit(1)
		}
		fmt.Println("wiregen: wrote", f.Path)
	}
}

func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
