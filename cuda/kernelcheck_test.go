//go:build linux && (amd64 || arm64)

package cuda_test

// The kernel checks: each runs shipped kernels (and the test kernels of
// testdata) through a device with Metal-style bindings and compares them with
// float64 references in Go. gpu_test.go runs them on an NVIDIA GPU from the
// generated PTX (go test -tags cuda); interp_test.go runs them on the MSL
// interpreter, so the references and the harness are checked on every
// machine with clang.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/ingot-llm/ingot/cuda"
)

// A device runs kernels by name. Buffers are opaque handles (device
// addresses on the GPU).
type device interface {
	upload(tb testing.TB, b []byte) cuda.DevicePtr
	poisoned(tb testing.TB, n int) cuda.DevicePtr // n bytes of 0xff: NaN as floats
	read(tb testing.TB, p cuda.DevicePtr, n int) []byte
	run(tb testing.TB, kernel string, grid, block cuda.Dim3, b bindings)
}

// checks are the kernel checks, by name; big selects real model shapes.
var checks = []struct {
	name string
	f    func(t *testing.T, g device, big bool)
}{
	{"RMSNorm", checkRMSNorm},
	{"MatvecQuant", checkMatvecQuant},
	{"MatvecDense", checkMatvecDense},
	{"Matmul", checkMatmul},
	{"RoPE", checkRoPE},
	{"Elementwise", checkElementwise},
	{"Embed", checkEmbed},
	{"ArgmaxTopK", checkArgmaxTopK},
	{"Attention", checkAttention},
	{"Math", checkMath},
	{"Collectives", checkCollectives},
}

func readF32(tb testing.TB, g device, p cuda.DevicePtr, n int) []float32 {
	return f32s(g.read(tb, p, 4*n))
}

