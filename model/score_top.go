package model

import (
	"context"
	"fmt"
	"slices"
)

// ScoreTop is [Session.Score] that also returns, for each completion token,
// the k most likely tokens at its position (ties: the lower id) with their
// log-probabilities under the same logits (k ≤ 0: none). The scores are
// Score's, bit for bit: the same forward (the reused prefix, then
// [Session.ForwardEach] from the prompt's last token) and the same
// arithmetic (TestScoreTop). Prompt scoring (a server's echo with logprobs)
// is ScoreTop(ctx, tokens[:1], tokens[1:], k).
func (s *Session) ScoreTop(ctx context.Context, prompt, completion []int32, k int) (*Score, [][]TopLogprob, error) {
	if err := s.enter(); err != nil {
		return nil, nil, err
	}
	defer s.exit()
	if k <= 0 {
		sc, err := s.score(ctx, prompt, completion)
		return sc, nil, err
	}
	if len(prompt) == 0 || len(completion) == 0 {
		return nil, nil, fmt.Errorf("model: score: the prompt (%d tokens) and the completion (%d tokens) must not be empty", len(prompt), len(completion))
	}
	if err := s.checkIDs(completion); err != nil {
		return nil, nil, fmt.Errorf("model: score: completion: %w", err)
	}
	// score's loop, taking the alternatives from each row's logits too.
	seq := append(slices.Clip(prompt), completion[:len(completion)-1]...)
	sc := &Score{Greedy: true, Tokens: make([]TokenScore, 0, len(completion))}
	top := make([][]TopLogprob, 0, len(completion))
	err := s.eachFrom(ctx, seq, len(prompt)-1, func(p int, logits []float32) error {
		id := completion[p+1-len(prompt)]
		mx, lse := logSumExp(logits)
		t := TokenScore{ID: id, Logprob: float64(logits[id]-mx) - lse, Greedy: argmax(logits) == int(id)}
		sc.Logprob += t.Logprob
		sc.Greedy = sc.Greedy && t.Greedy
		sc.Tokens = append(sc.Tokens, t)
		top = append(top, topLogprobs(logits, k))
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return sc, top, nil
}
