// mma.h: NVIDIA's tensor-core matrix multiply-accumulate as an MSL function,
// with NVIDIA's per-lane fragment layout, so a kernel written against it runs
// on tensor cores in the PTX build (package cuda) and on Apple GPUs and the
// interpreter (internal/msl) with simd_shuffle, giving the same sums.
//
// mma_m16n8k16_bf16(c, a, b, lane) is one simdgroup-collective (warp)
// operation, PTX's
//
//	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 d, a, b, c
//
// D (16×8, f32) = A (16×16, bf16, row-major) · B (16×8, bf16, "col") + C. Every
// lane of the simdgroup must call it (rule 3 of internal/msl/README.md). With
// g = lane/4 and t = lane%4 (PTX ISA, "Matrix Fragments for mma.m16n8k16 with
// floating point type"), each 32-bit word holding two bf16 (the lower column
// or row index in the low half):
//
//	a.x = A[g][2t, 2t+1]   a.y = A[g+8][2t, 2t+1]   a.z = A[g][2t+8, 2t+9]   a.w = A[g+8][2t+8, 2t+9]
//	b.x = B[2t, 2t+1][g]   b.y = B[2t+8, 2t+9][g]
//	c.x = C[g][2t]         c.y = C[g][2t+1]         c.z = C[g+8][2t]         c.w = C[g+8][2t+1]
//
// and d likewise. A "col" B is stored column by column: B's column n is row n
// of a row-major (8, 16) matrix, as a weight row W[n][k] of y = x·Wᵀ is.
//
// Numerics: a bf16·bf16 product is exact in f32 (8 + 8 significant bits). The
// portable form adds the 16 products of each output to c in k order, in f32
// (round to nearest); the tensor cores add them in an order and with an
// internal rounding NVIDIA does not document, so the two agree to f32
// rounding, not bit for bit.
//
// The PTX form needs sm_80 (Ampere): a .metal file that calls it says
// //ingot:ptx-target sm_80 (see internal/msl/README.md), and package kernels
// runs its kernels only on a GPU of compute capability 8.0 or later. In an
// sm_70 unit the call does not compile.
#ifndef INGOT_SHADERS_MMA_H
#define INGOT_SHADERS_MMA_H

#include <metal_stdlib>

// mma_bf16_bits returns x rounded to bf16 (to nearest, ties to even) as the
// bf16's 16 bits, computed on the integer bits so that every platform rounds
// alike. x must not be NaN.
inline uint mma_bf16_bits(float x) {
    const uint u = metal::as_type<uint>(x);
    return (u + 0x7fffu + (u >> 16 & 1u)) >> 16;
}

// mma_bf16_float widens the bf16 bits h (the low 16 bits) to float, exactly.
inline float mma_bf16_float(uint h) {
    return metal::as_type<float>(h << 16);
}

// mma_pack returns the word of two bf16 (bits lo, hi): lo is the element of
// the lower index.
inline uint mma_pack(uint lo, uint hi) {
    return lo | hi << 16;
}

// mma_split3 splits x into three bf16 (bits hi, mid, lo) with
// x = hi + mid + lo up to 2⁻²⁷·|x|: hi = bf16(x), mid = bf16(x − hi),
// lo = bf16(x − hi − mid). Both subtractions are exact (each operand pair is
// within a factor of 2, Sterbenz), so only lo's rounding is lost: each piece
// has 8 significant bits and rounds off at most 2⁻⁹ of what is left.
inline void mma_split3(float x, thread uint & hi, thread uint & mid, thread uint & lo) {
    hi = mma_bf16_bits(x);
    const float r = x - mma_bf16_float(hi);
    mid = mma_bf16_bits(r);
    lo = mma_bf16_bits(r - mma_bf16_float(mid));
}

// mma_load_a loads the lane's A fragment of a row-major 16×16 bf16 matrix in
// threadgroup memory: row r's 8 words at p + r·stride.
inline uint4 mma_load_a(threadgroup const uint * p, uint stride, uint lane) {
    const uint g = lane / 4, t = lane % 4;
    return uint4(p[g * stride + t], p[(g + 8) * stride + t], p[g * stride + t + 4], p[(g + 8) * stride + t + 4]);
}

