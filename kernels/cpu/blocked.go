package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// The blocked layout of a 4/8-bit QMatrix (QMatrix.Blocked) makes a decode
// mat-vec one sequential read whose integer sums run over whole groups. The
// byte-dot kernels run four rows at a time, and in row-major order those are
// four code streams a row apart plus their scales and biases elsewhere;
// interleaved here they are one stream, which the prefetchers follow better
// (docs/perf/cpu.md, "Blocked layout").
//
// A kernel's 512-bit load of codes is a chunk: sixteen 32-bit lanes, each one
// word of a row (8 4-bit or 4 8-bit codes). The lanes of a chunk are sixteen
// groups, one word of each: a stripe is 16 consecutive groups of a row, and
// its chunk c holds word c of each of its groups, c = 0 … wpg−1 with wpg =
// GroupSize·bits/32 words per group. A lane's integer sums then run over a
// whole group before the group's scale applies, one scale per lane loaded as
// the stripe's sixteen in order. The last stripe of a row has the G mod 16
// groups left (if any), and its chunks as many lanes (4 bytes each, no pad).
//
// With rb = K·bits/8 code bytes and G = K/GroupSize groups per row, row n owns
// S1 = rb + 2·G·m bytes and rows [n, n+4) of a block start at byte n·S1:
//
//	rows [0, N&^3), four-row blocks:  for each stripe, for each chunk c, the
//	                                  chunk of rows n..n+3 in row order; then
//	                                  the four rows' G scales, then their G
//	                                  biases
//	rows [N&^3, N), one-row blocks:   the row's chunks, G scales, G biases
//
// Scales and biases are bf16 (m = 2) when all of them are bf16 values, as in
// MLX's checkpoints, else f16 when all are f16 values, else f32 (m = 4): a
// 4-bit weight with groups of 64 then reads 4.5 bits per weight, not 5. A
// row's G scales (or biases) take G·m bytes, its meta bytes (metaRowBytes).
//
// A GGUF Q4_K weight keeps its scales and biases as the integers and
// half-precision factors they are (metaK, see PrepareKQuant): scale_g =
// d_b·sc_g and bias_g = e_b·m_g with sc_g, m_g < 64 per group of 32 and d_b,
// e_b f16 per superblock b of eight groups. A row's scales are then, per
// stripe, d of its two superblocks (f16, the second repeating the first in a
// last stripe of 8 groups) and its groups' sc (u8): 20 bytes a stripe of 16
// groups, 12 a stripe of 8; its biases the same with e and m. The kernels
// form each stripe's sixteen scales d·sc in float32, exactly (an f16 times
// an integer below 2⁶), so a 4-bit weight reads 4 + 0.625 bits, where f32
// scales and biases would take 6.
//
// Rows too long for L1 are cut into K-slabs. A kernel keeps a row's activation
// planes (3 bytes an element, see actB) and a four-row block's codes in L1;
// past that, every block reads the planes from L2 again. A slab is columns
// [k0, k0+kw) of every row, whole stripes (the last slab the rest), stored as
// the blocked layout of an N × kw matrix; the slabs follow one another. A
// mat-vec runs each slab as a matrix of its own, the threads on different
// slabs, and adds the slabs' outputs in order. Slabs of 2048 4-bit codes
// (slabWidth) read Llama-3.2-1B's down projection (K = 8192) faster than one
// row, or than slabs of other widths, in Zen 4's fast minutes, and as fast at
// its usual bandwidth; 8-bit codes, in slabs of 1024, read about as fast
// either way (docs/perf/cpu.md, "2026-11-23, Zen 4: K-slabs for down
// (kept)").

// The element types of a blocked layout's scales and biases.
const (
	metaF32 = iota
	metaBF16
	metaF16
	metaK  // an f16 per superblock of 8 groups times a u8 per group (Q4_K)
	metaQ6 // an f16 per stripe times an int8 per group, no biases (Q6_K: see kquant_q6.go)
)

// metaRow is a row's G scales or biases in a blocked layout.
type metaRow struct {
	b    []byte
	kind uint8
}

func (m metaRow) at(g int) float32 {
	switch m.kind {
	case metaBF16:
		return BF16ToF32(binary.LittleEndian.Uint16(m.b[2*g:]))
	case metaF16:
		return F16ToF32(binary.LittleEndian.Uint16(m.b[2*g:]))
	case metaK:
		s := m.b[20*(g/16):] // the group's stripe: two f16 factors, then a byte a group
		return f16At(s[2*(g%16/8):]) * float32(s[4+g%16])
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(m.b[4*g:]))
}

