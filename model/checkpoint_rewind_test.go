package model

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
)

// ckSeq is n token ids of the qwen3_5 references' vocabulary (320), in no
// pattern a lookup draft would find.
func ckSeq(n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32((i*37 + 11) % 320)
	}
	return s
}

// ckRun makes the calls of a session: Forward of seq[prev:e] for each end e.
func ckRun(t *testing.T, s *Session, seq []int32, ends []int) []float32 {
	t.Helper()
	var got []float32
	prev := len(s.Cached())
	for _, e := range ends {
		l, err := s.Forward(context.Background(), seq[prev:e])
		if err != nil {
			t.Fatal(err)
		}
		got, prev = slices.Clone(l), e
	}
	return got
}

// TestCheckpointRewind cuts a hybrid session back to positions at a
// checkpoint, between checkpoints, before the first and to 0, and checks
// that the next call restores the newest checkpoint at or before the cut
// (periodic every 8 tokens here, or a call's end), runs only the tokens after
// it again, and gives the logits of a fresh session whose calls end where the
// cut session's did up to that checkpoint and then run the rest as one call:
// the same chunks through the same arithmetic, so bit for bit.
func TestCheckpointRewind(t *testing.T) {
	seq := ckSeq(48)
	decode := []int{10} // then one token a call up to 20
	for e := 11; e <= 20; e++ {
		decode = append(decode, e)
	}
	cases := []struct {
		name      string
		calls     []int // the ends of the session's calls before the cut
		cut, more int   // Truncate(cut), then Forward(seq[cut : cut+more])
		from      int   // the checkpoint restored
	}{
		{"at a periodic checkpoint", []int{30}, 24, 5, 24},
		{"between periodic checkpoints", []int{30}, 20, 5, 16},
		{"at a prompt's end", []int{30, 40}, 30, 4, 30},
		{"past a prompt's end", []int{30, 40}, 31, 4, 30},
		{"past a periodic checkpoint after a prompt", []int{30, 40}, 37, 3, 32},
		{"before the first checkpoint", []int{30}, 5, 6, 0},
		{"to 0", []int{30}, 0, 6, 0},
		{"into decode steps", decode, 18, 3, 16},
		{"to the end (nothing cut)", []int{30}, 30, 2, 30},
	}
	for _, name := range []string{"qwen3_5", "qwen3_5_moe"} {
		dir, _ := readRef(t, name)
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				s := open(t, dir, Options{Threads: 2}, SessionOptions{Context: 64})
				s.cache.ck.every = 8
				ckRun(t, s, seq, tc.calls)
				ck := s.cache.ck
				replayed := ck.replayed
				s.Truncate(tc.cut)
				if p := s.replayLen(); p != tc.cut-tc.from {
					t.Errorf("replayLen %d after the cut, want %d", p, tc.cut-tc.from)
				}
				got := ckRun(t, s, seq, []int{tc.cut + tc.more})
				if n := ck.replayed - replayed; n != tc.cut-tc.from {
					t.Errorf("%d tokens run again, want %d (restored at %d)", n, tc.cut-tc.from, tc.from)
				}
				fresh := open(t, dir, Options{Threads: 2}, SessionOptions{Context: 64})
				fresh.cache.ck.every = 8
				var ends []int
				for _, e := range tc.calls {
					if e < tc.from {
						ends = append(ends, e)
					}
				}
				if tc.from > 0 {
					ends = append(ends, tc.from)
				}
				want := ckRun(t, fresh, seq, append(ends, tc.cut+tc.more))
				if !slices.Equal(got, want) {
					t.Errorf("logits differ from a fresh run's by up to %g", maxAbs(got, want))
				}
				if !slices.Equal(s.Cached(), seq[:tc.cut+tc.more]) {
					t.Errorf("cache holds %d tokens, want %d", len(s.Cached()), tc.cut+tc.more)
				}
			})
		}
	}
}