// mma_load_b loads the lane's B fragment of a "col" 16×8 bf16 matrix in
// threadgroup memory: column n's 16 values (8 words) at p + n·stride.
inline uint2 mma_load_b(threadgroup const uint * p, uint stride, uint lane) {
    const uint g = lane / 4, t = lane % 4;
    return uint2(p[g * stride + t], p[g * stride + t + 4]);
}

#if defined(__INGOT_PTX__) && __INGOT_PTX_SM__ < 80
float4 mma_m16n8k16_bf16(float4 c, uint4 a, uint2 b, uint lane)
    __attribute__((unavailable("mma_m16n8k16_bf16 needs sm_80: add the line //ingot:ptx-target sm_80 to the .metal file")));
#elif defined(__INGOT_PTX__)
// mma_m16n8k16_bf16 returns A·B + C for the lane's fragments (see the top of
// this file); lane is the lane index (thread_index_in_simdgroup).
inline float4 mma_m16n8k16_bf16(float4 c, uint4 a, uint2 b, uint lane) {
    float d0, d1, d2, d3;
    __asm__ __volatile__("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                         "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                         : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
                         : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y),
                           "f"(c.x), "f"(c.y), "f"(c.z), "f"(c.w));
    return float4(d0, d1, d2, d3);
}
#else
// mma_m16n8k16_bf16 returns A·B + C for the lane's fragments (see the top of
// this file); lane is the lane index (thread_index_in_simdgroup). Lane g·4 + j
// holds A's rows g and g + 8 at columns 2j, 2j+1, 2j+8, 2j+9, and lane n·4 + j
// B's column n at rows 2j, 2j+1, 2j+8, 2j+9: 12 shuffles gather the lane's two
// rows of A and two columns of B.
inline float4 mma_m16n8k16_bf16(float4 c, uint4 a, uint2 b, uint lane) {
    const uint g = lane / 4, t = lane % 4;
    uint4 ar[4];
    uint2 b0[4], b1[4];
    for (uint j = 0; j < 4; j++) {
        ar[j] = metal::simd_shuffle(a, ushort(4 * g + j));
        b0[j] = metal::simd_shuffle(b, ushort(8 * t + j));     // column 2t
        b1[j] = metal::simd_shuffle(b, ushort(8 * t + 4 + j)); // column 2t + 1
    }
    float4 d = c;
    for (uint h = 0; h < 2; h++) { // columns of A (rows of B) 0…7, then 8…15
        for (uint j = 0; j < 4; j++) {
            const uint ag = h == 0 ? ar[j].x : ar[j].z, ag8 = h == 0 ? ar[j].y : ar[j].w;
            const uint bn = h == 0 ? b0[j].x : b0[j].y, bn1 = h == 0 ? b1[j].x : b1[j].y;
            for (uint e = 0; e < 2; e++) { // k = 8h + 2j + e
                const uint s = 16 * (1 - e);
                const float x0 = mma_bf16_float(ag << s >> 16), x8 = mma_bf16_float(ag8 << s >> 16);
                const float w0 = mma_bf16_float(bn << s >> 16), w1 = mma_bf16_float(bn1 << s >> 16);
                d.x = d.x + x0 * w0;
                d.y = d.y + x0 * w1;
                d.z = d.z + x8 * w0;
                d.w = d.w + x8 * w1;
            }
        }
    }
    return d;
}
#endif

