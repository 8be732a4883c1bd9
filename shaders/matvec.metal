// matvec.metal: y = x·Wᵀ for decode (L = 1; the grid's y axis runs L > 1 rows
// when mat-mat tiles do not apply).
//
// matvec_<w>_f32: y (L, N) = x (L, K) · Wᵀ, W (N, K) in f32, f16, bf16 or MLX
// affine q2…q8 (w = scale·q + bias per group of group_size columns; scales and
// biases f32, or as MLX stores them, f16 or bf16: names ending _f16sb, _bf16sb).
//
// Grid: (⌈N/8⌉, L) threadgroups of 64 threads = 2 simdgroups; simdgroup s of
// threadgroup t owns rows n ∈ [8t + 4s, 8t + 4s + 4). Each lane strides the
// columns in chunks of 8 (float weights: summed as two float4 dots; codes),
// loads the chunk of x once into registers and multiplies it with the same
// chunk of all 4 rows, so every weight byte is read exactly once and x is read
// once per simdgroup. The 32 lane partials are folded with simd_sum.
// Quantized rows: a chunk of 8 codes is exactly `bits` bytes (byte aligned for
// every width) and never straddles a group (groups are multiples of 32), so
// per chunk acc += scale·Σ q·x + bias·Σ x: the affine bias is folded into the
// chunk's Σx and dequantized weights are never formed.
// Numerics: float accumulation in a different order than the CPU reference
// (lane-strided partial sums, then a tree), so results differ by O(√K·2⁻²⁴)
// relative; the quantized fold differs from Σ(scale·q + bias)·x by rounding only.
#include <metal_stdlib>
#include "common.h"
using namespace metal;

#define MV_ROWS 4 // rows per simdgroup
#define MV_SG   2 // simdgroups per threadgroup

// to_f32 widens one stored weight element. bf16 is stored as ushort (its high
// half of a float), which needs no bfloat support from the device.
inline float to_f32(float v) { return v; }
inline float to_f32(half v) { return float(v); }
inline float to_f32(ushort v) { return as_type<float>(uint(v) << 16); }

