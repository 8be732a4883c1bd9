package cpu

import (
	"encoding/binary"
	"math"
)

// PrepareKQuant returns w as the MLX affine [Weight] it is exactly, in the
// blocked layout the byte-dot kernels read (see Prepare), when this CPU's
// kernels read that layout and w is q4_0, q8_0, q4_k or (where the kernels
// take it: GFNI) q6_k with finite scales; else nil, and w runs as stored. The
// result is a copy (4 bits of codes a weight for q4_0 and q4_k and 8 for
// q8_0, plus a scale and a bias a 32-element group: f16 where they are f16
// values for q4_0 and q8_0, 5 and 9 bits a weight; for q4_k 4.625 bits a
// weight and for q6_k the 6.5625 it stores, see below) that does not view w's
// bytes.
//
// A q4_0 block is an affine group of 32 with scale d, bias −8·d and codes q;
// a q8_0 block one with scale d, bias −128·d and codes q + 128. With d an f16
// value, d·c (c < 2⁸) and both biases are exact in float32, and so is
// d·c + bias = d·(q − 8) or d·q: every weight is the value gguf-py computes,
// bit for bit but for the sign of a zero (d·(8 − 8) = −0 for d < 0; +0
// here). MatMul then takes the byte-dot path for decode and small batches,
// and MatVecs its several-row form, both exact to f32 grade (see MatMul),
// where the block kernels of dotKQuant multiply in float.
//
// A q4_k sub-block of 32 is an affine group with scale d·sc and bias
// −dmin·m (6-bit sc and m, f16 d and dmin a superblock of 256) and codes the
// nibbles; both are exact in float32, but not in 16 bits, so the blocked
// layout keeps them as they are stored, the integers a byte each and the
// factors d and −dmin an f16 each (metaK, see blocked.go), and the kernels
// form d·sc and −dmin·m as they go: the weights are the values gguf-py
// computes, (d·sc)·q − dmin·m, bit for bit.
//
// A q6_k group of 16 is one with scale d·sc (int8 sc, f16 d a superblock),
// bias −32·d·sc and 6-bit codes; its blocked layout (kquant_q6.go) keeps sc
// and d as stored, splits the codes into low nibbles and top bits, and lets
// the activations carry the bias: the weights are d·sc·(q − 32), equal to
// gguf-py's as numbers (its −0 may be +0 here).
func PrepareKQuant(w *KQuant) *Weight {
	switch w.Type {
	case KQ4K:
		return w.prepareQ4K()
	case KQ6K:
		return w.prepareQ6K()
	}
	bits, _ := w.affineForm()
	if bits == 0 {
		return nil
	}
	q := &QMatrix{Bits: bits, GroupSize: 32}
	if !kern.blocked || !bFits(q, w.K) {
		return nil
	}
	meta, ok := w.affineMeta()
	if !ok {
		return nil
	}
	q.meta = meta
	q.blockRows(w.N, w.K, w.affineRows)
	return &Weight{Format: FormatQ, N: w.N, K: w.K, Q: q}
}

// affineForm returns the code width and offset (the bias is −off·d) of w's
// affine form, or 0 bits for types without one.
func (w *KQuant) affineForm() (bits int, off float32) {
	switch w.Type {
	case KQ4_0:
		return 4, 8
	case KQ8_0:
		return 8, 128
	}
	return 0, 0
}

// affineMeta returns the narrowest type that holds every block's scale d and
// bias −off·d exactly, or false if some d is not finite (the affine form
// would turn d·0 into ∞ − ∞).
func (w *KQuant) affineMeta() (uint8, bool) {
	_, size := w.Type.BlockSize()
	_, off := w.affineForm()
	var f metaFit
	for o := 0; o < len(w.B); o += size {
		d := f16At(w.B[o:])
		if math.IsInf(float64(d), 0) || math.IsNaN(float64(d)) {
			return 0, false
		}
		f.add(d)
		f.add(-off * d)
	}
	return f.kind(), true
}

