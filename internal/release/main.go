// Command release builds the ingot release binaries from ./cmd/run for every
// target in [targets], with CGO_ENABLED=0, and writes them with a SHA256SUMS
// file to one directory:
//
//	go run ./internal/release [-version v0.3.0] [-o dist]
//
// The builds are reproducible: the same source, Go toolchain and version give
// the same bytes (see [build] for the flags that make them so). docs/release.md
// says which binary links what.
//
// It is a Go program rather than a shell script so that it runs the same on
// Linux, macOS and Windows (no sha256sum/shasum split), and so that its test
// calls the same code it checks.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
)

func main() {
	version := flag.String("version", "", "version stamped into the binaries (default: git describe --tags --always --dirty)")
	out := flag.String("o", "dist", "output directory")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: go run ./internal/release [-version v] [-o dir]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *version, *out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, version, out string) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	if version == "" {
		if version, err = describe(ctx, root); err != nil {
			return err
		}
	}
	if !filepath.IsAbs(out) {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		out = filepath.Join(wd, out)
	}
	if err := build(ctx, root, out, version, targets); err != nil {
		return err
	}
	gov, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return fmt.Errorf("release: go env GOVERSION: %w", err)
	}
	fmt.Printf("%s: %d binaries and SHA256SUMS for %s, built with %s\n", out, len(targets), version, strings.TrimSpace(string(gov)))
	return nil
}

// moduleRoot returns the directory holding ingot's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	b, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("release: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(b))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("release: not inside the ingot module (run from the repository)")
	}
	return filepath.Dir(gomod), nil
}

// describe returns `git describe --tags --always --dirty` for the repository
// at root: the tag, or the tag plus commits and hash, "-dirty" when the work
// tree has changes.
func describe(ctx context.Context, root string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", "describe", "--tags", "--always", "--dirty")
	cmd.Dir = root
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("release: git describe: %w (pass -version)", err)
	}
	return strings.TrimSpace(string(b)), nil
}
