package msl_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/ingot-llm/ingot/metal"
)

func TestReduceSum(t *testing.T) {
	d := open(t, "reduce.metal")
	for _, tc := range []struct{ rows, n, threads int }{
		{1, 1, 1}, {1, 31, 31}, {2, 32, 32}, {3, 33, 33}, {4, 1000, 256}, {2, 4096, 1024}, {5, 100, 64},
	} {
		t.Run(fmt.Sprintf("rows=%d/n=%d/threads=%d", tc.rows, tc.n, tc.threads), func(t *testing.T) {
			x := randn(tc.rows*tc.n, uint64(tc.n))
			xb, yb := f32Buffer(t, d, x), f32Buffer(t, d, make([]float32, tc.rows))
			err := dispatch(t, d, "reduce_sum_f32", size(tc.rows), size(tc.threads), func(e metal.Encoder) {
				e.SetBytes(0, u32Bytes(uint32(tc.n)))
				e.SetBuffer(1, xb, 0)
				e.SetBuffer(2, yb, 0)
			})
			if err != nil {
				t.Fatal(err)
			}
			got := f32s(yb)
			for r := range tc.rows {
				var want float64
				for _, v := range x[r*tc.n : (r+1)*tc.n] {
					want += float64(v)
				}
				if math.Abs(float64(got[r])-want) > 1e-5*math.Max(1, math.Abs(want))*math.Sqrt(float64(tc.n)) {
					t.Errorf("row %d: got %v, want %v", r, got[r], want)
				}
			}
		})
	}
}

// BenchmarkReduceSum measures the interpreter on 1024 rows of 4096 floats,
// 256 threads per row: 262144 fibers, 4 collectives and a barrier each.
func BenchmarkReduceSum(b *testing.B) {
	d := open(b, "reduce.metal")
	const rows, n = 1024, 4096
	xb, yb := f32Buffer(b, d, randn(rows*n, 1)), f32Buffer(b, d, make([]float32, rows))
	b.SetBytes(rows * n * 4)
	for b.Loop() {
		if err := dispatch(b, d, "reduce_sum_f32", size(rows), size(256), func(e metal.Encoder) {
			e.SetBytes(0, u32Bytes(n))
			e.SetBuffer(1, xb, 0)
			e.SetBuffer(2, yb, 0)
		}); err != nil {
			b.Fatal(err)
		}
	}
}
