package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/tokenize"
)

// TestPrefixCache: on two sessions, a chat's next turn reuses the first
// turn's cache, and a request that shares a long prefix (a system prompt)
// with an earlier one takes that one's session and reuses its cache, even
// after an unrelated request ran in between (which took the other, least
// recently used, session): usage reports cached_tokens of at least the
// shared prefix, /metrics counts them, and the output is a cold run's.
func TestPrefixCache(t *testing.T) {
	system := "You write Python. " + strings.Repeat("Keep functions short, name them well and add type hints. ", 8)
	chat := func(user string) string {
		return fmt.Sprintf(`{"messages":[{"role":"system","content":%s},{"role":"user","content":%s}],"max_tokens":24,"temperature":0}`,
			quote(system), quote(user))
	}
	a, b, other := chat("def mean(xs):"), chat("def median(xs):"), `{"messages":[{"role":"user","content":"import os"}],"max_tokens":8,"temperature":0}`
	s, ts := testServer(t, Config{Parallel: 2, Session: sessionCtx(512)})
	l := s.ready.Load()
	ids := func(user string) []int32 {
		text, err := l.tmpl.Render([]tokenize.Message{{Role: "system", Content: system}, {Role: "user", Content: user}},
			tokenize.ChatOptions{AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		return l.tok.Encode(text, false)
	}
	shared := sharedPrefix(ids("def mean(xs):"), ids("def median(xs):"))
	if shared < 100 {
		t.Fatalf("the prompts share %d tokens; the test wants a long prefix", shared)
	}
	run := func(url, body string) chatCompletion {
		t.Helper()
		resp, out := post(t, t.Context(), url+"/v1/chat/completions", body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		return decode[chatCompletion](t, out)
	}
	first := run(ts.URL, a)
	if c := first.Usage.PromptTokensDetails.CachedTokens; c != 0 {
		t.Errorf("the first request: cached_tokens %d, want 0", c)
	}
	// The chat's next turn reuses the whole first turn (but where the
	// reply's first token merges with the text before it).
	turn2 := fmt.Sprintf(`{"messages":[{"role":"system","content":%s},{"role":"user","content":"def mean(xs):"},{"role":"assistant","content":%s},{"role":"user","content":"and the median?"}],"max_tokens":8,"temperature":0}`,
		quote(system), quote(first.Choices[0].Message.Content))
	u, n := run(ts.URL, turn2).Usage, len(ids("def mean(xs):"))
	if c := u.PromptTokensDetails.CachedTokens; c < n-1 {
		t.Errorf("the next turn: cached_tokens %d, want ≥ %d (the first turn's prompt)", c, n-1)
	}
	t.Logf("the next turn: %d of %d prompt tokens cached (the first turn's prompt: %d)", u.PromptTokensDetails.CachedTokens, u.PromptTokens, n)
	if c := run(ts.URL, other).Usage.PromptTokensDetails.CachedTokens; c != 0 {
		t.Errorf("an unrelated request: cached_tokens %d, want 0", c)
	}
	warm := run(ts.URL, b)
	if c := warm.Usage.PromptTokensDetails.CachedTokens; c < shared || c >= warm.Usage.PromptTokens {
		t.Errorf("the second request with the shared prefix: cached_tokens %d of %d, want ≥ %d (the shared prefix)", c, warm.Usage.PromptTokens, shared)
	}
	// The host-sampling path (logprobs) reuses the cache too.
	lp := run(ts.URL, strings.Replace(b, `"temperature":0`, `"temperature":0,"logprobs":true`, 1))
	if c := lp.Usage.PromptTokensDetails.CachedTokens; c < shared || lp.Choices[0].Message.Content != warm.Choices[0].Message.Content {
		t.Errorf("with logprobs: cached_tokens %d, want ≥ %d; %q, want %q", c, shared, lp.Choices[0].Message.Content, warm.Choices[0].Message.Content)
	}

	_, cold := testServer(t, Config{Parallel: 2, Session: sessionCtx(512), NoPrefixCache: true})
	want := run(cold.URL, b)
	if c := want.Usage.PromptTokensDetails.CachedTokens; c != 0 {
		t.Errorf("without the prefix cache: cached_tokens %d", c)
	}
	if got, w := warm.Choices[0].Message.Content, want.Choices[0].Message.Content; got != w || w == "" {
		t.Errorf("with the shared prefix cached: %q, cold: %q", got, w)
	}

	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, _ := io.ReadAll(resp.Body)
	var hit int
	for line := range strings.Lines(string(m)) {
		fmt.Sscanf(line, "ingot_prefix_cache_hit_tokens_total %d", &hit)
	}
	if hit < shared || !strings.Contains(string(m), "ingot_prefix_cache_tokens ") {
		t.Errorf("ingot_prefix_cache_hit_tokens_total %d, want ≥ %d:\n%s", hit, shared, m)
	}
}
