package cpu

import (
	"encoding/binary"
	"math"
)

// The straightforward repacking into the blocked layout, the reference the
// load path's word-at-a-time loops (blocked.go, kquant_affine.go,
// kquant_q6.go) are checked against byte for byte: each GGUF block is first
// rewritten as a row-major affine row (codes, then float32 scales and
// biases, or for q4_k and q6_k the blocked layout's own row form), and the
// rows are then scattered into four-row blocks a code word and a scale at a
// time, every element through the float32 conversions.

// refRows is rows of a matrix in row-major affine form: code words, scales
// and biases, or (q4_k, q6_k) the blocked layout's row form in kmeta.
type refRows struct {
	W              []uint32
	Scales, Biases []float32
	kmeta          []byte
}

// refPrepareKQuant is PrepareKQuant done the straightforward way.
func refPrepareKQuant(w *KQuant) *Weight {
	var q *QMatrix
	var rows func(dst *refRows, n0, n1 int)
	switch w.Type {
	case KQ4_0, KQ8_0:
		bits, _ := w.affineForm()
		meta, ok := refAffineMeta(w)
		if !ok {
			return nil
		}
		q, rows = &QMatrix{Bits: bits, GroupSize: 32, meta: meta}, w.refAffineRows
	case KQ4K:
		q, rows = &QMatrix{Bits: 4, GroupSize: 32, meta: metaK}, w.refQ4KRows
	case KQ6K:
		q, rows = &QMatrix{Bits: 6, GroupSize: 16, meta: metaQ6}, w.refQ6KRows
	default:
		return nil
	}
	q.refBlockRows(w.N, w.K, rows)
	return &Weight{Format: FormatQ, N: w.N, K: w.K, Q: q}
}

// refBlock is QMatrix.block done the straightforward way.
func (q *QMatrix) refBlock(N, K int) {
	words, G := K*q.Bits/32, K/q.GroupSize
	q.meta = refMetaKind(q.Scales, q.Biases)
	q.refBlockRows(N, K, func(dst *refRows, n0, n1 int) {
		dst.W, dst.Scales, dst.Biases = q.W[n0*words:n1*words], q.Scales[n0*G:n1*G], q.Biases[n0*G:n1*G]
	})
	q.W, q.Scales, q.Biases = nil, nil, nil
}

func refMetaKind(s, b []float32) uint8 {
	var notBF16, notF16 bool
	for _, x := range [][]float32{s, b} {
		for _, v := range x {
			notBF16 = notBF16 || math.Float32bits(v)&0xffff != 0
			notF16 = notF16 || F16ToF32(F32ToF16(v)) != v
		}
	}
	switch {
	case !notBF16:
		return metaBF16
	case !notF16:
		return metaF16
	}
	return metaF32
}

func refPutMeta(dst []byte, v []float32, kind uint8) {
	for i, x := range v {
		switch kind {
		case metaBF16:
			binary.LittleEndian.PutUint16(dst[2*i:], uint16(math.Float32bits(x)>>16))
		case metaF16:
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(x))
		default:
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(x))
		}
	}
}

func refAffineMeta(w *KQuant) (uint8, bool) {
	_, size := w.Type.BlockSize()
	_, off := w.affineForm()
	var s, b []float32
	for o := 0; o < len(w.B); o += size {
		d := f16At(w.B[o:])
		if math.IsInf(float64(d), 0) || math.IsNaN(float64(d)) {
			return 0, false
		}
		s, b = append(s, d), append(b, -off*d)
	}
	return refMetaKind(s, b), true
}

func (q *QMatrix) refBlockRows(N, K int, rows func(dst *refRows, n0, n1 int)) {
	out := make([]byte, N*blockRowBytes(q, K))
	kw := slabWidth(q, K)
	q.slabs = nil
	off := 0
	for k0 := 0; k0 < K; k0 += kw {
		n := N * blockRowBytes(q, min(kw, K-k0))
		q.slabs = append(q.slabs, QMatrix{Bits: q.Bits, GroupSize: q.GroupSize, Blocked: out[off : off+n : off+n], meta: q.meta, k0: k0})
		off += n
	}
	var src refRows
	for n0 := 0; n0 < N; {
		r := 4
		if n0 >= N&^3 {
			r = 1
		}
		rows(&src, n0, n0+r)
		for j := range q.slabs {
			q.slabs[j].refBlockRowsOf(&src, n0, r, K, q.slabCols(j, K))
		}
		n0 += r
	}
	q.Blocked = out
}

func (q *QMatrix) refBlockRowsOf(src *refRows, n0, r, K, kw int) {
	if q.meta == metaQ6 {
		q.refBlockRowsOfQ6(src, n0, r, K, kw)
		return
	}
	rb, G, S1, mb := kw*q.Bits/8, kw/q.GroupSize, blockRowBytes(q, kw), metaRowBytes(kw/q.GroupSize, q.meta)
	wpg, words, rowG, g0 := q.wordsPerGroup(), K*q.Bits/32, K/q.GroupSize, q.k0/q.GroupSize
	blk := q.Blocked[n0*S1 : (n0+r)*S1]
	dst := blockWords(blk)
	o := 0
	for s0 := 0; s0 < G; s0 += 16 {
		for c := range wpg {
			for i := range r {
				w := src.W[i*words+g0*wpg:]
				for j := range min(16, G-s0) {
					dst[o] = w[(s0+j)*wpg+c]
					o++
				}
			}
		}
	}
	for i := range r {
		if q.meta == metaK {
			rm, o := metaRowBytes(rowG, metaK), metaRowBytes(g0, metaK)
			row := src.kmeta[2*i*rm : 2*(i+1)*rm]
			copy(blk[r*rb+i*mb:r*rb+(i+1)*mb], row[o:o+mb])
			copy(blk[r*rb+(r+i)*mb:r*rb+(r+i+1)*mb], row[rm+o:rm+o+mb])
			continue
		}
		at := i*rowG + g0
		refPutMeta(blk[r*rb+i*mb:], src.Scales[at:at+G], q.meta)
		refPutMeta(blk[r*rb+(r+i)*mb:], src.Biases[at:at+G], q.meta)
	}
}

