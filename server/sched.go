package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ingot-llm/ingot"
	"github.com/ingot-llm/ingot/model"
	"github.com/ingot-llm/ingot/server/constrain"
)

// errQueueFull is returned by acquire when the wait queue is full (HTTP 429).
var errQueueFull = errors.New("server: queue full")

// errShutdown is returned by acquire after the scheduler is closed.
var errShutdown = errors.New("server: shutting down")

// A scheduler admits requests and runs their sequences on the model.
//
// A request acquires a slot (waiting in a bounded queue when none is free),
// runs its sequences on it one after another and releases it. The [pool]
// gives each slot a session of its own; with a [batcher], the slots'
// sequences decode together, one forward a step for all of them.
type scheduler interface {
	// acquire returns a slot, waits for one while ctx lives, or fails with
	// errQueueFull when the queue is full and errShutdown after close.
	// prompt and adapter are what the request will run first: among free
	// slots, the one whose cache shares the longest prefix with them is
	// taken (the prefix cache).
	acquire(ctx context.Context, prompt []int32, adapter *ingot.Adapter) (slot, error)
	stats() schedStats
	close() error
}

// A slot runs one sequence at a time for the request that holds it.
type slot interface {
	// run generates seq's tokens, calling emit after each; emit returning
	// false stops with model.StopCaller. The result's error is ctx's when
	// it was cancelled.
	run(ctx context.Context, seq *sequence, emit func(step) bool) (seqResult, error)
	contextSize() int
	release()
}

// schedStats is what /metrics reports of a scheduler.
type schedStats struct {
	slots, running, queued  int
	kvUsed, kvTotal         int64 // tokens held in the KV caches of running requests, and the caches' capacity
	kvIdle                  int64 // tokens kept in free sessions' caches for reuse (the prefix cache)
	batchSteps, batchTokens int64 // batched decode steps, and the tokens they decoded
}

// A sequence is one generation: a prompt and how to continue it.
type sequence struct {
	prompt    []int32
	opts      model.GenerateOptions // MaxTokens > 0, or 0 with scorePrompt: no generation
	topK      int                   // alternatives per generated token (with opts.Logprobs)
	scoreTopK int                   // alternatives per prompt token (with scorePrompt)
	// scorePrompt asks for every prompt token's logprob (echo): scored.
	scorePrompt bool
	// scored is set by run, before the first generated token, with
	// scorePrompt: one step per prompt token; the first has no logprob.
	scored []step
	// grammar, when set, constrains the generated text (see package
	// constrain) over the tokens of vocab: each step samples from the
	// logits of the tokens it allows, EOS only once the document is
	// complete, and EOS ends the sequence even with IgnoreEOS.
	grammar *constrain.Grammar
	vocab   *constrain.Vocab
	adapter *ingot.Adapter // the LoRA adapter the request named; nil: the base model
}

// A step is one generated (or, in seqResult.prompt, one prompt) token with
// its logprob under the model's raw distribution and the top alternatives;
// both are set only when the sequence asked for logprobs.
type step struct {
	id      int32
	logprob float64
	top     []alt
}

type alt struct {
	id      int32
	logprob float64
}

// seqResult is what a sequence ended with.
type seqResult struct {
	stop   model.Stop
	cached int // prompt tokens whose keys and values came from the session's cache

	drafted, accepted int // speculative decoding: tokens drafted, and accepted by the model
}

// pool is a scheduler of sessions: each slot is a session of its own, taken
// by one request at a time.
//
// A session keeps its cache when its request ends (unless noReuse), so the
// next request that shares a prefix with it (a chat's next turn, a shared
// system prompt) prefills only the rest: acquire gives a request the free
// session whose cache shares the longest prefix with its prompt, ties (and
// no match) going to the least recently used, so that the caches of recent
// requests are the last to be overwritten. A request that must wait takes
// the first session freed (first come, first served).
type pool struct {
	mu      sync.Mutex
	idle    []*poolSlot // free sessions
	waiters []*waiter   // queued requests, oldest first
	clock   uint64      // release counter: poolSlot.lastUsed
	closed  bool

	maxQueue int
	noReuse  bool // empty each cache on release: every request is prefilled from nothing
	// spec, when set, decodes the requests it keeps unchanged
	// speculatively (see poolSlot.speculate); with a draft model, each
	// slot has a session of it (poolSlot.draft).
	spec *model.Speculation
	// batch, when set, runs the forwards of the sequences that can batch
	// (see poolSlot.run): continuous batching.
	batch    *batcher
	running  atomic.Int64
	kvUsed   atomic.Int64
	kvTotal  int64
	all      []*poolSlot
	done     chan struct{}
	once     sync.Once
	onQueued func() // test hook: a request joined the queue
}

