//go:build amd64 && !noasm

#include "textflag.h"

// readBytes512(p *byte, n, pf int) uint64 sums n bytes at p (a multiple of
// 256) as uint64 lanes with four independent 512-bit adds per 256 bytes; when
// pf > 0 it also issues PREFETCHT1 for each line pf bytes ahead.
TEXT ·readBytes512(SB), NOSPLIT, $0-32
	MOVQ   p+0(FP), SI
	MOVQ   n+8(FP), CX
	MOVQ   pf+16(FP), DX
	SHRQ   $8, CX
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	TESTQ  CX, CX
	JZ     done
	TESTQ  DX, DX
	JNZ    pfloop

loop:
	VPADDQ (SI), Z0, Z0
	VPADDQ 64(SI), Z1, Z1
	VPADDQ 128(SI), Z2, Z2
	VPADDQ 192(SI), Z3, Z3
	ADDQ   $256, SI
	DECQ   CX
	JNZ    loop
	JMP    done

pfloop:
	PREFETCHT1 (SI)(DX*1)
	PREFETCHT1 64(SI)(DX*1)
	PREFETCHT1 128(SI)(DX*1)
	PREFETCHT1 192(SI)(DX*1)
	VPADDQ     (SI), Z0, Z0
	VPADDQ     64(SI), Z1, Z1
	VPADDQ     128(SI), Z2, Z2
	VPADDQ     192(SI), Z3, Z3
	ADDQ       $256, SI
	DECQ       CX
	JNZ        pfloop

done:
	VPADDQ        Z1, Z0, Z0
	VPADDQ        Z3, Z2, Z2
	VPADDQ        Z2, Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPADDQ        Y1, Y0, Y0
	VEXTRACTI128  $1, Y0, X1
	VPADDQ        X1, X0, X0
	VPSHUFD       $0x4e, X0, X1
	VPADDQ        X1, X0, X0
	VMOVQ         X0, AX
	MOVQ          AX, ret+24(FP)
	VZEROUPPER
	RET

// readBytes256(p *byte, n, pf int) uint64 is readBytes512 with 256-bit loads
// (AVX2): four independent adds per 128 bytes, n a multiple of 128.
TEXT ·readBytes256(SB), NOSPLIT, $0-32
	MOVQ  p+0(FP), SI
	MOVQ  n+8(FP), CX
	MOVQ  pf+16(FP), DX
	SHRQ  $7, CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	TESTQ CX, CX
	JZ    done
	TESTQ DX, DX
	JNZ   pfloop

loop:
	VPADDQ (SI), Y0, Y0
	VPADDQ 32(SI), Y1, Y1
	VPADDQ 64(SI), Y2, Y2
	VPADDQ 96(SI), Y3, Y3
	ADDQ   $128, SI
	DECQ   CX
	JNZ    loop
	JMP    done

pfloop:
	PREFETCHT1 (SI)(DX*1)
	PREFETCHT1 64(SI)(DX*1)
	VPADDQ     (SI), Y0, Y0
	VPADDQ     32(SI), Y1, Y1
	VPADDQ     64(SI), Y2, Y2
	VPADDQ     96(SI), Y3, Y3
	ADDQ       $128, SI
	DECQ       CX
	JNZ        pfloop

done:
	VPADDQ       Y1, Y0, Y0
	VPADDQ       Y3, Y2, Y2
	VPADDQ       Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDQ       X1, X0, X0
	VMOVQ        X0, AX
	MOVQ         AX, ret+24(FP)
	VZEROUPPER
	RET
