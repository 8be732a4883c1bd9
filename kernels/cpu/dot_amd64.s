//go:build amd64 && !noasm

#include "textflag.h"

// Hand-written; see dot_amd64.go for the Go signatures and dot.go for the
// portable kernels each function here must match.
//
// Quantized kernels: rows of 4/8-bit codes against int8 activations (actQ in
// quant.go). Per group g of a row and token l:
//
//	sum += (scale_g·dx_g) · float(Σ_blocks dot(codes, xq))
//
// and after the last group, the "bias pass" adds Σ_g bias_g·sx_g + scale_g·cr_g,
// eight groups per step and a masked step for the last G mod 8 (sx and cr are
// zero-padded to a multiple of 8; the bias and scale rows are not, hence the
// mask). A 4-bit block is 16 bytes: broadcast to both 128-bit lanes, the upper
// lane shifted right by 4 and everything masked with 0x0f gives [low nibbles,
// high nibbles], the order actQ permutes each 32-value block of xq into. An 8-bit
// block is 32 code bytes in order.
//
// VNNI kernels (AVX-512 VNNI + VL, 256-bit EVEX) use VPDPBUSD: unsigned code
// bytes times signed activation bytes, four products summed per int32 lane.
// AVX2 kernels use VPMADDUBSW + VPMADDWD(1): exact for 4-bit codes (pair sums ≤
// 2·15·127); for 8-bit codes VPMADDUBSW would saturate (2·255·127), so they
// multiply |q−128| by xq·sign(q−128) (pair sums ≤ 2·128·127) and add back
// 128·Σxq per group (dq.xs holds 16·Σxq: one share for each of the 8 lanes).

DATA shiftq4<>+0(SB)/8, $0
DATA shiftq4<>+8(SB)/8, $0
DATA shiftq4<>+16(SB)/8, $0x0000000400000004
DATA shiftq4<>+24(SB)/8, $0x0000000400000004
GLOBL shiftq4<>(SB), RODATA|NOPTR, $32

DATA c0f<>+0(SB)/4, $0x0f0f0f0f
GLOBL c0f<>(SB), RODATA|NOPTR, $4
DATA c80<>+0(SB)/4, $0x80808080
GLOBL c80<>(SB), RODATA|NOPTR, $4
DATA ones16<>+0(SB)/4, $0x00010001
GLOBL ones16<>(SB), RODATA|NOPTR, $4

// HSUM leaves the sum of the 8 floats of Y in the low lane of X (clobbers T).
#define HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X; \
	VPSHUFD      $0x4e, X, T; \
	VADDPS       T, X, X; \
	VPSHUFD      $0xb1, X, T; \
	VADDPS       T, X, X

// qMatVec4VNNI(dst *float32, n int, w *uint32, wstride int, s, b *float32,
//     G int, xq *int8, dq *groupQ, sx, cr *float32, bpg int, mask *int32)
//
// Rows one at a time: DI dst, CX rows left, SI row codes, R8 code row stride, R9
// row scales, R10 row biases, R11 G·4, R13 dq, R14 blocks per group; per row AX
// codes, BX xq, DX g, R12 block counter. Y8 row sum, Y0 group int32 acc, Y15
// tail mask.
TEXT ·qMatVec4VNNI(SB), NOSPLIT, $0-104
	VPBROADCASTD c80<>(SB), Y11
	VPBROADCASTD ones16<>(SB), Y12
	VMOVDQU      shiftq4<>(SB), Y13
	VPBROADCASTD c0f<>(SB), Y14
	MOVQ    dst+0(FP), DI
	MOVQ    n+8(FP), CX
	MOVQ    w+16(FP), SI
	MOVQ    wstride+24(FP), R8
	MOVQ    s+32(FP), R9
	MOVQ    b+40(FP), R10
	MOVQ    G+48(FP), R11
	SHLQ    $2, R11
	MOVQ    dq+64(FP), R13
	MOVQ    bpg+88(FP), R14
	MOVQ    mask+96(FP), AX
	VMOVDQU (AX), Y15
	TESTQ   CX, CX
	JZ      done

row:
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	MOVQ   SI, AX
	MOVQ   xq+56(FP), BX
	XORQ   DX, DX

group:
	VPXOR Y0, Y0, Y0
	MOVQ  R14, R12

block:
	VBROADCASTI128 (AX), Y1
	VPSRLVD        Y13, Y1, Y1
	VPAND          Y14, Y1, Y1
	VPDPBUSD       (BX), Y1, Y0
	ADDQ           $16, AX
	ADDQ $32, BX
	DECQ R12
	JNZ  block
	VCVTDQ2PS        Y0, Y0
	VMULPS.BCST      (R13)(DX*8), Y0, Y0
	VFMADD231PS.BCST (R9)(DX*4), Y0, Y8
	INCQ DX
	CMPQ DX, G+48(FP)
	JEQ  groupsdone
	VPXOR Y4, Y4, Y4
	MOVQ  R14, R12

block2:
	VBROADCASTI128 (AX), Y5
	VPSRLVD        Y13, Y5, Y5
	VPAND          Y14, Y5, Y5
	VPDPBUSD       (BX), Y5, Y4
	ADDQ           $16, AX
	ADDQ $32, BX
	DECQ R12
	JNZ  block2
	VCVTDQ2PS        Y4, Y4
	VMULPS.BCST      (R13)(DX*8), Y4, Y4
	VFMADD231PS.BCST (R9)(DX*4), Y4, Y9
	INCQ DX
	CMPQ DX, G+48(FP)
	JNE  group

groupsdone:
	VADDPS Y9, Y8, Y8

	// bias pass
	MOVQ sx+72(FP), AX
	MOVQ cr+80(FP), BX
	XORQ DX, DX
	MOVQ G+48(FP), R12
	SHRQ $3, R12
	JZ   tail

bias:
	VMOVUPS     (R10)(DX*1), Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMOVUPS     (R9)(DX*1), Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8
	ADDQ        $32, DX
	DECQ        R12
	JNZ         bias

tail:
	MOVQ        G+48(FP), R12
	ANDQ        $7, R12
	JZ          store
	VMASKMOVPS  (R10)(DX*1), Y15, Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMASKMOVPS  (R9)(DX*1), Y15, Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8

store:
	HSUM(Y8, X8, X1)
	VMOVSS X8, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	ADDQ   R11, R9
	ADDQ   R11, R10
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// qMatVec8VNNI(dst *float32, n int, w *uint32, wstride int, s, b *float32,
//     G int, xq *int8, dq *groupQ, sx, cr *float32, bpg int, mask *int32)
//
// Rows one at a time: DI dst, CX rows left, SI row codes, R8 code row stride, R9
// row scales, R10 row biases, R11 G·4, R13 dq, R14 blocks per group; per row AX
// codes, BX xq, DX g, R12 block counter. Y8 row sum, Y0 group int32 acc, Y15
// tail mask.
TEXT ·qMatVec8VNNI(SB), NOSPLIT, $0-104
	VPBROADCASTD c80<>(SB), Y11
	VPBROADCASTD ones16<>(SB), Y12
	VMOVDQU      shiftq4<>(SB), Y13
	VPBROADCASTD c0f<>(SB), Y14
	MOVQ    dst+0(FP), DI
	MOVQ    n+8(FP), CX
	MOVQ    w+16(FP), SI
	MOVQ    wstride+24(FP), R8
	MOVQ    s+32(FP), R9
	MOVQ    b+40(FP), R10
	MOVQ    G+48(FP), R11
	SHLQ    $2, R11
	MOVQ    dq+64(FP), R13
	MOVQ    bpg+88(FP), R14
	MOVQ    mask+96(FP), AX
	VMOVDQU (AX), Y15
	TESTQ   CX, CX
	JZ      done

row:
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	MOVQ   SI, AX
	MOVQ   xq+56(FP), BX
	XORQ   DX, DX

group:
	VPXOR Y0, Y0, Y0
	MOVQ  R14, R12

block:
	VMOVDQU  (AX), Y1
	VPDPBUSD (BX), Y1, Y0
	ADDQ     $32, AX
	ADDQ $32, BX
	DECQ R12
	JNZ  block
	VCVTDQ2PS        Y0, Y0
	VMULPS.BCST      (R13)(DX*8), Y0, Y0
	VFMADD231PS.BCST (R9)(DX*4), Y0, Y8
	INCQ DX
	CMPQ DX, G+48(FP)
	JEQ  groupsdone
	VPXOR Y4, Y4, Y4
	MOVQ  R14, R12

block2:
	VMOVDQU  (AX), Y5
	VPDPBUSD (BX), Y5, Y4
	ADDQ     $32, AX
	ADDQ $32, BX
	DECQ R12
	JNZ  block2
	VCVTDQ2PS        Y4, Y4
	VMULPS.BCST      (R13)(DX*8), Y4, Y4
	VFMADD231PS.BCST (R9)(DX*4), Y4, Y9
	INCQ DX
	CMPQ DX, G+48(FP)
	JNE  group

groupsdone:
	VADDPS Y9, Y8, Y8

	// bias pass
	MOVQ sx+72(FP), AX
	MOVQ cr+80(FP), BX
	XORQ DX, DX
	MOVQ G+48(FP), R12
	SHRQ $3, R12
	JZ   tail

bias:
	VMOVUPS     (R10)(DX*1), Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMOVUPS     (R9)(DX*1), Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8
	ADDQ        $32, DX
	DECQ        R12
	JNZ         bias

tail:
	MOVQ        G+48(FP), R12
	ANDQ        $7, R12
	JZ          store
	VMASKMOVPS  (R10)(DX*1), Y15, Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMASKMOVPS  (R9)(DX*1), Y15, Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8

store:
	HSUM(Y8, X8, X1)
	VMOVSS X8, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	ADDQ   R11, R9
	ADDQ   R11, R10
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// qMatVec4AVX2(dst *float32, n int, w *uint32, wstride int, s, b *float32,
//     G int, xq *int8, dq *groupQ, sx, cr *float32, bpg int, mask *int32)
//
// Rows one at a time: DI dst, CX rows left, SI row codes, R8 code row stride, R9
// row scales, R10 row biases, R11 G·4, R13 dq, R14 blocks per group; per row AX
// codes, BX xq, DX g, R12 block counter. Y8 row sum, Y0 group int32 acc, Y15
// tail mask.
TEXT ·qMatVec4AVX2(SB), NOSPLIT, $0-104
	VPBROADCASTD c80<>(SB), Y11
	VPBROADCASTD ones16<>(SB), Y12
	VMOVDQU      shiftq4<>(SB), Y13
	VPBROADCASTD c0f<>(SB), Y14
	MOVQ    dst+0(FP), DI
	MOVQ    n+8(FP), CX
	MOVQ    w+16(FP), SI
	MOVQ    wstride+24(FP), R8
	MOVQ    s+32(FP), R9
	MOVQ    b+40(FP), R10
	MOVQ    G+48(FP), R11
	SHLQ    $2, R11
	MOVQ    dq+64(FP), R13
	MOVQ    bpg+88(FP), R14
	MOVQ    mask+96(FP), AX
	VMOVDQU (AX), Y15
	TESTQ   CX, CX
	JZ      done

row:
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	MOVQ   SI, AX
	MOVQ   xq+56(FP), BX
	XORQ   DX, DX

group:
	VPXOR Y0, Y0, Y0
	MOVQ  R14, R12

block:
	VBROADCASTI128 (AX), Y1
	VPSRLVD        Y13, Y1, Y1
	VPAND          Y14, Y1, Y1
	VPMADDUBSW     (BX), Y1, Y1
	VPMADDWD       Y12, Y1, Y1
	VPADDD         Y1, Y0, Y0
	ADDQ           $16, AX
	ADDQ $32, BX
	DECQ R12
	JNZ  block
	VCVTDQ2PS    Y0, Y0
	VBROADCASTSS (R13)(DX*8), Y1
	VMULPS       Y1, Y0, Y0
	VBROADCASTSS (R9)(DX*4), Y1
	VFMADD231PS  Y1, Y0, Y8
	INCQ DX
	CMPQ DX, G+48(FP)
	JEQ  groupsdone
	VPXOR Y4, Y4, Y4
	MOVQ  R14, R12

