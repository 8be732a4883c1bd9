package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Config is the part of a Hugging Face config.json that Llama-family models need.
// Both the transformers-5 form (rope_parameters, dtype) and the legacy form
// (rope_theta + rope_scaling, torch_dtype) load. Zero values are filled by
// applyDefaults; validate reports every problem at once.
type Config struct {
	Architectures    []string `json:"architectures"`
	ModelType        string   `json:"model_type"`
	HiddenSize       int      `json:"hidden_size"`         // D
	IntermediateSize int      `json:"intermediate_size"`   // F
	NumLayers        int      `json:"num_hidden_layers"`   //
	NumHeads         int      `json:"num_attention_heads"` // H
	NumKVHeads       int      `json:"num_key_value_heads"` // Hkv; 0 means H
	HeadDim          int      `json:"head_dim"`            // Dh; 0 means D/H
	VocabSize        int      `json:"vocab_size"`          // V
	RMSNormEps       float32  `json:"rms_norm_eps"`
	MaxPositions     int      `json:"max_position_embeddings"`
	OriginalMaxPos   int      `json:"original_max_position_embeddings"` // Phi-3 longrope
	TieEmbeddings    *bool    `json:"tie_word_embeddings"`              // nil: tied iff lm_head.weight is absent
	AttentionBias    bool     `json:"attention_bias"`                   // q/k/v/o biases (Llama); Qwen2 has q/k/v biases always
	MLPBias          bool     `json:"mlp_bias"`
	HiddenAct        string   `json:"hidden_act"`
	HiddenActivation string   `json:"hidden_activation"` // Gemma 2 (and some Gemma) name for hidden_act

	RopeParameters      *RopeParams `json:"rope_parameters"`      // transformers 5
	RopeTheta           float64     `json:"rope_theta"`           // legacy
	RopeScaling         *RopeParams `json:"rope_scaling"`         // legacy
	RopeLocalBaseFreq   float64     `json:"rope_local_base_freq"` // legacy Gemma 3: θ of the sliding layers
	PartialRotaryFactor float64     `json:"partial_rotary_factor"`

	SlidingWindow    *int     `json:"sliding_window"`
	UseSlidingWindow *bool    `json:"use_sliding_window"`     // Qwen2/3
	MaxWindowLayers  int      `json:"max_window_layers"`      // Qwen2/3
	LayerTypes       []string `json:"layer_types"`            // "sliding_attention" | "full_attention"
	SlidingPattern   int      `json:"sliding_window_pattern"` // legacy Gemma 3: every n-th layer is full, the rest slide

	TextConfig json.RawMessage `json:"text_config"` // …ForConditionalGeneration: the language model's config

	// Linear-attention layers (Qwen3.5's Gated DeltaNet): nk key heads of dk,
	// nv value heads of dv, a causal convolution of K taps.
	LinearConvKernel int `json:"linear_conv_kernel_dim"` // K
	LinearKeyHeads   int `json:"linear_num_key_heads"`   // nk
	LinearKeyDim     int `json:"linear_key_head_dim"`    // dk
	LinearValueHeads int `json:"linear_num_value_heads"` // nv
	LinearValueDim   int `json:"linear_value_head_dim"`  // dv

	// Mixture of experts (Qwen3-MoE): E experts of Fe, k a token.
	NumExperts               int   `json:"num_experts"`                     // E
	NumLocalExperts          int   `json:"num_local_experts"`               // E (another name)
	ExpertsPerToken          int   `json:"num_experts_per_tok"`             // k
	MoEIntermediate          int   `json:"moe_intermediate_size"`           // Fe
	NormTopKProb             bool  `json:"norm_topk_prob"`                  // renormalize the k routing weights
	DecoderSparseStep        int   `json:"decoder_sparse_step"`             // every n-th layer is sparse
	MLPOnlyLayers            []int `json:"mlp_only_layers"`                 // dense layers all the same
	SharedExpertIntermediate int   `json:"shared_expert_intermediate_size"` // Qwen3.5-MoE: a shared expert of this width; 0: none

	QueryPreAttnScalar float64 `json:"query_pre_attn_scalar"`   // Gemma 2: attention scale is its -½ power
	AttnSoftcap        float64 `json:"attn_logit_softcapping"`  // Gemma 2
	FinalSoftcap       float64 `json:"final_logit_softcapping"` // Gemma 2

	DType      string `json:"dtype"`
	TorchDType string `json:"torch_dtype"`

	BOSTokenID json.RawMessage `json:"bos_token_id"`
	EOSTokenID json.RawMessage `json:"eos_token_id"` // an int or a list

	Quantization       json.RawMessage `json:"quantization"`        // mlx-lm
	QuantizationConfig json.RawMessage `json:"quantization_config"` // mlx-lm (newer) or other tools
}

