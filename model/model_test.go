package model

import (
	"context"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/internal/msl/msltest"
	"github.com/ingot-llm/ingot/kernels"
)

// TestDecodeAllocs proves a decode step allocates nothing on the heap.
func TestDecodeAllocs(t *testing.T) {
	for _, name := range []string{"llama3", "qwen3", "gemma2-swa", "phi3", "qwen2"} {
		t.Run(name, func(t *testing.T) {
			dir, ref := readRef(t, name)
			m := open(t, dir, Options{Threads: 2, Backend: cpuBackend(t)}, SessionOptions{Context: 256})
			if _, err := m.Forward(context.Background(), ref.InputIDs); err != nil {
				t.Fatal(err)
			}
			m.tokens = slices.Grow(m.tokens, 256) // the token list grows amortized; give it room
			allocs := testing.AllocsPerRun(50, func() {
				if _, err := m.step(ref.InputIDs[3]); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("decode step allocates %.1f times", allocs)
			}
		})
	}
}

// TestPrefixReuse checks that Generate reuses the cached prefix, that truncation
// to any earlier length gives the same logits as a fresh run, and that the cache
// reports its size.
func TestPrefixReuse(t *testing.T) {
	dir, ref := readRef(t, "mistral")
	m := open(t, dir, Options{Threads: 2}, SessionOptions{})
	c := m.m.Config
	if want := int64(2 * c.NumLayers * m.ContextSize() * c.NumKVHeads * c.HeadDim * 4); m.CacheBytes() != want {
		t.Errorf("CacheBytes %d, want %d", m.CacheBytes(), want)
	}
	r, err := m.Generate(context.Background(), ref.InputIDs, GenerateOptions{MaxTokens: 4, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.PromptEval != len(ref.InputIDs) {
		t.Errorf("first run evaluated %d prompt tokens, want %d", r.PromptEval, len(ref.InputIDs))
	}
	// A second prompt extending the first plus its output re-runs only the new tokens.
	next := append(slices.Clone(ref.InputIDs), tokenIDsOf(r.Tokens)...)
	r2, err := m.Generate(context.Background(), next, GenerateOptions{MaxTokens: 12, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r2.PromptEval != 1 { // the last generated token was never fed
		t.Errorf("second run evaluated %d prompt tokens, want 1", r2.PromptEval)
	}
	if got := append(tokenIDsOf(r.Tokens), tokenIDsOf(r2.Tokens)...); !slices.Equal(got, ref.GreedyNoStop) {
		t.Errorf("continued greedy chain\n got %v\nwant %v", got, ref.GreedyNoStop)
	}
	for _, n := range []int{0, 1, 7, len(ref.InputIDs) - 1} {
		m.Truncate(n)
		logits, err := m.Forward(context.Background(), ref.InputIDs[n:])
		if err != nil {
			t.Fatal(err)
		}
		if d := maxAbs(logits, ref.LogitsLast); d > logitTol {
			t.Errorf("truncate(%d) then forward: max-abs %g", n, d)
		}
	}
}

// TestGenerateLimits covers the context window, bad ids, cancellation and the
// emit callback stopping generation.
func TestGenerateLimits(t *testing.T) {
	dir, ref := readRef(t, "llama2")
	m := open(t, dir, Options{Threads: 1}, SessionOptions{Context: 30})
	long := make([]int32, 30)
	if _, err := m.Generate(context.Background(), long, GenerateOptions{}, nil); err == nil || !strings.Contains(err.Error(), "context window of 30") {
		t.Errorf("overlong prompt: %v", err)
	}
	if _, err := m.Generate(context.Background(), []int32{1, 9999}, GenerateOptions{}, nil); err == nil || !strings.Contains(err.Error(), "9999") {
		t.Errorf("bad token id: %v", err)
	}
	r, err := m.Generate(context.Background(), ref.InputIDs, GenerateOptions{IgnoreEOS: true}, nil)
	if err != nil || r.Stop != StopContext || len(ref.InputIDs)+len(r.Tokens) != 31 {
		t.Errorf("context end: stop %q after %d tokens, err %v", r.Stop, len(r.Tokens), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	r, err = m.Generate(ctx, ref.InputIDs[:5], GenerateOptions{IgnoreEOS: true}, func(Token) bool {
		n++
		if n == 3 {
			cancel()
		}
		return true
	})
	if !errors.Is(err, context.Canceled) || len(r.Tokens) != 3 || r.Stop != StopCancelled {
		t.Errorf("cancel after 3 tokens: %d tokens, err %v", len(r.Tokens), err)
	}
	r, err = m.Generate(context.Background(), ref.InputIDs[:5], GenerateOptions{IgnoreEOS: true}, func(Token) bool { return false })
	if err != nil || r.Stop != StopCaller || len(r.Tokens) != 1 {
		t.Errorf("emit false: stop %q after %d tokens, err %v", r.Stop, len(r.Tokens), err)
	}
}

// TestSynthetic: a synthetic model of a real shape loads and runs in the quantized
// storage types benchmarks use.
func TestSynthetic(t *testing.T) {
	for _, dt := range []kernels.DType{kernels.DTypeQ4, kernels.DTypeQ8} {
		sm, err := Synthetic(context.Background(), "qwen2.5-0.5b", dt, 1, Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		m, err := sm.NewSession(SessionOptions{Context: 16})
		if err != nil {
			t.Fatal(err)
		}
		logits, err := m.Forward(context.Background(), []int32{1, 2, 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(logits) != 151936 || math.IsNaN(float64(logits[0])) {
			t.Errorf("%s: %d logits, first %v", dt, len(logits), logits[0])
		}
		sm.Close()
	}
	if _, err := Synthetic(context.Background(), "gpt-5", kernels.DTypeQ4, 1, Options{}); err == nil || !strings.Contains(err.Error(), "llama-3.2-1b") {
		t.Errorf("unknown shape: %v", err)
	}
}

// open loads dir and opens a session on it, both closed when the test ends.
// With INGOT_TEST_BACKEND set ("cuda", "metal", "metal-emu") and no backend
// in o, the model runs there: the transformers reference checks then run on
// that device.
// cpuBackend is a CPU backend of 2 threads for a test that measures the CPU
// path itself (allocations), whatever INGOT_TEST_BACKEND says.
func cpuBackend(t testing.TB) kernels.Backend {
	b, err := kernels.Open("cpu", 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// metalBackend is the device a Metal-kernel test runs on: INGOT_TEST_BACKEND
// (a GPU), or the MSL interpreter (metal-emu) when it is unset or says so.
func metalBackend(t testing.TB) kernels.Backend {
	name := os.Getenv("INGOT_TEST_BACKEND")
	if name == "" || name == "metal-emu" {
		name = "metal-emu"
		msltest.Require(t)
	}
	b, err := kernels.Open(name, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func open(t testing.TB, dir string, o Options, so SessionOptions) *Session {
	t.Helper()
	if name := os.Getenv("INGOT_TEST_BACKEND"); name != "" && o.Backend == nil {
		b, err := kernels.Open(name, o.Threads)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() }) // after the model's Close (cleanups run last first)
		o.Backend = b
	}
	m, err := Load(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	s, err := m.NewSession(so)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
