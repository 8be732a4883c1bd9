package model

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// logSoftmax is log_softmax of one row in float64, the reference's formula.
func logSoftmax(row []float32, id int32) float64 {
	mx := math.Inf(-1)
	for _, v := range row {
		mx = max(mx, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - mx)
	}
	return float64(row[id]) - mx - math.Log(sum)
}

// TestScoreReference: Score over a prompt/completion split of the reference
// input ids equals Σ log_softmax of transformers' logits over the completion
// tokens (1e-4), token by token, with the greedy flags of the reference's
// argmax; ScoreBatch gives the same numbers for several splits at once.
func TestScoreReference(t *testing.T) {
	for _, name := range []string{"llama3", "qwen2", "qwen3_5"} {
		t.Run(name, func(t *testing.T) {
			dir, ref := readRef(t, name)
			logits := readLogits(t, dir, ref.LogitsShape)
			s := open(t, dir, Options{Threads: 2}, SessionOptions{Context: 32, Batch: 8})
			ids := ref.InputIDs
			ctx := context.Background()
			var pairs []ScorePair
			for _, split := range []int{10, 1, 23, 10, 5} {
				pairs = append(pairs, ScorePair{ids[:split], ids[split:]})
			}
			batch, err := s.ScoreBatch(ctx, pairs)
			if err != nil {
				t.Fatal(err)
			}
			for i, pr := range pairs {
				split := len(pr.Prompt)
				got, err := s.Score(ctx, pr.Prompt, pr.Completion)
				if err != nil {
					t.Fatal(err)
				}
				var want float64
				greedy := true
				for j, id := range pr.Completion {
					row := logits[split+j-1]
					lp := logSoftmax(row, id)
					want += lp
					g := argmax(row) == int(id)
					greedy = greedy && g
					tk := got.Tokens[j]
					if tk.ID != id || math.Abs(tk.Logprob-lp) > 1e-4 || tk.Greedy != g {
						t.Errorf("split %d token %d: got %+v, want id %d logprob %.6f greedy %v", split, j, tk, id, lp, g)
					}
				}
				if len(got.Tokens) != len(pr.Completion) || math.Abs(got.Logprob-want) > 1e-4 || got.Greedy != greedy {
					t.Errorf("split %d: Score %.6f (greedy %v, %d tokens), want %.6f (greedy %v)", split, got.Logprob, got.Greedy, len(got.Tokens), want, greedy)
				}
				if b := batch[i]; math.Abs(b.Logprob-got.Logprob) > 1e-5 || b.Greedy != got.Greedy || len(b.Tokens) != len(got.Tokens) {
					t.Errorf("split %d: ScoreBatch %.6f, Score %.6f", split, b.Logprob, got.Logprob)
				}
			}
			if _, err := s.Score(ctx, nil, ids); err == nil {
				t.Error("empty prompt: no error")
			}
			if _, err := s.Score(ctx, ids, ids[:10]); err == nil {
				t.Error("34 tokens in a 32-token context: no error")
			}
			for _, bad := range []int32{-1, int32(len(logits[0]))} {
				if _, err := s.Score(ctx, ids[:3], []int32{ids[3], bad}); err == nil || !strings.Contains(err.Error(), "outside the vocabulary") {
					t.Errorf("completion token %d: error %v", bad, err)
				}
				if _, err := s.RollingLogprob(ctx, []int32{1, 2, bad}, RollingOptions{Window: 8}); err == nil || !strings.Contains(err.Error(), "outside the vocabulary") {
					t.Errorf("rolling over token %d: error %v", bad, err)
				}
			}
		})
	}
}

// TestTopKReference: TopK after the reference prompt gives top5_last's ids and
// their logits' log_softmax (1e-4).
func TestTopKReference(t *testing.T) {
	for _, name := range []string{"llama3", "mistral"} {
		t.Run(name, func(t *testing.T) {
			dir, ref := readRef(t, name)
			b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
			if err != nil {
				t.Fatal(err)
			}
			var top struct {
				Top5 struct {
					IDs    []int32   `json:"ids"`
					Logits []float32 `json:"logits"`
				} `json:"top5_last"`
			}
			if err := json.Unmarshal(b, &top); err != nil {
				t.Fatal(err)
			}
			s := open(t, dir, Options{Threads: 2}, SessionOptions{Context: 32})
			ctx := context.Background()
			got, err := s.TopKBatch(ctx, [][]int32{ref.InputIDs, ref.InputIDs[:5], ref.InputIDs}, 5)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range [][]TopLogprob{got[0], got[2]} {
				if len(g) != 5 {
					t.Fatalf("%d results, want 5", len(g))
				}
				for i, x := range g {
					want := logSoftmax(ref.LogitsLast, top.Top5.IDs[i])
					if x.ID != top.Top5.IDs[i] || math.Abs(x.Logprob-want) > 1e-4 {
						t.Errorf("top %d: got %+v, want id %d logprob %.6f", i, x, top.Top5.IDs[i], want)
					}
				}
			}
			if _, err := s.TopK(ctx, ref.InputIDs, 0); err == nil {
				t.Error("k 0: no error")
			}
		})
	}
}

