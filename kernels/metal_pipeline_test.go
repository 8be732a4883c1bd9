package kernels_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/metal"
	"github.com/ingot-llm/ingot/model"
)

// noPipeline hides kernels.Pipeliner (and Mapper): greedy steps wait for each
// token before the next is encoded, as on a backend that only has Argmax.
type noPipeline struct {
	kernels.Backend
	kernels.Argmaxer
}

func (b noPipeline) NewStream() (kernels.Backend, error) {
	s, err := b.Backend.NewStream()
	if err != nil {
		return nil, err
	}
	return noPipeline{s, s.(kernels.Argmaxer)}, nil
}

func ids(ts []model.Token) []int32 {
	out := make([]int32, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

// TestMetalPipelinedGreedy generates greedily on metal-emu with the next step
// encoded while the current one runs, and without, and ends generation in
// every way that discards the step run ahead (EOS, the emit callback,
// cancellation) or avoids it (MaxTokens, a full context). Tokens, stop
// reason, cache and the logits of a following Forward must be identical, and
// every decoded token must cost one command buffer (on a device that does
// not split them) and one CPU wait.
func TestMetalPipelinedGreedy(t *testing.T) {
	dir := filepath.Join(refDir, "tinycode-llama-q4")
	prompt := []int32{4094, 1, 2}
	const ctxLen = 16
	// On a device that splits command buffers (metal.WorkLimiter, the cuda
	// device's decode pieces) a step is several; the accounting below is per
	// step, so hide the limit.
	t.Setenv("INGOT_CUDA_SPLIT", "0")
	dev := metalEmu(t).(*kernels.Metal).Device()
	if _, ok := dev.(metal.WorkLimiter); ok {
		dev = unlimited{dev}
	}
	pb, err := kernels.NewMetal(dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pb.Close() })
	pipe := loadCtx(t, dir, pb, ctxLen)
	mb := pipe.Backend().(*kernels.Metal)
	eb := metalEmu(t)
	ref := loadCtx(t, dir, noPipeline{eb, eb.(kernels.Argmaxer)}, ctxLen)

	// The continuation without stops: pick an EOS that first appears mid-way.
	r, err := ref.Generate(context.Background(), prompt, model.GenerateOptions{MaxTokens: 10, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	full := ids(r.Tokens)
	eosAt := 3
	for slices.Contains(full[:eosAt], full[eosAt]) {
		eosAt++
	}

	type run struct {
		ids   []int32
		stop  model.Stop
		err   error
		waits []int64 // per token: CPU waits, command buffers since the previous token
		cbs   []int64
	}
	for _, tc := range []struct {
		name      string
		o         model.GenerateOptions
		eos       []int32
		stopAt    int // emit returns false at this token; -1: never
		cancelAt  int // ctx is cancelled while emitting this token; -1: never
		wantStop  model.Stop
		wantErr   error
		wantCount int
	}{
		{"eos", model.GenerateOptions{}, []int32{full[eosAt]}, -1, -1, model.StopEOS, nil, eosAt + 1},
		{"emit stops", model.GenerateOptions{}, nil, 4, -1, model.StopCaller, nil, 5},
		{"cancelled", model.GenerateOptions{}, nil, -1, 3, model.StopCancelled, context.Canceled, 4},
		{"max tokens", model.GenerateOptions{MaxTokens: 6}, nil, -1, -1, model.StopLength, nil, 6},
		{"context full", model.GenerateOptions{}, nil, -1, -1, model.StopContext, nil, ctxLen - len(prompt) + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gen := func(m *model.Session, st interface {
				Stats() kernels.Stats
				ResetStats()
			}) run {
				m.Truncate(0)
				m.Model().EOS = tc.eos
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var out run
				if st != nil {
					st.ResetStats()
				}
				r, err := m.Generate(ctx, prompt, tc.o, func(tk model.Token) bool {
					if st != nil {
						s := st.Stats()
						st.ResetStats()
						out.waits, out.cbs = append(out.waits, s.Waits), append(out.cbs, s.CommandBuffers)
					}
					n := len(out.waits) - 1
					if st == nil {
						out.waits = append(out.waits, 0)
						n++
					}
					if n == tc.cancelAt {
						cancel()
					}
					return n != tc.stopAt
				})
				out.ids, out.stop, out.err = ids(r.Tokens), r.Stop, err
				return out
			}
			got, want := gen(pipe, mb), gen(ref, nil)
			if !slices.Equal(got.ids, want.ids) || got.stop != want.stop || !errors.Is(got.err, tc.wantErr) || !errors.Is(want.err, tc.wantErr) {
				t.Fatalf("pipelined: %v %q %v\nwaiting:   %v %q %v", got.ids, got.stop, got.err, want.ids, want.stop, want.err)
			}
			if n := min(len(full), len(got.ids)); len(got.ids) != tc.wantCount || got.stop != tc.wantStop || !slices.Equal(got.ids[:n], full[:n]) {
				t.Errorf("tokens %v (stop %q), want %d tokens starting %v (stop %q)", got.ids, got.stop, tc.wantCount, full, tc.wantStop)
			}
			// Token 0 comes from the prefill. Each later token costs one CPU
			// wait; its command buffer was committed one token earlier (token
			// 1 also commits the step run ahead, the last token none).
			var cbs int64
			for i := 1; i < len(got.waits); i++ {
				cbs += got.cbs[i]
				if got.waits[i] != 1 || got.cbs[i] > 2 {
					t.Errorf("token %d: %d CPU waits, %d command buffers; want 1 and at most 2", i, got.waits[i], got.cbs[i])
				}
			}
			discarded := int64(0)
			if tc.wantStop != model.StopLength && tc.wantStop != model.StopContext {
				discarded = 1 // the step run ahead for the last token
			}
			if want := int64(len(got.waits)-1) + discarded; cbs != want {
				t.Errorf("%d command buffers for %d decoded tokens, want %d", cbs, len(got.waits)-1, want)
			}
			if !slices.Equal(pipe.Cached(), ref.Cached()) {
				t.Fatalf("cached tokens\n%v\nwant\n%v", pipe.Cached(), ref.Cached())
			}
			if n := len(pipe.Cached()); n+2 <= ctxLen {
				next := []int32{7, 8}
				a, err := pipe.Forward(context.Background(), next)
				if err != nil {
					t.Fatal(err)
				}
				a = slices.Clone(a)
				b, err := ref.Forward(context.Background(), next)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(a, b) {
					t.Error("logits after continuing differ from the run without pipelining")
				}
			}
		})
	}
}