// A waiter is a queued request; release hands it a slot on ch.
type waiter struct {
	ch chan *poolSlot // buffered: release never blocks
}

type poolSlot struct {
	p        *pool
	s        *ingot.Session
	draft    *ingot.Session // this slot's session of the draft model (pool.spec with a draft)
	used     int64          // tokens this slot added to p.kvUsed
	adapter  *ingot.Adapter // the adapter the cache was computed with
	lastUsed uint64         // p.clock when last released
}

// newPool opens n sessions of m.
func newPool(m *ingot.Model, n, maxQueue int, o ingot.SessionOptions) (*pool, error) {
	p := &pool{maxQueue: maxQueue, done: make(chan struct{})}
	for range n {
		s, err := m.NewSession(o)
		if err != nil {
			p.close()
			return nil, err
		}
		sl := &poolSlot{p: p, s: s}
		p.all = append(p.all, sl)
		p.kvTotal += int64(s.ContextSize())
		p.idle = append(p.idle, sl)
	}
	return p, nil
}

// startBatching makes the pool's sequences decode in batches (see batcher),
// or says why the model cannot.
func (p *pool) startBatching(m *ingot.Model) error {
	bt, err := newBatcher(m.Raw(), len(p.all))
	if err != nil {
		return err
	}
	p.batch = bt
	return nil
}

// sharedPrefix returns how many leading tokens a and b share.
func sharedPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// pick removes and returns the idle slot whose cache shares the longest
// prefix with prompt under adapter (ties: the least recently used), counting
// only caches of which the prompt shares at least half: as llama-server's
// -sps 0.5, so that a few tokens in common (BOS, a template's header) do not
// cost a long cache another request may still reuse. Without one, it takes
// the least recently used slot. p.mu is held and p.idle is not empty.
func (p *pool) pick(prompt []int32, adapter *ingot.Adapter) *poolSlot {
	best, bestN := 0, 0
	for i, sl := range p.idle {
		n := 0
		if c := sl.s.Raw().Cached(); sl.adapter == adapter {
			if n = sharedPrefix(c, prompt); 2*n < len(c) {
				n = 0
			}
		}
		if n > bestN || n == bestN && sl.lastUsed < p.idle[best].lastUsed {
			best, bestN = i, n
		}
	}
	sl := p.idle[best]
	p.idle = slices.Delete(p.idle, best, best+1)
	return sl
}

func (p *pool) acquire(ctx context.Context, prompt []int32, adapter *ingot.Adapter) (slot, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errShutdown
	}
	if len(p.idle) > 0 {
		sl := p.pick(prompt, adapter)
		p.mu.Unlock()
		p.running.Add(1)
		return sl, nil
	}
	if len(p.waiters) >= p.maxQueue {
		p.mu.Unlock()
		return nil, errQueueFull
	}
	w := &waiter{ch: make(chan *poolSlot, 1)}
	p.waiters = append(p.waiters, w)
	p.mu.Unlock()
	if p.onQueued != nil {
		p.onQueued()
	}
	var err error
	select {
	case sl := <-w.ch:
		p.running.Add(1)
		return sl, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-p.done:
		err = errShutdown
	}
	p.mu.Lock()
	if i := slices.Index(p.waiters, w); i >= 0 {
		p.waiters = slices.Delete(p.waiters, i, i+1)
		p.mu.Unlock()
		return nil, err
	}
	p.mu.Unlock()
	p.put(<-w.ch) // a release handed it a slot as it gave up: pass it on
	return nil, err
}

// put gives sl to the oldest waiter, or makes it idle.
func (p *pool) put(sl *poolSlot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.waiters) > 0 {
		w := p.waiters[0]
		p.waiters = slices.Delete(p.waiters, 0, 1)
		w.ch <- sl
		return
	}
	p.idle = append(p.idle, sl)
}

func (p *pool) stats() schedStats {
	p.mu.Lock()
	queued := len(p.waiters)
	var idle int64
	for _, sl := range p.idle {
		idle += int64(len(sl.s.Raw().Cached()))
	}
	p.mu.Unlock()
	st := schedStats{slots: len(p.all), running: int(p.running.Load()), queued: queued,
		kvUsed: p.kvUsed.Load(), kvTotal: p.kvTotal, kvIdle: idle}
	if p.batch != nil {
		st.batchSteps, st.batchTokens = p.batch.steps.Load(), p.batch.rows.Load()
	}
	return st
}

