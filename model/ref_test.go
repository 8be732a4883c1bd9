package model

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// refDir is the transformers reference data beside the checkout (see its README.md).
const refDir = "../../shared/testdata/ref"

// refCase is the part of a random-model ref.json the tests read.
type refCase struct {
	InputIDs     []int32     `json:"input_ids"`
	LogitsLast   []float32   `json:"logits_last"`
	LogitsShape  []int       `json:"logits_shape"`
	Greedy       []int32     `json:"greedy"`
	GreedyNoStop []int32     `json:"greedy_nostop"`
	Margins      []float32   `json:"greedy_nostop_margins"`
	FinalLogits  []float32   `json:"greedy_nostop_final_logits"`
	HiddenLast   []float32   `json:"hidden_last"`
	ResidualLast [][]float32 `json:"residual_last"`
	RopeInvFreq  invFreqs    `json:"rope_inv_freq"`
	WeightsDType string      `json:"weights_dtype"`
}

// invFreqs is rope_inv_freq: one list, or (Gemma 3) one per layer type.
type invFreqs struct {
	Full, Sliding []float32
}

func (f *invFreqs) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &f.Full); err == nil {
		return nil
	}
	var by struct {
		Full    []float32 `json:"full_attention_inv_freq"`
		Sliding []float32 `json:"sliding_attention_inv_freq"`
	}
	err := json.Unmarshal(b, &by)
	f.Full, f.Sliding = by.Full, by.Sliding
	return err
}

func readRef(t testing.TB, name string) (string, *refCase) {
	t.Helper()
	dir := filepath.Join(refDir, name)
	b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
	if err != nil {
		t.Fatalf("reference data missing (../shared must sit beside the checkout): %v", err)
	}
	var r refCase
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return dir, &r
}

// readLogits reads logits.f32: (S, V) little-endian float32.
func readLogits(t testing.TB, dir string, shape []int) [][]float32 {
	b, err := os.ReadFile(filepath.Join(dir, "logits.f32"))
	if err != nil {
		t.Fatal(err)
	}
	S, V := shape[0], shape[1]
	if len(b) != 4*S*V {
		t.Fatalf("logits.f32 has %d bytes, want %d", len(b), 4*S*V)
	}
	rows := make([][]float32, S)
	for s := range rows {
		rows[s] = make([]float32, V)
		for v := range rows[s] {
			rows[s][v] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*(s*V+v):]))
		}
	}
	return rows
}

