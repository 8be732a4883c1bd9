package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl"
	"github.com/ingot-llm/ingot/internal/msl/msltest"
	"github.com/ingot-llm/ingot/kernels/cpu"
	"github.com/ingot-llm/ingot/metal"
)

// mmaTestSource holds test kernels of shaders/mma.h: mma_frag runs one
// mma_m16n8k16_bf16 a simdgroup on fragments made by the host, mma_frag8 one
// mma_m16n8k32_s8u8; mma_tile
// stages a row-major A and a "col" B in threadgroup memory (stride 12 words),
// loads the fragments with mma_load_a and mma_load_b, and writes D row-major
// from the C/D layout; mma_split writes mma_split3's pieces of each x.
const mmaTestSource = `#include <metal_stdlib>
#include "mma.h"
using namespace metal;

kernel void mma_frag(device const uint4 * a [[buffer(0)]], device const uint2 * b [[buffer(1)]],
                     device const float4 * c [[buffer(2)]], device float4 * d [[buffer(3)]],
                     uint tg [[threadgroup_position_in_grid]], ushort lane [[thread_index_in_simdgroup]]) {
    const uint i = tg * 32 + lane;
    d[i] = mma_m16n8k16_bf16(c[i], a[i], b[i], lane);
}

kernel void mma_tile(device const uint * a [[buffer(0)]], device const uint * b [[buffer(1)]],
                     device float * d [[buffer(2)]], threadgroup uint * s [[threadgroup(0)]],
                     ushort lane [[thread_index_in_simdgroup]]) {
    for (uint i = lane; i < 16 * 8; i += 32) {
        s[i / 8 * 12 + i % 8] = a[i];
    }
    for (uint i = lane; i < 8 * 8; i += 32) {
        s[16 * 12 + i / 8 * 12 + i % 8] = b[i];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const float4 r = mma_m16n8k16_bf16(float4(0.0f), mma_load_a(s, 12, lane), mma_load_b(s + 16 * 12, 12, lane), lane);
    const uint g = lane / 4, t = lane % 4;
    d[g * 8 + 2 * t] = r.x;
    d[g * 8 + 2 * t + 1] = r.y;
    d[(g + 8) * 8 + 2 * t] = r.z;
    d[(g + 8) * 8 + 2 * t + 1] = r.w;
}

kernel void mma_frag8(device const uint4 * a [[buffer(0)]], device const uint2 * b [[buffer(1)]],
                      device const int4 * c [[buffer(2)]], device int4 * d [[buffer(3)]],
                      uint tg [[threadgroup_position_in_grid]], ushort lane [[thread_index_in_simdgroup]]) {
    const uint i = tg * 32 + lane;
    d[i] = mma_m16n8k32_s8u8(c[i], a[i], b[i], lane);
}

kernel void mma_split(device const float * x [[buffer(0)]], device uint4 * p [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
    uint hi, mid, lo;
    mma_split3(x[i], hi, mid, lo);
    p[i] = uint4(hi, mid, lo, 0);
}
`

// mmaDevice returns the interpreter with the shaders and mmaTestSource's
// kernels. The tests of mma.h alone run on the interpreter only: on a GPU
// backend (INGOT_TEST_BACKEND) the kernels that use it run in
// TestMetalMatMulTC.
func mmaDevice(t *testing.T) *msl.Device {
	if b := os.Getenv("INGOT_TEST_BACKEND"); b != "" && b != "metal-emu" {
		t.Skipf("mma.h's test kernels run on the interpreter (INGOT_TEST_BACKEND=%s)", b)
	}
	return msltest.Open(t, append(ShaderFiles(), msl.File{Name: "mma_test.metal", Source: mmaTestSource})...)
}

// mmaRun dispatches kernel name on dev with the buffers (each bound at its
// index) and groups threadgroups of threads threads, tg bytes of threadgroup
// memory at [[threadgroup(0)]] if tg > 0, and returns the buffers' bytes after.
func mmaRun(t *testing.T, dev *msl.Device, name string, groups, threads, tg int, bufs ...[]byte) [][]byte {
	t.Helper()
	p, err := dev.Pipeline(name)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := dev.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	e := cb.Encoder()
	e.SetPipeline(p)
	var mb []metal.Buffer
	for i, b := range bufs {
		buf, err := dev.NewBuffer(len(b))
		if err != nil {
			t.Fatal(err)
		}
		defer buf.Release()
		copy(buf.Contents(), b)
		e.SetBuffer(i, buf, 0)
		mb = append(mb, buf)
	}
	if tg > 0 {
		e.SetThreadgroupMemory(0, tg)
	}
	e.Dispatch(metal.Size{W: groups, H: 1, D: 1}, metal.Size{W: threads, H: 1, D: 1})
	e.End()
	cb.Commit()
	if err := cb.Wait(); err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, len(mb))
	for i, b := range mb {
		out[i] = append([]byte(nil), b.Contents()...)
	}
	return out
}

// mmaProblem is one D = A·B + C of mma.m16n8k16: A (16, 16) and B (16, 8) bf16
// bits, C (16, 8).
type mmaProblem struct {
	A [16][16]uint16
	B [16][8]uint16
	C [16][8]float32
}

