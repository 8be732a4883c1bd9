//go:build arm64 && !noasm

#include "textflag.h"

// Float kernels for arm64 (NEON, every arm64 CPU): the prefill panel tile, and
// the f32/f16/bf16 tile and mat-vec. Go's assembler lacks FMLA by element, FCVTL and
// FADD/FADDP on vectors: they are WORDs, each with the instruction it encodes.

// FMLA Vd.4S, Vn.4S, Vm.S[i]
#define FMLAE(m, i, n, d) WORD $(0x4f801000 | ((i)&1)<<21 | (m)<<16 | ((i)>>1)<<11 | (n)<<5 | (d))
// FADD Vd.4S, Vn.4S, Vm.4S
#define FADD4(m, n, d) WORD $(0x4e20d400 | (m)<<16 | (n)<<5 | (d))
// FADDP Vd.4S, Vn.4S, Vm.4S: d = (n0+n1, n2+n3, m0+m1, m2+m3)
#define FADDP4(m, n, d) WORD $(0x6e20d400 | (m)<<16 | (n)<<5 | (d))
// FCVTL Vd.4S, Vn.4H (the low four halves)
#define FCVTL(n, d) WORD $(0x0e217800 | (n)<<5 | (d))
// FCVTL2 Vd.4S, Vn.8H (the high four halves)
#define FCVTL2(n, d) WORD $(0x4e217800 | (n)<<5 | (d))

// PSTEP adds panel step (V16, V17: rows 8q..8q+7 of element k) times lane i of
// the eight tokens' x (V20-V27) to the sums V0-V15 (token l: V2l, V2l+1).
#define PSTEP(i) \
	FMLAE(20, i, 16, 0); \
	FMLAE(20, i, 17, 1); \
	FMLAE(21, i, 16, 2); \
	FMLAE(21, i, 17, 3); \
	FMLAE(22, i, 16, 4); \
	FMLAE(22, i, 17, 5); \
	FMLAE(23, i, 16, 6); \
	FMLAE(23, i, 17, 7); \
	FMLAE(24, i, 16, 8); \
	FMLAE(24, i, 17, 9); \
	FMLAE(25, i, 16, 10); \
	FMLAE(25, i, 17, 11); \
	FMLAE(26, i, 16, 12); \
	FMLAE(26, i, 17, 13); \
	FMLAE(27, i, 16, 14); \
	FMLAE(27, i, 17, 15)

// PACC adds token sums (V<a>, V<b>) to the eight floats at (R22) and stores
// them; R22 steps to the next token's.
#define PACC(a, b, FA, FB) \
	FLDPQ (R22), (F16, F17); \
	FADD4(16, a, a); \
	FADD4(17, b, b); \
	FSTPQ (FA, FB), (R22); \
	ADD   R1, R22, R22

// PSET stores token sums (FA, FB) at (R22); R22 steps to the next token's.
#define PSET(FA, FB) \
	FSTPQ (FA, FB), (R22); \
	ADD   R1, R22, R22

// The f32/f16/bf16 mat-vec: four rows at a time share each load of x, 16
// elements per step in four sums per row (16 independent FMLA chains), then a
// step of 8 if K mod 16 = 8; f16 widens by FCVTL, bf16 by interleaving zero
// halves below it (ZIP1/ZIP2). n ≥ 4 rows not a multiple of 4 end with a block
// stepped back over rows already done (recomputed with the same bits).
//
// R0 dst, R1-R4 rows 0-3 (post-incremented), R5 x, R6 steps left, R7 rows
// left, R8 the block's row 0, R9 wstride, R10 K; V0-V15 sums (row r: V4r..
// V4r+3), V16-V19 x, V20-V27 scratch, V28 zero.

// F32ROW16 adds 16 elements of an f32 row at RW to its sums a..a+3.
#define F32ROW16(RW, a0, a1, a2, a3) \
	VLD1.P 64(RW), [V20.S4, V21.S4, V22.S4, V23.S4]; \
	VFMLA  V16.S4, V20.S4, a0.S4; \
	VFMLA  V17.S4, V21.S4, a1.S4; \
	VFMLA  V18.S4, V22.S4, a2.S4; \
	VFMLA  V19.S4, V23.S4, a3.S4

#define F32ROW8(RW, a0, a1) \
	VLD1.P 32(RW), [V20.S4, V21.S4]; \
	VFMLA  V16.S4, V20.S4, a0.S4; \
	VFMLA  V17.S4, V21.S4, a1.S4