block2:
	VBROADCASTI128 (AX), Y5
	VPSRLVD        Y13, Y5, Y5
	VPAND          Y14, Y5, Y5
	VPMADDUBSW     (BX), Y5, Y5
	VPMADDWD       Y12, Y5, Y5
	VPADDD         Y5, Y4, Y4
	ADDQ           $16, AX
	ADDQ $32, BX
	DECQ R12
	JNZ  block2
	VCVTDQ2PS    Y4, Y4
	VBROADCASTSS (R13)(DX*8), Y5
	VMULPS       Y5, Y4, Y4
	VBROADCASTSS (R9)(DX*4), Y5
	VFMADD231PS  Y5, Y4, Y9
	INCQ DX
	CMPQ DX, G+48(FP)
	JNE  group

groupsdone:
	VADDPS Y9, Y8, Y8

	// bias pass
	MOVQ sx+72(FP), AX
	MOVQ cr+80(FP), BX
	XORQ DX, DX
	MOVQ G+48(FP), R12
	SHRQ $3, R12
	JZ   tail

bias:
	VMOVUPS     (R10)(DX*1), Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMOVUPS     (R9)(DX*1), Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8
	ADDQ        $32, DX
	DECQ        R12
	JNZ         bias

tail:
	MOVQ        G+48(FP), R12
	ANDQ        $7, R12
	JZ          store
	VMASKMOVPS  (R10)(DX*1), Y15, Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMASKMOVPS  (R9)(DX*1), Y15, Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8

store:
	HSUM(Y8, X8, X1)
	VMOVSS X8, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	ADDQ   R11, R9
	ADDQ   R11, R10
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// qMatVec8AVX2(dst *float32, n int, w *uint32, wstride int, s, b *float32,
//     G int, xq *int8, dq *groupQ, sx, cr *float32, bpg int, mask *int32)
//
// Rows one at a time: DI dst, CX rows left, SI row codes, R8 code row stride, R9
// row scales, R10 row biases, R11 G·4, R13 dq, R14 blocks per group; per row AX
// codes, BX xq, DX g, R12 block counter. Y8 row sum, Y0 group int32 acc, Y15
// tail mask.
TEXT ·qMatVec8AVX2(SB), NOSPLIT, $0-104
	VPBROADCASTD c80<>(SB), Y11
	VPBROADCASTD ones16<>(SB), Y12
	VMOVDQU      shiftq4<>(SB), Y13
	VPBROADCASTD c0f<>(SB), Y14
	MOVQ    dst+0(FP), DI
	MOVQ    n+8(FP), CX
	MOVQ    w+16(FP), SI
	MOVQ    wstride+24(FP), R8
	MOVQ    s+32(FP), R9
	MOVQ    b+40(FP), R10
	MOVQ    G+48(FP), R11
	SHLQ    $2, R11
	MOVQ    dq+64(FP), R13
	MOVQ    bpg+88(FP), R14
	MOVQ    mask+96(FP), AX
	VMOVDQU (AX), Y15
	TESTQ   CX, CX
	JZ      done

row:
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	MOVQ   SI, AX
	MOVQ   xq+56(FP), BX
	XORQ   DX, DX

group:
	VPXOR Y0, Y0, Y0
	MOVQ  R14, R12

block:
	VMOVDQU    (AX), Y1
	VPXOR      Y11, Y1, Y1
	VPABSB     Y1, Y2
	VMOVDQU    (BX), Y3
	VPSIGNB    Y1, Y3, Y3
	VPMADDUBSW Y3, Y2, Y3
	VPMADDWD   Y12, Y3, Y3
	VPADDD     Y3, Y0, Y0
	ADDQ       $32, AX
	ADDQ $32, BX
	DECQ R12
	JNZ  block
	VPBROADCASTD 4(R13)(DX*8), Y1
	VPADDD       Y1, Y0, Y0
	VCVTDQ2PS    Y0, Y0
	VBROADCASTSS (R13)(DX*8), Y1
	VMULPS       Y1, Y0, Y0
	VBROADCASTSS (R9)(DX*4), Y1
	VFMADD231PS  Y1, Y0, Y8
	INCQ DX
	CMPQ DX, G+48(FP)
	JEQ  groupsdone
	VPXOR Y4, Y4, Y4
	MOVQ  R14, R12

block2:
	VMOVDQU    (AX), Y5
	VPXOR      Y11, Y5, Y5
	VPABSB     Y5, Y6
	VMOVDQU    (BX), Y7
	VPSIGNB    Y5, Y7, Y7
	VPMADDUBSW Y7, Y6, Y7
	VPMADDWD   Y12, Y7, Y7
	VPADDD     Y7, Y4, Y4
	ADDQ       $32, AX
	ADDQ $32, BX
	DECQ R12
	JNZ  block2
	VPBROADCASTD 4(R13)(DX*8), Y5
	VPADDD       Y5, Y4, Y4
	VCVTDQ2PS    Y4, Y4
	VBROADCASTSS (R13)(DX*8), Y5
	VMULPS       Y5, Y4, Y4
	VBROADCASTSS (R9)(DX*4), Y5
	VFMADD231PS  Y5, Y4, Y9
	INCQ DX
	CMPQ DX, G+48(FP)
	JNE  group

groupsdone:
	VADDPS Y9, Y8, Y8

	// bias pass
	MOVQ sx+72(FP), AX
	MOVQ cr+80(FP), BX
	XORQ DX, DX
	MOVQ G+48(FP), R12
	SHRQ $3, R12
	JZ   tail

bias:
	VMOVUPS     (R10)(DX*1), Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMOVUPS     (R9)(DX*1), Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8
	ADDQ        $32, DX
	DECQ        R12
	JNZ         bias

tail:
	MOVQ        G+48(FP), R12
	ANDQ        $7, R12
	JZ          store
	VMASKMOVPS  (R10)(DX*1), Y15, Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMASKMOVPS  (R9)(DX*1), Y15, Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8

store:
	HSUM(Y8, X8, X1)
	VMOVSS X8, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	ADDQ   R11, R9
	ADDQ   R11, R10
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// qTile4VNNI(dst *float32, dstride int, w *uint32, wstride int, s, b *float32,
//     G int, xq *int8, xstride int, dq *groupQ, sx, cr *float32, bpg int, mask *int32)
//
// A 2-row × 4-token tile: dst[l·dstride + r] for r < 2, l < 4. Each block of
// codes is unpacked once per row and used for four tokens. AX row-0 codes (row 1
// at +R8), BX/SI xq of tokens 0/2 (tokens 1/3 at +R14), R9/R12 scales of rows
// 0/1, DI dq of token 0 (tokens 1, 2, 3 at +R11, +2·R11, +CX), DX g, R13 block
// counter. Y0-Y7 int32 accs and Y8-Y15 sums, index r·4+l; Y16/Y17 the two rows'
// codes; Y18-Y25 scale·dx per (r, l).
TEXT ·qTile4VNNI(SB), NOSPLIT, $0-112
	VPBROADCASTD c0f<>(SB), Y30
	VMOVDQU32    shiftq4<>(SB), Y31
	MOVQ         w+16(FP), AX
	MOVQ         wstride+24(FP), R8
	MOVQ         xq+56(FP), BX
	MOVQ         xstride+64(FP), R14
	LEAQ         (BX)(R14*2), SI
	MOVQ         s+32(FP), R9
	MOVQ         G+48(FP), R11
	LEAQ         (R9)(R11*4), R12
	SHLQ         $3, R11
	LEAQ         (R11)(R11*2), CX
	MOVQ         dq+72(FP), DI
	XORQ         DX, DX
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15

group:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	MOVQ bpg+96(FP), R13

block:
	VBROADCASTI32X4 (AX), Y16
	VBROADCASTI32X4 (AX)(R8*1), Y17
	VPSRLVD         Y31, Y16, Y16
	VPSRLVD         Y31, Y17, Y17
	VPANDD          Y30, Y16, Y16
	VPANDD          Y30, Y17, Y17
	VPDPBUSD (BX), Y16, Y0
	VPDPBUSD (BX)(R14*1), Y16, Y1
	VPDPBUSD (SI), Y16, Y2
	VPDPBUSD (SI)(R14*1), Y16, Y3
	VPDPBUSD (BX), Y17, Y4
	VPDPBUSD (BX)(R14*1), Y17, Y5
	VPDPBUSD (SI), Y17, Y6
	VPDPBUSD (SI)(R14*1), Y17, Y7
	ADDQ $16, AX
	ADDQ $32, BX
	ADDQ $32, SI
	DECQ R13
	JNZ  block
	VBROADCASTSS (R9)(DX*4), Y16
	VBROADCASTSS (R12)(DX*4), Y17
	VMULPS.BCST (DI), Y16, Y18
	VMULPS.BCST (DI)(R11*1), Y16, Y19
	VMULPS.BCST (DI)(R11*2), Y16, Y20
	VMULPS.BCST (DI)(CX*1), Y16, Y21
	VMULPS.BCST (DI), Y17, Y22
	VMULPS.BCST (DI)(R11*1), Y17, Y23
	VMULPS.BCST (DI)(R11*2), Y17, Y24
	VMULPS.BCST (DI)(CX*1), Y17, Y25
	VCVTDQ2PS Y0, Y0
	VCVTDQ2PS Y1, Y1
	VCVTDQ2PS Y2, Y2
	VCVTDQ2PS Y3, Y3
	VCVTDQ2PS Y4, Y4
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VCVTDQ2PS Y7, Y7
	VFMADD231PS Y18, Y0, Y8
	VFMADD231PS Y19, Y1, Y9
	VFMADD231PS Y20, Y2, Y10
	VFMADD231PS Y21, Y3, Y11
	VFMADD231PS Y22, Y4, Y12
	VFMADD231PS Y23, Y5, Y13
	VFMADD231PS Y24, Y6, Y14
	VFMADD231PS Y25, Y7, Y15
	ADDQ $8, DI
	INCQ DX
	CMPQ DX, G+48(FP)
	JNE  group

	// bias pass: R10/R9 bias/scale row 0 (row 1 at +R11), BX/AX sx/cr of token 0
	MOVQ  b+40(FP), R10
	MOVQ  s+32(FP), R9
	MOVQ  G+48(FP), R11
	SHLQ  $2, R11
	MOVQ  G+48(FP), R14
	ADDQ  $7, R14
	ANDQ  $-8, R14
	SHLQ  $2, R14
	MOVQ  sx+80(FP), BX
	MOVQ  cr+88(FP), AX
	LEAQ  (BX)(R14*2), SI
	LEAQ  (AX)(R14*2), R12
	MOVQ  G+48(FP), R13
	SHRQ  $3, R13
	JZ    tail

bias:
	VMOVUPS (R10), Y0
	VMOVUPS (R10)(R11*1), Y1
	VMOVUPS (R9), Y2
	VMOVUPS (R9)(R11*1), Y3
	VFMADD231PS (BX), Y0, Y8
	VFMADD231PS (AX), Y2, Y8
	VFMADD231PS (BX)(R14*1), Y0, Y9
	VFMADD231PS (AX)(R14*1), Y2, Y9
	VFMADD231PS (SI), Y0, Y10
	VFMADD231PS (R12), Y2, Y10
	VFMADD231PS (SI)(R14*1), Y0, Y11
	VFMADD231PS (R12)(R14*1), Y2, Y11
	VFMADD231PS (BX), Y1, Y12
	VFMADD231PS (AX), Y3, Y12
	VFMADD231PS (BX)(R14*1), Y1, Y13
	VFMADD231PS (AX)(R14*1), Y3, Y13
	VFMADD231PS (SI), Y1, Y14
	VFMADD231PS (R12), Y3, Y14
	VFMADD231PS (SI)(R14*1), Y1, Y15
	VFMADD231PS (R12)(R14*1), Y3, Y15
	ADDQ $32, R10
	ADDQ $32, R9
	ADDQ $32, BX
	ADDQ $32, AX
	ADDQ $32, SI
	ADDQ $32, R12
	DECQ R13
	JNZ  bias

tail:
	MOVQ       G+48(FP), R13
	ANDQ       $7, R13
	JZ         store
	MOVQ       mask+104(FP), R13
	VMOVDQU    (R13), Y7
	VMASKMOVPS (R10), Y7, Y0
	VMASKMOVPS (R10)(R11*1), Y7, Y1
	VMASKMOVPS (R9), Y7, Y2
	VMASKMOVPS (R9)(R11*1), Y7, Y3
	VFMADD231PS (BX), Y0, Y8
	VFMADD231PS (AX), Y2, Y8
	VFMADD231PS (BX)(R14*1), Y0, Y9
	VFMADD231PS (AX)(R14*1), Y2, Y9
	VFMADD231PS (SI), Y0, Y10
	VFMADD231PS (R12), Y2, Y10
	VFMADD231PS (SI)(R14*1), Y0, Y11
	VFMADD231PS (R12)(R14*1), Y2, Y11
	VFMADD231PS (BX), Y1, Y12
	VFMADD231PS (AX), Y3, Y12
	VFMADD231PS (BX)(R14*1), Y1, Y13
	VFMADD231PS (AX)(R14*1), Y3, Y13
	VFMADD231PS (SI), Y1, Y14
	VFMADD231PS (R12), Y3, Y14
	VFMADD231PS (SI)(R14*1), Y1, Y15
	VFMADD231PS (R12)(R14*1), Y3, Y15

