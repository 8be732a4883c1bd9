package model

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ingot-llm/ingot/kernels"
)

// ErrContextFull is returned (wrapped, with the numbers) when tokens do not
// fit a session's context window.
var ErrContextFull = errors.New("model: context window full")

// errBusy is returned when a session is used by two calls at once.
var errBusy = errors.New("model: session busy: a Session runs one call at a time (make one Session per goroutine)")

// SessionOptions sizes a [Session]. The zero value is a context window of
// min(max_position_embeddings, 4096) tokens, an f32 KV cache and prefill
// chunks of 512 tokens.
type SessionOptions struct {
	Context int           // KV cache length in tokens; 0: Config.DefaultContext
	KV      kernels.DType // KV cache element type: f32 (the zero value) or f16 (half the memory)
	Batch   int           // prefill chunk in tokens; 0: 512
}

// fill applies the defaults and validates.
func (o *SessionOptions) fill(c *Config) error {
	if o.Context < 0 {
		return fmt.Errorf("model: context (%d) must be ≥ 0 (0: %d)", o.Context, c.DefaultContext())
	}
	if o.Batch < 0 {
		return fmt.Errorf("model: batch (%d) must be ≥ 0 (0: 512)", o.Batch)
	}
	if o.KV != kernels.DTypeF32 && o.KV != kernels.DTypeF16 {
		return kvTypeError(o.KV.String())
	}
	if o.Context == 0 {
		o.Context = c.DefaultContext()
	}
	if o.Batch == 0 {
		o.Batch = 512
	}
	return nil
}

// A Session runs a [Model]: it owns a KV cache, the activations of a forward
// call, its token history and a stream of the model's backend. Sessions of
// one model share its weights and may run at the same time from different
// goroutines; a Session itself runs one call at a time (a second call at the
// same time fails, see [Session.Generate]).
type Session struct {
	m      *Model
	b      kernels.Backend // this session's stream of m.b
	cache  *cache
	batch  *acts    // prefill state, Batch rows
	one    *acts    // decode state, 1 row
	tokens []int32  // the tokens whose K/V are in the cache, in order
	tok    [1]int32 // the decode step's input, kept here so the step allocates nothing
	bytes  int64    // device memory: cache and activations
	busy   atomic.Bool
	closed bool // guarded by m.mu

	adapter            *Adapter  // nil: the base model (SetAdapter)
	batchLoRA, oneLoRA *loraActs // the adapter's scratch, made by the first SetAdapter

	heads *rowHeads // ForwardEach's batched head buffers; nil until its first use

	speculating bool // in a speculative round: a call's end is no prompt's (see checkpoint.go)

	topIDs  [kernels.MaxTopK]int32 // stepTopK's results
	topVals [kernels.MaxTopK]float32
	topCand []candidate
}

// NewSession makes a session with its own KV cache and activations on a
// stream of the model's backend.
func (m *Model) NewSession(o SessionOptions) (*Session, error) {
	if err := o.fill(m.Config); err != nil {
		return nil, err
	}
	rope, err := newRoPE(m.Config, o.Context)
	if err != nil {
		return nil, err
	}
	ropeLocal, err := newLocalRoPE(m.Config, o.Context)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	b, err := m.b.NewStream()
	if err != nil {
		return nil, fmt.Errorf("model: new session: %w", err)
	}
	s := &Session{m: m, b: b}
	s.cache = newCache(b, m.Config, o.Context, o.KV)
	s.batch = newActs(b, m.Config, min(o.Batch, o.Context), rope, ropeLocal)
	s.one = newActs(b, m.Config, 1, rope, ropeLocal)
	s.bytes = s.cache.bytes + actsBytes(m.Config, s.batch.L) + actsBytes(m.Config, 1)
	m.sessions[s] = struct{}{}
	m.log.Debug("session opened", "context", o.Context, "kv", o.KV.String(), "bytes", s.bytes)
	return s, nil
}

// Close releases the session's cache and activations. Later calls return
// [ErrClosed]; Close again does nothing.
func (s *Session) Close() error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if s.closed {
		return nil
	}
	delete(s.m.sessions, s)
	return s.release()
}

// release closes the session's stream; m.mu is held.
func (s *Session) release() error {
	s.closed = true
	return s.b.Close()
}

// enter starts a call: it fails if the session is already in one (a closed
// session fails at its first step, see lock). exit ends the call.
func (s *Session) enter() error {
	if !s.busy.CompareAndSwap(false, true) {
		return errBusy
	}
	return nil
}

func (s *Session) exit() { s.busy.Store(false) }

