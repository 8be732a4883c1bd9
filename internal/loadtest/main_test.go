package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRun: against a fake server that streams 5 tokens 10 ms apart after 30
// ms, 2 clients × 6 requests: the report counts the requests, the usage's
// tokens, TTFT ≥ 30 ms and inter-token gaps ≥ 10 ms; each request is a
// streamed chat request with its fields; a 500 counts as failed.
func TestRun(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]any
	var n, inFlight, peak atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "wrong path or key", http.StatusNotFound)
			return
		}
		var b map[string]any
		json.NewDecoder(r.Body).Decode(&b)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		if n.Add(1) == 3 {
			http.Error(w, `{"error":{"message":"boom"}}`, http.StatusInternalServerError)
			return
		}
		cur := inFlight.Add(1)
		for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		send := func(s string) { fmt.Fprintf(w, "data: %s\n\n", s); fl.Flush() }
		send(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null}`)
		time.Sleep(30 * time.Millisecond)
		for i := range 5 {
			if i > 0 {
				time.Sleep(10 * time.Millisecond)
			}
			send(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":"t%d"}}],"usage":null}`, i))
		}
		send(`{"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":null}`)
		send(`{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":5,"total_tokens":45}}`)
		inFlight.Add(-1) // before the client can see the end and start its next request
		send("[DONE]")
	}))
	defer ts.Close()
	r, err := Run(t.Context(), Config{URL: ts.URL, APIKey: "k", Concurrency: 2, Requests: 6, PromptTokens: 32, MaxTokens: 5, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", *r)
	if r.Requests != 5 || r.Failed != 1 || !strings.Contains(r.FirstError, "500") {
		t.Errorf("%d requests, %d failed (%q), want 5 and 1 (HTTP 500)", r.Requests, r.Failed, r.FirstError)
	}
	if r.OutputTokens != 25 || r.MeanPromptTokens != 40 {
		t.Errorf("%d output tokens, %v prompt tokens a request, want 25 and 40", r.OutputTokens, r.MeanPromptTokens)
	}
	if r.TTFTp50 < 0.025 || r.TTFTp95 < r.TTFTp50 || r.ITLp50 < 0.008 || r.ITLp95 < r.ITLp50 || r.ITLp50 > 0.5 { // loose: timer jitter on a busy machine
		t.Errorf("TTFT %v/%v, ITL %v/%v: want TTFT ≥ 30 ms, gaps ≥ 10 ms", r.TTFTp50, r.TTFTp95, r.ITLp50, r.ITLp95)
	}
	if r.RequestsPerSec <= 0 || r.OutputTokPerSec <= 0 || r.DecodeTokPerSec <= 0 || r.DecodeTokPerSec > 150 {
		t.Errorf("rates %v req/s, %v tok/s, %v tok/s per stream", r.RequestsPerSec, r.OutputTokPerSec, r.DecodeTokPerSec)
	}
	if p := peak.Load(); p > 2 {
		t.Errorf("%d requests at once, want ≤ 2", p)
	}
	prompts := map[string]bool{}
	for _, b := range bodies {
		msgs, _ := b["messages"].([]any)
		if b["stream"] != true || b["max_tokens"] != 5.0 || b["ignore_eos"] != true || len(msgs) != 1 ||
			b["stream_options"].(map[string]any)["include_usage"] != true {
			t.Fatalf("request %v", b)
		}
		content := msgs[0].(map[string]any)["content"].(string)
		if len(strings.Fields(content)) != 32 {
			t.Errorf("a prompt of %d words, want 32", len(strings.Fields(content)))
		}
		prompts[content] = true
	}
	if len(prompts) != 6 {
		t.Errorf("%d distinct prompts of 6", len(prompts))
	}
	if _, err := Run(t.Context(), Config{URL: ts.URL, Concurrency: 0, Requests: 1, PromptTokens: 1, MaxTokens: 1}); err == nil {
		t.Error("-c 0: no error")
	}
}
