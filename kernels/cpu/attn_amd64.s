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

// OUTER4X4 adds the outer products of Z20-Z23 with Z16-Z19 to Z0-Z15:
// Z(4i+j) += Z(20+i)·Z(16+j).
#define OUTER4X4 \
	VFMADD231PS Z16, Z20, Z0; \
	VFMADD231PS Z17, Z20, Z1; \
	VFMADD231PS Z18, Z20, Z2; \
	VFMADD231PS Z19, Z20, Z3; \
	VFMADD231PS Z16, Z21, Z4; \
	VFMADD231PS Z17, Z21, Z5; \
	VFMADD231PS Z18, Z21, Z6; \
	VFMADD231PS Z19, Z21, Z7; \
	VFMADD231PS Z16, Z22, Z8; \
	VFMADD231PS Z17, Z22, Z9; \
	VFMADD231PS Z18, Z22, Z10; \
	VFMADD231PS Z19, Z22, Z11; \
	VFMADD231PS Z16, Z23, Z12; \
	VFMADD231PS Z17, Z23, Z13; \
	VFMADD231PS Z18, Z23, Z14; \
	VFMADD231PS Z19, Z23, Z15

// FOLD(LO, HI, A, B) sets A = LO(A, B) + HI(A, B) (an unpack pair;
// clobbers Z16, Z17); FOLDLANES(A, B) sets A's 128-bit lanes to the sums of
// A's lanes 0+1, 2+3 and B's 0+1, 2+3.
#define FOLD(LO, HI, A, B) \
	LO     B, A, Z16; \
	HI     B, A, Z17; \
	VADDPS Z17, Z16, A

#define FOLDLANES(A, B) \
	VSHUFF32X4 $0x88, B, A, Z16; \
	VSHUFF32X4 $0xdd, B, A, Z17; \
	VADDPS     Z17, Z16, A

// ---- AVX-512 kernels of the blocked attention (see Attn.Block).

// func attnTileAVX512(c *float32, ldc int, a *float32, ars, aks int, b *float32, ldb, k, n int, alpha *float32)
// c[i][0:n] = alpha[i]·c[i][0:n] (0 when alpha is nil) + Σ_{p<k} a[i·ars + p·aks]·b[p·ldb : p·ldb+n]
// for the 4 rows i < 4 and n ≤ 64 columns; strides in bytes, k ≥ 1. Columns
// past n are neither read nor written (masked), so b and c need not be padded.
TEXT ·attnTileAVX512(SB), NOSPLIT, $0-80
	MOVQ c+0(FP), DI
	MOVQ ldc+8(FP), R13
	MOVQ a+16(FP), R8
	MOVQ ars+24(FP), R9
	MOVQ aks+32(FP), R14
	MOVQ b+40(FP), BX
	MOVQ ldb+48(FP), R15
	MOVQ k+56(FP), CX
	MOVQ n+64(FP), AX
	MOVQ alpha+72(FP), DX

	MOVQ  $-1, SI          // column masks K1–K4 (16 columns each)
	BZHIQ AX, SI, SI
	KMOVW SI, K1
	SHRQ  $16, SI
	KMOVW SI, K2
	SHRQ  $16, SI
	KMOVW SI, K3
	SHRQ  $16, SI
	KMOVW SI, K4

	LEAQ (R8)(R9*1), R10   // a rows 1–3
	LEAQ (R8)(R9*2), R11
	LEAQ (R10)(R9*2), R12
	LEAQ (DI)(R13*2), R9   // c row 2
	XORQ SI, SI            // offset into a rows

	TESTQ DX, DX
	JNZ   scaled
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	JMP    loop

