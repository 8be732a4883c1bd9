//go:build amd64 && !noasm

#include "textflag.h"

// Hand-written; see dot_amd64.go for the Go signatures and dot.go for the
// portable kernels each function here must match.
//
// Quantized kernels: rows of 4/8-bit codes against activations as two int16,
// x ≈ dx·(xh + xl/2¹⁶) (actQ in quant.go). Per group g of a row and token l:
//
//	sum += scale_g · (float(Σ codes·xh) + 2⁻¹⁶·float(Σ codes·xl))
//
// then sum ·= dx (the row's activation scale, at dq)
//
// and after the last group, the "bias pass" adds Σ_g bias_g·sx_g + scale_g·cr_g,
// eight groups per step and a masked step for the last G mod 8 (sx and cr are
// zero-padded to a multiple of 8; the bias and scale rows are not, hence the
// mask).
//
// Codes are zero-extended to 16-bit words (VPMOVZXBW) and multiplied with the
// int16 activations in pairs summed into int32 lanes: VPMADDWD + VPADDD (AVX2;
// AVX-512 VNNI machines take the byte-dot kernels of dotb_amd64.s where the
// rows allow, these otherwise). A group's int32 sum is at most
// 128·255·32767 < 2³¹ in magnitude. An 8-bit block is code bytes in order. For
// 4-bit codes a byte holds an even code (low nibble) and the next odd one (high
// nibble): the words of n code bytes masked with 0x0f are the even codes and
// shifted right by 4 the odd ones, the order in which actQ permutes each chunk
// of xq ([x0 x2 … x1 x3 …], 64 values for groups of 64·m, else 32). Every 32
// values (in that order) are 64 bytes of xh then 64 bytes of xl.

// PFDIST is how far ahead of the codes the kernels prefetch, in bytes, into L2
// (PREFETCHT1: faster than T0 and NTA on the 1B decode shapes; see
// docs/perf/cpu.md, "Prefetch distances").
#define PFDIST 8192


DATA c0f<>+0(SB)/4, $0x0f0f0f0f
GLOBL c0f<>(SB), RODATA|NOPTR, $4
DATA c2m16<>+0(SB)/4, $0x37800000
GLOBL c2m16<>(SB), RODATA|NOPTR, $4

// ZERO24 clears the tile accumulators Z0-Z23.
#define ZERO24 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23

// HSUM leaves the sum of the 8 floats of Y in the low lane of X (clobbers T).
#define HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X; \
	VPSHUFD      $0x4e, X, T; \
	VADDPS       T, X, X; \
	VPSHUFD      $0xb1, X, T; \
	VADDPS       T, X, X

// qMatVec8AVX2(dst *float32, n int, w *uint32, wstride int, s, b *float32,
//     G int, xq *int16, dq *float32, sx, cr *float32, bpg int, mask *int32)
//
// Groups of 32·bpg 8-bit codes, 32 per block.
// Rows one at a time: DI dst, CX rows left, SI row codes, R8 code row stride, R9
// row scales, R10 row biases, R11 G·4, R13 dq (dx), R14 blocks per group; per row AX
// codes, BX xq, DX g, R12 block counter. Y8 row sum, Y0/Y3 and Y4/Y5
// group int32 accs of xh and xl, Y13 2⁻¹⁶, Y15 tail mask.
TEXT ·qMatVec8AVX2(SB), NOSPLIT, $0-104
	VBROADCASTSS c2m16<>(SB), Y13
	MOVQ    dst+0(FP), DI
	MOVQ    n+8(FP), CX
	MOVQ    w+16(FP), SI
	MOVQ    wstride+24(FP), R8
	MOVQ    s+32(FP), R9
	MOVQ    b+40(FP), R10
	MOVQ    G+48(FP), R11
	SHLQ    $2, R11
	MOVQ    dq+64(FP), R13
	MOVQ    bpg+88(FP), R14
	MOVQ    mask+96(FP), AX
	VMOVDQU (AX), Y15
	TESTQ   CX, CX
	JZ      done

row:
	VPXOR Y8, Y8, Y8
	MOVQ   SI, AX
	MOVQ   xq+56(FP), BX
	XORQ   DX, DX

group:
	PREFETCHT1 PFDIST(AX)
	VPXOR Y0, Y0, Y0
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	MOVQ   R14, R12

