package kernels

import (
	"fmt"
	"testing"
)

// TestMetalCausalConv: causal_conv_silu_f32 against the CPU over one long and
// two chained calls (the state carries the rows across), channels past one
// threadgroup.
func TestMetalCausalConv(t *testing.T) {
	m := testMetal(t)
	for _, c := range []struct{ C, K int }{{5, 4}, {300, 4}, {64, 2}, {33, 1}} {
		t.Run(fmt.Sprintf("C=%d/K=%d", c.C, c.K), func(t *testing.T) {
			const L = 6
			x, w := randn(L*c.C, 1), randn(c.C*c.K, 2)
			want, wantState := make([]float32, L*c.C), make([]float32, (c.K-1)*c.C)
			cpuRef(func(cp *CPU) {
				cp.CausalConvSiLU(FromF32(want, L, c.C), FromF32(x, L, c.C), FromF32(w, c.C, c.K), FromF32(wantState, c.K-1, c.C))
			})
			wd, st := put(m, w, c.C, c.K), m.New(max(c.K-1, 1), c.C).Rows(0, c.K-1)
			if c.K == 1 {
				st = &Tensor{DType: DTypeF32, Shape: []int{0, c.C}}
			}
			got := m.New(L, c.C)
			xd := put(m, x, L, c.C)
			m.CausalConvSiLU(got.Rows(0, 4), xd.Rows(0, 4), wd, st) // 4 rows, then 2 more
			m.CausalConvSiLU(got.Rows(4, L), xd.Rows(4, L), wd, st)
			closeTo(t, get(t, m, got), want, tol{NMSE: 1e-12, MaxAbs: 1e-5})
			if c.K > 1 {
				closeTo(t, get(t, m, st), wantState, tol{NMSE: 0, MaxAbs: 0})
			}
		})
	}
}

// TestMetalGatedDeltaNet: gated_deltanet_f32 against the CPU (float64 sums):
// 1 and 2 value heads per key head, head dims below and above 32, a prefill
// of 7 tokens and the state carried into a decode step.
func TestMetalGatedDeltaNet(t *testing.T) {
	m := testMetal(t)
	for _, c := range []struct{ nk, dk, nv, dv int }{{2, 16, 4, 16}, {1, 8, 1, 40}, {2, 64, 2, 32}} {
		t.Run(fmt.Sprintf("nk=%d/dk=%d/nv=%d/dv=%d", c.nk, c.dk, c.nv, c.dv), func(t *testing.T) {
			const L = 8
			C := 2*c.nk*c.dk + c.nv*c.dv
			cq, a, b := randn(L*C, 1), randn(L*c.nv, 2), randn(L*c.nv, 3)
			p := &DeltaParams{KeyHeads: c.nk, KeyDim: c.dk, ValueHeads: c.nv, ValueDim: c.dv, ALog: randn(c.nv, 4), DTBias: randn(c.nv, 5)}
			want, wantS := make([]float32, L*c.nv*c.dv), make([]float32, c.nv*c.dk*c.dv)
			cpuRef(func(cp *CPU) {
				cp.GatedDeltaNet(FromF32(want, L, c.nv*c.dv), FromF32(cq, L, C), FromF32(a, L, c.nv), FromF32(b, L, c.nv), FromF32(wantS, c.nv*c.dk, c.dv), p)
			})
			cd, ad, bd := put(m, cq, L, C), put(m, a, L, c.nv), put(m, b, L, c.nv)
			S, got := m.New(c.nv*c.dk, c.dv), m.New(L, c.nv*c.dv)
			m.GatedDeltaNet(got.Rows(0, L-1), cd.Rows(0, L-1), ad.Rows(0, L-1), bd.Rows(0, L-1), S, p) // a prefill …
			m.GatedDeltaNet(got.Rows(L-1, L), cd.Rows(L-1, L), ad.Rows(L-1, L), bd.Rows(L-1, L), S, p) // … and a decode step
			closeTo(t, get(t, m, got), want, tol{NMSE: 1e-11, MaxAbs: 1e-5})
			closeTo(t, get(t, m, S), wantS, tol{NMSE: 1e-11, MaxAbs: 1e-5})
		})
	}
}
