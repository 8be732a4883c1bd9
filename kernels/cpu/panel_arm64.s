//go:build arm64 && !noasm

#include "textflag.h"

// Prefill panel dequantization (NEON): elements of the 32 rows of a panel of
// 4/8-bit codes into element-major order, p[k·32 + r], exactly as DequantRow
// computes them, float32(scale·float32(code)) + bias (FMUL then FADD, not an
// FMLA). Word j of the 32 rows (32 lane loads into eight vectors, row 4v+i in
// lane i of vector v) holds codes 8j..8j+7 (4-bit) or 4j..4j+3 (8-bit) of each
// row; shifting a code field to the top and back down gives, per code, the 32
// rows' codes along eight vectors, which after the multiply and add are the 128
// bytes p[k·32 .. k·32+31], stored with two four-register stores. A group's 32
// scales and biases are gathered once. Per code and 32 rows: 8 × (SHL, USHR,
// UCVTF, FMUL, FADD) and 2 stores, plus 32 lane loads per word.
//
// Registers: R0 p (post-incremented), R1 codes of word j (row 0), R2 wstride,
// R3/R4 scales/biases of the group (row 0), R5 sstride, R6 groups left, R7
// words per group, R8 words left in the group, R9/R11-R13 the gathers'
// pointers, R14/R15 4·wstride/4·sstride. V0-V7
// scales, V8-V15 biases, V16-V23 the words, V24-V31 the elements.

// UCVTF Vd.4S, Vn.4S
#define UCVTF4(n, d) WORD $(0x6e21d800 | (n)<<5 | (d))
// FMUL Vd.4S, Vn.4S, Vm.4S
#define FMUL4(m, n, d) WORD $(0x6e20dc00 | (m)<<16 | (n)<<5 | (d))
// FADD Vd.4S, Vn.4S, Vm.4S
#define FADD4(m, n, d) WORD $(0x4e20d400 | (m)<<16 | (n)<<5 | (d))

// GATHER loads the 32-bit values at BASE + r·RS, r = 0..31, into the lanes of
// eight vectors (value 4v+i in lane i of the v-th), through four pointers
// (R9, R11-R13: rows i mod 4) stepping by RS4 = 4·RS, so no chain of
// post-increments runs through all 32 loads.
#define GATHER4(V, RS4) \
	VLD1.P (R9)(RS4), V.S[0]; \
	VLD1.P (R11)(RS4), V.S[1]; \
	VLD1.P (R12)(RS4), V.S[2]; \
	VLD1.P (R13)(RS4), V.S[3]

#define GATHER(BASE, RS, RS4, V0, V1, V2, V3, V4, V5, V6, V7) \
	MOVD BASE, R9; \
	ADD  RS, R9, R11; \
	ADD  RS, R11, R12; \
	ADD  RS, R12, R13; \
	GATHER4(V0, RS4); \
	GATHER4(V1, RS4); \
	GATHER4(V2, RS4); \
	GATHER4(V3, RS4); \
	GATHER4(V4, RS4); \
	GATHER4(V5, RS4); \
	GATHER4(V6, RS4); \
	GATHER4(V7, RS4)

// ELEM makes one vector of elements in V<o> from word vector W: the code field
// shifted up by UP bits to the top, then down by DOWN, times scales V<s> plus
// biases V<b>.
#define ELEM(UP, DOWN, W, O, o, s, b) \
	VSHL  $UP, W.S4, O.S4; \
	VUSHR $DOWN, O.S4, O.S4; \
	UCVTF4(o, o); \
	FMUL4(s, o, o); \
	FADD4(b, o, o)

// CODE writes the 32 rows' elements of the code field shifted up by UP bits.
#define CODE(UP, DOWN) \
	ELEM(UP, DOWN, V16, V24, 24, 0, 8); \
	ELEM(UP, DOWN, V17, V25, 25, 1, 9); \
	ELEM(UP, DOWN, V18, V26, 26, 2, 10); \
	ELEM(UP, DOWN, V19, V27, 27, 3, 11); \
	ELEM(UP, DOWN, V20, V28, 28, 4, 12); \
	ELEM(UP, DOWN, V21, V29, 29, 5, 13); \
	ELEM(UP, DOWN, V22, V30, 30, 6, 14); \
	ELEM(UP, DOWN, V23, V31, 31, 7, 15); \
	VST1.P [V24.S4, V25.S4, V26.S4, V27.S4], 64(R0); \
	VST1.P [V28.S4, V29.S4, V30.S4, V31.S4], 64(R0)

// PBODY is a whole kernel; CODES writes a word's codes.
#define PBODY(CODES) \
	MOVD   p+0(FP), R0; \
	MOVD   w+8(FP), R1; \
	MOVD   wstride+16(FP), R2; \
	MOVD   s+24(FP), R3; \
	MOVD   b+32(FP), R4; \
	MOVD   sstride+40(FP), R5; \
	MOVD   groups+48(FP), R6; \
	MOVD   wpg+56(FP), R7; \
	LSL    $2, R2, R14; \
	LSL    $2, R5, R15; \
group: \
	GATHER(R3, R5, R15, V0, V1, V2, V3, V4, V5, V6, V7); \
	GATHER(R4, R5, R15, V8, V9, V10, V11, V12, V13, V14, V15); \
	ADD    $4, R3; \
	ADD    $4, R4; \
	MOVD   R7, R8; \
word: \
	GATHER(R1, R2, R14, V16, V17, V18, V19, V20, V21, V22, V23); \
	ADD    $4, R1; \
	CODES; \
	SUBS   $1, R8, R8; \
	BNE    word; \
	SUBS   $1, R6, R6; \
	BNE    group; \
	RET

#define CODES4 \
	CODE(28, 28); \
	CODE(24, 28); \
	CODE(20, 28); \
	CODE(16, 28); \
	CODE(12, 28); \
	CODE(8, 28); \
	CODE(4, 28); \
	CODE(0, 28)

#define CODES8 \
	CODE(24, 24); \
	CODE(16, 24); \
	CODE(8, 24); \
	CODE(0, 24)

// dequantPanel4NEON(p *float32, w *uint32, wstride int, s, b *float32, sstride, groups, wpg int)
//
// Writes groups whole groups of wpg words (8 codes each) of the 32 rows at w
// (wstride bytes apart; scales and biases at s and b, sstride bytes apart)
// into p, element-major. groups ≥ 1, wpg ≥ 1.
TEXT ·dequantPanel4NEON(SB), NOSPLIT, $0-64
	PBODY(CODES4)

// dequantPanel8NEON is dequantPanel4NEON for 8-bit codes (4 per word).
TEXT ·dequantPanel8NEON(SB), NOSPLIT, $0-64
	PBODY(CODES8)
