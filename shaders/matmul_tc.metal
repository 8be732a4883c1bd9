// matmul_tc.metal: y = x·Wᵀ for prefill (L > 1) on NVIDIA tensor cores
// (mma.sync m16n8k16 bf16, shaders/mma.h), f32-accurate; the SIMT
// matmul_nv.metal is the fallback, and package kernels picks per device
// (kernels/metal_nv_matmul.go: compute capability 8.0 or later). The _tc8
// kernels at the end of the file take int8 mmas against x quantized to three
// byte planes (INGOT_NV_TC=int8 until measured).
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

// ---------------------------------------------------------------------------
// matmul_<q4|q8>_f32_tc8: the same product on int8 tensor cores (mma.sync
// m16n8k32 s8·u8, shaders/mma.h: twice m16n8k16's k an instruction), still
// f32-accurate. x is quantized first, once per call, by
// quantx_<q4|q8>_f32_tc8, as the _nvi mat-vecs' quantx does
// (matvec_nv.metal), per token and 32-column piece p: dx = amax/MMT8_TMAX,
// x_k ≈ dx·t_k with |x_k − dx·t_k| ≤ dx/2 = 1.012·2⁻²⁴·amax and |t_k| ≤
// MMT8_TMAX < 2²³, t = hi·2¹⁶ + mid·2⁸ + lo in three signed bytes. A code q
// (0 … 2^b − 1) is an unsigned byte, so each (piece, plane) is one mma k-step
// and its int32 sum S = Σ q·plane is exact (|S| ≤ 32·255·128 < 2²⁰). Per
// piece
//
//	Σ_k (s·q_k + b)·x_k = s·(dx·V + c·E) + b·Σx,   V = 2¹⁶·S_hi + 2⁸·S_mid + S_lo,
//
// with c = (2^b − 1)/2 and E = Σ (x − dx·t): exact but for x's rounding to
// t, which leaves |s|·Σ|q − c|·|x − dx·t| ≤ |s|·(2^b/2)·32·dx/2 a piece
// (quantx_tc8's test bound; ≤ 16.2·2⁻²⁴·|s|·2^b·Σ|x| of the piece at worst,
// ~0.5 for Gaussian x), and f32 rounding after the integer sums.
//
// The int32 → f32 conversion costs no conversion instruction (I2F is
// quarter rate on the H100): each plane's mma starts from C = the bits of
// 1.5·2^e (e = 39, 31, 23 for hi, mid, lo), so the sum's bits read as a
// float are exactly 1.5·2^e + S·2^(e−23) (|S| < 2²², one binade), i.e.
// 2¹⁶·S_hi, 2⁸·S_mid and S_lo offset by constants; subtracting the three
// constants' sum from hi's is exact (a multiple of 2¹⁶ below 2³⁷), and two
// adds give V, rounded twice: 4 f32 instructions an output a piece with
// gacc = fma(dx, V, gacc). The group sums of Σx and c·E per token come from
// quantx_tc8, so a group's fold is acc = fma(s, gacc + c·E, fma(b, Σx, acc)).
//
// Geometry as matmul_q_tc: (⌈N/128⌉, ⌈L/64⌉) threadgroups of 256 threads,
// simdgroup sg the 32×32 sub-tile (2 m-tiles × 4 n-tiles), K in steps of one
// piece (32 columns): 24 mmas a simdgroup a step (2 × 4 × 3 planes) where
// matmul_q_tc issues 48. Staged per step: the three planes (64 tokens × 8
// words each), dx and the group's (Σx, c·E) per token, and W's codes as bytes
// (128 rows × 8 words) with (scale, bias) per row: 11.8 kB. A lane reads
// words 2t, 2t+1 of its rows as one 8-byte load and uses them as fragment
// words t and t+4 (the permutation of matmul_q_tc, for A and B alike); a
// quarter of the simdgroup's rows g … g+3 fill the 32 banks. q4 codes are
// staged nibble-split (word w & 0x0f0f0f0f, then w >> 4 & 0x0f0f0f0f), so
// byte b of a staged row holds column 8·(b/8) + 2·(b%4) + (b/4)%2, and
// quantx_tc8 writes the q4 planes in that order (quantx's q4 order); q8 codes
// and planes keep column order. Accumulators a lane: 32 f32 outputs, 32 f32
// group sums, 12 int32 (one fragment's three planes) in flight.
//
// Quantized x (quantx_tc8's output, one buffer): plane bytes of token l,
// piece p at ((p·L + l)·3 + plane)·32 (96 contiguous bytes a token a piece),
// dx at dx[p·L + l], and (Σx, c·E) of group gi at gs[gi·L + l].
// Groups must divide 128 (32, 64, 128): the host falls back to _tc otherwise.

