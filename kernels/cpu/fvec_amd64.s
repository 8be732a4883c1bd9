//go:build amd64 && !noasm

#include "textflag.h"

// Decode mat-vecs of f16 and bf16 rows with a software prefetch: the
// arithmetic of fMatVecF16 and fMatVecBF16 (dot_amd64.s) instruction for
// instruction, so the outputs are the same bits (fVecs4 matches them too),
// plus a PREFETCHT1 of the line pf bytes ahead of each 64-byte line read.
// Rows lie back to back, so the prefetch runs on into the rows after.

#define FVHSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X; \
	VPSHUFD      $0x4e, X, T; \
	VADDPS       T, X, X; \
	VPSHUFD      $0xb1, X, T; \
	VADDPS       T, X, X

// fMatVecF16P(dst *float32, n int, w *uint16, K int, x *float32, pf int)
//
// Registers as fMatVecF16; R9 the prefetch distance.
TEXT ·fMatVecF16P(SB), NOSPLIT, $0-48
	MOVQ  dst+0(FP), DI
	MOVQ  n+8(FP), CX
	MOVQ  w+16(FP), SI
	MOVQ  K+24(FP), R8
	MOVQ  pf+40(FP), R9
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
	PREFETCHT1  (AX)(R9*1)
	VCVTPH2PS   (AX), Y4
	VCVTPH2PS   16(AX), Y5
	VCVTPH2PS   32(AX), Y6
	VCVTPH2PS   48(AX), Y7
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
	TESTQ       DX, DX
	JZ          sum
	VCVTPH2PS   (AX), Y4
	VFMADD231PS (BX), Y4, Y0
	ADDQ        $16, AX
	ADDQ        $32, BX
	SUBQ        $8, DX
	JMP         step8

sum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	FVHSUM(Y0, X0, X1)
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	MOVQ   AX, SI
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// fMatVecBF16P(dst *float32, n int, w *uint16, K int, x *float32, pf int):
// as fMatVecF16P for bf16 rows, the arithmetic of fMatVecBF16.
TEXT ·fMatVecBF16P(SB), NOSPLIT, $0-48
	MOVQ  dst+0(FP), DI
	MOVQ  n+8(FP), CX
	MOVQ  w+16(FP), SI
	MOVQ  K+24(FP), R8
	MOVQ  pf+40(FP), R9
	TESTQ CX, CX
	JZ    bdone

brow:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   SI, AX
	MOVQ   x+32(FP), BX
	MOVQ   R8, DX
	CMPQ   DX, $32
	JLT    bstep8

bstep32:
	PREFETCHT1  (AX)(R9*1)
	VPMOVZXWD   (AX), Y4
	VPSLLD      $16, Y4, Y4
	VPMOVZXWD   16(AX), Y5
	VPSLLD      $16, Y5, Y5
	VPMOVZXWD   32(AX), Y6
	VPSLLD      $16, Y6, Y6
	VPMOVZXWD   48(AX), Y7
	VPSLLD      $16, Y7, Y7
	VFMADD231PS (BX), Y4, Y0
	VFMADD231PS 32(BX), Y5, Y1
	VFMADD231PS 64(BX), Y6, Y2
	VFMADD231PS 96(BX), Y7, Y3
	ADDQ        $64, AX
	ADDQ        $128, BX
	SUBQ        $32, DX
	CMPQ        DX, $32
	JGE         bstep32

bstep8:
	TESTQ       DX, DX
	JZ          bsum
	VPMOVZXWD   (AX), Y4
	VPSLLD      $16, Y4, Y4
	VFMADD231PS (BX), Y4, Y0
	ADDQ        $16, AX
	ADDQ        $32, BX
	SUBQ        $8, DX
	JMP         bstep8

bsum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	FVHSUM(Y0, X0, X1)
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	MOVQ   AX, SI
	DECQ   CX
	JNZ    brow

bdone:
	VZEROUPPER
	RET