block:
	VPMOVZXBW (AX), Y1
	VPMOVZXBW 16(AX), Y2
	VPMADDWD  (BX), Y1, Y6
	VPMADDWD  64(BX), Y1, Y7
	VPMADDWD  32(BX), Y2, Y9
	VPMADDWD  96(BX), Y2, Y10
	VPADDD    Y6, Y0, Y0
	VPADDD    Y7, Y4, Y4
	VPADDD    Y9, Y3, Y3
	VPADDD    Y10, Y5, Y5
	ADDQ      $32, AX
	ADDQ      $128, BX
	DECQ R12
	JNZ  block
	VPADDD       Y3, Y0, Y0
	VPADDD       Y5, Y4, Y4
	VCVTDQ2PS    Y0, Y0
	VCVTDQ2PS    Y4, Y4
	VFMADD231PS  Y13, Y4, Y0
	VBROADCASTSS (R9)(DX*4), Y1
	VFMADD231PS  Y1, Y0, Y8
	INCQ DX
	CMPQ DX, G+48(FP)
	JLT  group
	VBROADCASTSS (R13), Y1
	VMULPS       Y1, Y8, Y8

	// bias pass
	MOVQ sx+72(FP), AX
	MOVQ cr+80(FP), BX
	XORQ DX, DX
	MOVQ G+48(FP), R12
	SHRQ $3, R12
	JZ   tail

bias:
	VMOVUPS     (R10)(DX*1), Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMOVUPS     (R9)(DX*1), Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8
	ADDQ        $32, DX
	DECQ        R12
	JNZ         bias

tail:
	MOVQ        G+48(FP), R12
	ANDQ        $7, R12
	JZ          store
	VMASKMOVPS  (R10)(DX*1), Y15, Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMASKMOVPS  (R9)(DX*1), Y15, Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8

store:
	HSUM(Y8, X8, X1)
	VMOVSS X8, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	ADDQ   R11, R9
	ADDQ   R11, R10
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// qMatVec4AVX2(dst *float32, n int, w *uint32, wstride int, s, b *float32,
//     G int, xq *int16, dq *float32, sx, cr *float32, bpg int, mask *int32)
//
// Groups of 32·bpg 4-bit codes in 32-value chunks, 32 per block (16 bytes).
// Rows one at a time: DI dst, CX rows left, SI row codes, R8 code row stride, R9
// row scales, R10 row biases, R11 G·4, R13 dq (dx), R14 blocks per group; per row AX
// codes, BX xq, DX g, R12 block counter. Y8 row sum, Y0/Y3 and Y4/Y5
// group int32 accs of xh and xl, Y13 2⁻¹⁶, Y15 tail mask.
TEXT ·qMatVec4AVX2(SB), NOSPLIT, $0-104
	VBROADCASTSS c2m16<>(SB), Y13
	VPBROADCASTD c0f<>(SB), Y14
	MOVQ    dst+0(FP), DI
	MOVQ    n+8(FP), CX
	MOVQ    w+16(FP), SI
	MOVQ    wstride+24(FP), R8
	MOVQ    s+32(FP), R9
	MOVQ    b+40(FP), R10
	MOVQ    G+48(FP), R11
	SHLQ    $2, R11
	MOVQ    dq+64(FP), R13
	MOVQ    bpg+88(FP), R14
	MOVQ    mask+96(FP), AX
	VMOVDQU (AX), Y15
	TESTQ   CX, CX
	JZ      done

row:
	VPXOR Y8, Y8, Y8
	MOVQ   SI, AX
	MOVQ   xq+56(FP), BX
	XORQ   DX, DX

group:
	PREFETCHT1 PFDIST(AX)
	VPXOR Y0, Y0, Y0
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	MOVQ   R14, R12

block:
	VPMOVZXBW (AX), Y1
	VPSRLW    $4, Y1, Y2
	VPAND     Y14, Y1, Y1
	VPMADDWD  (BX), Y1, Y6
	VPMADDWD  64(BX), Y1, Y7
	VPMADDWD  32(BX), Y2, Y9
	VPMADDWD  96(BX), Y2, Y10
	VPADDD    Y6, Y0, Y0
	VPADDD    Y7, Y4, Y4
	VPADDD    Y9, Y3, Y3
	VPADDD    Y10, Y5, Y5
	ADDQ      $16, AX
	ADDQ      $128, BX
	DECQ R12
	JNZ  block
	VPADDD       Y3, Y0, Y0
	VPADDD       Y5, Y4, Y4
	VCVTDQ2PS    Y0, Y0
	VCVTDQ2PS    Y4, Y4
	VFMADD231PS  Y13, Y4, Y0
	VBROADCASTSS (R9)(DX*4), Y1
	VFMADD231PS  Y1, Y0, Y8
	INCQ DX
	CMPQ DX, G+48(FP)
	JLT  group
	VBROADCASTSS (R13), Y1
	VMULPS       Y1, Y8, Y8

	// bias pass
	MOVQ sx+72(FP), AX
	MOVQ cr+80(FP), BX
	XORQ DX, DX
	MOVQ G+48(FP), R12
	SHRQ $3, R12
	JZ   tail

