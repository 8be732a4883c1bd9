//go:build arm64 && !noasm

#include "textflag.h"

// Byte-dot mat-vec kernels for arm64: rows of 4/8-bit codes against
// activations as three signed-byte planes, t = hi·2¹⁶ + mid·2⁸ + lo (actB in
// actb.go, which also has the Go reference, qMatVecBGo). SDOT (FEAT_DotProd)
// multiplies signed bytes and sums each 32-bit lane's four products, so the
// codes must be signed: 4-bit codes (0..15) are; 8-bit ones are flipped to
// c − 128 (EOR 0x80) and the kernel adds 128·Σt back per group (see BIAS8).
// The ...NEONS kernels, for CPUs without FEAT_DotProd, are the same with each
// SDOT replaced by widening multiplies (DOT4S, DOT8S).
//
// A step is one 16-byte load of a row's codes: 32 4-bit codes (the low nibbles
// are the chunk's even values, the high ones the odd, as actB lays out a 4-bit
// chunk) or 16 8-bit codes. Groups are multiples of 32 codes, so a step lies in
// one group. Per row and group three int32 vectors sum the planes' dots, H =
// Σc·hi, M = Σc·mid, L = Σc·lo; at the group's end (GEND)
//
//	F += (float(M + H·2⁸)·2⁸ + float(L)) · scale_g
//
// Every integer sum is exact: a lane sums gs/4 codes |c| ≤ 128 per group, and
// |hi·2⁸ + mid| = |t − lo|/2⁸ ≤ (bMaxT + 128)/2⁸ < 32385, so |M + H·2⁸| ≤
// gs/4 · 128 · 32385 < 2³¹ for gs ≤ 2048 (the wrapper takes gs ≤ 1024); |H·2⁸|
// and |L| are smaller. Only the two conversions round, as the AVX-512 kernels'.
//
// Four rows run at a time, sharing each load of the planes. n ≥ 4 rows not a
// multiple of 4 end with a block stepped back over rows already done (they are
// recomputed with the same bits); the wrapper runs fewer than 4 rows as a
// block of 4 (see qMatVecBArm). Each block ends with dx·(Σ lanes of F) plus
// the bias pass, Σ_g bias_g·sx_g + scale_g·cr_g, four groups per step with the
// rows' vectors, then one group per step with the rows in the lanes.
//
// Go's assembler lacks SDOT, SMULL, SADALP, SCVTF, FCVTN, FADD and FADDP on
// vectors: they are WORDs below, each with the instruction it encodes.
//
// Registers: R0 dst, R1-R4 codes of rows 0-3 (post-incremented), R5 planes,
// R6 chunks left, R7 steps left in the group, R8 steps per group, R9 scale of
// row 0 in the current group, R10 sstride, R11 scratch, R12 rows left, R13
// codes of the block's row 0, R14 wstride, R15/R19 the block's scales/biases,
// R20-R25 the bias pass. V0-V5 planes, V6 0x0f (4-bit) or 0x80 (8-bit) bytes,
// V7 256.0, V8-V19 H, M, L of rows 0-3, V20-V23 F of rows 0-3, V24-V31
// scratch.

// SDOT Vd.4S, Vn.16B, Vm.16B
#define SDOT(m, n, d) WORD $(0x4e809400 | (m)<<16 | (n)<<5 | (d))
// SMULL Vd.8H, Vn.8B, Vm.8B; SMULL2 and SMLAL2 on the high eight bytes
#define SMULL(m, n, d) WORD $(0x0e20c000 | (m)<<16 | (n)<<5 | (d))
#define SMULL2(m, n, d) WORD $(0x4e20c000 | (m)<<16 | (n)<<5 | (d))
#define SMLAL2(m, n, d) WORD $(0x4e208000 | (m)<<16 | (n)<<5 | (d))
// SADALP Vd.4S, Vn.8H: d += pairwise sums of n
#define SADALP(n, d) WORD $(0x4e606800 | (n)<<5 | (d))
// SCVTF Vd.4S, Vn.4S
#define SCVTF4(n, d) WORD $(0x4e21d800 | (n)<<5 | (d))
// SCVTF Vd.2D, Vn.2D
#define SCVTF2D(n, d) WORD $(0x4e61d800 | (n)<<5 | (d))
// FCVTN Vd.2S, Vn.2D
#define FCVTN(n, d) WORD $(0x0e616800 | (n)<<5 | (d))
// FCVTN2 Vd.4S, Vn.2D
#define FCVTN2(n, d) WORD $(0x4e616800 | (n)<<5 | (d))
// FADD Vd.4S, Vn.4S, Vm.4S
#define FADD4(m, n, d) WORD $(0x4e20d400 | (m)<<16 | (n)<<5 | (d))
// FADDP Vd.4S, Vn.4S, Vm.4S: d = (n0+n1, n2+n3, m0+m1, m2+m3)
#define FADDP4(m, n, d) WORD $(0x6e20d400 | (m)<<16 | (n)<<5 | (d))

