//go:build amd64 && !noasm

#include "textflag.h"

// Byte-dot mat-vec kernels (AVX-512 VNNI): rows of 4/8-bit codes against
// activations as three signed-byte planes, t = hi·2¹⁶ + mid·2⁸ + lo (actB in
// actb.go, which also has the Go reference, qMatVecBGo). The rows are in the
// blocked layout (blocked.go): one 512-bit load of a row's codes is a chunk,
// whose sixteen lanes hold one word of each of a stripe's sixteen groups (the
// last stripe may have fewer: its loads are masked). VPDPBUSD multiplies the
// codes (unsigned) with a plane (signed) and sums each lane's products into an
// int32 lane, one sum per plane: over a stripe's chunks each lane gathers its
// group's Σq·hi, Σq·mid and Σq·lo (|Σ| < 2²³ for groups up to 256), and then,
// per stripe and row,
//
//	A = float((Σq·hi)·2⁸ + Σq·mid)·2⁸ + float(Σq·lo),   F += A · S
//
// with S the stripe's sixteen scales in order and F the row's sixteen float
// lanes. The four rows of a block share each load of the planes. Each row
// ends with F·dx plus the bias pass, Σ_g bias_g·sx_g + scale_g·cr_g, sixteen
// groups per step and a masked step for the rest, and a horizontal sum (one
// shuffle tree for a four-row block's four rows: SUM4).
//
// Registers: DI dst, CX rows left, SI the block, R9 the stripe's scales (then
// the row's, in FINISH), R10 the block's biases, R11 the bytes of a row's
// scales or biases (G·m; see RSTRIDE), R15 3·R11; in the stripe loop R8 the bytes of one row's chunk (64, or
// 4 per group in the last stripe), R13 stripes left, AX codes, BX planes, R12
// chunks left, R14 the prefetch distance, DX addresses. Z0-Z5 planes, Z6 0x0f
// bytes (4-bit), Z24 the GF(2) shift matrix (4-bit), Z29 256.0, Z8-Z11 row
// sums F, Z12-Z23 the int sums (three per row), Z25-Z28 scratch, Z30 the
// scales, Z31 PACE's, K1 the stripe's lanes, K2 tail groups of the bias pass;
// Z7 and K3 for Q4_K's scales (KD).

// A four-row block prefetches the codes pf bytes ahead with instruction PFA
// (the caller's distance, at least one block: 4·S1; or 0, which leaves the
// stream to the hardware prefetchers: see pfTune), and the next block's
// scales and biases as it starts (left to the hardware prefetcher, their
// misses cost 10–15 % of decode speed on Zen 4); PFC is what else it
// prefetches per chunk. Each kernel comes twice: with PREFETCHT1 (into L2) and
// nothing else, and with PREFETCHT0 (into L1) and PFCUR, which also prefetches
// the chunk's own lines just before it loads them and those 4 KB ahead. PFB is
// how far ahead a single row prefetches.
//
// The distance is the larger of one block and pfMin (Zen 4): two blocks ahead
// is too far for long rows, less than one too near for the longest, and pfMin
// keeps it far enough when the bandwidth bursts. The PREFETCHT0 kernels are
// for CPUs such as Zen 5, where the loads queued behind each line that misses
// stall the core before enough lines are in flight: prefetches into L1 keep
// lines coming and those into L2 do not (there one thread streaming with
// PREFETCHT1 read 0.60–0.71 of its bandwidth, with PREFETCHT0 and the chunk's
// own lines 0.92–0.95); the lines 4 KB ahead add 1–2.5 %. Measurements:
// docs/perf/cpu.md, "Prefetch distances" and "2026-11-23, Zen 5: prefetching
// into L1 (kept)".
#define PFB 8192
#define PFNO
#define PFCUR \
	PREFETCHT0 (AX); \
	PREFETCHT0 64(AX); \
	PREFETCHT0 128(AX); \
	PREFETCHT0 192(AX); \
	PREFETCHT0 4096(AX); \
	PREFETCHT0 4160(AX); \
	PREFETCHT0 4224(AX); \
	PREFETCHT0 4288(AX)

