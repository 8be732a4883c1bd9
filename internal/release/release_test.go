package main

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// testVersion is stamped into the test builds; -version must print it back.
const testVersion = "v0.0.0-releasetest"

// The first release build, shared by the tests (TestMain removes it). The
// builds reuse the Go build cache: a warm run takes seconds, a cold one
// (every target's standard library under -trimpath) about two minutes on two
// cores.
var (
	distOnce sync.Once
	distDir  string
	distErr  error
	tmpRoot  string
)

func TestMain(m *testing.M) {
	var err error
	if tmpRoot, err = os.MkdirTemp("", "releasetest"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(tmpRoot)
	os.Exit(code)
}

// release builds every target into tmpRoot/name.
func release(name string) (string, error) {
	ctx := context.Background()
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(tmpRoot, name)
	return dir, build(ctx, root, dir, testVersion, targets)
}

// dist returns the shared first build.
func dist(t *testing.T) string {
	t.Helper()
	distOnce.Do(func() { distDir, distErr = release("a") })
	if distErr != nil {
		t.Fatal(distErr)
	}
	return distDir
}

// inCI reports whether the test runs in CI, where a missing tool is a failure.
func inCI() bool { return os.Getenv("CI") == "true" }

// missing skips t outside CI and fails it in CI.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if inCI() {
		t.Fatalf("%s (CI=true: required)", msg)
	}
	t.Skip(msg)
}

// TestReproducible builds the release twice, into different directories, and
// wants the same files with the same bytes, and SHA256SUMS to match them.
func TestReproducible(t *testing.T) {
	a := dist(t)
	b, err := release("b")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"SHA256SUMS"}
	for _, tg := range targets {
		names = append(names, tg.name)
	}
	for _, name := range names {
		x, err := os.ReadFile(filepath.Join(a, name))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two builds of the same source", name)
		}
	}
	sums, err := os.ReadFile(filepath.Join(a, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		sum, err := sha256File(filepath.Join(a, tg.name))
		if err != nil {
			t.Fatal(err)
		}
		if line := fmt.Sprintf("%x  %s\n", sum, tg.name); !bytes.Contains(sums, []byte(line)) {
			t.Errorf("SHA256SUMS lacks %q:\n%s", line, sums)
		}
	}
}

// TestLinking reads the Linux binaries' ELF headers: the default builds have
// a program interpreter (purego needs the dynamic loader), the nogpu builds
// have neither an interpreter nor a needed library, so they run in an empty
// container.
func TestLinking(t *testing.T) {
	dir := dist(t)
	for _, tg := range targets {
		if tg.goos != "linux" {
			continue
		}
		t.Run(tg.name, func(t *testing.T) {
			f, err := elf.Open(filepath.Join(dir, tg.name))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			interp := ""
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					b, err := io.ReadAll(p.Open())
					if err != nil {
						t.Fatal(err)
					}
					interp = strings.TrimRight(string(b), "\x00")
				}
			}
			libs, err := f.ImportedLibraries()
			if err != nil {
				t.Fatal(err)
			}
			static := strings.HasSuffix(tg.name, "-static")
			switch {
			case static && (interp != "" || len(libs) > 0):
				t.Errorf("static build is dynamic: interpreter %q, needs %v", interp, libs)
			case !static && interp == "":
				t.Errorf("default build has no PT_INTERP: it is static now, so docs/release.md and the README are wrong")
			}
		})
	}
}

// TestNoGPUHasNoPurego: the static build is static because -tags nogpu leaves
// purego out of cmd/run.
func TestNoGPUHasNoPurego(t *testing.T) {
	root, err := moduleRoot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		cmd := exec.Command("go", "list", "-deps", "-tags", "nogpu", "./cmd/run")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list (linux/%s): %v", arch, err)
		}
		for _, p := range strings.Fields(string(out)) {
			if strings.HasPrefix(p, "github.com/ebitengine/purego") {
				t.Errorf("linux/%s -tags nogpu: cmd/run depends on %s", arch, p)
			}
		}
	}
}

// qemu names the user-mode emulator for each Linux architecture we ship.
var qemu = map[string]string{"amd64": "qemu-x86_64-static", "arm64": "qemu-aarch64-static"}

// TestVersion runs `ingot -version` for every Linux binary this machine can
// run: natively for its own architecture, under qemu user emulation for the
// other. A dynamic build for the other architecture needs that
// architecture's loader and libc, so only its static build runs there.
func TestVersion(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("the Linux binaries run only on linux, not %s", runtime.GOOS)
	}
	dir := dist(t)
	for _, tg := range targets {
		if tg.goos != "linux" {
			continue
		}
		t.Run(tg.name, func(t *testing.T) {
			args := []string{filepath.Join(dir, tg.name), "-version"}
			if tg.goarch != runtime.GOARCH {
				if !strings.HasSuffix(tg.name, "-static") {
					t.Skipf("a dynamic linux/%s binary needs that architecture's loader; its static build runs instead", tg.goarch)
				}
				q, err := exec.LookPath(qemu[tg.goarch])
				if err != nil {
					missing(t, "%s not found (apt-get install qemu-user-static)", qemu[tg.goarch])
				}
				args = append([]string{q}, args...)
			}
			out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out)
			}
			if got, want := string(out), "ingot "+testVersion+"\n"; got != want {
				t.Errorf("-version printed %q, want %q", got, want)
			}
		})
	}
}

// TestStaticSaysNoMetalEmu: asked for the interpreter, a nogpu build says it
// was left out, not that the platform cannot run it.
func TestStaticSaysNoMetalEmu(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("the Linux binaries run only on linux, not %s", runtime.GOOS)
	}
	bin := filepath.Join(dist(t), "ingot-linux-"+runtime.GOARCH+"-static")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no static build for linux/%s", runtime.GOARCH)
	}
	out, err := exec.Command(bin, "selftest", "-backend", "metal-emu").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not in this build (built with -tags nogpu") {
		t.Errorf("selftest -backend metal-emu: err %v, output:\n%s", err, out)
	}
}