func f32b(xs []float32) []byte {
	b := make([]byte, 0, 4*len(xs))
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func randn(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func checkRMSNorm(t *testing.T, g device, big bool) {
	r := rand.New(rand.NewPCG(1, 2))
	shapes := []struct{ rows, n int }{{1, 1}, {1, 31}, {1, 32}, {3, 33}, {2, 1025}, {4, 4096}}
	if big {
		shapes = append(shapes, struct{ rows, n int }{64, 8192})
	}
	for _, tc := range shapes {
		x, w := randn(r, tc.rows*tc.n), randn(r, tc.n)
		const eps = 1e-5
		xb, wb, yb := g.upload(t, f32b(x)), g.upload(t, f32b(w)), g.poisoned(t, 4*len(x))
		threads := min(1024, (tc.n+31)&^31)
		g.run(t, "rmsnorm_f32", cuda.Dim3{X: tc.rows}, cuda.Dim3{X: threads}, bindings{
			bufs:  map[int]cuda.DevicePtr{1: xb, 2: wb, 3: yb},
			bytes: map[int][]byte{0: u32s(uint32(tc.n), math.Float32bits(eps))},
			tg:    map[int]int{0: 4 * 32},
		})
		y := readF32(t, g, yb, len(x))
		worst := 0.0
		for row := range tc.rows {
			xr := x[row*tc.n : (row+1)*tc.n]
			ss := 0.0
			for _, v := range xr {
				ss += float64(v) * float64(v)
			}
			inv := 1 / math.Sqrt(ss/float64(tc.n)+eps)
			for i, v := range xr {
				want := float64(w[i]) * float64(v) * inv
				got := float64(y[row*tc.n+i])
				worst = max(worst, math.Abs(got-want)/max(math.Abs(want), 1e-30))
				if math.IsNaN(got) {
					worst = math.Inf(1)
				}
			}
		}
		t.Logf("rmsnorm_f32 rows=%d n=%d: max relative error %.2e", tc.rows, tc.n, worst)
		if worst > 2e-6 {
			t.Errorf("rmsnorm_f32 rows=%d n=%d: max relative error %.2e > 2e-6", tc.rows, tc.n, worst)
		}
	}
}

// packCodes packs rows of codes (values < 2^bits) into MLX's little-endian
// bitstream, row after row.
func packCodes(q []uint8, bits int) []byte {
	out := make([]byte, len(q)*bits/8)
	switch bits {
	case 4:
		for i := range out {
			out[i] = q[2*i] | q[2*i+1]<<4
		}
	case 8:
		copy(out, q)
	default:
		for i, v := range q {
			for b := range bits {
				if v>>b&1 != 0 {
					bit := i*bits + b
					out[bit/8] |= 1 << (bit % 8)
				}
			}
		}
	}
	return out
}

// quantized is a random MLX affine-quantized matrix (N, K), group G.
type quantized struct {
	N, K, G, bits  int
	q              []uint8
	scales, biases []float32
}

func randQuant(r *rand.Rand, N, K, G, bits int) *quantized {
	m := &quantized{N: N, K: K, G: G, bits: bits, q: make([]uint8, N*K)}
	for i := 0; i < len(m.q); i += 8 {
		v := r.Uint64()
		for j := i; j < min(i+8, len(m.q)); j++ {
			m.q[j] = uint8(v) & (1<<bits - 1)
			v >>= 8
		}
	}
	for range N * K / G {
		s := float32(0.002 + 0.02*r.Float64())
		m.scales = append(m.scales, s)
		m.biases = append(m.biases, -s*float32(int(1)<<(bits-1))*float32(0.5+r.Float64()))
	}
	return m
}

func (m *quantized) w(n, k int) float64 {
	sb := n*(m.K/m.G) + k/m.G
	return float64(m.scales[sb])*float64(m.q[n*m.K+k]) + float64(m.biases[sb])
}

// checkMatvec compares y (L, N) with x·Wᵀ: max |y − ref| / Σ|w·x| per output.
func compareMatvec(t *testing.T, name string, y, x []float32, L, N, K int, w func(n, k int) float64, tol float64) {
	t.Helper()
	worst := 0.0
	for l := range L {
		for n := range N {
			ref, mag := 0.0, 0.0
			for k := range K {
				p := w(n, k) * float64(x[l*K+k])
				ref += p
				mag += math.Abs(p)
			}
			e := math.Abs(float64(y[l*N+n])-ref) / max(mag, 1e-30)
			if math.IsNaN(float64(y[l*N+n])) {
				e = math.Inf(1)
			}
			worst = max(worst, e)
		}
	}
	t.Logf("%s L=%d N=%d K=%d: max |y−ref|/Σ|w·x| = %.2e", name, L, N, K, worst)
	if worst > tol {
		t.Errorf("%s L=%d N=%d K=%d: error %.2e > %.0e", name, L, N, K, worst, tol)
	}
}

func checkMatvecQuant(t *testing.T, g device, big bool) {
	r := rand.New(rand.NewPCG(3, 4))
	type shape struct{ bits, L, N, K int }
	shapes := []shape{{4, 1, 1, 64}, {4, 1, 8, 64}, {4, 1, 13, 128}, {4, 2, 37, 512}, {8, 1, 37, 512},
		{2, 1, 64, 256}, {3, 1, 21, 256}, {5, 1, 21, 256}, {6, 1, 21, 256}}
	if big {
		shapes = append(shapes, shape{4, 1, 4096, 4096}, shape{4, 1, 14336, 4096}, shape{4, 1, 4096, 14336}, shape{8, 2, 1024, 4096})
	}
	for _, tc := range shapes {
		const G = 64
		m := randQuant(r, tc.N, tc.K, G, tc.bits)
		x := randn(r, tc.L*tc.K)
		wb, xb := g.upload(t, packCodes(m.q, tc.bits)), g.upload(t, f32b(x))
		sb, bb := g.upload(t, f32b(m.scales)), g.upload(t, f32b(m.biases))
		yb := g.poisoned(t, 4*tc.L*tc.N)
		name := fmt.Sprintf("matvec_q%d_f32", tc.bits)
		g.run(t, name, cuda.Dim3{X: (tc.N + 7) / 8, Y: tc.L}, cuda.Dim3{X: 64}, bindings{
			bufs:  map[int]cuda.DevicePtr{1: wb, 2: xb, 3: yb, 4: sb, 5: bb},
			bytes: map[int][]byte{0: u32s(uint32(tc.K), uint32(tc.N), G, uint32(tc.L))},
		})
		compareMatvec(t, name, readF32(t, g, yb, tc.L*tc.N), x, tc.L, tc.N, tc.K, m.w, 1e-6)
	}
}

// f16 converts a float32 to IEEE half bits, rounding to nearest even (normal
// range only, which the tests stay in).
func f16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	if exp <= 0 {
		return sign
	}
	h := uint32(exp)<<10 | mant>>13
	rest := mant & 0x1fff
	if rest > 0x1000 || rest == 0x1000 && h&1 != 0 {
		h++
	}
	return sign | uint16(h)
}

func f16to32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h >> 10 & 0x1f)
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0:
		return float32(math.Copysign(float64(mant)*math.Ldexp(1, -24), float64(math.Float32frombits(sign|0x3f800000))))
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