// RopeParams is rope_parameters (transformers 5) or rope_scaling (legacy).
// transformers 5 writes Gemma 3's as one object per layer type
// ({"full_attention": {…}, "sliding_attention": {…}}): ByType holds those.
type RopeParams struct {
	ByType map[string]RopeParams `json:"-"`

	Type                string    `json:"rope_type"`
	LegacyType          string    `json:"type"`
	Theta               float64   `json:"rope_theta"`
	Factor              float64   `json:"factor"`
	LowFreqFactor       float64   `json:"low_freq_factor"`
	HighFreqFactor      float64   `json:"high_freq_factor"`
	OriginalMax         int       `json:"original_max_position_embeddings"`
	PartialRotaryFactor float64   `json:"partial_rotary_factor"`
	AttentionFactor     *float64  `json:"attention_factor"`
	BetaFast            float64   `json:"beta_fast"`
	BetaSlow            float64   `json:"beta_slow"`
	MScale              float64   `json:"mscale"`
	MScaleAllDim        float64   `json:"mscale_all_dim"`
	Truncate            *bool     `json:"truncate"`
	LongFactor          []float64 `json:"long_factor"`  // longrope
	ShortFactor         []float64 `json:"short_factor"` // longrope
}

// UnmarshalJSON reads a rope parameter object, or one per layer type.
func (p *RopeParams) UnmarshalJSON(b []byte) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err == nil {
		if _, full := keys["full_attention"]; full || keys["sliding_attention"] != nil {
			p.ByType = map[string]RopeParams{}
			for k, v := range keys {
				var t RopeParams
				if err := json.Unmarshal(v, &t); err != nil {
					return fmt.Errorf("rope_parameters.%s: %w", k, err)
				}
				p.ByType[k] = t
			}
			return nil
		}
	}
	type plain RopeParams // no UnmarshalJSON: no recursion
	return json.Unmarshal(b, (*plain)(p))
}

// conditionalGeneration maps a multimodal checkpoint's architecture to the
// language model's, whose settings its text_config holds.
var conditionalGeneration = map[string]string{
	"Gemma3ForConditionalGeneration":     "Gemma3ForCausalLM",
	"Qwen3_5ForConditionalGeneration":    "Qwen3_5ForCausalLM",
	"Qwen3_5MoeForConditionalGeneration": "Qwen3_5MoeForCausalLM",
}

// loadConfig reads and validates dir/config.json.
func loadConfig(dir string) (*Config, error) {
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("model: no config.json in %s (a Hugging Face model directory holds config.json, *.safetensors and tokenizer.json)", dir)
		}
		return nil, fmt.Errorf("model: %w", err)
	}
	c, err := parseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", path, err)
	}
	return c, nil
}

