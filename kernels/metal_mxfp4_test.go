package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ingot-llm/ingot/kernels/cpu"
)

// hostMXFP4 returns a host MXFP4 weight (N, K) of random codes, scale bytes
// around 127 and, in every fifth block, one of the E8M0 edges (e = 0: the
// subnormal 2⁻¹²⁷; e = 1; e = 200).
func hostMXFP4(N, K int, seed uint64) *Tensor {
	r := rand.New(rand.NewPCG(seed, 3))
	b := make([]byte, N*DTypeMXFP4.RowBytes(K))
	for i := range b {
		b[i] = byte(r.Uint32())
		if i%cpu.MXFP4BlockBytes == 0 {
			b[i] = byte(121 + r.IntN(8))
			if i/cpu.MXFP4BlockBytes%5 == 4 {
				b[i] = []byte{0, 1, 200}[r.IntN(3)]
			}
		}
	}
	return &Tensor{DType: DTypeMXFP4, Shape: []int{N, K}, Data: b}
}

// mxTol is matmulTol with max-abs relative to the largest output past 100:
// scale bytes of 200 take outputs to 2⁷³.
func mxTol(want []float32) tol {
	var big float64
	for _, v := range want {
		big = max(big, math.Abs(float64(v)))
	}
	return tol{NMSE: matmulTol.NMSE, MaxAbs: matmulTol.MaxAbs * max(1, big/100)}
}

// TestMetalMatMulMXFP4 runs matvec_mxfp4_f32 and matmul_mxfp4_f32 against the
// CPU backend's MXFP4 kernels at their cutoffs: 4 rows a simdgroup and 8 a
// threadgroup (matvec), 32×32 tiles (matmul), half blocks of 16 columns a
// lane with 32 lanes (K/16 = 30, 32, 34 half blocks), one block K = 32.
func TestMetalMatMulMXFP4(t *testing.T) {
	m := testMetal(t)
	var cases []matmulCase
	for _, L := range []int{1, 2, 33} {
		for _, N := range []int{1, 7, 8, 9, 33} {
			for _, K := range []int{32, 96, 480, 512, 544} {
				if L > 1 && (K > 96 || N == 8) || L == 33 && N < 33 {
					continue // the mat-mat's K loop is one block a step: a few shapes
				}
				cases = append(cases, matmulCase{L: L, N: N, K: K})
			}
		}
	}
	cases = append(cases, matmulCase{L: 3, N: 65, K: 64})
	for _, tc := range cases {
		t.Run(fmt.Sprintf("L=%d/N=%d/K=%d", tc.L, tc.N, tc.K), func(t *testing.T) {
			hw := hostMXFP4(tc.N, tc.K, uint64(tc.N*tc.K+tc.L))
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
			if got, want := weightBytes(w, tc.N), int64(tc.N*tc.K/32*17); got != want {
				t.Errorf("weightBytes = %d, want %d (4.25 bits a weight)", got, want)
			}
			y := m.New(tc.L, tc.N)
			m.MatMul(y, put(m, x, tc.L, tc.K), w)
			closeTo(t, get(t, m, y), want, mxTol(want))
		})
	}
	for _, name := range []string{"matvec_mxfp4_f32", "matmul_mxfp4_f32"} {
		if m.pipes[name] == nil {
			t.Errorf("%s never ran", name)
		}
	}
}

// TestMetalMatMulMXFP4NV: on NVIDIA-shaped kernels MXFP4 weights take the
// same Apple-shaped kernels (no _nv variant claims them), MatMul and MatMuls
// (gate and up, one launch each) alike.
func TestMetalMatMulMXFP4NV(t *testing.T) {
	m := testMetalNV(t)
	for _, tc := range []matmulCase{{L: 1, N: 9, K: 96}, {L: 33, N: 33, K: 64}} {
		t.Run(fmt.Sprintf("L=%d/N=%d/K=%d", tc.L, tc.N, tc.K), func(t *testing.T) {
			hw := [2]*Tensor{hostMXFP4(tc.N, tc.K, 1), hostMXFP4(tc.N, tc.K, 2)}
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
				closeTo(t, get(t, m, y[i]), want[i], mxTol(want[i]))
			}
		})
	}
}