// randMMA returns a problem of random bf16 values of mixed magnitudes
// (integers: small integers, so that every sum is exact).
func randMMA(r *rand.Rand, integers bool) mmaProblem {
	var p mmaProblem
	val := func() float32 {
		if integers {
			return float32(r.IntN(33) - 16)
		}
		return float32(r.NormFloat64() * math.Exp2(float64(r.IntN(9)-4)))
	}
	for i := range 16 {
		for k := range 16 {
			p.A[i][k] = cpu.F32ToBF16(val())
		}
		for n := range 8 {
			p.B[i][n] = cpu.F32ToBF16(val())
			p.C[i][n] = val()
		}
	}
	return p
}

// want returns D = A·B + C in float64 and the bound on an f32 evaluation's
// error per element: the 16 products are exact in f32, and each of the 16
// additions to the running sum rounds off at most 2⁻²⁴ of a partial sum no
// larger than |C| + Σ|A·B|, so |error| ≤ 16·2⁻²⁴·(|C| + Σ|A·B|).
func (p *mmaProblem) want() (d, bound [16][8]float64) {
	for i := range 16 {
		for n := range 8 {
			s, a := float64(p.C[i][n]), math.Abs(float64(p.C[i][n]))
			for k := range 16 {
				prod := float64(cpu.BF16ToF32(p.A[i][k])) * float64(cpu.BF16ToF32(p.B[k][n]))
				s += prod
				a += math.Abs(prod)
			}
			d[i][n], bound[i][n] = s, 16*0x1p-24*a
		}
	}
	return d, bound
}

func pack(lo, hi uint16) uint32 { return uint32(lo) | uint32(hi)<<16 }

// TestMMAFragments runs mma_m16n8k16_bf16 on fragments laid out as the PTX ISA
// documents them (groupID g = lane/4, threadID_in_group t = lane%4), built
// here from A, B and C, for random problems (four simdgroups a dispatch, each
// its own problem) and problems of small integers (exact), against the
// float64 product.
func TestMMAFragments(t *testing.T) {
	dev := mmaDevice(t)
	r := rand.New(rand.NewPCG(1, 2))
	for round, integers := range []bool{false, false, true} {
		const groups = 4
		var ps [groups]mmaProblem
		a := make([]byte, groups*32*16)
		b := make([]byte, groups*32*8)
		c := make([]byte, groups*32*16)
		for w := range groups {
			ps[w] = randMMA(r, integers)
			p := &ps[w]
			for lane := range 32 {
				g, tq := lane/4, lane%4
				i := w*32 + lane
				for j, v := range [4]uint32{
					pack(p.A[g][2*tq], p.A[g][2*tq+1]), pack(p.A[g+8][2*tq], p.A[g+8][2*tq+1]),
					pack(p.A[g][2*tq+8], p.A[g][2*tq+9]), pack(p.A[g+8][2*tq+8], p.A[g+8][2*tq+9]),
				} {
					binary.LittleEndian.PutUint32(a[16*i+4*j:], v)
				}
				binary.LittleEndian.PutUint32(b[8*i:], pack(p.B[2*tq][g], p.B[2*tq+1][g]))
				binary.LittleEndian.PutUint32(b[8*i+4:], pack(p.B[2*tq+8][g], p.B[2*tq+9][g]))
				for j, v := range [4]float32{p.C[g][2*tq], p.C[g][2*tq+1], p.C[g+8][2*tq], p.C[g+8][2*tq+1]} {
					binary.LittleEndian.PutUint32(c[16*i+4*j:], math.Float32bits(v))
				}
			}
		}
		out := mmaRun(t, dev, "mma_frag", groups, 32, 0, a, b, c, make([]byte, groups*32*16))[3]
		for w := range groups {
			want, bound := ps[w].want()
			for lane := range 32 {
				g, tq := lane/4, lane%4
				for j, rc := range [4][2]int{{g, 2 * tq}, {g, 2*tq + 1}, {g + 8, 2 * tq}, {g + 8, 2*tq + 1}} {
					got := math.Float32frombits(binary.LittleEndian.Uint32(out[16*(w*32+lane)+4*j:]))
					wd, lim := want[rc[0]][rc[1]], bound[rc[0]][rc[1]]
					if integers {
						lim = 0
					}
					if d := math.Abs(float64(got) - wd); !(d <= lim) {
						t.Errorf("round %d simdgroup %d lane %d: D[%d][%d] = %g, want %g (|diff| %.3g > %.3g)", round, w, lane, rc[0], rc[1], got, wd, d, lim)
					}
				}
			}
		}
	}
}

