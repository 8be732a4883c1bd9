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
// gives each slot a session of its own. A continuous-batching scheduler
// would implement the same two types with slots that share one forward per
// step; the handlers would not change.
type scheduler interface {
	// acquire returns a slot, waits for one while ctx lives, or fails with
	// errQueueFull when the queue is full and errShutdown after close.
	acquire(ctx context.Context) (slot, error)
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
	slots, running, queued int
	kvUsed, kvTotal        int64 // tokens held in KV caches, and their capacity
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
	stop model.Stop
}

// pool is a scheduler of sessions: each slot is a session of its own, taken
// by one request at a time.
type pool struct {
	free     chan *poolSlot
	maxQueue int
	queued   atomic.Int64
	running  atomic.Int64
	kvUsed   atomic.Int64
	kvTotal  int64
	all      []*poolSlot
	done     chan struct{}
	once     sync.Once
	onQueued func() // test hook: a request joined the queue
}

type poolSlot struct {
	p    *pool
	s    *ingot.Session
	used int64 // tokens this slot added to p.kvUsed
}

// newPool opens n sessions of m.
func newPool(m *ingot.Model, n, maxQueue int, o ingot.SessionOptions) (*pool, error) {
	p := &pool{free: make(chan *poolSlot, n), maxQueue: maxQueue, done: make(chan struct{})}
	for range n {
		s, err := m.NewSession(o)
		if err != nil {
			p.close()
			return nil, err
		}
		sl := &poolSlot{p: p, s: s}
		p.all = append(p.all, sl)
		p.kvTotal += int64(s.ContextSize())
		p.free <- sl
	}
	return p, nil
}

func (p *pool) acquire(ctx context.Context) (slot, error) {
	select {
	case <-p.done:
		return nil, errShutdown
	default:
	}
	select {
	case sl := <-p.free:
		p.running.Add(1)
		return sl, nil
	default:
	}
	if p.queued.Add(1) > int64(p.maxQueue) {
		p.queued.Add(-1)
		return nil, errQueueFull
	}
	defer p.queued.Add(-1)
	if p.onQueued != nil {
		p.onQueued()
	}
	select {
	case sl := <-p.free:
		p.running.Add(1)
		return sl, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.done:
		return nil, errShutdown
	}
}

func (p *pool) stats() schedStats {
	return schedStats{slots: len(p.all), running: int(p.running.Load()), queued: int(p.queued.Load()),
		kvUsed: p.kvUsed.Load(), kvTotal: p.kvTotal}
}

// close closes the sessions; callers have released their slots.
func (p *pool) close() error {
	var err error
	p.once.Do(func() {
		close(p.done)
		for _, sl := range p.all {
			err = errors.Join(err, sl.s.Close())
		}
	})
	return err
}

func (sl *poolSlot) contextSize() int { return sl.s.ContextSize() }

func (sl *poolSlot) release() {
	sl.forget()
	sl.p.running.Add(-1)
	sl.p.free <- sl
}

// grow counts n more tokens in the slot's cache.
func (sl *poolSlot) grow(n int) {
	sl.used += int64(n)
	sl.p.kvUsed.Add(int64(n))
}

// forget empties the slot's cache, so that no request sees another's tokens
// and every prompt is prefilled the same way.
func (sl *poolSlot) forget() {
	sl.s.Raw().Truncate(0)
	sl.p.kvUsed.Add(-sl.used)
	sl.used = 0
}

func (sl *poolSlot) run(ctx context.Context, seq *sequence, emit func(step) bool) (seqResult, error) {
	sl.forget()
	if err := sl.s.SetAdapter(seq.adapter); err != nil { // a no-op unless it changes
		return seqResult{}, err
	}
	raw := sl.s.Raw()
	if !seq.scorePrompt && !seq.opts.Logprobs && seq.grammar == nil {
		// The session's own loop: device argmax, top-k and pipelining apply.
		sl.grow(len(seq.prompt))
		r, err := raw.Generate(ctx, seq.prompt, seq.opts, func(t model.Token) bool {
			sl.grow(1)
			return emit(step{id: t.ID})
		})
		return seqResult{stop: r.Stop}, err
	}
	return sl.runLogits(ctx, raw, seq, emit)
}

// runLogits generates on the host from each step's logits, as
// model.Session.Generate does with Logprobs (the same sampler, so the same
// tokens for the same seed), adding each token's logprob and top
// alternatives when asked and, with scorePrompt, the prompt's logprobs. With
// a grammar, the sampler sees the logits of the tokens it allows, the others
// -Inf.
func (sl *poolSlot) runLogits(ctx context.Context, raw *model.Session, seq *sequence, emit func(step) bool) (seqResult, error) {
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
	sl.grow(len(p))
	if seq.scorePrompt {
		seq.scored = make([]step, len(p))
		seq.scored[0].id = p[0]
		last := make([]float32, 0, raw.Model().Config.VocabSize)
		err = raw.ForwardEach(ctx, p, func(i int, l []float32) error {
			if i+1 < len(p) {
				seq.scored[i+1] = scoreStep(l, p[i+1], seq.scoreTopK)
			} else {
				last = append(last, l...)
			}
			return nil
		})
		logits = last
	} else {
		logits, err = raw.Forward(ctx, p)
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
		if logits, err = raw.Forward(ctx, []int32{tok}); err != nil {
			return cancelled(err)
		}
	}
}