#define F16ROW16(RW, a0, a1, a2, a3) \
	VLD1.P 32(RW), [V20.H8, V21.H8]; \
	FCVTL(20, 22); \
	FCVTL2(20, 23); \
	FCVTL(21, 24); \
	FCVTL2(21, 25); \
	VFMLA  V16.S4, V22.S4, a0.S4; \
	VFMLA  V17.S4, V23.S4, a1.S4; \
	VFMLA  V18.S4, V24.S4, a2.S4; \
	VFMLA  V19.S4, V25.S4, a3.S4

#define F16ROW8(RW, a0, a1) \
	FMOVQ.P 16(RW), F20; \
	FCVTL(20, 22); \
	FCVTL2(20, 23); \
	VFMLA  V16.S4, V22.S4, a0.S4; \
	VFMLA  V17.S4, V23.S4, a1.S4

#define BF16ROW16(RW, a0, a1, a2, a3) \
	VLD1.P 32(RW), [V20.H8, V21.H8]; \
	VZIP1  V20.H8, V28.H8, V22.H8; \
	VZIP2  V20.H8, V28.H8, V23.H8; \
	VZIP1  V21.H8, V28.H8, V24.H8; \
	VZIP2  V21.H8, V28.H8, V25.H8; \
	VFMLA  V16.S4, V22.S4, a0.S4; \
	VFMLA  V17.S4, V23.S4, a1.S4; \
	VFMLA  V18.S4, V24.S4, a2.S4; \
	VFMLA  V19.S4, V25.S4, a3.S4

#define BF16ROW8(RW, a0, a1) \
	FMOVQ.P 16(RW), F20; \
	VZIP1  V20.H8, V28.H8, V22.H8; \
	VZIP2  V20.H8, V28.H8, V23.H8; \
	VFMLA  V16.S4, V22.S4, a0.S4; \
	VFMLA  V17.S4, V23.S4, a1.S4

// ROWSUM leaves row sums a..a+3 added up in a.
#define ROWSUM(a0, a1, a2, a3) \
	FADD4(a1, a0, a0); \
	FADD4(a3, a2, a2); \
	FADD4(a2, a0, a0)

#define FBODY(ROW16, ROW8) \
	MOVD  dst+0(FP), R0; \
	MOVD  n+8(FP), R7; \
	MOVD  w+16(FP), R8; \
	MOVD  wstride+24(FP), R9; \
	MOVD  K+32(FP), R10; \
	VEOR  V28.B16, V28.B16, V28.B16; \
block: \
	CBZ   R7, done; \
	CMP   $4, R7; \
	BGE   full; \
	MOVD  $4, R11; \
	SUB   R7, R11, R11; \
	MUL   R11, R9, R12; \
	SUB   R12, R8, R8; \
	SUB   R11<<2, R0, R0; \
	MOVD  $4, R7; \
full: \
	VEOR  V0.B16, V0.B16, V0.B16; \
	VEOR  V1.B16, V1.B16, V1.B16; \
	VEOR  V2.B16, V2.B16, V2.B16; \
	VEOR  V3.B16, V3.B16, V3.B16; \
	VEOR  V4.B16, V4.B16, V4.B16; \
	VEOR  V5.B16, V5.B16, V5.B16; \
	VEOR  V6.B16, V6.B16, V6.B16; \
	VEOR  V7.B16, V7.B16, V7.B16; \
	VEOR  V8.B16, V8.B16, V8.B16; \
	VEOR  V9.B16, V9.B16, V9.B16; \
	VEOR  V10.B16, V10.B16, V10.B16; \
	VEOR  V11.B16, V11.B16, V11.B16; \
	VEOR  V12.B16, V12.B16, V12.B16; \
	VEOR  V13.B16, V13.B16, V13.B16; \
	VEOR  V14.B16, V14.B16, V14.B16; \
	VEOR  V15.B16, V15.B16, V15.B16; \
	MOVD  R8, R1; \
	ADD   R9, R1, R2; \
	ADD   R9, R2, R3; \
	ADD   R9, R3, R4; \
	MOVD  x+40(FP), R5; \
	LSR   $4, R10, R6; \
	CBZ   R6, step8; \
loop16: \
	VLD1.P 64(R5), [V16.S4, V17.S4, V18.S4, V19.S4]; \
	ROW16(R1, V0, V1, V2, V3); \
	ROW16(R2, V4, V5, V6, V7); \
	ROW16(R3, V8, V9, V10, V11); \
	ROW16(R4, V12, V13, V14, V15); \
	SUBS  $1, R6, R6; \
	BNE   loop16; \
