// common.h: every struct passed from the host to a kernel with setBytes, in one
// place (ggml's ggml-metal-impl.h). Package kernels mirrors each struct in Go with
// the same field order and types; TestArgsLayout pins the sizes written here.
//
// Rules: only 4-byte scalar fields (uint, int, float), so Metal and Go agree on
// the layout without padding. Counts are elements, never bytes, unless the field
// name says _bytes.
#ifndef INGOT_SHADERS_COMMON_H
#define INGOT_SHADERS_COMMON_H

#include <metal_stdlib> // uint: common.h opens shaders.Source(), before any .metal file

// rmsnorm_args (8 bytes): normalize rows of n elements.
struct rmsnorm_args {
    uint  n;   // row width = len(w)
    float eps;
};

// matvec_args (16 bytes): y (L, N) = x (L, K) · Wᵀ with W (N, K).
// group_size is the affine quantization group (0 for float weights).
struct matvec_args {
    uint K;
    uint N;
    uint group_size;
    uint L;
};

// matmul_args (16 bytes): the same product, tiled for L > 1.
struct matmul_args {
    uint L;
    uint N;
    uint K;
    uint group_size;
};

// embed_args (16 bytes): y (L, D) = table[tokens]·scale.
struct embed_args {
    uint  D;
    uint  group_size;
    float scale;
    uint  L;
};

// rope_args (24 bytes): rotate x (L, cols) in place, heads of head_dim, the
// first 2·half elements of each head (neox pairing j ↔ j+half).
struct rope_args {
    uint  L;
    uint  cols;
    uint  head_dim;
    uint  half_rot;
    uint  pos;
    float scale;
};

// rope_store_args (32 bytes): rotate q (L, heads·head_dim) and k (L,
// kv_heads·head_dim) for positions [pos, pos+L) and store k and v (L,
// kv_heads·head_dim) into cache rows [pos, pos+L).
struct rope_store_args {
    uint  L;
    uint  heads;
    uint  kv_heads;
    uint  head_dim;
    uint  half_rot;
    uint  pos;
    float scale;
    uint  pad;
};

// conv_args (12 bytes): causal depthwise convolution of L rows of C channels
// with a kernel of K taps.
struct conv_args {
    uint L;
    uint C;
    uint K;
};

// delta_args (20 bytes): Qwen3.5's gated delta rule over L tokens, nk key
// heads of dk, nv value heads of dv.
struct delta_args {
    uint L;
    uint nk;
    uint dk;
    uint nv;
    uint dv;
};

// attn_args (64 bytes): causal GQA attention of q (L, heads·head_dim) over the
// KV cache k, v (≥ pos+L rows of kv_heads·head_dim). Query row l attends keys
// j ∈ [max(0, pos+l+1−window), pos+l+1) (window 0: from 0).
struct attn_args {
    uint  L;
    uint  pos;
    uint  heads;
    uint  kv_heads;
    uint  head_dim;
    float scale;      // multiplies q·k
    uint  window;     // 0: no sliding window
    float softcap;    // 0: none; else scores = softcap·tanh(scores/softcap)
    uint  rows;       // query rows per threadgroup (prefill tiles; 1 for decode)
    uint  splits;     // KV splits (flash-decoding); 1 for prefill
    uint  split_len;  // keys per split, a multiple of blk
    uint  blk;        // keys staged in threadgroup memory per step (≤ 32)
    uint  kstride;    // row stride of the staged K block (head_dim + 1: no bank conflicts)
    uint  key0;       // first key of split 0 (decode: the window's first key)
    uint  sinks;      // 1: sinks[h] (one logit per query head) joins each softmax's denominator
    uint  pad2;
};

// attn_reduce_args (16 bytes): combine the splits' partial softmax results.
struct attn_reduce_args {
    uint heads;
    uint head_dim;
    uint splits;
    uint rows;  // L·heads
    uint sinks; // as attn_args.sinks
};

// add_args (8 bytes): y[i] = a[i] + b[i % nb] for i < n.
struct add_args {
    uint n;
    uint nb;
};

// unary_args (8 bytes): elementwise ops over n elements with one parameter
// (softcap: c; glu, copy: unused).
struct unary_args {
    uint  n;
    float c;
};

// argmax_args (16 bytes): index of the largest of n floats.
struct argmax_args {
    uint n;
    uint pad0;
    uint pad1;
    uint pad2;
};

// topk_args (16 bytes): the k best of n elements (topk_f32) or pairs
// (topk_merge_f32), per chunk of 1024.
struct topk_args {
    uint n;
    uint k;
    uint pad0;
    uint pad1;
};

// matvec_nv_args (40 bytes): y_m (N_m) = x (K) · W_mᵀ for up to four matrices
// of one dtype, K and group (matvec_*_nv). Matrix m's rows are threadgroups
// [tg_m, tg_(m+1)) (tg_0 = 0; an unused matrix has tg_m = 0xffffffff).
struct matvec_nv_args {
    uint K;
    uint group_shift; // log2 of the group size
    uint lane_shift;  // log2 of the lanes that share a row (0 … 5)
    uint n0;
    uint n1;
    uint n2;
    uint n3;
    uint tg1;
    uint tg2;
    uint tg3;
};

#endif // INGOT_SHADERS_COMMON_H
