package model

import (
	"bytes"
	"github.com/ingot-llm/ingot/internal/mmap"
	"os"
	"path/filepath"
	"testing"
)

// TestRelease releases a range of a mapped weight file, as the loader does once
// a backend has copied a tensor, and reads it again: the bytes are still there
// (the pages map back from the file), and a slice outside every file is left
// alone.
func TestRelease(t *testing.T) {
	want := make([]byte, 5*os.Getpagesize()+123)
	for i := range want {
		want[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "w.bin")
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := mmap.Map(path)
	if err != nil {
		t.Fatal(err)
	}
	w := &weightFiles{maps: [][]byte{m}}
	defer w.Close()
	w.release(m[100 : len(m)-50])
	heap := bytes.Clone(want)
	w.release(heap)
	if !bytes.Equal(m, want) || !bytes.Equal(heap, want) {
		t.Fatal("released bytes changed")
	}
}