// close closes the sessions; callers have released their slots.
func (p *pool) close() error {
	var err error
	p.once.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		close(p.done)
		if p.batch != nil {
			err = p.batch.close()
		}
		for _, sl := range p.all {
			err = errors.Join(err, sl.s.Close())
			if sl.draft != nil {
				err = errors.Join(err, sl.draft.Close())
			}
		}
	})
	return err
}

func (sl *poolSlot) contextSize() int { return sl.s.ContextSize() }

func (sl *poolSlot) release() {
	sl.p.kvUsed.Add(-sl.used)
	sl.used = 0
	if sl.p.noReuse {
		sl.s.Raw().Truncate(0)
	}
	sl.p.running.Add(-1)
	sl.p.mu.Lock()
	sl.p.clock++
	sl.lastUsed = sl.p.clock
	sl.p.mu.Unlock()
	sl.p.put(sl)
}

// grow counts n more tokens in the slot's cache.
func (sl *poolSlot) grow(n int) {
	sl.used += int64(n)
	sl.p.kvUsed.Add(int64(n))
}

// setUsed counts n tokens in the slot's cache.
func (sl *poolSlot) setUsed(n int) { sl.grow(n - int(sl.used)) }

func (sl *poolSlot) run(ctx context.Context, seq *sequence, emit func(step) bool) (seqResult, error) {
	raw := sl.s.Raw()
	if err := sl.s.SetAdapter(seq.adapter); err != nil { // a no-op unless it changes; a change empties the cache
		raw.Truncate(0)
		return seqResult{}, err
	}
	sl.adapter = seq.adapter
	defer func() { sl.setUsed(len(raw.Cached())) }()
	sl.setUsed(len(seq.prompt))
	_, spec := sl.speculate(seq)
	if bt := sl.p.batch; bt != nil && seq.adapter == nil && !spec {
		m := bt.join(raw)
		defer m.leave()
		return sl.runLogits(ctx, raw, seq, emit, m)
	}
	if !seq.scorePrompt && !seq.opts.Logprobs && seq.grammar == nil {
		// The session's own loop: device argmax, top-k and pipelining
		// apply, and it reuses the cached prefix it shares with the prompt.
		emitTok := func(t model.Token) bool {
			sl.grow(1)
			return emit(step{id: t.ID})
		}
		var r *model.Result
		var err error
		if sp, ok := sl.speculate(seq); ok {
			r, err = raw.GenerateSpeculative(ctx, seq.prompt, seq.opts, sp, emitTok)
		} else {
			r, err = raw.Generate(ctx, seq.prompt, seq.opts, emitTok)
		}
		res := seqResult{stop: r.Stop, drafted: r.Drafted, accepted: r.Accepted}
		if r.PromptEval > 0 {
			res.cached = r.PromptTokens - r.PromptEval
		}
		return res, err
	}
	return sl.runLogits(ctx, raw, seq, emit, sessionForward{raw})
}

// A forwarder runs a sequence's forwards on its session: the session's own
// calls, or a batcher's member.
type forwarder interface {
	// prefill appends tokens to the session's cache and returns the
	// logits after the last.
	prefill(ctx context.Context, tokens []int32) ([]float32, error)
	// decode appends tok and returns the logits after it.
	decode(ctx context.Context, tok int32) ([]float32, error)
}

// sessionForward runs the forwards as calls of the session.
type sessionForward struct{ s *model.Session }

func (f sessionForward) prefill(ctx context.Context, tokens []int32) ([]float32, error) {
	return f.s.Forward(ctx, tokens)
}

func (f sessionForward) decode(ctx context.Context, tok int32) ([]float32, error) {
	return f.s.Forward(ctx, []int32{tok})
}

// speculate returns how to decode seq speculatively, and whether to: only
// where it changes nothing a client can tell. Greedy output is plain greedy
// output (up to exact ties) and unseeded sampling keeps its distribution
// (model.Session.GenerateSpeculative's rejection sampling), but a seeded
// request decodes plainly: its draws would differ from a plain run's (and
// from the same request with logprobs, which samples on the host).
func (sl *poolSlot) speculate(seq *sequence) (model.Speculation, bool) {
	sp := sl.p.spec
	if sp == nil || seq.opts.Temperature > 0 && seq.opts.Seed != 0 {
		return model.Speculation{}, false
	}
	out := *sp
	if sl.draft != nil {
		out.Draft = sl.draft.Raw()
	}
	return out, true
}