func maxAbs(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

// shortCases are the random-model folders with full logits; tol is the max-abs
// bound on logits (f32 compute throughout; bf16/f16 weights are widened exactly).
var shortCases = []string{"llama2", "llama3", "llama3-bf16", "llama3-f16", "mistral", "qwen2", "qwen2-bf16", "qwen2-f16", "qwen3", "gemma", "gemma2", "gemma2-swa", "gemma3", "phi3", "qwen3_moe", "qwen3_moe-mixed", "gpt_oss", "qwen3_5", "qwen3_5_moe"}

const logitTol = 1e-4

// TestReferenceLogits checks every position's logits against transformers: the
// prompt's first token is prefilled, then each later one is decoded through the
// KV cache, so this is also prefill-then-decode against full recomputation.
func TestReferenceLogits(t *testing.T) {
	for _, name := range shortCases {
		t.Run(name, func(t *testing.T) {
			dir, ref := readRef(t, name)
			want := readLogits(t, dir, ref.LogitsShape)
			m := open(t, dir, Options{Threads: 2}, SessionOptions{})
			if d := maxAbs(m.one.rope.InvFreq, ref.RopeInvFreq.Full); d > 1e-6*float64(slices.Max(ref.RopeInvFreq.Full)) {
				t.Errorf("rope inv_freq differs by %g", d)
			}
			if want := ref.RopeInvFreq.Sliding; want != nil {
				if m.one.ropeLocal == nil {
					t.Errorf("no rotary embedding of the sliding layers' own")
				} else if d := maxAbs(m.one.ropeLocal.InvFreq, want); d > 1e-6*float64(slices.Max(want)) {
					t.Errorf("sliding layers' rope inv_freq differs by %g", d)
				}
			}
			// Full prefill: last row.
			got, err := m.Forward(context.Background(), ref.InputIDs)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxAbs(got, ref.LogitsLast); d > logitTol {
				t.Errorf("prefill: last logits max-abs %g > %g", d, logitTol)
			}
			// Incremental: prefill 1 token, decode the rest one by one.
			m.Truncate(0)
			var worst float64
			for s, tok := range ref.InputIDs {
				got, err := m.Forward(context.Background(), []int32{tok})
				if err != nil {
					t.Fatal(err)
				}
				worst = max(worst, maxAbs(got, want[s]))
			}
			if worst > logitTol {
				t.Errorf("decode: logits max-abs %g > %g over %d positions", worst, logitTol, len(want))
			}
			t.Logf("max-abs: prefill %.2g, decode %.2g", maxAbs(got, ref.LogitsLast), worst)
		})
	}
}

// TestReferenceGreedy checks the 16-token greedy chain ignoring EOS, and the
// cached greedy run that stops at EOS.
func TestReferenceGreedy(t *testing.T) {
	for _, name := range append(shortCases, "long-llama3", "long-mistral") {
		t.Run(name, func(t *testing.T) {
			dir, ref := readRef(t, name)
			m := open(t, dir, Options{Threads: 2}, SessionOptions{})
			r, err := m.Generate(context.Background(), ref.InputIDs, GenerateOptions{MaxTokens: len(ref.GreedyNoStop), IgnoreEOS: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ids := tokenIDsOf(r.Tokens)
			if !slices.Equal(ids, ref.GreedyNoStop) {
				t.Errorf("greedy_nostop:\n got %v\nwant %v", ids, ref.GreedyNoStop)
			}
			if ref.FinalLogits != nil {
				// The 16th step's logits come from decoding 15 tokens through a long cache.
				m.Truncate(0)
				logits, err := m.Forward(context.Background(), append(slices.Clone(ref.InputIDs), ref.GreedyNoStop[:15]...))
				if err != nil {
					t.Fatal(err)
				}
				if d := maxAbs(logits, ref.FinalLogits); d > logitTol {
					t.Errorf("final logits max-abs %g", d)
				}
			}
			r, err = m.Generate(context.Background(), ref.InputIDs, GenerateOptions{MaxTokens: 16}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ids := tokenIDsOf(r.Tokens); !slices.Equal(ids, ref.Greedy) {
				t.Errorf("greedy:\n got %v\nwant %v", ids, ref.Greedy)
			}
		})
	}
}

func tokenIDsOf(ts []Token) []int32 {
	ids := make([]int32, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids
}

// TestLegacyConfig loads each folder with config.legacy.json (rope_theta and
// rope_scaling at the top level, no rope_parameters) in place of config.json: the
// logits must be bit-identical, as they are in transformers.
func TestLegacyConfig(t *testing.T) {
	for _, name := range shortCases {
		t.Run(name, func(t *testing.T) {
			src, ref := readRef(t, name)
			src, err := filepath.Abs(src) // the links must resolve from the temp dir
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			for dst, from := range map[string]string{"config.json": "config.legacy.json", "model.safetensors": "model.safetensors", "generation_config.json": "generation_config.json"} {
				if err := os.Symlink(filepath.Join(src, from), filepath.Join(dir, dst)); err != nil {
					t.Fatal(err)
				}
			}
			run := func(dir string) []float32 {
				m := open(t, dir, Options{Threads: 1}, SessionOptions{})
				l, err := m.Forward(context.Background(), ref.InputIDs)
				if err != nil {
					t.Fatal(err)
				}
				return slices.Clone(l)
			}
			if a, b := run(src), run(dir); !slices.Equal(a, b) {
				t.Errorf("legacy config changes the logits by up to %g", maxAbs(a, b))
			}
		})
	}
}
