package kernels_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ingot-llm/ingot/model"
)

// TestMetalGGUFKQuantNV runs the Q4_K_M oracle GGUF (q4_k with q6_k on
// attn_v, ffn_down of the last layer and the output) with the NVIDIA-shaped
// kernels chosen: no _nv kernel claims the GGUF block types, so every
// projection runs matvec/matmul_<t>_f32 of shaders/kquant.metal (MatMuls and
// MatMulGLU a MatMul each). Logits at every position (decoding through the
// cache) within 1e-4 of the exact float64 reference, as
// model.TestGGUFReference holds them, and the greedy chain equal.
func TestMetalGGUFKQuantNV(t *testing.T) {
	dir := "../../shared/testdata/gguf/llama-Q4_K_M"
	b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
	if err != nil {
		t.Fatalf("GGUF oracle data missing: %v", err)
	}
	var ref struct {
		InputIDs []int32 `json:"input_ids"`
		Exact    struct {
			LogitsShape  []int   `json:"logits_shape"`
			GreedyNoStop []int32 `json:"greedy_nostop"`
		} `json:"exact"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	lb, err := os.ReadFile(filepath.Join(dir, "logits.f32"))
	if err != nil {
		t.Fatal(err)
	}
	S, V := ref.Exact.LogitsShape[0], ref.Exact.LogitsShape[1]
	if len(lb) != 4*S*V || S != len(ref.InputIDs) {
		t.Fatalf("logits.f32: %d bytes for shape %v and %d ids", len(lb), ref.Exact.LogitsShape, len(ref.InputIDs))
	}
	be, rec := metalEmuNV(t)
	s := loadCtx(t, filepath.Join(dir, "model.gguf"), be, 64)
	var worst float64
	for i, tok := range ref.InputIDs {
		got, err := s.Forward(context.Background(), []int32{tok})
		if err != nil {
			t.Fatal(err)
		}
		for v, g := range got {
			want := math.Float32frombits(binary.LittleEndian.Uint32(lb[4*(i*V+v):]))
			worst = max(worst, math.Abs(float64(g)-float64(want)))
		}
	}
	if worst > 1e-4 {
		t.Errorf("logits max-abs %g over %d positions (bound 1e-4)", worst, S)
	}
	s.Truncate(0)
	r, err := s.Generate(context.Background(), ref.InputIDs, model.GenerateOptions{MaxTokens: len(ref.Exact.GreedyNoStop), IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for _, tk := range r.Tokens {
		ids = append(ids, tk.ID)
	}
	if !slices.Equal(ids, ref.Exact.GreedyNoStop) {
		t.Errorf("greedy:\n got %v\nwant %v", ids, ref.Exact.GreedyNoStop)
	}
	for _, name := range []string{"matvec_q4_k_f32", "matvec_q6_k_f32", "matmul_q4_k_f32", "matmul_q6_k_f32", "embed_q4_k_f32"} {
		if !rec.asked(name) {
			t.Errorf("%s never ran", name)
		}
	}
	t.Logf("max-abs %.2g over %d positions; greedy %d tokens equal", worst, S, len(ids))
}
