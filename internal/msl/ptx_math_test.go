//go:build linux && (amd64 || arm64)

package msl

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The PTX compat's math (rt/ptx/ingot_math.h) is plain C++ apart from its
// address-space macro, so the test builds it for the host and measures it
// against float64 math: the same source, the same explicit fmas and no
// contraction, so the bounds hold for the PTX too (the GPU test in package
// cuda measures them again on the device).

// mathFns are the functions the shim exposes, by index.
var mathFns = []struct {
	name  string
	ref   func(float64) float64
	bound float64 // max error in ulps, as documented in ingot_math.h
}{
	{"exp", math.Exp, 1},
	{"exp2", math.Exp2, 1},
	{"log", math.Log, 1},
	{"log2", math.Log2, 1},
	{"log10", math.Log10, 1},
	{"sin", math.Sin, 1},
	{"cos", math.Cos, 1},
	{"tan", math.Tan, 2.5},
	{"tanh", math.Tanh, 2},
}

const mathShim = `#include "ingot_math.h"
extern "C" void ingot_math_eval(int fn, const float *x, float *y, long n) {
	for (long i = 0; i < n; i++) {
		float v = x[i], r = 0;
		switch (fn) {
		case 0: r = __ingot_expf(v); break;
		case 1: r = __ingot_exp2f(v); break;
		case 2: r = __ingot_logf(v); break;
		case 3: r = __ingot_log2f(v); break;
		case 4: r = __ingot_log10f(v); break;
		case 5: r = __ingot_sinf(v); break;
		case 6: r = __ingot_cosf(v); break;
		case 7: r = __ingot_tanf(v); break;
		case 8: r = __ingot_tanhf(v); break;
		}
		y[i] = r;
	}
}
`

var (
	mathLibOnce sync.Once
	mathLibFn   uintptr
	mathLibErr  error
)

// hostMath evaluates function fn of mathFns on xs with the host build of
// ingot_math.h.
func hostMath(tb testing.TB, fn int, xs []float32) []float32 {
	tb.Helper()
	mathLibOnce.Do(func() {
		tc, err := findClang("")
		if err != nil {
			mathLibErr = err
			return
		}
		dir, err := os.MkdirTemp("", "ingot-ptx-math-")
		if err != nil {
			mathLibErr = err
			return
		}
		defer os.RemoveAll(dir) // the loaded library stays mapped
		src, so := filepath.Join(dir, "shim.cpp"), filepath.Join(dir, "libshim.so")
		if err := os.WriteFile(src, []byte(mathShim), 0o644); err != nil {
			mathLibErr = err
			return
		}
		out, err := exec.Command(tc.path, "-x", "c++", "-std=c++17", "-O2", "-fPIC", "-shared", "-ffp-contract=off",
			"-I", "rt/ptx", src, "-o", so, "-lm").CombinedOutput()
		if err != nil {
			mathLibErr = fmt.Errorf("build math shim: %v\n%s", err, out)
			return
		}
		h, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			mathLibErr = err
			return
		}
		mathLibFn, mathLibErr = purego.Dlsym(h, "ingot_math_eval")
	})
	if mathLibErr != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatal(mathLibErr)
		}
		tb.Skip(mathLibErr)
	}
	ys := make([]float32, len(xs))
	purego.SyscallN(mathLibFn, uintptr(fn), uintptr(unsafe.Pointer(&xs[0])), uintptr(unsafe.Pointer(&ys[0])), uintptr(len(xs)))
	return ys
}

// ulpErr returns |got − ref| in units of the float32 ulp at ref; 0 when got
// is ref correctly rounded (including infinities and NaN).
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
	if math.IsInf(float64(got), 0) || math.IsNaN(float64(got)) {
		return math.Inf(1)
	}
	a := math.Abs(ref)
	ulp := math.Ldexp(1, -149)
	if a >= math.Ldexp(1, -126) {
		_, e := math.Frexp(a) // a = m·2^e, m in [½, 1)
		ulp = math.Ldexp(1, e-24)
	}
	return math.Abs(float64(got)-ref) / ulp
}

// mathInputs returns the arguments measured for a function: random bit
// patterns over its domain, uniform values over its busy range, and edges.
func mathInputs(name string) []float32 {
	r := rand.New(rand.NewPCG(1, uint64(len(name))))
	var xs []float32
	bitsIn := func(n int, lo, hi float32) {
		for range n {
			v := math.Float32frombits(r.Uint32())
			if v >= lo && v <= hi {
				xs = append(xs, v)
			}
		}
	}
	uniform := func(n int, lo, hi float64) {
		for range n {
			xs = append(xs, float32(lo+(hi-lo)*r.Float64()))
		}
	}
	switch name {
	case "exp":
		bitsIn(1<<21, -104, 89)
		uniform(1<<20, -104, 89)
		uniform(1<<19, -1, 1)
		xs = append(xs, 88.72283935546875, 88.7228317, -103.972084, -87.33654, 0, -0)
	case "exp2":
		bitsIn(1<<21, -152, 128)
		uniform(1<<20, -152, 128)
		xs = append(xs, 127.99999, -149, -149.5, -150, -126, 0)
	case "log", "log2", "log10":
		bitsIn(1<<21, math.SmallestNonzeroFloat32, math.MaxFloat32)
		uniform(1<<20, 0.5, 2)
		xs = append(xs, 1, math.SmallestNonzeroFloat32, math.MaxFloat32, 0x1p-126, 0.99999994, 1.0000001)
	case "sin", "cos", "tan":
		bitsIn(1<<21, -math.MaxFloat32, math.MaxFloat32)
		uniform(1<<20, -4, 4)
		uniform(1<<20, -110000, 110000)
		uniform(1<<19, -4e6, 4e6)
		// RoPE angles: float(p)·inv_freq[j] as the kernel forms them, θ = 5e5, Dh = 128.
		for range 1 << 20 {
			p, j := float32(r.IntN(1<<20)), r.IntN(64)
			inv := float32(math.Pow(500000, -float64(2*j)/128))
			xs = append(xs, p*inv)
		}
		// Floats nearest to multiples of π/2 (the worst cancellations).
		for k := 1; k < 1<<16; k++ {
			v := float32(float64(k) * math.Pi / 2)
			xs = append(xs, v, math.Nextafter32(v, 0), math.Nextafter32(v, 1e30))
		}
		xs = append(xs, 105615, 105616, 0x1p24, 0x1p60, math.MaxFloat32, 0x1p-13)
	case "tanh":
		bitsIn(1<<21, -20, 20)
		uniform(1<<20, -10, 10)
		uniform(1<<19, -1, 1)
		xs = append(xs, 0.625, 0.62499994, 9.1, 9.099999, 1e-20)
	}
	return xs
}

