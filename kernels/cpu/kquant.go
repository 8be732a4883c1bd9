package cpu

import (
	"encoding/binary"
	"fmt"
)

// KType is a GGUF (ggml) block type the CPU kernels run as stored.
type KType uint8

// The block types, with ggml's layouts (ggml-common.h):
//
//	type  values bytes  block
//	Q8_0  32     34     f16 d, int8 q[32]                      w = d·q
//	Q4_0  32     18     f16 d, q[16] (j low, j+16 high nibble)  w = d·(q−8)
//	Q4_K  256    144    f16 d, f16 dmin, 12 bytes of 6-bit scales and mins,
//	                    q[128] (4-bit)                           w = (d·sc)·q − dmin·m
//	Q5_K  256    176    as Q4_K, then qh[32] (the fifth bits), q[128]
//	Q6_K  256    210    ql[128], qh[64], int8 sc[16], f16 d      w = (d·sc)·(q−32)
//
// Each w is computed in float32 in that order, as gguf-py's
// quants.dequantize computes it (and package gguf's Dequantize), so every
// dequantized weight is bit-identical to the reference.
const (
	KQ8_0 KType = iota
	KQ4_0
	KQ4K
	KQ5K
	KQ6K
)

var kTypes = [...]struct {
	name        string
	vals, bytes int
	deq         func(dst []float32, b []byte) // one block's vals values into dst
}{
	KQ8_0: {"q8_0", 32, 34, deqQ8_0},
	KQ4_0: {"q4_0", 32, 18, deqQ4_0},
	KQ4K:  {"q4_k", 256, 144, deqQ4K},
	KQ5K:  {"q5_k", 256, 176, deqQ5K},
	KQ6K:  {"q6_k", 256, 210, deqQ6K},
}

// String returns the kernel name of t ("q4_k").
func (t KType) String() string {
	if int(t) < len(kTypes) {
		return kTypes[t].name
	}
	return fmt.Sprintf("ktype(%d)", uint8(t))
}

// BlockSize returns the values and bytes of one block of t.
func (t KType) BlockSize() (vals, bytes int) { return kTypes[t].vals, kTypes[t].bytes }

// KQuant is an (N, K) matrix in a GGUF block type, row-major: each row K/vals
// blocks of the file's bytes (see [KType]).
type KQuant struct {
	Type KType
	N, K int
	B    []byte // N · K/vals · bytes
}

// NewKQuant checks the size of b for an (n, k) matrix of type t and returns
// the matrix viewing it.
func NewKQuant(t KType, b []byte, n, k int) (*KQuant, error) {
	if int(t) >= len(kTypes) {
		return nil, fmt.Errorf("cpu: kquant: unknown block type %d", t)
	}
	vals, bytes := t.BlockSize()
	if k <= 0 || k%vals != 0 {
		return nil, fmt.Errorf("cpu: %s: %d columns are not whole %d-element blocks", t, k, vals)
	}
	if want := n * k / vals * bytes; len(b) != want {
		return nil, fmt.Errorf("cpu: %s: %d bytes for [%d %d], want %d", t, len(b), n, k, want)
	}
	return &KQuant{Type: t, N: n, K: k, B: b}, nil
}

// Bytes returns the bytes a mat-vec reads: the blocks as stored.
func (w *KQuant) Bytes() int { return len(w.B) }

// row returns the blocks of row n.
func (w *KQuant) row(n int) []byte {
	vals, bytes := w.Type.BlockSize()
	rb := w.K / vals * bytes
	return w.B[n*rb : (n+1)*rb]
}

// Row writes row n of w, dequantized exactly, into dst (K).
func (w *KQuant) Row(dst []float32, n int) {
	if kqAsm && w.rowAsm(dst, n) {
		return
	}
	t := &kTypes[w.Type]
	r := w.row(n)
	for j := range w.K / t.vals {
		t.deq(dst[j*t.vals:(j+1)*t.vals], r[j*t.bytes:(j+1)*t.bytes])
	}
}

func f16At(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }

