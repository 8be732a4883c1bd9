package model

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unsafe"

	"github.com/ingot-llm/ingot/gguf"
	"github.com/ingot-llm/ingot/kernels"
)

// ggufArch is how one GGUF architecture (general.architecture) maps onto
// ingot: the Hugging Face architecture whose switches (model/arch.go) its
// layout matches, and what llama.cpp's convert_hf_to_gguf.py did on the way
// (docs/gguf.md cites the converter and llama.cpp source for each row).
type ggufArch struct {
	hf       string            // the architectures entry
	permuted bool              // q and k rows permuted for interleaved RoPE (see unpermute)
	folded   bool              // norm weights stored as applied: the converter added Gemma's 1 (loader.folded)
	names    map[string]string // per-layer tensor names beyond ggufLayer, or in place of its entries

	// config reads the architecture's own keys, after the common ones.
	config func(f *gguf.File, arch string, c *Config) error
}

// ggufArchs is every GGUF architecture ingot loads, one row each.
var ggufArchs = map[string]ggufArch{
	"llama":  {hf: "LlamaForCausalLM", permuted: true}, // Llama 2/3 and Mistral (LlamaModel converts MistralForCausalLM)
	"qwen2":  {hf: "Qwen2ForCausalLM"},
	"qwen3":  {hf: "Qwen3ForCausalLM"},
	"gemma":  {hf: "GemmaForCausalLM", folded: true},
	"gemma2": {hf: "Gemma2ForCausalLM", folded: true, names: ggufSandwich, config: ggufGemma2},
	"gemma3": {hf: "Gemma3ForCausalLM", folded: true, names: ggufSandwich, config: ggufGemma3},
	"phi3":   {hf: "Phi3ForCausalLM", names: ggufPhi3Names, config: ggufPhi3},
}

// ggufNames maps GGUF tensor names to the Hugging Face names the loader asks
// for. Per-layer entries are suffixes of "blk.{i}." and "model.layers.{i}.".
var (
	ggufGlobal = map[string]string{
		"token_embd.weight":  "model.embed_tokens.weight",
		"output_norm.weight": "model.norm.weight",
		"output.weight":      "lm_head.weight",
	}
	ggufLayer = map[string]string{
		"attn_norm.weight":   "input_layernorm.weight",
		"attn_q.weight":      "self_attn.q_proj.weight",
		"attn_k.weight":      "self_attn.k_proj.weight",
		"attn_v.weight":      "self_attn.v_proj.weight",
		"attn_output.weight": "self_attn.o_proj.weight",
		"attn_q.bias":        "self_attn.q_proj.bias",
		"attn_k.bias":        "self_attn.k_proj.bias",
		"attn_v.bias":        "self_attn.v_proj.bias",
		"attn_q_norm.weight": "self_attn.q_norm.weight",
		"attn_k_norm.weight": "self_attn.k_norm.weight",
		"ffn_norm.weight":    "post_attention_layernorm.weight",
		"ffn_gate.weight":    "mlp.gate_proj.weight",
		"ffn_up.weight":      "mlp.up_proj.weight",
		"ffn_down.weight":    "mlp.down_proj.weight",
	}
	// ggufSandwich is Gemma 2's and 3's four norms a layer (gguf-py
	// tensor_mapping.py: ATTN_POST_NORM, FFN_PRE_NORM, FFN_POST_NORM; their
	// MODEL_TENSORS have no FFN_NORM, so ffn_norm is the pre-feedforward one).
	ggufSandwich = map[string]string{
		"post_attention_norm.weight": "post_attention_layernorm.weight",
		"ffn_norm.weight":            "pre_feedforward_layernorm.weight",
		"post_ffw_norm.weight":       "post_feedforward_layernorm.weight",
	}
	// ggufPhi3Names is Phi-3's fused projections, kept fused by the converter:
	// attn_qkv is q, k then v rows; ffn_up is the gate rows then the up rows
	// (llama.cpp's ggml_swiglu activates the first half).
	ggufPhi3Names = map[string]string{
		"attn_qkv.weight": "self_attn.qkv_proj.weight",
		"ffn_up.weight":   "mlp.gate_up_proj.weight",
	}
)

// ggufFolded are the tensors the config absorbs (rope frequency factors).
var ggufFolded = []string{"rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight"}