scaled:
	VBROADCASTSS 0(DX), Z20
	VBROADCASTSS 4(DX), Z21
	VBROADCASTSS 8(DX), Z22
	VBROADCASTSS 12(DX), Z23
	VMOVUPS.Z    (DI), K1, Z0
	VMOVUPS.Z    64(DI), K2, Z1
	VMOVUPS.Z    128(DI), K3, Z2
	VMOVUPS.Z    192(DI), K4, Z3
	VMOVUPS.Z    (DI)(R13*1), K1, Z4
	VMOVUPS.Z    64(DI)(R13*1), K2, Z5
	VMOVUPS.Z    128(DI)(R13*1), K3, Z6
	VMOVUPS.Z    192(DI)(R13*1), K4, Z7
	VMOVUPS.Z    (R9), K1, Z8
	VMOVUPS.Z    64(R9), K2, Z9
	VMOVUPS.Z    128(R9), K3, Z10
	VMOVUPS.Z    192(R9), K4, Z11
	VMOVUPS.Z    (R9)(R13*1), K1, Z12
	VMOVUPS.Z    64(R9)(R13*1), K2, Z13
	VMOVUPS.Z    128(R9)(R13*1), K3, Z14
	VMOVUPS.Z    192(R9)(R13*1), K4, Z15
	VMULPS       Z20, Z0, Z0
	VMULPS       Z20, Z1, Z1
	VMULPS       Z20, Z2, Z2
	VMULPS       Z20, Z3, Z3
	VMULPS       Z21, Z4, Z4
	VMULPS       Z21, Z5, Z5
	VMULPS       Z21, Z6, Z6
	VMULPS       Z21, Z7, Z7
	VMULPS       Z22, Z8, Z8
	VMULPS       Z22, Z9, Z9
	VMULPS       Z22, Z10, Z10
	VMULPS       Z22, Z11, Z11
	VMULPS       Z23, Z12, Z12
	VMULPS       Z23, Z13, Z13
	VMULPS       Z23, Z14, Z14
	VMULPS       Z23, Z15, Z15

loop:
	VMOVUPS.Z    (BX), K1, Z16
	VMOVUPS.Z    64(BX), K2, Z17
	VMOVUPS.Z    128(BX), K3, Z18
	VMOVUPS.Z    192(BX), K4, Z19
	VBROADCASTSS (R8)(SI*1), Z20
	VBROADCASTSS (R10)(SI*1), Z21
	VBROADCASTSS (R11)(SI*1), Z22
	VBROADCASTSS (R12)(SI*1), Z23
	OUTER4X4
	ADDQ         R14, SI
	ADDQ         R15, BX
	DECQ         CX
	JNZ          loop

	VMOVUPS Z0, K1, (DI)
	VMOVUPS Z1, K2, 64(DI)
	VMOVUPS Z2, K3, 128(DI)
	VMOVUPS Z3, K4, 192(DI)
	VMOVUPS Z4, K1, (DI)(R13*1)
	VMOVUPS Z5, K2, 64(DI)(R13*1)
	VMOVUPS Z6, K3, 128(DI)(R13*1)
	VMOVUPS Z7, K4, 192(DI)(R13*1)
	VMOVUPS Z8, K1, (R9)
	VMOVUPS Z9, K2, 64(R9)
	VMOVUPS Z10, K3, 128(R9)
	VMOVUPS Z11, K4, 192(R9)
	VMOVUPS Z12, K1, (R9)(R13*1)
	VMOVUPS Z13, K2, 64(R9)(R13*1)
	VMOVUPS Z14, K3, 128(R9)(R13*1)
	VMOVUPS Z15, K4, 192(R9)(R13*1)
	VZEROUPPER
	RET

// Softmax constants (the activation kernels' exp, see act_amd64.s), and
// EXPF512(y, e, n, r2): e = exp(y) for y ≤ 0 (y < −120 gives 0, NaN stays NaN),
// within 1 ulp; clobbers y.
#define SOFTMAX_CONSTS512 \
	VBROADCASTSS ·actLo(SB), Z16; VBROADCASTSS ·actLog2e(SB), Z18; \
	VBROADCASTSS ·actLn2Hi(SB), Z19; VBROADCASTSS ·actLn2Lo(SB), Z20; \
	VBROADCASTSS ·actC7(SB), Z21; VBROADCASTSS ·actC6(SB), Z22; \
	VBROADCASTSS ·actC5(SB), Z23; VBROADCASTSS ·actC4(SB), Z24; \
	VBROADCASTSS ·actC3(SB), Z25; VBROADCASTSS ·actHalf(SB), Z26; \
	VBROADCASTSS ·actOne(SB), Z27

#define EXPF512(y, e, n, r2) \
	VMAXPS       y, Z16, y;   \
	VMULPS       Z18, y, n;   \
	VRNDSCALEPS  $0, n, n;    \
	VFNMADD231PS Z19, n, y;   \
	VFNMADD231PS Z20, n, y;   \
	VMOVAPS      Z21, e;      \
	VFMADD213PS  Z22, y, e;   \
	VFMADD213PS  Z23, y, e;   \
	VFMADD213PS  Z24, y, e;   \
	VFMADD213PS  Z25, y, e;   \
	VFMADD213PS  Z26, y, e;   \
	VMULPS       y, y, r2;    \
	VFMADD213PS  y, r2, e;    \
	VADDPS       Z27, e, e;   \
	VSCALEFPS    n, e, e

