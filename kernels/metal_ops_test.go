package kernels

import (
	"fmt"
	"math"
	"testing"
	"unsafe"
)

// TestArgsLayout pins the Go mirrors of shaders/common.h: the sizes written
// beside each struct there.
func TestArgsLayout(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"rmsnorm_args", unsafe.Sizeof(rmsnormArgs{}), 8},
		{"matvec_args", unsafe.Sizeof(matvecArgs{}), 16},
		{"matmul_args", unsafe.Sizeof(matmulArgs{}), 16},
		{"embed_args", unsafe.Sizeof(embedArgs{}), 16},
		{"rope_args", unsafe.Sizeof(ropeArgs{}), 24},
		{"attn_args", unsafe.Sizeof(attnArgs{}), 64},
		{"attn_reduce_args", unsafe.Sizeof(attnReduceArgs{}), 20},
		{"add_args", unsafe.Sizeof(addArgs{}), 8},
		{"unary_args", unsafe.Sizeof(unaryArgs{}), 8},
		{"argmax_args", unsafe.Sizeof(argmaxArgs{}), 16},
		{"topk_args", unsafe.Sizeof(topkArgs{}), 16},
	} {
		if c.got != c.want {
			t.Errorf("%s: Go mirror is %d bytes, common.h says %d", c.name, c.got, c.want)
		}
	}
}

func TestMetalRoPE(t *testing.T) {
	m := testMetal(t)
	for _, c := range []struct {
		L, pos, heads, Dh, rot int
		scale                  float32
	}{
		{1, 0, 1, 2, 2, 1},
		{1, 5, 4, 16, 16, 1},
		{7, 3, 2, 32, 32, 1},
		{3, 100, 3, 64, 32, 1},    // partial rotary (Phi-style)
		{2, 4000, 2, 128, 128, 1}, // late positions: large angles
		{1, 17, 8, 32, 24, 1.2},   // yarn-like scale, half not a power of two
		{2, 1, 1, 1024, 1024, 1},  // half = 512: threads stride twice
	} {
		t.Run(fmt.Sprintf("L=%d/pos=%d/heads=%d/Dh=%d/rot=%d", c.L, c.pos, c.heads, c.Dh, c.rot), func(t *testing.T) {
			inv := make([]float32, c.rot/2)
			for j := range inv {
				inv[j] = float32(1 / math.Pow(10000, float64(2*j)/float64(c.rot)))
			}
			p := &RoPE{HeadDim: c.Dh, RotaryDim: c.rot, InvFreq: inv, Scale: c.scale}
			cols := c.heads * c.Dh
			x := randn(c.L*cols, 5)
			want := append([]float32(nil), x...)
			cpuRef(func(cp *CPU) { cp.RoPE(FromF32(want, c.L, cols), c.pos, p) })
			xd := put(m, x, c.L, cols)
			m.RoPE(xd, c.pos, p)
			n, a := closeTo(t, get(t, m, xd), want, tol{NMSE: 1e-12, MaxAbs: 2e-6})
			t.Logf("NMSE %.2g max-abs %.2g", n, a)
		})
	}
}

func TestMetalEmbed(t *testing.T) {
	m := testMetal(t)
	for _, dt := range []DType{DTypeF32, DTypeF16, DTypeBF16, DTypeQ2, DTypeQ3, DTypeQ4, DTypeQ5, DTypeQ6, DTypeQ8} {
		for _, sh := range [][3]int{{5, 32, 32}, {9, 64, 64}, {40, 256, 128}, {3, 257, 0}} { // V, D, group
			V, D, G := sh[0], sh[1], sh[2]
			if dt.Quantized() == (G == 0) {
				continue
			}
			t.Run(fmt.Sprintf("w=%s/V=%d/D=%d", dt, V, D), func(t *testing.T) {
				var hw *Tensor
				if dt.Quantized() {
					hw = hostQuant(dt, V, D, G, 11)
				} else {
					hw, _ = hostFloat(dt, V, D, 11)
				}
				tokens := []int32{0, int32(V - 1), 2, 2, int32(V / 2)}
				scale := float32(math.Sqrt(float64(D))) // Gemma's scale; exercises the multiply
				want := make([]float32, len(tokens)*D)
				cpuRef(func(cp *CPU) {
					w, err := cp.Upload(hw)
					if err != nil {
						t.Fatal(err)
					}
					cp.Embed(FromF32(want, len(tokens), D), w, tokens, scale)
				})
				w, err := m.Upload(hw)
				if err != nil {
					t.Fatal(err)
				}
				y := m.New(len(tokens), D)
				m.Embed(y, w, tokens, scale)
				closeTo(t, get(t, m, y), want, tol{NMSE: 0, MaxAbs: 0}) // a gather: bit-exact
			})
		}
	}
	t.Run("tokens>1024", func(t *testing.T) { // past setBytes' 4 kB: a transient buffer
		hw, wf := hostFloat(DTypeF32, 7, 8, 3)
		tokens := make([]int32, 1500)
		want := make([]float32, len(tokens)*8)
		for i := range tokens {
			tokens[i] = int32(i % 7)
			copy(want[i*8:], wf[(i%7)*8:(i%7+1)*8])
		}
		w, _ := m.Upload(hw)
		y := m.New(len(tokens), 8)
		m.Embed(y, w, tokens, 1)
		closeTo(t, get(t, m, y), want, tol{})
	})
}

