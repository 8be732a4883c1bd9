//go:build amd64 && !noasm

#include "textflag.h"

// Gated activations: dst[i] = act(gate[i])·up[i] for act = SiLU or tanh-GELU,
// n a multiple of the vector width. Both are x·σ(z), z = x for SiLU and
// z = x·(a + b·x²) for GELU (a = 2√(2/π), b = 0.044715a). With u = −|z| ≤ 0:
//
//	x ≥ 0: x / (1 + eᵘ)        x < 0: x·eᵘ / (1 + eᵘ)
//
// eᵘ = 2ⁿ·(1 + t) (n = round(u·log₂e), t = expm1(u − n·ln2) by a degree-7
// polynomial good to 2⁻³⁰), and the numerator and the denominator 1 + 2ⁿ + 2ⁿ·t
// are carried as unevaluated f32 pairs (Fast2Sum, FMA-exact products), so the
// only roundings that matter are the quotient's, corrected once with an FMA
// residual, and the final 2ⁿ scaling of the x < 0 branch (denormal results).
// GELU's u is itself computed as a pair, since eᵘ magnifies u's absolute error.
// x is clamped to ±120 (where both functions have reached 0 or x) and ±Inf and
// NaN are fixed up at the end, as the float64 reference gives them:
// act(+Inf) = +Inf, act(−Inf) = NaN, act(NaN) = NaN.

// 8-lane constants: AVX2 reads them whole, AVX-512 broadcasts lane 0.
#define CONST8(name, v) \
	DATA name+0(SB)/4, v; DATA name+4(SB)/4, v; DATA name+8(SB)/4, v; DATA name+12(SB)/4, v; \
	DATA name+16(SB)/4, v; DATA name+20(SB)/4, v; DATA name+24(SB)/4, v; DATA name+28(SB)/4, v; \
	GLOBL name(SB), RODATA|NOPTR, $32

CONST8(·actLo, $0xc2f00000)     // -120
CONST8(·actHi, $0x42f00000)     // 120
CONST8(·actLog2e, $0x3fb8aa3b)  // log₂e
CONST8(·actLn2Hi, $0x3f317200)  // ln2, high bits (n·ln2Hi is exact)
CONST8(·actLn2Lo, $0x35bfbe8e)  // ln2 − ln2Hi
CONST8(·actC7, $0x39507c36)     // expm1(r) ≈ r + r²/2 + r³(c3 + c4r + c5r² + c6r³ + c7r⁴)
CONST8(·actC6, $0x3ab68885)
CONST8(·actC5, $0x3c08887b)
CONST8(·actC4, $0x3d2aaa8d)
CONST8(·actC3, $0x3e2aaaab)
CONST8(·actHalf, $0x3f000000)
CONST8(·actOne, $0x3f800000)
CONST8(·actSign, $0x80000000)
CONST8(·actPInf, $0x7f800000)
CONST8(·actNInf, $0xff800000)
CONST8(·actAh, $0x3fcc422a)     // a = 2√(2/π), high and low f32
CONST8(·actAl, $0xb342bc9b)
CONST8(·actBh, $0x3d922279)     // b = 0.044715a
CONST8(·actBl, $0x3124d8b5)
CONST8(·actFix, $0x00530022)    // VFIXUPIMMPS: NaN → NaN, −Inf → NaN, +Inf → +Inf, else keep
CONST8(·actI127, $127)
CONST8(·actIM126, $-126)

// ---- AVX-512: Z16–Z31 hold constants; Z0 = x, Z2 = clamped x, Z3 = uh, Z4 = ul.

#define CONSTS512 \
	VBROADCASTSS ·actLo(SB), Z16; VBROADCASTSS ·actHi(SB), Z17; \
	VBROADCASTSS ·actLog2e(SB), Z18; VBROADCASTSS ·actLn2Hi(SB), Z19; \
	VBROADCASTSS ·actLn2Lo(SB), Z20; VBROADCASTSS ·actC7(SB), Z21; \
	VBROADCASTSS ·actC6(SB), Z22; VBROADCASTSS ·actC5(SB), Z23; \
	VBROADCASTSS ·actC4(SB), Z24; VBROADCASTSS ·actC3(SB), Z25; \
	VBROADCASTSS ·actHalf(SB), Z26; VBROADCASTSS ·actOne(SB), Z27; \
	VBROADCASTSS ·actFix(SB), Z28; VBROADCASTSS ·actSign(SB), Z29; \
	VBROADCASTSS ·actAh(SB), Z30; VBROADCASTSS ·actBh(SB), Z31

