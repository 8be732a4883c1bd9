package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBadRequests(t *testing.T) {
	_, ts := testServer(t, Config{Session: sessionCtx(64), MaxBodyBytes: 4096})
	msg := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, path, body string
		status           int
		param            string // "" checks no param
	}{
		{"not json", "/v1/chat/completions", `{"messages":`, 400, ""},
		{"messages missing", "/v1/chat/completions", `{}`, 400, "messages"},
		{"messages empty", "/v1/chat/completions", `{"messages":[]}`, 400, "messages"},
		{"messages not list", "/v1/chat/completions", `{"messages":"hi"}`, 400, "messages"},
		{"bad role", "/v1/chat/completions", `{"messages":[{"role":"robot","content":"x"}]}`, 400, "messages[0].role"},
		{"image part", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "messages[0].content[0].type"},
		{"content number", "/v1/chat/completions", `{"messages":[{"role":"user","content":3}]}`, 400, "messages[0].content"},
		{"temperature negative", "/v1/chat/completions", `{` + msg + `,"temperature":-1}`, 400, "temperature"},
		{"temperature string", "/v1/chat/completions", `{` + msg + `,"temperature":"hot"}`, 400, "temperature"},
		{"top_p", "/v1/chat/completions", `{` + msg + `,"top_p":1.5}`, 400, "top_p"},
		{"top_k", "/v1/chat/completions", `{` + msg + `,"top_k":-2}`, 400, "top_k"},
		{"min_p", "/v1/chat/completions", `{` + msg + `,"min_p":2}`, 400, "min_p"},
		{"repetition_penalty", "/v1/chat/completions", `{` + msg + `,"repetition_penalty":0}`, 400, "repetition_penalty"},
		{"frequency_penalty", "/v1/chat/completions", `{` + msg + `,"frequency_penalty":0.5}`, 400, "frequency_penalty"},
		{"presence_penalty", "/v1/chat/completions", `{` + msg + `,"presence_penalty":-0.5}`, 400, "presence_penalty"},
		{"n zero", "/v1/chat/completions", `{` + msg + `,"n":0}`, 400, "n"},
		{"n huge", "/v1/chat/completions", `{` + msg + `,"n":1000}`, 400, "n"},
		{"seed float", "/v1/chat/completions", `{` + msg + `,"seed":1.5}`, 400, "seed"},
		{"stop empty", "/v1/chat/completions", `{` + msg + `,"stop":""}`, 400, "stop"},
		{"stop list empty string", "/v1/chat/completions", `{` + msg + `,"stop":["a",""]}`, 400, "stop[1]"},
		{"stop number", "/v1/chat/completions", `{` + msg + `,"stop":5}`, 400, "stop"},
		{"logit_bias", "/v1/chat/completions", `{` + msg + `,"logit_bias":{"5":10}}`, 400, "logit_bias"},
		{"top_logprobs without logprobs", "/v1/chat/completions", `{` + msg + `,"top_logprobs":2}`, 400, "top_logprobs"},
		{"top_logprobs too many", "/v1/chat/completions", `{` + msg + `,"logprobs":true,"top_logprobs":21}`, 400, "top_logprobs"},
		{"tools type", "/v1/chat/completions", `{` + msg + `,"tools":[{"type":"retrieval"}]}`, 400, "tools[0].type"},
		{"tools not list", "/v1/chat/completions", `{` + msg + `,"tools":{"a":1}}`, 400, "tools"},
		{"tool name missing", "/v1/chat/completions", `{` + msg + `,"tools":[{"type":"function","function":{}}]}`, 400, "tools[0].function.name"},
		{"tool twice", "/v1/chat/completions", `{` + msg + `,"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]}`, 400, "tools[1].function.name"},
		{"tool_choice unknown", "/v1/chat/completions", `{` + msg + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"always"}`, 400, "tool_choice"},
		{"tool_choice names no tool", "/v1/chat/completions", `{` + msg + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}`, 400, "tool_choice.function.name"},
		{"tool_choice without tools", "/v1/chat/completions", `{` + msg + `,"tool_choice":"required"}`, 400, "tool_choice"},
		{"forced call and response_format", "/v1/chat/completions", `{` + msg + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","response_format":{"type":"json_object"}}`, 400, "response_format"},
		{"history tool_calls", "/v1/chat/completions", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]}]}`, 400, "messages[0].tool_calls[0].function.name"},
		{"json_schema missing", "/v1/chat/completions", `{` + msg + `,"response_format":{"type":"json_schema"}}`, 400, "response_format.json_schema"},
		{"response_format type", "/v1/chat/completions", `{` + msg + `,"response_format":{"type":"xml"}}`, 400, "response_format.type"},
		{"json_schema no schema", "/v1/chat/completions", `{` + msg + `,"response_format":{"type":"json_schema","json_schema":{"name":"x"}}}`, 400, "response_format.json_schema.schema"},
		{"json_schema pattern", "/v1/chat/completions", `{` + msg + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"type":"string","pattern":"^a"}}}}}}`, 400, "response_format.json_schema.schema.properties.a.pattern"},
		{"json_schema oneOf", "/v1/chat/completions", `{` + msg + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"array","items":{"oneOf":[{"type":"string"}]}}}}}`, 400, "response_format.json_schema.schema.items.oneOf"},
		{"json_schema recursive", "/v1/chat/completions", `{` + msg + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}}}}`, 400, "response_format.json_schema.schema.$ref.properties.next.$ref"},
		{"json_schema bad type", "/v1/chat/completions", `{` + msg + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":["string","date"]}}}}`, 400, "response_format.json_schema.schema.type.1"},
		{"max_tokens zero", "/v1/chat/completions", `{` + msg + `,"max_tokens":0}`, 400, "max_tokens"},
		{"max_tokens over context", "/v1/chat/completions", `{` + msg + `,"max_tokens":60}`, 400, "max_tokens"},
		{"max_completion_tokens over context", "/v1/chat/completions", `{` + msg + `,"max_completion_tokens":1000}`, 400, "max_completion_tokens"},
		{"prompt over context", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + strings.Repeat("x = 1; ", 80) + `"}]}`, 400, "messages"},
		{"body too large", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413, ""},
		{"prompt missing", "/v1/completions", `{}`, 400, "prompt"},
		{"prompt empty list", "/v1/completions", `{"prompt":[]}`, 400, "prompt"},
		{"prompt object", "/v1/completions", `{"prompt":{"a":1}}`, 400, "prompt"},
		{"prompt id out of vocab", "/v1/completions", `{"prompt":[1,2,99999]}`, 400, "prompt[2]"},
		{"prompt id negative", "/v1/completions", `{"prompt":[[1],[2,-1]]}`, 400, "prompt[1][1]"},
		{"prompt over context", "/v1/completions", `{"prompt":"` + strings.Repeat("x = 1; ", 80) + `"}`, 400, "prompt"},
		{"second prompt over context", "/v1/completions", `{"prompt":["x","` + strings.Repeat("x = 1; ", 80) + `"]}`, 400, "prompt[1]"},
		{"logprobs range", "/v1/completions", `{"prompt":"x","logprobs":50}`, 400, "logprobs"},
		{"logprobs bool", "/v1/completions", `{"prompt":"x","logprobs":true}`, 400, "logprobs"},
		{"max_tokens negative", "/v1/completions", `{"prompt":"x","max_tokens":-1}`, 400, "max_tokens"},
		{"suffix", "/v1/completions", `{"prompt":"x","suffix":"y"}`, 400, "suffix"},
		{"best_of", "/v1/completions", `{"prompt":"x","best_of":3}`, 400, "best_of"},
		{"anthropic max_tokens missing", "/v1/messages", `{` + msg + `}`, 400, ""},
		{"anthropic bad role", "/v1/messages", `{"max_tokens":5,"messages":[{"role":"system","content":"x"}]}`, 400, ""},
		{"anthropic image", "/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image"}]}]}`, 400, ""},
		{"anthropic server tool", "/v1/messages", `{"max_tokens":5,` + msg + `,"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, 400, ""},
		{"anthropic tool without name", "/v1/messages", `{"max_tokens":5,` + msg + `,"tools":[{"input_schema":{}}]}`, 400, ""},
		{"anthropic tool_choice unknown tool", "/v1/messages", `{"max_tokens":5,` + msg + `,"tools":[{"name":"f"}],"tool_choice":{"type":"tool","name":"g"}}`, 400, ""},
		{"anthropic tool_result from assistant", "/v1/messages", `{"max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"x"}]}]}`, 400, ""},
		{"anthropic stop_sequences", "/v1/messages", `{"max_tokens":5,` + msg + `,"stop_sequences":[""]}`, 400, ""},
		{"no such endpoint", "/v1/images/generations", `{}`, 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := post(t, t.Context(), ts.URL+tc.path, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if tc.path == "/v1/messages" {
				e := decode[anthropicError](t, b)
				if e.Type != "error" || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
					t.Errorf("anthropic error %s", b)
				}
				return
			}
			e := decode[openAIError](t, b)
			if e.Error.Message == "" || e.Error.Type == "" {
				t.Errorf("error %s", b)
			}
			if tc.param != "" && (e.Error.Param == nil || *e.Error.Param != tc.param) {
				t.Errorf("param: %s, want %q", b, tc.param)
			}
			if tc.param != "" && !strings.HasPrefix(e.Error.Message, tc.param) {
				t.Errorf("message %q does not name %s", e.Error.Message, tc.param)
			}
		})
	}
	// A bad request does not disturb the next good one.
	if resp, b := post(t, t.Context(), ts.URL+"/v1/chat/completions", `{`+msg+`,"max_tokens":3}`); resp.StatusCode != 200 {
		t.Errorf("good request after bad ones: %d %s", resp.StatusCode, b)
	}
}

