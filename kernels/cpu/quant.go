package cpu

import "math"

// actQ holds L rows of activations quantized for the 4/8-bit kernels: each value
// as two int16, x ≈ dx·(xh + xl/2¹⁶), with one absmax scale dx = amax/32767 per
// row; the weight groups (GroupSize elements) keep their own sums. For 4-bit weights each chunk of C =
// q4Chunk(GroupSize) values is first permuted to [x0 x2 … x(C−2) x1 x3 … x(C−1)],
// the order in which C/2 bytes of packed nibbles unpack (low nibbles, then
// high). Then every 32 values v (in that order) are stored as 64 int16: the 32
// xh, then the 32 xl (see xqIndex). It lives in the Pool and only grows.
type actQ struct {
	K, G, Gp int       // row width, groups per row, G rounded up to 8
	xq       []int16   // L·2K
	dq       []float32 // L: the row's scale dx = amax/32767
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
//	dx·Σ_g scale_g·(Σ_k q_k·xh_k + 2⁻¹⁶·Σ_k q_k·xl_k)  +  Σ_g bias_g·sx_g  +  Σ_g scale_g·cr_g
//
// The last sum turns the activation rounding error Σ_k q_k·e_k of each group into
// Σ_k (q_k − c)·e_k with c = (2^bits − 1)/2, the middle code: centred codes are
// about half as large (in rms) as raw ones, so this halves the error for two
// float multiply-adds per group, paid once per row outside the inner loop.
//
// Two int16 rather than one int8 per activation: each value is within dx/2¹⁷ =
// amax/(32767·2¹⁷) of x_k, so the activation rounding is far below float32
// summation error even when one outlier sets the row's amax (which int8, and
// also a single int16 per value with a scale per group, cannot reach: that
// left 1.5e-3 on the tinycode logits). One scale per row rather than per group
// saves the kernels a multiply per group. Codes (≤ 255) fit a signed 16-bit word, and each of a
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
	a.dq = grow(a.dq, L)
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
		x := a.x[l*K : (l+1)*K]
		d := absMax(x) / 32767
		a.dq[l] = d
		for g := range G {
			o := g * gs
			s, qs := quantGroup(a.xq[2*(l*K+o):2*(l*K+o+gs)], x[o:o+gs], d, a.perm)
			a.sx[l*Gp+g] = float32(s)
			a.cr[l*Gp+g] = float32(a.c * (s - float64(d)*qs))
		}
		clear(a.sx[l*Gp+G : (l+1)*Gp])
		clear(a.cr[l*Gp+G : (l+1)*Gp])
	}
}

// absMax returns max|x| by bit pattern (a NaN orders above +Inf, so it
// propagates into the scale).
func absMax(x []float32) float32 {
	if b, ok := absMaxBitsAsm(x); ok {
		return math.Float32frombits(b)
	}
	var a0, a1 uint32 // |x| bits, which order like the values; two chains
	for k := 0; k+1 < len(x); k += 2 {
		a0 = max(a0, math.Float32bits(x[k])&^(1<<31))
		a1 = max(a1, math.Float32bits(x[k+1])&^(1<<31))
	}
	if len(x)%2 == 1 {
		a0 = max(a0, math.Float32bits(x[len(x)-1])&^(1<<31))
	}
	return math.Float32frombits(max(a0, a1))
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
// scale d (at least max|x|/32767), permuting each chunk of perm values (0:
// none), and returns the sum of x and the sum of xh + xl/2¹⁶, both in float64.
func quantGroup(q []int16, x []float32, d float32, perm int) (sum, qsum float64) {
	x = x[:len(x)&^31] // groups are multiples of 32
	var s0, s1 float64
	for k := 0; k+1 < len(x); k += 2 {
		s0, s1 = s0+float64(x[k]), s1+float64(x[k+1])
	}
	sum = s0 + s1
	if d == 0 {
		clear(q)
		return sum, 0
	}
	id := 1 / float64(d)
	// Adding magic64 rounds a float64 of magnitude < 2⁵¹ to an integer (ties to
	// even); subtracting it again leaves that integer.
	const magic64 = 6755399441055744 // 1.5·2⁵²
	var hs, ls int32                 // |Σ| ≤ 128·32768
	for u := 0; u < len(x)/32; u++ {
		h, l := q[64*u:64*u+32], q[64*u+32:64*u+64]
		// the 32 values of unit u in permuted order (see actQ): x[a0 + i·step]
		// for i < 16, then x[a1 + (i−16)·step]
		a0, a1, step := 32*u, 32*u+16, 1
		switch perm {
		case 64:
			a0 = 64*(u/2) + u%2
			a1, step = a0+32, 2
		case 32:
			a1, step = a0+1, 2
		}
		for i := range 32 {
			k := a0 + i*step
			if i >= 16 {
				k = a1 + (i-16)*step
			}
			t := float64(x[k]) * id
			th := (t + magic64) - magic64
			tl := min(int32((t-th)*65536+magic64-magic64), 32767) // ≥ −32768
			hs += int32(th)
			ls += tl
			h[i], l[i] = int16(th), int16(tl)
		}
	}
	qsum = float64(hs) + float64(ls)/65536
	return sum, qsum
}

// grow returns s resized to n, reallocating only when its capacity is short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}
