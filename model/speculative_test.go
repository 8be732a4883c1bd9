package model

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func readTinyRef(t *testing.T, name string) (string, *tinyRef) {
	t.Helper()
	dir := filepath.Join(refDir, name)
	b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref tinyRef
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	return dir, &ref
}

// TestSpeculativeGreedy: speculative greedy decoding of tinycode-llama (bf16),
// drafted by its MLX q4 copy and by prompt lookup, gives transformers' greedy
// ids for all 8 reference prompts, stops as Generate does, and leaves the
// cache as Generate leaves it.
func TestSpeculativeGreedy(t *testing.T) {
	dir, ref := readTinyRef(t, "tinycode-llama")
	s := open(t, dir, Options{Threads: 2}, SessionOptions{Context: 64})
	draft := open(t, filepath.Join(refDir, "tinycode-llama-q4"), Options{Threads: 2}, SessionOptions{Context: 64})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		sp   Speculation
	}{
		{"draft", Speculation{Draft: draft}},
		{"draft-k1", Speculation{Draft: draft, Tokens: 1}},
		{"draft-k7", Speculation{Draft: draft, Tokens: 7}},
		{"lookup", Speculation{}},
		{"lookup-n1-k3", Speculation{Ngram: 1, Tokens: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var drafted, accepted int
			for i, p := range ref.Prompts {
				var streamed []int32
				r, err := s.GenerateSpeculative(ctx, p.PromptIDs, GenerateOptions{MaxTokens: len(p.OutputIDs), Logprobs: i == 0}, tc.sp,
					func(tk Token) bool { streamed = append(streamed, tk.ID); return true })
				if err != nil {
					t.Fatal(err)
				}
				got := tokenIDsOf(r.Tokens)
				if !slices.Equal(got, p.OutputIDs) || !slices.Equal(streamed, got) {
					t.Errorf("prompt %d %q:\n got %v\nwant %v", i, p.Prompt, got, p.OutputIDs)
				}
				if r.Stop != StopLength || r.DecodeSteps != len(got)-1 || r.Accepted > r.Drafted {
					t.Errorf("prompt %d: stop %q, %d decode steps, %d of %d drafts accepted", i, r.Stop, r.DecodeSteps, r.Accepted, r.Drafted)
				}
				if want := append(slices.Clone(p.PromptIDs), got[:len(got)-1]...); !slices.Equal(s.Cached(), want) {
					t.Errorf("prompt %d: the cache holds %d tokens, want the prompt and the output but its last (%d)", i, len(s.Cached()), len(want))
				}
				if i == 0 { // logprobs as Generate reports them (batched rows: 1e-4)
					plain, err := s.Generate(ctx, p.PromptIDs, GenerateOptions{MaxTokens: len(p.OutputIDs), Logprobs: true}, nil)
					if err != nil {
						t.Fatal(err)
					}
					for j, tk := range r.Tokens {
						if d := math.Abs(float64(tk.Logprob - plain.Tokens[j].Logprob)); !(d <= 1e-4) || tk.Logprob >= 0 {
							t.Errorf("token %d: logprob %v, Generate's %v", j, tk.Logprob, plain.Tokens[j].Logprob)
						}
					}
				}
				drafted += r.Drafted
				accepted += r.Accepted
			}
			t.Logf("%d of %d drafted tokens accepted", accepted, drafted)
			if drafted == 0 || accepted == 0 {
				t.Errorf("%d of %d drafted tokens accepted: speculation did not run", accepted, drafted)
			}
		})
	}
}