step8: \
	TBZ   $3, R10, sum; \
	VLD1.P 32(R5), [V16.S4, V17.S4]; \
	ROW8(R1, V0, V1); \
	ROW8(R2, V4, V5); \
	ROW8(R3, V8, V9); \
	ROW8(R4, V12, V13); \
sum: \
	ROWSUM(0, 1, 2, 3); \
	ROWSUM(4, 5, 6, 7); \
	ROWSUM(8, 9, 10, 11); \
	ROWSUM(12, 13, 14, 15); \
	FADDP4(4, 0, 16); \
	FADDP4(12, 8, 17); \
	FADDP4(17, 16, 16); \
	VST1.P [V16.S4], 16(R0); \
	ADD   R9<<2, R8, R8; \
	SUB   $4, R7, R7; \
	B     block; \
done: \
	RET

// The f32/f16/bf16 tile: 4 rows × 4 tokens, one vector of sums per pair
// (16 FMLA chains), four elements per step: per step 4 row and 4 x loads for
// 16 FMLAs; f16 widens by FCVTL, bf16 by ZIP1 with zero. The end adds each
// token's four row vectors pairwise (FADDP) into one vector of its 4 outputs.
//
// R0 dst, R1 dstride·4, R2-R5 rows 0-3, R6-R9 x of tokens 0-3, R10 steps left;
// V0-V15 sums (token j, row i: V4j+i), V16-V19 x, V20-V23 rows, V24-V27
// scratch, V28 zero.

// TSTEP adds one step's products: x (V16-V19) times rows (V20-V23).
#define TSTEP \
	VFMLA V16.S4, V20.S4, V0.S4; \
	VFMLA V16.S4, V21.S4, V1.S4; \
	VFMLA V16.S4, V22.S4, V2.S4; \
	VFMLA V16.S4, V23.S4, V3.S4; \
	VFMLA V17.S4, V20.S4, V4.S4; \
	VFMLA V17.S4, V21.S4, V5.S4; \
	VFMLA V17.S4, V22.S4, V6.S4; \
	VFMLA V17.S4, V23.S4, V7.S4; \
	VFMLA V18.S4, V20.S4, V8.S4; \
	VFMLA V18.S4, V21.S4, V9.S4; \
	VFMLA V18.S4, V22.S4, V10.S4; \
	VFMLA V18.S4, V23.S4, V11.S4; \
	VFMLA V19.S4, V20.S4, V12.S4; \
	VFMLA V19.S4, V21.S4, V13.S4; \
	VFMLA V19.S4, V22.S4, V14.S4; \
	VFMLA V19.S4, V23.S4, V15.S4

#define TROWSF32 \
	FMOVQ.P 16(R2), F20; \
	FMOVQ.P 16(R3), F21; \
	FMOVQ.P 16(R4), F22; \
	FMOVQ.P 16(R5), F23

#define TROWSF16 \
	FMOVD.P 8(R2), F24; \
	FMOVD.P 8(R3), F25; \
	FMOVD.P 8(R4), F26; \
	FMOVD.P 8(R5), F27; \
	FCVTL(24, 20); \
	FCVTL(25, 21); \
	FCVTL(26, 22); \
	FCVTL(27, 23)

#define TROWSBF16 \
	FMOVD.P 8(R2), F24; \
	FMOVD.P 8(R3), F25; \
	FMOVD.P 8(R4), F26; \
	FMOVD.P 8(R5), F27; \
	VZIP1   V24.H8, V28.H8, V20.H8; \
	VZIP1   V25.H8, V28.H8, V21.H8; \
	VZIP1   V26.H8, V28.H8, V22.H8; \
	VZIP1   V27.H8, V28.H8, V23.H8

// TOUT stores token j's four outputs (sums V<a>..V<a+3>) at (R11), steps R11.
#define TOUT(a0, a1, a2, a3) \
	FADDP4(a1, a0, 24); \
	FADDP4(a3, a2, 25); \
	FADDP4(25, 24, 24); \
	FMOVQ F24, (R11); \
	ADD   R1, R11, R11