DATA b0f<>+0(SB)/4, $0x0f0f0f0f
GLOBL b0f<>(SB), RODATA|NOPTR, $4
DATA bhi4<>+0(SB)/8, $0x1020408000000000
GLOBL bhi4<>(SB), RODATA|NOPTR, $8
DATA b256<>+0(SB)/4, $0x43800000
GLOBL b256<>(SB), RODATA|NOPTR, $4
DATA lane0s<>+0(SB)/8, $0x0000000400000000
DATA lane0s<>+8(SB)/8, $0x0000000c00000008
GLOBL lane0s<>(SB), RODATA|NOPTR, $16

// ROW4 adds one chunk of a 4-bit row (codes at caddr) to its sums AH, AM, AL;
// C and H are scratch. The low nibbles stay in C, the high ones go to H by a
// GF(2) affine map (NIB: GFNI, x >> 4 per byte); ROW4S, for CPUs without GFNI,
// shifts and masks instead (NIBS).
// ROW4S takes fewer cycles a chunk from L2 than ROW4 on Zen 4 but streams
// DRAM slower, so GFNI is taken where present (docs/perf/cpu.md, "2026-11-22,
// Zen 4: why q4 stays below 0.80 in the fast minutes").
// ROW4P and ROW4SP are the same paced (PACE, below), for the PREFETCHT0 kernels.
#define ROW4(caddr, C, H, AH, AM, AL) \
	VMOVDQU32.Z caddr, K1, C; \
	NIB(C, H); \
	DOT4(C, H, AH, AM, AL)

#define ROW4S(caddr, C, H, AH, AM, AL) \
	VMOVDQU32.Z caddr, K1, C; \
	NIBS(C, H); \
	DOT4(C, H, AH, AM, AL)

#define ROW4P(caddr, C, H, AH, AM, AL) \
	VMOVDQU32.Z caddr, K1, C; \
	PACE(C); \
	NIB(C, H); \
	DOT4(C, H, AH, AM, AL)

#define ROW4SP(caddr, C, H, AH, AM, AL) \
	VMOVDQU32.Z caddr, K1, C; \
	PACE(C); \
	NIBS(C, H); \
	DOT4(C, H, AH, AM, AL)

#define NIB(C, H) \
	VGF2P8AFFINEQB $0, Z24, C, H; \
	VPANDD         Z6, C, C

#define NIBS(C, H) \
	VPSRLW $4, C, H; \
	VPANDD Z6, C, C; \
	VPANDD Z6, H, H

#define DOT4(C, H, AH, AM, AL) \
	VPDPBUSD Z0, C, AH; \
	VPDPBUSD Z1, H, AH; \
	VPDPBUSD Z2, C, AM; \
	VPDPBUSD Z3, H, AM; \
	VPDPBUSD Z4, C, AL; \
	VPDPBUSD Z5, H, AL

// ROW8 adds one chunk of an 8-bit row to its sums, as ROW4 (H unused).
#define ROW8(caddr, C, H, AH, AM, AL) \
	VMOVDQU32.Z caddr, K1, C; \
	PACE(C); \
	VPDPBUSD    Z0, C, AH; \
	VPDPBUSD    Z1, C, AM; \
	VPDPBUSD    Z2, C, AL

// PACE chains two dots of the loaded codes into Z31, which nothing reads: one
// chain through every row's loads, so while a load waits on memory the ops
// queued behind it stop the loop from issuing many more loads ahead of it.
// Unpaced, the 8-bit loop runs so far ahead of its loads that it streams DRAM
// slower than a loop with more work per code; two dots pace it best over
// both of Zen 4's bandwidth regimes (one dot, three, or IMULs lose in one or
// the other). It costs ~45 % with the weights in L2, where nothing waits. The
// 4-bit kernels' six dots per chunk and row already set about that pace, and
// PACE takes a quarter of their dots' issue, so they run unpaced, but for
// pfL1P: on Zen 5 the 4-bit PREFETCHT0 kernels read faster paced when the
// bandwidth is low and slower when it is high, so they come both ways and
// pfTune chooses (pfL1, pfL1P). Measurements: docs/perf/cpu.md, "Pacing
// (PACE)".
#define PACE(C) \
	VPDPBUSD Z0, C, Z31; \
	VPDPBUSD Z1, C, Z31

