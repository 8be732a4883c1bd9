package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// argmaxRef is ArgmaxHost's definition, one element at a time.
func argmaxRef(x []float32) int32 {
	best, bi := float32(math.Inf(-1)), -1
	for i, v := range x {
		if v > best || (bi < 0 && v == best) {
			best, bi = v, i
		}
	}
	return int32(max(bi, 0))
}

func TestArgmaxHost(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := [][]float32{
		nil, {nan}, {nan, nan, nan, nan, nan}, {-inf}, {nan, -inf, -inf}, {1, 2, 2, 1},
		{0, 0, 0, 0, 0, 0, 0, 3}, {5, nan, 5}, {nan, nan, nan, nan, 1}, {1, inf, nan, inf},
		{-3, -2, -1, -2, -1, -5, -1}, {float32(math.Copysign(0, -1)), 0},
	}
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 40 { // every length mod 4, the maximum in each lane and the tail
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.IntN(7)) // ties
			if r.IntN(9) == 0 {
				x[i] = nan
			}
		}
		cases = append(cases, x)
	}
	for _, x := range cases {
		if got, want := ArgmaxHost(x), argmaxRef(x); got != want {
			t.Errorf("ArgmaxHost(%v) = %d, want %d", x, got, want)
		}
	}
}
