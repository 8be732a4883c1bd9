//go:build amd64 && !noasm

#include "textflag.h"

// Four-token float mat-vecs (AVX-512VL): each weight row once for four rows
// of x, every (row, token) summed exactly as fMatVecF32/F16/BF16 sum one
// row against one x: four 8-lane accumulators over steps of 32 elements,
// the steps of 8 left into the first, then (a0+a1) + (a2+a3) and HSUM. The
// weights are widened once into Y16-Y19 (EVEX registers, so the sixteen
// accumulators keep Y0-Y15 and HSUM's VEX encodings).
//
// fVecs4X(dst *float32, dstride int, n int, w *T, K int, x *float32, xstride int)
// writes dst[l·dstride + r] = row r of w · x[l·xstride : l·xstride+K] for
// rows r < n and tokens l < 4; K is a multiple of 8. DI dst, CX rows left,
// SI the row, R8 K, R9 dstride bytes, BX/R11/R12/R13 the tokens' x, R10
// xstride bytes, AX the row's elements, DX elements left.

#define HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X; \
	VPSHUFD      $0x4e, X, T; \
	VADDPS       T, X, X; \
	VPSHUFD      $0xb1, X, T; \
	VADDPS       T, X, X

#define ZACC(A, B, C, D) \
	VXORPS A, A, A; \
	VXORPS B, B, B; \
	VXORPS C, C, C; \
	VXORPS D, D, D

// FMA4 adds one 32-element step of token x (at xr) to its accumulators.
#define FMA4(xr, A, B, C, D) \
	VFMADD231PS (xr), Y16, A; \
	VFMADD231PS 32(xr), Y17, B; \
	VFMADD231PS 64(xr), Y18, C; \
	VFMADD231PS 96(xr), Y19, D

// FIN sums a token's accumulators and stores the sum at (R14), then steps
// R14 to the next token's output.
#define FIN(A, B, C, D, XA, XC) \
	VADDPS B, A, A; \
	VADDPS D, C, C; \
	VADDPS C, A, A; \
	HSUM(A, XA, XC); \
	VMOVSS XA, (R14); \
	ADDQ   R9, R14

// BODY is a whole kernel: LOAD32 widens a 32-element step of the row at AX
// into Y16-Y19, LOAD8 an 8-element one into Y16; ESIZE is the bytes of an
// element.
#define BODY(LOAD32, LOAD8, ESIZE) \
	MOVQ  dst+0(FP), DI; \
	MOVQ  dstride+8(FP), R9; \
	SHLQ  $2, R9; \
	MOVQ  n+16(FP), CX; \
	MOVQ  w+24(FP), SI; \
	MOVQ  K+32(FP), R8; \
	MOVQ  xstride+48(FP), R10; \
	SHLQ  $2, R10; \
	TESTQ CX, CX; \
	JZ    done; \
row: \
	ZACC(Y0, Y1, Y2, Y3); \
	ZACC(Y4, Y5, Y6, Y7); \
	ZACC(Y8, Y9, Y10, Y11); \
	ZACC(Y12, Y13, Y14, Y15); \
	MOVQ SI, AX; \
	MOVQ x+40(FP), BX; \
	LEAQ (BX)(R10*1), R11; \
	LEAQ (R11)(R10*1), R12; \
	LEAQ (R12)(R10*1), R13; \
	MOVQ R8, DX; \
	CMPQ DX, $32; \
	JLT  step8; \
step32: \
	LOAD32; \
	FMA4(BX, Y0, Y1, Y2, Y3); \
	FMA4(R11, Y4, Y5, Y6, Y7); \
	FMA4(R12, Y8, Y9, Y10, Y11); \
	FMA4(R13, Y12, Y13, Y14, Y15); \
	ADDQ $(32*ESIZE), AX; \
	ADDQ $128, BX; \
	ADDQ $128, R11; \
	ADDQ $128, R12; \
	ADDQ $128, R13; \
	SUBQ $32, DX; \
	CMPQ DX, $32; \
	JGE  step32; \
step8: \
	TESTQ DX, DX; \
	JZ    sum; \
	LOAD8; \
	VFMADD231PS (BX), Y16, Y0; \
	VFMADD231PS (R11), Y16, Y4; \
	VFMADD231PS (R12), Y16, Y8; \
	VFMADD231PS (R13), Y16, Y12; \
	ADDQ $(8*ESIZE), AX; \
	ADDQ $32, BX; \
	ADDQ $32, R11; \
	ADDQ $32, R12; \
	ADDQ $32, R13; \
	SUBQ $8, DX; \
	JMP  step8; \
sum: \
	MOVQ DI, R14; \
	FIN(Y0, Y1, Y2, Y3, X0, X2); \
	FIN(Y4, Y5, Y6, Y7, X4, X6); \
	FIN(Y8, Y9, Y10, Y11, X8, X10); \
	FIN(Y12, Y13, Y14, Y15, X12, X14); \
	ADDQ $4, DI; \
	MOVQ AX, SI; \
	DECQ CX; \
	JNZ  row; \
done: \
	VZEROUPPER; \
	RET

#define LOADF32 \
	VMOVUPS (AX), Y16; \
	VMOVUPS 32(AX), Y17; \
	VMOVUPS 64(AX), Y18; \
	VMOVUPS 96(AX), Y19

#define LOADF32S \
	VMOVUPS (AX), Y16

#define LOADF16 \
	VCVTPH2PS (AX), Y16; \
	VCVTPH2PS 16(AX), Y17; \
	VCVTPH2PS 32(AX), Y18; \
	VCVTPH2PS 48(AX), Y19

#define LOADF16S \
	VCVTPH2PS (AX), Y16

#define LOADBF16 \
	VPMOVZXWD (AX), Y16; \
	VPSLLD    $16, Y16, Y16; \
	VPMOVZXWD 16(AX), Y17; \
	VPSLLD    $16, Y17, Y17; \
	VPMOVZXWD 32(AX), Y18; \
	VPSLLD    $16, Y18, Y18; \
	VPMOVZXWD 48(AX), Y19; \
	VPSLLD    $16, Y19, Y19

#define LOADBF16S \
	VPMOVZXWD (AX), Y16; \
	VPSLLD    $16, Y16, Y16

TEXT ·fVecs4F32(SB), NOSPLIT, $0-56
	BODY(LOADF32, LOADF32S, 4)

TEXT ·fVecs4F16(SB), NOSPLIT, $0-56
	BODY(LOADF16, LOADF16S, 2)

TEXT ·fVecs4BF16(SB), NOSPLIT, $0-56
	BODY(LOADBF16, LOADBF16S, 2)
