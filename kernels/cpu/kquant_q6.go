package cpu

import (
	"encoding/binary"
	"math"
)

// The blocked layout of a GGUF Q6_K weight (metaQ6; see PrepareKQuant). A
// q6_k superblock of 256 values is sixteen affine groups of 16, group j with
// scale d·sc_j (f16 d, int8 sc_j) and bias −32·d·sc_j, codes q < 64; it is
// one stripe of the byte-dot kernels, whose lanes sum one group each. A code
// splits into its low nibble and its top two bits, q = lo + 16·hi: a chunk
// of a row is the 64 bytes of the 4-bit layout's chunk (lane j: word c of
// group j's low nibbles, c = 0, 1), then 32 bytes of their top bits, byte k
// holding those of lane byte k's low nibble (bits 0–1) and high nibble (bits
// 4–5), and of lane byte k+32's (bits 2–3 and 6–7). A row's stripes are its
// superblocks, and its scales per stripe d (f16) and the sixteen sc (int8):
// 18 bytes. The biases are −32 times the scales, so none are stored (the
// activations fold them in: see actB). Per 256 values 2·96 + 18 bytes: the
// 6.5625 bits a weight q6_k stores.
//
// A four-row block is, per stripe and chunk, the four rows' chunks in row
// order (96 bytes each), then the four rows' scales; a one-row block the
// row's chunks, then its scales.

// q6Chunk is the bytes of one row's chunk of a blocked q6_k weight.
const q6Chunk = 96

// prepareQ6K is PrepareKQuant for q6_k.
func (w *KQuant) prepareQ6K() *Weight {
	q := &QMatrix{Bits: 6, GroupSize: 16, meta: metaQ6}
	if !kern.blocked || !kern.q6 || !bFits(q, w.K) {
		return nil
	}
	for o := 208; o < len(w.B); o += 210 {
		if d := f16At(w.B[o:]); math.IsInf(float64(d), 0) || math.IsNaN(float64(d)) {
			return nil
		}
	}
	q.blockRows(w.N, w.K, w.q6kRows)
	return &Weight{Format: FormatQ, N: w.N, K: w.K, Q: q}
}

// q6kRows sets dst's kmeta to rows [n0, n1) of a q6_k w in the blocked
// layout's row form: each row's chunks (stripe by stripe, q6Chunk bytes
// each), then its scales (18 bytes a stripe).
func (w *KQuant) q6kRows(dst *QMatrix, n0, n1 int) {
	S := w.K / 256
	rowB := S * (2*q6Chunk + 18)
	dst.kmeta = grow(dst.kmeta, (n1-n0)*rowB)
	var q [256]uint8
	for n := n0; n < n1; n++ {
		r, out := w.row(n), dst.kmeta[(n-n0)*rowB:(n-n0+1)*rowB]
		for s := range S {
			b := (*[210]byte)(r[210*s:])
			q6Codes(&q, b)
			for c := range 2 {
				putQ6Chunk((*[q6Chunk]byte)(out[(2*s+c)*q6Chunk:]), &q, c)
			}
			sc := out[2*S*q6Chunk+18*s:]
			sc[0], sc[1] = b[208], b[209]
			copy(sc[2:18], b[192:208])
		}
	}
}

// q6Codes sets q to the 256 codes (0…63) of q6_k block b, in value order
// (ggml-common.h's layout; see deqQ6K).
func q6Codes(q *[256]uint8, b *[210]byte) {
	ql, qh := b[0:128], b[128:192]
	for n := range 2 {
		ql, qh, y := ql[64*n:64*n+64], qh[32*n:32*n+32], q[128*n:128*n+128]
		for l := range 32 {
			x0, x1, e := ql[l], ql[l+32], qh[l]
			y[l] = x0&15 | (e&3)<<4
			y[l+32] = x1&15 | (e>>2&3)<<4
			y[l+64] = x0>>4 | (e>>4&3)<<4
			y[l+96] = x1>>4 | (e>>6&3)<<4
		}
	}
}

// q6Pos returns the value (of a stripe's 256) that byte p (< 64) of chunk c's
// low nibbles holds, in its low nibble (h = 0) or high one (h = 1): lane p/4
// is group p/4, whose word c has values 8c … 8c+7, two a byte.
func q6Pos(c, p, h int) int { return 16*(p/4) + 8*c + 2*(p%4) + h }

