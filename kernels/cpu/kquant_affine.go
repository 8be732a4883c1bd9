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
	if !kern.blocked || w.Type == KQ6K && !kern.q6 {
		return nil
	}
	q := w.blocked()
	if q == nil {
		return nil
	}
	return &Weight{Format: FormatQ, N: w.N, K: w.K, Q: q}
}

// blocked returns w in the blocked layout of PrepareKQuant, or nil where w has
// none: its type, rows that are not whole chunks (bFits), or a scale that is
// not finite. Each four-row block of each K-slab is written straight from
// the stored blocks, a code word at a time, in the layout's order.
func (w *KQuant) blocked() *QMatrix {
	var q *QMatrix
	var put func(blk []byte, rows [][]byte, kw int) bool
	var fit scaleFit
	switch w.Type {
	case KQ4_0, KQ8_0:
		// The scales are f16 values and their biases, but for |d| ≥
		// 2¹⁶/off, too: the blocks are written so, the scales checked as
		// they go, and written again in the type they need where that is
		// another (see scaleFit).
		bits, _ := w.affineForm()
		q = &QMatrix{Bits: bits, GroupSize: 32, meta: metaF16}
		put = func(blk []byte, rows [][]byte, kw int) bool { w.putAffine(blk, rows, kw, q.meta, &fit); return true }
	case KQ4K:
		q, put = &QMatrix{Bits: 4, GroupSize: 32, meta: metaK}, putQ4K
	case KQ6K:
		q, put = &QMatrix{Bits: 6, GroupSize: 16, meta: metaQ6}, putQ6K
	default:
		return nil
	}
	if !bFits(q, w.K) || !w.fill(q, put) {
		return nil
	}
	if w.Type == KQ4_0 || w.Type == KQ8_0 {
		meta, ok := fit.kind(w.Type)
		if !ok {
			return nil
		}
		if meta != q.meta {
			q.meta = meta
			w.fill(q, put)
		}
	}
	return q
}

