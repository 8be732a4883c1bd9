package ingot_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot"
)

// TestSpeculate: a session decoding speculatively (the q4 copy as draft, then
// prompt lookup) writes the greedy text of a plain session and counts its
// drafts; a draft of another vocabulary is refused.
func TestSpeculate(t *testing.T) {
	m := load(t, filepath.Join(refDir, "tinycode-llama"), ingot.Options{Threads: 2})
	dm := load(t, filepath.Join(refDir, "tinycode-llama-q4"), ingot.Options{Threads: 2})
	newSession := func(m *ingot.Model) *ingot.Session {
		s, err := m.NewSession(ingot.SessionOptions{Context: 128})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	plain, s, draft := newSession(m), newSession(m), newSession(dm)
	ctx := context.Background()
	sp := ingot.Sampling{MaxTokens: 48}
	prompt := "class Stack:\n    def __init__(self):\n"
	want := drain(t, plain.Generate(ctx, prompt, sp))
	for _, spec := range []*ingot.Speculation{{Draft: draft}, {Tokens: 6}} {
		if err := s.Speculate(spec); err != nil {
			t.Fatal(err)
		}
		got := drain(t, s.Generate(ctx, prompt, sp))
		r := s.Last()
		if got != want || r.Text != want || r.GenTokens != 48 {
			t.Errorf("%+v: speculative %q (%d tokens), plain %q", spec, got, r.GenTokens, want)
		}
		if r.Drafted == 0 || r.Accepted == 0 || r.AcceptanceRate() > 1 {
			t.Errorf("%+v: %d of %d drafted tokens accepted", spec, r.Accepted, r.Drafted)
		}
	}
	other := load(t, filepath.Join(refDir, "llama2"), ingot.Options{Threads: 1})
	if err := s.Speculate(&ingot.Speculation{Draft: newSession(other)}); err == nil || !strings.HasPrefix(err.Error(), "ingot: speculation: the draft model's vocabulary") {
		t.Errorf("a draft of 320 tokens for a model of 4096: %v", err)
	}
	if err := s.Speculate(nil); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, s.Generate(ctx, prompt, sp)); got != want || s.Last().Drafted != 0 {
		t.Errorf("after Speculate(nil): %q, %d drafted", got, s.Last().Drafted)
	}
}
