package kernels

import (
	"fmt"
	"testing"
)

// TestMetalMatMulTiles runs the Apple-shaped prefill matmul (32 tokens × 64
// weight rows per threadgroup, 32 columns a step, two copies of each staged
// tile) at its edges against the CPU reference: L and N at −1, exact and +1
// of a tile (full tiles are stored from the accumulators, partial ones
// through threadgroup memory), K at 1, 2 and 3 steps and partial steps (the
// copies alternate), for every weight type it serves: f32, f16 (staged as
// half), bf16, and affine q3/q4/q8 with f32 and f16 scales. The output is a
// row view with a sentinel row after it, which no store may touch. The
// tolerance is matmulTol's float32 rounding: staging f16 weights as half is
// exact, and x stays float.
func TestMetalMatMulTiles(t *testing.T) {
	m := testMetal(t)
	m.shape = shapeApple // also on a cuda device (INGOT_TEST_BACKEND)
	type kase struct{ L, N, K int }
	var dense, quant []kase
	for _, L := range []int{2, 31, 32, 33, 65} {
		for _, N := range []int{1, 63, 64, 65, 129} {
			for i, K := range []int{1, 31, 32, 33, 64, 65, 96, 97} {
				if (L*3+N+i)%3 == 0 || L == 65 && N != 65 { // a third of the grid, spread over every edge
					dense = append(dense, kase{L, N, K})
				}
			}
			for i, K := range []int{32, 64, 96, 160} {
				if (L+N+i)%2 == 0 {
					quant = append(quant, kase{L, N, K})
				}
			}
		}
	}
	type wt struct {
		dt, sb DType // sb: the affine scales' and biases' dtype
	}
	for _, w := range []wt{{DTypeF32, 0}, {DTypeF16, 0}, {DTypeBF16, 0}, {DTypeQ3, DTypeF32}, {DTypeQ4, DTypeF32}, {DTypeQ4, DTypeF16}, {DTypeQ8, DTypeF32}, {DTypeQ8, DTypeBF16}} {
		name, cases := "w="+w.dt.String(), dense
		if w.dt.Quantized() {
			name, cases = name+"/sb="+w.sb.String(), quant
		}
		t.Run(name, func(t *testing.T) {
			var worstN, worstA float64
			for i, c := range cases {
				t.Run(fmt.Sprintf("L=%d/N=%d/K=%d", c.L, c.N, c.K), func(t *testing.T) {
					var hw *Tensor
					var wf []float32
					seed := uint64(1000*i + int(w.dt))
					switch {
					case w.dt.Quantized() && w.sb == DTypeF32:
						hw = hostQuant(w.dt, c.N, c.K, 32, seed)
						wf = dequant(hw)
					case w.dt.Quantized():
						var h32 *Tensor
						hw, h32 = hostQuant16(w.dt, c.N, c.K, 32, seed, w.sb)
						wf = dequant(h32)
					default:
						hw, wf = hostFloat(w.dt, c.N, c.K, seed)
					}
					x := randn(c.L*c.K, seed+7)
					want := make([]float32, c.L*c.N)
					cpuRef(func(cc *CPU) {
						wc, _ := cc.Upload(FromF32(wf, c.N, c.K))
						cc.MatMul(FromF32(want, c.L, c.N), FromF32(x, c.L, c.K), wc)
					})
					wd, err := m.Upload(hw)
					if err != nil {
						t.Fatal(err)
					}
					const sentinel = 12345
					init := make([]float32, (c.L+1)*c.N)
					for j := range init {
						init[j] = sentinel
					}
					y := put(m, init, c.L+1, c.N)
					m.MatMul(y.Rows(0, c.L), put(m, x, c.L, c.K), wd)
					got := get(t, m, y)
					for j, v := range got[c.L*c.N:] {
						if v != sentinel {
							t.Fatalf("y[%d][%d] = %g: written past the output's %d rows", c.L, j, v, c.L)
						}
					}
					n, a := closeTo(t, got[:c.L*c.N], want, matmulTol)
					worstN, worstA = max(worstN, n), max(worstA, a)
				})
			}
			t.Logf("%d shapes, worst NMSE %.2g, max-abs %.2g", len(cases), worstN, worstA)
		})
	}
}
