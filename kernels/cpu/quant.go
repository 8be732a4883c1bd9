package cpu

import "math"

// actQ holds L rows of activations quantized for the 4/8-bit kernels: int8 values
// with one absmax scale per weight group (GroupSize elements), stored in blocks of
// 32. For 4-bit weights each block is permuted to [x0 x2 … x30 x1 x3 … x31], the
// order in which a 16-byte run of packed nibbles unpacks (low nibbles, then high).
// It lives in the Pool and only grows.
type actQ struct {
	K, G, Gp int       // row width, groups per row, G rounded up to 8
	xq       []int8    // L·K
	dq       []groupQ  // L·G
	sx       []float32 // L·Gp: exact float32 Σx over group g; zero past G
	cr       []float32 // L·Gp: c·(Σx − dx·Σxq) over group g; zero past G
}

// groupQ is one quantized activation group's scale and sum; the assembly reads
// it at 8-byte strides.
type groupQ struct {
	dx float32 // amax/127
	xs int32   // 16·Σ xq: the AVX2 8-bit kernel's offset (see dot_amd64.s)
}

// The kernels compute, per output,
//
//	Σ_g scale_g·dx_g·Σ_k q_k·xq_k  +  Σ_g bias_g·sx_g  +  Σ_g scale_g·cr_g
//
// The last sum turns the activation rounding error Σ_k q_k·e_k of each group into
// Σ_k (q_k − c)·e_k with c = (2^bits − 1)/2, the middle code: centred codes are
// about half as large (in rms) as raw ones, so this halves the error for two
// float multiply-adds per group, paid once per row outside the inner loop.

// quantize fills a from x (L, K) for groups of gs elements; perm selects the 4-bit
// block order.
func (a *actQ) quantize(x []float32, L, K, gs, bits int) {
	perm := bits == 4
	c := float64(int(1)<<bits-1) / 2
	G := K / gs
	Gp := (G + 7) &^ 7
	a.K, a.G, a.Gp = K, G, Gp
	a.xq = grow(a.xq, L*K)
	a.dq = grow(a.dq, L*G)
	a.sx = grow(a.sx, L*Gp)
	a.cr = grow(a.cr, L*Gp)
	for l := range L {
		for g := range G {
			o := l*K + g*gs
			d, s, is := quantGroup(a.xq[o:o+gs], x[o:o+gs], perm)
			a.dq[l*G+g], a.sx[l*Gp+g] = groupQ{d, 16 * is}, float32(s)
			a.cr[l*Gp+g] = float32(c * (s - float64(d)*float64(is)))
		}
		clear(a.sx[l*Gp+G : (l+1)*Gp])
		clear(a.cr[l*Gp+G : (l+1)*Gp])
	}
}

// magic is 1.5·2²³: adding it rounds a float32 of magnitude < 2²² to an integer
// (ties to even), which then sits in the low mantissa bits.
const magic = 12582912

// quantGroup quantizes one group x to q with the scale d = amax/127 and returns d,
// the sum of x (in float64) and the sum of the int8 values.
func quantGroup(q []int8, x []float32, perm bool) (d float32, sum float64, isum int32) {
	var amax float32
	var s float64
	for _, v := range x {
		amax = max(amax, abs32(v))
		s += float64(v)
	}
	if amax == 0 {
		clear(q)
		return 0, s, 0
	}
	d = amax / 127
	id := 127 / amax
	for b := 0; b < len(x); b += 32 {
		xb, qb := x[b:b+32], q[b:b+32]
		for j, v := range xb {
			r := int32(math.Float32bits(float32(v*id)+magic)&0x7fffff) - 0x400000
			r = min(max(r, -127), 127)
			isum += r
			if perm {
				qb[(j&1)<<4|j>>1] = int8(r)
			} else {
				qb[j] = int8(r)
			}
		}
	}
	return d, s, isum
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// grow returns s resized to n, reallocating only when its capacity is short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}