// PLANES4 loads the planes of the step at byte offset o of a 4-bit chunk: the
// even values' hi, odd hi, even mid, odd mid, even lo, odd lo.
#define PLANES4(o) \
	FMOVQ o(R5), F0; \
	FMOVQ o+64(R5), F1; \
	FMOVQ o+128(R5), F2; \
	FMOVQ o+192(R5), F3; \
	FMOVQ o+256(R5), F4; \
	FMOVQ o+320(R5), F5

// PLANES8 loads the hi, mid and lo planes of the step at offset o of an 8-bit
// chunk.
#define PLANES8(o) \
	FMOVQ o(R5), F0; \
	FMOVQ o+64(R5), F1; \
	FMOVQ o+128(R5), F2

// Without FEAT_DotProd, DOT4S and DOT8S add the same sixteen products to the
// four int32 lanes of d (in other lanes than SDOT, which the group sums do not
// see): products widen to int16 (SMULL), pairs add into int32 (SADALP). 4-bit
// products, |c·p| ≤ 15·128, pair up in int16 (SMLAL2); 8-bit ones, up to
// 128·128, do not.
#define DOT4S(m, n, d) \
	SMULL(m, n, 31); \
	SMLAL2(m, n, 31); \
	SADALP(31, d)

#define DOT8S(m, n, d) \
	SMULL(m, n, 30); \
	SMULL2(m, n, 31); \
	SADALP(30, d); \
	SADALP(31, d)

// ROW4 adds a step of a 4-bit row (codes at RC) to its sums H, M, L with DOT
// (SDOT or DOT4S); C, D are scratch (register numbers in the dots, names
// elsewhere).
#define ROW4(DOT, RC, h, m, l, c, d, VC, VD, FC) \
	FMOVQ.P 16(RC), FC; \
	VUSHR   $4, VC.B16, VD.B16; \
	VAND    V6.B16, VC.B16, VC.B16; \
	DOT(0, c, h); \
	DOT(1, d, h); \
	DOT(2, c, m); \
	DOT(3, d, m); \
	DOT(4, c, l); \
	DOT(5, d, l)

// ROW8 adds a step of an 8-bit row, codes flipped to c − 128.
#define ROW8(DOT, RC, h, m, l, c, d, VC, VD, FC) \
	FMOVQ.P 16(RC), FC; \
	VEOR    V6.B16, VC.B16, VC.B16; \
	DOT(0, c, h); \
	DOT(1, c, m); \
	DOT(2, c, l)

// GEND1 folds one row's group sums into its F (scale at (R11), R11 then steps
// to the next row's) and clears them.
#define GEND1(H, M, L, F, m, l) \
	VSHL    $8, H.S4, H.S4; \
	VADD    H.S4, M.S4, M.S4; \
	SCVTF4(m, m); \
	SCVTF4(l, l); \
	VFMLA   V7.S4, M.S4, L.S4; \
	VLD1R.P (R11)(R10), [V30.S4]; \
	VFMLA   V30.S4, L.S4, F.S4; \
	VEOR    H.B16, H.B16, H.B16; \
	VEOR    M.B16, M.B16, M.B16; \
	VEOR    L.B16, L.B16, L.B16

// STEP runs one step of the four rows and, at the end of a group, GEND; SKIP
// is a label name.
#define STEP(PLANES, o, ROW, DOT, SKIP) \
	PLANES(o); \
	ROW(DOT, R1, 8, 9, 10, 24, 25, V24, V25, F24); \
	ROW(DOT, R2, 11, 12, 13, 26, 27, V26, V27, F26); \
	ROW(DOT, R3, 14, 15, 16, 28, 29, V28, V29, F28); \
	ROW(DOT, R4, 17, 18, 19, 24, 25, V24, V25, F24); \
	SUBS $1, R7, R7; \
	BNE  SKIP; \
	MOVD R9, R11; \
	GEND1(V8, V9, V10, V20, 9, 10); \
	GEND1(V11, V12, V13, V21, 12, 13); \
	GEND1(V14, V15, V16, V22, 15, 16); \
	GEND1(V17, V18, V19, V23, 18, 19); \
	MOVD R8, R7; \
	ADD  $4, R9; \
SKIP:

