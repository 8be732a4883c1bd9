package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// GenerateOptions controls decoding. The zero value decodes greedily until EOS or
// the end of the context window.
type GenerateOptions struct {
	MaxTokens     int     // 0: until EOS or context end
	Temperature   float32 // 0: greedy (argmax)
	TopK          int     // 0: disabled
	TopP          float32 // 0 or 1: disabled
	MinP          float32 // 0: disabled
	RepeatPenalty float32 // 0 or 1: disabled; >1 discourages tokens of the last RepeatLastN
	RepeatLastN   int     // 0: 64 (llama.cpp and ollama's default)
	Seed          uint64  // 0: seeded from time
	IgnoreEOS     bool    // keep going past EOS ids
	Logprobs      bool    // fill Token.Logprob (one more pass over the logits per token)
}

// Validate reports the first option out of range, named as in llama.cpp's and
// OpenAI's APIs (min_p, top_k, …). NaN and infinities are out of range.
func (o GenerateOptions) Validate() error {
	finite := func(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }
	switch {
	case o.MaxTokens < 0:
		return fmt.Errorf("model: max_tokens must be ≥ 0 (0: until EOS or the context is full), got %d", o.MaxTokens)
	case !finite(o.Temperature) || o.Temperature < 0:
		return fmt.Errorf("model: temperature must be a finite number ≥ 0 (0: greedy), got %g", o.Temperature)
	case o.TopK < 0:
		return fmt.Errorf("model: top_k must be ≥ 0 (0: off), got %d", o.TopK)
	case !(o.TopP >= 0 && o.TopP <= 1):
		return fmt.Errorf("model: top_p must be in [0, 1] (0 or 1: off), got %g", o.TopP)
	case !(o.MinP >= 0 && o.MinP <= 1):
		return fmt.Errorf("model: min_p must be in [0, 1] (0: off), got %g", o.MinP)
	case !finite(o.RepeatPenalty) || o.RepeatPenalty < 0:
		return fmt.Errorf("model: repeat_penalty must be a finite number ≥ 0 (0 or 1: off), got %g", o.RepeatPenalty)
	case o.RepeatLastN < 0:
		return fmt.Errorf("model: repeat_last_n must be ≥ 0 (0: 64), got %d", o.RepeatLastN)
	}
	return nil
}

// NewSampler returns the sampler [Session.Generate] uses on the host for
// options o, or o's first option out of range (see [GenerateOptions.Validate]).
func NewSampler(o GenerateOptions) (*Sampler, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return newSampler(o), nil
}

// A Sampler turns logits into a token. The order of transforms is ollama's:
// repetition penalty, top-k, temperature, softmax, top-p, min-p, then a draw from
// the seeded PCG. Temperature 0 is argmax before any other work but the penalty.
type Sampler struct {
	o    GenerateOptions
	rng  *rand.Rand
	work []float32   // a copy of the logits the transforms may change
	cand []candidate // reused across tokens
}

type candidate struct {
	id int32
	p  float32 // logit, then probability
}

func newSampler(o GenerateOptions) *Sampler {
	seed := o.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	if o.RepeatLastN == 0 {
		o.RepeatLastN = 64
	}
	return &Sampler{o: o, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Sample picks the next token from logits (V, left unchanged) given the
// tokens so far (prompt and generated).
func (s *Sampler) Sample(logits []float32, history []int32) int32 {
	s.work = append(s.work[:0], logits...)
	logits = s.work
	if p := s.o.RepeatPenalty; p > 0 && p != 1 {
		repeatPenalty(logits, history[max(0, len(history)-s.o.RepeatLastN):], p)
	}
	if s.o.Temperature <= 0 {
		return int32(argmax(logits))
	}
	c := s.cand[:0]
	for i, l := range logits {
		c = append(c, candidate{int32(i), l})
	}
	s.cand = c[:0]
	return s.pick(topK(c, s.o.TopK))
}

// pick draws from candidates sorted by decreasing logit, ties by lower id (what
// topK returns, on the host or the device): temperature, softmax, top-p, min-p,
// then one number from the RNG.
func (s *Sampler) pick(c []candidate) int32 {
	softmax(c, s.o.Temperature)
	c = topP(c, s.o.TopP)
	c = minP(c, s.o.MinP)
	return draw(c, s.rng.Float32())
}

// repeatPenalty divides positive logits of seen tokens by p and multiplies negative
// ones by p (CTRL, as transformers and llama.cpp apply it); each token once.
func repeatPenalty(logits []float32, seen []int32, p float32) {
	for i, t := range seen {
		if t < 0 || int(t) >= len(logits) || slices.Contains(seen[:i], t) {
			continue
		}
		if logits[t] > 0 {
			logits[t] /= p
		} else {
			logits[t] *= p
		}
	}
}

// argmax returns the index of the largest value (the first on ties, as torch).
func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// topK keeps the k largest candidates, sorted by decreasing logit (ties: lower id
// first); k ≤ 0 keeps all, sorted. With k set it selects with a k-element min-heap,
// O(V log k), instead of sorting the whole vocabulary every token.
func topK(c []candidate, k int) []candidate {
	if k > 0 && k < len(c) {
		h := c[:k]
		for i := k/2 - 1; i >= 0; i-- {
			siftDown(h, i)
		}
		for _, x := range c[k:] {
			if better(x, h[0]) {
				h[0] = x
				siftDown(h, 0)
			}
		}
		c = h
	}
	slices.SortFunc(c, func(a, b candidate) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
	return c
}

// better orders candidates: higher logit first, then lower id.
func better(a, b candidate) bool { return a.p > b.p || (a.p == b.p && a.id < b.id) }

// siftDown restores the min-heap (by better) below i.
func siftDown(h []candidate, i int) {
	for {
		m, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && better(h[m], h[l]) {
			m = l
		}
		if r < len(h) && better(h[m], h[r]) {
			m = r
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// softmax turns sorted logits into probabilities at temperature t.
func softmax(c []candidate, t float32) {
	if len(c) == 0 {
		return
	}
	mx := c[0].p
	var sum float64
	for i := range c {
		e := math.Exp(float64((c[i].p - mx) / t))
		c[i].p = float32(e)
		sum += e
	}
	for i := range c {
		c[i].p = float32(float64(c[i].p) / sum)
	}
}

// topP keeps the smallest prefix of sorted candidates whose mass reaches p.
func topP(c []candidate, p float32) []candidate {
	if p <= 0 || p >= 1 {
		return c
	}
	var sum float32
	for i := range c {
		sum += c[i].p
		if sum >= p {
			return c[:i+1]
		}
	}
	return c
}

// minP keeps candidates whose probability is at least p times the largest.
func minP(c []candidate, p float32) []candidate {
	if p <= 0 || len(c) == 0 {
		return c
	}
	limit := c[0].p * p
	for i := range c {
		if c[i].p < limit {
			return c[:i]
		}
	}
	return c
}

// draw picks a candidate with probability proportional to p, given u in [0, 1).
func draw(c []candidate, u float32) int32 {
	var sum float32
	for _, x := range c {
		sum += x.p
	}
	u *= sum
	for _, x := range c {
		u -= x.p
		if u < 0 {
			return x.id
		}
	}
	return c[len(c)-1].id
}

// Logprob returns ln softmax(logits)[id], computed in float64.
func Logprob(logits []float32, id int32) float64 {
	mx := logits[0]
	for _, v := range logits {
		mx = max(mx, v)
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v - mx))
	}
	return float64(logits[id]-mx) - math.Log(sum)
}
