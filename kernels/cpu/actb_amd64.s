//go:build amd64 && !noasm

#include "textflag.h"

// absMaxBits(x *float32, n int) uint32 returns the largest |x| bit pattern of
// x[:n] (n a multiple of 16), as the Go loop in actB.Do: NaNs order above +Inf.
TEXT ·absMaxBits(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	SHRQ         $4, CX
	VPBROADCASTD qabs<>(SB), Z3
	VPXORD       Z0, Z0, Z0
	VPXORD       Z1, Z1, Z1

amax:
	VPANDD  (SI), Z3, Z2
	VPMAXUD Z2, Z0, Z0
	ADDQ    $64, SI
	DECQ    CX
	JNZ     amax
	VEXTRACTI64X4 $1, Z0, Y1
	VPMAXUD       Y1, Y0, Y0
	VEXTRACTI128  $1, Y0, X1
	VPMAXUD       X1, X0, X0
	VPSHUFD       $0x4e, X0, X1
	VPMAXUD       X1, X0, X0
	VPSHUFD       $0xb1, X0, X1
	VPMAXUD       X1, X0, X0
	VMOVD         X0, AX
	MOVL          AX, ret+16(FP)
	VZEROUPPER
	RET

DATA qabs<>+0(SB)/4, $0x7fffffff
GLOBL qabs<>(SB), RODATA|NOPTR, $4

// quantRowB(xb *int8, x *float32, groups, gs, C int, id float64, sums *float64,
//     tsum *int64)
//
// actB's quantization of one row: t = round(x·id) in float64 (ties to even, as
// the Go loop), split into three signed bytes stored into the planes at xb (C =
// 128: 4-bit layout, even values then odd; 64: in order); per group, Σx (in
// float64) to sums and Σt to tsum. gs is a multiple of 32 and C of 16.
//
// SI x, DI the chunk's planes, R8 offset in the chunk's plane (bytes), R9 groups
// left, R10 16-blocks left in the group, R11 16-blocks left in the chunk, R12
// sums, R13 tsum; Z31 id, Z8/Z9 Σx (float64), Z10 Σt (int32).
TEXT ·quantRowB(SB), NOSPLIT, $0-64
	MOVQ         xb+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         groups+16(FP), R9
	MOVQ         sums+48(FP), R12
	MOVQ         tsum+56(FP), R13
	VBROADCASTSD id+40(FP), Z31
	XORQ         R8, R8
	MOVQ         C+32(FP), R11
	SHRQ         $4, R11

group:
	VXORPD Z8, Z8, Z8
	VXORPD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	MOVQ   gs+24(FP), R10
	SHRQ   $4, R10

block:
	VCVTPS2PD     (SI), Z0
	VCVTPS2PD     32(SI), Z1
	VADDPD        Z0, Z8, Z8
	VADDPD        Z1, Z9, Z9
	VMULPD        Z31, Z0, Z0
	VMULPD        Z31, Z1, Z1
	VCVTPD2DQ     Z0, Y0
	VCVTPD2DQ     Z1, Y1
	VINSERTI64X4  $1, Y1, Z0, Z0  // t
	VPADDD        Z0, Z10, Z10
	VPSLLD        $24, Z0, Z1
	VPSRAD        $24, Z1, Z1     // lo, sign-extended
	VPSUBD        Z1, Z0, Z2
	VPSRAD        $8, Z2, Z2      // t1
	VPSLLD        $24, Z2, Z3
	VPSRAD        $24, Z3, Z3     // mid
	VPSUBD        Z3, Z2, Z4
	VPSRAD        $8, Z4, Z4      // hi
	MOVQ          C+32(FP), AX
	CMPQ          AX, $64
	JEQ           inorder
	// 4-bit: even values (the low dword of each qword) at o, odd ones at 64 + o
	MOVQ          DI, BX
	ADDQ          R8, BX
	VPMOVQB       Z4, (BX)
	VPMOVQB       Z3, 128(BX)
	VPMOVQB       Z0, 256(BX)
	VPSRLQ        $32, Z4, Z4
	VPSRLQ        $32, Z3, Z3
	VPSRLQ        $32, Z0, Z0
	VPMOVQB       Z4, 64(BX)
	VPMOVQB       Z3, 192(BX)
	VPMOVQB       Z0, 320(BX)
	ADDQ          $8, R8
	JMP           next

inorder:
	MOVQ    DI, BX
	ADDQ    R8, BX
	VPMOVDB Z4, (BX)
	VPMOVDB Z3, 64(BX)
	VPMOVDB Z0, 128(BX)
	ADDQ    $16, R8

next:
	ADDQ $64, SI
	DECQ R11
	JNZ  samechunk
	// next chunk: 3·C bytes of planes
	MOVQ C+32(FP), AX
	LEAQ (AX)(AX*2), AX
	ADDQ AX, DI
	XORQ R8, R8
	MOVQ C+32(FP), R11
	SHRQ $4, R11

samechunk:
	DECQ R10
	JNZ  block

	// the group's sums
	VADDPD        Z9, Z8, Z8
	VEXTRACTF64X4 $1, Z8, Y9
	VADDPD        Y9, Y8, Y8
	VEXTRACTF128  $1, Y8, X9
	VADDPD        X9, X8, X8
	VPERMILPD     $1, X8, X9
	VADDSD        X9, X8, X8
	VMOVSD        X8, (R12)
	ADDQ          $8, R12
	VPMOVSXDQ     Y10, Z11
	VEXTRACTI64X4 $1, Z10, Y10
	VPMOVSXDQ     Y10, Z12
	VPADDQ        Z12, Z11, Z11
	VEXTRACTI64X4 $1, Z11, Y12
	VPADDQ        Y12, Y11, Y11
	VEXTRACTI128  $1, Y11, X12
	VPADDQ        X12, X11, X11
	VPSHUFD       $0x4e, X11, X12
	VPADDQ        X12, X11, X11
	VMOVQ         X11, (R13)
	ADDQ          $8, R13
	DECQ          R9
	JNZ           group
	VZEROUPPER
	RET
