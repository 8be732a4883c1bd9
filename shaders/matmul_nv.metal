// matmul_nv.metal: y = x·Wᵀ for prefill (L > 1) shaped for NVIDIA GPUs (the
// cuda backend); shaders/matmul.metal holds the Apple-shaped one, and package
// kernels picks per device (kernels/metal_nv_matmul.go).
//
// matmul_<w>_f32_nv: y (L, N) = x (L, K) · Wᵀ, W (N, K) in f32, f16, bf16 or
// MLX affine q4/q8 (codes uint32-packed row-major, f32 scales and biases per
// (row, group), groups a multiple of 32).
//
// Why this shape: the Apple kernel's simdgroup 8×8 matrices have no NVIDIA
// counterpart without tensor cores (the compat header emulates each 8×8×8
// step with 24 shuffles), so this is the classic SIMT register-blocked GEMM:
// plain float FMAs out of registers, operands from threadgroup memory.
//
// Grid: (⌈N/128⌉, ⌈L/64⌉) threadgroups of 128 threads (4 simdgroups); the
// threadgroup owns the 64×128 output tile (tokens l0…l0+63, rows n0…n0+127)
// and thread (tx, ty) (16×8) the 8×8 micro-tile of tokens 4ty + {0…3, 32…35}
// and rows 4tx + {0…3, 64…67}, 16 float4 accumulators in registers. Per k a
// thread reads 2 float4 of x and 2 of W from threadgroup memory for 64 FMAs:
// an SM's shared memory returns 32 floats a clock and its FMA units take 128,
// so 4 FMAs a float read keep the FMA units, not shared memory, the limit
// (a 4×8 micro-tile, 2.7 a float, did not). Lane bit 0 picks tx and bit 1 ty
// (a simdgroup is 8 tx × 4 ty), so lanes n, n^1 read the same x float4 and
// lanes n, n^2 the same W float4: the uniform-pair loads NVIDIA serves at
// twice the rate; each load covers 64 or 128 contiguous bytes, no conflicts.
//
// The K axis runs in steps of 32. Each step stages x (32 columns × 64 tokens,
// stride 68) and W dequantized or widened to float (32 columns × 128 rows,
// stride 132), both transposed so the micro-tile reads float4s; the strides
// are ≡ 4 (mod 32) banks so the transposing scalar stores are conflict-free
// too. The global loads of step k+1 are issued into registers before the FMAs
// of step k (register prefetch; no second buffer: 25 kB of threadgroup memory
// stays under Metal's 32 kB). Global loads are vectors: x float4s, two lanes
// per 32-byte sector; dense W 16-byte pieces; quantized W a row's 32 codes a
// thread (16 bytes q4, 32 bytes q8) with the row's one (scale, bias) of the
// step (a group is a multiple of 32 columns). Every loop has a constant trip
// count and is unrolled, so the accumulators and staged values stay in
// registers (no local memory in the PTX).
//
// Edges: tokens past L and rows past N stage zeros and are not stored; dense
// K needs only K % 4 = 0 (f32) or K % 8 = 0 (f16, bf16), the columns past K
// of the last step staging zeros (quantized K is a multiple of the group).
//
// Numerics: each output accumulates x·w in float in k order with explicit fmas
// (one thread owns it: no split, no reduction; the PTX build contracts
// nothing, so a·b + c would cost a mul and an add); dequantization is
// float(scale·q) + bias, unfused, exactly as MLX and the CPU reference
// evaluate it. The interpreter and the PTX compute the same bits.
#include <metal_stdlib>
#include "common.h"
using namespace metal;

#define MMNV_BM 64            // tokens per tile
#define MMNV_BN 128           // weight rows per tile
#define MMNV_BK 32            // columns per step
#define MMNV_XS (MMNV_BM + 4) // staged x: floats per column
#define MMNV_WS (MMNV_BN + 4) // staged W: floats per column
#define MMNV_THREADS 128
#define MMNV_XP (MMNV_BM * MMNV_BK / 4 / MMNV_THREADS) // x float4 pieces a thread