store:
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), R8
	SHLQ $2, R8
	HSUM(Y8, X8, X0)
	VMOVSS X8, 0(DI)
	HSUM(Y12, X12, X0)
	VMOVSS X12, 4(DI)
	ADDQ R8, DI
	HSUM(Y9, X9, X0)
	VMOVSS X9, 0(DI)
	HSUM(Y13, X13, X0)
	VMOVSS X13, 4(DI)
	ADDQ R8, DI
	HSUM(Y10, X10, X0)
	VMOVSS X10, 0(DI)
	HSUM(Y14, X14, X0)
	VMOVSS X14, 4(DI)
	ADDQ R8, DI
	HSUM(Y11, X11, X0)
	VMOVSS X11, 0(DI)
	HSUM(Y15, X15, X0)
	VMOVSS X15, 4(DI)
	VZEROUPPER
	RET

// qTile8VNNI(dst *float32, dstride int, w *uint32, wstride int, s, b *float32,
//     G int, xq *int8, xstride int, dq *groupQ, sx, cr *float32, bpg int, mask *int32)
//
// A 2-row × 4-token tile: dst[l·dstride + r] for r < 2, l < 4. Each block of
// codes is unpacked once per row and used for four tokens. AX row-0 codes (row 1
// at +R8), BX/SI xq of tokens 0/2 (tokens 1/3 at +R14), R9/R12 scales of rows
// 0/1, DI dq of token 0 (tokens 1, 2, 3 at +R11, +2·R11, +CX), DX g, R13 block
// counter. Y0-Y7 int32 accs and Y8-Y15 sums, index r·4+l; Y16/Y17 the two rows'
// codes; Y18-Y25 scale·dx per (r, l).
TEXT ·qTile8VNNI(SB), NOSPLIT, $0-112
	VPBROADCASTD c0f<>(SB), Y30
	VMOVDQU32    shiftq4<>(SB), Y31
	MOVQ         w+16(FP), AX
	MOVQ         wstride+24(FP), R8
	MOVQ         xq+56(FP), BX
	MOVQ         xstride+64(FP), R14
	LEAQ         (BX)(R14*2), SI
	MOVQ         s+32(FP), R9
	MOVQ         G+48(FP), R11
	LEAQ         (R9)(R11*4), R12
	SHLQ         $3, R11
	LEAQ         (R11)(R11*2), CX
	MOVQ         dq+72(FP), DI
	XORQ         DX, DX
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15

group:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	MOVQ bpg+96(FP), R13

block:
	VMOVDQU32 (AX), Y16
	VMOVDQU32 (AX)(R8*1), Y17
	VPDPBUSD (BX), Y16, Y0
	VPDPBUSD (BX)(R14*1), Y16, Y1
	VPDPBUSD (SI), Y16, Y2
	VPDPBUSD (SI)(R14*1), Y16, Y3
	VPDPBUSD (BX), Y17, Y4
	VPDPBUSD (BX)(R14*1), Y17, Y5
	VPDPBUSD (SI), Y17, Y6
	VPDPBUSD (SI)(R14*1), Y17, Y7
	ADDQ $32, AX
	ADDQ $32, BX
	ADDQ $32, SI
	DECQ R13
	JNZ  block
	VBROADCASTSS (R9)(DX*4), Y16
	VBROADCASTSS (R12)(DX*4), Y17
	VMULPS.BCST (DI), Y16, Y18
	VMULPS.BCST (DI)(R11*1), Y16, Y19
	VMULPS.BCST (DI)(R11*2), Y16, Y20
	VMULPS.BCST (DI)(CX*1), Y16, Y21
	VMULPS.BCST (DI), Y17, Y22
	VMULPS.BCST (DI)(R11*1), Y17, Y23
	VMULPS.BCST (DI)(R11*2), Y17, Y24
	VMULPS.BCST (DI)(CX*1), Y17, Y25
	VCVTDQ2PS Y0, Y0
	VCVTDQ2PS Y1, Y1
	VCVTDQ2PS Y2, Y2
	VCVTDQ2PS Y3, Y3
	VCVTDQ2PS Y4, Y4
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VCVTDQ2PS Y7, Y7
	VFMADD231PS Y18, Y0, Y8
	VFMADD231PS Y19, Y1, Y9
	VFMADD231PS Y20, Y2, Y10
	VFMADD231PS Y21, Y3, Y11
	VFMADD231PS Y22, Y4, Y12
	VFMADD231PS Y23, Y5, Y13
	VFMADD231PS Y24, Y6, Y14
	VFMADD231PS Y25, Y7, Y15
	ADDQ $8, DI
	INCQ DX
	CMPQ DX, G+48(FP)
	JNE  group

	// bias pass: R10/R9 bias/scale row 0 (row 1 at +R11), BX/AX sx/cr of token 0
	MOVQ  b+40(FP), R10
	MOVQ  s+32(FP), R9
	MOVQ  G+48(FP), R11
	SHLQ  $2, R11
	MOVQ  G+48(FP), R14
	ADDQ  $7, R14
	ANDQ  $-8, R14
	SHLQ  $2, R14
	MOVQ  sx+80(FP), BX
	MOVQ  cr+88(FP), AX
	LEAQ  (BX)(R14*2), SI
	LEAQ  (AX)(R14*2), R12
	MOVQ  G+48(FP), R13
	SHRQ  $3, R13
	JZ    tail

bias:
	VMOVUPS (R10), Y0
	VMOVUPS (R10)(R11*1), Y1
	VMOVUPS (R9), Y2
	VMOVUPS (R9)(R11*1), Y3
	VFMADD231PS (BX), Y0, Y8
	VFMADD231PS (AX), Y2, Y8
	VFMADD231PS (BX)(R14*1), Y0, Y9
	VFMADD231PS (AX)(R14*1), Y2, Y9
	VFMADD231PS (SI), Y0, Y10
	VFMADD231PS (R12), Y2, Y10
	VFMADD231PS (SI)(R14*1), Y0, Y11
	VFMADD231PS (R12)(R14*1), Y2, Y11
	VFMADD231PS (BX), Y1, Y12
	VFMADD231PS (AX), Y3, Y12
	VFMADD231PS (BX)(R14*1), Y1, Y13
	VFMADD231PS (AX)(R14*1), Y3, Y13
	VFMADD231PS (SI), Y1, Y14
	VFMADD231PS (R12), Y3, Y14
	VFMADD231PS (SI)(R14*1), Y1, Y15
	VFMADD231PS (R12)(R14*1), Y3, Y15
	ADDQ $32, R10
	ADDQ $32, R9
	ADDQ $32, BX
	ADDQ $32, AX
	ADDQ $32, SI
	ADDQ $32, R12
	DECQ R13
	JNZ  bias

tail:
	MOVQ       G+48(FP), R13
	ANDQ       $7, R13
	JZ         store
	MOVQ       mask+104(FP), R13
	VMOVDQU    (R13), Y7
	VMASKMOVPS (R10), Y7, Y0
	VMASKMOVPS (R10)(R11*1), Y7, Y1
	VMASKMOVPS (R9), Y7, Y2
	VMASKMOVPS (R9)(R11*1), Y7, Y3
	VFMADD231PS (BX), Y0, Y8
	VFMADD231PS (AX), Y2, Y8
	VFMADD231PS (BX)(R14*1), Y0, Y9
	VFMADD231PS (AX)(R14*1), Y2, Y9
	VFMADD231PS (SI), Y0, Y10
	VFMADD231PS (R12), Y2, Y10
	VFMADD231PS (SI)(R14*1), Y0, Y11
	VFMADD231PS (R12)(R14*1), Y2, Y11
	VFMADD231PS (BX), Y1, Y12
	VFMADD231PS (AX), Y3, Y12
	VFMADD231PS (BX)(R14*1), Y1, Y13
	VFMADD231PS (AX)(R14*1), Y3, Y13
	VFMADD231PS (SI), Y1, Y14
	VFMADD231PS (R12), Y3, Y14
	VFMADD231PS (SI)(R14*1), Y1, Y15
	VFMADD231PS (R12)(R14*1), Y3, Y15

store:
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), R8
	SHLQ $2, R8
	HSUM(Y8, X8, X0)
	VMOVSS X8, 0(DI)
	HSUM(Y12, X12, X0)
	VMOVSS X12, 4(DI)
	ADDQ R8, DI
	HSUM(Y9, X9, X0)
	VMOVSS X9, 0(DI)
	HSUM(Y13, X13, X0)
	VMOVSS X13, 4(DI)
	ADDQ R8, DI
	HSUM(Y10, X10, X0)
	VMOVSS X10, 0(DI)
	HSUM(Y14, X14, X0)
	VMOVSS X14, 4(DI)
	ADDQ R8, DI
	HSUM(Y11, X11, X0)
	VMOVSS X11, 0(DI)
	HSUM(Y15, X15, X0)
	VMOVSS X15, 4(DI)
	VZEROUPPER
	RET

// qTile4AVX2: as qTile4VNNI for a 2-row × 2-token tile (AVX2 has 16
// vector registers). Y0-Y3 int32 accs, Y4-Y7 sums, index r·2+l; Y8/Y9 codes.
TEXT ·qTile4AVX2(SB), NOSPLIT, $0-112
	VPBROADCASTD c80<>(SB), Y11
	VPBROADCASTD ones16<>(SB), Y12
	VMOVDQU      shiftq4<>(SB), Y13
	VPBROADCASTD c0f<>(SB), Y14
	MOVQ         w+16(FP), AX
	MOVQ         wstride+24(FP), R8
	MOVQ         xq+56(FP), BX
	MOVQ         xstride+64(FP), R14
	MOVQ         s+32(FP), R9
	MOVQ         G+48(FP), R11
	LEAQ         (R9)(R11*4), R12
	SHLQ         $3, R11
	MOVQ         dq+72(FP), DI
	XORQ         DX, DX
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

group:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	MOVQ bpg+96(FP), R13

block:
	VBROADCASTI128 (AX), Y8
	VBROADCASTI128 (AX)(R8*1), Y9
	VPSRLVD        Y13, Y8, Y8
	VPSRLVD        Y13, Y9, Y9
	VPAND          Y14, Y8, Y8
	VPAND          Y14, Y9, Y9
	VPMADDUBSW (BX), Y8, Y10
	VPMADDWD   Y12, Y10, Y10
	VPADDD     Y10, Y0, Y0
	VPMADDUBSW (BX)(R14*1), Y8, Y10
	VPMADDWD   Y12, Y10, Y10
	VPADDD     Y10, Y1, Y1
	VPMADDUBSW (BX), Y9, Y10
	VPMADDWD   Y12, Y10, Y10
	VPADDD     Y10, Y2, Y2
	VPMADDUBSW (BX)(R14*1), Y9, Y10
	VPMADDWD   Y12, Y10, Y10
	VPADDD     Y10, Y3, Y3
	ADDQ $16, AX
	ADDQ $32, BX
	DECQ R13
	JNZ  block
	VBROADCASTSS (R9)(DX*4), Y8
	VBROADCASTSS (R12)(DX*4), Y9
	VBROADCASTSS (DI), Y10
	VBROADCASTSS (DI)(R11*1), Y15
	VCVTDQ2PS   Y0, Y0
	VMULPS      Y10, Y0, Y0
	VFMADD231PS Y8, Y0, Y4
	VCVTDQ2PS   Y1, Y1
	VMULPS      Y15, Y1, Y1
	VFMADD231PS Y8, Y1, Y5
	VCVTDQ2PS   Y2, Y2
	VMULPS      Y10, Y2, Y2
	VFMADD231PS Y9, Y2, Y6
	VCVTDQ2PS   Y3, Y3
	VMULPS      Y15, Y3, Y3
	VFMADD231PS Y9, Y3, Y7
	ADDQ $8, DI
	INCQ DX
	CMPQ DX, G+48(FP)
	JNE  group

	// bias pass: R10/R9 bias/scale row 0 (row 1 at +R11), BX/AX sx/cr of token 0
	MOVQ  b+40(FP), R10
	MOVQ  s+32(FP), R9
	MOVQ  G+48(FP), R11
	SHLQ  $2, R11
	MOVQ  G+48(FP), R14
	ADDQ  $7, R14
	ANDQ  $-8, R14
	SHLQ  $2, R14
	MOVQ  sx+80(FP), BX
	MOVQ  cr+88(FP), AX
	MOVQ  G+48(FP), R13
	SHRQ  $3, R13
	JZ    tail