// func attnSoftmaxAVX512(s *float32, ld, rows, cols int, m, l, alpha *float32)
// One key block's online-softmax step over the rows × cols scores s (row stride
// ld bytes, rows ≥ 1), per column c: mx = max(m[c], s[·][c]); alpha[c] =
// exp(m[c] − mx); s[j][c] = exp(s[j][c] − mx); l[c] = l[c]·alpha[c] + Σ_j s[j][c];
// m[c] = mx.
TEXT ·attnSoftmaxAVX512(SB), NOSPLIT, $0-56
	MOVQ s+0(FP), DI
	MOVQ ld+8(FP), R13
	MOVQ rows+16(FP), R14
	MOVQ cols+24(FP), R15
	MOVQ m+32(FP), R8
	MOVQ l+40(FP), R9
	MOVQ alpha+48(FP), R10
	SOFTMAX_CONSTS512
	XORQ AX, AX              // column

col:
	MOVQ      R15, DX
	SUBQ      AX, DX
	MOVQ      $16, SI
	CMPQ      DX, SI
	CMOVQGT   SI, DX             // BZHI reads only the index's low byte
	MOVQ      $-1, SI
	BZHIQ     DX, SI, SI
	KMOVW     SI, K1
	VMOVUPS.Z (R8)(AX*4), K1, Z0 // m
	VMOVAPS   Z0, Z1             // mx
	LEAQ      (DI)(AX*4), BX
	MOVQ      R14, CX

max:
	VMOVUPS.Z (BX), K1, Z2
	VMAXPS    Z2, Z1, Z1         // NaN scores stay NaN
	ADDQ      R13, BX
	DECQ      CX
	JNZ       max

	VSUBPS    Z1, Z0, Z0
	EXPF512(Z0, Z4, Z5, Z6)      // alpha
	VPXORD    Z3, Z3, Z3         // Σ
	LEAQ      (DI)(AX*4), BX
	MOVQ      R14, CX

exp:
	VMOVUPS.Z (BX), K1, Z2
	VSUBPS    Z1, Z2, Z2
	EXPF512(Z2, Z7, Z5, Z6)
	VMOVUPS   Z7, K1, (BX)
	VADDPS    Z7, Z3, Z3
	ADDQ      R13, BX
	DECQ      CX
	JNZ       exp

	VMOVUPS.Z   (R9)(AX*4), K1, Z2
	VFMADD213PS Z3, Z4, Z2       // l·alpha + Σ
	VMOVUPS     Z2, K1, (R9)(AX*4)
	VMOVUPS     Z1, K1, (R8)(AX*4)
	VMOVUPS     Z4, K1, (R10)(AX*4)
	ADDQ        $16, AX
	CMPQ        AX, R15
	JB          col
	VZEROUPPER
	RET

// func attnExpAVX512(s *float32, n int, mx float32) float32
// s[i] = exp(s[i] − mx) for i < n (≥ 1); returns Σ s[i].
TEXT ·attnExpAVX512(SB), NOSPLIT, $0-28
	MOVQ         s+0(FP), DI
	MOVQ         n+8(FP), R15
	VBROADCASTSS mx+16(FP), Z1
	SOFTMAX_CONSTS512
	VPXORD       Z3, Z3, Z3
	XORQ         AX, AX

expRow:
	MOVQ      R15, DX
	SUBQ      AX, DX
	MOVQ      $16, SI
	CMPQ      DX, SI
	CMOVQGT   SI, DX             // BZHI reads only the index's low byte
	MOVQ      $-1, SI
	BZHIQ     DX, SI, SI
	KMOVW     SI, K1
	VMOVUPS.Z (DI)(AX*4), K1, Z2
	VSUBPS    Z1, Z2, Z2
	EXPF512(Z2, Z7, Z5, Z6)
	VMOVUPS   Z7, K1, (DI)(AX*4)
	VADDPS    Z7, Z3, K1, Z3     // past n: keep
	ADDQ      $16, AX
	CMPQ      AX, R15
	JB        expRow

	VEXTRACTF64X4 $1, Z3, Y4
	VADDPS        Y4, Y3, Y3
	VEXTRACTF128  $1, Y3, X4
	VADDPS        X4, X3, X3
	VHADDPS       X3, X3, X3
	VHADDPS       X3, X3, X3
	VMOVSS        X3, ret+24(FP)
	VZEROUPPER
	RET