// affineRows sets dst's W, Scales and Biases to rows [n0, n1) of w in the
// affine form (see PrepareKQuant), growing them as needed.
func (w *KQuant) affineRows(dst *QMatrix, n0, n1 int) {
	bits, off := w.affineForm()
	G, words := w.K/32, w.K*bits/32
	dst.W = grow(dst.W, (n1-n0)*words)
	dst.Scales, dst.Biases = grow(dst.Scales, (n1-n0)*G), grow(dst.Biases, (n1-n0)*G)
	for n := n0; n < n1; n++ {
		r := w.row(n)
		i := n - n0
		for g := range G {
			s := dst.W[i*words+g*bits : i*words+(g+1)*bits] // a group's words: 32·bits/32
			var d float32
			if bits == 4 {
				b := (*[18]byte)(r[18*g:])
				d = f16At(b[:])
				lo, hi := binary.LittleEndian.Uint64(b[2:]), binary.LittleEndian.Uint64(b[10:])
				// values 0…15 are the low nibbles of bytes 0…15, 16…31 the high
				const m = 0x0f0f0f0f0f0f0f0f
				s[0], s[1], s[2], s[3] = packNibbles(lo&m), packNibbles(hi&m), packNibbles(lo>>4&m), packNibbles(hi>>4&m)
			} else {
				b := (*[34]byte)(r[34*g:])
				d = f16At(b[:])
				for c := range s {
					s[c] = binary.LittleEndian.Uint32(b[2+4*c:]) ^ 0x80808080 // int8 q → code q + 128
				}
			}
			dst.Scales[i*G+g], dst.Biases[i*G+g] = d, -off*d
		}
	}
}

// packNibbles packs the low nibbles of x's eight bytes into one word, byte j's
// at bits 4j…4j+3 (MLX's order: value j of the word at bits 4j).
func packNibbles(x uint64) uint32 {
	x = (x | x>>4) & 0x00ff00ff00ff00ff
	x = (x | x>>8) & 0x0000ffff0000ffff
	return uint32(x | x>>16)
}

// prepareQ4K is PrepareKQuant for q4_k.
func (w *KQuant) prepareQ4K() *Weight {
	q := &QMatrix{Bits: 4, GroupSize: 32, meta: metaK}
	if !kern.blocked || !bFits(q, w.K) {
		return nil
	}
	for o := 0; o < len(w.B); o += 144 {
		for _, v := range []float32{f16At(w.B[o:]), f16At(w.B[o+2:])} {
			if math.IsInf(float64(v), 0) || math.IsNaN(float64(v)) {
				return nil
			}
		}
	}
	q.blockRows(w.N, w.K, w.q4kRows)
	return &Weight{Format: FormatQ, N: w.N, K: w.K, Q: q}
}

// q4kRows sets dst's W and kmeta to rows [n0, n1) of a q4_k w in the affine
// form of PrepareKQuant, growing them as needed.
func (w *KQuant) q4kRows(dst *QMatrix, n0, n1 int) {
	G, words := w.K/32, w.K/8
	rm := metaRowBytes(G, metaK)
	dst.W = grow(dst.W, (n1-n0)*words)
	dst.kmeta = grow(dst.kmeta, (n1-n0)*2*rm)
	for n := n0; n < n1; n++ {
		r, i := w.row(n), n-n0
		code := dst.W[i*words : (i+1)*words]
		sm := dst.kmeta[2*i*rm : (2*i+1)*rm]     // scales: d and sc
		bm := dst.kmeta[(2*i+1)*rm : (2*i+2)*rm] // biases: −dmin and m
		for j := range w.K / 256 {
			b := (*[144]byte)(r[144*j:])
			g := 8 * j                                                                          // the superblock's first group
			s, h := 20*(g/16), g%16/8                                                           // its stripe's bytes, its factor there
			d, e := binary.LittleEndian.Uint16(b[0:]), binary.LittleEndian.Uint16(b[2:])^0x8000 // d, −dmin
			binary.LittleEndian.PutUint16(sm[s+2*h:], d)
			binary.LittleEndian.PutUint16(bm[s+2*h:], e)
			if h == 0 && g+8 == G { // a last stripe of 8 groups: its second factor repeats the first
				binary.LittleEndian.PutUint16(sm[s+2:], d)
				binary.LittleEndian.PutUint16(bm[s+2:], e)
			}
			for k := range 8 {
				sc, m := scaleMin(k, b[4:16])
				sm[s+4+8*h+k], bm[s+4+8*h+k] = byte(sc), byte(m)
			}
			// sub-block 2k's values are the low nibbles of qs[32k:32k+32],
			// 2k+1's the high ones
			for k := range 4 {
				for c := range 4 {
					x := binary.LittleEndian.Uint64(b[16+32*k+8*c:])
					const m = 0x0f0f0f0f0f0f0f0f
					code[(g+2*k)*4+c], code[(g+2*k+1)*4+c] = packNibbles(x&m), packNibbles(x>>4&m)
				}
			}
		}
	}
}