// BIAS4 adds four groups' b·sx + s·cr to the rows' vectors V8, V11, V14, V17
// (sx at R20, cr at R21, the rows' biases at R23 and scales at R24).
#define BIAS4 \
	FMOVQ.P 16(R20), F0; \
	FMOVQ.P 16(R21), F1; \
	MOVD    R23, R11; \
	VLD1.P  (R11)(R10), [V24.S4]; \
	VLD1.P  (R11)(R10), [V25.S4]; \
	VLD1.P  (R11)(R10), [V26.S4]; \
	VLD1.P  (R11)(R10), [V27.S4]; \
	MOVD    R24, R11; \
	VLD1.P  (R11)(R10), [V28.S4]; \
	VLD1.P  (R11)(R10), [V29.S4]; \
	VLD1.P  (R11)(R10), [V30.S4]; \
	VLD1.P  (R11)(R10), [V31.S4]; \
	VFMLA   V0.S4, V24.S4, V8.S4; \
	VFMLA   V0.S4, V25.S4, V11.S4; \
	VFMLA   V0.S4, V26.S4, V14.S4; \
	VFMLA   V0.S4, V27.S4, V17.S4; \
	VFMLA   V1.S4, V28.S4, V8.S4; \
	VFMLA   V1.S4, V29.S4, V11.S4; \
	VFMLA   V1.S4, V30.S4, V14.S4; \
	VFMLA   V1.S4, V31.S4, V17.S4

// BIAS8 is BIAS4's 8-bit correction for the flipped codes: F += s·128·Σt for
// four groups (Σt, int64, at R22; ·128 by a shift, exact: |Σt| < 2⁴⁴).
#define BIAS8 \
	VLD1.P  32(R22), [V2.D2, V3.D2]; \
	VSHL    $7, V2.D2, V2.D2; \
	VSHL    $7, V3.D2, V3.D2; \
	SCVTF2D(2, 2); \
	SCVTF2D(3, 3); \
	FCVTN(2, 4); \
	FCVTN2(3, 4); \
	VFMLA   V4.S4, V28.S4, V20.S4; \
	VFMLA   V4.S4, V29.S4, V21.S4; \
	VFMLA   V4.S4, V30.S4, V22.S4; \
	VFMLA   V4.S4, V31.S4, V23.S4

// BIAS1 adds one group's b·sx + s·cr to V5, row r in lane r.
#define BIAS1 \
	VLD1R.P 4(R20), [V0.S4]; \
	VLD1R.P 4(R21), [V1.S4]; \
	MOVD    R23, R11; \
	VLD1.P  (R11)(R10), V24.S[0]; \
	VLD1.P  (R11)(R10), V24.S[1]; \
	VLD1.P  (R11)(R10), V24.S[2]; \
	VLD1.P  (R11)(R10), V24.S[3]; \
	MOVD    R24, R11; \
	VLD1.P  (R11)(R10), V25.S[0]; \
	VLD1.P  (R11)(R10), V25.S[1]; \
	VLD1.P  (R11)(R10), V25.S[2]; \
	VLD1.P  (R11)(R10), V25.S[3]; \
	VFMLA   V0.S4, V24.S4, V5.S4; \
	VFMLA   V1.S4, V25.S4, V5.S4

// BIAS81 is BIAS1's 8-bit correction: V3 += s·128·Σt, row r in lane r.
#define BIAS81 \
	VLD1R.P 8(R22), [V2.D2]; \
	VSHL    $7, V2.D2, V2.D2; \
	SCVTF2D(2, 2); \
	FCVTN(2, 4); \
	FCVTN2(2, 4); \
	VFMLA   V4.S4, V25.S4, V3.S4

#define NOP8

// BODY is a whole kernel: PLANES and ROW for the code width, DOT the dot
// product, XSTEP plane bytes per chunk, B8/B81 the 8-bit corrections (or NOP8).
#define BODY(PLANES, ROW, DOT, XSTEP, B8, B81) \
	MOVW     $0x43800000, R11; \
	VDUP     R11, V7.S4; \
	MOVD     dst+0(FP), R0; \
	MOVD     n+8(FP), R12; \
	MOVD     w+16(FP), R13; \
	MOVD     wstride+24(FP), R14; \
	MOVD     s+32(FP), R15; \
	MOVD     b+40(FP), R19; \
	MOVD     sstride+48(FP), R10; \
	MOVD     lpg+80(FP), R8; \
block: \
	CBZ      R12, done; \
	CMP      $4, R12; \
	BGE      full; \
	MOVD     $4, R11; \
	SUB      R12, R11, R11; \
	MUL      R11, R14, R25; \
	SUB      R25, R13, R13; \
	MUL      R11, R10, R25; \
	SUB      R25, R15, R15; \
	SUB      R25, R19, R19; \
	SUB      R11<<2, R0, R0; \
	MOVD     $4, R12; \
