package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Every block type below stores, per group of G consecutive values, a float32
// multiplier a and (for the asymmetric types) an additive c, and per value an
// unsigned code q; the value is
//
//	y = a·(q − off)        symmetric types (Q4_0, Q5_0, Q8_0, Q6_K, Q3_K)
//	y = a·q + c            asymmetric types (Q4_1, Q5_1, Q4_K, Q5_K, Q2_K)
//
// in float32, in that order, which is how gguf-py's quants.py (and ggml's
// dequantize_row_*) compute it: for the K-quants a = d·sc and c = −(dmin·m) are
// formed first, in float32. [Dequantize] evaluates exactly this; [ToAffine]
// rewrites it as scale·q + bias with scale = a and bias = c − off·a.

// layout describes how a block type's codes and group parameters are laid out.
type layout struct {
	bits  int // code width
	group int // values per (a, c) group
	off   int // subtracted from the code before multiplying (symmetric types)
	asym  bool
	// decode fills q (one code per value of the block) and a, c (one per group)
	// from one block's bytes.
	decode func(blk []byte, q []uint8, a, c []float32)
}

var layouts = map[Type]layout{
	TypeQ4_0: {4, 32, 8, false, decodeQ4_0},
	TypeQ4_1: {4, 32, 0, true, decodeQ4_1},
	TypeQ5_0: {5, 32, 16, false, decodeQ5_0},
	TypeQ5_1: {5, 32, 0, true, decodeQ5_1},
	TypeQ8_0: {8, 32, 128, false, decodeQ8_0},
	TypeQ2_K: {2, 16, 0, true, decodeQ2_K},
	TypeQ3_K: {3, 16, 4, false, decodeQ3_K},
	TypeQ4_K: {4, 32, 0, true, decodeQ4_K},
	TypeQ5_K: {5, 32, 0, true, decodeQ5_K},
	TypeQ6_K: {6, 16, 32, false, decodeQ6_K},
}

// F16ToF32 converts IEEE half-precision bits to float32 (exactly).
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf, NaN
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// subnormal: normalize
	e := uint32(113)
	for man&0x400 == 0 {
		man <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
}

func f16(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }

func decodeQ4_0(b []byte, q []uint8, a, _ []float32) {
	a[0] = f16(b)
	for j, x := range b[2:18] {
		q[j], q[j+16] = x&15, x>>4
	}
}

func decodeQ4_1(b []byte, q []uint8, a, c []float32) {
	a[0], c[0] = f16(b), f16(b[2:])
	for j, x := range b[4:20] {
		q[j], q[j+16] = x&15, x>>4
	}
}

func decodeQ5(qh uint32, qs []byte, q []uint8) {
	for j, x := range qs[:16] {
		q[j] = x&15 | uint8(qh>>j&1)<<4
		q[j+16] = x>>4 | uint8(qh>>(j+16)&1)<<4
	}
}

func decodeQ5_0(b []byte, q []uint8, a, _ []float32) {
	a[0] = f16(b)
	decodeQ5(binary.LittleEndian.Uint32(b[2:]), b[6:22], q)
}

func decodeQ5_1(b []byte, q []uint8, a, c []float32) {
	a[0], c[0] = f16(b), f16(b[2:])
	decodeQ5(binary.LittleEndian.Uint32(b[4:]), b[8:24], q)
}

func decodeQ8_0(b []byte, q []uint8, a, _ []float32) {
	a[0] = f16(b)
	for j, x := range b[2:34] {
		q[j] = x ^ 0x80 // int8 x + 128
	}
}

// scaleMinK4 is ggml's get_scale_min_k4: the 6-bit scale and min of sub-block s.
func scaleMinK4(s int, sc []byte) (uint8, uint8) {
	if s < 4 {
		return sc[s] & 63, sc[s+4] & 63
	}
	return sc[s+4]&15 | (sc[s-4]>>6)<<4, sc[s+4]>>4 | (sc[s]>>6)<<4
}

