package ingot_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot"
)

// TestSessionScoring: Session.Score agrees with Model.Score and its tokens'
// logprobs sum to it; ScoreBatch and TopK agree with Score; RollingLogprob over
// a text longer than the context gives a finite perplexity above 1 and scores
// every token but the first.
func TestSessionScoring(t *testing.T) {
	m := load(t, filepath.Join(refDir, "tinycode-llama"), ingot.Options{Threads: 2})
	s, err := m.NewSession(ingot.SessionOptions{Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	prompt := "def fib(n):\n    if n < 2:\n        return n\n   "
	completions := []string{" return fib(n-1) + fib(n-2)", " print('hello')"}
	batch, err := s.ScoreBatch(ctx, []ingot.ScorePair{{prompt, completions[0]}, {prompt, completions[1]}})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range completions {
		want, err := m.Score(ctx, prompt, c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Score(ctx, prompt, c)
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for _, tk := range got.Tokens {
			sum += tk.Logprob
		}
		if math.Abs(got.Logprob-want) > 1e-4 || math.Abs(sum-want) > 1e-4 || math.Abs(batch[i].Logprob-want) > 1e-4 {
			t.Errorf("%q: Session.Score %v (tokens sum to %v), ScoreBatch %v, Model.Score %v", c, got.Logprob, sum, batch[i].Logprob, want)
		}
		// The first completion token's logprob is TopK's for it.
		top, err := s.TopK(ctx, prompt, 4096)
		if err != nil {
			t.Fatal(err)
		}
		first := got.Tokens[0]
		for _, x := range top {
			if x.ID == first.ID && math.Abs(x.Logprob-first.Logprob) > 1e-4 {
				t.Errorf("%q: TopK gives token %d logprob %v, Score %v", c, x.ID, x.Logprob, first.Logprob)
			}
		}
		if first.Greedy != (top[0].ID == first.ID) {
			t.Errorf("%q: greedy %v, but TopK's first is %d (the token is %d)", c, first.Greedy, top[0].ID, first.ID)
		}
	}
	if batch[0].Logprob <= batch[1].Logprob {
		t.Errorf("the recursive fib scores %v, print('hello') %v", batch[0].Logprob, batch[1].Logprob)
	}
	top, err := s.TopK(ctx, "import os\nimport", 3)
	if err != nil || len(top) != 3 || top[0].Text == "" || top[0].Logprob < top[1].Logprob {
		t.Fatalf("TopK: %+v, %v", top, err)
	}
	text := strings.Repeat("def add(a, b):\n    return a + b\n\n", 8)
	r, err := s.RollingLogprob(ctx, text, ingot.RollingOptions{Window: 64, Stride: 48})
	if err != nil {
		t.Fatal(err)
	}
	n := len(m.Tokenizer().Encode(text, true))
	if ppl := r.Perplexity(); n <= 64 || len(r.Logprobs) != n-1 || !(ppl > 1 && ppl < 100) {
		t.Errorf("rolling over %d tokens: %d scored in %d windows, perplexity %v", n, len(r.Logprobs), r.Windows, ppl)
	}
}