func TestAuth(t *testing.T) {
	_, ts := testServer(t, Config{APIKey: "sekret"})
	body := `{"prompt":"x","max_tokens":1}`
	for _, tc := range []struct {
		name   string
		header []string
		status int
	}{
		{"none", nil, 401},
		{"wrong bearer", []string{"Authorization", "Bearer nope"}, 401},
		{"not bearer", []string{"Authorization", "sekret"}, 401},
		{"bearer", []string{"Authorization", "Bearer sekret"}, 200},
		{"x-api-key", []string{"x-api-key", "sekret"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := post(t, t.Context(), ts.URL+"/v1/completions", body, tc.header...)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if tc.status == 401 && decode[openAIError](t, b).Error.Type != "authentication_error" {
				t.Errorf("body %s", b)
			}
		})
	}
	resp, b := post(t, t.Context(), ts.URL+"/v1/messages", `{}`)
	if resp.StatusCode != 401 || decode[anthropicError](t, b).Error.Type != "authentication_error" {
		t.Errorf("/v1/messages without a key: %d %s", resp.StatusCode, b)
	}
	r, err := http.Get(ts.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Errorf("/health needs no key, got %d", r.StatusCode)
	}
}

// TestQueueFull: with the only session held and the queue full, a request
// gets 429 with Retry-After; the queued one runs once the session is free.
func TestQueueFull(t *testing.T) {
	s, ts := testServer(t, Config{Parallel: 1, MaxQueue: 1})
	p := s.ready.Load().sched.(*pool)
	queued := make(chan struct{}, 1)
	p.onQueued = func() { queued <- struct{}{} }
	held, err := p.acquire(t.Context(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"prompt":"x","max_tokens":2}`
	done := make(chan int)
	go func() {
		resp, _ := post(t, t.Context(), ts.URL+"/v1/completions", body)
		done <- resp.StatusCode
	}()
	<-queued
	resp, b := post(t, t.Context(), ts.URL+"/v1/completions", body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || decode[openAIError](t, b).Error.Type != "rate_limit_error" {
		t.Errorf("over the queue: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	resp, b = post(t, t.Context(), ts.URL+"/v1/messages", `{"max_tokens":2,"messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 429 || decode[anthropicError](t, b).Error.Type != "rate_limit_error" {
		t.Errorf("anthropic over the queue: %d %s", resp.StatusCode, b)
	}
	if st := p.stats(); st.queued != 1 || st.running != 1 {
		t.Errorf("stats %+v, want 1 queued and 1 running", st)
	}
	held.release()
	if code := <-done; code != 200 {
		t.Errorf("the queued request: %d", code)
	}
}

// TestDisconnectFreesSession: a client that leaves mid-stream cancels its
// generation, and the only session serves the next request.
func TestDisconnectFreesSession(t *testing.T) {
	s, ts := testServer(t, Config{Parallel: 1})
	started := make(chan struct{})
	var first atomic.Bool
	var sawCancel atomic.Bool
	s.onToken = func(ctx context.Context) {
		if first.CompareAndSwap(false, true) {
			close(started)
			<-ctx.Done() // hold the first token until the client is gone
			sawCancel.Store(true)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions",
			strings.NewReader(`{"messages":[{"role":"user","content":"x"}],"stream":true,"max_tokens":200,"ignore_eos":true}`))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client: %v, want cancelled", err)
	}
	deadline, stop := context.WithTimeout(t.Context(), 20*time.Second)
	defer stop()
	resp, b := post(t, deadline, ts.URL+"/v1/completions", `{"prompt":"x","max_tokens":2}`)
	if resp.StatusCode != 200 || !sawCancel.Load() {
		t.Errorf("next request: %d %s (generation cancelled: %v)", resp.StatusCode, b, sawCancel.Load())
	}
}

// TestShutdownDrains: Run, once its context ends, lets a request in flight
// finish and then returns nil; with the grace period over it cancels it.
func TestShutdownDrains(t *testing.T) {
	for _, tc := range []struct {
		name    string
		grace   time.Duration
		release bool // let the held request go on after shutdown began
	}{
		{"finish", time.Minute, true},
		{"grace over", time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{ShutdownGrace: tc.grace, Session: sessionCtx(128)})
			if err != nil {
				t.Fatal(err)
			}
			held, release, shutdown := make(chan struct{}), make(chan struct{}), make(chan struct{})
			var once sync.Once
			s.onToken = func(ctx context.Context) {
				once.Do(func() {
					close(held)
					select {
					case <-release:
					case <-ctx.Done():
					}
				})
			}
			s.onShutdown = func() { close(shutdown) }
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			url := "http://" + ln.Addr().String()
			ctx, cancel := context.WithCancel(t.Context())
			ran := make(chan error, 1)
			go func() { ran <- s.Run(ctx, ln) }()
			// Wait for the model: the first request that is not 503.
			type result struct {
				status int
				body   string
			}
			got := make(chan result, 1)
			go func() {
				for {
					resp, err := http.Post(url+"/v1/completions", "application/json",
						strings.NewReader(`{"prompt":"x","max_tokens":20,"ignore_eos":true,"stream":true}`))
					if err != nil {
						got <- result{0, err.Error()}
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 503 {
						got <- result{resp.StatusCode, string(b)}
						return
					}
				}
			}()
			<-held
			cancel()
			<-shutdown
			if tc.release {
				close(release)
			}
			r := <-got
			if err := <-ran; err != nil {
				t.Errorf("Run: %v", err)
			}
			done := strings.Contains(r.body, "data: [DONE]")
			if r.status != 200 || done != tc.release {
				t.Errorf("in-flight request: %d, finished %v (want %v): %s", r.status, done, tc.release, r.body)
			}
			if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
				c.Close()
				t.Error("still accepting connections after Run returned")
			}
		})
	}
}