// TBODY is a whole tile kernel; ROWS loads a step of the rows (ES bytes per
// element).
#define TBODY(ROWS, ES) \
	MOVD  dst+0(FP), R0; \
	MOVD  dstride+8(FP), R1; \
	LSL   $2, R1, R1; \
	MOVD  w+16(FP), R2; \
	MOVD  K+24(FP), R10; \
	MOVD  $ES, R12; \
	MUL   R10, R12, R12; \
	ADD   R12, R2, R3; \
	ADD   R12, R3, R4; \
	ADD   R12, R4, R5; \
	MOVD  x+32(FP), R6; \
	LSL   $2, R10, R12; \
	ADD   R12, R6, R7; \
	ADD   R12, R7, R8; \
	ADD   R12, R8, R9; \
	LSR   $2, R10, R10; \
	VEOR  V28.B16, V28.B16, V28.B16; \
	VEOR  V0.B16, V0.B16, V0.B16; \
	VEOR  V1.B16, V1.B16, V1.B16; \
	VEOR  V2.B16, V2.B16, V2.B16; \
	VEOR  V3.B16, V3.B16, V3.B16; \
	VEOR  V4.B16, V4.B16, V4.B16; \
	VEOR  V5.B16, V5.B16, V5.B16; \
	VEOR  V6.B16, V6.B16, V6.B16; \
	VEOR  V7.B16, V7.B16, V7.B16; \
	VEOR  V8.B16, V8.B16, V8.B16; \
	VEOR  V9.B16, V9.B16, V9.B16; \
	VEOR  V10.B16, V10.B16, V10.B16; \
	VEOR  V11.B16, V11.B16, V11.B16; \
	VEOR  V12.B16, V12.B16, V12.B16; \
	VEOR  V13.B16, V13.B16, V13.B16; \
	VEOR  V14.B16, V14.B16, V14.B16; \
	VEOR  V15.B16, V15.B16, V15.B16; \
tloop: \
	FMOVQ.P 16(R6), F16; \
	FMOVQ.P 16(R7), F17; \
	FMOVQ.P 16(R8), F18; \
	FMOVQ.P 16(R9), F19; \
	ROWS; \
	TSTEP; \
	SUBS  $1, R10, R10; \
	BNE   tloop; \
	MOVD  R0, R11; \
	TOUT(0, 1, 2, 3); \
	TOUT(4, 5, 6, 7); \
	TOUT(8, 9, 10, 11); \
	TOUT(12, 13, 14, 15); \
	RET

// pTileNEON(dst *float32, dstride int, p *float32, kc int, x *float32, xstride int, acc int)
//
// An 8-token × 32-row f32 tile from a panel: p holds kc steps of 32 floats
// (p[k·32 + r] is row r, element k), token l's x at x + l·xstride. dst[l·dstride
// + r] = Σ_k x_l[k]·p[k·32+r], added to dst if acc ≠ 0. The rows lie along the
// vectors and x comes in by element (FMLA by element), four of a token's
// elements per load, so there are no horizontal sums. The 32 rows run as four
// passes of eight (two vectors) over all kc steps: 16 sums, two panel vectors
// and eight x vectors fit the 32 registers; per four steps a pass loads 8 x
// and 4 panel pairs for 64 FMLAs.
//
// R0 dst, R1 dstride·4, R2 panel, R3 kc, R4 x, R5 xstride·4, R6 acc; R7
// passes left, R23 the pass's row offset in bytes, R19 the pass's panel,
// R8-R15 the tokens' x, R20/R21 steps left, R22 the stores.
TEXT ·pTileNEON(SB), NOSPLIT, $0-56
	MOVD dst+0(FP), R0
	MOVD dstride+8(FP), R1
	LSL  $2, R1, R1
	MOVD p+16(FP), R2
	MOVD kc+24(FP), R3
	MOVD x+32(FP), R4
	MOVD xstride+40(FP), R5
	LSL  $2, R5, R5
	MOVD acc+48(FP), R6
	MOVD $4, R7
	MOVD $0, R23

pass:
	ADD  R23, R2, R19
	MOVD R4, R8
	ADD  R5, R8, R9
	ADD  R5, R9, R10
	ADD  R5, R10, R11
	ADD  R5, R11, R12
	ADD  R5, R12, R13
	ADD  R5, R13, R14
	ADD  R5, R14, R15
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V4.B16, V4.B16, V4.B16
	VEOR V5.B16, V5.B16, V5.B16
	VEOR V6.B16, V6.B16, V6.B16
	VEOR V7.B16, V7.B16, V7.B16
	VEOR V8.B16, V8.B16, V8.B16
	VEOR V9.B16, V9.B16, V9.B16
	VEOR V10.B16, V10.B16, V10.B16
	VEOR V11.B16, V11.B16, V11.B16
	VEOR V12.B16, V12.B16, V12.B16
	VEOR V13.B16, V13.B16, V13.B16
	VEOR V14.B16, V14.B16, V14.B16
	VEOR V15.B16, V15.B16, V15.B16
	LSR  $2, R3, R20
	CBZ  R20, rem