// ---- AVX2 forms of the three kernels above, for machines without AVX-512.

// func attnTileAVX2(c *float32, ldc int, a *float32, ars, aks int, b *float32, ldb, k, n int, alpha *float32)
// attnTileAVX512 for n a multiple of 8: 4 rows × 16 columns at a time, then 4 × 8.
TEXT ·attnTileAVX2(SB), NOSPLIT, $0-80
	MOVQ c+0(FP), DI
	MOVQ ldc+8(FP), R13
	MOVQ a+16(FP), R8
	MOVQ ars+24(FP), R9
	MOVQ aks+32(FP), R14
	MOVQ b+40(FP), BX
	MOVQ ldb+48(FP), R15
	MOVQ n+64(FP), AX
	MOVQ alpha+72(FP), DX
	LEAQ (R8)(R9*1), R10     // a rows 1–3
	LEAQ (R8)(R9*2), R11
	LEAQ (R10)(R9*2), R12

chunk16:
	CMPQ   AX, $16
	JB     chunk8
	LEAQ   (DI)(R13*2), R9   // c row 2
	TESTQ  DX, DX
	JNZ    scaled16
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	JMP    k16

scaled16:
	VBROADCASTSS 0(DX), Y8
	VMULPS       (DI), Y8, Y0
	VMULPS       32(DI), Y8, Y1
	VBROADCASTSS 4(DX), Y8
	VMULPS       (DI)(R13*1), Y8, Y2
	VMULPS       32(DI)(R13*1), Y8, Y3
	VBROADCASTSS 8(DX), Y8
	VMULPS       (R9), Y8, Y4
	VMULPS       32(R9), Y8, Y5
	VBROADCASTSS 12(DX), Y8
	VMULPS       (R9)(R13*1), Y8, Y6
	VMULPS       32(R9)(R13*1), Y8, Y7

k16:
	MOVQ k+56(FP), CX
	XORQ SI, SI
	MOVQ BX, R9              // b row

loop16:
	VMOVUPS      (R9), Y8
	VMOVUPS      32(R9), Y9
	VBROADCASTSS (R8)(SI*1), Y10
	VBROADCASTSS (R10)(SI*1), Y11
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VFMADD231PS  Y8, Y11, Y2
	VFMADD231PS  Y9, Y11, Y3
	VBROADCASTSS (R11)(SI*1), Y10
	VBROADCASTSS (R12)(SI*1), Y11
	VFMADD231PS  Y8, Y10, Y4
	VFMADD231PS  Y9, Y10, Y5
	VFMADD231PS  Y8, Y11, Y6
	VFMADD231PS  Y9, Y11, Y7
	ADDQ         R14, SI
	ADDQ         R15, R9
	DECQ         CX
	JNZ          loop16

	LEAQ    (DI)(R13*2), R9
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, (DI)(R13*1)
	VMOVUPS Y3, 32(DI)(R13*1)
	VMOVUPS Y4, (R9)
	VMOVUPS Y5, 32(R9)
	VMOVUPS Y6, (R9)(R13*1)
	VMOVUPS Y7, 32(R9)(R13*1)
	ADDQ    $64, DI
	ADDQ    $64, BX
	SUBQ    $16, AX
	JMP     chunk16

chunk8:
	CMPQ   AX, $8
	JB     done
	LEAQ   (DI)(R13*2), R9
	TESTQ  DX, DX
	JNZ    scaled8
	VXORPS Y0, Y0, Y0
	VXORPS Y2, Y2, Y2
	VXORPS Y4, Y4, Y4
	VXORPS Y6, Y6, Y6
	JMP    k8

scaled8:
	VBROADCASTSS 0(DX), Y8
	VMULPS       (DI), Y8, Y0
	VBROADCASTSS 4(DX), Y8
	VMULPS       (DI)(R13*1), Y8, Y2
	VBROADCASTSS 8(DX), Y8
	VMULPS       (R9), Y8, Y4
	VBROADCASTSS 12(DX), Y8
	VMULPS       (R9)(R13*1), Y8, Y6

