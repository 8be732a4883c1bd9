// kquant.metal: y = x·Wᵀ and the embedding gather for W in GGUF's (ggml's)
// block types, read as the file stores them: q8_0, q4_0 (32 values a block),
// q4_k, q5_k and q6_k (256 values a block).
//
// W (N, K) is row-major, each row K/32 or K/256 blocks in ggml's layout
// (ggml-common.h block_q8_0 … block_q6_K; see cpu.KQuant for the table). Every
// weight is dequantized as gguf-py's dequantize computes it:
//
//	q8_0  d·q (q int8)              q4_0  d·(q − 8)
//	q4_k  (d·sc)·q − dmin·m          q5_k  the same with 5-bit q
//	q6_k  (d·sc)·(q − 32), sc int8
//
// with the 6-bit scales and mins of q4_k/q5_k unpacked as ggml's
// get_scale_min_k4. Blocks are read as bytes (a q8_0 block is 34 bytes, so its
// f16 d is only 2-byte aligned at best); no scales or biases buffers.
//
// kq_deq8(tag, row, k8, w) writes columns [8·k8, 8·k8+8) of one row, the unit
// every kernel below is built of:
//
// matvec_<t>_f32 (L = 1; the grid's y axis runs more rows): the geometry of
// matvec.metal and mxfp4.metal, (⌈N/8⌉, L) threadgroups of 64 threads = 2
// simdgroups, 4 rows a simdgroup. A lane takes 16 columns a step, loads its 16
// x once and multiplies them with the same 16 columns of all 4 rows; the 32
// lane partials are folded with simd_sum.
//
// matmul_<t>_f32 (L > 1): the geometry of matmul.metal, (⌈N/32⌉, ⌈L/32⌉)
// threadgroups of 128 threads = 4 simdgroups, 32×32 output tiles held as
// simdgroup 8×8 float accumulators; a K step of 32 columns (K is whole blocks
// of 32 or 256) is dequantized into threadgroup memory by 4 threads a row, 8
// columns each.
//
// embed_<t>_f32: embed.metal's grid, (⌈D/256⌉, L) threadgroups of 256
// threads, one output element per thread.
//
// Numerics: every product is of the dequantized weight; float accumulation
// in a different order than the CPU reference.
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
#include "common.h"
using namespace metal;

#define KQ_ROWS 4 // matvec: rows per simdgroup (matvec.metal's MV_ROWS)
#define KQ_SG   2 // matvec: simdgroups per threadgroup (MV_SG)
#define KQ_BM   32 // matmul: tokens per tile (matmul.metal's MM_BM)
#define KQ_BN   32 // matmul: weight rows per tile (MM_BN)
#define KQ_BK   32 // matmul: columns per step (MM_BK)
#define KQ_THREADS 128

// kq_f16 reads the little-endian f16 at p, byte by byte.
inline float kq_f16(device const uchar * p) {
    return float(as_type<half>(ushort(p[0] | (ushort(p[1]) << 8))));
}

// One tag type per block type: the kernels are templates over it.
struct kq_q8_0 {};
struct kq_q4_0 {};
struct kq_q4_k {};
struct kq_q5_k {};
struct kq_q6_k {};

// kq_row_bytes returns the bytes of a row of K values.
inline uint kq_row_bytes(kq_q8_0, uint K) { return K / 32 * 34; }
inline uint kq_row_bytes(kq_q4_0, uint K) { return K / 32 * 18; }
inline uint kq_row_bytes(kq_q4_k, uint K) { return K / 256 * 144; }
inline uint kq_row_bytes(kq_q5_k, uint K) { return K / 256 * 176; }
inline uint kq_row_bytes(kq_q6_k, uint K) { return K / 256 * 210; }

inline void kq_deq8(kq_q8_0, device const uchar * r, uint k8, thread float * w) {
    device const uchar * b = r + (k8 / 4) * 34;
    const float d = kq_f16(b);
    device const uchar * q = b + 2 + (k8 % 4) * 8;
    for (uint i = 0; i < 8; i++) {
        w[i] = d * float(as_type<char>(q[i]));
    }
}

