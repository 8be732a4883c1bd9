package ingot_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ingot-llm/ingot"
)

// TestAdapter: one model serves its base and a LoRA adapter from two
// sessions at once, with no second copy of the weights; a session switches
// between them; Options.Fuse merges the adapter at load.
func TestAdapter(t *testing.T) {
	dir := filepath.Join(refDir, "lora-llama3")
	var ref struct {
		BaseDir      string  `json:"base_dir"`
		InputIDs     []int32 `json:"input_ids"`
		GreedyNoStop []int32 `json:"greedy_nostop"`
		Effect       struct {
			BaseGreedy []int32 `json:"base_greedy_nostop"`
		} `json:"adapter_effect"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, ref.BaseDir)
	ctx := context.Background()
	m, err := ingot.Load(ctx, base, ingot.Options{Backend: "cpu", Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	weights := m.Raw().WeightBytes()
	a, err := m.LoadAdapter(filepath.Join(dir, "mlx"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Raw().WeightBytes() != weights || a.Bytes() <= 0 || a.Bytes() > weights/4 {
		t.Errorf("weights %d → %d bytes, adapter %d bytes", weights, m.Raw().WeightBytes(), a.Bytes())
	}
	greedy := func(s *ingot.Session) []int32 {
		var ids []int32
		for tok, err := range s.GenerateIDs(ctx, ref.InputIDs, ingot.Sampling{MaxTokens: 16, IgnoreEOS: true}) {
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, tok.ID)
		}
		return ids
	}
	plain, err := m.NewSession(ingot.SessionOptions{Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	adapted, err := m.NewSession(ingot.SessionOptions{Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	if err := adapted.SetAdapter(a); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got := greedy(adapted); !slices.Equal(got, ref.GreedyNoStop) {
			t.Errorf("adapted: %v, want %v", got, ref.GreedyNoStop)
		}
		if got := greedy(plain); !slices.Equal(got, ref.Effect.BaseGreedy) {
			t.Errorf("base: %v, want %v", got, ref.Effect.BaseGreedy)
		}
		adapted, plain = plain, adapted // and switch both sessions
		if err := adapted.SetAdapter(a); err != nil {
			t.Fatal(err)
		}
		if err := plain.SetAdapter(nil); err != nil {
			t.Fatal(err)
		}
	}
	f, err := ingot.Load(ctx, base, ingot.Options{Backend: "cpu", Threads: 1, Fuse: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := f.NewSession(ingot.SessionOptions{Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	if got := greedy(s); !slices.Equal(got, ref.GreedyNoStop) {
		t.Errorf("fused: %v, want %v", got, ref.GreedyNoStop)
	}
	if err := s.SetAdapter(a); err == nil {
		t.Errorf("SetAdapter took another model's adapter")
	}
}