// TestSpeculativeRewind: after rounds with rejections (drafted by an
// unrelated model of the same vocabulary), the cache holds the prompt and the
// output but its last token, and running that token gives the logits of a
// fresh session over the same tokens, for a KV cache and for Qwen3.5's
// recurrent state (run again after each cut); a full context stops as
// Generate stops, with the same cache.
func TestSpeculativeRewind(t *testing.T) {
	ctx := context.Background()
	draft := open(t, filepath.Join(refDir, "gemma"), Options{Threads: 2}, SessionOptions{Context: 40})
	for _, name := range []string{"llama2", "qwen3_5"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(refDir, name)
			s := open(t, dir, Options{Threads: 2}, SessionOptions{Context: 40})
			fresh := open(t, dir, Options{Threads: 2}, SessionOptions{Context: 40})
			prompt := []int32{1, 5, 9, 5, 9, 5, 7}
			o := GenerateOptions{MaxTokens: 24, IgnoreEOS: true}
			r, err := s.GenerateSpeculative(ctx, prompt, o, Speculation{Draft: draft, Tokens: 3}, nil)
			if err != nil {
				t.Fatal(err)
			}
			want, err := fresh.Generate(ctx, prompt, o, nil)
			if err != nil {
				t.Fatal(err)
			}
			out := tokenIDsOf(r.Tokens)
			if !slices.Equal(out, tokenIDsOf(want.Tokens)) {
				t.Errorf("speculative %v, plain %v", out, tokenIDsOf(want.Tokens))
			}
			if r.Drafted == r.Accepted {
				t.Errorf("all %d drafted tokens accepted: no rejection to rewind", r.Drafted)
			}
			all := append(slices.Clone(prompt), out...)
			if !slices.Equal(s.Cached(), all[:len(all)-1]) {
				t.Fatalf("cache %v, want %v", s.Cached(), all[:len(all)-1])
			}
			got, err := s.Forward(ctx, all[len(all)-1:])
			if err != nil {
				t.Fatal(err)
			}
			got = slices.Clone(got)
			fresh.Truncate(0)
			w, err := fresh.Forward(ctx, all)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxAbs(got, w); d > 1e-4 {
				t.Errorf("after speculation the next logits differ from a fresh run's by %g", d)
			}
			// The context (40) fills before EOS is looked for.
			for _, sp := range []Speculation{{Draft: draft, Tokens: 5}, {Tokens: 5}} {
				r, err = s.GenerateSpeculative(ctx, prompt, GenerateOptions{IgnoreEOS: true}, sp, nil)
				want, err2 := fresh.Generate(ctx, prompt, GenerateOptions{IgnoreEOS: true}, nil)
				if err != nil || err2 != nil {
					t.Fatal(err, err2)
				}
				if r.Stop != StopContext || !slices.Equal(tokenIDsOf(r.Tokens), tokenIDsOf(want.Tokens)) || !slices.Equal(s.Cached(), fresh.Cached()) {
					t.Errorf("full context: stop %q after %d tokens (cache %d); Generate: %q after %d (cache %d)",
						r.Stop, len(r.Tokens), len(s.Cached()), want.Stop, len(want.Tokens), len(fresh.Cached()))
				}
			}
		})
	}
}

// TestSpeculativeErrors: a draft of another vocabulary, the session as its own
// draft and bad counts are errors naming the field.
func TestSpeculativeErrors(t *testing.T) {
	s := open(t, filepath.Join(refDir, "llama3"), Options{Threads: 1}, SessionOptions{Context: 32})
	other := open(t, filepath.Join(refDir, "llama2"), Options{Threads: 1}, SessionOptions{Context: 32})
	ctx := context.Background()
	for _, tc := range []struct {
		sp   Speculation
		want string
	}{
		{Speculation{Draft: other}, "vocab_size 320"},
		{Speculation{Draft: s}, "the session itself"},
		{Speculation{Tokens: -1}, "tokens (-1)"},
		{Speculation{Ngram: -2}, "ngram (-2)"},
	} {
		_, err := s.GenerateSpeculative(ctx, []int32{1, 2, 3}, GenerateOptions{MaxTokens: 4}, tc.sp, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "model: ") {
			t.Errorf("%+v: error %v, want one naming %q", tc.sp, err, tc.want)
		}
	}
}

// smallVocab writes a copy of the model in src with only its first V tokens
// (rows of the embedding and the head), for distribution tests that can
// enumerate every continuation.
func smallVocab(t *testing.T, src string, V int) string {
	t.Helper()
	cfg := configMap(t, src, "config.json")
	cfg["vocab_size"] = V
	dir := writeCheckpoint(t, src, cfg, func(n string) string { return n }, nil)
	w, err := openWeights(src)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ts := map[string]*stTensor{}
	for name, st := range w.tensors {
		c := *st
		if name == "model.embed_tokens.weight" || name == "lm_head.weight" {
			c.Shape = []int{V, c.Shape[1]}
			c.Data = c.Data[:V*len(c.Data)/st.Shape[0]]
		}
		ts[name] = &c
	}
	writeSafetensors(t, filepath.Join(dir, "model.safetensors"), ts)
	return dir
}

// chi2Crit is the upper α quantile of χ² with df degrees of freedom
// (Wilson–Hilferty; z is the standard normal's upper α quantile).
func chi2Crit(df int, z float64) float64 {
	k := float64(df)
	a := 2 / (9 * k)
	return k * math.Pow(1-a+z*math.Sqrt(a), 3)
}

// z1e6 is the standard normal's upper 1e-6 quantile: each χ² test below fails
// a correct sampler with probability 1e-6 (its seeds are fixed, so it passes
// or fails every time).
const z1e6 = 4.7534

