package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// kqCode returns the affine code of element k of row n of a q4_0, q8_0 or
// q4_k w, read from the block as ggml-common.h lays it out: q4_0 byte j holds
// element j in its low nibble and j + 16 in its high one; q8_0 codes are q +
// 128; q4_k byte 32c + j of the 128 holds element 64c + j in its low nibble
// and 64c + 32 + j in its high one; q6_k value 128n + 32u + j (u < 4, j < 32)
// has the low (u < 2) or high nibble of ql[64n + 32(u mod 2) + j] and bits
// 2u, 2u+1 of qh[32n + j] above it.
func kqCode(w *KQuant, n, k int) int {
	r := w.row(n)
	if w.Type == KQ6K {
		b, e := r[210*(k/256):], k%256
		h, u, j := e/128, e%128/32, e%32
		x := b[64*h+32*(u%2)+j]
		if u >= 2 {
			x >>= 4
		}
		return int(x&15 | (b[128+32*h+j]>>(2*u)&3)<<4)
	}
	if w.Type == KQ4K {
		b, e := r[144*(k/256)+16:], k%256
		x := b[32*(e/64)+e%32]
		if e%64 < 32 {
			return int(x & 15)
		}
		return int(x >> 4)
	}
	if w.Type == KQ4_0 {
		b, j := r[18*(k/32)+2:], k%32
		if j < 16 {
			return int(b[j] & 15)
		}
		return int(b[j-16] >> 4)
	}
	return int(int8(r[34*(k/32)+2+k%32])) + 128
}

// kqScale returns the affine scale of group g (32 elements) of row n of a
// q4_0, q8_0 or q4_k w (d, or d·sc for q4_k), or of group g of 16 of a q6_k w
// (d·sc).
func kqScale(w *KQuant, n, g int) float64 {
	_, size := w.Type.BlockSize()
	if w.Type == KQ6K {
		b := w.row(n)[210*(g/16):]
		return float64(f16At(b[208:])) * float64(int8(b[192+g%16]))
	}
	if w.Type != KQ4K {
		return float64(f16At(w.row(n)[size*g:]))
	}
	b := w.row(n)[144*(g/8):]
	sc, _ := scaleMin(g%8, b[4:16])
	return float64(f16At(b)) * float64(sc)
}

// kqRef returns the float64 dot products of w's exactly dequantized rows
// (Row) with x's L rows, their Σ|products|, and the bound the byte-plane
// activations' rounding meets (see ref): max|x|·Σ_g |d_g|·Σ_{k∈g} |code_k − c|.
func kqRef(w *KQuant, x []float32, L int) (out, mag, qbound []float64) {
	N, K := w.N, w.K
	out, mag, qbound = make([]float64, L*N), make([]float64, L*N), make([]float64, L*N)
	c, gs := 7.5, 32
	switch w.Type {
	case KQ8_0:
		c = 127.5
	case KQ6K:
		c, gs = 31.5, 16
	}
	row := make([]float32, K)
	for n := range N {
		w.Row(row, n)
		var qs float64
		for g := range K / gs {
			d := math.Abs(kqScale(w, n, g))
			for k := gs * g; k < gs*g+gs; k++ {
				qs += d * math.Abs(float64(kqCode(w, n, k))-c)
			}
		}
		for l := range L {
			xl := x[l*K : (l+1)*K]
			var s, m, amax float64
			for k, v := range row {
				s += float64(v) * float64(xl[k])
				m += math.Abs(float64(v) * float64(xl[k]))
				amax = max(amax, math.Abs(float64(xl[k])))
			}
			out[l*N+n], mag[l*N+n], qbound[l*N+n] = s, m, amax*qs
		}
	}
	return out, mag, qbound
}