bias:
	VMOVUPS (R10), Y0
	VMOVUPS (R10)(R11*1), Y1
	VMOVUPS (R9), Y2
	VMOVUPS (R9)(R11*1), Y3
	VFMADD231PS (BX), Y0, Y4
	VFMADD231PS (AX), Y2, Y4
	VFMADD231PS (BX)(R14*1), Y0, Y5
	VFMADD231PS (AX)(R14*1), Y2, Y5
	VFMADD231PS (BX), Y1, Y6
	VFMADD231PS (AX), Y3, Y6
	VFMADD231PS (BX)(R14*1), Y1, Y7
	VFMADD231PS (AX)(R14*1), Y3, Y7
	ADDQ $32, R10
	ADDQ $32, R9
	ADDQ $32, BX
	ADDQ $32, AX
	DECQ R13
	JNZ  bias

tail:
	MOVQ       G+48(FP), R13
	ANDQ       $7, R13
	JZ         store
	MOVQ       mask+104(FP), R13
	VMOVDQU    (R13), Y15
	VMASKMOVPS (R10), Y15, Y0
	VMASKMOVPS (R10)(R11*1), Y15, Y1
	VMASKMOVPS (R9), Y15, Y2
	VMASKMOVPS (R9)(R11*1), Y15, Y3
	VFMADD231PS (BX), Y0, Y4
	VFMADD231PS (AX), Y2, Y4
	VFMADD231PS (BX)(R14*1), Y0, Y5
	VFMADD231PS (AX)(R14*1), Y2, Y5
	VFMADD231PS (BX), Y1, Y6
	VFMADD231PS (AX), Y3, Y6
	VFMADD231PS (BX)(R14*1), Y1, Y7
	VFMADD231PS (AX)(R14*1), Y3, Y7

store:
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), R8
	SHLQ $2, R8
	HSUM(Y4, X4, X0)
	VMOVSS X4, 0(DI)
	HSUM(Y6, X6, X0)
	VMOVSS X6, 4(DI)
	ADDQ R8, DI
	HSUM(Y5, X5, X0)
	VMOVSS X5, 0(DI)
	HSUM(Y7, X7, X0)
	VMOVSS X7, 4(DI)
	VZEROUPPER
	RET

// qTile8AVX2: as qTile8VNNI for a 2-row × 2-token tile (AVX2 has 16
// vector registers). Y0-Y3 int32 accs, Y4-Y7 sums, index r·2+l; Y8/Y9 codes.
TEXT ·qTile8AVX2(SB), NOSPLIT, $0-112
	VPBROADCASTD c80<>(SB), Y11
	VPBROADCASTD ones16<>(SB), Y12
	VMOVDQU      shiftq4<>(SB), Y13
	VPBROADCASTD c0f<>(SB), Y14
	MOVQ         w+16(FP), AX
	MOVQ         wstride+24(FP), R8
	MOVQ         xq+56(FP), BX
	MOVQ         xstride+64(FP), R14
	MOVQ         s+32(FP), R9
	MOVQ         G+48(FP), R11
	LEAQ         (R9)(R11*4), R12
	SHLQ         $3, R11
	MOVQ         dq+72(FP), DI
	XORQ         DX, DX
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

group:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	MOVQ bpg+96(FP), R13

block:
	VMOVDQU (AX), Y8
	VMOVDQU (AX)(R8*1), Y9
	VPXOR   Y11, Y8, Y8
	VPXOR   Y11, Y9, Y9
	VMOVDQU    (BX), Y10
	VPSIGNB    Y8, Y10, Y10
	VPABSB     Y8, Y15
	VPMADDUBSW Y10, Y15, Y10
	VPMADDWD   Y12, Y10, Y10
	VPADDD     Y10, Y0, Y0
	VMOVDQU    (BX)(R14*1), Y10
	VPSIGNB    Y8, Y10, Y10
	VPABSB     Y8, Y15
	VPMADDUBSW Y10, Y15, Y10
	VPMADDWD   Y12, Y10, Y10
	VPADDD     Y10, Y1, Y1
	VMOVDQU    (BX), Y10
	VPSIGNB    Y9, Y10, Y10
	VPABSB     Y9, Y15
	VPMADDUBSW Y10, Y15, Y10
	VPMADDWD   Y12, Y10, Y10
	VPADDD     Y10, Y2, Y2
	VMOVDQU    (BX)(R14*1), Y10
	VPSIGNB    Y9, Y10, Y10
	VPABSB     Y9, Y15
	VPMADDUBSW Y10, Y15, Y10
	VPMADDWD   Y12, Y10, Y10
	VPADDD     Y10, Y3, Y3
	ADDQ $32, AX
	ADDQ $32, BX
	DECQ R13
	JNZ  block
	VPBROADCASTD 4(DI), Y10
	VPBROADCASTD 4(DI)(R11*1), Y15
	VPADDD       Y10, Y0, Y0
	VPADDD       Y10, Y2, Y2
	VPADDD       Y15, Y1, Y1
	VPADDD       Y15, Y3, Y3
	VBROADCASTSS (R9)(DX*4), Y8
	VBROADCASTSS (R12)(DX*4), Y9
	VBROADCASTSS (DI), Y10
	VBROADCASTSS (DI)(R11*1), Y15
	VCVTDQ2PS   Y0, Y0
	VMULPS      Y10, Y0, Y0
	VFMADD231PS Y8, Y0, Y4
	VCVTDQ2PS   Y1, Y1
	VMULPS      Y15, Y1, Y1
	VFMADD231PS Y8, Y1, Y5
	VCVTDQ2PS   Y2, Y2
	VMULPS      Y10, Y2, Y2
	VFMADD231PS Y9, Y2, Y6
	VCVTDQ2PS   Y3, Y3
	VMULPS      Y15, Y3, Y3
	VFMADD231PS Y9, Y3, Y7
	ADDQ $8, DI
	INCQ DX
	CMPQ DX, G+48(FP)
	JNE  group

	// bias pass: R10/R9 bias/scale row 0 (row 1 at +R11), BX/AX sx/cr of token 0
	MOVQ  b+40(FP), R10
	MOVQ  s+32(FP), R9
	MOVQ  G+48(FP), R11
	SHLQ  $2, R11
	MOVQ  G+48(FP), R14
	ADDQ  $7, R14
	ANDQ  $-8, R14
	SHLQ  $2, R14
	MOVQ  sx+80(FP), BX
	MOVQ  cr+88(FP), AX
	MOVQ  G+48(FP), R13
	SHRQ  $3, R13
	JZ    tail

bias:
	VMOVUPS (R10), Y0
	VMOVUPS (R10)(R11*1), Y1
	VMOVUPS (R9), Y2
	VMOVUPS (R9)(R11*1), Y3
	VFMADD231PS (BX), Y0, Y4
	VFMADD231PS (AX), Y2, Y4
	VFMADD231PS (BX)(R14*1), Y0, Y5
	VFMADD231PS (AX)(R14*1), Y2, Y5
	VFMADD231PS (BX), Y1, Y6
	VFMADD231PS (AX), Y3, Y6
	VFMADD231PS (BX)(R14*1), Y1, Y7
	VFMADD231PS (AX)(R14*1), Y3, Y7
	ADDQ $32, R10
	ADDQ $32, R9
	ADDQ $32, BX
	ADDQ $32, AX
	DECQ R13
	JNZ  bias

tail:
	MOVQ       G+48(FP), R13
	ANDQ       $7, R13
	JZ         store
	MOVQ       mask+104(FP), R13
	VMOVDQU    (R13), Y15
	VMASKMOVPS (R10), Y15, Y0
	VMASKMOVPS (R10)(R11*1), Y15, Y1
	VMASKMOVPS (R9), Y15, Y2
	VMASKMOVPS (R9)(R11*1), Y15, Y3
	VFMADD231PS (BX), Y0, Y4
	VFMADD231PS (AX), Y2, Y4
	VFMADD231PS (BX)(R14*1), Y0, Y5
	VFMADD231PS (AX)(R14*1), Y2, Y5
	VFMADD231PS (BX), Y1, Y6
	VFMADD231PS (AX), Y3, Y6
	VFMADD231PS (BX)(R14*1), Y1, Y7
	VFMADD231PS (AX)(R14*1), Y3, Y7

store:
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), R8
	SHLQ $2, R8
	HSUM(Y4, X4, X0)
	VMOVSS X4, 0(DI)
	HSUM(Y6, X6, X0)
	VMOVSS X6, 4(DI)
	ADDQ R8, DI
	HSUM(Y5, X5, X0)
	VMOVSS X5, 0(DI)
	HSUM(Y7, X7, X0)
	VMOVSS X7, 4(DI)
	VZEROUPPER
	RET

// The *64 kernels below run groups that are a multiple of 64 codes, 64 at a
// time. For 4-bit codes actQ then permutes each 64-value chunk of xq to [x0 x2 …
// x62 x1 x3 … x63]: 32 code bytes hold the even codes in their low nibbles and
// the odd codes in their high nibbles. The VNNI ones use 512-bit registers (one
// VPDPBUSD per 64 codes); the sums are folded to 256 bits before the bias pass.

DATA shiftz4<>+0(SB)/8, $0
DATA shiftz4<>+8(SB)/8, $0
DATA shiftz4<>+16(SB)/8, $0
DATA shiftz4<>+24(SB)/8, $0
DATA shiftz4<>+32(SB)/8, $4
DATA shiftz4<>+40(SB)/8, $4
DATA shiftz4<>+48(SB)/8, $4
DATA shiftz4<>+56(SB)/8, $4
GLOBL shiftz4<>(SB), RODATA|NOPTR, $64

// qMatVec4VNNI64: qMatVec4VNNI for groups of 64·bpg codes (bpg here
// counts 64-code chunks).
TEXT ·qMatVec4VNNI64(SB), NOSPLIT, $0-104
	VPBROADCASTD c0f<>(SB), Z14
	VMOVDQU64    shiftz4<>(SB), Z13
	MOVQ    dst+0(FP), DI
	MOVQ    n+8(FP), CX
	MOVQ    w+16(FP), SI
	MOVQ    wstride+24(FP), R8
	MOVQ    s+32(FP), R9
	MOVQ    b+40(FP), R10
	MOVQ    G+48(FP), R11
	SHLQ    $2, R11
	MOVQ    dq+64(FP), R13
	MOVQ    bpg+88(FP), R14
	MOVQ    mask+96(FP), AX
	VMOVDQU (AX), Y15
	TESTQ   CX, CX
	JZ      done

row:
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	MOVQ   SI, AX
	MOVQ   xq+56(FP), BX
	XORQ   DX, DX

group:
	VPXORD Z0, Z0, Z0
	MOVQ  R14, R12

block:
	VBROADCASTI64X4 (AX), Z1
	VPSRLVQ         Z13, Z1, Z1
	VPANDD          Z14, Z1, Z1
	VPDPBUSD        (BX), Z1, Z0
	ADDQ            $32, AX
	ADDQ $64, BX
	DECQ R12
	JNZ  block
	VCVTDQ2PS        Z0, Z0
	VMULPS.BCST      (R13)(DX*8), Z0, Z0
	VFMADD231PS.BCST (R9)(DX*4), Z0, Z8
	INCQ DX
	CMPQ DX, G+48(FP)
	JEQ  groupsdone
	VPXORD Z4, Z4, Z4
	MOVQ  R14, R12

block2:
	VBROADCASTI64X4 (AX), Z5
	VPSRLVQ         Z13, Z5, Z5
	VPANDD          Z14, Z5, Z5
	VPDPBUSD        (BX), Z5, Z4
	ADDQ            $32, AX
	ADDQ $64, BX
	DECQ R12
	JNZ  block2
	VCVTDQ2PS        Z4, Z4
	VMULPS.BCST      (R13)(DX*8), Z4, Z4
	VFMADD231PS.BCST (R9)(DX*4), Z4, Z9
	INCQ DX
	CMPQ DX, G+48(FP)
	JNE  group

