//go:build amd64 && !noasm

package cpu

import "github.com/klauspost/cpuid/v2"

// The activation kernels in act_amd64.s, chosen once; tests flip them to cover
// every path on one machine.
var (
	useActAVX512 = cpuid.CPU.Supports(cpuid.AVX512F, cpuid.AVX512VL)
	useActAVX2   = cpuid.CPU.Supports(cpuid.AVX, cpuid.AVX2, cpuid.FMA3)
)

//go:noescape
func gluSiLUAVX512(dst, gate, up *float32, n int)

//go:noescape
func gluGELUAVX512(dst, gate, up *float32, n int)

//go:noescape
func gluSiLUAVX2(dst, gate, up *float32, n int)

//go:noescape
func gluGELUAVX2(dst, gate, up *float32, n int)

// gluAsm runs the vector kernel over the longest prefix it handles (whole
// vectors) and returns its length; the caller finishes the rest.
func gluAsm(dst, gate, up []float32, gelu bool) int {
	switch {
	case useActAVX512 && len(dst) >= 16:
		n := len(dst) &^ 15
		if gelu {
			gluGELUAVX512(&dst[0], &gate[0], &up[0], n)
		} else {
			gluSiLUAVX512(&dst[0], &gate[0], &up[0], n)
		}
		return n
	case useActAVX2 && len(dst) >= 8:
		n := len(dst) &^ 7
		if gelu {
			gluGELUAVX2(&dst[0], &gate[0], &up[0], n)
		} else {
			gluSiLUAVX2(&dst[0], &gate[0], &up[0], n)
		}
		return n
	}
	return 0
}
