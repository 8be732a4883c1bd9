//go:build arm64 && !noasm

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestMatVecBNEONRows runs the byte-dot kernels (SDOT and without) on every row range of a 9-row
// matrix (four-row blocks, the block stepped back over the last rows, calls of
// fewer than four rows), on group sizes beyond checkMatVecB's (a group of 96
// straddling chunks, 256, 1024, and 2048, which takes the Go loop), against
// the Go reference.
func TestMatVecBNEONRows(t *testing.T) {
	for _, v := range byteDotVariants() {
		t.Run(v.name, func(t *testing.T) { checkMatVecBRows(t, v.f) })
	}
}

// byteDotVariants returns the arm64 byte-dot wrappers this CPU runs.
func byteDotVariants() []struct {
	name string
	f    func(dst []float32, q *QMatrix, K, n0 int, a *actB, l int, pf pfArm)
} {
	v := []struct {
		name string
		f    func(dst []float32, q *QMatrix, K, n0 int, a *actB, l int, pf pfArm)
	}{{"smull", qMatVecBNEONS}}
	if hasDotProd {
		v = append(v, v[0])
		v[1].name, v[1].f = "sdot", qMatVecBNEON
	}
	return v
}

func checkMatVecBRows(t *testing.T, f func(dst []float32, q *QMatrix, K, n0 int, a *actB, l int, pf pfArm)) {
	r := rand.New(rand.NewPCG(21, 22))
	const N = 9
	for _, bits := range []int{4, 8} {
		C := bChunk(bits)
		for _, gs := range []int{32, 96, 256, 1024, 2048} {
			K := max(gs, C) * 3
			if K%gs != 0 || K%C != 0 {
				K = gs * C // 96: a common multiple
			}
			w := randWeight(r, FormatQ, N, K, bits, gs)
			x := randVec(r, K)
			var a actB
			a.quantize(nil, x, 1, K, gs, bits, false)
			want := make([]float32, N)
			qMatVecBGo(want, w.Q, K, 0, &a, 0)
			for n0 := range N {
				for n := 1; n0+n <= N; n++ {
					got := make([]float32, n+1)
					got[n] = 42
					f(got[:n], w.Q, K, n0, &a, 0, pfL2)
					if got[n] != 42 {
						t.Fatalf("q%d gs=%d rows [%d,%d): wrote past the last row", bits, gs, n0, n0+n)
					}
					for i := range n {
						if d := math.Abs(float64(got[i] - want[n0+i])); d > 1e-5*math.Abs(float64(want[n0+i]))+1e-5 {
							t.Fatalf("q%d gs=%d rows [%d,%d): out[%d] = %g, go %g", bits, gs, n0, n0+n, i, got[i], want[n0+i])
						}
					}
				}
			}
		}
	}
}

// TestMatVecBNEONExtremes drives the kernels' integer sums to their bounds,
// in groups of 1024 (the largest the wrapper takes): every t at ±bMaxT with
// every code at an extreme (the int32 group sums; an overflow is off by 2³²),
// and planes at −128 against 8-bit code 0 (c − 128 = −128: the products the
// widening kernels must not pair in int16).
func TestMatVecBNEONExtremes(t *testing.T) {
	for _, v := range byteDotVariants() {
		t.Run(v.name, func(t *testing.T) { checkMatVecBExtremes(t, v.f) })
	}
}

func checkMatVecBExtremes(t *testing.T, f func(dst []float32, q *QMatrix, K, n0 int, a *actB, l int, pf pfArm)) {
	const N, gs, K = 4, 1024, 2048
	d := float32(1.0 / bMaxT) // dx when max|x| = 1
	for _, c := range []struct {
		bits int
		code uint32
		x    float32 // every x but x[0] = 1; t = x/dx
	}{
		{4, 0, 1}, {4, 15, 1}, {4, 15, -1}, {8, 0, 1}, {8, 255, 1}, {8, 0, -1}, {8, 255, -1},
		{8, 0, -32896 * d}, // t = −128·2⁸ − 128: mid and lo bytes −128
		{4, 15, -32896 * d},
	} {
		q := &QMatrix{Bits: c.bits, GroupSize: gs, W: make([]uint32, N*K*c.bits/32),
			Scales: make([]float32, N*K/gs), Biases: make([]float32, N*K/gs)}
		var word uint32
		for i := 0; i < 32; i += c.bits {
			word |= c.code << i
		}
		for i := range q.W {
			q.W[i] = word
		}
		for i := range q.Scales {
			q.Scales[i], q.Biases[i] = 1, 0.5
		}
		x := make([]float32, K)
		var mag float64 // Σ (|s|·max code + |b|)·|x|
		for i := range x {
			x[i] = c.x
			if i == 0 {
				x[i] = 1
			}
			mag += (float64(int(1)<<c.bits-1) + 0.5) * math.Abs(float64(x[i]))
		}
		var a actB
		a.quantize(nil, x, 1, K, gs, c.bits, false)
		want := make([]float32, N)
		qMatVecBGo(want, q, K, 0, &a, 0)
		got := make([]float32, N)
		f(got, q, K, 0, &a, 0, pfL2)
		for i := range got {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-6*mag {
				t.Errorf("q%d code %d x %g: out[%d] = %g, go %g", c.bits, c.code, c.x, i, got[i], want[i])
			}
		}
	}
}

