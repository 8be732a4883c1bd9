//go:build amd64 && !noasm

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestFMatVecPF checks that the prefetching f16/bf16 mat-vecs give
// fMatVecAVX2's bits (same arithmetic; fVecs4 relies on it) for K around
// their 32- and 8-element steps, several prefetch distances and row ranges
// (the prefetch may point past the weight: it never faults).
func TestFMatVecPF(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(21, 22))
	defer func(old int) { fVecPF = old }(fVecPF)
	for _, f := range []struct {
		f    Format
		name string
	}{{FormatF16, "f16"}, {FormatBF16, "bf16"}, {FormatF32, "f32"}} {
		for _, K := range []int{8, 24, 32, 40, 64, 72, 2048, 2056} {
			w := randWeight(r, f.f, 13, K, 0, 0)
			x := randVec(r, K)
			for _, pf := range []int{0, 64, 8192} {
				fVecPF = pf
				for _, c := range []struct{ n0, n int }{{0, 13}, {5, 8}, {12, 1}} {
					want, got := make([]float32, c.n), make([]float32, c.n)
					fMatVecAVX2(want, w, c.n0, x)
					fMatVecPF(got, w, c.n0, x)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s K=%d pf=%d rows %+v: out[%d] = %g, fMatVecAVX2 %g", f.name, K, pf, c, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}
