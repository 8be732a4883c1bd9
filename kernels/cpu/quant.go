package cpu

import "math"

// actQ holds L rows of activations quantized for the 4/8-bit kernels: int8 values
// with one absmax scale per weight group (GroupSize elements). For 4-bit weights
// each chunk of C = q4Chunk(GroupSize) values is permuted to [x0 x2 … x(C−2) x1
// x3 … x(C−1)], the order in which C/2 bytes of packed nibbles unpack (low
// nibbles, then high). It lives in the Pool and only grows.
type actQ struct {
	K, G, Gp int       // row width, groups per row, G rounded up to 8
	xq       []int8    // L·K
	dq       []groupQ  // L·G
	sx       []float32 // L·Gp: exact float32 Σx over group g; zero past G
	cr       []float32 // L·Gp: c·(Σx − dx·Σxq) over group g; zero past G

	// the call in flight (see Do)
	x        []float32
	gs, perm int
	c        float64
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

// quantize fills a from x (L, K) for groups of gs elements of bits-wide codes,
// quantizing the rows over p's threads when there are several.
func (a *actQ) quantize(p *Pool, x []float32, L, K, gs, bits int) {
	a.x, a.gs, a.perm = x, gs, 0
	if bits == 4 {
		a.perm = q4Chunk(gs)
	}
	a.c = float64(int(1)<<bits-1) / 2
	G := K / gs
	Gp := (G + 7) &^ 7
	a.K, a.G, a.Gp = K, G, Gp
	a.xq = grow(a.xq, L*K)
	a.dq = grow(a.dq, L*G)
	a.sx = grow(a.sx, L*Gp)
	a.cr = grow(a.cr, L*Gp)
	if L == 1 || p == nil {
		a.Do(0, L)
	} else {
		p.Run(L, 1, a)
	}
	a.x = nil
}

// Do quantizes rows [lo, hi) of a.x.
func (a *actQ) Do(lo, hi int) {
	K, G, Gp, gs := a.K, a.G, a.Gp, a.gs
	for l := lo; l < hi; l++ {
		for g := range G {
			o := l*K + g*gs
			d, s, is := quantGroup(a.xq[o:o+gs], a.x[o:o+gs], a.perm)
			a.dq[l*G+g], a.sx[l*Gp+g] = groupQ{d, 16 * is}, float32(s)
			a.cr[l*Gp+g] = float32(a.c * (s - float64(d)*float64(is)))
		}
		clear(a.sx[l*Gp+G : (l+1)*Gp])
		clear(a.cr[l*Gp+G : (l+1)*Gp])
	}
}

// magic is 1.5·2²³: adding it rounds a float32 of magnitude < 2²² to an integer
// (ties to even), which then sits in the low mantissa bits.
const magic = 12582912

// q4Chunk is the 4-bit activation chunk for group size gs: 64 when the groups
// allow (the wide kernels), else 32.
func q4Chunk(gs int) int {
	if gs%64 == 0 {
		return 64
	}
	return 32
}

// quantGroup quantizes one group x to q with the scale d = amax/127, permuting
// each chunk of perm values (0: none), and returns d, the sum of x (in float64)
// and the sum of the int8 values.
func quantGroup(q []int8, x []float32, perm int) (d float32, sum float64, isum int32) {
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
	for j, v := range x {
		r := int32(math.Float32bits(float32(v*id)+magic)&0x7fffff) - 0x400000
		r = min(max(r, -127), 127)
		isum += r
		q[j] = int8(r)
	}
	if perm != 0 {
		var tmp [64]int8
		for c := 0; c < len(q); c += perm {
			qc := q[c : c+perm]
			copy(tmp[:], qc)
			for j := range perm / 2 {
				qc[j], qc[perm/2+j] = tmp[2*j], tmp[2*j+1]
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