// CLAMP512: Z2 = clamp(Z0, ±120), NaN kept (x is MAXPS/MINPS's second source).
#define CLAMP512 \
	VMAXPS Z0, Z16, Z2; VMINPS Z2, Z17, Z2

// EXP512: from uh (Z3, clamped to ≥ −120 here) n → Z5, r = uh − n·ln2 → Z6.
#define EXP512 \
	VMAXPS       Z3, Z16, Z3;  \
	VMULPS       Z18, Z3, Z5;  \
	VRNDSCALEPS  $0, Z5, Z5;   \
	VMOVAPS      Z3, Z6;       \
	VFNMADD231PS Z19, Z5, Z6;  \
	VFNMADD231PS Z20, Z5, Z6

// SIGMOID512: from n (Z5), r (Z6), clamped x (Z2) and x (Z0), Z13 = act(x).
#define SIGMOID512 \
	VMOVAPS      Z21, Z7;      \ // t = expm1(r)
	VFMADD213PS  Z22, Z6, Z7;  \
	VFMADD213PS  Z23, Z6, Z7;  \
	VFMADD213PS  Z24, Z6, Z7;  \
	VFMADD213PS  Z25, Z6, Z7;  \
	VFMADD213PS  Z26, Z6, Z7;  \
	VMULPS       Z6, Z6, Z8;   \
	VFMADD213PS  Z6, Z8, Z7;   \
	VSCALEFPS    Z5, Z27, Z8;  \ // 2ⁿ
	VSCALEFPS    Z5, Z7, Z9;   \ // 2ⁿ·t
	VADDPS       Z8, Z27, Z10; \ // s = 1 + 2ⁿ, e1 its error
	VSUBPS       Z27, Z10, Z11; \
	VSUBPS       Z11, Z8, Z11; \
	VADDPS       Z9, Z10, Z12; \ // dh = s + 2ⁿt, e2 its error
	VSUBPS       Z10, Z12, Z13; \
	VSUBPS       Z13, Z9, Z13; \
	VADDPS       Z13, Z11, Z11; \ // dl = e1 + e2
	VMULPS       Z7, Z2, Z13;  \ // x < 0: N = x + x·t as Nh + Nl
	VMOVAPS      Z13, Z14;     \
	VFMSUB231PS  Z7, Z2, Z14;  \
	VADDPS       Z13, Z2, Z15; \
	VSUBPS       Z2, Z15, Z9;  \
	VSUBPS       Z9, Z13, Z9;  \
	VADDPS       Z14, Z9, Z9;  \
	VPTESTMD     Z29, Z0, K1;  \ // K1: x < 0 (sign set)
	KNOTW        K1, K2;       \
	VMOVAPS      Z0, K2, Z15;  \ // x ≥ 0: N = x
	VPXORD       Z9, Z9, K2, Z9; \
	VDIVPS       Z12, Z15, Z13; \ // q = Nh/dh, plus (Nh − q·dh + Nl − q·dl)/dh
	VMOVAPS      Z15, Z14;     \
	VFNMADD231PS Z12, Z13, Z14; \
	VADDPS       Z9, Z14, Z14; \
	VFNMADD231PS Z11, Z13, Z14; \
	VRCP14PS     Z12, Z10;     \
	VFMADD231PS  Z10, Z14, Z13; \
	VSCALEFPS    Z5, Z13, K1, Z13; \ // x < 0: ·2ⁿ
	VFIXUPIMMPS  $0, Z28, Z0, Z13

// func gluSiLUAVX512(dst, gate, up *float32, n int)
TEXT ·gluSiLUAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	CONSTS512
	XORQ AX, AX

silu512:
	VMOVUPS (SI)(AX*4), Z0
	CLAMP512
	VPORD   Z29, Z2, Z3        // u = −|x|
	EXP512
	SIGMOID512
	VMULPS  (DX)(AX*4), Z13, Z13
	VMOVUPS Z13, (DI)(AX*4)
	ADDQ    $16, AX
	CMPQ    AX, CX
	JB      silu512
	VZEROUPPER
	RET

// func gluGELUAVX512(dst, gate, up *float32, n int)
TEXT ·gluGELUAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	CONSTS512
	XORQ AX, AX

