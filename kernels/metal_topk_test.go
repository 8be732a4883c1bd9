package kernels

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestMetalTopK checks topk_f32 and topk_merge_f32 against TopKHost at the
// kernels' edges: the 32-lane simdgroup, the 1024-element chunk of one
// threadgroup, k above V, and a vocabulary that takes three passes. Values are
// rounded to quarters so ties are common (the lower id must win), and some are
// −∞ (they still beat the padding).
func TestMetalTopK(t *testing.T) {
	m := testMetal(t)
	for _, V := range []int{1, 31, 32, 33, 1023, 1024, 1025, 151936} {
		x := randn(V, uint64(V))
		for i := range x {
			x[i] = float32(math.Round(float64(x[i])*4) / 4)
			if i%97 == 13 {
				x[i] = float32(math.Inf(-1))
			}
		}
		if V > 2000 {
			x[V-5], x[V-1] = 9, 9 // late maxima and a tie across chunks
		}
		xd := put(m, x, 1, V)
		for _, k := range []int{1, 40, 64} {
			t.Run(fmt.Sprintf("V=%d/k=%d", V, k), func(t *testing.T) {
				wantIDs, wantVals := make([]int32, k), make([]float32, k)
				wn := TopKHost(wantIDs, wantVals, x)
				ids, vals := make([]int32, k), make([]float32, k)
				s0 := m.Stats()
				n, err := m.TopK(ids, vals, xd)
				if err != nil {
					t.Fatal(err)
				}
				if n != wn || n != min(k, V) || !slices.Equal(ids[:n], wantIDs[:n]) || !slices.Equal(vals[:n], wantVals[:n]) {
					t.Fatalf("got %d: %v %v\nwant %d: %v %v", n, ids[:n], vals[:n], wn, wantIDs[:wn], wantVals[:wn])
				}
				if r := m.Stats().ReadBytes - s0.ReadBytes; r != int64(8*n) {
					t.Errorf("read back %d bytes, want %d (k pairs)", r, 8*n)
				}
			})
		}
	}
	t.Run("row view", func(t *testing.T) { // the logits of the last token of a batch
		x := randn(3*100, 4)
		xd := put(m, x, 3, 100)
		ids, vals := make([]int32, 5), make([]float32, 5)
		wantIDs, wantVals := make([]int32, 5), make([]float32, 5)
		TopKHost(wantIDs, wantVals, x[200:])
		if _, err := m.TopK(ids, vals, xd.Rows(2, 3)); err != nil || !slices.Equal(ids, wantIDs) || !slices.Equal(vals, wantVals) {
			t.Errorf("got %v %v (%v), want %v %v", ids, vals, err, wantIDs, wantVals)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		xd := put(m, randn(10, 1), 1, 10)
		for _, c := range []struct {
			ids  []int32
			vals []float32
			x    *Tensor
			want string
		}{
			{nil, nil, xd, "k = 0 outside [1, 64]"},
			{make([]int32, 65), make([]float32, 65), xd, "k = 65 outside [1, 64]"},
			{make([]int32, 3), make([]float32, 2), xd, "3 ids but 2 values"},
			{make([]int32, 3), make([]float32, 3), &Tensor{DType: DTypeF16, Shape: []int{1, 10}}, "want f32"},
		} {
			if _, err := m.TopK(c.ids, c.vals, c.x); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("TopK: %v, want an error containing %q", err, c.want)
			}
		}
	})
}
