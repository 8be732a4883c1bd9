package model

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Speculation configures [Session.GenerateSpeculative]: where drafted tokens
// come from and how many a round. The zero value drafts by prompt lookup.
type Speculation struct {
	// Draft is a session of a draft model with the same vocabulary (any
	// architecture, backend or quantization; typically a smaller or
	// quantized copy of the model). nil drafts by prompt lookup instead.
	Draft *Session
	// Tokens is the most tokens drafted a round; 0: 4, of 2, 4 and 8 the
	// fastest on the CPU (bench/speculative_test.go).
	Tokens int
	// Ngram is prompt lookup's longest n-gram: the last Ngram tokens (then
	// fewer, down to 2; 1 only when Ngram is 1) are searched for in the
	// prompt and output, and the tokens that followed their latest earlier
	// occurrence are the draft; 0: 3.
	Ngram int
}

// errStopRows ends a verification's ForwardEach at the first rejected row.
var errStopRows = errors.New("model: speculative: stop")

// GenerateSpeculative is [Session.Generate] with speculative decoding: each
// round drafts up to sp.Tokens tokens (by sp.Draft, or by prompt lookup) and
// runs the last emitted token and the draft through the model as one batched
// forward ([Session.ForwardEach]); the accepted prefix of the draft and one
// token of the model's own are emitted, and the rejected tail's cache rows are
// dropped (Truncate; a linear-attention state is restored from the checkpoint
// taken at the verification's start, and only the kept tokens run again).
//
// Greedy (Temperature 0) accepts a drafted token when it is the model's
// argmax, so the output is the one Generate gives (up to the last bits of
// batched against single-row arithmetic, which decide only exact ties).
// Sampling accepts a drafted token d with probability min(1, p(d)/q(d)) and
// on rejection draws from max(0, p−q) normalized (Leviathan et al. 2023;
// Chen et al. 2023), where p and q are the model's and the draft's
// distributions after the sampling transforms of o (penalty, top-k,
// temperature, top-p, min-p, applied as [Sampler] applies them); a lookup
// draft has q one-hot. The tokens are then distributed as Generate's, though
// the draws differ for one seed. Result.Drafted and Result.Accepted count the
// drafted and accepted tokens; DecodeSteps counts the tokens after the first,
// as Generate's does.
//
// The cache ends as Generate leaves it (the prompt and every token but the
// last); the draft session's holds the prefix it shares with them.
func (s *Session) GenerateSpeculative(ctx context.Context, prompt []int32, o GenerateOptions, sp Speculation, emit func(Token) bool) (*Result, error) {
	r := &Result{PromptTokens: len(prompt)}
	if err := o.Validate(); err != nil {
		return r, err
	}
	if err := sp.fill(s); err != nil {
		return r, err
	}
	if err := s.enter(); err != nil {
		return r, err
	}
	defer s.exit()
	d := sp.Draft
	if d != nil {
		if err := d.enter(); err != nil {
			return r, fmt.Errorf("model: speculation: draft: %w", err)
		}
		defer d.exit()
	}
	n, err := s.reusePrefix(prompt)
	if err != nil {
		return r, err
	}
	r.PromptEval = len(prompt) - n
	t0 := time.Now()
	logits, err := s.forward(ctx, prompt[n:])
	if err == nil && d != nil && len(prompt) <= d.cache.maxSeq {
		_, err = d.catchUp(ctx, prompt)
	}
	r.PromptDuration = time.Since(t0)
	if err != nil {
		if ctx.Err() != nil {
			r.Stop = StopCancelled
		}
		return r, err
	}
	g := &specRound{s: s, d: d, o: o, sp: sp, smp: newSampler(o)}
	do := o
	if do.Seed != 0 {
		do.Seed ^= 0x6a09e667f3bcc908 // the draft's draws are independent of the model's
	}
	g.dsmp = newSampler(do)
	V := s.m.Config.VocabSize
	if o.Temperature > 0 {
		g.p, g.res = make([]float32, V), make([]float32, V)
		if d != nil {
			g.q = make([][]float32, sp.Tokens)
			for i := range g.q {
				g.q[i] = make([]float32, V)
			}
		}
	}
	history := slices.Clone(prompt)
	tok := g.smp.Sample(logits, history)
	out := []Token{{ID: tok}}
	if o.Logprobs {
		out[0].Logprob = float32(Logprob(logits, tok))
	}
	t0 = time.Now()
	defer func() {
		r.DecodeDuration = time.Since(t0)
		r.DecodeSteps = max(len(r.Tokens)-1, 0)
	}()
	finish := func(stop Stop, err error) (*Result, error) {
		s.Truncate(len(history) - 1) // as Generate leaves it: the last token is not run
		r.Stop = stop
		return r, err
	}
	for {
		for _, tk := range out {
			if err := ctx.Err(); err != nil {
				return finish(StopCancelled, err)
			}
			r.Tokens = append(r.Tokens, tk)
			history = append(history, tk.ID)
			if emit != nil && !emit(tk) {
				return finish(StopCaller, nil)
			}
			if !o.IgnoreEOS && slices.Contains(s.m.EOS, tk.ID) {
				return finish(StopEOS, nil)
			}
			if o.MaxTokens > 0 && len(r.Tokens) >= o.MaxTokens {
				return finish(StopLength, nil)
			}
			if len(history)-1 >= s.cache.maxSeq {
				return finish(StopContext, nil)
			}
		}
		// The cache holds history but its last token; a round runs that token
		// and k drafted ones, and emits at most k+1.
		k := min(sp.Tokens, s.cache.maxSeq-len(history))
		if o.MaxTokens > 0 {
			k = min(k, o.MaxTokens-len(r.Tokens)-1)
		}
		if out, err = g.round(ctx, history, max(k, 0)); err != nil {
			if ctx.Err() != nil {
				return finish(StopCancelled, err)
			}
			return finish("", err)
		}
		r.Drafted += len(g.drafts)
		r.Accepted += len(out) - 1
	}
}