// mmnv_load_x loads the thread's float4 pieces of the x tile at k0 (zeros
// past L and K): piece u is token (u/32 mod 4)·16 + (u mod 32)/2, columns
// 4·((u/128)·2 + u mod 2) …, so two lanes read each 32-byte sector.
__attribute__((always_inline)) inline void mmnv_load_x(thread float4 * xv, device const float * x, uint L, uint K, uint l0, uint k0, uint tid) {
    #pragma unroll
    for (uint p = 0; p < MMNV_XP; p++) {
        const uint u = tid + MMNV_THREADS * p;
        const uint r = (u / 32) % 4 * 16 + u % 32 / 2, k = k0 + 4 * (u / 128 * 2 + u % 2);
        xv[p] = (l0 + r < L && k < K) ? *(device const float4 *)(x + (ulong)(l0 + r) * K + k) : float4(0.0f);
    }
}

// mmnv_store_x stages the pieces of mmnv_load_x transposed: xs[k·MMNV_XS + l].
__attribute__((always_inline)) inline void mmnv_store_x(threadgroup float * xs, thread const float4 * xv, uint tid) {
    #pragma unroll
    for (uint p = 0; p < MMNV_XP; p++) {
        const uint u = tid + MMNV_THREADS * p;
        const uint r = (u / 32) % 4 * 16 + u % 32 / 2, c = 4 * (u / 128 * 2 + u % 2);
        #pragma unroll
        for (uint j = 0; j < 4; j++) {
            xs[(c + j) * MMNV_XS + r] = xv[p][j];
        }
    }
}

// mmnv_tile accumulates the staged step into the thread's micro-tile:
// acc[2i + h] holds token 4ty + i (i < 4) or 32 + 4ty + i − 4, rows 64h + 4tx …
// The k loop is unrolled by 8, not 32: its index reaches only threadgroup
// addresses, and a quarter of the code JITs faster.
__attribute__((always_inline)) inline void mmnv_tile(thread float4 * acc, threadgroup const float * xs, threadgroup const float * ws, uint tx, uint ty) {
    #pragma unroll 8
    for (uint k = 0; k < MMNV_BK; k++) {
        const float4 a0 = *(threadgroup const float4 *)(xs + k * MMNV_XS + 4 * ty);
        const float4 a1 = *(threadgroup const float4 *)(xs + k * MMNV_XS + 32 + 4 * ty);
        const float4 b0 = *(threadgroup const float4 *)(ws + k * MMNV_WS + 4 * tx);
        const float4 b1 = *(threadgroup const float4 *)(ws + k * MMNV_WS + 64 + 4 * tx);
        #pragma unroll
        for (uint i = 0; i < 4; i++) {
            acc[2 * i] = fma(float4(a0[i]), b0, acc[2 * i]);
            acc[2 * i + 1] = fma(float4(a0[i]), b1, acc[2 * i + 1]);
            acc[2 * i + 8] = fma(float4(a1[i]), b0, acc[2 * i + 8]);
            acc[2 * i + 9] = fma(float4(a1[i]), b1, acc[2 * i + 9]);
        }
    }
}

// mmnv_store writes the micro-tile to y, masking the edges.
__attribute__((always_inline)) inline void mmnv_store(device float * y, thread const float4 * acc, uint L, uint N, uint l0, uint n0, uint tx, uint ty) {
    #pragma unroll
    for (uint i = 0; i < 8; i++) {
        const uint l = l0 + 4 * ty + i % 4 + i / 4 * 32;
        #pragma unroll
        for (uint h = 0; h < 2; h++) {
            #pragma unroll
            for (uint j = 0; j < 4; j++) {
                const uint n = n0 + 64 * h + 4 * tx + j;
                if (l < L && n < N) {
                    y[(ulong)l * N + n] = acc[2 * i + h][j];
                }
            }
        }
    }
}

// mmnv_thread returns the thread's (tx, ty): lane bits 0, 2, 3 and simdgroup
// bit 0 make tx, lane bits 1, 4 and simdgroup bit 1 make ty.
__attribute__((always_inline)) inline uint2 mmnv_thread(uint tid) {
    const uint lane = tid % 32, sg = tid / 32;
    const uint tx = (lane & 1) | (lane >> 1 & 6) | (sg & 1) << 3;
    const uint ty = (lane >> 1 & 1) | (lane >> 3 & 2) | (sg & 2) << 1;
    return uint2(tx, ty);
}

