//go:build arm64 && !noasm

#include "textflag.h"

// NEON dot products of GGUF blocks (see kquant_arm64.go). Every weight is
// formed as the reference does, in float32 with one rounding per operation:
// q8_0 d·q, q4_0 d·(q − 8), q4_k a·q then − c (FMUL, FSUB), q6_k a·(q − 32); each product with x is rounded (FMUL, no fused
// multiply-add) and added (FADD) into 8 accumulators of 4 lanes (V16-V23),
// summed at the end. Go's assembler lacks the float vector arithmetic and
// the sign-extending widenings: they are WORDs, each with the instruction it
// encodes (checked with llvm-mc).

// FADD Vd.4S, Vn.4S, Vm.4S
#define FADD4(m, n, d) WORD $(0x4e20d400 | (m)<<16 | (n)<<5 | (d))
// FSUB Vd.4S, Vn.4S, Vm.4S: d = n − m
#define FSUB4(m, n, d) WORD $(0x4ea0d400 | (m)<<16 | (n)<<5 | (d))
// FMUL Vd.4S, Vn.4S, Vm.4S
#define FMUL4(m, n, d) WORD $(0x6e20dc00 | (m)<<16 | (n)<<5 | (d))
// FMUL Vd.4S, Vn.4S, Vm.S[i]
#define FMULE(m, i, n, d) WORD $(0x4f809000 | ((i)&1)<<21 | (m)<<16 | ((i)>>1)<<11 | (n)<<5 | (d))
// FADDP Vd.4S, Vn.4S, Vm.4S: d = (n0+n1, n2+n3, m0+m1, m2+m3)
#define FADDP4(m, n, d) WORD $(0x6e20d400 | (m)<<16 | (n)<<5 | (d))
// SCVTF Vd.4S, Vn.4S
#define SCVTF4(n, d) WORD $(0x4e21d800 | (n)<<5 | (d))
// UCVTF Vd.4S, Vn.4S
#define UCVTF4(n, d) WORD $(0x6e21d800 | (n)<<5 | (d))
// SXTL Vd.8H, Vn.8B and SXTL2 Vd.8H, Vn.16B (SSHLL #0)
#define SXTLB(n, d) WORD $(0x0f08a400 | (n)<<5 | (d))
#define SXTL2B(n, d) WORD $(0x4f08a400 | (n)<<5 | (d))
// SXTL Vd.4S, Vn.4H and SXTL2 Vd.4S, Vn.8H
#define SXTLH(n, d) WORD $(0x0f10a400 | (n)<<5 | (d))
#define SXTL2H(n, d) WORD $(0x4f10a400 | (n)<<5 | (d))
// UXTL, UXTL2 likewise, zero-extending (USHLL #0)
#define UXTLB(n, d) WORD $(0x2f08a400 | (n)<<5 | (d))
#define UXTL2B(n, d) WORD $(0x6f08a400 | (n)<<5 | (d))
#define UXTLH(n, d) WORD $(0x2f10a400 | (n)<<5 | (d))
#define UXTL2H(n, d) WORD $(0x6f10a400 | (n)<<5 | (d))

#define ZACC \
	VEOR V16.B16, V16.B16, V16.B16; \
	VEOR V17.B16, V17.B16, V17.B16; \
	VEOR V18.B16, V18.B16, V18.B16; \
	VEOR V19.B16, V19.B16, V19.B16; \
	VEOR V20.B16, V20.B16, V20.B16; \
	VEOR V21.B16, V21.B16, V21.B16; \
	VEOR V22.B16, V22.B16, V22.B16; \
	VEOR V23.B16, V23.B16, V23.B16

// HSUM folds the accumulators V16-V23 into lane 0 of V16.
#define HSUM \
	FADD4(17, 16, 16); \
	FADD4(19, 18, 18); \
	FADD4(21, 20, 20); \
	FADD4(23, 22, 22); \
	FADD4(18, 16, 16); \
	FADD4(22, 20, 20); \
	FADD4(20, 16, 16); \
	FADDP4(16, 16, 16); \
	FADDP4(16, 16, 16)

// WIDEN16 sign-extends the 16 bytes of Va into the words Vw..Vw+3, as floats
// (exact), through halves Vh, Vh+1.
#define WIDEN16(a, h, w0, w1, w2, w3) \
	SXTLB(a, h); \
	SXTL2B(a, h+1); \
	SXTLH(h, w0); \
	SXTL2H(h, w1); \
	SXTLH(h+1, w2); \
	SXTL2H(h+1, w3); \
	SCVTF4(w0, w0); \
	SCVTF4(w1, w1); \
	SCVTF4(w2, w2); \
	SCVTF4(w3, w3)

