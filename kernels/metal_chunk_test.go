package kernels

import (
	"context"
	"math"
	"slices"
	"testing"
)

// TestMetalAttentionChunks runs a 64-token prefill attention on metal-emu
// at short and at long KV with the command-buffer limit scaled down 16×
// (256: the same split as the real 4096 at 16× the keys): at short KV it is
// one dispatch in one command buffer; at 4k keys its rows run in blocks of
// estimated work at most half the limit (attnWork), committed as the work
// adds up, so the long-KV prompt takes more command buffers, with outputs
// bit for bit those of one dispatch (the device without a limit), with a
// sliding window and sinks too (each block's rows see their own positions;
// a row's keys are at most the window, so the blocks are larger).
func TestMetalAttentionChunks(t *testing.T) {
	m := testMetal(t)
	if m.workLimit == 0 {
		t.Skip("the device does not limit command buffers (CUDA)")
	}
	defer func(w int) { m.workLimit = w }(m.workLimit)
	const L, H, Hkv, Dh = 64, 4, 2, 16
	run := func(pos, limit int, p *AttnParams) ([]float32, Stats) {
		S := pos + L
		qw, kw := H*Dh, Hkv*Dh
		q, k, v := randn(L*qw, 1), randn(S*kw, 2), randn(S*kw, 3)
		kc, vc := cacheF16(m, put(m, k, S, kw)), cacheF16(m, put(m, v, S, kw))
		qd, dst := put(m, q, L, qw), m.New(L, qw)
		if err := m.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		m.workLimit = limit
		m.ResetStats()
		m.Attention(dst, qd, kc, vc, pos, p)
		if err := m.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := m.Stats()
		return get(t, m, dst), st
	}
	p := &AttnParams{Heads: H, KVHeads: Hkv, HeadDim: Dh, Scale: float32(1 / math.Sqrt(Dh))}
	_, short := run(0, 256, p)
	if short.Dispatches != 1 || short.CommandBuffers != 1 {
		t.Errorf("short KV: %d dispatches in %d command buffers, want 1, 1", short.Dispatches, short.CommandBuffers)
	}
	window := &AttnParams{Heads: H, KVHeads: Hkv, HeadDim: Dh, Scale: p.Scale, Window: 1500, Sinks: []float32{0.5, -1, 2, 0}}
	for _, c := range []struct {
		p        *AttnParams
		blocks   int
		cbs      int64
		describe string
	}{
		// 4096 keys: 16 units a row, blocks of 128/16 = 8 rows, 8 of them,
		// a command buffer every 2 (the limit is 256).
		{p, L / 8, L / 8 / 2, "4k keys"},
		// A 1500-key window: 6 units a row, blocks of 20 rows (a multiple of
		// the kernel's 4-row tiles), 4 of them, 120 units each.
		{window, 4, 2, "4k keys, a 1500-key window and sinks"},
	} {
		pos := 4096 - L
		got, long := run(pos, 256, c.p)
		want, one := run(pos, 0, c.p)
		t.Logf("%s: %d dispatches in %d command buffers (%d without the limit)", c.describe, long.Dispatches, long.CommandBuffers, one.CommandBuffers)
		if long.Dispatches != int64(c.blocks) || long.CommandBuffers != c.cbs {
			t.Errorf("%s: %d dispatches in %d command buffers, want %d in %d", c.describe, long.Dispatches, long.CommandBuffers, c.blocks, c.cbs)
		}
		if long.CommandBuffers <= short.CommandBuffers {
			t.Errorf("%s: %d command buffers, short KV %d: want more at long KV", c.describe, long.CommandBuffers, short.CommandBuffers)
		}
		if one.Dispatches != 1 || !slices.Equal(got, want) {
			t.Errorf("%s: split attention differs from one dispatch (%d dispatches without the limit)", c.describe, one.Dispatches)
		}
	}
}