bias:
	VMOVUPS     (R10)(DX*1), Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMOVUPS     (R9)(DX*1), Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8
	ADDQ        $32, DX
	DECQ        R12
	JNZ         bias

tail:
	MOVQ        G+48(FP), R12
	ANDQ        $7, R12
	JZ          store
	VMASKMOVPS  (R10)(DX*1), Y15, Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMASKMOVPS  (R9)(DX*1), Y15, Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8

store:
	HSUM(Y8, X8, X1)
	VMOVSS X8, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	ADDQ   R11, R9
	ADDQ   R11, R10
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// qMatVec4AVX264(dst *float32, n int, w *uint32, wstride int, s, b *float32,
//     G int, xq *int16, dq *float32, sx, cr *float32, bpg int, mask *int32)
//
// Groups of 64·bpg 4-bit codes in 64-value chunks, 64 per block (32 bytes):
// bytes 0-15 hold values 0-15 (low) and 32-47 (high), bytes 16-31 16-31 and 48-63.
// Rows one at a time: DI dst, CX rows left, SI row codes, R8 code row stride, R9
// row scales, R10 row biases, R11 G·4, R13 dq (dx), R14 blocks per group; per row AX
// codes, BX xq, DX g, R12 block counter. Y8 row sum, Y0/Y3 and Y4/Y5
// group int32 accs of xh and xl, Y13 2⁻¹⁶, Y15 tail mask.
TEXT ·qMatVec4AVX264(SB), NOSPLIT, $0-104
	VBROADCASTSS c2m16<>(SB), Y13
	VPBROADCASTD c0f<>(SB), Y14
	MOVQ    dst+0(FP), DI
	MOVQ    n+8(FP), CX
	MOVQ    w+16(FP), SI
	MOVQ    wstride+24(FP), R8
	MOVQ    s+32(FP), R9
	MOVQ    b+40(FP), R10
	MOVQ    G+48(FP), R11
	SHLQ    $2, R11
	MOVQ    dq+64(FP), R13
	MOVQ    bpg+88(FP), R14
	MOVQ    mask+96(FP), AX
	VMOVDQU (AX), Y15
	TESTQ   CX, CX
	JZ      done

row:
	VPXOR Y8, Y8, Y8
	MOVQ   SI, AX
	MOVQ   xq+56(FP), BX
	XORQ   DX, DX

group:
	PREFETCHT1 PFDIST(AX)
	VPXOR Y0, Y0, Y0
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	MOVQ   R14, R12

block:
	VPMOVZXBW (AX), Y1
	VPMOVZXBW 16(AX), Y11
	VPSRLW    $4, Y1, Y2
	VPSRLW    $4, Y11, Y12
	VPAND     Y14, Y1, Y1
	VPAND     Y14, Y11, Y11
	VPMADDWD  (BX), Y1, Y6
	VPMADDWD  64(BX), Y1, Y7
	VPMADDWD  128(BX), Y2, Y9
	VPMADDWD  192(BX), Y2, Y10
	VPADDD    Y6, Y0, Y0
	VPADDD    Y7, Y4, Y4
	VPADDD    Y9, Y3, Y3
	VPADDD    Y10, Y5, Y5
	VPMADDWD  32(BX), Y11, Y6
	VPMADDWD  96(BX), Y11, Y7
	VPMADDWD  160(BX), Y12, Y9
	VPMADDWD  224(BX), Y12, Y10
	VPADDD    Y6, Y0, Y0
	VPADDD    Y7, Y4, Y4
	VPADDD    Y9, Y3, Y3
	VPADDD    Y10, Y5, Y5
	ADDQ      $32, AX
	ADDQ      $256, BX
	DECQ R12
	JNZ  block
	VPADDD       Y3, Y0, Y0
	VPADDD       Y5, Y4, Y4
	VCVTDQ2PS    Y0, Y0
	VCVTDQ2PS    Y4, Y4
	VFMADD231PS  Y13, Y4, Y0
	VBROADCASTSS (R9)(DX*4), Y1
	VFMADD231PS  Y1, Y0, Y8
	INCQ DX
	CMPQ DX, G+48(FP)
	JLT  group
	VBROADCASTSS (R13), Y1
	VMULPS       Y1, Y8, Y8

	// bias pass
	MOVQ sx+72(FP), AX
	MOVQ cr+80(FP), BX
	XORQ DX, DX
	MOVQ G+48(FP), R12
	SHRQ $3, R12
	JZ   tail

bias:
	VMOVUPS     (R10)(DX*1), Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMOVUPS     (R9)(DX*1), Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8
	ADDQ        $32, DX
	DECQ        R12
	JNZ         bias

tail:
	MOVQ        G+48(FP), R12
	ANDQ        $7, R12
	JZ          store
	VMASKMOVPS  (R10)(DX*1), Y15, Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMASKMOVPS  (R9)(DX*1), Y15, Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8

