//go:build amd64 && !noasm

#include "textflag.h"

// Prefill panel widening (AVX-512): elements of 16 rows of an f32, f16 or bf16
// weight into element-major order, p[k·32 + r], exactly (see
// Weight.widenPanel). One gather takes a 32-bit word of each of the 16 rows:
// one f32 element, or two f16/bf16 elements k, k+1 (low half first), which
// become the lines p[k·32:] and p[(k+1)·32:] for those rows.
//
// Registers: DI p, SI the word of row 0, CX words left, Z0 the rows' byte
// offsets from SI, Z4 the gathered words, Z5 mask, Z6/Z7 the lines.

DATA fpHi<>+0(SB)/4, $0xffff0000
GLOBL fpHi<>(SB), RODATA|NOPTR, $4

#define FPSETUP \
	MOVQ      p+0(FP), DI; \
	MOVQ      w+8(FP), SI; \
	MOVQ      n+16(FP), CX; \
	MOVQ      off+24(FP), AX; \
	VMOVDQU32 (AX), Z0

#define FPGATHER \
	KXNORW     K1, K1, K1; \
	VPGATHERDD (SI)(Z0*1), K1, Z4; \
	ADDQ       $4, SI

// widenPanelF16(p *float32, w *uint16, n int, off *int32) widens n pairs of
// halves of 16 rows (F16C's VCVTPH2PS, exact). p receives 32-float lines, 16
// used.
TEXT ·widenPanelF16(SB), NOSPLIT, $0-32
	FPSETUP
	TESTQ CX, CX
	JZ    f16done

f16loop:
	FPGATHER
	VPMOVDW   Z4, Y6
	VPSRLD    $16, Z4, Z7
	VPMOVDW   Z7, Y7
	VCVTPH2PS Y6, Z6
	VCVTPH2PS Y7, Z7
	VMOVUPS   Z6, (DI)
	VMOVUPS   Z7, 128(DI)
	ADDQ      $256, DI
	DECQ      CX
	JNZ       f16loop

f16done:
	VZEROUPPER
	RET

// widenPanelBF16: as widenPanelF16 for bf16 (a bf16 is the top half of its
// f32).
TEXT ·widenPanelBF16(SB), NOSPLIT, $0-32
	FPSETUP
	VPBROADCASTD fpHi<>(SB), Z5
	TESTQ        CX, CX
	JZ           bf16done

bf16loop:
	FPGATHER
	VPSLLD  $16, Z4, Z6
	VPANDD  Z5, Z4, Z7
	VMOVUPS Z6, (DI)
	VMOVUPS Z7, 128(DI)
	ADDQ    $256, DI
	DECQ    CX
	JNZ     bf16loop

bf16done:
	VZEROUPPER
	RET

// widenPanelF32(p *float32, w *float32, n int, off *int32) moves n elements
// of 16 rows.
TEXT ·widenPanelF32(SB), NOSPLIT, $0-32
	FPSETUP
	TESTQ CX, CX
	JZ    f32done

f32loop:
	FPGATHER
	VMOVUPS Z4, (DI)
	ADDQ    $128, DI
	DECQ    CX
	JNZ     f32loop

f32done:
	VZEROUPPER
	RET
