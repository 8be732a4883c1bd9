//go:build amd64 && !noasm

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAttnScores4 checks the four-head score kernel (where this machine has it)
// against float64 sums: key counts around its four-key steps and the decode
// block, head dims around its 16-wide chunks, heads repeated as Decode pads a
// group, and each head's max.
func TestAttnScores4(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	ran := false
	for _, dh := range []int{16, 48, 64, 80, 128, 256} {
		for _, n := range []int{4, 8, 28, 32, 124, 128} { // attnDecodeKeys = 128
			for _, heads := range [][4]int{{0, 1, 2, 3}, {0, 1, 2, 2}, {3, 0, 0, 0}} {
				stride := 4*dh + 3 // four KV heads a row, unaligned
				k := randVec(r, n*stride+dh)
				qs := randVec(r, 4*dh)
				var s, q [4][]float32
				rows := make([]float32, 4*n)
				for i, h := range heads {
					s[i], q[i] = rows[i*n:(i+1)*n], qs[h*dh:(h+1)*dh]
				}
				var mx [4]float32
				if !attnScores4(&s, &q, k[dh:], stride, n, &mx) {
					continue
				}
				ran = true
				for i := range 4 {
					best := math.Inf(-1)
					for j := range n {
						var want float64
						for d := range dh {
							want += float64(q[i][d]) * float64(k[dh+j*stride+d])
						}
						if math.Abs(float64(s[i][j])-want) > 1e-5*(1+math.Abs(want))*float64(dh)/8 {
							t.Fatalf("dh %d n %d heads %v: s[%d][%d] = %v, want %v", dh, n, heads, i, j, s[i][j], want)
						}
						best = max(best, float64(s[i][j]))
					}
					if float64(mx[i]) != best {
						t.Fatalf("dh %d n %d heads %v: max %d = %v, want %v", dh, n, heads, i, mx[i], best)
					}
				}
			}
		}
	}
	if useAttnAVX512 && !ran {
		t.Fatal("attnScores4 took no case on an AVX-512 machine")
	}
}