// TestCheckpointSlots follows the policy of which checkpoints stay: the
// pinned prompt end and the newest always; else a call's before a periodic
// one, the older first, so the newest periodic one stays too; a cut drops
// those past it.
func TestCheckpointSlots(t *testing.T) {
	dir, _ := readRef(t, "qwen3_5")
	s := open(t, dir, Options{Threads: 1}, SessionOptions{Context: 64})
	c, b := s.cache, s.b
	steps := []struct {
		pos              int
		pinned, periodic bool
		want             []int // the positions kept, sorted
	}{
		{10, true, false, []int{10}},
		{16, false, true, []int{10, 16}},
		{20, false, false, []int{10, 16, 20}},
		{24, false, false, []int{10, 16, 20, 24}},
		{28, false, false, []int{10, 16, 24, 28}}, // the older call's copy goes
		{32, false, true, []int{10, 16, 28, 32}},  // not the newest (28) but the call's (24)
		{40, false, true, []int{10, 16, 32, 40}},
		{48, false, true, []int{10, 32, 40, 48}}, // the pinned 10 stays, the oldest periodic goes
		{48, true, false, []int{10, 32, 40, 48}}, // a copy at 48 already: only the pin moves
		{50, false, false, []int{32, 40, 48, 50}},
	}
	kept := func() []int {
		var p []int
		for _, sn := range c.ck.snaps {
			if sn.pos >= 0 {
				p = append(p, sn.pos)
			}
		}
		slices.Sort(p)
		return p
	}
	for _, st := range steps {
		c.len = st.pos
		c.save(b, st.pos, st.pinned, st.periodic)
		if got := kept(); !slices.Equal(got, st.want) {
			t.Fatalf("after a copy at %d: %v, want %v", st.pos, got, st.want)
		}
	}
	c.truncate(45)
	if got := kept(); !slices.Equal(got, []int{32, 40}) {
		t.Errorf("after truncate(45): %v, want [32 40]", got)
	}
	for n, want := range map[int]int{45: 40, 40: 40, 39: 32, 31: 0, 0: 0} {
		if p := c.resume(n); p != want {
			t.Errorf("resume(%d) = %d, want %d", n, p, want)
		}
	}
	// A prompt's end, then speculative rounds' starts: the newest periodic
	// copy (40) stays through them.
	for _, st := range []struct {
		pos  int
		want []int
	}{{41, []int{32, 40, 41}}, {42, []int{32, 40, 41, 42}}, {43, []int{40, 41, 42, 43}}, {44, []int{40, 41, 43, 44}}, {45, []int{40, 41, 44, 45}}} {
		c.len = st.pos
		c.save(b, st.pos, st.pos == 41, false)
		if got := kept(); !slices.Equal(got, st.want) {
			t.Fatalf("after a call's copy at %d: %v, want %v", st.pos, got, st.want)
		}
	}
}