// FLUSH adds a row's stripe, sums AH, AM, AL (which it clears), to F with the
// stripe's scales at saddr; S is scratch.
#define FLUSH(saddr, F, AH, AM, AL, S) \
	VPSLLD      $8, AH, AH; \
	VPADDD      AM, AH, AH; \
	VCVTDQ2PS   AH, AH; \
	VCVTDQ2PS   AL, AL; \
	VFMADD231PS Z29, AH, AL; \
	SLOAD(saddr, S); \
	VFMADD231PS S, AL, F; \
	VPXORD      AH, AH, AH; \
	VPXORD      AM, AM, AM; \
	VPXORD      AL, AL, AL

// ZERO clears the int sums.
#define ZERO(A, B, C) \
	VPXORD A, A, A; \
	VPXORD B, B, B; \
	VPXORD C, C, C

// FINB adds the bias pass to row sum F (its row's scales and biases at
// R9/R10; F·dx first) and steps R9, R10 to the next row. The bias pass's tail
// step is skipped when G is a multiple of sixteen (K2 empty). LOOP, TAIL and
// DONE are label names.
#define FINB(F, LOOP, TAIL, DONE) \
	MOVQ            dq+80(FP), AX; \
	VMULPS.BCST     (AX), F, F; \
	MOVQ            sx+88(FP), AX; \
	MOVQ            cr+96(FP), BX; \
	MOVQ            R9, R13; \
	MOVQ            R10, R14; \
	MOVQ            G+32(FP), R12; \
	SHRQ            $4, R12; \
	JZ              TAIL; \
LOOP: \
	MLOAD((R14), Z12); \
	VFMADD231PS     (AX), Z12, F; \
	MLOAD((R13), Z12); \
	VFMADD231PS     (BX), Z12, F; \
	ADDQ            $64, AX; \
	ADDQ            $64, BX; \
	ADDQ            $MSTEP, R13; \
	ADDQ            $MSTEP, R14; \
	DECQ            R12; \
	JNZ             LOOP; \
TAIL: \
	KORTESTW        K2, K2; \
	JZ              DONE; \
	MLOADT((R14), Z12); \
	VMOVUPS.Z       (AX), K2, Z13; \
	VFMADD231PS     Z13, Z12, F; \
	MLOADT((R13), Z12); \
	VMOVUPS.Z       (BX), K2, Z13; \
	VFMADD231PS     Z13, Z12, F; \
DONE: \
	ADDQ            R11, R9; \
	ADDQ            R11, R10

// FINISH is FINB for a single row, then stores the sum of F's lanes (FY, FX
// its lower halves) to (DI) and steps DI.
#define FINISH(F, FY, FX, LOOP, TAIL, DONE) \
	FINB(F, LOOP, TAIL, DONE); \
	VEXTRACTF64X4   $1, F, Y12; \
	VADDPS          Y12, FY, FY; \
	VEXTRACTF128    $1, FY, X12; \
	VADDPS          X12, FX, FX; \
	VPSHUFD         $0x4e, FX, X12; \
	VADDPS          X12, FX, FX; \
	VPSHUFD         $0xb1, FX, X12; \
	VADDPS          X12, FX, FX; \
	VMOVSS          FX, (DI); \
	ADDQ            $4, DI

// SUM4 stores the sums of the lanes of a four-row block's F (Z8-Z11) to
// (DI)…12(DI) and steps DI: the rows' 512-bit halves, then 256-bit halves,
// are folded two rows per shuffle, so the four sums take one shuffle tree,
// not four (Z14-Z18 scratch).
#define SUM4 \
	VSHUFF64X2      $0x44, Z9, Z8, Z14; \
	VSHUFF64X2      $0xee, Z9, Z8, Z15; \
	VADDPS          Z15, Z14, Z14; \
	VSHUFF64X2      $0x44, Z11, Z10, Z16; \
	VSHUFF64X2      $0xee, Z11, Z10, Z17; \
	VADDPS          Z17, Z16, Z16; \
	VSHUFF64X2      $0x88, Z16, Z14, Z15; \
	VSHUFF64X2      $0xdd, Z16, Z14, Z17; \
	VADDPS          Z17, Z15, Z15; \
	VPERMILPS       $0x4e, Z15, Z14; \
	VADDPS          Z14, Z15, Z15; \
	VPERMILPS       $0xb1, Z15, Z14; \
	VADDPS          Z14, Z15, Z15; \
	VBROADCASTI32X4 lane0s<>(SB), Z18; \
	VPERMPS         Z15, Z18, Z15; \
	VMOVUPS         X15, (DI); \
	ADDQ            $16, DI

