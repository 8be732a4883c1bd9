package cpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestRepackMatchesReference: the blocked layout the load writes from GGUF
// q4_0, q8_0, q4_k and q6_k blocks, and from MLX affine rows, is byte for byte
// the straightforward repacking's (repack_ref_test.go), on every CPU (the
// layout does not depend on the kernels), at four-row block edges (N mod 4 =
// 0…3), stripes whole and half, rows in one K-slab and in slabs of one
// stripe, and with scales that take each metadata type: f16, bf16 (scales
// whose significands end in zeros), f32 (biases that overflow f16), and
// zero, negative zero and subnormal scales among them.
func TestRepackMatchesReference(t *testing.T) {
	for _, slabs := range []bool{false, true} {
		t.Run(fmt.Sprintf("slabs=%v", slabs), func(t *testing.T) {
			if slabs {
				lowerBlockL1(t)
			}
			checkRepackGGUF(t)
			checkRepackMLX(t)
		})
	}
}

func checkRepackGGUF(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, kt := range []KType{KQ4_0, KQ8_0, KQ4K, KQ6K} {
		Ks := []int{256, 512, 768, 1536, 2048 + 256}
		if kt == KQ4_0 || kt == KQ8_0 {
			Ks = []int{bChunk(map[KType]int{KQ4_0: 4, KQ8_0: 8}[kt]), 256, 512, 544, 1024 + 96}
		}
		_, size := kt.BlockSize()
		for _, N := range []int{1, 2, 3, 4, 5, 7, 8, 13} {
			for _, K := range Ks {
				if K%bChunk(map[KType]int{KQ4_0: 4, KQ8_0: 8, KQ4K: 4, KQ6K: 4}[kt]) != 0 {
					continue
				}
				for _, scales := range []string{"random", "bf16", "special", "large"} {
					if scales != "random" && kt != KQ4_0 && kt != KQ8_0 {
						continue
					}
					kq := randKQuant(kt, N, K, r.Uint64())
					for o := 0; o < len(kq.B); o += size {
						h := binary.LittleEndian.Uint16(kq.B[o:])
						switch scales {
						case "bf16":
							h &^= 7
						case "special": // zero, −0, subnormals, the largest d whose biases fit f16
							fit := uint16(0x6fff) // 8·d = 65504
							if kt == KQ8_0 {
								fit = 0x5fff // 128·d = 65504
							}
							h = []uint16{h, 0, 0x8000, 0x0001, 0x83ff, 0x0234, fit, fit | 0x8000}[r.IntN(8)]
						case "large": // one bias overflows f16: the smallest such d
							if o == size*r.IntN(len(kq.B)/size) {
								h = 0xf000 // −2¹³
								if kt == KQ8_0 {
									h = 0x6000 // 2⁹
								}
							}
						}
						binary.LittleEndian.PutUint16(kq.B[o:], h)
					}
					want, got := refPrepareKQuant(kq), kq.blocked()
					name := fmt.Sprintf("%s N=%d K=%d %s scales", kt, N, K, scales)
					if (want == nil) != (got == nil) {
						t.Fatalf("%s: blocked %v, reference %v", name, got, want)
					}
					if want == nil {
						continue
					}
					checkSameBlocked(t, name, got, want.Q)
				}
			}
		}
	}
	// scales that are not finite: no affine form
	for _, kt := range []KType{KQ4_0, KQ8_0, KQ4K, KQ6K} {
		offs := map[KType][]int{KQ4_0: {0}, KQ8_0: {0}, KQ4K: {0, 2}, KQ6K: {208}}[kt]
		_, size := kt.BlockSize()
		for _, at := range offs {
			for _, h := range []uint16{0x7c00, 0xfc00, 0x7e00} {
				kq := randKQuant(kt, 5, 512, 3)
				binary.LittleEndian.PutUint16(kq.B[3*size+at:], h)
				if q := kq.blocked(); q != nil {
					t.Errorf("%s with %#04x at byte %d of a block: a blocked weight", kt, h, at)
				}
			}
		}
	}
}