loop4:
	FMOVQ.P 16(R8), F20
	FMOVQ.P 16(R9), F21
	FMOVQ.P 16(R10), F22
	FMOVQ.P 16(R11), F23
	FMOVQ.P 16(R12), F24
	FMOVQ.P 16(R13), F25
	FMOVQ.P 16(R14), F26
	FMOVQ.P 16(R15), F27
	FLDPQ   (R19), (F16, F17)
	PSTEP(0)
	FLDPQ   128(R19), (F16, F17)
	PSTEP(1)
	FLDPQ   256(R19), (F16, F17)
	PSTEP(2)
	FLDPQ   384(R19), (F16, F17)
	PSTEP(3)
	ADD     $512, R19
	SUBS    $1, R20, R20
	BNE     loop4

rem:
	AND  $3, R3, R21
	CBZ  R21, store

rem1:
	FMOVS.P 4(R8), F20
	FMOVS.P 4(R9), F21
	FMOVS.P 4(R10), F22
	FMOVS.P 4(R11), F23
	FMOVS.P 4(R12), F24
	FMOVS.P 4(R13), F25
	FMOVS.P 4(R14), F26
	FMOVS.P 4(R15), F27
	FLDPQ   (R19), (F16, F17)
	PSTEP(0)
	ADD     $128, R19
	SUBS    $1, R21, R21
	BNE     rem1

store:
	ADD  R23, R0, R22
	CBZ  R6, set
	PACC(0, 1, F0, F1)
	PACC(2, 3, F2, F3)
	PACC(4, 5, F4, F5)
	PACC(6, 7, F6, F7)
	PACC(8, 9, F8, F9)
	PACC(10, 11, F10, F11)
	PACC(12, 13, F12, F13)
	PACC(14, 15, F14, F15)
	B    next

set:
	PSET(F0, F1)
	PSET(F2, F3)
	PSET(F4, F5)
	PSET(F6, F7)
	PSET(F8, F9)
	PSET(F10, F11)
	PSET(F12, F13)
	PSET(F14, F15)

next:
	ADD  $32, R23
	SUBS $1, R7, R7
	BNE  pass
	RET

// fMatVecF32NEON(dst *float32, n int, w *float32, wstride, K int, x *float32)
//
// dst[i] = row i of w (wstride bytes apart; 0 repeats a row) · x, for n ≥ 4
// rows of K elements, K a multiple of 8.
TEXT ·fMatVecF32NEON(SB), NOSPLIT, $0-48
	FBODY(F32ROW16, F32ROW8)

// fMatVecF16NEON is fMatVecF32NEON for f16 rows.
TEXT ·fMatVecF16NEON(SB), NOSPLIT, $0-48
	FBODY(F16ROW16, F16ROW8)

// fMatVecBF16NEON is fMatVecF32NEON for bf16 rows.
TEXT ·fMatVecBF16NEON(SB), NOSPLIT, $0-48
	FBODY(BF16ROW16, BF16ROW8)

// fTileF32NEON(dst *float32, dstride int, w *float32, K int, x *float32)
//
// The 4-row × 4-token tile dst[j·dstride + i] = row i of w · x[j·K:(j+1)·K],
// K a multiple of 4 (at least 4).
TEXT ·fTileF32NEON(SB), NOSPLIT, $0-40
	TBODY(TROWSF32, 4)

// fTileF16NEON is fTileF32NEON for f16 rows.
TEXT ·fTileF16NEON(SB), NOSPLIT, $0-40
	TBODY(TROWSF16, 2)

// fTileBF16NEON is fTileF32NEON for bf16 rows.
TEXT ·fTileBF16NEON(SB), NOSPLIT, $0-40
	TBODY(TROWSBF16, 2)

// f16sToF32NEON(dst *float32, src *uint16, n int) widens n halves (a multiple
// of 8) to floats, exactly.
TEXT ·f16sToF32NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	LSR  $3, R2, R2
	CBZ  R2, done

loop:
	VLD1.P 16(R1), [V0.H8]
	FCVTL(0, 1)
	FCVTL2(0, 2)
	VST1.P [V1.S4, V2.S4], 32(R0)
	SUBS   $1, R2, R2
	BNE    loop

done:
	RET
