// matmul.metal: y = x·Wᵀ for prefill (L > 1).
//
// matmul_<w>_f32: y (L, N) = x (L, K) · Wᵀ, W (N, K) in f32, f16, bf16 or MLX
// affine q2…q8 (scales and biases f32, or f16/bf16: _f16sb, _bf16sb).
//
// Grid: (⌈N/32⌉, ⌈L/32⌉) threadgroups of 128 threads = 4 simdgroups; the
// threadgroup owns the 32×32 output tile (tokens l0…l0+31, rows n0…n0+31) and
// simdgroup s the 16×16 quarter (s/2, s%2), held as 2×2 simdgroup 8×8 float
// accumulators. The K axis runs in steps of 32: the threadgroup stages the x
// tile (32 tokens × 32 columns) and the W tile, widened or dequantized to float
// and transposed to (32 columns × 32 rows), in threadgroup memory, so each
// weight element is read and dequantized once per 32 tokens; then each
// simdgroup runs 4×2×2 8×8 multiply-accumulates. Quantized tiles are loaded one
// 8-code chunk (`bits` bytes) per thread. Edges (L, N, K not multiples of 32)
// are zero-padded in threadgroup memory and masked at the store, which goes
// through threadgroup memory (reusing the x tile).
// Numerics: float products accumulated in float in k order within each 8×8
// block; dequantization is float(scale·q) + bias exactly as MLX and the CPU
// reference evaluate it.
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
#include "common.h"
using namespace metal;

#define MM_BM 32  // tokens per tile
#define MM_BN 32  // weight rows per tile
#define MM_BK 32  // columns per step
#define MM_THREADS 128

inline float mm_to_f32(float v) { return v; }
inline float mm_to_f32(half v) { return float(v); }
inline float mm_to_f32(ushort v) { return as_type<float>(uint(v) << 16); }

// mm_load_x stages x[l0…l0+31][k0…k0+31] into xs (row-major, stride MM_BK).
inline void mm_load_x(threadgroup float * xs, device const float * x, uint L, uint K, uint l0, uint k0, ushort tid) {
    for (uint i = tid; i < MM_BM * MM_BK; i += MM_THREADS) {
        const uint r = i / MM_BK, c = i % MM_BK;
        xs[i] = (l0 + r < L && k0 + c < K) ? x[(ulong)(l0 + r) * K + k0 + c] : 0.0f;
    }
}

// mm_tile multiplies the staged tiles into the simdgroup's accumulators.
inline void mm_tile(thread simdgroup_float8x8 * acc, threadgroup const float * xs, threadgroup const float * ws, ushort sg) {
    const uint sm = sg / 2, sn = sg % 2;
    for (uint kk = 0; kk < MM_BK; kk += 8) {
        simdgroup_float8x8 a0, a1, b0, b1;
        simdgroup_load(a0, xs + (sm * 16 + 0) * MM_BK + kk, MM_BK);
        simdgroup_load(a1, xs + (sm * 16 + 8) * MM_BK + kk, MM_BK);
        simdgroup_load(b0, ws + kk * MM_BN + sn * 16 + 0, MM_BN);
        simdgroup_load(b1, ws + kk * MM_BN + sn * 16 + 8, MM_BN);
        simdgroup_multiply_accumulate(acc[0], a0, b0, acc[0]);
        simdgroup_multiply_accumulate(acc[1], a0, b1, acc[1]);
        simdgroup_multiply_accumulate(acc[2], a1, b0, acc[2]);
        simdgroup_multiply_accumulate(acc[3], a1, b1, acc[3]);
    }
}