full: \
	VEOR     V8.B16, V8.B16, V8.B16; \
	VEOR     V9.B16, V9.B16, V9.B16; \
	VEOR     V10.B16, V10.B16, V10.B16; \
	VEOR     V11.B16, V11.B16, V11.B16; \
	VEOR     V12.B16, V12.B16, V12.B16; \
	VEOR     V13.B16, V13.B16, V13.B16; \
	VEOR     V14.B16, V14.B16, V14.B16; \
	VEOR     V15.B16, V15.B16, V15.B16; \
	VEOR     V16.B16, V16.B16, V16.B16; \
	VEOR     V17.B16, V17.B16, V17.B16; \
	VEOR     V18.B16, V18.B16, V18.B16; \
	VEOR     V19.B16, V19.B16, V19.B16; \
	VEOR     V20.B16, V20.B16, V20.B16; \
	VEOR     V21.B16, V21.B16, V21.B16; \
	VEOR     V22.B16, V22.B16, V22.B16; \
	VEOR     V23.B16, V23.B16, V23.B16; \
	MOVD     R13, R1; \
	ADD      R14, R1, R2; \
	ADD      R14, R2, R3; \
	ADD      R14, R3, R4; \
	MOVD     xb+64(FP), R5; \
	MOVD     nchunk+72(FP), R6; \
	MOVD     R8, R7; \
	MOVD     R15, R9; \
chunk: \
	STEP(PLANES, 0, ROW, DOT, step0); \
	STEP(PLANES, 16, ROW, DOT, step1); \
	STEP(PLANES, 32, ROW, DOT, step2); \
	STEP(PLANES, 48, ROW, DOT, step3); \
	ADD      $XSTEP, R5; \
	SUBS     $1, R6, R6; \
	BNE      chunk; \
	MOVD     sx+96(FP), R20; \
	MOVD     cr+104(FP), R21; \
	MOVD     tsum+112(FP), R22; \
	MOVD     R19, R23; \
	MOVD     R15, R24; \
	MOVD     G+56(FP), R25; \
	LSR      $2, R25, R25; \
	CBZ      R25, tail; \
bias: \
	BIAS4; \
	B8; \
	ADD      $16, R23; \
	ADD      $16, R24; \
	SUBS     $1, R25, R25; \
	BNE      bias; \
tail: \
	VEOR     V3.B16, V3.B16, V3.B16; \
	VEOR     V5.B16, V5.B16, V5.B16; \
	MOVD     G+56(FP), R25; \
	AND      $3, R25, R25; \
	CBZ      R25, sum; \
tail1: \
	BIAS1; \
	B81; \
	ADD      $4, R23; \
	ADD      $4, R24; \
	SUBS     $1, R25, R25; \
	BNE      tail1; \
sum: \
	FADDP4(21, 20, 24); \
	FADDP4(23, 22, 25); \
	FADDP4(25, 24, 24); \
	FADD4(3, 24, 24); \
	FADDP4(11, 8, 26); \
	FADDP4(17, 14, 27); \
	FADDP4(27, 26, 26); \
	FADD4(5, 26, 26); \
	MOVD     dq+88(FP), R11; \
	VLD1R    (R11), [V27.S4]; \
	VFMLA    V27.S4, V24.S4, V26.S4; \
	VST1.P   [V26.S4], 16(R0); \
	ADD      R14<<2, R13, R13; \
	ADD      R10<<2, R15, R15; \
	ADD      R10<<2, R19, R19; \
	SUB      $4, R12, R12; \
	B        block; \
done: \
	RET

// qMatVecB4NEON(dst *float32, n int, w *uint32, wstride int, s, b *float32,
//     sstride, G int, xb *int8, nchunk, lpg int, dq, sx, cr *float32, tsum *int64)
//
// Rows of 4-bit codes, n ≥ 4; wstride and sstride are the byte
// strides of code and scale/bias rows (0 repeats a row), lpg the steps per
// group (gs/32). tsum is unused.
TEXT ·qMatVecB4NEON(SB), NOSPLIT, $0-120
	VMOVI $15, V6.B16
	BODY(PLANES4, ROW4, SDOT, 384, NOP8, NOP8)

// qMatVecB8NEON: as qMatVecB4NEON for 8-bit codes; lpg is gs/16.
TEXT ·qMatVecB8NEON(SB), NOSPLIT, $0-120
	VMOVI $128, V6.B16
	BODY(PLANES8, ROW8, SDOT, 192, BIAS8, BIAS81)

// qMatVecB4NEONS: qMatVecB4NEON for CPUs without FEAT_DotProd.
TEXT ·qMatVecB4NEONS(SB), NOSPLIT, $0-120
	VMOVI $15, V6.B16
	BODY(PLANES4, ROW4, DOT4S, 384, NOP8, NOP8)

// qMatVecB8NEONS: qMatVecB8NEON for CPUs without FEAT_DotProd.
TEXT ·qMatVecB8NEONS(SB), NOSPLIT, $0-120
	VMOVI $128, V6.B16
	BODY(PLANES8, ROW8, DOT8S, 192, BIAS8, BIAS81)
