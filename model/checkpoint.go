package model

import (
	"slices"

	"github.com/ingot-llm/ingot/kernels"
)

// Checkpoints of the linear-attention state. A Gated DeltaNet layer's state
// (the convolution's last K−1 input rows and the delta rule's S) holds every
// token it has seen folded together, so a rewind cannot slice it the way it
// slices K and V. Instead the cache keeps copies of the state taken at chosen
// positions (device-to-device CopyRows, as the KV cache's own writes), and a
// rewind to n restores the newest copy at a position ≤ n and runs only the
// tokens after it again.
//
// When. A copy is taken
//   - at the start of a forward call of two or more tokens: a speculative
//     verification's start, so a rejected draft restores it and runs again
//     only the accepted tokens (≤ k of them);
//   - at the end of a forward call of two or more tokens outside speculation
//     (a prompt's end; pinned, see below): what the next turn of a chat, whose
//     prompt repeats this one and then differs, restores;
//   - at the end of a draft session's catch-up, before its drafting steps;
//   - at every multiple of checkpointEvery tokens, prefill and decode alike
//     (a prefill chunk ends there): a rewind past the newest multiple that
//     no call's copy covers runs fewer than checkpointEvery tokens again.
//
// How many. checkpointSlots copies at most, allocated with the session (they
// count in CacheBytes). A copy replaces an empty slot (one past a rewind),
// else the oldest that is neither the newest nor the pinned one, a call's
// before a periodic one. So the pinned prompt end and the newest copy always
// stay, and with them the two best of the others.
const (
	// checkpointEvery (N) is the spacing of periodic copies in tokens. The
	// newest periodic copy always stays (the eviction order keeps it), so a
	// rewind to any point after the newest multiple of N runs fewer than N
	// tokens again; deeper ones restore the pinned copy or an older one if
	// kept, else run from 0. 256 is half
	// the default prefill chunk: prefill chunks cut at its multiples stay
	// large enough for the mat-muls to run at full speed (a 510-token
	// prefill of a 0.6B-class shape on 2 CPU cores: 18.1 s in chunks of 256
	// and 254, 18.6 s in one), a replay of < 256 tokens is one such chunk,
	// and a copy every 256 decode steps costs 1/256 of a state copy a token.
	checkpointEvery = 256
	// checkpointSlots (M) is the most copies kept: the pinned prompt end, the
	// newest (a verification's start) and two more (periodic or earlier
	// calls'). Each costs the linear layers' state again (checkpointBytes):
	// 1.07 MiB a layer of 16 key and value heads of 128 (S 1 MiB, a 4-tap
	// convolution's 3 rows of 6144), so 4 copies of 32 such layers take
	// 137 MiB.
	checkpointSlots = 4
)

// snapshot is a copy of every linear layer's state after the first pos tokens.
type snapshot struct {
	pos      int  // tokens the state had seen; -1: empty
	pinned   bool // the end of the latest call outside speculation (a prompt's)
	periodic bool // at a multiple of the spacing
	// Per linear layer j (in layer order): views of its rows in one tensor
	// of all layers' convolution states (nLin·(K−1), C) and one of their S
	// (nLin·nv·dk, dv). conv is nil when K = 1.
	conv, S []*kernels.Tensor
}

// checkpoints is a cache's snapshots of its linear layers' state and the
// counters the tests read.
type checkpoints struct {
	snaps []snapshot
	every int   // N; a test may lower it
	lin   []int // the linear layers' indices
	bytes int64 // the snapshots' device memory

	saves    int // copies taken
	restores int // rewinds served from a copy (not from the zero state)
	replayed int // tokens run again after rewinds
	longest  int // the most tokens one rewind ran again
}

// newCheckpoints allocates the snapshots of c's linear layers.
func newCheckpoints(b kernels.Backend, c *Config) *checkpoints {
	ck := &checkpoints{every: checkpointEvery}
	for i := range c.NumLayers {
		if c.linear(i) {
			ck.lin = append(ck.lin, i)
		}
	}
	n := len(ck.lin)
	K1 := max(c.LinearConvKernel-1, 0)
	C := 2*c.LinearKeyHeads*c.LinearKeyDim + c.LinearValueHeads*c.LinearValueDim
	R, dv := c.LinearValueHeads*c.LinearKeyDim, c.LinearValueDim
	ck.snaps = make([]snapshot, checkpointSlots)
	for k := range ck.snaps {
		sn := &ck.snaps[k]
		sn.pos = -1
		S := b.New(n*R, dv)
		var conv *kernels.Tensor
		if K1 > 0 {
			conv = b.New(n*K1, C)
			sn.conv = make([]*kernels.Tensor, n)
		}
		sn.S = make([]*kernels.Tensor, n)
		for j := range n {
			sn.S[j] = S.Rows(j*R, (j+1)*R)
			if conv != nil {
				sn.conv[j] = conv.Rows(j*K1, (j+1)*K1)
			}
		}
	}
	ck.bytes = checkpointBytes(c)
	return ck
}

// checkpointBytes is the device memory of the snapshots of c's linear layers:
// checkpointSlots copies of their state; 0 without linear layers.
func checkpointBytes(c *Config) int64 {
	var n int64
	for i := range c.NumLayers {
		if c.linear(i) {
			n += linearStateBytes(c)
		}
	}
	return checkpointSlots * n
}