// parseConfig decodes config.json, fills defaults and validates.
func parseConfig(b []byte) (*Config, error) {
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	if text, ok := conditionalGeneration[c.Arch()]; ok {
		if len(c.TextConfig) == 0 || string(c.TextConfig) == "null" {
			return nil, fmt.Errorf("text_config is missing (architecture %s keeps the language model's settings there)", c.Arch())
		}
		var t Config
		if err := json.Unmarshal(c.TextConfig, &t); err != nil {
			return nil, fmt.Errorf("text_config: %w", err)
		}
		t.Architectures, t.TextConfig = []string{text}, nil
		if len(t.EOSTokenID) == 0 {
			t.EOSTokenID = c.EOSTokenID
		}
		if len(t.BOSTokenID) == 0 {
			t.BOSTokenID = c.BOSTokenID
		}
		if t.TieEmbeddings == nil {
			t.TieEmbeddings = c.TieEmbeddings
		}
		t.Quantization, t.QuantizationConfig = c.Quantization, c.QuantizationConfig
		c = t
	}
	c.applyDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) applyDefaults() {
	if c.NumKVHeads == 0 {
		c.NumKVHeads = c.NumHeads
	}
	if c.HeadDim == 0 && c.NumHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumHeads
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-6
	}
	if c.NumExperts == 0 {
		c.NumExperts = c.NumLocalExperts
	}
	if c.DecoderSparseStep == 0 {
		c.DecoderSparseStep = 1
	}
	if c.NumExperts > 0 && c.MoEIntermediate == 0 {
		c.MoEIntermediate = c.IntermediateSize // gpt-oss, Mixtral: the experts' width
	}
	if c.NumExperts > 0 && c.IntermediateSize == 0 {
		c.IntermediateSize = c.MoEIntermediate // Qwen3.5-MoE: no dense layer, none given
	}
	if len(c.LayerTypes) == 0 && c.SlidingPattern > 0 && c.NumLayers > 0 && c.NumLayers <= 4096 {
		c.LayerTypes = make([]string, c.NumLayers) // every SlidingPattern-th layer is full
		for i := range c.LayerTypes {
			c.LayerTypes[i] = "sliding_attention"
			if (i+1)%c.SlidingPattern == 0 {
				c.LayerTypes[i] = "full_attention"
			}
		}
	}
}