// TestSpeculativeDistribution: at temperature 1 the first three sampled
// tokens are distributed as plain sampling's, for a draft model (accepting,
// rejecting into the residual, and the bonus token) and for prompt lookup
// (one-hot q): a χ² goodness-of-fit test of N draws against the exact joint
// distribution of (t1, t2, t3), enumerated from the model's logits on a
// copy of llama2 cut to 8 tokens (512 outcomes; outcomes expected fewer than 5
// times pooled). With the sampling transforms (penalty, top-k, top-p, min-p,
// temperature 0.7) a two-sample χ² test against N draws of Generate.
func TestSpeculativeDistribution(t *testing.T) {
	const V, N = 8, 12000
	target := smallVocab(t, filepath.Join(refDir, "llama2"), V)
	draftDir := smallVocab(t, filepath.Join(refDir, "gemma"), V)
	s := open(t, target, Options{Threads: 1}, SessionOptions{Context: 16})
	plain := open(t, target, Options{Threads: 1}, SessionOptions{Context: 16})
	draft := open(t, draftDir, Options{Threads: 1}, SessionOptions{Context: 16})
	ctx := context.Background()
	prompt := []int32{1, 5, 6, 5, 6, 5}

	// The exact joint distribution of the first three tokens at temperature 1.
	exact := make([]float64, V*V*V)
	probs := func(prefix ...int32) []float64 {
		plain.Truncate(0)
		l, err := plain.Forward(ctx, append(slices.Clone(prompt), prefix...))
		if err != nil {
			t.Fatal(err)
		}
		p := make([]float64, V)
		for i := range p {
			p[i] = math.Exp(Logprob(l, int32(i)))
		}
		return p
	}
	p1 := probs()
	for a := range int32(V) {
		p2 := probs(a)
		for b := range int32(V) {
			p3 := probs(a, b)
			for c := range V {
				exact[int(a)*V*V+int(b)*V+c] = p1[a] * p2[b] * p3[c]
			}
		}
	}
	draw := func(o GenerateOptions, sp *Speculation) []float64 {
		counts := make([]float64, V*V*V)
		var drafted, accepted int
		for i := range N {
			o.Seed = uint64(i + 1)
			var r *Result
			var err error
			if sp != nil {
				r, err = s.GenerateSpeculative(ctx, prompt, o, *sp, nil)
				drafted += r.Drafted
				accepted += r.Accepted
			} else {
				r, err = plain.Generate(ctx, prompt, o, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			id := tokenIDsOf(r.Tokens)
			counts[int(id[0])*V*V+int(id[1])*V+int(id[2])]++
		}
		if sp != nil {
			t.Logf("%d of %d drafted tokens accepted", accepted, drafted)
			if accepted == 0 || accepted == drafted {
				t.Errorf("%d of %d drafted tokens accepted: the test needs acceptances and rejections", accepted, drafted)
			}
		}
		return counts
	}
	t.Run("temperature-1", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			max  int
			sp   Speculation
		}{
			{"draft-k2", 4, Speculation{Draft: draft, Tokens: 2}}, // t2, t3 drafted
			{"draft-k1", 3, Speculation{Draft: draft, Tokens: 1}}, // t3 the bonus token when d2 is accepted
			{"lookup-k2", 4, Speculation{Tokens: 2, Ngram: 2}},
			{"lookup-n1", 4, Speculation{Tokens: 2, Ngram: 1}}, // more drafts, more accepted
		} {
			t.Run(tc.name, func(t *testing.T) {
				counts := draw(GenerateOptions{Temperature: 1, MaxTokens: tc.max, IgnoreEOS: true}, &tc.sp)
				var chi2, poolE, poolO float64
				df := -1
				for i, p := range exact {
					if e := p * N; e < 5 {
						poolE += e
						poolO += counts[i]
					} else {
						chi2 += (counts[i] - e) * (counts[i] - e) / e
						df++
					}
				}
				if poolE > 0 {
					chi2 += (poolO - poolE) * (poolO - poolE) / poolE
					df++
				}
				if crit := chi2Crit(df, z1e6); chi2 > crit {
					t.Errorf("χ² = %.1f over %d degrees of freedom > %.1f (α = 1e-6): the distribution changed", chi2, df, crit)
				} else {
					t.Logf("χ² = %.1f, %d degrees of freedom, limit %.1f", chi2, df, crit)
				}
			})
		}
	})
	t.Run("transforms", func(t *testing.T) {
		o := GenerateOptions{Temperature: 0.7, TopK: 6, TopP: 0.95, MinP: 0.02, RepeatPenalty: 1.3, MaxTokens: 4, IgnoreEOS: true}
		a := draw(o, &Speculation{Draft: draft, Tokens: 2})
		b := draw(o, nil)
		var chi2, poolA, poolB float64
		df := -1
		for i := range a {
			if a[i]+b[i] < 10 {
				poolA += a[i]
				poolB += b[i]
			} else {
				chi2 += (a[i] - b[i]) * (a[i] - b[i]) / (a[i] + b[i])
				df++
			}
		}
		if poolA+poolB > 0 {
			chi2 += (poolA - poolB) * (poolA - poolB) / (poolA + poolB)
			df++
		}
		if crit := chi2Crit(df, z1e6); chi2 > crit {
			t.Errorf("two-sample χ² = %.1f over %d degrees of freedom > %.1f (α = 1e-6): the distribution differs from Generate's", chi2, df, crit)
		} else {
			t.Logf("two-sample χ² = %.1f, %d degrees of freedom, limit %.1f", chi2, df, crit)
		}
	})
}
