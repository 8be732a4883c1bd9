package server

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"net/http"
	"strconv"
	"testing"

	"github.com/ingot-llm/ingot/model"
)

// TestEmbeddings: /v1/embeddings returns, per input, the final norm's
// output from a direct ForwardTaps over its tokens, pooled (the last token,
// or the mean) and L2-normalized; base64 holds the same float32s; bad
// fields are 400s naming them.
func TestEmbeddings(t *testing.T) {
	s, ts := testServer(t, Config{Parallel: 1})
	l := s.ready.Load()
	D := l.model.Raw().Config.HiddenSize
	texts := []string{"def mean(xs):\n    return sum(xs) / len(xs)\n", "import os"}
	sess, err := l.model.Raw().NewSession(modelSessionOptions(256))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	// want is the reference: ForwardTaps, pooled in float64, normalized.
	want := func(ids []int32, mean bool) []float64 {
		sess.Truncate(0)
		taps, err := sess.ForwardTaps(t.Context(), ids, model.TapOptions{Norm: true, All: true})
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float64, D)
		for r := range ids {
			if mean || r == len(ids)-1 {
				for j := range D {
					v[j] += float64(taps.Norm[r*D+j])
				}
			}
		}
		var ss float64
		for _, x := range v {
			ss += x * x
		}
		for j := range v {
			v[j] /= math.Sqrt(ss)
		}
		return v
	}
	type resp struct {
		Data []struct {
			Object    string
			Index     int
			Embedding any
		}
		Model string
		Usage embeddingUsage
	}
	check := func(name string, got []float32, ref []float64) {
		t.Helper()
		if len(got) != D {
			t.Fatalf("%s: %d dimensions, want %d", name, len(got), D)
		}
		worst, norm := 0.0, 0.0
		for j := range got {
			worst = max(worst, math.Abs(float64(got[j])-ref[j]))
			norm += float64(got[j]) * float64(got[j])
		}
		if worst > 1e-6 || math.Abs(norm-1) > 1e-5 {
			t.Errorf("%s: largest difference from ForwardTaps %.2g, squared norm %v", name, worst, norm)
		}
	}
	for _, pooling := range []string{"", "last", "mean"} {
		_, b := post(t, t.Context(), ts.URL+"/v1/embeddings", `{"model":"x","input":[`+quote(texts[0])+`,`+quote(texts[1])+`],"pooling":"`+pooling+`"}`)
		r := decode[resp](t, b)
		if len(r.Data) != 2 || r.Model != "tinycode-llama" {
			t.Fatalf("pooling %q: %s", pooling, b)
		}
		tokens := 0
		for i, text := range texts {
			ids := l.tok.Encode(text, true)
			tokens += len(ids)
			raw := r.Data[i].Embedding.([]any)
			got := make([]float32, len(raw))
			for j, x := range raw {
				got[j] = float32(x.(float64))
			}
			if r.Data[i].Index != i || r.Data[i].Object != "embedding" {
				t.Errorf("data[%d]: index %d object %q", i, r.Data[i].Index, r.Data[i].Object)
			}
			check("pooling "+pooling+" "+text, got, want(ids, pooling == "mean"))
		}
		if r.Usage.PromptTokens != tokens || r.Usage.TotalTokens != tokens {
			t.Errorf("usage %+v, want %d tokens", r.Usage, tokens)
		}
	}
	// Token ids and base64.
	ids := l.tok.Encode(texts[1], true)
	idsJSON, _ := jsonMarshal(ids)
	_, b := post(t, t.Context(), ts.URL+"/v1/embeddings", `{"input":[`+string(idsJSON)+`],"encoding_format":"base64","dimensions":`+strconv.Itoa(D)+`}`)
	r := decode[resp](t, b)
	if len(r.Data) != 1 {
		t.Fatalf("base64: %s", b)
	}
	raw, err := base64.StdEncoding.DecodeString(r.Data[0].Embedding.(string))
	if err != nil || len(raw) != 4*D {
		t.Fatalf("base64: %d bytes, %v", len(raw), err)
	}
	got := make([]float32, D)
	for j := range got {
		got[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
	}
	check("token ids, base64", got, want(ids, false))

	for _, tc := range []struct{ body, param string }{
		{`{"input":"x","dimensions":3}`, "dimensions"},
		{`{"input":"x","encoding_format":"int8"}`, "encoding_format"},
		{`{"input":"x","pooling":"cls"}`, "pooling"},
		{`{"input":""}`, "input"},
		{`{"input":["a",""]}`, "input[1]"},
		{`{"input":[[1,2],[]]}`, "input[1]"},
		{`{"input":[1,99999999]}`, "input[1]"},
		{`{"input":{"a":1}}`, "input"},
		{`{}`, "input"},
	} {
		resp, b := post(t, t.Context(), ts.URL+"/v1/embeddings", tc.body)
		if e := decode[openAIError](t, b); resp.StatusCode != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != tc.param {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.body, resp.StatusCode, b, tc.param)
		}
	}
}