inline void kq_deq8(kq_q4_0, device const uchar * r, uint k8, thread float * w) {
    device const uchar * b = r + (k8 / 4) * 18;
    const float d = kq_f16(b);
    const uint j0 = (k8 % 4) * 8; // values j0…j0+7: low nibbles below 16, high from 16
    device const uchar * q = b + 2 + j0 % 16;
    const uint sh = j0 < 16 ? 0 : 4;
    for (uint i = 0; i < 8; i++) {
        w[i] = d * float(int((q[i] >> sh) & 15) - 8);
    }
}

// kq_scale_min is ggml's get_scale_min_k4: the 6-bit scale and min of
// sub-block s from the 12 scale bytes of a q4_k or q5_k block.
inline float2 kq_scale_min(uint s, device const uchar * sc) {
    if (s < 4) {
        return float2(float(sc[s] & 63), float(sc[s + 4] & 63));
    }
    return float2(float((sc[s + 4] & 15) | ((sc[s - 4] >> 6) << 4)),
                  float((sc[s + 4] >> 4) | ((sc[s] >> 6) << 4)));
}

inline void kq_deq8(kq_q4_k, device const uchar * r, uint k8, thread float * w) {
    device const uchar * b = r + (k8 / 32) * 144;
    const uint e0 = (k8 % 32) * 8; // element of the block; sub-block e0/32
    const float2 sm = kq_scale_min(e0 / 32, b + 4);
    const float a = kq_f16(b) * sm.x, c = kq_f16(b + 2) * sm.y;
    // elements 64k + l (low nibble) and 64k + 32 + l (high) share byte 32k + l
    device const uchar * q = b + 16 + (e0 / 64) * 32 + e0 % 32;
    const uint sh = (e0 / 32) % 2 * 4;
    for (uint i = 0; i < 8; i++) {
        w[i] = a * float((q[i] >> sh) & 15) - c;
    }
}

inline void kq_deq8(kq_q5_k, device const uchar * r, uint k8, thread float * w) {
    device const uchar * b = r + (k8 / 32) * 176;
    const uint e0 = (k8 % 32) * 8;
    const float2 sm = kq_scale_min(e0 / 32, b + 4);
    const float a = kq_f16(b) * sm.x, c = kq_f16(b + 2) * sm.y;
    device const uchar * qh = b + 16 + e0 % 32; // bit e0/32 of byte l: the fifth bit
    device const uchar * q = b + 48 + (e0 / 64) * 32 + e0 % 32;
    const uint sh = (e0 / 32) % 2 * 4, hb = e0 / 32;
    for (uint i = 0; i < 8; i++) {
        const uint v = ((q[i] >> sh) & 15) | (((qh[i] >> hb) & 1) << 4);
        w[i] = a * float(v) - c;
    }
}

inline void kq_deq8(kq_q6_k, device const uchar * r, uint k8, thread float * w) {
    device const uchar * b = r + (k8 / 32) * 210;
    const uint e0 = (k8 % 32) * 8;
    // element 128n + 32j + l: low 4 bits in ql[64n + 32(j%2) + l] (nibble j/2),
    // high 2 in qh[32n + l] (bits 2j); scale group e/16, int8.
    const uint n = e0 / 128, j = e0 % 128 / 32, l0 = e0 % 32;
    const float a = kq_f16(b + 208) * float(as_type<char>(b[192 + e0 / 16]));
    device const uchar * ql = b + 64 * n + 32 * (j % 2) + l0;
    device const uchar * qh = b + 128 + 32 * n + l0;
    const uint sl = (j / 2) * 4, sh = 2 * j;
    for (uint i = 0; i < 8; i++) {
        const int v = int(((ql[i] >> sl) & 15) | (((qh[i] >> sh) & 3) << 4));
        w[i] = a * float(v - 32);
    }
}

