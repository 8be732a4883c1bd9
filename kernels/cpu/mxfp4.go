package cpu

import (
	"fmt"
	"math"
)

// MXFP4 block geometry: 32 elements share one E8M0 scale byte, followed by
// their 16 bytes of E2M1 codes (element 2j in the low nibble of byte j, 2j+1
// in the high), 17 bytes in all.
const (
	MXFP4Block      = 32
	MXFP4BlockBytes = 1 + MXFP4Block/2
)

// FP4 is the E2M1 value of each 4-bit code (OCP Microscaling Formats v1.0,
// §5.3.3): bit 3 the sign, bits 2–1 the exponent (bias 1), bit 0 the
// mantissa; transformers' FP4_VALUES and MLX's FP4_LUT in the same order.
var FP4 = [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, float32(math.Copysign(0, -1)), -0.5, -1, -1.5, -2, -3, -4, -6}

// E8M0 returns the value of an E8M0 scale byte: 2^(e−127), 2⁻¹²⁷ (a float32
// subnormal) for e = 0, and NaN for e = 255 (the spec's NaN encoding).
func E8M0(e uint8) float32 {
	switch e {
	case 0:
		return math.Float32frombits(1 << 22)
	case 255:
		return float32(math.NaN())
	}
	return math.Float32frombits(uint32(e) << 23)
}

// MXFP4 is an (N, K) matrix in OCP MXFP4, row-major: each row K/32 blocks of
// [MXFP4BlockBytes] bytes. Element k of a row is FP4[code]·E8M0(e) of its
// block, that product rounded to float32 (exact unless it overflows, as
// codes ≥ 2 do for e ≥ 254).
type MXFP4 struct {
	N, K int
	B    []byte // N · K/32 · 17
}

// NewMXFP4 checks the size of b for (n, k) and returns the matrix viewing it.
func NewMXFP4(b []byte, n, k int) (*MXFP4, error) {
	if k%MXFP4Block != 0 {
		return nil, fmt.Errorf("cpu: mxfp4: %d columns are not whole %d-element blocks", k, MXFP4Block)
	}
	if want := n * k / MXFP4Block * MXFP4BlockBytes; len(b) != want {
		return nil, fmt.Errorf("cpu: mxfp4: %d bytes for [%d %d], want %d", len(b), n, k, want)
	}
	return &MXFP4{N: n, K: k, B: b}, nil
}

// Bytes returns the bytes a mat-vec reads: the blocks, 4.25 bits a weight.
func (w *MXFP4) Bytes() int { return len(w.B) }

// row returns the blocks of row n.
func (w *MXFP4) row(n int) []byte {
	rb := w.K / MXFP4Block * MXFP4BlockBytes
	return w.B[n*rb : (n+1)*rb]
}

// blockValues sets v to the 16 values of a block with scale byte e:
// v[c] = FP4[c]·E8M0(e), rounded to float32.
func blockValues(v *[16]float32, e uint8) {
	s := E8M0(e)
	for c := range v {
		v[c] = FP4[c] * s
	}
}

// Row writes row n of w, dequantized, into dst (K).
func (w *MXFP4) Row(dst []float32, n int) {
	var v [16]float32
	r := w.row(n)
	dst = dst[:w.K]
	for j := range w.K / MXFP4Block {
		b := r[j*MXFP4BlockBytes : (j+1)*MXFP4BlockBytes]
		blockValues(&v, b[0])
		d := dst[j*MXFP4Block : (j+1)*MXFP4Block]
		for i, q := range b[1:] {
			d[2*i], d[2*i+1] = v[q&15], v[q>>4]
		}
	}
}

// dotMXFP4 returns row r (blocks) · x: each dequantized weight times its x
// rounded to float32, summed in float32 in two chains (even and odd
// elements) per block, and the blocks' sums added in order.
func dotMXFP4(r []byte, x []float32) float32 {
	var v [16]float32
	var sum float32
	for j := range len(x) / MXFP4Block {
		b := (*[MXFP4BlockBytes]byte)(r[j*MXFP4BlockBytes:])
		xb := (*[MXFP4Block]float32)(x[j*MXFP4Block:])
		blockValues(&v, b[0])
		var s0, s1 float32
		for i := range 16 {
			q := b[1+i]
			s0 += float32(v[q&15] * xb[2*i]) // float32(): no fused multiply-add
			s1 += float32(v[q>>4] * xb[2*i+1])
		}
		sum += s0 + s1
	}
	return sum
}

// MatMulMXFP4 computes dst (L, N) = x (L, K) · wᵀ, split over the pool's
// threads (see matMulBlocks). Like MatMul, calls on one Pool must not overlap.
func (p *Pool) MatMulMXFP4(dst, x []float32, L int, w *MXFP4) {
	p.matMulBlocks("MatMulMXFP4", dst, x, L, w)
}

func (w *MXFP4) dims() (n, k int)               { return w.N, w.K }
func (w *MXFP4) dot(n int, x []float32) float32 { return dotMXFP4(w.row(n), x) }