func checkMatvecDense(t *testing.T, g device, big bool) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, dt := range []string{"f32", "f16", "bf16"} {
		shapes := []struct{ L, N, K int }{{1, 37, 250}, {2, 100, 1024}}
		if big {
			shapes = append(shapes, struct{ L, N, K int }{1, 4096, 4096})
		}
		for _, tc := range shapes {
			w := randn(r, tc.N*tc.K)
			var wbytes []byte
			for i, v := range w {
				switch dt {
				case "f32":
					wbytes = binary.LittleEndian.AppendUint32(wbytes, math.Float32bits(v))
				case "f16":
					h := f16(v)
					w[i] = f16to32(h)
					wbytes = binary.LittleEndian.AppendUint16(wbytes, h)
				case "bf16":
					h := uint16(math.Float32bits(v) >> 16)
					w[i] = math.Float32frombits(uint32(h) << 16)
					wbytes = binary.LittleEndian.AppendUint16(wbytes, h)
				}
			}
			x := randn(r, tc.L*tc.K)
			wb, xb, yb := g.upload(t, wbytes), g.upload(t, f32b(x)), g.poisoned(t, 4*tc.L*tc.N)
			name := "matvec_" + dt + "_f32"
			g.run(t, name, cuda.Dim3{X: (tc.N + 7) / 8, Y: tc.L}, cuda.Dim3{X: 64}, bindings{
				bufs:  map[int]cuda.DevicePtr{1: wb, 2: xb, 3: yb},
				bytes: map[int][]byte{0: u32s(uint32(tc.K), uint32(tc.N), 0, uint32(tc.L))},
			})
			compareMatvec(t, name, readF32(t, g, yb, tc.L*tc.N), x, tc.L, tc.N, tc.K, func(n, k int) float64 { return float64(w[n*tc.K+k]) }, 1e-6)
		}
	}
}

func checkMatmul(t *testing.T, g device, big bool) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		w       string
		L, N, K int
	}{{"f32", 37, 70, 96}, {"f32", 64, 64, 256}, {"q4", 37, 70, 192}, {"q4", 33, 129, 512}} {
		x := randn(r, tc.L*tc.K)
		xb, yb := g.upload(t, f32b(x)), g.poisoned(t, 4*tc.L*tc.N)
		// shaders/matmul.metal: 32 tokens × 64 rows a threadgroup, both tiles
		// double-buffered in float with rows of 40 elements
		b := bindings{bufs: map[int]cuda.DevicePtr{2: xb, 3: yb}, tg: map[int]int{0: 2 * 32 * 40 * 4, 1: 2 * 64 * 40 * 4}}
		var wf func(n, k int) float64
		group := 0
		if tc.w == "f32" {
			w := randn(r, tc.N*tc.K)
			b.bufs[1] = g.upload(t, f32b(w))
			wf = func(n, k int) float64 { return float64(w[n*tc.K+k]) }
		} else {
			group = 64
			m := randQuant(r, tc.N, tc.K, group, 4)
			b.bufs[1], b.bufs[4], b.bufs[5] = g.upload(t, packCodes(m.q, 4)), g.upload(t, f32b(m.scales)), g.upload(t, f32b(m.biases))
			wf = m.w
		}
		b.bytes = map[int][]byte{0: u32s(uint32(tc.L), uint32(tc.N), uint32(tc.K), uint32(group))}
		name := "matmul_" + tc.w + "_f32"
		g.run(t, name, cuda.Dim3{X: (tc.N + 63) / 64, Y: (tc.L + 31) / 32}, cuda.Dim3{X: 128}, b)
		compareMatvec(t, name, readF32(t, g, yb, tc.L*tc.N), x, tc.L, tc.N, tc.K, wf, 1e-6)
	}
}

// checkRoPE rotates at late positions, where sin.approx on the raw angle
// would be wrong in the first digits: the angles are the kernel's float32
// products, the reference their sin and cos in float64.
func checkRoPE(t *testing.T, g device, big bool) {
	r := rand.New(rand.NewPCG(9, 10))
	const Dh, half, heads, theta = 128, 64, 8, 500000.0
	inv := make([]float32, half)
	for j := range inv {
		inv[j] = float32(math.Pow(theta, -float64(2*j)/Dh))
	}
	invb := g.upload(t, f32b(inv))
	for _, pos := range []int{0, 4095, 100000, 131071, 1 << 20, 10_000_000} {
		const L = 3
		cols := heads * Dh
		x := randn(r, L*cols)
		xb := g.upload(t, f32b(x))
		g.run(t, "rope_neox_f32", cuda.Dim3{X: heads, Y: L}, cuda.Dim3{X: min(half, 256)}, bindings{
			bufs:  map[int]cuda.DevicePtr{1: invb, 2: xb},
			bytes: map[int][]byte{0: u32s(L, uint32(cols), Dh, half, uint32(pos), math.Float32bits(1))},
		})
		y := readF32(t, g, xb, L*cols)
		worst := 0.0
		for l := range L {
			p := float32(pos + l)
			for h := range heads {
				for j := range half {
					a := p * inv[j] // the kernel's float32 angle
					c, s := math.Cos(float64(a)), math.Sin(float64(a))
					i0, i1 := l*cols+h*Dh+j, l*cols+h*Dh+j+half
					x0, x1 := float64(x[i0]), float64(x[i1])
					worst = max(worst, math.Abs(float64(y[i0])-(x0*c-x1*s)), math.Abs(float64(y[i1])-(x1*c+x0*s)))
					if y[i0] != y[i0] || y[i1] != y[i1] {
						worst = math.Inf(1)
					}
				}
			}
		}
		t.Logf("rope_neox_f32 pos=%d: max |y−ref| = %.2e (|x| ~ 1)", pos, worst)
		if worst > 1e-5 {
			t.Errorf("rope_neox_f32 pos=%d: max error %.2e > 1e-5", pos, worst)
		}
	}
}