template <typename T>
kernel void matvec_dense(
        constant matvec_args & args [[buffer(0)]],
        device const T       * w    [[buffer(1)]],
        device const float   * x    [[buffer(2)]],
        device       float   * y    [[buffer(3)]],
        uint2  tg   [[threadgroup_position_in_grid]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    const uint K = args.K, N = args.N;
    const uint r0 = (tg.x * MV_SG + sg) * MV_ROWS;
    device const float * xr = x + (ulong)tg.y * K;
    float acc[MV_ROWS] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (uint k = lane * 8; k < K; k += 32 * 8) {
        float xv[8];
        #pragma unroll
        for (uint i = 0; i < 8; i++) {
            xv[i] = k + i < K ? xr[k + i] : 0.0f;
        }
        const float4 x0 = float4(xv[0], xv[1], xv[2], xv[3]), x1 = float4(xv[4], xv[5], xv[6], xv[7]);
        #pragma unroll
        for (uint r = 0; r < MV_ROWS; r++) {
            if (r0 + r < N) {
                device const T * wr = w + (ulong)(r0 + r) * K + k;
                float wv[8];
                #pragma unroll
                for (uint i = 0; i < 8; i++) {
                    wv[i] = k + i < K ? to_f32(wr[i]) : 0.0f;
                }
                acc[r] += dot(float4(wv[0], wv[1], wv[2], wv[3]), x0) + dot(float4(wv[4], wv[5], wv[6], wv[7]), x1);
            }
        }
    }
    for (uint r = 0; r < MV_ROWS; r++) {
        const float s = simd_sum(acc[r]);
        if (lane == 0 && r0 + r < N) {
            y[(ulong)tg.y * N + r0 + r] = s;
        }
    }
}

template [[host_name("matvec_f32_f32")]]  kernel void matvec_dense<float>(
        constant matvec_args &, device const float *, device const float *, device float *, uint2, ushort, ushort);
template [[host_name("matvec_f16_f32")]]  kernel void matvec_dense<half>(
        constant matvec_args &, device const half *, device const float *, device float *, uint2, ushort, ushort);
template [[host_name("matvec_bf16_f32")]] kernel void matvec_dense<ushort>(
        constant matvec_args &, device const ushort *, device const float *, device float *, uint2, ushort, ushort);

// matvec_<f32|f16|bf16>_f32_v8: matvec_dense for K a multiple of 8 with w
// and x 16-byte aligned (the host checks, else it runs matvec_dense): each
// lane takes 8 columns a step, one or two 16-byte loads of a row (two float4
// for f32; 8 halves or bf16 words for 16-bit weights) and two float4 of x,
// shared by the simdgroup's 4 rows. No tail: the trip count is K/256 steps
// (+1 for the lanes below K mod 256). Numerics: per step the 8 products are
// summed as two float4 dots, then added to the lane's partial — exactly as
// matvec_dense sums them, so where a weight sits in memory (bound in place
// from a file at any offset, or copied) never changes a result.
inline float4 wv_lo(uint4 u, half) { return float4(float2(as_type<half2>(u.x)), float2(as_type<half2>(u.y))); }
inline float4 wv_hi(uint4 u, half) { return float4(float2(as_type<half2>(u.z)), float2(as_type<half2>(u.w))); }
inline float4 wv_lo(uint4 u, ushort) {
    return float4(as_type<float>(u.x << 16), as_type<float>(u.x & 0xffff0000u), as_type<float>(u.y << 16), as_type<float>(u.y & 0xffff0000u));
}
inline float4 wv_hi(uint4 u, ushort) {
    return float4(as_type<float>(u.z << 16), as_type<float>(u.z & 0xffff0000u), as_type<float>(u.w << 16), as_type<float>(u.w & 0xffff0000u));
}

inline float4 wv_lo(uint4 u, float) { return as_type<float4>(u); } // f32 loads float4s itself: never called
inline float4 wv_hi(uint4 u, float) { return as_type<float4>(u); }

template <typename T>
kernel void matvec_dense_v8(
        constant matvec_args & args [[buffer(0)]],
        device const T       * w    [[buffer(1)]],
        device const float   * x    [[buffer(2)]],
        device       float   * y    [[buffer(3)]],
        uint2  tg   [[threadgroup_position_in_grid]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    const uint K = args.K, N = args.N;
    const uint r0 = (tg.x * MV_SG + sg) * MV_ROWS;
    device const float * xr = x + (ulong)tg.y * K;
    float acc[MV_ROWS] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (uint k = lane * 8; k < K; k += 32 * 8) {
        const float4 x0 = *(device const float4 *)(xr + k), x1 = *(device const float4 *)(xr + k + 4);
        #pragma unroll
        for (uint r = 0; r < MV_ROWS; r++) {
            if (r0 + r < N) {
                device const T * wr = w + (ulong)(r0 + r) * K + k;
                float4 w0, w1;
                if (sizeof(T) == 4) {
                    w0 = *(device const float4 *)wr;
                    w1 = *(device const float4 *)(wr + 4);
                } else {
                    const uint4 u = *(device const uint4 *)wr;
                    w0 = wv_lo(u, T(0));
                    w1 = wv_hi(u, T(0));
                }
                acc[r] += dot(w0, x0) + dot(w1, x1);
            }
        }
    }
    for (uint r = 0; r < MV_ROWS; r++) {
        const float s = simd_sum(acc[r]);
        if (lane == 0 && r0 + r < N) {
            y[(ulong)tg.y * N + r0 + r] = s;
        }
    }
}

template [[host_name("matvec_f32_f32_v8")]]  kernel void matvec_dense_v8<float>(
        constant matvec_args &, device const float *, device const float *, device float *, uint2, ushort, ushort);
template [[host_name("matvec_f16_f32_v8")]]  kernel void matvec_dense_v8<half>(
        constant matvec_args &, device const half *, device const float *, device float *, uint2, ushort, ushort);
template [[host_name("matvec_bf16_f32_v8")]] kernel void matvec_dense_v8<ushort>(
        constant matvec_args &, device const ushort *, device const float *, device float *, uint2, ushort, ushort);

// load_codes returns the 8 codes of BITS bits starting at p (BITS bytes, a
// little-endian bitstream), code i in bits [i·BITS, (i+1)·BITS).
template <int BITS>
inline ulong load_codes(device const uchar * p) {
    if (BITS == 4) {
        return ulong(*(device const uint *)p);
    }
    if (BITS == 8) {
        device const uint * u = (device const uint *)p;
        return ulong(u[0]) | (ulong(u[1]) << 32);
    }
    ulong v = 0;
    for (int b = 0; b < BITS; b++) {
        v |= ulong(p[b]) << (8 * b);
    }
    return v;
}

// matvec_q<BITS, S>: S is the type of the scales and biases as stored
// (float; half for f16; ushort for bf16), widened exactly by to_f32, so a
// weight gives the same bits whichever of them holds its values.
template <int BITS, typename S>
kernel void matvec_q(
        constant matvec_args & args   [[buffer(0)]],
        device const uchar   * w      [[buffer(1)]],
        device const float   * x      [[buffer(2)]],
        device       float   * y      [[buffer(3)]],
        device const S       * scales [[buffer(4)]],
        device const S       * biases [[buffer(5)]],
        uint2  tg   [[threadgroup_position_in_grid]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    const uint K = args.K, N = args.N, G = args.group_size;
    const uint ng = K / G;            // groups per row
    const uint rb = K / 8 * BITS;     // bytes per row
    const ulong mask = (1ul << BITS) - 1;
    const uint r0 = (tg.x * MV_SG + sg) * MV_ROWS;
    device const float * xr = x + (ulong)tg.y * K;
    float acc[MV_ROWS] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (uint c = lane; c < K / 8; c += 32) {
        float xv[8];
        float sx = 0.0f;
        for (uint i = 0; i < 8; i++) {
            xv[i] = xr[8 * c + i];
            sx += xv[i];
        }
        const uint g = 8 * c / G;
        for (uint r = 0; r < MV_ROWS; r++) {
            if (r0 + r < N) {
                const ulong q = load_codes<BITS>(w + (ulong)(r0 + r) * rb + c * BITS);
                float sq = 0.0f;
                for (uint i = 0; i < 8; i++) {
                    sq += float((q >> (i * BITS)) & mask) * xv[i];
                }
                const ulong sb = (ulong)(r0 + r) * ng + g;
                acc[r] += to_f32(scales[sb]) * sq + to_f32(biases[sb]) * sx;
            }
        }
    }
    for (uint r = 0; r < MV_ROWS; r++) {
        const float s = simd_sum(acc[r]);
        if (lane == 0 && r0 + r < N) {
            y[(ulong)tg.y * N + r0 + r] = s;
        }
    }
}

// matvec_q4_f32_v16, matvec_q8_f32_v16: the 4- and 8-bit matvec_q shaped
// after MLX's qmv_fast: a lane takes 16 codes a step (one 8- or 16-byte load
// a row, 512 columns a simdgroup step for q4) and multiplies the codes in
// place, masked but not shifted, against x pre-scaled by the mask's weight:
// within each 16-bit word, code j sits at bits [j·BITS, (j+1)·BITS), so
// (word & mask_j)·(x_j·2^(−j·BITS)) = q_j·x_j exactly (both factors are
// exact in float: the masked word is an integer < 2^16, the scaling a power
// of two). That leaves an AND, a convert and an FMA per code, where matvec_q
// shifts a 64-bit word per code. Σx for the bias fold as in matvec_q. K is
// a multiple of 32 and so of 16: a lane's 16 codes never straddle K or a
// group; lanes past K in the last step idle.
template <int BITS, typename S>
kernel void matvec_q_v16(
        constant matvec_args & args   [[buffer(0)]],
        device const uchar   * w      [[buffer(1)]],
        device const float   * x      [[buffer(2)]],
        device       float   * y      [[buffer(3)]],
        device const S       * scales [[buffer(4)]],
        device const S       * biases [[buffer(5)]],
        uint2  tg   [[threadgroup_position_in_grid]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    constexpr uint PW = 16 / BITS;         // codes per 16-bit word
    constexpr uint NW = 16 / PW;           // words per 16 codes
    const uint K = args.K, N = args.N, G = args.group_size;
    const uint ng = K / G;                 // groups per row
    const uint rb = K / 8 * BITS;          // bytes per row
    const uint r0 = (tg.x * MV_SG + sg) * MV_ROWS;
    device const float * xr = x + (ulong)tg.y * K;
    float acc[MV_ROWS] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (uint k = lane * 16; k < K; k += 32 * 16) {
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
        const uint g = k / G;
        #pragma unroll
        for (uint r = 0; r < MV_ROWS; r++) {
            if (r0 + r < N) {
                device const ushort * wp = (device const ushort *)(w + (ulong)(r0 + r) * rb + k / 8 * BITS);
                ushort ws[NW];
                #pragma unroll
                for (uint j = 0; j < NW; j++) {
                    ws[j] = wp[j];
                }
                float sq = 0.0f;
                #pragma unroll
                for (uint i = 0; i < 16; i++) {
                    const uint mask = ((1u << BITS) - 1) << (BITS * (i % PW));
                    sq += float(ws[i / PW] & mask) * xs[i];
                }
                const ulong sb = (ulong)(r0 + r) * ng + g;
                acc[r] += to_f32(scales[sb]) * sq + to_f32(biases[sb]) * sx;
            }
        }
    }
    for (uint r = 0; r < MV_ROWS; r++) {
        const float s = simd_sum(acc[r]);
        if (lane == 0 && r0 + r < N) {
            y[(ulong)tg.y * N + r0 + r] = s;
        }
    }
}

// Host names: matvec_<w>_f32[_v16] for f32 scales and biases, with _f16sb or
// _bf16sb appended for 16-bit ones (the suffix of the NVIDIA-shaped kernels' pairs).
typedef decltype(matvec_q_v16<4, float>) matvec_q_v16_f32_t;
template [[host_name("matvec_q4_f32_v16")]] kernel matvec_q_v16_f32_t matvec_q_v16<4, float>;
template [[host_name("matvec_q8_f32_v16")]] kernel matvec_q_v16_f32_t matvec_q_v16<8, float>;
typedef decltype(matvec_q_v16<4, half>) matvec_q_v16_f16_t;
template [[host_name("matvec_q4_f32_v16_f16sb")]] kernel matvec_q_v16_f16_t matvec_q_v16<4, half>;
template [[host_name("matvec_q8_f32_v16_f16sb")]] kernel matvec_q_v16_f16_t matvec_q_v16<8, half>;
typedef decltype(matvec_q_v16<4, ushort>) matvec_q_v16_bf16_t;
template [[host_name("matvec_q4_f32_v16_bf16sb")]] kernel matvec_q_v16_bf16_t matvec_q_v16<4, ushort>;
template [[host_name("matvec_q8_f32_v16_bf16sb")]] kernel matvec_q_v16_bf16_t matvec_q_v16<8, ushort>;

typedef decltype(matvec_q<4, float>) matvec_q_f32_t;
template [[host_name("matvec_q2_f32")]] kernel matvec_q_f32_t matvec_q<2, float>;
template [[host_name("matvec_q3_f32")]] kernel matvec_q_f32_t matvec_q<3, float>;
template [[host_name("matvec_q4_f32")]] kernel matvec_q_f32_t matvec_q<4, float>;
template [[host_name("matvec_q5_f32")]] kernel matvec_q_f32_t matvec_q<5, float>;
template [[host_name("matvec_q6_f32")]] kernel matvec_q_f32_t matvec_q<6, float>;
template [[host_name("matvec_q8_f32")]] kernel matvec_q_f32_t matvec_q<8, float>;
typedef decltype(matvec_q<4, half>) matvec_q_f16_t;
template [[host_name("matvec_q2_f32_f16sb")]] kernel matvec_q_f16_t matvec_q<2, half>;
template [[host_name("matvec_q3_f32_f16sb")]] kernel matvec_q_f16_t matvec_q<3, half>;
template [[host_name("matvec_q4_f32_f16sb")]] kernel matvec_q_f16_t matvec_q<4, half>;
template [[host_name("matvec_q5_f32_f16sb")]] kernel matvec_q_f16_t matvec_q<5, half>;
template [[host_name("matvec_q6_f32_f16sb")]] kernel matvec_q_f16_t matvec_q<6, half>;
template [[host_name("matvec_q8_f32_f16sb")]] kernel matvec_q_f16_t matvec_q<8, half>;
typedef decltype(matvec_q<4, ushort>) matvec_q_bf16_t;
template [[host_name("matvec_q2_f32_bf16sb")]] kernel matvec_q_bf16_t matvec_q<2, ushort>;
template [[host_name("matvec_q3_f32_bf16sb")]] kernel matvec_q_bf16_t matvec_q<3, ushort>;
template [[host_name("matvec_q4_f32_bf16sb")]] kernel matvec_q_bf16_t matvec_q<4, ushort>;
template [[host_name("matvec_q5_f32_bf16sb")]] kernel matvec_q_bf16_t matvec_q<5, ushort>;
template [[host_name("matvec_q6_f32_bf16sb")]] kernel matvec_q_bf16_t matvec_q<6, ushort>;
template [[host_name("matvec_q8_f32_bf16sb")]] kernel matvec_q_bf16_t matvec_q<8, ushort>;
