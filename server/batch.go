package server

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ingot-llm/ingot/model"
)

// A batcher runs the forwards of a pool's sequences on one goroutine:
// continuous batching. Each step decodes one token of every sequence that
// has one ready, in one model.Batch step (each weight matrix read once for
// all of them). Between steps, in a gap, it prefills the prompts waiting,
// oldest first, a chunk (Session.PrefillChunk tokens) at a time:
//
//   - While no sequence has decoded in a step (none, or only those whose
//     prompts just ended, with no token yet but the one from their
//     prompt's logits), there is no stream to delay: the gap goes on
//     until no prompt waits, so that prompts arriving together decode
//     together from their second token on (llama-server prefills every
//     waiting prompt before it decodes them).
//   - Otherwise a chunk starts only while the gap has run for less than
//     its budget, gapSteps times the last step's time (the first chunk
//     always runs): a stream's token waits for at most that plus one
//     chunk, and while prompts wait, the decoding streams keep at least
//     1/(1+gapSteps) of the time, less one chunk's overrun a gap.
//
// A sequence joins the steps after its prompt's last chunk and leaves when
// its request ends: at once, and within one step or chunk when its client
// goes away.
//
// Sampling, logprobs, grammar masks and emitting stay on the request's
// goroutine (poolSlot.runLogits with a member as its forwarder): a step
// waits for the sequences sampling their last token, for at most patience,
// then runs with those ready; the others join the next.
//
// What a sequence gets does not depend on its neighbours: a prompt is
// prefilled in the chunks one call would run, and on the CPU backend a
// batch step computes each row as a one-token step does (see model.Batch).
type batcher struct {
	b *model.Batch

	mu       sync.Mutex
	decoders int       // sequences past their prompt, until they leave
	streams  int       // of those, the ones a step has decoded for
	ready    []*member // tokens to decode at the next step, in arrival order
	prefills []*member // prompts to prefill, oldest first

	wake   chan struct{} // buffered: something was queued or left
	done   chan struct{} // closed by close
	exited chan struct{} // closed when loop returns

	ss   []*model.Session // a step's sessions and tokens, kept so a step allocates little
	toks []int32
	run  []*member

	steps, rows, widest atomic.Int64 // steps run, tokens they decoded, and the most in one

	// Test hooks, nil in a server, called on the loop goroutine: before
	// each forward (a prefill chunk or a step), and after each gap that
	// ran a chunk.
	beforeForward func(prefill bool)
	afterGap      func(gapStats)
}

// gapStats describes one gap between steps.
type gapStats struct {
	open    bool          // no sequence had decoded in a step when its last chunk started: no budget held it
	budget  time.Duration // how long it could start chunks for while one had
	chunks  int           // prefill chunks it ran
	took    time.Duration // their time
	longest time.Duration // the longest one's
}

// A member is one sequence's place in the batcher. Its fields but s are
// guarded by batcher.mu.
type member struct {
	bt       *batcher
	s        *model.Session
	ctx      context.Context
	tok      int32   // the token to decode
	toks     []int32 // the prompt tokens left to prefill
	decoding bool    // counted in batcher.decoders
	stepped  bool    // counted in batcher.streams
	running  bool    // the loop is running its forward: it can no longer be taken out
	done     chan struct{}
	logits   []float32 // the last forward's, the member's own copy
	err      error
}

// patience is the longest a step waits for sequences still sampling.
const (
	minPatience = time.Millisecond
	maxPatience = 50 * time.Millisecond
)

// gapSteps is a gap's budget for prefill chunks while sequences decode, in
// the last step's time (see batcher).
const gapSteps = 2

// newBatcher starts a batcher of up to n sequences of m.
func newBatcher(m *model.Model, n int) (*batcher, error) {
	b, err := m.NewBatch(n)
	if err != nil {
		return nil, err
	}
	bt := &batcher{b: b, wake: make(chan struct{}, 1), done: make(chan struct{}), exited: make(chan struct{})}
	go bt.loop()
	return bt, nil
}

// close stops the loop (no member may be waiting) and releases the batch.
func (bt *batcher) close() error {
	close(bt.done)
	<-bt.exited
	return bt.b.Close()
}

func (bt *batcher) signal() {
	select {
	case bt.wake <- struct{}{}:
	default:
	}
}

// join returns s's member; the caller leaves when its sequence ends.
func (bt *batcher) join(s *model.Session) *member {
	return &member{bt: bt, s: s, done: make(chan struct{}, 1)}
}

// leave takes m out of the steps.
func (m *member) leave() {
	bt := m.bt
	bt.mu.Lock()
	m.stopDecoding()
	bt.mu.Unlock()
	bt.signal()
}

// stopDecoding takes m out of the decoding sequences. bt.mu is held.
func (m *member) stopDecoding() {
	if m.decoding {
		m.decoding = false
		m.bt.decoders--
	}
	if m.stepped {
		m.stepped = false
		m.bt.streams--
	}
}

// prefill runs tokens (appended to the session's cache) in chunks between
// steps and returns the logits after the last.
func (m *member) prefill(ctx context.Context, tokens []int32) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, errors.New("server: no tokens to prefill")
	}
	bt := m.bt
	bt.mu.Lock()
	m.stopDecoding() // a sequence's prefill after decoding (echo then more) leaves the steps meanwhile
	m.ctx, m.toks = ctx, tokens
	bt.prefills = append(bt.prefills, m)
	bt.mu.Unlock()
	bt.signal()
	return m.wait(ctx, &bt.prefills)
}

