package kernels

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// attnTol: float32 softmax and dot products in another order than the CPU.
var attnTol = tol{NMSE: 1e-11, MaxAbs: 2e-5}

func TestMetalAttention(t *testing.T) {
	m := testMetal(t)
	type tc = attnCase
	var cases []tc
	// Head dims and GQA ratios, decode (L = 1) and prefill (L > 1).
	for _, Dh := range []int{8, 16, 32, 64, 128} {
		for _, ratio := range []int{1, 2, 4} {
			cases = append(cases, tc{L: 1, pos: 40, H: 2 * ratio, Hkv: 2, Dh: Dh}, tc{L: 7, pos: 3, H: 2 * ratio, Hkv: 2, Dh: Dh})
		}
	}
	cases = append(cases,
		tc{L: 1, pos: 0, H: 4, Hkv: 1, Dh: 32},             // the first token
		tc{L: 1, pos: 31, H: 4, Hkv: 2, Dh: 16},            // blk edges
		tc{L: 1, pos: 32, H: 4, Hkv: 2, Dh: 16},            //
		tc{L: 1, pos: 600, H: 4, Hkv: 2, Dh: 32},           // several flash-decoding splits
		tc{L: 1, pos: 1100, H: 8, Hkv: 2, Dh: 64},          // …
		tc{L: 2, pos: 0, H: 2, Hkv: 1, Dh: 16},             // smallest prefill
		tc{L: 9, pos: 0, H: 8, Hkv: 2, Dh: 32},             // tinycode prefill: tiles of 2 rows × 4 heads
		tc{L: 33, pos: 5, H: 2, Hkv: 2, Dh: 16},            // several key blocks and row tiles
		tc{L: 9, pos: 0, H: 2, Hkv: 1, Dh: 256},            // largest head dim (blk 14)
		tc{L: 1, pos: 70, H: 2, Hkv: 1, Dh: 256},           //
		tc{L: 7, pos: 10, H: 4, Hkv: 2, Dh: 16, window: 6}, // Gemma 2 sliding window
		tc{L: 1, pos: 20, H: 4, Hkv: 2, Dh: 16, window: 6},
		tc{L: 1, pos: 1100, H: 4, Hkv: 2, Dh: 16, window: 600}, // window across splits
		tc{L: 12, pos: 0, H: 4, Hkv: 2, Dh: 16, window: 4, softcap: 2},
		tc{L: 1, pos: 9, H: 4, Hkv: 2, Dh: 16, softcap: 50},
		tc{L: 5, pos: 2, H: 4, Hkv: 2, Dh: 16, softcap: 0.5},
		tc{L: 9, pos: 3, H: 4, Hkv: 2, Dh: 16, sinks: true},             // gpt-oss sinks, prefill
		tc{L: 7, pos: 10, H: 4, Hkv: 2, Dh: 16, window: 6, sinks: true}, // with a sliding window
	)
	testAttention(t, m, cases)
}

// attnCase is one Attention call of the tests: L query rows at pos over a
// cache of H/Hkv heads of Dh, an optional window and softcap.
type attnCase struct {
	L, pos, H, Hkv, Dh, window int
	softcap                    float32
	sinks                      bool // one logit per head, ~N(0, 4²): above and below the scores
}