// LOADX4 and LOADX8 load a chunk's planes.
#define LOADX4 \
	VMOVDQU64 (BX), Z0; \
	VMOVDQU64 64(BX), Z1; \
	VMOVDQU64 128(BX), Z2; \
	VMOVDQU64 192(BX), Z3; \
	VMOVDQU64 256(BX), Z4; \
	VMOVDQU64 320(BX), Z5

#define LOADX8 \
	VMOVDQU64 (BX), Z0; \
	VMOVDQU64 64(BX), Z1; \
	VMOVDQU64 128(BX), Z2

// STRIPES starts a block's stripe loop: codes, planes, stripes left, all lanes
// and a row's chunks of CHUNKB bytes (LASTSTRIPE changes these last two for
// the last stripe).
#define CHUNKB 64
#define STRIPES \
	MOVQ   SI, AX; \
	MOVQ   xb+40(FP), BX; \
	MOVQ   S+56(FP), R13; \
	KXNORW K1, K1, K1; \
	MOVQ   $CHUNKB, R8

// LASTSTRIPE(L) sets R8 and K1 for the last stripe when R13 says it is next
// (L is a label).
#define LASTSTRIPE(L) \
	CMPQ    R13, $1; \
	JNE     L; \
	MOVQ    smsk+64(FP), DX; \
	KMOVQ   DX, K1; \
	POPCNTQ DX, R8; \
	SHLQ    $2, R8; \
L:

// BODY is a whole kernel for row macro ROW, plane loads LOADX, XSTEP plane
// bytes per chunk and prefetches PFA and PFC (above), over rows in the
// blocked layout (blocked.go): four-row blocks while four rows are left, then
// one-row blocks. Each block runs its stripes, then FINISH per row.
#define BODY(ROW, LOADX, XSTEP, PFA, PFC) \
	KMOVQ        tmsk+104(FP), K2; \
	VBROADCASTSS b256<>(SB), Z29; \
	MOVQ         dst+0(FP), DI; \
	MOVQ         n+8(FP), CX; \
	MOVQ         w+16(FP), SI; \
	MOVQ         G+32(FP), R11; \
	RSTRIDE; \
	LEAQ         (R11)(R11*2), R15; \
block4: \
	CMPQ      CX, $4; \
	JLT       single; \
	VPXORD    Z8, Z8, Z8; \
	VPXORD    Z9, Z9, Z9; \
	VPXORD    Z10, Z10, Z10; \
	VPXORD    Z11, Z11, Z11; \
	ZERO(Z12, Z13, Z14); \
	ZERO(Z15, Z16, Z17); \
	ZERO(Z18, Z19, Z20); \
	ZERO(Z21, Z22, Z23); \
	MOVQ      rb+24(FP), R9; \
	SHLQ      $2, R9; \
	ADDQ      SI, R9; \
	LEAQ      (R9)(R11*4), R10; \
	MOVQ      pf+72(FP), R14; \
	LEAQ      (R9)(R14*1), DX; \
	MOVQ      R11, R12; \
	SHRQ      $3, R12; \
pfsb: \
	PREFETCHT1 (DX); \
	ADDQ      $64, DX; \
	DECQ      R12; \
	JG        pfsb; \
	STRIPES; \
stripe4: \
	LASTSTRIPE(full4); \
	MOVQ      wpg+48(FP), R12; \
