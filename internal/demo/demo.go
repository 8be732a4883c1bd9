// Package demo embeds tinycode-llama, a 4M-parameter Llama-3-style model trained on
// Python source (bf16, 8 MB; from ../shared/testdata/ref/tinycode-llama, made by
// the reference generator with transformers 5.17), so `run` works offline with no
// -model flag and examples have a real model to run.
package demo

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

//go:embed tinycode-llama
var files embed.FS

// Dir returns a directory holding the demo model, extracting it once into the
// user cache directory (atomically: a temporary directory renamed into place).
func Dir() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(files, "tinycode-llama", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		h.Write([]byte(p))
		h.Write(b)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("demo: %w", err)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "ingot", "demo-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("demo: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".demo-")
	if err != nil {
		return "", fmt.Errorf("demo: %w", err)
	}
	defer os.RemoveAll(tmp)
	entries, err := files.ReadDir("tinycode-llama")
	if err != nil {
		return "", fmt.Errorf("demo: %w", err)
	}
	for _, e := range entries {
		b, err := files.ReadFile("tinycode-llama/" + e.Name())
		if err == nil {
			err = os.WriteFile(filepath.Join(tmp, e.Name()), b, 0o644)
		}
		if err != nil {
			return "", fmt.Errorf("demo: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "config.json")); statErr == nil {
			return dir, nil // another process won the race
		}
		return "", fmt.Errorf("demo: %w", err)
	}
	return dir, nil
}
