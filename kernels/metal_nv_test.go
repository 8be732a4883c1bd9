package kernels

import (
	"fmt"
	"math"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ingot-llm/ingot/internal/msl"
	"github.com/ingot-llm/ingot/kernels/cpu"
)

// testMetalNV returns testMetal's backend running the NVIDIA-shaped kernels
// (on the cuda device it does anyway), before anything is uploaded.
func testMetalNV(t testing.TB) *Metal {
	m := testMetal(t)
	m.shape = shapeNVIDIA
	return m
}

func TestMatVecNVArgsLayout(t *testing.T) {
	if got := unsafe.Sizeof(matvecNVArgs{}); got != 44 {
		t.Errorf("matvec_nv_args: Go mirror is %d bytes, common.h says 44", got)
	}
}

// hostQuantSB is hostQuant with its scales and biases rounded to kind (f32:
// left as they are), as a checkpoint stores them.
func hostQuantSB(dt DType, N, K, G int, kind uint8, seed uint64) *Tensor {
	w := hostQuant(dt, N, K, G, seed)
	for _, v := range [2][]float32{w.Scales.F32(), w.Biases.F32()} {
		for i := range v {
			switch kind {
			case sbBF16:
				v[i] = cpu.BF16ToF32(cpu.F32ToBF16(v[i]))
			case sbF16:
				v[i] = cpu.F16ToF32(cpu.F32ToF16(v[i]))
			}
		}
	}
	return w
}

// affineRef returns x (K) · wᵀ for the affine host weight w (N, K) in float64,
// from the codes, scales and biases (Σ (s·q + b)·x, no rounding), and each
// row's error scale Σ |x|·(2^b·|s| + |b|) over its groups.
func affineRef(w *Tensor, x []float32) (y, scale []float64) {
	N, K, G, b := w.Shape[0], w.Cols(), w.GroupSize, w.DType.Bits()
	words := w.U32()
	s, bs := w.Scales.F32(), w.Biases.F32()
	y, scale = make([]float64, N), make([]float64, N)
	for n := range N {
		for k := range K {
			bit := (n*K + k) * b
			q := float64(words[bit/32] >> (bit % 32) & (1<<b - 1))
			g := n*(K/G) + k/G
			y[n] += (float64(s[g])*q + float64(bs[g])) * float64(x[k])
			scale[n] += math.Abs(float64(x[k])) * (float64(int(1)<<b)*math.Abs(float64(s[g])) + math.Abs(float64(bs[g])))
		}
	}
	return y, scale
}

// checkNV fails t unless got is within float rounding of the exact products,
// |got − want| ≤ 4·2⁻²⁴·scale per row (the kernel's bound, matvec_nv.metal, is
// 3·2⁻²⁴·scale per rounding step; accumulation errors largely cancel, and the
// worst seen over nvCases is 0.65·2⁻²⁴·scale), and every row was written (no
// NaN). It returns the largest |got − want| in units of 2⁻²⁴·scale.
func checkNV(t *testing.T, got []float32, want, scale []float64) (worst float64) {
	t.Helper()
	bad := 0
	for n := range want {
		d := math.Abs(float64(got[n]) - want[n])
		lim := 4 * 0x1p-24 * scale[n]
		if r := d / (0x1p-24 * scale[n]); r > worst || math.IsNaN(d) {
			worst = r
		}
		if d > lim || math.IsNaN(d) {
			if bad++; bad <= 5 {
				t.Errorf("row %d: got %.8g want %.8g: |diff| %.3g > %.3g NOT OK", n, got[n], want[n], d, lim)
			}
		}
	}
	return worst
}

// nan returns n NaNs: outputs start poisoned, so a row the kernel skips fails.
func nan(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return v
}

type nvCase struct {
	dt      DType
	N, K, G int
	kind    uint8
}

func (c nvCase) String() string {
	return fmt.Sprintf("w=%s/N=%d/K=%d/G=%d/sb=%s", c.dt, c.N, c.K, c.G, [...]string{"bf16", "f16", "f32"}[c.kind])
}

