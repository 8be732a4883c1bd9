package kernels

import (
	"fmt"
	"testing"
)

func TestMetalRMSNorm(t *testing.T) {
	m := testMetal(t)
	for _, tc := range []struct {
		rows, n int
	}{
		{1, 1}, {1, 31}, {2, 32}, {3, 33}, {2, 63}, {1, 64}, {2, 65},
		{8 * 4, 32}, // Qwen3 per-head q norm: (L·H, Dh)
		{2, 1025},   // more than one pass of 1024 threads
		{3, 256},    // tinycode D
	} {
		t.Run(fmt.Sprintf("rows=%d/n=%d", tc.rows, tc.n), func(t *testing.T) {
			x, w := randn(tc.rows*tc.n, 1), randn(tc.n, 2)
			want := make([]float32, len(x))
			cpuRef(func(c *CPU) {
				wt, _ := c.Upload(FromF32(w, tc.n))
				c.RMSNorm(FromF32(want, tc.rows, tc.n), FromF32(x, tc.rows, tc.n), wt, 1e-5)
			})
			wd, err := m.Upload(FromF32(w, tc.n))
			if err != nil {
				t.Fatal(err)
			}
			xd := put(m, x, tc.rows, tc.n)
			m.RMSNorm(xd, xd, wd, 1e-5) // in place, as the model's q/k norm
			nmse, ma := closeTo(t, get(t, m, xd), want, tol{NMSE: 1e-12, MaxAbs: 1e-5})
			t.Logf("NMSE %.2g max-abs %.2g", nmse, ma)
		})
	}
}
