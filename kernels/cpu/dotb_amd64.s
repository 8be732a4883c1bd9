//go:build amd64 && !noasm

#include "textflag.h"

// Byte-dot mat-vec kernels (AVX-512 VNNI): rows of 4/8-bit codes against
// activations as three signed-byte planes, t = hi·2¹⁶ + mid·2⁸ + lo (actB in
// actb.go, which also has the Go reference, qMatVecBGo). One 512-bit load of a
// row's codes is a chunk: 64 bytes, 128 4-bit or 64 8-bit codes. VPDPBUSD
// multiplies the codes (unsigned) with a plane (signed) and sums each lane's four
// products into an int32 lane; per chunk and row
//
//	4-bit: A = ((Σ·hi)·2⁸ + Σ·mid)·2⁸ + Σ·lo      (|A| < 1.01·2³⁰: exact)
//	8-bit: A = float((Σ·hi)·2⁸ + Σ·mid)·2⁸ + float(Σ·lo)
//
// and the row sum F (16 float lanes) += float(A) · S, where S is the scale of
// each lane's group: the chunk's scales (a masked load of at most 16, starting at
// soff[chunk] bytes into the row's scales) permuted by idx. The rows are in the
// blocked layout (blocked.go): four-row blocks, their chunks interleaved so the
// four rows share each load of the planes, then one-row blocks. Each row ends
// with F·dx plus the bias pass, Σ_g bias_g·sx_g + scale_g·cr_g, sixteen groups
// per step and a masked step for the rest, and a horizontal sum.
//
// Registers: DI dst, CX rows left, SI the block, R8 bytes per row of the layout
// (S1), R9/R10 the row's scales/biases (in the block, past its codes), R11 G·4,
// R15 3·R11; in the chunk loop AX codes, BX planes, R12 chunks left, R13 soff,
// R14 the prefetch distance, DX scale address. Z0-Z5 planes, Z6 0x0f bytes (4-bit) or 256.0 (8-bit), Z7
// idx, Z8-Z11 row sums, K1 scale lanes, K2 tail groups.

// A four-row block prefetches the codes one block ahead (4·S1 bytes), but at
// least PFMIN bytes ahead; it also prefetches the scales and biases that far
// ahead (left to the hardware prefetcher, their misses cost 10–15 % of decode
// speed). PFB is how far ahead a single row prefetches. Measured on Zen 4 over
// K = 2048…16384: a fixed two blocks ahead costs 5–8 % at K ≥ 8192, a fixed
// 9 KB as much at K ≥ 14336; with the VM's bandwidth at ~50 GB/s instead of
// ~32, a 9 KB minimum held q8 mat-vecs at 38 GB/s and 18 KB let them reach 43.
#define PFMIN 18432
#define PFB 8192
#define PF(a) PREFETCHT1 a

DATA b0f<>+0(SB)/4, $0x0f0f0f0f
GLOBL b0f<>(SB), RODATA|NOPTR, $4
DATA bhi4<>+0(SB)/8, $0x1020408000000000
GLOBL bhi4<>(SB), RODATA|NOPTR, $8
DATA b256<>+0(SB)/4, $0x43800000
GLOBL b256<>(SB), RODATA|NOPTR, $4

// ROW4 adds one chunk of a 4-bit row (codes at caddr, chunk scales at saddr) to
// F; C, H, A0, S are scratch (A1, A2 unused). The low nibbles stay in C, the
// high ones go to H by a GF(2) affine map (GFNI: x >> 4 per byte); ROW4S, for
// CPUs without GFNI, shifts and masks instead.
#define ROW4(caddr, saddr, F, C, H, A0, A1, A2, S) \
	VMOVDQU64      caddr, C; \
	VGF2P8AFFINEQB $0, Z24, C, H; \
	VPANDD         Z6, C, C; \
	DOT4(saddr, F, C, H, A0, S)

#define ROW4S(caddr, saddr, F, C, H, A0, A1, A2, S) \
	VMOVDQU64 caddr, C; \
	VPSRLW    $4, C, H; \
	VPANDD    Z6, C, C; \
	VPANDD    Z6, H, H; \
	DOT4(saddr, F, C, H, A0, S)