// nvCases sit at matvec_nv's cutoffs: 16 rows a threadgroup (4 lanes a row,
// 8 row slots, 2 rows a thread), 256 columns an iteration (q4: 4 lanes × 2
// loads × 32 codes; q8: 4 × 4 × 16), K one group, K = 64·k for odd k (a
// partial last iteration, in one of two simdgroups at K = 960), and K large
// enough that simdgroups split it (4 at K = 1024, 8 from 2048 on, with several
// iterations each at 8192 and 14336).
func nvCases() []nvCase {
	var cs []nvCase
	for _, dt := range []DType{DTypeQ4, DTypeQ8} {
		for i, s := range []struct{ N, K, G int }{
			{1, 64, 64}, {1, 32, 32}, {3, 128, 128}, // K = one group
			{15, 64, 64}, {16, 256, 64}, {17, 256, 32}, {33, 192, 64}, // N around 16 rows, K one (partial) iteration
			{7, 320, 64}, {40, 576, 64}, {2, 448, 64}, {31, 960, 64}, // K = 64·k, k odd
			{48, 1024, 128}, {5, 2048, 64}, // four, eight simdgroups of one iteration
			{24, 8192, 64}, {3, 14336, 64}, // eight of several (14336: Llama-3-8B's down projection)
		} {
			cs = append(cs, nvCase{dt, s.N, s.K, s.G, uint8(i % 3)})
		}
	}
	return cs
}

// nvForm is one form of the NVIDIA-shaped mat-vec: the integer-dot _nvi
// kernels (the default: a quantx launch, then the mat-vec), or the float ones
// with x staged in threadgroup memory (the _xs kernels, K ≤ 6144) or read
// from device memory.
type nvForm struct {
	name           string
	float, noStage bool
}

var nvForms = []nvForm{{"int", false, false}, {"staged", true, false}, {"unstaged", true, true}}

// set makes f m's form; launches is what one mat-vec launch of the form costs.
func (f nvForm) set(m *Metal) (launches int64) {
	m.nvInt, m.nvNoStage = nvIntAlways, f.noStage
	if f.float {
		m.nvInt = nvIntNever
		return 1
	}
	return 2
}

// TestMetalMatVecNV runs nvCases in every form.
func TestMetalMatVecNV(t *testing.T) {
	m := testMetalNV(t)
	var worst float64
	for _, c := range nvCases() {
		for _, f := range nvForms {
			launches := f.set(m)
			t.Run(fmt.Sprintf("%v/%s", c, f.name), func(t *testing.T) {
				hw := hostQuantSB(c.dt, c.N, c.K, c.G, c.kind, uint64(c.N*c.K+int(c.kind)))
				w, err := m.Upload(hw)
				if err != nil {
					t.Fatal(err)
				}
				if _, _, kind, ok := m.pairsOf(w); !ok || kind != c.kind {
					t.Fatalf("pairs of kind %d (ok %v), want %d", kind, ok, c.kind)
				}
				x := randn(c.K, 7)
				y := put(m, nan(c.N), 1, c.N)
				m.ResetStats()
				m.MatMul(y, put(m, x, 1, c.K), w)
				want, scale := affineRef(hw, x)
				worst = max(worst, checkNV(t, get(t, m, y), want, scale))
				if s := m.Stats(); s.Dispatches != launches {
					t.Errorf("%d dispatches, want %d", s.Dispatches, launches)
				}
			})
		}
	}
	m.nvInt, m.nvNoStage = nvIntAuto, false
	t.Logf("worst error %.3g·2⁻²⁴·Σ|x|(2^b|s|+|b|)", worst)
	for _, name := range []string{"matvec_q4_f32_nv_bf16sb", "matvec_q4_f32_nv_bf16sb_xs", "matvec_q8_f32_nv_f32sb", "matvec_q8_f32_nv_f32sb_xs",
		"quantx_q4_f32", "quantx_q8_f32", "matvec_q4_f32_nvi_bf16sb", "matvec_q4_f32_nvi_f16sb", "matvec_q8_f32_nvi_f32sb"} {
		if m.pipes[name] == nil {
			t.Errorf("%s never ran", name)
		}
	}
}

