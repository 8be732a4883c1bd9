package ingot_test

import (
	"math"
	"testing"

	"github.com/ingot-llm/ingot"
	"github.com/ingot-llm/ingot/model"
)

// FuzzSampling: any Sampling either fails Validate with an error or samples a
// token id inside the vocabulary, whatever the logits hold (NaN and ±Inf
// included) and whatever the history; nothing panics. The options go through
// the same conversion Generate uses (Sampling → model.GenerateOptions).
//
//	go test -run '^$' -fuzz FuzzSampling -fuzztime 1000000x .
func FuzzSampling(f *testing.F) {
	f.Add(float32(0.8), 40, float32(0.95), float32(0.05), float32(1.1), 64, uint64(1), 16, false, int32(3), uint8(0))
	f.Add(float32(0), 0, float32(0), float32(0), float32(0), 0, uint64(0), 0, true, int32(-1), uint8(1))
	f.Add(float32(1), 1, float32(1), float32(1), float32(1), 1, uint64(7), 1, false, int32(1<<30), uint8(2))
	f.Add(float32(math.NaN()), -5, float32(2), float32(2), float32(-1), -1, uint64(3), -3, false, int32(0), uint8(3))
	f.Add(float32(1e-30), 1000000, float32(1e-7), float32(0.999999), float32(1e30), 1<<20, uint64(9), 1, false, int32(63), uint8(4))
	f.Fuzz(func(t *testing.T, temp float32, topK int, topP, minP, penalty float32, lastN int, seed uint64, maxTokens int, ignoreEOS bool, seen int32, shape uint8) {
		sp := ingot.Sampling{Temperature: temp, TopK: topK, TopP: topP, MinP: minP, RepeatPenalty: penalty,
			RepeatLastN: lastN, Seed: seed, MaxTokens: maxTokens, IgnoreEOS: ignoreEOS}
		err := sp.Validate()
		o := model.GenerateOptions{Temperature: temp, TopK: topK, TopP: topP, MinP: minP, RepeatPenalty: penalty,
			RepeatLastN: lastN, Seed: seed, MaxTokens: maxTokens, IgnoreEOS: ignoreEOS}
		s, merr := model.NewSampler(o)
		if (err == nil) != (merr == nil) {
			t.Fatalf("Sampling.Validate: %v, model.NewSampler: %v", err, merr)
		}
		if err != nil {
			return
		}
		const V = 64
		logits := make([]float32, V)
		for i := range logits {
			switch shape % 5 {
			case 0: // spread
				logits[i] = float32(i%7) - 3 + float32(i)/V
			case 1: // ties
				logits[i] = 1
			case 2: // one dominant
				logits[i] = -1e30
			case 3: // huge range
				logits[i] = float32(math.Ldexp(1, i%120)) * float32(1-2*(i%2))
			case 4: // non-finite entries
				logits[i] = [...]float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0}[i%4]
			}
		}
		logits[int(uint32(seen)%V)] = 10
		history := []int32{seen, -seen, seen % V, 0, V - 1, V, -1}
		for range 3 {
			if id := s.Sample(logits, history); id < 0 || id >= V {
				t.Fatalf("sampled id %d outside [0, %d) with %+v", id, V, sp)
			}
		}
	})
}