func checkElementwise(t *testing.T, g device, big bool) {
	r := rand.New(rand.NewPCG(11, 12))
	n := 5003
	if big {
		n = 100003
	}
	a, bv := randn(r, n), randn(r, n)
	for i := range a {
		a[i] *= 4
	}
	grid, block := cuda.Dim3{X: (n + 255) / 256}, cuda.Dim3{X: 256}
	ab, bb := g.upload(t, f32b(a)), g.upload(t, f32b(bv))
	// The error is relative to max(|ref|, 1): the values are O(1), and an
	// activation's tail (gelu far below 0) is compared absolutely.
	check := func(name string, y []float32, ref func(i int) float64, tol float64) {
		worst := 0.0
		for i := range y {
			want := ref(i)
			e := math.Abs(float64(y[i])-want) / max(math.Abs(want), 1)
			if math.IsNaN(float64(y[i])) {
				e = math.Inf(1)
			}
			worst = max(worst, e)
		}
		t.Logf("%s n=%d: max relative error %.2e", name, n, worst)
		if worst > tol {
			t.Errorf("%s: max relative error %.2e > %.0e", name, worst, tol)
		}
	}
	yb := g.poisoned(t, 4*n)
	g.run(t, "add_f32", grid, block, bindings{bufs: map[int]cuda.DevicePtr{1: ab, 2: bb, 3: yb}, bytes: map[int][]byte{0: u32s(uint32(n), 1000)}})
	check("add_f32 (nb=1000)", readF32(t, g, yb, n), func(i int) float64 { return float64(a[i] + bv[i%1000]) }, 0)

	for _, tc := range []struct {
		name string
		f    func(x float64) float64
		tol  float64
	}{
		{"glu_silu_f32", func(x float64) float64 { return x / (1 + math.Exp(-x)) }, 1e-6},
		{"glu_gelu_tanh_f32", func(x float64) float64 {
			return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
		}, 1e-6},
		// gelu's erf is the shader's own rational approximation (ingot_erf).
		{"glu_gelu_f32", func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }, 3e-6},
	} {
		yb := g.poisoned(t, 4*n)
		g.run(t, tc.name, grid, block, bindings{bufs: map[int]cuda.DevicePtr{1: ab, 2: bb, 3: yb}, bytes: map[int][]byte{0: u32s(uint32(n), 0)}})
		check(tc.name, readF32(t, g, yb, n), func(i int) float64 { return tc.f(float64(a[i])) * float64(bv[i]) }, tc.tol)
	}

	xb := g.upload(t, f32b(a))
	const capv = 3.0
	g.run(t, "softcap_f32", grid, block, bindings{bufs: map[int]cuda.DevicePtr{1: xb}, bytes: map[int][]byte{0: u32s(uint32(n), math.Float32bits(capv))}})
	check("softcap_f32 (c=3)", readF32(t, g, xb, n), func(i int) float64 {
		return capv * math.Tanh(float64(float32(float64(a[i])/capv)))
	}, 3e-7)

	yb = g.poisoned(t, 4*n)
	g.run(t, "copy_f32", grid, block, bindings{bufs: map[int]cuda.DevicePtr{1: ab, 2: yb}, bytes: map[int][]byte{0: u32s(uint32(n), 0)}})
	check("copy_f32", readF32(t, g, yb, n), func(i int) float64 { return float64(a[i]) }, 0)

	hb := g.poisoned(t, 2*n)
	g.run(t, "copy_f16_f32", grid, block, bindings{bufs: map[int]cuda.DevicePtr{1: ab, 2: hb}, bytes: map[int][]byte{0: u32s(uint32(n), 0)}})
	h := g.read(t, hb, 2*n)
	bad := 0
	for i := range n {
		if got, want := binary.LittleEndian.Uint16(h[2*i:]), f16(a[i]); got != want && bad < 5 {
			bad++
			t.Errorf("copy_f16_f32[%d] = %#04x, want %#04x (%g)", i, got, want, a[i])
		}
	}
	t.Logf("copy_f16_f32 n=%d: %d mismatches with round-to-nearest-even", n, bad)
}

