package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// The blocked layout of a 4/8-bit QMatrix (QMatrix.Blocked) makes a decode
// mat-vec one sequential read. The byte-dot kernels run four rows at a time,
// and in row-major order those are four code streams a row apart plus their
// scales and biases elsewhere; interleaved here they are one stream, which the
// prefetchers follow (decode measured ~10 % faster on Zen 4).
//
// With rb = K·bits/8 code bytes and G = K/GroupSize groups per row, row n owns
// S1 = rb + 2·G·m bytes and rows [n, n+4) of a block start at byte n·S1:
//
//	rows [0, N&^3), four-row blocks:  chunk c of rows n..n+3 (64 bytes each, in
//	                                  row order) for c = 0, 1, …, K/C − 1; then
//	                                  the four rows' G scales, then their G
//	                                  biases
//	rows [N&^3, N), one-row blocks:   the row's codes, G scales, G biases
//
// where a chunk is one 512-bit load: C = 128 4-bit or 64 8-bit codes. Scales
// and biases are bf16 (m = 2) when all of them are bf16 values, as in MLX's
// checkpoints, else f16 when all are f16 values, else f32 (m = 4): a 4-bit
// weight with groups of 64 then reads 4.5 bits per weight, not 5.

// The element types of a blocked layout's scales and biases.
const (
	metaF32 = iota
	metaBF16
	metaF16
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
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(m.b[4*g:]))
}

// metaKind returns the narrowest element type that holds every value of s and
// b exactly.
func metaKind(s, b []float32) uint8 {
	bf, f16 := true, true
	for _, x := range [][]float32{s, b} {
		for _, v := range x {
			bf = bf && math.Float32bits(v)&0xffff == 0
			f16 = f16 && F16ToF32(F32ToF16(v)) == v
		}
	}
	switch {
	case bf:
		return metaBF16
	case f16:
		return metaF16
	}
	return metaF32
}

// putMeta stores v in dst as kind.
func putMeta(dst []byte, v []float32, kind uint8) {
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

// blockRowBytes returns S1: the bytes per row of the blocked layout.
func blockRowBytes(q *QMatrix, K int) int { return K*q.Bits/8 + 2*(K/q.GroupSize)*q.metaBytes() }

// metaBytes returns the bytes of one of a blocked q's scales or biases.
func (q *QMatrix) metaBytes() int {
	if q.meta == metaF32 {
		return 4
	}
	return 2
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

// block moves q (N rows of K) to the blocked layout.
func (q *QMatrix) block(N, K int) {
	q.meta = metaKind(q.Scales, q.Biases)
	rb, G, S1, m := K*q.Bits/8, K/q.GroupSize, blockRowBytes(q, K), q.metaBytes()
	out := alignedBytes(N * S1)
	src := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(q.W))), 4*len(q.W))
	for n0 := 0; n0 < N; {
		r := 4 // rows in this block
		if n0 >= N&^3 {
			r = 1
		}
		blk := out[n0*S1 : (n0+r)*S1]
		for c := 0; c < rb/64; c++ {
			for i := range r {
				copy(blk[(c*r+i)*64:(c*r+i+1)*64], src[(n0+i)*rb+c*64:])
			}
		}
		putMeta(blk[r*rb:], q.Scales[n0*G:(n0+r)*G], q.meta)
		putMeta(blk[r*rb+r*G*m:], q.Biases[n0*G:(n0+r)*G], q.meta)
		n0 += r
	}
	q.Blocked, q.W, q.Scales, q.Biases = out, nil, nil, nil
}

// alignedBytes returns n zero bytes starting on a 64-byte boundary.
func alignedBytes(n int) []byte {
	b := make([]byte, n+64)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & 63)
	return b[off : off+n : off+n]
}

// blockedRow returns where row n (of K) of a blocked q lies: its first chunk's
// codes, the byte step from one chunk to the next, and its scales and biases.
func (q *QMatrix) blockedRow(n, K int) (codes []byte, step int, s, b metaRow) {
	rb, G, S1, m := K*q.Bits/8, K/q.GroupSize, blockRowBytes(q, K), q.metaBytes()
	N := len(q.Blocked) / S1
	n0, r := n&^3, 4
	if n >= N&^3 {
		n0, r = n, 1
	}
	blk := q.Blocked[n0*S1 : (n0+r)*S1]
	i := n - n0
	meta := blk[r*rb:]
	return blk[i*64 : r*rb], r * 64, metaRow{meta[i*G*m : (i+1)*G*m], q.meta}, metaRow{meta[(r+i)*G*m : (r+i+1)*G*m], q.meta}
}

// unblock writes rows [n0, n1) of a blocked q (rows of K) into dst in the
// row-major layout, as rows [0, n1−n0), growing dst's slices as needed.
func (q *QMatrix) unblock(dst *QMatrix, n0, n1, K int) {
	rb, G := K*q.Bits/8, K/q.GroupSize
	dst.Bits, dst.GroupSize = q.Bits, q.GroupSize
	dst.W = grow(dst.W, (n1-n0)*rb/4)
	dst.Scales, dst.Biases = grow(dst.Scales, (n1-n0)*G), grow(dst.Biases, (n1-n0)*G)
	w := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst.W))), 4*len(dst.W))
	for n := n0; n < n1; n++ {
		codes, step, s, b := q.blockedRow(n, K)
		row := w[(n-n0)*rb : (n-n0+1)*rb]
		for c := 0; c < rb/64; c++ {
			copy(row[c*64:(c+1)*64], codes[c*step:])
		}
		for g := range G {
			dst.Scales[(n-n0)*G+g], dst.Biases[(n-n0)*G+g] = s.at(g), b.at(g)
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
	codes, step, s, b := q.blockedRow(n, K)
	C := 512 / q.Bits
	for c := range K / C {
		w := unsafe.Slice((*uint32)(unsafe.Pointer(&codes[c*step])), 16)
		d := dst[c*C : (c+1)*C]
		for i := range d {
			g := (c*C + i) / q.GroupSize
			d[i] = float32(s.at(g)*float32(code(w, i, q.Bits))) + b.at(g)
		}
	}
}