// testAttention checks m's Attention against the CPU's on each case, with an
// f32 and an f16 cache.
func testAttention(t *testing.T, m *Metal, cases []attnCase) {
	for _, c := range cases {
		name := fmt.Sprintf("L=%d/pos=%d/H=%d/Hkv=%d/Dh=%d", c.L, c.pos, c.H, c.Hkv, c.Dh)
		if c.window > 0 {
			name += fmt.Sprintf("/window=%d", c.window)
		}
		if c.softcap > 0 {
			name += fmt.Sprintf("/softcap=%g", c.softcap)
		}
		if c.sinks {
			name += "/sinks"
		}
		for _, f16 := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/f32", true: "/f16"}[f16], func(t *testing.T) {
				S := c.pos + c.L + 3 // cache rows beyond pos+L must be ignored
				qw, kw := c.H*c.Dh, c.Hkv*c.Dh
				q, k, v := randn(c.L*qw, 1), randn(S*kw, 2), randn(S*kw, 3)
				for i := range q {
					q[i] *= 3 // a sharper softmax than unit scores
				}
				p := &AttnParams{Heads: c.H, KVHeads: c.Hkv, HeadDim: c.Dh, Scale: float32(1 / math.Sqrt(float64(c.Dh))), Window: c.window, Softcap: c.softcap}
				if c.sinks {
					p.Sinks = randn(c.H, 9)
					for i := range p.Sinks {
						p.Sinks[i] *= 4
					}
				}
				want := make([]float32, c.L*qw)
				cpuRef(func(cp *CPU) {
					kc, vc := FromF32(k, S, kw), FromF32(v, S, kw)
					if f16 {
						kc, vc = cacheF16(cp, kc), cacheF16(cp, vc)
					}
					cp.Attention(FromF32(want, c.L, qw), FromF32(q, c.L, qw), kc, vc, c.pos, p)
				})
				kc, vc := put(m, k, S, kw), put(m, v, S, kw)
				if f16 {
					kc, vc = cacheF16(m, kc), cacheF16(m, vc)
				}
				dst := m.New(c.L, qw)
				m.Attention(dst, put(m, q, c.L, qw), kc, vc, c.pos, p)
				n, a := closeTo(t, get(t, m, dst), want, attnTol)
				t.Logf("NMSE %.2g max-abs %.2g", n, a)
			})
		}
	}
}

// TestMetalAttentionDecode runs decode attention (attn_decode) at its edges: head dims (multiples of 4 up to 256), 1 … 8 query heads per KV
// head, one split (≤ 32 keys, no reduce) and several (up to 128 keys each, the
// last one short, more splits than the reduce has threads), windows, softcap.
func TestMetalAttentionDecode(t *testing.T) {
	m := testMetal(t)
	type tc = attnCase
	var cases []tc
	for _, Dh := range []int{4, 8, 12, 64, 96, 128, 256} {
		for _, ratio := range []int{1, 3, 8} {
			cases = append(cases, tc{L: 1, pos: 40, H: 2 * ratio, Hkv: 2, Dh: Dh})
		}
	}
	cases = append(cases,
		tc{L: 1, pos: 0, H: 4, Hkv: 1, Dh: 32},    // the first token
		tc{L: 1, pos: 30, H: 8, Hkv: 8, Dh: 64},   // 31 keys: a short score pass
		tc{L: 1, pos: 31, H: 4, Hkv: 2, Dh: 128},  // 32 keys: one full split, no reduce
		tc{L: 1, pos: 32, H: 4, Hkv: 2, Dh: 128},  // 33: two splits
		tc{L: 1, pos: 4000, H: 2, Hkv: 1, Dh: 16}, // 126 splits of 32 keys
		tc{L: 1, pos: 8000, H: 8, Hkv: 1, Dh: 16}, // 251 splits: the reduce strides them
		tc{L: 1, pos: 30000, H: 4, Hkv: 4, Dh: 8}, // splits of 128 keys, 235 of them
		tc{L: 1, pos: 1100, H: 32, Hkv: 8, Dh: 128},
		tc{L: 1, pos: 600, H: 16, Hkv: 2, Dh: 256}, // the largest threadgroup memory
		tc{L: 1, pos: 20, H: 4, Hkv: 2, Dh: 16, window: 6},
		tc{L: 1, pos: 1100, H: 4, Hkv: 2, Dh: 16, window: 600}, // window across splits
		tc{L: 1, pos: 9, H: 4, Hkv: 2, Dh: 16, softcap: 50},
		tc{L: 1, pos: 300, H: 4, Hkv: 2, Dh: 64, softcap: 0.5},
		tc{L: 1, pos: 20, H: 4, Hkv: 2, Dh: 16, sinks: true},                // one split
		tc{L: 1, pos: 1100, H: 8, Hkv: 2, Dh: 64, window: 600, sinks: true}, // several: the reduce
	)
	testAttention(t, m, cases)
	for _, kv := range []string{"f32", "f16"} {
		for _, g := range []int{1, 2, 4, 8} {
			name := fmt.Sprintf("attn_decode_f32_g%d", g)
			if kv == "f16" {
				name = fmt.Sprintf("attn_decode_f16_f32_g%d", g)
			}
			if m.pipes[name] == nil {
				t.Errorf("%s never ran", name)
			}
		}
	}
}

