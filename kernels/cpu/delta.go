package cpu

import "math"

// CausalConvSiLU is kernels.Backend.CausalConvSiLU on host slices: x (L, C),
// w (C, K), state (K−1, C), dst (L, C); sums in float64.
func CausalConvSiLU(dst, x, w, state []float32, L, C, K int) {
	in := func(t, c int) float32 { // t indexes [state; x]
		if t < K-1 {
			return state[t*C+c]
		}
		return x[(t-K+1)*C+c]
	}
	for t := range L {
		for c := range C {
			var s float64
			for j := range K {
				s += float64(w[c*K+j]) * float64(in(t+j, c))
			}
			dst[t*C+c] = float32(s / (1 + math.Exp(-s)))
		}
	}
	for r := range K - 1 { // the last K−1 rows of [state; x]; row L+r of it reads ahead of r
		for c := range C {
			state[r*C+c] = in(L+r, c)
		}
	}
}

// GatedDeltaNet is kernels.Backend.GatedDeltaNet on host slices: c (L,
// 2·nk·dk + nv·dv), a, b (L, nv), S (nv, dk, dv), dst (L, nv·dv).
func GatedDeltaNet(dst, c, a, b, S []float32, L, nk, dk, nv, dv int, aLog, dtBias []float32) {
	C := 2*nk*dk + nv*dv
	q, k := make([]float64, dk), make([]float64, dk)
	for t := range L {
		row := c[t*C : (t+1)*C]
		for j := range nv {
			kh := j / (nv / nk)
			var qq, kk float64
			for i := range dk {
				q[i], k[i] = float64(row[kh*dk+i]), float64(row[nk*dk+kh*dk+i])
				qq += q[i] * q[i]
				kk += k[i] * k[i]
			}
			qs, ks := 1/math.Sqrt(qq+1e-6)/math.Sqrt(float64(dk)), 1/math.Sqrt(kk+1e-6)
			for i := range dk {
				q[i] *= qs
				k[i] *= ks
			}
			beta := 1 / (1 + math.Exp(-float64(b[t*nv+j])))
			x := float64(a[t*nv+j]) + float64(dtBias[j])
			sp := x // softplus, as torch's with threshold 20
			if x <= 20 {
				sp = math.Log1p(math.Exp(x))
			}
			decay := math.Exp(-math.Exp(float64(aLog[j])) * sp)
			Sj := S[j*dk*dv : (j+1)*dk*dv]
			v := row[2*nk*dk+j*dv:]
			out := dst[t*nv*dv+j*dv:]
			for col := range dv {
				var u float64
				for i := range dk {
					u += k[i] * decay * float64(Sj[i*dv+col])
				}
				d := beta * (float64(v[col]) - u)
				var o float64
				for i := range dk {
					s := decay*float64(Sj[i*dv+col]) + k[i]*d
					Sj[i*dv+col] = float32(s)
					o += q[i] * s
				}
				out[col] = float32(o)
			}
		}
	}
}