func checkRepackMLX(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	for _, bits := range []int{4, 8} {
		for _, gs := range []int{32, 64, 128} {
			for _, N := range []int{1, 3, 4, 6, 9} {
				for _, K := range []int{bChunk(bits), 512, 1024 + 512, 2048 + 2*bChunk(bits)} {
					if K%gs != 0 {
						continue
					}
					for _, kind := range []uint8{metaF32, metaBF16, metaF16} {
						w := withMeta(&Weight{Format: FormatQ, N: N, K: K, Q: randQ(r, N, K, bits, gs)}, kind)
						G := K / gs
						// a few special values: zero, −0, a subnormal f16, f16's largest
						for i, v := range []float32{0, float32(math.Copysign(0, -1)), F16ToF32(0x0003), 65504, -F16ToF32(0x03ff)} {
							if kind != metaBF16 || math.Float32bits(v)&0xffff == 0 {
								w.Q.Scales[(i*7)%(N*G)] = v
							}
						}
						if !bFits(w.Q, K) {
							continue
						}
						want, got := *w.Q, *w.Q
						want.refBlock(N, K)
						got.block(N, K)
						checkSameBlocked(t, fmt.Sprintf("MLX q%d gs=%d N=%d K=%d %s", bits, gs, N, K, metaNames[kind]), &got, &want)
					}
				}
			}
		}
	}
}

// checkSameBlocked fails t unless blocked q is the reference's want byte for
// byte, with the same metadata type and K-slabs.
func checkSameBlocked(t *testing.T, name string, got, want *QMatrix) {
	t.Helper()
	if got.meta != want.meta || got.Bits != want.Bits || got.GroupSize != want.GroupSize || len(got.slabs) != len(want.slabs) {
		t.Fatalf("%s: q%d gs=%d, %s scales, %d slabs; reference q%d gs=%d, %s scales, %d slabs", name,
			got.Bits, got.GroupSize, metaNames[got.meta], len(got.slabs), want.Bits, want.GroupSize, metaNames[want.meta], len(want.slabs))
	}
	for j := range got.slabs {
		if got.slabs[j].k0 != want.slabs[j].k0 || len(got.slabs[j].Blocked) != len(want.slabs[j].Blocked) {
			t.Fatalf("%s: slab %d at column %d, %d bytes; reference at %d, %d bytes", name, j, got.slabs[j].k0, len(got.slabs[j].Blocked), want.slabs[j].k0, len(want.slabs[j].Blocked))
		}
	}
	if !bytes.Equal(got.Blocked, want.Blocked) {
		i := 0
		for got.Blocked[i] == want.Blocked[i] {
			i++
		}
		t.Fatalf("%s: byte %d of %d is %#02x, reference %#02x", name, i, len(want.Blocked), got.Blocked[i], want.Blocked[i])
	}
}

// TestAffineMeta: the scales' type a q4_0 or q8_0 weight is blocked with, for
// every f16 as one block's scale (the others 1), is the one the float32
// checks choose, and no weight for one that is not finite.
func TestAffineMeta(t *testing.T) {
	for _, kt := range []KType{KQ4_0, KQ8_0} {
		kq := randKQuant(kt, 1, 256, 1)
		_, size := kt.BlockSize()
		for o := 0; o < len(kq.B); o += size {
			binary.LittleEndian.PutUint16(kq.B[o:], 0x3c00)
		}
		for h := range 1 << 16 {
			binary.LittleEndian.PutUint16(kq.B[3*size:], uint16(h))
			q := kq.blocked()
			want, ok := refAffineMeta(kq)
			if (q != nil) != ok || q != nil && q.meta != want {
				t.Fatalf("%s with a scale %#04x: %+v, want %s scales (%v)", kt, h, q, metaNames[want], ok)
			}
		}
	}
}
