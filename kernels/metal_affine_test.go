package kernels

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"unsafe"

	"github.com/ingot-llm/ingot/kernels/cpu"
)

// hostQuant16 returns a random MLX affine (N, K) host weight whose scales and
// biases are sdt (f16 or bf16), as MLX stores them, and the same weight with
// them widened to f32 (the values are equal: every 16-bit value is a float32).
func hostQuant16(dt DType, N, K, G int, seed uint64, sdt DType) (w16, w32 *Tensor) {
	w32 = hostQuant(dt, N, K, G, seed)
	w16 = &Tensor{DType: dt, Shape: w32.Shape, Data: w32.Data, GroupSize: G}
	round := func(t *Tensor) *Tensor {
		f := t.F32()
		h := make([]uint16, len(f))
		for i, v := range f {
			if sdt == DTypeF16 {
				h[i] = cpu.F32ToF16(v)
				f[i] = cpu.F16ToF32(h[i])
			} else {
				h[i] = cpu.F32ToBF16(v)
				f[i] = cpu.BF16ToF32(h[i])
			}
		}
		return &Tensor{DType: sdt, Shape: t.Shape, Data: unsafe.Slice((*byte)(unsafe.Pointer(&h[0])), 2*len(h))}
	}
	w16.Scales, w16.Biases = round(w32.Scales), round(w32.Biases)
	return w16, w32
}

// TestMetalAffineScales runs every affine kernel (matvec_q, matvec_q_v16,
// matmul_q, embed_q) with f16 and bf16 scales and biases bound as stored, at
// the kernels' edges: the outputs must equal, bit for bit, those of the same
// weight with f32 scales and biases (the 16-bit kernels widen exactly, then
// compute as the f32 ones), and the CPU reference within matmulTol; row views
// (scales at offsets that are 2 but not 4 mod 4) too. It also checks the
// kernel names and that Stats.WeightBytes counts 2-byte scales and biases.
func TestMetalAffineScales(t *testing.T) {
	m := testMetal(t)
	m.shape = shapeApple // the Apple-shaped kernels, also on a cuda device (INGOT_TEST_BACKEND)
	defer func() { m.noV16 = false }()
	type kase struct {
		L, N, K, G int
	}
	// L = 1: matvec (4 rows a simdgroup, 8 a threadgroup; 32 lanes × 8 or
	// 16 codes); L > 1: matmul's 32×32 tiles. K/G = 3 groups: a row's
	// scales at 6 bytes, so a row view's are 2 mod 4.
	cases := []kase{{1, 1, 32, 32}, {1, 9, 96, 32}, {1, 33, 512, 128}, {1, 65, 640, 64}, {2, 7, 96, 32}, {33, 40, 192, 64}}
	for _, dt := range []DType{DTypeQ2, DTypeQ3, DTypeQ4, DTypeQ5, DTypeQ6, DTypeQ8} {
		for _, sdt := range []DType{DTypeF16, DTypeBF16} {
			for _, noV16 := range []bool{false, true} {
				if noV16 && dt != DTypeQ4 && dt != DTypeQ8 {
					continue
				}
				name := fmt.Sprintf("w=%s/sb=%s", dt, sdt)
				if noV16 {
					name += "/matvec_q"
				}
				m.noV16 = noV16
				t.Run(name, func(t *testing.T) {
					for i, c := range cases {
						t.Run(fmt.Sprintf("L=%d/N=%d/K=%d/G=%d", c.L, c.N, c.K, c.G), func(t *testing.T) {
							h16, h32 := hostQuant16(dt, c.N, c.K, c.G, uint64(100*i+int(dt)), sdt)
							w16, err := m.Upload(h16)
							if err != nil {
								t.Fatal(err)
							}
							w32, err := m.Upload(h32)
							if err != nil {
								t.Fatal(err)
							}
							if w16.Scales.DType != sdt || w16.Biases.DType != sdt {
								t.Fatalf("device scales %s, biases %s; want %s (as stored)", w16.Scales.DType, w16.Biases.DType, sdt)
							}
							x := put(m, randn(c.L*c.K, uint64(i)), c.L, c.K)
							mul := func(w *Tensor, rows int) ([]float32, int64) {
								y := m.New(c.L, rows)
								s0 := m.Stats().WeightBytes
								m.MatMul(y, x, w)
								return get(t, m, y), m.Stats().WeightBytes - s0
							}
							got, b16 := mul(w16, c.N)
							ref, b32 := mul(w32, c.N)
							if !bitEqual(got, ref) {
								t.Errorf("MatMul with %s scales differs from f32 scales (max-abs %.3g)", sdt, maxAbsDiff(got, ref))
							}
							g := c.N * c.K / c.G
							if want := int64(c.N*dt.RowBytes(c.K) + 2*2*g); b16 != want || b32 != want+2*2*int64(g) {
								t.Errorf("WeightBytes %d (16-bit), %d (f32); want %d, %d", b16, b32, want, want+2*2*int64(g))
							}
							want := make([]float32, c.L*c.N)
							cpuRef(func(cp *CPU) {
								wc, err := cp.Upload(FromF32(dequant(h16), c.N, c.K))
								if err != nil {
									t.Fatal(err)
								}
								cp.MatMul(FromF32(want, c.L, c.N), FromF32(randn(c.L*c.K, uint64(i)), c.L, c.K), wc)
							})
							closeTo(t, got, want, matmulTol)
							if c.N > 2 { // a row view: rows [1, N), scales at 2·groups bytes in
								v16, _ := mul(w16.Rows(1, c.N), c.N-1)
								v32, _ := mul(w32.Rows(1, c.N), c.N-1)
								if !bitEqual(v16, v32) {
									t.Errorf("row view: %s scales differ from f32 (max-abs %.3g)", sdt, maxAbsDiff(v16, v32))
								}
								vw := make([]float32, 0, len(v16))
								for l := range c.L {
									vw = append(vw, want[l*c.N+1:(l+1)*c.N]...)
								}
								closeTo(t, v16, vw, matmulTol)
							}

							// Embedding gather (a tied head's table): bit-exact, and as the CPU's.
							tokens := []int32{0, int32(c.N - 1), int32(c.N / 2)}
							e16, e32 := m.New(len(tokens), c.K), m.New(len(tokens), c.K)
							m.Embed(e16, w16, tokens, 1.5)
							m.Embed(e32, w32, tokens, 1.5)
							eg, er := get(t, m, e16), get(t, m, e32)
							ew := make([]float32, len(tokens)*c.K)
							cpuRef(func(cp *CPU) {
								wc, err := cp.Upload(h16)
								if err != nil {
									t.Fatal(err)
								}
								cp.Embed(FromF32(ew, len(tokens), c.K), wc, tokens, 1.5)
							})
							if !bitEqual(eg, er) || !bitEqual(eg, ew) {
								t.Errorf("Embed with %s scales: max-abs %.3g from f32 scales, %.3g from the CPU", sdt, maxAbsDiff(eg, er), maxAbsDiff(eg, ew))
							}
						})
					}
				})
			}
		}
	}
	for _, sb := range []string{"f16sb", "bf16sb"} {
		for _, name := range []string{"matvec_q4_f32_v16_", "matvec_q8_f32_v16_", "matvec_q4_f32_", "matvec_q3_f32_", "matmul_q4_f32_", "matmul_q6_f32_", "embed_q5_f32_"} {
			if m.pipes[name+sb] == nil {
				t.Errorf("%s never ran", name+sb)
			}
		}
	}
}

