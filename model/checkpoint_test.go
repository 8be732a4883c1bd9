package model

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// configMap reads a reference folder's config file as a JSON object.
func configMap(t *testing.T, dir, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// writeCheckpoint writes a model folder holding cfg as config.json and src's
// weights under the names rename gives them, with extra tensors beside them
// (weights of other modalities a loader must leave alone); it returns it.
func writeCheckpoint(t *testing.T, src string, cfg any, rename func(string) string, extra map[string]*stTensor) string {
	t.Helper()
	dir := t.TempDir()
	cb, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cb, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := openWeights(src)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ts := map[string]*stTensor{}
	for name, st := range extra {
		ts[name] = st
	}
	for name, st := range w.tensors {
		ts[rename(name)] = st
	}
	writeSafetensors(t, filepath.Join(dir, "model.safetensors"), ts)
	return dir
}

// sameLogits fails t unless the folders src and dir give bit-identical
// logits for ids; check looks at each model's config first.
func sameLogits(t *testing.T, src, dir string, ids []int32, check func(*Config)) {
	t.Helper()
	run := func(dir string) []float32 {
		s := open(t, dir, Options{Threads: 1}, SessionOptions{})
		check(s.m.Config)
		l, err := s.Forward(context.Background(), ids)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Clone(l)
	}
	if a, b := run(src), run(dir); !slices.Equal(a, b) {
		t.Errorf("the checkpoint layout changes the logits by up to %g", maxAbs(a, b))
	}
}

// tiny is a two-float tensor standing in for weights a loader ignores.
func tiny() *stTensor { return &stTensor{DType: "F32", Shape: []int{2}, Data: make([]byte, 8)} }
