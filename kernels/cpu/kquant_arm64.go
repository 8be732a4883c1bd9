//go:build arm64 && !noasm

package cpu

// The NEON dot products of kquant_arm64.s (ARMv8.0 NEON, every arm64 CPU; no
// SDOT: the weights and products are float32, as the reference forms them):
// a row of q8_0 or q4_0 blocks (d widened by FCVT, exact). Types without a
// NEON kernel run the portable dots.

//go:noescape
func dotQ8_0NEON(b *byte, x *float32, nb int) float32

//go:noescape
func dotQ4_0NEON(b *byte, x *float32, nb int) float32

// kqAVX2 is whether dotKQuant runs the assembly kernels (tests switch it):
// kquant.go names the switch after the amd64 ones; here it selects the NEON
// kernels, which every arm64 CPU runs.
var kqAVX2 = hasASIMD

func dotQ4KAsm(b *[144]byte, x *[256]float32) float32 { return dotQ4K(b, x) }

func dotQ5KAsm(b *[176]byte, x *[256]float32) float32 { return dotQ5K(b, x) }

func dotQ6KAsm(b *[210]byte, x *[256]float32) float32 { return dotQ6K(b, x) }

// dotQ8_0Asm returns the q8_0 blocks r · x (len(x) a multiple of 32).
func dotQ8_0Asm(r []byte, x []float32) float32 {
	nb := len(x) / 32
	if nb == 0 {
		return 0
	}
	_ = r[nb*34-1]
	return dotQ8_0NEON(&r[0], &x[0], nb)
}

// dotQ4_0Asm returns the q4_0 blocks r · x (len(x) a multiple of 32).
func dotQ4_0Asm(r []byte, x []float32) float32 {
	nb := len(x) / 32
	if nb == 0 {
		return 0
	}
	_ = r[nb*18-1]
	return dotQ4_0NEON(&r[0], &x[0], nb)
}

// rowAsm reports false: Row dequantizes with the portable code on arm64.
func (w *KQuant) rowAsm(dst []float32, n int) bool { return false }
