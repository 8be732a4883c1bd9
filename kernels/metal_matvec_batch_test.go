package kernels

import (
	"context"
	"fmt"
	"math"
	"os"
	"testing"
)

// TestMetalMatVecBatch runs the small-batch mat-vec (matvecb_*, 2 ≤ L ≤ 8
// tokens against weights read once) at its edges: N around the 4 rows of a
// simdgroup and 8 of a threadgroup, K at one lane step and a partial one
// (256 columns a simdgroup step for dense weights, 512 for q4, 256 for q8;
// dense K not a multiple of 8: the scalar-load form),
// q4/q8 with f32, f16 and bf16 scales, f32/f16/bf16 weights, L = 2 … 8. Each
// token's output must equal, bit for bit, what the one-token mat-vec gives
// that token alone (batch invariance), and the CPU reference within
// matmulTol; the L tokens must be one dispatch of the batch kernel.
func TestMetalMatVecBatch(t *testing.T) {
	m := testMetal(t)
	m.shape = shapeApple // also on a cuda device (INGOT_TEST_BACKEND)
	type wt struct {
		dt    DType
		sb    DType // affine scales' and biases' dtype
		quant bool
	}
	weights := []wt{{DTypeF32, 0, false}, {DTypeF16, 0, false}, {DTypeBF16, 0, false},
		{DTypeQ4, DTypeF32, true}, {DTypeQ4, DTypeF16, true}, {DTypeQ4, DTypeBF16, true},
		{DTypeQ8, DTypeF32, true}, {DTypeQ8, DTypeF16, true}, {DTypeQ8, DTypeBF16, true}}
	type kase struct{ L, N, K, G int }
	var dense, quant []kase
	for i, N := range []int{1, 7, 8, 9, 65} {
		L := []int{2, 3, 5, 8, 8}[i]
		for _, K := range []int{3, 8, 33, 256, 264, 520} { // 3, 33: the scalar-load form
			dense = append(dense, kase{L, N, K, 0})
		}
		for _, kg := range [][2]int{{32, 32}, {512, 64}, {544, 32}, {640, 128}} {
			quant = append(quant, kase{L, N, kg[0], kg[1]})
		}
	}
	for _, w := range weights {
		name, cases := "w="+w.dt.String(), dense
		if w.quant {
			name, cases = name+"/sb="+w.sb.String(), quant
		}
		t.Run(name, func(t *testing.T) {
			for i, c := range cases {
				t.Run(fmt.Sprintf("L=%d/N=%d/K=%d", c.L, c.N, c.K), func(t *testing.T) {
					seed := uint64(100*i + int(w.dt))
					var hw *Tensor
					var wf []float32
					switch {
					case w.quant && w.sb == DTypeF32:
						hw = hostQuant(w.dt, c.N, c.K, c.G, seed)
						wf = dequant(hw)
					case w.quant:
						var h32 *Tensor
						hw, h32 = hostQuant16(w.dt, c.N, c.K, c.G, seed, w.sb)
						wf = dequant(h32)
					default:
						hw, wf = hostFloat(w.dt, c.N, c.K, seed)
					}
					wd, err := m.Upload(hw)
					if err != nil {
						t.Fatal(err)
					}
					x := randn(c.L*c.K, seed+1)
					xd := put(m, x, c.L, c.K)
					batch, alone := m.New(c.L, c.N), m.New(c.L, c.N)
					if err := m.Sync(context.Background()); err != nil {
						t.Fatal(err)
					}
					m.ResetStats()
					m.MatMul(batch, xd, wd)
					if st := m.Stats(); st.Dispatches != 1 {
						t.Errorf("%d tokens: %d dispatches, want 1", c.L, st.Dispatches)
					}
					for l := range c.L {
						m.MatMul(alone.Rows(l, l+1), xd.Rows(l, l+1), wd)
					}
					got, one := get(t, m, batch), get(t, m, alone)
					for j := range got {
						if math.Float32bits(got[j]) != math.Float32bits(one[j]) {
							t.Fatalf("token %d, row %d: %g batched, %g alone: not batch-invariant", j/c.N, j%c.N, got[j], one[j])
						}
					}
					want := make([]float32, c.L*c.N)
					cpuRef(func(cc *CPU) {
						wc, _ := cc.Upload(FromF32(wf, c.N, c.K))
						cc.MatMul(FromF32(want, c.L, c.N), FromF32(x, c.L, c.K), wc)
					})
					closeTo(t, got, want, matmulTol)
				})
			}
		})
	}
	for _, name := range []string{"matvecb_f32_f32_v8", "matvecb_f16_f32_v8", "matvecb_bf16_f32_v8",
		"matvecb_f32_f32", "matvecb_f16_f32", "matvecb_bf16_f32", "matvecb_q4_f32_v16",
		"matvecb_q4_f32_v16_f16sb", "matvecb_q4_f32_v16_bf16sb", "matvecb_q8_f32_v16", "matvecb_q8_f32_v16_f16sb", "matvecb_q8_f32_v16_bf16sb"} {
		if m.pipes[name] == nil {
			t.Errorf("%s never ran", name)
		}
	}
}

