package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// randQ returns a random (N, K) QMatrix: uniform codes, scales of both signs.
func randQ(r *rand.Rand, N, K, bits, gs int) *QMatrix {
	G := K / gs
	q := &QMatrix{Bits: bits, GroupSize: gs, W: make([]uint32, N*K*bits/32),
		Scales: make([]float32, N*G), Biases: make([]float32, N*G)}
	words := K * bits / 32
	for n := range N {
		for k := range K {
			c := uint64(r.IntN(1 << bits))
			bit := k * bits
			w := q.W[n*words:]
			w[bit/32] |= uint32(c << (bit % 32))
			if bit%32+bits > 32 {
				w[bit/32+1] |= uint32(c >> (32 - bit%32))
			}
		}
	}
	for i := range q.Scales {
		q.Scales[i] = float32(r.NormFloat64()) * 0.02
		q.Biases[i] = float32(r.NormFloat64()) * 0.1
	}
	return q
}

// codeRef reads code k of row n by walking the bitstream one bit at a time.
func codeRef(q *QMatrix, n, k, K int) uint64 {
	words := K * q.Bits / 32
	var c uint64
	for i := range q.Bits {
		bit := k*q.Bits + i
		c |= uint64(q.W[n*words+bit/32]>>(bit%32)&1) << i
	}
	return c
}

// deqRef dequantizes element (n, k) in float64 and rounds as MLX does: the
// float64 product of a float32 and an integer < 2⁸ is exact, so converting it
// rounds once; so does the float64 sum of two float32 (53 ≥ 2·24+2 bits).
func deqRef(q *QMatrix, n, k, K int) float32 {
	g := n*(K/q.GroupSize) + k/q.GroupSize
	sq := float32(float64(q.Scales[g]) * float64(codeRef(q, n, k, K)))
	return float32(float64(sq) + float64(q.Biases[g]))
}

func TestDequantRowExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, gs := range []int{32, 64, 128} {
			t.Run(fmt.Sprintf("bits=%d/gs=%d", bits, gs), func(t *testing.T) {
				const N, K = 3, 256
				q := randQ(r, N, K, bits, gs)
				// Extreme and awkward values: every code against huge, tiny and
				// negative scales and biases.
				q.Scales[0], q.Biases[0] = -3.4e38/255, 1e-30
				q.Scales[1], q.Biases[1] = 1.0000001, -0.99999994
				row := make([]float32, K)
				for n := range N {
					for _, f := range []func([]float32, int, int){q.DequantRow, q.dequantRowFast} {
						f(row, n, K)
						for k := range K {
							if want := deqRef(q, n, k, K); math.Float32bits(row[k]) != math.Float32bits(want) {
								t.Fatalf("row %d k %d code %d: got %g want %g", n, k, codeRef(q, n, k, K), row[k], want)
							}
						}
					}
				}
			})
		}
	}
}

// ref computes x·wᵀ in float64 from w's exact float32 elements, and for each
// output Σ|w·x| (the float rounding scale) and the int16 activation bound.
//
// qbound is max|x|·Σ_g |scale_g|·Σ_{k∈g} |q_k − c|: times an activation path's
// resolution (see actRes) it bounds that path's rounding error.
func ref(w *Weight, x []float32, L int) (out, mag, qbound []float64) {
	N, K := w.N, w.K
	out, mag, qbound = make([]float64, L*N), make([]float64, L*N), make([]float64, L*N)
	row := make([]float32, K)
	for n := range N {
		w.Row(row, n)
		for l := range L {
			xl := x[l*K : (l+1)*K]
			var s, m float64
			for k := range K {
				s += float64(row[k]) * float64(xl[k])
				m += math.Abs(float64(row[k]) * float64(xl[k]))
			}
			out[l*N+n], mag[l*N+n] = s, m
			if w.Format != FormatQ {
				continue
			}
			q, gs := w.Q, w.Q.GroupSize
			var b, amax float64
			c := float64(int(1)<<q.Bits-1) / 2
			for _, v := range xl {
				amax = max(amax, math.Abs(float64(v)))
			}
			for g := range K / gs {
				var qs float64
				for k := g * gs; k < (g+1)*gs; k++ {
					qs += math.Abs(float64(codeRef(q, n, k, K)) - c)
				}
				b += math.Abs(float64(q.Scales[n*(K/gs)+g])) * amax * qs
			}
			qbound[l*N+n] = b
		}
	}
	return out, mag, qbound
}