func (c *Config) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(c.Architectures) == 0 {
		bad("architectures is missing")
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumLayers}, {"num_attention_heads", c.NumHeads},
		{"num_key_value_heads", c.NumKVHeads}, {"head_dim", c.HeadDim}, {"vocab_size", c.VocabSize},
	} {
		if f.v <= 0 {
			bad("%s (%d) must be positive", f.name, f.v)
		}
	}
	const big = 1 << 20
	if c.HiddenSize > big || c.IntermediateSize > big || c.NumLayers > 4096 || c.NumHeads > 4096 || c.HeadDim > 4096 || c.VocabSize > 1<<24 {
		bad("dimensions out of range (hidden_size %d, intermediate_size %d, num_hidden_layers %d, num_attention_heads %d, head_dim %d, vocab_size %d)",
			c.HiddenSize, c.IntermediateSize, c.NumLayers, c.NumHeads, c.HeadDim, c.VocabSize)
	}
	if c.NumHeads > 0 && c.NumKVHeads > 0 && c.NumHeads%c.NumKVHeads != 0 {
		bad("num_attention_heads (%d) must be divisible by num_key_value_heads (%d)", c.NumHeads, c.NumKVHeads)
	}
	if c.HeadDim%2 != 0 {
		bad("head_dim (%d) must be even", c.HeadDim)
	}
	if c.RMSNormEps < 0 || math.IsNaN(float64(c.RMSNormEps)) {
		bad("rms_norm_eps (%g) must not be negative", c.RMSNormEps)
	}
	if c.SlidingWindow != nil && *c.SlidingWindow < 0 {
		bad("sliding_window (%d) must not be negative", *c.SlidingWindow)
	}
	if len(c.LayerTypes) > 0 && len(c.LayerTypes) != c.NumLayers {
		bad("layer_types has %d entries for num_hidden_layers %d", len(c.LayerTypes), c.NumLayers)
	}
	for i, t := range c.LayerTypes {
		if t != "sliding_attention" && t != "full_attention" && t != "linear_attention" {
			bad("layer_types[%d] = %q is not sliding_attention, full_attention or linear_attention", i, t)
		}
	}
	if slices.Contains(c.LayerTypes, "linear_attention") {
		if c.LinearConvKernel < 1 || c.LinearConvKernel > 64 || c.LinearKeyHeads <= 0 || c.LinearKeyDim <= 0 || c.LinearKeyDim > 1024 ||
			c.LinearValueHeads <= 0 || c.LinearValueHeads > 1024 || c.LinearValueDim <= 0 || c.LinearValueDim > 1024 || c.LinearValueHeads%c.LinearKeyHeads != 0 {
			bad("linear attention out of range (linear_conv_kernel_dim %d, linear_num_key_heads %d, linear_key_head_dim %d, linear_num_value_heads %d, linear_value_head_dim %d)",
				c.LinearConvKernel, c.LinearKeyHeads, c.LinearKeyDim, c.LinearValueHeads, c.LinearValueDim)
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"query_pre_attn_scalar", c.QueryPreAttnScalar}, {"attn_logit_softcapping", c.AttnSoftcap}, {"final_logit_softcapping", c.FinalSoftcap}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			bad("%s (%g) must be a non-negative number", f.name, f.v)
		}
	}
	if c.NumExperts < 0 || c.NumExperts > 1<<16 || c.ExpertsPerToken < 0 || c.ExpertsPerToken > c.NumExperts ||
		c.MoEIntermediate < 0 || c.MoEIntermediate > big || c.DecoderSparseStep < 0 || c.SharedExpertIntermediate < 0 || c.SharedExpertIntermediate > big {
		bad("experts out of range (num_experts %d, num_experts_per_tok %d, moe_intermediate_size %d, decoder_sparse_step %d)",
			c.NumExperts, c.ExpertsPerToken, c.MoEIntermediate, c.DecoderSparseStep)
	} else if c.NumExperts > 0 && (c.ExpertsPerToken == 0 || c.MoEIntermediate == 0) {
		bad("num_experts %d needs num_experts_per_tok and moe_intermediate_size (got %d, %d)", c.NumExperts, c.ExpertsPerToken, c.MoEIntermediate)
	}
	if _, err := c.EOSTokenIDs(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// linear reports whether layer i is a linear-attention (Gated DeltaNet) layer.
func (c *Config) linear(i int) bool {
	return len(c.LayerTypes) > i && c.LayerTypes[i] == "linear_attention"
}

// sparse reports whether layer i is a mixture-of-experts layer.
func (c *Config) sparse(i int) bool {
	return c.NumExperts > 0 && !slices.Contains(c.MLPOnlyLayers, i) && (i+1)%c.DecoderSparseStep == 0
}

// Arch returns the first entry of architectures.
func (c *Config) Arch() string {
	if len(c.Architectures) == 0 {
		return ""
	}
	return c.Architectures[0]
}

// Activation returns the hidden activation name (hidden_activation wins over hidden_act).
func (c *Config) Activation() string {
	if c.HiddenActivation != "" {
		return c.HiddenActivation
	}
	if c.HiddenAct == "" {
		return "silu"
	}
	return c.HiddenAct
}

// rope returns the effective rope parameters of full-attention layers:
// rope_parameters, or the legacy rope_theta/rope_scaling/partial_rotary_factor
// merged into the same shape.
func (c *Config) rope() RopeParams { return c.ropeFor("full_attention") }

// localRope reports whether sliding layers have a rotary embedding of their
// own (Gemma 3), and returns its parameters.
func (c *Config) localRope() (RopeParams, bool) {
	if c.RopeParameters != nil && c.RopeParameters.ByType != nil {
		_, ok := c.RopeParameters.ByType["sliding_attention"]
		return c.ropeFor("sliding_attention"), ok
	}
	if c.RopeLocalBaseFreq > 0 {
		return c.ropeFor("sliding_attention"), true
	}
	return RopeParams{}, false
}

// ropeFor returns the rope parameters of layers of type typ
// ("full_attention", "sliding_attention").
func (c *Config) ropeFor(typ string) RopeParams {
	var p RopeParams
	switch {
	case c.RopeParameters != nil && c.RopeParameters.ByType != nil:
		p = c.RopeParameters.ByType[typ]
		if _, ok := c.RopeParameters.ByType[typ]; !ok {
			p = c.RopeParameters.ByType["full_attention"]
		}
	case typ == "sliding_attention" && c.RopeLocalBaseFreq > 0:
		p = RopeParams{Type: "default", Theta: c.RopeLocalBaseFreq} // legacy Gemma 3: no scaling
	case c.RopeParameters != nil:
		p = *c.RopeParameters
	case c.RopeScaling != nil:
		p = *c.RopeScaling
	}
	p.ByType = nil
	if p.Type == "" {
		p.Type = p.LegacyType
	}
	if p.Type == "" {
		p.Type = "default"
	}
	if p.Theta == 0 {
		p.Theta = c.RopeTheta
	}
	if p.Theta == 0 {
		p.Theta = 10000
	}
	if p.PartialRotaryFactor == 0 {
		p.PartialRotaryFactor = c.PartialRotaryFactor
	}
	if p.PartialRotaryFactor == 0 {
		p.PartialRotaryFactor = 1
	}
	return p
}

// EOSTokenIDs returns eos_token_id as a list (it may be an int, a list or null).
func (c *Config) EOSTokenIDs() ([]int32, error) { return tokenIDs("eos_token_id", c.EOSTokenID) }

func tokenIDs(field string, raw json.RawMessage) ([]int32, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return nil, nil
	}
	var one int64
	if err := json.Unmarshal(raw, &one); err == nil {
		if one < 0 || one > math.MaxInt32 {
			return nil, fmt.Errorf("%s (%d) out of range", field, one)
		}
		return []int32{int32(one)}, nil
	}
	var many []int64
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("%s: want an integer or a list of integers, got %s", field, s)
	}
	ids := make([]int32, len(many))
	for i, v := range many {
		if v < 0 || v > math.MaxInt32 {
			return nil, fmt.Errorf("%s[%d] (%d) out of range", field, i, v)
		}
		ids[i] = int32(v)
	}
	return ids, nil
}

