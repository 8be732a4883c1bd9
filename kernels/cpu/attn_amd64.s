//go:build amd64 && !noasm

#include "textflag.h"

// func attnScoresAVX2(scores, q, k *float32, stride, n, dh int)
// scores[j] = Σ_i q[i]·k[j·stride/4 + i]; stride in bytes; dh a multiple of 8.
TEXT ·attnScoresAVX2(SB), NOSPLIT, $0-48
	MOVQ scores+0(FP), DI
	MOVQ q+8(FP), SI
	MOVQ k+16(FP), DX
	MOVQ stride+24(FP), R8
	MOVQ n+32(FP), CX
	MOVQ dh+40(FP), R9
	SHLQ $2, R9              // head bytes

key:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	XORQ   AX, AX
	MOVQ   R9, BX
	ANDQ   $-64, BX          // bytes done two vectors at a time

pair:
	CMPQ        AX, BX
	JAE         single
	VMOVUPS     (SI)(AX*1), Y2
	VMOVUPS     32(SI)(AX*1), Y3
	VFMADD231PS (DX)(AX*1), Y2, Y0
	VFMADD231PS 32(DX)(AX*1), Y3, Y1
	ADDQ        $64, AX
	JMP         pair

single:
	CMPQ        AX, R9
	JAE         reduce
	VMOVUPS     (SI)(AX*1), Y2
	VFMADD231PS (DX)(AX*1), Y2, Y0
	ADDQ        $32, AX
	JMP         single

reduce:
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSS       X0, (DI)
	ADDQ         $4, DI
	ADDQ         R8, DX
	DECQ         CX
	JNZ          key
	VZEROUPPER
	RET

// func attnAccumAVX2(out, v *float32, stride int, p *float32, n, dh int)
// out[i] += Σ_j p[j]·v[j·stride/4 + i]; stride in bytes; dh a multiple of 8.
// The head is done in blocks of 32 floats (4 accumulators) while they last, then
// blocks of 8, each block sweeping all n keys.
TEXT ·attnAccumAVX2(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ v+8(FP), SI
	MOVQ stride+16(FP), R8
	MOVQ p+24(FP), R10
	MOVQ n+32(FP), R11
	MOVQ dh+40(FP), R9
	SHLQ $2, R9              // head bytes
	XORQ BX, BX              // byte offset of the block in the head

block32:
	MOVQ    R9, AX
	SUBQ    BX, AX
	CMPQ    AX, $128
	JB      block8
	VMOVUPS (DI)(BX*1), Y0
	VMOVUPS 32(DI)(BX*1), Y1
	VMOVUPS 64(DI)(BX*1), Y2
	VMOVUPS 96(DI)(BX*1), Y3
	LEAQ    (SI)(BX*1), DX   // v row pointer at this block
	XORQ    CX, CX           // key index

keys32:
	VBROADCASTSS (R10)(CX*4), Y4
	VFMADD231PS  (DX), Y4, Y0
	VFMADD231PS  32(DX), Y4, Y1
	VFMADD231PS  64(DX), Y4, Y2
	VFMADD231PS  96(DX), Y4, Y3
	ADDQ         R8, DX
	INCQ         CX
	CMPQ         CX, R11
	JB           keys32
	VMOVUPS      Y0, (DI)(BX*1)
	VMOVUPS      Y1, 32(DI)(BX*1)
	VMOVUPS      Y2, 64(DI)(BX*1)
	VMOVUPS      Y3, 96(DI)(BX*1)
	ADDQ         $128, BX
	JMP          block32

block8:
	CMPQ    BX, R9
	JAE     done
	VMOVUPS (DI)(BX*1), Y0
	LEAQ    (SI)(BX*1), DX
	XORQ    CX, CX

keys8:
	VBROADCASTSS (R10)(CX*4), Y4
	VFMADD231PS  (DX), Y4, Y0
	ADDQ         R8, DX
	INCQ         CX
	CMPQ         CX, R11
	JB           keys8
	VMOVUPS      Y0, (DI)(BX*1)
	ADDQ         $32, BX
	JMP          block8

done:
	VZEROUPPER
	RET
