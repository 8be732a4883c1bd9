package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// forKernels returns w as MatMul with kernel set ks takes it after Prepare: a
// blocked copy for the sets that read the blocked layout, else w.
func forKernels(ks *kernelSet, w *Weight) *Weight {
	if !ks.blocked || w.Format != FormatQ || !bFits(w.Q, w.K) {
		return w
	}
	c, q := *w, *w.Q
	c.Q = &q
	q.block(c.N, c.K)
	return &c
}

// withMeta returns a copy of the quantized w with its scales and biases
// rounded to kind's type, so that the blocked layout stores them as that.
func withMeta(w *Weight, kind uint8) *Weight {
	c, q := *w, *w.Q
	c.Q = &q
	q.Scales, q.Biases = slices.Clone(q.Scales), slices.Clone(q.Biases)
	for _, x := range [][]float32{q.Scales, q.Biases} {
		for i, v := range x {
			switch kind {
			case metaBF16:
				x[i] = BF16ToF32(F32ToBF16(v))
			case metaF16:
				x[i] = F16ToF32(F32ToF16(v))
			}
		}
	}
	return &c
}

var metaNames = [...]string{metaF32: "f32", metaBF16: "bf16", metaF16: "f16", metaK: "q4_k's", metaQ6: "q6_k's"}

// TestBlocked moves weights to the blocked layout and back, at four-row block
// edges (N mod 4 = 0…3), every chunk and group shape and stripes whole and
// not, in one K-slab and in slabs of one stripe, and reads rows of it as
// DequantRow does.
func TestBlocked(t *testing.T) {
	for _, slabs := range []bool{false, true} {
		if slabs {
			lowerBlockL1(t)
		}
		checkBlocked(t, slabs)
	}
}

// lowerBlockL1 makes every row longer than a stripe take K-slabs of one
// stripe until the test ends.
func lowerBlockL1(t *testing.T) {
	old := blockL1
	blockL1 = 1
	t.Cleanup(func() { blockL1 = old })
}

func checkBlocked(t *testing.T, slabs bool) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, bits := range []int{4, 8} {
		for _, gs := range []int{32, 64, 128} {
			for i, N := range []int{1, 3, 4, 6, 9, 12, 15} {
				// one stripe of a few groups, or 1…4 whole ones and one of 2…12 groups
				K := (2 + 16*(i%2)) * max(gs, bChunk(bits))
				kind := uint8(N % 3)
				w := withMeta(randWeight(r, FormatQ, N, K, bits, gs), kind)
				b := forKernels(&kernelSet{blocked: true}, w)
				if b.Q.Blocked == nil || b.Q.W != nil || b.Q.Scales != nil || b.Q.Biases != nil || b.Q.meta != kind {
					t.Fatalf("q%d gs=%d N=%d: not blocked with %s scales (meta %d)", bits, gs, N, metaNames[kind], b.Q.meta)
				}
				nslab := 1
				if slabs {
					nslab = (K + 16*gs - 1) / (16 * gs)
				}
				if len(b.Q.slabs) != nslab {
					t.Fatalf("q%d gs=%d N=%d K=%d: %d K-slabs, want %d", bits, gs, N, K, len(b.Q.slabs), nslab)
				}
				mb := 2 // bytes per scale or bias
				if kind == metaF32 {
					mb = 4
				}
				if got, want := b.Bytes(), N*(K*bits/8+2*K/gs*mb); got != want {
					t.Fatalf("q%d gs=%d N=%d: Bytes %d, want %d", bits, gs, N, got, want)
				}
				var u QMatrix
				for n0 := 0; n0 < N; n0++ {
					for n1 := n0 + 1; n1 <= N; n1++ {
						b.Q.unblock(&u, n0, n1, K)
						G, words := K/gs, K*bits/32
						if !slices.Equal(u.W, w.Q.W[n0*words:n1*words]) || !slices.Equal(u.Scales, w.Q.Scales[n0*G:n1*G]) ||
							!slices.Equal(u.Biases, w.Q.Biases[n0*G:n1*G]) {
							t.Fatalf("q%d gs=%d N=%d: rows [%d, %d) unblock to other values", bits, gs, N, n0, n1)
						}
					}
				}
				want, got := make([]float32, K), make([]float32, K)
				for n := range N {
					w.Q.DequantRow(want, n, K)
					b.Q.DequantRow(got, n, K)
					if !slices.Equal(got, want) {
						t.Fatalf("q%d gs=%d N=%d: DequantRow(%d) differs", bits, gs, N, n)
					}
				}
			}
		}
	}
}
