package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRMSNorm checks RMSNorm against float64 arithmetic on rows of every
// length mod 4 (sumSquares' tail), several rows at once.
func TestRMSNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 63, 2048, 2051} {
		const rows = 3
		x, w := randVec(r, rows*n), randVec(r, n)
		x[n/2] *= 300 // an outlier channel
		y := make([]float32, rows*n)
		RMSNorm(y, x, w, 1e-5)
		for row := range rows {
			xr := x[row*n : (row+1)*n]
			var ss float64
			for _, v := range xr {
				ss += float64(v) * float64(v)
			}
			inv := 1 / math.Sqrt(ss/float64(n)+1e-5)
			for i, v := range xr {
				want := float64(w[i]) * float64(v) * inv
				if d := math.Abs(float64(y[row*n+i]) - want); d > 3e-7*math.Abs(want)+1e-30 {
					t.Fatalf("n=%d row %d [%d]: %g, want %g", n, row, i, y[row*n+i], want)
				}
			}
		}
	}
}