// TestMetalAttentionDecodeFallback: caches attn_decode cannot read (more than
// 8 query heads per KV head, a head dim not a multiple of 4, rows off 16-byte
// boundaries) run the prefill kernel, correctly.
func TestMetalAttentionDecodeFallback(t *testing.T) {
	m := testMetal(t)
	testAttention(t, m, []attnCase{{L: 1, pos: 50, H: 9, Hkv: 1, Dh: 16}, {L: 1, pos: 50, H: 4, Hkv: 2, Dh: 6}, {L: 1, pos: 50, H: 9, Hkv: 1, Dh: 16, sinks: true}})
	// An f32 cache of 1 head of 2 dims, viewed from row 1: 8-byte offsets.
	const S, Dh = 40, 2
	k, v := randn(S*Dh, 2), randn(S*Dh, 3)
	q := randn(Dh, 1)
	p := &AttnParams{Heads: 1, KVHeads: 1, HeadDim: Dh, Scale: 0.7}
	want := make([]float32, Dh)
	cpuRef(func(cp *CPU) {
		cp.Attention(FromF32(want, 1, Dh), FromF32(q, 1, Dh), FromF32(k[Dh:], S-1, Dh), FromF32(v[Dh:], S-1, Dh), S-2, p)
	})
	kc, vc := put(m, k, S, Dh).Rows(1, S), put(m, v, S, Dh).Rows(1, S)
	if kc.Off%16 == 0 {
		t.Fatalf("view offset %d: want one off 16-byte boundaries", kc.Off)
	}
	dst := m.New(1, Dh)
	m.Attention(dst, put(m, q, 1, Dh), kc, vc, S-2, p)
	closeTo(t, get(t, m, dst), want, attnTol)
	for name, p := range m.pipes {
		if p != nil && strings.HasPrefix(name, "attn_decode") {
			t.Errorf("%s ran on a cache it cannot read", name)
		}
	}
}

// cacheF16 returns an f16 cache holding x's rows, written by b's CopyRows in
// two parts (a prefill's rows, then one row).
func cacheF16(b Backend, x *Tensor) *Tensor {
	rows := x.NumRows()
	c := b.NewF16(rows, x.Cols())
	b.CopyRows(c, x.Rows(0, rows-1), 0)
	b.CopyRows(c, x.Rows(rows-1, rows), rows-1)
	return c
}

// BenchmarkMetalAttention measures one flash-decoding step (decode + reduce).
// On the MSL interpreter it only proves the dispatch path runs; on Apple
// hardware gpu-ns/op is the command buffer's GPU time.
func BenchmarkMetalAttention(b *testing.B) {
	m := testMetal(b)
	for _, pos := range []int{64, 1024} {
		b.Run(fmt.Sprintf("L=1/pos=%d/H=8/Hkv=2/Dh=64", pos), func(b *testing.B) {
			const H, Hkv, Dh = 8, 2, 64
			S := pos + 1
			q := put(m, randn(H*Dh, 1), 1, H*Dh)
			k, v := put(m, randn(S*Hkv*Dh, 2), S, Hkv*Dh), put(m, randn(S*Hkv*Dh, 3), S, Hkv*Dh)
			dst := m.New(1, H*Dh)
			p := &AttnParams{Heads: H, KVHeads: Hkv, HeadDim: Dh, Scale: 0.125}
			b.SetBytes(int64(2 * 4 * S * Hkv * Dh)) // K and V read once
			m.ResetStats()
			for b.Loop() {
				m.Attention(dst, q, k, v, pos, p)
				if err := m.Sync(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			s := m.Stats()
			b.ReportMetric(float64(s.GPUTime.Nanoseconds())/float64(max(s.CommandBuffers, 1)), "gpu-ns/op")
		})
	}
}