chunk4: \
	LOADX; \
	PFC; \
	LEAQ      (AX)(R14*1), DX; \
	PFA (DX); \
	PFA 64(DX); \
	PFA 128(DX); \
	PFA 192(DX); \
	LEAQ      (AX)(R8*2), DX; \
	ROW((AX), Z25, Z26, Z12, Z13, Z14); \
	ROW((AX)(R8*1), Z27, Z28, Z15, Z16, Z17); \
	ROW((DX), Z25, Z26, Z18, Z19, Z20); \
	ROW((DX)(R8*1), Z27, Z28, Z21, Z22, Z23); \
	LEAQ      (AX)(R8*4), AX; \
	ADDQ      $XSTEP, BX; \
	DECQ      R12; \
	JNZ       chunk4; \
	FLUSH((R9), Z8, Z12, Z13, Z14, Z30); \
	FLUSH((R9)(R11*1), Z9, Z15, Z16, Z17, Z30); \
	FLUSH((R9)(R11*2), Z10, Z18, Z19, Z20, Z30); \
	FLUSH((R9)(R15*1), Z11, Z21, Z22, Z23, Z30); \
	ADDQ      $MSTEP, R9; \
	DECQ      R13; \
	JNZ       stripe4; \
	MOVQ      R11, DX; \
	SHLQ      $2, DX; \
	MOVQ      R10, R9; \
	SUBQ      DX, R9; \
	FINB(Z8, fin0, tail0, done0); \
	FINB(Z9, fin1, tail1, done1); \
	FINB(Z10, fin2, tail2, done2); \
	FINB(Z11, fin3, tail3, done3); \
	SUM4; \
	MOVQ      R10, SI; \
	SUBQ      $4, CX; \
	JMP       block4; \
single: \
	TESTQ     CX, CX; \
	JZ        done; \
	VPXORD    Z8, Z8, Z8; \
	ZERO(Z12, Z13, Z14); \
	MOVQ      rb+24(FP), R9; \
	ADDQ      SI, R9; \
	LEAQ      (R9)(R11*1), R10; \
	STRIPES; \
stripe1: \
	LASTSTRIPE(full1); \
	MOVQ      wpg+48(FP), R12; \
chunk1: \
	LOADX; \
	PFA PFB(AX); \
	ROW((AX), Z25, Z26, Z12, Z13, Z14); \
	ADDQ      R8, AX; \
	ADDQ      $XSTEP, BX; \
	DECQ      R12; \
	JNZ       chunk1; \
	FLUSH((R9), Z8, Z12, Z13, Z14, Z30); \
	ADDQ      $MSTEP, R9; \
	DECQ      R13; \
	JNZ       stripe1; \
	MOVQ      R10, R9; \
	SUBQ      R11, R9; \
	FINISH(Z8, Y8, X8, fin4, tail4, done4); \
	MOVQ      R10, SI; \
	DECQ      CX; \
	JMP       single; \
done: \
	VZEROUPPER; \
	RET

// K4, K4S and K8 are the whole kernels: 4-bit with GFNI (ROW4 or ROW4P),
// 4-bit without (ROW4S or ROW4SP), 8-bit.
#define K4(ROW, PFA, PFC) \
	VPBROADCASTD b0f<>(SB), Z6; \
	VPBROADCASTQ bhi4<>(SB), Z24; \
	BODY(ROW, LOADX4, 384, PFA, PFC)

#define K4S(ROW, PFA, PFC) \
	VPBROADCASTD b0f<>(SB), Z6; \
	BODY(ROW, LOADX4, 384, PFA, PFC)

#define K8(PFA, PFC) \
	BODY(ROW8, LOADX8, 192, PFA, PFC)

// The scales and biases: SLOAD loads a stripe's scales as floats (lanes K1),
// MLOAD sixteen scales or biases, MLOADT the last ones (lanes K2); MSTEP is the
// bytes of sixteen, 1<<MSHIFT of one, and RSTRIDE turns R11 from G into the
// bytes of a row's G.
// Each kernel is assembled three times, for f32, bf16 and f16 ones; the 4-bit
// ones a fourth time for the integer scales of Q4_K (metaK, at the end).
#define SLOAD(a, S) VMOVUPS.Z a, K1, S
#define MLOAD(a, D) VMOVUPS a, D
#define MLOADT(a, D) VMOVUPS.Z a, K2, D
#define MSTEP 64
#define MSHIFT 2
#define RSTRIDE SHLQ $MSHIFT, R11

