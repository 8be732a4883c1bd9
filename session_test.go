package ingot_test

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/ingot-llm/ingot"
	"github.com/ingot-llm/ingot/internal/msl/msltest"
)

const refDir = "../shared/testdata/ref"

// load loads dir ("" for the demo), closed when the test ends.
func load(t testing.TB, dir string, o ingot.Options) *ingot.Model {
	t.Helper()
	m, err := ingot.Load(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// drain runs a generation to its end and returns the concatenated text.
func drain(t testing.TB, seq iter.Seq2[ingot.Token, error]) string {
	t.Helper()
	var b strings.Builder
	for tok, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(tok.Text)
	}
	return b.String()
}

// collect returns a generation's ids and its error, if any.
func collect(seq iter.Seq2[ingot.Token, error]) (ids []int32, err error) {
	for tok, err := range seq {
		if err != nil {
			return ids, err
		}
		ids = append(ids, tok.ID)
	}
	return ids, nil
}

// TestConcurrentSessions: sessions of one model generate at the same time from
// different goroutines, and each gives exactly the greedy ids it gives alone,
// on the CPU and on metal-emu (the Metal dispatch code on the interpreter).
// Run it with -race as well.
func TestConcurrentSessions(t *testing.T) {
	prompts := []string{"def fib(n):", "class Stack:\n    def push(self", "import os\nimport sys\n\ndef main("}
	backends := []string{"cpu", "metal-emu"}
	if b := os.Getenv("INGOT_TEST_BACKEND"); b != "" && !slices.Contains(backends, b) {
		backends = append(backends, b) // e.g. cuda, on a machine with a GPU
	}
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			n := 24
			if backend == "metal-emu" {
				msltest.Require(t)
				n = 8
			}
			m := load(t, "", ingot.Options{Backend: backend, Threads: 2})
			sp := ingot.Sampling{MaxTokens: n, IgnoreEOS: true}
			alone := make([][]int32, len(prompts))
			for i, p := range prompts {
				s, err := m.NewSession(ingot.SessionOptions{Context: 128, KV: "f32"})
				if err != nil {
					t.Fatal(err)
				}
				if alone[i], err = collect(s.Generate(context.Background(), p, sp)); err != nil {
					t.Fatal(err)
				}
				s.Close()
			}
			got := make([][]int32, len(prompts))
			errs := make([]error, len(prompts))
			var wg sync.WaitGroup
			for i, p := range prompts {
				s, err := m.NewSession(ingot.SessionOptions{Context: 128, KV: "f32"})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				wg.Go(func() {
					// Two generations each, so the sessions' steps interleave.
					if _, errs[i] = collect(s.Generate(context.Background(), "x = 1", sp)); errs[i] == nil {
						got[i], errs[i] = collect(s.Generate(context.Background(), p, sp))
					}
				})
			}
			wg.Wait()
			for i := range prompts {
				if errs[i] != nil {
					t.Fatalf("session %d: %v", i, errs[i])
				}
				if !slices.Equal(got[i], alone[i]) || len(got[i]) != n {
					t.Errorf("session %d beside the others:\n got %v\nwant %v (alone)", i, got[i], alone[i])
				}
			}
		})
	}
}

