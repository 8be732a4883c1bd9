//go:build amd64 && !noasm

#include "textflag.h"

// Prefill panel dequantization (AVX-512): elements of 16 rows of 4/8-bit codes
// into element-major order, p[k·32 + r], exactly as DequantRow computes them,
// float32(scale·float32(code)) + bias (a multiply then an add, not an FMA).
// Word j of the 16 rows (one gather) holds codes 8j..8j+7 (4-bit) or
// 4j..4j+3 (8-bit) of each row; shifting and masking it gives, per code, the
// 16 rows' codes along a vector, which after the multiply-add is the 64 bytes
// p[k·32 + r] for those 16 rows. A group's 16 scales and biases are gathered
// once.
//
// Registers: DI p, SI codes of word j (row 0), R8 groups left, R9/R10 scales/
// biases of the group (row 0), R11 words per group, R12 words left in the group,
// Z0 row byte offsets of the codes, Z1 of the scales/biases, Z2 scales, Z3
// biases, Z4 the gathered words, Z5 mask, Z6/Z7 scratch.

DATA p0f<>+0(SB)/4, $0x0000000f
GLOBL p0f<>(SB), RODATA|NOPTR, $4
DATA pff<>+0(SB)/4, $0x000000ff
GLOBL pff<>(SB), RODATA|NOPTR, $4

// PCODE writes code field SHIFT of Z4's 16 words as elements at DI, steps DI.
#define PCODE(SHIFT) \
	VPSRLD      $SHIFT, Z4, Z6; \
	VPANDD      Z5, Z6, Z6; \
	VCVTDQ2PS   Z6, Z6; \
	VMULPS      Z2, Z6, Z6; \
	VADDPS      Z3, Z6, Z6; \
	VMOVUPS     Z6, (DI); \
	ADDQ        $128, DI

// PSETUP loads the arguments and the offsets; PGROUP opens a group's loop.
#define PSETUP \
	MOVQ      p+0(FP), DI; \
	MOVQ      w+8(FP), SI; \
	MOVQ      s+16(FP), R9; \
	MOVQ      b+24(FP), R10; \
	MOVQ      groups+32(FP), R8; \
	MOVQ      wpg+40(FP), R11; \
	MOVQ      woff+48(FP), AX; \
	VMOVDQU32 (AX), Z0; \
	MOVQ      soff+56(FP), AX; \
	VMOVDQU32 (AX), Z1

#define PGROUP \
	KXNORW      K1, K1, K1; \
	VGATHERDPS  (R9)(Z1*1), K1, Z2; \
	KXNORW      K1, K1, K1; \
	VGATHERDPS  (R10)(Z1*1), K1, Z3; \
	ADDQ        $4, R9; \
	ADDQ        $4, R10; \
	MOVQ        R11, R12

#define PWORD \
	KXNORW      K1, K1, K1; \
	VPGATHERDD  (SI)(Z0*1), K1, Z4; \
	ADDQ        $4, SI

// dequantPanel4(p *float32, w *uint32, s, b *float32, groups, wpg int,
//     woff, soff *int32)
//
// groups groups of wpg words (8·wpg codes) of 16 rows: w and s/b point at row
// 0's first word and scale/bias, woff and soff hold the 16 rows' byte offsets
// from them. p receives 32-float lines, 16 used.
TEXT ·dequantPanel4(SB), NOSPLIT, $0-64
	PSETUP
	VPBROADCASTD p0f<>(SB), Z5
group4:
	PGROUP
word4:
	PWORD
	PCODE(0)
	PCODE(4)
	PCODE(8)
	PCODE(12)
	PCODE(16)
	PCODE(20)
	PCODE(24)
	PCODE(28)
	DECQ R12
	JNZ  word4
	DECQ R8
	JNZ  group4
	VZEROUPPER
	RET

// dequantPanel8: as dequantPanel4 for 8-bit codes (4·wpg per group).
TEXT ·dequantPanel8(SB), NOSPLIT, $0-64
	PSETUP
	VPBROADCASTD pff<>(SB), Z5
group8:
	PGROUP
word8:
	PWORD
	PCODE(0)
	PCODE(8)
	PCODE(16)
	PCODE(24)
	DECQ R12
	JNZ  word8
	DECQ R8
	JNZ  group8
	VZEROUPPER
	RET