// DOT4 is the rest of ROW4: A0 = ((Σ·hi)·2⁸ + Σ·mid)·2⁸ + Σ·lo, each VPDPBUSD
// accumulating onto the shifted sum, then F += float(A0)·scales.
#define DOT4(saddr, F, C, H, A0, S) \
	VPXORD      A0, A0, A0; \
	VPDPBUSD    Z0, C, A0; \
	VPDPBUSD    Z1, H, A0; \
	VPSLLD      $8, A0, A0; \
	VPDPBUSD    Z2, C, A0; \
	VPDPBUSD    Z3, H, A0; \
	VPSLLD      $8, A0, A0; \
	VPDPBUSD    Z4, C, A0; \
	VPDPBUSD    Z5, H, A0; \
	VCVTDQ2PS   A0, A0; \
	SLOAD(saddr, S); \
	VPERMPS     S, Z7, S; \
	VFMADD231PS S, A0, F

// ROW8 adds one chunk of an 8-bit row to F, as ROW4 (H unused).
#define ROW8(caddr, saddr, F, C, H, A0, A1, A2, S) \
	VMOVDQU64   caddr, C; \
	VPXORD      A0, A0, A0; \
	VPXORD      A2, A2, A2; \
	VPDPBUSD    Z0, C, A0; \
	VPDPBUSD    Z2, C, A2; \
	VPSLLD      $8, A0, A0; \
	VPDPBUSD    Z1, C, A0; \
	VCVTDQ2PS   A0, A0; \
	VCVTDQ2PS   A2, A2; \
	VFMADD231PS Z6, A0, A2; \
	SLOAD(saddr, S); \
	VPERMPS     S, Z7, S; \
	VFMADD231PS S, A2, F

// FINISH stores row sum F (FY, FX its lower halves; its row's scales and biases
// at R9/R10) to (DI) and steps DI, R9, R10 to the next row. LOOP and TAIL are
// label names.
#define FINISH(F, FY, FX, LOOP, TAIL) \
	MOVQ            dq+80(FP), AX; \
	VMULPS.BCST     (AX), F, F; \
	MOVQ            sx+88(FP), AX; \
	MOVQ            cr+96(FP), BX; \
	MOVQ            R9, R13; \
	MOVQ            R10, R14; \
	MOVQ            G+32(FP), R12; \
	SHRQ            $4, R12; \
	JZ              TAIL; \
LOOP: \
	MLOAD((R14), Z12); \
	VFMADD231PS     (AX), Z12, F; \
	MLOAD((R13), Z12); \
	VFMADD231PS     (BX), Z12, F; \
	ADDQ            $64, AX; \
	ADDQ            $64, BX; \
	ADDQ            $MSTEP, R13; \
	ADDQ            $MSTEP, R14; \
	DECQ            R12; \
	JNZ             LOOP; \
TAIL: \
	MLOADT((R14), Z12); \
	VMOVUPS.Z       (AX), K2, Z13; \
	VFMADD231PS     Z13, Z12, F; \
	MLOADT((R13), Z12); \
	VMOVUPS.Z       (BX), K2, Z13; \
	VFMADD231PS     Z13, Z12, F; \
	VEXTRACTF64X4   $1, F, Y12; \
	VADDPS          Y12, FY, FY; \
	VEXTRACTF128    $1, FY, X12; \
	VADDPS          X12, FX, FX; \
	VPSHUFD         $0x4e, FX, X12; \
	VADDPS          X12, FX, FX; \
	VPSHUFD         $0xb1, FX, X12; \
	VADDPS          X12, FX, FX; \
	VMOVSS          FX, (DI); \
	ADDQ            $4, DI; \
	ADDQ            R11, R9; \
	ADDQ            R11, R10

// LOADX4 and LOADX8 load a chunk's planes.
#define LOADX4 \
	VMOVDQU64 (BX), Z0; \
	VMOVDQU64 64(BX), Z1; \
	VMOVDQU64 128(BX), Z2; \
	VMOVDQU64 192(BX), Z3; \
	VMOVDQU64 256(BX), Z4; \
	VMOVDQU64 320(BX), Z5