// TestPrepareKQuant: q4_0 and q8_0 become blocked affine weights with f16
// scales and biases (5 and 9 bits a weight) where this CPU's kernels read the
// blocked layout (and stay blocks elsewhere); their rows dequantize to the
// blocks' values, and MatMul matches float64 dot products of those within the
// byte-plane bound for decode and small batches and float32 rounding for
// prefill, at the kernels' edges: one chunk, one stripe of 16 groups and a
// partial one, N around the four-row blocks and the 32-row prefill panels,
// rows in one K-slab and in slabs of one stripe, L around deqMinL. q4_k
// becomes a blocked weight of 4.625 bits a weight (integer scales and minima
// with f16 factors: metaK) with the same checks, from one superblock (a stripe
// of 8 groups) up.
func TestPrepareKQuant(t *testing.T) {
	for _, slabs := range []bool{false, true} {
		t.Run(fmt.Sprintf("slabs=%v", slabs), func(t *testing.T) {
			if slabs {
				lowerBlockL1(t)
			}
			smallBlocks(t)
			checkPrepareKQuant(t)
		})
	}
}

func checkPrepareKQuant(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	r := rand.New(rand.NewPCG(31, 32))
	for _, kt := range []KType{KQ4_0, KQ8_0, KQ4K, KQ6K} {
		bits := map[KType]int{KQ4_0: 4, KQ8_0: 8, KQ4K: 4, KQ6K: 6}[kt]
		C := bChunk(bits)
		shapes := []struct{ N, K int }{
			{1, C}, {3, 2 * C}, {4, 512}, {5, 512 + C}, {9, 1536 + C}, {33, 512}, {70, 640},
		}
		meta, bits8 := uint8(metaF16), 8*(bits+1) // 8 × bits a weight
		if kt == KQ4K {
			shapes = []struct{ N, K int }{{1, 256}, {3, 512}, {4, 256}, {5, 768}, {9, 1536 + 256}, {33, 512}, {70, 1280}}
			meta, bits8 = metaK, 37
		}
		gs := 32
		if kt == KQ6K {
			shapes = []struct{ N, K int }{{1, 256}, {3, 512}, {4, 256}, {5, 768}, {9, 1792}, {33, 512}, {70, 1280}}
			meta, gs = metaQ6, 16
		}
		for _, s := range shapes {
			t.Run(fmt.Sprintf("%s/N=%d/K=%d", kt, s.N, s.K), func(t *testing.T) {
				kq := randKQuant(kt, s.N, s.K, r.Uint64())
				w := PrepareKQuant(kq)
				if (w != nil) != kern.blocked {
					t.Fatalf("PrepareKQuant: %v, want a weight iff the %s kernels read the blocked layout (%v)", w, kern.name, kern.blocked)
				}
				if w == nil {
					return
				}
				if w.Format != FormatQ || w.N != s.N || w.K != s.K || w.Q.Bits != bits || w.Q.GroupSize != gs || w.Q.Blocked == nil || w.Q.meta != meta {
					t.Fatalf("PrepareKQuant: %v %d×%d q%d gs=%d meta %d, want blocked q%d gs=%d with %s scales", w.Format, w.N, w.K, w.Q.Bits, w.Q.GroupSize, w.Q.meta, bits, gs, metaNames[meta])
				}
				size := s.N * s.K * bits8 / 64
				switch {
				case kt == KQ4K && s.K%512 != 0: // a last stripe of 8 groups has two factors, not one
					size += 2 * 2 * s.N
				case kt == KQ6K: // as stored
					size = s.N * s.K / 256 * 210
				}
				if got := w.Bytes(); got != size {
					t.Errorf("Bytes %d, want %d", got, size)
				}
				want, got := make([]float32, s.K), make([]float32, s.K)
				for n := range s.N {
					kq.Row(want, n)
					w.Row(got, n)
					for k := range want {
						if got[k] != want[k] { // equal as numbers: d·(8 − 8) is −0 for d < 0, 0 here
							t.Fatalf("row %d col %d: %g, want %g", n, k, got[k], want[k])
						}
					}
				}
				for _, L := range []int{1, 2, 5, 15, 16, 17, 29} {
					x := randVec(r, L*s.K)
					x[L*s.K/2] = 30 // one row with a larger range
					want, mag, qb := kqRef(kq, x, L)
					got := make([]float32, L*s.N)
					p.MatMul(got, x, L, w)
					res := 0.0
					if L < deqMinL {
						res = 1 / (2 * bMaxT)
					}
					checkRef(t, got, want, mag, qb, res)
				}
			})
		}
	}
}