func (w *KQuant) refAffineRows(dst *refRows, n0, n1 int) {
	bits, off := w.affineForm()
	G, words := w.K/32, w.K*bits/32
	dst.W = grow(dst.W, (n1-n0)*words)
	dst.Scales, dst.Biases = grow(dst.Scales, (n1-n0)*G), grow(dst.Biases, (n1-n0)*G)
	for n := n0; n < n1; n++ {
		r, i := w.row(n), n-n0
		for g := range G {
			s := dst.W[i*words+g*bits : i*words+(g+1)*bits]
			var d float32
			if bits == 4 {
				b := r[18*g:]
				d = f16At(b)
				for c := range s { // word c: values 8c … 8c+7, value j from byte j mod 16's low (j < 16) or high nibble
					var x uint32
					for v := range 8 {
						j := 8*c + v
						x |= uint32(b[2+j%16]>>(4*(j/16))&15) << (4 * v)
					}
					s[c] = x
				}
			} else {
				b := r[34*g:]
				d = f16At(b)
				for c := range s {
					s[c] = binary.LittleEndian.Uint32(b[2+4*c:]) ^ 0x80808080
				}
			}
			dst.Scales[i*G+g], dst.Biases[i*G+g] = d, -off*d
		}
	}
}

func (w *KQuant) refQ4KRows(dst *refRows, n0, n1 int) {
	G, words := w.K/32, w.K/8
	rm := metaRowBytes(G, metaK)
	dst.W = grow(dst.W, (n1-n0)*words)
	dst.kmeta = grow(dst.kmeta, (n1-n0)*2*rm)
	for n := n0; n < n1; n++ {
		r, i := w.row(n), n-n0
		code := dst.W[i*words : (i+1)*words]
		sm := dst.kmeta[2*i*rm : (2*i+1)*rm]
		bm := dst.kmeta[(2*i+1)*rm : (2*i+2)*rm]
		for j := range w.K / 256 {
			b := r[144*j:]
			g := 8 * j
			s, h := 20*(g/16), g%16/8
			d, e := binary.LittleEndian.Uint16(b[0:]), binary.LittleEndian.Uint16(b[2:])^0x8000
			binary.LittleEndian.PutUint16(sm[s+2*h:], d)
			binary.LittleEndian.PutUint16(bm[s+2*h:], e)
			if h == 0 && g+8 == G {
				binary.LittleEndian.PutUint16(sm[s+2:], d)
				binary.LittleEndian.PutUint16(bm[s+2:], e)
			}
			for k := range 8 {
				sc, m := scaleMin(k, b[4:16])
				sm[s+4+8*h+k], bm[s+4+8*h+k] = byte(sc), byte(m)
			}
			// sub-block 2k's values are the low nibbles of qs[32k:32k+32], 2k+1's the high ones
			for k := range 4 {
				for c := range 4 {
					for hh := range 2 {
						var x uint32
						for v := range 8 {
							x |= uint32(b[16+32*k+8*c+v]>>(4*hh)&15) << (4 * v)
						}
						code[(g+2*k+hh)*4+c] = x
					}
				}
			}
		}
	}
}

func (w *KQuant) refQ6KRows(dst *refRows, n0, n1 int) {
	S := w.K / 256
	rowB := S * (2*q6Chunk + 18)
	dst.kmeta = grow(dst.kmeta, (n1-n0)*rowB)
	var q [256]uint8
	for n := n0; n < n1; n++ {
		r, out := w.row(n), dst.kmeta[(n-n0)*rowB:(n-n0+1)*rowB]
		for s := range S {
			b := (*[210]byte)(r[210*s:])
			refQ6Codes(&q, b)
			for c := range 2 {
				refPutQ6Chunk((*[q6Chunk]byte)(out[(2*s+c)*q6Chunk:]), &q, c)
			}
			sc := out[2*S*q6Chunk+18*s:]
			sc[0], sc[1] = b[208], b[209]
			copy(sc[2:18], b[192:208])
		}
	}
}

func refQ6Codes(q *[256]uint8, b *[210]byte) {
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

func refPutQ6Chunk(ch *[q6Chunk]byte, q *[256]uint8, c int) {
	clear(ch[64:])
	for p := range 64 {
		lo, hi := q[q6Pos(c, p, 0)], q[q6Pos(c, p, 1)]
		ch[p] = lo&15 | (hi&15)<<4
		sh := 2 * (p / 32)
		ch[64+p%32] |= (lo>>4)<<sh | (hi>>4)<<(4+sh)
	}
}

func (q *QMatrix) refBlockRowsOfQ6(src *refRows, n0, r, K, kw int) {
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