// decode runs tok at the session's next position in the next step and
// returns the logits after it.
func (m *member) decode(ctx context.Context, tok int32) ([]float32, error) {
	bt := m.bt
	bt.mu.Lock()
	m.ctx, m.tok = ctx, tok
	bt.ready = append(bt.ready, m)
	bt.mu.Unlock()
	bt.signal()
	return m.wait(ctx, &bt.ready)
}

// wait waits for m's forward, queued in q. Cancelled, it takes m out of q
// if its forward has not begun, else waits for it (one step or chunk): the
// session is the loop's until then.
func (m *member) wait(ctx context.Context, q *[]*member) ([]float32, error) {
	bt := m.bt
	var err error
	select {
	case <-m.done:
		return m.logits, m.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-bt.done:
		err = errShutdown
	}
	bt.mu.Lock()
	if i := slices.Index(*q, m); i >= 0 && !m.running {
		*q = slices.Delete(*q, i, i+1)
		bt.mu.Unlock()
		bt.signal()
		return nil, err
	}
	bt.mu.Unlock()
	<-m.done
	return nil, err
}

// loop runs gaps of prefill chunks and steps until close.
func (bt *batcher) loop() {
	defer close(bt.exited)
	var last time.Duration // the last step's time
	for {
		bt.mu.Lock()
		for len(bt.ready) == 0 && len(bt.prefills) == 0 {
			bt.mu.Unlock()
			select {
			case <-bt.wake:
			case <-bt.done:
				return
			}
			bt.mu.Lock()
		}
		g := gapStats{budget: gapSteps * last}
		for len(bt.prefills) > 0 {
			if g.open = bt.streams == 0; !g.open && g.chunks > 0 && g.took >= g.budget {
				break
			}
			pf := bt.prefills[0]
			pf.running = true
			bt.mu.Unlock()
			start := time.Now()
			bt.prefillChunk(pf)
			d := time.Since(start)
			g.chunks, g.took, g.longest = g.chunks+1, g.took+d, max(g.longest, d)
			bt.mu.Lock()
		}
		if g.chunks > 0 && bt.afterGap != nil {
			bt.afterGap(g)
		}
		if len(bt.prefills) == 0 {
			bt.gather(min(max(last/2, minPatience), maxPatience))
		}
		bt.run = append(bt.run[:0], bt.ready...)
		bt.ready = bt.ready[:0]
		for _, m := range bt.run {
			m.running = true
		}
		bt.mu.Unlock()
		if len(bt.run) > 0 {
			start := time.Now()
			bt.step(bt.run)
			last = time.Since(start)
		}
	}
}

// gather waits, for at most d, until every decoding sequence has its token
// ready, when some have. bt.mu is held.
func (bt *batcher) gather(d time.Duration) {
	if len(bt.ready) == 0 || len(bt.ready) >= bt.decoders {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for len(bt.ready) > 0 && len(bt.ready) < bt.decoders {
		bt.mu.Unlock()
		select {
		case <-bt.wake:
		case <-t.C:
			bt.mu.Lock()
			return
		}
		bt.mu.Lock()
	}
}

// prefillChunk runs the next chunk of pf's prompt, and ends its prefill
// after the last or an error.
func (bt *batcher) prefillChunk(pf *member) {
	if bt.beforeForward != nil {
		bt.beforeForward(true)
	}
	n := min(len(pf.toks), pf.s.PrefillChunk())
	logits, err := pf.s.Forward(pf.ctx, pf.toks[:n])
	bt.mu.Lock()
	defer bt.mu.Unlock()
	pf.running = false
	pf.toks = pf.toks[n:]
	if err == nil && len(pf.toks) > 0 {
		if err = pf.ctx.Err(); err == nil {
			return // more chunks: it stays first in line
		}
	}
	bt.prefills = slices.DeleteFunc(bt.prefills, func(m *member) bool { return m == pf })
	pf.logits, pf.err, pf.toks = logits, err, nil
	if err == nil {
		pf.decoding = true
		bt.decoders++
	}
	pf.done <- struct{}{}
}

// step decodes every member of run in one batch step, or, if that fails,
// each alone, so that one sequence's error is its own.
func (bt *batcher) step(run []*member) {
	bt.ss, bt.toks = bt.ss[:0], bt.toks[:0]
	for _, m := range run {
		bt.ss, bt.toks = append(bt.ss, m.s), append(bt.toks, m.tok)
	}
	if bt.beforeForward != nil {
		bt.beforeForward(false)
	}
	out, err := bt.b.Step(context.Background(), bt.ss, bt.toks)
	if err != nil && len(run) > 1 {
		for _, m := range run {
			bt.step([]*member{m})
		}
		return
	}
	if err == nil {
		bt.steps.Add(1)
		bt.rows.Add(int64(len(run)))
		if n := int64(len(run)); n > bt.widest.Load() {
			bt.widest.Store(n)
		}
	}
	bt.mu.Lock()
	defer bt.mu.Unlock()
	for j, m := range run {
		m.running, m.err = false, err
		if err == nil {
			m.logits = append(m.logits[:0], out[j]...)
			if m.decoding && !m.stepped {
				m.stepped = true
				bt.streams++
			}
		}
		m.done <- struct{}{}
	}
}