// TestNoGoroutineLeak runs many requests, some cancelled mid-stream, and
// checks that the goroutines go back to what they were.
func TestNoGoroutineLeak(t *testing.T) {
	s, ts := testServer(t, Config{Parallel: 4, MaxQueue: 512, Session: sessionCtx(128)})
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	client := &http.Client{Transport: tr}
	// Cancel every third streaming request after its first token.
	cancels := sync.Map{}
	s.onToken = func(ctx context.Context) {
		if f, ok := cancels.Load(reqOf(ctx).id); ok {
			f.(context.CancelFunc)()
		}
	}
	base := runtime.NumGoroutine()
	const total = 300
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var ok200, cancelled atomic.Int64
	for i := range total {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var body string
			switch i % 3 {
			case 0:
				body = `{"prompt":"def f(x):","max_tokens":4}`
			case 1:
				body = `{"messages":[{"role":"user","content":"x"}],"max_tokens":4,"stream":true}`
			case 2:
				body = `{"messages":[{"role":"user","content":"x"}],"max_tokens":60,"ignore_eos":true,"stream":true}`
			}
			path := "/v1/chat/completions"
			if i%3 == 0 {
				path = "/v1/completions"
			}
			req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+path, strings.NewReader(body))
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			if i%3 == 2 {
				cancels.Store(resp.Header.Get("X-Request-Id"), cancel)
				// the first token may have passed before the id was stored: cancel here too
				buf := make([]byte, 64)
				resp.Body.Read(buf)
				cancel()
				io.Copy(io.Discard, resp.Body)
				cancelled.Add(1)
				return
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != 200 {
				t.Errorf("request %d: %d %v", i, resp.StatusCode, err)
			}
			ok200.Add(1)
		}()
	}
	wg.Wait()
	tr.CloseIdleConnections()
	ts.Close() // waits for every handler
	if st := s.ready.Load().sched.stats(); st.running != 0 || st.queued != 0 || st.kvUsed != 0 {
		t.Errorf("after the requests: %+v", st)
	}
	// Connection goroutines end asynchronously after their sockets close.
	var now int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if now = runtime.NumGoroutine(); now <= base {
			break
		}
	}
	if now > base {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after %d requests:\n%s", base, now, total, buf[:runtime.Stack(buf, true)])
	}
	t.Logf("%d requests (%d completed, %d cancelled mid-stream); goroutines %d before, %d after", total, ok200.Load(), cancelled.Load(), base, now)
}

