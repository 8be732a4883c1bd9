// Package gguf reads GGUF files, the model format of llama.cpp: the header,
// the metadata key–value pairs, the tensor directory, and the tensor data,
// which stays in the memory-mapped file (no copy). Files split by
// llama-gguf-split (name-00001-of-00003.gguf) open as one [File].
//
// It also de-quantizes ggml's block types exactly as gguf-py (and ggml's own
// CPU de-quantizer) do ([Dequantize]), and rewrites each block type that is an
// affine code per group of columns as the MLX-style affine form ingot's kernels
// run ([ToAffine]), without changing a single value.
//
// Package gguf knows nothing of architectures or tokenizers: package model maps
// GGUF tensor names and metadata onto its weights and config, and package
// tokenize builds a tokenizer from the tokenizer.ggml.* keys.
package gguf
