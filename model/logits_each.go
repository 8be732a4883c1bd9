package model

import (
	"context"
	"errors"
	"slices"

	"github.com/ingot-llm/ingot/kernels"
)

// ForwardEach is [Session.Forward] that also passes fn the logits (V) after
// every token, in order: fn(i, logits) sees the logits that follow tokens[i]
// (the slice is reused by the next call of fn). It is what prompt scoring
// needs: ln p(tokens[i+1] | tokens[:i+1]) for every i from one prefill.
//
// The tokens run in the same prefill chunks as Forward, so the cache ends up
// as Forward leaves it; then the final norm and the head run on each row of
// the chunk's residual stream one row at a time, as a decode step runs them.
// fn returning an error stops the call with that error.
func (s *Session) ForwardEach(ctx context.Context, tokens []int32, fn func(i int, logits []float32) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	return s.forwardEach(ctx, tokens, fn)
}

func (s *Session) forwardEach(ctx context.Context, tokens []int32, fn func(i int, logits []float32) error) error {
	if len(tokens) == 0 {
		return errors.New("model: no tokens to run")
	}
	if err := s.replay(ctx); err != nil { // else forward's chunks would hold the kept tokens too
		return err
	}
	for i := 0; i < len(tokens); {
		n := min(len(tokens)-i, s.batch.L)
		if _, err := s.forward(ctx, tokens[i:i+n]); err != nil {
			return err
		}
		x := s.one.x // forward ran n rows in s.batch, or one in s.one
		if n > 1 {
			x = s.batch.x
		}
		for r := range n {
			if err := s.lock(); err != nil {
				return err
			}
			s.m.net.headRow(s.b, s.one, x.Rows(r, r+1))
			err := s.b.Download(s.one.hostLogit, s.one.logits)
			s.unlock()
			if err != nil {
				return err
			}
			if err := fn(i+r, s.one.hostLogit); err != nil {
				return err
			}
		}
		i += n
	}
	return nil
}

// replay runs the kept tokens again when a linear-attention state was cut
// back (see cache.stale), as forward does before new tokens.
func (s *Session) replay(ctx context.Context) error {
	if !s.cache.stale {
		return nil
	}
	if err := s.lock(); err != nil {
		return err
	}
	s.cache.reset(s.b)
	s.unlock()
	kept := slices.Clone(s.tokens)
	s.tokens = s.tokens[:0]
	if len(kept) == 0 {
		return nil
	}
	_, err := s.forward(ctx, kept)
	return err
}

// headRow runs the final norm and the head on x, one row (1, D) of a
// forward's residual stream, into s.logits (1, V), as decoder does for the
// last row.
func (m *llama) headRow(b kernels.Backend, s *acts, x *kernels.Tensor) {
	b.RMSNorm(s.last, x, m.norm, m.cfg.RMSNormEps) // (1, D)
	b.MatMul(s.logits, s.last, m.head)             // (1, V)
	if m.cfg.FinalSoftcap > 0 {
		b.Softcap(s.logits, float32(m.cfg.FinalSoftcap))
	}
}
