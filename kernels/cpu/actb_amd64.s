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
// actB's quantization of one row in striped order: t = round(x·id) in float64
// (ties to even, as the Go loop), split into three signed bytes stored into the
// planes at xb (C = 128: 4-bit order, C = 64: 8-bit; see actB.at); per group,
// Σx (in float64) to sums and Σt to tsum. gs is a multiple of 32. Sixteen
// values are two lane words of a 4-bit group or four of an 8-bit one, so
// their bytes go to two or four chunks, 4 bytes each per plane (and per
// nibble half), and the next sixteen start 768 bytes on.
//
// SI x, DI the planes, R8 the group's place in them, R9 groups left, R10
// 16-blocks left in the group, R11 the group, R12 sums, R13 tsum, R14 a
// stripe's bytes of planes (48·gs); Z31 id, Z8/Z9 Σx (float64), Z10 Σt
// (int32).
// STORE4 stores the low bytes of Z's qwords: bytes 0-3 at off(R8), 4-7 one
// 4-bit chunk (384 bytes of planes) on. STORE8 stores the low bytes of Z's
// dwords, four at a time, at off(R8) and three 8-bit chunks (192 bytes each) on.
#define STORE4(Z, off) \
	VPMOVQB Z, X5; \
	VMOVD   X5, off(R8); \
	VPEXTRD $1, X5, off+384(R8)

#define STORE8(Z, off) \
	VPMOVDB Z, X5; \
	VMOVD   X5, off(R8); \
	VPEXTRD $1, X5, off+192(R8); \
	VPEXTRD $2, X5, off+384(R8); \
	VPEXTRD $3, X5, off+576(R8)

TEXT ·quantRowB(SB), NOSPLIT, $0-64
	MOVQ         xb+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         groups+16(FP), R9
	MOVQ         sums+48(FP), R12
	MOVQ         tsum+56(FP), R13
	VBROADCASTSD id+40(FP), Z31
	MOVQ         gs+24(FP), R14
	IMULQ        $48, R14
	XORQ         R11, R11

group:
	VXORPD Z8, Z8, Z8
	VXORPD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	MOVQ   gs+24(FP), R10
	SHRQ   $4, R10
	MOVQ   R11, AX
	SHRQ   $4, AX
	IMULQ  R14, AX
	ADDQ   DI, AX
	MOVQ   R11, DX
	ANDQ   $15, DX
	LEAQ   (AX)(DX*4), R8

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
	JEQ           bits8
	// 4-bit: even values (the low dword of each qword) to the low-nibble half,
	// odd ones 64 bytes on; values 0-7 to this chunk, 8-15 to the next
	STORE4(Z4, 0)
	STORE4(Z3, 128)
	STORE4(Z1, 256)
	VPSRLQ $32, Z4, Z4
	VPSRLQ $32, Z3, Z3
	VPSRLQ $32, Z1, Z1
	STORE4(Z4, 64)
	STORE4(Z3, 192)
	STORE4(Z1, 320)
	JMP    next

bits8:
	// 8-bit: values 4i…4i+3 to chunk i of four
	STORE8(Z4, 0)
	STORE8(Z3, 64)
	STORE8(Z1, 128)

next:
	ADDQ $64, SI
	ADDQ $768, R8
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
	INCQ          R11
	DECQ          R9
	JNZ           group
	VZEROUPPER
	RET
