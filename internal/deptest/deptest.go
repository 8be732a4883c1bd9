// Package deptest checks which packages a package may import (the tailscale
// DepChecker idea), by asking `go list -deps`.
package deptest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// Bad maps a forbidden import path to the reason it is forbidden.
type Bad map[string]string

// Deps fails t if pkg (a pattern such as "./tokenize") depends, directly or not, on
// any package in bad, for linux/amd64, darwin/arm64 and linux/arm64.
func Deps(t *testing.T, pkg string, bad Bad) {
	t.Helper()
	check(t, []string{"list", "-deps", "-json=ImportPath", pkg}, pkg, bad)
}

// Imports fails t if pkg imports any package in bad directly (in its non-test
// files): "model talks to kernels only" allows kernels itself to use metal.
func Imports(t *testing.T, pkg string, bad Bad) {
	t.Helper()
	for _, env := range [][]string{nil, {"GOOS=darwin", "GOARCH=arm64"}, {"GOOS=linux", "GOARCH=arm64"}} {
		cmd := exec.Command("go", "list", "-json=ImportPath,Imports", pkg)
		cmd.Env = append(cmd.Environ(), env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s (%v): %v", pkg, env, err)
		}
		dec := json.NewDecoder(strings.NewReader(string(out)))
		for dec.More() {
			var p struct {
				ImportPath string
				Imports    []string
			}
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			for _, imp := range p.Imports {
				if why, ok := bad[imp]; ok {
					t.Errorf("%s (%v) imports %s: %s", p.ImportPath, env, imp, why)
				}
			}
		}
	}
}

func check(t *testing.T, args []string, pkg string, bad Bad) {
	t.Helper()
	for _, env := range [][]string{nil, {"GOOS=darwin", "GOARCH=arm64"}, {"GOOS=linux", "GOARCH=arm64"}} {
		cmd := exec.Command("go", args...)
		cmd.Env = append(cmd.Environ(), env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s (%v): %v", pkg, env, err)
		}
		dec := json.NewDecoder(strings.NewReader(string(out)))
		for dec.More() {
			var p struct{ ImportPath string }
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			if why, ok := bad[p.ImportPath]; ok {
				t.Errorf("%s (%v) depends on %s: %s", pkg, env, p.ImportPath, why)
			}
		}
	}
}

// NoCgo fails t if any package matching pattern has a file that imports "C" on
// linux/amd64, linux/arm64 or darwin/arm64. It lists with CGO_ENABLED=1, where such
// files show up as CgoFiles instead of being silently left out of the build.
func NoCgo(t *testing.T, pattern string) {
	t.Helper()
	for _, env := range [][]string{{"GOOS=linux", "GOARCH=amd64"}, {"GOOS=darwin", "GOARCH=arm64"}, {"GOOS=linux", "GOARCH=arm64"}} {
		cmd := exec.Command("go", "list", "-json=ImportPath,CgoFiles", pattern)
		cmd.Env = append(cmd.Environ(), append(env, "CGO_ENABLED=1")...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s (%v): %v", pattern, env, err)
		}
		dec := json.NewDecoder(strings.NewReader(string(out)))
		for dec.More() {
			var p struct {
				ImportPath string
				CgoFiles   []string
			}
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			if len(p.CgoFiles) > 0 {
				t.Errorf("%s (%v) imports \"C\" in %v: ingot is cgo-free", p.ImportPath, env, p.CgoFiles)
			}
		}
	}
}
