// matmul_tc.metal: y = x·Wᵀ for prefill (L > 1) on NVIDIA tensor cores
// (mma.sync m16n8k16 bf16, shaders/mma.h), f32-accurate; the SIMT
// matmul_nv.metal is the fallback, and package kernels picks per device
// (kernels/metal_nv_matmul.go: compute capability 8.0 or later).
//
//ingot:ptx-target sm_80
//
// matmul_<w>_f32_tc: y (L, N) = x (L, K) · Wᵀ, W (N, K) in MLX affine q4/q8
// (codes uint32-packed row-major, f32 scales and biases per (row, group),
// groups a multiple of 32) or bf16.
//
// Numerics: x is f32, the tensor cores take bf16. Each x is split into three
// bf16 pieces, x = hi + mid + lo to 2⁻²⁷·|x| (mma_split3), and each piece
// takes its own mma (MMTC_PIECES; a measurement build can set 2, x to
// 2⁻¹⁸·|x|, which is not f32-accurate). W's side is exact: a q4/q8 code q is
// an integer, exact in bf16, and a bf16 weight is itself. Products are exact
// in f32, and the tensor cores sum them in f32. For affine weights the
// group's scale and bias are applied per group, as MLX's dequantization
// s·q + b distributes:
//
//	y[t][n] = Σ_g ( s[n][g] · Σ_{k∈g} x[t][k]·q[n][k] + b[n][g] · Σ_{k∈g} x[t][k] )
//
// so a fragment accumulates Σ x·q over the group's columns (3·G/16 mmas)
// and at the group's end is folded into the output's f32 accumulator, y +=
// fma(s, Σxq, b·Σx); Σx per token and group is summed in f32 by the threads
// that load x, in a fixed order. bf16 weights fold their fragment in every
// step (32 columns). Folding keeps the tensor cores' sums short: NVIDIA does
// not document their internal rounding, so no sum longer than 3·G/16 mmas
// depends on it, and the long sum over K is plain f32 adds.
//
// Grid: (⌈N/128⌉, ⌈L/64⌉) threadgroups of 256 threads (8 simdgroups); the
// threadgroup owns the 64×128 output tile (tokens l0…l0+63, rows
// n0…n0+127), simdgroup sg the 32×32 sub-tile of tokens 32·(sg%2) … and
// rows 32·(sg/2) …: 2 m-tiles of 16 tokens (A: x) × 4 n-tiles of 8 rows
// (B: W, "col" = W's rows) of mma fragments, 32 f32 of output accumulators
// and 32 of group accumulators a lane.
//
// The K axis runs in steps of 32 columns. Each step stages, in threadgroup
// memory, x's three pieces (64 tokens × 32 bf16 each) and W as bf16 (128
// rows × 32), every row 16 words, unpadded: lane (g, t) of a fragment reads
// words 4t … 4t+3 of its rows as one 16-byte load (a quarter-warp's rows g,
// g+1 fill the 32 banks), and uses words 4t+2h, 4t+2h+1 as its two k-pairs
// of the step's half h. That permutes k inside each 16-column mma the same
// way for A and B, which leaves the product as it is. The global loads of
// step k+1 are issued into registers before the mmas of step k (one buffer;
// 22 kB of threadgroup memory). Every loop but K's has a constant trip count
// and is unrolled, so accumulators and fragments stay in registers.
//
// Edges: tokens past L and rows past N stage zeros and are not stored;
// quantized K is a multiple of the group, bf16 K a multiple of 8 (the columns
// past K of the last step stage zeros).
#include <metal_stdlib>
#include "common.h"
#include "mma.h"
using namespace metal;

#define MMTC_BM 64                     // tokens per tile
#define MMTC_BN 128                    // weight rows per tile
#define MMTC_BK 32                     // columns per step
#define MMTC_THREADS 256               // 8 simdgroups
#define MMTC_PIECES 3                  // bf16 pieces of x (3: f32-accurate)
#define MMTC_RW 16                     // words per staged row (32 bf16)
#define MMTC_XW (MMTC_BM * MMTC_RW)    // words of one staged piece of x
#define MMTC_XG (MMTC_PIECES * MMTC_XW) // xs word where the tile's Σx per token start
#define MMTC_SB (MMTC_BN * MMTC_RW)    // ws word where the rows' (scale, bias) start
#define MMTC_XP (MMTC_BM * MMTC_BK / 4 / MMTC_THREADS) // x float4 pieces a thread