// qMatVecB4(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int,
//     smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64): rb code bytes per
//     row, G groups, wpg chunks per stripe, S stripes, smsk the last stripe's
//     lanes, pf the prefetch distance, tmsk the bias pass's tail. B4S
// for CPUs without GFNI, B8 for 8-bit codes; the T0 kernels prefetch into L1.
TEXT ·qMatVecB4(SB), NOSPLIT, $0-112
	K4(ROW4, PREFETCHT1, PFNO)

TEXT ·qMatVecB4T0(SB), NOSPLIT, $0-112
	K4(ROW4, PREFETCHT0, PFCUR)

TEXT ·qMatVecB4S(SB), NOSPLIT, $0-112
	K4S(ROW4S, PREFETCHT1, PFNO)

TEXT ·qMatVecB4ST0(SB), NOSPLIT, $0-112
	K4S(ROW4S, PREFETCHT0, PFCUR)

TEXT ·qMatVecB4T0P(SB), NOSPLIT, $0-112
	K4(ROW4P, PREFETCHT0, PFCUR)

TEXT ·qMatVecB4ST0P(SB), NOSPLIT, $0-112
	K4S(ROW4SP, PREFETCHT0, PFCUR)

TEXT ·qMatVecB8(SB), NOSPLIT, $0-112
	K8(PREFETCHT1, PFNO)

TEXT ·qMatVecB8T0(SB), NOSPLIT, $0-112
	K8(PREFETCHT0, PFCUR)

#undef SLOAD
#undef MLOAD
#undef MLOADT
#undef MSTEP
#undef MSHIFT
#define SLOAD(a, S) VPMOVZXWD.Z a, K1, S; VPSLLD $16, S, S
#define MLOAD(a, D) VPMOVZXWD a, D; VPSLLD $16, D, D
#define MLOADT(a, D) VPMOVZXWD.Z a, K2, D; VPSLLD $16, D, D
#define MSTEP 32
#define MSHIFT 1

// The kernels for bf16 scales and biases.
TEXT ·qMatVecB4BF(SB), NOSPLIT, $0-112
	K4(ROW4, PREFETCHT1, PFNO)

TEXT ·qMatVecB4BFT0(SB), NOSPLIT, $0-112
	K4(ROW4, PREFETCHT0, PFCUR)

TEXT ·qMatVecB4SBF(SB), NOSPLIT, $0-112
	K4S(ROW4S, PREFETCHT1, PFNO)

TEXT ·qMatVecB4SBFT0(SB), NOSPLIT, $0-112
	K4S(ROW4S, PREFETCHT0, PFCUR)

TEXT ·qMatVecB4BFT0P(SB), NOSPLIT, $0-112
	K4(ROW4P, PREFETCHT0, PFCUR)

TEXT ·qMatVecB4SBFT0P(SB), NOSPLIT, $0-112
	K4S(ROW4SP, PREFETCHT0, PFCUR)

TEXT ·qMatVecB8BF(SB), NOSPLIT, $0-112
	K8(PREFETCHT1, PFNO)

TEXT ·qMatVecB8BFT0(SB), NOSPLIT, $0-112
	K8(PREFETCHT0, PFCUR)

#undef SLOAD
#undef MLOAD
#undef MLOADT
#define SLOAD(a, S) VCVTPH2PS.Z a, K1, S
#define MLOAD(a, D) VCVTPH2PS a, D
#define MLOADT(a, D) VCVTPH2PS.Z a, K2, D

// The kernels for f16 scales and biases.
TEXT ·qMatVecB4H(SB), NOSPLIT, $0-112
	K4(ROW4, PREFETCHT1, PFNO)

TEXT ·qMatVecB4HT0(SB), NOSPLIT, $0-112
	K4(ROW4, PREFETCHT0, PFCUR)

TEXT ·qMatVecB4SH(SB), NOSPLIT, $0-112
	K4S(ROW4S, PREFETCHT1, PFNO)

TEXT ·qMatVecB4SHT0(SB), NOSPLIT, $0-112
	K4S(ROW4S, PREFETCHT0, PFCUR)

TEXT ·qMatVecB4HT0P(SB), NOSPLIT, $0-112
	K4(ROW4P, PREFETCHT0, PFCUR)