// ggufSplitPart matches the name of a part of a split GGUF file.
var ggufSplitPart = regexp.MustCompile(`^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// GGUFFile returns the GGUF file a model path names: the path itself if it is
// a .gguf file, or the one GGUF model (the first part, if split) in a
// directory that has no config.json. ok is false for anything else; a
// directory holding several GGUF models is an error.
func GGUFFile(path string) (file string, ok bool, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", false, nil // let the directory loader explain
	}
	if !st.IsDir() {
		return path, strings.EqualFold(filepath.Ext(path), ".gguf"), nil
	}
	if _, err := os.Stat(filepath.Join(path, "config.json")); err == nil {
		return "", false, nil
	}
	files, _ := filepath.Glob(filepath.Join(path, "*.gguf"))
	var models []string
	for _, f := range files {
		if m := ggufSplitPart.FindStringSubmatch(filepath.Base(f)); m != nil && m[2] != "00001" {
			continue // a later part of a split file: opened through its first part
		}
		models = append(models, f)
	}
	switch len(models) {
	case 0:
		return "", false, nil
	case 1:
		return models[0], true, nil
	}
	return "", false, fmt.Errorf("model: %s holds %d GGUF models (%s, …): pass one file", path, len(models), filepath.Base(models[0]))
}

// loadGGUF opens a GGUF file (an architecture of ggufArchs; see docs/gguf.md).
// Q8_0, Q4_0, Q4_K, Q5_K and Q6_K matrices stay the file's blocks, run by
// their own kernels (kernels.DTypeQ8_0 …); other quantized tensors become
// ingot's affine form with the same values; F32, F16 and BF16 tensors stay
// views of the mapped file unless they must be reordered.
func loadGGUF(ctx context.Context, path string, o Options) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	cfg, a, eos, files, quant, err := ggufModel(f)
	if errors.Is(err, ErrUnsupportedArch) {
		f.Close()
		return nil, fmt.Errorf("%w in %s", err, path)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("model: %s: %w", path, err)
	}
	// From here files owns the mapping: its Close releases the device's views
	// of the file, then unmaps it.
	if err := ctx.Err(); err != nil {
		files.Close()
		return nil, err
	}
	l := &loader{files: files, quant: quant, used: map[string]bool{}, folded: a.folded}
	m, err := build(cfg, eos, l, o)
	if err != nil {
		files.Close()
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	m.files = files
	m.GGUFTypes = ggufTypeMix(f)
	native, affine := ggufNativeMix(f)
	m.log.Info("gguf loaded", "file", path, "arch", cfg.ModelType, "types", m.GGUFTypes,
		"native", native, "as_affine", affine, "weight_bytes", m.WeightBytes())
	if un := l.unused(); len(un) > 0 {
		slices.Sort(un)
		m.log.Warn("model: unused tensors", "count", len(un), "first", un[0])
	}
	return m, nil
}

// ggufModel reads the config, architecture row, EOS ids and weights of f.
func ggufModel(f *gguf.File) (*Config, ggufArch, []int32, *weightFiles, *quantConfig, error) {
	cfg, a, err := ggufConfig(f)
	if err != nil {
		return nil, a, nil, nil, nil, err
	}
	eos, err := ggufEOS(f)
	if err != nil {
		return nil, a, nil, nil, nil, err
	}
	files, quant, err := ggufWeights(f, cfg, a)
	if err != nil {
		return nil, a, nil, nil, nil, err
	}
	return cfg, a, eos, files, quant, nil
}

// ggufTypeMix names the tensor types of a GGUF file with their counts, most
// common first: "Q4_K×97 F32×45 Q6_K×13" (the file's quantization mix).
func ggufTypeMix(f *gguf.File) string {
	n := map[gguf.Type]int{}
	for _, t := range f.Tensors {
		n[t.Type]++
	}
	types := make([]gguf.Type, 0, len(n))
	for t := range n {
		types = append(types, t)
	}
	slices.SortFunc(types, func(a, b gguf.Type) int {
		if n[a] != n[b] {
			return n[b] - n[a]
		}
		return int(a) - int(b)
	})
	var s []string
	for _, t := range types {
		s = append(s, fmt.Sprintf("%s×%d", t, n[t]))
	}
	return strings.Join(s, " ")
}

// ggufFileTypes names llama.cpp's general.file_type values (enum llama_ftype).
var ggufFileTypes = map[uint64]string{
	0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
	12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 32: "BF16",
}

// ggufFileType returns the name of general.file_type ("Q4_K_M"), or "?" when
// it is absent or unknown.
func ggufFileType(f *gguf.File) string {
	v, ok, err := f.Uint("general.file_type")
	if name, known := ggufFileTypes[v]; ok && err == nil && known {
		return name
	}
	return "?"
}

// ggufConfig maps the <arch>.* metadata to a Config, and returns the
// architecture's row. It reports every problem at once, naming the GGUF key.
func ggufConfig(f *gguf.File) (*Config, ggufArch, error) {
	name, ok, err := f.String("general.architecture")
	if err != nil {
		return nil, ggufArch{}, err
	}
	if !ok {
		return nil, ggufArch{}, errors.New(`missing key "general.architecture"`)
	}
	a, known := ggufArchs[name]
	if !known {
		var names []string
		for k := range ggufArchs {
			names = append(names, k)
		}
		slices.Sort(names)
		return nil, a, fmt.Errorf("%w %q (general.architecture; ingot loads %v from GGUF)", ErrUnsupportedArch, name, names)
	}
	var errs []error
	uint := func(key string, required bool) int {
		v, ok, err := f.Uint(name + "." + key)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !ok && required:
			errs = append(errs, fmt.Errorf("missing key %q", name+"."+key))
		case v > 1<<30:
			errs = append(errs, fmt.Errorf("key %q (%d) out of range", name+"."+key, v))
		default:
			return int(v)
		}
		return 0
	}
	float := func(key string) (float64, bool) {
		v, ok, err := f.Float(name + "." + key)
		if err != nil {
			errs = append(errs, err)
		}
		return v, ok && err == nil
	}
	c := &Config{Architectures: []string{a.hf}, ModelType: name, DType: "gguf " + ggufFileType(f)}
	c.HiddenSize = uint("embedding_length", true)
	c.IntermediateSize = uint("feed_forward_length", true)
	c.NumLayers = uint("block_count", true)
	c.NumHeads = uint("attention.head_count", true)
	c.NumKVHeads = uint("attention.head_count_kv", false)
	c.HeadDim = uint("attention.key_length", false)
	if vl := uint("attention.value_length", false); vl != 0 && vl != c.HeadDim && c.HeadDim != 0 {
		errs = append(errs, fmt.Errorf("%s.attention.value_length (%d) differs from key_length (%d)", name, vl, c.HeadDim))
	}
	c.MaxPositions = uint("context_length", false)
	if eps, ok := float("attention.layer_norm_rms_epsilon"); ok {
		c.RMSNormEps = float32(eps)
	} else {
		errs = append(errs, fmt.Errorf("missing key %q", name+".attention.layer_norm_rms_epsilon"))
	}
	if theta, ok := float("rope.freq_base"); ok {
		c.RopeTheta = theta
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || len(emb.Dims) != 2 {
		errs = append(errs, errors.New(`missing tensor "token_embd.weight" (2-D)`))
	} else {
		c.VocabSize = int(min(emb.Dims[1], 1<<30))
		if v := uint("vocab_size", false); v != 0 && v != c.VocabSize {
			errs = append(errs, fmt.Errorf("%s.vocab_size (%d) differs from the rows of token_embd.weight (%d)", name, v, c.VocabSize))
		}
	}
	if len(errs) > 0 {
		return nil, a, errors.Join(errs...)
	}
	c.applyDefaults()
	if rd := uint("rope.dimension_count", false); rd != 0 && rd != c.HeadDim {
		c.PartialRotaryFactor = float64(rd) / float64(c.HeadDim)
	}
	if err := ggufRope(f, name, c); err != nil {
		errs = append(errs, err)
	}
	if a.config != nil {
		if err := a.config(f, name, c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.validate(); err != nil {
		errs = append(errs, err)
	}
	return c, a, errors.Join(errs...)
}

// ggufRope maps the rope scaling keys and rope_freqs.weight onto c. Llama 3.x
// files carry their llama3 scaling only as rope_freqs.weight, one divisor per
// frequency: Config expresses that as longrope factors (the frequencies are
// divided by them, whatever the context) with an attention factor of 1.
func ggufRope(f *gguf.File, arch string, c *Config) error {
	typ, _, err := f.String(arch + ".rope.scaling.type")
	if err != nil {
		return err
	}
	factor, _, err := f.Float(arch + ".rope.scaling.factor")
	if err != nil {
		return err
	}
	if lin, ok, err := f.Float(arch + ".rope.scale_linear"); err != nil {
		return err
	} else if ok && typ == "" {
		typ, factor = "linear", lin
	}
	orig, _, err := f.Uint(arch + ".rope.scaling.original_context_length")
	if err != nil {
		return err
	}
	freqs, hasFreqs := f.Tensor("rope_freqs.weight")
	switch typ {
	case "", "none":
	case "longrope": // Phi-3's factors are the tensors rope_factors_long and _short: ggufPhi3
		if _, ok := f.Tensor("rope_factors_long.weight"); !ok {
			return fmt.Errorf("%s.rope.scaling.type %q without tensor %q", arch, typ, "rope_factors_long.weight")
		}
		return nil
	case "linear", "yarn":
		if hasFreqs {
			return fmt.Errorf("%s.rope.scaling.type %q together with tensor %q is not supported", arch, typ, "rope_freqs.weight")
		}
		c.RopeScaling = &RopeParams{Type: typ, Factor: factor, OriginalMax: int(min(orig, 1<<30))}
		return nil
	default:
		return fmt.Errorf("%s.rope.scaling.type %q is not supported (none, linear, yarn, longrope)", arch, typ)
	}
	if !hasFreqs {
		return nil
	}
	ext, err := ggufFactors(freqs, c)
	if err != nil {
		return err
	}
	one := 1.0
	c.RopeScaling = &RopeParams{Type: "longrope", ShortFactor: ext, LongFactor: ext, AttentionFactor: &one}
	return nil
}

// ggufFactors reads a tensor of rope frequency divisors: F32, one positive
// value per rotated pair.
func ggufFactors(t *gguf.Tensor, c *Config) ([]float64, error) {
	dim := c.HeadDim / 2 // one factor per rotated pair
	if c.PartialRotaryFactor != 0 {
		dim = int(float64(c.HeadDim)*c.PartialRotaryFactor) / 2
	}
	if t.Type != gguf.TypeF32 || len(t.Dims) != 1 || t.Dims[0] != uint64(dim) {
		return nil, fmt.Errorf("tensor %q is %s %v, want F32 [%d]", t.Name, t.Type, t.Dims, dim)
	}
	v := make([]float32, dim)
	if err := gguf.Dequantize(v, t.Type, t.Data); err != nil {
		return nil, err
	}
	ext := make([]float64, dim)
	for i, x := range v {
		if !(x > 0) {
			return nil, fmt.Errorf("tensor %q: factor %d (%g) must be positive", t.Name, i, x)
		}
		ext[i] = float64(x)
	}
	return ext, nil
}

// ggufFloat sets *dst to the number under key when the file has it.
func ggufFloat(f *gguf.File, key string, dst *float64) error {
	v, ok, err := f.Float(key)
	if ok && err == nil {
		*dst = v
	}
	return err
}

// ggufSliding sets a sliding window of attention.sliding_window tokens (window
// when the key is absent; none when 0) on layer i when i % period < period-1,
// where period is attention.sliding_window_pattern (period when absent; 0: every
// layer slides). As llama.cpp's gemma2/gemma3 loaders read the pattern into a
// scalar (get_key_or_arr), a per-layer array there is ignored.
func ggufSliding(f *gguf.File, arch string, c *Config, window, period int) error {
	if v, ok, err := f.Uint(arch + ".attention.sliding_window"); err != nil {
		return err
	} else if ok {
		window = int(min(v, 1<<30))
	}
	if window == 0 {
		return nil
	}
	key := arch + ".attention.sliding_window_pattern"
	if i := slices.IndexFunc(f.KV, func(kv gguf.KV) bool { return kv.Key == key }); i >= 0 && f.KV[i].Type != gguf.TypeArray {
		v, _, err := f.Uint(key)
		if err != nil {
			return err
		}
		period = int(min(v, 1<<30))
	}
	c.SlidingWindow = &window
	c.LayerTypes = make([]string, c.NumLayers)
	for i := range c.LayerTypes {
		c.LayerTypes[i] = "full_attention"
		if period == 0 || i%period < period-1 {
			c.LayerTypes[i] = "sliding_attention"
		}
	}
	return nil
}

// ggufGemmaQueryScalar is the attention scale of llama.cpp's Gemma 2 and 3 as a
// query_pre_attn_scalar: the converter drops that key, and llama.cpp scales
// queries by 1/√key_length, or by 1/√(D/H) (integer D/H) for the 27B model,
// which it knows by its layer count (src/models/gemma2.cpp and gemma3.cpp,
// load_arch_hparams). For the released models this is query_pre_attn_scalar.
func ggufGemmaQueryScalar(c *Config, layers27B int) float64 {
	if c.NumLayers == layers27B {
		return float64(c.HiddenSize / c.NumHeads)
	}
	return float64(c.HeadDim)
}

// ggufGemma2 reads Gemma 2's keys as llama.cpp's loader does
// (src/models/gemma2.cpp): attn_logit_softcapping and final_logit_softcapping
// (50 and 30 when absent, always applied); a sliding window (4096 when absent)
// on the even layers (pattern 2 when absent); rope.freq_base_swa for the
// sliding layers when given (same scaling as the others); the query scale of
// ggufGemmaQueryScalar (27B: 46 layers).
func ggufGemma2(f *gguf.File, arch string, c *Config) error {
	c.AttnSoftcap, c.FinalSoftcap = 50, 30
	c.QueryPreAttnScalar = ggufGemmaQueryScalar(c, 46)
	full := c.rope()
	swa := full
	err := errors.Join(ggufFloat(f, arch+".attn_logit_softcapping", &c.AttnSoftcap),
		ggufFloat(f, arch+".final_logit_softcapping", &c.FinalSoftcap),
		ggufFloat(f, arch+".rope.freq_base_swa", &swa.Theta),
		ggufSliding(f, arch, c, 4096, 2))
	if swa.Theta != full.Theta && c.SlidingWindow != nil {
		c.RopeParameters = &RopeParams{ByType: map[string]RopeParams{"full_attention": full, "sliding_attention": swa}}
	}
	return err
}

// ggufGemma3 reads Gemma 3's keys as llama.cpp's loader does
// (src/models/gemma3.cpp): final_logit_softcapping (none when absent); with
// attention.sliding_window > 0, that window on layer i when i % 6 < 5 (or
// attention.sliding_window_pattern's period: the converter writes none, so
// layer_types beyond that pattern are lost), the sliding layers rotating with
// rope.freq_base_swa (10000 when absent) unscaled, the others with
// rope.freq_base and its scaling; the query scale of ggufGemmaQueryScalar
// (27B: 62 layers). There is no attention softcap.
func ggufGemma3(f *gguf.File, arch string, c *Config) error {
	c.QueryPreAttnScalar = ggufGemmaQueryScalar(c, 62)
	swa := RopeParams{Type: "default", Theta: 10000}
	err := errors.Join(ggufFloat(f, arch+".final_logit_softcapping", &c.FinalSoftcap),
		ggufFloat(f, arch+".rope.freq_base_swa", &swa.Theta),
		ggufSliding(f, arch, c, 0, 6))
	if c.SlidingWindow != nil {
		c.RopeParameters = &RopeParams{ByType: map[string]RopeParams{"full_attention": c.rope(), "sliding_attention": swa}}
	}
	return err
}

// ggufPhi3 reads Phi-3's keys as llama.cpp's loader does (src/models/phi3.cpp):
// attention.sliding_window is ignored (llama.cpp disables Phi-3's SWA); the
// 128k models' tensors rope_factors_long and rope_factors_short, with
// rope.scaling.attn_factor (1 when absent) and
// rope.scaling.original_context_length, become longrope scaling: the short
// factors while the context fits the original length, else the long ones
// (llama_model::get_rope_factors).
func ggufPhi3(f *gguf.File, arch string, c *Config) error {
	long, hasLong := f.Tensor("rope_factors_long.weight")
	short, hasShort := f.Tensor("rope_factors_short.weight")
	switch {
	case !hasLong && !hasShort:
		return nil
	case !hasLong:
		return errors.New(`missing tensor "rope_factors_long.weight" (there is "rope_factors_short.weight")`)
	case !hasShort:
		return errors.New(`missing tensor "rope_factors_short.weight" (there is "rope_factors_long.weight")`)
	case c.RopeScaling != nil:
		return fmt.Errorf("%s.rope.scaling.type %q together with tensor %q is not supported", arch, c.RopeScaling.Type, "rope_factors_long.weight")
	}
	lf, err := ggufFactors(long, c)
	if err != nil {
		return err
	}
	sf, err := ggufFactors(short, c)
	if err != nil {
		return err
	}
	attn := 1.0
	if err := ggufFloat(f, arch+".rope.scaling.attn_factor", &attn); err != nil {
		return err
	}
	orig, _, err := f.Uint(arch + ".rope.scaling.original_context_length")
	if err != nil {
		return err
	}
	c.OriginalMaxPos = int(min(orig, 1<<30))
	c.RopeScaling = &RopeParams{Type: "longrope", LongFactor: lf, ShortFactor: sf, AttentionFactor: &attn, OriginalMax: c.OriginalMaxPos}
	return nil
}

// ggufEOGTexts are the token texts llama.cpp's loader treats as end of
// generation whatever the metadata says: end-of-turn and end-of-text markers,
// and the fill-in-the-middle pad, repo and file-separator tokens.
var ggufEOGTexts = []string{
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
	"<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>", "</s>",
	"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
	"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
	"<|file_sep|>", "<fim-sep>", "<SEP>",
}

// ggufEOS returns the end-of-generation ids as llama.cpp finds them: EOS, EOT
// and EOM where the metadata names them, and every token whose text is in
// ggufEOGTexts. They are sorted.
func ggufEOS(f *gguf.File) ([]int32, error) {
	var ids []int32
	for _, k := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		v, ok, err := f.Uint(k)
		if err != nil {
			return nil, err
		}
		if ok && v <= 1<<30 {
			ids = append(ids, int32(v))
		}
	}
	tokens, _, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, err
	}
	for i, s := range tokens {
		if slices.Contains(ggufEOGTexts, s) {
			ids = append(ids, int32(i))
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// ggufShapes returns the (rows, cols) of every GGUF tensor the architecture
// reads (cols 0 for a vector of rows values), and which are required.
func ggufShapes(c *Config) map[string]struct {
	rows, cols int
	required   bool
} {
	type shape = struct {
		rows, cols int
		required   bool
	}
	a := architectures[c.Arch()]
	D, F, V := c.HiddenSize, c.IntermediateSize, c.VocabSize
	q, kv, Dh := c.NumHeads*c.HeadDim, c.NumKVHeads*c.HeadDim, c.HeadDim
	s := map[string]shape{
		"token_embd.weight": {V, D, true}, "output.weight": {V, D, false}, "output_norm.weight": {D, 0, true},
	}
	for i := range c.NumLayers {
		p := fmt.Sprintf("blk.%d.", i)
		for name, sh := range map[string]shape{
			"attn_norm.weight": {D, 0, true}, "attn_output.weight": {D, q, true}, "ffn_norm.weight": {D, 0, true},
			"ffn_down.weight": {D, F, true},
		} {
			s[p+name] = sh
		}
		if a.fusedPhi3 { // q, k, v rows in one; gate then up rows in one
			s[p+"attn_qkv.weight"], s[p+"ffn_up.weight"] = shape{q + 2*kv, D, true}, shape{2 * F, D, true}
		} else {
			s[p+"attn_q.weight"], s[p+"attn_k.weight"], s[p+"attn_v.weight"] = shape{q, D, true}, shape{kv, D, true}, shape{kv, D, true}
			s[p+"ffn_gate.weight"], s[p+"ffn_up.weight"] = shape{F, D, true}, shape{F, D, true}
		}
		if a.sandwich {
			s[p+"post_attention_norm.weight"], s[p+"post_ffw_norm.weight"] = shape{D, 0, true}, shape{D, 0, true}
		}
		if a.qkvBias {
			s[p+"attn_q.bias"], s[p+"attn_k.bias"], s[p+"attn_v.bias"] = shape{q, 0, true}, shape{kv, 0, true}, shape{kv, 0, true}
		}
		if a.qkNorm {
			s[p+"attn_q_norm.weight"], s[p+"attn_k_norm.weight"] = shape{Dh, 0, true}, shape{Dh, 0, true}
		}
	}
	return s
}

// hfName returns the Hugging Face name of a GGUF tensor, or "" if ingot has
// none; names are the architecture's own per-layer names (ggufArch.names).
func hfName(name string, layers int, names map[string]string) string {
	if n, ok := ggufGlobal[name]; ok {
		return n
	}
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return ""
	}
	i, suffix, ok := strings.Cut(rest, ".")
	n, known := names[suffix]
	if !known {
		n, known = ggufLayer[suffix]
	}
	var layer int
	if _, err := fmt.Sscanf(i, "%d", &layer); err != nil || !ok || !known || layer < 0 || layer >= layers || fmt.Sprint(layer) != i {
		return ""
	}
	return fmt.Sprintf("model.layers.%d.%s", layer, n)
}

// ggufWeights turns the tensors of f into the loader's safetensors-shaped
// entries under Hugging Face names, checking each against the config first so
// that errors name the GGUF tensor. Q8_0, Q4_0, Q4_K, Q5_K and Q6_K matrices
// stay the blocks as stored (see ggufNative); other block types become U32 codes with
// f32 scales and biases (one override per module in the returned quantConfig);
// F32/F16/BF16 stay views of the file. q and k rows are un-permuted when the
// converter permuted them. Tensors ingot does not read keep their GGUF names,
// so the loader reports them as unused.
func ggufWeights(f *gguf.File, c *Config, a ggufArch) (*weightFiles, *quantConfig, error) {
	w := &weightFiles{tensors: map[string]*stTensor{}, maps: f.Maps(), largest: make([]int, len(f.Maps()))}
	quant := &quantConfig{override: map[string]*quantConfig{}}
	shapes := ggufShapes(c)
	var errs []error
	for name, sh := range shapes {
		if _, ok := f.Tensor(name); !ok && sh.required {
			errs = append(errs, fmt.Errorf("missing tensor %q", name))
		}
	}
	for _, t := range f.Tensors {
		w.largest[t.Split] = max(w.largest[t.Split], len(t.Data))
		sh, want := shapes[t.Name]
		hf := hfName(t.Name, c.NumLayers, a.names)
		if !want || hf == "" {
			if !slices.Contains(ggufFolded, t.Name) {
				w.tensors[t.Name] = &stTensor{Name: t.Name, DType: t.Type.String(), Data: t.Data}
			}
			continue
		}
		if err := ggufTensor(w, quant, t, hf, sh.rows, sh.cols, c, a.permuted); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return nil, nil, errors.Join(errs...)
	}
	return w, quant, nil
}

// ggufTensor adds one GGUF tensor to w under its Hugging Face name hf.
func ggufTensor(w *weightFiles, quant *quantConfig, t *gguf.Tensor, hf string, rows, cols int, c *Config, permuted bool) error {
	want := []uint64{uint64(rows)}
	if cols > 0 {
		want = []uint64{uint64(cols), uint64(rows)}
	}
	if !slices.Equal(t.Dims, want) {
		return fmt.Errorf("tensor %q has dimensions %v, the metadata implies %v", t.Name, t.Dims, want)
	}
	if cols == 0 { // a vector: always f32
		cols, rows = rows, 1
	}
	data := t.Data
	if heads := ggufPermutedHeads(t.Name, c, permuted); heads > 0 && rows > 1 {
		data = unpermute(data, heads, rows, t.Type.RowBytes(cols))
		w.release(t.Data) // read once: the rows in order are the copy
	} else if heads > 0 { // a q or k bias: one row of per-head values
		data = unpermute(data, heads, cols, t.Type.RowBytes(1))
	}
	st := &stTensor{Name: t.Name, Data: data, File: t.Name}
	switch t.Type {
	case gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16:
		st.DType = map[gguf.Type]string{gguf.TypeF32: "F32", gguf.TypeF16: "F16", gguf.TypeBF16: "BF16"}[t.Type]
		st.Shape = []int{rows, cols}
		if rows == 1 {
			st.Shape = []int{cols}
		}
		w.tensors[hf] = st
		return nil
	}
	if _, _, ok := gguf.AffineBits(t.Type); !ok {
		return fmt.Errorf("tensor %q: type %s is not supported (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K…Q6_K)", t.Name, t.Type)
	}
	if _, ok := ggufNative[t.Type]; ok && rows > 1 { // the blocks as stored (see ggufBlockMatrix)
		st.DType, st.Shape = t.Type.String(), []int{rows, cols}
		w.tensors[hf] = st
		return nil
	}
	if rows == 1 { // a quantized vector: de-quantize it
		v := make([]float32, cols)
		if err := gguf.Dequantize(v, t.Type, data); err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		st.DType, st.Shape, st.Data = "F32", []int{cols}, bytesOfF32(v)
		w.tensors[hf] = st
		return nil
	}
	a, err := gguf.ToAffine(t.Type, data, rows, cols)
	if err != nil {
		return fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	module := strings.TrimSuffix(hf, ".weight")
	quant.override[module] = &quantConfig{Bits: a.Bits, GroupSize: a.GroupSize}
	groups := cols / a.GroupSize
	st.DType, st.Shape, st.Data = "U32", []int{rows, cols * a.Bits / 32}, bytesOf(a.Codes)
	w.tensors[hf] = st
	w.tensors[module+".scales"] = &stTensor{Name: t.Name + " (scales)", DType: "F32", Shape: []int{rows, groups}, Data: bytesOfF32(a.Scales)}
	w.tensors[module+".biases"] = &stTensor{Name: t.Name + " (biases)", DType: "F32", Shape: []int{rows, groups}, Data: bytesOfF32(a.Biases)}
	return nil
}

// ggufNative maps the GGUF block types the kernels run as stored to their
// dtypes. Matrices of these types keep the file's blocks (mapped, not copied,
// where the backend can bind them); other block types become MLX affine codes
// (see gguf.ToAffine).
var ggufNative = map[gguf.Type]kernels.DType{
	gguf.TypeQ8_0: kernels.DTypeQ8_0, gguf.TypeQ4_0: kernels.DTypeQ4_0,
	gguf.TypeQ4_K: kernels.DTypeQ4K, gguf.TypeQ5_K: kernels.DTypeQ5K, gguf.TypeQ6_K: kernels.DTypeQ6K,
}

// ggufBlockDType returns the dtype of a loader entry holding a GGUF block type
// as stored (its DType is the GGUF type's name, "Q4_K"), or false.
func ggufBlockDType(name string) (kernels.DType, bool) {
	for t, dt := range ggufNative {
		if t.String() == name {
			return dt, true
		}
	}
	return 0, false
}

// ggufBlockMatrix returns the host tensor of a GGUF block-type matrix
// (rows, cols) held as stored.
func ggufBlockMatrix(st *stTensor, dt kernels.DType, rows, cols int) (*kernels.Tensor, error) {
	if !slices.Equal(st.Shape, []int{rows, cols}) || len(st.Data) != rows*dt.RowBytes(cols) {
		return nil, fmt.Errorf("model: tensor %q is %s %v (%d bytes), the config implies [%d %d] (%d bytes)",
			st.Name, st.DType, st.Shape, len(st.Data), rows, cols, rows*dt.RowBytes(cols))
	}
	return &kernels.Tensor{DType: dt, Shape: []int{rows, cols}, Data: st.Data}, nil
}

// ggufNativeMix names the tensor types of a GGUF file that the kernels run as
// stored and those rewritten as affine codes at load, with their counts:
// "Q4_K×13 Q6_K×3", "Q5_0×7" ("" for none). F32/F16/BF16 are neither.
func ggufNativeMix(f *gguf.File) (native, affine string) {
	var nat, aff []string
	n := map[gguf.Type]int{}
	for _, t := range f.Tensors {
		if t.Type.BlockSize() > 1 && len(t.Dims) == 2 {
			n[t.Type]++
		}
	}
	types := slices.Sorted(maps.Keys(n))
	for _, t := range types {
		if _, ok := ggufNative[t]; ok {
			nat = append(nat, fmt.Sprintf("%s×%d", t, n[t]))
		} else {
			aff = append(aff, fmt.Sprintf("%s×%d", t, n[t]))
		}
	}
	return strings.Join(nat, " "), strings.Join(aff, " ")
}

// ggufPermutedHeads returns the head count of a q or k tensor whose rows the
// converter permuted, else 0.
func ggufPermutedHeads(name string, c *Config, permuted bool) int {
	if !permuted {
		return 0
	}
	switch {
	case strings.HasSuffix(name, ".attn_q.weight"), strings.HasSuffix(name, ".attn_q.bias"):
		return c.NumHeads
	case strings.HasSuffix(name, ".attn_k.weight"), strings.HasSuffix(name, ".attn_k.bias"):
		return c.NumKVHeads
	}
	return 0
}

// unpermute undoes convert_hf_to_gguf.py's q/k permutation for interleaved
// RoPE. Within each of heads blocks of Dh = rows/heads rows, HF row j < Dh/2
// (paired with j + Dh/2 by rotate-half RoPE) was stored at row 2j and HF row
// Dh/2 + j at row 2j+1; this puts every row back, so ingot's NEOX rotation
// applies. rowBytes is the size of one row; the result is a new buffer.
func unpermute(data []byte, heads, rows, rowBytes int) []byte {
	out := make([]byte, len(data))
	dh := rows / heads
	for h := range heads {
		for r := range dh {
			src := 2 * r
			if r >= dh/2 {
				src = 2*(r-dh/2) + 1
			}
			d, s := (h*dh+r)*rowBytes, (h*dh+src)*rowBytes
			copy(out[d:d+rowBytes], data[s:s+rowBytes])
		}
	}
	return out
}

// bytesOfF32 views a []float32 as little-endian bytes (no copy).
func bytesOfF32(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

// estimateGGUF is [Estimate] for a GGUF file: the weights as the loader will
// hold them (Q8_0, Q4_0, Q4_K, Q5_K and Q6_K as stored; other block types as
// codes plus f32 scales and biases; float
// tensors as stored, or quantized by o.Quant like a safetensors directory).
func estimateGGUF(path string, o Options, so SessionOptions) (weights, session int64, err error) {
	f, err := gguf.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("model: %w", err)
	}
	defer f.Close()
	cfg, _, err := ggufConfig(f)
	if err != nil {
		return 0, 0, fmt.Errorf("model: %s: %w", path, err)
	}
	for _, t := range f.Tensors {
		if slices.Contains(ggufFolded, t.Name) {
			continue // folded into the config
		}
		rows, cols := t.Rows()
		bits, group, ok := gguf.AffineBits(t.Type)
		_, native := ggufNative[t.Type]
		switch {
		case native && len(t.Dims) == 2 && group == 32 && (bits == 4 || bits == 8):
			// Q4_0, Q8_0: the CPU backend's affine form, codes and an f16
			// scale and bias a block (cpu.PrepareKQuant), not smaller as stored
			weights += int64(rows) * int64(cols) * int64(bits*group+32) / int64(8*group)
		case native && len(t.Dims) == 2 && t.Type == gguf.TypeQ4_K:
			// the CPU backend's affine form: the codes, a byte of scale and
			// of min a 32-group and an f16 d and dmin for each half of a
			// stripe of 16 groups, a last half stripe's twice (cpu.PrepareKQuant)
			weights += int64(rows) * (int64(cols)/2 + 2*(int64(cols)/32+4*((int64(cols)/32+15)/16)))
		case native && len(t.Dims) == 2: // the blocks as stored
			weights += int64(len(t.Data))
		case ok && len(t.Dims) == 2:
			weights += int64(rows) * int64(cols) * int64(bits*group+64) / int64(8*group)
		case o.Quant > 0 && len(t.Dims) == 2:
			weights += int64(len(t.Data)) * int64(o.Quant+1) / 16
		default:
			weights += int64(len(t.Data))
		}
	}
	if err := so.fill(cfg); err != nil {
		return 0, 0, err
	}
	return weights, cacheBytes(cfg, so.Context, so.KV) + actsBytes(cfg, min(so.Batch, so.Context)) + actsBytes(cfg, 1), nil
}
