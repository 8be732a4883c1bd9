// Package kernels defines the operations a decoder forward pass needs and runs them
// on a device. It holds the op vocabulary ([Backend], [Tensor], [DType], [RoPE],
// [AttnParams]), the CPU backend (a thin adapter over the slice loops of package
// kernels/cpu) and, later, the Metal backend. It knows nothing of model files or
// tokenizers: see package model.
//
// Tensors are row-major; the last dimension is contiguous. Comments and locals use
// one shape vocabulary throughout ingot:
//
//	L    tokens in this forward call (sequence)
//	D    model width (hidden_size)
//	F    FFN width (intermediate_size)
//	H    query heads (num_attention_heads)
//	Hkv  key/value heads (num_key_value_heads)
//	Dh   head dim (head_dim)
//	V    vocabulary size (vocab_size)
//	pos  absolute position of the first token of the call
//
// Layers are NumLayers with index i (llm.c uses L for layers; ingot follows mlx-lm).
package kernels