func randWeight(r *rand.Rand, f Format, N, K, bits, gs int) *Weight {
	w := &Weight{Format: f, N: N, K: K}
	switch f {
	case FormatF32:
		w.F32 = make([]float32, N*K)
		for i := range w.F32 {
			w.F32[i] = float32(r.NormFloat64())
		}
	case FormatF16, FormatBF16:
		w.U16 = make([]uint16, N*K)
		for i := range w.U16 {
			if f == FormatF16 {
				w.U16[i] = F32ToF16(float32(r.NormFloat64()))
			} else {
				w.U16[i] = F32ToBF16(float32(r.NormFloat64()))
			}
		}
	case FormatQ:
		w.Q = randQ(r, N, K, bits, gs)
	}
	return w
}

func randVec(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

type mmCase struct {
	name     string
	f        Format
	bits, gs int
	N, K, L  int
}

// mmCases covers every format at the kernels' edges: K at one, two and nine
// groups (G not a multiple of 8), odd N and N not a multiple of any tile, L around
// the token tile, and rows crossing the prefill row blocks (see smallBlocks).
func mmCases() []mmCase {
	var cs []mmCase
	add := func(f Format, bits, gs int, name string) {
		for _, s := range []struct{ N, K, L int }{
			{1, gs, 1}, {3, gs, 2}, {5, 2 * gs, 3}, {17, 2 * gs, 1}, {33, 9 * gs, 7},
			{2, gs, 4}, {8, 3 * gs, 8}, {13, 2 * gs, 5}, {6, gs, 33}, {40, 4 * gs, 9},
			{7, 3 * gs, 17}, {4, gs, 16}, // prefill: dequantized row blocks (deqMinL)
			{70, 5 * gs, 29}, {64, 3 * gs, 24}, {33, gs, 16}, // prefill panels (panelN, pTileL, panelKC)
		} {
			cs = append(cs, mmCase{fmt.Sprintf("%s/N=%d/K=%d/L=%d", name, s.N, s.K, s.L), f, bits, gs, s.N, s.K, s.L})
		}
	}
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, gs := range []int{32, 64, 128} {
			add(FormatQ, bits, gs, fmt.Sprintf("w=q%d/gs=%d", bits, gs))
		}
	}
	for _, f := range []struct {
		f    Format
		name string
	}{{FormatF32, "f32"}, {FormatF16, "f16"}, {FormatBF16, "bf16"}} {
		add(f.f, 0, 8, "w="+f.name+"/k8")
		add(f.f, 0, 7, "w="+f.name+"/k7")
		add(f.f, 0, 64, "w="+f.name+"/k64")
	}
	return cs
}

// smallBlocks shrinks the prefill row blocks and panel steps so small test
// shapes cross them.
func smallBlocks(t *testing.T) {
	old, oldKC := cacheBlock, panelKC
	cacheBlock, panelKC = 512, 64
	t.Cleanup(func() { cacheBlock, panelKC = old, oldKC })
}

// pTileRef is the panel tile in float64: dst[l·dstride + r] (+)= Σ_k
// x[l·xstride + k]·p[k·panelN + r] for l < tl.
func pTileRef(dst []float64, dstride int, p []float32, kc int, x []float32, xstride, tl int) {
	for l := range tl {
		for r := range panelN {
			var s float64
			for k := range kc {
				s += float64(x[l*xstride+k]) * float64(p[k*panelN+r])
			}
			dst[l*dstride+r] += s
		}
	}
}

