package model

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTaps checks ForwardTaps against transformers' residual stream at the
// last prompt position (residual_last: the embedding, then each layer's
// output) and the final norm's output (hidden_last), on a base model, a
// Gemma model (embedding × √D) and the adapted lora-llama3 and lora-qwen2;
// and that every position's states, taken across prefill chunks, end with
// the last position's.
func TestTaps(t *testing.T) {
	for _, name := range []string{"llama3", "gemma2", "lora-llama3", "lora-qwen2"} {
		t.Run(name, func(t *testing.T) {
			dir, ref := readRef(t, name)
			base := dir
			lora := strings.HasPrefix(name, "lora-")
			if lora {
				_, base, _, _ = readLoraRef(t, name)
			}
			s := open(t, base, Options{Threads: 2}, SessionOptions{Context: 64, Batch: 10})
			if lora {
				a, err := s.Model().LoadAdapter(dir)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.SetAdapter(a); err != nil {
					t.Fatal(err)
				}
			}
			n := len(ref.ResidualLast)
			layers := make([]int, n)
			for i := range layers {
				layers[i] = n - 1 - i // any order
			}
			tp, err := s.ForwardTaps(context.Background(), ref.InputIDs, TapOptions{Layers: layers, Norm: true})
			if err != nil {
				t.Fatal(err)
			}
			for j, i := range layers {
				if d := maxAbs(tp.Residual[j], ref.ResidualLast[i]); d > logitTol {
					t.Errorf("residual %d: max-abs %g", i, d)
				}
			}
			if d := maxAbs(tp.Norm, ref.HiddenLast); d > logitTol {
				t.Errorf("final norm: max-abs %g", d)
			}
			if d := maxAbs(tp.Logits, ref.LogitsLast); d > logitTol {
				t.Errorf("logits: max-abs %g", d)
			}

			// Every position, in chunks of 10 rows: the last row is the same.
			s.Truncate(0)
			all, err := s.ForwardTaps(context.Background(), ref.InputIDs, TapOptions{Layers: []int{0, n - 1}, Norm: true, All: true})
			if err != nil {
				t.Fatal(err)
			}
			D, S := len(ref.HiddenLast), len(ref.InputIDs)
			for _, got := range append(all.Residual, all.Norm) {
				if len(got) != S*D {
					t.Fatalf("All: %d values, want %d", len(got), S*D)
				}
			}
			if d := maxAbs(all.Residual[1][(S-1)*D:], ref.ResidualLast[n-1]); d > logitTol {
				t.Errorf("All: last row of the last layer's output: max-abs %g", d)
			}
			if d := maxAbs(all.Norm[(S-1)*D:], ref.HiddenLast); d > logitTol {
				t.Errorf("All: last row of the final norm: max-abs %g", d)
			}
			// Row 11 (the second chunk's second) against a run that ends there.
			s.Truncate(0)
			one, err := s.ForwardTaps(context.Background(), ref.InputIDs[:12], TapOptions{Layers: []int{0, n - 1}, Norm: true})
			if err != nil {
				t.Fatal(err)
			}
			for j, got := range append(one.Residual, one.Norm) {
				want := append(all.Residual, all.Norm)[j][11*D : 12*D]
				if d := maxAbs(got, want); d > 1e-5 {
					t.Errorf("All: row 11 of state %d differs from a run ending there by %g", j, d)
				}
			}
			// Appending to a cache: the taps cover only the new tokens.
			more, err := s.ForwardTaps(context.Background(), ref.InputIDs[12:], TapOptions{Layers: []int{n - 1}, All: true})
			if err != nil {
				t.Fatal(err)
			}
			if d := maxAbs(more.Residual[0], all.Residual[1][12*D:]); d > 1e-5 {
				t.Errorf("All after a cached prefix: max-abs %g", d)
			}
			if _, err := s.ForwardTaps(context.Background(), ref.InputIDs[:1], TapOptions{Layers: []int{n}}); err == nil {
				t.Errorf("layer %d (past the last) accepted", n)
			}
		})
	}
}

// TestTapsStale: on a hybrid model a cut-back linear-attention state makes
// the forward pass run the kept tokens again; the taps still cover only the
// caller's tokens.
func TestTapsStale(t *testing.T) {
	_, ref := readRef(t, "qwen3_5")
	dir, _ := readRef(t, "qwen3_5")
	s := open(t, dir, Options{Threads: 2}, SessionOptions{Context: 64})
	o := TapOptions{Layers: []int{1, 2}, Norm: true, All: true}
	all, err := s.ForwardTaps(context.Background(), ref.InputIDs, o)
	if err != nil {
		t.Fatal(err)
	}
	s.Truncate(10)
	more, err := s.ForwardTaps(context.Background(), ref.InputIDs[10:], o)
	if err != nil {
		t.Fatal(err)
	}
	D := len(ref.HiddenLast)
	for j, got := range append(more.Residual, more.Norm) {
		want := append(all.Residual, all.Norm)[j][10*D:]
		if len(got) != len(want) {
			t.Fatalf("state %d: %d values, want %d", j, len(got), len(want))
		}
		if d := maxAbs(got, want); d > 1e-5 {
			t.Errorf("state %d after a stale cut: max-abs %g", j, d)
		}
	}
	if d := maxAbs(all.Norm[(len(ref.InputIDs)-1)*D:], ref.HiddenLast); d > logitTol {
		t.Errorf("final norm: max-abs %g", d)
	}
}

// TestTapsSublayers checks each layer's mixer and MLP outputs against
// transformers' sublayer_last: attention (Gemma 3: before its
// post-attention norm), linear attention (Qwen3.5), mixtures of experts,
// gpt-oss, and the adapted lora-* models.
func TestTapsSublayers(t *testing.T) {
	for _, name := range []string{"lora-llama3", "lora-qwen2", "gemma3", "gpt_oss", "qwen3_5", "qwen3_5_moe", "qwen3_moe-mixed"} {
		t.Run(name, func(t *testing.T) {
			dir, ref := readRef(t, name)
			var sub struct {
				Sublayers []map[string][]float32 `json:"sublayer_last"`
			}
			b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &sub); err != nil {
				t.Fatal(err)
			}
			base := dir
			if strings.HasPrefix(name, "lora-") {
				_, base, _, _ = readLoraRef(t, name)
			}
			s := open(t, base, Options{Threads: 2}, SessionOptions{Context: 64})
			if base != dir {
				a, err := s.Model().LoadAdapter(dir)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.SetAdapter(a); err != nil {
					t.Fatal(err)
				}
			}
			tp, err := s.ForwardTaps(context.Background(), ref.InputIDs, TapOptions{Sublayers: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(tp.Mixer) != len(sub.Sublayers) {
				t.Fatalf("%d layers tapped, want %d", len(tp.Mixer), len(sub.Sublayers))
			}
			for i, want := range sub.Sublayers {
				mixer := want["self_attn"]
				if mixer == nil {
					mixer = want["linear_attn"]
				}
				if d := maxAbs(tp.Mixer[i], mixer); d > logitTol || mixer == nil {
					t.Errorf("layer %d: mixer output max-abs %g", i, d)
				}
				if d := maxAbs(tp.MLP[i], want["mlp"]); d > logitTol {
					t.Errorf("layer %d: MLP output max-abs %g", i, d)
				}
			}
		})
	}
}
