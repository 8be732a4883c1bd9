package cpu

import "math"

// actQ holds L rows of activations quantized for the 4/8-bit kernels: each value
// as two int16, x ≈ dx·(xh + xl/2¹⁶), with one absmax scale dx = amax/32767 per
// weight group (GroupSize elements). For 4-bit weights each chunk of C =
// q4Chunk(GroupSize) values is first permuted to [x0 x2 … x(C−2) x1 x3 … x(C−1)],
// the order in which C/2 bytes of packed nibbles unpack (low nibbles, then
// high). Then every 32 values v (in that order) are stored as 64 int16: the 32
// xh, then the 32 xl (see xqIndex). It lives in the Pool and only grows.
type actQ struct {
	K, G, Gp int       // row width, groups per row, G rounded up to 8
	xq       []int16   // L·2K
	dq       []float32 // L·G: the group's scale dx = amax/32767
	sx       []float32 // L·Gp: exact float32 Σx over group g; zero past G
	cr       []float32 // L·Gp: c·(Σx − Σ dequantized x) over group g; zero past G

	// the call in flight (see Do)
	x        []float32
	gs, perm int
	c        float64
}

// xqIndex returns where value v of a group (in permuted order) keeps its xh;
// its xl is 32 further.
func xqIndex(v int) int { return v&^31<<1 | v&31 }

// The kernels compute, per output,
//
//	Σ_g scale_g·dx_g·(Σ_k q_k·xh_k + 2⁻¹⁶·Σ_k q_k·xl_k)  +  Σ_g bias_g·sx_g  +  Σ_g scale_g·cr_g
//
// The last sum turns the activation rounding error Σ_k q_k·e_k of each group into
// Σ_k (q_k − c)·e_k with c = (2^bits − 1)/2, the middle code: centred codes are
// about half as large (in rms) as raw ones, so this halves the error for two
// float multiply-adds per group, paid once per row outside the inner loop.
//
// Two int16 rather than one int8 per activation: each value is within dx/2¹⁷ =
// amax/(32767·2¹⁷) of x_k, so the activation rounding is far below float32
// summation error even when one outlier sets a group's amax (which int8, and
// also a single int16, cannot reach: a single int16 left 1.5e-3 on the
// tinycode logits). Codes (≤ 255) fit a signed 16-bit word, and each of a
// group's two int32 sums stays below 128·255·32767 < 2³¹.

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
	a.xq = grow(a.xq, 2*L*K)
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
			d, s, qs := quantGroup(a.xq[2*o:2*(o+gs)], a.x[o:o+gs], a.perm)
			a.dq[l*G+g], a.sx[l*Gp+g] = d, float32(s)
			a.cr[l*Gp+g] = float32(a.c * (s - float64(d)*qs))
		}
		clear(a.sx[l*Gp+G : (l+1)*Gp])
		clear(a.cr[l*Gp+G : (l+1)*Gp])
	}
}

// q4Chunk is the 4-bit activation chunk for group size gs: 64 when the groups
// allow (the wide kernels), else 32.
func q4Chunk(gs int) int {
	if gs%64 == 0 {
		return 64
	}
	return 32
}

// quantGroup quantizes one group x into q (2·len(x) int16, see actQ) with the
// scale d = amax/32767, permuting each chunk of perm values (0: none), and
// returns d, the sum of x and the sum of xh + xl/2¹⁶, both in float64.
func quantGroup(q []int16, x []float32, perm int) (d float32, sum, qsum float64) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
		sum += float64(v)
	}
	if amax == 0 {
		clear(q)
		return 0, sum, 0
	}
	d = amax / 32767
	id := 1 / float64(d)
	for k, v := range x {
		t := float64(v) * id
		h := min(max(math.RoundToEven(t), -32767), 32767)
		l := min(max(math.RoundToEven((t-h)*65536), -32767), 32767)
		qsum += h + l/65536
		p := k
		if perm != 0 {
			j := k % perm
			p = k - j + j%2*(perm/2) + j/2
		}
		i := xqIndex(p)
		q[i], q[i+32] = int16(h), int16(l)
	}
	return d, sum, qsum
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// grow returns s resized to n, reallocating only when its capacity is short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}
