package model

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/kernels"
)

// loraRef is the part of a lora-* ref.json the tests read, beyond refCase.
type loraRef struct {
	BaseDir        string    `json:"base_dir"`
	BaseLogitsLast []float32 `json:"base_logits_last"`
	Adapter        struct {
		Tensors map[string]struct {
			Shape []int `json:"shape"`
		} `json:"tensors"`
	} `json:"adapter"`
	Effect struct {
		MaxAbs float64 `json:"logits_maxabs_vs_base"`
	} `json:"adapter_effect"`
}

// readLoraRef returns a lora case's adapter folder, its base folder and both
// parts of its ref.json.
func readLoraRef(t testing.TB, name string) (dir, base string, ref *refCase, lr *loraRef) {
	t.Helper()
	dir, ref = readRef(t, name)
	b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	lr = &loraRef{}
	if err := json.Unmarshal(b, lr); err != nil {
		t.Fatal(err)
	}
	return dir, filepath.Join(dir, lr.BaseDir), ref, lr
}

// adapterDirs are the two formats of one adapter.
func adapterDirs(dir string) map[string]string {
	return map[string]string{"peft": dir, "mlx": filepath.Join(dir, "mlx")}
}

// checkAllLogits runs ids through s (from an empty cache) and compares the
// logits after every position with want, within logitTol.
func checkAllLogits(t *testing.T, s *Session, ids []int32, want [][]float32) {
	t.Helper()
	s.Truncate(0)
	var worst float64
	err := s.ForwardEach(context.Background(), ids, func(i int, logits []float32) error {
		worst = max(worst, maxAbs(logits, want[i]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if worst > logitTol {
		t.Errorf("logits max-abs %g > %g over %d positions", worst, logitTol, len(ids))
	}
}

// checkGreedy checks the 16-token greedy chain ignoring EOS.
func checkGreedy(t *testing.T, s *Session, ref *refCase) {
	t.Helper()
	r, err := s.Generate(context.Background(), ref.InputIDs, GenerateOptions{MaxTokens: len(ref.GreedyNoStop), IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ids := tokenIDsOf(r.Tokens); !slices.Equal(ids, ref.GreedyNoStop) {
		t.Errorf("greedy:\n got %v\nwant %v", ids, ref.GreedyNoStop)
	}
}

// TestLoraReference: PEFT's and mlx-lm's adapter files over the llama3 and
// qwen2 weights give PEFT's logits at every position (prefill, and
// decode through the cache) and its greedy chain; SetAdapter(nil) gives the
// base's logits again without a reload, and switching between the two
// adapters works.
func TestLoraReference(t *testing.T) {
	for _, name := range []string{"lora-llama3", "lora-qwen2"} {
		t.Run(name, func(t *testing.T) {
			dir, base, ref, lr := readLoraRef(t, name)
			want := readLogits(t, dir, ref.LogitsShape)
			s := open(t, base, Options{Threads: 2}, SessionOptions{Context: 64})
			m := s.Model()
			weights := m.WeightBytes()
			ads := map[string]*Adapter{}
			for format, d := range adapterDirs(dir) {
				a, err := m.LoadAdapter(d)
				if err != nil {
					t.Fatal(err)
				}
				if a.Format() != format {
					t.Errorf("%s: format %q", d, a.Format())
				}
				ads[format] = a
			}
			if m.WeightBytes() != weights {
				t.Errorf("WeightBytes %d after LoadAdapter, %d before", m.WeightBytes(), weights)
			}
			var wantBytes int64
			for _, ts := range lr.Adapter.Tensors {
				wantBytes += 4 * int64(ts.Shape[0]*ts.Shape[1])
			}
			for format, a := range ads {
				if a.Bytes() != wantBytes {
					t.Errorf("%s: Bytes %d, want %d (A and B in f32)", format, a.Bytes(), wantBytes)
				}
			}
			for _, format := range []string{"peft", "mlx", "peft"} { // and switch back
				t.Run(format, func(t *testing.T) {
					if err := s.SetAdapter(ads[format]); err != nil {
						t.Fatal(err)
					}
					got, err := s.Forward(context.Background(), ref.InputIDs)
					if err != nil {
						t.Fatal(err)
					}
					if d := maxAbs(got, ref.LogitsLast); d > logitTol {
						t.Errorf("prefill: last logits max-abs %g", d)
					}
					checkAllLogits(t, s, ref.InputIDs, want)
					checkGreedy(t, s, ref)
				})
			}
			// Another adapter, then back to the reference one.
			other, err := m.LoadAdapter(randomAdapter(t, m.Config, 9, 0.1))
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range []*Adapter{other, ads["peft"]} {
				if err := s.SetAdapter(a); err != nil {
					t.Fatal(err)
				}
				got, err := s.Forward(context.Background(), ref.InputIDs)
				if err != nil {
					t.Fatal(err)
				}
				if d := maxAbs(got, ref.LogitsLast); (d <= logitTol) != (a != other) {
					t.Errorf("after switching to adapter %s: last logits max-abs %g from the reference adapter's", a.Dir(), d)
				}
			}
			if err := s.SetAdapter(nil); err != nil {
				t.Fatal(err)
			}
			if len(s.Cached()) != 0 {
				t.Errorf("SetAdapter kept %d cached tokens", len(s.Cached()))
			}
			got, err := s.Forward(context.Background(), ref.InputIDs)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxAbs(got, lr.BaseLogitsLast); d > logitTol {
				t.Errorf("base after the adapter: last logits max-abs %g", d)
			}
			if d := maxAbs(got, ref.LogitsLast); d < 10*logitTol {
				t.Errorf("base logits within %g of the adapted model's", d)
			}
		})
	}
}

// TestLoraMetal runs both adapters' formats on lora-llama3 and lora-qwen2 on
// the Metal kernels (the MSL interpreter; the GPU with INGOT_TEST_BACKEND):
// every position's logits (prefill chunks of 8 rows through the tiled
// matmul, then the decode path), the greedy chain through the cache, the
// taps, and the session switching to the base and back.
func TestLoraMetal(t *testing.T) {
	b := metalBackend(t)
	for _, c := range []string{"lora-llama3", "lora-qwen2"} {
		t.Run(c, func(t *testing.T) {
			dir, base, ref, lr := readLoraRef(t, c)
			want := readLogits(t, dir, ref.LogitsShape)
			s := open(t, base, Options{Backend: b}, SessionOptions{Context: 48, Batch: 8})
			st, _ := s.Model().Backend().(interface{ Stats() kernels.Stats })
			for _, format := range []string{"peft", "mlx"} {
				var before kernels.Stats
				if st != nil {
					before = st.Stats()
				}
				a, err := s.Model().LoadAdapter(adapterDirs(dir)[format])
				if err != nil {
					t.Fatal(err)
				}
				if st != nil { // the device memory the adapter took, as the backend counts its uploads
					after := st.Stats()
					if got := after.CopiedBytes + after.MappedBytes - before.CopiedBytes - before.MappedBytes; got != a.Bytes() {
						t.Errorf("%s: the backend took %d bytes for the adapter, Bytes says %d", format, got, a.Bytes())
					}
				}
				if err := s.SetAdapter(a); err != nil {
					t.Fatal(err)
				}
				checkAllLogits(t, s, ref.InputIDs, want)
				checkGreedy(t, s, ref)
				s.Truncate(0)
				tp, err := s.ForwardTaps(context.Background(), ref.InputIDs, TapOptions{Layers: []int{0, 2}, Norm: true})
				if err != nil {
					t.Fatal(err)
				}
				for j, i := range []int{0, 2} {
					if d := maxAbs(tp.Residual[j], ref.ResidualLast[i]); d > logitTol {
						t.Errorf("%s: residual %d max-abs %g", format, i, d)
					}
				}
				if d := maxAbs(tp.Norm, ref.HiddenLast); d > logitTol {
					t.Errorf("%s: final norm max-abs %g", format, d)
				}
				if err := s.SetAdapter(nil); err != nil {
					t.Fatal(err)
				}
				got, err := s.Forward(context.Background(), ref.InputIDs)
				if err != nil {
					t.Fatal(err)
				}
				if d := maxAbs(got, lr.BaseLogitsLast); d > logitTol {
					t.Errorf("base: last logits max-abs %g", d)
				}
			}
		})
	}
}

// TestLoraFuse merges the adapter into the weights at load (Options.Fuse):
// the same logits and greedy chain, no extra weight bytes; a quantized
// checkpoint refuses, naming the tensor.
func TestLoraFuse(t *testing.T) {
	dir, base, ref, _ := readLoraRef(t, "lora-llama3")
	want := readLogits(t, dir, ref.LogitsShape)
	plain := open(t, base, Options{Threads: 2}, SessionOptions{Context: 8})
	for _, d := range adapterDirs(dir) {
		s := open(t, base, Options{Threads: 2, Fuse: d}, SessionOptions{Context: 64})
		checkAllLogits(t, s, ref.InputIDs, want)
		checkGreedy(t, s, ref)
		if s.Model().WeightBytes() != plain.Model().WeightBytes() {
			t.Errorf("fused: %d weight bytes, base %d", s.Model().WeightBytes(), plain.Model().WeightBytes())
		}
	}
	q := filepath.Join(t.TempDir(), "q8")
	if err := QuantizeDir(context.Background(), base, q, 8, 64, nil); err != nil {
		t.Fatal(err)
	}
	_, err := Load(context.Background(), q, Options{Threads: 1, Fuse: dir})
	if err == nil || !strings.Contains(err.Error(), "Options.Fuse") || !strings.Contains(err.Error(), "float") {
		t.Errorf("fusing into a quantized checkpoint: %v", err)
	}
	if _, err := Load(context.Background(), base, Options{Threads: 1, Fuse: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "adapter_model.safetensors") {
		t.Errorf("fusing an empty folder: %v", err)
	}
}

// TestLoraQuantized runs the adapter unfused over quantized bases (8 and 4
// bits, quantized on load and from a quantized checkpoint): the adapted
// logits stay as close to PEFT's as the quantized base's are to the float
// base's, far closer than the adapter's own effect.
func TestLoraQuantized(t *testing.T) {
	dir, base, ref, lr := readLoraRef(t, "lora-llama3")
	want := readLogits(t, dir, ref.LogitsShape)
	for _, bits := range []int{8, 4} {
		t.Run(fmt.Sprint("q", bits), func(t *testing.T) {
			s := open(t, base, Options{Threads: 2, Quant: bits}, SessionOptions{Context: 64})
			baseLogits, err := s.Forward(context.Background(), ref.InputIDs)
			if err != nil {
				t.Fatal(err)
			}
			quantErr := maxAbs(baseLogits, lr.BaseLogitsLast) // what quantizing the base costs
			baseLogits0 := slices.Clone(baseLogits)
			a, err := s.Model().LoadAdapter(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetAdapter(a); err != nil {
				t.Fatal(err)
			}
			got, err := s.Forward(context.Background(), ref.InputIDs)
			if err != nil {
				t.Fatal(err)
			}
			d := maxAbs(got, want[len(want)-1])
			// The adapter's effect on the quantized base against PEFT's on the float one.
			effect := make([]float32, len(got))
			for i := range got {
				effect[i] = (got[i] - baseLogits0[i]) - (ref.LogitsLast[i] - lr.BaseLogitsLast[i])
			}
			de := maxAbs(effect, make([]float32, len(effect)))
			t.Logf("q%d: base logits max-abs %.3g vs float, adapted %.3g vs PEFT; the adapter's effect off by %.3g (the effect itself %.3g)", bits, quantErr, d, de, lr.Effect.MaxAbs)
			if bits == 8 && (d > 2*quantErr || d > lr.Effect.MaxAbs/10) {
				t.Errorf("q8 adapted logits max-abs %g (quantized base %g, adapter effect %g)", d, quantErr, lr.Effect.MaxAbs)
			}
			if de > lr.Effect.MaxAbs/2 { // ignoring the adapter would be off by the whole effect (1.86 on this row)
				t.Errorf("q%d: the adapter's effect is off by %g (the effect: %g)", bits, de, lr.Effect.MaxAbs)
			}
		})
	}
}

// TestLoraArchitectures adapts every projection LoRA can reach unfused in
// each architecture with a random PEFT adapter (Phi-3's fused qkv_proj and
// gate_up_proj, Qwen3.5's gated q_proj, Gemma's sandwich norms, gpt-oss's
// biased attention, the attention of mixture-of-experts and hybrid
// models): the unfused run, splitting B's rows as the model splits fused
// weights, equals merging W + s·B·A at load, and differs from the base.
func TestLoraArchitectures(t *testing.T) {
	for _, name := range []string{"llama2", "mistral", "qwen3", "gemma", "gemma2", "gemma3", "phi3", "qwen3_moe-mixed", "gpt_oss", "qwen3_5", "qwen3_5_moe"} {
		t.Run(name, func(t *testing.T) {
			base, ref := readRef(t, name)
			s := open(t, base, Options{Threads: 2}, SessionOptions{Context: 64})
			c := s.Model().Config
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(1, 2))
			ts := map[string]*stTensor{}
			const r = 3
			targets := map[string]bool{}
			for i := range c.NumLayers {
				for _, mod := range slices.Sorted(maps.Keys(loraTargets)) {
					fused := len(loraTargets[mod]) > 1
					attn := strings.HasPrefix(mod, "self_attn.")
					switch {
					case fused != s.m.net.arch.fusedPhi3 && mod != "self_attn.o_proj" && mod != "mlp.down_proj",
						attn && c.linear(i), !attn && c.sparse(i):
						continue
					}
					in, out, _ := loraDims(c, mod)
					p := fmt.Sprintf("base_model.model.model.layers.%d.%s.lora_", i, mod)
					ts[p+"A.weight"] = randTensor(rng, 0.1, r, in)
					ts[p+"B.weight"] = randTensor(rng, 0.05, out, r)
					targets[mod[strings.IndexByte(mod, '.')+1:]] = true
				}
			}
			writeSafetensors(t, filepath.Join(dir, "adapter_model.safetensors"), ts)
			writeJSON(t, filepath.Join(dir, "adapter_config.json"), map[string]any{"peft_type": "LORA", "r": r, "lora_alpha": 6,
				"target_modules": slices.Sorted(maps.Keys(targets)), "bias": "none"})
			a, err := s.Model().LoadAdapter(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetAdapter(a); err != nil {
				t.Fatal(err)
			}
			fused := open(t, base, Options{Threads: 2, Fuse: dir}, SessionOptions{Context: 64})
			var want [][]float32
			if err := fused.ForwardEach(context.Background(), ref.InputIDs, func(i int, l []float32) error {
				want = append(want, slices.Clone(l))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			checkAllLogits(t, s, ref.InputIDs, want)
			if d := maxAbs(want[len(want)-1], ref.LogitsLast); d < 0.01 {
				t.Errorf("the adapter moves the last logits by only %g", d)
			}
			t.Logf("%d modules; the adapter moves the last logits by %.3g", len(ts)/2, maxAbs(want[len(want)-1], ref.LogitsLast))
		})
	}
}

func randTensor(rng *rand.Rand, std float64, rows, cols int) *stTensor {
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * std)
	}
	return &stTensor{DType: "F32", Shape: []int{rows, cols}, Data: kernels.FromF32(x, rows*cols).Data}
}

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// badAdapter copies the adapter in src (PEFT or mlx) to a new folder with
// its config and tensors edited.
func badAdapter(t *testing.T, src string, cfg func(map[string]any), ts func(map[string]*stTensor)) string {
	t.Helper()
	dir := t.TempDir()
	weights := "adapter_model.safetensors"
	if _, err := os.Stat(filepath.Join(src, weights)); err != nil {
		weights = "adapters.safetensors"
	}
	b, err := os.ReadFile(filepath.Join(src, "adapter_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if cfg != nil {
		cfg(c)
	}
	writeJSON(t, filepath.Join(dir, "adapter_config.json"), c)
	tensors := readSafetensors(t, filepath.Join(src, weights))
	if ts != nil {
		ts(tensors)
	}
	writeSafetensors(t, filepath.Join(dir, weights), tensors)
	return dir
}

// TestLoraBadInput: every bad adapter gives one error that starts with
// "model:" and names the field or tensor at fault.
func TestLoraBadInput(t *testing.T) {
	dir, base, _, _ := readLoraRef(t, "lora-llama3")
	s := open(t, base, Options{Threads: 1}, SessionOptions{Context: 8})
	m := s.Model()
	const q0 = "base_model.model.model.layers.0.self_attn.q_proj.lora_"
	const m0 = "model.layers.0.self_attn.q_proj.lora_"
	set := func(k string, v any) func(map[string]any) { return func(c map[string]any) { c[k] = v } }
	lp := func(k string, v any) func(map[string]any) {
		return func(c map[string]any) {
			p := c["lora_parameters"].(map[string]any)
			if v == nil {
				delete(p, k)
			} else {
				p[k] = v
			}
		}
	}
	mlx := filepath.Join(dir, "mlx")
	for _, tc := range []struct {
		name, src string
		cfg       func(map[string]any)
		ts        func(map[string]*stTensor)
		want      string
	}{
		{"dora", dir, set("use_dora", true), nil, "use_dora"},
		{"fan_in_fan_out", dir, set("fan_in_fan_out", true), nil, "fan_in_fan_out"},
		{"bias", dir, set("bias", "lora_only"), nil, "bias"},
		{"peft_type", dir, set("peft_type", "IA3"), nil, "peft_type"},
		{"alpha", dir, set("lora_alpha", 0), nil, "lora_alpha"},
		{"r", dir, set("r", 8), nil, "r (or rank_pattern)"},
		{"unknown target", dir, set("target_modules", []string{"q_proj", "lm_head"}), nil, "target_modules"},
		{"target not listed", dir, set("target_modules", []string{"k_proj"}), nil, "target_modules"},
		{"rank_pattern", dir, set("rank_pattern", map[string]any{"q_proj": 2}), nil, "q_proj.lora_A.weight"},
		{"rank_pattern regexp", dir, set("rank_pattern", map[string]any{"(": 2}), nil, "rank_pattern"},
		{"modules_to_save", dir, set("modules_to_save", []string{"lm_head"}), nil, "modules_to_save"},
		{"aLoRA", dir, set("alora_invocation_tokens", []int{5, 6}), nil, "alora_invocation_tokens"},
		{"QALoRA", dir, set("use_qalora", true), nil, "use_qalora"},
		{"trainable tokens", dir, set("trainable_token_indices", []int{3}), nil, "trainable_token_indices"},
		{"layer_replication", dir, set("layer_replication", [][]int{{0, 2}}), nil, "layer_replication"},
		{"stray tensor", dir, nil, func(ts map[string]*stTensor) { ts["base_model.model.lm_head.lora_A.weight"] = ts[q0+"A.weight"] }, "lm_head"},
		{"no B", dir, nil, func(ts map[string]*stTensor) { delete(ts, q0+"B.weight") }, q0 + "A.weight"},
		{"layer", dir, nil, func(ts map[string]*stTensor) {
			ts["base_model.model.model.layers.7.self_attn.q_proj.lora_A.weight"] = ts[q0+"A.weight"]
		}, "layer 7"},
		{"dtype", dir, nil, func(ts map[string]*stTensor) {
			a := *ts[q0+"A.weight"]
			a.DType = "I32"
			ts[q0+"A.weight"] = &a
		}, "I32"},
		{"fine_tune_type", mlx, set("fine_tune_type", "dora"), nil, "fine_tune_type"},
		{"num_layers past the model", mlx, set("num_layers", 3), nil, "num_layers"},
		{"num_layers excludes a tensor", mlx, set("num_layers", 1), nil, "num_layers"},
		{"mlx rank", mlx, lp("rank", 2), nil, "lora_parameters.rank"},
		{"mlx scale", mlx, lp("scale", nil), nil, "lora_parameters.scale"},
		{"mlx keys", mlx, lp("keys", []string{"self_attn.q_proj"}), nil, "lora_parameters.keys"},
		{"mlx unknown key", mlx, lp("keys", []string{"self_attn.rotary"}), nil, "lora_parameters.keys"},
		{"mlx transposed", mlx, nil, func(ts map[string]*stTensor) {
			a := *ts[m0+"a"]
			a.Shape = []int{a.Shape[1], a.Shape[0]}
			ts[m0+"a"] = &a
		}, m0 + "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.LoadAdapter(badAdapter(t, tc.src, tc.cfg, tc.ts))
			t.Log(err)
			if err == nil || !strings.HasPrefix(err.Error(), "model: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
	if _, err := m.LoadAdapter(t.TempDir()); err == nil || !strings.Contains(err.Error(), "adapters.safetensors") {
		t.Errorf("empty folder: %v", err)
	}
	// Another base: qwen2's adapter does not fit llama3.
	q, _, _, _ := readLoraRef(t, "lora-qwen2")
	if _, err := m.LoadAdapter(q); err == nil || !strings.Contains(err.Error(), "has shape") {
		t.Errorf("qwen2's adapter on llama3: %v", err)
	}
	// An adapter of another model, and a closed one.
	other := open(t, base, Options{Threads: 1}, SessionOptions{Context: 8})
	a, err := other.Model().LoadAdapter(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetAdapter(a); err == nil {
		t.Errorf("SetAdapter took another model's adapter")
	}
	if err := other.SetAdapter(a); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if _, err := other.Forward(context.Background(), []int32{1}); err == nil || !strings.Contains(err.Error(), "adapter") {
		t.Errorf("forward with a closed adapter: %v", err)
	}
	if err := other.SetAdapter(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Forward(context.Background(), []int32{1}); err != nil {
		t.Errorf("forward after dropping the closed adapter: %v", err)
	}
}

// FuzzAdapterConfig: any adapter_config.json either parses, in PEFT's or
// mlx-lm's form, into a config whose ranks and scales are usable, or gives an
// error that starts with "model:"; never a panic.
func FuzzAdapterConfig(f *testing.F) {
	for _, name := range []string{"lora-llama3", "lora-qwen2", "lora-llama3/mlx", "lora-qwen2/mlx"} {
		if b, err := os.ReadFile(filepath.Join(refDir, name, "adapter_config.json")); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"peft_type":"LORA","r":8,"lora_alpha":16,"use_rslora":true,"target_modules":"all-linear","rank_pattern":{"q_proj":4,"layers\\.1\\..*":2},"alpha_pattern":{"down_proj":3}}`))
	f.Add([]byte(`{"fine_tune_type":"lora","num_layers":-1,"lora_parameters":{"rank":8,"scale":20.0,"keys":["mlp.gate_up_proj"]}}`))
	f.Add([]byte(`{"peft_type":"LORA","r":-1}`))
	f.Add([]byte(`{"rank_pattern":{"(":1}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := parsePEFTConfig(b); err != nil {
			if !strings.HasPrefix(err.Error(), "model: ") {
				t.Fatalf("PEFT: %v", err)
			}
		} else {
			for _, name := range []string{"model.layers.0.self_attn.q_proj", "model.layers.1.mlp.down_proj", ""} {
				if r, a := c.rankAlpha(name); r <= 0 || !(a > 0) {
					t.Fatalf("PEFT %s: rank %d, alpha %v", name, r, a)
				}
			}
		}
		if c, err := parseMLXConfig(b); err != nil {
			if !strings.HasPrefix(err.Error(), "model: ") {
				t.Fatalf("mlx: %v", err)
			}
		} else if *c.Params.Rank <= 0 || *c.NumLayers == 0 || math.IsNaN(*c.Params.Scale) {
			t.Fatalf("mlx: rank %d, num_layers %d, scale %v", *c.Params.Rank, *c.NumLayers, *c.Params.Scale)
		}
	})
}

// TestLoraPatterns: rank_pattern, alpha_pattern and use_rslora scale each
// module as PEFT does. Adapter X (r 4, alpha 8, rsLoRA: s = 8/√4 = 4; q_proj
// alpha 16: s = 8; layer 1's down_proj rank 2: s = 8/√2) must equal adapter
// Y (plain r 4, alpha 16: s = 4) holding the same matrices with q_proj's B
// ×2 and down_proj's padded to rank 4 with zeros, B ×√2.
func TestLoraPatterns(t *testing.T) {
	_, base, ref, _ := readLoraRef(t, "lora-llama3")
	s := open(t, base, Options{Threads: 2}, SessionOptions{Context: 64})
	c := s.Model().Config
	rng := rand.New(rand.NewPCG(3, 4))
	xs, ys := map[string]*stTensor{}, map[string]*stTensor{}
	for i := range c.NumLayers {
		for mod := range loraTargets {
			in, out, _ := loraDims(c, mod)
			if len(loraTargets[mod]) > 1 {
				continue // fused: Phi-3's
			}
			p := fmt.Sprintf("base_model.model.model.layers.%d.%s.lora_", i, mod)
			r, bScale := 4, float32(1)
			switch {
			case mod == "self_attn.q_proj":
				bScale = 2
			case mod == "mlp.down_proj" && i == 1:
				r, bScale = 2, float32(math.Sqrt2)
			}
			a, b := randTensor(rng, 0.1, r, in), randTensor(rng, 0.05, out, r)
			xs[p+"A.weight"], xs[p+"B.weight"] = a, b
			af, bf := bytesF32(a.Data), bytesF32(b.Data)
			pa, pb := make([]float32, 4*in), make([]float32, out*4)
			copy(pa, af) // rows past r stay 0
			for o := range out {
				for k := range r {
					pb[o*4+k] = bf[o*r+k] * bScale
				}
			}
			ys[p+"A.weight"] = &stTensor{DType: "F32", Shape: []int{4, in}, Data: kernels.FromF32(pa, len(pa)).Data}
			ys[p+"B.weight"] = &stTensor{DType: "F32", Shape: []int{out, 4}, Data: kernels.FromF32(pb, len(pb)).Data}
		}
	}
	x, y := t.TempDir(), t.TempDir()
	targets := []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
	writeSafetensors(t, filepath.Join(x, "adapter_model.safetensors"), xs)
	writeJSON(t, filepath.Join(x, "adapter_config.json"), map[string]any{"peft_type": "LORA", "r": 4, "lora_alpha": 8, "use_rslora": true,
		"target_modules": targets, "alpha_pattern": map[string]any{"q_proj": 16}, "rank_pattern": map[string]any{`layers\.1\.mlp\.down_proj`: 2}})
	writeSafetensors(t, filepath.Join(y, "adapter_model.safetensors"), ys)
	writeJSON(t, filepath.Join(y, "adapter_config.json"), map[string]any{"peft_type": "LORA", "r": 4, "lora_alpha": 16, "target_modules": targets})
	var logits [2][]float32
	for j, d := range []string{x, y} {
		a, err := s.Model().LoadAdapter(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetAdapter(a); err != nil {
			t.Fatal(err)
		}
		l, err := s.Forward(context.Background(), ref.InputIDs)
		if err != nil {
			t.Fatal(err)
		}
		logits[j] = slices.Clone(l)
	}
	if d := maxAbs(logits[0], logits[1]); d > 1e-5 {
		t.Errorf("patterns: logits differ by %g from the explicit adapter", d)
	}
	if d := maxAbs(logits[0], ref.LogitsLast); d < 0.1 {
		t.Errorf("the random adapter hardly moves the logits (%g)", d)
	}
}

// bytesF32 reads little-endian float32s.
func bytesF32(b []byte) []float32 {
	f := make([]float32, len(b)/4)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return f
}

// randomAdapter writes a random PEFT adapter (rank 3) over the projections
// of c's dense layers into a new folder.
func randomAdapter(t testing.TB, c *Config, seed uint64, std float64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 2))
	ts := map[string]*stTensor{}
	for i := range c.NumLayers {
		for _, mod := range []string{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"} {
			in, out, _ := loraDims(c, mod)
			p := fmt.Sprintf("base_model.model.model.layers.%d.%s.lora_", i, mod)
			ts[p+"A.weight"] = randTensor(rng, std, 3, in)
			ts[p+"B.weight"] = randTensor(rng, std, out, 3)
		}
	}
	dir := t.TempDir()
	h := map[string]any{}
	var data []byte
	for _, name := range slices.Sorted(maps.Keys(ts)) {
		h[name] = map[string]any{"dtype": "F32", "shape": ts[name].Shape, "data_offsets": []int{len(data), len(data) + len(ts[name].Data)}}
		data = append(data, ts[name].Data...)
	}
	hb, _ := json.Marshal(h)
	st := append(binary.LittleEndian.AppendUint64(nil, uint64(len(hb))), append(hb, data...)...)
	if err := os.WriteFile(filepath.Join(dir, "adapter_model.safetensors"), st, 0o644); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, filepath.Join(dir, "adapter_config.json"), map[string]any{"peft_type": "LORA", "r": 3, "lora_alpha": 3, "target_modules": "all-linear"})
	return dir
}

// TestLoraGGUF runs an adapter over GGUF bases: on the F16 file (q and k
// rows un-permuted at load) unfused equals fused; on its Q4_K_M and Q8_0
// copies the adapter moves the logits as it moves the F16 model's, within
// what the quantization costs.
func TestLoraGGUF(t *testing.T) {
	logits := func(path, adapter string, o Options) (base, adapted []float32) {
		t.Helper()
		_, ref := readGGUFRef(t, filepath.Base(filepath.Dir(path)))
		s := open(t, path, o, SessionOptions{Context: 64})
		l, err := s.Forward(context.Background(), ref.InputIDs)
		if err != nil {
			t.Fatal(err)
		}
		base = slices.Clone(l)
		if adapter == "" {
			return base, nil
		}
		a, err := s.Model().LoadAdapter(adapter)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetAdapter(a); err != nil {
			t.Fatal(err)
		}
		if l, err = s.Forward(context.Background(), ref.InputIDs); err != nil {
			t.Fatal(err)
		}
		return base, slices.Clone(l)
	}
	f16 := filepath.Join(ggufDir, "llama-F16", "model.gguf")
	s := open(t, f16, Options{Threads: 1}, SessionOptions{Context: 8})
	dir := randomAdapter(t, s.Model().Config, 5, 0.1)
	base, adapted := logits(f16, dir, Options{Threads: 2})
	fused, _ := logits(f16, "", Options{Threads: 2, Fuse: dir})
	// Fusing rounds W + s·B·A back to F16: allow that rounding.
	if d := maxAbs(adapted, fused); d > 2e-2 {
		t.Errorf("F16: unfused vs fused logits max-abs %g", d)
	}
	effect := maxAbs(adapted, base)
	t.Logf("F16: the adapter moves the logits by %.3g; unfused vs fused %.3g", effect, maxAbs(adapted, fused))
	if effect < 0.1 {
		t.Fatalf("the adapter moves the logits by only %g", effect)
	}
	for _, q := range []string{"llama-Q8_0", "llama-Q4_K_M"} {
		qb, qa := logits(filepath.Join(ggufDir, q, "model.gguf"), dir, Options{Threads: 2})
		quantErr := maxAbs(qb, base)
		var off, dot, n1, n2 float64
		for i := range qa {
			e, f := float64(qa[i]-qb[i]), float64(adapted[i]-base[i])
			off = max(off, math.Abs(e-f))
			dot, n1, n2 = dot+e*f, n1+e*e, n2+f*f
		}
		cos := dot / math.Sqrt(n1*n2) // 0 (NaN) if the adapter were ignored
		t.Logf("%s: base off the F16 by %.3g; the adapter's effect off by %.3g, cosine %.3f with the F16's", q, quantErr, off, cos)
		if !(cos > 0.8) || off > 2*quantErr {
			t.Errorf("%s: the adapter's effect is off by %g, cosine %g (the effect %g, quantization %g)", q, off, cos, effect, quantErr)
		}
	}
	if _, err := Load(context.Background(), filepath.Join(ggufDir, "llama-Q4_K_M", "model.gguf"), Options{Threads: 1, Fuse: dir}); err == nil || !strings.Contains(err.Error(), "Options.Fuse") {
		t.Errorf("fusing into Q4_K_M: %v", err)
	}
}

// TestLoraDecodeAllocs: with an adapter set, a decode step still allocates
// nothing on the heap.
func TestLoraDecodeAllocs(t *testing.T) {
	dir, base, ref, _ := readLoraRef(t, "lora-llama3")
	s := open(t, base, Options{Threads: 2, Backend: cpuBackend(t)}, SessionOptions{Context: 256})
	a, err := s.Model().LoadAdapter(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetAdapter(a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forward(context.Background(), ref.InputIDs); err != nil {
		t.Fatal(err)
	}
	s.tokens = slices.Grow(s.tokens, 256)
	if _, err := s.step(ref.InputIDs[3]); err != nil { // the scratch views are cut on first use
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := s.step(ref.InputIDs[3]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("decode step with an adapter allocates %.1f times", allocs)
	}
}

// TestLoraOneModule adapts a single module (a fused one for Phi-3, whose
// q, k and v share x·Aᵀ) and decodes token by token: each step's logits
// equal the fused model's, so nothing computed in one step is reused in the
// next.
func TestLoraOneModule(t *testing.T) {
	for _, c := range []struct{ name, module string }{{"llama3", "self_attn.q_proj"}, {"phi3", "self_attn.qkv_proj"}, {"phi3", "mlp.gate_up_proj"}} {
		t.Run(c.name+"/"+c.module, func(t *testing.T) {
			base, ref := readRef(t, c.name)
			s := open(t, base, Options{Threads: 2}, SessionOptions{Context: 64})
			cfg := s.Model().Config
			in, out, _ := loraDims(cfg, c.module)
			rng := rand.New(rand.NewPCG(7, 8))
			p := fmt.Sprintf("base_model.model.model.layers.1.%s.lora_", c.module)
			dir := t.TempDir()
			writeSafetensors(t, filepath.Join(dir, "adapter_model.safetensors"), map[string]*stTensor{
				p + "A.weight": randTensor(rng, 0.2, 2, in), p + "B.weight": randTensor(rng, 0.2, out, 2)})
			writeJSON(t, filepath.Join(dir, "adapter_config.json"), map[string]any{"peft_type": "LORA", "r": 2, "lora_alpha": 4})
			a, err := s.Model().LoadAdapter(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetAdapter(a); err != nil {
				t.Fatal(err)
			}
			fused := open(t, base, Options{Threads: 2, Fuse: dir}, SessionOptions{Context: 64})
			var worst, moved float64
			for _, tok := range ref.InputIDs {
				want, err := fused.Forward(context.Background(), []int32{tok})
				if err != nil {
					t.Fatal(err)
				}
				want = slices.Clone(want)
				got, err := s.Forward(context.Background(), []int32{tok})
				if err != nil {
					t.Fatal(err)
				}
				worst = max(worst, maxAbs(got, want))
			}
			moved = maxAbs(s.one.hostLogit, ref.LogitsLast)
			if worst > logitTol || moved < 1e-2 {
				t.Errorf("decode: unfused vs fused max-abs %g; the adapter moves the last logits by %g", worst, moved)
			}
		})
	}
}

// TestLoraNestedNames: adapters saved from a multimodal model's language
// part (language_model.model.layers…, model.language_model.layers…) load.
func TestLoraNestedNames(t *testing.T) {
	dir, base, ref, _ := readLoraRef(t, "lora-llama3")
	s := open(t, base, Options{Threads: 1}, SessionOptions{Context: 32})
	for _, c := range []struct{ src, from, to string }{
		{dir, "base_model.model.model.layers.", "base_model.model.language_model.model.layers."},
		{dir, "base_model.model.model.layers.", "base_model.model.model.language_model.layers."},
		{filepath.Join(dir, "mlx"), "model.layers.", "language_model.model.layers."},
	} {
		d := badAdapter(t, c.src, nil, func(ts map[string]*stTensor) {
			old := maps.Clone(ts)
			clear(ts)
			for name, st := range old {
				ts[strings.Replace(name, c.from, c.to, 1)] = st
			}
		})
		a, err := s.Model().LoadAdapter(d)
		if err != nil {
			t.Fatalf("%s: %v", c.to, err)
		}
		if err := s.SetAdapter(a); err != nil {
			t.Fatal(err)
		}
		got, err := s.Forward(context.Background(), ref.InputIDs)
		if err != nil {
			t.Fatal(err)
		}
		if d := maxAbs(got, ref.LogitsLast); d > logitTol {
			t.Errorf("%s: last logits max-abs %g", c.to, d)
		}
	}
}