// mmtc_load_x loads the thread's float4 pieces of the x tile at k0 (zeros past
// L and K): piece p is token v/8, columns 4·(v%8) … with v = tid + 256p, so 8
// lanes read a token's 128 contiguous bytes.
__attribute__((always_inline)) inline void mmtc_load_x(thread float4 * xv, device const float * x, uint L, uint K, uint l0, uint k0, uint tid) {
    #pragma unroll
    for (uint p = 0; p < MMTC_XP; p++) {
        const uint v = tid + MMTC_THREADS * p;
        const uint r = v / 8, k = k0 + 4 * (v % 8);
        xv[p] = (l0 + r < L && k < K) ? *(device const float4 *)(x + (ulong)(l0 + r) * K + k) : float4(0.0f);
    }
}

// mmtc_store_x stages the pieces of mmtc_load_x split into bf16: piece q of
// token r at xs[q·MMTC_XW + r·16 + …]. With SUMS it also sums x over the
// group: the 8 lanes of a token add their float4s' sums in a butterfly (every
// lane gets the same bits), xsum carries the sum over the group's steps
// (first: the group's first step), and at its last step lane 0 of the 8
// stores it at xs[MMTC_XG + r] as a float.
template <bool SUMS>
__attribute__((always_inline)) inline void mmtc_store_x(threadgroup uint * xs, thread const float4 * xv, thread float * xsum, bool first, bool last, uint tid) {
    #pragma unroll
    for (uint p = 0; p < MMTC_XP; p++) {
        const uint v = tid + MMTC_THREADS * p;
        const uint r = v / 8, c = v % 8;
        uint pc[3][4];
        #pragma unroll
        for (uint e = 0; e < 4; e++) {
            mma_split3(xv[p][e], pc[0][e], pc[1][e], pc[2][e]);
        }
        #pragma unroll
        for (uint q = 0; q < MMTC_PIECES; q++) {
            *(threadgroup uint2 *)(xs + q * MMTC_XW + r * MMTC_RW + 2 * c) = uint2(mma_pack(pc[q][0], pc[q][1]), mma_pack(pc[q][2], pc[q][3]));
        }
        if (SUMS) {
            float s = (xv[p].x + xv[p].y) + (xv[p].z + xv[p].w);
            s = s + simd_shuffle_xor(s, ushort(1));
            s = s + simd_shuffle_xor(s, ushort(2));
            s = s + simd_shuffle_xor(s, ushort(4));
            xsum[p] = first ? s : xsum[p] + s;
            if (last && c == 0) {
                ((threadgroup float *)xs)[MMTC_XG + r] = xsum[p];
            }
        }
    }
}

// mmtc_code returns the bf16 bits of the integer code c (≤ 255: exact).
__attribute__((always_inline)) inline uint mmtc_code(uint c) {
    return as_type<uint>(float(c)) >> 16;
}

// mmtc_step runs the staged step's mmas into the simdgroup's group
// accumulators: gacc[4i + j] is the fragment of m-tile i (tokens tm + 16i …),
// n-tile j (rows tn + 8j …). Pieces go smallest first.
__attribute__((always_inline)) inline void mmtc_step(thread float4 * gacc, threadgroup const uint * xs, threadgroup const uint * ws, uint tm, uint tn, uint lane) {
    const uint g = lane / 4, t = lane % 4;
    uint4 bw[4];
    #pragma unroll
    for (uint j = 0; j < 4; j++) {
        bw[j] = *(threadgroup const uint4 *)(ws + (tn + 8 * j + g) * MMTC_RW + 4 * t);
    }
    #pragma unroll
    for (uint i = 0; i < 2; i++) {
        uint4 ra[MMTC_PIECES], rb[MMTC_PIECES];
        #pragma unroll
        for (uint q = 0; q < MMTC_PIECES; q++) {
            ra[q] = *(threadgroup const uint4 *)(xs + q * MMTC_XW + (tm + 16 * i + g) * MMTC_RW + 4 * t);
            rb[q] = *(threadgroup const uint4 *)(xs + q * MMTC_XW + (tm + 16 * i + g + 8) * MMTC_RW + 4 * t);
        }
        #pragma unroll
        for (uint h = 0; h < 2; h++) {
            #pragma unroll
            for (uint q1 = MMTC_PIECES; q1 > 0; q1--) {
                const uint q = q1 - 1;
                const uint4 a = uint4(ra[q][2 * h], rb[q][2 * h], ra[q][2 * h + 1], rb[q][2 * h + 1]);
                #pragma unroll
                for (uint j = 0; j < 4; j++) {
                    gacc[4 * i + j] = mma_m16n8k16_bf16(gacc[4 * i + j], a, uint2(bw[j][2 * h], bw[j][2 * h + 1]), lane);
                }
            }
        }
    }
}

