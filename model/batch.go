package model

import (
	"context"
	"errors"
	"fmt"

	"github.com/ingot-llm/ingot/kernels"
)

// A Batch runs decode steps of several sessions of one model together: each
// session decodes one token at its own position against its own KV cache,
// and the mat-muls run once over the sessions' rows, so a step reads each
// weight matrix once for all of them (continuous batching). RoPE, the cache
// write and attention run per session. On the CPU backend a session's logits
// are bit-identical whether it steps alone (in a Batch or with [Session.Generate]'s
// one-token steps) or beside up to the Batch's capacity of others, in any
// order: every op of the step computes a row as a one-row step does (see
// kernels.MatVecser).
//
// A Batch runs the Llama-family decoder with attention layers and dense
// MLPs; [Model.NewBatch] refuses other models (linear attention, mixtures of
// experts), and Step refuses a session with a LoRA adapter: decode those one
// at a time. A Batch runs one Step at a time.
type Batch struct {
	m     *Model
	own   *Session // holds the batch's stream open in m.sessions, closed with the model
	cap   int
	all   *batchActs
	views []*batchActs // views[n-1]: the first n rows, cut at first use
	tok   []int32
	host  []float32          // (cap, V) logits on the host
	rows  [][]float32        // rows of host
	w1    [1]*kernels.Tensor // a single weight's MatVecs argument, kept so a step allocates nothing
	d1    [1]*kernels.Tensor
}

// batchActs is a Batch's activations for n rows, one per session.
type batchActs struct {
	x, h, q, att, k, v, g, u *kernels.Tensor // (n, ·) as acts'
	qh, kh                   *kernels.Tensor // q, k per head, for QK-norm
	last, logits             *kernels.Tensor // (n, D), (n, V)
	qkv, gu                  []*kernels.Tensor
	row                      []batchRow
}

// batchRow is one session's row views.
type batchRow struct {
	q, k, v, att, g, u, logits *kernels.Tensor
}

// Batchable returns nil if the model's sessions can decode in a [Batch], or
// why not.
func (m *Model) Batchable() error {
	for i := range m.net.layers {
		l := &m.net.layers[i]
		switch {
		case l.lin != nil:
			return fmt.Errorf("model: batched decoding: layer %d is linear attention (decode its sessions one at a time)", i)
		case l.router != nil:
			return fmt.Errorf("model: batched decoding: layer %d is a mixture of experts (decode its sessions one at a time)", i)
		case l.wg != nil:
			return fmt.Errorf("model: batched decoding: layer %d has gated attention (decode its sessions one at a time)", i)
		}
	}
	return nil
}

