package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAttnLoops cross-checks the score and accumulate loops (assembly where
// present) against float64 sums at head dims around the 8- and 32-wide blocks.
func TestAttnLoops(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, dh := range []int{4, 8, 16, 24, 32, 40, 64, 96, 128, 256} {
		for _, n := range []int{1, 2, 7, 33} {
			stride := 3*dh + 5 // keys of several heads interleaved, unaligned
			k := make([]float32, n*stride+dh)
			for i := range k {
				k[i] = float32(r.NormFloat64())
			}
			q, p := make([]float32, dh), make([]float32, n)
			for i := range q {
				q[i] = float32(r.NormFloat64())
			}
			for i := range p {
				p[i] = r.Float32()
			}
			off := dh + 1
			scores := make([]float32, n)
			attnScores(scores, q, k[off:], stride)
			out := make([]float32, dh)
			for i := range out {
				out[i] = float32(i)
			}
			attnAccum(out, k[off:], stride, p)
			for j := range n {
				var want float64
				for i := range dh {
					want += float64(q[i]) * float64(k[off+j*stride+i])
				}
				if math.Abs(float64(scores[j])-want) > 1e-5*(1+math.Abs(want))*float64(dh)/8 {
					t.Fatalf("dh %d n %d: score %d = %v, want %v", dh, n, j, scores[j], want)
				}
			}
			for i := range dh {
				want := float64(i)
				for j := range n {
					want += float64(p[j]) * float64(k[off+j*stride+i])
				}
				if math.Abs(float64(out[i])-want) > 1e-5*(1+math.Abs(want)) {
					t.Fatalf("dh %d n %d: out[%d] = %v, want %v", dh, n, i, out[i], want)
				}
			}
		}
	}
}

// attnRef is Attn in float64: dst (L, Heads·HeadDim).
func attnRef(a Attn, q, k, v []float32, L int) []float64 {
	dh, G := a.HeadDim, a.Heads/a.KVHeads
	qs, ks := a.Heads*dh, a.KVHeads*dh
	out := make([]float64, L*qs)
	for i := range L {
		for h := range a.Heads {
			qr := q[i*qs+h*dh:][:dh]
			off := (h / G) * dh
			hi := a.Pos + i + 1
			lo := 0
			if a.Window > 0 {
				lo = max(0, hi-a.Window)
			}
			s := make([]float64, hi-lo)
			mx := math.Inf(-1)
			for j := lo; j < hi; j++ {
				var d float64
				for x, kx := range k[j*ks+off:][:dh] {
					d += float64(qr[x]) * float64(kx)
				}
				d *= float64(a.Scale)
				if a.Softcap > 0 {
					d = float64(a.Softcap) * math.Tanh(d/float64(a.Softcap))
				}
				s[j-lo] = d
				mx = max(mx, d)
			}
			if a.Sinks != nil {
				mx = max(mx, float64(a.Sinks[h]))
			}
			var sum float64
			for j := range s {
				s[j] = math.Exp(s[j] - mx)
				sum += s[j]
			}
			if a.Sinks != nil {
				sum += math.Exp(float64(a.Sinks[h]) - mx)
			}
			o := out[i*qs+h*dh:][:dh]
			for j := lo; j < hi; j++ {
				p, vr := s[j-lo]/sum, v[j*ks+off:][:dh]
				for x, vx := range vr {
					o[x] += p * float64(vx)
				}
			}
		}
	}
	return out
}

// attnBlocked runs Attn.Block over every KV head and query block.
func attnBlocked(a Attn, dst, q []float32, k, v KV, L int) {
	var s AttnScratch
	bq := a.QueryRows()
	for g := range a.KVHeads {
		for l0 := 0; l0 < L; l0 += bq {
			a.Block(dst, q, k, v, g, l0, min(l0+bq, L), &s)
		}
	}
}

// decodeKeys returns the keys [lo, hi) a decode step at a.Pos sees.
func decodeKeys(a Attn) (lo, hi int) {
	hi = a.Pos + 1
	if a.Window > 0 {
		lo = max(0, hi-a.Window)
	}
	return lo, hi
}

// attnSplit runs one query row (L = 1) as Attn.Decode over up to three parts
// of the keys, uneven and crossing the decode key blocks, each cut in two at
// the first KV head (as the threads may), and Attn.Merge.
func attnSplit(a Attn, dst, q []float32, k, v KV, L int) {
	lo, hi := decodeKeys(a)
	var s AttnScratch
	cuts := []int{lo}
	for _, c := range []int{lo + (hi-lo)/5, lo + (hi-lo)*3/5} {
		if c > cuts[len(cuts)-1] && c < hi {
			cuts = append(cuts, c)
		}
	}
	cuts = append(cuts, hi)
	parts := len(cuts) - 1
	var ps AttnParts
	ps.Reset(&a, parts)
	g := min(1, a.KVHeads-1)
	for p := range parts {
		a.Decode(&ps, p, q, k, v, cuts[p], cuts[p+1], g, a.KVHeads, &s)
		a.Decode(&ps, p, q, k, v, cuts[p], cuts[p+1], 0, g, &s)
	}
	a.Merge(dst, &ps, parts, 0, a.Heads)
}

// attnHeads runs one query row (L = 1) as Attn.Decode over all its keys, a
// part per KV head, each merged on its own (the decode step over a few keys).
func attnHeads(a Attn, dst, q []float32, k, v KV, L int) {
	lo, hi := decodeKeys(a)
	var s AttnScratch
	var ps AttnParts
	ps.Reset(&a, 1)
	G := a.Heads / a.KVHeads
	for g := a.KVHeads - 1; g >= 0; g-- {
		a.Decode(&ps, 0, q, k, v, lo, hi, g, g+1, &s)
		a.Merge(dst, &ps, 1, g*G, (g+1)*G)
	}
}

// TestAttn checks the blocked (prefill) and split (decode: by keys, by KV
// heads) attention, with each kernel set this machine has, against float64
// at the block edges: L around the 64-key and query blocks, head dims around
// the 64-column tiles, GQA groups 1, 3, 4, 6 and 8, with and without a
// sliding window, softcap and an earlier cache (pos; at 700 the split's parts
// cross the 128-key decode blocks); every third case with sinks (above and
// below the scores' maximum).
func TestAttn(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	type variant struct {
		pos, window int
		softcap     float32
	}
	variants := []variant{{0, 0, 0}, {37, 0, 0}, {5, 24, 0}, {0, 70, 30}, {64, 17, 20}, {300, 0, 0}, {219, 150, 0}, {700, 0, 0}}
	n := 0
	for _, L := range []int{1, 2, 15, 16, 17, 63, 64, 65, 130} {
		for _, dh := range []int{64, 80, 128, 256} {
			for _, G := range []int{1, 3, 4, 6, 8} { // 3 and 6 pad the four-head scores
				vr := variants[n%len(variants)]
				n++
				hkv, pos := 3, vr.pos // smaller where the work is large, to keep the test quick
				if dh > 64 {
					hkv = 2
				}
				if dh > 80 {
					hkv = 1
				}
				if L > 17 {
					pos = min(pos, 64)
				}
				a := Attn{Heads: hkv * G, KVHeads: hkv, HeadDim: dh, Pos: pos, Window: vr.window,
					Scale: float32(1 / math.Sqrt(float64(dh))), Softcap: vr.softcap}
				if n%3 == 0 {
					a.Sinks = randVec(r, a.Heads)
					for i := range a.Sinks {
						a.Sinks[i] *= 4
					}
				}
				S := a.Pos + L + 3 // cache rows past pos+L must not matter
				qw, kw := a.Heads*dh, a.KVHeads*dh
				q, k, v := randVec(r, L*qw), randVec(r, S*kw), randVec(r, S*kw)
				for i := range q {
					q[i] *= 2 // peakier softmax
				}
				for i := (a.Pos + L) * kw; i < len(k); i++ {
					k[i], v[i] = float32(math.NaN()), float32(math.Inf(1))
				}
				// The same cache in f16: the reference takes the halves' values.
				kh, vh := make([]uint16, len(k)), make([]uint16, len(v))
				F32sToF16(kh, k)
				F32sToF16(vh, v)
				kwide, vwide := make([]float32, len(k)), make([]float32, len(v))
				F16sToF32(kwide, kh)
				F16sToF32(vwide, vh)
				for _, cache := range []struct {
					name string
					k, v KV
					want []float64
				}{
					{"f32", KV{F32: k}, KV{F32: v}, attnRef(a, q, k, v, L)},
					{"f16", KV{F16: kh}, KV{F16: vh}, attnRef(a, q, kwide, vwide, L)},
				} {
					want := cache.want
					name := fmt.Sprintf("L=%d/dh=%d/G=%d/pos=%d/window=%d/softcap=%g/sinks=%v/%s", L, dh, G, a.Pos, a.Window, a.Softcap, a.Sinks != nil, cache.name)
					for _, set := range attnSets() {
						for _, path := range []struct {
							name string
							run  func(a Attn, dst, q []float32, k, v KV, L int)
						}{{"blocked", attnBlocked}, {"split", attnSplit}, {"heads", attnHeads}} {
							if (path.name == "split" || path.name == "heads") && L > 1 {
								continue
							}
							restore := set.use()
							got := make([]float32, L*qw)
							path.run(a, got, q, cache.k, cache.v, L)
							restore()
							for i := range got {
								if d := math.Abs(float64(got[i]) - want[i]); !(d <= 2e-5*(1+math.Abs(want[i]))) {
									t.Fatalf("%s %s %s: dst[%d] (row %d) = %v, want %v", name, set.name, path.name, i, i/qw, got[i], want[i])
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestAttnExp checks the softmax's vector exp against float64 over y ≤ 0 (all
// the softmax feeds it): within 1 ulp, denormal results included, 0 for −Inf
// and far below, NaN for NaN.
func TestAttnExp(t *testing.T) {
	var ys []float32
	for u := uint64(0x80000000); u <= 0xff800000; u += 997 {
		ys = append(ys, math.Float32frombits(uint32(u)))
	}
	for y := float32(-130); y <= 0; y += 1.0 / 1024 {
		ys = append(ys, y)
	}
	ys = append(ys, 0, float32(math.Copysign(0, -1)), float32(math.Inf(-1)), float32(math.NaN()),
		-87.33655, -87.34, -103.27893, -103.9, -104, -120, -150, -math.MaxFloat32)
	for _, set := range attnSets() {
		restore := set.use()
		got := append([]float32(nil), ys...)
		sum := attnExp(got, 0)
		restore()
		var worst int64
		var at int
		for i, y := range ys {
			if d := ulps(got[i], float32(math.Exp(float64(y)))); d > worst {
				worst, at = d, i
			}
		}
		t.Logf("%s: %d inputs, max %d ulp (at %g)", set.name, len(ys), worst, ys[at])
		if worst > 1 {
			t.Errorf("%s: exp(%g) = %g, want %g", set.name, ys[at], got[at], math.Exp(float64(ys[at])))
		}
		if sum == sum {
			t.Errorf("%s: sum %g, want NaN (one input is NaN)", set.name, sum)
		}
	}
}

// BenchmarkAttn runs one layer of Llama-3.2-1B attention (32 query heads over 8
// KV heads of 64) on one thread, over an f32 and an f16 cache: a 512-token
// prefill and a decode step at position 4095, blocked, and (decode) split by
// keys or by KV heads.
func BenchmarkAttn(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ L, pos int }{{512, 0}, {1, 4095}} {
		a := Attn{Heads: 32, KVHeads: 8, HeadDim: 64, Pos: c.pos, Scale: 0.125}
		qw, kw := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
		q, k, v := randVec(r, c.L*qw), randVec(r, (c.pos+c.L)*kw), randVec(r, (c.pos+c.L)*kw)
		kh, vh := make([]uint16, len(k)), make([]uint16, len(v))
		F32sToF16(kh, k)
		F32sToF16(vh, v)
		dst := make([]float32, c.L*qw)
		var macs float64 // q·k and p·v multiply-adds
		for i := range c.L {
			macs += 2 * float64((c.pos+i+1)*a.HeadDim*a.Heads)
		}
		for _, path := range []struct {
			name string
			run  func(a Attn, dst, q []float32, k, v KV, L int)
		}{{"blocked", attnBlocked}, {"split", attnSplit}, {"heads", attnHeads}} {
			if path.name != "blocked" && c.L > 1 {
				continue
			}
			for _, cache := range []struct {
				name string
				k, v KV
			}{{"f32", KV{F32: k}, KV{F32: v}}, {"f16", KV{F16: kh}, KV{F16: vh}}} {
				b.Run(fmt.Sprintf("L=%d/pos=%d/path=%s/kv=%s", c.L, c.pos, path.name, cache.name), func(b *testing.B) {
					for b.Loop() {
						path.run(a, dst, q, cache.k, cache.v, c.L)
					}
					b.ReportMetric(2*macs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}
