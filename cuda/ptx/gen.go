//go:build ignore

// gen.go writes the PTX of ingot's kernels, generated from the MSL sources by
// internal/msl and clang 19: shaders/*.metal into this directory (one .ptx
// per file, and kernels.go, the table of entry points), and
// ../testdata/*.metal (test kernels) into ../testdata.
//
//	go generate ./cuda/ptx
//
// TestPTXCommitted (internal/msl) regenerates both into a temporary directory
// and fails if anything differs from what is committed here.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ingot-llm/ingot/internal/msl"
	"github.com/ingot-llm/ingot/shaders"
)

const generator = "go generate ./cuda/ptx"

func main() {
	var files []msl.File
	for _, f := range shaders.Files() {
		files = append(files, msl.File{Name: f.Name, Source: f.Source})
	}
	if err := gen(".", files, "ptx"); err != nil {
		fail(err)
	}
	test, err := msl.ReadFiles(os.DirFS("../testdata"), "*.metal", "*.h")
	if err != nil {
		fail(err)
	}
	if err := gen("../testdata", test, ""); err != nil {
		fail(err)
	}
}

// gen writes the outputs for files into dir and removes stale .ptx files.
func gen(dir string, files []msl.File, pkg string) error {
	mods, err := msl.GeneratePTX(files, msl.PTXOptions{Generator: generator})
	if err != nil {
		return err
	}
	out, err := msl.PTXOutputs(mods, pkg, generator)
	if err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.ptx"))
	for _, o := range old {
		if _, ok := out[filepath.Base(o)]; !ok {
			if err := os.Remove(o); err != nil {
				return err
			}
		}
	}
	for name, b := range out {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, strings.TrimSpace(err.Error()))
	os.Exit(1)
}