// UWIDEN16 is WIDEN16 zero-extending.
#define UWIDEN16(a, h, w0, w1, w2, w3) \
	UXTLB(a, h); \
	UXTL2B(a, h+1); \
	UXTLH(h, w0); \
	UXTL2H(h, w1); \
	UXTLH(h+1, w2); \
	UXTL2H(h+1, w3); \
	UCVTF4(w0, w0); \
	UCVTF4(w1, w1); \
	UCVTF4(w2, w2); \
	UCVTF4(w3, w3)

// SCALE8 multiplies the floats V24-V31 by lane i of Vm.
#define SCALE8(m, i) \
	FMULE(m, i, 24, 24); \
	FMULE(m, i, 25, 25); \
	FMULE(m, i, 26, 26); \
	FMULE(m, i, 27, 27); \
	FMULE(m, i, 28, 28); \
	FMULE(m, i, 29, 29); \
	FMULE(m, i, 30, 30); \
	FMULE(m, i, 31, 31)

// D32 loads a block's f16 d from R0 (stepping past it) into lane 0 of V8.
#define D32 \
	MOVHU.P 2(R0), R3; \
	FMOVS   R3, F8; \
	FCVTHS  F8, F8

// XDOT32 multiplies the weights V24-V31 by the 32 values of x at R1
// (stepping past them) and adds them into V16-V23; it clobbers V0-V7.
#define XDOT32 \
	VLD1.P 64(R1), [V0.S4, V1.S4, V2.S4, V3.S4]; \
	VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]; \
	FMUL4(0, 24, 24); \
	FMUL4(1, 25, 25); \
	FMUL4(2, 26, 26); \
	FMUL4(3, 27, 27); \
	FMUL4(4, 28, 28); \
	FMUL4(5, 29, 29); \
	FMUL4(6, 30, 30); \
	FMUL4(7, 31, 31); \
	FADD4(24, 16, 16); \
	FADD4(25, 17, 17); \
	FADD4(26, 18, 18); \
	FADD4(27, 19, 19); \
	FADD4(28, 20, 20); \
	FADD4(29, 21, 21); \
	FADD4(30, 22, 22); \
	FADD4(31, 23, 23)

// DOT32 multiplies the codes' floats V24-V31 by d (V8 lane 0), then by x.
#define DOT32 \
	SCALE8(8, 0); \
	XDOT32

// func dotQ8_0NEON(b *byte, x *float32, nb int) float32
// b: nb ≥ 1 q8_0 blocks (f16 d, then 32 int8 codes); x: 32·nb values.
TEXT ·dotQ8_0NEON(SB), NOSPLIT, $0-28
	MOVD b+0(FP), R0
	MOVD x+8(FP), R1
	MOVD nb+16(FP), R2
	ZACC
q80loop:
	D32
	VLD1.P 32(R0), [V0.B16, V1.B16]
	WIDEN16(0, 2, 24, 25, 26, 27)
	WIDEN16(1, 4, 28, 29, 30, 31)
	DOT32
	SUBS $1, R2, R2
	BNE  q80loop
	HSUM
	FMOVS F16, ret+24(FP)
	RET

// func dotQ4_0NEON(b *byte, x *float32, nb int) float32
// b: nb ≥ 1 q4_0 blocks (f16 d, then 16 bytes: value j < 16 the low nibble
// of byte j, 16 + j the high); x: 32·nb values. w = d·(q − 8): q − 8 formed
// in bytes, then widened.
TEXT ·dotQ4_0NEON(SB), NOSPLIT, $0-28
	MOVD b+0(FP), R0
	MOVD x+8(FP), R1
	MOVD nb+16(FP), R2
	VMOVI $15, V14.B16
	VMOVI $8, V15.B16
	ZACC
q40loop:
	D32
	VLD1.P 16(R0), [V0.B16]
	VAND  V14.B16, V0.B16, V1.B16
	VUSHR $4, V0.B16, V0.B16
	VSUB  V15.B16, V1.B16, V1.B16
	VSUB  V15.B16, V0.B16, V0.B16
	WIDEN16(1, 2, 24, 25, 26, 27)
	WIDEN16(0, 4, 28, 29, 30, 31)
	DOT32
	SUBS $1, R2, R2
	BNE  q40loop
	HSUM
	FMOVS F16, ret+24(FP)
	RET