// metaRowBytes returns the bytes of a row's G scales (or biases) stored as
// kind.
func metaRowBytes(G int, kind uint8) int {
	switch kind {
	case metaF32:
		return 4 * G
	case metaK:
		return G + 4*((G+15)/16)
	case metaQ6:
		return 18 * G / 16
	}
	return 2 * G
}

// biasRowBytes returns the bytes of a row's G biases stored as kind: those
// of its scales, but none for metaQ6.
func biasRowBytes(G int, kind uint8) int {
	if kind == metaQ6 {
		return 0
	}
	return metaRowBytes(G, kind)
}

// metaKind returns the narrowest element type that holds every value of s and
// b exactly.
func metaKind(s, b []float32) uint8 {
	var lo uint32 // the low halves' bits: all zero for bf16 values
	notF16 := false
	for _, x := range [][]float32{s, b} {
		for _, v := range x {
			u := math.Float32bits(v)
			lo |= u & 0xffff
			if !notF16 && !isF16(v) {
				notF16 = true
			}
		}
	}
	switch {
	case lo == 0:
		return metaBF16
	case !notF16:
		return metaF16
	}
	return metaF32
}

// putMeta stores v in dst as kind, whose type holds every value exactly.
func putMeta(dst []byte, v []float32, kind uint8) {
	switch kind {
	case metaBF16:
		dst = dst[:2*len(v)]
		for i, x := range v {
			binary.LittleEndian.PutUint16(dst[2*i:], uint16(math.Float32bits(x)>>16))
		}
	case metaF16:
		dst = dst[:2*len(v)]
		for i, x := range v {
			binary.LittleEndian.PutUint16(dst[2*i:], toF16(x))
		}
	default:
		dst = dst[:4*len(v)]
		for i, x := range v {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(x))
		}
	}
}

// blockRowBytes returns S1: the bytes per row of the blocked layout.
func blockRowBytes(q *QMatrix, K int) int {
	G := K / q.GroupSize
	return K*q.Bits/8 + metaRowBytes(G, q.meta) + biasRowBytes(G, q.meta)
}

// Prepare rearranges w into the layout this CPU's kernels read fastest: with
// the AVX-512 byte-dot kernels, 4/8-bit weights they take move to the blocked
// layout (see QMatrix.Blocked), one copy that replaces W, Scales and Biases.
// Others stay as they are. Call it once, before w is used.
func Prepare(w *Weight) {
	if kern.blocked && w.Format == FormatQ && w.Q.Blocked == nil && bFits(w.Q, w.K) {
		w.Q.block(w.N, w.K)
	}
}

// blockL1 is the bytes of L1 a row's activation planes and a four-row block's
// codes may take before the rows are cut into K-slabs (see slabWidth). Tests
// lower it.
var blockL1 = 32 << 10

// slabWidth returns the columns of q's K-slabs for rows of K: K when a row's
// planes and a four-row block's codes fit blockL1, else the most whole stripes
// whose planes and codes fit a third of it (at least one stripe): 2048 for
// 4-bit codes in groups of 64, the width of the 1B model's other matrices.
func slabWidth(q *QMatrix, K int) int {
	per := 3 + 4*q.Bits/8 // bytes per column: planes, and a block's codes
	if K*per <= blockL1 {
		return K
	}
	stripe := 16 * q.GroupSize
	return max(stripe, blockL1/3/per/stripe*stripe)
}

// block moves q (N rows of K) to the blocked layout, in K-slabs.
func (q *QMatrix) block(N, K int) {
	words, G, wpg := K*q.Bits/32, K/q.GroupSize, q.wordsPerGroup()
	q.meta = metaKind(q.Scales, q.Biases)
	q.blockLayout(N, K)
	var rows [4][]uint32
	for n0, r := 0, 0; n0 < N; n0 += r {
		r = blockRowsAt(n0, N)
		for j := range q.slabs {
			sl, kw := &q.slabs[j], q.slabCols(j, K)
			sG, g0 := kw/q.GroupSize, sl.k0/q.GroupSize
			for i := range r {
				o := (n0+i)*words + g0*wpg
				rows[i] = q.W[o : o+sG*wpg]
			}
			blk := sl.blockAt(n0, r, kw)
			putCodes(blockWords(blk), rows[:r], wpg, sG)
			rb, mb := kw*q.Bits/8, metaRowBytes(sG, q.meta)
			for i := range r {
				at := (n0+i)*G + g0
				putMeta(blk[r*rb+i*mb:], q.Scales[at:at+sG], q.meta)
				putMeta(blk[r*rb+(r+i)*mb:], q.Biases[at:at+sG], q.meta)
			}
		}
	}
	q.W, q.Scales, q.Biases = nil, nil, nil
}

