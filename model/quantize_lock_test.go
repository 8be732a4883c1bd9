//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package model

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestQuantizeDirRemovesStaleTemps puts beside the output path the temporary
// directory of a writer that is gone, the one of a writer that is still running,
// and look-alikes QuantizeDir cannot prove its own. Quantizing must remove the first
// and leave every other entry as it was.
func TestQuantizeDirRemovesStaleTemps(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "out")

	// A writer that died: the kernel released its flock, its files stayed.
	dead, err := newQuantTemp(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead.dir, "model.safetensors"), make([]byte, 1<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	dead.lock.Close()
	liveQuantTemps.Delete(dead.dir)

	// A writer still running, as if in another process: only its flock protects it.
	live, err := newQuantTemp(out)
	if err != nil {
		t.Fatal(err)
	}
	defer live.close()
	liveQuantTemps.Delete(live.dir)

	// Unlocked markers under names or in places that are not out's temporaries.
	withMarker := func(dir string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, quantTempMarker), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	withMarker(filepath.Join(parent, ".out.tmp-12x"))                             // not MkdirTemp's digits
	withMarker(filepath.Join(parent, ".out2.tmp-12"))                             // another output's
	withMarker(filepath.Join(parent, "out.tmp-12"))                               // not hidden
	withMarker(filepath.Join(parent, ".out.tmp-"))                                // no digits
	if err := os.Mkdir(filepath.Join(parent, ".out.tmp-13"), 0o755); err != nil { // no marker: someone else's
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	withMarker(elsewhere)
	if err := os.Symlink(elsewhere, filepath.Join(parent, ".out.tmp-15")); err != nil { // a link to a stale-looking directory
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, ".out.tmp-16"), nil, 0o644); err != nil { // a file, not a directory
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "lock")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(parent, ".out.tmp-17"), 0o755); err != nil { // marker is a symlink
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(parent, ".out.tmp-17", quantTempMarker)); err != nil {
		t.Fatal(err)
	}

	before := dirNames(t, parent)
	if err := QuantizeDir(context.Background(), filepath.Join(refDir, "tinycode-llama"), out, 4, 64, nil); err != nil {
		t.Fatal(err)
	}
	want := slices.DeleteFunc(append(before, "out"), func(n string) bool { return n == filepath.Base(dead.dir) })
	slices.Sort(want)
	if got := dirNames(t, parent); !slices.Equal(got, want) {
		t.Errorf("after quantize the output's folder holds\n%v\nwant\n%v", got, want)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, quantTempMarker)); err != nil {
		t.Errorf("the directory behind a symlink was touched: %v", err)
	}
	if _, err := os.Stat(filepath.Join(live.dir, quantTempMarker)); err != nil {
		t.Errorf("the running writer's directory was touched: %v", err)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