store:
	HSUM(Y8, X8, X1)
	VMOVSS X8, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	ADDQ   R11, R9
	ADDQ   R11, R10
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// RED leaves the sum of the 16 floats of Z (whose low half is Y) in X31
// (clobbers Y30, Y31); EVEX-only instructions, so any of Z0-Z29 works.
#define RED(Z, Y) \
	VEXTRACTF64X4 $1, Z, Y30; \
	VADDPS        Y30, Y, Y31; \
	VEXTRACTF32X4 $1, Y31, X30; \
	VADDPS        X30, X31, X31; \
	VPERMILPS     $0x4e, X31, X30; \
	VADDPS        X30, X31, X31; \
	VPERMILPS     $0xb1, X31, X30; \
	VADDPS        X30, X31, X31

// fTileF32x46(dst *float32, dstride int, w *float32, K int, x *float32)
//
// A 4-row × 6-token f32 tile in 512-bit registers, dst[l·dstride + r], K a
// multiple of 16; row r at w + r·K, token l's x at x + l·K. AX/R9 rows 0/2 (1/3
// at +DX = K·4 bytes), BX/R10 x of tokens 0/3 (1, 2 and 4, 5 at +DX, +2·DX), CX
// steps left. Z0-Z23 sums, index r + 4·l; Z24-Z27 the rows, Z28/Z29 x.
TEXT ·fTileF32x46(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), R8
	SHLQ $2, R8
	MOVQ w+16(FP), AX
	MOVQ K+24(FP), CX
	MOVQ x+32(FP), BX
	MOVQ CX, DX
	SHLQ $2, DX
	LEAQ (AX)(DX*2), R9
	LEAQ (BX)(DX*2), R10
	ADDQ DX, R10
	SHRQ $4, CX
	ZERO24
	TESTQ CX, CX
	JZ    reduce

loop:
	VMOVUPS (AX), Z24
	VMOVUPS (AX)(DX*1), Z25
	VMOVUPS (R9), Z26
	VMOVUPS (R9)(DX*1), Z27
	VMOVUPS (BX), Z28
	VFMADD231PS Z28, Z24, Z0
	VFMADD231PS Z28, Z25, Z1
	VFMADD231PS Z28, Z26, Z2
	VFMADD231PS Z28, Z27, Z3
	VMOVUPS (BX)(DX*1), Z29
	VFMADD231PS Z29, Z24, Z4
	VFMADD231PS Z29, Z25, Z5
	VFMADD231PS Z29, Z26, Z6
	VFMADD231PS Z29, Z27, Z7
	VMOVUPS (BX)(DX*2), Z28
	VFMADD231PS Z28, Z24, Z8
	VFMADD231PS Z28, Z25, Z9
	VFMADD231PS Z28, Z26, Z10
	VFMADD231PS Z28, Z27, Z11
	VMOVUPS (R10), Z29
	VFMADD231PS Z29, Z24, Z12
	VFMADD231PS Z29, Z25, Z13
	VFMADD231PS Z29, Z26, Z14
	VFMADD231PS Z29, Z27, Z15
	VMOVUPS (R10)(DX*1), Z28
	VFMADD231PS Z28, Z24, Z16
	VFMADD231PS Z28, Z25, Z17
	VFMADD231PS Z28, Z26, Z18
	VFMADD231PS Z28, Z27, Z19
	VMOVUPS (R10)(DX*2), Z29
	VFMADD231PS Z29, Z24, Z20
	VFMADD231PS Z29, Z25, Z21
	VFMADD231PS Z29, Z26, Z22
	VFMADD231PS Z29, Z27, Z23
	ADDQ $64, AX
	ADDQ $64, R9
	ADDQ $64, BX
	ADDQ $64, R10
	DECQ CX
	JNZ  loop

