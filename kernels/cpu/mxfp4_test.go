package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestMXFP4Dequant checks every code at scales across the E8M0 range against
// values computed by hand: the E2M1 magnitudes 0, ½, 1, 1½, 2, 3, 4, 6 with
// bit 3 the sign, times 2^(e−127), in float64 and then float32 (exact where
// float32 holds them: subnormal 2⁻¹²⁸ at e = 0, +Inf past 2¹²⁸).
func TestMXFP4Dequant(t *testing.T) {
	mags := [8]float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}
	for _, e := range []int{0, 1, 2, 100, 126, 127, 128, 200, 252, 253, 254} {
		// one block: codes 0…15, then 15…0
		b := make([]byte, MXFP4BlockBytes)
		b[0] = byte(e)
		for j := range 16 {
			lo, hi := (2*j)%16, (2*j+1)%16
			if j >= 8 {
				lo, hi = 15-(2*j)%16, 15-(2*j+1)%16
			}
			b[1+j] = byte(lo | hi<<4)
		}
		w, err := NewMXFP4(b, 1, MXFP4Block)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, MXFP4Block)
		w.Row(got, 0)
		for k, g := range got {
			c := k % 16
			if k >= 16 {
				c = 15 - k%16
			}
			v := math.Ldexp(mags[c&7], e-127)
			if c&8 != 0 {
				v = -v
			}
			want := float32(v) // exact or ±Inf: a power of two times ≤ 2 significant bits
			if math.Float32bits(g) != math.Float32bits(want) {
				t.Errorf("e=%d code %d (element %d): got %g (%#08x), want %g (%#08x)", e, c, k, g, math.Float32bits(g), want, math.Float32bits(want))
			}
		}
	}
	for _, tc := range []struct {
		e    uint8
		want float32
	}{
		{0, float32(math.Ldexp(1, -127))}, {1, float32(math.Ldexp(1, -126))}, {127, 1}, {128, 2},
		{254, float32(math.Ldexp(1, 127))},
	} {
		if got := E8M0(tc.e); got != tc.want {
			t.Errorf("E8M0(%d) = %g, want %g", tc.e, got, tc.want)
		}
	}
	if got := E8M0(255); !math.IsNaN(float64(got)) {
		t.Errorf("E8M0(255) = %g, want NaN", got)
	}
	if math.Float32bits(FP4[8]) != 1<<31 {
		t.Errorf("FP4[8] = %g, want -0", FP4[8])
	}
}

// randMXFP4 returns an (n, k) MXFP4 matrix of random codes with scale bytes
// around 127 (weights of magnitude up to about 6·2⁴).
func randMXFP4(n, k int, seed uint64) *MXFP4 {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n*k/MXFP4Block*MXFP4BlockBytes)
	for i := range b {
		b[i] = byte(r.Uint32())
		if i%MXFP4BlockBytes == 0 {
			b[i] = byte(120 + r.IntN(12))
		}
	}
	w, err := NewMXFP4(b, n, k)
	if err != nil {
		panic(err)
	}
	return w
}

// TestMatMulMXFP4 checks MatMulMXFP4 against float64 dot products of the
// dequantized rows, on the dot path (L < blockDeqMinL) and the dequantized
// row-block path, at block edges and over a row block of the prefill path.
func TestMatMulMXFP4(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	defer func(c int) { cacheBlock = c }(cacheBlock)
	cacheBlock = 4 << 10 // row blocks of a few rows: cross their edges
	for _, tc := range []struct{ L, N, K int }{
		{1, 1, 32}, {1, 7, 64}, {1, 33, 96}, {1, 130, 2880},
		{2, 5, 32}, {3, 9, 160},
		{4, 9, 32}, {7, 31, 64}, {17, 65, 288},
	} {
		t.Run(fmt.Sprintf("L=%d/N=%d/K=%d", tc.L, tc.N, tc.K), func(t *testing.T) {
			w := randMXFP4(tc.N, tc.K, uint64(tc.N*tc.K))
			checkBlockMatMul(t, w, tc.L, func(dst, x []float32) { p.MatMulMXFP4(dst, x, tc.L, w) })
		})
	}
}

// BenchmarkMatMulMXFP4 runs gpt-oss-20b's expert shapes (D = Fe = 2880) as a
// decode mat-vec and a 64-token prefill; MB/s counts the packed weight bytes.
func BenchmarkMatMulMXFP4(b *testing.B) {
	p := NewPool(0)
	defer p.Close()
	for _, L := range []int{1, 64} {
		b.Run(fmt.Sprintf("L=%d/shape=2880x2880", L), func(b *testing.B) {
			w := randMXFP4(2880, 2880, 1)
			x, dst := make([]float32, L*w.K), make([]float32, L*w.N)
			for i := range x {
				x[i] = float32(i%7) - 3
			}
			b.SetBytes(int64(w.Bytes()))
			b.ReportAllocs()
			for b.Loop() {
				p.MatMulMXFP4(dst, x, L, w)
			}
		})
	}
}