#define LOADX8 \
	VMOVDQU64 (BX), Z0; \
	VMOVDQU64 64(BX), Z1; \
	VMOVDQU64 128(BX), Z2

// BODY is a whole kernel for row macro ROW, plane loads LOADX and XSTEP plane
// bytes per chunk, over rows in the blocked layout (blocked.go): four-row
// blocks while four rows are left, then one-row blocks. R9 and R10 point at
// the block's scales and biases, which end where the next block starts.
#define BODY(ROW, LOADX, XSTEP) \
	MOVQ      idx+64(FP), AX; \
	VMOVDQU32 (AX), Z7; \
	KMOVQ     kmsk+72(FP), K1; \
	KMOVQ     tmsk+104(FP), K2; \
	MOVQ      dst+0(FP), DI; \
	MOVQ      n+8(FP), CX; \
	MOVQ      w+16(FP), SI; \
	MOVQ      rstride+24(FP), R8; \
	MOVQ      G+32(FP), R11; \
	SHLQ      $MSHIFT, R11; \
	LEAQ      (R11)(R11*2), R15; \
block4: \
	CMPQ      CX, $4; \
	JLT       single; \
	VPXORD    Z8, Z8, Z8; \
	VPXORD    Z9, Z9, Z9; \
	VPXORD    Z10, Z10, Z10; \
	VPXORD    Z11, Z11, Z11; \
	MOVQ      nchunk+48(FP), R9; \
	SHLQ      $8, R9; \
	ADDQ      SI, R9; \
	LEAQ      (R9)(R11*4), R10; \
	MOVQ      R8, R14; \
	SHLQ      $2, R14; \
	MOVQ      $PFMIN, DX; \
	CMPQ      R14, DX; \
	CMOVQLT   DX, R14; \
	LEAQ      (R9)(R14*1), DX; \
	MOVQ      R11, R12; \
	SHRQ      $3, R12; \
pfsb: \
	PREFETCHT1 (DX); \
	ADDQ      $64, DX; \
	DECQ      R12; \
	JG        pfsb; \
	MOVQ      SI, AX; \
	MOVQ      xb+40(FP), BX; \
	MOVQ      soff+56(FP), R13; \
	MOVQ      nchunk+48(FP), R12; \
chunk4: \
	LOADX; \
	LEAQ      (AX)(R14*1), DX; \
	PF((DX)); \
	PF(64(DX)); \
	PF(128(DX)); \
	PF(192(DX)); \
	MOVLQSX   (R13), DX; \
	SOFF(DX); \
	ADDQ      R9, DX; \
	ROW((AX), (DX), Z8, Z12, Z13, Z14, Z15, Z16, Z17); \
	ROW(64(AX), (DX)(R11*1), Z9, Z18, Z19, Z20, Z21, Z22, Z23); \
	ROW(128(AX), (DX)(R11*2), Z10, Z12, Z13, Z14, Z15, Z16, Z17); \
	ROW(192(AX), (DX)(R15*1), Z11, Z18, Z19, Z20, Z21, Z22, Z23); \
	ADDQ      $256, AX; \
	ADDQ      $XSTEP, BX; \
	ADDQ      $4, R13; \
	DECQ      R12; \
	JNZ       chunk4; \
	FINISH(Z8, Y8, X8, fin0, tail0); \
	FINISH(Z9, Y9, X9, fin1, tail1); \
	FINISH(Z10, Y10, X10, fin2, tail2); \
	FINISH(Z11, Y11, X11, fin3, tail3); \
	MOVQ      R10, SI; \
	SUBQ      $4, CX; \
	JMP       block4; \
single: \
	TESTQ     CX, CX; \
	JZ        done; \
	VPXORD    Z8, Z8, Z8; \
	MOVQ      nchunk+48(FP), R9; \
	SHLQ      $6, R9; \
	ADDQ      SI, R9; \
	LEAQ      (R9)(R11*1), R10; \
	MOVQ      SI, AX; \
	MOVQ      xb+40(FP), BX; \
	MOVQ      soff+56(FP), R13; \
	MOVQ      nchunk+48(FP), R12; \