gelu512:
	VMOVUPS          (SI)(AX*4), Z0
	CLAMP512
	VPANDND          Z2, Z29, Z3 // |x|
	VMULPS           Z2, Z2, Z4  // x² = x2h + x2l
	VMOVAPS          Z4, Z5
	VFMSUB231PS      Z2, Z2, Z5
	VMULPS           Z31, Z4, Z6 // b·x² = ph + pl
	VMOVAPS          Z6, Z7
	VFMSUB231PS      Z31, Z4, Z7
	VFMADD231PS      Z31, Z5, Z7
	VFMADD231PS.BCST ·actBl(SB), Z4, Z7
	VADDPS           Z6, Z30, Z8 // w = a + b·x² = wh + wl (TwoSum)
	VSUBPS           Z30, Z8, Z9
	VSUBPS           Z9, Z8, Z10
	VSUBPS           Z10, Z30, Z10
	VSUBPS           Z9, Z6, Z9
	VADDPS           Z9, Z10, Z10
	VADDPS           Z7, Z10, Z10
	VADDPS.BCST      ·actAl(SB), Z10, Z10
	VMULPS           Z8, Z3, Z11 // |x|·w = uh + ul
	VMOVAPS          Z11, Z4
	VFMSUB231PS      Z8, Z3, Z4
	VFMADD231PS      Z10, Z3, Z4
	VPXORD           Z29, Z11, Z3 // u = −|x|·w
	VPXORD           Z29, Z4, Z4
	EXP512
	VADDPS           Z4, Z6, Z6
	SIGMOID512
	VMULPS           (DX)(AX*4), Z13, Z13
	VMOVUPS          Z13, (DI)(AX*4)
	ADDQ             $16, AX
	CMPQ             AX, CX
	JB               gelu512
	VZEROUPPER
	RET

// ---- AVX2: Y12 = 1, Y13 = sign, Y14 = 120, Y15 = −120; the rest from memory.
// Y0 = x, Y1 = ul, Y2 = clamped x, Y3 = uh. No VSCALEFPS: 2ⁿ is built in the
// exponent field, in two halves for the x < 0 branch's scaling (n ≥ −174).

#define CONSTS256 \
	VMOVUPS ·actOne(SB), Y12; VMOVUPS ·actSign(SB), Y13; \
	VMOVUPS ·actHi(SB), Y14; VMOVUPS ·actLo(SB), Y15

#define CLAMP256 \
	VMAXPS Y0, Y15, Y2; VMINPS Y2, Y14, Y2

#define EXP256 \
	VMAXPS       Y3, Y15, Y3;            \
	VMULPS       ·actLog2e(SB), Y3, Y5; \
	VROUNDPS     $0, Y5, Y5;             \
	VMOVAPS      Y3, Y6;                 \
	VFNMADD231PS ·actLn2Hi(SB), Y5, Y6; \
	VFNMADD231PS ·actLn2Lo(SB), Y5, Y6

