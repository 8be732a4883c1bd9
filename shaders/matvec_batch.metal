// matvec_batch.metal: y = x·Wᵀ for a few tokens at once (2 ≤ L ≤ 8): a
// batched decode step (sessions side by side) or a short prompt, where the
// mat-mat tiles of matmul.metal would leave most of a 32-token tile empty
// and matvec.metal would read the weights once per token.
//
// matvecb_<q4|q8>_f32_v16[_f16sb|_bf16sb] (MLX affine, groups of 32, 64 or
// 128; scales and biases f32, or f16/bf16 as MLX stores them),
// matvecb_<f32|f16|bf16>_f32_v8 and matvecb_<f32|f16|bf16>_f32: matvec.metal's
// matvec_q_v16, matvec_dense_v8 and matvec_dense with the token loop inside
// the kernel. Grid: (⌈N/8⌉, 1)
// threadgroups of 64 threads = 2 simdgroups; simdgroup s of threadgroup t
// owns weight rows n ∈ [8t + 4s, 8t + 4s + 4) for all L tokens. A lane's step
// loads its columns of the 4 rows once (16 codes a row: one 8- or 16-byte
// load for q4, q8; 8 weights: one or two 16-byte loads for dense) with their
// scales and biases, then runs every token against them: the weights are read
// once for up to 8 tokens, x (L·K floats, a few KB) from cache. 4·L float
// partials a lane, folded with simd_sum at the end.
//
// Numerics: for each token, each row's arithmetic is matvec.metal's
// single-row kernel's, expression for expression and in the same order
// (the lane's 16 or 8 columns, its step order, the bias fold against Σx, the
// simd_sum), so a token's output is bit for bit what the one-token mat-vec
// gives it, whatever the other tokens (batch invariance; tested on the
// interpreter; Apple's compiler is asked for the same expressions and
// contracts them alike unless it treats the two kernels differently, which
// no Mac has checked yet).
//
// The host uses _v16 exactly where it would use the single-row _v16 kernel
// (q4/q8 codes at even offsets, x 16-byte aligned), and _v8 where it would
// use _v8 (K a multiple of 8, w and x 16-byte aligned); matvecb_<w>_f32 takes
// any other dense weight with scalar loads. The three dense forms compute
// alike (matvec_dense_v8 sums as matvec_dense does), so where a dense weight
// sits in memory never changes a result.
#include <metal_stdlib>
#include "common.h"
using namespace metal;

#define MVB_ROWS 4 // weight rows per simdgroup (matvec.metal's MV_ROWS)
#define MVB_SG   2 // simdgroups per threadgroup (MV_SG)
#define MVB_MAXL 8 // tokens per dispatch at most

inline float mvb_to_f32(float v) { return v; }
inline float mvb_to_f32(half v) { return float(v); }
inline float mvb_to_f32(ushort v) { return as_type<float>(uint(v) << 16); }

// mvb_lo and mvb_hi widen 8 16-bit weights (one 16-byte load) to two float4,
// as matvec.metal's wv_lo and wv_hi.
inline float4 mvb_lo(uint4 u, half) { return float4(float2(as_type<half2>(u.x)), float2(as_type<half2>(u.y))); }
inline float4 mvb_hi(uint4 u, half) { return float4(float2(as_type<half2>(u.z)), float2(as_type<half2>(u.w))); }
inline float4 mvb_lo(uint4 u, ushort) {
    return float4(as_type<float>(u.x << 16), as_type<float>(u.x & 0xffff0000u), as_type<float>(u.y << 16), as_type<float>(u.y & 0xffff0000u));
}
inline float4 mvb_hi(uint4 u, ushort) {
    return float4(as_type<float>(u.z << 16), as_type<float>(u.z & 0xffff0000u), as_type<float>(u.w << 16), as_type<float>(u.w & 0xffff0000u));
}
inline float4 mvb_lo(uint4 u, float) { return as_type<float4>(u); } // f32 loads float4s itself: never called
inline float4 mvb_hi(uint4 u, float) { return as_type<float4>(u); }

// mvb_store folds the lanes' partials and writes y[t][r0 + r].
inline void mvb_store(device float * y, thread float (*acc)[MVB_MAXL], uint L, uint N, uint r0, ushort lane) {
    for (uint r = 0; r < MVB_ROWS; r++) {
        #pragma unroll
        for (uint t = 0; t < MVB_MAXL; t++) {
            if (t < L) {
                const float s = simd_sum(acc[r][t]);
                if (lane == 0 && r0 + r < N) {
                    y[(ulong)t * N + r0 + r] = s;
                }
            }
        }
    }
}

