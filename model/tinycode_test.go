package model

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/kernels/cpu"
)

// tinyRef is the part of tinycode-llama*/ref.json the tests read.
type tinyRef struct {
	Logits struct {
		InputIDs   []int32   `json:"input_ids"`
		LogitsLast []float32 `json:"logits_last"`
	} `json:"logits"`
	Prompts []struct {
		Prompt    string  `json:"prompt"`
		PromptIDs []int32 `json:"prompt_ids"`
		OutputIDs []int32 `json:"output_ids"`
	} `json:"prompts"`
	DequantSamples map[string]struct {
		Row   int       `json:"row"`
		First []float32 `json:"first_128_dequantized"`
		Q     []int     `json:"q_first_128"`
	} `json:"dequant_samples"`
}

// TestTinycode runs the trained model (bf16) and its MLX q4/q8 copies: prompt-0
// logits within 1e-3 and all 8 greedy continuations exactly as transformers.
func TestTinycode(t *testing.T) {
	for _, name := range []string{"tinycode-llama", "tinycode-llama-q4", "tinycode-llama-q8"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(refDir, name)
			b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
			if err != nil {
				t.Fatal(err)
			}
			var ref tinyRef
			if err := json.Unmarshal(b, &ref); err != nil {
				t.Fatal(err)
			}
			m := open(t, dir, Options{Threads: 2}, SessionOptions{})
			for tensor, s := range ref.DequantSamples {
				w := hostWeight(t, m.m, strings.TrimSuffix(tensor, ".weight"))
				row := make([]float32, w.K)
				w.Row(row, s.Row)
				if !slices.Equal(row[:len(s.First)], s.First) {
					t.Errorf("%s row %d dequantized differently:\n got %v\nwant %v", tensor, s.Row, row[:8], s.First[:8])
				}
			}
			logits, err := m.Forward(context.Background(), ref.Logits.InputIDs)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxAbs(logits, ref.Logits.LogitsLast); d > 1e-3 {
				t.Errorf("prompt 0 logits max-abs %g > 1e-3", d)
			}
			for i, p := range ref.Prompts {
				r, err := m.Generate(context.Background(), p.PromptIDs, GenerateOptions{MaxTokens: len(p.OutputIDs)}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if got := tokenIDsOf(r.Tokens); !slices.Equal(got, p.OutputIDs) {
					t.Errorf("prompt %d %q:\n got %v\nwant %v", i, p.Prompt, got, p.OutputIDs)
				}
			}
		})
	}
}

// hostWeight loads one module's weight through the loader and returns its CPU view.
func hostWeight(t *testing.T, m *Model, module string) *cpu.Weight {
	t.Helper()
	st, ok := m.files.tensors[module+".scales"]
	if !ok {
		t.Fatalf("%s: no scales", module)
	}
	c := m.Config
	l := &loader{files: m.files, b: kernels.NewCPU(1), used: map[string]bool{}}
	l.quant, _ = parseQuant(c)
	x, err := l.matrix(module, st.Shape[0], st.Shape[1]*l.quant.GroupSize)
	if err != nil {
		t.Fatal(err)
	}
	return x.Buf.(*cpu.Weight)
}
