//go:build arm64 && !noasm

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestKQuantNEONDispatch: an arm64 build with assembly runs the NEON kernels
// (kqAsm is their switch), so the kquant tests' asm=true cases exercise them
// instead of silently falling back to the portable dots.
func TestKQuantNEONDispatch(t *testing.T) {
	if !hasASIMD || !kqAsm {
		t.Fatalf("hasASIMD %v, kqAsm %v: the NEON kquant kernels do not run", hasASIMD, kqAsm)
	}
}

// TestDotKQuantNEONRows compares the NEON row kernels (q8_0, q4_0) with the
// portable block dots on rows of 1 to 9 blocks, x with mixed signs and
// magnitudes: within TestDotKQuantAVX2's float32 summation bound.
func TestDotKQuantNEONRows(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, kt := range []KType{KQ8_0, KQ4_0} {
		for nb := 1; nb <= 9; nb++ {
			for range 20 {
				K := 32 * nb
				x := make([]float32, K)
				for i := range x {
					x[i] = float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(9)-4)))
				}
				w := randKQuant(kt, 1, K, r.Uint64())
				mag := rowMag(w, x)
				var got, want float32
				switch kt {
				case KQ8_0:
					got = dotQ8_0NEON(&w.B[0], &x[0], nb)
					for j := range nb {
						want += dotQ8_0((*[34]byte)(w.B[34*j:]), (*[32]float32)(x[32*j:]))
					}
				case KQ4_0:
					got = dotQ4_0NEON(&w.B[0], &x[0], nb)
					for j := range nb {
						want += dotQ4_0((*[18]byte)(w.B[18*j:]), (*[32]float32)(x[32*j:]))
					}
				}
				if d := math.Abs(float64(got - want)); d > 512*0x1p-24*mag+1e-30 {
					t.Fatalf("%s nb=%d: NEON %g, portable %g (|Σ| %g)", kt, nb, got, want, mag)
				}
			}
		}
	}
}

// TestDotKQuantNEONBlocks compares the NEON block kernels, called directly,
// with the portable block dots on random blocks (every code and scale
// pattern), x with mixed signs and magnitudes: within TestDotKQuantAVX2's
// bound.
func TestDotKQuantNEONBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	x := make([]float32, 256)
	xb := (*[256]float32)(x)
	for range 300 {
		for i := range x {
			x[i] = float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(9)-4)))
		}
		for _, kt := range []KType{KQ4K, KQ6K} {
			w := randKQuant(kt, 1, 256, r.Uint64())
			mag := rowMag(w, x)
			var got, want float32
			switch kt {
			case KQ4K:
				b := (*[144]byte)(w.B)
				ac := q4kScalesNEON(b)
				got, want = dotQ4KNEON(&b[16], &ac, &x[0]), dotQ4K(b, xb)
			case KQ6K:
				b := (*[210]byte)(w.B)
				a := q6kScalesNEON(b)
				got, want = dotQ6KNEON(&b[0], &a, &x[0]), dotQ6K(b, xb)
			}
			if d := math.Abs(float64(got - want)); d > 512*0x1p-24*mag+1e-30 {
				t.Fatalf("%s: NEON %g, portable %g (|Σ| %g)", kt, got, want, mag)
			}
		}
	}
}