func deqQ8_0(dst []float32, b []byte) {
	v := (*[32]float32)(dst)
	d := f16At(b)
	for j, q := range b[2:34] {
		v[j] = d * float32(int8(q))
	}
}

func deqQ4_0(dst []float32, b []byte) {
	v := (*[32]float32)(dst)
	d := f16At(b)
	var t [16]float32 // the block's 16 values, d·(q−8)
	for q := range t {
		t[q] = d * float32(q-8)
	}
	for j, x := range b[2:18] {
		v[j], v[j+16] = t[x&15], t[x>>4]
	}
}

// scaleMin is ggml's get_scale_min_k4: the 6-bit scale and min of sub-block s
// from the 12 scale bytes of a Q4_K or Q5_K block.
func scaleMin(s int, sc []byte) (float32, float32) {
	if s < 4 {
		return float32(sc[s] & 63), float32(sc[s+4] & 63)
	}
	return float32(sc[s+4]&15 | (sc[s-4]>>6)<<4), float32(sc[s+4]>>4 | (sc[s]>>6)<<4)
}

func deqQ4K(dst []float32, b []byte) {
	v := (*[256]float32)(dst)
	d, dmin := f16At(b), f16At(b[2:])
	sc, qs := b[4:16], b[16:144]
	var lo, hi [16]float32 // values of the low and high nibbles' sub-blocks
	for k := range 4 {
		s0, m0 := scaleMin(2*k, sc)
		s1, m1 := scaleMin(2*k+1, sc)
		a0, c0, a1, c1 := d*s0, dmin*m0, d*s1, dmin*m1
		for q := range 16 {
			lo[q] = float32(a0*float32(q)) - c0 // float32(): no fused multiply-add
			hi[q] = float32(a1*float32(q)) - c1
		}
		y := v[64*k : 64*k+64]
		for l, x := range qs[32*k : 32*k+32] {
			y[l], y[l+32] = lo[x&15], hi[x>>4]
		}
	}
}

func deqQ5K(dst []float32, b []byte) {
	v := (*[256]float32)(dst)
	d, dmin := f16At(b), f16At(b[2:])
	sc, qh, qs := b[4:16], b[16:48], b[48:176]
	for k := range 4 {
		s0, m0 := scaleMin(2*k, sc)
		s1, m1 := scaleMin(2*k+1, sc)
		a0, c0, a1, c1 := d*s0, dmin*m0, d*s1, dmin*m1
		y := v[64*k : 64*k+64]
		for l, x := range qs[32*k : 32*k+32] {
			h := qh[l] >> (2 * k)
			q0, q1 := x&15|(h&1)<<4, x>>4|(h>>1&1)<<4
			y[l] = float32(a0*float32(q0)) - c0
			y[l+32] = float32(a1*float32(q1)) - c1
		}
	}
}

func deqQ6K(dst []float32, b []byte) {
	v := (*[256]float32)(dst)
	ql, qh, sc := b[0:128], b[128:192], b[192:208]
	d := f16At(b[208:])
	for n := range 2 {
		ql, qh, y := ql[64*n:64*n+64], qh[32*n:32*n+32], v[128*n:128*n+128]
		s := sc[8*n : 8*n+8]
		for h := range 2 { // l in [16h, 16h+16): scale groups 8n+h, +2, +4, +6
			a0, a1 := d*float32(int8(s[h])), d*float32(int8(s[h+2]))
			a2, a3 := d*float32(int8(s[h+4])), d*float32(int8(s[h+6]))
			for l := 16 * h; l < 16*h+16; l++ {
				x0, x1, e := ql[l], ql[l+32], qh[l]
				y[l] = a0 * float32(int8(x0&15|(e&3)<<4)-32)
				y[l+32] = a1 * float32(int8(x1&15|(e>>2&3)<<4)-32)
				y[l+64] = a2 * float32(int8(x0>>4|(e>>4&3)<<4)-32)
				y[l+96] = a3 * float32(int8(x1>>4|(e>>6&3)<<4)-32)
			}
		}
	}
}