// linearStateBytes is one linear layer's state: the convolution's K−1 rows
// of C and S (nv·dk, dv), f32.
func linearStateBytes(c *Config) int64 {
	C := 2*c.LinearKeyHeads*c.LinearKeyDim + c.LinearValueHeads*c.LinearValueDim
	return 4 * int64(max(c.LinearConvKernel-1, 0)*C+c.LinearValueHeads*c.LinearKeyDim*c.LinearValueDim)
}

// save copies the state, which has seen the first pos tokens, into a slot
// (see the policy above); pinned moves the pin to it. The zero state (pos 0)
// needs no copy, and a copy already at pos is only re-marked.
func (c *cache) save(b kernels.Backend, pos int, pinned, periodic bool) {
	ck := c.ck
	if ck == nil || pos <= 0 {
		return
	}
	if pinned {
		for k := range ck.snaps {
			ck.snaps[k].pinned = false
		}
	}
	newest, slot := -1, -1
	for k := range ck.snaps {
		sn := &ck.snaps[k]
		if sn.pos == pos {
			sn.pinned = sn.pinned || pinned
			sn.periodic = sn.periodic || periodic
			return
		}
		if sn.pos >= 0 && (newest < 0 || sn.pos > ck.snaps[newest].pos) {
			newest = k
		}
	}
	for k := range ck.snaps { // an empty slot, else the victim
		sn := &ck.snaps[k]
		if sn.pos < 0 {
			slot = k
			break
		}
		if k == newest || sn.pinned {
			continue
		}
		if slot < 0 || evictBefore(sn, &ck.snaps[slot]) {
			slot = k
		}
	}
	sn := &ck.snaps[slot]
	for j, i := range ck.lin {
		if sn.conv != nil {
			b.CopyRows(sn.conv[j], c.conv[i], 0)
		}
		b.CopyRows(sn.S[j], c.S[i], 0)
	}
	sn.pos, sn.pinned, sn.periodic = pos, pinned, periodic
	ck.saves++
}

// evictBefore reports whether a is replaced before b: a call's copy before a
// periodic one, then the older.
func evictBefore(a, b *snapshot) bool {
	if a.periodic != b.periodic {
		return !a.periodic
	}
	return a.pos < b.pos
}

// tick takes the periodic copy when the state has just seen a multiple of
// the spacing (pos tokens).
func (c *cache) tick(b kernels.Backend, pos int) {
	if c.ck != nil && pos%c.ck.every == 0 {
		c.save(b, pos, false, true)
	}
}

// chunk is the length of the next forward chunk of at most n tokens at pos:
// periodic copies need a chunk to end at each multiple of the spacing.
func (c *cache) chunk(pos, n int) int {
	if c.ck != nil {
		n = min(n, c.ck.every-pos%c.ck.every)
	}
	return n
}

// resume is the position a rewind to n restores: the newest copy at or
// before n, or 0 (the zero state).
func (c *cache) resume(n int) int {
	p := 0
	if c.ck != nil {
		for _, sn := range c.ck.snaps {
			if sn.pos <= n && sn.pos > p {
				p = sn.pos
			}
		}
	}
	return p
}

// restore sets the state of a stale cache holding n tokens back to the
// newest copy at or before n (else zero) and returns its position: the tokens
// from there to n must run again.
func (c *cache) restore(b kernels.Backend, n int) int {
	p := c.resume(n)
	if p == 0 {
		c.reset(b)
		return 0
	}
	ck := c.ck
	for k := range ck.snaps {
		if sn := &ck.snaps[k]; sn.pos == p {
			for j, i := range ck.lin {
				if sn.conv != nil {
					b.CopyRows(c.conv[i], sn.conv[j], 0)
				}
				b.CopyRows(c.S[i], sn.S[j], 0)
			}
			break
		}
	}
	ck.restores++
	c.len, c.stale = p, false
	return p
}

// rewind restores a stale linear-attention state from the newest checkpoint
// at or before the cached tokens' end and returns the cached tokens after it,
// now dropped from s.tokens: the caller runs them again before its own. It
// returns nil when the state is current.
func (s *Session) rewind() ([]int32, error) {
	if !s.cache.stale {
		return nil, nil
	}
	if err := s.lock(); err != nil {
		return nil, err
	}
	p := s.cache.restore(s.b, len(s.tokens))
	s.unlock()
	kept := slices.Clone(s.tokens[p:])
	s.tokens = s.tokens[:p]
	ck := s.cache.ck
	ck.replayed += len(kept)
	ck.longest = max(ck.longest, len(kept))
	s.m.log.Debug("linear-attention state restored", "checkpoint", p, "replay", len(kept))
	return kept, nil
}

// replayLen is the number of cached tokens the next forward call runs again
// before its own (see rewind).
func (s *Session) replayLen() int {
	if !s.cache.stale {
		return 0
	}
	return len(s.tokens) - s.cache.resume(len(s.tokens))
}

// checkpoint copies a linear-attention state at the cached tokens' end (a
// draft session's before its drafting steps, which the next round cuts back).
func (s *Session) checkpoint() error {
	if s.cache.ck == nil || s.cache.stale {
		return nil
	}
	if err := s.lock(); err != nil {
		return err
	}
	s.cache.save(s.b, len(s.tokens), false, false)
	s.unlock()
	return nil
}