// kParams sets a and c of Q4_K/Q5_K's eight 32-value sub-blocks.
func kParams(b []byte, a, c []float32) {
	d, dmin := f16(b), f16(b[2:])
	for s := range 8 {
		sc, m := scaleMinK4(s, b[4:16])
		a[s], c[s] = d*float32(sc), -(dmin * float32(m))
	}
}

func decodeQ4_K(b []byte, q []uint8, a, c []float32) {
	kParams(b, a, c)
	qs := b[16:144]
	for k := range 4 {
		for l := range 32 {
			x := qs[32*k+l]
			q[64*k+l], q[64*k+32+l] = x&15, x>>4
		}
	}
}

func decodeQ5_K(b []byte, q []uint8, a, c []float32) {
	kParams(b, a, c)
	qh, qs := b[16:48], b[48:176]
	for k := range 4 {
		for l := range 32 {
			x, h := qs[32*k+l], qh[l]
			q[64*k+l] = x&15 | (h>>(2*k)&1)<<4
			q[64*k+32+l] = x>>4 | (h>>(2*k+1)&1)<<4
		}
	}
}

func decodeQ6_K(b []byte, q []uint8, a, _ []float32) {
	ql, qh, sc := b[0:128], b[128:192], b[192:208]
	d := f16(b[208:])
	for i := range 16 {
		a[i] = d * float32(int8(sc[i]))
	}
	for n := range 2 {
		ql, qh, y := ql[64*n:], qh[32*n:], q[128*n:]
		for l := range 32 {
			y[l] = ql[l]&15 | (qh[l]>>0&3)<<4
			y[l+32] = ql[l+32]&15 | (qh[l]>>2&3)<<4
			y[l+64] = ql[l]>>4 | (qh[l]>>4&3)<<4
			y[l+96] = ql[l+32]>>4 | (qh[l]>>6&3)<<4
		}
	}
}

func decodeQ2_K(b []byte, q []uint8, a, c []float32) {
	sc, qs := b[0:16], b[16:80]
	d, dmin := f16(b[80:]), f16(b[82:])
	for i := range 16 {
		a[i], c[i] = d*float32(sc[i]&15), -(dmin * float32(sc[i]>>4))
	}
	for n := range 2 {
		for j := range 4 {
			for l := range 32 {
				q[128*n+32*j+l] = qs[32*n+l] >> (2 * j) & 3
			}
		}
	}
}

func decodeQ3_K(b []byte, q []uint8, a, _ []float32) {
	hmask, qs, sc := b[0:32], b[32:96], b[96:108]
	d := f16(b[108:])
	for i := range 16 {
		lo := sc[i%8] >> (4 * (i / 8)) & 15
		hi := sc[8+i%4] >> (2 * (i / 4)) & 3
		a[i] = d * float32(int(lo|hi<<4)-32)
	}
	for n := range 2 {
		for j := range 4 {
			for l := range 32 {
				v := 128*n + 32*j + l
				q[v] = qs[32*n+l]>>(2*j)&3 | (hmask[l]>>(v/32)&1)<<2
			}
		}
	}
}

