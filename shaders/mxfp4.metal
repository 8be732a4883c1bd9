// mxfp4.metal: y = x·Wᵀ for W in OCP MXFP4 (gpt-oss's expert weights).
//
// W (N, K) is row-major in blocks of 32 columns, 17 bytes each: the E8M0
// scale byte e, then 16 bytes of E2M1 codes, element 2j in the low nibble of
// byte j and 2j+1 in the high. w = fp4(code)·2^(e−127), rounded to float
// (exact but where it overflows), as cpu.MXFP4.Row computes it; e = 0 is
// 2⁻¹²⁷. No scales or biases buffers: the blocks carry their scales.
//
// matvec_mxfp4_f32 (L = 1; the grid's y axis runs more rows): the geometry of
// matvec.metal, (⌈N/8⌉, L) threadgroups of 64 threads = 2 simdgroups, 4 rows
// a simdgroup. A lane takes half a block (16 columns: 8 code bytes) a step,
// loads its 16 x once and multiplies them with the same half block of all 4
// rows; the 32 lane partials are folded with simd_sum.
//
// matmul_mxfp4_f32 (L > 1): the geometry of matmul.metal, (⌈N/32⌉, ⌈L/32⌉)
// threadgroups of 128 threads = 4 simdgroups, 32×32 output tiles held as
// simdgroup 8×8 float accumulators; a K step of 32 columns is exactly one
// block of each of the tile's rows, which 4 threads a row dequantize (8
// columns each: the scale byte and 4 code bytes) into threadgroup memory.
//
// Numerics: every product is of the exact dequantized weight; float
// accumulation in a different order than the CPU reference.
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
#include "common.h"
using namespace metal;

#define MX_ROWS 4 // matvec: rows per simdgroup (matvec.metal's MV_ROWS)
#define MX_SG   2 // matvec: simdgroups per threadgroup (MV_SG)
#define MX_BM   32 // matmul: tokens per tile (matmul.metal's MM_BM)
#define MX_BN   32 // matmul: weight rows per tile (MM_BN)
#define MX_BK   32 // matmul: columns per step (MM_BK), one block
#define MX_THREADS 128

// MX_FP4 is the E2M1 value of each code: bit 3 the sign.
constant float MX_FP4[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                             -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// mx_scale returns 2^(e−127): the float with exponent field e, or the
// subnormal 2⁻¹²⁷ for e = 0.
inline float mx_scale(uchar e) {
    return as_type<float>(e == 0 ? 0x00400000u : uint(e) << 23);
}

kernel void matvec_mxfp4_f32(
        constant matvec_args & args [[buffer(0)]],
        device const uchar   * w    [[buffer(1)]],
        device const float   * x    [[buffer(2)]],
        device       float   * y    [[buffer(3)]],
        uint2  tg   [[threadgroup_position_in_grid]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    const uint K = args.K, N = args.N;
    const uint rb = K / 32 * 17; // bytes per row
    const uint r0 = (tg.x * MX_SG + sg) * MX_ROWS;
    device const float * xr = x + (ulong)tg.y * K;
    float acc[MX_ROWS] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (uint h = lane; h < K / 16; h += 32) { // half block h: columns [16h, 16h+16)
        float xv[16];
        for (uint i = 0; i < 16; i++) {
            xv[i] = xr[16 * h + i];
        }
        for (uint r = 0; r < MX_ROWS; r++) {
            if (r0 + r < N) {
                device const uchar * b = w + (ulong)(r0 + r) * rb + h / 2 * 17;
                const float s = mx_scale(b[0]);
                device const uchar * q = b + 1 + (h % 2) * 8;
                float a = 0.0f;
                for (uint j = 0; j < 8; j++) {
                    const uchar c = q[j];
                    a += (MX_FP4[c & 15] * s) * xv[2 * j] + (MX_FP4[c >> 4] * s) * xv[2 * j + 1];
                }
                acc[r] += a;
            }
        }
    }
    for (uint r = 0; r < MX_ROWS; r++) {
        const float t = simd_sum(acc[r]);
        if (lane == 0 && r0 + r < N) {
            y[(ulong)tg.y * N + r0 + r] = t;
        }
    }
}

kernel void matmul_mxfp4_f32(
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
    const uint rb = K / 32 * 17;
    const uint l0 = tg.y * MX_BM, n0 = tg.x * MX_BN;
    const uint sm = sg / 2, sn = sg % 2; // the simdgroup's 16×16 quarter of the tile
    // Thread tid dequantizes columns [c8, c8+8) of tile row n: 4 threads a row.
    const uint n = tid / (MX_BK / 8), c8 = (tid % (MX_BK / 8)) * 8;
    simdgroup_float8x8 acc[4];
    for (uint i = 0; i < 4; i++) {
        acc[i] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    }
    for (uint k0 = 0; k0 < K; k0 += MX_BK) {
        for (uint i = tid; i < MX_BM * MX_BK; i += MX_THREADS) { // x[l0…l0+31][k0…k0+31]
            const uint r = i / MX_BK, c = i % MX_BK;
            xs[i] = l0 + r < L ? x[(ulong)(l0 + r) * K + k0 + c] : 0.0f;
        }
        if (n0 + n < N) { // K is whole blocks: the step is one block of the row
            device const uchar * b = w + (ulong)(n0 + n) * rb + k0 / 32 * 17;
            const float s = mx_scale(b[0]);
            for (uint j = 0; j < 4; j++) {
                const uchar c = b[1 + c8 / 2 + j];
                ws[(c8 + 2 * j) * MX_BN + n] = MX_FP4[c & 15] * s;
                ws[(c8 + 2 * j + 1) * MX_BN + n] = MX_FP4[c >> 4] * s;
            }
        } else {
            for (uint i = 0; i < 8; i++) {
                ws[(c8 + i) * MX_BN + n] = 0.0f;
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint kk = 0; kk < MX_BK; kk += 8) {
            simdgroup_float8x8 a0, a1, b0, b1;
            simdgroup_load(a0, xs + (sm * 16 + 0) * MX_BK + kk, MX_BK);
            simdgroup_load(a1, xs + (sm * 16 + 8) * MX_BK + kk, MX_BK);
            simdgroup_load(b0, ws + kk * MX_BN + sn * 16 + 0, MX_BN);
            simdgroup_load(b1, ws + kk * MX_BN + sn * 16 + 8, MX_BN);
            simdgroup_multiply_accumulate(acc[0], a0, b0, acc[0]);
            simdgroup_multiply_accumulate(acc[1], a0, b1, acc[1]);
            simdgroup_multiply_accumulate(acc[2], a1, b0, acc[2]);
            simdgroup_multiply_accumulate(acc[3], a1, b1, acc[3]);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    // Store through threadgroup memory (the x tile), masking the edges.
    simdgroup_store(acc[0], xs + (sm * 16 + 0) * MX_BN + sn * 16 + 0, MX_BN);
    simdgroup_store(acc[1], xs + (sm * 16 + 0) * MX_BN + sn * 16 + 8, MX_BN);
    simdgroup_store(acc[2], xs + (sm * 16 + 8) * MX_BN + sn * 16 + 0, MX_BN);
    simdgroup_store(acc[3], xs + (sm * 16 + 8) * MX_BN + sn * 16 + 8, MX_BN);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = tid; i < MX_BM * MX_BN; i += MX_THREADS) {
        const uint r = i / MX_BN, c = i % MX_BN;
        if (l0 + r < L && n0 + c < N) {
            y[(ulong)(l0 + r) * N + n0 + c] = xs[i];
        }
    }
}