// TestMetalQuantX checks quantx_<q4|q8>_f32 against its definition, piece by
// piece (P = 32 or 16 columns): dx = amax/8290000, every x_k rounded to the
// nearest multiple of dx (|x − dx·t| ≤ dx/2, |t| ≤ 8290000), t's three signed
// bytes in their planes at the places the mat-vec reads, Σx and Σ(x − dx·t)
// to f32 rounding; K covers one piece, a partial quad of pieces and several.
func TestMetalQuantX(t *testing.T) {
	m := testMetalNV(t)
	for q, bits := range []int{4, 8} {
		P := 128 / bits
		for _, K := range []int{P, 3 * P, 640} {
			t.Run(fmt.Sprintf("q%d/K=%d", bits, K), func(t *testing.T) {
				x := randn(K, uint64(K+q))
				for k := range x {
					x[k] *= float32(math.Pow(10, float64(k%9-4))) // pieces spanning 10⁸
				}
				qx, metaOff := m.quantX(put(m, x, 1, K), K, q)
				n, _ := quantXBytes(K, bits)
				raw := get(t, m, &Tensor{DType: DTypeF32, Shape: []int{n / 4}, Buf: qx})
				byteAt := func(i int) int8 { return int8(math.Float32bits(raw[i/4]) >> (8 * (i % 4))) }
				NC := 3 * P / 16
				for p := 0; p < K/P; p++ {
					dx, sx, e := raw[metaOff/4+4*p], raw[metaOff/4+4*p+1], raw[metaOff/4+4*p+2]
					amax, wsx, we := float32(0), 0.0, 0.0
					for j := range P {
						amax = max(amax, float32(math.Abs(float64(x[p*P+j]))))
					}
					if want := amax / 8290000; dx != want {
						t.Fatalf("piece %d: dx %g, want %g", p, dx, want)
					}
					for j := range P {
						b := j // the byte of column j in its piece's plane
						if bits == 4 {
							b = (2*(j/8)+j%2)*4 + (j%8)/2
						}
						at := func(plane int) int {
							return int(byteAt(((p/4)*NC+plane*(P/16)+b/16)*64 + (p%4)*16 + b%16))
						}
						tk := at(0)<<16 + at(1)<<8 + at(2)
						xk := float64(x[p*P+j])
						if d := math.Abs(xk - float64(dx)*float64(tk)); d > float64(dx)/2 || tk > 8290000 || tk < -8290000 {
							t.Fatalf("piece %d column %d: x %g, t %d: |x − dx·t| %g > dx/2 %g", p, j, xk, tk, d, dx/2)
						}
						wsx += xk
						we += xk - float64(dx)*float64(tk)
					}
					if d := math.Abs(float64(sx) - wsx); d > 0x1p-20*float64(amax)*float64(P) {
						t.Errorf("piece %d: Σx %g, want %g", p, sx, wsx)
					}
					if d := math.Abs(float64(e) - we); d > 0x1p-20*float64(dx)*float64(P) {
						t.Errorf("piece %d: Σ(x − dx·t) %g, want %g", p, e, we)
					}
				}
			})
		}
	}
}

// TestMetalMatVecNVIExtremes drives the integer-dot kernels' quantized x to
// its edges: pieces whose values span 10¹⁵ (outliers beside values 10⁻¹²
// as large), where x's rounding to its piece's grid rather than f32 bounds
// the error — checked against that bound, |s|·Σ|q − c|·dx/2 a piece beside
// the float kernels' 4·2⁻²⁴·Σ|x|(2^b|s|+|b|) — x = 0 (every output 0) and a
// NaN in x (every output NaN).
func TestMetalMatVecNVIExtremes(t *testing.T) {
	m := testMetalNV(t)
	nvForms[0].set(m)
	const N, K, G = 19, 640, 64
	for _, dt := range []DType{DTypeQ4, DTypeQ8} {
		t.Run(dt.String(), func(t *testing.T) {
			hw := hostQuantSB(dt, N, K, G, sbBF16, 5)
			w, err := m.Upload(hw)
			if err != nil {
				t.Fatal(err)
			}
			P := 128 / dt.Bits()
			x := randn(K, 3)
			for k := range x {
				if k%7 == 0 {
					x[k] *= 1e3
				} else if (k/P)%5 == 4 {
					x[k] *= 1e-12
				}
			}
			want, scale := affineRef(hw, x)
			slack := quantSlack(hw, x, P)
			y := put(m, nan(N), 1, N)
			m.MatMul(y, put(m, x, 1, K), w)
			for n, g := range get(t, m, y) {
				d := math.Abs(float64(g) - want[n])
				if lim := 4*0x1p-24*scale[n] + slack[n]; !(d <= lim) {
					t.Errorf("row %d: got %.8g want %.8g: |diff| %.3g > %.3g", n, g, want[n], d, lim)
				}
			}
			m.MatMul(y, put(m, make([]float32, K), 1, K), w)
			for n, g := range get(t, m, y) {
				if g != 0 {
					t.Errorf("x = 0: row %d = %g", n, g)
				}
			}
			x[K/2] = float32(math.NaN())
			m.MatMul(y, put(m, x, 1, K), w)
			for n, g := range get(t, m, y) {
				if !math.IsNaN(float64(g)) {
					t.Errorf("x has a NaN: row %d = %g", n, g)
				}
			}
		})
	}
}