reduce:
	RED(Z0, Y0)
	VMOVSS X31, 0(DI)
	RED(Z1, Y1)
	VMOVSS X31, 4(DI)
	RED(Z2, Y2)
	VMOVSS X31, 8(DI)
	RED(Z3, Y3)
	VMOVSS X31, 12(DI)
	ADDQ R8, DI
	RED(Z4, Y4)
	VMOVSS X31, 0(DI)
	RED(Z5, Y5)
	VMOVSS X31, 4(DI)
	RED(Z6, Y6)
	VMOVSS X31, 8(DI)
	RED(Z7, Y7)
	VMOVSS X31, 12(DI)
	ADDQ R8, DI
	RED(Z8, Y8)
	VMOVSS X31, 0(DI)
	RED(Z9, Y9)
	VMOVSS X31, 4(DI)
	RED(Z10, Y10)
	VMOVSS X31, 8(DI)
	RED(Z11, Y11)
	VMOVSS X31, 12(DI)
	ADDQ R8, DI
	RED(Z12, Y12)
	VMOVSS X31, 0(DI)
	RED(Z13, Y13)
	VMOVSS X31, 4(DI)
	RED(Z14, Y14)
	VMOVSS X31, 8(DI)
	RED(Z15, Y15)
	VMOVSS X31, 12(DI)
	ADDQ R8, DI
	RED(Z16, Y16)
	VMOVSS X31, 0(DI)
	RED(Z17, Y17)
	VMOVSS X31, 4(DI)
	RED(Z18, Y18)
	VMOVSS X31, 8(DI)
	RED(Z19, Y19)
	VMOVSS X31, 12(DI)
	ADDQ R8, DI
	RED(Z20, Y20)
	VMOVSS X31, 0(DI)
	RED(Z21, Y21)
	VMOVSS X31, 4(DI)
	RED(Z22, Y22)
	VMOVSS X31, 8(DI)
	RED(Z23, Y23)
	VMOVSS X31, 12(DI)
	VZEROUPPER
	RET

// fMatVecF32(dst *float32, n int, w *float32, K int, x *float32)
//
// Rows one at a time, K a multiple of 8: four accumulators over 32 elements, then
// 8 at a time. DI dst, CX rows left, SI row, R8 K, AX/BX row/x pointers, DX
// elements left.
TEXT ·fMatVecF32(SB), NOSPLIT, $0-40
	MOVQ  dst+0(FP), DI
	MOVQ  n+8(FP), CX
	MOVQ  w+16(FP), SI
	MOVQ  K+24(FP), R8
	TESTQ CX, CX
	JZ    done

row:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   SI, AX
	MOVQ   x+32(FP), BX
	MOVQ   R8, DX
	CMPQ   DX, $32
	JLT    step8

step32:
	VMOVUPS (AX), Y4
	VMOVUPS 32(AX), Y5
	VMOVUPS 64(AX), Y6
	VMOVUPS 96(AX), Y7
	VFMADD231PS (BX), Y4, Y0
	VFMADD231PS 32(BX), Y5, Y1
	VFMADD231PS 64(BX), Y6, Y2
	VFMADD231PS 96(BX), Y7, Y3
	ADDQ        $128, AX
	ADDQ        $128, BX
	SUBQ        $32, DX
	CMPQ        DX, $32
	JGE         step32

step8:
	TESTQ DX, DX
	JZ    sum
	VMOVUPS (AX), Y4
	VFMADD231PS (BX), Y4, Y0
	ADDQ        $32, AX
	ADDQ        $32, BX
	SUBQ        $8, DX
	JMP         step8

sum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	MOVQ   AX, SI
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// fTileF32(dst *float32, dstride int, w *float32, K int, x *float32)
//
// A 2-row × 4-token tile, dst[l·dstride + r], K a multiple of 8; token l's row
// of x starts at x + l·K. AX row 0 (row 1 at +R8), BX/SI x of tokens 0/2 (1/3
// at +R14), DX elements left. Y0/Y1 the rows, Y8-Y15 sums, index r·4+l.
TEXT ·fTileF32(SB), NOSPLIT, $0-40
	MOVQ w+16(FP), AX
	MOVQ K+24(FP), DX
	MOVQ DX, R8
	SHLQ $2, R8
	MOVQ x+32(FP), BX
	MOVQ DX, R14
	SHLQ $2, R14
	LEAQ (BX)(R14*2), SI
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15

loop:
	VMOVUPS (AX), Y0
	VMOVUPS (AX)(R8*1), Y1
	VFMADD231PS (BX), Y0, Y8
	VFMADD231PS (BX)(R14*1), Y0, Y9
	VFMADD231PS (SI), Y0, Y10
	VFMADD231PS (SI)(R14*1), Y0, Y11
	VFMADD231PS (BX), Y1, Y12
	VFMADD231PS (BX)(R14*1), Y1, Y13
	VFMADD231PS (SI), Y1, Y14
	VFMADD231PS (SI)(R14*1), Y1, Y15
	ADDQ $32, AX
	ADDQ $32, BX
	ADDQ $32, SI
	SUBQ $8, DX
	JNZ  loop
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), R8
	SHLQ $2, R8
	HSUM(Y8, X8, X0)
	VMOVSS X8, 0(DI)
	HSUM(Y12, X12, X0)
	VMOVSS X12, 4(DI)
	ADDQ R8, DI
	HSUM(Y9, X9, X0)
	VMOVSS X9, 0(DI)
	HSUM(Y13, X13, X0)
	VMOVSS X13, 4(DI)
	ADDQ R8, DI
	HSUM(Y10, X10, X0)
	VMOVSS X10, 0(DI)
	HSUM(Y14, X14, X0)
	VMOVSS X14, 4(DI)
	ADDQ R8, DI
	HSUM(Y11, X11, X0)
	VMOVSS X11, 0(DI)
	HSUM(Y15, X15, X0)
	VMOVSS X15, 4(DI)
	VZEROUPPER
	RET

