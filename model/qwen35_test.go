package model

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestQwen35PrefillDecode runs the qwen3_5 and qwen3_5_moe references as
// transformers did for
// logits_prefill_decode.f32: a 12-token prefill, then 12 decode steps carrying
// the linear-attention layers' convolution and recurrent state; every step's
// logits within 1e-4.
func TestQwen35PrefillDecode(t *testing.T) {
	for _, name := range []string{"qwen3_5", "qwen3_5_moe"} {
		t.Run(name, func(t *testing.T) { testPrefillDecode(t, name) })
	}
}

func testPrefillDecode(t *testing.T, name string) {
	dir, ref := readRef(t, name)
	b, err := os.ReadFile(filepath.Join(dir, "logits_prefill_decode.f32"))
	if err != nil {
		t.Fatal(err)
	}
	V := len(ref.LogitsLast)
	row := func(i int) []float32 {
		r := make([]float32, V)
		for v := range r {
			r[v] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*(i*V+v):]))
		}
		return r
	}
	s := open(t, dir, Options{Threads: 2}, SessionOptions{})
	got, err := s.Forward(context.Background(), ref.InputIDs[:12])
	if err != nil {
		t.Fatal(err)
	}
	worst := maxAbs(got, row(11))
	for i := 12; i < 24; i++ {
		got, err := s.Forward(context.Background(), ref.InputIDs[i:i+1])
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, maxAbs(got, row(i)))
	}
	if worst > logitTol {
		t.Errorf("prefill then decode: logits max-abs %g > %g", worst, logitTol)
	}
	t.Logf("max-abs %.2g", worst)
}

// TestQwen35Rewind: a linear-attention state cannot be cut back, so a
// truncated session runs its kept tokens again before the next ones; the
// logits equal a fresh session's on the same tokens, bit for bit.
func TestQwen35Rewind(t *testing.T) {
	dir, ref := readRef(t, "qwen3_5")
	ids := ref.InputIDs
	s := open(t, dir, Options{Threads: 1}, SessionOptions{})
	if _, err := s.Forward(context.Background(), ids[:20]); err != nil {
		t.Fatal(err)
	}
	s.Truncate(10)
	if n := len(s.Cached()); n != 10 {
		t.Fatalf("%d tokens cached after Truncate(10)", n)
	}
	got, err := s.Forward(context.Background(), ids[10:15])
	if err != nil {
		t.Fatal(err)
	}
	got = slices.Clone(got)
	fresh := open(t, dir, Options{Threads: 1}, SessionOptions{})
	want, err := fresh.Forward(context.Background(), ids[:15])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("after a rewind the logits differ by up to %g", maxAbs(got, want))
	}
	if n := len(s.Cached()); n != 15 {
		t.Errorf("%d tokens cached, want 15", n)
	}
}
