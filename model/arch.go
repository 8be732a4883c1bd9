package model

// arch holds the block-structure switches of one Hugging Face architecture.
// Everything else (GQA, head_dim, rope scaling, sliding windows, softcaps, biases)
// comes from config.json.
type arch struct {
	qkvBias    bool // q/k/v projections always have biases (Qwen2)
	qkNorm     bool // RMSNorm over each q and k head before RoPE (Qwen3, Gemma 3)
	gemma      bool // norms apply (1+w); embeddings × √D; GeGLU by default
	sandwich   bool // post-attention and pre/post-feedforward norms (Gemma 2, 3)
	fusedPhi3  bool // qkv_proj and gate_up_proj are stored fused (Phi-3)
	gptOss     bool // attention sinks; experts fused and input-major, biased, clamped SwiGLU, top-k then softmax
	qwen35     bool // (1+w) norms; gated attention (q_proj: each head's query, then its gate); linear-attention layers
	defaultAct string
}

// architectures is every architecture ingot runs: one row per HF "architectures" entry.
var architectures = map[string]arch{
	"LlamaForCausalLM":      {defaultAct: "silu"},
	"MistralForCausalLM":    {defaultAct: "silu"},
	"Qwen2ForCausalLM":      {defaultAct: "silu", qkvBias: true}, // config.json omits attention_bias; mlx-lm qwen2.py hard-codes it
	"Qwen3ForCausalLM":      {defaultAct: "silu", qkNorm: true},
	"Qwen3MoeForCausalLM":   {defaultAct: "silu", qkNorm: true}, // experts: Config.sparse
	"GemmaForCausalLM":      {defaultAct: "gelu_pytorch_tanh", gemma: true},
	"Gemma2ForCausalLM":     {defaultAct: "gelu_pytorch_tanh", gemma: true, sandwich: true},
	"Gemma3ForCausalLM":     {defaultAct: "gelu_pytorch_tanh", gemma: true, sandwich: true, qkNorm: true}, // sliding layers' own RoPE: Config.localRope
	"Phi3ForCausalLM":       {defaultAct: "silu", fusedPhi3: true},
	"GptOssForCausalLM":     {defaultAct: "silu", gptOss: true},
	"Qwen3_5ForCausalLM":    {defaultAct: "silu", qkNorm: true, qwen35: true},
	"Qwen3_5MoeForCausalLM": {defaultAct: "silu", qkNorm: true, qwen35: true}, // experts (renormalized), a shared expert
}