// TestPTile checks each kernel set's panel tile against float64 at step counts
// around its unrolling and with strides past the tile, adding and storing.
func TestPTile(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, ks := range kernelSets() {
		if ks.pTile == nil {
			continue
		}
		tl := ks.pTileL
		for _, kc := range []int{1, 2, 3, 15, 16, 17, 64, 256} {
			p, x := randVec(r, panelN*kc), randVec(r, tl*(kc+5))
			dstride := panelN + 3
			for _, acc := range []bool{false, true} {
				got := randVec(r, tl*dstride)
				orig := append([]float32(nil), got...)
				want, mag := make([]float64, len(got)), make([]float64, len(got))
				for i, v := range got {
					if acc {
						want[i], mag[i] = float64(v), math.Abs(float64(v))
					}
				}
				pTileRef(want, dstride, p, kc, x, kc+5, tl)
				ap := make([]float32, len(p))
				for i, v := range p {
					ap[i] = float32(math.Abs(float64(v)))
				}
				ax := make([]float32, len(x))
				for i, v := range x {
					ax[i] = float32(math.Abs(float64(v)))
				}
				pTileRef(mag, dstride, ap, kc, ax, kc+5, tl)
				ks.pTile(got, dstride, p, kc, x, kc+5, acc)
				for l := range tl {
					for i := panelN; i < dstride; i++ { // past the tile: untouched
						j := l*dstride + i
						want[j], mag[j] = float64(orig[j]), 0
					}
				}
				t.Run(fmt.Sprintf("%s/kc=%d/acc=%v", ks.name, kc, acc), func(t *testing.T) {
					checkRef(t, got, want, mag, nil, 0)
				})
			}
		}
	}
}

// checkRef compares got against the float64 reference: within the int16 bound for
// the fast quantized path, within float32 rounding otherwise.
// actRes returns the rounding resolution, relative to max|x|, of the
// activations MatMul takes for w with kernel set k (0: exact float path).
func actRes(k *kernelSet, w *Weight) float64 {
	switch {
	case w.Format != FormatQ:
		return 0
	case k.qMatVecB != nil && bFits(w.Q, w.K):
		return 1 / (2 * bMaxT)
	case qFast(w.Q, w.K):
		return 1 / (65534 * 65536)
	}
	return 0
}