chunk1: \
	LOADX; \
	PF(PFB(AX)); \
	MOVLQSX   (R13), DX; \
	SOFF(DX); \
	ADDQ      R9, DX; \
	ROW((AX), (DX), Z8, Z12, Z13, Z14, Z15, Z16, Z17); \
	ADDQ      $64, AX; \
	ADDQ      $XSTEP, BX; \
	ADDQ      $4, R13; \
	DECQ      R12; \
	JNZ       chunk1; \
	FINISH(Z8, Y8, X8, fin4, tail4); \
	MOVQ      R10, SI; \
	DECQ      CX; \
	JMP       single; \
done: \
	VZEROUPPER; \
	RET

// K4, K4S and K8 are the whole kernels: 4-bit with GFNI, 4-bit without, 8-bit.
#define K4 \
	VPBROADCASTD b0f<>(SB), Z6; \
	VPBROADCASTQ bhi4<>(SB), Z24; \
	BODY(ROW4, LOADX4, 384)

#define K4S \
	VPBROADCASTD b0f<>(SB), Z6; \
	BODY(ROW4S, LOADX4, 384)

#define K8 \
	VBROADCASTSS b256<>(SB), Z6; \
	BODY(ROW8, LOADX8, 192)

// The scales and biases: SLOAD loads a chunk's scales as floats (lanes K1),
// MLOAD sixteen scales or biases, MLOADT the last ones (lanes K2); MSTEP is the
// bytes of sixteen, 1<<MSHIFT of one; SOFF turns soff's f32 offset into one.
// Each kernel is assembled three times, for f32, bf16 and f16 ones.
#define SLOAD(a, S) VMOVUPS.Z a, K1, S
#define MLOAD(a, D) VMOVUPS a, D
#define MLOADT(a, D) VMOVUPS.Z a, K2, D
#define MSTEP 64
#define MSHIFT 2
#define SOFF(r)

// qMatVecB4(dst *float32, n int, w *byte, rstride, G int, xb *int8, nchunk int,
//     soff, idx *int32, kmsk uint64, dq, sx, cr *float32, tmsk uint64); B4S
// for CPUs without GFNI, B8 for 8-bit codes.
TEXT ·qMatVecB4(SB), NOSPLIT, $0-112
	K4

TEXT ·qMatVecB4S(SB), NOSPLIT, $0-112
	K4S

TEXT ·qMatVecB8(SB), NOSPLIT, $0-112
	K8

#undef SLOAD
#undef MLOAD
#undef MLOADT
#undef MSTEP
#undef MSHIFT
#undef SOFF
#define SLOAD(a, S) VPMOVZXWD.Z a, K1, S; VPSLLD $16, S, S
#define MLOAD(a, D) VPMOVZXWD a, D; VPSLLD $16, D, D
#define MLOADT(a, D) VPMOVZXWD.Z a, K2, D; VPSLLD $16, D, D
#define MSTEP 32
#define MSHIFT 1
#define SOFF(r) SHRQ $1, r

// The kernels for bf16 scales and biases.
TEXT ·qMatVecB4BF(SB), NOSPLIT, $0-112
	K4

TEXT ·qMatVecB4SBF(SB), NOSPLIT, $0-112
	K4S

TEXT ·qMatVecB8BF(SB), NOSPLIT, $0-112
	K8

#undef SLOAD
#undef MLOAD
#undef MLOADT
#define SLOAD(a, S) VCVTPH2PS.Z a, K1, S
#define MLOAD(a, D) VCVTPH2PS a, D
#define MLOADT(a, D) VCVTPH2PS.Z a, K2, D

// The kernels for f16 scales and biases.
TEXT ·qMatVecB4H(SB), NOSPLIT, $0-112
	K4

TEXT ·qMatVecB4SH(SB), NOSPLIT, $0-112
	K4S

TEXT ·qMatVecB8H(SB), NOSPLIT, $0-112
	K8