// fill sets q's Blocked to w in q's blocked layout, put writing each
// four-row block (or last single row) of each K-slab from its stored rows;
// it returns false if put found a scale that is not finite.
func (w *KQuant) fill(q *QMatrix, put func(blk []byte, rows [][]byte, kw int) bool) bool {
	ok := true
	q.blockLayout(w.N, w.K)
	vals, size := w.Type.BlockSize()
	var rows [4][]byte
	for n0, r := 0, 0; n0 < w.N; n0 += r {
		r = blockRowsAt(n0, w.N)
		for j := range q.slabs {
			sl, kw := &q.slabs[j], q.slabCols(j, w.K)
			b0, b1 := sl.k0/vals*size, (sl.k0+kw)/vals*size // the slab's bytes of a stored row
			for i := range r {
				rows[i] = w.row(n0 + i)[b0:b1]
			}
			ok = put(sl.blockAt(n0, r, kw), rows[:r], kw) && ok
		}
	}
	return ok
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

// scaleFit gathers, over a q4_0 or q8_0 weight's block scales d, what the
// narrowest type that holds every d and bias −off·d exactly needs to know.
// d, an f16, is an f16 value; −off·d (off a power of two) has d's
// significand, so it is a bf16 value iff d is, and an f16 value unless it
// overflows, |d| ≥ 2¹⁶/off. A d that is not finite leaves no affine form
// (d·0 would be ∞ − ∞).
type scaleFit struct {
	max     uint16 // the largest |d|, as f16 bits
	low     uint16 // the normal d's bits, or-ed: bf16 values iff the low three are 0
	notBF16 bool   // a subnormal d that is not a bf16 value
}

// kind returns the narrowest type for the scales and biases of a q4_0 or
// q8_0 weight of type kt, or false if some d is not finite.
func (f *scaleFit) kind(kt KType) (uint8, bool) {
	big := uint16(0x7000) // |d| ≥ 2¹³: −8·d overflows f16
	if kt == KQ8_0 {
		big = 0x6000 // 2⁹
	}
	switch {
	case f.max >= 0x7c00:
		return 0, false
	case f.low&7 == 0 && !f.notBF16:
		return metaBF16, true
	case f.max < big:
		return metaF16, true
	}
	return metaF32, true
}

// putAffine writes a block of a q4_0 or q8_0 w (rows: the stored rows of its
// slab of kw columns) into blk, its scales and biases as meta. Writing them
// as f16, it adds the scales to fit, and where fit then wants another type
// the values written for some are not theirs.
func (w *KQuant) putAffine(blk []byte, rows [][]byte, kw int, meta uint8, fit *scaleFit) {
	bits, off := w.affineForm()
	G := kw / 32
	if bits == 8 {
		putQ8Codes(blockWords(blk), rows, G)
	} else {
		putQ4Codes(blockWords(blk), rows, G)
	}
	r, size := len(rows), 2+32*bits/8
	rb, mb := kw*bits/8, metaRowBytes(G, meta)
	for i, row := range rows {
		s, b := blk[r*rb+i*mb:][:mb], blk[r*rb+(r+i)*mb:][:mb]
		switch meta {
		case metaF16: // d as stored; −off·d by its exponent where normal
			e := uint16(3 << 10) // log₂ off, in the exponent field
			if bits == 8 {
				e = 7 << 10
			}
			mx, low := fit.max, fit.low
			for g := range G {
				h := binary.LittleEndian.Uint16(row[size*g:])
				a := h & 0x7fff
				mx = max(mx, a)
				nb := (h ^ 0x8000) + e
				if a < 0x400 { // zero or subnormal
					d := F16ToF32(h)
					nb = F32ToF16(-off * d)
					fit.notBF16 = fit.notBF16 || math.Float32bits(d)&0xffff != 0
				} else {
					low |= h
				}
				binary.LittleEndian.PutUint16(s[2*g:], h)
				binary.LittleEndian.PutUint16(b[2*g:], nb)
			}
			fit.max, fit.low = mx, low
		case metaBF16:
			for g := range G {
				d := math.Float32frombits(f16Bits(binary.LittleEndian.Uint16(row[size*g:])))
				binary.LittleEndian.PutUint16(s[2*g:], uint16(math.Float32bits(d)>>16))
				binary.LittleEndian.PutUint16(b[2*g:], uint16(math.Float32bits(-off*d)>>16))
			}
		default:
			for g := range G {
				d := math.Float32frombits(f16Bits(binary.LittleEndian.Uint16(row[size*g:])))
				binary.LittleEndian.PutUint32(s[4*g:], math.Float32bits(d))
				binary.LittleEndian.PutUint32(b[4*g:], math.Float32bits(-off*d))
			}
		}
	}
}

// putQ8Codes writes the code words of a block of q8_0 rows (rows[i]: row i's
// G stored blocks) into dst in the blocked layout's order: word c of a group
// is its values 4c … 4c+3, bytes 2+4c … of the block, each q + 128.
func putQ8Codes(dst []uint32, rows [][]byte, G int) {
	o := 0
	for s0 := 0; s0 < G; s0 += 16 {
		L := min(16, G-s0) // the stripe's lanes
		for c := range 8 {
			for _, b := range rows {
				if L == 16 {
					q8Lanes((*[16]uint32)(dst[o:]), (*[16 * 34]byte)(b[34*s0:]), c)
				} else {
					b, d := b[34*s0+2+4*c:], dst[o:o+L]
					for j := range d {
						d[j] = binary.LittleEndian.Uint32(b[34*j:]) ^ 0x80808080
					}
				}
				o += L
			}
		}
	}
}

// q8Lanes sets d to word c of each of the 16 q8_0 blocks of b.
func q8Lanes(d *[16]uint32, b *[16 * 34]byte, c int) {
	for j := range d {
		d[j] = binary.LittleEndian.Uint32(b[34*j+2+4*(c&7):]) ^ 0x80808080 // int8 q → code q + 128
	}
}

// putQ4Codes writes the code words of a block of q4_0 rows (rows[i]: row i's
// G stored blocks) into dst in the blocked layout's order: word c of a group
// is its values 8c … 8c+7, the low nibbles of bytes 2 … 9 (c = 0) and 10 …
// 17 (1) of the block, then their high nibbles (2, 3).
func putQ4Codes(dst []uint32, rows [][]byte, G int) {
	o := 0
	for s0 := 0; s0 < G; s0 += 16 {
		L := min(16, G-s0)
		for c := range 4 {
			for _, b := range rows {
				if L == 16 {
					q4Lanes((*[16]uint32)(dst[o:]), (*[16 * 18]byte)(b[18*s0:]), c)
				} else {
					at, sh := 2+8*(c&1), 4*(c>>1)
					b, d := b[18*s0+at:], dst[o:o+L]
					for j := range d {
						d[j] = packNibbles(binary.LittleEndian.Uint64(b[18*j:]) >> sh & 0x0f0f0f0f0f0f0f0f)
					}
				}
				o += L
			}
		}
	}
}

// q4Lanes sets d to word c of each of the 16 q4_0 blocks of b.
func q4Lanes(d *[16]uint32, b *[16 * 18]byte, c int) {
	at, sh := 2+8*(c&1), 4*(c>>1&1)
	for j := range d {
		d[j] = packNibbles(binary.LittleEndian.Uint64(b[18*j+at:]) >> sh & 0x0f0f0f0f0f0f0f0f)
	}
}

// packNibbles packs the low nibbles of x's eight bytes into one word, byte j's
// at bits 4j…4j+3 (MLX's order: value j of the word at bits 4j).
func packNibbles(x uint64) uint32 {
	x = (x | x>>4) & 0x00ff00ff00ff00ff
	x = (x | x>>8) & 0x0000ffff0000ffff
	return uint32(x | x>>16)
}

// q4kLanes sets d to word c of each of the 16 groups of the q4_k superblocks
// b: group 2k+h of a superblock (144 bytes: 16 of factors and scales, then
// 128 of codes) has the low (h = 0) or high nibbles of code bytes 32k …
// 32k+31.
func q4kLanes(d *[16]uint32, b *[2 * 144]byte, c int) {
	for j := range d {
		at := 144*(j/8) + 16 + 32*(j%8/2) + 8*(c&3)
		d[j] = packNibbles(binary.LittleEndian.Uint64(b[at:]) >> (4 * (j % 2)) & 0x0f0f0f0f0f0f0f0f)
	}
}

// q4kLanes8 is q4kLanes for the 8 groups of one superblock.
func q4kLanes8(d *[8]uint32, b *[144]byte, c int) {
	for j := range d {
		at := 16 + 32*(j/2) + 8*(c&3)
		d[j] = packNibbles(binary.LittleEndian.Uint64(b[at:]) >> (4 * (j % 2)) & 0x0f0f0f0f0f0f0f0f)
	}
}

// putQ4K writes a block of a q4_k weight (rows: the stored rows of its slab
// of kw columns) into blk: the codes, then the scales d and sc, then the
// biases −dmin and m, a stripe's factors then its groups' integers (see
// blocked.go). It returns false if some d or dmin is not finite.
func putQ4K(blk []byte, rows [][]byte, kw int) bool {
	dst, G := blockWords(blk), kw/32
	o := 0
	for s0 := 0; s0 < G; s0 += 16 {
		L := min(16, G-s0)
		for c := range 4 { // word c: bytes 8c … 8c+7 of the group's 32
			for _, b := range rows {
				if L == 16 {
					q4kLanes((*[16]uint32)(dst[o:]), (*[2 * 144]byte)(b[144*(s0/8):]), c)
				} else {
					d := (*[8]uint32)(dst[o:])
					q4kLanes8(d, (*[144]byte)(b[144*(s0/8):]), c)
				}
				o += L
			}
		}
	}
	r, rb, mb := len(rows), kw/2, metaRowBytes(G, metaK)
	var mx uint16 // the largest |d| and |dmin|, as f16 bits
	for i, row := range rows {
		sm, bm := blk[r*rb+i*mb:][:mb], blk[r*rb+(r+i)*mb:][:mb]
		for j := range G / 8 { // superblock j: the groups 8j … 8j+7
			b := (*[144]byte)(row[144*j:])
			s, h := 20*(j/2), j%2                                                               // its stripe's bytes, its factor there
			d, e := binary.LittleEndian.Uint16(b[0:]), binary.LittleEndian.Uint16(b[2:])^0x8000 // d, −dmin
			mx = max(mx, d&0x7fff, e&0x7fff)
			binary.LittleEndian.PutUint16(sm[s+2*h:], d)
			binary.LittleEndian.PutUint16(bm[s+2*h:], e)
			if h == 0 && 8*j+8 == G { // a last stripe of 8 groups: its second factor repeats the first
				binary.LittleEndian.PutUint16(sm[s+2:], d)
				binary.LittleEndian.PutUint16(bm[s+2:], e)
			}
			sc, ms := sm[s+4+8*h:][:8], bm[s+4+8*h:][:8]
			for k := range 4 { // the 6-bit sc and m of groups k and k+4 (scaleMin)
				sc[k], ms[k] = b[4+k]&63, b[8+k]&63
				sc[k+4], ms[k+4] = b[12+k]&15|b[4+k]>>6<<4, b[12+k]>>4|b[8+k]>>6<<4
			}
		}
	}
	return mx < 0x7c00
}
