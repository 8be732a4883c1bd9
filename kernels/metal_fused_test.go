package kernels

import (
	"fmt"
	"math"
	"testing"
	"unsafe"

	"github.com/ingot-llm/ingot/kernels/cpu"
)

// TestMetalAddRMSNorm: add_rmsnorm_f32 against the CPU's Add then RMSNorm,
// with dst = h as the decoder calls it, at the kernel's edges: rows one
// float4 wide, a thread's last float4 partly past the row, 4 float4s a
// thread at 1024 threads (n = 16384), and the fallback (n not a multiple of
// 4, n past 16384, an offset off 16 bytes). x must come back with h added.
func TestMetalAddRMSNorm(t *testing.T) {
	for _, nv := range []bool{false, true} {
		m := testMetal(t)
		if nv {
			m.shape = shapeNVIDIA
		}
		for _, c := range []struct{ rows, n, off int }{
			{1, 4, 0}, {3, 8, 0}, {2, 132, 0}, {1, 2048, 0}, {2, 4096, 0}, {1, 4100, 0}, {1, 16384, 0},
			{2, 6, 0}, {1, 16388, 0}, {2, 64, 1},
		} {
			t.Run(fmt.Sprintf("nv=%v/rows=%d/n=%d/off=%d", nv, c.rows, c.n, c.off), func(t *testing.T) {
				x, h, w := randn(c.rows*c.n, 1), randn(c.rows*c.n, 2), randn(c.n, 3)
				wantX := append([]float32(nil), x...)
				want := make([]float32, len(x))
				cpuRef(func(cp *CPU) {
					wt, _ := cp.Upload(FromF32(w, c.n))
					cp.AddRMSNorm(FromF32(want, c.rows, c.n), FromF32(wantX, c.rows, c.n), FromF32(append([]float32(nil), h...), c.rows, c.n), wt, 1e-5)
				})
				wd, err := m.Upload(FromF32(w, c.n))
				if err != nil {
					t.Fatal(err)
				}
				xd := put(m, x, c.rows, c.n)
				base := put(m, append(make([]float32, c.off), h...), c.rows*c.n+c.off)
				hd := &Tensor{DType: DTypeF32, Shape: []int{c.rows, c.n}, Buf: base.Buf, Off: base.Off + 4*c.off}
				m.AddRMSNorm(hd, xd, hd, wd, 1e-5)
				closeTo(t, get(t, m, xd), wantX, tol{NMSE: 0, MaxAbs: 0})
				n, a := closeTo(t, get(t, m, hd), want, tol{NMSE: 1e-12, MaxAbs: 1e-5})
				t.Logf("NMSE %.2g max-abs %.2g", n, a)
			})
		}
		if m.pipes["add_rmsnorm_f32"] == nil {
			t.Error("add_rmsnorm_f32 never ran")
		}
	}
}

// TestMetalRMSNormNV: the NVIDIA-shaped RMSNorm (rmsnorm_vec_f32 where it
// takes the shape) against the CPU, in place as the q/k norms run.
func TestMetalRMSNormNV(t *testing.T) {
	m := testMetalNV(t)
	for _, c := range []struct{ rows, n int }{{1, 4}, {32, 128}, {1, 4096}, {2, 16384}, {3, 33}, {1, 16388}} {
		t.Run(fmt.Sprintf("rows=%d/n=%d", c.rows, c.n), func(t *testing.T) {
			x, w := randn(c.rows*c.n, 1), randn(c.n, 2)
			want := make([]float32, len(x))
			cpuRef(func(cp *CPU) {
				wt, _ := cp.Upload(FromF32(w, c.n))
				cp.RMSNorm(FromF32(want, c.rows, c.n), FromF32(x, c.rows, c.n), wt, 1e-5)
			})
			wd, err := m.Upload(FromF32(w, c.n))
			if err != nil {
				t.Fatal(err)
			}
			xd := put(m, x, c.rows, c.n)
			m.RMSNorm(xd, xd, wd, 1e-5)
			closeTo(t, get(t, m, xd), want, tol{NMSE: 1e-12, MaxAbs: 1e-5})
		})
	}
	if m.pipes["rmsnorm_vec_f32"] == nil {
		t.Error("rmsnorm_vec_f32 never ran")
	}
}