// TestSessionBusy: a second generation on a session while its first runs
// fails with a clear error and leaves the session usable.
func TestSessionBusy(t *testing.T) {
	m := load(t, "", ingot.Options{Threads: 1})
	s, err := m.NewSession(ingot.SessionOptions{Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var inner error
	for range s.Generate(context.Background(), "def f(", ingot.Sampling{MaxTokens: 4}) {
		// A second generation on the same session while the first runs fails
		// cleanly instead of corrupting the cache.
		_, inner = collect(s.Generate(context.Background(), "x", ingot.Sampling{MaxTokens: 1}))
		break
	}
	if inner == nil || !strings.Contains(inner.Error(), "busy") {
		t.Errorf("a nested Generate on the same session: %v, want a busy error", inner)
	}
	if _, err := collect(s.Generate(context.Background(), "def f(", ingot.Sampling{MaxTokens: 4})); err != nil {
		t.Errorf("the session after the nested call: %v", err)
	}
}

// TestSamplingErrors: every out-of-range sampling value is an error naming
// the field, yielded before any token; NaN is rejected.
func TestSamplingErrors(t *testing.T) {
	m := load(t, "", ingot.Options{Threads: 1})
	s, err := m.NewSession(ingot.SessionOptions{Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nan := float32(math.NaN())
	for _, tc := range []struct {
		sp   ingot.Sampling
		want string
	}{
		{ingot.Sampling{MinP: 2}, "min_p must be in [0, 1]"},
		{ingot.Sampling{MinP: -0.1}, "min_p"},
		{ingot.Sampling{MinP: nan}, "min_p"},
		{ingot.Sampling{Temperature: nan}, "temperature"},
		{ingot.Sampling{Temperature: -1}, "temperature"},
		{ingot.Sampling{Temperature: float32(math.Inf(1))}, "temperature"},
		{ingot.Sampling{TopP: 2}, "top_p"},
		{ingot.Sampling{TopP: nan}, "top_p"},
		{ingot.Sampling{TopK: -5}, "top_k"},
		{ingot.Sampling{RepeatPenalty: -1}, "repeat_penalty"},
		{ingot.Sampling{RepeatPenalty: nan}, "repeat_penalty"},
		{ingot.Sampling{RepeatLastN: -1}, "repeat_last_n"},
		{ingot.Sampling{MaxTokens: -3}, "max_tokens"},
		{ingot.Sampling{Stop: []string{"a", ""}}, "stop[1] is empty"},
	} {
		n := 0
		var got error
		for tok, err := range s.Generate(context.Background(), "def f(", tc.sp) {
			if err != nil {
				got = err
				break
			}
			n++
			_ = tok
		}
		if n != 0 || got == nil || !strings.Contains(got.Error(), tc.want) {
			t.Errorf("%+v: %d tokens, error %v; want no token and an error naming %q", tc.sp, n, got, tc.want)
		}
		if tc.sp.Validate() == nil {
			t.Errorf("%+v: Validate passed", tc.sp)
		}
	}
}

// TestClosed: calls after Close return ErrClosed, never panic; Close twice
// is fine, for models and sessions; closing the model closes its sessions.
func TestClosed(t *testing.T) {
	ctx := context.Background()
	m, err := ingot.Load(ctx, "", ingot.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	s1, err := m.NewSession(ingot.SessionOptions{Context: 32})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := m.NewSession(ingot.SessionOptions{Context: 32})
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Errorf("second session Close: %v", err)
	}
	if _, err := collect(s1.Generate(ctx, "x", ingot.Sampling{MaxTokens: 2})); !errors.Is(err, ingot.ErrClosed) {
		t.Errorf("Generate on a closed session: %v", err)
	}
	if _, err := s1.Raw().Forward(ctx, []int32{1}); !errors.Is(err, ingot.ErrClosed) {
		t.Errorf("Forward on a closed session: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second model Close: %v", err)
	}
	if _, err := collect(s2.Generate(ctx, "x", ingot.Sampling{MaxTokens: 2})); !errors.Is(err, ingot.ErrClosed) {
		t.Errorf("Generate on a session of a closed model: %v", err)
	}
	if _, err := collect(s2.Chat(ctx, []ingot.Message{{Role: "user", Content: "hi"}}, ingot.Sampling{})); err == nil {
		t.Error("Chat on a session of a closed model: no error")
	}
	if err := s2.Close(); err != nil {
		t.Errorf("closing a session of a closed model: %v", err)
	}
	if _, err := m.NewSession(ingot.SessionOptions{}); !errors.Is(err, ingot.ErrClosed) {
		t.Errorf("NewSession on a closed model: %v", err)
	}
	if _, err := m.Score(ctx, "def f(", "x):"); !errors.Is(err, ingot.ErrClosed) {
		t.Errorf("Score on a closed model: %v", err)
	}
}

// TestCloseWhileGenerating: closing the model from another goroutine while
// a session generates ends that generation with ErrClosed after the tokens so
// far; nothing panics or races.
func TestCloseWhileGenerating(t *testing.T) {
	m, err := ingot.Load(context.Background(), "", ingot.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewSession(ingot.SessionOptions{Context: 256})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var got error
	for _, err := range s.Generate(context.Background(), "def f(", ingot.Sampling{IgnoreEOS: true}) {
		if err != nil {
			got = err
			break
		}
		if n++; n == 3 {
			go m.Close()
		}
	}
	if !errors.Is(got, ingot.ErrClosed) || n < 3 || n > 200 {
		t.Errorf("after %d tokens: %v, want ErrClosed", n, got)
	}
}

// TestCancel: a cancelled context stops generation within one token; the
// iterator yields the context's error after the tokens so far, and the
// result says "cancelled".
func TestCancel(t *testing.T) {
	m := load(t, "", ingot.Options{Threads: 1})
	s, err := m.NewSession(ingot.SessionOptions{Context: 128})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	var got error
	for _, err := range s.Generate(ctx, "def f(", ingot.Sampling{IgnoreEOS: true}) {
		if err != nil {
			got = err
			break
		}
		if n++; n == 3 {
			cancel()
		}
	}
	if !errors.Is(got, context.Canceled) || n != 3 || s.Last().Stop != ingot.StopCancelled || s.Last().GenTokens != 3 {
		t.Errorf("cancel at token 3: %d tokens, error %v, result %+v", n, got, s.Last())
	}
}

// TestTokenText: tokens' texts are whole UTF-8 characters and concatenate to
// the result's text; a stop string ends generation, excluded from the text,
// even when it spans tokens; an EOS ends it with "eos".
func TestTokenText(t *testing.T) {
	m := load(t, filepath.Join(refDir, "tinycode-llama"), ingot.Options{Threads: 2})
	s, err := m.NewSession(ingot.SessionOptions{Context: 256})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	full := drain(t, s.Generate(ctx, "def __init__(self", ingot.Sampling{MaxTokens: 40, IgnoreEOS: true}))
	if full != s.Last().Text || s.Last().Stop != ingot.StopLength {
		t.Fatalf("streamed %q, result %q (stop %q)", full, s.Last().Text, s.Last().Stop)
	}
	// A stop string from the middle of that text, spanning token boundaries.
	i := strings.Index(full, "super")
	if i < 0 {
		t.Fatalf("the greedy text %q has no \"super\" to stop at", full)
	}
	stop := full[i-3 : i+7]
	var texts []string
	for tok, err := range s.Generate(ctx, "def __init__(self", ingot.Sampling{MaxTokens: 40, IgnoreEOS: true, Stop: []string{"zzz", stop}}) {
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(tok.Text) {
			t.Errorf("token %d text %q is not valid UTF-8", tok.ID, tok.Text)
		}
		texts = append(texts, tok.Text)
	}
	got := strings.Join(texts, "")
	if got != full[:i-3] || s.Last().Text != got || s.Last().Stop != ingot.StopString {
		t.Errorf("with stop %q: %q (stop %q), want %q", stop, got, s.Last().Stop, full[:i-3])
	}
}

// TestScore: Score equals the sum of the logprobs greedy generation reports
// for the same tokens, on a fresh state.
func TestScore(t *testing.T) {
	m := load(t, filepath.Join(refDir, "tinycode-llama"), ingot.Options{Threads: 2})
	s, err := m.NewSession(ingot.SessionOptions{Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	prompt := "def fib(n):"
	var ids []int32
	var want float64
	for tok, err := range s.Generate(ctx, prompt, ingot.Sampling{MaxTokens: 10, IgnoreEOS: true, Logprobs: true}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tok.ID)
		want += float64(tok.Logprob)
	}
	completion := m.Tokenizer().Decode(ids, false)
	if got := m.Tokenizer().Encode(completion, false); !slices.Equal(got, ids) {
		t.Fatalf("the completion %q does not re-encode to its ids (%v, %v)", completion, got, ids)
	}
	got, err := m.Score(ctx, prompt, completion)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-want) > 1e-4*math.Abs(want) || want >= 0 {
		t.Errorf("Score %v, generation's logprobs sum to %v", got, want)
	}
	if _, err := m.Score(ctx, prompt, ""); err == nil {
		t.Error("Score of an empty completion: no error")
	}
}

// TestLoadErrors: bad options and paths are errors naming what is wrong.
func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		o    ingot.Options
		want string
	}{
		{"", ingot.Options{Threads: -3}, "threads (-3)"},
		{"", ingot.Options{Threads: 100000}, "threads (100000)"},
		{"", ingot.Options{Backend: "tpu"}, `backend "tpu"`},
		{"", ingot.Options{Quant: "q5"}, `quant "q5"`},
		{"/nonexistent/model", ingot.Options{}, "no directory /nonexistent/model"},
		{"meta-llama/Llama-3.2-1B", ingot.Options{}, "huggingface-cli download meta-llama/Llama-3.2-1B"},
	} {
		if _, err := ingot.Load(context.Background(), tc.dir, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%q, %+v): %v, want %q", tc.dir, tc.o, err, tc.want)
		}
	}
	m := load(t, "", ingot.Options{Threads: 1})
	for _, o := range []ingot.SessionOptions{{Context: -5}, {KV: "q8"}} {
		if _, err := m.NewSession(o); err == nil {
			t.Errorf("NewSession(%+v): no error", o)
		}
	}
}

// TestBackendReason: "auto" chooses through kernels.Choose and says why.
func TestBackendReason(t *testing.T) {
	m := load(t, "", ingot.Options{})
	if m.Backend() == "" || !strings.HasPrefix(m.BackendReason(), strings.SplitN(m.Backend(), ":", 2)[0]+":") {
		t.Errorf("backend %q, reason %q", m.Backend(), m.BackendReason())
	}
}

// TestLoggerLocal: Load logs through Options.Logger only, never through the
// embedding program's global slog logger; with no Logger it is silent.
func TestLoggerLocal(t *testing.T) {
	var global, local bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&global, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(old)
	load(t, "", ingot.Options{Threads: 1})
	load(t, "", ingot.Options{Threads: 1, Logger: slog.New(slog.NewTextHandler(&local, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if global.Len() != 0 {
		t.Errorf("Load wrote to the global logger:\n%s", global.String())
	}
	if !strings.Contains(local.String(), "model loaded") {
		t.Errorf("Options.Logger got %q", local.String())
	}
}