// mmnv_put stages one 16-byte piece of a dense W row, widened: ws[(c + e)·MMNV_WS + n]
// for its elements e. The last argument picks the element type.
__attribute__((always_inline)) inline void mmnv_put(threadgroup float * ws, uint c, uint n, uint4 v, float) {
    const float4 f = as_type<float4>(v);
    #pragma unroll
    for (uint e = 0; e < 4; e++) {
        ws[(c + e) * MMNV_WS + n] = f[e];
    }
}
__attribute__((always_inline)) inline void mmnv_put(threadgroup float * ws, uint c, uint n, uint4 v, half) {
    #pragma unroll
    for (uint e = 0; e < 4; e++) {
        const float2 f = float2(as_type<half2>(v[e]));
        ws[(c + 2 * e) * MMNV_WS + n] = f.x;
        ws[(c + 2 * e + 1) * MMNV_WS + n] = f.y;
    }
}
__attribute__((always_inline)) inline void mmnv_put(threadgroup float * ws, uint c, uint n, uint4 v, ushort) { // bf16
    #pragma unroll
    for (uint e = 0; e < 4; e++) {
        ws[(c + 2 * e) * MMNV_WS + n] = as_type<float>(v[e] << 16);
        ws[(c + 2 * e + 1) * MMNV_WS + n] = as_type<float>(v[e] & 0xffff0000u);
    }
}