// Dequantize writes the values of src, len(dst) values of type t, to dst exactly
// as gguf-py's quants.dequantize does (bit for bit, signed zeros included).
func Dequantize(dst []float32, t Type, src []byte) error {
	bs := t.BlockSize()
	if bs == 0 || len(dst)%bs != 0 {
		return fmt.Errorf("gguf: dequantize %s: %d values are not a whole number of %d-value blocks", t, len(dst), bs)
	}
	if need := t.RowBytes(len(dst)); len(src) != need {
		return fmt.Errorf("gguf: dequantize %s: %d bytes for %d values, want %d", t, len(src), len(dst), need)
	}
	le := binary.LittleEndian
	switch t {
	case TypeF32:
		for i := range dst {
			dst[i] = math.Float32frombits(le.Uint32(src[4*i:]))
		}
		return nil
	case TypeF16:
		for i := range dst {
			dst[i] = F16ToF32(le.Uint16(src[2*i:]))
		}
		return nil
	case TypeBF16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(le.Uint16(src[2*i:])) << 16)
		}
		return nil
	}
	ly, ok := layouts[t]
	if !ok {
		return fmt.Errorf("gguf: dequantize: type %s is not supported", t)
	}
	bb := t.BlockBytes()
	q := make([]uint8, bs)
	a, c := make([]float32, bs/ly.group), make([]float32, bs/ly.group)
	for blk := range len(dst) / bs {
		ly.decode(src[blk*bb:(blk+1)*bb], q, a, c)
		y := dst[blk*bs : (blk+1)*bs]
		for i, code := range q {
			g := i / ly.group
			if ly.asym {
				y[i] = a[g]*float32(code) + c[g]
			} else {
				y[i] = a[g] * float32(int(code)-ly.off)
			}
		}
	}
	return nil
}

// Affine is a (rows, cols) matrix as MLX-style affine codes: value (r, j) is
// Scales[r·cols/GroupSize + j/GroupSize]·q + Biases[…], with q the Bits-wide
// unsigned code at bit j·Bits of row r's little-endian bitstream (Codes holds
// cols·Bits/32 words per row).
type Affine struct {
	Bits, GroupSize int
	Codes           []uint32
	Scales, Biases  []float32
}

// AffineBits returns the code width and group size t becomes under [ToAffine],
// or false if t is not an affine block type.
func AffineBits(t Type) (bits, group int, ok bool) {
	ly, ok := layouts[t]
	return ly.bits, ly.group, ok
}

// ToAffine rewrites a (rows, cols) matrix of block type t as [Affine] codes
// with the same values: scale = a, bias = c − off·a (see the comment atop this
// file), every product exact in float32. cols must be a whole number of blocks
// and of 32-bit code words.
func ToAffine(t Type, src []byte, rows, cols int) (*Affine, error) {
	ly, ok := layouts[t]
	if !ok {
		return nil, fmt.Errorf("gguf: type %s has no affine form", t)
	}
	bs, bb := t.BlockSize(), t.BlockBytes()
	if rows < 0 || cols <= 0 || cols%bs != 0 || cols*ly.bits%32 != 0 {
		return nil, fmt.Errorf("gguf: %s matrix of %d columns is not a whole number of %d-value blocks", t, cols, bs)
	}
	if need := rows * (cols / bs) * bb; len(src) != need {
		return nil, fmt.Errorf("gguf: %s matrix (%d, %d) needs %d bytes, got %d", t, rows, cols, need, len(src))
	}
	words, groups := cols*ly.bits/32, cols/ly.group
	out := &Affine{Bits: ly.bits, GroupSize: ly.group, Codes: make([]uint32, rows*words),
		Scales: make([]float32, rows*groups), Biases: make([]float32, rows*groups)}
	q := make([]uint8, bs)
	gpb := bs / ly.group
	a, c := make([]float32, gpb), make([]float32, gpb)
	off := float32(ly.off)
	for r := range rows {
		codes := out.Codes[r*words : (r+1)*words]
		for blk := range cols / bs {
			i := r*(cols/bs) + blk
			ly.decode(src[i*bb:(i+1)*bb], q, a, c)
			for g := range gpb {
				k := r*groups + blk*gpb + g
				out.Scales[k] = a[g]
				out.Biases[k] = c[g] - off*a[g]
			}
			for j, code := range q {
				bit := (blk*bs + j) * ly.bits
				codes[bit/32] |= uint32(code) << (bit % 32)
				if bit%32+ly.bits > 32 {
					codes[bit/32+1] |= uint32(code) >> (32 - bit%32)
				}
			}
		}
	}
	return out, nil
}