groupsdone:
	VADDPS Z9, Z8, Z8
	VEXTRACTF64X4 $1, Z8, Y1
	VADDPS        Y1, Y8, Y8

	// bias pass
	MOVQ sx+72(FP), AX
	MOVQ cr+80(FP), BX
	XORQ DX, DX
	MOVQ G+48(FP), R12
	SHRQ $3, R12
	JZ   tail

bias:
	VMOVUPS     (R10)(DX*1), Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMOVUPS     (R9)(DX*1), Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8
	ADDQ        $32, DX
	DECQ        R12
	JNZ         bias

tail:
	MOVQ        G+48(FP), R12
	ANDQ        $7, R12
	JZ          store
	VMASKMOVPS  (R10)(DX*1), Y15, Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMASKMOVPS  (R9)(DX*1), Y15, Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8

store:
	HSUM(Y8, X8, X1)
	VMOVSS X8, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	ADDQ   R11, R9
	ADDQ   R11, R10
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// qMatVec8VNNI64: qMatVec8VNNI for groups of 64·bpg codes (bpg here
// counts 64-code chunks).
TEXT ·qMatVec8VNNI64(SB), NOSPLIT, $0-104
	VPBROADCASTD c0f<>(SB), Z14
	VMOVDQU64    shiftz4<>(SB), Z13
	MOVQ    dst+0(FP), DI
	MOVQ    n+8(FP), CX
	MOVQ    w+16(FP), SI
	MOVQ    wstride+24(FP), R8
	MOVQ    s+32(FP), R9
	MOVQ    b+40(FP), R10
	MOVQ    G+48(FP), R11
	SHLQ    $2, R11
	MOVQ    dq+64(FP), R13
	MOVQ    bpg+88(FP), R14
	MOVQ    mask+96(FP), AX
	VMOVDQU (AX), Y15
	TESTQ   CX, CX
	JZ      done

row:
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	MOVQ   SI, AX
	MOVQ   xq+56(FP), BX
	XORQ   DX, DX

group:
	VPXORD Z0, Z0, Z0
	MOVQ  R14, R12

block:
	VMOVDQU64 (AX), Z1
	VPDPBUSD  (BX), Z1, Z0
	ADDQ      $64, AX
	ADDQ $64, BX
	DECQ R12
	JNZ  block
	VCVTDQ2PS        Z0, Z0
	VMULPS.BCST      (R13)(DX*8), Z0, Z0
	VFMADD231PS.BCST (R9)(DX*4), Z0, Z8
	INCQ DX
	CMPQ DX, G+48(FP)
	JEQ  groupsdone
	VPXORD Z4, Z4, Z4
	MOVQ  R14, R12

block2:
	VMOVDQU64 (AX), Z5
	VPDPBUSD  (BX), Z5, Z4
	ADDQ      $64, AX
	ADDQ $64, BX
	DECQ R12
	JNZ  block2
	VCVTDQ2PS        Z4, Z4
	VMULPS.BCST      (R13)(DX*8), Z4, Z4
	VFMADD231PS.BCST (R9)(DX*4), Z4, Z9
	INCQ DX
	CMPQ DX, G+48(FP)
	JNE  group

groupsdone:
	VADDPS Z9, Z8, Z8
	VEXTRACTF64X4 $1, Z8, Y1
	VADDPS        Y1, Y8, Y8

	// bias pass
	MOVQ sx+72(FP), AX
	MOVQ cr+80(FP), BX
	XORQ DX, DX
	MOVQ G+48(FP), R12
	SHRQ $3, R12
	JZ   tail

bias:
	VMOVUPS     (R10)(DX*1), Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMOVUPS     (R9)(DX*1), Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8
	ADDQ        $32, DX
	DECQ        R12
	JNZ         bias

tail:
	MOVQ        G+48(FP), R12
	ANDQ        $7, R12
	JZ          store
	VMASKMOVPS  (R10)(DX*1), Y15, Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMASKMOVPS  (R9)(DX*1), Y15, Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8

store:
	HSUM(Y8, X8, X1)
	VMOVSS X8, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	ADDQ   R11, R9
	ADDQ   R11, R10
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// qMatVec4AVX264: qMatVec4AVX2 for groups of 64·bpg codes (bpg here
// counts 64-code chunks).
TEXT ·qMatVec4AVX264(SB), NOSPLIT, $0-104
	VPBROADCASTD ones16<>(SB), Y12
	VPBROADCASTD c0f<>(SB), Y14
	MOVQ    dst+0(FP), DI
	MOVQ    n+8(FP), CX
	MOVQ    w+16(FP), SI
	MOVQ    wstride+24(FP), R8
	MOVQ    s+32(FP), R9
	MOVQ    b+40(FP), R10
	MOVQ    G+48(FP), R11
	SHLQ    $2, R11
	MOVQ    dq+64(FP), R13
	MOVQ    bpg+88(FP), R14
	MOVQ    mask+96(FP), AX
	VMOVDQU (AX), Y15
	TESTQ   CX, CX
	JZ      done

row:
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	MOVQ   SI, AX
	MOVQ   xq+56(FP), BX
	XORQ   DX, DX

group:
	VPXOR Y0, Y0, Y0
	MOVQ  R14, R12

block:
	VMOVDQU    (AX), Y1
	VPSRLW     $4, Y1, Y2
	VPAND      Y14, Y1, Y1
	VPAND      Y14, Y2, Y2
	VPMADDUBSW (BX), Y1, Y1
	VPMADDUBSW 32(BX), Y2, Y2
	VPADDW     Y2, Y1, Y1
	VPMADDWD   Y12, Y1, Y1
	VPADDD     Y1, Y0, Y0
	ADDQ       $32, AX
	ADDQ $64, BX
	DECQ R12
	JNZ  block
	VCVTDQ2PS    Y0, Y0
	VBROADCASTSS (R13)(DX*8), Y1
	VMULPS       Y1, Y0, Y0
	VBROADCASTSS (R9)(DX*4), Y1
	VFMADD231PS  Y1, Y0, Y8
	INCQ DX
	CMPQ DX, G+48(FP)
	JEQ  groupsdone
	VPXOR Y4, Y4, Y4
	MOVQ  R14, R12

block2:
	VMOVDQU    (AX), Y5
	VPSRLW     $4, Y5, Y6
	VPAND      Y14, Y5, Y5
	VPAND      Y14, Y6, Y6
	VPMADDUBSW (BX), Y5, Y5
	VPMADDUBSW 32(BX), Y6, Y6
	VPADDW     Y6, Y5, Y5
	VPMADDWD   Y12, Y5, Y5
	VPADDD     Y5, Y4, Y4
	ADDQ       $32, AX
	ADDQ $64, BX
	DECQ R12
	JNZ  block2
	VCVTDQ2PS    Y4, Y4
	VBROADCASTSS (R13)(DX*8), Y5
	VMULPS       Y5, Y4, Y4
	VBROADCASTSS (R9)(DX*4), Y5
	VFMADD231PS  Y5, Y4, Y9
	INCQ DX
	CMPQ DX, G+48(FP)
	JNE  group

groupsdone:
	VADDPS Y9, Y8, Y8

	// bias pass
	MOVQ sx+72(FP), AX
	MOVQ cr+80(FP), BX
	XORQ DX, DX
	MOVQ G+48(FP), R12
	SHRQ $3, R12
	JZ   tail

bias:
	VMOVUPS     (R10)(DX*1), Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMOVUPS     (R9)(DX*1), Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8
	ADDQ        $32, DX
	DECQ        R12
	JNZ         bias

tail:
	MOVQ        G+48(FP), R12
	ANDQ        $7, R12
	JZ          store
	VMASKMOVPS  (R10)(DX*1), Y15, Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMASKMOVPS  (R9)(DX*1), Y15, Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8

store:
	HSUM(Y8, X8, X1)
	VMOVSS X8, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	ADDQ   R11, R9
	ADDQ   R11, R10
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// qTile4VNNI64: qTile4VNNI for groups of 64·bpg codes, in 512-bit
// registers: Z0-Z7 int32 accs, Z8-Z15 sums, Z16/Z17 codes, Z18-Z25 scale·dx.
TEXT ·qTile4VNNI64(SB), NOSPLIT, $0-112
	VPBROADCASTD c0f<>(SB), Z30
	VMOVDQU64    shiftz4<>(SB), Z31
	MOVQ         w+16(FP), AX
	MOVQ         wstride+24(FP), R8
	MOVQ         xq+56(FP), BX
	MOVQ         xstride+64(FP), R14
	LEAQ         (BX)(R14*2), SI
	MOVQ         s+32(FP), R9
	MOVQ         G+48(FP), R11
	LEAQ         (R9)(R11*4), R12
	SHLQ         $3, R11
	LEAQ         (R11)(R11*2), CX
	MOVQ         dq+72(FP), DI
	XORQ         DX, DX
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

group:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	MOVQ bpg+96(FP), R13

block:
	VBROADCASTI64X4 (AX), Z16
	VBROADCASTI64X4 (AX)(R8*1), Z17
	VPSRLVQ         Z31, Z16, Z16
	VPSRLVQ         Z31, Z17, Z17
	VPANDD          Z30, Z16, Z16
	VPANDD          Z30, Z17, Z17
	VPDPBUSD (BX), Z16, Z0
	VPDPBUSD (BX)(R14*1), Z16, Z1
	VPDPBUSD (SI), Z16, Z2
	VPDPBUSD (SI)(R14*1), Z16, Z3
	VPDPBUSD (BX), Z17, Z4
	VPDPBUSD (BX)(R14*1), Z17, Z5
	VPDPBUSD (SI), Z17, Z6
	VPDPBUSD (SI)(R14*1), Z17, Z7
	ADDQ $32, AX
	ADDQ $64, BX
	ADDQ $64, SI
	DECQ R13
	JNZ  block
	VBROADCASTSS (R9)(DX*4), Z16
	VBROADCASTSS (R12)(DX*4), Z17
	VMULPS.BCST (DI), Z16, Z18
	VMULPS.BCST (DI)(R11*1), Z16, Z19
	VMULPS.BCST (DI)(R11*2), Z16, Z20
	VMULPS.BCST (DI)(CX*1), Z16, Z21
	VMULPS.BCST (DI), Z17, Z22
	VMULPS.BCST (DI)(R11*1), Z17, Z23
	VMULPS.BCST (DI)(R11*2), Z17, Z24
	VMULPS.BCST (DI)(CX*1), Z17, Z25
	VCVTDQ2PS Z0, Z0
	VCVTDQ2PS Z1, Z1
	VCVTDQ2PS Z2, Z2
	VCVTDQ2PS Z3, Z3
	VCVTDQ2PS Z4, Z4
	VCVTDQ2PS Z5, Z5
	VCVTDQ2PS Z6, Z6
	VCVTDQ2PS Z7, Z7
	VFMADD231PS Z18, Z0, Z8
	VFMADD231PS Z19, Z1, Z9
	VFMADD231PS Z20, Z2, Z10
	VFMADD231PS Z21, Z3, Z11
	VFMADD231PS Z22, Z4, Z12
	VFMADD231PS Z23, Z5, Z13
	VFMADD231PS Z24, Z6, Z14
	VFMADD231PS Z25, Z7, Z15
	ADDQ $8, DI
	INCQ DX
	CMPQ DX, G+48(FP)
	JNE  group
	VEXTRACTF64X4 $1, Z8, Y16
	VADDPS Y16, Y8, Y8
	VEXTRACTF64X4 $1, Z9, Y16
	VADDPS Y16, Y9, Y9
	VEXTRACTF64X4 $1, Z10, Y16
	VADDPS Y16, Y10, Y10
	VEXTRACTF64X4 $1, Z11, Y16
	VADDPS Y16, Y11, Y11
	VEXTRACTF64X4 $1, Z12, Y16
	VADDPS Y16, Y12, Y12
	VEXTRACTF64X4 $1, Z13, Y16
	VADDPS Y16, Y13, Y13
	VEXTRACTF64X4 $1, Z14, Y16
	VADDPS Y16, Y14, Y14
	VEXTRACTF64X4 $1, Z15, Y16
	VADDPS Y16, Y15, Y15

	// bias pass: R10/R9 bias/scale row 0 (row 1 at +R11), BX/AX sx/cr of token 0
	MOVQ  b+40(FP), R10
	MOVQ  s+32(FP), R9
	MOVQ  G+48(FP), R11
	SHLQ  $2, R11
	MOVQ  G+48(FP), R14
	ADDQ  $7, R14
	ANDQ  $-8, R14
	SHLQ  $2, R14
	MOVQ  sx+80(FP), BX
	MOVQ  cr+88(FP), AX
	LEAQ  (BX)(R14*2), SI
	LEAQ  (AX)(R14*2), R12
	MOVQ  G+48(FP), R13
	SHRQ  $3, R13
	JZ    tail