// matmul_dense_nv: W's pieces are 16 bytes, E elements each, PT a thread (f32:
// 8 of 4, f16/bf16: 4 of 8). Piece u is row (u/P) mod 128, column piece
// u mod P + P·(u/(128·P)): a simdgroup reads 32 rows (P = 1) or 2 pieces of
// 16 rows (P = 2, f32), so its transposing stores hit 32 distinct banks.
template <typename T>
kernel void matmul_dense_nv(
        constant matmul_args & args [[buffer(0)]],
        device const T       * w    [[buffer(1)]],
        device const float   * x    [[buffer(2)]],
        device       float   * y    [[buffer(3)]],
        threadgroup  float   * xs   [[threadgroup(0)]],
        threadgroup  float   * ws   [[threadgroup(1)]],
        uint2  tg  [[threadgroup_position_in_grid]],
        ushort tid [[thread_index_in_threadgroup]]) {
    constexpr uint E = 16 / sizeof(T);
    constexpr uint PT = MMNV_BN * MMNV_BK / E / MMNV_THREADS;
    constexpr uint P = E == 4 ? 2 : 1;
    const uint L = args.L, N = args.N, K = args.K;
    const uint l0 = tg.y * MMNV_BM, n0 = tg.x * MMNV_BN;
    const uint2 t = mmnv_thread(tid);
    float4 acc[16];
    #pragma unroll
    for (uint i = 0; i < 16; i++) {
        acc[i] = float4(0.0f);
    }
    float4 xv[MMNV_XP];
    uint4 wv[PT];
    mmnv_load_x(xv, x, L, K, l0, 0, tid);
    #pragma unroll
    for (uint p = 0; p < PT; p++) {
        const uint u = tid + MMNV_THREADS * p;
        const uint n = u / P % MMNV_BN, k = (u % P + P * (u / (MMNV_BN * P))) * E;
        wv[p] = (n0 + n < N && k < K) ? *(device const uint4 *)(w + (ulong)(n0 + n) * K + k) : uint4(0);
    }
    for (uint k0 = 0; k0 < K; k0 += MMNV_BK) {
        mmnv_store_x(xs, xv, tid);
        #pragma unroll
        for (uint p = 0; p < PT; p++) {
            const uint u = tid + MMNV_THREADS * p;
            mmnv_put(ws, (u % P + P * (u / (MMNV_BN * P))) * E, u / P % MMNV_BN, wv[p], T(0));
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const uint k1 = k0 + MMNV_BK;
        if (k1 < K) { // the next step's loads, in flight during this step's FMAs
            mmnv_load_x(xv, x, L, K, l0, k1, tid);
            #pragma unroll
            for (uint p = 0; p < PT; p++) {
                const uint u = tid + MMNV_THREADS * p;
                const uint n = u / P % MMNV_BN, k = k1 + (u % P + P * (u / (MMNV_BN * P))) * E;
                wv[p] = (n0 + n < N && k < K) ? *(device const uint4 *)(w + (ulong)(n0 + n) * K + k) : uint4(0);
            }
        }
        mmnv_tile(acc, xs, ws, t.x, t.y);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    mmnv_store(y, acc, L, N, l0, n0, t.x, t.y);
}

typedef decltype(matmul_dense_nv<float>) matmul_f32_nv_t;
typedef decltype(matmul_dense_nv<half>) matmul_f16_nv_t;
typedef decltype(matmul_dense_nv<ushort>) matmul_bf16_nv_t;
template [[host_name("matmul_f32_f32_nv")]]  kernel matmul_f32_nv_t  matmul_dense_nv<float>;
template [[host_name("matmul_f16_f32_nv")]]  kernel matmul_f16_nv_t  matmul_dense_nv<half>;
template [[host_name("matmul_bf16_f32_nv")]] kernel matmul_bf16_nv_t matmul_dense_nv<ushort>;

// matmul_q_nv: thread tid dequantizes row tid's 32 codes of a step (BITS
// 16-byte loads; a simdgroup: 32 rows, conflict-free stores) with the one
// (scale, bias) of that row's group (rows past N: zeros).
template <int BITS>
kernel void matmul_q_nv(
        constant matmul_args & args   [[buffer(0)]],
        device const uchar   * w      [[buffer(1)]],
        device const float   * x      [[buffer(2)]],
        device       float   * y      [[buffer(3)]],
        device const float   * scales [[buffer(4)]],
        device const float   * biases [[buffer(5)]],
        threadgroup  float   * xs     [[threadgroup(0)]],
        threadgroup  float   * ws     [[threadgroup(1)]],
        uint2  tg  [[threadgroup_position_in_grid]],
        ushort tid [[thread_index_in_threadgroup]]) {
    constexpr uint NQ = BITS / 4; // 16-byte loads a step
    const uint L = args.L, N = args.N, K = args.K, G = args.group_size;
    const uint ng = K / G, rb = K / 8 * BITS;
    const uint mask = (1u << BITS) - 1;
    const uint l0 = tg.y * MMNV_BM, n0 = tg.x * MMNV_BN;
    const uint2 t = mmnv_thread(tid);
    const uint n = tid; // MMNV_THREADS == MMNV_BN
    const bool row = n0 + n < N;
    device const uint4 * wp = (device const uint4 *)(w + (ulong)(row ? n0 + n : 0) * rb);
    const ulong sb0 = (ulong)(row ? n0 + n : 0) * ng;
    float4 acc[16];
    #pragma unroll
    for (uint i = 0; i < 16; i++) {
        acc[i] = float4(0.0f);
    }
    float4 xv[MMNV_XP];
    mmnv_load_x(xv, x, L, K, l0, 0, tid);
    uint4 q[NQ];
    float s = 0.0f, b = 0.0f;
    #pragma unroll
    for (uint j = 0; j < NQ; j++) {
        q[j] = uint4(0);
    }
    if (row && K > 0) {
        #pragma unroll
        for (uint j = 0; j < NQ; j++) {
            q[j] = wp[j];
        }
        s = scales[sb0];
        b = biases[sb0];
    }
    for (uint k0 = 0; k0 < K; k0 += MMNV_BK) {
        mmnv_store_x(xs, xv, tid);
        #pragma unroll
        for (uint i = 0; i < MMNV_BK; i++) {
            const uint code = (q[i * BITS / 128][i * BITS / 32 % 4] >> (i * BITS % 32)) & mask;
            ws[i * MMNV_WS + n] = float(s * float(code)) + b;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const uint k1 = k0 + MMNV_BK;
        if (k1 < K) { // the next step's loads, in flight during this step's FMAs
            mmnv_load_x(xv, x, L, K, l0, k1, tid);
            if (row) {
                #pragma unroll
                for (uint j = 0; j < NQ; j++) {
                    q[j] = wp[k1 / 32 * NQ + j];
                }
                s = scales[sb0 + k1 / G];
                b = biases[sb0 + k1 / G];
            }
        }
        mmnv_tile(acc, xs, ws, t.x, t.y);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    mmnv_store(y, acc, L, N, l0, n0, t.x, t.y);
}

typedef decltype(matmul_q_nv<4>) matmul_q_nv_t;
template [[host_name("matmul_q4_f32_nv")]] kernel matmul_q_nv_t matmul_q_nv<4>;
template [[host_name("matmul_q8_f32_nv")]] kernel matmul_q_nv_t matmul_q_nv<8>;