// lock holds the model open for one step (see Model.mu).
func (s *Session) lock() error {
	s.m.mu.RLock()
	if s.closed || s.m.closed {
		s.m.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (s *Session) unlock() { s.m.mu.RUnlock() }

// Model returns the session's model.
func (s *Session) Model() *Model { return s.m }

// Backend returns the session's stream (for its counters: see kernels.Metal.Stats).
func (s *Session) Backend() kernels.Backend { return s.b }

// ContextSize returns the KV cache length in tokens.
func (s *Session) ContextSize() int { return s.cache.maxSeq }

// CacheBytes returns the size of the KV cache in bytes.
func (s *Session) CacheBytes() int64 { return s.cache.bytes }

// MemoryBytes returns the device memory the session holds: its KV cache and
// activations (the weights are the model's, shared).
func (s *Session) MemoryBytes() int64 { return s.bytes }

// PrefillChunk returns the most tokens one forward of the session runs: a
// longer call runs in chunks of this many. Without linear-attention layers,
// prefilling a prompt in calls of whole chunks computes what one call
// computes, to the bit.
func (s *Session) PrefillChunk() int { return s.batch.L }

// Cached returns the tokens whose keys and values are in the cache.
func (s *Session) Cached() []int32 { return s.tokens }

// Truncate drops cached tokens from position n on (n ≥ 0). A later call reuses the
// rest as a prompt prefix.
func (s *Session) Truncate(n int) {
	n = min(max(n, 0), len(s.tokens))
	s.tokens = s.tokens[:n]
	s.cache.truncate(n)
}

// Forward appends tokens to the cache (running them at positions [len(Cached()),
// …)) and returns the logits (V) after the last one. The slice is reused by the next
// call. Prompts longer than the batch run in chunks.
func (s *Session) Forward(ctx context.Context, tokens []int32) ([]float32, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	return s.forward(ctx, tokens)
}

func (s *Session) forward(ctx context.Context, tokens []int32) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, errors.New("model: no tokens to run")
	}
	pos := len(s.tokens)
	if pos+len(tokens) > s.cache.maxSeq {
		return nil, fmt.Errorf("%w: %d tokens at position %d do not fit the context window of %d tokens", ErrContextFull, len(tokens), pos, s.cache.maxSeq)
	}
	V := int32(s.m.Config.VocabSize)
	for i, t := range tokens {
		if t < 0 || t >= V {
			return nil, fmt.Errorf("model: token %d (at %d) is outside the vocabulary of %d", t, i, V)
		}
	}
	if s.adapter != nil && s.adapter.closed.Load() {
		return nil, errAdapterClosed
	}
	// A linear-attention state cut back: restore a checkpoint and run the
	// kept tokens after it again, in the same chunk as the new ones.
	kept, err := s.rewind()
	if err != nil {
		return nil, err
	}
	if len(kept) > 0 {
		tokens = append(kept, tokens...)
		pos = len(s.tokens)
	} else if len(tokens) > 1 && s.cache.ck != nil { // a call's start: what a speculative rejection restores
		if err := s.lock(); err != nil {
			return nil, err
		}
		s.cache.save(s.b, pos, false, false)
		s.unlock()
	}
	call := len(tokens)
	a := s.one
	for len(tokens) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := s.cache.chunk(pos, min(len(tokens), s.batch.L))
		if n > 1 {
			a = s.batch.rows(n)
		} else {
			a = s.one
		}
		if err := s.lock(); err != nil {
			return nil, err
		}
		s.m.net.forward(s.b, a, s.cache, tokens[:n], pos)
		s.cache.tick(s.b, pos+n)
		s.unlock()
		s.tokens = append(s.tokens, tokens[:n]...)
		pos += n
		tokens = tokens[n:]
	}
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.unlock()
	if call > 1 && !s.speculating { // a prompt's end
		s.cache.save(s.b, pos, true, false)
	}
	if err := s.b.Download(a.hostLogit, a.logits); err != nil {
		return nil, err
	}
	return a.hostLogit, nil
}

// decode runs one token at the next position; it allocates nothing (after the
// cache's token list has grown to capacity). The model is locked.
func (s *Session) decode(tok int32) error {
	pos := len(s.tokens)
	if pos >= s.cache.maxSeq {
		return fmt.Errorf("%w: %d tokens", ErrContextFull, s.cache.maxSeq)
	}
	s.tok[0] = tok
	s.m.net.forward(s.b, s.one, s.cache, s.tok[:], pos)
	s.cache.tick(s.b, pos+1)
	s.tokens = append(s.tokens, tok)
	return nil
}