// TestDeterminism: a seed fixes the output, and asking for logprobs (which
// samples on the host from every step's logits) does not change it.
func TestDeterminism(t *testing.T) {
	_, ts := testServer(t, Config{})
	run := func(extra string) string {
		_, b := post(t, t.Context(), ts.URL+"/v1/chat/completions",
			`{"messages":[{"role":"user","content":"def f(x):"}],"max_tokens":24,"temperature":0.9,"top_k":40,"top_p":0.95,"min_p":0.02`+extra+`}`)
		c := decode[chatCompletion](t, b)
		var out []string
		for _, ch := range c.Choices {
			out = append(out, ch.Message.Content)
		}
		return strings.Join(out, "|")
	}
	a, b := run(`,"seed":7,"n":3`), run(`,"seed":7,"n":3`)
	if a != b {
		t.Errorf("seed 7 twice: %q, %q", a, b)
	}
	if c := run(`,"seed":7,"n":3,"logprobs":true,"top_logprobs":2`); c != a {
		t.Errorf("with logprobs: %q, without %q", c, a)
	}
	if c := run(`,"seed":7,"n":3,"repetition_penalty":1.0`); c != a {
		t.Errorf("repetition_penalty 1 (off): %q, without %q", c, a)
	}
	if parts := strings.Split(a, "|"); parts[0] == parts[1] && parts[1] == parts[2] {
		t.Errorf("the n=3 choices are identical: %q", a)
	}
	if c := run(`,"seed":8,"n":3`); c == a {
		t.Errorf("seeds 7 and 8 gave the same %q", a)
	}
}