// TestMMALoad stages A row-major and B by columns in threadgroup memory, loads
// the fragments with mma_load_a and mma_load_b, and writes D from the C/D
// layout: the whole path from matrices to matrix, against the float64
// product.
func TestMMALoad(t *testing.T) {
	dev := mmaDevice(t)
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 3 {
		p := randMMA(r, false)
		p.C = [16][8]float32{}
		a, b := make([]byte, 16*16*2), make([]byte, 8*16*2)
		for i := range 16 {
			for k := range 16 {
				binary.LittleEndian.PutUint16(a[2*(16*i+k):], p.A[i][k])
			}
		}
		for n := range 8 {
			for k := range 16 {
				binary.LittleEndian.PutUint16(b[2*(16*n+k):], p.B[k][n])
			}
		}
		out := mmaRun(t, dev, "mma_tile", 1, 32, 4*24*12, a, b, make([]byte, 16*8*4))[2]
		want, bound := p.want()
		for i := range 16 {
			for n := range 8 {
				got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*(8*i+n):]))
				if d := math.Abs(float64(got) - want[i][n]); !(d <= bound[i][n]) {
					t.Errorf("round %d: D[%d][%d] = %g, want %g (|diff| %.3g > %.3g)", round, i, n, got, want[i][n], d, bound[i][n])
				}
			}
		}
	}
}

// TestMMASplit checks mma_split3: hi is x rounded to the nearest bf16 (ties
// to even), and hi + mid + lo is x to within 2⁻²⁷·|x| (each piece keeps 8 of
// the bits left; see mma.h), over normal values of every magnitude, ties
// and integers.
func TestMMASplit(t *testing.T) {
	dev := mmaDevice(t)
	r := rand.New(rand.NewPCG(5, 6))
	var xs []float32
	for range 1000 {
		xs = append(xs, float32(r.NormFloat64()*math.Exp2(float64(r.IntN(60)-30))))
	}
	xs = append(xs, 0, 1, -1, 3, 255, 1+0x1p-8, 1+3*0x1p-8, 1+0x1p-8+0x1p-20, math.MaxFloat32, 0x1p-126, -0x1.fffffep-3)
	x := make([]byte, 4*len(xs))
	for i, v := range xs {
		binary.LittleEndian.PutUint32(x[4*i:], math.Float32bits(v))
	}
	out := mmaRun(t, dev, "mma_split", 1, len(xs), 0, x, make([]byte, 16*len(xs)))[1]
	for i, v := range xs {
		var pc [3]uint16
		sum := 0.0
		for j := range pc {
			w := binary.LittleEndian.Uint32(out[16*i+4*j:])
			if w > 0xffff {
				t.Fatalf("x = %g: piece %d is %#x, not 16 bits", v, j, w)
			}
			pc[j] = uint16(w)
			sum += float64(cpu.BF16ToF32(pc[j]))
		}
		if pc[0] != cpu.F32ToBF16(v) {
			t.Errorf("x = %g: hi %#04x, want %#04x", v, pc[0], cpu.F32ToBF16(v))
		}
		if d := math.Abs(sum - float64(v)); d > 0x1p-27*math.Abs(float64(v)) {
			t.Errorf("x = %g: hi + mid + lo = %g (|diff| %.3g)", v, sum, d)
		}
	}
}

// ccDevice is a device reporting compute capability (major, minor): on the
// interpreter, which reports none, it makes package kernels pick the
// kernels of that GPU.
type ccDevice struct {
	metal.Device
	major, minor int
}

func (d ccDevice) ComputeCapability() (major, minor int) { return d.major, d.minor }