// SUBC8 subtracts Vc from the weights V24-V31.
#define SUBC8(c) \
	FSUB4(c, 24, 24); \
	FSUB4(c, 25, 25); \
	FSUB4(c, 26, 26); \
	FSUB4(c, 27, 27); \
	FSUB4(c, 28, 28); \
	FSUB4(c, 29, 29); \
	FSUB4(c, 30, 30); \
	FSUB4(c, 31, 31)

// func dotQ4KNEON(qs *byte, ac *[16]float32, x *float32) float32
// qs: the 128 code bytes of a q4_k block; ac: for each 64 values k, a and c
// of sub-block 2k (the low nibbles of qs[32k:32k+32], x[64k:64k+32]), then
// of 2k + 1 (the high nibbles, x[64k+32:64k+64]); x: 256 values.
TEXT ·dotQ4KNEON(SB), NOSPLIT, $0-28
	MOVD qs+0(FP), R0
	MOVD ac+8(FP), R2
	MOVD x+16(FP), R1
	VMOVI $15, V14.B16
	ZACC
	MOVD $4, R4
q4kloop:
	VLD1.P 16(R2), [V9.S4]
	VDUP   V9.S[1], V12.S4
	VDUP   V9.S[3], V13.S4
	VLD1.P 32(R0), [V0.B16, V1.B16]
	VAND   V14.B16, V0.B16, V2.B16
	VAND   V14.B16, V1.B16, V3.B16
	VUSHR  $4, V0.B16, V10.B16
	VUSHR  $4, V1.B16, V11.B16
	UWIDEN16(2, 4, 24, 25, 26, 27)
	UWIDEN16(3, 6, 28, 29, 30, 31)
	SCALE8(9, 0)
	SUBC8(12)
	XDOT32
	UWIDEN16(10, 4, 24, 25, 26, 27)
	UWIDEN16(11, 6, 28, 29, 30, 31)
	SCALE8(9, 2)
	SUBC8(13)
	XDOT32
	SUBS $1, R4, R4
	BNE  q4kloop
	HSUM
	FMOVS F16, ret+24(FP)
	RET

// Q6GROUP forms the 16 weights of codes Vq (q − 32, in bytes) times lane i of
// V9 and adds their products with the 16 values of x at xo(R1) into Va..Va+3.
#define Q6GROUP(q, i, xo, xo2, a0, a1, a2, a3) \
	WIDEN16(q, 0, 24, 25, 26, 27); \
	FMULE(9, i, 24, 24); \
	FMULE(9, i, 25, 25); \
	FMULE(9, i, 26, 26); \
	FMULE(9, i, 27, 27); \
	FLDPQ xo(R1), (F28, F29); \
	FLDPQ xo2(R1), (F30, F31); \
	FMUL4(28, 24, 24); \
	FMUL4(29, 25, 25); \
	FMUL4(30, 26, 26); \
	FMUL4(31, 27, 27); \
	FADD4(24, a0, a0); \
	FADD4(25, a1, a1); \
	FADD4(26, a2, a2); \
	FADD4(27, a3, a3)

// Q6STEP runs the 64 values 128n + 16h + 32j + l (l < 16, j < 4) of a q6_k
// block: low 4 bits in ql[64n + 16h + 32(j%2) + l] (nibble j/2) at ql0 and
// ql1 = ql0 + 32, high 2 in qh[32n + 16h + l] (bits 2j) at qh; their scales
// the four floats at s(R2); x at xo (bytes), group j at xo + 128j.
#define Q6STEP(ql0, ql1, qh, s, x0, x1, x2, x3, x4, x5, x6, x7) \
	FMOVQ ql0(R0), F0; \
	FMOVQ ql1(R0), F1; \
	FMOVQ qh(R0), F2; \
	FMOVQ s(R2), F9; \
	VAND  V14.B16, V0.B16, V3.B16; \
	VAND  V13.B16, V2.B16, V4.B16; \
	VSHL  $4, V4.B16, V4.B16; \
	VORR  V4.B16, V3.B16, V3.B16; \
	VAND  V14.B16, V1.B16, V4.B16; \
	VSHL  $2, V2.B16, V5.B16; \
	VAND  V12.B16, V5.B16, V5.B16; \
	VORR  V5.B16, V4.B16, V4.B16; \
	VUSHR $4, V0.B16, V5.B16; \
	VAND  V12.B16, V2.B16, V6.B16; \
	VORR  V6.B16, V5.B16, V5.B16; \
	VUSHR $4, V1.B16, V6.B16; \
	VUSHR $2, V2.B16, V7.B16; \
	VAND  V12.B16, V7.B16, V7.B16; \
	VORR  V7.B16, V6.B16, V6.B16; \
	VSUB  V15.B16, V3.B16, V3.B16; \
	VSUB  V15.B16, V4.B16, V4.B16; \
	VSUB  V15.B16, V5.B16, V5.B16; \
	VSUB  V15.B16, V6.B16, V6.B16; \
	Q6GROUP(3, 0, x0, x1, 16, 17, 18, 19); \
	Q6GROUP(4, 1, x2, x3, 20, 21, 22, 23); \
	Q6GROUP(5, 2, x4, x5, 16, 17, 18, 19); \
	Q6GROUP(6, 3, x6, x7, 20, 21, 22, 23)