// TestMetalMatVecNVIntAuto: by default the integer-dot kernels run only q4
// weights whose x the float kernels would not stage (K > 6144, or x not on a
// 16-byte boundary), where they measured faster (nvIntMode).
func TestMetalMatVecNVIntAuto(t *testing.T) {
	m := testMetalNV(t)
	for _, c := range []struct {
		dt   DType
		K    int
		off  int // x's first column in its buffer
		want string
	}{
		{DTypeQ4, 6144, 0, "matvec_q4_f32_nv_bf16sb_xs"},
		{DTypeQ4, 6400, 0, "matvec_q4_f32_nvi_bf16sb"},
		{DTypeQ4, 256, 1, "matvec_q4_f32_nvi_bf16sb"},
		{DTypeQ8, 6400, 0, "matvec_q8_f32_nv_bf16sb"},
	} {
		hw := hostQuantSB(c.dt, 8, c.K, 64, sbBF16, 1)
		w, err := m.Upload(hw)
		if err != nil {
			t.Fatal(err)
		}
		x := randn(c.K+c.off, 2)
		xd := put(m, x, 1, c.K+c.off)
		xv := &Tensor{DType: DTypeF32, Shape: []int{1, c.K}, Buf: xd.Buf, Off: xd.Off + 4*c.off}
		y := put(m, nan(8), 1, 8)
		m.MatMul(y, xv, w)
		if m.last != c.want {
			t.Errorf("%s K=%d, x at column %d: ran %s, want %s", c.dt, c.K, c.off, m.last, c.want)
		}
		want, scale := affineRef(hw, x[c.off:])
		checkNV(t, get(t, m, y), want, scale)
	}
}

// quantSlack returns, per row of the affine host weight w, the bound of the
// _nvi kernels' x rounding: Σ over pieces of P columns of |s|·Σ|q − c|·dx/2,
// dx = amax/MVNI_TMAX of the piece (with 10⁻⁴ of room for dx's own rounding).
func quantSlack(w *Tensor, x []float32, P int) []float64 {
	N, K, G, b := w.Shape[0], w.Cols(), w.GroupSize, w.DType.Bits()
	words, s := w.U32(), w.Scales.F32()
	c := float64(int(1)<<b-1) / 2
	slack := make([]float64, N)
	for n := range N {
		for p := 0; p < K; p += P {
			amax := 0.0
			for k := p; k < p+P; k++ {
				amax = math.Max(amax, math.Abs(float64(x[k])))
			}
			sum := 0.0
			for k := p; k < p+P; k++ {
				bit := (n*K + k) * b
				sum += math.Abs(float64(words[bit/32]>>(bit%32)&(1<<b-1)) - c)
			}
			slack[n] += math.Abs(float64(s[n*(K/G)+p/G])) * sum * amax / 8290000 / 2 * (1 + 1e-4)
		}
	}
	return slack
}

// TestMetalMatVecNVGeometry runs the kernels at every lane count a row can
// have (1 … 32) and 1 … 8 simdgroups: the host's table picks one, retuning it
// must not need new kernels.
func TestMetalMatVecNVGeometry(t *testing.T) {
	m := testMetalNV(t)
	for _, dt := range []DType{DTypeQ4, DTypeQ8} {
		hw := hostQuantSB(dt, 37, 1344, 64, sbBF16, 3) // 1344 = 64·21
		w, err := m.Upload(hw)
		if err != nil {
			t.Fatal(err)
		}
		x := randn(1344, 5)
		want, scale := affineRef(hw, x)
		for shift := range 6 {
			for _, nsg := range []int{1, 3, 8} {
				for _, f := range nvForms {
					t.Run(fmt.Sprintf("w=%s/lanes=%d/nsg=%d/%s", dt, 1<<shift, nsg, f.name), func(t *testing.T) {
						m.nvGeom = func(DType, int, int) (int, int) { return shift, nsg }
						f.set(m)
						y := put(m, nan(37), 1, 37)
						m.MatMul(y, put(m, x, 1, 1344), w)
						checkNV(t, get(t, m, y), want, scale)
					})
				}
			}
		}
	}
}