// TestMetalAffineUploadNV checks that an NVIDIA-shaped backend widens 16-bit
// scales and biases to f32 at upload (its prefill kernel reads f32) and makes
// its (scale, bias) pairs from them: the mat-vec's and mat-mat's outputs equal
// those of the f32 weight bit for bit.
func TestMetalAffineUploadNV(t *testing.T) {
	m := testMetalNV(t)
	for _, dt := range []DType{DTypeQ4, DTypeQ8, DTypeQ5} {
		t.Run("w="+dt.String(), func(t *testing.T) {
			h16, h32 := hostQuant16(dt, 40, 256, 64, 9, DTypeBF16)
			w16, err := m.Upload(h16)
			if err != nil {
				t.Fatal(err)
			}
			w32, err := m.Upload(h32)
			if err != nil {
				t.Fatal(err)
			}
			if w16.Scales.DType != DTypeF32 {
				t.Errorf("device scales %s, want f32 on NVIDIA-shaped kernels", w16.Scales.DType)
			}
			for _, L := range []int{1, 9} {
				x := put(m, randn(L*256, 3), L, 256)
				y16, y32 := m.New(L, 40), m.New(L, 40)
				m.MatMul(y16, x, w16)
				m.MatMul(y32, x, w32)
				if a, b := get(t, m, y16), get(t, m, y32); !bitEqual(a, b) {
					t.Errorf("L=%d: bf16 scales differ from f32 (max-abs %.3g)", L, maxAbsDiff(a, b))
				}
			}
		})
	}
}

func bitEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

func maxAbsDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}
