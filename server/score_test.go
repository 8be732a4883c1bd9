package server

import (
	"strconv"
	"strings"
	"testing"
)

// TestEchoIsScore: the prompt logprobs of echo are model.Session.Score's
// values bit for bit (the first token null), with and without generated
// tokens after them, across prefill chunks.
func TestEchoIsScore(t *testing.T) {
	s, ts := testServer(t, Config{Parallel: 1, Session: sessionCtx(512)})
	l := s.ready.Load()
	prompt := strings.Repeat("import numpy as np\ndef mean(xs):\n    return sum(xs) / len(xs)\n", 20)
	ids := l.tok.Encode(prompt, true)
	sess, err := l.model.Raw().NewSession(modelSessionOptions(512))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	want, err := sess.Score(t.Context(), ids[:1], ids[1:])
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) < 300 {
		t.Fatalf("%d prompt tokens: the test wants a long prompt", len(ids))
	}
	for _, max := range []int{0, 3} {
		_, b := post(t, t.Context(), ts.URL+"/v1/completions",
			`{"prompt":`+quote(prompt)+`,"echo":true,"logprobs":2,"temperature":0,"ignore_eos":true,"max_tokens":`+strconv.Itoa(max)+`}`)
		lp := decode[completion](t, b).Choices[0].Logprobs
		if lp == nil || len(lp.TokenLogprobs) != len(ids)+max || lp.TokenLogprobs[0] != nil {
			t.Fatalf("max_tokens %d: %d bytes: %.300s", max, len(b), b)
		}
		for i, w := range want.Tokens {
			if got := lp.TokenLogprobs[i+1]; *got != w.Logprob {
				t.Errorf("max_tokens %d: token %d: logprob %v, Score %v", max, i+1, *got, w.Logprob)
				break
			}
		}
	}
}