k8:
	MOVQ k+56(FP), CX
	XORQ SI, SI
	MOVQ BX, R9

loop8:
	VMOVUPS      (R9), Y8
	VBROADCASTSS (R8)(SI*1), Y10
	VBROADCASTSS (R10)(SI*1), Y11
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y8, Y11, Y2
	VBROADCASTSS (R11)(SI*1), Y10
	VBROADCASTSS (R12)(SI*1), Y11
	VFMADD231PS  Y8, Y10, Y4
	VFMADD231PS  Y8, Y11, Y6
	ADDQ         R14, SI
	ADDQ         R15, R9
	DECQ         CX
	JNZ          loop8

	LEAQ    (DI)(R13*2), R9
	VMOVUPS Y0, (DI)
	VMOVUPS Y2, (DI)(R13*1)
	VMOVUPS Y4, (R9)
	VMOVUPS Y6, (R9)(R13*1)

done:
	VZEROUPPER
	RET

// EXPF256(y, e, n, t): e = exp(y) for y ≤ 0, as EXPF512; 2ⁿ (n ≥ −174) is
// built in two halves in the exponent field. Y15 = −120. Clobbers y, n, t.
#define EXPF256(y, e, n, t) \
	VMAXPS       y, Y15, y;                \
	VMULPS       ·actLog2e(SB), y, n;      \
	VROUNDPS     $0, n, n;                 \
	VFNMADD231PS ·actLn2Hi(SB), n, y;      \
	VFNMADD231PS ·actLn2Lo(SB), n, y;      \
	VMOVUPS      ·actC7(SB), e;            \
	VFMADD213PS  ·actC6(SB), y, e;         \
	VFMADD213PS  ·actC5(SB), y, e;         \
	VFMADD213PS  ·actC4(SB), y, e;         \
	VFMADD213PS  ·actC3(SB), y, e;         \
	VFMADD213PS  ·actHalf(SB), y, e;       \
	VMULPS       y, y, t;                  \
	VFMADD213PS  y, t, e;                  \
	VADDPS       ·actOne(SB), e, e;        \
	VCVTPS2DQ    n, n;                     \
	VPSRAD       $1, n, t;                 \
	VPSUBD       t, n, n;                  \
	VPADDD       ·actI127(SB), t, t;       \
	VPSLLD       $23, t, t;                \
	VPADDD       ·actI127(SB), n, n;       \
	VPSLLD       $23, n, n;                \
	VMULPS       t, e, e;                  \
	VMULPS       n, e, e

// func attnSoftmaxAVX2(s *float32, ld, rows, cols int, m, l, alpha *float32)
// attnSoftmaxAVX512 for cols a multiple of 8.
TEXT ·attnSoftmaxAVX2(SB), NOSPLIT, $0-56
	MOVQ    s+0(FP), DI
	MOVQ    ld+8(FP), R13
	MOVQ    rows+16(FP), R14
	MOVQ    cols+24(FP), R15
	MOVQ    m+32(FP), R8
	MOVQ    l+40(FP), R9
	MOVQ    alpha+48(FP), R10
	VMOVUPS ·actLo(SB), Y15
	XORQ    AX, AX

col256:
	VMOVUPS (R8)(AX*4), Y0   // m
	VMOVAPS Y0, Y1           // mx
	LEAQ    (DI)(AX*4), BX
	MOVQ    R14, CX

max256:
	VMOVUPS (BX), Y2
	VMAXPS  Y2, Y1, Y1
	ADDQ    R13, BX
	DECQ    CX
	JNZ     max256

	VSUBPS Y1, Y0, Y0
	EXPF256(Y0, Y4, Y5, Y6)  // alpha
	VXORPS Y3, Y3, Y3
	LEAQ   (DI)(AX*4), BX
	MOVQ   R14, CX

exp256:
	VMOVUPS (BX), Y2
	VSUBPS  Y1, Y2, Y2
	EXPF256(Y2, Y7, Y5, Y6)
	VMOVUPS Y7, (BX)
	VADDPS  Y7, Y3, Y3
	ADDQ    R13, BX
	DECQ    CX
	JNZ     exp256

	VMOVUPS     (R9)(AX*4), Y2
	VFMADD213PS Y3, Y4, Y2
	VMOVUPS     Y2, (R9)(AX*4)
	VMOVUPS     Y1, (R8)(AX*4)
	VMOVUPS     Y4, (R10)(AX*4)
	ADDQ        $8, AX
	CMPQ        AX, R15
	JB          col256
	VZEROUPPER
	RET

