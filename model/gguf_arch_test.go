package model

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/gguf"
)

// ggufArchCases are the reference folders converted by convertHF. asRun, when
// set, edits config.json into the model llama.cpp runs from the converted
// file, where the converter drops something transformers uses: Gemma 2's and
// 3's query_pre_attn_scalar (llama.cpp scales by 1/√head_dim unless the model
// has the 27B's layer count) and Gemma 3's layer_types (llama.cpp slides every
// layer but each sixth). The reference models' 24 differs from their head_dim
// (16, 32) and gemma3's two layers are [sliding, full], so for those the GGUF
// must give the safetensors model with these edits, not transformers' logits.
var ggufArchCases = []struct {
	ref   string
	asRun func(c map[string]any)
}{
	{"gemma", nil},
	{"phi3", nil},
	{"mistral", nil},
	{"gemma2", func(c map[string]any) { c["query_pre_attn_scalar"] = c["head_dim"] }},
	{"gemma2-swa", func(c map[string]any) { c["query_pre_attn_scalar"] = c["head_dim"] }},
	{"gemma3", func(c map[string]any) {
		c["query_pre_attn_scalar"] = c["head_dim"]
		c["layer_types"] = []string{"sliding_attention", "sliding_attention"} // i % 6 < 5
	}},
}