func checkEmbed(t *testing.T, g device, big bool) {
	r := rand.New(rand.NewPCG(13, 14))
	const V, D, L, G = 1000, 576, 7, 64
	tokens := []uint32{0, 999, 5, 5, 123, 777, 1}
	tb := g.upload(t, u32s(tokens...))
	grid, block := cuda.Dim3{X: (D + 255) / 256, Y: L}, cuda.Dim3{X: 256}
	table := randn(r, V*D)
	yb := g.poisoned(t, 4*L*D)
	g.run(t, "embed_f32_f32", grid, block, bindings{bufs: map[int]cuda.DevicePtr{1: g.upload(t, f32b(table)), 2: tb, 3: yb},
		bytes: map[int][]byte{0: u32s(D, 0, math.Float32bits(2), L)}})
	y := readF32(t, g, yb, L*D)
	bad := 0
	for l, tok := range tokens {
		for d := range D {
			if want := table[int(tok)*D+d] * 2; y[l*D+d] != want {
				bad++
			}
		}
	}
	t.Logf("embed_f32_f32: %d of %d elements differ", bad, L*D)
	if bad > 0 {
		t.Errorf("embed_f32_f32: %d elements differ", bad)
	}

	m := randQuant(r, V, D, G, 4)
	yb = g.poisoned(t, 4*L*D)
	g.run(t, "embed_q4_f32", grid, block, bindings{
		bufs:  map[int]cuda.DevicePtr{1: g.upload(t, packCodes(m.q, 4)), 2: tb, 3: yb, 4: g.upload(t, f32b(m.scales)), 5: g.upload(t, f32b(m.biases))},
		bytes: map[int][]byte{0: u32s(D, G, math.Float32bits(1), L)}})
	y = readF32(t, g, yb, L*D)
	// Relative to |s·q| + |b|: the dequantization s·q + b cancels.
	worst := 0.0
	for l, tok := range tokens {
		for d := range D {
			sb := int(tok)*(D/G) + d/G
			sq, b := float64(m.scales[sb])*float64(m.q[int(tok)*D+d]), float64(m.biases[sb])
			e := math.Abs(float64(y[l*D+d])-(sq+b)) / (math.Abs(sq) + math.Abs(b))
			if y[l*D+d] != y[l*D+d] {
				e = math.Inf(1)
			}
			worst = max(worst, e)
		}
	}
	t.Logf("embed_q4_f32: max |y−ref|/(|s·q|+|b|) = %.2e", worst)
	if worst > 2.5e-7 {
		t.Errorf("embed_q4_f32: error %.2e > 2.5e-7", worst)
	}
}

func checkArgmaxTopK(t *testing.T, g device, big bool) {
	r := rand.New(rand.NewPCG(15, 16))
	const n = 128256
	x := randn(r, n)
	x[77777], x[99999] = 9, 9 // a tie: the lower index wins
	out := g.poisoned(t, 16)
	g.run(t, "argmax_f32", cuda.Dim3{X: 1}, cuda.Dim3{X: 1024}, bindings{
		bufs: map[int]cuda.DevicePtr{1: g.upload(t, f32b(x)), 2: out}, bytes: map[int][]byte{0: u32s(n, 0, 0, 0)},
		tg: map[int]int{0: 4 * 32, 1: 4 * 32}})
	if got := int32(binary.LittleEndian.Uint32(g.read(t, out, 4))); got != 77777 {
		t.Errorf("argmax_f32 = %d, want 77777", got)
	} else {
		t.Logf("argmax_f32 n=%d: index %d (tie broken to the lower index)", n, got)
	}

	const m, k = 5000, 64
	y := randn(r, m)
	chunks := (m + 1023) / 1024
	ob := g.poisoned(t, 8*k*chunks)
	g.run(t, "topk_f32", cuda.Dim3{X: chunks}, cuda.Dim3{X: 512}, bindings{
		bufs: map[int]cuda.DevicePtr{1: g.upload(t, f32b(y)), 2: ob}, bytes: map[int][]byte{0: u32s(m, k, 0, 0)},
		tg: map[int]int{0: 4 * 1024, 1: 4 * 1024}})
	got := g.read(t, ob, 8*k*chunks)
	bad := 0
	for c := range chunks {
		var idx []int
		for i := c * 1024; i < min(m, (c+1)*1024); i++ {
			idx = append(idx, i)
		}
		sort.Slice(idx, func(a, b int) bool {
			return y[idx[a]] > y[idx[b]] || y[idx[a]] == y[idx[b]] && idx[a] < idx[b]
		})
		for j := range min(k, len(idx)) {
			v := math.Float32frombits(binary.LittleEndian.Uint32(got[8*(c*k+j):]))
			id := int(binary.LittleEndian.Uint32(got[8*(c*k+j)+4:]))
			if id != idx[j] || v != y[idx[j]] {
				bad++
			}
		}
	}
	t.Logf("topk_f32 n=%d k=%d: %d of %d entries differ from a sort", m, k, bad, chunks*k)
	if bad > 0 {
		t.Errorf("topk_f32: %d entries differ", bad)
	}
}

