package kernels

import (
	"fmt"
	"testing"
)

// matmulTol is the tolerance of MatMul by weight dtype, against the CPU
// backend run on the exact f32 values of the weight (dequantized as MLX does).
// Only the summation order differs, so every dtype gets float32 rounding bounds.
var matmulTol = tol{NMSE: 1e-11, MaxAbs: 1e-4}

type matmulCase struct {
	L, N, K, G int
}

func (c matmulCase) String() string { return fmt.Sprintf("L=%d/N=%d/K=%d/G=%d", c.L, c.N, c.K, c.G) }

// matmulCases sit at the kernels' cutoffs: 4 rows per simdgroup and 8 per
// threadgroup (matvec), 32×32 tiles and 8×8 blocks (matmul), 32 lanes × 4 (f32)
// or × 8 (quantized) columns, quantization groups 32/64/128.
func matmulCases(quant bool) []matmulCase {
	var cs []matmulCase
	for _, L := range []int{1, 2, 7, 9, 33} {
		for _, N := range []int{1, 7, 31, 32, 33, 65} {
			Ks := []int{1, 3, 8, 31, 32, 33, 63, 64, 65, 129, 264} // 8, 32, 64, 264: the _v8 mat-vecs (264: a step and a partial one)
			if quant {
				Ks = []int{32, 64, 128, 256, 384}
			}
			for _, K := range Ks {
				if L == 33 && (N < 33 || K < 64) || L > 1 && N == 7 {
					continue // keep the big tiles to a few shapes
				}
				G := 0
				if quant {
					G = []int{32, 64, 128}[(N+K)%3]
					for K%G != 0 {
						G /= 2
					}
				}
				cs = append(cs, matmulCase{L, N, K, G})
			}
		}
	}
	// A real decode/prefill shape: tinycode's FFN (768, 256).
	return append(cs, matmulCase{1, 768, 256, 64}, matmulCase{9, 768, 256, 64})
}

func TestMetalMatMul(t *testing.T) {
	m := testMetal(t)
	type run struct {
		dt    DType
		noV16 bool // q4 and q8 again, with matvec_q instead of matvec_q_v16
	}
	var runs []run
	for _, dt := range []DType{DTypeF32, DTypeF16, DTypeBF16, DTypeQ2, DTypeQ3, DTypeQ4, DTypeQ5, DTypeQ6, DTypeQ8} {
		runs = append(runs, run{dt: dt})
	}
	runs = append(runs, run{DTypeQ4, true}, run{DTypeQ8, true})
	for _, r := range runs {
		dt, name := r.dt, "w="+r.dt.String()
		if m.noV16 = r.noV16; r.noV16 {
			name += "/matvec_q"
		}
		t.Run(name, func(t *testing.T) {
			var worstN, worstA float64
			for i, tc := range matmulCases(dt.Quantized()) {
				if dt.Quantized() && (dt == DTypeQ2 || dt == DTypeQ3 || dt == DTypeQ5 || dt == DTypeQ6) && i%3 != 0 {
					continue // the generic bitstream widths: a third of the shapes
				}
				if tc.G == 0 && dt.Quantized() {
					continue
				}
				t.Run(tc.String(), func(t *testing.T) {
					var hw *Tensor
					var wf []float32
					if dt.Quantized() {
						hw = hostQuant(dt, tc.N, tc.K, tc.G, uint64(tc.N*tc.K))
						wf = dequant(hw)
					} else {
						hw, wf = hostFloat(dt, tc.N, tc.K, uint64(tc.N*tc.K))
					}
					x := randn(tc.L*tc.K, 7)
					want := make([]float32, tc.L*tc.N)
					cpuRef(func(c *CPU) {
						w, _ := c.Upload(FromF32(wf, tc.N, tc.K))
						c.MatMul(FromF32(want, tc.L, tc.N), FromF32(x, tc.L, tc.K), w)
					})
					w, err := m.Upload(hw)
					if err != nil {
						t.Fatal(err)
					}
					y := m.New(tc.L, tc.N)
					m.MatMul(y, put(m, x, tc.L, tc.K), w)
					if m.shape == shapeNVIDIA && tc.L == 1 && nvQuant(hw) {
						// The NVIDIA-shaped mat-vec (a GPU's, or forced): its own
						// error bound, relative to the products' magnitudes.
						ref, scale := affineRef(hw, x)
						checkNV(t, get(t, m, y), ref, scale)
						return
					}
					n, a := closeTo(t, get(t, m, y), want, matmulTol)
					if n > 1e-12 {
						t.Logf("NMSE %.2g max-abs %.2g", n, a)
					}
					worstN, worstA = max(worstN, n), max(worstA, a)
				})
			}
			t.Logf("worst NMSE %.2g, max-abs %.2g", worstN, worstA)
		})
	}
	m.noV16 = false
	for _, name := range []string{"matvec_q4_f32", "matvec_q4_f32_v16", "matvec_q8_f32", "matvec_q8_f32_v16"} {
		if m.pipes[name] == nil && m.shape != shapeNVIDIA {
			t.Errorf("%s never ran", name)
		}
	}
	for _, dt := range []DType{DTypeF32, DTypeF16, DTypeBF16} {
		for _, name := range []string{"matvec_" + dt.String() + "_f32", "matvec_" + dt.String() + "_f32_v8"} {
			if m.pipes[name] == nil {
				t.Errorf("%s never ran", name)
			}
		}
	}
}

