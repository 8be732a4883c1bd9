// matmul.metal: y = x·Wᵀ for prefill (L > 1).
//
// matmul_<w>_f32: y (L, N) = x (L, K) · Wᵀ, W (N, K) in f32, f16, bf16 or MLX
// affine q2…q8 (scales and biases f32, or f16/bf16: _f16sb, _bf16sb).
//
// Shaped after ggml's kernel_mul_mm and MLX's steel gemm. Grid: (⌈N/64⌉,
// ⌈L/32⌉) threadgroups of 128 threads = 4 simdgroups; the threadgroup owns the
// 32×64 output tile (tokens l0…l0+31, weight rows n0…n0+63) and simdgroup s
// the 16×32 block at tokens (s/2)·16, rows (s%2)·32, held as 2×4 simdgroup 8×8
// float accumulators: per 8 columns it loads 2 blocks of x and 4 of W and
// runs 8 multiply-accumulates (ggml's ratio; the 32×32 tile this replaced ran
// 4 per 4 loads). Each weight element is read and dequantized once per 32
// tokens, each x element once per 64 rows.
//
// K runs in steps of 32 columns. The threadgroup stages the x tile (32 tokens
// × 32 columns, float) and the W tile (64 rows × 32 columns: half for f16
// weights, float for the others) row-major with a row stride of MM_LD = 40
// elements. B = Wᵀ is read with simdgroup_load(..., transpose) from the
// row-major W tile, so W is stored as it lies in device memory: a
// simdgroup's 32 lanes store 32 consecutive columns of one row (dense), or 8
// rows × 4 chunks of 8 codes, each lane starting its chunk at column (row %
// 8) (quantized): every store of a simdgroup hits 32 distinct banks. The
// stride 40 (≡ 8 mod 32 words for float, 20 words for half) spreads an 8×8
// block over all 32 banks, 2 elements each, for the simdgroup loads.
//
// Double buffering: two copies of each tile. A step fetches the next tiles
// from device memory into registers, multiplies the current ones, stores the
// registers into the other copies and meets one barrier: the loads are in
// flight during the multiplies, and a step has one barrier where a single
// copy needs two.
//
// Edges (L, N, K not multiples of the tile) are zero-padded in threadgroup
// memory; full output tiles are stored straight from the accumulators,
// partial ones through threadgroup memory (reusing the x tiles) and masked.
//
// Numerics: x stays float in threadgroup memory (half would round it: the
// CPU-reference tests hold matmul to float32 rounding, NMSE 1e-11), and so do
// f32 weights, bf16 weights (widened exactly) and dequantized affine weights
// (float(scale·q) + bias exactly as MLX and the CPU reference evaluate it;
// half would round it). Only f16 weights are staged as half, which is exact
// and halves their tile. Products are accumulated in float, in k order within
// each 8×8 block.
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
#include "common.h"
using namespace metal;

#define MM_BM 32  // tokens per tile
#define MM_BN 64  // weight rows per tile
#define MM_BK 32  // columns per step
#define MM_LD 40  // row stride of the staged tiles, in elements (MM_BK + 8)
#define MM_TS 72  // row stride of the partial-tile output staging, in floats (MM_BN + 8)
#define MM_THREADS 128
#define MM_XR (MM_BM * MM_BK / MM_THREADS) // x elements a thread fetches per step (8)
#define MM_WR (MM_BN * MM_BK / MM_THREADS) // W elements a thread fetches per step (16)

inline float mm_to_f32(float v) { return v; }
inline float mm_to_f32(half v) { return float(v); }
inline float mm_to_f32(ushort v) { return as_type<float>(uint(v) << 16); }

// mm_fetch_x reads the thread's part of the x tile at column k0: element
// e = tid + 128·i is token e/32, column e%32 (a simdgroup reads one token's 32
// consecutive columns).
inline void mm_fetch_x(thread float * r, device const float * x, uint L, uint K, uint l0, uint k0, ushort tid) {
    const uint c = tid % MM_BK;
    for (uint i = 0; i < MM_XR; i++) {
        const uint l = tid / MM_BK + (MM_THREADS / MM_BK) * i;
        r[i] = (l0 + l < L && k0 + c < K) ? x[(ulong)(l0 + l) * K + k0 + c] : 0.0f;
    }
}

// mm_put_x stores what mm_fetch_x read into the staged x tile xs.
inline void mm_put_x(threadgroup float * xs, thread const float * r, ushort tid) {
    const uint c = tid % MM_BK;
    for (uint i = 0; i < MM_XR; i++) {
        xs[(tid / MM_BK + (MM_THREADS / MM_BK) * i) * MM_LD + c] = r[i];
    }
}