// dotKQuant returns row r (blocks of type t) · x: every weight dequantized
// exactly (the values Row writes), each product rounded to float32 and summed
// in float32 in four chains a block (the order differs per type), and the
// blocks' sums added in order. The 4- and 5-bit types look their weights up
// in a table of the sub-block's 16 or 32 values, built once per sub-block.
func dotKQuant(t KType, r []byte, x []float32) float32 {
	var sum float32
	switch t {
	case KQ8_0:
		if kqAsm {
			return dotQ8_0Asm(r, x)
		}
		for j := range len(x) / 32 {
			sum += dotQ8_0((*[34]byte)(r[j*34:]), (*[32]float32)(x[j*32:]))
		}
	case KQ4_0:
		if kqAsm {
			return dotQ4_0Asm(r, x)
		}
		for j := range len(x) / 32 {
			sum += dotQ4_0((*[18]byte)(r[j*18:]), (*[32]float32)(x[j*32:]))
		}
	case KQ4K:
		for j := range len(x) / 256 {
			b, xb := (*[144]byte)(r[j*144:]), (*[256]float32)(x[j*256:])
			if kqAsm {
				sum += dotQ4KAsm(b, xb)
			} else {
				sum += dotQ4K(b, xb)
			}
		}
	case KQ5K:
		for j := range len(x) / 256 {
			b, xb := (*[176]byte)(r[j*176:]), (*[256]float32)(x[j*256:])
			if kqAsm {
				sum += dotQ5KAsm(b, xb)
			} else {
				sum += dotQ5K(b, xb)
			}
		}
	case KQ6K:
		for j := range len(x) / 256 {
			b, xb := (*[210]byte)(r[j*210:]), (*[256]float32)(x[j*256:])
			if kqAsm {
				sum += dotQ6KAsm(b, xb)
			} else {
				sum += dotQ6K(b, xb)
			}
		}
	}
	return sum
}

// i8f is float32(int8(i)); qf is float32(i) and q32f float32(i − 32), exact.
var i8f, qf, q32f = func() (a [256]float32, b [32]float32, c [64]float32) {
	for i := range a {
		a[i] = float32(int8(i))
	}
	for i := range b {
		b[i] = float32(i)
	}
	for i := range c {
		c[i] = float32(i - 32)
	}
	return
}()

func dotQ8_0(b *[34]byte, x *[32]float32) float32 {
	d := F16ToF32(uint16(b[0]) | uint16(b[1])<<8)
	q := (*[32]byte)(b[2:])
	var s0, s1, s2, s3 float32
	for i := 0; i < 32; i += 4 {
		s0 += float32(float32(d*i8f[q[i]]) * x[i]) // float32(): no fused multiply-add
		s1 += float32(float32(d*i8f[q[i+1]]) * x[i+1])
		s2 += float32(float32(d*i8f[q[i+2]]) * x[i+2])
		s3 += float32(float32(d*i8f[q[i+3]]) * x[i+3])
	}
	return (s0 + s1) + (s2 + s3)
}

func dotQ4_0(b *[18]byte, x *[32]float32) float32 {
	d := F16ToF32(uint16(b[0]) | uint16(b[1])<<8)
	var v [16]float32
	for q := range v {
		v[q] = d * float32(q-8)
	}
	qs := (*[16]byte)(b[2:])
	var s0, s1, s2, s3 float32
	for l := 0; l < 16; l += 2 {
		q0, q1 := qs[l], qs[l+1]
		s0 += float32(v[q0&15] * x[l])
		s1 += float32(v[q0>>4] * x[l+16])
		s2 += float32(v[q1&15] * x[l+1])
		s3 += float32(v[q1>>4] * x[l+17])
	}
	return (s0 + s1) + (s2 + s3)
}