// putQ6Chunk writes chunk c of a stripe with codes q into ch.
func putQ6Chunk(ch *[q6Chunk]byte, q *[256]uint8, c int) {
	clear(ch[64:])
	for p := range 64 {
		lo, hi := q[q6Pos(c, p, 0)], q[q6Pos(c, p, 1)]
		ch[p] = lo&15 | (hi&15)<<4
		sh := 2 * (p / 32)
		ch[64+p%32] |= (lo>>4)<<sh | (hi>>4)<<(4+sh)
	}
}

// q6Code returns the code of byte p's nibble h of chunk ch (see putQ6Chunk).
func q6Code(ch []byte, p, h int) uint8 {
	return ch[p]>>(4*h)&15 | (ch[64+p%32]>>(2*(p/32)+4*h)&3)<<4
}

// blockRowsOfQ6 is blockRowsOf for a metaQ6 q: rows [n0, n0+r) of slab q
// (columns [q.k0, q.k0+kw) of rows of K) from src.kmeta (see q6kRows).
func (q *QMatrix) blockRowsOfQ6(src *QMatrix, n0, r, K, kw int) {
	S, rowS, s0 := kw/256, K/256, q.k0/256
	S1, rowB := blockRowBytes(q, kw), rowS*(2*q6Chunk+18)
	blk := q.Blocked[n0*S1 : (n0+r)*S1]
	o := 0
	for s := range S {
		for c := range 2 {
			for i := range r {
				ch := src.kmeta[i*rowB+(2*(s0+s)+c)*q6Chunk:]
				o += copy(blk[o:o+q6Chunk], ch[:q6Chunk])
			}
		}
	}
	for i := range r {
		sc := src.kmeta[i*rowB+2*rowS*q6Chunk+18*s0:]
		o += copy(blk[o:o+18*S], sc[:18*S])
	}
}

// q6Stripe sets codes and scales to stripe s (values [256s, 256s+256)) of
// row n of a metaQ6 q (rows of K): its codes in value order and its scales
// d·sc.
func (q *QMatrix) q6Stripe(codes *[256]uint8, scales *[16]float32, n, K, s int) {
	j := len(q.slabs) - 1
	for q.slabs[j].k0 > 256*s {
		j--
	}
	sl, kw := &q.slabs[j], q.slabCols(j, K)
	blk, r, i, _, _ := sl.blockedRow(n, kw)
	S, s := kw/256, s-sl.k0/256 // the slab's stripes, and s among them
	for c := range 2 {
		ch := blk[((2*s+c)*r+i)*q6Chunk:]
		for p := range 64 {
			codes[q6Pos(c, p, 0)], codes[q6Pos(c, p, 1)] = q6Code(ch, p, 0), q6Code(ch, p, 1)
		}
	}
	sc := blk[r*S*2*q6Chunk+i*18*S+18*s:]
	d := f16At(sc)
	for g := range scales {
		scales[g] = d * float32(int8(sc[2+g]))
	}
}

// unblockQ6 is unblock for a metaQ6 q: the rows become 8-bit codes in
// groups of 16 with scales d·sc and biases −32·d·sc, all exact in float32
// (d·sc·q has at most 11 + 7 + 6 significant bits), so DequantRow's
// float32(scale·q) + bias is d·sc·(q − 32) as gguf-py computes it.
func (q *QMatrix) unblockQ6(dst *QMatrix, n0, n1, K int) {
	G := K / 16
	dst.Bits, dst.GroupSize = 8, 16
	dst.W = grow(dst.W, (n1-n0)*K/4)
	dst.Scales, dst.Biases = grow(dst.Scales, (n1-n0)*G), grow(dst.Biases, (n1-n0)*G)
	var codes [256]uint8
	var scales [16]float32
	for n := n0; n < n1; n++ {
		i := n - n0
		for s := range K / 256 {
			q.q6Stripe(&codes, &scales, n, K, s)
			w := dst.W[i*K/4+64*s:]
			for j := range 64 {
				w[j] = binary.LittleEndian.Uint32(codes[4*j:])
			}
			for g, v := range scales {
				dst.Scales[i*G+16*s+g], dst.Biases[i*G+16*s+g] = v, -32*v
			}
		}
	}
}

// dequantBlockedRowQ6 is dequantBlockedRow for a metaQ6 q: float32(scale·q)
// + bias, as DequantRow of its unblocked rows.
func (q *QMatrix) dequantBlockedRowQ6(dst []float32, n, K int) {
	var codes [256]uint8
	var scales [16]float32
	for s := range K / 256 {
		q.q6Stripe(&codes, &scales, n, K, s)
		d := dst[256*s : 256*s+256]
		for k, c := range codes {
			v := scales[k/16]
			d[k] = float32(v*float32(c)) + -32*v
		}
	}
}
