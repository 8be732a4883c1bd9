package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ingot-llm/ingot/kernels/cpu"
)

// TestCPUUploadKQuantAffine: the CPU backend uploads GGUF Q4_0 and Q8_0
// matrices as the affine weights they are where its kernels read those
// faster (cpu.PrepareKQuant), keeping the dtype and shape, and as blocks
// elsewhere; the other block types stay blocks. A batch step (MatVecs) then
// gives each row the bits a one-row MatMul gives it, and Embed the rows the
// blocks hold.
func TestCPUUploadKQuantAffine(t *testing.T) {
	c := NewCPU(2)
	defer c.Close()
	r := rand.New(rand.NewPCG(41, 42))
	for _, dt := range []DType{DTypeQ4_0, DTypeQ8_0, DTypeQ4K} {
		t.Run(dt.String(), func(t *testing.T) {
			const N, K, L = 37, 1024, 5
			hw := randBlocks(r, dt, N, K)
			kq, err := cpu.NewKQuant(cpu.KQ8_0+cpu.KType(dt-DTypeQ8_0), hw.Data, N, K)
			if err != nil {
				t.Fatal(err)
			}
			affine := cpu.PrepareKQuant(kq) != nil
			w, err := c.Upload(hw)
			if err != nil {
				t.Fatal(err)
			}
			if w.DType != dt || w.Shape[0] != N || w.Shape[1] != K {
				t.Fatalf("uploaded as %s%v, want %s[%d %d]", w.DType, w.Shape, dt, N, K)
			}
			switch b := w.Buf.(type) {
			case *cpu.Weight:
				if !affine || b.Format != cpu.FormatQ {
					t.Fatalf("uploaded as a %v weight; PrepareKQuant gives one: %v", b.Format, affine)
				}
			case *cpu.KQuant:
				if affine {
					t.Fatal("uploaded as blocks; PrepareKQuant gives an affine weight")
				}
			default:
				t.Fatalf("uploaded as %T", w.Buf)
			}
			x := make([]float32, L*K)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			got := c.New(L, N)
			c.MatVecs([]*Tensor{got}, FromF32(x, L, K), []*Tensor{w})
			one := c.New(1, N)
			for l := range L {
				c.MatMul(one, FromF32(x[l*K:(l+1)*K], 1, K), w)
				for i, v := range one.F32() {
					if g := got.F32()[l*N+i]; math.Float32bits(g) != math.Float32bits(v) {
						t.Fatalf("row %d output %d: MatVecs %g, one-row MatMul %g", l, i, g, v)
					}
				}
			}
			e := c.New(2, K)
			c.Embed(e, w, []int32{N - 1, 3}, 1)
			row := make([]float32, K)
			for i, n := range []int{N - 1, 3} {
				kq.Row(row, n)
				for k, v := range row {
					if e.F32()[i*K+k] != v {
						t.Fatalf("Embed row %d col %d: %g, want %g", n, k, e.F32()[i*K+k], v)
					}
				}
			}
		})
	}
}

// randBlocks returns a host (N, K) matrix of GGUF block type dt: random bytes
// with every f16 scale field (d, and dmin for Q4_K) a small finite value.
func randBlocks(r *rand.Rand, dt DType, N, K int) *Tensor {
	b := make([]byte, N*dt.RowBytes(K))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	_, size := dt.BlockSize()
	offs := map[DType][]int{DTypeQ8_0: {0}, DTypeQ4_0: {0}, DTypeQ4K: {0, 2}}[dt]
	if offs == nil {
		panic(fmt.Sprintf("randBlocks: %s", dt))
	}
	for o := 0; o < len(b); o += size {
		for _, f := range offs {
			b[o+f+1] = b[o+f+1]&0x83 | 0x04 // sign and a 2⁻¹⁴…2⁻⁷ exponent
		}
	}
	return &Tensor{DType: dt, Shape: []int{N, K}, Data: b}
}