// mmtc_store writes the simdgroup's sub-tile to y, masking the edges: lane
// (g, t) holds tokens tm + 16i + g (+8), rows tn + 8j + 2t (+1).
__attribute__((always_inline)) inline void mmtc_store(device float * y, thread const float4 * acc, uint L, uint N, uint l, uint n) {
    #pragma unroll
    for (uint i = 0; i < 2; i++) {
        #pragma unroll
        for (uint j = 0; j < 4; j++) {
            #pragma unroll
            for (uint e = 0; e < 4; e++) {
                const uint li = l + 16 * i + 8 * (e / 2), ni = n + 8 * j + e % 2;
                if (li < L && ni < N) {
                    y[(ulong)li * N + ni] = acc[4 * i + j][e];
                }
            }
        }
    }
}

// mmtc_zero clears a simdgroup's 8 fragments.
__attribute__((always_inline)) inline void mmtc_zero(thread float4 * f) {
    #pragma unroll
    for (uint i = 0; i < 8; i++) {
        f[i] = float4(0.0f);
    }
}

// matmul_q_tc: thread tid stages row tid/2's codes 16·(tid%2) … of a step
// (q4: 8 bytes, q8: 16) as bf16 integers, and the row's (scale, bias) of the
// step's group at ws[MMTC_SB + 2n] (rows past N: zeros).
template <int BITS>
kernel void matmul_q_tc(
        constant matmul_args & args   [[buffer(0)]],
        device const uchar   * w      [[buffer(1)]],
        device const float   * x      [[buffer(2)]],
        device       float   * y      [[buffer(3)]],
        device const float   * scales [[buffer(4)]],
        device const float   * biases [[buffer(5)]],
        threadgroup  uint    * xs     [[threadgroup(0)]],
        threadgroup  uint    * ws     [[threadgroup(1)]],
        uint2  tg  [[threadgroup_position_in_grid]],
        ushort tid [[thread_index_in_threadgroup]]) {
    const uint L = args.L, N = args.N, K = args.K, G = args.group_size;
    const uint ng = K / G, rb = K / 8 * BITS;
    const uint mask = (1u << BITS) - 1;
    const uint l0 = tg.y * MMTC_BM, n0 = tg.x * MMTC_BN;
    const uint lane = tid % 32, sg = tid / 32;
    const uint tm = 32 * (sg % 2), tn = 32 * (sg / 2);
    const uint n = tid / 2, h = tid % 2;
    const bool row = n0 + n < N;
    device const uchar * wp = w + (ulong)(row ? n0 + n : 0) * rb + BITS * 2 * h; // the thread's 2·BITS bytes of step 0
    const ulong sb0 = (ulong)(row ? n0 + n : 0) * ng;
    float4 acc[8], gacc[8];
    mmtc_zero(acc);
    mmtc_zero(gacc);
    float4 xv[MMTC_XP];
    float xsum[MMTC_XP];
    mmtc_load_x(xv, x, L, K, l0, 0, tid);
    uint4 qv = uint4(0);
    float s = 0.0f, b = 0.0f;
    if (row && K > 0) {
        qv = BITS == 4 ? uint4(*(device const uint2 *)wp, 0, 0) : *(device const uint4 *)wp;
        s = scales[sb0];
        b = biases[sb0];
    }
    for (uint k0 = 0; k0 < K; k0 += MMTC_BK) {
        const bool first = k0 % G == 0, last = (k0 + MMTC_BK) % G == 0;
        mmtc_store_x<true>(xs, xv, xsum, first, last, tid);
        uint wd[8];
        #pragma unroll
        for (uint m = 0; m < 8; m++) { // codes 2m, 2m+1 of the thread's 16
            const uint word = BITS == 4 ? qv[m / 4] >> (8 * (m % 4)) : qv[m / 2] >> (16 * (m % 2));
            wd[m] = mma_pack(mmtc_code(word & mask), mmtc_code(word >> BITS & mask));
        }
        *(threadgroup uint4 *)(ws + n * MMTC_RW + 8 * h) = uint4(wd[0], wd[1], wd[2], wd[3]);
        *(threadgroup uint4 *)(ws + n * MMTC_RW + 8 * h + 4) = uint4(wd[4], wd[5], wd[6], wd[7]);
        if (h == 0) {
            *(threadgroup float2 *)(ws + MMTC_SB + 2 * n) = float2(s, b);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const uint k1 = k0 + MMTC_BK;
        if (k1 < K) { // the next step's loads, in flight during this step's mmas
            mmtc_load_x(xv, x, L, K, l0, k1, tid);
            if (row) {
                device const uchar * q = wp + (ulong)k1 / 8 * BITS;
                qv = BITS == 4 ? uint4(*(device const uint2 *)q, 0, 0) : *(device const uint4 *)q;
                s = scales[sb0 + k1 / G];
                b = biases[sb0 + k1 / G];
            }
        }
        mmtc_step(gacc, xs, ws, tm, tn, lane);
        if (last) { // fold the group: y += s·Σxq + b·Σx
            const uint g = lane / 4, t = lane % 4;
            threadgroup const float * xg = (threadgroup const float *)xs + MMTC_XG;
            threadgroup const float2 * sb = (threadgroup const float2 *)(ws + MMTC_SB);
            #pragma unroll
            for (uint j = 0; j < 4; j++) {
                const float2 p0 = sb[tn + 8 * j + 2 * t], p1 = sb[tn + 8 * j + 2 * t + 1];
                const float4 sc = float4(p0.x, p1.x, p0.x, p1.x), bi = float4(p0.y, p1.y, p0.y, p1.y);
                #pragma unroll
                for (uint i = 0; i < 2; i++) {
                    const float x0 = xg[tm + 16 * i + g], x8 = xg[tm + 16 * i + g + 8];
                    acc[4 * i + j] = acc[4 * i + j] + fma(sc, gacc[4 * i + j], bi * float4(x0, x0, x8, x8));
                    gacc[4 * i + j] = float4(0.0f);
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    mmtc_store(y, acc, L, N, l0 + tm + lane / 4, n0 + tn + 2 * (lane % 4));
}

// matmul_bf16_f32_tc: thread tid stages row tid/2's columns 16·(tid%2) … of a
// step, two 16-byte loads (zeros past N and K; K % 8 = 0).
kernel void matmul_bf16_f32_tc(
        constant matmul_args & args [[buffer(0)]],
        device const ushort  * w    [[buffer(1)]],
        device const float   * x    [[buffer(2)]],
        device       float   * y    [[buffer(3)]],
        threadgroup  uint    * xs   [[threadgroup(0)]],
        threadgroup  uint    * ws   [[threadgroup(1)]],
        uint2  tg  [[threadgroup_position_in_grid]],
        ushort tid [[thread_index_in_threadgroup]]) {
    const uint L = args.L, N = args.N, K = args.K;
    const uint l0 = tg.y * MMTC_BM, n0 = tg.x * MMTC_BN;
    const uint lane = tid % 32, sg = tid / 32;
    const uint tm = 32 * (sg % 2), tn = 32 * (sg / 2);
    const uint n = tid / 2, h = tid % 2;
    const bool row = n0 + n < N;
    device const ushort * wp = w + (ulong)(row ? n0 + n : 0) * K + 16 * h;
    float4 acc[8], gacc[8];
    mmtc_zero(acc);
    mmtc_zero(gacc);
    float4 xv[MMTC_XP];
    mmtc_load_x(xv, x, L, K, l0, 0, tid);
    uint4 wv[2];
    #pragma unroll
    for (uint j = 0; j < 2; j++) {
        wv[j] = row && 16 * h + 8 * j < K ? *(device const uint4 *)(wp + 8 * j) : uint4(0);
    }
    for (uint k0 = 0; k0 < K; k0 += MMTC_BK) {
        mmtc_store_x<false>(xs, xv, nullptr, false, false, tid);
        #pragma unroll
        for (uint j = 0; j < 2; j++) {
            *(threadgroup uint4 *)(ws + n * MMTC_RW + 8 * h + 4 * j) = wv[j];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const uint k1 = k0 + MMTC_BK;
        if (k1 < K) { // the next step's loads, in flight during this step's mmas
            mmtc_load_x(xv, x, L, K, l0, k1, tid);
            #pragma unroll
            for (uint j = 0; j < 2; j++) {
                wv[j] = row && k1 + 16 * h + 8 * j < K ? *(device const uint4 *)(wp + k1 + 8 * j) : uint4(0);
            }
        }
        mmtc_step(gacc, xs, ws, tm, tn, lane);
        #pragma unroll
        for (uint i = 0; i < 8; i++) {
            acc[i] = acc[i] + gacc[i];
            gacc[i] = float4(0.0f);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    mmtc_store(y, acc, L, N, l0 + tm + lane / 4, n0 + tn + 2 * (lane % 4));
}

typedef decltype(matmul_q_tc<4>) matmul_q_tc_t;
template [[host_name("matmul_q4_f32_tc")]] kernel matmul_q_tc_t matmul_q_tc<4>;
template [[host_name("matmul_q8_f32_tc")]] kernel matmul_q_tc_t matmul_q_tc<8>;