// attnRef is causal GQA in float64 (see attention.metal).
func attnRef(q, k, v []float32, L, pos, H, Hkv, Dh, window int, scale, softcap float64) []float64 {
	out := make([]float64, L*H*Dh)
	group := H / Hkv
	for l := range L {
		end := pos + l + 1
		start := 0
		if window > 0 && end > window {
			start = end - window
		}
		for h := range H {
			g := h / group
			s := make([]float64, end-start)
			m := math.Inf(-1)
			for j := start; j < end; j++ {
				dot := 0.0
				for c := range Dh {
					dot += float64(q[(l*H+h)*Dh+c]) * float64(k[(j*Hkv+g)*Dh+c])
				}
				dot *= scale
				if softcap > 0 {
					dot = softcap * math.Tanh(dot/softcap)
				}
				s[j-start] = dot
				m = max(m, dot)
			}
			den := 0.0
			for i := range s {
				s[i] = math.Exp(s[i] - m)
				den += s[i]
			}
			for j := start; j < end; j++ {
				for c := range Dh {
					out[(l*H+h)*Dh+c] += s[j-start] / den * float64(v[(j*Hkv+g)*Dh+c])
				}
			}
		}
	}
	return out
}

// attention launches the attention kernels as kernels/metal_attention.go does.
func attention(t *testing.T, g device, f16cache bool, qb, kb, vb, yb cuda.DevicePtr, L, pos, H, Hkv, Dh, window int, scale, softcap float32) {
	group := H / Hkv
	blk := min(32, (30<<10)/4/(2*Dh+1))
	args := func(rows, splits, splitLen, key0 int) []byte {
		return u32s(uint32(L), uint32(pos), uint32(H), uint32(Hkv), uint32(Dh), math.Float32bits(scale), uint32(window),
			math.Float32bits(softcap), uint32(rows), uint32(splits), uint32(splitLen), uint32(blk), uint32(Dh+1), uint32(key0), 0, 0)
	}
	suffix := "_f32"
	if f16cache {
		suffix = "_f16_f32"
	}
	tg := map[int]int{0: 4 * blk * (Dh + 1), 1: 4 * blk * Dh}
	if L > 1 {
		rows := max(1, 8/group)
		g.run(t, "attn_prefill"+suffix, cuda.Dim3{X: Hkv, Y: (L + rows - 1) / rows}, cuda.Dim3{X: 32 * rows * group}, bindings{
			bufs: map[int]cuda.DevicePtr{1: qb, 2: kb, 3: vb, 4: yb, 5: qb}, bytes: map[int][]byte{0: args(rows, 1, pos+L, 0)}, tg: tg})
		return
	}
	// attn_decode_*_g<G> over splits of 32–128 keys, then attn_reduce_f32
	// when there are several (buffer 5 / 3: the sinks, none here).
	end, key0 := pos+1, 0
	if window > 0 {
		key0 = max(0, end-window)
	}
	n := end - key0
	splitLen := min(128, max(32, (n*Hkv+527)/528))
	splits := (n + splitLen - 1) / splitLen
	splitLen = (n + splits - 1) / splits
	gm := 1
	for gm < group {
		gm *= 2
	}
	name := fmt.Sprintf("attn_decode_f32_g%d", gm)
	if f16cache {
		name = fmt.Sprintf("attn_decode_f16_f32_g%d", gm)
	}
	out := yb
	if splits > 1 {
		out = g.poisoned(t, 4*L*H*splits*(Dh+2))
	}
	g.run(t, name, cuda.Dim3{X: Hkv, Y: 1, Z: splits}, cuda.Dim3{X: 128}, bindings{
		bufs:  map[int]cuda.DevicePtr{1: qb, 2: kb, 3: vb, 4: out, 5: qb},
		bytes: map[int][]byte{0: args(1, splits, splitLen, key0)},
		tg:    map[int]int{0: 4 * (group*Dh + group*128 + 16 + 128*4*group)}})
	if splits > 1 {
		g.run(t, "attn_reduce_f32", cuda.Dim3{X: L * H}, cuda.Dim3{X: 128}, bindings{
			bufs:  map[int]cuda.DevicePtr{1: out, 2: yb, 3: qb},
			bytes: map[int][]byte{0: u32s(uint32(H), uint32(Dh), uint32(splits), uint32(L*H), 0)},
			tg:    map[int]int{0: 4 * (splits + 4)}})
	}
}