// func attnExpAVX2(s *float32, n int, mx float32) float32
// attnExpAVX512 for n a multiple of 8.
TEXT ·attnExpAVX2(SB), NOSPLIT, $0-28
	MOVQ         s+0(FP), DI
	MOVQ         n+8(FP), R15
	VBROADCASTSS mx+16(FP), Y1
	VMOVUPS      ·actLo(SB), Y15
	VXORPS       Y3, Y3, Y3
	XORQ         AX, AX

row256:
	VMOVUPS (DI)(AX*4), Y2
	VSUBPS  Y1, Y2, Y2
	EXPF256(Y2, Y7, Y5, Y6)
	VMOVUPS Y7, (DI)(AX*4)
	VADDPS  Y7, Y3, Y3
	ADDQ    $8, AX
	CMPQ    AX, R15
	JB      row256

	VEXTRACTF128 $1, Y3, X4
	VADDPS       X4, X3, X3
	VHADDPS      X3, X3, X3
	VHADDPS      X3, X3, X3
	VMOVSS       X3, ret+24(FP)
	VZEROUPPER
	RET

// func attnScores4AVX512(scores, q, k *float32, stride, n, dh int)
// attnScoresAVX2 for n a multiple of 4 and dh of 16: four keys at a time, their
// four sums reduced together (three VHADDPS for four keys instead of eight).
TEXT ·attnScores4AVX512(SB), NOSPLIT, $0-48
	MOVQ scores+0(FP), DI
	MOVQ q+8(FP), SI
	MOVQ k+16(FP), DX
	MOVQ stride+24(FP), R8
	MOVQ n+32(FP), CX
	MOVQ dh+40(FP), R9
	SHLQ $2, R9               // head bytes
	LEAQ (R8)(R8*2), R10      // 3·stride
	SHRQ $2, CX

keys4:
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	XORQ   AX, AX
	MOVQ   DX, BX

dim:
	VMOVUPS     (SI)(AX*1), Z4
	VFMADD231PS (BX)(AX*1), Z4, Z0
	ADDQ        R8, BX
	VFMADD231PS (BX)(AX*1), Z4, Z1
	ADDQ        R8, BX
	VFMADD231PS (BX)(AX*1), Z4, Z2
	ADDQ        R8, BX
	VFMADD231PS (BX)(AX*1), Z4, Z3
	MOVQ        DX, BX
	ADDQ        $64, AX
	CMPQ        AX, R9
	JB          dim

	VEXTRACTF64X4 $1, Z0, Y4
	VADDPS        Y4, Y0, Y0
	VEXTRACTF64X4 $1, Z1, Y4
	VADDPS        Y4, Y1, Y1
	VEXTRACTF64X4 $1, Z2, Y4
	VADDPS        Y4, Y2, Y2
	VEXTRACTF64X4 $1, Z3, Y4
	VADDPS        Y4, Y3, Y3
	VHADDPS       Y1, Y0, Y0  // per 128-bit half: k0 pairs, k1 pairs
	VHADDPS       Y3, Y2, Y2
	VHADDPS       Y2, Y0, Y0  // per half: k0, k1, k2, k3 partial sums
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VMOVUPS       X0, (DI)
	ADDQ          $16, DI
	LEAQ          (DX)(R8*4), DX
	DECQ          CX
	JNZ           keys4
	VZEROUPPER
	RET

// func attnScores4x4AVX512(s0, s1, s2, s3, q0, q1, q2, q3, k *float32, stride, n, dh int, mx *float32)
// s_h[j] = q_h·k[j·stride : j·stride+dh] for four heads h (a KV head's query
// heads; pointers may repeat) and n keys, n a multiple of 4 and dh of 16
// (stride in bytes); mx[h] = the max of s_h. Four keys at a time: each
// load of a key's slice serves the four heads, and a shuffle tree folds the
// sixteen sums (head-major, then key) into one vector whose 128-bit lane h
// holds head h's four scores.
TEXT ·attnScores4x4AVX512(SB), NOSPLIT, $0-104
	MOVQ q0+32(FP), R12
	MOVQ q1+40(FP), R13
	MOVQ q2+48(FP), R14
	MOVQ q3+56(FP), R15
	MOVQ k+64(FP), DX
	MOVQ stride+72(FP), BX
	MOVQ n+80(FP), CX
	MOVQ dh+88(FP), AX
	SHLQ $2, AX               // head bytes
	LEAQ (DX)(BX*1), R8       // keys 1-3
	LEAQ (DX)(BX*2), R9
	LEAQ (R8)(BX*2), R10
	SHLQ $2, BX               // 4·stride
	SHRQ $2, CX
	XORQ DI, DI               // byte offset into the score rows
	MOVL $0xff800000, SI      // −Inf
	VPBROADCASTD SI, Z24      // running max

