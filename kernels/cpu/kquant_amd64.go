//go:build amd64 && !noasm

package cpu

import "github.com/klauspost/cpuid/v2"

// The AVX2 dot products of kquant_amd64.s: one q4_k or q6_k block each, the
// block's scales formed here in float32 exactly as dotQ4K and dotQ6K form
// them; a row of q8_0 blocks (d widened by VCVTPH2PS, exact).

//go:noescape
func dotQ4KAVX2(qs *byte, ac *[16]float32, x *float32) float32

//go:noescape
func dotQ6KAVX2(b *byte, a *[16]float32, x *float32) float32

//go:noescape
func dotQ8_0AVX2(b *byte, x *float32, nb int) float32

// kqAVX2 is whether dotKQuant runs the AVX2 kernels (tests switch it).
var kqAVX2 = cpuid.CPU.Supports(cpuid.AVX, cpuid.AVX2, cpuid.F16C)

func dotQ4KAsm(b *[144]byte, x *[256]float32) float32 {
	d := F16ToF32(uint16(b[0]) | uint16(b[1])<<8)
	dmin := F16ToF32(uint16(b[2]) | uint16(b[3])<<8)
	var ac [16]float32
	for s := range 8 {
		sc, m := scaleMin(s, b[4:16])
		ac[s], ac[8+s] = d*sc, dmin*m
	}
	return dotQ4KAVX2(&b[16], &ac, &x[0])
}

func dotQ6KAsm(b *[210]byte, x *[256]float32) float32 {
	d := F16ToF32(uint16(b[208]) | uint16(b[209])<<8)
	var a [16]float32
	for g := range a {
		a[g] = d * i8f[b[192+g]]
	}
	return dotQ6KAVX2(&b[0], &a, &x[0])
}

// dotQ8_0Asm returns the q8_0 blocks r · x (len(x) a multiple of 32).
func dotQ8_0Asm(r []byte, x []float32) float32 {
	nb := len(x) / 32
	if nb == 0 {
		return 0
	}
	_ = r[nb*34-1]
	return dotQ8_0AVX2(&r[0], &x[0], nb)
}
