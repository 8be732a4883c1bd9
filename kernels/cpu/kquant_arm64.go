//go:build arm64 && !noasm

package cpu

// The NEON dot products of kquant_arm64.s (ARMv8.0 NEON, every arm64 CPU; no
// SDOT: the weights and products are float32, as the reference forms them):
// a row of q8_0 or q4_0 blocks (d widened by FCVT, exact); one q4_k or q6_k
// block, its scales formed here in float32 exactly as dotQ4K and dotQ6K form
// them; and their dequantizers (Row, the prefill path). Types without a NEON
// kernel (q5_k) run the portable code.

//go:noescape
func dotQ8_0NEON(b *byte, x *float32, nb int) float32

//go:noescape
func dotQ4_0NEON(b *byte, x *float32, nb int) float32

//go:noescape
func dotQ4KNEON(qs *byte, ac *[16]float32, x *float32) float32

//go:noescape
func dotQ6KNEON(b *byte, a *[16]float32, x *float32) float32

// The dequantizers: the weights the dot kernels form, bit for bit, stored.

//go:noescape
func deqQ8_0NEON(b *byte, dst *float32, nb int)

//go:noescape
func deqQ4_0NEON(b *byte, dst *float32, nb int)

//go:noescape
func deqQ4KNEON(qs *byte, ac *[16]float32, dst *float32)

//go:noescape
func deqQ6KNEON(b *byte, a *[16]float32, dst *float32)

// kqAsm is whether dotKQuant runs the NEON kernels, which every arm64 CPU
// runs (tests switch it).
var kqAsm = hasASIMD

// q4kScalesNEON returns a q4_k block's d·sc and dmin·m of sub-block s at
// 2s and 2s + 1: for each 64 values, the four dotQ4KNEON reads.
func q4kScalesNEON(b *[144]byte) (ac [16]float32) {
	d := F16ToF32(uint16(b[0]) | uint16(b[1])<<8)
	dmin := F16ToF32(uint16(b[2]) | uint16(b[3])<<8)
	for s := range 8 {
		sc, m := scaleMin(s, b[4:16])
		ac[2*s], ac[2*s+1] = d*sc, dmin*m
	}
	return ac
}

func dotQ4KAsm(b *[144]byte, x *[256]float32) float32 {
	ac := q4kScalesNEON(b)
	return dotQ4KNEON(&b[16], &ac, &x[0])
}

func dotQ5KAsm(b *[176]byte, x *[256]float32) float32 { return dotQ5K(b, x) }

// q6kScalesNEON returns a q6_k block's d·sc of its 16 groups in the order
// dotQ6KNEON's four steps read them: step (n, h), the values 128n + 16h +
// 32j + l (l < 16), takes groups 8n + h + 2j, j < 4, at 4(2n + h) + j.
func q6kScalesNEON(b *[210]byte) (a [16]float32) {
	d := F16ToF32(uint16(b[208]) | uint16(b[209])<<8)
	for n := range 2 {
		for h := range 2 {
			for j := range 4 {
				a[4*(2*n+h)+j] = d * i8f[b[192+8*n+h+2*j]]
			}
		}
	}
	return a
}

func dotQ6KAsm(b *[210]byte, x *[256]float32) float32 {
	a := q6kScalesNEON(b)
	return dotQ6KNEON(&b[0], &a, &x[0])
}

// dotQ8_0Asm returns the q8_0 blocks r · x (len(x) a multiple of 32).
func dotQ8_0Asm(r []byte, x []float32) float32 { return dotBlocks(dotQ8_0NEON, 34, r, x) }

// dotQ4_0Asm returns the q4_0 blocks r · x (len(x) a multiple of 32).
func dotQ4_0Asm(r []byte, x []float32) float32 { return dotBlocks(dotQ4_0NEON, 18, r, x) }

// rowAsm writes row n of w dequantized into dst with the NEON kernels and
// reports true, or false for a type they do not cover (q5_k).
func (w *KQuant) rowAsm(dst []float32, n int) bool {
	r := w.row(n)
	switch w.Type {
	case KQ8_0:
		nb := w.K / 32
		_ = dst[nb*32-1]
		deqQ8_0NEON(&r[0], &dst[0], nb)
	case KQ4_0:
		nb := w.K / 32
		_ = dst[nb*32-1]
		deqQ4_0NEON(&r[0], &dst[0], nb)
	case KQ4K:
		for j := range w.K / 256 {
			ac := q4kScalesNEON((*[144]byte)(r[j*144:]))
			deqQ4KNEON(&r[j*144+16], &ac, &(*[256]float32)(dst[j*256:])[0])
		}
	case KQ6K:
		for j := range w.K / 256 {
			a := q6kScalesNEON((*[210]byte)(r[j*210:]))
			deqQ6KNEON(&r[j*210], &a, &(*[256]float32)(dst[j*256:])[0])
		}
	default:
		return false
	}
	return true
}