template <typename T>
kernel void matvec_kq(
        constant matvec_args & args [[buffer(0)]],
        device const uchar   * w    [[buffer(1)]],
        device const float   * x    [[buffer(2)]],
        device       float   * y    [[buffer(3)]],
        uint2  tg   [[threadgroup_position_in_grid]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    const uint K = args.K, N = args.N;
    const uint rb = kq_row_bytes(T(), K);
    const uint r0 = (tg.x * KQ_SG + sg) * KQ_ROWS;
    device const float * xr = x + (ulong)tg.y * K;
    float acc[KQ_ROWS] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (uint h = lane; h < K / 16; h += 32) { // columns [16h, 16h+16)
        float xv[16];
        for (uint i = 0; i < 16; i++) {
            xv[i] = xr[16 * h + i];
        }
        for (uint r = 0; r < KQ_ROWS; r++) {
            if (r0 + r < N) {
                device const uchar * row = w + (ulong)(r0 + r) * rb;
                float wv[16];
                kq_deq8(T(), row, 2 * h, wv);
                kq_deq8(T(), row, 2 * h + 1, wv + 8);
                float a = 0.0f;
                for (uint i = 0; i < 16; i++) {
                    a += wv[i] * xv[i];
                }
                acc[r] += a;
            }
        }
    }
    for (uint r = 0; r < KQ_ROWS; r++) {
        const float t = simd_sum(acc[r]);
        if (lane == 0 && r0 + r < N) {
            y[(ulong)tg.y * N + r0 + r] = t;
        }
    }
}

template <typename T>
kernel void matmul_kq(
        constant matmul_args & args [[buffer(0)]],
        device const uchar   * w    [[buffer(1)]],
        device const float   * x    [[buffer(2)]],
        device       float   * y    [[buffer(3)]],
        threadgroup  float   * xs   [[threadgroup(0)]],
        threadgroup  float   * ws   [[threadgroup(1)]],
        uint2  tg  [[threadgroup_position_in_grid]],
        ushort tid [[thread_index_in_threadgroup]],
        ushort sg  [[simdgroup_index_in_threadgroup]]) {
    const uint L = args.L, N = args.N, K = args.K;
    const uint rb = kq_row_bytes(T(), K);
    const uint l0 = tg.y * KQ_BM, n0 = tg.x * KQ_BN;
    const uint sm = sg / 2, sn = sg % 2; // the simdgroup's 16×16 quarter of the tile
    // Thread tid dequantizes columns [c8, c8+8) of tile row n: 4 threads a row.
    const uint n = tid / (KQ_BK / 8), c8 = (tid % (KQ_BK / 8)) * 8;
    simdgroup_float8x8 acc[4];
    for (uint i = 0; i < 4; i++) {
        acc[i] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    }
    for (uint k0 = 0; k0 < K; k0 += KQ_BK) {
        for (uint i = tid; i < KQ_BM * KQ_BK; i += KQ_THREADS) { // x[l0…l0+31][k0…k0+31]
            const uint r = i / KQ_BK, c = i % KQ_BK;
            xs[i] = l0 + r < L ? x[(ulong)(l0 + r) * K + k0 + c] : 0.0f;
        }
        float wv[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        if (n0 + n < N) {
            kq_deq8(T(), w + (ulong)(n0 + n) * rb, (k0 + c8) / 8, wv);
        }
        for (uint i = 0; i < 8; i++) {
            ws[(c8 + i) * KQ_BN + n] = wv[i];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint kk = 0; kk < KQ_BK; kk += 8) {
            simdgroup_float8x8 a0, a1, b0, b1;
            simdgroup_load(a0, xs + (sm * 16 + 0) * KQ_BK + kk, KQ_BK);
            simdgroup_load(a1, xs + (sm * 16 + 8) * KQ_BK + kk, KQ_BK);
            simdgroup_load(b0, ws + kk * KQ_BN + sn * 16 + 0, KQ_BN);
            simdgroup_load(b1, ws + kk * KQ_BN + sn * 16 + 8, KQ_BN);
            simdgroup_multiply_accumulate(acc[0], a0, b0, acc[0]);
            simdgroup_multiply_accumulate(acc[1], a0, b1, acc[1]);
            simdgroup_multiply_accumulate(acc[2], a1, b0, acc[2]);
            simdgroup_multiply_accumulate(acc[3], a1, b1, acc[3]);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    // Store through threadgroup memory (the x tile), masking the edges.
    simdgroup_store(acc[0], xs + (sm * 16 + 0) * KQ_BN + sn * 16 + 0, KQ_BN);
    simdgroup_store(acc[1], xs + (sm * 16 + 0) * KQ_BN + sn * 16 + 8, KQ_BN);
    simdgroup_store(acc[2], xs + (sm * 16 + 8) * KQ_BN + sn * 16 + 0, KQ_BN);
    simdgroup_store(acc[3], xs + (sm * 16 + 8) * KQ_BN + sn * 16 + 8, KQ_BN);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = tid; i < KQ_BM * KQ_BN; i += KQ_THREADS) {
        const uint r = i / KQ_BN, c = i % KQ_BN;
        if (l0 + r < L && n0 + c < N) {
            y[(ulong)(l0 + r) * N + n0 + c] = xs[i];
        }
    }
}

template <typename T>
kernel void embed_kq(
        constant embed_args & args   [[buffer(0)]],
        device const uchar  * table  [[buffer(1)]],
        device const int    * tokens [[buffer(2)]],
        device       float  * y      [[buffer(3)]],
        uint2 gid [[thread_position_in_grid]]) {
    const uint D = args.D, d = gid.x, l = gid.y;
    if (d >= D) {
        return;
    }
    float wv[8];
    kq_deq8(T(), table + (ulong)tokens[l] * kq_row_bytes(T(), D), d / 8, wv);
    y[(ulong)l * D + d] = wv[d % 8] * args.scale;
}

typedef decltype(matvec_kq<kq_q8_0>) matvec_kq_t;
typedef decltype(matmul_kq<kq_q8_0>) matmul_kq_t;
typedef decltype(embed_kq<kq_q8_0>) embed_kq_t;
template [[host_name("matvec_q8_0_f32")]] kernel matvec_kq_t matvec_kq<kq_q8_0>;
template [[host_name("matvec_q4_0_f32")]] kernel matvec_kq_t matvec_kq<kq_q4_0>;
template [[host_name("matvec_q4_k_f32")]] kernel matvec_kq_t matvec_kq<kq_q4_k>;
template [[host_name("matvec_q5_k_f32")]] kernel matvec_kq_t matvec_kq<kq_q5_k>;
template [[host_name("matvec_q6_k_f32")]] kernel matvec_kq_t matvec_kq<kq_q6_k>;
template [[host_name("matmul_q8_0_f32")]] kernel matmul_kq_t matmul_kq<kq_q8_0>;
template [[host_name("matmul_q4_0_f32")]] kernel matmul_kq_t matmul_kq<kq_q4_0>;
template [[host_name("matmul_q4_k_f32")]] kernel matmul_kq_t matmul_kq<kq_q4_k>;
template [[host_name("matmul_q5_k_f32")]] kernel matmul_kq_t matmul_kq<kq_q5_k>;
template [[host_name("matmul_q6_k_f32")]] kernel matmul_kq_t matmul_kq<kq_q6_k>;
template [[host_name("embed_q8_0_f32")]] kernel embed_kq_t embed_kq<kq_q8_0>;
template [[host_name("embed_q4_0_f32")]] kernel embed_kq_t embed_kq<kq_q4_0>;
template [[host_name("embed_q4_k_f32")]] kernel embed_kq_t embed_kq<kq_q4_k>;
template [[host_name("embed_q5_k_f32")]] kernel embed_kq_t embed_kq<kq_q5_k>;
template [[host_name("embed_q6_k_f32")]] kernel embed_kq_t embed_kq<kq_q6_k>;