// Validate reports what makes sp unusable with the model's session s: a
// draft of another vocabulary, s as its own draft, a negative count.
func (sp Speculation) Validate(s *Session) error { return sp.fill(s) }

// fill applies sp's defaults and checks it against the model's session s.
func (sp *Speculation) fill(s *Session) error {
	if sp.Tokens < 0 {
		return fmt.Errorf("model: speculation: tokens (%d) must be ≥ 0 (0: 4)", sp.Tokens)
	}
	if sp.Ngram < 0 {
		return fmt.Errorf("model: speculation: ngram (%d) must be ≥ 0 (0: 3)", sp.Ngram)
	}
	if sp.Ngram == 0 {
		sp.Ngram = 3
	}
	if d := sp.Draft; d != nil {
		if d == s {
			return errors.New("model: speculation: the draft session is the session itself (make a session of the draft model)")
		}
		if dv, v := d.m.Config.VocabSize, s.m.Config.VocabSize; dv != v {
			return fmt.Errorf("model: speculation: the draft model's vocabulary (vocab_size %d) differs from the model's (%d): the draft must share the tokenizer", dv, v)
		}
	}
	if sp.Tokens == 0 {
		sp.Tokens = 4
	}
	return nil
}

// specRound holds one GenerateSpeculative call's drafting and verifying state.
type specRound struct {
	s, d      *Session // the model's and the draft's (nil: lookup)
	o         GenerateOptions
	sp        Speculation
	smp, dsmp *Sampler // the model's draws (acceptance, corrections) and the draft's

	drafts []int32     // this round's
	q      [][]float32 // the draft's distribution (V) for each drafted token; sampling only
	p, res []float32   // the model's distribution and the residual max(0, p−q) (V); sampling only
	hist   []int32     // history and drafts[:i] (the penalty's window)
	batch  []int32
	out    []Token
}

