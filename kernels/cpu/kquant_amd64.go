//go:build amd64 && !noasm

package cpu

import "github.com/klauspost/cpuid/v2"

// The AVX2 dot products of kquant_amd64.s: one q4_k, q5_k or q6_k block each, the
// block's scales formed here in float32 exactly as dotQ4K and dotQ6K form
// them; a row of q8_0 or q4_0 blocks (d widened by VCVTPH2PS, exact).

//go:noescape
func dotQ4KAVX2(qs *byte, ac *[16]float32, x *float32) float32

//go:noescape
func dotQ6KAVX2(b *byte, a *[16]float32, x *float32) float32

//go:noescape
func dotQ8_0AVX2(b *byte, x *float32, nb int) float32

//go:noescape
func dotQ5KAVX2(b *byte, ac *[16]float32, x *float32) float32

//go:noescape
func dotQ4_0AVX2(b *byte, x *float32, nb int) float32

//go:noescape
func deqQ4KAVX2(qs *byte, ac *[16]float32, dst *float32)

//go:noescape
func deqQ6KAVX2(b *byte, a *[16]float32, dst *float32)

//go:noescape
func deqQ8_0AVX2(b *byte, dst *float32, nb int)

// kqAsm is whether dotKQuant runs the AVX2 kernels (tests switch it).
var kqAsm = cpuid.CPU.Supports(cpuid.AVX, cpuid.AVX2, cpuid.F16C)

// q4kScales returns a q4_k (or q5_k: the same first 16 bytes) block's d·sc
// (8) then dmin·m (8).
func q4kScales(b *[144]byte) (ac [16]float32) {
	d := F16ToF32(uint16(b[0]) | uint16(b[1])<<8)
	dmin := F16ToF32(uint16(b[2]) | uint16(b[3])<<8)
	for s := range 8 {
		sc, m := scaleMin(s, b[4:16])
		ac[s], ac[8+s] = d*sc, dmin*m
	}
	return ac
}

// q6kScales returns a q6_k block's d·sc of its 16 groups.
func q6kScales(b *[210]byte) (a [16]float32) {
	d := F16ToF32(uint16(b[208]) | uint16(b[209])<<8)
	for g := range a {
		a[g] = d * i8f[b[192+g]]
	}
	return a
}

func dotQ4KAsm(b *[144]byte, x *[256]float32) float32 {
	ac := q4kScales(b)
	return dotQ4KAVX2(&b[16], &ac, &x[0])
}

func dotQ5KAsm(b *[176]byte, x *[256]float32) float32 {
	ac := q4kScales((*[144]byte)(b[:144]))
	return dotQ5KAVX2(&b[0], &ac, &x[0])
}

// dotQ4_0Asm returns the q4_0 blocks r · x (len(x) a multiple of 32).
func dotQ4_0Asm(r []byte, x []float32) float32 { return dotBlocks(dotQ4_0AVX2, 18, r, x) }

func dotQ6KAsm(b *[210]byte, x *[256]float32) float32 {
	a := q6kScales(b)
	return dotQ6KAVX2(&b[0], &a, &x[0])
}

// rowAsm writes row n of w dequantized into dst with the AVX2 kernels and
// reports true, or false for a type they do not cover.
func (w *KQuant) rowAsm(dst []float32, n int) bool {
	r := w.row(n)
	switch w.Type {
	case KQ4K:
		for j := range w.K / 256 {
			ac := q4kScales((*[144]byte)(r[j*144:]))
			deqQ4KAVX2(&r[j*144+16], &ac, &(*[256]float32)(dst[j*256:])[0])
		}
	case KQ6K:
		for j := range w.K / 256 {
			a := q6kScales((*[210]byte)(r[j*210:]))
			deqQ6KAVX2(&r[j*210], &a, &(*[256]float32)(dst[j*256:])[0])
		}
	case KQ8_0:
		nb := w.K / 32
		_ = dst[nb*32-1]
		deqQ8_0AVX2(&r[0], &dst[0], nb)
	default:
		return false
	}
	return true
}

// dotQ8_0Asm returns the q8_0 blocks r · x (len(x) a multiple of 32).
func dotQ8_0Asm(r []byte, x []float32) float32 { return dotBlocks(dotQ8_0AVX2, 34, r, x) }
