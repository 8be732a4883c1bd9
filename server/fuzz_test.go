package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzDecodeRequests: any body given to the chat, completions or messages
// parser yields either a 400/413 error object naming what is wrong or a
// request that fits the context window with valid sampling options. The seed
// corpus is testdata/fuzz/FuzzDecodeRequests.
func FuzzDecodeRequests(f *testing.F) {
	for _, b := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stop":["a","b"],"seed":1}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"logprobs":true,"top_logprobs":3}`,
		`{"prompt":[[1,2],[3]],"echo":true,"logprobs":2,"max_tokens":0}`,
		`{"prompt":"x","temperature":1e309}`,
		`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"a":{"enum":[1,"b"]}},"required":["a"]}}}}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required"}`,
		`{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}],"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"any"}}`,
	} {
		for ep := range uint8(3) {
			f.Add(ep, []byte(b))
		}
	}
	s, err := New(Config{Session: sessionCtx(64)})
	if err != nil {
		f.Fatal(err)
	}
	if err := s.Load(f.Context()); err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	l := s.ready.Load()
	f.Fuzz(func(t *testing.T, endpoint uint8, body []byte) {
		r := httptest.NewRequest("POST", "/", bytes.NewReader(body))
		r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, 1<<16)
		var err error
		check := func(ids []int32, gen int, p params) {
			if len(ids) == 0 || len(ids)+gen > l.ctxSize || gen < 0 || p.n < 1 || p.n > maxN {
				t.Fatalf("admitted %d prompt tokens + %d, n %d, context %d", len(ids), gen, p.n, l.ctxSize)
			}
			if err := p.opts.Validate(); err != nil {
				t.Fatalf("admitted invalid options: %v", err)
			}
			for _, st := range p.stops {
				if st == "" {
					t.Fatal("admitted an empty stop string")
				}
			}
		}
		switch endpoint % 3 {
		case 0:
			var j *chatJob
			if j, err = parseChat(r, l); err == nil {
				check(j.ids, j.gen, j.p)
				if j.gen == 0 || j.topK < 0 || j.topK > maxTopLogprobs {
					t.Fatalf("chat: %d tokens, top_logprobs %d", j.gen, j.topK)
				}
			}
		case 1:
			var j *completionJob
			if j, err = parseCompletion(r, l); err == nil {
				for i, pr := range j.prompts {
					check(pr.ids, j.gens[i], j.p)
				}
			}
		case 2:
			var j *messagesJob
			if j, err = parseMessagesRequest(r, l); err == nil {
				check(j.ids, j.gen, j.p)
			}
		}
		if err == nil {
			return
		}
		var ae *apiError
		if !errors.As(err, &ae) || (ae.status != 400 && ae.status != 413) || ae.message == "" {
			t.Fatalf("error %v (%T), want a 400 or 413 *apiError", err, err)
		}
		if _, err := json.Marshal(ae.openAI()); err != nil {
			t.Fatal(err)
		}
	})
}