func dotQ4K(b *[144]byte, x *[256]float32) float32 {
	d := F16ToF32(uint16(b[0]) | uint16(b[1])<<8)
	dmin := F16ToF32(uint16(b[2]) | uint16(b[3])<<8)
	sc := b[4:16]
	var sum float32
	var lo, hi [16]float32
	for k := range 4 {
		s0, m0 := scaleMin(2*k, sc)
		s1, m1 := scaleMin(2*k+1, sc)
		a0, c0, a1, c1 := d*s0, dmin*m0, d*s1, dmin*m1
		for q := range 16 {
			lo[q] = float32(a0*qf[q]) - c0
			hi[q] = float32(a1*qf[q]) - c1
		}
		qs := (*[32]byte)(b[16+32*k:])
		xl, xh := (*[32]float32)(x[64*k:]), (*[32]float32)(x[64*k+32:])
		var t0, t1, t2, t3 float32
		for l := 0; l < 32; l += 2 {
			q0, q1 := qs[l], qs[l+1]
			t0 += float32(lo[q0&15] * xl[l])
			t1 += float32(hi[q0>>4] * xh[l])
			t2 += float32(lo[q1&15] * xl[l+1])
			t3 += float32(hi[q1>>4] * xh[l+1])
		}
		sum += (t0 + t2) + (t1 + t3)
	}
	return sum
}

func dotQ5K(b *[176]byte, x *[256]float32) float32 {
	d := F16ToF32(uint16(b[0]) | uint16(b[1])<<8)
	dmin := F16ToF32(uint16(b[2]) | uint16(b[3])<<8)
	sc, qh := b[4:16], (*[32]byte)(b[16:48])
	var sum float32
	var lo, hi [32]float32
	for k := range 4 {
		s0, m0 := scaleMin(2*k, sc)
		s1, m1 := scaleMin(2*k+1, sc)
		a0, c0, a1, c1 := d*s0, dmin*m0, d*s1, dmin*m1
		for q := range 32 {
			lo[q] = float32(a0*qf[q]) - c0
			hi[q] = float32(a1*qf[q]) - c1
		}
		qs := (*[32]byte)(b[48+32*k:])
		xl, xh := (*[32]float32)(x[64*k:]), (*[32]float32)(x[64*k+32:])
		sh := uint(2 * k)
		var t0, t1 float32
		for l := range 32 {
			q, h := qs[l], qh[l]>>sh
			t0 += float32(lo[(q&15|h<<4)&31] * xl[l])
			t1 += float32(hi[(q>>4|h<<3&16)&31] * xh[l])
		}
		sum += t0 + t1
	}
	return sum
}

func dotQ6K(b *[210]byte, x *[256]float32) float32 {
	d := F16ToF32(uint16(b[208]) | uint16(b[209])<<8)
	var sum float32
	for n := range 2 {
		ql, qh := (*[64]byte)(b[64*n:]), (*[32]byte)(b[128+32*n:])
		sc := (*[8]byte)(b[192+8*n:])
		xn := (*[128]float32)(x[128*n:])
		for h := range 2 { // l in [16h, 16h+16): scale groups 8n+h, +2, +4, +6
			a0, a1 := d*i8f[sc[h]], d*i8f[sc[h+2]]
			a2, a3 := d*i8f[sc[h+4]], d*i8f[sc[h+6]]
			var t0, t1, t2, t3 float32
			for l := 16 * h; l < 16*h+16; l++ {
				x0, x1, e := ql[l], ql[l+32], qh[l]
				t0 += float32(float32(a0*q32f[(x0&15|e<<4)&63]) * xn[l])
				t1 += float32(float32(a1*q32f[(x1&15|e<<2&48)&63]) * xn[l+32])
				t2 += float32(float32(a2*q32f[(x0>>4|e&48)&63]) * xn[l+64])
				t3 += float32(float32(a3*q32f[(x1>>4|e>>2&48)&63]) * xn[l+96])
			}
			sum += (t0 + t1) + (t2 + t3)
		}
	}
	return sum
}

// MatMulKQuant computes dst (L, N) = x (L, K) · wᵀ, split over the pool's
// threads (see matMulBlocks). Like MatMul, calls on one Pool must not overlap.
func (p *Pool) MatMulKQuant(dst, x []float32, L int, w *KQuant) {
	p.matMulBlocks("MatMulKQuant", dst, x, L, w)
}

func (w *KQuant) dims() (n, k int)               { return w.N, w.K }
func (w *KQuant) dot(n int, x []float32) float32 { return dotKQuant(w.Type, w.row(n), x) }