// blockLayout sets q's Blocked to zeroed room for the blocked layout of an N ×
// K matrix of q.Bits-bit codes in groups of q.GroupSize, scales and biases
// stored as q.meta, and its slabs to their views of it.
func (q *QMatrix) blockLayout(N, K int) {
	q.Blocked = alignedBytes(N * blockRowBytes(q, K))
	kw := slabWidth(q, K)
	q.slabs = make([]QMatrix, 0, (K+kw-1)/kw)
	off := 0
	for k0 := 0; k0 < K; k0 += kw {
		n := N * blockRowBytes(q, min(kw, K-k0))
		q.slabs = append(q.slabs, QMatrix{Bits: q.Bits, GroupSize: q.GroupSize, Blocked: q.Blocked[off : off+n : off+n], meta: q.meta, k0: k0})
		off += n
	}
}

// blockRowsAt returns the rows of the block of a blocked layout of N rows
// that starts at row n0: four, or one past the last whole four-row block.
func blockRowsAt(n0, N int) int {
	if n0 >= N&^3 {
		return 1
	}
	return 4
}

// blockAt returns the bytes of the block of r rows at row n0 of a slab q of
// kw columns.
func (q *QMatrix) blockAt(n0, r, kw int) []byte {
	S1 := blockRowBytes(q, kw)
	return q.Blocked[n0*S1 : (n0+r)*S1]
}

// putCodes writes a block's code words into dst, the block's words, in the
// blocked layout's order (see blockedWord): rows[i] is row i's G groups of
// wpg words, group 0 first. The words are written in order, each read from
// L1: unblock's group order, with strided stores, loads a model markedly
// slower (docs/perf/cpu.md, "Blocked layout").
func putCodes(dst []uint32, rows [][]uint32, wpg, G int) {
	o := 0
	for s0 := 0; s0 < G; s0 += 16 {
		L := min(16, G-s0) // the stripe's lanes
		for c := range wpg {
			for _, w := range rows {
				w := w[s0*wpg+c:]
				d := dst[o : o+L]
				for j := range d {
					d[j] = w[j*wpg]
				}
				o += L
			}
		}
	}
}

// slabCols returns the columns of slab j of a blocked q with rows of K.
func (q *QMatrix) slabCols(j, K int) int {
	if j+1 < len(q.slabs) {
		return q.slabs[j+1].k0 - q.slabs[j].k0
	}
	return K - q.slabs[j].k0
}

// wordsPerGroup is the 32-bit words of codes of a group: a stripe's chunks.
func (q *QMatrix) wordsPerGroup() int { return q.GroupSize * q.Bits / 32 }

// blockedWord returns where word c of group g (of G) of row i of an r-row
// block lies in the block.
func (q *QMatrix) blockedWord(g, c, i, r, G int) int {
	wpg, s := q.wordsPerGroup(), g/16
	lanes := min(16, G-16*s) // the stripe's
	return r*64*wpg*s + 4*(lanes*(r*c+i)+g%16)
}

// groupWords returns where the words of group g (of G) of row i of an r-row
// block lie, as indices of the block's 32-bit words: word c is at o + c·step.
func (q *QMatrix) groupWords(g, i, r, G int) (o, step int) {
	return q.blockedWord(g, 0, i, r, G) / 4, r * min(16, G-g&^15)
}

// blockWords is a block as 32-bit words (it starts 4-aligned: S1 is a
// multiple of 4).
func blockWords(blk []byte) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(blk))), len(blk)/4)
}

// alignedBytes returns n zero bytes starting on a 64-byte boundary, their
// pages backed with memory (see populate).
func alignedBytes(n int) []byte {
	b := make([]byte, n+64)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & 63)
	b = b[off : off+n : off+n]
	populate(b)
	return b
}

