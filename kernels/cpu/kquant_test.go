package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ingot-llm/ingot/gguf"
)

// ggufDequantDir holds raw blocks and gguf-py's dequantized float32 values of
// one tensor per block type (see its index.json and ../README.md).
const ggufDequantDir = "../../../shared/testdata/gguf/dequant"

var kTypeGGUF = map[KType]gguf.Type{KQ8_0: gguf.TypeQ8_0, KQ4_0: gguf.TypeQ4_0, KQ4K: gguf.TypeQ4_K, KQ5K: gguf.TypeQ5_K, KQ6K: gguf.TypeQ6_K}

// kqAsms runs f with the portable kernels and, where the CPU has them, the
// AVX2 ones.
func kqAsms(t *testing.T, f func(t *testing.T)) {
	asms := []bool{false}
	if kqAsm {
		asms = append(asms, true)
	}
	defer func(a bool) { kqAsm = a }(kqAsm)
	for _, asm := range asms {
		kqAsm = asm
		t.Run(fmt.Sprintf("asm=%v", asm), f)
	}
}

// TestKQuantDequantVectors: Row reproduces gguf-py's dequantization of the
// oracle tensors bit for bit (signed zeros included), 16 rows of 512, with
// the portable and the AVX2 kernels.
func TestKQuantDequantVectors(t *testing.T) { kqAsms(t, testKQuantDequantVectors) }

func testKQuantDequantVectors(t *testing.T) {
	for kt, gt := range kTypeGGUF {
		t.Run(kt.String(), func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(ggufDequantDir, gt.String()+".raw"))
			if err != nil {
				t.Fatalf("GGUF oracle data missing (../shared must sit beside the checkout): %v", err)
			}
			fb, err := os.ReadFile(filepath.Join(ggufDequantDir, gt.String()+".f32"))
			if err != nil {
				t.Fatal(err)
			}
			const N, K = 16, 512
			w, err := NewKQuant(kt, raw, N, K)
			if err != nil {
				t.Fatal(err)
			}
			if len(fb) != 4*N*K {
				t.Fatalf("%d bytes of values, want %d", len(fb), 4*N*K)
			}
			row := make([]float32, K)
			bad := 0
			for n := range N {
				w.Row(row, n)
				for k, v := range row {
					want := binary.LittleEndian.Uint32(fb[4*(n*K+k):])
					if math.Float32bits(v) != want && bad < 5 {
						bad++
						t.Errorf("row %d col %d: %g (%#08x), want %g (%#08x)", n, k, v, math.Float32bits(v), math.Float32frombits(want), want)
					}
				}
			}
		})
	}
}

// randKQuant returns an (n, k) matrix of type kt of random bytes whose f16
// scale fields are small finite values (|d| ≤ 1/64), so products stay in range.
func randKQuant(kt KType, n, k int, seed uint64) *KQuant {
	r := rand.New(rand.NewPCG(seed, 5))
	vals, bb := kt.BlockSize()
	b := make([]byte, n*k/vals*bb)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	offs := map[KType][]int{KQ8_0: {0}, KQ4_0: {0}, KQ4K: {0, 2}, KQ5K: {0, 2}, KQ6K: {208}}[kt]
	for blk := range len(b) / bb {
		for _, o := range offs {
			h := &b[blk*bb+o+1] // sign and a 2^-14…2^-7 exponent
			*h = *h&0x83 | 0x04 | (b[blk*bb+o]&3)<<3
		}
	}
	w, err := NewKQuant(kt, b, n, k)
	if err != nil {
		panic(err)
	}
	return w
}

// TestKQuantRowMatchesGGUF: Row equals gguf.Dequantize bit for bit on random
// blocks of every type (every scale, min and code pattern), portable and AVX2.
func TestKQuantRowMatchesGGUF(t *testing.T) { kqAsms(t, testKQuantRowMatchesGGUF) }