// round drafts up to k tokens after history, verifies them in one forward of
// [history's last token, drafts…] and returns the tokens to emit: the
// accepted drafts and one token of the model's. It leaves the model's cache
// holding history and the accepted drafts.
func (g *specRound) round(ctx context.Context, history []int32, k int) ([]Token, error) {
	g.drafts = g.drafts[:0]
	if k > 0 {
		var err error
		if g.d != nil {
			err = g.draftModel(ctx, history, k)
		} else {
			g.drafts = lookup(g.drafts, history, g.sp.Ngram, k)
		}
		if err != nil {
			return nil, fmt.Errorf("model: speculation: draft: %w", err)
		}
	}
	g.batch = append(append(g.batch[:0], history[len(history)-1]), g.drafts...)
	g.out = g.out[:0]
	s := g.s
	start := len(s.tokens)
	var err error
	s.speculating = true // no prompt ends here: the pinned checkpoint stays (checkpoint.go)
	defer func() { s.speculating = false }()
	if len(g.batch) == 1 { // nothing drafted: a plain decode step
		var logits []float32
		if logits, err = s.forward(ctx, g.batch); err == nil {
			err = g.verify(history, 0, logits)
		}
	} else {
		err = s.forwardEach(ctx, g.batch, func(i int, logits []float32) error { return g.verify(history, i, logits) })
	}
	if err != nil && err != errStopRows {
		return nil, err
	}
	s.Truncate(start + len(g.out)) // the last emitted token is not run: drop the rejected tail
	return g.out, nil
}

// verify decides row i of a verification: logits (V) follow the last emitted
// token and drafts[:i]. It appends drafts[i] when the model accepts it, else
// (or after the last draft) the model's own token, and then returns
// errStopRows.
func (g *specRound) verify(history []int32, i int, logits []float32) error {
	g.hist = append(append(g.hist[:0], history...), g.drafts[:i]...)
	t := int32(-1)
	accept := false
	switch {
	case i == len(g.drafts) || g.o.Temperature <= 0:
		t = g.smp.Sample(logits, g.hist) // greedy: argmax after the penalty
		accept = i < len(g.drafts) && t == g.drafts[i]
	default:
		p, d := g.p, g.drafts[i]
		g.smp.dist(p, logits, g.hist)
		q := float32(1) // a lookup draft: q is one-hot
		if g.q != nil {
			q = g.q[i][d]
		}
		if g.smp.rng.Float32()*q < p[d] { // u < p(d)/q(d)
			t, accept = d, true
			break
		}
		res := g.res
		copy(res, p)
		if g.q != nil {
			for j, qj := range g.q[i] {
				res[j] = max(res[j]-qj, 0)
			}
		} else {
			res[d] = 0
		}
		if t = drawDense(res, g.smp.rng.Float32()); t < 0 { // p ≤ q everywhere: only rounding rejected d
			t = drawDense(p, g.smp.rng.Float32())
		}
	}
	tk := Token{ID: t}
	if g.o.Logprobs {
		tk.Logprob = float32(Logprob(logits, t))
	}
	g.out = append(g.out, tk)
	if accept {
		return nil
	}
	return errStopRows
}