// TestMetalMatVecs: Metal's MatVecs (a batched decode step's mat-muls) gives
// every row the bits of a one-row MatMul for 1 … 19 rows (blocks of 8 and
// a remainder of 1, which runs alone), for q4 and bf16 weights and for a
// weight the batch kernel does not take (q3: each row alone), with two
// weights in one call.
func TestMetalMatVecs(t *testing.T) {
	m := testMetal(t)
	m.shape = shapeApple
	const N, K = 24, 256
	hq, _ := hostQuant16(DTypeQ4, N, K, 64, 1, DTypeBF16)
	hb, _ := hostFloat(DTypeBF16, N, K, 2)
	h3 := hostQuant(DTypeQ3, N, K, 64, 3)
	var ws []*Tensor
	for _, h := range []*Tensor{hq, hb, h3} {
		w, err := m.Upload(h)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	const maxL = 19
	xd := put(m, randn(maxL*K, 4), maxL, K)
	alone := make([]*Tensor, len(ws))
	for i, w := range ws {
		alone[i] = m.New(maxL, N)
		for l := range maxL {
			m.MatMul(alone[i].Rows(l, l+1), xd.Rows(l, l+1), w)
		}
	}
	var want [][]float32
	for i := range ws {
		want = append(want, get(t, m, alone[i]))
	}
	for _, L := range []int{1, 2, 8, 9, 17, 19} {
		for _, pair := range [][2]int{{0, 1}, {2, 0}} {
			d := []*Tensor{m.New(L, N), m.New(L, N)}
			MatVecs(m, d, xd.Rows(0, L), []*Tensor{ws[pair[0]], ws[pair[1]]})
			for j, wi := range pair {
				got := get(t, m, d[j])
				for e := range got {
					if math.Float32bits(got[e]) != math.Float32bits(want[wi][e]) {
						t.Fatalf("L=%d, weight %d: row %d col %d: %g, one-row MatMul %g", L, wi, e/N, e%N, got[e], want[wi][e])
					}
				}
			}
		}
	}
}

// BenchmarkMetalMatVecs times a batched decode step's mat-vec on Apple-shaped
// kernels (also on a cuda device, INGOT_TEST_BACKEND=cuda): MatVecs (the
// small-batch mat-vec, weights read once for L rows) against the prefill
// matmul tiles at L rows ("tiles": what MatVecs and MatMul at 2 ≤ L ≤ 8 ran
// before it) and L one-row MatMuls (the other batch-invariant form), on
// Llama-3.1-8B's shapes on a GPU (a small one on the interpreter, where it
// only proves the paths run).
// gpu-ns/op is the command buffers' GPU time; GB/s counts the weight bytes.
func BenchmarkMetalMatVecs(b *testing.B) {
	m := testMetal(b)
	m.shape = shapeApple
	shapes := [][2]int{{4096, 4096}, {14336, 4096}, {4096, 14336}} // N, K
	if name := os.Getenv("INGOT_TEST_BACKEND"); name == "" || name == "metal-emu" {
		shapes = [][2]int{{64, 256}}
	}
	for _, dt := range []DType{DTypeQ4, DTypeQ8, DTypeBF16} {
		for _, sh := range shapes {
			N, K := sh[0], sh[1]
			var hw *Tensor
			if dt.Quantized() {
				hw, _ = hostQuant16(dt, N, K, 64, 1, DTypeBF16)
			} else {
				hw, _ = hostFloat(dt, N, K, 1)
			}
			w, err := m.Upload(hw)
			if err != nil {
				b.Fatal(err)
			}
			for _, L := range []int{2, 4, 8} {
				x, y := put(m, randn(L*K, 2), L, K), m.New(L, N)
				for _, form := range []string{"vecs", "tiles", "rows"} {
					b.Run(fmt.Sprintf("w=%s/N=%d/K=%d/L=%d/%s", dt, N, K, L, form), func(b *testing.B) {
						m.ResetStats()
						for b.Loop() {
							switch form {
							case "vecs":
								m.MatVecs([]*Tensor{y}, x, []*Tensor{w})
							case "tiles":
								m.noMVB = true
								m.MatMul(y, x, w)
								m.noMVB = false
							default:
								for l := range L {
									m.MatMul(y.Rows(l, l+1), x.Rows(l, l+1), w)
								}
							}
							if err := m.Sync(b.Context()); err != nil {
								b.Fatal(err)
							}
						}
						s := m.Stats()
						ns := float64(s.GPUTime.Nanoseconds()) / float64(max(s.CommandBuffers, 1))
						b.ReportMetric(ns, "gpu-ns/op")
						b.ReportMetric(float64(weightBytes(w, N))/ns, "GB/s")
					})
				}
			}
		}
	}
}