func checkRef(t *testing.T, got []float32, want, mag, qbound []float64, res float64) {
	t.Helper()
	bad := 0
	var se, sw float64
	for i := range got {
		tol := 2e-6*mag[i] + 1e-30
		if res != 0 {
			tol += res * qbound[i]
		}
		d := math.Abs(float64(got[i]) - want[i])
		se += d * d
		sw += want[i] * want[i]
		if !(d <= tol) {
			if bad < 5 {
				t.Errorf("out[%d]: got %.7g want %.7g (|diff| %.3g > tol %.3g) NOT OK", i, got[i], want[i], d, tol)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d outputs out of tolerance; nmse %.3g", bad, len(got), se/max(sw, 1e-300))
	}
}

// kernelSets returns the pure-Go set and every asm set this machine runs.
func kernelSets() []*kernelSet {
	s := []*kernelSet{&kernGo}
	for _, k := range asmSets {
		if k.usable() {
			s = append(s, k)
		}
	}
	return s
}

func TestMatMul(t *testing.T) {
	smallBlocks(t)
	r := rand.New(rand.NewPCG(3, 4))
	p := NewPool(2)
	defer p.Close()
	for _, tc := range mmCases() {
		w := randWeight(r, tc.f, tc.N, tc.K, tc.bits, tc.gs)
		x := randVec(r, tc.L*tc.K)
		want, mag, qb := ref(w, x, tc.L)
		var first []float32
		for _, ks := range kernelSets() {
			t.Run(tc.name+"/k="+ks.name, func(t *testing.T) {
				defer useKernels(ks)()
				got := make([]float32, tc.L*tc.N)
				p.MatMul(got, x, tc.L, forKernels(ks, w))
				res := 0.0
				if tc.L < deqMinL {
					res = actRes(ks, w)
				}
				checkRef(t, got, want, mag, qb, res)
				if first == nil {
					first = got
					return
				}
				// asm against Go: the same integer sums, float order differs.
				for i := range got {
					if d := math.Abs(float64(got[i] - first[i])); d > 4e-6*mag[i]+1e-30 {
						t.Fatalf("out[%d]: %s %g, go %g", i, ks.name, got[i], first[i])
					}
				}
			})
		}
	}
}

// useKernels makes MatMul use ks until the returned func is called.
func useKernels(ks *kernelSet) (restore func()) {
	old := kern
	kern = *ks
	return func() { kern = old }
}

func TestDisableAsm(t *testing.T) {
	restore := disableAsm()
	if kern.name != "go" {
		t.Errorf("disableAsm: kernels %q", kern.name)
	}
	restore()
	t.Logf("kernels: %s", kern.name)
}

// TestMatMulQError reports the int16 activation path's typical error on a real
// shape: the nmse against the float64 reference stays far inside the bound.
func TestMatMulQError(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	p := NewPool(2)
	defer p.Close()
	for _, bits := range []int{4, 8} {
		w := randWeight(r, FormatQ, 64, 2048, bits, 64)
		x := randVec(r, 2048)
		want, _, _ := ref(w, x, 1)
		got := make([]float32, 64)
		p.MatMul(got, x, 1, w)
		var se, sw float64
		for i := range got {
			d := float64(got[i]) - want[i]
			se, sw = se+d*d, sw+want[i]*want[i]
		}
		if nmse := se / sw; nmse > 1e-12 {
			t.Errorf("q%d: nmse %.3g > 1e-12", bits, nmse)
		} else {
			t.Logf("q%d: nmse %.3g (relative rms error %.2g)", bits, nmse, math.Sqrt(nmse))
		}
	}
}

func TestMatMulAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	p := NewPool(2)
	defer p.Close()
	for _, tc := range []struct {
		name string
		w    *Weight
		L    int
	}{
		{"q4/L=1", randWeight(r, FormatQ, 256, 512, 4, 64), 1},
		{"q8/L=1", randWeight(r, FormatQ, 256, 512, 8, 64), 1},
		{"q4/L=9", randWeight(r, FormatQ, 256, 512, 4, 64), 9},
		{"q8/L=20", randWeight(r, FormatQ, 256, 512, 8, 64), 20},
		{"q4/L=29", randWeight(r, FormatQ, 96, 2048, 4, 64), 29},
		{"f16/L=1", randWeight(r, FormatF16, 256, 512, 0, 0), 1},
		{"bf16/L=5", randWeight(r, FormatBF16, 256, 512, 0, 0), 5},
		{"f16/L=20", randWeight(r, FormatF16, 100, 300, 0, 0), 20},  // panels (doFPanel)
		{"bf16/L=29", randWeight(r, FormatBF16, 96, 512, 0, 0), 29}, // panels
		{"f32/L=17", randWeight(r, FormatF32, 64, 257, 0, 0), 17},   // panels
		{"q4-prepared/L=1", randWeight(r, FormatQ, 258, 512, 4, 64), 1},
		{"q8-prepared/L=3", randWeight(r, FormatQ, 256, 512, 8, 64), 3},
		{"q4-prepared/L=29", randWeight(r, FormatQ, 96, 2048, 4, 64), 29},
		{"q4-prepared-slabs/L=1", randWeight(r, FormatQ, 12, 8192, 4, 64), 1},
		{"q8-prepared-slabs/L=2", randWeight(r, FormatQ, 12, 8192, 8, 64), 2},
	} {
		if strings.Contains(tc.name, "prepared") {
			Prepare(tc.w)
		}
		x := randVec(r, tc.L*tc.w.K)
		dst := make([]float32, tc.L*tc.w.N)
		p.MatMul(dst, x, tc.L, tc.w) // grow the scratch
		if a := testing.AllocsPerRun(20, func() { p.MatMul(dst, x, tc.L, tc.w) }); a != 0 {
			t.Errorf("%s: %v allocs per MatMul", tc.name, a)
		}
	}
}

// TestDotQFloat checks the exact float path (the one bits other than 4 and 8
// take) on every width, including 4 and 8, against the float64 reference to
// float32 rounding, with no activation quantization error.
func TestDotQFloat(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, gs := range []int{32, 64, 128} {
			w := randWeight(r, FormatQ, 5, 3*gs, bits, gs)
			x := randVec(r, w.K)
			want, mag, qb := ref(w, x, 1)
			got := make([]float32, w.N)
			for n := range got {
				got[n] = dotQFloat(w.Q, n, w.K, x)
			}
			t.Run(fmt.Sprintf("bits=%d/gs=%d", bits, gs), func(t *testing.T) {
				checkRef(t, got, want, mag, qb, 0)
			})
		}
	}
}