keys4x4:
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	VXORPS Z8, Z8, Z8
	VXORPS Z9, Z9, Z9
	VXORPS Z10, Z10, Z10
	VXORPS Z11, Z11, Z11
	VXORPS Z12, Z12, Z12
	VXORPS Z13, Z13, Z13
	VXORPS Z14, Z14, Z14
	VXORPS Z15, Z15, Z15
	XORQ   SI, SI

dim4x4:
	VMOVUPS     (DX)(SI*1), Z16
	VMOVUPS     (R8)(SI*1), Z17
	VMOVUPS     (R9)(SI*1), Z18
	VMOVUPS     (R10)(SI*1), Z19
	VMOVUPS     (R12)(SI*1), Z20
	VMOVUPS     (R13)(SI*1), Z21
	VMOVUPS     (R14)(SI*1), Z22
	VMOVUPS     (R15)(SI*1), Z23
	OUTER4X4
	ADDQ        $64, SI
	CMPQ        SI, AX
	JB          dim4x4

	// Pairs: per 128-bit lane of Z(2i), [a0+a2, b0+b2, a1+a3, b1+b3] of
	// sums a = Z(2i), b = Z(2i+1).
	FOLD(VUNPCKLPS, VUNPCKHPS, Z0, Z1)
	FOLD(VUNPCKLPS, VUNPCKHPS, Z2, Z3)
	FOLD(VUNPCKLPS, VUNPCKHPS, Z4, Z5)
	FOLD(VUNPCKLPS, VUNPCKHPS, Z6, Z7)
	FOLD(VUNPCKLPS, VUNPCKHPS, Z8, Z9)
	FOLD(VUNPCKLPS, VUNPCKHPS, Z10, Z11)
	FOLD(VUNPCKLPS, VUNPCKHPS, Z12, Z13)
	FOLD(VUNPCKLPS, VUNPCKHPS, Z14, Z15)

	// Quads: per 128-bit lane of Z(4i), a partial sum of each of its four.
	FOLD(VUNPCKLPD, VUNPCKHPD, Z0, Z2)
	FOLD(VUNPCKLPD, VUNPCKHPD, Z4, Z6)
	FOLD(VUNPCKLPD, VUNPCKHPD, Z8, Z10)
	FOLD(VUNPCKLPD, VUNPCKHPD, Z12, Z14)

	// Across the 128-bit lanes: heads 0, 1 and 2, 3 in halves, then all
	// four in order.
	FOLDLANES(Z0, Z4)
	FOLDLANES(Z8, Z12)
	FOLDLANES(Z0, Z8)

	VMAXPS        Z0, Z24, Z24
	MOVQ          s0+0(FP), SI
	VMOVUPS       X0, (SI)(DI*1)
	MOVQ          s1+8(FP), SI
	VEXTRACTF32X4 $1, Z0, (SI)(DI*1)
	MOVQ          s2+16(FP), SI
	VEXTRACTF32X4 $2, Z0, (SI)(DI*1)
	MOVQ          s3+24(FP), SI
	VEXTRACTF32X4 $3, Z0, (SI)(DI*1)
	ADDQ          $16, DI
	ADDQ          BX, DX
	ADDQ          BX, R8
	ADDQ          BX, R9
	ADDQ          BX, R10
	DECQ          CX
	JNZ           keys4x4

	VPERMILPS   $0x4e, Z24, Z25
	VMAXPS      Z25, Z24, Z24
	VPERMILPS   $0xb1, Z24, Z25
	VMAXPS      Z25, Z24, Z24
	MOVL        $0x1111, SI
	KMOVW       SI, K1
	MOVQ        mx+96(FP), SI
	VCOMPRESSPS Z24, K1, (SI)
	VZEROUPPER
	RET