// blockedRow returns where row n (of K) of a blocked q of one slab lies: its
// block, the rows in the block and its index there, and its scales and biases.
func (q *QMatrix) blockedRow(n, K int) (blk []byte, r, i int, s, b metaRow) {
	rb, S1, mb := K*q.Bits/8, blockRowBytes(q, K), metaRowBytes(K/q.GroupSize, q.meta)
	N := len(q.Blocked) / S1
	n0, r := n&^3, 4
	if n >= N&^3 {
		n0, r = n, 1
	}
	blk = q.Blocked[n0*S1 : (n0+r)*S1]
	i = n - n0
	meta := blk[r*rb:]
	bm, bb := meta[r*mb:], biasRowBytes(K/q.GroupSize, q.meta) // the biases
	return blk, r, i, metaRow{meta[i*mb : (i+1)*mb], q.meta}, metaRow{bm[i*bb : (i+1)*bb], q.meta}
}

// unblock writes rows [n0, n1) of a blocked q (rows of K) into dst in the
// row-major layout, as rows [0, n1−n0), growing dst's slices as needed.
func (q *QMatrix) unblock(dst *QMatrix, n0, n1, K int) {
	if q.meta == metaQ6 {
		q.unblockQ6(dst, n0, n1, K)
		return
	}
	words, G, wpg := K*q.Bits/32, K/q.GroupSize, q.wordsPerGroup()
	dst.Bits, dst.GroupSize = q.Bits, q.GroupSize
	dst.W = grow(dst.W, (n1-n0)*words)
	dst.Scales, dst.Biases = grow(dst.Scales, (n1-n0)*G), grow(dst.Biases, (n1-n0)*G)
	for j := range q.slabs {
		sl, kw := &q.slabs[j], q.slabCols(j, K)
		sG, g0 := kw/q.GroupSize, sl.k0/q.GroupSize
		for n := n0; n < n1; n++ {
			blk, r, i, s, b := sl.blockedRow(n, kw)
			src := blockWords(blk)
			w := dst.W[(n-n0)*words+g0*wpg:]
			for g := range sG {
				o, step := sl.groupWords(g, i, r, sG)
				row := w[g*wpg : (g+1)*wpg]
				for c := range row {
					row[c] = src[o+c*step]
				}
				dst.Scales[(n-n0)*G+g0+g], dst.Biases[(n-n0)*G+g0+g] = s.at(g), b.at(g)
			}
		}
	}
}

// rowMajor returns q if it is row-major, else rows [n0, n1) of it unblocked
// into scratch, and the row of q that row 0 of the result is.
func (q *QMatrix) rowMajor(scratch *QMatrix, n0, n1, K int) (*QMatrix, int) {
	if q.Blocked == nil {
		return q, 0
	}
	q.unblock(scratch, n0, n1, K)
	return scratch, n0
}

// checkBlocked panics unless rows [n0, n0+n) of a blocked q (S1 bytes per row,
// see blockRowBytes) start a block and end one.
func (q *QMatrix) checkBlocked(n0, n, S1 int) {
	N := len(q.Blocked) / S1
	if n0%4 != 0 || (n%4 != 0 && n0+n != N) {
		panic(fmt.Sprintf("cpu: blocked mat-vec over rows [%d, %d) of %d: not whole four-row blocks", n0, n0+n, N))
	}
}

// dequantBlockedRow is DequantRow for a blocked q.
func (q *QMatrix) dequantBlockedRow(dst []float32, n, K int) {
	if q.meta == metaQ6 {
		q.dequantBlockedRowQ6(dst, n, K)
		return
	}
	cw, mask := 32/q.Bits, uint32(1)<<q.Bits-1 // cw codes per word
	for j := range q.slabs {
		sl, kw := &q.slabs[j], q.slabCols(j, K)
		sG, g0 := kw/q.GroupSize, sl.k0/q.GroupSize
		blk, r, i, s, b := sl.blockedRow(n, kw)
		src := blockWords(blk)
		for g := range sG {
			o, step := sl.groupWords(g, i, r, sG)
			sc, bi := s.at(g), b.at(g)
			d := dst[(g0+g)*q.GroupSize : (g0+g+1)*q.GroupSize]
			for c := range len(d) / cw {
				w := src[o+c*step]
				for j := range cw {
					d[c*cw+j] = float32(sc*float32(w>>(q.Bits*j)&mask)) + bi
				}
			}
		}
	}
}
