package cpu

import (
	"math"
	"testing"
)

// ulps returns how many float32 values lie between a and b (0 for equal values,
// ±0 alike; both NaN counts as equal, one NaN as far apart).
func ulps(a, b float32) int64 {
	if a != a || b != b {
		if a != a && b != b {
			return 0
		}
		return math.MaxInt64
	}
	ord := func(f float32) int64 {
		u := int64(math.Float32bits(f))
		if u >= 1<<31 {
			return (1 << 31) - u
		}
		return u
	}
	d := ord(a) - ord(b)
	return max(d, -d)
}

// actInputs returns a dense sweep of float32 values: every 509th bit pattern
// (all exponents, both signs), a fine grid over [-130, 130], and the edges.
func actInputs() []float32 {
	var xs []float32
	for u := uint64(0); u < 1<<32; u += 509 {
		xs = append(xs, math.Float32frombits(uint32(u)))
	}
	for x := float32(-130); x <= 130; x += 1.0 / 1024 {
		xs = append(xs, x, math.Nextafter32(x, 200))
	}
	for _, x := range []float64{
		0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, math.Ln2 / 2, -math.Ln2 / 2,
		math.Inf(1), math.Inf(-1), math.NaN(), -math.NaN(),
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
		0x1p-126, -0x1p-126, 0x1p-24, -0x1p-24, 0x1p24, -0x1p24,
		-87.3, -88.7, -89, -100, -103.9, -104, -104.1, -109, -110, -119.9, -120, -120.1, -1e4, -1e20, -3e38,
		88.7, 89, 100, 120, 121, 1e4, 1e20, 3e38,
		-4, -5, -5.5, -6, -8, -10, -12, -13, -14, -20, -30,
	} {
		xs = append(xs, float32(x))
	}
	return xs
}

// TestGLU checks the vector SwiGLU and GeGLUTanh (each instruction set this
// machine has) against the float64 functions, element by element: at most 2
// ulp over the whole float32 range, NaN where the reference is NaN, and the same
// result for every length and alignment (the Go loop takes the tail).
func TestGLU(t *testing.T) {
	xs := actInputs()
	ones := make([]float32, len(xs))
	for i := range ones {
		ones[i] = 1
	}
	cases := []struct {
		name string
		glu  func(dst, gate, up []float32)
		ref  func(float32) float32
		asm  bool
	}{
		{"silu", SwiGLU, SiLU, true},
		{"gelu_tanh", GeGLUTanh, GELUTanh, true},
		{"gelu", GeGLU, GELU, false},
	}
	for _, set := range actSets() {
		for _, c := range cases {
			t.Run(set.name+"/"+c.name, func(t *testing.T) {
				defer set.use()()
				if c.asm && set.name != "go" { // else the float64 functions themselves run
					got := make([]float32, len(xs))
					c.glu(got, xs, ones)
					var worst int64
					var at int
					for i, x := range xs {
						if d := ulps(got[i], c.ref(x)); d > worst {
							worst, at = d, i
						}
					}
					t.Logf("%d inputs, max %d ulp (at %g)", len(xs), worst, xs[at])
					if worst > 2 {
						t.Errorf("%s(%g) = %g, float64 reference %g: %d ulp apart", c.name, xs[at], got[at], c.ref(xs[at]), worst)
					}
				}
				// In place, every length to 40, unaligned: the same as one long call.
				for n := range 41 {
					g, u, want := make([]float32, n), make([]float32, n), make([]float32, n)
					for i := range n {
						g[i], u[i] = 0.37*float32(i)-7, 1-0.1*float32(i)
						want[i] = c.ref(g[i]) * u[i]
					}
					c.glu(g, g, u)
					for i := range n {
						if ulps(g[i], want[i]) > 2 {
							t.Fatalf("n=%d: dst[%d] = %g, want %g", n, i, g[i], want[i])
						}
					}
				}
			})
		}
	}
}

// BenchmarkGLU runs the gated activations over one Llama-3.2-1B MLP row
// (F = 8192) with each kernel set.
func BenchmarkGLU(b *testing.B) {
	const n = 8192
	g, u := make([]float32, n), make([]float32, n)
	for i := range g {
		g[i], u[i] = float32(i%97)/8-6, 1
	}
	dst := make([]float32, n)
	for _, set := range actSets() {
		for _, c := range []struct {
			name string
			glu  func(dst, gate, up []float32)
		}{{"silu", SwiGLU}, {"gelu_tanh", GeGLUTanh}} {
			b.Run("act="+c.name+"/set="+set.name, func(b *testing.B) {
				defer set.use()()
				b.SetBytes(3 * 4 * n)
				for b.Loop() {
					c.glu(dst, g, u)
				}
			})
		}
	}
}