// TestFMatVecNEONRows runs the float mat-vec kernels on every row range of a
// 9-row matrix, at K around their 16- and 8-element steps, against the Go loop.
func TestFMatVecNEONRows(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	const N = 9
	for _, f := range []struct {
		f    Format
		name string
	}{{FormatF32, "f32"}, {FormatF16, "f16"}, {FormatBF16, "bf16"}} {
		for _, K := range []int{8, 16, 24, 40, 136, 12} {
			t.Run(fmt.Sprintf("%s/K=%d", f.name, K), func(t *testing.T) {
				w := randWeight(r, f.f, N, K, 0, 0)
				x := randVec(r, K)
				want, mag, _ := ref(w, x, 1)
				for n0 := range N {
					for n := 1; n0+n <= N; n++ {
						got := make([]float32, n+1)
						got[n] = 42
						fMatVecNEON(got[:n], w, n0, x)
						if got[n] != 42 {
							t.Fatalf("rows [%d,%d): wrote past the last row", n0, n0+n)
						}
						checkRef(t, got[:n], want[n0:], mag[n0:], nil, 0)
					}
				}
			})
		}
	}
}

// TestNEONSmallCallAllocs checks that calls of fewer than four rows (a block
// of four copies into scratch) allocate nothing.
func TestNEONSmallCallAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	const K = 256
	wq := randWeight(r, FormatQ, 3, K, 4, 64)
	wf := randWeight(r, FormatF16, 3, K, 0, 0)
	x := randVec(r, K)
	var a actB
	a.quantize(nil, x, 1, K, 64, 4, false)
	dst := make([]float32, 3)
	if n := testing.AllocsPerRun(10, func() { fMatVecNEON(dst, wf, 0, x) }); n != 0 {
		t.Errorf("fMatVecNEON: %v allocs", n)
	}
	for _, v := range byteDotVariants() {
		if n := testing.AllocsPerRun(10, func() { v.f(dst, wq.Q, K, 0, &a, 0, pfL2) }); n != 0 {
			t.Errorf("byte dots (%s): %v allocs", v.name, n)
		}
	}
}

// TestFTileNEON checks the 4×4 float tile against float64 for each format at K
// around its 4-element step, with a dst stride past the tile (untouched).
func TestFTileNEON(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	for _, f := range []struct {
		f    Format
		name string
	}{{FormatF32, "f32"}, {FormatF16, "f16"}, {FormatBF16, "bf16"}} {
		for _, K := range []int{8, 16, 24, 136} {
			t.Run(fmt.Sprintf("%s/K=%d", f.name, K), func(t *testing.T) {
				const N, n0, dstride = 6, 1, 7
				w := randWeight(r, f.f, N, K, 0, 0)
				x := randVec(r, 4*K)
				got := randVec(r, 4*dstride)
				orig := append([]float32(nil), got...)
				fTileNEON(got, dstride, w, n0, x)
				for j := range 4 {
					want, mag, _ := ref(w, x[j*K:(j+1)*K], 1)
					checkRef(t, got[j*dstride:j*dstride+4], want[n0:], mag[n0:], nil, 0)
					for i := 4; i < dstride; i++ {
						if got[j*dstride+i] != orig[j*dstride+i] {
							t.Fatalf("token %d: wrote dst[%d] past the tile", j, j*dstride+i)
						}
					}
				}
			})
		}
	}
}
