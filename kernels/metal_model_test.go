package kernels_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl/msltest"
	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/kernels/cpu"
	"github.com/ingot-llm/ingot/model"
)

// refDir is the transformers reference data beside the checkout.
const refDir = "../../shared/testdata/ref"

// metalEmu opens the metal-emu backend (the shader kernels on the MSL
// interpreter), closed when the test ends; with INGOT_TEST_BACKEND=cuda (or
// metal) that GPU instead.
func metalEmu(t *testing.T) kernels.Backend {
	t.Helper()
	name := os.Getenv("INGOT_TEST_BACKEND")
	if name == "" || name == "metal-emu" {
		name = "metal-emu"
		msltest.Require(t)
	}
	b, err := kernels.Open(name, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// load loads dir onto b (nil: a CPU backend) and opens a session of 64
// tokens; both are closed when the test ends.
// interpreter opens the metal-emu backend whatever INGOT_TEST_BACKEND says:
// for tests of the interpreter's own behaviour (no-copy mapping).
func interpreter(t *testing.T) kernels.Backend {
	t.Helper()
	msltest.Require(t)
	b, err := kernels.Open("metal-emu", 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func load(t *testing.T, dir string, b kernels.Backend) *model.Session {
	t.Helper()
	return loadOpts(t, dir, model.Options{Backend: b}, model.SessionOptions{Context: 64})
}

func loadCtx(t *testing.T, dir string, b kernels.Backend, ctxLen int) *model.Session {
	t.Helper()
	return loadOpts(t, dir, model.Options{Backend: b}, model.SessionOptions{Context: ctxLen})
}

func loadOpts(t *testing.T, dir string, o model.Options, so model.SessionOptions) *model.Session {
	t.Helper()
	o.Threads = 2
	m, err := model.Load(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	s, err := m.NewSession(so)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func nmse(got, want []float32) (e, maxAbs float64) {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		num, den = num+d*d, den+float64(want[i])*float64(want[i])
		maxAbs = max(maxAbs, math.Abs(d))
		if math.IsNaN(d) {
			maxAbs = math.Inf(1)
		}
	}
	return num / den, maxAbs
}

// TestMetalModelParity runs random-weight models of each family switch through
// the metal-emu backend and the CPU backend: a 7-token prefill (tiled matmul
// and attention) then decode steps through the KV cache (mat-vec, flash
// decoding), comparing every step's logits; some also with an f16 cache.
func TestMetalModelParity(t *testing.T) {
	type tc struct {
		name string
		kv   kernels.DType
	}
	var cases []tc
	for _, name := range []string{"llama3", "qwen2", "qwen3", "gemma2-swa", "phi3", "mistral", "gemma", "llama3-bf16"} {
		cases = append(cases, tc{name, kernels.DTypeF32})
	}
	cases = append(cases, tc{"llama3", kernels.DTypeF16}, tc{"gemma2-swa", kernels.DTypeF16})
	for _, c := range cases {
		name := c.name
		t.Run(name+"/"+c.kv.String(), func(t *testing.T) {
			dir := filepath.Join(refDir, name)
			var ref struct {
				InputIDs []int32 `json:"input_ids"`
			}
			b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
			if err != nil {
				t.Fatalf("reference data missing (../shared must sit beside the checkout): %v", err)
			}
			if err := json.Unmarshal(b, &ref); err != nil {
				t.Fatal(err)
			}
			gm := loadOpts(t, dir, model.Options{Backend: metalEmu(t)}, model.SessionOptions{Context: 64, KV: c.kv})
			cm := loadOpts(t, dir, model.Options{}, model.SessionOptions{Context: 64, KV: c.kv})
			ids := ref.InputIDs
			for len(ids) < 12 {
				ids = append(ids, ids...)
			}
			steps := [][]int32{ids[:7]}
			for _, id := range ids[7:12] {
				steps = append(steps, []int32{id})
			}
			var worst float64
			for i, s := range steps {
				got, err := gm.Forward(context.Background(), s)
				if err != nil {
					t.Fatal(err)
				}
				want, err := cm.Forward(context.Background(), s)
				if err != nil {
					t.Fatal(err)
				}
				e, ma := nmse(got, want)
				worst = max(worst, e)
				if e > 1e-6 {
					t.Errorf("step %d (L=%d): logits NMSE %.3g > 1e-6 (max-abs %.3g)", i, len(s), e, ma)
				}
			}
			t.Logf("worst logits NMSE %.2g over %d steps", worst, len(steps))
		})
	}
}

// tinyRef is the part of tinycode-llama*/ref.json the test reads.
type tinyRef struct {
	Logits struct {
		InputIDs   []int32   `json:"input_ids"`
		LogitsLast []float32 `json:"logits_last"`
	} `json:"logits"`
	Prompts []struct {
		PromptIDs []int32 `json:"prompt_ids"`
		OutputIDs []int32 `json:"output_ids"`
	} `json:"prompts"`
}

// TestMetalTinycode runs the trained tiny model (bf16) and its MLX q4/q8
// copies on metal-emu: prompt logits within 1e-3 of transformers and greedy
// continuations equal to transformers' ids.
func TestMetalTinycode(t *testing.T) {
	prompts, tokens := 2, 16
	if testing.Short() {
		prompts, tokens = 1, 8
	}
	for _, name := range []string{"tinycode-llama", "tinycode-llama-q4", "tinycode-llama-q8"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(refDir, name)
			b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
			if err != nil {
				t.Fatalf("reference data missing: %v", err)
			}
			var ref tinyRef
			if err := json.Unmarshal(b, &ref); err != nil {
				t.Fatal(err)
			}
			be := metalEmu(t)
			m := load(t, dir, be)
			logits, err := m.Forward(context.Background(), ref.Logits.InputIDs)
			if err != nil {
				t.Fatal(err)
			}
			_, ma := nmse(logits, ref.Logits.LogitsLast)
			if ma > 1e-3 {
				t.Errorf("prompt logits max-abs %.3g > 1e-3 against transformers", ma)
			}
			t.Logf("prompt logits max-abs %.2g against transformers", ma)
			mb := m.Backend().(*kernels.Metal) // the session's stream
			for i, p := range ref.Prompts[:prompts] {
				m.Truncate(0)
				mb.ResetStats()
				r, err := m.Generate(context.Background(), p.PromptIDs, model.GenerateOptions{MaxTokens: tokens}, nil)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]int32, len(r.Tokens))
				for j, tk := range r.Tokens {
					got[j] = tk.ID
				}
				if want := p.OutputIDs[:len(got)]; !slices.Equal(got, want) || len(got) < min(tokens, len(p.OutputIDs)) && r.Stop != model.StopEOS {
					t.Errorf("prompt %d: greedy ids\n got %v\nwant %v", i, got, p.OutputIDs[:tokens])
				}
				s := mb.Stats()
				t.Logf("prompt %d: %d tokens; %s", i, len(got), fmt.Sprintf("%d dispatches, %d command buffers, %d waits, %d weight bytes",
					s.Dispatches, s.CommandBuffers, s.Waits, s.WeightBytes))
			}
		})
	}
}

// exactCPU is the CPU backend with quantized weights dequantized to f32 at
// upload (exactly as MLX: float(scale·q) + bias), so it computes the model the
// Metal kernels compute. The plain CPU backend multiplies 4/8-bit weights with
// int8-quantized activations instead (about 3e-3 relative error; see
// cpu.Pool.MatMul), which changes greedy ids once the logit margins are small.
type exactCPU struct{ *kernels.CPU }

func (c exactCPU) Upload(t *kernels.Tensor) (*kernels.Tensor, error) {
	if !t.DType.Quantized() {
		return c.CPU.Upload(t)
	}
	q, err := c.CPU.Upload(t)
	if err != nil {
		return nil, err
	}
	w := q.Buf.(*cpu.Weight)
	f := make([]float32, w.N*w.K)
	for n := range w.N {
		w.Row(f[n*w.K:(n+1)*w.K], n)
	}
	return c.CPU.Upload(kernels.FromF32(f, w.N, w.K))
}

// TestMetalTinycodeLong is cmd/run's `-prompt-ids 4094,1,2 -temp 0` on the
// trained model: metal-emu must give the same greedy ids as the CPU reference
// (exact dequantization for q4/q8) for a long continuation.
func TestMetalTinycodeLong(t *testing.T) {
	tokens := 48
	if testing.Short() {
		tokens = 12
	}
	prompt := []int32{4094, 1, 2}
	for _, name := range []string{"tinycode-llama", "tinycode-llama-q4", "tinycode-llama-q8"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(refDir, name)
			gen := func(b kernels.Backend) []int32 {
				m := loadCtx(t, dir, b, len(prompt)+tokens)
				r, err := m.Generate(context.Background(), prompt, model.GenerateOptions{MaxTokens: tokens, IgnoreEOS: true}, nil)
				if err != nil {
					t.Fatal(err)
				}
				ids := make([]int32, len(r.Tokens))
				for i, tk := range r.Tokens {
					ids[i] = tk.ID
				}
				return ids
			}
			c := kernels.NewCPU(2)
			defer c.Close()
			want := gen(exactCPU{c})
			if got := gen(metalEmu(t)); !slices.Equal(got, want) || len(got) != tokens {
				t.Errorf("greedy ids\n got %v\nwant %v", got, want)
			}
		})
	}
}
