package model

import (
	"context"
	"errors"

	"github.com/ingot-llm/ingot/kernels"
)

// ForwardEach is [Session.Forward] that also passes fn the logits (V) after
// every token, in order: fn(i, logits) sees the logits that follow tokens[i]
// (the slice is reused by the next call of fn). It is what prompt scoring
// needs: ln p(tokens[i+1] | tokens[:i+1]) for every i from one prefill.
//
// The tokens run in the same prefill chunks as Forward, so the cache ends up
// as Forward leaves it; then the final norm and the head run on the chunk's
// residual stream, up to headBatch rows a call (one batched mat-mul reads the
// head's weights once for them all), and the chunk's last row comes from
// Forward's own head. fn returning an error stops the call with that error.
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
		n := s.cache.chunk(len(s.tokens), min(len(tokens)-i, s.batch.L)) // forward's own chunk
		last, err := s.forward(ctx, tokens[i:i+n])
		if err != nil {
			return err
		}
		for r0 := 0; r0 < n-1; r0 += headBatch {
			r1 := min(r0+headBatch, n-1) // the last row's logits are forward's
			rows, err := s.headRows(s.batch.x, r0, r1)
			if err != nil {
				return err
			}
			V := len(rows) / (r1 - r0)
			for r := r0; r < r1; r++ {
				if err := fn(i+r, rows[(r-r0)*V:(r-r0+1)*V]); err != nil {
					return err
				}
			}
		}
		if err := fn(i+n-1, last); err != nil {
			return err
		}
		i += n
	}
	return nil
}

// replay restores a cut-back linear-attention state from a checkpoint and
// runs the kept tokens after it again (see Session.rewind), on their own, as
// forward would before new tokens.
func (s *Session) replay(ctx context.Context) error {
	kept, err := s.rewind()
	if err != nil || len(kept) == 0 {
		return err
	}
	_, err = s.forward(ctx, kept)
	return err
}

// headBatch is the most rows one batched head call computes: a (16, V)
// buffer, 8 MB at V = 128k.
const headBatch = 16

// rowHeads is a session's buffers for batched head calls, made at first use.
type rowHeads struct {
	last, logits *kernels.Tensor // (headBatch, D), (headBatch, V)
	host         []float32       // (headBatch·V)
}

// headRows runs the final norm and the head on rows [r0, r1) of x, a
// forward's residual stream (r1−r0 ≤ headBatch), and returns their logits
// (r1−r0, V) row-major on the host, in a buffer the next call reuses.
func (s *Session) headRows(x *kernels.Tensor, r0, r1 int) ([]float32, error) {
	c := s.m.Config
	if s.heads == nil {
		h := &rowHeads{last: s.b.New(headBatch, c.HiddenSize), logits: s.b.New(headBatch, c.VocabSize), host: make([]float32, headBatch*c.VocabSize)}
		s.heads = h
		s.bytes += int64(4 * headBatch * (c.HiddenSize + c.VocabSize))
	}
	h, n := s.heads, r1-r0
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.unlock()
	m := s.m.net
	last, logits := h.last.Rows(0, n), h.logits.Rows(0, n)
	s.b.RMSNorm(last, x.Rows(r0, r1), m.norm, m.cfg.RMSNormEps) // (n, D)
	s.b.MatMul(logits, last, m.head)                            // (n, V)
	if m.cfg.FinalSoftcap > 0 {
		s.b.Softcap(logits, float32(m.cfg.FinalSoftcap))
	}
	host := h.host[:n*c.VocabSize]
	if err := s.b.Download(host, logits); err != nil {
		return nil, err
	}
	return host, nil
}
