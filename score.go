package ingot

import (
	"context"
	"errors"
	"fmt"

	"github.com/ingot-llm/ingot/model"
)

// Score is the log-likelihood of a completion given a prompt: the sum, and
// per completion token its id, ln p and whether it was the greedy choice
// (lm-evaluation-harness's loglikelihood and is_greedy).
type Score = model.Score

// TokenScore is one scored token of a [Score].
type TokenScore = model.TokenScore

// ScorePair is one request of [Session.ScoreBatch].
type ScorePair struct {
	Prompt, Completion string
}

// TopLogprob is one of the most likely next tokens.
type TopLogprob struct {
	ID      int32
	Text    string // the token's text ("" without a tokenizer; a piece of a UTF-8 character may show as U+FFFD)
	Logprob float64
}

// RollingOptions controls [Session.RollingLogprob]: the window and the stride
// between windows in tokens, and a progress callback; the zero value uses the
// session's context window and a stride of half of it.
type RollingOptions = model.RollingOptions

// Rolling is the log-likelihood of a long text: the sum, per scored token the
// log-probability, and [Rolling.Perplexity].
type Rolling = model.Rolling

var errNoTokenizer = errors.New("ingot: the model directory has no tokenizer.json (score token ids with Session.Raw)")

// Score returns ln p(completion | prompt) with per-token values, from one
// batched prefill. The prompt is encoded with the tokenizer's special tokens
// (e.g. BOS), the completion without, as lm-evaluation-harness encodes a
// context and its continuation; the session's cached prefix is reused, and
// the cache then holds the prompt and the completion but its last token.
func (s *Session) Score(ctx context.Context, prompt, completion string) (*Score, error) {
	p, c, err := s.encodePair(prompt, completion)
	if err != nil {
		return nil, err
	}
	return s.s.Score(ctx, p, c)
}

// ScoreBatch scores many prompt/completion pairs on this session, as
// [Session.Score]; pairs sharing a prompt reuse its prefill. The results are
// in the order of pairs.
func (s *Session) ScoreBatch(ctx context.Context, pairs []ScorePair) ([]*Score, error) {
	ids := make([]model.ScorePair, len(pairs))
	for i, pr := range pairs {
		p, c, err := s.encodePair(pr.Prompt, pr.Completion)
		if err != nil {
			return nil, fmt.Errorf("ingot: score pair %d: %w", i, err)
		}
		ids[i] = model.ScorePair{Prompt: p, Completion: c}
	}
	return s.s.ScoreBatch(ctx, ids)
}

func (s *Session) encodePair(prompt, completion string) (p, c []int32, err error) {
	if s.m.tok == nil {
		return nil, nil, errNoTokenizer
	}
	p, c = s.m.tok.Encode(prompt, true), s.m.tok.Encode(completion, false)
	if len(p) == 0 || len(c) == 0 {
		return nil, nil, fmt.Errorf("ingot: score: the prompt (%d tokens) and the completion (%d tokens) must not be empty", len(p), len(c))
	}
	return p, c, nil
}

// TopK returns the k most likely next tokens after prompt (encoded with the
// tokenizer's special tokens), most likely first, with their log-probabilities
// under the model's raw distribution.
func (s *Session) TopK(ctx context.Context, prompt string, k int) ([]TopLogprob, error) {
	top, err := s.TopKBatch(ctx, []string{prompt}, k)
	if err != nil {
		return nil, err
	}
	return top[0], nil
}

// TopKBatch is [Session.TopK] for many prompts; prompts sharing a prefix
// reuse its prefill. The results are in the order of prompts.
func (s *Session) TopKBatch(ctx context.Context, prompts []string, k int) ([][]TopLogprob, error) {
	if s.m.tok == nil {
		return nil, errNoTokenizer
	}
	ids := make([][]int32, len(prompts))
	for i, p := range prompts {
		if ids[i] = s.m.tok.Encode(p, true); len(ids[i]) == 0 {
			return nil, fmt.Errorf("ingot: top-k: prompt %d is empty", i)
		}
	}
	raw, err := s.s.TopKBatch(ctx, ids, k)
	if err != nil {
		return nil, err
	}
	out := make([][]TopLogprob, len(raw))
	for i, top := range raw {
		out[i] = make([]TopLogprob, len(top))
		for j, t := range top {
			out[i][j] = TopLogprob{ID: t.ID, Text: s.m.tok.Decode([]int32{t.ID}, false), Logprob: t.Logprob}
		}
	}
	return out, nil
}

// RollingLogprob scores every token of text (encoded with the tokenizer's
// special tokens, so after BOS where the model has one) in overlapping
// windows, for texts longer than the context window: window j covers tokens
// [j·Stride, j·Stride+Window), the last one the text's last Window tokens,
// and each scores only the tokens no earlier window scored, as
// lm-evaluation-harness's loglikelihood_rolling (Stride = Window−1) and the
// Hugging Face perplexity guide compute it (see
// [model.Session.RollingLogprob]). Perplexity is then [Rolling.Perplexity].
func (s *Session) RollingLogprob(ctx context.Context, text string, o RollingOptions) (*Rolling, error) {
	if s.m.tok == nil {
		return nil, errNoTokenizer
	}
	return s.s.RollingLogprob(ctx, s.m.tok.Encode(text, true), o)
}