#define MMT8_TMAX 8290000                  // |t| bound, as MVNI_TMAX (matvec_nv.metal)
#define MMT8_RW 8                          // words per staged row (32 bytes)
#define MMT8_XW (MMTC_BM * MMT8_RW)        // words of one staged plane of x
#define MMT8_DX (3 * MMT8_XW)              // xs word where the tokens' dx start
#define MMT8_GS (MMT8_DX + MMTC_BM)        // xs word where the tokens' (Σx, c·E) start (float2)
#define MMT8_SB (MMTC_BN * MMT8_RW)        // ws word where the rows' (scale, bias) start
#define MMT8_CHI 0x53400000                // bits of 1.5·2³⁹ (ulp 2¹⁶)
#define MMT8_CMID 0x4F400000               // bits of 1.5·2³¹ (ulp 2⁸)
#define MMT8_CLO 0x4B400000                // bits of 1.5·2²³ (ulp 1)
#define MMT8_CSUM 827867529216.0f          // 1.5·(2³⁹ + 2³¹ + 2²³), exact in f32

// quantx_<q4|q8>_f32_tc8: x (L, K) into the planes, dx and group sums of
// matmul_<w>_f32_tc8 (above). Grid (L, ⌈(K/G)/4⌉) threadgroups of 128
// threads (tokens on x, which has no 65535 limit on CUDA): simdgroup sg
// quantizes group 4·tg.y + sg of token tg.x, one piece
// at a time, lane j taking column j (the rounding as quantx's: t = v/dx to
// nearest, |t| ≤ MMT8_TMAX, x = 0 pieces dx = 0). Its lanes reduce absmax, Σx
// and E by butterflies (every lane gets the same bits) and sum them over the
// group's pieces in order; NaN in x reaches Σx and so every output of the
// token.
template <int BITS>
kernel void quantx_tc8(
        constant matmul_args & args   [[buffer(0)]],
        device const float   * x      [[buffer(1)]],
        device uchar         * planes [[buffer(2)]],
        device float         * dxs    [[buffer(3)]],
        device float2        * gs     [[buffer(4)]],
        uint2  tg   [[threadgroup_position_in_grid]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    const uint L = args.L, K = args.K, G = args.group_size;
    const uint gi = 4 * tg.y + sg, l = tg.x, j = lane;
    if (gi < K / G) { // uniform in the simdgroup
        const uint b = BITS == 4 ? (2 * (j / 8) + j % 2) * 4 + (j % 8) / 2 : j; // byte in the piece's plane
        float sx = 0.0f, se = 0.0f;
        for (uint u = 0; u < G / 32; u++) {
            const uint p = gi * (G / 32) + u;
            const float v = x[(ulong)l * K + 32 * p + j];
            float a = fabs(v), s = v;
            for (uint m = 1; m < 32; m <<= 1) {
                a = max(a, simd_shuffle_xor(a, ushort(m)));
                s += simd_shuffle_xor(s, ushort(m));
            }
            const float inv = a > 0.0f ? float(MMT8_TMAX) / a : 0.0f;
            const float dx = a / float(MMT8_TMAX);
            float f = rint(v * inv);
            f = f == f ? clamp(f, -float(MMT8_TMAX), float(MMT8_TMAX)) : 0.0f;
            float e = fma(-dx, f, v);
            if (fabs(e) > 0.5f * dx && fabs(f) < float(MMT8_TMAX)) {
                f += e > 0.0f ? 1.0f : -1.0f;
                e = fma(-dx, f, v);
            }
            for (uint m = 1; m < 32; m <<= 1) {
                e += simd_shuffle_xor(e, ushort(m));
            }
            const int t = int(f);
            const int lo = (t << 24) >> 24, t1 = (t - lo) >> 8;
            const int mid = (t1 << 24) >> 24, hi = (t1 - mid) >> 8;
            device uchar * base = planes + ((ulong)p * L + l) * 96 + b;
            base[0] = uchar(hi);
            base[32] = uchar(mid);
            base[64] = uchar(lo);
            if (j == 0) {
                dxs[(ulong)p * L + l] = dx;
            }
            sx += s;
            se += e;
        }
        if (j == 0) {
            gs[(ulong)gi * L + l] = float2(sx, float((1u << BITS) - 1) * 0.5f * se);
        }
    }
}

// mmt8_step runs a staged step's 24 mmas into the simdgroup's group sums:
// gacc[4i + j] += dx·V for m-tile i (tokens tm + 16i …), n-tile j (rows tn +
// 8j …), each fragment's three planes from their own constant C.
__attribute__((always_inline)) inline void mmt8_step(thread float4 * gacc, threadgroup const uint * xs, threadgroup const uint * ws, uint tm, uint tn, uint lane) {
    const uint g = lane / 4, t = lane % 4;
    threadgroup const float * dx = (threadgroup const float *)xs + MMT8_DX;
    uint2 bw[4];
    #pragma unroll
    for (uint j = 0; j < 4; j++) {
        bw[j] = *(threadgroup const uint2 *)(ws + (tn + 8 * j + g) * MMT8_RW + 2 * t);
    }
    #pragma unroll
    for (uint i = 0; i < 2; i++) {
        const uint r = tm + 16 * i + g;
        uint4 a[3];
        #pragma unroll
        for (uint q = 0; q < 3; q++) {
            const uint2 r0 = *(threadgroup const uint2 *)(xs + q * MMT8_XW + r * MMT8_RW + 2 * t);
            const uint2 r8 = *(threadgroup const uint2 *)(xs + q * MMT8_XW + (r + 8) * MMT8_RW + 2 * t);
            a[q] = uint4(r0.x, r8.x, r0.y, r8.y);
        }
        const float d0 = dx[r], d8 = dx[r + 8];
        const float4 d = float4(d0, d0, d8, d8);
        #pragma unroll
        for (uint j = 0; j < 4; j++) {
            const int4 sh = mma_m16n8k32_s8u8(int4(MMT8_CHI), a[0], bw[j], lane);
            const int4 sm = mma_m16n8k32_s8u8(int4(MMT8_CMID), a[1], bw[j], lane);
            const int4 sl = mma_m16n8k32_s8u8(int4(MMT8_CLO), a[2], bw[j], lane);
            const float4 v = ((as_type<float4>(sh) - MMT8_CSUM) + as_type<float4>(sm)) + as_type<float4>(sl);
            gacc[4 * i + j] = fma(d, v, gacc[4 * i + j]);
        }
    }
}

// matmul_q_tc8: thread tid stages token tid/4's bytes 8·(tid%4) … of the
// three planes (tokens past L: zeros), threads 0 … 63 the tokens' dx and 64 …
// 127 their group's (Σx, c·E); as in matmul_q_tc, thread tid stages row
// tid/2's codes 16·(tid%2) … (as bytes) and the row's (scale, bias).
template <int BITS>
kernel void matmul_q_tc8(
        constant matmul_args & args   [[buffer(0)]],
        device const uchar   * w      [[buffer(1)]],
        device const uchar   * xq     [[buffer(2)]],
        device       float   * y      [[buffer(3)]],
        device const float   * scales [[buffer(4)]],
        device const float   * biases [[buffer(5)]],
        device const float   * dxs    [[buffer(6)]],
        device const float2  * gs     [[buffer(7)]],
        threadgroup  uint    * xs     [[threadgroup(0)]],
        threadgroup  uint    * ws     [[threadgroup(1)]],
        uint2  tg  [[threadgroup_position_in_grid]],
        ushort tid [[thread_index_in_threadgroup]]) {
    const uint L = args.L, N = args.N, K = args.K, G = args.group_size;
    const uint ng = K / G, rb = K / 8 * BITS, np = K / MMTC_BK;
    const uint l0 = tg.y * MMTC_BM, n0 = tg.x * MMTC_BN;
    const uint lane = tid % 32, sg = tid / 32;
    const uint tm = 32 * (sg % 2), tn = 32 * (sg / 2);
    const uint n = tid / 2, h = tid % 2;
    const bool row = n0 + n < N;
    device const uchar * wp = w + (ulong)(row ? n0 + n : 0) * rb + BITS * 2 * h; // the thread's 2·BITS bytes of step 0
    const ulong sb0 = (ulong)(row ? n0 + n : 0) * ng;
    const uint r = tid / 4, c = tid % 4;
    const bool tok = l0 + r < L;
    device const uchar * xp = xq + (ulong)(tok ? l0 + r : 0) * 96 + 8 * c; // piece 0's bytes of token l0 + r
    const uint lm = tid % 64;                                             // the token whose dx or (Σx, c·E) thread tid < 128 loads
    const bool meta = tid < 128 && l0 + lm < L;
    float4 acc[8], gacc[8];
    mmtc_zero(acc);
    mmtc_zero(gacc);
    uint2 xv[3];
    uint4 qv = uint4(0);
    float s = 0.0f, b = 0.0f, dv = 0.0f;
    float2 gv = float2(0.0f);
    #pragma unroll
    for (uint q = 0; q < 3; q++) {
        xv[q] = tok && K > 0 ? *(device const uint2 *)(xp + 32 * q) : uint2(0);
    }
    if (meta && K > 0) {
        if (tid < 64) {
            dv = dxs[l0 + lm];
        } else {
            gv = gs[l0 + lm];
        }
    }
    if (row && K > 0) {
        qv = BITS == 4 ? uint4(*(device const uint2 *)wp, 0, 0) : *(device const uint4 *)wp;
        s = scales[sb0];
        b = biases[sb0];
    }
    const uint gp = G / MMTC_BK;
    uint gi = 0, u = 0; // the step's group, and the step's piece in it
    for (uint p = 0; p < np; p++) {
        const bool last = u + 1 == gp;
        const uint g1 = last ? gi + 1 : gi; // the next step's group
        #pragma unroll
        for (uint q = 0; q < 3; q++) {
            *(threadgroup uint2 *)(xs + q * MMT8_XW + r * MMT8_RW + 2 * c) = xv[q];
        }
        if (tid < 64) {
            ((threadgroup float *)xs)[MMT8_DX + lm] = dv;
        } else if (tid < 128) {
            ((threadgroup float2 *)(xs + MMT8_GS))[lm] = gv;
        }
        const uint4 wd = BITS == 4 ? uint4(qv.x & 0x0f0f0f0fu, qv.x >> 4 & 0x0f0f0f0fu, qv.y & 0x0f0f0f0fu, qv.y >> 4 & 0x0f0f0f0fu) : qv;
        *(threadgroup uint4 *)(ws + n * MMT8_RW + 4 * h) = wd;
        if (h == 0) {
            *(threadgroup float2 *)(ws + MMT8_SB + 2 * n) = float2(s, b);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const uint p1 = p + 1;
        if (p1 < np) { // the next step's loads, in flight during this step's mmas
            const ulong po = (ulong)p1 * L;
            #pragma unroll
            for (uint q = 0; q < 3; q++) {
                xv[q] = tok ? *(device const uint2 *)(xp + po * 96 + 32 * q) : uint2(0);
            }
            if (meta) {
                if (tid < 64) {
                    dv = dxs[po + l0 + lm];
                } else {
                    gv = gs[(ulong)g1 * L + l0 + lm];
                }
            }
            if (row) {
                device const uchar * wq = wp + (ulong)p1 * 4 * BITS;
                qv = BITS == 4 ? uint4(*(device const uint2 *)wq, 0, 0) : *(device const uint4 *)wq;
                s = scales[sb0 + g1];
                b = biases[sb0 + g1];
            }
        }
        mmt8_step(gacc, xs, ws, tm, tn, lane);
        if (last) { // fold the group: y += s·(Σ dx·V + c·E) + b·Σx
            const uint g = lane / 4, t = lane % 4;
            threadgroup const float2 * xg = (threadgroup const float2 *)(xs + MMT8_GS);
            threadgroup const float2 * sb = (threadgroup const float2 *)(ws + MMT8_SB);
            #pragma unroll
            for (uint j = 0; j < 4; j++) {
                const float2 e0 = sb[tn + 8 * j + 2 * t], e1 = sb[tn + 8 * j + 2 * t + 1];
                const float4 sc = float4(e0.x, e1.x, e0.x, e1.x), bi = float4(e0.y, e1.y, e0.y, e1.y);
                #pragma unroll
                for (uint i = 0; i < 2; i++) {
                    const float2 x0 = xg[tm + 16 * i + g], x8 = xg[tm + 16 * i + g + 8];
                    const float4 sx = float4(x0.x, x0.x, x8.x, x8.x), ce = float4(x0.y, x0.y, x8.y, x8.y);
                    acc[4 * i + j] = fma(sc, gacc[4 * i + j] + ce, fma(bi, sx, acc[4 * i + j]));
                    gacc[4 * i + j] = float4(0.0f);
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        gi = g1;
        u = last ? 0 : u + 1;
    }
    mmtc_store(y, acc, L, N, l0 + tm + lane / 4, n0 + tn + 2 * (lane % 4));
}

typedef decltype(quantx_tc8<4>) quantx_tc8_t;
template [[host_name("quantx_q4_f32_tc8")]] kernel quantx_tc8_t quantx_tc8<4>;
template [[host_name("quantx_q8_f32_tc8")]] kernel quantx_tc8_t quantx_tc8<8>;
typedef decltype(matmul_q_tc8<4>) matmul_q_tc8_t;
template [[host_name("matmul_q4_f32_tc8")]] kernel matmul_q_tc8_t matmul_q_tc8<4>;
template [[host_name("matmul_q8_f32_tc8")]] kernel matmul_q_tc8_t matmul_q_tc8<8>;
