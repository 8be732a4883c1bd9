package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAttnLoops cross-checks the score and accumulate loops (assembly where
// present) against float64 sums at head dims around the 8- and 32-wide blocks.
func TestAttnLoops(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, dh := range []int{4, 8, 16, 24, 32, 40, 64, 96, 128, 256} {
		for _, n := range []int{1, 2, 7, 33} {
			stride := 3*dh + 5 // keys of several heads interleaved, unaligned
			k := make([]float32, n*stride+dh)
			for i := range k {
				k[i] = float32(r.NormFloat64())
			}
			q, p := make([]float32, dh), make([]float32, n)
			for i := range q {
				q[i] = float32(r.NormFloat64())
			}
			for i := range p {
				p[i] = r.Float32()
			}
			off := dh + 1
			scores := make([]float32, n)
			attnScores(scores, q, k[off:], stride)
			out := make([]float32, dh)
			for i := range out {
				out[i] = float32(i)
			}
			attnAccum(out, k[off:], stride, p)
			for j := range n {
				var want float64
				for i := range dh {
					want += float64(q[i]) * float64(k[off+j*stride+i])
				}
				if math.Abs(float64(scores[j])-want) > 1e-5*(1+math.Abs(want))*float64(dh)/8 {
					t.Fatalf("dh %d n %d: score %d = %v, want %v", dh, n, j, scores[j], want)
				}
			}
			for i := range dh {
				want := float64(i)
				for j := range n {
					want += float64(p[j]) * float64(k[off+j*stride+i])
				}
				if math.Abs(float64(out[i])-want) > 1e-5*(1+math.Abs(want)) {
					t.Fatalf("dh %d n %d: out[%d] = %v, want %v", dh, n, i, out[i], want)
				}
			}
		}
	}
}