bias:
	VMOVUPS (R10), Y0
	VMOVUPS (R10)(R11*1), Y1
	VMOVUPS (R9), Y2
	VMOVUPS (R9)(R11*1), Y3
	VFMADD231PS (BX), Y0, Y8
	VFMADD231PS (AX), Y2, Y8
	VFMADD231PS (BX)(R14*1), Y0, Y9
	VFMADD231PS (AX)(R14*1), Y2, Y9
	VFMADD231PS (SI), Y0, Y10
	VFMADD231PS (R12), Y2, Y10
	VFMADD231PS (SI)(R14*1), Y0, Y11
	VFMADD231PS (R12)(R14*1), Y2, Y11
	VFMADD231PS (BX), Y1, Y12
	VFMADD231PS (AX), Y3, Y12
	VFMADD231PS (BX)(R14*1), Y1, Y13
	VFMADD231PS (AX)(R14*1), Y3, Y13
	VFMADD231PS (SI), Y1, Y14
	VFMADD231PS (R12), Y3, Y14
	VFMADD231PS (SI)(R14*1), Y1, Y15
	VFMADD231PS (R12)(R14*1), Y3, Y15
	ADDQ $32, R10
	ADDQ $32, R9
	ADDQ $32, BX
	ADDQ $32, AX
	ADDQ $32, SI
	ADDQ $32, R12
	DECQ R13
	JNZ  bias

tail:
	MOVQ       G+48(FP), R13
	ANDQ       $7, R13
	JZ         store
	MOVQ       mask+104(FP), R13
	VMOVDQU    (R13), Y7
	VMASKMOVPS (R10), Y7, Y0
	VMASKMOVPS (R10)(R11*1), Y7, Y1
	VMASKMOVPS (R9), Y7, Y2
	VMASKMOVPS (R9)(R11*1), Y7, Y3
	VFMADD231PS (BX), Y0, Y8
	VFMADD231PS (AX), Y2, Y8
	VFMADD231PS (BX)(R14*1), Y0, Y9
	VFMADD231PS (AX)(R14*1), Y2, Y9
	VFMADD231PS (SI), Y0, Y10
	VFMADD231PS (R12), Y2, Y10
	VFMADD231PS (SI)(R14*1), Y0, Y11
	VFMADD231PS (R12)(R14*1), Y2, Y11
	VFMADD231PS (BX), Y1, Y12
	VFMADD231PS (AX), Y3, Y12
	VFMADD231PS (BX)(R14*1), Y1, Y13
	VFMADD231PS (AX)(R14*1), Y3, Y13
	VFMADD231PS (SI), Y1, Y14
	VFMADD231PS (R12), Y3, Y14
	VFMADD231PS (SI)(R14*1), Y1, Y15
	VFMADD231PS (R12)(R14*1), Y3, Y15

store:
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), R8
	SHLQ $2, R8
	HSUM(Y8, X8, X0)
	VMOVSS X8, 0(DI)
	HSUM(Y12, X12, X0)
	VMOVSS X12, 4(DI)
	ADDQ R8, DI
	HSUM(Y9, X9, X0)
	VMOVSS X9, 0(DI)
	HSUM(Y13, X13, X0)
	VMOVSS X13, 4(DI)
	ADDQ R8, DI
	HSUM(Y10, X10, X0)
	VMOVSS X10, 0(DI)
	HSUM(Y14, X14, X0)
	VMOVSS X14, 4(DI)
	ADDQ R8, DI
	HSUM(Y11, X11, X0)
	VMOVSS X11, 0(DI)
	HSUM(Y15, X15, X0)
	VMOVSS X15, 4(DI)
	VZEROUPPER
	RET

// qTile8VNNI64: qTile8VNNI for groups of 64·bpg codes, in 512-bit
// registers: Z0-Z7 int32 accs, Z8-Z15 sums, Z16/Z17 codes, Z18-Z25 scale·dx.
TEXT ·qTile8VNNI64(SB), NOSPLIT, $0-112
	VPBROADCASTD c0f<>(SB), Z30
	VMOVDQU64    shiftz4<>(SB), Z31
	MOVQ         w+16(FP), AX
	MOVQ         wstride+24(FP), R8
	MOVQ         xq+56(FP), BX
	MOVQ         xstride+64(FP), R14
	LEAQ         (BX)(R14*2), SI
	MOVQ         s+32(FP), R9
	MOVQ         G+48(FP), R11
	LEAQ         (R9)(R11*4), R12
	SHLQ         $3, R11
	LEAQ         (R11)(R11*2), CX
	MOVQ         dq+72(FP), DI
	XORQ         DX, DX
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

group:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	MOVQ bpg+96(FP), R13

block:
	VMOVDQU64 (AX), Z16
	VMOVDQU64 (AX)(R8*1), Z17
	VPDPBUSD (BX), Z16, Z0
	VPDPBUSD (BX)(R14*1), Z16, Z1
	VPDPBUSD (SI), Z16, Z2
	VPDPBUSD (SI)(R14*1), Z16, Z3
	VPDPBUSD (BX), Z17, Z4
	VPDPBUSD (BX)(R14*1), Z17, Z5
	VPDPBUSD (SI), Z17, Z6
	VPDPBUSD (SI)(R14*1), Z17, Z7
	ADDQ $64, AX
	ADDQ $64, BX
	ADDQ $64, SI
	DECQ R13
	JNZ  block
	VBROADCASTSS (R9)(DX*4), Z16
	VBROADCASTSS (R12)(DX*4), Z17
	VMULPS.BCST (DI), Z16, Z18
	VMULPS.BCST (DI)(R11*1), Z16, Z19
	VMULPS.BCST (DI)(R11*2), Z16, Z20
	VMULPS.BCST (DI)(CX*1), Z16, Z21
	VMULPS.BCST (DI), Z17, Z22
	VMULPS.BCST (DI)(R11*1), Z17, Z23
	VMULPS.BCST (DI)(R11*2), Z17, Z24
	VMULPS.BCST (DI)(CX*1), Z17, Z25
	VCVTDQ2PS Z0, Z0
	VCVTDQ2PS Z1, Z1
	VCVTDQ2PS Z2, Z2
	VCVTDQ2PS Z3, Z3
	VCVTDQ2PS Z4, Z4
	VCVTDQ2PS Z5, Z5
	VCVTDQ2PS Z6, Z6
	VCVTDQ2PS Z7, Z7
	VFMADD231PS Z18, Z0, Z8
	VFMADD231PS Z19, Z1, Z9
	VFMADD231PS Z20, Z2, Z10
	VFMADD231PS Z21, Z3, Z11
	VFMADD231PS Z22, Z4, Z12
	VFMADD231PS Z23, Z5, Z13
	VFMADD231PS Z24, Z6, Z14
	VFMADD231PS Z25, Z7, Z15
	ADDQ $8, DI
	INCQ DX
	CMPQ DX, G+48(FP)
	JNE  group
	VEXTRACTF64X4 $1, Z8, Y16
	VADDPS Y16, Y8, Y8
	VEXTRACTF64X4 $1, Z9, Y16
	VADDPS Y16, Y9, Y9
	VEXTRACTF64X4 $1, Z10, Y16
	VADDPS Y16, Y10, Y10
	VEXTRACTF64X4 $1, Z11, Y16
	VADDPS Y16, Y11, Y11
	VEXTRACTF64X4 $1, Z12, Y16
	VADDPS Y16, Y12, Y12
	VEXTRACTF64X4 $1, Z13, Y16
	VADDPS Y16, Y13, Y13
	VEXTRACTF64X4 $1, Z14, Y16
	VADDPS Y16, Y14, Y14
	VEXTRACTF64X4 $1, Z15, Y16
	VADDPS Y16, Y15, Y15

	// bias pass: R10/R9 bias/scale row 0 (row 1 at +R11), BX/AX sx/cr of token 0
	MOVQ  b+40(FP), R10
	MOVQ  s+32(FP), R9
	MOVQ  G+48(FP), R11
	SHLQ  $2, R11
	MOVQ  G+48(FP), R14
	ADDQ  $7, R14
	ANDQ  $-8, R14
	SHLQ  $2, R14
	MOVQ  sx+80(FP), BX
	MOVQ  cr+88(FP), AX
	LEAQ  (BX)(R14*2), SI
	LEAQ  (AX)(R14*2), R12
	MOVQ  G+48(FP), R13
	SHRQ  $3, R13
	JZ    tail

bias:
	VMOVUPS (R10), Y0
	VMOVUPS (R10)(R11*1), Y1
	VMOVUPS (R9), Y2
	VMOVUPS (R9)(R11*1), Y3
	VFMADD231PS (BX), Y0, Y8
	VFMADD231PS (AX), Y2, Y8
	VFMADD231PS (BX)(R14*1), Y0, Y9
	VFMADD231PS (AX)(R14*1), Y2, Y9
	VFMADD231PS (SI), Y0, Y10
	VFMADD231PS (R12), Y2, Y10
	VFMADD231PS (SI)(R14*1), Y0, Y11
	VFMADD231PS (R12)(R14*1), Y2, Y11
	VFMADD231PS (BX), Y1, Y12
	VFMADD231PS (AX), Y3, Y12
	VFMADD231PS (BX)(R14*1), Y1, Y13
	VFMADD231PS (AX)(R14*1), Y3, Y13
	VFMADD231PS (SI), Y1, Y14
	VFMADD231PS (R12), Y3, Y14
	VFMADD231PS (SI)(R14*1), Y1, Y15
	VFMADD231PS (R12)(R14*1), Y3, Y15
	ADDQ $32, R10
	ADDQ $32, R9
	ADDQ $32, BX
	ADDQ $32, AX
	ADDQ $32, SI
	ADDQ $32, R12
	DECQ R13
	JNZ  bias

tail:
	MOVQ       G+48(FP), R13
	ANDQ       $7, R13
	JZ         store
	MOVQ       mask+104(FP), R13
	VMOVDQU    (R13), Y7
	VMASKMOVPS (R10), Y7, Y0
	VMASKMOVPS (R10)(R11*1), Y7, Y1
	VMASKMOVPS (R9), Y7, Y2
	VMASKMOVPS (R9)(R11*1), Y7, Y3
	VFMADD231PS (BX), Y0, Y8
	VFMADD231PS (AX), Y2, Y8
	VFMADD231PS (BX)(R14*1), Y0, Y9
	VFMADD231PS (AX)(R14*1), Y2, Y9
	VFMADD231PS (SI), Y0, Y10
	VFMADD231PS (R12), Y2, Y10
	VFMADD231PS (SI)(R14*1), Y0, Y11
	VFMADD231PS (R12)(R14*1), Y2, Y11
	VFMADD231PS (BX), Y1, Y12
	VFMADD231PS (AX), Y3, Y12
	VFMADD231PS (BX)(R14*1), Y1, Y13
	VFMADD231PS (AX)(R14*1), Y3, Y13
	VFMADD231PS (SI), Y1, Y14
	VFMADD231PS (R12), Y3, Y14
	VFMADD231PS (SI)(R14*1), Y1, Y15
	VFMADD231PS (R12)(R14*1), Y3, Y15

store:
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), R8
	SHLQ $2, R8
	HSUM(Y8, X8, X0)
	VMOVSS X8, 0(DI)
	HSUM(Y12, X12, X0)
	VMOVSS X12, 4(DI)
	ADDQ R8, DI
	HSUM(Y9, X9, X0)
	VMOVSS X9, 0(DI)
	HSUM(Y13, X13, X0)
	VMOVSS X13, 4(DI)
	ADDQ R8, DI
	HSUM(Y10, X10, X0)
	VMOVSS X10, 0(DI)
	HSUM(Y14, X14, X0)
	VMOVSS X14, 4(DI)
	ADDQ R8, DI
	HSUM(Y11, X11, X0)
	VMOVSS X11, 0(DI)
	HSUM(Y15, X15, X0)
	VMOVSS X15, 4(DI)
	VZEROUPPER
	RET

// qTile4AVX264: qTile4AVX2 for groups of 64·bpg codes; Y8-Y11 the two rows'
// low and high nibbles.
TEXT ·qTile4AVX264(SB), NOSPLIT, $0-112
	VPBROADCASTD ones16<>(SB), Y12
	VPBROADCASTD c0f<>(SB), Y14
	MOVQ         w+16(FP), AX
	MOVQ         wstride+24(FP), R8
	MOVQ         xq+56(FP), BX
	MOVQ         xstride+64(FP), R14
	MOVQ         s+32(FP), R9
	MOVQ         G+48(FP), R11
	LEAQ         (R9)(R11*4), R12
	SHLQ         $3, R11
	MOVQ         dq+72(FP), DI
	XORQ         DX, DX
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

group:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	MOVQ bpg+96(FP), R13

block:
	VMOVDQU (AX), Y8
	VMOVDQU (AX)(R8*1), Y10
	VPSRLW  $4, Y8, Y9
	VPSRLW  $4, Y10, Y11
	VPAND   Y14, Y8, Y8
	VPAND   Y14, Y9, Y9
	VPAND   Y14, Y10, Y10
	VPAND   Y14, Y11, Y11
	VPMADDUBSW (BX), Y8, Y15
	VPMADDUBSW 32(BX), Y9, Y13
	VPADDW     Y13, Y15, Y15
	VPMADDWD   Y12, Y15, Y15
	VPADDD     Y15, Y0, Y0
	VPMADDUBSW (BX)(R14*1), Y8, Y15
	VPMADDUBSW 32(BX)(R14*1), Y9, Y13
	VPADDW     Y13, Y15, Y15
	VPMADDWD   Y12, Y15, Y15
	VPADDD     Y15, Y1, Y1
	VPMADDUBSW (BX), Y10, Y15
	VPMADDUBSW 32(BX), Y11, Y13
	VPADDW     Y13, Y15, Y15
	VPMADDWD   Y12, Y15, Y15
	VPADDD     Y15, Y2, Y2
	VPMADDUBSW (BX)(R14*1), Y10, Y15
	VPMADDUBSW 32(BX)(R14*1), Y11, Y13
	VPADDW     Y13, Y15, Y15
	VPMADDWD   Y12, Y15, Y15
	VPADDD     Y15, Y3, Y3
	ADDQ $32, AX
	ADDQ $64, BX
	DECQ R13
	JNZ  block
	VBROADCASTSS (R9)(DX*4), Y8
	VBROADCASTSS (R12)(DX*4), Y9
	VBROADCASTSS (DI), Y10
	VBROADCASTSS (DI)(R11*1), Y15
	VCVTDQ2PS   Y0, Y0
	VMULPS      Y10, Y0, Y0
	VFMADD231PS Y8, Y0, Y4
	VCVTDQ2PS   Y1, Y1
	VMULPS      Y15, Y1, Y1
	VFMADD231PS Y8, Y1, Y5
	VCVTDQ2PS   Y2, Y2
	VMULPS      Y10, Y2, Y2
	VFMADD231PS Y9, Y2, Y6
	VCVTDQ2PS   Y3, Y3
	VMULPS      Y15, Y3, Y3
	VFMADD231PS Y9, Y3, Y7
	ADDQ $8, DI
	INCQ DX
	CMPQ DX, G+48(FP)
	JNE  group

	// bias pass: R10/R9 bias/scale row 0 (row 1 at +R11), BX/AX sx/cr of token 0
	MOVQ  b+40(FP), R10
	MOVQ  s+32(FP), R9
	MOVQ  G+48(FP), R11
	SHLQ  $2, R11
	MOVQ  G+48(FP), R14
	ADDQ  $7, R14
	ANDQ  $-8, R14
	SHLQ  $2, R14
	MOVQ  sx+80(FP), BX
	MOVQ  cr+88(FP), AX
	MOVQ  G+48(FP), R13
	SHRQ  $3, R13
	JZ    tail

bias:
	VMOVUPS (R10), Y0
	VMOVUPS (R10)(R11*1), Y1
	VMOVUPS (R9), Y2
	VMOVUPS (R9)(R11*1), Y3
	VFMADD231PS (BX), Y0, Y4
	VFMADD231PS (AX), Y2, Y4
	VFMADD231PS (BX)(R14*1), Y0, Y5
	VFMADD231PS (AX)(R14*1), Y2, Y5
	VFMADD231PS (BX), Y1, Y6
	VFMADD231PS (AX), Y3, Y6
	VFMADD231PS (BX)(R14*1), Y1, Y7
	VFMADD231PS (AX)(R14*1), Y3, Y7
	ADDQ $32, R10
	ADDQ $32, R9
	ADDQ $32, BX
	ADDQ $32, AX
	DECQ R13
	JNZ  bias

tail:
	MOVQ       G+48(FP), R13
	ANDQ       $7, R13
	JZ         store
	MOVQ       mask+104(FP), R13
	VMOVDQU    (R13), Y15
	VMASKMOVPS (R10), Y15, Y0
	VMASKMOVPS (R10)(R11*1), Y15, Y1
	VMASKMOVPS (R9), Y15, Y2
	VMASKMOVPS (R9)(R11*1), Y15, Y3
	VFMADD231PS (BX), Y0, Y4
	VFMADD231PS (AX), Y2, Y4
	VFMADD231PS (BX)(R14*1), Y0, Y5
	VFMADD231PS (AX)(R14*1), Y2, Y5
	VFMADD231PS (BX), Y1, Y6
	VFMADD231PS (AX), Y3, Y6
	VFMADD231PS (BX)(R14*1), Y1, Y7
	VFMADD231PS (AX)(R14*1), Y3, Y7

store:
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), R8
	SHLQ $2, R8
	HSUM(Y4, X4, X0)
	VMOVSS X4, 0(DI)
	HSUM(Y6, X6, X0)
	VMOVSS X6, 4(DI)
	ADDQ R8, DI
	HSUM(Y5, X5, X0)
	VMOVSS X5, 0(DI)
	HSUM(Y7, X7, X0)
	VMOVSS X7, 4(DI)
	VZEROUPPER
	RET

// qMatVec4VNNI64g1: qMatVec4VNNI64 for groups of exactly 64 codes, two
// groups per iteration into two sums with no inner loop (R14 = G rounded down to
// even), then a last odd group; the codes are prefetched 2 KB ahead.
TEXT ·qMatVec4VNNI64g1(SB), NOSPLIT, $0-104
	VPBROADCASTD c0f<>(SB), Z14
	VMOVDQU64    shiftz4<>(SB), Z13
	MOVQ    dst+0(FP), DI
	MOVQ    n+8(FP), CX
	MOVQ    w+16(FP), SI
	MOVQ    wstride+24(FP), R8
	MOVQ    s+32(FP), R9
	MOVQ    b+40(FP), R10
	MOVQ    G+48(FP), R11
	MOVQ    R11, R14
	ANDQ    $-2, R14
	SHLQ    $2, R11
	MOVQ    dq+64(FP), R13
	MOVQ    mask+96(FP), AX
	VMOVDQU (AX), Y15
	TESTQ   CX, CX
	JZ      done

row:
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	MOVQ   SI, AX
	MOVQ   xq+56(FP), BX
	XORQ   DX, DX
	TESTQ  R14, R14
	JZ     odd

pair:
	PREFETCHT0 2048(AX)
	VPXORD           Z0, Z0, Z0
	VBROADCASTI64X4 0(AX), Z1
	VPSRLVQ         Z13, Z1, Z1
	VPANDD          Z14, Z1, Z1
	VPDPBUSD         0(BX), Z1, Z0
	VCVTDQ2PS        Z0, Z0
	VMULPS.BCST      0(R13)(DX*8), Z0, Z0
	VFMADD231PS.BCST 0(R9)(DX*4), Z0, Z8
	VPXORD           Z4, Z4, Z4
	VBROADCASTI64X4 32(AX), Z5
	VPSRLVQ         Z13, Z5, Z5
	VPANDD          Z14, Z5, Z5
	VPDPBUSD         64(BX), Z5, Z4
	VCVTDQ2PS        Z4, Z4
	VMULPS.BCST      8(R13)(DX*8), Z4, Z4
	VFMADD231PS.BCST 4(R9)(DX*4), Z4, Z9
	ADDQ $64, AX
	ADDQ $128, BX
	ADDQ $2, DX
	CMPQ DX, R14
	JLT  pair

odd:
	CMPQ DX, G+48(FP)
	JEQ  fold
	VPXORD           Z0, Z0, Z0
	VBROADCASTI64X4 0(AX), Z1
	VPSRLVQ         Z13, Z1, Z1
	VPANDD          Z14, Z1, Z1
	VPDPBUSD         0(BX), Z1, Z0
	VCVTDQ2PS        Z0, Z0
	VMULPS.BCST      0(R13)(DX*8), Z0, Z0
	VFMADD231PS.BCST 0(R9)(DX*4), Z0, Z8

fold:
	VADDPS        Z9, Z8, Z8
	VEXTRACTF64X4 $1, Z8, Y1
	VADDPS        Y1, Y8, Y8

	// bias pass
	MOVQ sx+72(FP), AX
	MOVQ cr+80(FP), BX
	XORQ DX, DX
	MOVQ G+48(FP), R12
	SHRQ $3, R12
	JZ   tail

bias:
	VMOVUPS     (R10)(DX*1), Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMOVUPS     (R9)(DX*1), Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8
	ADDQ        $32, DX
	DECQ        R12
	JNZ         bias

tail:
	MOVQ        G+48(FP), R12
	ANDQ        $7, R12
	JZ          store
	VMASKMOVPS  (R10)(DX*1), Y15, Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMASKMOVPS  (R9)(DX*1), Y15, Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8

store:
	HSUM(Y8, X8, X1)
	VMOVSS X8, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	ADDQ   R11, R9
	ADDQ   R11, R10
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// qMatVec8VNNI64g1: qMatVec8VNNI64 for groups of exactly 64 codes, two
// groups per iteration into two sums with no inner loop (R14 = G rounded down to
// even), then a last odd group; the codes are prefetched 2 KB ahead.
TEXT ·qMatVec8VNNI64g1(SB), NOSPLIT, $0-104
	MOVQ    dst+0(FP), DI
	MOVQ    n+8(FP), CX
	MOVQ    w+16(FP), SI
	MOVQ    wstride+24(FP), R8
	MOVQ    s+32(FP), R9
	MOVQ    b+40(FP), R10
	MOVQ    G+48(FP), R11
	MOVQ    R11, R14
	ANDQ    $-2, R14
	SHLQ    $2, R11
	MOVQ    dq+64(FP), R13
	MOVQ    mask+96(FP), AX
	VMOVDQU (AX), Y15
	TESTQ   CX, CX
	JZ      done

row:
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	MOVQ   SI, AX
	MOVQ   xq+56(FP), BX
	XORQ   DX, DX
	TESTQ  R14, R14
	JZ     odd

pair:
	PREFETCHT0 2048(AX)
	VPXORD           Z0, Z0, Z0
	VMOVDQU64 0(AX), Z1
	VPDPBUSD         0(BX), Z1, Z0
	VCVTDQ2PS        Z0, Z0
	VMULPS.BCST      0(R13)(DX*8), Z0, Z0
	VFMADD231PS.BCST 0(R9)(DX*4), Z0, Z8
	VPXORD           Z4, Z4, Z4
	VMOVDQU64 64(AX), Z5
	VPDPBUSD         64(BX), Z5, Z4
	VCVTDQ2PS        Z4, Z4
	VMULPS.BCST      8(R13)(DX*8), Z4, Z4
	VFMADD231PS.BCST 4(R9)(DX*4), Z4, Z9
	ADDQ $128, AX
	ADDQ $128, BX
	ADDQ $2, DX
	CMPQ DX, R14
	JLT  pair

odd:
	CMPQ DX, G+48(FP)
	JEQ  fold
	VPXORD           Z0, Z0, Z0
	VMOVDQU64 0(AX), Z1
	VPDPBUSD         0(BX), Z1, Z0
	VCVTDQ2PS        Z0, Z0
	VMULPS.BCST      0(R13)(DX*8), Z0, Z0
	VFMADD231PS.BCST 0(R9)(DX*4), Z0, Z8

fold:
	VADDPS        Z9, Z8, Z8
	VEXTRACTF64X4 $1, Z8, Y1
	VADDPS        Y1, Y8, Y8

	// bias pass
	MOVQ sx+72(FP), AX
	MOVQ cr+80(FP), BX
	XORQ DX, DX
	MOVQ G+48(FP), R12
	SHRQ $3, R12
	JZ   tail

bias:
	VMOVUPS     (R10)(DX*1), Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMOVUPS     (R9)(DX*1), Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8
	ADDQ        $32, DX
	DECQ        R12
	JNZ         bias