// draftModel drafts up to k tokens after history with the draft session, each
// drawn as Generate would draw it from the draft's logits; with sampling,
// g.q[i] keeps the distribution drafts[i] was drawn from.
func (g *specRound) draftModel(ctx context.Context, history []int32, k int) error {
	d := g.d
	k = min(k, d.cache.maxSeq-len(history)+1) // the draft runs history and drafts[:k-1]
	if k <= 0 {
		return nil
	}
	d.speculating = true
	logits, err := d.catchUp(ctx, history)
	d.speculating = false
	if err == nil { // the drafting steps after it are cut back next round
		err = d.checkpoint()
	}
	if err != nil {
		return err
	}
	g.hist = append(g.hist[:0], history...)
	// Greedy drafting without the penalty takes each later draft from the
	// device's argmax (only the token crosses back, kernels.Argmaxer).
	onDevice := g.o.Temperature <= 0 && (g.o.RepeatPenalty <= 0 || g.o.RepeatPenalty == 1)
	var t int32
	for i := range k {
		switch {
		case onDevice && i > 0: // t is already drafts[i]
		case g.o.Temperature <= 0:
			t = g.dsmp.Sample(logits, g.hist)
		default:
			g.dsmp.dist(g.q[i], logits, g.hist)
			t = drawDense(g.q[i], g.dsmp.rng.Float32())
		}
		g.drafts = append(g.drafts, t)
		g.hist = append(g.hist, t)
		if i+1 < k {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := d.lock(); err != nil {
				return err
			}
			if onDevice {
				t, err = d.stepArgmax(t)
			} else {
				logits, err = d.step(t)
			}
			d.unlock()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// catchUp runs the tokens of seq the cache does not hold (at least the last)
// and returns the logits after seq.
func (s *Session) catchUp(ctx context.Context, seq []int32) ([]float32, error) {
	n := 0
	for n < len(s.tokens) && n < len(seq)-1 && s.tokens[n] == seq[n] {
		n++
	}
	s.Truncate(n)
	return s.forward(ctx, seq[n:])
}

// lookup appends to dst up to k tokens drafted from history by prompt lookup
// (HF transformers' prompt_lookup_num_tokens, llama.cpp's lookup): for n from
// ngram down to 2 (1 only when ngram is 1), the tokens that followed the
// latest earlier occurrence of history's last n tokens. One-token matches
// draft too often to pay on the CPU: on tinycode (bench, k 4) they lower the
// acceptance from 0.86 to 0.69 and the speed-up from 1.39x to 1.28x.
func lookup(dst, history []int32, ngram, k int) []int32 {
	for n := min(ngram, len(history)-1); n >= min(2, ngram); n-- {
		tail := history[len(history)-n:]
		for j := len(history) - n - 1; j >= 0; j-- {
			if slices.Equal(history[j:j+n], tail) {
				return append(dst, history[j+n:min(j+n+k, len(history))]...)
			}
		}
	}
	return dst
}

// dist writes into p (V) the distribution Sample draws from given logits and
// history: the penalty, top-k, temperature, softmax, top-p and min-p, as
// Sample and pick apply them, normalized over the candidates kept (zero
// elsewhere). The temperature must be > 0.
func (s *Sampler) dist(p, logits []float32, history []int32) {
	s.work = append(s.work[:0], logits...)
	if pen := s.o.RepeatPenalty; pen > 0 && pen != 1 {
		repeatPenalty(s.work, history[max(0, len(history)-s.o.RepeatLastN):], pen)
	}
	c := s.cand[:0]
	for i, l := range s.work {
		c = append(c, candidate{int32(i), l})
	}
	s.cand = c[:0]
	c = topK(c, s.o.TopK)
	softmax(c, s.o.Temperature)
	c = topP(c, s.o.TopP)
	c = minP(c, s.o.MinP)
	var sum float64
	for _, x := range c {
		sum += float64(x.p)
	}
	clear(p)
	for _, x := range c {
		p[x.id] = float32(float64(x.p) / sum)
	}
}

// drawDense picks index i with probability p[i]/Σp given u in [0, 1); it
// returns -1 when Σp is 0.
func drawDense(p []float32, u float32) int32 {
	var sum float64
	for _, x := range p {
		sum += float64(x)
	}
	if sum <= 0 {
		return -1
	}
	v := float64(u) * sum
	last := int32(-1)
	for i, x := range p {
		if x > 0 {
			last = int32(i)
			if v -= float64(x); v < 0 {
				return last
			}
		}
	}
	return last
}