// TestConcurrentSameAsAlone: requests run together give exactly what each
// gives alone (each runs on its own session, from an empty cache: with the
// prefix cache, a reused prefix may change logprobs in the last bits).
func TestConcurrentSameAsAlone(t *testing.T) {
	_, ts := testServer(t, Config{Parallel: 4, NoPrefixCache: true})
	bodies := make([]string, 4)
	for i := range bodies {
		bodies[i] = fmt.Sprintf(`{"prompt":"def f%d(x):","max_tokens":32,"temperature":0.8,"seed":%d,"logprobs":1}`, i, i+1)
	}
	alone := make([]string, len(bodies))
	for i, b := range bodies {
		_, out := post(t, t.Context(), ts.URL+"/v1/completions", b)
		alone[i] = string(decodeChoices(t, out))
	}
	together := make([]string, len(bodies))
	var wg sync.WaitGroup
	for i, b := range bodies {
		wg.Go(func() {
			_, out := post(t, t.Context(), ts.URL+"/v1/completions", b)
			together[i] = string(decodeChoices(t, out))
		})
	}
	wg.Wait()
	for i := range bodies {
		if alone[i] != together[i] {
			t.Errorf("request %d alone:\n%s\ntogether:\n%s", i, alone[i], together[i])
		}
	}
}

// decodeChoices returns a response's choices (text and logprobs), without
// the ids and timestamps that differ between responses.
func decodeChoices(t testing.TB, b []byte) []byte {
	c := decode[completion](t, b)
	out, _ := jsonMarshal(c.Choices)
	return out
}

// TestTimeout: a request that runs past Config.RequestTimeout gets 504 (or
// an error event once its stream has begun); while it runs, /metrics shows
// its session busy and its tokens in the KV cache.
func TestTimeout(t *testing.T) {
	s, ts := testServer(t, Config{RequestTimeout: 200 * time.Millisecond})
	var metricsSeen string
	s.onToken = func(ctx context.Context) {
		if metricsSeen == "" {
			var b strings.Builder
			s.metrics.write(&b, s.ready.Load().sched.stats())
			metricsSeen = b.String()
		}
		<-ctx.Done() // hold every token until the timeout
	}
	resp, b := post(t, t.Context(), ts.URL+"/v1/completions", `{"prompt":"def f():","max_tokens":5}`)
	if e := decode[openAIError](t, b); resp.StatusCode != 504 || e.Error.Code == nil || *e.Error.Code != "timeout" {
		t.Errorf("non-streamed: %d %s", resp.StatusCode, b)
	}
	for _, want := range []string{"ingot_sessions_running 1\n", "ingot_kv_cache_usage_ratio 0.0"} {
		if !strings.Contains(metricsSeen, want) {
			t.Errorf("metrics during the request lack %q:\n%s", want, metricsSeen)
		}
	}
	resp, b = post(t, t.Context(), ts.URL+"/v1/messages", `{"max_tokens":5,"stream":true,"messages":[{"role":"user","content":"x"}]}`)
	evs := readSSE(t, b)
	if last := evs[len(evs)-1]; resp.StatusCode != 200 || last.name != "error" || !strings.Contains(last.data, `"timeout_error"`) {
		t.Errorf("streamed: %d, last event %+v", resp.StatusCode, last)
	}
}
