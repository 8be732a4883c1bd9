package ingot

import (
	"context"
	"fmt"
	"strings"

	"github.com/ingot-llm/ingot/model"
)

// Speculation makes a session decode speculatively (see [Session.Speculate]).
type Speculation struct {
	// Draft is a session of a draft model sharing the model's tokenizer (any
	// backend or quantization, e.g. a q4 copy or a smaller model of the
	// family); nil drafts by prompt lookup: the tokens that followed the
	// latest earlier occurrence of the last n-gram.
	Draft *Session
	// Tokens is the most tokens drafted a round; 0: 4, of 2, 4 and 8 the
	// fastest on the CPU (bench/speculative_test.go).
	Tokens int
	// Ngram is prompt lookup's longest n-gram (then shorter, down to 2; 1
	// only when Ngram is 1); 0: 3.
	Ngram int
}

// Speculate sets how the session's later generations ([Session.Generate],
// [Session.GenerateIDs], [Session.Chat]) decode: with sp, each round drafts
// tokens and the model verifies them in one batched forward; greedy output is
// the plain greedy output and sampled output has the plain sampling
// distribution (see [model.Session.GenerateSpeculative]). nil turns it off.
// [Result.Drafted] and [Result.Accepted] then count the drafted and accepted
// tokens. The draft session must not be used by anything else meanwhile.
func (s *Session) Speculate(sp *Speculation) error {
	if sp == nil {
		s.spec = nil
		return nil
	}
	ms := model.Speculation{Tokens: sp.Tokens, Ngram: sp.Ngram}
	if sp.Draft != nil {
		ms.Draft = sp.Draft.s
	}
	if err := ms.Validate(s.s); err != nil {
		return fmt.Errorf("ingot: %s", strings.TrimPrefix(err.Error(), "model: "))
	}
	s.spec = &ms
	return nil
}

// generate runs one generation, speculatively when [Session.Speculate] set it.
func (s *Session) generate(ctx context.Context, prompt []int32, o model.GenerateOptions, emit func(model.Token) bool) (*model.Result, error) {
	if s.spec == nil {
		return s.s.Generate(ctx, prompt, o, emit)
	}
	return s.s.GenerateSpeculative(ctx, prompt, o, *s.spec, emit)
}

// AcceptanceRate is the fraction of drafted tokens the model accepted (0
// without speculation).
func (r Result) AcceptanceRate() float64 {
	if r.Drafted == 0 {
		return 0
	}
	return float64(r.Accepted) / float64(r.Drafted)
}
