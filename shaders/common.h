// common.h: every struct passed from the host to a kernel with setBytes, in one
// place (ggml's ggml-metal-impl.h), and at the end the device functions that
// more than one shader file needs. Package kernels mirrors each struct in Go with
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

// matvec_nv_args (44 bytes): y_m (N_m) = x (K) · W_mᵀ for up to four matrices
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
    uint act;         // matvec_*_nv_glu: the activation (kernels.Act) of y = act(x·W_0ᵀ)·(x·W_1ᵀ)
};

// ---- activations: device functions of more than one kernel file (glu_*,
// and matvec_*_nv_glu, which applies them to its own outputs).

inline float ingot_erf(float x) {
    const float a = metal::clamp(x, -4.0f, 4.0f);
    const float x2 = a * a;
    float p = -2.72614225801306e-10f;
    p = metal::fma(x2, p, 2.77068142495902e-08f);
    p = metal::fma(x2, p, -2.10102402082508e-06f);
    p = metal::fma(x2, p, -5.69250639462346e-05f);
    p = metal::fma(x2, p, -7.34990630326855e-04f);
    p = metal::fma(x2, p, -2.95459980854025e-03f);
    p = metal::fma(x2, p, -1.60960333262415e-02f);
    p = a * p;
    float q = -1.45660718464996e-05f;
    q = metal::fma(x2, q, -2.13374055278905e-04f);
    q = metal::fma(x2, q, -1.68282697438203e-03f);
    q = metal::fma(x2, q, -7.37332916720468e-03f);
    q = metal::fma(x2, q, -1.42647390514189e-02f);
    return p / q;
}

struct act_silu {
    static float f(float x) { return x / (1.0f + metal::precise::exp(-x)); }
};
struct act_gelu_tanh { // as x·σ(2u): ½x(1 + tanh u) cancels to nothing below x ≈ −5
    static float f(float x) {
        const float c = 1.5957691216057308f; // 2√(2/π)
        return x / (1.0f + metal::precise::exp(-c * (x + 0.044715f * x * x * x)));
    }
};
struct act_sigmoid {
    static float f(float x) { return 1.0f / (1.0f + metal::precise::exp(-x)); }
};
struct act_gelu {
    static float f(float x) { return 0.5f * x * (1.0f + ingot_erf(x * 0.7071067811865476f)); }
};

// ingot_act applies the activation act (the order of kernels.Act: SiLU,
// GELU tanh, GELU, –, sigmoid) to x.
inline float ingot_act(uint act, float x) {
    switch (act) {
    case 1:
        return act_gelu_tanh::f(x);
    case 2:
        return act_gelu::f(x);
    case 4:
        return act_sigmoid::f(x);
    default:
        return act_silu::f(x);
    }
}

#endif // INGOT_SHADERS_COMMON_H