func testKQuantRowMatchesGGUF(t *testing.T) {
	for kt, gt := range kTypeGGUF {
		const N, K = 8, 768
		w := randKQuant(kt, N, K, uint64(kt)+1)
		want := make([]float32, N*K)
		if err := gguf.Dequantize(want, gt, w.B); err != nil {
			t.Fatal(err)
		}
		row := make([]float32, K)
		for n := range N {
			w.Row(row, n)
			for k, v := range row {
				if math.Float32bits(v) != math.Float32bits(want[n*K+k]) {
					t.Fatalf("%s row %d col %d: %g, want %g", kt, n, k, v, want[n*K+k])
				}
			}
		}
	}
}

// TestMatMulKQuant checks MatMulKQuant against float64 dot products of the
// dequantized rows for every type, on the dot path (L < blockDeqMinL: the
// portable dots and, where the CPU has them, the AVX2 ones) and the
// dequantized row-block path, at block edges (one block, several, odd N) and
// across row blocks of the prefill path.
func TestMatMulKQuant(t *testing.T) { kqAsms(t, testMatMulKQuant) }

func testMatMulKQuant(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	defer func(c int) { cacheBlock = c }(cacheBlock)
	cacheBlock = 8 << 10 // row blocks of a few rows: cross their edges
	for kt := range KType(len(kTypes)) {
		vals, _ := kt.BlockSize()
		for _, tc := range []struct{ L, N, K int }{
			{1, 1, vals}, {1, 7, 2 * vals}, {1, 33, 3 * vals},
			{2, 5, vals}, {3, 9, 2 * vals},
			{4, 9, vals}, {7, 31, 2 * vals}, {17, 65, 3 * vals},
		} {
			t.Run(fmt.Sprintf("%s/L=%d/N=%d/K=%d", kt, tc.L, tc.N, tc.K), func(t *testing.T) {
				w := randKQuant(kt, tc.N, tc.K, uint64(tc.N*tc.K))
				checkBlockMatMul(t, w, tc.L, func(dst, x []float32) { p.MatMulKQuant(dst, x, tc.L, w) })
			})
		}
	}
}

// checkBlockMatMul runs mul (dst (L, N) = x (L, K) · wᵀ) on a random x and
// checks every output against the float64 dot product of w's dequantized row
// (w.Row) within the float32 summation bound K·2⁻²⁴·Σ|products|.
func checkBlockMatMul(t *testing.T, w blockMatrix, L int, mul func(dst, x []float32)) {
	t.Helper()
	N, K := w.dims()
	r := rand.New(rand.NewPCG(uint64(L), 2))
	x := make([]float32, L*K)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	got := make([]float32, L*N)
	mul(got, x)
	row := make([]float32, K)
	for n := range N {
		w.Row(row, n)
		for l := range L {
			var want, mag float64
			for k, v := range row {
				want += float64(v) * float64(x[l*K+k])
				mag += math.Abs(float64(v) * float64(x[l*K+k]))
			}
			if d := math.Abs(float64(got[l*N+n]) - want); d > float64(K)*0x1p-24*mag+1e-30 {
				t.Fatalf("row %d token %d: got %g, want %g (|Σ| %g)", n, l, got[l*N+n], want, mag)
			}
		}
	}
}

// BenchmarkMatVecKQuant times the L = 1 mat-vec of each type on a
// Llama-3.2-1B MLP shape; MB/s counts the blocks' bytes.
func BenchmarkMatVecKQuant(b *testing.B) {
	p := NewPool(0)
	defer p.Close()
	for kt := range KType(len(kTypes)) {
		const N, K = 8192, 2048
		w := randKQuant(kt, N, K, 1)
		x := make([]float32, K)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		dst := make([]float32, N)
		b.Run(fmt.Sprintf("w=%s/shape=%dx%d", kt, N, K), func(b *testing.B) {
			b.SetBytes(int64(w.Bytes()))
			for b.Loop() {
				p.MatMulKQuant(dst, x, 1, w)
			}
		})
	}
}