// asRunLogits returns every position's logits of the safetensors model in dir
// with config.json edited by edit.
func asRunLogits(t *testing.T, dir string, ids []int32, edit func(map[string]any)) [][]float32 {
	t.Helper()
	src, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	edit(c)
	if b, err = json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmp, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(src, "model.safetensors"), filepath.Join(tmp, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	s := open(t, tmp, Options{Threads: 2}, SessionOptions{})
	return allLogits(t, s, ids)
}

// allLogits returns the logits of every position of one prefill.
func allLogits(t *testing.T, s *Session, ids []int32) [][]float32 {
	t.Helper()
	s.Truncate(0)
	out := make([][]float32, len(ids))
	if err := s.ForwardEach(context.Background(), ids, func(i int, logits []float32) error {
		out[i] = slices.Clone(logits)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func worstAbs(a, b [][]float32) float64 {
	var m float64
	for i := range a {
		m = max(m, maxAbs(a[i], b[i]))
	}
	return m
}

// TestGGUFArchReference converts each reference folder as
// convert_hf_to_gguf.py does (F32) and checks the GGUF's logits at every
// position (one prefill, and token by token through the cache) within
// logitTol of transformers' — or, where llama.cpp runs a different model from
// the same file (asRun), of the safetensors model so edited, which
// TestReferenceLogits validates against transformers unedited. The greedy
// chains of the unedited cases equal transformers'.
func TestGGUFArchReference(t *testing.T) {
	for _, tc := range ggufArchCases {
		t.Run(tc.ref, func(t *testing.T) {
			dir, ref := readRef(t, tc.ref)
			want := readLogits(t, dir, ref.LogitsShape)
			if tc.asRun != nil {
				want = asRunLogits(t, dir, ref.InputIDs, tc.asRun)
				t.Logf("llama.cpp's reading is %.3g from transformers' logits", worstAbs(want, readLogits(t, dir, ref.LogitsShape)))
			}
			s := open(t, convertHF(t, dir, convertOptions{outtype: "f32"}), Options{Threads: 2}, SessionOptions{})
			prefill := worstAbs(allLogits(t, s, ref.InputIDs), want)
			s.Truncate(0)
			var decode float64
			for i, tok := range ref.InputIDs {
				got, err := s.Forward(context.Background(), []int32{tok})
				if err != nil {
					t.Fatal(err)
				}
				decode = max(decode, maxAbs(got, want[i]))
			}
			if prefill > logitTol || decode > logitTol {
				t.Errorf("logits max-abs: prefill %g, decode %g over %d positions (bound %g)", prefill, decode, len(want), logitTol)
			}
			if tc.asRun == nil {
				s.Truncate(0)
				checkGreedy(t, s, ref)
			}
			t.Logf("max-abs: prefill %.2g, decode %.2g (%d positions)", prefill, decode, len(want))
		})
	}
}

// TestGGUFArchF16 converts with --outtype f16 (matrices F16, norms F32) and
// checks the logits against an F32 file of the same f16-rounded values: the
// F16 rows (permuted for mistral, fused for phi3) load as the values they hold.
func TestGGUFArchF16(t *testing.T) {
	for _, name := range []string{"mistral", "phi3", "gemma3"} {
		t.Run(name, func(t *testing.T) {
			dir, ref := readRef(t, name)
			f16 := open(t, convertHF(t, dir, convertOptions{outtype: "f16"}), Options{Threads: 2}, SessionOptions{})
			f32 := open(t, convertHF(t, dir, convertOptions{outtype: "f32", round16: true}), Options{Threads: 2}, SessionOptions{})
			if f16.m.GGUFTypes == f32.m.GGUFTypes || !strings.Contains(f16.m.GGUFTypes, "F16") {
				t.Errorf("types: f16 file %q, f32 file %q", f16.m.GGUFTypes, f32.m.GGUFTypes)
			}
			d := worstAbs(allLogits(t, f16, ref.InputIDs), allLogits(t, f32, ref.InputIDs))
			if d > 1e-5 {
				t.Errorf("F16 file vs F32 of the same values: logits max-abs %g", d)
			}
			t.Logf("max-abs %.2g; %s", d, f16.m.GGUFTypes)
		})
	}
}

// TestGGUFArchMetal runs the converted gemma2-swa (sandwich norms, folded +1,
// softcaps, a 6-token window) and phi3 (fused projections) on the Metal
// kernels (the MSL interpreter; the GPU with INGOT_TEST_BACKEND).
func TestGGUFArchMetal(t *testing.T) {
	b := metalBackend(t)
	for _, tc := range []string{"gemma2-swa", "phi3"} {
		t.Run(tc, func(t *testing.T) {
			dir, ref := readRef(t, tc)
			i := slices.IndexFunc(ggufArchCases, func(c struct {
				ref   string
				asRun func(c map[string]any)
			}) bool {
				return c.ref == tc
			})
			want := readLogits(t, dir, ref.LogitsShape)
			if edit := ggufArchCases[i].asRun; edit != nil {
				want = asRunLogits(t, dir, ref.InputIDs, edit)
			}
			s := open(t, convertHF(t, dir, convertOptions{outtype: "f32"}), Options{Backend: b}, SessionOptions{Context: 32, Batch: 8})
			checkAllLogits(t, s, ref.InputIDs, want)
		})
	}
}

// TestGGUFArchConfig checks llama.cpp's readings of the Gemma 2/3 and Phi-3
// keys on metadata-only files: the 27B models' attention scale (by layer
// count), absent softcaps and windows taking llama.cpp's defaults, the
// sliding-window period (a scalar; an array is ignored, as llama.cpp's
// get_key_or_arr into a scalar does), Gemma 3's sliding layers' own RoPE, and
// Phi-3's long/short factors.
func TestGGUFArchConfig(t *testing.T) {
	base := func(arch string, layers, D, H, Dh int) *ggufWriter {
		w := &ggufWriter{}
		w.str("general.architecture", arch)
		for k, v := range map[string]int{"block_count": layers, "embedding_length": D, "feed_forward_length": 4 * D,
			"attention.head_count": H, "attention.head_count_kv": H, "attention.key_length": Dh, "attention.value_length": Dh} {
			w.u32(arch+"."+k, v)
		}
		w.f32(arch+".attention.layer_norm_rms_epsilon", 1e-6)
		w.tensor("token_embd.weight", []int{8, D}, gguf.TypeF32, make([]float32, 8*D))
		return w
	}
	read := func(w *ggufWriter) (*Config, error) {
		f, err := gguf.Parse("test.gguf", w.bytes())
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := ggufConfig(f)
		return c, err
	}
	types := func(c *Config) string {
		var s []byte
		for _, lt := range c.LayerTypes {
			s = append(s, map[string]byte{"sliding_attention": 's', "full_attention": 'f'}[lt])
		}
		return string(s)
	}

	// Gemma 2: 2B-like (26 layers, D/H ≠ Dh) and the 27B (46 layers, D/H = 144).
	w := base("gemma2", 26, 2304, 8, 256)
	c, err := read(w)
	if err != nil {
		t.Fatal(err)
	}
	if c.QueryPreAttnScalar != 256 || c.AttnSoftcap != 50 || c.FinalSoftcap != 30 || *c.SlidingWindow != 4096 || types(c)[:4] != "sfsf" || c.RopeParameters != nil {
		t.Errorf("gemma2 defaults: scalar %g, softcaps %g %g, window %v, layers %s, rope %+v",
			c.QueryPreAttnScalar, c.AttnSoftcap, c.FinalSoftcap, *c.SlidingWindow, types(c), c.RopeParameters)
	}
	w = base("gemma2", 46, 4608, 32, 128)
	w.u32("gemma2.attention.sliding_window_pattern", 3)
	w.f32("gemma2.rope.freq_base_swa", 1000)
	if c, err = read(w); err != nil {
		t.Fatal(err)
	}
	if c.QueryPreAttnScalar != 144 || types(c)[:6] != "ssfssf" || c.ropeFor("sliding_attention").Theta != 1000 || c.rope().Theta != 10000 {
		t.Errorf("gemma2 27B: scalar %g, layers %s, rope %+v", c.QueryPreAttnScalar, types(c), c.RopeParameters)
	}
	w.bools("gemma2.attention.sliding_window_pattern", make([]bool, 46))
	if c, err = read(w); err != nil || types(c)[:4] != "sfsf" {
		t.Errorf("gemma2 with a pattern array: layers %s (%v), want the default period 2", types(c), err)
	}

	// Gemma 3: no window, then a window with the default period and RoPE.
	w = base("gemma3", 62, 5376, 32, 128)
	w.str("gemma3.rope.scaling.type", "linear")
	w.f32("gemma3.rope.scaling.factor", 8)
	w.f32("gemma3.rope.freq_base", 1e6)
	if c, err = read(w); err != nil {
		t.Fatal(err)
	}
	if c.QueryPreAttnScalar != 168 || c.SlidingWindow != nil || c.LayerTypes != nil || c.FinalSoftcap != 0 || c.AttnSoftcap != 0 {
		t.Errorf("gemma3 27B without a window: scalar %g, window %v, layers %v, softcaps %g %g", c.QueryPreAttnScalar, c.SlidingWindow, c.LayerTypes, c.AttnSoftcap, c.FinalSoftcap)
	}
	w.u32("gemma3.attention.sliding_window", 1024)
	if c, err = read(w); err != nil {
		t.Fatal(err)
	}
	full, local := c.rope(), c.ropeFor("sliding_attention")
	if types(c)[:12] != "sssssfsssssf" || full.Type != "linear" || full.Factor != 8 || full.Theta != 1e6 || local.Type != "default" || local.Theta != 10000 {
		t.Errorf("gemma3: layers %s, full %+v, sliding %+v", types(c), full, local)
	}

	// Phi-3 with longrope factors.
	w = base("phi3", 2, 64, 4, 16)
	w.u32("phi3.context_length", 4096)
	w.u32("phi3.rope.scaling.original_context_length", 256)
	w.f32("phi3.rope.scaling.attn_factor", 1.25)
	w.u32("phi3.attention.sliding_window", 2047)
	w.tensor("rope_factors_long.weight", []int{8}, gguf.TypeF32, []float32{1, 2, 3, 4, 5, 6, 7, 8})
	w.tensor("rope_factors_short.weight", []int{8}, gguf.TypeF32, []float32{1, 1, 1, 1, 2, 2, 2, 2})
	if c, err = read(w); err != nil {
		t.Fatal(err)
	}
	p := c.rope()
	if c.SlidingWindow != nil || p.Type != "longrope" || p.LongFactor[7] != 8 || p.ShortFactor[7] != 2 || *p.AttentionFactor != 1.25 || c.OriginalMaxPos != 256 {
		t.Errorf("phi3: window %v, rope %+v", c.SlidingWindow, p)
	}
	for _, tc := range []struct {
		ctx  int
		last float64 // the last rotated pair's divisor
	}{{256, 2}, {257, 8}} {
		r, err := newRoPE(c, tc.ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := 1 / math.Pow(10000, 14.0/16) / tc.last
		if d := math.Abs(float64(r.InvFreq[7]) - want); d > 1e-6*want || math.Abs(float64(r.Scale)-1.25) > 1e-7 {
			t.Errorf("phi3 at context %d: inv_freq[7] %g, want %g; scale %g", tc.ctx, r.InvFreq[7], want, r.Scale)
		}
	}
}

// TestGGUFArchErrors: an architecture ingot does not load is one error naming
// general.architecture and listing those it does; a Phi-3 file missing a
// fused tensor or half of its rope factors names the tensor.
func TestGGUFArchErrors(t *testing.T) {
	dir, _ := readRef(t, "phi3")
	src := convertHF(t, dir, convertOptions{outtype: "f32"})
	for _, tc := range []struct {
		name string
		edit func([]gguf.KV, []*gguf.Tensor) ([]gguf.KV, []*gguf.Tensor)
		want string
	}{
		{"arch", func(kvs []gguf.KV, ts []*gguf.Tensor) ([]gguf.KV, []*gguf.Tensor) {
			for i := range kvs {
				if kvs[i].Key == "general.architecture" {
					kvs[i].Value = "gemma3n"
				}
			}
			return kvs, ts
		}, `model: unsupported architecture "gemma3n" (general.architecture; ingot loads [gemma gemma2 gemma3 llama phi3 qwen2 qwen3] from GGUF)`},
		{"fused", func(kvs []gguf.KV, ts []*gguf.Tensor) ([]gguf.KV, []*gguf.Tensor) {
			return kvs, slices.DeleteFunc(ts, func(t *gguf.Tensor) bool { return t.Name == "blk.1.attn_qkv.weight" })
		}, `missing tensor "blk.1.attn_qkv.weight"`},
		{"rope factors", func(kvs []gguf.KV, ts []*gguf.Tensor) ([]gguf.KV, []*gguf.Tensor) {
			return kvs, append(ts, &gguf.Tensor{Name: "rope_factors_long.weight", Dims: []uint64{8}, Type: gguf.TypeF32, Data: make([]byte, 32)})
		}, `missing tensor "rope_factors_short.weight"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(context.Background(), rewriteGGUF(t, src, tc.edit), Options{Threads: 1})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want …%s…", err, tc.want)
			}
		})
	}
}