// step decodes tok and returns the logits on the host.
func (s *Session) step(tok int32) ([]float32, error) {
	if err := s.decode(tok); err != nil {
		return nil, err
	}
	if err := s.b.Download(s.one.hostLogit, s.one.logits); err != nil {
		return nil, err
	}
	return s.one.hostLogit, nil
}

// stepArgmax decodes tok and returns the argmax of the logits, computed on the
// device when the backend can.
func (s *Session) stepArgmax(tok int32) (int32, error) {
	if err := s.decode(tok); err != nil {
		return 0, err
	}
	return kernels.Argmax(s.b, s.one.logits, s.one.hostLogit)
}

// Token is one generated token.
type Token struct {
	ID      int32
	Logprob float32 // ln p(ID) under the raw model distribution (before any sampling transform); set with GenerateOptions.Logprobs
}

// Stop says why generation ended.
type Stop string

const (
	StopEOS       Stop = "eos"       // an EOS id was sampled
	StopLength    Stop = "length"    // MaxTokens reached
	StopContext   Stop = "context"   // the context window is full
	StopCaller    Stop = "stop"      // the emit callback asked to stop (e.g. a stop string)
	StopCancelled Stop = "cancelled" // the context was cancelled
)

// Result describes one Generate call.
type Result struct {
	Tokens         []Token
	Stop           Stop
	PromptTokens   int           // tokens in the prompt
	PromptEval     int           // prompt tokens actually run (the rest came from the cache)
	PromptDuration time.Duration // prefill time
	DecodeSteps    int           // decode forwards run (generated tokens after the first)
	DecodeDuration time.Duration // time in decode forwards and sampling
	Drafted        int           // GenerateSpeculative: tokens drafted
	Accepted       int           // GenerateSpeculative: drafted tokens the model accepted
}

// PromptTokPerSec is the prefill throughput.
func (r *Result) PromptTokPerSec() float64 { return rate(r.PromptEval, r.PromptDuration) }

// DecodeTokPerSec is the decode throughput.
func (r *Result) DecodeTokPerSec() float64 { return rate(r.DecodeSteps, r.DecodeDuration) }