TEXT ·qMatVecB4SHT0P(SB), NOSPLIT, $0-112
	K4S(ROW4SP, PREFETCHT0, PFCUR)

TEXT ·qMatVecB8H(SB), NOSPLIT, $0-112
	K8(PREFETCHT1, PFNO)

TEXT ·qMatVecB8HT0(SB), NOSPLIT, $0-112
	K8(PREFETCHT0, PFCUR)


#undef SLOAD
#undef MLOAD
#undef MLOADT
#undef MSTEP
#undef RSTRIDE

// The scales and biases of Q4_K (metaK, blocked.go): per stripe two f16
// factors (one per superblock of eight groups), then a byte per group, 20
// bytes a stripe of sixteen groups (12 a last one of eight). KD loads a
// stripe's factors into Z7 as floats, the first in lanes 0–7 and the second
// in lanes 8–15 (K3); the scale or bias is factor·byte, exact in float32.
#define KD(a) \
	VPBROADCASTW a, Y7; \
	VPBROADCASTW 2 a, K3, Y7; \
	VCVTPH2PS    Y7, Z7

#define SLOAD(a, S) \
	VPMOVZXBD.Z 4 a, K1, S; \
	VCVTDQ2PS   S, S; \
	KD(a); \
	VMULPS      Z7, S, S

#define MLOAD(a, D) \
	VPMOVZXBD 4 a, D; \
	VCVTDQ2PS D, D; \
	KD(a); \
	VMULPS    Z7, D, D

#define MLOADT(a, D) \
	VPMOVZXBD.Z 4 a, K2, D; \
	VCVTDQ2PS   D, D; \
	KD(a); \
	VMULPS      Z7, D, D

#define MSTEP 20
#define RSTRIDE \
	MOVQ R11, DX; \
	ADDQ $15, DX; \
	SHRQ $4, DX; \
	LEAQ (R11)(DX*4), R11

// K4K and K4SK are K4 and K4S with K3 set for KD.
#define K4K(ROW, PFA, PFC) \
	MOVL  $0xff00, DX; \
	KMOVW DX, K3; \
	K4(ROW, PFA, PFC)

#define K4SK(ROW, PFA, PFC) \
	MOVL  $0xff00, DX; \
	KMOVW DX, K3; \
	K4S(ROW, PFA, PFC)

// The 4-bit kernels for Q4_K's integer scales and f16 factors.
TEXT ·qMatVecB4K(SB), NOSPLIT, $0-112
	K4K(ROW4, PREFETCHT1, PFNO)

TEXT ·qMatVecB4KT0(SB), NOSPLIT, $0-112
	K4K(ROW4, PREFETCHT0, PFCUR)

TEXT ·qMatVecB4SK(SB), NOSPLIT, $0-112
	K4SK(ROW4S, PREFETCHT1, PFNO)

TEXT ·qMatVecB4SKT0(SB), NOSPLIT, $0-112
	K4SK(ROW4S, PREFETCHT0, PFCUR)

TEXT ·qMatVecB4KT0P(SB), NOSPLIT, $0-112
	K4K(ROW4P, PREFETCHT0, PFCUR)

TEXT ·qMatVecB4SKT0P(SB), NOSPLIT, $0-112
	K4SK(ROW4SP, PREFETCHT0, PFCUR)

#undef SLOAD
#undef MLOAD
#undef MLOADT
#undef MSTEP
#undef RSTRIDE
#undef CHUNKB
#undef LASTSTRIPE
#undef FINB

