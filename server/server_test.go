package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot"
	"github.com/ingot-llm/ingot/model"
)

func modelSessionOptions(n int) model.SessionOptions { return model.SessionOptions{Context: n} }

// testServer serves the demo model on CPU sessions of 256 tokens.
func testServer(t testing.TB, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	cfg.LoadOptions = ingot.Options{Backend: "cpu", Threads: 1}
	if cfg.Session.Context == 0 {
		cfg.Session.Context = 256
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, ts
}

// post sends body as JSON and returns the status and the response body.
func post(t testing.TB, ctx context.Context, url, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func decode[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	return v
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name, data string
}

// readSSE parses a whole event stream, failing on anything but event:,
// data: and blank lines.
func readSSE(t testing.TB, b []byte) []sseEvent {
	t.Helper()
	var evs []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data == "" {
				t.Fatalf("event without data in %q", b)
			}
			evs = append(evs, cur)
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			if cur.data != "" {
				t.Fatalf("two data lines in one event: %q", b)
			}
			cur.data = line[len("data: "):]
		default:
			t.Fatalf("bad SSE line %q", line)
		}
	}
	if cur != (sseEvent{}) {
		t.Fatalf("stream ends inside an event: %q", b)
	}
	return evs
}

func TestChatCompletion(t *testing.T) {
	_, ts := testServer(t, Config{})
	resp, b := post(t, t.Context(), ts.URL+"/v1/chat/completions",
		`{"model":"any","messages":[{"role":"system","content":"python"},{"role":"user","content":[{"type":"text","text":"def fib(n):"}]}],
		  "max_tokens":12,"temperature":0,"logprobs":true,"top_logprobs":3,"n":2,"unknown_field":{"x":1}}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	c := decode[chatCompletion](t, b)
	if !strings.HasPrefix(c.ID, "chatcmpl-") || c.Object != "chat.completion" || c.Created == 0 || c.Model != "tinycode-llama" || len(c.Choices) != 2 {
		t.Fatalf("bad envelope: %s", b)
	}
	for i, ch := range c.Choices {
		if ch.Index != i || ch.Message.Role != "assistant" || ch.Message.Content == "" || (ch.FinishReason != "stop" && ch.FinishReason != "length") {
			t.Errorf("choice %d: %+v", i, ch)
		}
		if ch.Logprobs == nil || len(ch.Logprobs.Content) == 0 {
			t.Fatalf("choice %d: no logprobs: %s", i, b)
		}
		var text string
		for _, lp := range ch.Logprobs.Content {
			text += lp.Token
			if len(lp.TopLogprobs) != 3 || lp.TopLogprobs[0].Token != lp.Token || lp.TopLogprobs[0].Logprob != lp.Logprob ||
				lp.Logprob > 0 || string(intsToBytes(lp.Bytes)) != lp.Token {
				t.Errorf("greedy token %+v: want the first of its top_logprobs", lp)
			}
		}
		if !strings.HasPrefix(text, ch.Message.Content) {
			t.Errorf("tokens %q do not spell the content %q", text, ch.Message.Content)
		}
	}
	if c.Choices[0].Message.Content != c.Choices[1].Message.Content {
		t.Errorf("greedy choices differ: %q, %q", c.Choices[0].Message.Content, c.Choices[1].Message.Content)
	}
	if u := c.Usage; u.CompletionTokens == 0 || u.PromptTokens == 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens || u.CompletionTokens > 24 {
		t.Errorf("usage %+v", u)
	}
	// The raw shape: the keys clients read.
	var raw map[string]any
	json.Unmarshal(b, &raw)
	ch := raw["choices"].([]any)[0].(map[string]any)
	for _, k := range []string{"index", "message", "logprobs", "finish_reason"} {
		if _, ok := ch[k]; !ok {
			t.Errorf("choice has no %q: %s", k, b)
		}
	}
}

func intsToBytes(v []int) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}

func TestChatStream(t *testing.T) {
	_, ts := testServer(t, Config{})
	body := `{"messages":[{"role":"user","content":"def add(a, b):"}],"max_tokens":16,"temperature":0%s}`
	_, whole := post(t, t.Context(), ts.URL+"/v1/chat/completions", strings.Replace(body, "%s", "", 1))
	want := decode[chatCompletion](t, whole)
	resp, b := post(t, t.Context(), ts.URL+"/v1/chat/completions", strings.Replace(body, "%s", `,"stream":true,"stream_options":{"include_usage":true}`, 1))
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	evs := readSSE(t, b)
	if evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("last event %q, want [DONE]", evs[len(evs)-1].data)
	}
	var text string
	var finish string
	for i, ev := range evs[:len(evs)-1] {
		c := decode[chatChunk](t, []byte(ev.data))
		var raw map[string]json.RawMessage
		json.Unmarshal([]byte(ev.data), &raw)
		if c.Object != "chat.completion.chunk" || !strings.HasPrefix(c.ID, "chatcmpl-") {
			t.Fatalf("chunk %d: %s", i, ev.data)
		}
		if i == len(evs)-2 { // the usage chunk
			u := decode[struct{ Usage usage }](t, []byte(ev.data)).Usage
			u.PromptTokensDetails = want.Usage.PromptTokensDetails // this run reuses the cache of the one before
			if len(c.Choices) != 0 || u != *want.Usage {
				t.Errorf("usage chunk %s, want usage %+v", ev.data, *want.Usage)
			}
			continue
		}
		if string(raw["usage"]) != "null" || len(c.Choices) != 1 {
			t.Errorf("chunk %d: want one choice and usage null: %s", i, ev.data)
		}
		if i == 0 && (c.Choices[0].Delta.Role != "assistant" || c.Choices[0].Delta.Content == nil) {
			t.Errorf("first chunk %s: want the role", ev.data)
		}
		if d := c.Choices[0].Delta.Content; d != nil {
			text += *d
		}
		if f := c.Choices[0].FinishReason; f != nil {
			finish = *f
		}
	}
	if text != want.Choices[0].Message.Content || finish != want.Choices[0].FinishReason {
		t.Errorf("stream gave %q (%s), the whole response %q (%s)", text, finish, want.Choices[0].Message.Content, want.Choices[0].FinishReason)
	}
}

func TestCompletions(t *testing.T) {
	s, ts := testServer(t, Config{})
	tok := s.ready.Load().tok
	ids := tok.Encode("def add(a, b):", true)
	idsJSON, _ := json.Marshal(ids)
	bos := tok.Decode(ids[:1], false) // echoed ids show every token
	for _, tc := range []struct {
		name, prompt, echo string
		choices            int
	}{
		{"string", `"def add(a, b):"`, "def add(a, b):", 1},
		{"strings", `["def add(a, b):", "import os"]`, "def add(a, b):", 2},
		{"ids", string(idsJSON), bos + "def add(a, b):", 1},
		{"id lists", "[" + string(idsJSON) + "," + string(idsJSON) + "]", bos + "def add(a, b):", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, b := post(t, t.Context(), ts.URL+"/v1/completions", `{"prompt":`+tc.prompt+`,"max_tokens":4,"temperature":0,"echo":true,"logprobs":2}`)
			c := decode[completion](t, b)
			if c.Object != "text_completion" || !strings.HasPrefix(c.ID, "cmpl-") || len(c.Choices) != tc.choices {
				t.Fatalf("bad envelope: %s", b)
			}
			ch := c.Choices[0]
			lp := ch.Logprobs
			if !strings.HasPrefix(ch.Text, tc.echo) || lp == nil || len(lp.Tokens) < len(ids) || lp.TokenLogprobs[0] != nil || lp.TopLogprobs[0] != nil {
				t.Fatalf("echo: %s", b)
			}
			if len(lp.TokenLogprobs) != len(lp.Tokens) || len(lp.TopLogprobs) != len(lp.Tokens) || len(lp.TextOffset) != len(lp.Tokens) {
				t.Fatalf("logprobs lists of different lengths: %s", b)
			}
			for i := 1; i < len(lp.Tokens); i++ {
				if lp.TokenLogprobs[i] == nil || len(lp.TopLogprobs[i]) < 1 || len(lp.TopLogprobs[i]) > 3 || lp.TextOffset[i] < lp.TextOffset[i-1] {
					t.Fatalf("token %d: %s", i, b)
				}
				if off := lp.TextOffset[i]; !strings.HasPrefix(ch.Text[off:], lp.Tokens[i]) {
					t.Errorf("text_offset %d of %q: text there is %q", off, lp.Tokens[i], ch.Text[off:])
				}
			}
		})
	}
}

// TestEchoLogprobsExact: echo's prompt logprobs are log_softmax of the
// model's logits at each position, computed here in float64 from a
// session's Forward over each prefix.
func TestEchoLogprobsExact(t *testing.T) {
	s, ts := testServer(t, Config{})
	l := s.ready.Load()
	prompt := "import numpy as np\ndef mean(xs):\n    return sum(xs) / len(xs)\n"
	ids := l.tok.Encode(prompt, true)
	_, b := post(t, t.Context(), ts.URL+"/v1/completions", `{"prompt":`+quote(prompt)+`,"max_tokens":0,"echo":true,"logprobs":5}`)
	c := decode[completion](t, b)
	lp := c.Choices[0].Logprobs
	if c.Choices[0].Text != prompt || len(lp.Tokens) != len(ids) || c.Usage.(map[string]any)["completion_tokens"].(float64) != 0 {
		t.Fatalf("scoring %d tokens: %s", len(ids), b)
	}
	sess, err := l.model.Raw().NewSession(modelSessionOptions(len(ids)))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	worst := 0.0
	for i := 1; i < len(ids); i++ {
		sess.Truncate(0)
		logits, err := sess.Forward(t.Context(), ids[:i])
		if err != nil {
			t.Fatal(err)
		}
		ref := logSoftmax64(logits)
		got := *lp.TokenLogprobs[i]
		worst = max(worst, math.Abs(got-ref[ids[i]]))
		if math.Abs(got-ref[ids[i]]) > 1e-4 {
			t.Errorf("token %d (%q): logprob %.7f, reference %.7f", i, lp.Tokens[i], got, ref[ids[i]])
		}
		// The five alternatives are the reference's five best.
		order := make([]int, len(ref))
		for j := range order {
			order[j] = j
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmpDesc(ref[a], ref[b]) })
		for _, j := range order[:5] {
			name := l.tok.Decode([]int32{int32(j)}, false)
			if v, ok := lp.TopLogprobs[i][name]; !ok || math.Abs(v-ref[j]) > 1e-4 {
				t.Errorf("token %d: alternative %q: %v (present %v), reference %.7f", i, name, v, ok, ref[j])
			}
		}
	}
	t.Logf("%d prompt tokens, largest difference from the float64 reference %.2g", len(ids), worst)
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// logSoftmax64 is log_softmax in float64 throughout.
func logSoftmax64(logits []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	out := make([]float64, len(logits))
	for i, v := range logits {
		out[i] = float64(v) - mx - math.Log(sum)
	}
	return out
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestMessages(t *testing.T) {
	_, ts := testServer(t, Config{})
	body := `{"model":"claude-x","max_tokens":12,"temperature":0,"system":[{"type":"text","text":"python"}],
		"messages":[{"role":"user","content":"def add(a, b):"},{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"text","text":"again"}]}]%s}`
	resp, b := post(t, t.Context(), ts.URL+"/v1/messages", strings.Replace(body, "%s", "", 1))
	m := decode[anthropicResponse](t, b)
	if resp.StatusCode != 200 || !strings.HasPrefix(m.ID, "msg_") || m.Type != "message" || m.Role != "assistant" || len(m.Content) != 1 ||
		m.Content[0].Type != "text" || m.StopReason == nil || m.Usage.InputTokens == 0 || m.Usage.OutputTokens == 0 {
		t.Fatalf("%d: %s", resp.StatusCode, b)
	}
	_, b = post(t, t.Context(), ts.URL+"/v1/messages", strings.Replace(body, "%s", `,"stream":true`, 1))
	evs := readSSE(t, b)
	var names []string
	var text string
	for _, ev := range evs {
		var v struct {
			Type  string
			Delta struct{ Type, Text string }
		}
		if err := json.Unmarshal([]byte(ev.data), &v); err != nil || v.Type != ev.name {
			t.Fatalf("event %s: data %s", ev.name, ev.data)
		}
		if len(names) == 0 || names[len(names)-1] != ev.name {
			names = append(names, ev.name)
		}
		if ev.name == "content_block_delta" {
			if v.Delta.Type != "text_delta" {
				t.Errorf("delta %s", ev.data)
			}
			text += v.Delta.Text
		}
	}
	want := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !slices.Equal(names, want) {
		t.Errorf("events %v, want %v", names, want)
	}
	if text != m.Content[0].Text {
		t.Errorf("streamed %q, whole %q", text, m.Content[0].Text)
	}
}

func TestStopStrings(t *testing.T) {
	_, ts := testServer(t, Config{})
	// Greedy output first, then stop at a piece of it.
	_, b := post(t, t.Context(), ts.URL+"/v1/completions", `{"prompt":"def add(a, b):","max_tokens":24,"temperature":0}`)
	full := decode[completion](t, b).Choices[0].Text
	if len(full) < 6 {
		t.Fatalf("output too short to cut: %q", full)
	}
	stop := full[3:6]
	want := full[:strings.Index(full, stop)]
	_, b = post(t, t.Context(), ts.URL+"/v1/completions", `{"prompt":"def add(a, b):","max_tokens":24,"temperature":0,"stop":["zzzz",`+quote(stop)+`]}`)
	c := decode[completion](t, b).Choices[0]
	if c.Text != want || *c.FinishReason != "stop" {
		t.Errorf("stop %q: got %q (%s), want %q", stop, c.Text, *c.FinishReason, want)
	}
	_, b = post(t, t.Context(), ts.URL+"/v1/messages", `{"max_tokens":24,"temperature":0,"stop_sequences":[`+quote(stop)+`],"messages":[{"role":"user","content":"x"}]}`)
	m := decode[anthropicResponse](t, b)
	if *m.StopReason == "stop_sequence" && *m.StopSequence != stop {
		t.Errorf("stop_sequence %q, want %q: %s", *m.StopSequence, stop, b)
	}
}

func TestModelsHealthMetrics(t *testing.T) {
	s, ts := testServer(t, Config{ModelName: "demo"})
	get := func(path string) (int, string) {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, b := get("/v1/models"); code != 200 || !strings.Contains(b, `"id":"demo"`) || !strings.Contains(b, `"object":"list"`) {
		t.Errorf("/v1/models: %d %s", code, b)
	}
	if code, _ := get("/v1/models/demo"); code != 200 {
		t.Errorf("/v1/models/demo: %d", code)
	}
	if code, b := get("/v1/models/other"); code != 404 || !strings.Contains(b, "model_not_found") {
		t.Errorf("/v1/models/other: %d %s", code, b)
	}
	if code, b := get("/health"); code != 200 || !strings.Contains(b, "ok") {
		t.Errorf("/health: %d %s", code, b)
	}
	post(t, t.Context(), ts.URL+"/v1/completions", `{"prompt":"x","max_tokens":3}`)
	code, b := get("/metrics")
	for _, want := range []string{
		`ingot_requests_total{endpoint="/v1/completions",status="200"} 1`,
		"ingot_prompt_tokens_total 2", "ingot_generation_tokens_total 3", "ingot_queue_depth 0",
		"ingot_sessions_running 0", "ingot_sessions 4", "ingot_kv_cache_usage_ratio 0",
		`ingot_time_to_first_token_seconds_bucket{le="+Inf"} 1`, "ingot_time_to_first_token_seconds_count 1",
		"ingot_time_per_output_token_seconds_count 2", "# TYPE ingot_time_per_output_token_seconds histogram",
	} {
		if code != 200 || !strings.Contains(b, want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, b)
		}
	}
	// While loading: 503 everywhere but /metrics.
	loading, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/health", "/v1/models"} {
		rec := httptest.NewRecorder()
		loading.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 503 || rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s while loading: %d %s", path, rec.Code, rec.Body)
		}
	}
	_ = s
}

func sessionCtx(n int) ingot.SessionOptions { return ingot.SessionOptions{Context: n} }

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