// runLogits generates on the host from each step's logits, as
// model.Session.Generate does with Logprobs (the same sampler, so the same
// tokens for the same seed), adding each token's logprob and top
// alternatives when asked and, with scorePrompt, the prompt's logprobs. With
// a grammar, the sampler sees the logits of the tokens it allows, the others
// -Inf. fw runs the forwards.
func (sl *poolSlot) runLogits(ctx context.Context, raw *model.Session, seq *sequence, emit func(step) bool, fw forwarder) (seqResult, error) {
	var res seqResult
	cancelled := func(err error) (seqResult, error) {
		if ctx.Err() != nil {
			res.stop = model.StopCancelled
		}
		return res, err
	}
	smp, err := model.NewSampler(seq.opts)
	if err != nil {
		return res, err
	}
	p := seq.prompt
	if len(p) == 0 {
		return res, errors.New("server: empty prompt")
	}
	var logits []float32
	if seq.scorePrompt {
		// The prompt's logprobs are model.Session.Score's, from an empty
		// cache, one batched prefill (ScoreTop adds the alternatives): the
		// values lm-eval gets from the model package. The cache then
		// holds p but its last token, which runs only to generate.
		raw.Truncate(0)
		seq.scored = make([]step, len(p))
		seq.scored[0].id = p[0]
		if len(p) > 1 {
			sc, top, err := raw.ScoreTop(ctx, p[:1], p[1:], seq.scoreTopK)
			if err != nil {
				return cancelled(err)
			}
			for i, t := range sc.Tokens {
				st := step{id: t.ID, logprob: t.Logprob}
				if top != nil {
					st.top = make([]alt, len(top[i]))
					for j, a := range top[i] {
						st.top[j] = alt{id: a.ID, logprob: a.Logprob}
					}
				}
				seq.scored[i+1] = st
			}
		}
		if seq.opts.MaxTokens > 0 {
			logits, err = fw.prefill(ctx, p[len(raw.Cached()):])
		}
	} else {
		// Reuse the cached prefix, as Generate does: at least the last
		// token runs, for its logits.
		n := min(sharedPrefix(raw.Cached(), p), len(p)-1)
		raw.Truncate(n)
		res.cached = n
		logits, err = fw.prefill(ctx, p[n:])
	}
	if err != nil {
		return cancelled(err)
	}
	if seq.opts.MaxTokens == 0 {
		res.stop = model.StopLength
		return res, nil
	}
	history := slices.Clone(p)
	eos := raw.Model().EOS
	var (
		m      *constrain.Matcher
		mask   []uint64
		masked []float32
	)
	if seq.grammar != nil {
		m = constrain.NewMatcher(seq.grammar, seq.vocab)
		mask = make([]uint64, (len(logits)+63)/64)
	}
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return cancelled(err)
		}
		from := logits
		if m != nil {
			m.Mask(mask)
			var ok bool
			if from, ok = maskLogits(masked, logits, mask); !ok {
				return res, errors.New("server: constrained decoding: no token of the vocabulary continues the output")
			}
			masked = from
		}
		tok := smp.Sample(from, history)
		if m != nil && !m.Accept(tok) {
			// The draw can land on a zero-probability candidate by float32
			// rounding; take the likeliest allowed token instead.
			tok = argmaxAllowed(logits, mask)
			if !m.Accept(tok) {
				return res, fmt.Errorf("server: constrained decoding: token %d is outside the mask", tok)
			}
		}
		history = append(history, tok)
		st := step{id: tok}
		if seq.opts.Logprobs {
			st = scoreStep(logits, tok, seq.topK)
		}
		if !emit(st) {
			res.stop = model.StopCaller
			return res, nil
		}
		switch {
		case (!seq.opts.IgnoreEOS || m != nil) && slices.Contains(eos, tok):
			res.stop = model.StopEOS
			return res, nil
		case n >= seq.opts.MaxTokens:
			res.stop = model.StopLength
			return res, nil
		case len(raw.Cached()) >= raw.ContextSize():
			res.stop = model.StopContext
			return res, nil
		}
		sl.grow(1)
		if logits, err = fw.decode(ctx, tok); err != nil {
			return cancelled(err)
		}
	}
}
