package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// kqTypes are the GGUF block dtypes with their own Metal kernels.
var kqTypes = []DType{DTypeQ8_0, DTypeQ4_0, DTypeQ4K, DTypeQ5K, DTypeQ6K}

// hostKQuant returns a host weight (N, K) of type dt: random bytes whose f16
// scale fields are small finite values (|d| ≤ 1/64), so products stay in
// range while every code, 6-bit scale and min pattern occurs.
func hostKQuant(dt DType, N, K int, seed uint64) *Tensor {
	r := rand.New(rand.NewPCG(seed, 5))
	b := make([]byte, N*dt.RowBytes(K))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	_, bb := dt.BlockSize()
	offs := map[DType][]int{DTypeQ8_0: {0}, DTypeQ4_0: {0}, DTypeQ4K: {0, 2}, DTypeQ5K: {0, 2}, DTypeQ6K: {208}}[dt]
	for blk := range len(b) / bb {
		for _, o := range offs {
			h := &b[blk*bb+o+1] // sign and a 2^-14…2^-7 exponent
			*h = *h&0x83 | 0x04 | (b[blk*bb+o]&3)<<3
		}
	}
	return &Tensor{DType: dt, Shape: []int{N, K}, Data: b}
}

// kqTol is matmulTol with max-abs at least 2e-6 of the largest output: q6_k's
// random int8 scales take outputs to a few hundred.
func kqTol(want []float32) tol {
	var big float64
	for _, v := range want {
		big = max(big, math.Abs(float64(v)))
	}
	return tol{NMSE: matmulTol.NMSE, MaxAbs: max(matmulTol.MaxAbs, 2e-6*big)}
}

// TestMetalMatMulKQuant runs matvec_<t>_f32 and matmul_<t>_f32 of every GGUF
// block type against the CPU backend's kernels (cpu.KQuant) at their
// cutoffs: 4 rows a simdgroup and 8 a threadgroup (N 1, 7, 9), 32×32 tiles
// (L 2 and 33, N 33), 16 columns a lane over 32 lanes (K = 512: one step;
// 768: lanes past the end in the second), one and several blocks.
func TestMetalMatMulKQuant(t *testing.T) {
	m := testMetal(t)
	for _, dt := range kqTypes {
		vals, bb := dt.BlockSize()
		cases := []matmulCase{{L: 1, N: 1, K: vals}, {L: 1, N: 9, K: 512}, {L: 1, N: 7, K: 768}, {L: 2, N: 9, K: 256}, {L: 33, N: 33, K: vals}}
		if vals == 32 {
			cases = append(cases, matmulCase{L: 1, N: 8, K: 96})
		}
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/L=%d/N=%d/K=%d", dt, tc.L, tc.N, tc.K), func(t *testing.T) {
				hw := hostKQuant(dt, tc.N, tc.K, uint64(tc.N*tc.K+tc.L))
				x := randn(tc.L*tc.K, 7)
				want := make([]float32, tc.L*tc.N)
				cpuRef(func(c *CPU) {
					w, err := c.Upload(hw)
					if err != nil {
						t.Fatal(err)
					}
					c.MatMul(FromF32(want, tc.L, tc.N), FromF32(x, tc.L, tc.K), w)
				})
				w, err := m.Upload(hw)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := weightBytes(w, tc.N), int64(tc.N*tc.K/vals*bb); got != want {
					t.Errorf("weightBytes = %d, want %d (the blocks as stored)", got, want)
				}
				y := m.New(tc.L, tc.N)
				m.MatMul(y, put(m, x, tc.L, tc.K), w)
				closeTo(t, get(t, m, y), want, kqTol(want))
			})
		}
	}
	for _, dt := range kqTypes {
		for _, name := range []string{matvecNames[dt], matmulNames[dt]} {
			if m.pipes[name] == nil {
				t.Errorf("%s never ran", name)
			}
		}
	}
}

// TestMetalEmbedKQuant: embed_<t>_f32 gathers the same rows as the CPU
// backend's Row, first and last token and a partial last threadgroup (D =
// 288 for the 32-value types), times a scale.
func TestMetalEmbedKQuant(t *testing.T) {
	m := testMetal(t)
	for _, dt := range kqTypes {
		vals, _ := dt.BlockSize()
		V, D := 5, 512
		if vals == 32 {
			D = 288
		}
		t.Run(dt.String(), func(t *testing.T) {
			hw := hostKQuant(dt, V, D, 3)
			tokens := []int32{0, 4, 2, 4}
			want := make([]float32, len(tokens)*D)
			cpuRef(func(c *CPU) {
				w, err := c.Upload(hw)
				if err != nil {
					t.Fatal(err)
				}
				c.Embed(FromF32(want, len(tokens), D), w, tokens, 1.5)
			})
			w, err := m.Upload(hw)
			if err != nil {
				t.Fatal(err)
			}
			y := m.New(len(tokens), D)
			m.Embed(y, w, tokens, 1.5)
			closeTo(t, get(t, m, y), want, tol{MaxAbs: 1e-6})
		})
	}
	for _, dt := range kqTypes {
		if m.pipes[embedNames[dt]] == nil {
			t.Errorf("%s never ran", embedNames[dt])
		}
	}
}

// TestMetalMatMulKQuantNV: on NVIDIA-shaped kernels the GGUF block types take
// the same Apple-shaped kernels (no _nv variant claims them), through MatMul
// and MatMuls alike, a Q4_K_M-style mix of q4_k and q6_k in one MatMuls.
func TestMetalMatMulKQuantNV(t *testing.T) {
	m := testMetalNV(t)
	for _, tc := range []matmulCase{{L: 1, N: 9, K: 256}, {L: 33, N: 33, K: 256}} {
		t.Run(fmt.Sprintf("L=%d/N=%d/K=%d", tc.L, tc.N, tc.K), func(t *testing.T) {
			hw := [2]*Tensor{hostKQuant(DTypeQ4K, tc.N, tc.K, 1), hostKQuant(DTypeQ6K, tc.N, tc.K, 2)}
			x := randn(tc.L*tc.K, 7)
			var want [2][]float32
			cpuRef(func(c *CPU) {
				for i := range hw {
					w, err := c.Upload(hw[i])
					if err != nil {
						t.Fatal(err)
					}
					want[i] = make([]float32, tc.L*tc.N)
					c.MatMul(FromF32(want[i], tc.L, tc.N), FromF32(x, tc.L, tc.K), w)
				}
			})
			var w [2]*Tensor
			for i := range hw {
				var err error
				if w[i], err = m.Upload(hw[i]); err != nil {
					t.Fatal(err)
				}
			}
			y := []*Tensor{m.New(tc.L, tc.N), m.New(tc.L, tc.N)}
			m.MatMuls(y, put(m, x, tc.L, tc.K), w[:])
			for i := range y {
				closeTo(t, get(t, m, y[i]), want[i], kqTol(want[i]))
			}
		})
	}
	for _, name := range []string{"matvec_q4_k_f32", "matvec_q6_k_f32", "matmul_q4_k_f32", "matmul_q6_k_f32"} {
		if m.pipes[name] == nil {
			t.Errorf("%s never ran", name)
		}
	}
}