// BenchmarkDotKQuant times one thread's dot products over 16 rows of 2048
// (in cache): ns/op per row; MB/s of the blocks.
func BenchmarkDotKQuant(b *testing.B) {
	for kt := range KType(len(kTypes)) {
		const N, K = 16, 2048
		w := randKQuant(kt, N, K, 1)
		x := make([]float32, K)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		b.Run(fmt.Sprintf("w=%s", kt), func(b *testing.B) {
			b.SetBytes(int64(w.Bytes()))
			var s float32
			for b.Loop() {
				for n := range N {
					s += dotKQuant(kt, w.row(n), x)
				}
			}
			_ = s
		})
	}
}

// BenchmarkMatMulKQuant times a 64-token mat-mat of each type (rows
// dequantized exactly into f32 blocks, then the f32 tiles); MB/s of blocks.
func BenchmarkMatMulKQuant(b *testing.B) {
	p := NewPool(0)
	defer p.Close()
	for kt := range KType(len(kTypes)) {
		const L, N, K = 64, 2048, 2048
		w := randKQuant(kt, N, K, 1)
		x := make([]float32, L*K)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		dst := make([]float32, L*N)
		for _, asm := range []bool{false, true} {
			if asm && !kqAsm {
				continue
			}
			b.Run(fmt.Sprintf("w=%s/L=%d/shape=%dx%d/asm=%v", kt, L, N, K, asm), func(b *testing.B) {
				defer func(a bool) { kqAsm = a }(kqAsm)
				kqAsm = asm
				b.SetBytes(int64(w.Bytes()))
				for b.Loop() {
					p.MatMulKQuant(dst, x, L, w)
				}
			})
		}
	}
}

// TestDotKQuantAVX2 compares the AVX2 block dots with the portable ones on
// many random blocks (every code, 6-bit scale and min, int8 scale pattern),
// x with mixed signs and magnitudes: within float32 summation error.
func TestDotKQuantAVX2(t *testing.T) {
	if !kqAsm {
		t.Skip("no AVX2 (or -tags noasm): the portable dots run")
	}
	r := rand.New(rand.NewPCG(9, 9))
	x := make([]float32, 256)
	for range 200 {
		for i := range x {
			x[i] = float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(9)-4)))
		}
		xb := (*[256]float32)(x)
		for _, kt := range []KType{KQ4K, KQ6K, KQ8_0, KQ5K, KQ4_0} {
			w := randKQuant(kt, 1, 256, r.Uint64())
			var got, want float32
			mag := rowMag(w, x)
			switch kt {
			case KQ8_0:
				got = dotQ8_0Asm(w.B, x)
				for j := range 8 {
					want += dotQ8_0((*[34]byte)(w.B[34*j:]), (*[32]float32)(x[32*j:]))
				}
			case KQ4_0:
				got = dotQ4_0Asm(w.B, x)
				for j := range 8 {
					want += dotQ4_0((*[18]byte)(w.B[18*j:]), (*[32]float32)(x[32*j:]))
				}
			case KQ4K:
				got, want = dotQ4KAsm((*[144]byte)(w.B), xb), dotQ4K((*[144]byte)(w.B), xb)
			case KQ5K:
				got, want = dotQ5KAsm((*[176]byte)(w.B), xb), dotQ5K((*[176]byte)(w.B), xb)
			default:
				got, want = dotQ6KAsm((*[210]byte)(w.B), xb), dotQ6K((*[210]byte)(w.B), xb)
			}
			if d := math.Abs(float64(got - want)); d > 512*0x1p-24*mag+1e-30 {
				t.Fatalf("%s: AVX2 %g, portable %g (|Σ| %g)", kt, got, want, mag)
			}
		}
	}
}

// rowMag returns Σ|w_k·x_k| over row 0 of w: the scale of a dot product's
// rounding error.
func rowMag(w *KQuant, x []float32) float64 {
	row := make([]float32, w.K)
	w.Row(row, 0)
	var mag float64
	for i, v := range row {
		mag += math.Abs(float64(v) * float64(x[i]))
	}
	return mag
}