func TestNVGeomFromEnv(t *testing.T) {
	for v, want := range map[string][2]int{"2,4": {1, 4}, "32,8": {5, 8}, "1,1": {0, 1}} {
		g := nvGeomFromEnv(v)
		if g == nil {
			t.Errorf("%q: nil", v)
			continue
		}
		if s, n := g(DTypeQ4, 1, 64); s != want[0] || n != want[1] {
			t.Errorf("%q: lane shift %d, %d simdgroups; want %v", v, s, n, want)
		}
	}
	for _, v := range []string{"", "3,4", "64,1", "4,0", "4,9", "x"} {
		if nvGeomFromEnv(v) != nil {
			t.Errorf("%q: a geometry, want none", v)
		}
	}
}

// TestMetalMatMulsNV fuses 2, 3 and 4 weights of different N into one launch
// (q/k/v, gate/up), and falls back to one launch per weight when they differ
// in group size.
func TestMetalMatMulsNV(t *testing.T) {
	m := testMetalNV(t)
	for _, c := range []struct {
		dt    DType
		Ns    []int
		K     int
		G     []int
		kind  uint8
		calls int64
	}{
		{DTypeQ4, []int{33, 7}, 320, []int{64, 64}, sbBF16, 1},
		{DTypeQ8, []int{64, 16, 16}, 256, []int{64, 64, 64}, sbF16, 1},
		{DTypeQ4, []int{40, 1, 17, 100}, 576, []int{32, 32, 32, 32}, sbF32, 1},
		{DTypeQ8, []int{16, 5, 3, 48}, 1024, []int{128, 128, 128, 128}, sbBF16, 1},
		{DTypeQ4, []int{20, 9}, 256, []int{64, 128}, sbBF16, 2}, // groups differ: two launches
	} {
		for _, f := range nvForms[:2] {
			launches := f.set(m)
			t.Run(fmt.Sprintf("w=%s/N=%v/K=%d/G=%v/%s", c.dt, c.Ns, c.K, c.G, f.name), func(t *testing.T) {
				x := randn(c.K, 11)
				xd := put(m, x, 1, c.K)
				var hws, ws, ys []*Tensor
				for i, N := range c.Ns {
					hw := hostQuantSB(c.dt, N, c.K, c.G[i], c.kind, uint64(17*i+N))
					w, err := m.Upload(hw)
					if err != nil {
						t.Fatal(err)
					}
					hws, ws, ys = append(hws, hw), append(ws, w), append(ys, put(m, nan(N), 1, N))
				}
				m.ResetStats()
				m.MatMuls(ys, xd, ws)
				if s := m.Stats(); s.Dispatches != c.calls*launches {
					t.Errorf("%d dispatches, want %d", s.Dispatches, c.calls*launches)
				}
				for i := range ws {
					want, scale := affineRef(hws[i], x)
					checkNV(t, get(t, m, ys[i]), want, scale)
				}
			})
		}
	}
	m.nvInt = nvIntAuto
}

