package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
)

// TokenScore is one scored token: its log-probability given the tokens
// before it.
type TokenScore struct {
	ID      int32
	Logprob float64 // ln p(ID | tokens before), log_softmax of the raw logits, in float64
	Greedy  bool    // ID is the argmax of its distribution (ties: the lower id, as torch.argmax)
}

// Score is the log-likelihood of a completion given a prompt, as
// lm-evaluation-harness's loglikelihood request wants it.
type Score struct {
	Logprob float64      // Σ Tokens[i].Logprob
	Greedy  bool         // every completion token was the greedy choice (lm-eval's is_greedy)
	Tokens  []TokenScore // one per completion token
}

// ScorePair is one request of [Session.ScoreBatch].
type ScorePair struct {
	Prompt, Completion []int32
}

// TopLogprob is one of the most likely next tokens.
type TopLogprob struct {
	ID      int32
	Logprob float64
}

// Score returns ln p(completion | prompt), token by token, from one batched
// prefill of prompt+completion[:len-1] ([Session.ForwardEach]). The cached
// prefix shared with prompt is reused; the cache then holds
// prompt+completion[:len-1], so scoring several completions of one prompt
// prefills the prompt once. The prompt and the completion must not be empty
// and together must fit the context window plus one token.
func (s *Session) Score(ctx context.Context, prompt, completion []int32) (*Score, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	return s.score(ctx, prompt, completion)
}

