package cpu

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestMatVecsRowInvariant checks MatVecs's promise: each row of an L-row call
// has the bits a one-row call gives it, alone (MatMul) and fused with other
// weights (MatMuls), for every weight format and kernel path (int16 and
// byte-plane 4/8-bit, K-slabs, the exact float path of other widths, f32,
// f16, bf16 with and without the four-token kernels, blocked q4 with f32,
// bf16 and f16 scales and a partial last stripe, rows not a multiple of
// four).
func TestMatVecsRowInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	p := NewPool(2)
	defer p.Close()
	for _, tc := range []struct {
		name     string
		f        Format
		bits, gs int
		N, K     int
	}{
		{"q4", FormatQ, 4, 64, 258, 512},
		{"q8", FormatQ, 8, 32, 37, 256},
		{"q4-prepared", FormatQ, 4, 64, 1030, 512},
		{"q8-prepared", FormatQ, 8, 64, 258, 1024},
		{"q4-prepared-slabs", FormatQ, 4, 64, 22, 8192},
		{"q4-prepared-stripes", FormatQ, 4, 64, 41, 1280},
		{"q4-prepared-bf16meta", FormatQ, 4, 32, 38, 1280},
		{"q4-prepared-f16meta", FormatQ, 4, 64, 12, 2048},
		{"q3", FormatQ, 3, 64, 41, 256},
		{"f32", FormatF32, 0, 0, 517, 256},
		{"f16", FormatF16, 0, 0, 130, 320},
		{"bf16", FormatBF16, 0, 0, 66, 96},
		{"bf16-odd-k", FormatBF16, 0, 0, 9, 60},
		{"f32-tail", FormatF32, 0, 0, 35, 200},
		{"f16-tail", FormatF16, 0, 0, 13, 72},
		{"bf16-tail", FormatBF16, 0, 0, 70, 104},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := randWeight(r, tc.f, tc.N, tc.K, tc.bits, tc.gs)
			w2 := randWeight(r, tc.f, tc.N/2+3, tc.K, tc.bits, tc.gs)
			for _, q := range []*QMatrix{w.Q, w2.Q} {
				switch {
				case strings.HasSuffix(tc.name, "bf16meta"): // scales and biases kept as bf16 (MLX's)
					roundAll(q.Scales, func(v float32) float32 { return BF16ToF32(F32ToBF16(v)) })
					roundAll(q.Biases, func(v float32) float32 { return BF16ToF32(F32ToBF16(v)) })
				case strings.HasSuffix(tc.name, "f16meta"):
					roundAll(q.Scales, func(v float32) float32 { return F16ToF32(F32ToF16(v)) })
					roundAll(q.Biases, func(v float32) float32 { return F16ToF32(F32ToF16(v)) })
				}
			}
			if strings.Contains(tc.name, "prepared") {
				Prepare(w)
				Prepare(w2)
			}
			checkRowInvariant(t, r, p, w, w2)
		})
	}
}

// checkRowInvariant fails t unless, for L = 2 … 8 rows of x (one with a
// larger range: rows are quantized each on its own grid), each row of a
// MatVecs call on {w, w2} has the bits a one-row MatMul and MatMuls give it.
func checkRowInvariant(t *testing.T, r *rand.Rand, p *Pool, w, w2 *Weight) {
	t.Helper()
	K := w.K
	for _, L := range []int{2, 3, 4, 7, 8} {
		x := randVec(r, L*K)
		x[5] = 40
		got, got2 := make([]float32, L*w.N), make([]float32, L*w2.N)
		p.MatVecs([][]float32{got, got2}, x, L, []*Weight{w, w2})
		for l := range L {
			xl := x[l*K : (l+1)*K]
			one, one2 := make([]float32, w.N), make([]float32, w2.N)
			p.MatMul(one, xl, 1, w)
			sameBits(t, "MatMul", l, got[l*w.N:(l+1)*w.N], one)
			p.MatMuls([][]float32{one, one2}, xl, 1, []*Weight{w, w2})
			sameBits(t, "MatMuls", l, got[l*w.N:(l+1)*w.N], one)
			sameBits(t, "MatMuls", l, got2[l*w2.N:(l+1)*w2.N], one2)
		}
	}
}

func sameBits(t *testing.T, op string, row int, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("row %d, output %d: MatVecs %v, one-row %s %v", row, i, got[i], op, want[i])
		}
	}
}

func TestMatVecsAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	p := NewPool(2)
	defer p.Close()
	w := randWeight(r, FormatQ, 256, 512, 4, 64)
	Prepare(w)
	f := randWeight(r, FormatBF16, 256, 512, 0, 0)
	const L = 4
	x := randVec(r, L*512)
	dst := [][]float32{make([]float32, L*256), make([]float32, L*256)}
	ws := []*Weight{w, f}
	p.MatVecs(dst, x, L, ws) // grow the scratch
	if a := testing.AllocsPerRun(20, func() { p.MatVecs(dst, x, L, ws) }); a != 0 {
		t.Errorf("%v allocs per MatVecs", a)
	}
}

func roundAll(x []float32, f func(float32) float32) {
	for i, v := range x {
		x[i] = f(v)
	}
}