// TestMetalRoPEStore: rope_store_f32/f16 against the CPU's two RoPEs and two
// CopyRows: q and k rotated in place, the cache rows [pos, pos+L) written
// (rounded to f16 exactly as CopyRows rounds), every other cache row left
// zero; partial rotary, GQA, a rotary half that threads stride twice.
func TestMetalRoPEStore(t *testing.T) {
	m := testMetal(t)
	for _, c := range []struct{ L, pos, H, Hkv, Dh, rot, S int }{
		{1, 0, 4, 2, 16, 16, 3},
		{1, 37, 8, 2, 64, 64, 40},
		{3, 5, 6, 3, 32, 16, 9},         // partial rotary
		{2, 4000, 4, 1, 128, 128, 4002}, // large angles
		{1, 2, 2, 2, 1024, 1024, 4},     // half 512 > 256 threads
	} {
		for _, dt := range []DType{DTypeF32, DTypeF16} {
			t.Run(fmt.Sprintf("%s/L=%d/pos=%d/H=%d/Hkv=%d/Dh=%d/rot=%d", dt, c.L, c.pos, c.H, c.Hkv, c.Dh, c.rot), func(t *testing.T) {
				inv := make([]float32, c.rot/2)
				for j := range inv {
					inv[j] = float32(1 / math.Pow(10000, float64(2*j)/float64(c.rot)))
				}
				p := &RoPE{HeadDim: c.Dh, RotaryDim: c.rot, InvFreq: inv, Scale: 1.1}
				qw, kw := c.H*c.Dh, c.Hkv*c.Dh
				q, k, v := randn(c.L*qw, 1), randn(c.L*kw, 2), randn(c.L*kw, 3)
				wq, wk := append([]float32(nil), q...), append([]float32(nil), k...)
				wkc, wvc := make([]float32, c.S*kw), make([]float32, c.S*kw)
				cpuRef(func(cp *CPU) {
					newCache := func(x []float32) *Tensor {
						if dt == DTypeF16 {
							return cp.NewF16(c.S, kw)
						}
						return FromF32(x, c.S, kw)
					}
					kc, vc := newCache(wkc), newCache(wvc)
					cp.RoPEStore(FromF32(wq, c.L, qw), FromF32(wk, c.L, kw), FromF32(v, c.L, kw), kc, vc, c.pos, p)
					if dt == DTypeF16 {
						for i, h := range kc.U16() {
							wkc[i] = cpu.F16ToF32(h)
						}
						for i, h := range vc.U16() {
							wvc[i] = cpu.F16ToF32(h)
						}
					}
				})
				newCache := func() *Tensor {
					if dt == DTypeF16 {
						return m.NewF16(c.S, kw)
					}
					return m.New(c.S, kw)
				}
				qd, kd, vd, kc, vc := put(m, q, c.L, qw), put(m, k, c.L, kw), put(m, v, c.L, kw), newCache(), newCache()
				m.RoPEStore(qd, kd, vd, kc, vc, c.pos, p)
				tl := tol{NMSE: 1e-12, MaxAbs: 2e-6}
				closeTo(t, get(t, m, qd), wq, tl)
				closeTo(t, get(t, m, kd), wk, tl)
				if dt == DTypeF16 {
					tl = tol{NMSE: 1e-6, MaxAbs: 2e-3} // one f16 rounding of values ≈ 1e-6 apart
				}
				closeTo(t, readCache(t, m, kc), wkc, tl)
				closeTo(t, readCache(t, m, vc), wvc, tol{NMSE: 0, MaxAbs: 0}) // copies: exact
			})
		}
	}
}

// readCache downloads an f32 or f16 cache as floats.
func readCache(t *testing.T, m *Metal, c *Tensor) []float32 {
	t.Helper()
	if err := m.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c.DType == DTypeF32 {
		return get(t, m, c)
	}
	h := make([]uint16, c.Len())
	if err := readBuf(bufOf("readCache", c), c.Off, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(h))), 2*len(h))); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(h))
	for i, v := range h {
		out[i] = cpu.F16ToF32(v)
	}
	return out
}

// TestMetalAddScaled: add_scaled_f32 against the CPU, on rows of a larger
// tensor (the expert outputs of a token) and across threadgroups.
func TestMetalAddScaled(t *testing.T) {
	m := testMetal(t)
	for _, n := range []int{1, 255, 256, 257, 4096} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			y, x := randn(3*n, 1), randn(3*n, 2)
			want := append([]float32(nil), y...)
			cpuRef(func(c *CPU) { c.AddScaled(FromF32(want[n:2*n], 1, n), FromF32(x[n:2*n], 1, n), 0.37) })
			yd, xd := put(m, y, 3, n), put(m, x, 3, n)
			m.AddScaled(yd.Rows(1, 2), xd.Rows(1, 2), 0.37)
			closeTo(t, get(t, m, yd), want, tol{NMSE: 0, MaxAbs: 0}) // the same two roundings
		})
	}
}