// func dotQ6KNEON(b *byte, a *[16]float32, x *float32) float32
// b: a q6_k block (ql at 0, qh at 128); a: d·sc of its 16 groups in the
// order of the four steps (n, h): groups 8n + h + 2j, j < 4 (see
// q6kScalesNEON); x: 256 values. w = a·(q − 32): q − 32 formed in bytes.
TEXT ·dotQ6KNEON(SB), NOSPLIT, $0-28
	MOVD b+0(FP), R0
	MOVD a+8(FP), R2
	MOVD x+16(FP), R1
	VMOVI $15, V14.B16
	VMOVI $3, V13.B16
	VMOVI $48, V12.B16
	VMOVI $32, V15.B16
	ZACC
	Q6STEP(0, 32, 128, 0, 0, 32, 128, 160, 256, 288, 384, 416)
	Q6STEP(16, 48, 144, 16, 64, 96, 192, 224, 320, 352, 448, 480)
	Q6STEP(64, 96, 160, 32, 512, 544, 640, 672, 768, 800, 896, 928)
	Q6STEP(80, 112, 176, 48, 576, 608, 704, 736, 832, 864, 960, 992)
	HSUM
	FMOVS F16, ret+24(FP)
	RET

// The dequantizers: the weights the dot kernels form, stored to dst (R1)
// instead of multiplied by x.

// ST32 stores the weights V24-V31 at R1, stepping past them.
#define ST32 \
	VST1.P [V24.S4, V25.S4, V26.S4, V27.S4], 64(R1); \
	VST1.P [V28.S4, V29.S4, V30.S4, V31.S4], 64(R1)

// func deqQ8_0NEON(b *byte, dst *float32, nb int)
// The weights of nb ≥ 1 q8_0 blocks into dst, as dotQ8_0NEON forms them.
TEXT ·deqQ8_0NEON(SB), NOSPLIT, $0-24
	MOVD b+0(FP), R0
	MOVD dst+8(FP), R1
	MOVD nb+16(FP), R2
dq80loop:
	D32
	VLD1.P 32(R0), [V0.B16, V1.B16]
	WIDEN16(0, 2, 24, 25, 26, 27)
	WIDEN16(1, 4, 28, 29, 30, 31)
	SCALE8(8, 0)
	ST32
	SUBS $1, R2, R2
	BNE  dq80loop
	RET

// func deqQ4_0NEON(b *byte, dst *float32, nb int)
// The weights of nb ≥ 1 q4_0 blocks into dst, as dotQ4_0NEON forms them.
TEXT ·deqQ4_0NEON(SB), NOSPLIT, $0-24
	MOVD b+0(FP), R0
	MOVD dst+8(FP), R1
	MOVD nb+16(FP), R2
	VMOVI $15, V14.B16
	VMOVI $8, V15.B16
dq40loop:
	D32
	VLD1.P 16(R0), [V0.B16]
	VAND  V14.B16, V0.B16, V1.B16
	VUSHR $4, V0.B16, V0.B16
	VSUB  V15.B16, V1.B16, V1.B16
	VSUB  V15.B16, V0.B16, V0.B16
	WIDEN16(1, 2, 24, 25, 26, 27)
	WIDEN16(0, 4, 28, 29, 30, 31)
	SCALE8(8, 0)
	ST32
	SUBS $1, R2, R2
	BNE  dq40loop
	RET

