package kernels_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/ingot-llm/ingot/model"
)

// TestMetalBatchInvariant decodes three prompts of the q4 and bf16 tinycode
// models on metal-emu, each alone with one-token Forward steps and all
// together in model.Batch steps (whose mat-muls run Metal's MatVecs: the
// small-batch mat-vec), and compares every step's logits bit for bit.
func TestMetalBatchInvariant(t *testing.T) {
	ctx := context.Background()
	prompts := [][]int32{{1, 450, 3681, 310}, {1, 2987, 13}, {1, 910, 338, 263, 1243, 2989}}
	const steps = 3
	for _, name := range []string{"tinycode-llama-q4", "tinycode-llama"} {
		t.Run(name, func(t *testing.T) {
			b, _ := emuBackend(t, true)
			m, err := model.Load(ctx, filepath.Join(refDir, name), model.Options{Backend: b, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			so := model.SessionOptions{Context: 32}
			alone := make([][][]float32, len(prompts))
			next := make([]int32, len(prompts))
			ss := make([]*model.Session, len(prompts))
			for i, p := range prompts {
				s, err := m.NewSession(so)
				if err != nil {
					t.Fatal(err)
				}
				logits, err := s.Forward(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				next[i] = argmax(logits)
				tok := next[i]
				for range steps {
					if logits, err = s.Forward(ctx, []int32{tok}); err != nil {
						t.Fatal(err)
					}
					alone[i] = append(alone[i], append([]float32(nil), logits...))
					tok = argmax(logits)
				}
				s.Close()
				if ss[i], err = m.NewSession(so); err != nil {
					t.Fatal(err)
				}
				defer ss[i].Close()
				if _, err := ss[i].Forward(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			bt, err := m.NewBatch(len(prompts))
			if err != nil {
				t.Fatal(err)
			}
			defer bt.Close()
			for step := range steps {
				out, err := bt.Step(ctx, ss, next)
				if err != nil {
					t.Fatal(err)
				}
				for i, got := range out {
					want := alone[i][step]
					for j := range want {
						if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
							t.Fatalf("prompt %d, step %d: logit %d is %g in the batch, %g alone", i, step, j, got[j], want[j])
						}
					}
					next[i] = argmax(got)
				}
			}
		})
	}
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}