tail:
	MOVQ        G+48(FP), R12
	ANDQ        $7, R12
	JZ          store
	VMASKMOVPS  (R10)(DX*1), Y15, Y1
	VFMADD231PS (AX)(DX*1), Y1, Y8
	VMASKMOVPS  (R9)(DX*1), Y15, Y1
	VFMADD231PS (BX)(DX*1), Y1, Y8

store:
	HSUM(Y8, X8, X1)
	VMOVSS X8, (DI)
	ADDQ   $4, DI
	ADDQ   R8, SI
	ADDQ   R11, R9
	ADDQ   R11, R10
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// fMatVecF32(dst *float32, n int, w *float32, K int, x *float32)
//
// Rows one at a time, K a multiple of 8: four accumulators over 32 elements, then
// 8 at a time. DI dst, CX rows left, SI row, R8 K, AX/BX row/x pointers, DX
// elements left.
TEXT ·fMatVecF32(SB), NOSPLIT, $0-40
	MOVQ  dst+0(FP), DI
	MOVQ  n+8(FP), CX
	MOVQ  w+16(FP), SI
	MOVQ  K+24(FP), R8
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
	VMOVUPS (AX), Y4
	VMOVUPS 32(AX), Y5
	VMOVUPS 64(AX), Y6
	VMOVUPS 96(AX), Y7
	VFMADD231PS (BX), Y4, Y0
	VFMADD231PS 32(BX), Y5, Y1
	VFMADD231PS 64(BX), Y6, Y2
	VFMADD231PS 96(BX), Y7, Y3
	ADDQ        $128, AX
	ADDQ        $128, BX
	SUBQ        $32, DX
	CMPQ        DX, $32
	JGE         step32

step8:
	TESTQ DX, DX
	JZ    sum
	VMOVUPS (AX), Y4
	VFMADD231PS (BX), Y4, Y0
	ADDQ        $32, AX
	ADDQ        $32, BX
	SUBQ        $8, DX
	JMP         step8

sum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	MOVQ   AX, SI
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// fTileF32(dst *float32, dstride int, w *float32, K int, x *float32)
//
// A 2-row × 4-token tile, dst[l·dstride + r], K a multiple of 8; token l's row
// of x starts at x + l·K. AX row 0 (row 1 at +R8), BX/SI x of tokens 0/2 (1/3
// at +R14), DX elements left. Y0/Y1 the rows, Y8-Y15 sums, index r·4+l.
TEXT ·fTileF32(SB), NOSPLIT, $0-40
	MOVQ w+16(FP), AX
	MOVQ K+24(FP), DX
	MOVQ DX, R8
	SHLQ $2, R8
	MOVQ x+32(FP), BX
	MOVQ DX, R14
	SHLQ $2, R14
	LEAQ (BX)(R14*2), SI
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15

loop:
	VMOVUPS (AX), Y0
	VMOVUPS (AX)(R8*1), Y1
	VFMADD231PS (BX), Y0, Y8
	VFMADD231PS (BX)(R14*1), Y0, Y9
	VFMADD231PS (SI), Y0, Y10
	VFMADD231PS (SI)(R14*1), Y0, Y11
	VFMADD231PS (BX), Y1, Y12
	VFMADD231PS (BX)(R14*1), Y1, Y13
	VFMADD231PS (SI), Y1, Y14
	VFMADD231PS (SI)(R14*1), Y1, Y15
	ADDQ $32, AX
	ADDQ $32, BX
	ADDQ $32, SI
	SUBQ $8, DX
	JNZ  loop
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), R8
	SHLQ $2, R8
	HSUM(Y8, X8, X0)
	VMOVSS X8, 0(DI)
	HSUM(Y12, X12, X0)
	VMOVSS X12, 4(DI)
	ADDQ R8, DI
	HSUM(Y9, X9, X0)
	VMOVSS X9, 0(DI)
	HSUM(Y13, X13, X0)
	VMOVSS X13, 4(DI)
	ADDQ R8, DI
	HSUM(Y10, X10, X0)
	VMOVSS X10, 0(DI)
	HSUM(Y14, X14, X0)
	VMOVSS X14, 4(DI)
	ADDQ R8, DI
	HSUM(Y11, X11, X0)
	VMOVSS X11, 0(DI)
	HSUM(Y15, X15, X0)
	VMOVSS X15, 4(DI)
	VZEROUPPER
	RET

// fMatVecF16(dst *float32, n int, w *uint16, K int, x *float32)
//
// Rows one at a time, K a multiple of 8: four accumulators over 32 elements, then
// 8 at a time. DI dst, CX rows left, SI row, R8 K, AX/BX row/x pointers, DX
// elements left.
TEXT ·fMatVecF16(SB), NOSPLIT, $0-40
	MOVQ  dst+0(FP), DI
	MOVQ  n+8(FP), CX
	MOVQ  w+16(FP), SI
	MOVQ  K+24(FP), R8
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
	VCVTPH2PS (AX), Y4
	VCVTPH2PS 16(AX), Y5
	VCVTPH2PS 32(AX), Y6
	VCVTPH2PS 48(AX), Y7
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
	TESTQ DX, DX
	JZ    sum
	VCVTPH2PS (AX), Y4
	VFMADD231PS (BX), Y4, Y0
	ADDQ        $16, AX
	ADDQ        $32, BX
	SUBQ        $8, DX
	JMP         step8

sum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	MOVQ   AX, SI
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// fTileF16(dst *float32, dstride int, w *uint16, K int, x *float32)
//
// A 2-row × 4-token tile, dst[l·dstride + r], K a multiple of 8; token l's row
// of x starts at x + l·K. AX row 0 (row 1 at +R8), BX/SI x of tokens 0/2 (1/3
// at +R14), DX elements left. Y0/Y1 the rows, Y8-Y15 sums, index r·4+l.
TEXT ·fTileF16(SB), NOSPLIT, $0-40
	MOVQ w+16(FP), AX
	MOVQ K+24(FP), DX
	MOVQ DX, R8
	SHLQ $1, R8
	MOVQ x+32(FP), BX
	MOVQ DX, R14
	SHLQ $2, R14
	LEAQ (BX)(R14*2), SI
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15

loop:
	VCVTPH2PS (AX), Y0
	VCVTPH2PS (AX)(R8*1), Y1
	VFMADD231PS (BX), Y0, Y8
	VFMADD231PS (BX)(R14*1), Y0, Y9
	VFMADD231PS (SI), Y0, Y10
	VFMADD231PS (SI)(R14*1), Y0, Y11
	VFMADD231PS (BX), Y1, Y12
	VFMADD231PS (BX)(R14*1), Y1, Y13
	VFMADD231PS (SI), Y1, Y14
	VFMADD231PS (SI)(R14*1), Y1, Y15
	ADDQ $16, AX
	ADDQ $32, BX
	ADDQ $32, SI
	SUBQ $8, DX
	JNZ  loop
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), R8
	SHLQ $2, R8
	HSUM(Y8, X8, X0)
	VMOVSS X8, 0(DI)
	HSUM(Y12, X12, X0)
	VMOVSS X12, 4(DI)
	ADDQ R8, DI
	HSUM(Y9, X9, X0)
	VMOVSS X9, 0(DI)
	HSUM(Y13, X13, X0)
	VMOVSS X13, 4(DI)
	ADDQ R8, DI
	HSUM(Y10, X10, X0)
	VMOVSS X10, 0(DI)
	HSUM(Y14, X14, X0)
	VMOVSS X14, 4(DI)
	ADDQ R8, DI
	HSUM(Y11, X11, X0)
	VMOVSS X11, 0(DI)
	HSUM(Y15, X15, X0)
	VMOVSS X15, 4(DI)
	VZEROUPPER
	RET

// fMatVecBF16(dst *float32, n int, w *uint16, K int, x *float32)
//
// Rows one at a time, K a multiple of 8: four accumulators over 32 elements, then
// 8 at a time. DI dst, CX rows left, SI row, R8 K, AX/BX row/x pointers, DX
// elements left.
TEXT ·fMatVecBF16(SB), NOSPLIT, $0-40
	MOVQ  dst+0(FP), DI
	MOVQ  n+8(FP), CX
	MOVQ  w+16(FP), SI
	MOVQ  K+24(FP), R8
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
	VPMOVZXWD (AX), Y4
	VPSLLD $16, Y4, Y4
	VPMOVZXWD 16(AX), Y5
	VPSLLD $16, Y5, Y5
	VPMOVZXWD 32(AX), Y6
	VPSLLD $16, Y6, Y6
	VPMOVZXWD 48(AX), Y7
	VPSLLD $16, Y7, Y7
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
	TESTQ DX, DX
	JZ    sum
	VPMOVZXWD (AX), Y4
	VPSLLD $16, Y4, Y4
	VFMADD231PS (BX), Y4, Y0
	ADDQ        $16, AX
	ADDQ        $32, BX
	SUBQ        $8, DX
	JMP         step8

sum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM(Y0, X0, X1)
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	MOVQ   AX, SI
	DECQ   CX
	JNZ    row

done:
	VZEROUPPER
	RET

// fTileBF16(dst *float32, dstride int, w *uint16, K int, x *float32)
//
// A 2-row × 4-token tile, dst[l·dstride + r], K a multiple of 8; token l's row
// of x starts at x + l·K. AX row 0 (row 1 at +R8), BX/SI x of tokens 0/2 (1/3
// at +R14), DX elements left. Y0/Y1 the rows, Y8-Y15 sums, index r·4+l.
TEXT ·fTileBF16(SB), NOSPLIT, $0-40
	MOVQ w+16(FP), AX
	MOVQ K+24(FP), DX
	MOVQ DX, R8
	SHLQ $1, R8
	MOVQ x+32(FP), BX
	MOVQ DX, R14
	SHLQ $2, R14
	LEAQ (BX)(R14*2), SI
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15

loop:
	VPMOVZXWD (AX), Y0
	VPSLLD $16, Y0, Y0
	VPMOVZXWD (AX)(R8*1), Y1
	VPSLLD $16, Y1, Y1
	VFMADD231PS (BX), Y0, Y8
	VFMADD231PS (BX)(R14*1), Y0, Y9
	VFMADD231PS (SI), Y0, Y10
	VFMADD231PS (SI)(R14*1), Y0, Y11
	VFMADD231PS (BX), Y1, Y12
	VFMADD231PS (BX)(R14*1), Y1, Y13
	VFMADD231PS (SI), Y1, Y14
	VFMADD231PS (SI)(R14*1), Y1, Y15
	ADDQ $16, AX
	ADDQ $32, BX
	ADDQ $32, SI
	SUBQ $8, DX
	JNZ  loop
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), R8
	SHLQ $2, R8
	HSUM(Y8, X8, X0)
	VMOVSS X8, 0(DI)
	HSUM(Y12, X12, X0)
	VMOVSS X12, 4(DI)
	ADDQ R8, DI
	HSUM(Y9, X9, X0)
	VMOVSS X9, 0(DI)
	HSUM(Y13, X13, X0)
	VMOVSS X13, 4(DI)
	ADDQ R8, DI
	HSUM(Y10, X10, X0)
	VMOVSS X10, 0(DI)
	HSUM(Y14, X14, X0)
	VMOVSS X14, 4(DI)
	ADDQ R8, DI
	HSUM(Y11, X11, X0)
	VMOVSS X11, 0(DI)
	HSUM(Y15, X15, X0)
	VMOVSS X15, 4(DI)
	VZEROUPPER
	RET

// sumBytes(p *byte, n int) uint64 reads n bytes (a multiple of 128) at p with
// four independent 256-bit adds per 128 bytes: a read-bandwidth probe.
TEXT ·sumBytes(SB), NOSPLIT, $0-24
	MOVQ   p+0(FP), SI
	MOVQ   n+8(FP), CX
	SHRQ   $7, CX
	VPXOR  Y0, Y0, Y0
	VPXOR  Y1, Y1, Y1
	VPXOR  Y2, Y2, Y2
	VPXOR  Y3, Y3, Y3
	TESTQ  CX, CX
	JZ     done

loop:
	VPADDQ (SI), Y0, Y0
	VPADDQ 32(SI), Y1, Y1
	VPADDQ 64(SI), Y2, Y2
	VPADDQ 96(SI), Y3, Y3
	ADDQ   $128, SI
	DECQ   CX
	JNZ    loop

done:
	VPADDQ       Y1, Y0, Y0
	VPADDQ       Y3, Y2, Y2
	VPADDQ       Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDQ       X1, X0, X0
	VMOVQ        X0, AX
	MOVQ         AX, ret+16(FP)
	VZEROUPPER
	RET