// The q6_k kernels (metaQ6, kquant_q6.go): a row's chunk is 64 bytes of low
// nibbles and 32 of their top two bits; every stripe is whole (a superblock),
// and a row's scales are per stripe an f16 d and sixteen int8 sc, 18 bytes,
// with no biases (cr has them: see actB). ROW6 is ROW4 with each nibble's
// top bits put above it: Z7 gets the 32 bytes in both halves, and GF(2)
// affine maps per qword (q6m1, q6m2: bits 0-1 or 2-3, and 4-5 or 6-7, of the
// halves' bytes to bits 4-5) give the low and the high nibbles' (Z7, Z31).
DATA q6m1<>+0(SB)/8, $0x0000000001020000
DATA q6m1<>+8(SB)/8, $0x0000000001020000
DATA q6m1<>+16(SB)/8, $0x0000000001020000
DATA q6m1<>+24(SB)/8, $0x0000000001020000
DATA q6m1<>+32(SB)/8, $0x0000000004080000
DATA q6m1<>+40(SB)/8, $0x0000000004080000
DATA q6m1<>+48(SB)/8, $0x0000000004080000
DATA q6m1<>+56(SB)/8, $0x0000000004080000
GLOBL q6m1<>(SB), RODATA|NOPTR, $64
DATA q6m2<>+0(SB)/8, $0x0000000010200000
DATA q6m2<>+8(SB)/8, $0x0000000010200000
DATA q6m2<>+16(SB)/8, $0x0000000010200000
DATA q6m2<>+24(SB)/8, $0x0000000010200000
DATA q6m2<>+32(SB)/8, $0x0000000040800000
DATA q6m2<>+40(SB)/8, $0x0000000040800000
DATA q6m2<>+48(SB)/8, $0x0000000040800000
DATA q6m2<>+56(SB)/8, $0x0000000040800000
GLOBL q6m2<>(SB), RODATA|NOPTR, $64

#define ROW6(caddr, C, H, AH, AM, AL) \
	VBROADCASTI64X4 64 caddr, Z7; \
	VGF2P8AFFINEQB  $0, q6m2<>(SB), Z7, Z31; \
	VGF2P8AFFINEQB  $0, q6m1<>(SB), Z7, Z7; \
	VMOVDQU32       caddr, C; \
	VGF2P8AFFINEQB  $0, Z24, C, H; \
	VPTERNLOGD      $0xea, Z7, Z6, C; \
	VPORD           Z31, H, H; \
	DOT4(C, H, AH, AM, AL)

#define SLOAD(a, S) \
	VPMOVSXBD    2 a, S; \
	VCVTDQ2PS    S, S; \
	VPBROADCASTW a, Y7; \
	VCVTPH2PS    Y7, Z7; \
	VMULPS       Z7, S, S

#define MLOAD(a, D) SLOAD(a, D)
#define MSTEP 18
#define RSTRIDE \
	SHRQ  $4, R11; \
	IMULQ $18, R11
#define CHUNKB 96
#define LASTSTRIPE(L) L:

// FINB for q6_k: F·dx, then F += Σ_g scale_g·cr_g, sixteen groups a step;
// R10 (the block's end: no biases) stays.
#define FINB(F, LOOP, TAIL, DONE) \
	MOVQ        dq+80(FP), AX; \
	VMULPS.BCST (AX), F, F; \
	MOVQ        cr+96(FP), BX; \
	MOVQ        R9, R13; \
	MOVQ        G+32(FP), R12; \
	SHRQ        $4, R12; \
LOOP: \
	MLOAD((R13), Z12); \
	VFMADD231PS (BX), Z12, F; \
	ADDQ        $64, BX; \
	ADDQ        $MSTEP, R13; \
	DECQ        R12; \
	JNZ         LOOP; \
TAIL: \
DONE: \
	ADDQ        R11, R9

// A four-row block's chunks are 384 bytes: PF6 and PF6CUR prefetch the two
// lines past PFA's four.
#define PF6 \
	PREFETCHT1 256(AX)(R14*1); \
	PREFETCHT1 320(AX)(R14*1)
#define PF6CUR \
	PFCUR; \
	PREFETCHT0 256(AX); \
	PREFETCHT0 320(AX); \
	PREFETCHT0 256(AX)(R14*1); \
	PREFETCHT0 320(AX)(R14*1)

#define K6(PFA, PFC) \
	VPBROADCASTD b0f<>(SB), Z6; \
	VPBROADCASTQ bhi4<>(SB), Z24; \
	BODY(ROW6, LOADX4, 384, PFA, PFC)

// qMatVecB6 and qMatVecB6T0: the q6_k kernels (GFNI), prefetching into L2
// and L1.
TEXT ·qMatVecB6(SB), NOSPLIT, $0-112
	K6(PREFETCHT1, PF6)

TEXT ·qMatVecB6T0(SB), NOSPLIT, $0-112
	K6(PREFETCHT0, PF6CUR)