// TestMetalMatMulViews multiplies row views (Phi-3's fused qkv split, the
// last-row logits input) with offsets into shared buffers.
func TestMetalMatMulViews(t *testing.T) {
	m := testMetal(t)
	hw := hostQuant(DTypeQ4, 96, 64, 32, 3)
	wf := dequant(hw)
	w, err := m.Upload(hw)
	if err != nil {
		t.Fatal(err)
	}
	x := randn(3*64, 4)
	xd := put(m, x, 3, 64)
	y := m.New(3, 96)
	m.MatMul(y.Rows(2, 3), xd.Rows(2, 3), w) // decode view
	m.MatMul(y.Rows(0, 2), xd.Rows(0, 2), w) // prefill view
	part := m.New(1, 32)
	m.MatMul(part, xd.Rows(1, 2), w.Rows(32, 64)) // a row range of the weight
	want := make([]float32, 3*96)
	cpuRef(func(c *CPU) {
		wc, _ := c.Upload(FromF32(wf, 96, 64))
		c.MatMul(FromF32(want, 3, 96), FromF32(x, 3, 64), wc)
	})
	closeTo(t, get(t, m, y), want, matmulTol)
	closeTo(t, get(t, m, part), want[96+32:96+64], matmulTol)
}

// BenchmarkMetalMatVec measures the decode mat-vec. On the MSL interpreter the
// numbers only prove the dispatch path runs (it is ~1000× slower than a GPU);
// on Apple hardware gpu-ns/op comes from the command buffer's GPU timestamps
// and MB/s counts the packed weight bytes read.
func BenchmarkMetalMatVec(b *testing.B) {
	m := testMetal(b)
	for _, dt := range []DType{DTypeF16, DTypeQ4, DTypeQ8} {
		for _, sh := range [][2]int{{256, 256}, {768, 256}} {
			N, K := sh[0], sh[1]
			b.Run(fmt.Sprintf("w=%s/shape=%dx%d", dt, N, K), func(b *testing.B) {
				var hw *Tensor
				if dt.Quantized() {
					hw = hostQuant(dt, N, K, 64, 1)
				} else {
					hw, _ = hostFloat(dt, N, K, 1)
				}
				w, err := m.Upload(hw)
				if err != nil {
					b.Fatal(err)
				}
				x, y := put(m, randn(K, 2), 1, K), m.New(1, N)
				b.SetBytes(weightBytes(w, N))
				b.ReportAllocs()
				m.ResetStats()
				for b.Loop() {
					m.MatMul(y, x, w)
					if err := m.Sync(b.Context()); err != nil {
						b.Fatal(err)
					}
				}
				s := m.Stats()
				b.ReportMetric(float64(s.GPUTime.Nanoseconds())/float64(max(s.CommandBuffers, 1)), "gpu-ns/op")
			})
		}
	}
}