// mma_m16n8k32_s8u8(c, a, b, lane) is PTX's
//
//	mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 d, a, b, c
//
// D (16×8, int32) = A (16×32, signed bytes, row-major) · B (32×8, unsigned
// bytes, "col") + C, one simdgroup-collective operation like
// mma_m16n8k16_bf16. Its fragments (PTX ISA, "Matrix Fragments for
// mma.m16n8k32" with .s8/.u8; the same layout as llama.cpp's
// ggml-cuda/mma.cuh mma_A_I16K8<int>, mma_B_J8K8<int> and mma_C_I16J8<int>;
// the mixed .s8.u8 form is CUTLASS's SM80_16x8x32_S32S8U8S32_TN, in
// cute/arch/mma_sm80.hpp),
// with g = lane/4 and t = lane%4, each 32-bit word holding four bytes (the
// lowest column or row index in the lowest byte):
//
//	a.x = A[g][4t … 4t+3]   a.y = A[g+8][4t … 4t+3]   a.z = A[g][4t+16 … 4t+19]   a.w = A[g+8][4t+16 … 4t+19]
//	b.x = B[4t … 4t+3][g]   b.y = B[4t+16 … 4t+19][g]
//	c.x = C[g][2t]          c.y = C[g][2t+1]          c.z = C[g+8][2t]            c.w = C[g+8][2t+1]
//
// that is, in words, the layout of mma_m16n8k16_bf16's fragments. Integer
// sums are exact (two's complement, wrapping on overflow, as without
// .satfinite), so both forms give the same bits.
#if defined(__INGOT_PTX__) && __INGOT_PTX_SM__ < 80
int4 mma_m16n8k32_s8u8(int4 c, uint4 a, uint2 b, uint lane)
    __attribute__((unavailable("mma_m16n8k32_s8u8 needs sm_80: add the line //ingot:ptx-target sm_80 to the .metal file")));
#elif defined(__INGOT_PTX__)
// mma_m16n8k32_s8u8 returns A·B + C for the lane's fragments (see above).
inline int4 mma_m16n8k32_s8u8(int4 c, uint4 a, uint2 b, uint lane) {
    int d0, d1, d2, d3;
    __asm__ __volatile__("mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 "
                         "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                         : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)
                         : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y),
                           "r"(c.x), "r"(c.y), "r"(c.z), "r"(c.w));
    return int4(d0, d1, d2, d3);
}
#else
// mma_m16n8k32_s8u8 returns A·B + C for the lane's fragments (see above).
// As in mma_m16n8k16_bf16, 12 shuffles gather the lane's rows g, g + 8 of A
// (from lanes 4g … 4g+3) and columns 2t, 2t + 1 of B (lanes 8t …, 8t+4 …).
inline int4 mma_m16n8k32_s8u8(int4 c, uint4 a, uint2 b, uint lane) {
    const uint g = lane / 4, t = lane % 4;
    uint4 ar[4];
    uint2 b0[4], b1[4];
    for (uint j = 0; j < 4; j++) {
        ar[j] = metal::simd_shuffle(a, ushort(4 * g + j));
        b0[j] = metal::simd_shuffle(b, ushort(8 * t + j));     // column 2t
        b1[j] = metal::simd_shuffle(b, ushort(8 * t + 4 + j)); // column 2t + 1
    }
    int4 d = c;
    for (uint h = 0; h < 2; h++) { // columns of A (rows of B) 0…15, then 16…31
        for (uint j = 0; j < 4; j++) {
            const uint ag = h == 0 ? ar[j].x : ar[j].z, ag8 = h == 0 ? ar[j].y : ar[j].w;
            const uint bn = h == 0 ? b0[j].x : b0[j].y, bn1 = h == 0 ? b1[j].x : b1[j].y;
            for (uint e = 0; e < 4; e++) { // k = 16h + 4j + e
                const int x0 = int(ag << (24 - 8 * e)) >> 24, x8 = int(ag8 << (24 - 8 * e)) >> 24;
                const int w0 = int(bn >> (8 * e) & 0xffu), w1 = int(bn1 >> (8 * e) & 0xffu);
                d.x = int(uint(d.x) + uint(x0 * w0));
                d.y = int(uint(d.y) + uint(x0 * w1));
                d.z = int(uint(d.z) + uint(x8 * w0));
                d.w = int(uint(d.w) + uint(x8 * w1));
            }
        }
    }
    return d;
}
#endif

#endif // INGOT_SHADERS_MMA_H
