package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// A target is one release binary.
type target struct {
	goos, goarch string
	tags         string // build tags; "nogpu" leaves out purego, giving a static Linux binary
	name         string // file name in the output directory
}

// targets are the binaries a release ships. The default Linux builds link
// dynamically (purego's loader, for the metal-emu interpreter); the -static
// ones are CPU only and run in an empty container.
var targets = []target{
	{"darwin", "arm64", "", "ingot-darwin-arm64"},
	{"linux", "amd64", "", "ingot-linux-amd64"},
	{"linux", "amd64", "nogpu", "ingot-linux-amd64-static"},
	{"linux", "arm64", "", "ingot-linux-arm64"},
	{"linux", "arm64", "nogpu", "ingot-linux-arm64-static"},
	{"windows", "amd64", "", "ingot-windows-amd64.exe"},
}

// build compiles ./cmd/run of the module at root for each target into out,
// stamping version, and writes out/SHA256SUMS (sha256sum's format, sorted by
// name).
//
// The bytes depend only on the source, the Go toolchain and version:
// -trimpath drops file system paths, -buildvcs=false the VCS revision and
// dirty flag, -buildid= the build ID; GOFLAGS is cleared and GOAMD64/GOARM64
// pinned to their baselines so the caller's environment does not leak in
// (kernels/cpu picks its assembly at run time).
func build(ctx context.Context, root, out, version string, ts []target) error {
	if version == "" || strings.ContainsAny(version, " \t\n'\"") {
		return fmt.Errorf("release: version %q must be non-empty, without spaces or quotes", version)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	ts = slices.Clone(ts)
	slices.SortFunc(ts, func(a, b target) int { return strings.Compare(a.name, b.name) })
	var sums strings.Builder
	for _, t := range ts {
		path := filepath.Join(out, t.name)
		cmd := exec.CommandContext(ctx, "go", "build",
			"-trimpath", "-buildvcs=false", "-tags="+t.tags,
			"-ldflags=-buildid= -X main.version="+version,
			"-o", path, "./cmd/run")
		cmd.Dir = root
		cmd.Env = append(os.Environ(),
			"CGO_ENABLED=0", "GOOS="+t.goos, "GOARCH="+t.goarch,
			"GOFLAGS=", "GOAMD64=v1", "GOARM64=v8.0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("release: build %s: %w\n%s", t.name, err, b)
		}
		sum, err := sha256File(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(&sums, "%x  %s\n", sum, t.name)
	}
	if err := os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(sums.String()), 0o644); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

func sha256File(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("release: %s: %w", path, err)
	}
	return h.Sum(nil), nil
}