func checkAttention(t *testing.T, g device, big bool) {
	r := rand.New(rand.NewPCG(17, 18))
	for _, tc := range []struct {
		L, pos, H, Hkv, Dh, window int
		softcap                    float32
		f16                        bool
	}{
		{1, 700, 8, 2, 128, 0, 0, false},
		{1, 300, 32, 8, 128, 0, 0, false},
		{1, 999, 8, 2, 64, 100, 30, true},
		{37, 20, 8, 2, 64, 0, 0, false},
		{16, 100, 4, 4, 128, 50, 0, true},
	} {
		keys := tc.pos + tc.L
		q := randn(r, tc.L*tc.H*tc.Dh)
		k, v := randn(r, keys*tc.Hkv*tc.Dh), randn(r, keys*tc.Hkv*tc.Dh)
		var kb, vb cuda.DevicePtr
		if tc.f16 {
			kh, vh := make([]byte, 0, 2*len(k)), make([]byte, 0, 2*len(v))
			for i := range k {
				hk, hv := f16(k[i]), f16(v[i])
				k[i], v[i] = f16to32(hk), f16to32(hv)
				kh, vh = binary.LittleEndian.AppendUint16(kh, hk), binary.LittleEndian.AppendUint16(vh, hv)
			}
			kb, vb = g.upload(t, kh), g.upload(t, vh)
		} else {
			kb, vb = g.upload(t, f32b(k)), g.upload(t, f32b(v))
		}
		scale := float32(1 / math.Sqrt(float64(tc.Dh)))
		yb := g.poisoned(t, 4*len(q))
		attention(t, g, tc.f16, g.upload(t, f32b(q)), kb, vb, yb, tc.L, tc.pos, tc.H, tc.Hkv, tc.Dh, tc.window, scale, tc.softcap)
		y := readF32(t, g, yb, len(q))
		ref := attnRef(q, k, v, tc.L, tc.pos, tc.H, tc.Hkv, tc.Dh, tc.window, float64(scale), float64(tc.softcap))
		worst := 0.0
		for i := range y {
			e := math.Abs(float64(y[i]) - ref[i])
			if math.IsNaN(float64(y[i])) {
				e = math.Inf(1)
			}
			worst = max(worst, e)
		}
		t.Logf("attention %+v: max |y−ref| = %.2e", tc, worst)
		if worst > 2e-5 {
			t.Errorf("attention %+v: max error %.2e > 2e-5", tc, worst)
		}
	}
}

// checkMath measures the math functions (on the GPU: the PTX compat's,
// ingot_math.h) against float64, with the bounds TestPTXMath holds the host
// build of ingot_math.h to.
func checkMath(t *testing.T, g device, big bool) {
	r := rand.New(rand.NewPCG(19, 20))
	for _, f := range []struct {
		name   string
		ref    func(float64) float64
		lo, hi float32
		bound  float64
	}{
		{"exp", math.Exp, -104, 89, 1},
		{"exp2", math.Exp2, -152, 128, 1},
		{"log", math.Log, 0, math.MaxFloat32, 1},
		{"log2", math.Log2, 0, math.MaxFloat32, 1},
		{"log10", math.Log10, 0, math.MaxFloat32, 1},
		{"sin", math.Sin, -math.MaxFloat32, math.MaxFloat32, 1},
		{"cos", math.Cos, -math.MaxFloat32, math.MaxFloat32, 1},
		{"tan", math.Tan, -math.MaxFloat32, math.MaxFloat32, 2.5},
		{"tanh", math.Tanh, -20, 20, 1},
	} {
		nb, nu := 1<<21, 1<<20
		if !big {
			nb, nu = 1<<13, 1<<12
		}
		var xs []float32
		for len(xs) < nb {
			v := math.Float32frombits(r.Uint32())
			if v >= f.lo && v <= f.hi {
				xs = append(xs, v)
			}
		}
		for range nu {
			xs = append(xs, f.lo/4+(f.hi/4-f.lo/4)*float32(r.Float64()))
		}
		if f.name == "sin" || f.name == "cos" {
			for range nu { // RoPE angles
				xs = append(xs, float32(r.IntN(1<<20))*float32(math.Pow(500000, -float64(2*r.IntN(64))/128)))
			}
		}
		n := len(xs)
		yb := g.poisoned(t, 4*n)
		g.run(t, "math_"+f.name, cuda.Dim3{X: (n + 255) / 256}, cuda.Dim3{X: 256}, bindings{
			bufs: map[int]cuda.DevicePtr{1: g.upload(t, f32b(xs)), 2: yb}, bytes: map[int][]byte{0: u32s(uint32(n))}})
		ys := readF32(t, g, yb, n)
		worst, at := 0.0, float32(0)
		for i, x := range xs {
			if e := ulpErr(ys[i], f.ref(float64(x))); e > worst {
				worst, at = e, x
			}
		}
		t.Logf("math %-5s: %d arguments, max error %.3f ulp at %g", f.name, n, worst, at)
		bound := f.bound
		if !big {
			bound = max(bound, 2) // the interpreter calls libm: glibc's log10f and tanhf reach 1–2 ulp
		}
		if worst > bound {
			t.Errorf("%s: max error %.3f ulp > %g", f.name, worst, bound)
		}
	}
}