// TestMetalMatMulGLUNV runs MatMulGLU's one-launch kernel (matvec_*_nv_*_glu)
// over the nvCases shapes as gate and up, staged and not, at 1 … 8
// simdgroups, for every activation it applies: its output must equal
// MatMuls then GLU on the same backend bit for bit (the same sums, the same
// activation), and so stay as close to the float64 reference as the mat-vec.
func TestMetalMatMulGLUNV(t *testing.T) {
	m := testMetalNV(t)
	acts := []Act{ActSiLU, ActGELUTanh, ActGELU, ActSigmoid}
	for ci, c := range nvCases() {
		act := acts[ci%len(acts)]
		for _, f := range nvForms {
			launches := f.set(m)
			t.Run(fmt.Sprintf("%v/act=%d/%s", c, act, f.name), func(t *testing.T) {
				var ws [2]*Tensor
				for i := range ws {
					w, err := m.Upload(hostQuantSB(c.dt, c.N, c.K, c.G, c.kind, uint64(c.N*c.K+i)))
					if err != nil {
						t.Fatal(err)
					}
					ws[i] = w
				}
				x := put(m, randn(c.K, 9), 1, c.K)
				y, u := put(m, nan(c.N), 1, c.N), put(m, nan(c.N), 1, c.N)
				m.ResetStats()
				m.MatMulGLU(y, u, x, ws[0], ws[1], act)
				if s := m.Stats(); s.Dispatches != launches {
					t.Errorf("%d dispatches, want %d", s.Dispatches, launches)
				}
				g, up := put(m, nan(c.N), 1, c.N), put(m, nan(c.N), 1, c.N)
				m.MatMuls([]*Tensor{g, up}, x, ws[:])
				m.GLU(g, g, up, act)
				got, want := get(t, m, y), get(t, m, g)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("y[%d] = %g, unfused %g", i, got[i], want[i])
					}
				}
			})
		}
	}
	for _, nsg := range []int{1, 2, 8} { // the geometries the host table may pick
		nvForms[nsg%3].set(m)
		m.nvGeom = func(DType, int, int) (int, int) { return 2, nsg }
		c := nvCase{DTypeQ4, 37, 1344, 64, sbBF16}
		var ws [2]*Tensor
		for i := range ws {
			w, err := m.Upload(hostQuantSB(c.dt, c.N, c.K, c.G, c.kind, uint64(5+i)))
			if err != nil {
				t.Fatal(err)
			}
			ws[i] = w
		}
		x := put(m, randn(c.K, 4), 1, c.K)
		y, u := put(m, nan(c.N), 1, c.N), put(m, nan(c.N), 1, c.N)
		m.MatMulGLU(y, u, x, ws[0], ws[1], ActSiLU)
		g, up := put(m, nan(c.N), 1, c.N), put(m, nan(c.N), 1, c.N)
		m.MatMuls([]*Tensor{g, up}, x, ws[:])
		m.GLU(g, g, up, ActSiLU)
		got, want := get(t, m, y), get(t, m, g)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("nsg %d: y[%d] = %g, unfused %g", nsg, i, got[i], want[i])
			}
		}
	}
	m.nvGeom = nil
	m.nvInt, m.nvNoStage = nvIntAuto, false
	if m.pipes["matvec_q4_f32_nv_bf16sb_xs_glu"] == nil || m.pipes["matvec_q8_f32_nv_f16sb_glu"] == nil ||
		m.pipes["matvec_q4_f32_nvi_bf16sb_glu"] == nil || m.pipes["matvec_q8_f32_nvi_f32sb_glu"] == nil {
		t.Error("the _glu kernels never ran")
	}
}

// TestMetalMatVecNVViews multiplies with row views of a weight and of x and
// dst (offsets into shared buffers): the pairs follow the view.
func TestMetalMatVecNVViews(t *testing.T) {
	m := testMetalNV(t)
	hw := hostQuantSB(DTypeQ4, 96, 512, 64, sbF16, 3)
	w, err := m.Upload(hw)
	if err != nil {
		t.Fatal(err)
	}
	x := randn(3*512, 4)
	xd := put(m, x, 3, 512)
	want, scale := affineRef(hw, x[512:1024])
	part := put(m, nan(2*32), 2, 32)
	m.MatMul(part.Rows(1, 2), xd.Rows(1, 2), w.Rows(32, 64))
	m.MatMuls([]*Tensor{part.Rows(0, 1)}, xd.Rows(1, 2), []*Tensor{w.Rows(64, 96)})
	got := get(t, m, part)
	checkNV(t, got[32:], want[32:64], scale[32:64])
	checkNV(t, got[:32], want[64:], scale[64:])
}

