package model

import (
	"context"
	"fmt"

	"github.com/ingot-llm/ingot/kernels"
)

// TapOptions chooses the hidden states [Session.ForwardTaps] copies out.
type TapOptions struct {
	// Layers lists residual-stream entries, numbered as Hugging Face's
	// hidden_states: 0 is the embedding (layer 0's input, × √D for Gemma), i+1
	// the output of layer i (after its residual add, before the final norm).
	Layers []int
	Norm   bool // the final norm's output: the head's input
	// Sublayers asks for each layer's mixer output (attention after o_proj,
	// or linear attention after out_proj) and MLP output (dense or mixture
	// of experts), both before any post-norm (Gemma 2, 3) and the residual
	// add.
	Sublayers bool
	All       bool // every position of tokens; else the last one's only
}

// Taps holds the hidden states a [Session.ForwardTaps] call copied out, in
// fresh slices the caller keeps.
type Taps struct {
	Residual [][]float32 // per TapOptions.Layers entry: (D), or with All (L, D) row-major
	Norm     []float32   // with TapOptions.Norm: (D), or with All (L, D)
	Mixer    [][]float32 // with TapOptions.Sublayers, per layer: (D), or with All (L, D)
	MLP      [][]float32 // likewise
	Logits   []float32   // the last token's logits (V), as Forward returns them (reused by the next call)
}

// ForwardTaps is [Session.Forward] that also copies out the hidden states o
// asks for. The forward pass is Forward's; only the states asked for are
// downloaded, as each is computed (no copy is made for a plain Forward).
func (s *Session) ForwardTaps(ctx context.Context, tokens []int32, o TapOptions) (*Taps, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.exit()
	c := s.m.Config
	n := c.NumLayers
	t := &tapState{n: n, idx: make([]int, 3*n+2), all: o.All}
	for i := range t.idx {
		t.idx[i] = -1
	}
	rows := 1
	if o.All {
		rows = len(tokens)
	}
	out := &Taps{}
	for j, i := range o.Layers {
		if i < 0 || i > n {
			return nil, fmt.Errorf("model: TapOptions.Layers[%d]: %d is outside [0, %d] (0: the embedding, i+1: layer i's output)", j, i, n)
		}
		if t.idx[i] >= 0 {
			return nil, fmt.Errorf("model: TapOptions.Layers[%d]: %d is listed twice", j, i)
		}
		t.idx[i] = len(t.dst)
		out.Residual = append(out.Residual, make([]float32, rows*c.HiddenSize))
		t.dst = append(t.dst, out.Residual[j])
	}
	if o.Norm {
		t.idx[n+1] = len(t.dst)
		out.Norm = make([]float32, rows*c.HiddenSize)
		t.dst = append(t.dst, out.Norm)
	}
	if o.Sublayers {
		out.Mixer, out.MLP = make([][]float32, n), make([][]float32, n)
		for i := range n {
			out.Mixer[i], out.MLP[i] = make([]float32, rows*c.HiddenSize), make([]float32, rows*c.HiddenSize)
			t.idx[t.mixer(i)], t.idx[t.mlp(i)] = len(t.dst), len(t.dst)+1
			t.dst = append(t.dst, out.Mixer[i], out.MLP[i])
		}
	}
	t.seen = make([]int, len(t.dst))
	t.skip = s.replayLen() // forward runs these kept tokens again first
	s.batch.taps, s.one.taps = t, t
	defer func() { s.batch.taps, s.one.taps = nil, nil }()
	logits, err := s.forward(ctx, tokens)
	if err != nil {
		return nil, err
	}
	if t.err != nil {
		return nil, t.err
	}
	out.Logits = logits
	return out, nil
}

// tapState is a ForwardTaps call's: where each tapped state goes on the host.
type tapState struct {
	idx  []int       // per residual entry 0…NumLayers, the final norm, each layer's mixer, each layer's MLP: its index in dst, or -1
	dst  [][]float32 // host buffers, (D) or (L, D)
	seen []int       // per dst: rows of the call taken so far (All)
	skip int         // rows at the start that are not the caller's tokens
	n    int         // layers
	all  bool
	err  error
}

// tapNorm returns whether the final norm's output is tapped.
func (t *tapState) tapNorm() bool { return t.idx[t.n+1] >= 0 }

// mixer and mlp return the entries of layer i's sublayer outputs.
func (t *tapState) mixer(i int) int { return t.n + 2 + i }
func (t *tapState) mlp(i int) int   { return 2*t.n + 2 + i }

// take copies x (L, D), the state of entry i for the forward chunk running,
// to the host if it is tapped: the last row, or with all every row of the
// caller's tokens.
func (t *tapState) take(b kernels.Backend, i int, x *kernels.Tensor) {
	j := t.idx[i]
	if j < 0 || t.err != nil {
		return
	}
	L, D := x.NumRows(), x.Cols()
	if !t.all {
		t.err = b.Download(t.dst[j], x.Rows(L-1, L))
		return
	}
	lo := max(t.skip-t.seen[j], 0) // the first row to keep
	if at := t.seen[j] + lo - t.skip; lo < L && (at+L-lo)*D <= len(t.dst[j]) {
		t.err = b.Download(t.dst[j][at*D:(at+L-lo)*D], x.Rows(lo, L))
	} else if lo < L {
		t.err = fmt.Errorf("model: ForwardTaps: %d rows past the %d tokens asked for", at+L-lo, len(t.dst[j])/D)
	}
	t.seen[j] += L
}