// ulpErr is |got − ref| in float32 ulps at ref (0 if got is ref rounded).
func ulpErr(got float32, ref float64) float64 {
	if math.IsNaN(ref) {
		if got != got {
			return 0
		}
		return math.Inf(1)
	}
	if float32(ref) == got {
		return 0
	}
	if math.IsInf(float64(got), 0) || got != got {
		return math.Inf(1)
	}
	a := math.Abs(ref)
	ulp := math.Ldexp(1, -149)
	if a >= math.Ldexp(1, -126) {
		_, e := math.Frexp(a)
		ulp = math.Ldexp(1, e-24)
	}
	return math.Abs(float64(got)-ref) / ulp
}

// checkCollectives checks simd_* and simdgroup_matrix against the
// interpreter's definitions, bit for bit, with partial simdgroups too.
func checkCollectives(t *testing.T, g device, big bool) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, tg := range []int{32, 48, 64, 100} {
		const groups = 3
		n := groups * tg
		x := make([]float32, n)
		for i := range x {
			x[i] = float32((r.Float64() - 0.4) * math.Ldexp(1, r.IntN(21)-10)) // sums depend on order
		}
		yb := g.poisoned(t, 4*8*n)
		g.run(t, "coll_f32", cuda.Dim3{X: groups}, cuda.Dim3{X: tg}, bindings{bufs: map[int]cuda.DevicePtr{0: g.upload(t, f32b(x)), 1: yb}})
		y := readF32(t, g, yb, 8*n)
		bad := 0
		report := func(i, op int, got, want float32) {
			if got != want && !(got != got && want != want) {
				if bad < 5 {
					t.Errorf("tg=%d thread %d op %d: got %g, want %g", tg, i, op, got, want)
				}
				bad++
			}
		}
		for gi := range groups {
			for w0 := 0; w0 < tg; w0 += 32 {
				lanes := x[gi*tg+w0 : gi*tg+min(w0+32, tg)]
				nl := len(lanes)
				v := append([]float32(nil), lanes...)
				for s := 1; s < 32; s *= 2 { // the interpreter's tree
					for i := 0; i+s < nl; i += 2 * s {
						v[i] += v[i+s]
					}
				}
				var incl float32
				mx := float32(math.Inf(-1))
				pos := 0
				for _, l := range lanes {
					mx = max(mx, l)
					if l > 0 {
						pos++
					}
				}
				for l := range nl {
					i := gi*tg + w0 + l
					o := y[8*i : 8*i+8]
					report(i, 0, o[0], v[0])
					excl := incl
					if l == 0 {
						incl = lanes[0]
					} else {
						incl += lanes[l]
					}
					report(i, 1, o[1], incl)
					report(i, 2, o[2], excl)
					report(i, 3, o[3], mx)
					if l+3 < nl || l+3 >= 32 { // else the source lane does not exist
						want := lanes[l]
						if l+3 < nl {
							want = lanes[l+3]
						}
						report(i, 4, o[4], want)
					}
					want := lanes[l]
					if l >= 5 {
						want = lanes[l-5]
					}
					report(i, 5, o[5], want)
					if nl > 2 {
						report(i, 6, o[6], lanes[2])
					}
					report(i, 7, o[7], float32(pos))
				}
			}
		}
		t.Logf("collectives tg=%d: %d mismatches with the interpreter's definitions", tg, bad)
	}

	a, b, c := randn(r, 64), randn(r, 64), randn(r, 64)
	db := g.poisoned(t, 4*64)
	g.run(t, "mm8_f32", cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, bindings{bufs: map[int]cuda.DevicePtr{
		0: g.upload(t, f32b(a)), 1: g.upload(t, f32b(b)), 2: g.upload(t, f32b(c)), 3: db}})
	d := readF32(t, g, db, 64)
	bad := 0
	for i := range 8 {
		for j := range 8 {
			acc := c[i*8+j]
			for k := range 8 {
				p := a[i*8+k] * b[k*8+j]
				acc += p
			}
			if d[i*8+j] != acc {
				bad++
			}
		}
	}
	t.Logf("simdgroup_multiply_accumulate 8x8: %d of 64 elements differ from float k-order accumulation", bad)
	if bad > 0 {
		t.Errorf("mm8_f32: %d elements differ", bad)
	}
}
