package kernels

import (
	"fmt"
	"os"
	"testing"
)

type matmulNVCase struct {
	dt         DType
	L, N, K, G int
}

func (c matmulNVCase) String() string {
	return fmt.Sprintf("w=%s/L=%d/N=%d/K=%d/G=%d", c.dt, c.L, c.N, c.K, c.G)
}

// matmulNVCases sit at matmul_nv's cutoffs: 64-token and 128-row tiles (L,
// N at −1, exact, +1, inside the 64-row half a thread's rows split into, and
// several tiles), 32-column steps (one, two, three; dense K = 40: a partial
// last step), each weight type and group size, and one 4096-wide case per
// weight type.
func matmulNVCases() []matmulNVCase {
	type weight struct {
		dt DType
		G  int
	}
	var cs []matmulNVCase
	for _, w := range []weight{
		{DTypeF32, 0}, {DTypeF16, 0}, {DTypeBF16, 0},
		{DTypeQ4, 32}, {DTypeQ4, 64}, {DTypeQ4, 128},
		{DTypeQ8, 32}, {DTypeQ8, 64}, {DTypeQ8, 128},
	} {
		Ks := []int{32, 64, 96, 40}
		if w.G != 0 {
			Ks = []int{w.G, 2 * w.G, 3 * w.G}
		}
		i := 0
		for _, L := range []int{2, 63, 64, 65, 130} {
			for _, N := range []int{1, 63, 64, 65, 127, 128, 129, 200} {
				// Every K at the corner tiles (L 64, 65 and N 128, 129), one
				// K in turn elsewhere.
				corner := (L == 64 || L == 65) && (N == 128 || N == 129)
				for j, K := range Ks {
					if corner || j == i%len(Ks) {
						cs = append(cs, matmulNVCase{w.dt, L, N, K, w.G})
					}
				}
				i++
			}
		}
		cs = append(cs, matmulNVCase{w.dt, 65, 65, 4096, w.G})
	}
	return cs
}

// TestMetalMatMulNV runs the NVIDIA-shaped prefill mat-mat, one launch a
// case, against the CPU reference (on the exact f32 values of the weight,
// dequantized as MLX does), with y poisoned first.
func TestMetalMatMulNV(t *testing.T) {
	m := testMetalNV(t)
	nvTC = false // on a GPU with tensor cores, q4/q8/bf16 would run matmul_<w>_f32_tc
	defer func() { nvTC = true }()
	var worstN, worstA float64
	for _, tc := range matmulNVCases() {
		t.Run(tc.String(), func(t *testing.T) {
			var hw *Tensor
			var wf []float32
			if tc.dt.Quantized() {
				hw = hostQuant(tc.dt, tc.N, tc.K, tc.G, uint64(tc.N*tc.K+tc.L))
				wf = dequant(hw)
			} else {
				hw, wf = hostFloat(tc.dt, tc.N, tc.K, uint64(tc.N*tc.K+tc.L))
			}
			x := randn(tc.L*tc.K, uint64(tc.L))
			want := make([]float32, tc.L*tc.N)
			cpuRef(func(c *CPU) {
				w, _ := c.Upload(FromF32(wf, tc.N, tc.K))
				c.MatMul(FromF32(want, tc.L, tc.N), FromF32(x, tc.L, tc.K), w)
			})
			w, err := m.Upload(hw)
			if err != nil {
				t.Fatal(err)
			}
			y := put(m, nan(tc.L*tc.N), tc.L, tc.N)
			m.ResetStats()
			m.MatMul(y, put(m, x, tc.L, tc.K), w)
			if s, want := m.Stats(), matmulNVName(w, tc.K); s.Dispatches != 1 || m.last != want {
				t.Errorf("%d dispatches, the last %s; want 1, %s", s.Dispatches, m.last, want)
			}
			tl := matmulTol
			if tc.K > 512 {
				tl.MaxAbs = 1e-3 // outputs O(√K) = 64: a few ulps of them
			}
			n, a := closeTo(t, get(t, m, y), want, tl)
			worstN, worstA = max(worstN, n), max(worstA, a)
		})
	}
	t.Logf("worst NMSE %.2g, max-abs %.2g", worstN, worstA)
	for _, dt := range []DType{DTypeF32, DTypeF16, DTypeBF16, DTypeQ4, DTypeQ8} {
		if name := "matmul_" + dt.String() + "_f32_nv"; m.pipes[name] == nil {
			t.Errorf("%s never ran", name)
		}
	}
}

