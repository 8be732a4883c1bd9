package cpu

import "math"

// actB holds L rows of activations for the byte-dot kernels (VPDPBUSD: unsigned
// codes times signed bytes). Each value is rounded to an integer on a grid of
// one absmax scale dx per row, x ≈ dx·t with |t| ≤ bMaxT < 2²³, and t is stored
// as three signed bytes, t = hi·2¹⁶ + mid·2⁸ + lo, in three planes.
//
// Values come in chunks of C codes (the codes of one 512-bit load: 128 for
// 4-bit, 64 for 8-bit), each stored as 3·C bytes: the hi plane, then mid, then
// lo. A 4-bit chunk's plane has the values of the 64 low nibbles, then those of
// the 64 high ones, as the packed codes unpack. Which values a chunk holds is
// the weights' order: in row order (chunk c has values [c·C, (c+1)·C)), or
// striped as the blocked layout (blocked.go) when the weights are blocked:
// lane j (bytes 4j…4j+3 of a plane) of chunk c of a stripe holds the values of
// word c of the stripe's group j, the lanes past the last stripe's groups
// zero. at gives the place.
//
// The kernels compute, per output,
//
//	dx·Σ_chunks Σ_lanes scale_g(lane)·Σ_{k∈lane} q_k·t_k  +  Σ_g bias_g·sx_g  +  Σ_g scale_g·cr_g
//
// where a lane is the 4 bytes of codes one 32-bit lane of the dot product sums
// (8 codes for 4-bit, 4 for 8-bit; groups are multiples of 32, so a lane never
// straddles two), sx_g is the exact Σx of group g and cr_g = c·(sx_g − dx·Σt)
// with c = (2^bits − 1)/2 centres the codes, as for actQ.
//
// A blocked q6_k weight (6-bit codes, groups of 16: see kquant_q6.go) reads
// the planes of 4-bit codes in groups of 16 (its low nibbles; its top bits
// follow them, value for value), with c = 31.5; its biases, −32 times its
// scales, are not stored, and cr_g = c·(sx_g − dx·Σt) − 32·sx_g takes them in.
//
// The rounding error of a value is at most dx/2 = amax/(2·bMaxT) ≈ 2⁻²⁴·amax:
// decoding the tinycode q4/q8 models, the logits stay within 2.3e-5 of
// transformers' (the int16 kernels: 1.1e-5; a 2⁻²¹·amax grid measured 6e-5,
// 2⁻¹⁴·amax 1e-2, against greedy margins down to 1e-2).
type actB struct {
	K, G, C int       // row width, groups per row, codes per chunk
	striped bool      // the blocked layout's order, not row order
	nchunk  int       // chunks per row
	xb      []int8    // L·3·C·nchunk
	dq      []float32 // L: dx
	sx, cr  []float32 // L·G

	// scratch of Do: Σx and Σt per group, L·G
	sums []float64
	tsum []int64

	// the call in flight (see Do)
	x    []float32
	gs   int
	bits int     // of the codes' layout: 4 or 8
	c    float64 // the codes' centre
	off  float64 // −bias/scale folded into cr: 32 for q6_k, else 0
}

// bMaxT bounds |t|: it keeps hi within ±127 after lo and mid take their
// signed-byte share (|hi| ≤ (bMaxT/2⁸ + 2⁸)/2⁸ < 127).
const bMaxT = 8290000

// bChunk is the codes per chunk for bits-wide codes.
func bChunk(bits int) int { return 512 / bits }

// bFits reports whether the byte-dot kernels take q with rows of K: 4 or 8
// bits, groups a multiple of 32 up to 256 (the amd64 kernels' int32 sums over
// a group stay exact up to there), K a multiple of the chunk; or a q6_k
// weight's blocked layout (metaQ6), rows of whole superblocks.
func bFits(q *QMatrix, K int) bool {
	if q.meta == metaQ6 {
		return q.Bits == 6 && q.GroupSize == 16 && K%256 == 0
	}
	return (q.Bits == 4 || q.Bits == 8) && q.GroupSize >= 32 && q.GroupSize <= 256 && q.GroupSize%32 == 0 &&
		K%q.GroupSize == 0 && K%bChunk(q.Bits) == 0
}

// at returns where value k of a row goes in the row's planes: the place of its
// hi byte; its mid and lo bytes follow C and 2·C bytes on.
func (a *actB) at(k int) int {
	if !a.striped {
		c, r := k/a.C, k%a.C
		if a.C == 128 {
			r = r&1<<6 | r>>1
		}
		return c*3*a.C + r
	}
	g, o := k/a.gs, k%a.gs
	cw := 32 / a.bits // codes per lane
	c := g/16*(a.gs/cw) + o/cw
	lane := 4*(g%16) + o%cw/(8/a.bits)
	if a.bits == 4 {
		lane += o & 1 << 6
	}
	return c*3*a.C + lane
}