// SIGMOID256: from n (Y5), r (Y6), clamped x (Y2) and x (Y0), Y11 = act(x).
#define SIGMOID256 \
	VMOVUPS      ·actC7(SB), Y7;        \
	VFMADD213PS  ·actC6(SB), Y6, Y7;    \
	VFMADD213PS  ·actC5(SB), Y6, Y7;    \
	VFMADD213PS  ·actC4(SB), Y6, Y7;    \
	VFMADD213PS  ·actC3(SB), Y6, Y7;    \
	VFMADD213PS  ·actHalf(SB), Y6, Y7;  \
	VMULPS       Y6, Y6, Y8;             \
	VFMADD213PS  Y6, Y8, Y7;             \ // t
	VCVTPS2DQ    Y5, Y9;                 \ // n
	VPMAXSD      ·actIM126(SB), Y9, Y10; \ // 2^max(n, −126): below, 1 + 2ⁿ(1+t) is 1
	VPADDD       ·actI127(SB), Y10, Y10; \
	VPSLLD       $23, Y10, Y10;          \
	VMULPS       Y10, Y7, Y11;           \ // 2ⁿ·t
	VADDPS       Y10, Y12, Y4;           \ // s = 1 + 2ⁿ, e1
	VSUBPS       Y12, Y4, Y8;            \
	VSUBPS       Y8, Y10, Y8;            \
	VADDPS       Y11, Y4, Y10;           \ // dh = s + 2ⁿt, e2
	VSUBPS       Y4, Y10, Y4;            \
	VSUBPS       Y4, Y11, Y4;            \
	VADDPS       Y4, Y8, Y8;             \ // dl
	VMULPS       Y7, Y2, Y11;            \ // x < 0: N = x + x·t
	VMOVAPS      Y11, Y4;                \
	VFMSUB231PS  Y7, Y2, Y4;             \
	VADDPS       Y11, Y2, Y6;            \
	VSUBPS       Y2, Y6, Y7;             \
	VSUBPS       Y7, Y11, Y7;            \
	VADDPS       Y4, Y7, Y7;             \
	VBLENDVPS    Y0, Y6, Y0, Y6;         \ // x ≥ 0: N = x
	VPSRAD       $31, Y0, Y4;            \
	VANDPS       Y4, Y7, Y7;             \
	VDIVPS       Y10, Y6, Y11;           \ // q, corrected
	VMOVAPS      Y6, Y4;                 \
	VFNMADD231PS Y10, Y11, Y4;           \
	VADDPS       Y7, Y4, Y4;             \
	VFNMADD231PS Y8, Y11, Y4;            \
	VRCPPS       Y10, Y10;               \
	VFMADD231PS  Y10, Y4, Y11;           \
	VPSRAD       $1, Y9, Y4;             \ // x < 0: q·2^(n>>1)·2^(n − n>>1)
	VPSUBD       Y4, Y9, Y9;             \
	VPADDD       ·actI127(SB), Y4, Y4;  \
	VPSLLD       $23, Y4, Y4;            \
	VPADDD       ·actI127(SB), Y9, Y9;  \
	VPSLLD       $23, Y9, Y9;            \
	VMULPS       Y4, Y11, Y4;            \
	VMULPS       Y9, Y4, Y4;             \
	VBLENDVPS    Y0, Y4, Y11, Y11;       \
	VCMPPS       $0, ·actPInf(SB), Y0, Y4; \ // +Inf → +Inf
	VBLENDVPS    Y4, Y0, Y11, Y11;       \
	VCMPPS       $0, ·actNInf(SB), Y0, Y4; \ // −Inf → NaN
	VORPS        Y4, Y11, Y11

// func gluSiLUAVX2(dst, gate, up *float32, n int)
TEXT ·gluSiLUAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	CONSTS256
	XORQ AX, AX

silu256:
	VMOVUPS (SI)(AX*4), Y0
	CLAMP256
	VORPS   Y13, Y2, Y3
	EXP256
	SIGMOID256
	VMULPS  (DX)(AX*4), Y11, Y11
	VMOVUPS Y11, (DI)(AX*4)
	ADDQ    $8, AX
	CMPQ    AX, CX
	JB      silu256
	VZEROUPPER
	RET

// func gluGELUAVX2(dst, gate, up *float32, n int)
TEXT ·gluGELUAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	CONSTS256
	XORQ AX, AX

gelu256:
	VMOVUPS     (SI)(AX*4), Y0
	CLAMP256
	VANDNPS     Y2, Y13, Y3    // |x|
	VMULPS      Y2, Y2, Y4     // x²
	VMOVAPS     Y4, Y5
	VFMSUB231PS Y2, Y2, Y5
	VMULPS      ·actBh(SB), Y4, Y6 // b·x²
	VMOVAPS     Y6, Y7
	VFMSUB231PS ·actBh(SB), Y4, Y7
	VFMADD231PS ·actBh(SB), Y5, Y7
	VFMADD231PS ·actBl(SB), Y4, Y7
	VMOVUPS     ·actAh(SB), Y11   // w = a + b·x²
	VADDPS      Y6, Y11, Y8
	VSUBPS      Y11, Y8, Y9
	VSUBPS      Y9, Y8, Y10
	VSUBPS      Y10, Y11, Y10
	VSUBPS      Y9, Y6, Y9
	VADDPS      Y9, Y10, Y10
	VADDPS      Y7, Y10, Y10
	VADDPS      ·actAl(SB), Y10, Y10
	VMULPS      Y8, Y3, Y11        // |x|·w
	VMOVAPS     Y11, Y1
	VFMSUB231PS Y8, Y3, Y1
	VFMADD231PS Y10, Y3, Y1
	VXORPS      Y13, Y11, Y3       // u = −|x|·w
	VXORPS      Y13, Y1, Y1
	EXP256
	VADDPS      Y1, Y6, Y6
	SIGMOID256
	VMULPS      (DX)(AX*4), Y11, Y11
	VMOVUPS     Y11, (DI)(AX*4)
	ADDQ        $8, AX
	CMPQ        AX, CX
	JB          gelu256
	VZEROUPPER
	RET
