package cpu

import "math"

// actB holds L rows of activations for the byte-dot kernels (VPDPBUSD: unsigned
// codes times signed bytes). Each value is rounded to an integer on a grid of
// one absmax scale dx per row, x ≈ dx·t with |t| ≤ bMaxT < 2²³, and t is stored
// as three signed bytes, t = hi·2¹⁶ + mid·2⁸ + lo, in three planes.
//
// Values come in chunks of C codes (the bytes of one 512-bit load of codes: 128
// for 4-bit, 64 for 8-bit), each stored as 3·C bytes: the hi plane, then mid,
// then lo. Within a plane, an 8-bit chunk is in order; a 4-bit chunk is
// de-interleaved as its packed nibbles unpack, the 64 even values (low
// nibbles) then the 64 odd ones (high nibbles). xbIndex gives the place.
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
// The rounding error of a value is at most dx/2 = amax/(2·bMaxT) ≈ 2⁻²⁴·amax:
// decoding the tinycode q4/q8 models, the logits stay within 2.3e-5 of
// transformers' (the int16 kernels: 1.1e-5; a 2⁻²¹·amax grid measured 6e-5,
// 2⁻¹⁴·amax 1e-2, against greedy margins down to 1e-2).
type actB struct {
	K, G, C int       // row width, groups per row, codes per chunk
	xb      []int8    // L·3K
	dq      []float32 // L: dx
	sx, cr  []float32 // L·G

	soff []int32   // K/C: byte offset of the scale of each chunk's first group
	idx  [16]int32 // lane → group of the lane, relative to the chunk's first
	kmsk uint64    // scale lanes to load per chunk: (1 << groups per chunk) − 1

	// scratch of Do: Σx and Σt per group, L·G
	sums []float64
	tsum []int64

	// the call in flight (see Do)
	x    []float32
	gs   int
	bits int
}

// bMaxT bounds |t|: it keeps hi within ±127 after lo and mid take their
// signed-byte share (|hi| ≤ (bMaxT/2⁸ + 2⁸)/2⁸ < 127).
const bMaxT = 8290000

// bChunk is the codes per chunk for bits-wide codes.
func bChunk(bits int) int { return 512 / bits }

// bFits reports whether the byte-dot kernels take q with rows of K: 4 or 8
// bits, groups a multiple of 32, K a multiple of the chunk.
func bFits(q *QMatrix, K int) bool {
	return (q.Bits == 4 || q.Bits == 8) && q.GroupSize >= 32 && q.GroupSize%32 == 0 &&
		K%q.GroupSize == 0 && K%bChunk(q.Bits) == 0
}

// xbIndex returns where value r of a chunk of C codes goes in a plane.
func xbIndex(r, C int) int {
	if C == 64 {
		return r
	}
	return r&1<<6 | r>>1
}

// quantize fills a from x (L, K) for groups of gs bits-wide codes, quantizing
// the rows over p's threads when there are several.
func (a *actB) quantize(p *Pool, x []float32, L, K, gs, bits int) {
	C := bChunk(bits)
	G := K / gs
	a.x, a.gs, a.bits = x, gs, bits
	a.K, a.G, a.C = K, G, C
	a.xb = grow(a.xb, 3*L*K)
	a.dq = grow(a.dq, L)
	a.sx = grow(a.sx, L*G)
	a.cr = grow(a.cr, L*G)
	a.sums, a.tsum = grow(a.sums, L*G), grow(a.tsum, L*G)
	a.soff = grow(a.soff, K/C)
	for j := range a.soff {
		a.soff[j] = int32(4 * (j * C / gs))
	}
	lanes := C / 16 // codes per lane
	for i := range a.idx {
		a.idx[i] = int32(i * lanes / gs)
	}
	a.kmsk = 1<<max(1, C/gs) - 1
	if L == 1 || p == nil {
		a.Do(0, L)
	} else {
		p.Run(L, 1, a)
	}
	a.x = nil
}

// Do quantizes rows [lo, hi) of a.x.
func (a *actB) Do(lo, hi int) {
	K, G, C, gs := a.K, a.G, a.C, a.gs
	c := float64(int(1)<<a.bits-1) / 2
	for l := lo; l < hi; l++ {
		x := a.x[l*K : (l+1)*K]
		d := absMax(x) / bMaxT
		a.dq[l] = d
		xb := a.xb[3*l*K : 3*(l+1)*K]
		sx, cr := a.sx[l*G:(l+1)*G], a.cr[l*G:(l+1)*G]
		id := 0.0
		if d != 0 {
			id = 1 / float64(d)
		}
		sums, tsum := a.sums[l*G:(l+1)*G], a.tsum[l*G:(l+1)*G]
		if !quantRowBAsm(xb, x, gs, C, id, sums, tsum) {
			for g := range G {
				sums[g], tsum[g] = quantGroupB(xb, x, g*gs, (g+1)*gs, C, id)
			}
		}
		for g, s := range sums {
			sx[g] = float32(s)
			cr[g] = float32(c * (s - float64(d)*float64(tsum[g])))
		}
	}
}

// quantGroupB rounds x[k0:k1) (within whole chunks' reach) to t = round(x·id),
// stores each t's three bytes in xb (a row's planes, see actB) and returns Σx
// in float64 and Σt.
func quantGroupB(xb []int8, x []float32, k0, k1, C int, id float64) (sum float64, ts int64) {
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
		base := k / C * 3 * C
		i := base + xbIndex(k%C, C)
		xb[i], xb[i+C], xb[i+2*C] = hi, mid, lo
	}
	return sum, ts
}

// qMatVecBGo is the portable byte-dot mat-vec: the same sums as the assembly
// kernels (exact integer dots per group, then float), the reference they are
// checked against.
func qMatVecBGo(dst []float32, q *QMatrix, K, n0 int, a *actB, l int) {
	G, gs, C := a.G, q.GroupSize, a.C
	xb := a.xb[3*l*K : 3*(l+1)*K]
	dx, sx, cr := a.dq[l], a.sx[l*G:(l+1)*G], a.cr[l*G:(l+1)*G]
	for i := range dst {
		n := n0 + i
		w, s, b := q.row(n, K)
		var sum, bias float32
		for g := range G {
			var acc int64
			for k := g * gs; k < (g+1)*gs; k++ {
				base := k / C * 3 * C
				j := base + xbIndex(k%C, C)
				t := int64(xb[j])<<16 + int64(xb[j+C])<<8 + int64(xb[j+2*C])
				acc += int64(code(w, k, q.Bits)) * t
			}
			sum += s[g] * float32(acc)
			bias += b[g]*sx[g] + s[g]*cr[g]
		}
		dst[i] = dx*sum + bias
	}
}