// fMatVecF16(dst *float32, n int, w *uint16, K int, x *float32)
//
// Rows one at a time, K a multiple of 8: four accumulators over 32 elements, then
// 8 at a time. DI dst, CX rows left, SI row, R8 K, AX/BX row/x pointers, DX
// elements left.
TEXT ·fMatVecF16(SB), NOSPLIT, $0-40
	MOVQ  dst+0(FP), DI
	MOVQ  n+8(FP), CX
	MOVQ  w+16(FP), SI
	MOVQ  K+24(FP), R8
	TESTQ CX, CX
	JZ    done

row:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   SI, AX
	MOVQ   x+32(FP), BX
	MOVQ   R8, DX
	CMPQ   DX, $32
	JLT    step8

step32:
	VCVTPH2PS (AX), Y4
	VCVTPH2PS 16(AX), Y5
	VCVTPH2PS 32(AX), Y6
	VCVTPH2PS 48(AX), Y7
	VFMADD231PS (BX), Y4, Y0
	VFMADD231PS 32(BX), Y5, Y1
	VFMADD231PS 64(BX), Y6, Y2
	VFMADD231PS 96(BX), Y7, Y3
	ADDQ        $64, AX
	ADDQ        $128, BX
	SUBQ        $32, DX
	CMPQ        DX, $32
	JGE         step32

step8:
	TESTQ DX, DX
	JZ    sum
	VCVTPH2PS (AX), Y4
	VFMADD231PS (BX), Y4, Y0
	ADDQ        $16, AX
	ADDQ        $32, BX
	SUBQ        $8, DX
	JMP         step8

sum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	MOVQ   AX, SI
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// fTileF16(dst *float32, dstride int, w *uint16, K int, x *float32)
//
// A 2-row × 4-token tile, dst[l·dstride + r], K a multiple of 8; token l's row
// of x starts at x + l·K. AX row 0 (row 1 at +R8), BX/SI x of tokens 0/2 (1/3
// at +R14), DX elements left. Y0/Y1 the rows, Y8-Y15 sums, index r·4+l.
TEXT ·fTileF16(SB), NOSPLIT, $0-40
	MOVQ w+16(FP), AX
	MOVQ K+24(FP), DX
	MOVQ DX, R8
	SHLQ $1, R8
	MOVQ x+32(FP), BX
	MOVQ DX, R14
	SHLQ $2, R14
	LEAQ (BX)(R14*2), SI
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15

loop:
	VCVTPH2PS (AX), Y0
	VCVTPH2PS (AX)(R8*1), Y1
	VFMADD231PS (BX), Y0, Y8
	VFMADD231PS (BX)(R14*1), Y0, Y9
	VFMADD231PS (SI), Y0, Y10
	VFMADD231PS (SI)(R14*1), Y0, Y11
	VFMADD231PS (BX), Y1, Y12
	VFMADD231PS (BX)(R14*1), Y1, Y13
	VFMADD231PS (SI), Y1, Y14
	VFMADD231PS (SI)(R14*1), Y1, Y15
	ADDQ $16, AX
	ADDQ $32, BX
	ADDQ $32, SI
	SUBQ $8, DX
	JNZ  loop
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), R8
	SHLQ $2, R8
	HSUM(Y8, X8, X0)
	VMOVSS X8, 0(DI)
	HSUM(Y12, X12, X0)
	VMOVSS X12, 4(DI)
	ADDQ R8, DI
	HSUM(Y9, X9, X0)
	VMOVSS X9, 0(DI)
	HSUM(Y13, X13, X0)
	VMOVSS X13, 4(DI)
	ADDQ R8, DI
	HSUM(Y10, X10, X0)
	VMOVSS X10, 0(DI)
	HSUM(Y14, X14, X0)
	VMOVSS X14, 4(DI)
	ADDQ R8, DI
	HSUM(Y11, X11, X0)
	VMOVSS X11, 0(DI)
	HSUM(Y15, X15, X0)
	VMOVSS X15, 4(DI)
	VZEROUPPER
	RET

// fMatVecBF16(dst *float32, n int, w *uint16, K int, x *float32)
//
// Rows one at a time, K a multiple of 8: four accumulators over 32 elements, then
// 8 at a time. DI dst, CX rows left, SI row, R8 K, AX/BX row/x pointers, DX
// elements left.
TEXT ·fMatVecBF16(SB), NOSPLIT, $0-40
	MOVQ  dst+0(FP), DI
	MOVQ  n+8(FP), CX
	MOVQ  w+16(FP), SI
	MOVQ  K+24(FP), R8
	TESTQ CX, CX
	JZ    done

row:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   SI, AX
	MOVQ   x+32(FP), BX
	MOVQ   R8, DX
	CMPQ   DX, $32
	JLT    step8

step32:
	VPMOVZXWD (AX), Y4
	VPSLLD $16, Y4, Y4
	VPMOVZXWD 16(AX), Y5
	VPSLLD $16, Y5, Y5
	VPMOVZXWD 32(AX), Y6
	VPSLLD $16, Y6, Y6
	VPMOVZXWD 48(AX), Y7
	VPSLLD $16, Y7, Y7
	VFMADD231PS (BX), Y4, Y0
	VFMADD231PS 32(BX), Y5, Y1
	VFMADD231PS 64(BX), Y6, Y2
	VFMADD231PS 96(BX), Y7, Y3
	ADDQ        $64, AX
	ADDQ        $128, BX
	SUBQ        $32, DX
	CMPQ        DX, $32
	JGE         step32

step8:
	TESTQ DX, DX
	JZ    sum
	VPMOVZXWD (AX), Y4
	VPSLLD $16, Y4, Y4
	VFMADD231PS (BX), Y4, Y0
	ADDQ        $16, AX
	ADDQ        $32, BX
	SUBQ        $8, DX
	JMP         step8

sum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	MOVQ   AX, SI
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// fTileBF16(dst *float32, dstride int, w *uint16, K int, x *float32)
//
// A 2-row × 4-token tile, dst[l·dstride + r], K a multiple of 8; token l's row
// of x starts at x + l·K. AX row 0 (row 1 at +R8), BX/SI x of tokens 0/2 (1/3
// at +R14), DX elements left. Y0/Y1 the rows, Y8-Y15 sums, index r·4+l.
TEXT ·fTileBF16(SB), NOSPLIT, $0-40
	MOVQ w+16(FP), AX
	MOVQ K+24(FP), DX
	MOVQ DX, R8
	SHLQ $1, R8
	MOVQ x+32(FP), BX
	MOVQ DX, R14
	SHLQ $2, R14
	LEAQ (BX)(R14*2), SI
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15

loop:
	VPMOVZXWD (AX), Y0
	VPSLLD $16, Y0, Y0
	VPMOVZXWD (AX)(R8*1), Y1
	VPSLLD $16, Y1, Y1
	VFMADD231PS (BX), Y0, Y8
	VFMADD231PS (BX)(R14*1), Y0, Y9
	VFMADD231PS (SI), Y0, Y10
	VFMADD231PS (SI)(R14*1), Y0, Y11
	VFMADD231PS (BX), Y1, Y12
	VFMADD231PS (BX)(R14*1), Y1, Y13
	VFMADD231PS (SI), Y1, Y14
	VFMADD231PS (SI)(R14*1), Y1, Y15
	ADDQ $16, AX
	ADDQ $32, BX
	ADDQ $32, SI
	SUBQ $8, DX
	JNZ  loop
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), R8
	SHLQ $2, R8
	HSUM(Y8, X8, X0)
	VMOVSS X8, 0(DI)
	HSUM(Y12, X12, X0)
	VMOVSS X12, 4(DI)
	ADDQ R8, DI
	HSUM(Y9, X9, X0)
	VMOVSS X9, 0(DI)
	HSUM(Y13, X13, X0)
	VMOVSS X13, 4(DI)
	ADDQ R8, DI
	HSUM(Y10, X10, X0)
	VMOVSS X10, 0(DI)
	HSUM(Y14, X14, X0)
	VMOVSS X14, 4(DI)
	ADDQ R8, DI
	HSUM(Y11, X11, X0)
	VMOVSS X11, 0(DI)
	HSUM(Y15, X15, X0)
	VMOVSS X15, 4(DI)
	VZEROUPPER
	RET

// PACC adds the accumulators Za, Zb to the 32 floats at DI, stores them there
// and steps DI to the next token's row (R11 bytes).
#define PACC(Za, Zb) \
	VADDPS  (DI), Za, Za; \
	VADDPS  64(DI), Zb, Zb; \
	VMOVUPS Za, (DI); \
	VMOVUPS Zb, 64(DI); \
	ADDQ    R11, DI

// PSET stores the accumulators Za, Zb to the 32 floats at DI and steps DI.
#define PSET(Za, Zb) \
	VMOVUPS Za, (DI); \
	VMOVUPS Zb, 64(DI); \
	ADDQ    R11, DI

// PSTEP multiplies x at addr with the two weight vectors. The broadcast rides
// on the FMA's load (.BCST): a separate VBROADCASTSS costs a vector uop per
// element (24 % slower on Zen 4: docs/perf/cpu.md, "Prefill tile").
#define PSTEP(addr, Za, Zb) \
	VFMADD231PS.BCST addr, Z24, Za; \
	VFMADD231PS.BCST addr, Z25, Zb

