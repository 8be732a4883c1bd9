package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestQuantGroupB checks the byte planes in both orders: every value's three
// bytes rebuild round(x/dx), within ±bMaxT, at the place actB.at names, no two
// values share a place, and the rest (the last stripe's lanes past its groups)
// is zero, over planes that held other bytes before.
func TestQuantGroupB(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, bits := range []int{4, 8} {
		for _, gs := range []int{32, 64, 128} {
			for _, striped := range []bool{false, true} {
				C := bChunk(bits)
				K := 19 * max(C, gs) // stripes: 1…4 whole ones and one of 3…12 groups
				name := fmt.Sprintf("q%d/gs=%d/striped=%v", bits, gs, striped)
				x := randVec(r, K)
				x[7] = 0.5 * float32(1e3/bMaxT) // near half a step: Go and asm must round alike
				x[5] = -1e3                     // the row's amax: t = −bMaxT exactly
				a := actB{xb: make([]int8, 4*K)}
				for i := range a.xb {
					a.xb[i] = 85
				}
				a.quantize(nil, x, 1, K, gs, bits, striped)
				dx := float64(a.dq[0])
				// the group sums and planes against the Go loop (the assembly's, when it ran)
				goxb := make([]int8, a.rowBytes())
				for g := range K / gs {
					s, ts := a.quantGroup(goxb, x, gs*g, gs*(g+1), 1/dx)
					if ts != a.tsum[g] || math.Abs(s-a.sums[g]) > 1e-12*math.Abs(s)+1e-30 {
						t.Fatalf("%s: group %d: Σx %g Σt %d, Go %g %d", name, g, a.sums[g], a.tsum[g], s, ts)
					}
				}
				used := make([]bool, a.rowBytes())
				for k := range K {
					j := a.at(k)
					for _, p := range []int{j, j + C, j + 2*C} {
						if used[p] {
							t.Fatalf("%s: value %d: place %d taken", name, k, p)
						}
						used[p] = true
					}
					tk := int64(a.xb[j])<<16 + int64(a.xb[j+C])<<8 + int64(a.xb[j+2*C])
					if want := math.RoundToEven(float64(x[k]) / dx); float64(tk) != want || math.Abs(want) > bMaxT {
						t.Fatalf("%s: value %d: t = %d, want %g", name, k, tk, want)
					}
				}
				for i := range goxb {
					if goxb[i] != a.xb[i] || !used[i] && a.xb[i] != 0 {
						t.Fatalf("%s: plane byte %d = %d, Go %d", name, i, a.xb[i], goxb[i])
					}
				}
			}
		}
	}
}

// TestMatVecB runs the byte-dot kernels against their Go reference and the
// float64 one at the edges of their blocks: four-row blocks and single rows,
// chunks (128 4-bit or 64 8-bit codes), groups per chunk and the bias pass's
// sixteen-group steps.
func TestMatVecB(t *testing.T) { checkMatVecB(t) }

func checkMatVecB(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	var sets []*kernelSet
	for _, k := range kernelSets() {
		if k.qMatVecB != nil {
			sets = append(sets, k)
		}
	}
	ncase := 0
	for _, bits := range []int{4, 8} {
		C := bChunk(bits)
		for _, gs := range []int{32, 64, 128} {
			for _, s := range []struct{ N, chunks int }{
				{1, 1}, {3, 2}, {4, 1}, {5, 3}, {8, 17}, {9, 16}, {13, 33},
			} {
				K := s.chunks * C
				if K%gs != 0 {
					continue
				}
				kind := uint8(ncase % 3) // the blocked layout's type of scales
				ncase++
				name := fmt.Sprintf("q%d/gs=%d/N=%d/K=%d/%s", bits, gs, s.N, K, metaNames[kind])
				w := withMeta(randWeight(r, FormatQ, s.N, K, bits, gs), kind)
				x := randVec(r, 2*K)
				x[K+7] *= 50 // an outlier sets the second token's scale
				want, mag, qb := ref(w, x, 2)
				var a, as actB // in row order and striped
				a.quantize(nil, x, 2, K, gs, bits, false)
				as.quantize(nil, x, 2, K, gs, bits, true)
				t.Run(name, func(t *testing.T) {
					for l := range 2 {
						goRef, goS := make([]float32, s.N), make([]float32, s.N)
						qMatVecBGo(goRef, w.Q, K, 0, &a, l)
						checkRef(t, goRef, want[l*s.N:], mag[l*s.N:], qb[l*s.N:], 1/(2*bMaxT))
						qMatVecBGo(goS, w.Q, K, 0, &as, l)
						if !slices.Equal(goS, goRef) {
							t.Fatalf("token %d: the Go reference differs on striped planes", l)
						}
						for _, ks := range sets {
							a := &a
							if ks.blocked {
								a = &as
							}
							var first []float32
							for pf := range pfArms {
								got := make([]float32, s.N+1)
								got[s.N] = 42 // the kernel must not write past its rows
								ks.qMatVecB(got[:s.N], forKernels(ks, w).Q, K, 0, a, l, pf)
								if got[s.N] != 42 {
									t.Fatalf("%s: wrote past the last row", ks.name)
								}
								for i := range s.N {
									if d := math.Abs(float64(got[i] - goRef[i])); d > 4e-6*mag[l*s.N+i] {
										t.Fatalf("token %d out[%d]: %s %g, go %g", l, i, ks.name, got[i], goRef[i])
									}
								}
								if first != nil && !slices.Equal(got, first) {
									t.Fatalf("%s: prefetch arm %d changed the result", ks.name, pf)
								}
								first = got
							}
						}
					}
				})
			}
		}
	}
	if len(sets) == 0 {
		t.Log("no byte-dot kernels on this machine: checked the Go reference only")
	}
}
