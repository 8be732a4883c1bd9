package cpu

import "math"

// The gated linear units of the MLP: dst[i] = act(gate[i])·up[i]. dst may be
// gate or up (the model runs them in place); the three slices must be equally
// long. SwiGLU and GeGLUTanh run in assembly where present (see act_amd64.s:
// f32 arithmetic with a double-f32 denominator, within 2 ulp of the float64
// functions below over the whole float32 range); GeGLU's erf stays scalar float64
// everywhere, since only a few Gemma configs ask for exact GELU.

// SwiGLU writes dst[i] = SiLU(gate[i])·up[i].
func SwiGLU(dst, gate, up []float32) {
	n := gluLen("SwiGLU", dst, gate, up)
	for i := gluAsm(dst[:n], gate[:n], up[:n], false); i < n; i++ {
		dst[i] = SiLU(gate[i]) * up[i]
	}
}

// GeGLUTanh writes dst[i] = GELUTanh(gate[i])·up[i].
func GeGLUTanh(dst, gate, up []float32) {
	n := gluLen("GeGLUTanh", dst, gate, up)
	for i := gluAsm(dst[:n], gate[:n], up[:n], true); i < n; i++ {
		dst[i] = GELUTanh(gate[i]) * up[i]
	}
}

// SwiGLUClamp writes gpt-oss's clamped SwiGLU, dst[i] =
// g·σ(1.702·g)·(clamp(up[i], −7, 7) + 1) with g = min(gate[i], 7), in float64.
func SwiGLUClamp(dst, gate, up []float32) {
	n := gluLen("SwiGLUClamp", dst, gate, up)
	for i := range n {
		g := min(float64(gate[i]), 7)
		u := max(min(float64(up[i]), 7), -7)
		dst[i] = float32(g / (1 + math.Exp(-1.702*g)) * (u + 1))
	}
}

// SigmoidGLU writes dst[i] = σ(gate[i])·up[i], in float64.
func SigmoidGLU(dst, gate, up []float32) {
	n := gluLen("SigmoidGLU", dst, gate, up)
	for i := range n {
		dst[i] = float32(float64(up[i]) / (1 + math.Exp(-float64(gate[i]))))
	}
}

// GeGLU writes dst[i] = GELU(gate[i])·up[i].
func GeGLU(dst, gate, up []float32) {
	n := gluLen("GeGLU", dst, gate, up)
	for i := range n {
		dst[i] = GELU(gate[i]) * up[i]
	}
}

func gluLen(op string, dst, gate, up []float32) int {
	if len(gate) != len(dst) || len(up) != len(dst) {
		panic("cpu: " + op + ": dst, gate and up lengths differ")
	}
	return len(dst)
}

// SiLU returns x·σ(x), computed in float64.
func SiLU(x float32) float32 {
	x64 := float64(x)
	return float32(x64 / (1 + math.Exp(-x64)))
}

// GELUTanh is the tanh approximation of GELU (PyTorch approximate="tanh"),
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715x³))), computed in float64 as the equal
// x·σ(2·√(2/π)·(x + 0.044715x³)): the tanh form loses every digit to
// cancellation below x ≈ −5 even in float64.
func GELUTanh(x float32) float32 {
	const c = 2 * 0.7978845608028654 // 2·√(2/π)
	x64 := float64(x)
	return float32(x64 / (1 + math.Exp(-c*(x64+0.044715*x64*x64*x64))))
}

// GELU is the exact, erf-based GELU, computed in float64.
func GELU(x float32) float32 {
	return float32(0.5 * float64(x) * (1 + math.Erf(float64(x)/math.Sqrt2)))
}
