// Package deptest checks which packages a package may import (the tailscale
// DepChecker idea), by asking `go list`.
package deptest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// Bad maps a forbidden import path to the reason it is forbidden.
type Bad map[string]string

// targets are the platforms ingot ships for.
var targets = [][]string{{"GOOS=linux", "GOARCH=amd64"}, {"GOOS=darwin", "GOARCH=arm64"}, {"GOOS=linux", "GOARCH=arm64"}}

// pkg is the part of `go list -json` output the checks read.
type pkg struct {
	ImportPath string
	Imports    []string
	CgoFiles   []string
}

// list runs `go list -json=… args` for every target (with extra env) and calls f
// with each package listed.
func list(t *testing.T, extraEnv []string, args []string, f func(env []string, p pkg)) {
	t.Helper()
	for _, env := range targets {
		cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Imports,CgoFiles"}, args...)...)
		cmd.Env = append(cmd.Environ(), append(env, extraEnv...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %v (%v): %v", args, env, err)
		}
		dec := json.NewDecoder(strings.NewReader(string(out)))
		for dec.More() {
			var p pkg
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			f(env, p)
		}
	}
}

// Deps fails t if pattern (e.g. "./tokenize") depends, directly or not, on any
// package in bad, on any target.
func Deps(t *testing.T, pattern string, bad Bad) {
	t.Helper()
	list(t, nil, []string{"-deps", pattern}, func(env []string, p pkg) {
		if why, ok := bad[p.ImportPath]; ok {
			t.Errorf("%s (%v) depends on %s: %s", pattern, env, p.ImportPath, why)
		}
	})
}

// Imports fails t if pattern imports any package in bad directly (in its non-test
// files): "model talks to kernels only" allows kernels itself to use metal.
func Imports(t *testing.T, pattern string, bad Bad) {
	t.Helper()
	list(t, nil, []string{pattern}, func(env []string, p pkg) {
		for _, imp := range p.Imports {
			if why, ok := bad[imp]; ok {
				t.Errorf("%s (%v) imports %s: %s", p.ImportPath, env, imp, why)
			}
		}
	})
}

// NoCgo fails t if any package matching pattern has a file that imports "C" on any
// target. It lists with CGO_ENABLED=1, where such files show up as CgoFiles
// instead of being silently left out of the build.
func NoCgo(t *testing.T, pattern string) {
	t.Helper()
	list(t, []string{"CGO_ENABLED=1"}, []string{pattern}, func(env []string, p pkg) {
		if len(p.CgoFiles) > 0 {
			t.Errorf("%s (%v) imports \"C\" in %v: ingot is cgo-free", p.ImportPath, env, p.CgoFiles)
		}
	})
}