// testMetalTC returns an NVIDIA-shaped backend on a device of compute
// capability major.0: the interpreter wrapped in a ccDevice, or the GPU of
// INGOT_TEST_BACKEND as it is (skipping where its capability is not what the
// test needs: an interpreter-only case).
func testMetalTC(t *testing.T, major int) *Metal {
	t.Helper()
	if b := os.Getenv("INGOT_TEST_BACKEND"); b != "" && b != "metal-emu" {
		m := testMetal(t)
		if tensorCores(m.dev) != (major >= 8) {
			t.Skipf("%s: tensor cores %v, the test wants compute capability %d.0", m.Name(), tensorCores(m.dev), major)
		}
		return m
	}
	m, err := NewMetal(ccDevice{msltest.Open(t, ShaderFiles()...), major, 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	m.shape = shapeNVIDIA
	return m
}

type matmulTCCase struct {
	dt         DType
	L, N, K, G int
}

func (c matmulTCCase) String() string {
	return fmt.Sprintf("w=%s/L=%d/N=%d/K=%d/G=%d", c.dt, c.L, c.N, c.K, c.G)
}

// matmulTCCases sit at matmul_tc's cutoffs: 64-token tiles of two 32-token
// simdgroup halves of 16-token m-tiles (L = 2, 15, 16, 17, 63, 64, 65, 130),
// 128-row tiles of 32-row simdgroup quarters of 8-row n-tiles (N = 8, 127,
// 128, 129, 200), 32-column steps folded per group (K = one group, two, three;
// bf16: 32, 40 and 72, partial last steps, and 96), every weight type and
// group size, each (L, N) with one K in turn and the corner (65, 129) with
// every K.
func matmulTCCases() []matmulTCCase {
	type weight struct {
		dt DType
		G  int
	}
	shapes := [][2]int{{2, 8}, {15, 127}, {16, 128}, {17, 129}, {63, 200}, {64, 8}, {65, 129}, {130, 200}}
	var cs []matmulTCCase
	for wi, w := range []weight{{DTypeQ4, 32}, {DTypeQ4, 64}, {DTypeQ4, 128}, {DTypeQ8, 32}, {DTypeQ8, 64}, {DTypeBF16, 0}} {
		Ks := []int{32, 40, 72, 96}
		if w.G != 0 {
			Ks = []int{w.G, 2 * w.G, 3 * w.G}
		}
		for i, s := range shapes {
			if w.G == 128 && s[0]*s[1] > 64*128 {
				continue // K up to 384: the small shapes only
			}
			for j, K := range Ks {
				if s == [2]int{65, 129} || j == (i+wi)%len(Ks) {
					cs = append(cs, matmulTCCase{w.dt, s[0], s[1], K, w.G})
				}
			}
		}
	}
	return cs
}

// tcRef returns y = x (L, K) · wᵀ in float64 from the weight's exact values
// (affine: the codes, scales and biases) and each output's error scale: Σ
// |x|·(2^b·|s| + |b|) over the groups (affineRef), or Σ |x·w| (bf16).
func tcRef(hw *Tensor, wf []float32, x []float32, L, N, K int) (y, scale []float64) {
	y, scale = make([]float64, L*N), make([]float64, L*N)
	for l := range L {
		xl := x[l*K : (l+1)*K]
		if hw.DType.Quantized() {
			yl, sl := affineRef(hw, xl)
			copy(y[l*N:], yl)
			copy(scale[l*N:], sl)
			continue
		}
		for n := range N {
			for k, v := range xl {
				p := float64(v) * float64(wf[n*K+k])
				y[l*N+n] += p
				scale[l*N+n] += math.Abs(p)
			}
		}
	}
	return y, scale
}

// TestMetalMatMulTC runs the tensor-core prefill (on the interpreter: mma.h's
// portable form with the kernel's exact data flow) over matmulTCCases, one
// launch a case, with y poisoned first, against the float64 product, within
// f32 rounding of the exact products (checkTC): x's three bf16 pieces leave
// 2⁻²⁷·|x| (⅛·2⁻²⁴ of each |x·w|), the products are exact, and the rest is
// f32 additions (the group sums, the fold y += fma(s, Σxq, b·Σx), the sums
// of x), each off by at most 2⁻²⁴ of a partial sum, errors that largely
// cancel. Affine weights: checkNV's 4·2⁻²⁴·Σ|x|(2^b|s| + |b|), as for the
// mat-vec. bf16: 8·2⁻²⁴·Σ|x·w|, twice what a plain sequential f32 sum of the
// same products reaches (4.0–4.1·2⁻²⁴·Σ|x·w| at worst over 26,000 sums of
// 32–384 Gaussian products, float64-checked; this kernel's own order on
// the interpreter: 4.4 at K = 32, below 3 from K = 64). Two pieces of x
// (2⁻¹⁸·|x|) reach 14–53·2⁻²⁴·Σ|x·w| on the same sums.
func TestMetalMatMulTC(t *testing.T) {
	m := testMetalTC(t, 8)
	defer func(on bool) { m.nvTC8 = on }(m.nvTC8)
	m.nvTC8 = false // the bf16 kernels (INGOT_NV_TC=bf16)
	worst := map[DType]float64{}
	for _, tc := range matmulTCCases() {
		t.Run(tc.String(), func(t *testing.T) {
			var hw *Tensor
			var wf []float32
			if tc.dt.Quantized() {
				hw = hostQuant(tc.dt, tc.N, tc.K, tc.G, uint64(tc.N*tc.K+tc.L))
			} else {
				hw, wf = hostFloat(tc.dt, tc.N, tc.K, uint64(tc.N*tc.K+tc.L))
			}
			x := randn(tc.L*tc.K, uint64(tc.L))
			want, scale := tcRef(hw, wf, x, tc.L, tc.N, tc.K)
			w, err := m.Upload(hw)
			if err != nil {
				t.Fatal(err)
			}
			y := put(m, nan(tc.L*tc.N), tc.L, tc.N)
			m.ResetStats()
			m.MatMul(y, put(m, x, tc.L, tc.K), w)
			if s, want := m.Stats(), matmulTCName(w, tc.K); s.Dispatches != 1 || m.last != want {
				t.Errorf("%d dispatches, the last %s; want 1, %s", s.Dispatches, m.last, want)
			}
			ulps := 4.0 // affine: checkNV's bound
			if !tc.dt.Quantized() {
				ulps = 8
			}
			worst[tc.dt] = max(worst[tc.dt], checkTC(t, get(t, m, y), want, scale, ulps))
		})
	}
	t.Logf("worst error in units of 2⁻²⁴·scale: q4 %.3g, q8 %.3g, bf16 %.3g", worst[DTypeQ4], worst[DTypeQ8], worst[DTypeBF16])
	for _, name := range []string{"matmul_q4_f32_tc", "matmul_q8_f32_tc", "matmul_bf16_f32_tc"} {
		if m.pipes[name] == nil {
			t.Errorf("%s never ran", name)
		}
	}
}

// TestMetalMatMulTCFallback: on a GPU of compute capability 7.x, with
// INGOT_NV_TC=0 (nvTC off), and for the weights it does not take (f32, f16;
// bf16 with K % 8 ≠ 0), prefill runs matmul_<w>_f32_nv (or matmul_<w>_f32
// where that does not apply either) and matches the CPU reference.
func TestMetalMatMulTCFallback(t *testing.T) {
	for _, c := range []struct {
		dt    DType
		K, cc int
		off   bool
		want  string
	}{
		{DTypeQ4, 64, 7, false, "matmul_q4_f32_nv"},
		{DTypeQ8, 64, 7, false, "matmul_q8_f32_nv"},
		{DTypeBF16, 64, 7, false, "matmul_bf16_f32_nv"},
		{DTypeQ4, 64, 8, true, "matmul_q4_f32_nv"},
		{DTypeBF16, 64, 9, true, "matmul_bf16_f32_nv"},
		{DTypeF32, 64, 9, false, "matmul_f32_f32_nv"},
		{DTypeF16, 64, 9, false, "matmul_f16_f32_nv"},
		{DTypeBF16, 36, 9, false, "matmul_bf16_f32"},
	} {
		t.Run(fmt.Sprintf("w=%s/K=%d/cc=%d/off=%v", c.dt, c.K, c.cc, c.off), func(t *testing.T) {
			m := testMetalTC(t, c.cc)
			checkSwitchedMatMul(t, m, c.dt, c.K, 32, &nvTC, !c.off, c.want)
		})
	}
}

// checkTC fails t unless |got − want| ≤ ulps·2⁻²⁴·scale for every output and
// no output is NaN (unwritten); it returns the largest |got − want| in units
// of 2⁻²⁴·scale.
func checkTC(t *testing.T, got []float32, want, scale []float64, ulps float64) (worst float64) {
	t.Helper()
	bad := 0
	for i := range want {
		d := math.Abs(float64(got[i]) - want[i])
		if r := d / (0x1p-24 * scale[i]); r > worst || math.IsNaN(d) {
			worst = r
		}
		if lim := ulps * 0x1p-24 * scale[i]; !(d <= lim) {
			if bad++; bad <= 5 {
				t.Errorf("y[%d] = %.8g, want %.8g: |diff| %.3g > %.3g", i, got[i], want[i], d, lim)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%d outputs out of bounds", bad)
	}
	return worst
}

// BenchmarkMetalMatMulTC times prefill, matmul_<w>_f32_tc against
// matmul_<w>_f32_nv (tc=false: INGOT_NV_TC=0) in one run; see benchMatMulAB.
// On the interpreter it runs on a device reporting compute capability 9.0.
func BenchmarkMetalMatMulTC(b *testing.B) {
	m := tcBenchMetal(b)
	m.nvTC8 = false // q4/q8 on the bf16 kernels (BenchmarkMetalMatMulTC8 times the int8 ones)
	benchMatMulAB(b, m, []DType{DTypeQ4, DTypeQ8, DTypeBF16}, "tc", &nvTC)
}

// tcBenchMetal returns the backend the tensor-core benchmarks run on: the
// INGOT_TEST_BACKEND GPU, or the interpreter as an NVIDIA device of compute
// capability 9.0.
func tcBenchMetal(b *testing.B) *Metal {
	if name := os.Getenv("INGOT_TEST_BACKEND"); name != "" && name != "metal-emu" {
		return testMetal(b)
	}
	m, err := NewMetal(ccDevice{msltest.Open(b, ShaderFiles()...), 9, 0})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	m.shape = shapeNVIDIA
	return m
}

// TestMMAInt8Fragments runs mma_m16n8k32_s8u8 on fragments laid out as the
// PTX ISA documents them for mma.m16n8k32 with .s8/.u8 (groupID g = lane/4,
// threadID_in_group t = lane%4; A: a0 … a15 in four registers, rows g, g+8,
// g, g+8, columns 4t + i%4 (+16 for the last two registers); B: b0 … b7 in
// two, rows 4t + i%4 (+16), column g; C/D: rows g, g, g+8, g+8, columns 2t,
// 2t+1, 2t, 2t+1; the lowest index in the lowest byte), built here byte by
// byte from A (signed), B (unsigned) and C, against the scalar integer
// product: every bit must match. Random problems (four simdgroups a
// dispatch, each its own) and the extremes (A = −128 and 127, B = 255, C near
// ±2³⁰).
func TestMMAInt8Fragments(t *testing.T) {
	dev := mmaDevice(t)
	r := rand.New(rand.NewPCG(7, 8))
	for round := range 4 {
		const groups = 4
		var A [groups][16][32]int8
		var B [groups][32][8]uint8
		var C [groups][16][8]int32
		for w := range groups {
			for i := range 16 {
				for k := range 32 {
					switch round {
					case 3: // extremes
						A[w][i][k] = [2]int8{-128, 127}[(i+k+w)%2]
					default:
						A[w][i][k] = int8(r.IntN(256) - 128)
					}
				}
				for n := range 8 {
					C[w][i][n] = int32(r.IntN(1<<31) - 1<<30)
				}
			}
			for k := range 32 {
				for n := range 8 {
					if round == 3 {
						B[w][k][n] = 255
					} else {
						B[w][k][n] = uint8(r.IntN(256))
					}
				}
			}
		}
		a := make([]byte, groups*32*16)
		b := make([]byte, groups*32*8)
		c := make([]byte, groups*32*16)
		for w := range groups {
			for lane := range 32 {
				g, tq := lane/4, lane%4
				i := w*32 + lane
				for reg := range 4 { // a_{4reg} … a_{4reg+3}
					row := g + 8*(reg%2)
					for e := range 4 {
						a[16*i+4*reg+e] = byte(A[w][row][4*tq+e+16*(reg/2)])
					}
				}
				for reg := range 2 {
					for e := range 4 {
						b[8*i+4*reg+e] = B[w][4*tq+e+16*reg][g]
					}
				}
				for j, rc := range [4][2]int{{g, 2 * tq}, {g, 2*tq + 1}, {g + 8, 2 * tq}, {g + 8, 2*tq + 1}} {
					binary.LittleEndian.PutUint32(c[16*i+4*j:], uint32(C[w][rc[0]][rc[1]]))
				}
			}
		}
		out := mmaRun(t, dev, "mma_frag8", groups, 32, 0, a, b, c, make([]byte, groups*32*16))[3]
		for w := range groups {
			for lane := range 32 {
				g, tq := lane/4, lane%4
				for j, rc := range [4][2]int{{g, 2 * tq}, {g, 2*tq + 1}, {g + 8, 2 * tq}, {g + 8, 2*tq + 1}} {
					want := int64(C[w][rc[0]][rc[1]])
					for k := range 32 {
						want += int64(A[w][rc[0]][k]) * int64(B[w][k][rc[1]])
					}
					got := int32(binary.LittleEndian.Uint32(out[16*(w*32+lane)+4*j:]))
					if int64(got) != want {
						t.Errorf("round %d simdgroup %d lane %d: D[%d][%d] = %d, want %d", round, w, lane, rc[0], rc[1], got, want)
					}
				}
			}
		}
	}
}

type matmulTC8Case struct {
	dt         DType
	L, N, K, G int
	extreme    bool // x with outliers, tiny pieces and zero tokens
}

func (c matmulTC8Case) String() string {
	return fmt.Sprintf("w=%s/L=%d/N=%d/K=%d/G=%d/extreme=%v", c.dt, c.L, c.N, c.K, c.G, c.extreme)
}

// matmulTC8Cases sit at matmul_tc8's cutoffs: L around the 16-token m-tiles
// and 64-token tiles (1, 2, 15, 17, 63, 65, 130), N around the 8-row n-tiles
// and 128-row tiles (8, 127, 129, 200), K one, two and three groups of 32, 64
// and 128 (quantx_tc8's threadgroup of four pieces: full, partial, several),
// both bit widths; each (L, N) with one K in turn, the corner (65, 129) with
// every K, and every other case's x extreme (tc8X).
func matmulTC8Cases() []matmulTC8Case {
	shapes := [][2]int{{1, 8}, {2, 127}, {15, 129}, {17, 200}, {63, 8}, {65, 129}, {130, 200}}
	var cs []matmulTC8Case
	for wi, w := range []struct {
		dt DType
		G  int
	}{{DTypeQ4, 32}, {DTypeQ4, 64}, {DTypeQ4, 128}, {DTypeQ8, 32}, {DTypeQ8, 64}, {DTypeQ8, 128}} {
		Ks := []int{w.G, 2 * w.G, 3 * w.G}
		for i, s := range shapes {
			if w.G == 128 && s[0]*s[1] > 64*128 {
				continue // K up to 384: the small shapes only
			}
			for j, K := range Ks {
				if s == [2]int{65, 129} || j == (i+wi)%len(Ks) {
					cs = append(cs, matmulTC8Case{w.dt, s[0], s[1], K, w.G, len(cs)%2 == 1})
				}
			}
		}
	}
	return cs
}

// tc8X returns x (L, K): Gaussian, or extreme: every 7th column ×10³, every
// fifth 32-column piece ×10⁻¹² (values spanning 10¹⁵), every fifth token
// from the fourth zero, and one zero piece.
func tc8X(L, K int, extreme bool, seed uint64) []float32 {
	x := randn(L*K, seed)
	if !extreme {
		return x
	}
	for l := range L {
		for k := range K {
			v := &x[l*K+k]
			switch {
			case l%5 == 3, l == 0 && k < 32:
				*v = 0
			case k%7 == 0:
				*v *= 1e3
			case (k/32)%5 == 4:
				*v *= 1e-12
			}
		}
	}
	return x
}

// TestMetalMatMulTC8 runs the int8 tensor-core prefill (quantx_<w>_f32_tc8,
// then matmul_<w>_f32_tc8; on the interpreter mma.h's portable form with the
// kernel's exact data flow) over matmulTC8Cases, with y poisoned first,
// against the float64 product. The bound is derived, not fitted: x's
// rounding to its piece's grid costs at most |s|·Σ|q − c|·dx/2 a piece
// (quantSlack's exact per-piece sum, P = 32: ≤ 16.2·2⁻²⁴·2^b|s|·Σ|x| of the
// piece, reached only by a piece of one outlier among values just above
// dx/2), and f32 rounding after the exact integer sums at most (K/32 + 10)·
// 2⁻²⁴·Σ|x|(2^b|s| + |b|): the products' chain of K/32 piece terms (gacc,
// then acc) rounds once a term, and each term carries at most 10 roundings of
// its own (V's two adds and their 1.5·2²³ offset, the fma with dx, Σx's
// five-level butterfly and its sum over the group, the fold's add and two
// fmas). The worst seen is logged in units of 2⁻²⁴·Σ|x|(2^b|s| + |b|) over the
// Gaussian cases and as a fraction of the bound over all.
func TestMetalMatMulTC8(t *testing.T) {
	m := testMetalTC(t, 8)
	defer func(on bool) { m.nvTC8 = on }(m.nvTC8)
	m.nvTC8 = true
	var worstUnits, worstFrac float64
	for _, tc := range matmulTC8Cases() {
		t.Run(tc.String(), func(t *testing.T) {
			hw := hostQuant(tc.dt, tc.N, tc.K, tc.G, uint64(tc.N*tc.K+tc.L))
			x := tc8X(tc.L, tc.K, tc.extreme, uint64(tc.L+tc.K))
			w, err := m.Upload(hw)
			if err != nil {
				t.Fatal(err)
			}
			want, scale := tcRef(hw, nil, x, tc.L, tc.N, tc.K)
			y := put(m, nan(tc.L*tc.N), tc.L, tc.N)
			m.ResetStats()
			if !m.matmulNV(y, put(m, x, tc.L, tc.K), w, tc.L, tc.N, tc.K) {
				t.Fatal("matmulNV did not run")
			}
			if s, name := m.Stats(), matmulTC8Name(w); s.Dispatches != 2 || m.last != name {
				t.Errorf("%d dispatches, the last %s; want 2, %s", s.Dispatches, m.last, name)
			}
			got := get(t, m, y)
			bad := 0
			for l := range tc.L {
				slack := quantSlack(hw, x[l*tc.K:(l+1)*tc.K], 32)
				for n := range tc.N {
					i := l*tc.N + n
					d := math.Abs(float64(got[i]) - want[i])
					lim := slack[n] + float64(tc.K/32+10)*0x1p-24*scale[i]
					if !tc.extreme && scale[i] > 0 {
						worstUnits = max(worstUnits, d/(0x1p-24*scale[i]))
					}
					if lim > 0 {
						worstFrac = max(worstFrac, d/lim)
					}
					if !(d <= lim) {
						if bad++; bad <= 5 {
							t.Errorf("y[%d][%d] = %.8g, want %.8g: |diff| %.3g > %.3g NOT OK", l, n, got[i], want[i], d, lim)
						}
					}
				}
			}
			if bad > 5 {
				t.Errorf("%d outputs out of bounds", bad)
			}
		})
	}
	t.Logf("worst error: %.3g·2⁻²⁴·Σ|x|(2^b|s|+|b|) (Gaussian x), %.3g of the bound (all)", worstUnits, worstFrac)
	for _, name := range []string{"quantx_q4_f32_tc8", "quantx_q8_f32_tc8", "matmul_q4_f32_tc8", "matmul_q8_f32_tc8"} {
		if m.pipes[name] == nil {
			t.Errorf("%s never ran", name)
		}
	}
}

// TestMetalMatMulTC8Select: with nvTC8 on, q4 and q8 weights of groups 32,
// 64, 128 take the int8 kernels, other groups and bf16 stay on
// matmul_<w>_f32_tc; with it off (the default), every weight stays there.
func TestMetalMatMulTC8Select(t *testing.T) {
	m := testMetalTC(t, 8)
	for _, c := range []struct {
		dt   DType
		G    int
		on   bool
		want string
	}{
		{DTypeQ4, 64, true, "matmul_q4_f32_tc8"},
		{DTypeQ8, 128, true, "matmul_q8_f32_tc8"},
		{DTypeQ4, 256, true, "matmul_q4_f32_tc"},
		{DTypeQ4, 64, false, "matmul_q4_f32_tc"},
		{DTypeQ8, 32, false, "matmul_q8_f32_tc"},
	} {
		t.Run(fmt.Sprintf("w=%s/G=%d/tc8=%v", c.dt, c.G, c.on), func(t *testing.T) {
			defer func(on bool) { m.nvTC8 = on }(m.nvTC8)
			m.nvTC8 = c.on
			const L, N = 3, 17
			K := max(c.G, 64)
			hw := hostQuant(c.dt, N, K, c.G, 9)
			w, err := m.Upload(hw)
			if err != nil {
				t.Fatal(err)
			}
			x := randn(L*K, 10)
			y := put(m, nan(L*N), L, N)
			m.MatMul(y, put(m, x, L, K), w)
			if m.last != c.want {
				t.Errorf("ran %s, want %s", m.last, c.want)
			}
			want, scale := tcRef(hw, nil, x, L, N, K)
			got := get(t, m, y)
			for l := range L {
				slack := quantSlack(hw, x[l*K:(l+1)*K], 32)
				for n := range N {
					i := l*N + n
					if d, lim := math.Abs(float64(got[i])-want[i]), slack[n]+float64(K/32+10)*0x1p-24*scale[i]; !(d <= lim) {
						t.Errorf("y[%d][%d] = %.8g, want %.8g: |diff| %.3g > %.3g", l, n, got[i], want[i], d, lim)
					}
				}
			}
		})
	}
}

// BenchmarkMetalMatMulTC8 times prefill, matmul_<w>_f32_tc8 (with its
// quantx launch) against matmul_<w>_f32_tc (tc8=false) in one run; see
// benchMatMulAB. On the interpreter it runs on a device reporting compute
// capability 9.0.
func BenchmarkMetalMatMulTC8(b *testing.B) {
	m := tcBenchMetal(b)
	benchMatMulAB(b, m, []DType{DTypeQ4, DTypeQ8}, "tc8", &m.nvTC8)
}

// TestMetalQuantXTC8 checks quantx_<q4|q8>_f32_tc8 against its definition,
// token by token and piece by piece (32 columns): dx = amax/8290000, every
// x_k rounded to the nearest multiple of dx (|x − dx·t| ≤ dx/2, |t| ≤
// 8290000), t's three signed bytes at the places matmul_<w>_f32_tc8 stages
// them (q4: byte (2·(j/8) + j%2)·4 + (j%8)/2 of the piece's plane holds
// column j; q8: byte j), and each group's Σx and c·Σ(x − dx·t) to f32
// rounding; groups of 32, 64, 128, K a partial and a full threadgroup of four
// pieces and more, x spanning 10¹⁵ with zero pieces.
func TestMetalQuantXTC8(t *testing.T) {
	m := testMetalTC(t, 8)
	for _, c := range []struct {
		dt      DType
		L, K, G int
	}{{DTypeQ4, 3, 96, 32}, {DTypeQ8, 2, 256, 64}, {DTypeQ4, 2, 640, 128}, {DTypeQ8, 5, 384, 128}} {
		t.Run(fmt.Sprintf("w=%s/L=%d/K=%d/G=%d", c.dt, c.L, c.K, c.G), func(t *testing.T) {
			L, K, G := c.L, c.K, c.G
			hw := hostQuant(c.dt, 8, K, G, 3)
			w, err := m.Upload(hw)
			if err != nil {
				t.Fatal(err)
			}
			x := tc8X(L, K, true, uint64(K))
			defer func(on bool) { m.nvTC8 = on }(m.nvTC8)
			m.nvTC8 = true
			m.matmulNV(m.New(L, 8), put(m, x, L, K), w, L, 8, K)
			n, dxOff, gsOff := quantXTC8Bytes(L, K, G)
			raw := get(t, m, &Tensor{DType: DTypeF32, Shape: []int{n / 4}, Buf: m.nvQX8})
			byteAt := func(i int) int8 { return int8(math.Float32bits(raw[i/4]) >> (8 * (i % 4))) }
			cc := float64(int(1)<<c.dt.Bits()-1) / 2
			for l := range L {
				for gi := range K / G {
					wsx, we := 0.0, 0.0
					for p := gi * G / 32; p < (gi+1)*G/32; p++ {
						amax := float32(0)
						for j := range 32 {
							amax = max(amax, float32(math.Abs(float64(x[l*K+32*p+j]))))
						}
						dx := raw[dxOff/4+p*L+l]
						if want := amax / 8290000; dx != want {
							t.Fatalf("token %d piece %d: dx %g, want %g", l, p, dx, want)
						}
						for j := range 32 {
							b := j
							if c.dt == DTypeQ4 {
								b = (2*(j/8)+j%2)*4 + (j%8)/2
							}
							at := func(plane int) int { return int(byteAt(((p*L+l)*3+plane)*32 + b)) }
							tk := at(0)<<16 + at(1)<<8 + at(2)
							xk := float64(x[l*K+32*p+j])
							if d := math.Abs(xk - float64(dx)*float64(tk)); d > float64(dx)/2 || tk > 8290000 || tk < -8290000 {
								t.Fatalf("token %d piece %d column %d: x %g, t %d: |x − dx·t| %g > dx/2 %g", l, p, j, xk, tk, d, dx/2)
							}
							wsx += xk
							we += xk - float64(dx)*float64(tk)
						}
					}
					sx, ce := float64(raw[gsOff/4+2*(gi*L+l)]), float64(raw[gsOff/4+2*(gi*L+l)+1])
					amax := 0.0
					for k := gi * G; k < (gi+1)*G; k++ {
						amax = max(amax, math.Abs(float64(x[l*K+k])))
					}
					if d := math.Abs(sx - wsx); d > 0x1p-20*amax*float64(G) {
						t.Errorf("token %d group %d: Σx %g, want %g", l, gi, sx, wsx)
					}
					if d := math.Abs(ce - cc*we); d > 0x1p-20*cc*amax/8290000*float64(G) {
						t.Errorf("token %d group %d: c·E %g, want %g", l, gi, ce, cc*we)
					}
				}
			}
		})
	}
}