func rate(n int, d time.Duration) float64 {
	if n == 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Generate continues prompt, calling emit with each token as it is produced (emit
// returning false stops with [StopCaller]). The cached prefix shared with prompt
// is reused and only the rest is prefilled. Options out of range are an error
// before any work (see [GenerateOptions.Validate]). Cancelling ctx stops within
// one token; the partial result is returned with ctx's error and [StopCancelled].
func (s *Session) Generate(ctx context.Context, prompt []int32, o GenerateOptions, emit func(Token) bool) (*Result, error) {
	r := &Result{PromptTokens: len(prompt)}
	if err := o.Validate(); err != nil {
		return r, err
	}
	if err := s.enter(); err != nil {
		return r, err
	}
	defer s.exit()
	n, err := s.reusePrefix(prompt)
	if err != nil {
		return r, err
	}
	r.PromptEval = len(prompt) - n
	t0 := time.Now()
	logits, err := s.forward(ctx, prompt[n:])
	r.PromptDuration = time.Since(t0)
	if err != nil {
		if ctx.Err() != nil {
			r.Stop = StopCancelled
		}
		return r, err
	}
	smp := newSampler(o)
	history := slices.Clone(prompt)
	// Greedy decoding that needs neither logprobs nor the penalty asks the device for
	// the argmax, so only the token crosses back (kernels.Argmaxer; the CPU downloads).
	// A kernels.Pipeliner also runs one step ahead (see stepAhead).
	onDevice := o.Temperature <= 0 && !o.Logprobs && (o.RepeatPenalty <= 0 || o.RepeatPenalty == 1)
	pipe, _ := s.b.(kernels.Pipeliner)
	if !onDevice {
		pipe = nil
	}
	// Sampling with a top-k the device can select copies back only k candidates
	// (kernels.TopKer). The penalty changes logits before top-k, and logprobs need
	// them all: both download the logits instead.
	topk, _ := s.b.(kernels.TopKer)
	if o.Temperature <= 0 || o.TopK <= 0 || o.TopK > kernels.MaxTopK || o.Logprobs || (o.RepeatPenalty > 0 && o.RepeatPenalty != 1) {
		topk = nil
	}
	ahead := false // the step of tok (the token about to be emitted) already runs
	finish := func(stop Stop, err error) (*Result, error) {
		if ahead { // generation ends at tok: undo its step
			derr := ErrClosed
			if s.lock() == nil {
				derr = s.dropAhead(pipe)
				s.unlock()
			}
			if err == nil {
				err = derr
			}
			ahead = false
		}
		r.Stop = stop
		return r, err
	}
	tok := smp.Sample(logits, history)
	t0 = time.Now()
	defer func() { r.DecodeDuration = time.Since(t0) }()
	for {
		if err := ctx.Err(); err != nil {
			return finish(StopCancelled, err)
		}
		tk := Token{ID: tok}
		if o.Logprobs {
			tk.Logprob = float32(Logprob(logits, tok))
		}
		r.Tokens = append(r.Tokens, tk)
		history = append(history, tok)
		if emit != nil && !emit(tk) {
			return finish(StopCaller, nil)
		}
		if !o.IgnoreEOS && slices.Contains(s.m.EOS, tok) {
			return finish(StopEOS, nil)
		}
		if o.MaxTokens > 0 && len(r.Tokens) >= o.MaxTokens {
			return finish(StopLength, nil)
		}
		if len(s.tokens) >= s.cache.maxSeq {
			return finish(StopContext, nil)
		}
		if err := s.lock(); err != nil {
			ahead = false // the model is closed: nothing to undo
			return finish("", err)
		}
		switch {
		case pipe != nil:
			// Run ahead unless the token after tok is sure to be the last.
			more := len(s.tokens)+1 < s.cache.maxSeq && (o.MaxTokens <= 0 || len(r.Tokens)+1 < o.MaxTokens)
			tok, ahead, err = s.stepAhead(pipe, tok, ahead, more)
		case onDevice:
			tok, err = s.stepArgmax(tok)
		case topk != nil:
			var c []candidate
			if c, err = s.stepTopK(topk, tok, o.TopK); err == nil {
				tok = smp.pick(c)
			}
		default:
			if logits, err = s.step(tok); err == nil {
				tok = smp.Sample(logits, history)
			}
		}
		s.unlock()
		if err != nil {
			return finish("", err)
		}
		r.DecodeSteps++
	}
}

// stepTopK decodes tok and returns the k best candidates for the next token,
// selected on the device, sorted as topK sorts them.
func (s *Session) stepTopK(t kernels.TopKer, tok int32, k int) ([]candidate, error) {
	if err := s.decode(tok); err != nil {
		return nil, err
	}
	n, err := t.TopK(s.topIDs[:k], s.topVals[:k], s.one.logits)
	if err != nil {
		return nil, err
	}
	c := s.topCand[:0]
	for j := range n {
		c = append(c, candidate{s.topIDs[j], s.topVals[j]})
	}
	s.topCand = c
	return c, nil
}

// stepAhead returns the greedy token after tok on a pipelining backend. Unless
// tok's step already runs (ahead), it starts it from the host's tok. With more,
// it then starts the step after, whose input is tok's step's argmax, still on
// the device, before waiting for that argmax: while the host waits for token
// n, step n+1 is queued behind it. It reports whether that step was started.
func (s *Session) stepAhead(p kernels.Pipeliner, tok int32, ahead, more bool) (next int32, started bool, err error) {
	if ahead {
		s.tokens = append(s.tokens, tok) // its step ran at this position: keep it
	} else {
		if err := s.decode(tok); err != nil {
			return 0, false, err
		}
		p.ArgmaxAsync(s.one.logits)
	}
	if more { // the caller checked that position len(s.tokens) is in the context
		s.m.net.forwardArgmax(p, s.b, s.one, s.cache, len(s.tokens))
		s.cache.tick(s.b, len(s.tokens)+1)
		p.ArgmaxAsync(s.one.logits)
	}
	next, err = p.NextToken()
	return next, more, err
}

// dropAhead undoes the step started ahead for a token generation will not
// run: it waits for it and forgets the K/V it wrote, so that the cache holds
// exactly s.tokens.
func (s *Session) dropAhead(p kernels.Pipeliner) error {
	_, err := p.NextToken()
	s.cache.truncate(len(s.tokens))
	return err
}

// reusePrefix checks a generation's prompt and keeps the longest cached
// prefix of it that leaves at least its last token to run (Truncate), which
// it returns the length of.
func (s *Session) reusePrefix(prompt []int32) (int, error) {
	if len(prompt) == 0 {
		return 0, errors.New("model: empty prompt")
	}
	if len(prompt) >= s.cache.maxSeq {
		return 0, fmt.Errorf("%w: a prompt of %d tokens leaves no room in the context window of %d tokens", ErrContextFull, len(prompt), s.cache.maxSeq)
	}
	n := 0
	for n < len(s.tokens) && n < len(prompt)-1 && s.tokens[n] == prompt[n] {
		n++
	}
	s.Truncate(n)
	return n, nil
}