template <typename T>
kernel void matvecb_dense_v8(
        constant matvec_args & args [[buffer(0)]],
        device const T       * w    [[buffer(1)]],
        device const float   * x    [[buffer(2)]],
        device       float   * y    [[buffer(3)]],
        uint2  tg   [[threadgroup_position_in_grid]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    const uint K = args.K, N = args.N, L = min(args.L, (uint)MVB_MAXL);
    const uint r0 = (tg.x * MVB_SG + sg) * MVB_ROWS;
    float acc[MVB_ROWS][MVB_MAXL];
    for (uint r = 0; r < MVB_ROWS; r++) {
        for (uint t = 0; t < MVB_MAXL; t++) {
            acc[r][t] = 0.0f;
        }
    }
    for (uint k = lane * 8; k < K; k += 32 * 8) {
        float4 w0[MVB_ROWS], w1[MVB_ROWS];
        #pragma unroll
        for (uint r = 0; r < MVB_ROWS; r++) {
            w0[r] = w1[r] = float4(0.0f);
            if (r0 + r < N) {
                device const T * wr = w + (ulong)(r0 + r) * K + k;
                if (sizeof(T) == 4) {
                    w0[r] = *(device const float4 *)wr;
                    w1[r] = *(device const float4 *)(wr + 4);
                } else {
                    const uint4 u = *(device const uint4 *)wr;
                    w0[r] = mvb_lo(u, T(0));
                    w1[r] = mvb_hi(u, T(0));
                }
            }
        }
        #pragma unroll
        for (uint t = 0; t < MVB_MAXL; t++) {
            if (t < L) {
                device const float * xr = x + (ulong)t * K + k;
                const float4 x0 = *(device const float4 *)xr, x1 = *(device const float4 *)(xr + 4);
                #pragma unroll
                for (uint r = 0; r < MVB_ROWS; r++) {
                    if (r0 + r < N) {
                        acc[r][t] += dot(w0[r], x0) + dot(w1[r], x1);
                    }
                }
            }
        }
    }
    mvb_store(y, acc, L, N, r0, lane);
}

// matvecb_dense: matvecb_dense_v8 for any K and alignment, loading the 8
// columns one by one (zero past K), as matvec_dense does.
template <typename T>
kernel void matvecb_dense(
        constant matvec_args & args [[buffer(0)]],
        device const T       * w    [[buffer(1)]],
        device const float   * x    [[buffer(2)]],
        device       float   * y    [[buffer(3)]],
        uint2  tg   [[threadgroup_position_in_grid]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    const uint K = args.K, N = args.N, L = min(args.L, (uint)MVB_MAXL);
    const uint r0 = (tg.x * MVB_SG + sg) * MVB_ROWS;
    float acc[MVB_ROWS][MVB_MAXL];
    for (uint r = 0; r < MVB_ROWS; r++) {
        for (uint t = 0; t < MVB_MAXL; t++) {
            acc[r][t] = 0.0f;
        }
    }
    for (uint k = lane * 8; k < K; k += 32 * 8) {
        float wv[MVB_ROWS][8];
        #pragma unroll
        for (uint r = 0; r < MVB_ROWS; r++) {
            device const T * wr = w + (ulong)(r0 + r) * K + k;
            #pragma unroll
            for (uint i = 0; i < 8; i++) {
                wv[r][i] = r0 + r < N && k + i < K ? mvb_to_f32(wr[i]) : 0.0f;
            }
        }
        #pragma unroll
        for (uint t = 0; t < MVB_MAXL; t++) {
            if (t < L) {
                device const float * xr = x + (ulong)t * K;
                float xv[8];
                #pragma unroll
                for (uint i = 0; i < 8; i++) {
                    xv[i] = k + i < K ? xr[k + i] : 0.0f;
                }
                const float4 x0 = float4(xv[0], xv[1], xv[2], xv[3]), x1 = float4(xv[4], xv[5], xv[6], xv[7]);
                #pragma unroll
                for (uint r = 0; r < MVB_ROWS; r++) {
                    if (r0 + r < N) {
                        acc[r][t] += dot(float4(wv[r][0], wv[r][1], wv[r][2], wv[r][3]), x0) + dot(float4(wv[r][4], wv[r][5], wv[r][6], wv[r][7]), x1);
                    }
                }
            }
        }
    }
    mvb_store(y, acc, L, N, r0, lane);
}

typedef decltype(matvecb_dense_v8<float>) matvecb_f32_t;
typedef decltype(matvecb_dense_v8<half>) matvecb_f16_t;
typedef decltype(matvecb_dense_v8<ushort>) matvecb_bf16_t;
template [[host_name("matvecb_f32_f32_v8")]]  kernel matvecb_f32_t  matvecb_dense_v8<float>;
template [[host_name("matvecb_f16_f32_v8")]]  kernel matvecb_f16_t  matvecb_dense_v8<half>;
template [[host_name("matvecb_bf16_f32_v8")]] kernel matvecb_bf16_t matvecb_dense_v8<ushort>;
template [[host_name("matvecb_f32_f32")]]     kernel matvecb_f32_t  matvecb_dense<float>;
template [[host_name("matvecb_f16_f32")]]     kernel matvecb_f16_t  matvecb_dense<half>;
template [[host_name("matvecb_bf16_f32")]]    kernel matvecb_bf16_t matvecb_dense<ushort>;

// matvecb_q_v16<BITS, S>: S is the type of the scales and biases as stored
// (float; half for f16; ushort for bf16). Codes multiplied in place, masked
// against x pre-scaled by the mask's weight (see matvec.metal's matvec_q_v16).
template <int BITS, typename S>
kernel void matvecb_q_v16(
        constant matvec_args & args   [[buffer(0)]],
        device const uchar   * w      [[buffer(1)]],
        device const float   * x      [[buffer(2)]],
        device       float   * y      [[buffer(3)]],
        device const S       * scales [[buffer(4)]],
        device const S       * biases [[buffer(5)]],
        uint2  tg   [[threadgroup_position_in_grid]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    constexpr uint PW = 16 / BITS; // codes per 16-bit word
    constexpr uint NW = 16 / PW;   // words per 16 codes
    const uint K = args.K, N = args.N, G = args.group_size, L = min(args.L, (uint)MVB_MAXL);
    const uint ng = K / G;         // groups per row
    const uint rb = K / 8 * BITS;  // bytes per row
    const uint r0 = (tg.x * MVB_SG + sg) * MVB_ROWS;
    float acc[MVB_ROWS][MVB_MAXL];
    for (uint r = 0; r < MVB_ROWS; r++) {
        for (uint t = 0; t < MVB_MAXL; t++) {
            acc[r][t] = 0.0f;
        }
    }
    for (uint k = lane * 16; k < K; k += 32 * 16) {
        const uint g = k / G;
        ushort ws[MVB_ROWS][NW];
        float sc[MVB_ROWS], bi[MVB_ROWS];
        #pragma unroll
        for (uint r = 0; r < MVB_ROWS; r++) {
            sc[r] = bi[r] = 0.0f;
            for (uint j = 0; j < NW; j++) {
                ws[r][j] = 0;
            }
            if (r0 + r < N) {
                device const ushort * wp = (device const ushort *)(w + (ulong)(r0 + r) * rb + k / 8 * BITS);
                #pragma unroll
                for (uint j = 0; j < NW; j++) {
                    ws[r][j] = wp[j];
                }
                const ulong sb = (ulong)(r0 + r) * ng + g;
                sc[r] = mvb_to_f32(scales[sb]);
                bi[r] = mvb_to_f32(biases[sb]);
            }
        }
        #pragma unroll
        for (uint t = 0; t < MVB_MAXL; t++) {
            if (t < L) {
                device const float * xr = x + (ulong)t * K;
                float xs[16];
                float sx = 0.0f;
                #pragma unroll
                for (uint i = 0; i < 16; i += 4) {
                    const float4 v = *(device const float4 *)(xr + k + i);
                    sx += (v.x + v.y) + (v.z + v.w);
                    xs[i] = v.x;
                    xs[i + 1] = v.y;
                    xs[i + 2] = v.z;
                    xs[i + 3] = v.w;
                }
                #pragma unroll
                for (uint i = 0; i < 16; i++) {
                    xs[i] *= 1.0f / float(1u << (BITS * (i % PW))); // a power of two: exact
                }
                #pragma unroll
                for (uint r = 0; r < MVB_ROWS; r++) {
                    if (r0 + r < N) {
                        float sq = 0.0f;
                        #pragma unroll
                        for (uint i = 0; i < 16; i++) {
                            const uint mask = ((1u << BITS) - 1) << (BITS * (i % PW));
                            sq += float(ws[r][i / PW] & mask) * xs[i];
                        }
                        acc[r][t] += sc[r] * sq + bi[r] * sx;
                    }
                }
            }
        }
    }
    mvb_store(y, acc, L, N, r0, lane);
}

// Host names: matvecb_<w>_f32_v16 for f32 scales and biases, with _f16sb or
// _bf16sb appended for 16-bit ones (as matvec.metal's).
typedef decltype(matvecb_q_v16<4, float>) matvecb_q_f32_t;
template [[host_name("matvecb_q4_f32_v16")]] kernel matvecb_q_f32_t matvecb_q_v16<4, float>;
template [[host_name("matvecb_q8_f32_v16")]] kernel matvecb_q_f32_t matvecb_q_v16<8, float>;
typedef decltype(matvecb_q_v16<4, half>) matvecb_q_f16_t;
template [[host_name("matvecb_q4_f32_v16_f16sb")]] kernel matvecb_q_f16_t matvecb_q_v16<4, half>;
template [[host_name("matvecb_q8_f32_v16_f16sb")]] kernel matvecb_q_f16_t matvecb_q_v16<8, half>;
typedef decltype(matvecb_q_v16<4, ushort>) matvecb_q_bf16_t;
template [[host_name("matvecb_q4_f32_v16_bf16sb")]] kernel matvecb_q_bf16_t matvecb_q_v16<4, ushort>;
template [[host_name("matvecb_q8_f32_v16_bf16sb")]] kernel matvecb_q_bf16_t matvecb_q_v16<8, ushort>;