// TestPrepareKQuantFallback: only q4_0, q8_0, q4_k and (where the kernels take
// it) q6_k with finite scales and rows of whole chunks become affine weights; scales whose biases (−8·d,
// −128·d) overflow f16 keep them in f32, still exact.
func TestPrepareKQuantFallback(t *testing.T) {
	if !kern.blocked {
		for _, kt := range []KType{KQ4_0, KQ8_0, KQ4K, KQ6K} {
			if PrepareKQuant(randKQuant(kt, 4, 512, 1)) != nil {
				t.Errorf("%s: an affine weight for the %s kernels, which do not read the blocked layout", kt, kern.name)
			}
		}
		return
	}
	if PrepareKQuant(randKQuant(KQ5K, 4, 512, 1)) != nil {
		t.Errorf("%s: an affine weight", KQ5K)
	}
	if w := PrepareKQuant(randKQuant(KQ6K, 4, 512, 1)); (w != nil) != kern.q6 {
		t.Errorf("%s: %v, want an affine weight iff the %s kernels take q6_k (%v)", KQ6K, w, kern.name, kern.q6)
	}
	if PrepareKQuant(randKQuant(KQ4_0, 4, 96, 1)) != nil {
		t.Error("q4_0 with K = 96 (not whole 128-code chunks): an affine weight")
	}
	for _, kt := range []KType{KQ4_0, KQ8_0} {
		_, size := kt.BlockSize()
		for _, tc := range []struct {
			name   string
			d      uint16 // one block's scale
			affine bool
			meta   uint8
		}{
			{"inf", 0x7c00, false, 0}, {"nan", 0x7e00, false, 0},
			{"large", 0x7bff, true, metaF32}, // 65504: −8·d and −128·d overflow f16
			{"subnormal", 0x8001, true, metaF16},
		} {
			kq := randKQuant(kt, 5, 256, 2)
			binary.LittleEndian.PutUint16(kq.B[3*size:], tc.d)
			w := PrepareKQuant(kq)
			if !tc.affine {
				if w != nil {
					t.Errorf("%s with a scale %s: an affine weight", kt, tc.name)
				}
				continue
			}
			if w == nil || w.Q.meta != tc.meta {
				t.Fatalf("%s with a scale %s: %v, want an affine weight with %s scales", kt, tc.name, w, metaNames[tc.meta])
			}
			want, got := make([]float32, 256), make([]float32, 256)
			for n := range 5 {
				kq.Row(want, n)
				w.Row(got, n)
				for k := range want {
					if got[k] != want[k] {
						t.Fatalf("%s with a scale %s: row %d col %d: %g, want %g", kt, tc.name, n, k, got[k], want[k])
					}
				}
			}
		}
	}
}

// TestMatVecsKQuantRowInvariant: for q4_0, q8_0, q4_k and q6_k weights in the affine
// form, each row of a MatVecs call has the bits a one-row MatMul and MatMuls
// give it (batch invariance), at a partial four-row block, a partial stripe
// and in K-slabs.
func TestMatVecsKQuantRowInvariant(t *testing.T) {
	if !kern.blocked { // they run as blocks (see TestMatMulKQuant), one row at a time
		if PrepareKQuant(randKQuant(KQ4_0, 4, 512, 1)) != nil {
			t.Errorf("q4_0: an affine weight for the %s kernels", kern.name)
		}
		return
	}
	r := rand.New(rand.NewPCG(33, 34))
	p := NewPool(2)
	defer p.Close()
	for _, tc := range []struct {
		kt   KType
		N, K int
	}{{KQ4_0, 258, 2048}, {KQ8_0, 37, 576}, {KQ4_0, 22, 8192}, {KQ8_0, 41, 4096}, {KQ4K, 258, 2048}, {KQ4K, 23, 8192}, {KQ4K, 13, 768},
		{KQ6K, 258, 2048}, {KQ6K, 23, 8192}, {KQ6K, 13, 768}} {
		if tc.kt == KQ6K && !kern.q6 {
			continue
		}
		t.Run(fmt.Sprintf("%s/N=%d/K=%d", tc.kt, tc.N, tc.K), func(t *testing.T) {
			w, w2 := PrepareKQuant(randKQuant(tc.kt, tc.N, tc.K, r.Uint64())), PrepareKQuant(randKQuant(tc.kt, tc.N/2+3, tc.K, r.Uint64()))
			if w == nil || w2 == nil {
				t.Fatal("PrepareKQuant: nil")
			}
			checkRowInvariant(t, r, p, w, w2)
		})
	}
}