// pTileF32(dst *float32, dstride int, p *float32, kc int, x *float32, xstride int, acc int)
//
// A 12-token × 32-row f32 tile from a panel: p holds kc steps of 32 floats
// (p[k·32 + r] is row r, element k), token l's x at x + l·xstride. dst[l·dstride
// + r] = Σ_k x_l[k]·p[k·32+r], added to dst if acc ≠ 0. No horizontal sums: x
// is broadcast, the rows lie along the vector. SI panel, AX/BX/DX x of tokens
// 0/4/8 (+R8, +2·R8, +R9 = 3·R8 for the next three), CX steps left; Z0-Z23
// sums, index 2·l + half; Z24/Z25 the panel step.
TEXT ·pTileF32(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), R11
	SHLQ $2, R11
	MOVQ p+16(FP), SI
	MOVQ kc+24(FP), CX
	MOVQ x+32(FP), AX
	MOVQ xstride+40(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R9
	LEAQ (AX)(R8*4), BX
	LEAQ (BX)(R8*4), DX
	ZERO24
	TESTQ CX, CX
	JZ    store

loop:
	VMOVUPS (SI), Z24
	VMOVUPS 64(SI), Z25
	PSTEP((AX), Z0, Z1)
	PSTEP((AX)(R8*1), Z2, Z3)
	PSTEP((AX)(R8*2), Z4, Z5)
	PSTEP((AX)(R9*1), Z6, Z7)
	PSTEP((BX), Z8, Z9)
	PSTEP((BX)(R8*1), Z10, Z11)
	PSTEP((BX)(R8*2), Z12, Z13)
	PSTEP((BX)(R9*1), Z14, Z15)
	PSTEP((DX), Z16, Z17)
	PSTEP((DX)(R8*1), Z18, Z19)
	PSTEP((DX)(R8*2), Z20, Z21)
	PSTEP((DX)(R9*1), Z22, Z23)
	ADDQ $128, SI
	ADDQ $4, AX
	ADDQ $4, BX
	ADDQ $4, DX
	DECQ CX
	JNZ  loop

store:
	MOVQ acc+48(FP), CX
	TESTQ CX, CX
	JZ   set
	PACC(Z0, Z1)
	PACC(Z2, Z3)
	PACC(Z4, Z5)
	PACC(Z6, Z7)
	PACC(Z8, Z9)
	PACC(Z10, Z11)
	PACC(Z12, Z13)
	PACC(Z14, Z15)
	PACC(Z16, Z17)
	PACC(Z18, Z19)
	PACC(Z20, Z21)
	PACC(Z22, Z23)
	VZEROUPPER
	RET

set:
	PSET(Z0, Z1)
	PSET(Z2, Z3)
	PSET(Z4, Z5)
	PSET(Z6, Z7)
	PSET(Z8, Z9)
	PSET(Z10, Z11)
	PSET(Z12, Z13)
	PSET(Z14, Z15)
	PSET(Z16, Z17)
	PSET(Z18, Z19)
	PSET(Z20, Z21)
	PSET(Z22, Z23)
	VZEROUPPER
	RET

// f16sToF32(dst *float32, src *uint16, n int) widens n halves (a multiple of
// 32) to floats, exactly (F16C).
TEXT ·f16sToF32(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	JZ   done

loop:
	VCVTPH2PS (SI), Y0
	VCVTPH2PS 16(SI), Y1
	VCVTPH2PS 32(SI), Y2
	VCVTPH2PS 48(SI), Y3
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	VMOVUPS   Y2, 64(DI)
	VMOVUPS   Y3, 96(DI)
	ADDQ      $64, SI
	ADDQ      $128, DI
	DECQ      CX
	JNZ       loop

done:
	VZEROUPPER
	RET

// f16RowsToF32(dst *float32, src *uint16, rows, w, stride int) widens rows
// rows of w halves (a multiple of 8), stride halves apart in src, into dst
// packed (w floats a row), exactly (F16C).
TEXT ·f16RowsToF32(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ rows+16(FP), DX
	MOVQ w+24(FP), R8
	MOVQ stride+32(FP), R9
	SHLQ $1, R9            // stride in bytes
	SHRQ $3, R8            // 8-half steps a row
	TESTQ DX, DX
	JZ    rdone

row:
	MOVQ SI, AX
	MOVQ R8, CX

step:
	VCVTPH2PS (AX), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, AX
	ADDQ      $32, DI
	DECQ      CX
	JNZ       step
	ADDQ      R9, SI
	DECQ      DX
	JNZ       row

rdone:
	VZEROUPPER
	RET