// TestMetalMatMulNVOff: with nvMatMul off (INGOT_NV_MATMUL=0), and where the
// kernel does not apply (dense K not a multiple of its 16-byte pieces),
// prefill on an NVIDIA-shaped backend runs matmul_<w>_f32 and matches the CPU
// reference there.
func TestMetalMatMulNVOff(t *testing.T) {
	m := testMetalNV(t)
	for _, c := range []struct {
		dt   DType
		K    int
		off  bool
		want string
	}{
		{DTypeQ4, 128, true, "matmul_q4_f32"},
		{DTypeF32, 128, true, "matmul_f32_f32"},
		{DTypeF32, 33, false, "matmul_f32_f32"},
		{DTypeF16, 36, false, "matmul_f16_f32"},
		{DTypeBF16, 36, false, "matmul_bf16_f32"},
	} {
		t.Run(fmt.Sprintf("w=%s/K=%d/off=%v", c.dt, c.K, c.off), func(t *testing.T) {
			checkSwitchedMatMul(t, m, c.dt, c.K, 64, &nvMatMul, !c.off, c.want)
		})
	}
}

// checkSwitchedMatMul runs a 3×17 prefill MatMul of a random dt weight (K
// columns, groups of group) with the switch *sw set to on (restored to true
// after) and fails t unless it was one dispatch of kernel want matching the
// CPU reference.
func checkSwitchedMatMul(t *testing.T, m *Metal, dt DType, K, group int, sw *bool, on bool, want string) {
	t.Helper()
	const L, N = 3, 17
	var hw *Tensor
	var wf []float32
	if dt.Quantized() {
		hw = hostQuant(dt, N, K, group, 5)
		wf = dequant(hw)
	} else {
		hw, wf = hostFloat(dt, N, K, 5)
	}
	w, err := m.Upload(hw)
	if err != nil {
		t.Fatal(err)
	}
	x := randn(L*K, 6)
	ref := make([]float32, L*N)
	cpuRef(func(cb *CPU) {
		wc, _ := cb.Upload(FromF32(wf, N, K))
		cb.MatMul(FromF32(ref, L, N), FromF32(x, L, K), wc)
	})
	y := m.New(L, N)
	*sw = on
	defer func() { *sw = true }()
	m.ResetStats()
	m.MatMul(y, put(m, x, L, K), w)
	if s := m.Stats(); s.Dispatches != 1 || m.last != want {
		t.Errorf("%d dispatches, the last %s; want 1, %s", s.Dispatches, m.last, want)
	}
	closeTo(t, get(t, m, y), ref, matmulTol)
}

// BenchmarkMetalMatMulNV times prefill, matmul_<w>_f32_nv against the Apple
// tiles (nv=false: INGOT_NV_MATMUL=0) in one run; see benchMatMulAB.
func BenchmarkMetalMatMulNV(b *testing.B) {
	m := testMetalNV(b)
	nvTC = false // BenchmarkMetalMatMulTC times matmul_<w>_f32_tc
	defer func() { nvTC = true }()
	benchMatMulAB(b, m, []DType{DTypeQ4, DTypeQ8, DTypeF16}, "nv", &nvMatMul)
}

// benchMatMulAB times m's prefill MatMul on Llama-3.1-8B's shapes at L = 512
// on a GPU (INGOT_TEST_BACKEND=cuda), or on a small shape on the interpreter,
// where it only proves the path runs, once with *sw on and once off (label=
// true/false); *sw is left on. gpu-ns/op comes from the command buffers' GPU
// time; GFLOP/s counts 2·L·N·K.
func benchMatMulAB(b *testing.B, m *Metal, dts []DType, label string, sw *bool) {
	shapes := [][3]int{{512, 4096, 4096}, {512, 1024, 4096}, {512, 14336, 4096}, {512, 4096, 14336}} // L, N, K
	if name := os.Getenv("INGOT_TEST_BACKEND"); name == "" || name == "metal-emu" {
		shapes = [][3]int{{64, 128, 256}}
	}
	for _, dt := range dts {
		for _, sh := range shapes {
			L, N, K := sh[0], sh[1], sh[2]
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
			x, y := put(m, randn(L*K, 2), L, K), m.New(L, N)
			for _, on := range []bool{true, false} {
				b.Run(fmt.Sprintf("w=%s/L=%d/N=%d/K=%d/%s=%v", dt, L, N, K, label, on), func(b *testing.B) {
					*sw = on
					defer func() { *sw = true }()
					m.ResetStats()
					for b.Loop() {
						m.MatMul(y, x, w)
						if err := m.Sync(b.Context()); err != nil {
							b.Fatal(err)
						}
					}
					s := m.Stats()
					ns := float64(s.GPUTime.Nanoseconds()) / float64(max(s.CommandBuffers, 1))
					b.ReportMetric(ns, "gpu-ns/op")
					b.ReportMetric(2*float64(L)*float64(N)*float64(K)/ns, "GFLOP/s")
				})
			}
		}
	}
}