// TestPrepareQ4KFactors: a q4_k weight with one superblock's d or dmin at
// f16's edges (the largest, zero, the subnormal range, negative) becomes a
// blocked affine weight whose rows are the blocks' values, bit for bit, and
// whose decode and small-batch MatMul match float64 within the byte-plane
// bound; an infinite or NaN d or dmin keeps the weight as blocks. The
// superblock sits in a full stripe and in a last stripe of 8 groups, in one
// K-slab and in slabs of one stripe.
func TestPrepareQ4KFactors(t *testing.T) {
	if !kern.blocked {
		return // TestPrepareKQuantFallback: no affine weight
	}
	for _, slabs := range []bool{false, true} {
		t.Run(fmt.Sprintf("slabs=%v", slabs), func(t *testing.T) {
			if slabs {
				lowerBlockL1(t)
			}
			checkPrepareQ4KFactors(t)
		})
	}
}

func checkPrepareQ4KFactors(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	r := rand.New(rand.NewPCG(35, 36))
	const N, K = 7, 1280 // 40 groups: two full stripes, a last one of 8
	for _, tc := range []struct {
		name   string
		d, min uint16
		affine bool
	}{
		{"d=inf", 0x7c00, 0x1000, false}, {"d=nan", 0x7e00, 0x1000, false},
		{"dmin=-inf", 0x1000, 0xfc00, false}, {"dmin=nan", 0x1000, 0xfe01, false},
		{"d=max", 0x7bff, 0x1000, true}, {"dmin=-max", 0x1000, 0xfbff, true}, {"both=max", 0x7bff, 0x7bff, true},
		{"d=0", 0x0000, 0x1000, true}, {"d=-0", 0x8000, 0x1000, true}, {"dmin=0", 0x1000, 0x0000, true},
		{"d=subnormal", 0x0001, 0x03ff, true}, {"d=-subnormal", 0x83ff, 0x8001, true},
		{"both=min normal", 0x0400, 0x8400, true},
	} {
		for _, sb := range []int{1, 4} { // superblock 1: stripe 0's second half; 4: the last stripe
			kq := randKQuant(KQ4K, N, K, r.Uint64())
			for n := range N {
				if n%3 == 2 {
					continue // some rows keep random factors
				}
				o := n*K/256*144 + sb*144
				binary.LittleEndian.PutUint16(kq.B[o:], tc.d)
				binary.LittleEndian.PutUint16(kq.B[o+2:], tc.min)
			}
			checkPreparedEdge(t, p, r, fmt.Sprintf("%s/superblock=%d", tc.name, sb), kq, tc.affine, metaK, true)
		}
	}
}