// func deqQ4KNEON(qs *byte, ac *[16]float32, dst *float32)
// The 256 weights of a q4_k block into dst, as dotQ4KNEON forms them.
TEXT ·deqQ4KNEON(SB), NOSPLIT, $0-24
	MOVD qs+0(FP), R0
	MOVD ac+8(FP), R2
	MOVD dst+16(FP), R1
	VMOVI $15, V14.B16
	MOVD $4, R4
dq4kloop:
	VLD1.P 16(R2), [V9.S4]
	VDUP   V9.S[1], V12.S4
	VDUP   V9.S[3], V13.S4
	VLD1.P 32(R0), [V0.B16, V1.B16]
	VAND   V14.B16, V0.B16, V2.B16
	VAND   V14.B16, V1.B16, V3.B16
	VUSHR  $4, V0.B16, V10.B16
	VUSHR  $4, V1.B16, V11.B16
	UWIDEN16(2, 4, 24, 25, 26, 27)
	UWIDEN16(3, 6, 28, 29, 30, 31)
	SCALE8(9, 0)
	SUBC8(12)
	ST32
	UWIDEN16(10, 4, 24, 25, 26, 27)
	UWIDEN16(11, 6, 28, 29, 30, 31)
	SCALE8(9, 2)
	SUBC8(13)
	ST32
	SUBS $1, R4, R4
	BNE  dq4kloop
	RET

// DQ6GROUP stores the 16 weights of codes Vq (q − 32) times lane i of V9 at
// do(R1) and do2(R1) = do + 32.
#define DQ6GROUP(q, i, do, do2) \
	WIDEN16(q, 0, 24, 25, 26, 27); \
	FMULE(9, i, 24, 24); \
	FMULE(9, i, 25, 25); \
	FMULE(9, i, 26, 26); \
	FMULE(9, i, 27, 27); \
	FSTPQ (F24, F25), do(R1); \
	FSTPQ (F26, F27), do2(R1)

// DQ6STEP is Q6STEP storing the weights.
#define DQ6STEP(ql0, ql1, qh, s, x0, x1, x2, x3, x4, x5, x6, x7) \
	FMOVQ ql0(R0), F0; \
	FMOVQ ql1(R0), F1; \
	FMOVQ qh(R0), F2; \
	FMOVQ s(R2), F9; \
	VAND  V14.B16, V0.B16, V3.B16; \
	VAND  V13.B16, V2.B16, V4.B16; \
	VSHL  $4, V4.B16, V4.B16; \
	VORR  V4.B16, V3.B16, V3.B16; \
	VAND  V14.B16, V1.B16, V4.B16; \
	VSHL  $2, V2.B16, V5.B16; \
	VAND  V12.B16, V5.B16, V5.B16; \
	VORR  V5.B16, V4.B16, V4.B16; \
	VUSHR $4, V0.B16, V5.B16; \
	VAND  V12.B16, V2.B16, V6.B16; \
	VORR  V6.B16, V5.B16, V5.B16; \
	VUSHR $4, V1.B16, V6.B16; \
	VUSHR $2, V2.B16, V7.B16; \
	VAND  V12.B16, V7.B16, V7.B16; \
	VORR  V7.B16, V6.B16, V6.B16; \
	VSUB  V15.B16, V3.B16, V3.B16; \
	VSUB  V15.B16, V4.B16, V4.B16; \
	VSUB  V15.B16, V5.B16, V5.B16; \
	VSUB  V15.B16, V6.B16, V6.B16; \
	DQ6GROUP(3, 0, x0, x1); \
	DQ6GROUP(4, 1, x2, x3); \
	DQ6GROUP(5, 2, x4, x5); \
	DQ6GROUP(6, 3, x6, x7)

// func deqQ6KNEON(b *byte, a *[16]float32, dst *float32)
// The 256 weights of a q6_k block into dst, as dotQ6KNEON forms them.
TEXT ·deqQ6KNEON(SB), NOSPLIT, $0-24
	MOVD b+0(FP), R0
	MOVD a+8(FP), R2
	MOVD dst+16(FP), R1
	VMOVI $15, V14.B16
	VMOVI $3, V13.B16
	VMOVI $48, V12.B16
	VMOVI $32, V15.B16
	DQ6STEP(0, 32, 128, 0, 0, 32, 128, 160, 256, 288, 384, 416)
	DQ6STEP(16, 48, 144, 16, 64, 96, 192, 224, 320, 352, 448, 480)
	DQ6STEP(64, 96, 160, 32, 512, 544, 640, 672, 768, 800, 896, 928)
	DQ6STEP(80, 112, 176, 48, 576, 608, 704, 736, 832, 864, 960, 992)
	RET