// NewBatch makes a Batch of up to n sessions, with its activations on a
// stream of the model's backend.
func (m *Model) NewBatch(n int) (*Batch, error) {
	if n < 1 {
		return nil, fmt.Errorf("model: batch size (%d) must be ≥ 1", n)
	}
	if err := m.Batchable(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	b, err := m.b.NewStream()
	if err != nil {
		return nil, fmt.Errorf("model: new batch: %w", err)
	}
	c := m.Config
	D, F, V := c.HiddenSize, c.IntermediateSize, c.VocabSize
	qw, kw := c.NumHeads*c.HeadDim, c.NumKVHeads*c.HeadDim
	bt := &Batch{m: m, own: &Session{m: m, b: b}, cap: n, views: make([]*batchActs, n),
		tok: make([]int32, n), host: make([]float32, n*V), rows: make([][]float32, n)}
	bt.all = &batchActs{x: b.New(n, D), h: b.New(n, D), q: b.New(n, qw), att: b.New(n, qw),
		k: b.New(n, kw), v: b.New(n, kw), g: b.New(n, F), u: b.New(n, F), last: b.New(n, D), logits: b.New(n, V)}
	for j := range bt.rows {
		bt.rows[j] = bt.host[j*V : (j+1)*V]
	}
	m.sessions[bt.own] = struct{}{}
	return bt, nil
}

// Close releases the batch's stream and activations; the sessions are
// untouched. Close again does nothing.
func (bt *Batch) Close() error { return bt.own.Close() }

// Cap returns the most sessions a Step takes.
func (bt *Batch) Cap() int { return bt.cap }

// view returns the activations of the first n rows.
func (bt *Batch) view(n int) *batchActs {
	if v := bt.views[n-1]; v != nil {
		return v
	}
	a := bt.all
	v := &batchActs{}
	for _, t := range []struct{ dst, src **kernels.Tensor }{
		{&v.x, &a.x}, {&v.h, &a.h}, {&v.q, &a.q}, {&v.att, &a.att}, {&v.k, &a.k}, {&v.v, &a.v},
		{&v.g, &a.g}, {&v.u, &a.u}, {&v.last, &a.last}, {&v.logits, &a.logits},
	} {
		*t.dst = (*t.src).Rows(0, n)
	}
	v.qh, v.kh = reshape(v.q), reshape(v.k)
	v.qkv, v.gu = []*kernels.Tensor{v.q, v.k, v.v}, []*kernels.Tensor{v.g, v.u}
	v.row = make([]batchRow, n)
	for j := range v.row {
		r := func(t *kernels.Tensor) *kernels.Tensor { return t.Rows(j, j+1) }
		v.row[j] = batchRow{q: r(v.q), k: r(v.k), v: r(v.v), att: r(v.att), g: r(v.g), u: r(v.u), logits: r(v.logits)}
	}
	bt.views[n-1] = v
	return v
}

// Step decodes tokens[j] in ss[j] at its next position (len(ss[j].Cached()))
// for every j, all in one forward, and returns each session's logits (V)
// after its token. The slices are reused by the next Step. Each session is
// in this call for its duration (a call of its own at the same time fails);
// a session that cannot take the step fails the whole step before any work.
func (bt *Batch) Step(ctx context.Context, ss []*Session, tokens []int32) ([][]float32, error) {
	n := len(ss)
	switch {
	case n == 0 || n > bt.cap:
		return nil, fmt.Errorf("model: batch step of %d sessions (want 1 to %d)", n, bt.cap)
	case len(tokens) != n:
		return nil, fmt.Errorf("model: batch step of %d sessions with %d tokens", n, len(tokens))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	V := int32(bt.m.Config.VocabSize)
	for j, s := range ss {
		if err := s.enter(); err != nil {
			for _, e := range ss[:j] {
				e.exit()
			}
			return nil, fmt.Errorf("model: batch step: session %d: %w", j, err)
		}
	}
	defer func() {
		for _, s := range ss {
			s.exit()
		}
	}()
	for j, s := range ss {
		var err error
		switch pos := len(s.tokens); {
		case s.m != bt.m:
			err = errors.New("model: the session is of another model")
		case s.adapter != nil:
			err = errors.New("model: the session has a LoRA adapter (decode it alone)")
		case pos >= s.cache.maxSeq:
			err = fmt.Errorf("%w: %d tokens", ErrContextFull, s.cache.maxSeq)
		case tokens[j] < 0 || tokens[j] >= V:
			err = fmt.Errorf("model: token %d is outside the vocabulary of %d", tokens[j], V)
		}
		if err != nil {
			return nil, fmt.Errorf("model: batch step: session %d: %w", j, err)
		}
	}
	if err := bt.own.lock(); err != nil {
		return nil, err
	}
	defer bt.own.unlock()
	for _, s := range ss {
		if s.closed {
			return nil, ErrClosed
		}
	}
	b, v := bt.own.b, bt.view(n)
	copy(bt.tok, tokens)
	b.Embed(v.x, bt.m.net.embed, bt.tok[:n], bt.m.net.scale) // (n, D)
	bt.decode(b, v, ss)
	for j, s := range ss {
		pos := len(s.tokens)
		s.cache.len = max(s.cache.len, pos+1)
		s.cache.tick(s.b, pos+1)
		s.tokens = append(s.tokens, tokens[j])
	}
	if err := b.Download(bt.host[:int(V)*n], v.logits); err != nil {
		return nil, err
	}
	return bt.rows[:n], nil
}

// decode is llama.decoder for one token of each session in ss, rows of v:
// the same ops on the same rows (so a row's bits are a one-token step's),
// but the mat-muls run over all rows (kernels.MatVecs), and RoPE, the cache
// write, attention and the gated units (whose vector kernels meet a row's
// elements in the lanes of its own offset) run per row.
func (bt *Batch) decode(b kernels.Backend, v *batchActs, ss []*Session) {
	m := bt.m.net
	eps := m.cfg.RMSNormEps
	b.RMSNorm(v.h, v.x, m.layers[0].attnNorm, eps) // (n, D)
	for i := range m.layers {
		l := &m.layers[i]
		bt.linears(b, v.qkv, v.h, l.qkv, l.qkvB) // q (n, H·Dh), k and v (n, Hkv·Dh)
		if l.qNorm != nil {
			b.RMSNorm(v.qh, v.qh, l.qNorm, eps) // per head (Dh)
			b.RMSNorm(v.kh, v.kh, l.kNorm, eps)
		}
		for j, s := range ss {
			r, c, rope := &v.row[j], s.cache, s.one.rope
			if m.local[i] {
				rope = s.one.ropeLocal
			}
			pos := len(s.tokens)
			b.RoPEStore(r.q, r.k, r.v, c.k[i], c.v[i], pos, rope)
			b.Attention(r.att, r.q, c.k[i], c.v[i], pos, &m.attn[i]) // (1, H·Dh)
		}
		bt.linear(b, v.h, v.att, l.wo, l.bo) // (n, D)
		if l.postAttnNorm != nil {
			b.RMSNorm(v.h, v.h, l.postAttnNorm, eps)
		}
		b.AddRMSNorm(v.h, v.x, v.h, l.mlpNorm, eps) // x += h; h = norm(x)
		bt.linears(b, v.gu, v.h, l.gu, l.guB)       // g and u (n, F)
		for j := range ss {
			r := &v.row[j]
			b.GLU(r.g, r.g, r.u, m.act) // act(g)·u
		}
		bt.linear(b, v.h, v.g, l.down, l.bd) // (n, D)
		if l.postMLPNorm != nil {
			b.RMSNorm(v.h, v.h, l.postMLPNorm, eps)
		}
		if i+1 < len(m.layers) {
			b.AddRMSNorm(v.h, v.x, v.h, m.layers[i+1].attnNorm, eps) // residual; the next block's norm
		} else {
			b.AddRMSNorm(v.last, v.x, v.h, m.norm, eps) // residual; the final norm
		}
	}
	bt.linear(b, v.logits, v.last, m.head, nil) // (n, V)
	if c := m.cfg.FinalSoftcap; c > 0 {
		for j := range ss {
			b.Softcap(v.row[j].logits, float32(c))
		}
	}
}

// linears is llama's linears on kernels.MatVecs.
func (bt *Batch) linears(b kernels.Backend, dst []*kernels.Tensor, x *kernels.Tensor, w, bias []*kernels.Tensor) {
	kernels.MatVecs(b, dst, x, w)
	for i, bi := range bias {
		if bi != nil {
			b.Add(dst[i], dst[i], bi)
		}
	}
}

// linear is llama's linear on kernels.MatVecs.
func (bt *Batch) linear(b kernels.Backend, dst, x, w, bias *kernels.Tensor) {
	bt.d1[0], bt.w1[0] = dst, w
	kernels.MatVecs(b, bt.d1[:], x, bt.w1[:])
	bt.d1[0], bt.w1[0] = nil, nil
	if bias != nil {
		b.Add(dst, dst, bias)
	}
}