// windowOf returns layer i's sliding window in tokens, 0 for full attention.
func (c *Config) windowOf(i int) int {
	if c.SlidingWindow == nil || *c.SlidingWindow == 0 {
		return 0
	}
	w := *c.SlidingWindow
	switch {
	case len(c.LayerTypes) > 0:
		if c.LayerTypes[i] == "sliding_attention" {
			return w
		}
		return 0
	case c.ModelType == "gemma2" || c.Arch() == "Gemma2ForCausalLM":
		if i%2 == 0 { // transformers < 5: even layers slide
			return w
		}
		return 0
	case c.UseSlidingWindow != nil: // Qwen2/3 without layer_types
		if *c.UseSlidingWindow && i >= c.MaxWindowLayers {
			return w
		}
		return 0
	}
	return w
}

// generationConfig is the part of generation_config.json ingot reads.
type generationConfig struct {
	BOSTokenID json.RawMessage `json:"bos_token_id"`
	EOSTokenID json.RawMessage `json:"eos_token_id"`
}

// loadEOS returns the EOS ids of generation_config.json, else config.json's.
func loadEOS(dir string, c *Config) ([]int32, error) {
	path := filepath.Join(dir, "generation_config.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c.EOSTokenIDs()
	}
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	var g generationConfig
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, fmt.Errorf("model: %s: %v", path, err)
	}
	ids, err := tokenIDs("eos_token_id", g.EOSTokenID)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", path, err)
	}
	if len(ids) == 0 {
		return c.EOSTokenIDs()
	}
	return ids, nil
}

// checkDir explains a model path that is not a directory: a GGUF file, a
// Hugging Face repo id not yet downloaded, or nothing at all.
func checkDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case err == nil && st.IsDir():
		return nil
	case err == nil && strings.EqualFold(filepath.Ext(dir), ".gguf"):
		return fmt.Errorf("model: %s is a GGUF file: GGUF is not supported yet (pass a Hugging Face or mlx-community model directory)", dir)
	case err == nil:
		return fmt.Errorf("model: %s is a file: pass the model directory (config.json, *.safetensors, tokenizer.json)", dir)
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("model: %w", err)
	case looksLikeRepoID(dir):
		return fmt.Errorf("model: no directory %s; it looks like a Hugging Face repo id: download it first, e.g. `huggingface-cli download %s --local-dir %s`, then pass -model %s",
			dir, dir, filepath.Base(dir), filepath.Base(dir))
	}
	return fmt.Errorf("model: no directory %s", dir)
}

// looksLikeRepoID reports whether p has the shape of a Hugging Face repo id,
// "owner/name", rather than of a path.
func looksLikeRepoID(p string) bool {
	owner, name, ok := strings.Cut(p, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") || strings.HasPrefix(owner, ".") || strings.HasPrefix(owner, "~") {
		return false
	}
	for _, r := range owner + name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}