func TestMetalElementwise(t *testing.T) {
	m := testMetal(t)
	for _, n := range []int{1, 31, 255, 256, 257, 768 * 3} {
		a, b := randn(n, 1), randn(n, 2)
		for i := range a {
			a[i] *= 4 // reach the tails of the activations
		}
		t.Run(fmt.Sprintf("glu/n=%d", n), func(t *testing.T) {
			for act, name := range gluNames {
				want := make([]float32, n)
				cpuRef(func(cp *CPU) { cp.GLU(FromF32(want, 1, n), FromF32(a, 1, n), FromF32(b, 1, n), Act(act)) })
				g := put(m, a, 1, n)
				m.GLU(g, g, put(m, b, 1, n), Act(act)) // in place, as the model runs it
				tl := tol{NMSE: 1e-13, MaxAbs: 2e-6}
				if Act(act) == ActGELUTanh || Act(act) == ActSwiGLUClamp {
					// f32 rounds u = 2√(2/π)(x + 0.044715x³) (or 1.702x) by ~|u|·2⁻²⁴
					// and e⁻ᵘ magnifies it: in the far negative tail (n=1 draws
					// x ≈ −9, a result ~1e-37 or ~1e-6) the shader is ~2e-6
					// relative off the float64 reference.
					tl.NMSE = 1e-10
				}
				nm, ma := closeTo(t, get(t, m, g), want, tl)
				t.Logf("%s: NMSE %.2g max-abs %.2g", name, nm, ma)
			}
		})
		t.Run(fmt.Sprintf("softcap/n=%d", n), func(t *testing.T) {
			for _, c := range []float32{0.5, 3, 30} {
				want := append([]float32(nil), a...)
				cpuRef(func(cp *CPU) { cp.Softcap(FromF32(want, 1, n), c) })
				x := put(m, a, 1, n)
				m.Softcap(x, c)
				closeTo(t, get(t, m, x), want, tol{NMSE: 1e-13, MaxAbs: 2e-6})
			}
		})
	}
	for _, sh := range [][2]int{{1, 1}, {3, 33}, {7, 96}, {2, 300}} {
		L, D := sh[0], sh[1]
		t.Run(fmt.Sprintf("add/L=%d/D=%d", L, D), func(t *testing.T) {
			a, b, bias := randn(L*D, 1), randn(L*D, 2), randn(D, 3)
			want, wantB := make([]float32, L*D), make([]float32, L*D)
			cpuRef(func(cp *CPU) {
				cp.Add(FromF32(want, L, D), FromF32(a, L, D), FromF32(b, L, D))
				cp.Add(FromF32(wantB, L, D), FromF32(a, L, D), FromF32(bias, D))
			})
			x := put(m, a, L, D)
			y := m.New(L, D)
			m.Add(y, x, put(m, b, L, D))
			bd, err := m.Upload(FromF32(bias, D)) // biases are uploaded weights
			if err != nil {
				t.Fatal(err)
			}
			m.Add(x, x, bd) // in place with a one-row broadcast
			closeTo(t, get(t, m, y), want, tol{})
			closeTo(t, get(t, m, x), wantB, tol{})
		})
		t.Run(fmt.Sprintf("copyrows/L=%d/D=%d", L, D), func(t *testing.T) {
			src := randn(L*D, 4)
			const rows = 12
			want := make([]float32, rows*D)
			cpuRef(func(cp *CPU) { cp.CopyRows(FromF32(want, rows, D), FromF32(src, L, D), rows-L-1) })
			dst := m.New(rows, D)
			m.CopyRows(dst, put(m, src, L, D), rows-L-1)
			closeTo(t, get(t, m, dst), want, tol{})
		})
	}
}

func TestMetalArgmax(t *testing.T) {
	m := testMetal(t)
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	for _, c := range []struct {
		name string
		x    []float32
	}{
		{"one", []float32{3}},
		{"ties-first", []float32{1, 5, 2, 5, 5}},
		{"nan-skipped", []float32{nan, 1, nan, 2, nan}},
		{"all-nan", []float32{nan, nan}},
		{"all-neg-inf", []float32{-inf, -inf, -inf}},
		{"inf", []float32{1, inf, 3}},
		{"random-33", randn(33, 1)},
		{"random-4096", randn(4096, 2)},   // tinycode's V
		{"random-50000", randn(50000, 3)}, // threads stride many times
	} {
		t.Run(c.name, func(t *testing.T) {
			// Plant the maximum late so strides and the tree are exercised.
			if len(c.x) > 1000 {
				c.x[len(c.x)-7] = 100
				c.x[len(c.x)-3] = 100
			}
			x := put(m, c.x, 1, len(c.x))
			got, err := m.Argmax(x)
			if err != nil {
				t.Fatal(err)
			}
			if want := ArgmaxHost(c.x); got != want {
				t.Errorf("Argmax = %d, want %d", got, want)
			}
			// A row view at an offset, as the model's logits of the last token.
			if len(c.x) > 2 {
				xx := put(m, append(append([]float32(nil), c.x...), c.x...), 2, len(c.x))
				got, err := Argmax(m, xx.Rows(1, 2), nil)
				if err != nil || got != ArgmaxHost(c.x) {
					t.Errorf("Argmax of a row view = %d, %v, want %d", got, err, ArgmaxHost(c.x))
				}
			}
		})
	}
}
