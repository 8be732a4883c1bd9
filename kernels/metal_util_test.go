package kernels

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/ingot-llm/ingot/internal/msl/msltest"
	"github.com/ingot-llm/ingot/kernels/cpu"
)

// testMetal returns a Metal backend on the MSL interpreter (strict mode). It
// skips the test when clang is missing, and fails it when CI=true. With
// INGOT_TEST_BACKEND=cuda (or metal) it is that device instead: the op tests
// then run on an NVIDIA (or Apple) GPU.
func testMetal(t testing.TB) *Metal {
	t.Helper()
	if name := os.Getenv("INGOT_TEST_BACKEND"); name != "" && name != "metal-emu" {
		b, err := openMetal(name, 2)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b.(*Metal)
	}
	dev := msltest.Open(t, ShaderFiles()...)
	m, err := NewMetal(dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// randn returns n pseudo-normal floats, deterministic in seed.
func randn(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// put returns a device f32 tensor holding x.
func put(m *Metal, x []float32, shape ...int) *Tensor {
	t := m.New(shape...)
	if t.Len() != len(x) {
		panic(fmt.Sprintf("put: %d floats for %v", len(x), shape))
	}
	if err := writeBuf(bufOf("put", t), t.Off, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*len(x))); err != nil {
		panic(err)
	}
	return t
}

// get downloads t.
func get(t testing.TB, m *Metal, x *Tensor) []float32 {
	t.Helper()
	out := make([]float32, x.Len())
	if err := m.Download(out, x); err != nil {
		t.Fatal(err)
	}
	return out
}

// tol is a per-op, per-dtype tolerance: normalized mean squared error
// Σ(got−want)²/Σwant² and the largest absolute difference.
type tol struct {
	NMSE, MaxAbs float64
}

// errStats measures got against want.
func errStats(got, want []float32) (nmse, maxAbs float64) {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
		if math.IsNaN(d) {
			maxAbs = math.Inf(1)
		}
		maxAbs = max(maxAbs, math.Abs(d))
	}
	if den == 0 {
		return num, maxAbs
	}
	return num / den, maxAbs
}

// closeTo fails t unless got matches want within tl, printing the first five
// elements beyond MaxAbs side by side (llm.c check_tensor).
func closeTo(t testing.TB, got, want []float32, tl tol) (nmse, maxAbs float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d values, want %d", len(got), len(want))
	}
	nmse, maxAbs = errStats(got, want)
	if nmse <= tl.NMSE && maxAbs <= tl.MaxAbs {
		return
	}
	var sb strings.Builder
	shown := 0
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if d > tl.MaxAbs || math.IsNaN(d) {
			fmt.Fprintf(&sb, "\n\t[%d] got %-14.8g want %-14.8g diff %.3g NOT OK", i, got[i], want[i], d)
			if shown++; shown == 5 {
				break
			}
		}
	}
	t.Errorf("NMSE %.3g (tol %.3g), max-abs %.3g (tol %.3g)%s", nmse, tl.NMSE, maxAbs, tl.MaxAbs, sb.String())
	return
}

// hostQuant returns a random MLX affine (N, K) host weight of the given bits
// and group size.
func hostQuant(dt DType, N, K, G int, seed uint64) *Tensor {
	r := rand.New(rand.NewPCG(seed, 1))
	words := make([]uint32, N*K*dt.Bits()/32)
	for i := range words {
		words[i] = r.Uint32()
	}
	// Like real checkpoints: scales spread the codes over about [−1, 1] and the
	// bias centres them (b ≈ −s·mid), so outputs stay O(√K).
	s, b := randn(N*K/G, seed+1), randn(N*K/G, seed+2)
	mid := float32(int(1)<<dt.Bits()-1) / 2
	for i := range s {
		s[i] = (0.5 + 0.25*float32(math.Abs(float64(s[i])))) / mid
		b[i] = -s[i]*mid + 0.05*b[i]
	}
	return &Tensor{DType: dt, Shape: []int{N, K}, Data: unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), 4*len(words)),
		Scales: FromF32(s, N, K/G), Biases: FromF32(b, N, K/G), GroupSize: G}
}

// hostFloat returns a random (N, K) host weight in f32, f16 or bf16 and its
// exact f32 values.
func hostFloat(dt DType, N, K int, seed uint64) (*Tensor, []float32) {
	w := randn(N*K, seed)
	switch dt {
	case DTypeF32:
		return FromF32(w, N, K), w
	case DTypeF16, DTypeBF16:
		h := make([]uint16, N*K)
		for i, v := range w {
			if dt == DTypeF16 {
				h[i] = cpu.F32ToF16(v)
				w[i] = cpu.F16ToF32(h[i])
			} else {
				h[i] = cpu.F32ToBF16(v)
				w[i] = cpu.BF16ToF32(h[i])
			}
		}
		return &Tensor{DType: dt, Shape: []int{N, K}, Data: unsafe.Slice((*byte)(unsafe.Pointer(&h[0])), 2*len(h))}, w
	}
	panic("hostFloat: " + dt.String())
}

// dequant returns the f32 values of a host weight, exactly as the CPU backend
// dequantizes them.
func dequant(t *Tensor) []float32 {
	w, err := hostWeight(t)
	if err != nil {
		panic(err)
	}
	out := make([]float32, w.N*w.K)
	for n := range w.N {
		w.Row(out[n*w.K:(n+1)*w.K], n)
	}
	return out
}

// cpuRef runs f on a fresh CPU backend (the reference).
func cpuRef(f func(c *CPU)) {
	c := NewCPU(2)
	defer c.Close()
	f(c)
	_ = c.Sync(context.Background())
}