// mm_store writes the accumulators to y through threadgroup memory ts
// (MM_BM × MM_BN), masking the edges.
inline void mm_store(device float * y, threadgroup float * ts, thread simdgroup_float8x8 * acc,
                     uint L, uint N, uint l0, uint n0, ushort tid, ushort sg) {
    const uint sm = sg / 2, sn = sg % 2;
    simdgroup_store(acc[0], ts + (sm * 16 + 0) * MM_BN + sn * 16 + 0, MM_BN);
    simdgroup_store(acc[1], ts + (sm * 16 + 0) * MM_BN + sn * 16 + 8, MM_BN);
    simdgroup_store(acc[2], ts + (sm * 16 + 8) * MM_BN + sn * 16 + 0, MM_BN);
    simdgroup_store(acc[3], ts + (sm * 16 + 8) * MM_BN + sn * 16 + 8, MM_BN);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = tid; i < MM_BM * MM_BN; i += MM_THREADS) {
        const uint r = i / MM_BN, c = i % MM_BN;
        if (l0 + r < L && n0 + c < N) {
            y[(ulong)(l0 + r) * N + n0 + c] = ts[i];
        }
    }
}

template <typename T>
kernel void matmul_dense(
        constant matmul_args & args [[buffer(0)]],
        device const T       * w    [[buffer(1)]],
        device const float   * x    [[buffer(2)]],
        device       float   * y    [[buffer(3)]],
        threadgroup  float   * xs   [[threadgroup(0)]],
        threadgroup  float   * ws   [[threadgroup(1)]],
        uint2  tg  [[threadgroup_position_in_grid]],
        ushort tid [[thread_index_in_threadgroup]],
        ushort sg  [[simdgroup_index_in_threadgroup]]) {
    const uint L = args.L, N = args.N, K = args.K;
    const uint l0 = tg.y * MM_BM, n0 = tg.x * MM_BN;
    simdgroup_float8x8 acc[4];
    for (uint i = 0; i < 4; i++) {
        acc[i] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    }
    for (uint k0 = 0; k0 < K; k0 += MM_BK) {
        mm_load_x(xs, x, L, K, l0, k0, tid);
        for (uint i = tid; i < MM_BN * MM_BK; i += MM_THREADS) {
            const uint n = i / MM_BK, c = i % MM_BK; // consecutive threads read consecutive columns
            ws[c * MM_BN + n] = (n0 + n < N && k0 + c < K) ? mm_to_f32(w[(ulong)(n0 + n) * K + k0 + c]) : 0.0f;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        mm_tile(acc, xs, ws, sg);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    mm_store(y, xs, acc, L, N, l0, n0, tid, sg);
}

typedef decltype(matmul_dense<float>) matmul_f32_t;
typedef decltype(matmul_dense<half>) matmul_f16_t;
typedef decltype(matmul_dense<ushort>) matmul_bf16_t;
template [[host_name("matmul_f32_f32")]]  kernel matmul_f32_t  matmul_dense<float>;
template [[host_name("matmul_f16_f32")]]  kernel matmul_f16_t  matmul_dense<half>;
template [[host_name("matmul_bf16_f32")]] kernel matmul_bf16_t matmul_dense<ushort>;

// mm_codes returns the 8 codes of BITS bits starting at p (BITS bytes).
template <int BITS>
inline ulong mm_codes(device const uchar * p) {
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

// matmul_q<BITS, S>: S is the type of the scales and biases as stored (float;
// half for f16; ushort for bf16), widened exactly by mm_to_f32.
template <int BITS, typename S>
kernel void matmul_q(
        constant matmul_args & args   [[buffer(0)]],
        device const uchar   * w      [[buffer(1)]],
        device const float   * x      [[buffer(2)]],
        device       float   * y      [[buffer(3)]],
        device const S       * scales [[buffer(4)]],
        device const S       * biases [[buffer(5)]],
        threadgroup  float   * xs     [[threadgroup(0)]],
        threadgroup  float   * ws     [[threadgroup(1)]],
        uint2  tg  [[threadgroup_position_in_grid]],
        ushort tid [[thread_index_in_threadgroup]],
        ushort sg  [[simdgroup_index_in_threadgroup]]) {
    const uint L = args.L, N = args.N, K = args.K, G = args.group_size;
    const uint ng = K / G, rb = K / 8 * BITS;
    const ulong mask = (1ul << BITS) - 1;
    const uint l0 = tg.y * MM_BM, n0 = tg.x * MM_BN;
    // Thread tid dequantizes chunk c8 (8 columns) of tile row n: 4 threads per row.
    const uint n = tid / (MM_BK / 8), c8 = (tid % (MM_BK / 8)) * 8;
    simdgroup_float8x8 acc[4];
    for (uint i = 0; i < 4; i++) {
        acc[i] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    }
    for (uint k0 = 0; k0 < K; k0 += MM_BK) {
        mm_load_x(xs, x, L, K, l0, k0, tid);
        const uint k = k0 + c8; // K is a multiple of 8: the chunk is all in or all out
        if (n0 + n < N && k < K) {
            const ulong q = mm_codes<BITS>(w + (ulong)(n0 + n) * rb + k / 8 * BITS);
            const ulong sb = (ulong)(n0 + n) * ng + k / G;
            const float s = mm_to_f32(scales[sb]), b = mm_to_f32(biases[sb]);
            for (uint i = 0; i < 8; i++) {
                ws[(c8 + i) * MM_BN + n] = float(s * float((q >> (i * BITS)) & mask)) + b;
            }
        } else {
            for (uint i = 0; i < 8; i++) {
                ws[(c8 + i) * MM_BN + n] = 0.0f;
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        mm_tile(acc, xs, ws, sg);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    mm_store(y, xs, acc, L, N, l0, n0, tid, sg);
}

// Host names: matmul_<w>_f32 for f32 scales and biases, _f16sb or _bf16sb
// appended for 16-bit ones.
typedef decltype(matmul_q<4, float>) matmul_q_f32_t;
template [[host_name("matmul_q2_f32")]] kernel matmul_q_f32_t matmul_q<2, float>;
template [[host_name("matmul_q3_f32")]] kernel matmul_q_f32_t matmul_q<3, float>;
template [[host_name("matmul_q4_f32")]] kernel matmul_q_f32_t matmul_q<4, float>;
template [[host_name("matmul_q5_f32")]] kernel matmul_q_f32_t matmul_q<5, float>;
template [[host_name("matmul_q6_f32")]] kernel matmul_q_f32_t matmul_q<6, float>;
template [[host_name("matmul_q8_f32")]] kernel matmul_q_f32_t matmul_q<8, float>;
typedef decltype(matmul_q<4, half>) matmul_q_f16_t;
template [[host_name("matmul_q2_f32_f16sb")]] kernel matmul_q_f16_t matmul_q<2, half>;
template [[host_name("matmul_q3_f32_f16sb")]] kernel matmul_q_f16_t matmul_q<3, half>;
template [[host_name("matmul_q4_f32_f16sb")]] kernel matmul_q_f16_t matmul_q<4, half>;
template [[host_name("matmul_q5_f32_f16sb")]] kernel matmul_q_f16_t matmul_q<5, half>;
template [[host_name("matmul_q6_f32_f16sb")]] kernel matmul_q_f16_t matmul_q<6, half>;
template [[host_name("matmul_q8_f32_f16sb")]] kernel matmul_q_f16_t matmul_q<8, half>;
typedef decltype(matmul_q<4, ushort>) matmul_q_bf16_t;
template [[host_name("matmul_q2_f32_bf16sb")]] kernel matmul_q_bf16_t matmul_q<2, ushort>;
template [[host_name("matmul_q3_f32_bf16sb")]] kernel matmul_q_bf16_t matmul_q<3, ushort>;
template [[host_name("matmul_q4_f32_bf16sb")]] kernel matmul_q_bf16_t matmul_q<4, ushort>;
template [[host_name("matmul_q5_f32_bf16sb")]] kernel matmul_q_bf16_t matmul_q<5, ushort>;
template [[host_name("matmul_q6_f32_bf16sb")]] kernel matmul_q_bf16_t matmul_q<6, ushort>;
template [[host_name("matmul_q8_f32_bf16sb")]] kernel matmul_q_bf16_t matmul_q<8, ushort>;