// TestMetalMatMulNVFallback: other dtypes and groups, and L > 1, keep the
// Apple-shaped and tiled kernels on an NVIDIA-shaped backend, and match the
// CPU reference there.
func TestMetalMatMulNVFallback(t *testing.T) {
	m := testMetalNV(t)
	for _, c := range []struct {
		dt      DType
		L, N, K int
		G       int
	}{
		{DTypeQ4, 1, 9, 256, 16}, // a group the NVIDIA kernel does not take
		{DTypeQ6, 1, 9, 256, 64},
		{DTypeQ8, 3, 17, 128, 64}, // prefill
		{DTypeF16, 1, 9, 64, 0},
	} {
		t.Run(fmt.Sprintf("w=%s/L=%d/G=%d", c.dt, c.L, c.G), func(t *testing.T) {
			var hw *Tensor
			var wf []float32
			if c.dt.Quantized() {
				hw = hostQuant(c.dt, c.N, c.K, c.G, 5)
				wf = dequant(hw)
			} else {
				hw, wf = hostFloat(c.dt, c.N, c.K, 5)
			}
			w, err := m.Upload(hw)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, _, ok := m.pairsOf(w); ok != (c.dt == DTypeQ8) {
				t.Fatalf("pairs made: %v, want %v (only for weights the NVIDIA kernel runs)", ok, !ok)
			}
			x := randn(c.L*c.K, 6)
			want := make([]float32, c.L*c.N)
			cpuRef(func(cb *CPU) {
				wc, _ := cb.Upload(FromF32(wf, c.N, c.K))
				cb.MatMul(FromF32(want, c.L, c.N), FromF32(x, c.L, c.K), wc)
			})
			y := m.New(c.L, c.N)
			m.MatMul(y, put(m, x, c.L, c.K), w)
			closeTo(t, get(t, m, y), want, matmulTol)
		})
	}
}

// TestMetalMapNV: codes the NVIDIA-shaped kernel reads 16 bytes at a time
// are bound in place only at 16-byte aligned offsets of a mapped region, and
// copied at others (that the Apple-shaped kernels map).
func TestMetalMapNV(t *testing.T) {
	pg := os.Getpagesize()
	region, err := unix.Mmap(-1, 0, 4*pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(region)
	const N, K = 16, 256
	hw := hostQuantSB(DTypeQ4, N, K, 64, sbBF16, 8)
	x := randn(K, 2)
	want, scale := affineRef(hw, x)
	for _, c := range []struct {
		off    int
		mapped bool
	}{{16, true}, {pg + 4, false}, {2*pg + 48, true}} {
		t.Run(fmt.Sprintf("off=%d", c.off), func(t *testing.T) {
			m := testMetalNV(t)
			if _, ok := m.dev.(*msl.Device); !ok {
				t.Skip("the device cannot map host memory")
			}
			unmap, err := m.Map(region, 4*pg)
			if err != nil {
				t.Fatal(err)
			}
			defer unmap()
			h := *hw
			h.Data = region[c.off : c.off+len(hw.Data) : c.off+len(hw.Data)]
			copy(h.Data, hw.Data)
			w, err := m.Upload(&h)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Stats().MappedBytes == int64(len(hw.Data)); got != c.mapped {
				t.Errorf("codes mapped: %v, want %v", got, c.mapped)
			}
			y := put(m, nan(N), 1, N)
			m.MatMul(y, put(m, x, 1, K), w)
			checkNV(t, get(t, m, y), want, scale)
		})
	}
}

// BenchmarkMetalMatVecNV measures the NVIDIA-shaped mat-vec, alone and fused
// (q/k/v), on weights small enough to stay in a GPU's L2: the rate a launch
// runs at with its fixed costs. `ingot bench -backend cuda -test mv,mvf`
// measures memory-bound rates on model shapes. On the interpreter the numbers
// only prove the path runs.
func BenchmarkMetalMatVecNV(b *testing.B) {
	m := testMetalNV(b)
	for _, dt := range []DType{DTypeQ4, DTypeQ8} {
		for _, Ns := range [][]int{{768}, {256, 64, 64}} {
			const K = 256
			b.Run(fmt.Sprintf("w=%s/N=%v/K=%d", dt, Ns, K), func(b *testing.B) {
				var ws, ys []*Tensor
				for i, N := range Ns {
					w, err := m.Upload(hostQuantSB(dt, N, K, 64, sbBF16, uint64(i)))
					if err != nil {
						b.Fatal(err)
					}
					ws, ys = append(ws, w), append(ys, m.New(1, N))
				}
				x := put(m, randn(K, 2), 1, K)
				m.ResetStats()
				m.MatMuls(ys, x, ws)
				b.SetBytes(m.Stats().WeightBytes)
				b.ReportAllocs()
				m.ResetStats()
				for b.Loop() {
					m.MatMuls(ys, x, ws)
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