// TestCheckpointSpeculative: greedy speculative decoding of 64 tokens on
// qwen3_5 gives Generate's tokens, and each rejection runs again only the
// accepted drafts and the model's own token (at most k = 4), restored from
// the checkpoint at the verification's start, never the context. Drafting by
// lookup, the prompt repeats its start after the model's own continuation of
// it, so some drafts are accepted before one is rejected; a qwen3_5_moe draft
// session, cut back each round to what the model accepted, restores its own
// checkpoint from before its drafting steps.
func TestCheckpointSpeculative(t *testing.T) {
	ctx := context.Background()
	dir, _ := readRef(t, "qwen3_5")
	o := GenerateOptions{MaxTokens: 64, IgnoreEOS: true}
	fresh := open(t, dir, Options{Threads: 2}, SessionOptions{Context: 128})
	start := make([]int32, 8)
	for i := range start {
		start[i] = int32((11*131 + i*53 + 7) % 320)
	}
	cont, err := fresh.Generate(ctx, start, GenerateOptions{MaxTokens: 24, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	prompt := slices.Concat(start, tokenIDsOf(cont.Tokens), start)
	want, err := fresh.Generate(ctx, prompt, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	const k = 4
	draftDir, _ := readRef(t, "qwen3_5_moe")
	draft := open(t, draftDir, Options{Threads: 2}, SessionOptions{Context: 128})
	for _, sp := range []Speculation{{Tokens: k}, {Tokens: k, Draft: draft}} {
		name := "lookup"
		if sp.Draft != nil {
			name = "draft"
		}
		t.Run(name, func(t *testing.T) {
			s := open(t, dir, Options{Threads: 2}, SessionOptions{Context: 128})
			r, err := s.GenerateSpeculative(ctx, prompt, o, sp, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := tokenIDsOf(r.Tokens); !slices.Equal(got, tokenIDsOf(want.Tokens)) {
				t.Errorf("speculative %v, plain %v", got, tokenIDsOf(want.Tokens))
			}
			ck := s.cache.ck
			t.Logf("%d drafted, %d accepted; %d tokens run again in %d rewinds (at most %d at once); context %d",
				r.Drafted, r.Accepted, ck.replayed, ck.restores, ck.longest, len(s.Cached()))
			if r.Drafted == r.Accepted || ck.restores == 0 {
				t.Fatalf("%d drafted, %d accepted, %d restores: no rejection to rewind", r.Drafted, r.Accepted, ck.restores)
			}
			// A rejected round with a of its d drafts accepted runs a+1 ≤ d tokens again.
			if ck.longest > k || ck.replayed > r.Drafted {
				t.Errorf("%d tokens run again (at most %d at once) for %d drafted; want at most %d at once, %d in all",
					ck.replayed, ck.longest, r.Drafted, k, r.Drafted)
			}
			if d := sp.Draft; d == nil {
				if r.Accepted == 0 || ck.longest < 2 {
					t.Errorf("%d accepted, at most %d run again at once: no rejection after an accepted draft", r.Accepted, ck.longest)
				}
			} else if dk := d.cache.ck; dk.restores == 0 || dk.longest > k {
				t.Errorf("the draft session: %d restores, at most %d tokens run again at once; want > 0, ≤ %d", dk.restores, dk.longest, k)
			}
		})
	}
}

// TestCheckpointBytes: a hybrid session's cache counts the KV cache of its
// attention layers, its linear layers' state and checkpointSlots copies of
// that state, and Estimate counts the same.
func TestCheckpointBytes(t *testing.T) {
	for _, name := range []string{"qwen3_5", "qwen3_5_moe"} {
		dir, _ := readRef(t, name)
		s := open(t, dir, Options{Threads: 1}, SessionOptions{Context: 64})
		c := s.m.Config
		var kv, state int64
		for i := range c.NumLayers {
			if c.linear(i) {
				C := 2*c.LinearKeyHeads*c.LinearKeyDim + c.LinearValueHeads*c.LinearValueDim
				state += int64(4 * ((c.LinearConvKernel-1)*C + c.LinearValueHeads*c.LinearKeyDim*c.LinearValueDim))
			} else {
				kv += int64(4 * 2 * 64 * c.NumKVHeads * c.HeadDim)
			}
		}
		if want := kv + (1+checkpointSlots)*state; s.CacheBytes() != want || s.cache.ck.bytes != checkpointSlots*state {
			t.Errorf("%s: cache %d bytes (checkpoints %d), want %d (KV %d, state %d, %d copies)",
				name, s.CacheBytes(), s.cache.ck.bytes, want, kv, state, checkpointSlots)
		}
		_, est, err := Estimate(dir, Options{}, SessionOptions{Context: 64})
		if err != nil {
			t.Fatal(err)
		}
		if est != s.MemoryBytes() {
			t.Errorf("%s: Estimate %d bytes, session %d", name, est, s.MemoryBytes())
		}
	}
}

// TestCheckpointMetal runs a rewind on the Metal kernels (the MSL
// interpreter; the GPU with INGOT_TEST_BACKEND): a cut between periodic
// checkpoints restores the one before it with CopyRows on the device and
// gives the logits of a fresh session with the same chunks; greedy Generate
// of a prompt again (the pipelined decode's step ahead, dropped at the end,
// and the last prompt token cut and run again) gives the same tokens.
func TestCheckpointMetal(t *testing.T) {
	b := metalBackend(t)
	dir := filepath.Join(refDir, "qwen3_5")
	seq := ckSeq(20)
	s := open(t, dir, Options{Backend: b}, SessionOptions{Context: 32, Batch: 16})
	s.cache.ck.every = 8
	ckRun(t, s, seq, []int{18})
	s.Truncate(12)
	got := ckRun(t, s, seq, []int{16})
	if n := s.cache.ck.replayed; n != 4 {
		t.Errorf("%d tokens run again, want 4 (12 cut back to the checkpoint at 8)", n)
	}
	fresh := open(t, dir, Options{Backend: b}, SessionOptions{Context: 32, Batch: 16})
	fresh.cache.ck.every = 8
	want := ckRun(t, fresh, seq, []int{8, 16})
	if !slices.Equal(got, want) {
		t.Errorf("logits differ from a fresh run's by up to %g", maxAbs(got, want))
	}
	o := GenerateOptions{MaxTokens: 6, IgnoreEOS: true}
	first, err := s.Generate(context.Background(), seq[:10], o, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Generate(context.Background(), seq[:10], o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tokenIDsOf(first.Tokens), tokenIDsOf(again.Tokens)) {
		t.Errorf("Generate again: %v, first %v", tokenIDsOf(again.Tokens), tokenIDsOf(first.Tokens))
	}
	if l := s.cache.ck.longest; l > 8 {
		t.Errorf("a rewind ran %d tokens again, more than the spacing (8)", l)
	}
}

// TestCheckpointForwardEach: ForwardEach's chunks end where forward's do, at
// the multiples of the spacing (8 here), so every row's logits stay those
// of its token, also when a cut first restores a checkpoint and runs the
// kept tokens again: within 1e-5 of a session whose chunks are not cut.
func TestCheckpointForwardEach(t *testing.T) {
	ctx := context.Background()
	dir, _ := readRef(t, "qwen3_5")
	seq := ckSeq(40)
	each := func(s *Session, from, to int) [][]float32 {
		var rows [][]float32
		if err := s.ForwardEach(ctx, seq[from:to], func(i int, l []float32) error {
			rows = append(rows, slices.Clone(l))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	s := open(t, dir, Options{Threads: 2}, SessionOptions{Context: 64})
	s.cache.ck.every = 8
	whole := open(t, dir, Options{Threads: 2}, SessionOptions{Context: 64})
	whole.cache.ck.every = 1 << 20
	got, want := each(s, 0, 30), each(whole, 0, 30)
	s.Truncate(21) // back to the checkpoint at 16, then 5 kept tokens
	whole.Truncate(21)
	got, want = append(got, each(s, 21, 37)...), append(want, each(whole, 21, 37)...)
	if s.cache.ck.replayed != 5 {
		t.Errorf("%d tokens run again, want 5", s.cache.ck.replayed)
	}
	for i := range want {
		if d := maxAbs(got[i], want[i]); d > 1e-5 {
			t.Errorf("row %d: logits max-abs %g", i, d)
		}
	}
}

// TestCheckpointDecodeAllocs: the periodic copies taken during decode steps
// (every 2 tokens here) add no heap allocation to a step.
func TestCheckpointDecodeAllocs(t *testing.T) {
	dir, ref := readRef(t, "qwen3_5")
	s := open(t, dir, Options{Threads: 2, Backend: cpuBackend(t)}, SessionOptions{Context: 256})
	if _, err := s.Forward(context.Background(), ref.InputIDs); err != nil {
		t.Fatal(err)
	}
	s.tokens = slices.Grow(s.tokens, 256)
	step := func() {
		if _, err := s.step(ref.InputIDs[3]); err != nil {
			t.Fatal(err)
		}
	}
	s.cache.ck.every = 1 << 30
	without := testing.AllocsPerRun(40, step)
	s.cache.ck.every = 2
	saves := s.cache.ck.saves
	with := testing.AllocsPerRun(40, step)
	if with != without {
		t.Errorf("a decode step allocates %.1f times with a copy every 2 steps, %.1f without", with, without)
	}
	if n := s.cache.ck.saves - saves; n < 20 {
		t.Errorf("%d periodic copies in 41 steps, want ≥ 20", n)
	}
}