func TestPTXMath(t *testing.T) {
	for fn, f := range mathFns {
		t.Run(f.name, func(t *testing.T) {
			xs := mathInputs(f.name)
			ys := hostMath(t, fn, xs)
			worst, at := 0.0, float32(0)
			bad := 0
			for i, x := range xs {
				e := ulpErr(ys[i], f.ref(float64(x)))
				if e > worst {
					worst, at = e, x
				}
				if e > f.bound && bad < 5 {
					bad++
					t.Errorf("%s(%g = %#x) = %g, want %g: %.3g ulp (bound %g)", f.name, x, math.Float32bits(x), ys[i], f.ref(float64(x)), e, f.bound)
				}
			}
			t.Logf("%s: %d arguments, max error %.3f ulp at %g", f.name, len(xs), worst, at)
		})
	}
	t.Run("special", func(t *testing.T) {
		inf, nan := float32(math.Inf(1)), float32(math.NaN())
		for _, tc := range []struct {
			fn   int
			x    float32
			want float32
		}{
			{0, inf, inf}, {0, -inf, 0}, {0, nan, nan}, {1, inf, inf}, {1, -inf, 0},
			{2, 0, -inf}, {2, -1, nan}, {2, inf, inf}, {3, 0, -inf}, {4, -0.0, -inf},
			{5, inf, nan}, {5, nan, nan}, {6, -inf, nan}, {7, inf, nan},
			{8, inf, 1}, {8, -inf, -1}, {8, nan, nan},
		} {
			got := hostMath(t, tc.fn, []float32{tc.x})[0]
			if !(got == tc.want || got != got && tc.want != tc.want) {
				t.Errorf("%s(%g) = %g, want %g", mathFns[tc.fn].name, tc.x, got, tc.want)
			}
		}
		if got := hostMath(t, 5, []float32{float32(math.Copysign(0, -1))})[0]; !math.Signbit(float64(got)) {
			t.Errorf("sin(-0) = %g, want -0", got)
		}
	})
}

// TestPTXMathTable checks ingot_math.h's bits of 2/π against a 1200-bit
// computation (Machin's formula for π).
func TestPTXMathTable(t *testing.T) {
	src, err := os.ReadFile("rt/ptx/ingot_math.h")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)__ingot_2opi\[\d+\] = \{(.*?)\};`).FindSubmatch(src)
	if m == nil {
		t.Fatal("no __ingot_2opi table in ingot_math.h")
	}
	words := regexp.MustCompile(`0x([0-9a-f]{8})u`).FindAllSubmatch(m[1], -1)
	const prec = 1200
	atanInv := func(x int64) *big.Float {
		sum := new(big.Float).SetPrec(prec)
		xf := new(big.Float).SetPrec(prec).SetInt64(x)
		x2 := new(big.Float).SetPrec(prec).Mul(xf, xf)
		term := new(big.Float).SetPrec(prec).Quo(new(big.Float).SetPrec(prec).SetInt64(1), xf)
		eps := new(big.Float).SetPrec(prec).SetMantExp(big.NewFloat(1), -prec-10)
		for k := int64(0); term.Cmp(eps) > 0; k++ {
			tk := new(big.Float).SetPrec(prec).Quo(term, new(big.Float).SetPrec(prec).SetInt64(2*k+1))
			if k%2 == 0 {
				sum.Add(sum, tk)
			} else {
				sum.Sub(sum, tk)
			}
			term.Quo(term, x2)
		}
		return sum
	}
	pi := new(big.Float).SetPrec(prec).Mul(new(big.Float).SetPrec(prec).SetInt64(16), atanInv(5))
	pi.Sub(pi, new(big.Float).SetPrec(prec).Mul(new(big.Float).SetPrec(prec).SetInt64(4), atanInv(239)))
	f := new(big.Float).SetPrec(prec).Quo(new(big.Float).SetPrec(prec).SetInt64(2), pi)
	if len(words) < 8 {
		t.Fatalf("table has %d words, want 8", len(words))
	}
	for i, w := range words {
		f.Mul(f, new(big.Float).SetPrec(prec).SetInt64(1<<32))
		n, _ := f.Int(nil)
		f.Sub(f, new(big.Float).SetPrec(prec).SetInt(n))
		got, _ := strconv.ParseUint(string(w[1]), 16, 32)
		if got != n.Uint64() {
			t.Errorf("word %d: %#08x, want %#08x", i, got, n.Uint64())
		}
	}
}