// TestRollingLogprob: RollingLogprob over a sequence three times the context
// equals the windowed sum computed here from plain token-by-token forwards:
// window j covers [j·stride, j·stride+window), the last one [N−window, N), and
// a token is scored in the first window that holds it and a token before it.
func TestRollingLogprob(t *testing.T) {
	dir, ref := readRef(t, "llama3")
	const ctxLen = 16
	s := open(t, dir, Options{Threads: 2}, SessionOptions{Context: ctxLen, Batch: 8})
	plain := open(t, dir, Options{Threads: 2}, SessionOptions{Context: ctxLen})
	rng := rand.New(rand.NewPCG(1, 2))
	tokens := []int32{1}
	for len(tokens) < 3*ctxLen+5 {
		tokens = append(tokens, ref.InputIDs[rng.IntN(len(ref.InputIDs))])
	}
	ctx := context.Background()
	for _, tc := range []struct{ window, stride int }{{16, 8}, {16, 15}, {16, 1}, {7, 3}, {2, 1}} {
		var want []float64
		scored := make([]bool, len(tokens))
		scored[0] = true
		for next := 0; ; next += tc.stride {
			begin := next
			if begin+tc.window >= len(tokens) {
				begin = max(len(tokens)-tc.window, 0)
			}
			end := min(begin+tc.window, len(tokens))
			plain.Truncate(0)
			for p := begin; p < end-1; p++ {
				logits, err := plain.Forward(ctx, tokens[p:p+1])
				if err != nil {
					t.Fatal(err)
				}
				if !scored[p+1] {
					want = append(want, Logprob(logits, tokens[p+1]))
					scored[p+1] = true
				}
			}
			if end == len(tokens) {
				break
			}
		}
		if tc.stride == tc.window-1 { // lm-eval's get_rolling_token_windows(tokens[1:], tokens[0], window-1, 1), as written there
			var lmeval float64
			for _, w := range lmevalWindows(tokens[1:], tokens[0], tc.window-1) {
				plain.Truncate(0)
				for j := range w.inp {
					logits, err := plain.Forward(ctx, w.inp[j:j+1])
					if err != nil {
						t.Fatal(err)
					}
					if k := j - (len(w.inp) - len(w.pred)); k >= 0 {
						lmeval += Logprob(logits, w.pred[k])
					}
				}
			}
			var sum float64
			for _, w := range want {
				sum += w
			}
			if math.Abs(lmeval-sum) > 1e-4*math.Abs(sum) {
				t.Errorf("window %d stride %d: lm-eval's windows sum to %.6f, these to %.6f", tc.window, tc.stride, lmeval, sum)
			}
		}
		var progress []int
		got, err := s.RollingLogprob(ctx, tokens, RollingOptions{Window: tc.window, Stride: tc.stride,
			Progress: func(done, total int) { progress = append(progress, done) }})
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for i, w := range want {
			sum += w
			if math.Abs(got.Logprobs[i]-w) > 1e-4 {
				t.Errorf("window %d stride %d: token %d: %.6f, want %.6f", tc.window, tc.stride, i+1, got.Logprobs[i], w)
			}
		}
		if len(got.Logprobs) != len(tokens)-1 || math.Abs(got.Logprob-sum) > 1e-4*math.Abs(sum) {
			t.Errorf("window %d stride %d: %d tokens, Σ %.6f; want %d, %.6f", tc.window, tc.stride, len(got.Logprobs), got.Logprob, len(tokens)-1, sum)
		}
		if ppl := got.Perplexity(); math.Abs(ppl-math.Exp(-sum/float64(len(want)))) > 1e-3*ppl {
			t.Errorf("perplexity %g", ppl)
		}
		if len(progress) != got.Windows || progress[len(progress)-1] != len(tokens)-1 || !slices.IsSorted(progress) {
			t.Errorf("progress %v over %d windows", progress, got.Windows)
		}
	}
	for _, o := range []RollingOptions{{Window: 17}, {Window: 8, Stride: 8}, {Window: 1}, {Window: 8, Stride: -1}} {
		if _, err := s.RollingLogprob(ctx, tokens, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// lmevalWindow is one (input, prediction) pair of lm-evaluation-harness's
// rolling windows.
type lmevalWindow struct{ inp, pred []int32 }

// lmevalWindows is lm_eval.utils.get_rolling_token_windows with context_len 1.
func lmevalWindows(tokens []int32, prefix int32, maxSeqLen int) []lmevalWindow {
	predLen := maxSeqLen // max_seq_len - context_len + 1
	first := min(maxSeqLen, len(tokens))
	out := []lmevalWindow{{append([]int32{prefix}, tokens[:first-1]...), tokens[:first]}}
	predicted := first
	for predicted < len(tokens) {
		n := min(len(tokens)-predicted, predLen)
		end := predicted + n
		out = append(out, lmevalWindow{tokens[end-maxSeqLen-1 : end-1], tokens[end-n : end]})
		predicted += n
	}
	return out
}