// rowBytes is the bytes of a row's planes.
func (a *actB) rowBytes() int { return 3 * a.C * a.nchunk }

// quantize fills a from x (L, K) for groups of gs bits-wide codes, in the
// blocked layout's order if striped, quantizing the rows over p's threads
// when there are several.
func (a *actB) quantize(p *Pool, x []float32, L, K, gs, bits int, striped bool) {
	a.c, a.off = float64(int(1)<<bits-1)/2, 0
	if bits == 6 { // q6_k: see above
		bits, a.off = 4, 32
	}
	C := bChunk(bits)
	G := K / gs
	a.x, a.gs, a.bits = x, gs, bits
	a.K, a.G, a.C, a.striped = K, G, C, striped
	a.nchunk = K / C
	if striped {
		a.nchunk = (G + 15) / 16 * gs * bits / 32
	}
	a.xb = grow(a.xb, L*a.rowBytes())
	a.dq = grow(a.dq, L)
	a.sx = grow(a.sx, L*G)
	a.cr = grow(a.cr, L*G)
	a.sums, a.tsum = grow(a.sums, L*G), grow(a.tsum, L*G)
	if L == 1 || p == nil {
		a.Do(0, L)
	} else {
		p.Run(L, 1, a)
	}
	a.x = nil
}

// Do quantizes rows [lo, hi) of a.x.
func (a *actB) Do(lo, hi int) {
	K, G, C, gs, c := a.K, a.G, a.C, a.gs, a.c
	for l := lo; l < hi; l++ {
		x := a.x[l*K : (l+1)*K]
		d := absMax(x) / bMaxT
		a.dq[l] = d
		xb := a.xb[l*a.rowBytes() : (l+1)*a.rowBytes()]
		if a.striped && G%16 != 0 { // the last stripe's lanes past its groups
			clear(xb[(G/16)*48*gs:])
		}
		sx, cr := a.sx[l*G:(l+1)*G], a.cr[l*G:(l+1)*G]
		id := 0.0
		if d != 0 {
			id = 1 / float64(d)
		}
		sums, tsum := a.sums[l*G:(l+1)*G], a.tsum[l*G:(l+1)*G]
		if !quantRowBAsm(xb, x, gs, C, a.striped, id, sums, tsum) {
			for g := range G {
				sums[g], tsum[g] = a.quantGroup(xb, x, g*gs, (g+1)*gs, id)
			}
		}
		for g, s := range sums {
			sx[g] = float32(s)
			cr[g] = float32(c*(s-float64(d)*float64(tsum[g])) - a.off*s)
		}
	}
}

// quantGroup rounds x[k0:k1) to t = round(x·id), stores each t's three bytes
// in xb (a row's planes) and returns Σx in float64 and Σt.
func (a *actB) quantGroup(xb []int8, x []float32, k0, k1 int, id float64) (sum float64, ts int64) {
	var s0, s1 float64
	for k := k0; k+1 < k1; k += 2 {
		s0, s1 = s0+float64(x[k]), s1+float64(x[k+1])
	}
	sum = s0 + s1
	const magic64 = 6755399441055744 // 1.5·2⁵²: adding it rounds to an integer (ties to even)
	for k := k0; k < k1; k++ {
		t := int32(int64(math.Float64bits(float64(x[k])*id+magic64)) - int64(math.Float64bits(magic64)))
		ts += int64(t)
		lo := int8(t)
		t1 := (t - int32(lo)) >> 8
		mid := int8(t1)
		hi := int8((t1 - int32(mid)) >> 8)
		i, C := a.at(k), a.C
		xb[i], xb[i+C], xb[i+2*C] = hi, mid, lo
	}
	return sum, ts
}

// qMatVecBGo is the portable byte-dot mat-vec: the same sums as the assembly
// kernels (exact integer dots per group, then float), the reference they are
// checked against.
func qMatVecBGo(dst []float32, q *QMatrix, K, n0 int, a *actB, l int) {
	G, gs, C := a.G, q.GroupSize, a.C
	xb := a.xb[l*a.rowBytes() : (l+1)*a.rowBytes()]
	dx, sx, cr := a.dq[l], a.sx[l*G:(l+1)*G], a.cr[l*G:(l+1)*G]
	for i := range dst {
		n := n0 + i
		w, s, b := q.row(n, K)
		var sum, bias float32
		for g := range G {
			var acc int64
			for k := g * gs; k < (g+1)*gs; k++ {
				j := a.at(k)
				t := int64(xb[j])<<16 + int64(xb[j+C])<<8 + int64(xb[j+2*C])
				acc += int64(code(w, k, q.Bits)) * t
			}
			sum += s[g] * float32(acc)
			bias += b[g]*sx[g] + s[g]*cr[g]
		}
		dst[i] = dx*sum + bias
	}
}