func (s *Session) score(ctx context.Context, prompt, completion []int32) (*Score, error) {
	if len(prompt) == 0 || len(completion) == 0 {
		return nil, fmt.Errorf("model: score: the prompt (%d tokens) and the completion (%d tokens) must not be empty", len(prompt), len(completion))
	}
	if err := s.checkIDs(completion); err != nil { // the last is scored, never run
		return nil, fmt.Errorf("model: score: completion: %w", err)
	}
	seq := append(slices.Clip(prompt), completion[:len(completion)-1]...)
	sc := &Score{Greedy: true, Tokens: make([]TokenScore, 0, len(completion))}
	err := s.eachFrom(ctx, seq, len(prompt)-1, func(p int, logits []float32) error {
		id := completion[p+1-len(prompt)]
		mx, lse := logSumExp(logits)
		t := TokenScore{ID: id, Logprob: float64(logits[id]-mx) - lse, Greedy: argmax(logits) == int(id)}
		sc.Logprob += t.Logprob
		sc.Greedy = sc.Greedy && t.Greedy
		sc.Tokens = append(sc.Tokens, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sc, nil
}

// ScoreBatch scores many prompt/completion pairs on this session, in an order
// that puts requests sharing a prefix next to each other (sorted by their
// tokens), so that each reuses the cache of the one before (see
// [Session.Score]). The results are in the order of pairs.
func (s *Session) ScoreBatch(ctx context.Context, pairs []ScorePair) ([]*Score, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	seqs := make([][]int32, len(pairs))
	for i, p := range pairs {
		seqs[i] = append(slices.Clip(p.Prompt), p.Completion...)
	}
	out := make([]*Score, len(pairs))
	for _, i := range prefixOrder(seqs) {
		sc, err := s.score(ctx, pairs[i].Prompt, pairs[i].Completion)
		if err != nil {
			return nil, fmt.Errorf("model: score pair %d: %w", i, err)
		}
		out[i] = sc
	}
	return out, nil
}

// TopK returns the k most likely tokens after prompt (fewer when the
// vocabulary is smaller), most likely first (ties: the lower id), with their
// log-probabilities under the raw logits. The cached prefix shared with
// prompt is reused; the cache then holds prompt.
func (s *Session) TopK(ctx context.Context, prompt []int32, k int) ([]TopLogprob, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	return s.topK(ctx, prompt, k)
}

func (s *Session) topK(ctx context.Context, prompt []int32, k int) ([]TopLogprob, error) {
	if len(prompt) == 0 {
		return nil, errors.New("model: top-k: empty prompt")
	}
	if k < 1 {
		return nil, fmt.Errorf("model: top-k: k (%d) must be ≥ 1", k)
	}
	var top []TopLogprob
	err := s.eachFrom(ctx, prompt, len(prompt)-1, func(_ int, logits []float32) error {
		top = topLogprobs(logits, k)
		return nil
	})
	return top, err
}

// TopKBatch is [Session.TopK] for many prompts, run in an order that lets each
// reuse the cached prefix of the one before (as [Session.ScoreBatch]). The
// results are in the order of prompts.
func (s *Session) TopKBatch(ctx context.Context, prompts [][]int32, k int) ([][]TopLogprob, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	out := make([][]TopLogprob, len(prompts))
	for _, i := range prefixOrder(prompts) {
		top, err := s.topK(ctx, prompts[i], k)
		if err != nil {
			return nil, fmt.Errorf("model: top-k prompt %d: %w", i, err)
		}
		out[i] = top
	}
	return out, nil
}

// RollingOptions controls [Session.RollingLogprob]. The zero value uses the
// whole context window and a stride of half of it.
type RollingOptions struct {
	Window   int                     // tokens in one forward; 0: the session's context size
	Stride   int                     // tokens between window starts, in [1, Window-1]; 0: Window/2
	Progress func(scored, total int) // called after each window; may be nil
}

// Rolling is the log-likelihood of a long token sequence.
type Rolling struct {
	Logprob  float64   // Σ Logprobs
	Logprobs []float64 // ln p(tokens[i+1] | context) for i in [0, len(tokens)-1): every token but the first
	Windows  int       // forwards run
}

// Perplexity is exp(−Logprob / len(Logprobs)).
func (r *Rolling) Perplexity() float64 {
	if len(r.Logprobs) == 0 {
		return math.NaN()
	}
	return math.Exp(-r.Logprob / float64(len(r.Logprobs)))
}

// RollingLogprob scores every token of tokens but the first, for sequences
// longer than the context window, with overlapping windows as
// lm-evaluation-harness's loglikelihood_rolling and the Hugging Face
// perplexity guide ("fixed-length models", a sliding window with a stride)
// compute it: window j holds tokens [j·Stride, j·Stride+Window), but the last
// window ends at the last token with Window tokens (as lm-eval's does; the
// guide's is shorter). The first window scores all its tokens after the
// first, each later window only the tokens no window before scored, so each
// token is scored once, with at least Window−Stride tokens of context (the
// first window's with fewer). Stride = Window−1 gives lm-eval's windows
// exactly (one token of overlap; its prefix token is tokens[0]), a smaller
// stride more context a token at more compute. Windows start mid-text as
// they are: no BOS is inserted (pass tokens that begin with BOS when the
// model wants one; llama-perplexity instead puts BOS in place of each
// chunk's first token). Each window runs as one batched prefill (reusing
// the cache only where it holds the same tokens at the same positions).
func (s *Session) RollingLogprob(ctx context.Context, tokens []int32, o RollingOptions) (*Rolling, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	if o.Window == 0 {
		o.Window = s.ContextSize()
	}
	if o.Stride == 0 {
		o.Stride = o.Window / 2
	}
	switch {
	case o.Window < 2 || o.Window > s.ContextSize():
		return nil, fmt.Errorf("model: rolling logprob: window (%d) must be in [2, %d] (the context size)", o.Window, s.ContextSize())
	case o.Stride < 1 || o.Stride >= o.Window:
		return nil, fmt.Errorf("model: rolling logprob: stride (%d) must be in [1, %d] (window-1)", o.Stride, o.Window-1)
	case len(tokens) < 2:
		return nil, fmt.Errorf("model: rolling logprob: %d tokens: need at least 2", len(tokens))
	}
	if err := s.checkIDs(tokens); err != nil {
		return nil, fmt.Errorf("model: rolling logprob: %w", err)
	}
	r := &Rolling{Logprobs: make([]float64, 0, len(tokens)-1)}
	done := 1 // tokens[:done] are scored (the first never is)
	for next := 0; done < len(tokens); next += o.Stride {
		begin := next
		if begin+o.Window >= len(tokens) { // the last window: a whole one, ending at the end
			begin = max(len(tokens)-o.Window, 0)
		}
		end := min(begin+o.Window, len(tokens))
		// Window tokens [begin, end): logits after tokens[p] score tokens[p+1]
		// for p in [done-1, end-1).
		err := s.eachFrom(ctx, tokens[begin:end-1], done-1-begin, func(p int, logits []float32) error {
			lp := Logprob(logits, tokens[begin+p+1])
			r.Logprob += lp
			r.Logprobs = append(r.Logprobs, lp)
			return nil
		})
		if err != nil {
			return nil, err
		}
		r.Windows++
		done = end
		if o.Progress != nil {
			o.Progress(done-1, len(tokens)-1)
		}
	}
	return r, nil
}

// eachFrom runs seq through the session, reusing the cached prefix it shares
// with seq up to from, and calls fn(p, logits) with the logits after seq[p] for
// every p in [from, len(seq)): tokens before from run as one prefill that
// computes no logits but the last row's, the rest through ForwardEach.
func (s *Session) eachFrom(ctx context.Context, seq []int32, from int, fn func(p int, logits []float32) error) error {
	if from < 0 || from >= len(seq) {
		return fmt.Errorf("model: scoring from token %d of %d", from, len(seq))
	}
	n := 0
	for c := s.Cached(); n < len(c) && n < from && c[n] == seq[n]; n++ {
	}
	s.Truncate(n)
	if n < from {
		if _, err := s.forward(ctx, seq[n:from]); err != nil {
			return err
		}
	}
	return s.forwardEach(ctx, seq[from:], func(i int, logits []float32) error { return fn(from+i, logits) })
}

// checkIDs reports the first id outside the vocabulary.
func (s *Session) checkIDs(ids []int32) error {
	V := int32(s.m.Config.VocabSize)
	for i, t := range ids {
		if t < 0 || t >= V {
			return fmt.Errorf("token %d (at %d) is outside the vocabulary of %d", t, i, V)
		}
	}
	return nil
}

// prefixOrder returns the indices of seqs sorted by their tokens, so that
// sequences sharing a prefix come one after another.
func prefixOrder(seqs [][]int32) []int {
	idx := make([]int, len(seqs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return slices.Compare(seqs[a], seqs[b]) })
	return idx
}

// logSumExp returns the largest logit mx and ln Σ exp(logits−mx), as
// [Logprob] computes them: ln p(i) = float64(logits[i]−mx) − lse.
func logSumExp(logits []float32) (mx float32, lse float64) {
	mx = logits[0]
	for _, v := range logits {
		mx = max(mx, v)
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v - mx))
	}
	return mx, math.Log(sum)
}

// topLogprobs returns the k largest logits' ids (ties: the lower id) with their
// log-probabilities.
func topLogprobs(logits []float32, k int) []TopLogprob {
	c := make([]candidate, len(logits))
	for i, l := range logits {
		c[i] = candidate{int32(i), l}
	}
	c = topK(c, min(k, len(c)))
	mx, lse := logSumExp(logits)
	out := make([]TopLogprob, len(c))
	for i, x := range c {
		out[i] = TopLogprob{ID: x.id, Logprob: float64(x.p-mx) - lse}
	}
	return out
}
