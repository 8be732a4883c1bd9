package model

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
// truncated session restores the newest checkpoint at or before the cut (here
// none: the one at the prompt's end, 20, is past it, so the zero state) and
// runs the kept tokens after it again before the next ones; the logits equal
// a fresh session's on the same tokens, bit for bit. TestCheckpointRewind
// cuts at and between checkpoints.
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

// TestQwen35Checkpoint loads the qwen3_5 reference laid out as the Hub's
// Qwen3_5ForConditionalGeneration: the text settings nested in text_config
// (with a multimodal rope's mrope_section, which text input does not use),
// the weights under model.language_model., vision and multi-token-prediction
// weights beside them. The logits must equal the plain folder's.
func TestQwen35Checkpoint(t *testing.T) {
	src, ref := readRef(t, "qwen3_5")
	text := configMap(t, src, "config.json")
	delete(text, "architectures")
	text["rope_parameters"].(map[string]any)["mrope_section"] = []int{11, 11, 10}
	outer := map[string]any{"architectures": []string{"Qwen3_5ForConditionalGeneration"}, "model_type": "qwen3_5",
		"text_config": text, "vision_config": map[string]any{"depth": 2}, "tie_word_embeddings": text["tie_word_embeddings"]}
	dir := writeCheckpoint(t, src, outer, func(n string) string {
		if rest, ok := strings.CutPrefix(n, "model."); ok {
			return "model.language_model." + rest
		}
		return n
	}, map[string]*stTensor{"model.visual.blocks.0.norm1.weight": tiny(), "mtp.fc.weight": tiny()})
	sameLogits(t, src, dir, ref.InputIDs, func(c *Config) {
		if c.Arch() != "Qwen3_5ForCausalLM" {
			t.Fatalf("architecture %s", c.Arch())
		}
	})
}