// mm_mma multiplies the staged tiles into the simdgroup's 2×4 accumulators.
template <typename TW>
inline void mm_mma(thread simdgroup_float8x8 * acc, threadgroup const float * xs, threadgroup const TW * ws, ushort sg) {
    const uint sl = (sg / 2) * 16, sn = (sg % 2) * 32;
    for (uint kk = 0; kk < MM_BK; kk += 8) {
        simdgroup_float8x8 a[2];
        simdgroup_matrix<TW, 8, 8> b[4];
        for (uint i = 0; i < 2; i++) {
            simdgroup_load(a[i], xs + (sl + 8 * i) * MM_LD + kk, MM_LD);
        }
        for (uint j = 0; j < 4; j++) {
            simdgroup_load(b[j], ws + (sn + 8 * j) * MM_LD + kk, MM_LD, ulong2(0, 0), true); // (k, n) = W[n][k]
        }
        for (uint i = 0; i < 2; i++) {
            for (uint j = 0; j < 4; j++) {
                simdgroup_multiply_accumulate(acc[i * 4 + j], a[i], b[j], acc[i * 4 + j]);
            }
        }
    }
}

// mm_store writes the accumulators to y: straight from the simdgroup
// matrices for a full tile, else through threadgroup memory ts (MM_BM ×
// MM_TS floats, free once the last step's barrier is passed), masking the
// edges.
inline void mm_store(device float * y, threadgroup float * ts, thread simdgroup_float8x8 * acc,
                     uint L, uint N, uint l0, uint n0, ushort tid, ushort sg) {
    const uint sl = (sg / 2) * 16, sn = (sg % 2) * 32;
    if (l0 + MM_BM <= L && n0 + MM_BN <= N) {
        for (uint i = 0; i < 2; i++) {
            for (uint j = 0; j < 4; j++) {
                simdgroup_store(acc[i * 4 + j], y + (ulong)(l0 + sl + 8 * i) * N + n0 + sn + 8 * j, N);
            }
        }
        return;
    }
    for (uint i = 0; i < 2; i++) {
        for (uint j = 0; j < 4; j++) {
            simdgroup_store(acc[i * 4 + j], ts + (sl + 8 * i) * MM_TS + sn + 8 * j, MM_TS);
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint e = tid; e < MM_BM * MM_BN; e += MM_THREADS) {
        const uint l = e / MM_BN, n = e % MM_BN;
        if (l0 + l < L && n0 + n < N) {
            y[(ulong)(l0 + l) * N + n0 + n] = ts[l * MM_TS + n];
        }
    }
}

// matmul_dense<T, TW>: weights of type T as stored (float; half for f16;
// ushort for bf16), staged as TW (half for f16, exact; else float).
template <typename T, typename TW>
kernel void matmul_dense(
        constant matmul_args & args [[buffer(0)]],
        device const T       * w    [[buffer(1)]],
        device const float   * x    [[buffer(2)]],
        device       float   * y    [[buffer(3)]],
        threadgroup  float   * xs   [[threadgroup(0)]], // 2 × MM_BM × MM_LD
        threadgroup  TW      * ws   [[threadgroup(1)]], // 2 × MM_BN × MM_LD
        uint2  tg  [[threadgroup_position_in_grid]],
        ushort tid [[thread_index_in_threadgroup]],
        ushort sg  [[simdgroup_index_in_threadgroup]]) {
    const uint L = args.L, N = args.N, K = args.K;
    const uint l0 = tg.y * MM_BM, n0 = tg.x * MM_BN;
    const uint c = tid % MM_BK; // the column this thread fetches and stores
    simdgroup_float8x8 acc[8];
    for (uint i = 0; i < 8; i++) {
        acc[i] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    }
    float xr[MM_XR];
    TW wr[MM_WR]; // element i: row tid/32 + 4·i, column c (a simdgroup reads 32 consecutive columns of one row)
    for (uint k0 = 0, t = 0; k0 < K; k0 += MM_BK, t++) {
        const uint cur = t & 1;
        if (k0 == 0) {
            mm_fetch_x(xr, x, L, K, l0, 0, tid);
            for (uint i = 0; i < MM_WR; i++) {
                const uint n = tid / MM_BK + 4 * i;
                wr[i] = (n0 + n < N && c < K) ? TW(mm_to_f32(w[(ulong)(n0 + n) * K + c])) : TW(0);
            }
            mm_put_x(xs, xr, tid);
            for (uint i = 0; i < MM_WR; i++) {
                ws[(tid / MM_BK + 4 * i) * MM_LD + c] = wr[i];
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
        const uint k1 = k0 + MM_BK; // the next step's columns, fetched during this one's multiplies
        if (k1 < K) {
            mm_fetch_x(xr, x, L, K, l0, k1, tid);
            for (uint i = 0; i < MM_WR; i++) {
                const uint n = tid / MM_BK + 4 * i;
                wr[i] = (n0 + n < N && k1 + c < K) ? TW(mm_to_f32(w[(ulong)(n0 + n) * K + k1 + c])) : TW(0);
            }
        }
        mm_mma(acc, xs + cur * (MM_BM * MM_LD), ws + cur * (MM_BN * MM_LD), sg);
        if (k1 < K) {
            mm_put_x(xs + (cur ^ 1) * (MM_BM * MM_LD), xr, tid);
            threadgroup TW * wn = ws + (cur ^ 1) * (MM_BN * MM_LD);
            for (uint i = 0; i < MM_WR; i++) {
                wn[(tid / MM_BK + 4 * i) * MM_LD + c] = wr[i];
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    mm_store(y, xs, acc, L, N, l0, n0, tid, sg);
}

typedef decltype(matmul_dense<float, float>) matmul_f32_t;
typedef decltype(matmul_dense<half, half>) matmul_f16_t;
typedef decltype(matmul_dense<ushort, float>) matmul_bf16_t;
template [[host_name("matmul_f32_f32")]]  kernel matmul_f32_t  matmul_dense<float, float>;
template [[host_name("matmul_f16_f32")]]  kernel matmul_f16_t  matmul_dense<half, half>;
template [[host_name("matmul_bf16_f32")]] kernel matmul_bf16_t matmul_dense<ushort, float>;

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

// mm_qfetch is one thread's 8-code chunk of the W tile, as read from device
// memory: dequantized only when stored (mm_qput), after the multiplies.
struct mm_qfetch {
    ulong q;    // 8 codes of BITS bits
    float s, b; // the group's scale and bias
    bool  ok;   // row and columns inside W
};

// mm_qput dequantizes a fetched chunk into row n, columns c8…c8+7 of the W
// tile ws: float(s·q) + b, or zeros outside W. Lane order: column c8 +
// (i + n) % 8 at step i, so a simdgroup's 8 rows × 4 chunks hit 32 distinct
// banks at every step (row stride 40 ≡ 8 mod 32).
template <int BITS>
inline void mm_qput(threadgroup float * ws, mm_qfetch f, uint n, uint c8, ulong mask) {
    threadgroup float * row = ws + n * MM_LD + c8;
    for (uint i = 0; i < 8; i++) {
        const uint c = (i + n) % 8;
        row[c] = f.ok ? float(f.s * float((f.q >> (c * BITS)) & mask)) + f.b : 0.0f;
    }
}

// matmul_q<BITS, S>: S is the type of the scales and biases as stored (float;
// half for f16; ushort for bf16), widened exactly by mm_to_f32. Thread tid
// fetches chunks j = 0, 1 of the W tile: row tid/4 + 32·j, columns 8·(tid%4)
// … +7 (K is a multiple of 8: a chunk is all in or all out).
template <int BITS, typename S>
kernel void matmul_q(
        constant matmul_args & args   [[buffer(0)]],
        device const uchar   * w      [[buffer(1)]],
        device const float   * x      [[buffer(2)]],
        device       float   * y      [[buffer(3)]],
        device const S       * scales [[buffer(4)]],
        device const S       * biases [[buffer(5)]],
        threadgroup  float   * xs     [[threadgroup(0)]], // 2 × MM_BM × MM_LD
        threadgroup  float   * ws     [[threadgroup(1)]], // 2 × MM_BN × MM_LD
        uint2  tg  [[threadgroup_position_in_grid]],
        ushort tid [[thread_index_in_threadgroup]],
        ushort sg  [[simdgroup_index_in_threadgroup]]) {
    const uint L = args.L, N = args.N, K = args.K, G = args.group_size;
    const uint ng = K / G, rb = K / 8 * BITS;
    const ulong mask = (1ul << BITS) - 1;
    const uint l0 = tg.y * MM_BM, n0 = tg.x * MM_BN;
    const uint c8 = (tid % 4) * 8;
    simdgroup_float8x8 acc[8];
    for (uint i = 0; i < 8; i++) {
        acc[i] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    }
    float xr[MM_XR];
    mm_qfetch wr[2];
    for (uint k0 = 0, t = 0; k0 < K; k0 += MM_BK, t++) {
        const uint cur = t & 1;
        // Step 0 fetches its own tiles; every step fetches the next one's.
        for (uint f = (k0 == 0 ? 0 : 1); f < 2; f++) {
            const uint kf = k0 + f * MM_BK;
            if (kf >= K) {
                break;
            }
            mm_fetch_x(xr, x, L, K, l0, kf, tid);
            for (uint j = 0; j < 2; j++) {
                const uint n = n0 + tid / 4 + 32 * j, k = kf + c8;
                wr[j].ok = n < N && k < K;
                if (wr[j].ok) {
                    wr[j].q = mm_codes<BITS>(w + (ulong)n * rb + k / 8 * BITS);
                    const ulong sb = (ulong)n * ng + k / G;
                    wr[j].s = mm_to_f32(scales[sb]);
                    wr[j].b = mm_to_f32(biases[sb]);
                }
            }
            if (f == 1) {
                break; // stored after this step's multiplies
            }
            mm_put_x(xs, xr, tid);
            for (uint j = 0; j < 2; j++) {
                mm_qput<BITS>(ws, wr[j], tid / 4 + 32 * j, c8, mask);
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
        mm_mma(acc, xs + cur * (MM_BM * MM_LD), ws + cur * (MM_BN * MM_LD), sg);
        if (k0 + MM_BK < K) {
            mm_put_x(xs + (cur ^ 1) * (MM_BM * MM_LD), xr, tid);
            for (uint j = 0; j < 2; j++) {
                mm_qput<BITS>(ws + (cur ^ 1) * (MM_BN * MM_LD), wr[j], tid / 4 + 32 * j, c8, mask);
            }
        }
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