// checkPreparedEdge checks PrepareKQuant(kq) for an edge case named name:
// no affine weight unless affine; else one with scales of kind meta whose
// rows are kq's (bit for bit if bitExact, else equal as numbers) and whose
// MatMul at L = 1 and 3 matches float64 within the byte-plane bound.
func checkPreparedEdge(t *testing.T, p *Pool, r *rand.Rand, name string, kq *KQuant, affine bool, meta uint8, bitExact bool) {
	t.Helper()
	w := PrepareKQuant(kq)
	if !affine {
		if w != nil {
			t.Errorf("%s: an affine weight", name)
		}
		return
	}
	if w == nil || w.Q.meta != meta {
		t.Fatalf("%s: %v, want an affine weight with %s's scales", name, w, kq.Type)
	}
	N, K := kq.N, kq.K
	want, got := make([]float32, K), make([]float32, K)
	for n := range N {
		kq.Row(want, n)
		w.Row(got, n)
		for k := range want {
			if bitExact && math.Float32bits(got[k]) != math.Float32bits(want[k]) || got[k] != want[k] {
				t.Fatalf("%s: row %d col %d: %g, want %g", name, n, k, got[k], want[k])
			}
		}
	}
	for _, L := range []int{1, 3} {
		x := randVec(r, L*K)
		ref, mag, qb := kqRef(kq, x, L)
		out := make([]float32, L*N)
		p.MatMul(out, x, L, w)
		t.Run(fmt.Sprintf("%s/L=%d", name, L), func(t *testing.T) {
			checkRef(t, out, ref, mag, qb, 1/(2*bMaxT))
		})
	}
}

// TestPrepareQ6KScale: a q6_k weight with one superblock's d at f16's edges
// (the largest, zero, −0, the subnormal range) becomes a blocked affine
// weight whose rows are the blocks' values, and whose decode and small-batch
// MatMul match float64 within the byte-plane bound; an infinite or NaN d
// keeps the weight as blocks. In one K-slab and in slabs of one stripe.
func TestPrepareQ6KScale(t *testing.T) {
	if !kern.q6 {
		return // TestPrepareKQuantFallback: no affine weight
	}
	for _, slabs := range []bool{false, true} {
		t.Run(fmt.Sprintf("slabs=%v", slabs), func(t *testing.T) {
			if slabs {
				lowerBlockL1(t)
			}
			checkPrepareQ6KScale(t)
		})
	}
}

func checkPrepareQ6KScale(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	r := rand.New(rand.NewPCG(37, 38))
	const N, K = 6, 768
	for _, tc := range []struct {
		name   string
		d      uint16
		affine bool
	}{
		{"inf", 0x7c00, false}, {"-inf", 0xfc00, false}, {"nan", 0x7e00, false},
		{"max", 0x7bff, true}, {"-max", 0xfbff, true}, {"0", 0x0000, true}, {"-0", 0x8000, true},
		{"subnormal", 0x0001, true}, {"-subnormal", 0x83ff, true}, {"min normal", 0x0400, true},
	} {
		for _, sb := range []int{0, 2} {
			kq := randKQuant(KQ6K, N, K, r.Uint64())
			for n := range N {
				if n%3 != 1 {
					binary.LittleEndian.PutUint16(kq.B[n*K/256*210+sb*210+208:], tc.d)
				}
			}
			// equal as numbers: d·sc·(32 − 32) may be −0
			checkPreparedEdge(t, p, r, fmt.Sprintf("d=%s/superblock=%d", tc.name, sb), kq, tc.affine, metaQ6, false)
		}
	}
}

// BenchmarkPrepareKQuant: the load-time repacking of a GGUF matrix into the
// blocked layout, per type, for the 1B shape's gate projection (8192 × 2048)
// and down projection (2048 × 8192, in K-slabs); b.SetBytes counts the
// stored blocks.
func BenchmarkPrepareKQuant(b *testing.B) {
	if !kern.blocked {
		b.Skipf("the %s kernels do not read the blocked layout", kern.name)
	}
	for _, kt := range []KType{KQ4_0, KQ8_0, KQ4K, KQ6K} {
		for _, s := range []struct{ N, K int }{{8192, 2048}, {2048, 8192}} {
			b.Run(fmt.Sprintf("%s/%dx%d", kt, s.N, s.K), func(b *testing.B) {
				kq := randKQuant(kt, s.N, s.K, 1)
				if PrepareKQuant(kq) == nil {
					b.Skipf("%s: no affine form on the %s kernels", kt, kern.name)
				}
				b.SetBytes(int64(len(kq.B)))
				for b.Loop() {
					PrepareKQuant(kq)
				}
			})
		}
	}
}
