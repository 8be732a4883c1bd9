package cpu

import "math"

// RMSNorm writes y = x / sqrt(mean(x²) + eps) · w for every n-wide row of x
// (n = len(w)). The sum of squares accumulates in float64.
func RMSNorm(y, x, w []float32, eps float32) {
	n := len(w)
	for r := 0; r+n <= len(x); r += n {
		xr, yr := x[r:r+n], y[r:r+n]
		// transformers: hidden * torch.rsqrt(variance + eps), all float32.
		inv := float32(1 / math.Sqrt(float64(float32(sumSquares(xr)/float64(n))+eps)))
		yr, w := yr[:len(xr)], w[:len(xr)]
		for i, v := range xr {
			yr[i] = w[i] * (v * inv)
		}
	}
}

// sumSquares returns Σx² in float64, as four interleaved partial sums: one
// chain of dependent adds is bound by their latency (docs/perf/cpu.md, "Small
// host loops").
func sumSquares(x []float32) float64 {
	var s0, s1, s2, s3 float64
	for ; len(x) >= 4; x = x[4:] {
		a, b, c, d := float64(x[0]), float64(x[1]), float64(x[2]), float64(x[3])
		s0, s1, s2, s3 = s0+a*a, s1+b*b, s2+c*c, s3+d*d
	}
	for _, v := range x {
		s0 += float64(v) * float64(v)
	}
	return (s0 + s1) + (s2 + s3)
}

// RoPE rotates each head of x (rows of heads·headDim) in place for positions
// pos, pos+1, … (one per row), pairing element j with j+rot/2 (rotate_half).
// cos/sin are computed in float32 from the float32 angle float32(p)·invFreq[j], as
// transformers does. Elements past rot = 2·len(invFreq) are left alone.
func RoPE(x []float32, cols, headDim, pos int, invFreq []float32, scale float32) {
	half := len(invFreq)
	for r := 0; r*cols < len(x); r++ {
		p := float32(pos + r)
		row := x[r*cols : (r+1)*cols]
		for j, f := range invFreq {
			a := float64(p * f)
			c, s := float32(math.Cos(a))*scale, float32(math.Sin(a))*scale
			for h := 0; h < cols; h += headDim {
				x0, x1 := row[h+j], row[h+j+half]
				row[h+j] = x0*c - x1*s
				row[h+j+half] = x1*c + x0*s
			}
		}
	}
}

// Softcap applies x = c·tanh(x/c) in place.
func Softcap(x []float32, c float32) {
	for i, v := range x {
		x[i] = c * float32(math.Tanh(float64(v/c)))
	}
}