// TestDequantPanelAsm checks the panel dequantization kernels bit for bit
// against QMatrix.dequantPanel (itself checked against DequantRow through
// TestMatMul's prefill cases), on both 16-row halves and several groups.
func TestDequantPanelAsm(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, ks := range kernelSets() {
		if ks.dPanel == nil {
			continue
		}
		for _, bits := range []int{2, 3, 4, 5, 6, 8} {
			for _, gs := range []int{32, 64, 128} {
				K := 5 * gs
				w := randWeight(r, FormatQ, 2*panelN, K, bits, gs)
				for _, c := range []struct{ n0, k0, kn int }{{0, 0, K}, {panelN, gs, 3 * gs}, {1, 4 * gs, gs}} {
					want := make([]float32, panelN*c.kn)
					w.Q.dequantPanel(want, c.n0, K, c.k0, c.kn)
					got := make([]float32, panelN*c.kn)
					if !ks.dPanel(got, w.Q, c.n0, K, c.k0, c.kn) {
						if bits == 4 || bits == 8 {
							t.Fatalf("%s: q%d gs=%d not taken", ks.name, bits, gs)
						}
						continue
					}
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s q%d gs=%d %+v: p[%d] = %g, want %g", ks.name, bits, gs, c, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestWidenPanel checks Weight.widenPanel against Row, and each kernel set's
// fPanel bit for bit against widenPanel: both 16-row halves, panel steps at
// K's start, middle and ragged end, odd and even element counts, and the
// awkward values (zeros, subnormals, the largest, infinities) among the
// random ones.
func TestWidenPanel(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	odd := map[Format][]uint16{
		FormatF16:  {0x0000, 0x8000, 0x0001, 0x83ff, 0x0400, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x3c00},
		FormatBF16: {0x0000, 0x8000, 0x0001, 0x807f, 0x0080, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x3f80},
	}
	for _, f := range []struct {
		f    Format
		name string
	}{{FormatF32, "f32"}, {FormatF16, "f16"}, {FormatBF16, "bf16"}} {
		for _, K := range []int{1, 7, 64, 255, 256, 257, 300} {
			w := randWeight(r, f.f, 2*panelN+1, K, 0, 0)
			if vs := odd[f.f]; vs != nil {
				for i := 0; i < len(w.U16); i += 3 {
					w.U16[i] = vs[r.IntN(len(vs))]
				}
			} else {
				for i := 0; i < len(w.F32); i += 3 {
					w.F32[i] = []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1.1754942e-38, math.MaxFloat32, float32(math.Inf(-1))}[r.IntN(6)]
				}
			}
			row := make([]float32, K)
			for _, c := range []struct{ n0, k0, kn int }{{0, 0, K}, {panelN + 1, 0, K}, {1, K / 3, K - K/3}, {panelN, K - 1, 1}, {3, K / 2, (K + 1) / 4}} {
				if c.kn == 0 {
					continue
				}
				want := make([]float32, panelN*c.kn)
				w.widenPanel(want, c.n0, c.k0, c.kn)
				for i := range panelN {
					w.Row(row, c.n0+i)
					for j := range c.kn {
						if math.Float32bits(want[j*panelN+i]) != math.Float32bits(row[c.k0+j]) {
							t.Fatalf("%s K=%d %+v: widenPanel row %d element %d = %g, Row has %g", f.name, K, c, i, c.k0+j, want[j*panelN+i], row[c.k0+j])
						}
					}
				}
				for _, ks := range kernelSets() {
					if ks.fPanel == nil {
						continue
					}
					got := make([]float32, panelN*c.kn+1)
					got[len(got)-1] = 7
					ks.fPanel(got[:panelN*c.kn], w, c.n0, c.k0, c.kn)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s %s K=%d %+v: p[%d] = %g, want %g", ks.name, f.name, K, c, i, got[i], want[i])
						}
					}
					if got[len(got)-1] != 7 {
						t.Fatalf("%s %s K=%d %+v: wrote past the panel", ks.name, f.name, K, c)
					}
				}
			}
		}
	}
}

// TestMatMulFPanel checks f32, f16 and bf16 prefill (the panel path where a
// kernel set has one: see doFPanel) against the float64 reference at the
// panel's edges with the real panel step: N around multiples of panelN (the
// rows past the last panel take the tiles), K around multiples of panelKC
// (a ragged last step, odd K), L around the token tile and deqMinL.
func TestMatMulFPanel(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	p := NewPool(2)
	defer p.Close()
	for _, f := range []struct {
		f    Format
		name string
	}{{FormatF16, "f16"}, {FormatBF16, "bf16"}, {FormatF32, "f32"}} {
		for _, s := range []struct{ N, K, L int }{
			{32, 256, 16}, {33, 257, 17}, {31, 256, 33}, {64, 255, 16}, {65, 300, 24},
			{96, 512, 17}, {40, 513, 33}, {70, 96, 512}, {33, 257, 512}, {32, 1000, 29},
		} {
			w := randWeight(r, f.f, s.N, s.K, 0, 0)
			x := randVec(r, s.L*s.K)
			want, mag, _ := ref(w, x, s.L)
			for _, ks := range kernelSets() {
				t.Run(fmt.Sprintf("%s/N=%d/K=%d/L=%d/k=%s", f.name, s.N, s.K, s.L, ks.name), func(t *testing.T) {
					defer useKernels(ks)()
					var pt mmTask
					panel := p.plan(&pt, nil, nil, s.L, w) == actPanel
					if wantPanel := ks.pTile != nil && ks.fPanel != nil && s.N >= panelN; panel != wantPanel {
						t.Fatalf("panel path %v, want %v", panel, wantPanel)
					}
					got := make([]float32, s.L*s.N)
					for i := range got {
						got[i] = float32(math.NaN()) // every output must be written
					}
					p.MatMul(got, x, s.L, w)
					checkRef(t, got, want, mag, nil, 0)
				})
			}
		}
	}
}

// TestMatMuls runs weights that share x through MatMuls and checks each output
// against the reference and against MatMul of that weight alone; the decode
// cases with one kernel and activation format must take the fused path (row
// counts off the four-row blocks, more threads than weights), the rest MatMul
// per weight.
func TestMatMuls(t *testing.T) {
	type wspec struct {
		f        Format
		bits, gs int
		N        int
	}
	q4 := func(N int) wspec { return wspec{FormatQ, 4, 64, N} }
	for _, tc := range []struct {
		name  string
		K, L  int
		ws    []wspec
		fused bool
	}{
		{"q4/qkv", 512, 1, []wspec{q4(12), q4(7), q4(6)}, true},
		{"q4/gate-up", 1024, 1, []wspec{q4(33), q4(33)}, true},
		{"q8/gs32", 256, 1, []wspec{{FormatQ, 8, 32, 64}, {FormatQ, 8, 32, 16}, {FormatQ, 8, 32, 17}}, true},
		{"q5", 192, 1, []wspec{{FormatQ, 5, 64, 9}, {FormatQ, 5, 64, 4}}, true},
		{"bf16", 64, 1, []wspec{{FormatBF16, 0, 0, 10}, {FormatBF16, 0, 0, 5}}, true},
		{"f32/four", 40, 1, []wspec{{FormatF32, 0, 0, 9}, {FormatF32, 0, 0, 3}, {FormatF32, 0, 0, 3}, {FormatF32, 0, 0, 4}}, true},
		{"q4+q8", 512, 1, []wspec{q4(8), {FormatQ, 8, 64, 8}}, false},
		{"q4/gs64+gs128", 512, 1, []wspec{q4(8), {FormatQ, 4, 128, 8}}, false},
		{"q4/L=3", 512, 3, []wspec{q4(12), q4(4)}, false},
	} {
		r := rand.New(rand.NewPCG(11, uint64(tc.K)))
		base := make([]*Weight, len(tc.ws))
		for i, s := range tc.ws {
			base[i] = randWeight(r, s.f, s.N, tc.K, s.bits, s.gs)
		}
		x := randVec(r, tc.L*tc.K)
		for _, ks := range kernelSets() {
			for _, threads := range []int{2, 3} {
				t.Run(fmt.Sprintf("%s/k=%s/threads=%d", tc.name, ks.name, threads), func(t *testing.T) {
					defer useKernels(ks)()
					p := NewPool(threads)
					defer p.Close()
					ws := make([]*Weight, len(base))
					dst, alone := make([][]float32, len(base)), make([][]float32, len(base))
					for i, w := range base {
						ws[i] = forKernels(ks, w)
						dst[i], alone[i] = make([]float32, tc.L*w.N), make([]float32, tc.L*w.N)
						p.MatMul(alone[i], x, tc.L, ws[i])
					}
					if tc.L == 1 {
						if got := p.planAll(dst, x, ws); got != tc.fused {
							t.Fatalf("planAll = %v, want %v", got, tc.fused)
						}
						clear(p.mm[:])
					}
					p.MatMuls(dst, x, tc.L, ws)
					for i, w := range ws {
						want, mag, qb := ref(base[i], x, tc.L)
						checkRef(t, dst[i], want, mag, qb, actRes(ks, w))
						for j := range dst[i] {
							if d := math.Abs(float64(dst[i][j] - alone[i][j])); d > 4e-6*mag[j]+1e-30 {
								t.Fatalf("weight %d out[%d]: MatMuls %g, MatMul %g", i, j, dst[i][j], alone[i][j])
							}
						}
					}
				})
			}
		}
	}
}

// TestSlabWidth checks where rows are cut into K-slabs (blocked.go): the
// Llama-3.2-1B down projection (K = 8192) in slabs of 2048 (4-bit) or 1024
// (8-bit), the K = 2048 matrices in one, and at least one stripe a slab.
func TestSlabWidth(t *testing.T) {
	for _, c := range []struct{ bits, gs, K, want int }{
		{4, 64, 2048, 2048}, {4, 64, 6144, 6144}, {4, 64, 8192, 2048}, {4, 32, 14336, 2048},
		{4, 128, 8192, 2048}, {4, 256, 8192, 4096}, {8, 64, 4096, 4096}, {8, 64, 8192, 1024},
		{8, 128, 8192, 2048},
	} {
		if got := slabWidth(&QMatrix{Bits: c.bits, GroupSize: c.gs}, c.K); got != c.want {
			t.Errorf("q%d gs=%d K=%d: slabs of %d columns, want %d", c.bits, c.gs, c.K, got, c.want)
		}
	}
}

// TestMatMulSlabs runs weights in K-slabs of one stripe (see lowerBlockL1):
// two to five slabs, the last one whole, short of a stripe or of one group;
// four-row blocks and single rows; a decode step, short batches and a
// prefill; 2 and 3 threads. Each must match the float64 reference and the same
// weight in one slab.
func TestMatMulSlabs(t *testing.T) {
	var ks *kernelSet
	for _, k := range kernelSets() {
		if k.blocked {
			ks = k
		}
	}
	if ks == nil {
		t.Skip("no kernels for the blocked layout on this machine: K-slabs are theirs alone")
	}
	defer useKernels(ks)()
	r := rand.New(rand.NewPCG(31, 32))
	for _, c := range []struct{ bits, gs, K, slabs int }{
		{4, 32, 1024, 2}, {4, 32, 1024 + 384, 3}, {4, 64, 2048 + 640, 3}, {4, 32, 4*512 + 256, 5},
		{8, 32, 2*512 + 192, 3}, {8, 128, 4096 + 256, 3}, {8, 64, 3 * 1024, 3},
	} {
		for _, s := range []struct{ N, L int }{{1, 1}, {5, 1}, {8, 1}, {13, 1}, {9, 3}, {6, 16}} {
			w := randWeight(r, FormatQ, s.N, c.K, c.bits, c.gs)
			x := randVec(r, s.L*c.K)
			want, mag, qb := ref(w, x, s.L)
			one := forKernels(ks, w)
			old := blockL1
			blockL1 = 1
			sl := forKernels(ks, w)
			blockL1 = old
			if len(one.Q.slabs) != 1 || len(sl.Q.slabs) != c.slabs {
				t.Fatalf("q%d gs=%d K=%d: %d and %d K-slabs, want 1 and %d", c.bits, c.gs, c.K, len(one.Q.slabs), len(sl.Q.slabs), c.slabs)
			}
			for _, threads := range []int{2, 3} {
				t.Run(fmt.Sprintf("q%d/gs=%d/K=%d/N=%d/L=%d/threads=%d", c.bits, c.gs, c.K, s.N, s.L, threads), func(t *testing.T) {
					p := NewPool(threads)
					defer p.Close()
					a, b := make([]float32, s.L*s.N), make([]float32, s.L*s.N)
					p.MatMul(a, x, s.L, one)
					p.MatMul(b, x, s.L, sl)
					res := 0.0
					if s.L < deqMinL {
						res = actRes(ks, w)
					}
					checkRef(t, b, want, mag, qb, res)
					for i := range b {
						if d := math.Abs(float64(b[i] - a[i])); d > 4e-6*mag[i]+1e-30 {
							t.Fatalf("out[%d]: in slabs %g, in one %g", i, b[i], a[i])
						}
					}
				})
			}
		}
	}
}
