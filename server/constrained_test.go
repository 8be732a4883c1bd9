package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ingot-llm/ingot"
	"github.com/ingot-llm/ingot/model"
	"github.com/ingot-llm/ingot/server/constrain"
)

// randomSchema returns a random schema of the supported subset: nested
// objects (some properties optional, odd names), arrays with item counts,
// enums and consts of any JSON values, anyOf, type lists, maps.
func randomSchema(rng *rand.Rand, depth int) map[string]any {
	scalar := []string{"string", "number", "integer", "boolean", "null", "enum", "const", "typelist"}
	kinds := scalar
	if depth < 3 {
		kinds = append(kinds, "object", "object", "array", "array", "anyOf", "map", "any")
	}
	switch k := kinds[rng.IntN(len(kinds))]; k {
	case "string", "number", "integer", "boolean", "null":
		s := map[string]any{"type": k, "description": "a " + k}
		switch r := rng.IntN(6); {
		case (k == "integer" || k == "number") && r < 3:
			lo := rng.IntN(200) - 100
			s["minimum"] = lo
			if r > 0 {
				s["maximum"] = lo + rng.IntN(300)
			}
			if k == "integer" && r == 2 {
				s["exclusiveMinimum"], s["exclusiveMaximum"] = lo-1, lo+rng.IntN(50)+2
			}
		case k != "string":
		case r < 2:
			s["format"] = []string{"date-time", "date", "time", "uuid", "ipv4"}[rng.IntN(5)]
		case r < 4:
			lo := rng.IntN(3)
			s["minLength"] = lo
			if r == 3 {
				s["maxLength"] = lo + rng.IntN(4)
			}
		}
		return s
	case "enum":
		vals := make([]any, 1+rng.IntN(3))
		for i := range vals {
			vals[i] = randomValue(rng, 1)
		}
		return map[string]any{"enum": vals}
	case "const":
		return map[string]any{"const": randomValue(rng, 1)}
	case "typelist":
		return map[string]any{"type": []any{[]string{"string", "integer", "boolean"}[rng.IntN(3)], "null"}}
	case "object":
		props := map[string]any{}
		req := []string{}
		for i := range rng.IntN(4) {
			name := []string{"id", "name", "a\"b", "é", "x y", "tags", "n"}[rng.IntN(7)] + fmt.Sprint(i)
			props[name] = randomSchema(rng, depth+1)
			if rng.IntN(2) == 0 {
				req = append(req, name)
			}
		}
		s := map[string]any{"type": "object", "properties": props, "required": req}
		if rng.IntN(2) == 0 {
			s["additionalProperties"] = false
		}
		return s
	case "map":
		return map[string]any{"type": "object", "additionalProperties": randomSchema(rng, depth+1)}
	case "array":
		s := map[string]any{"type": "array", "items": randomSchema(rng, depth+1)}
		lo := rng.IntN(3)
		if rng.IntN(2) == 0 {
			s["minItems"] = lo
		}
		if rng.IntN(2) == 0 {
			s["maxItems"] = lo + rng.IntN(3)
		}
		return s
	case "anyOf":
		alts := make([]any, 1+rng.IntN(3))
		for i := range alts {
			alts[i] = randomSchema(rng, depth+1)
		}
		return map[string]any{"anyOf": alts}
	}
	return map[string]any{}
}

// randomValue returns a random JSON value with awkward strings and numbers.
func randomValue(rng *rand.Rand, depth int) any {
	switch rng.IntN(6) {
	case 0:
		return []string{"red", "a\"b\\c", "é日本", "", "x\ny", "</script>"}[rng.IntN(6)]
	case 1:
		return json.Number([]string{"0", "-0", "1e10", "-2.5", "7", "1E-3"}[rng.IntN(6)])
	case 2:
		return rng.IntN(2) == 0
	case 3:
		return nil
	case 4:
		if depth > 0 {
			return []any{randomValue(rng, depth-1), randomValue(rng, depth-1)}
		}
	case 5:
		if depth > 0 {
			return map[string]any{"k": randomValue(rng, depth-1)}
		}
	}
	return "s"
}

// validate checks v (decoded with UseNumber) against schema (decoded the
// same way), independently of package constrain: the JSON Schema meaning of
// the supported keywords.
func validate(schema, v any, root map[string]any) error {
	s, ok := schema.(map[string]any)
	if !ok {
		if schema == true {
			return nil
		}
		return fmt.Errorf("schema %v", schema)
	}
	if r, ok := s["$ref"].(string); ok {
		name := strings.TrimPrefix(r, "#/$defs/")
		return validate(root["$defs"].(map[string]any)[name], v, root)
	}
	if alts, ok := s["anyOf"].([]any); ok {
		for _, a := range alts {
			if validate(a, v, root) == nil {
				return nil
			}
		}
		return fmt.Errorf("%v matches no anyOf alternative", v)
	}
	if t, ok := s["type"]; ok {
		names, ok := t.([]any)
		if !ok {
			names = []any{t}
		}
		if !slices.ContainsFunc(names, func(n any) bool { return hasType(v, n.(string)) }) {
			return fmt.Errorf("%v is not of type %v", v, t)
		}
	}
	if n, ok := v.(json.Number); ok {
		f, _ := n.Float64()
		for _, b := range []struct {
			k  string
			ok func(f, b float64) bool
		}{
			{"minimum", func(f, b float64) bool { return f >= b }}, {"maximum", func(f, b float64) bool { return f <= b }},
			{"exclusiveMinimum", func(f, b float64) bool { return f > b }}, {"exclusiveMaximum", func(f, b float64) bool { return f < b }},
		} {
			if bn, ok := s[b.k].(json.Number); ok {
				if bf, _ := bn.Float64(); !b.ok(f, bf) {
					return fmt.Errorf("%s breaks %s %s", n, b.k, bn)
				}
			}
		}
	}
	if str, ok := v.(string); ok {
		n := int64(utf8.RuneCountInString(str))
		if lo, ok := s["minLength"].(json.Number); ok && n < mustInt(lo) {
			return fmt.Errorf("%q is shorter than minLength %s", str, lo)
		}
		if hi, ok := s["maxLength"].(json.Number); ok && n > mustInt(hi) {
			return fmt.Errorf("%q is longer than maxLength %s", str, hi)
		}
	}
	if f, ok := s["format"].(string); ok {
		if str, isStr := v.(string); isStr && !validFormat(f, str) {
			return fmt.Errorf("%q is not a valid %s", str, f)
		}
	}
	if c, ok := s["const"]; ok && !jsonEqual(c, v) {
		return fmt.Errorf("%v is not the const %v", v, c)
	}
	if e, ok := s["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { return jsonEqual(x, v) }) {
		return fmt.Errorf("%v is not in the enum %v", v, e)
	}
	switch x := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for _, r := range asList(s["required"]) {
			if _, ok := x[r.(string)]; !ok {
				return fmt.Errorf("required %q missing from %v", r, x)
			}
		}
		for k, pv := range x {
			if ps, ok := props[k]; ok {
				if err := validate(ps, pv, root); err != nil {
					return fmt.Errorf("%q: %w", k, err)
				}
				continue
			}
			switch a := s["additionalProperties"].(type) {
			case bool:
				if !a {
					return fmt.Errorf("additional property %q", k)
				}
			case map[string]any:
				if err := validate(a, pv, root); err != nil {
					return fmt.Errorf("%q: %w", k, err)
				}
			}
		}
	case []any:
		if n, ok := s["minItems"].(json.Number); ok && int64(len(x)) < mustInt(n) {
			return fmt.Errorf("%d items, minItems %s", len(x), n)
		}
		if n, ok := s["maxItems"].(json.Number); ok && int64(len(x)) > mustInt(n) {
			return fmt.Errorf("%d items, maxItems %s", len(x), n)
		}
		if it, ok := s["items"]; ok {
			for i, e := range x {
				if err := validate(it, e, root); err != nil {
					return fmt.Errorf("[%d]: %w", i, err)
				}
			}
		}
	}
	return nil
}

// validFormat checks a string format with the standard library's parsers.
func validFormat(format, s string) bool {
	switch format {
	case "date":
		_, err := time.Parse(time.DateOnly, s)
		return err == nil
	case "time":
		_, err := time.Parse("15:04:05Z07:00", s)
		return err == nil
	case "date-time":
		_, err := time.Parse(time.RFC3339, s)
		return err == nil
	case "uuid":
		return uuidRE.MatchString(s)
	case "ipv4":
		a, err := netip.ParseAddr(s)
		return err == nil && a.Is4()
	}
	return false
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func asList(v any) []any { l, _ := v.([]any); return l }

func mustInt(n json.Number) int64 { i, _ := n.Int64(); return i }

func hasType(v any, t string) bool {
	switch x := v.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case string:
		return t == "string"
	case json.Number:
		if t == "number" {
			return true
		}
		f, err := x.Float64()
		return t == "integer" && err == nil && f == math.Trunc(f)
	case []any:
		return t == "array"
	case map[string]any:
		return t == "object"
	}
	return false
}

// jsonEqual compares decoded JSON values, numbers by value.
func jsonEqual(a, b any) bool {
	na, ok1 := a.(json.Number)
	nb, ok2 := b.(json.Number)
	if ok1 && ok2 {
		fa, _ := na.Float64()
		fb, _ := nb.Float64()
		return fa == fb
	}
	if ok1 != ok2 {
		return false
	}
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			if yv, ok := y[k]; !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	}
	return a == b
}

func decodeNumbers(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("data after the value")
	}
	return v, nil
}

// TestJSONSchemaProperty generates from the demo model, with random
// sampling through the server's constrained path (poolSlot.run), under
// 10⁴ random schemas of the supported subset: every output that ends in EOS
// parses with encoding/json and validates against its schema (checked
// independently of package constrain), and every output cut by max_tokens is
// a prefix the grammar accepts.
func TestJSONSchemaProperty(t *testing.T) {
	schemas := 10000
	if testing.Short() {
		schemas = 1000
	}
	m, err := ingot.Load(t.Context(), "", ingot.Options{Backend: "cpu", Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const workers = 2
	p, err := newPool(m, workers, 0, ingot.SessionOptions{Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	l := &loaded{model: m, tok: m.Tokenizer()}
	v := l.vocab()
	prompt := m.Tokenizer().Encode("x = ", true)
	var next, complete, cut, tokens atomic.Int64
	t0 := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sl, err := p.acquire(context.Background(), nil, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer sl.release()
			for {
				i := next.Add(1) - 1
				if i >= int64(schemas) || t.Failed() {
					return
				}
				rng := rand.New(rand.NewPCG(uint64(i), 99))
				schemaJSON, _ := json.Marshal(randomSchema(rng, 0))
				g, err := constrain.CompileSchema(schemaJSON)
				if err != nil {
					t.Errorf("schema %d %s: %v", i, schemaJSON, err)
					return
				}
				seq := &sequence{prompt: prompt, grammar: g, vocab: v,
					opts: model.GenerateOptions{MaxTokens: 12, Temperature: 1, Seed: uint64(i + 1)}}
				var out []byte
				var ids []int32
				res, err := sl.run(context.Background(), seq, func(st step) bool {
					ids = append(ids, st.id)
					if !slices.Contains(m.Raw().EOS, st.id) {
						out = append(out, m.Tokenizer().TokenBytes(st.id)...)
					}
					return true
				})
				if err != nil {
					t.Errorf("worker %d schema %d: %v", w, i, err)
					return
				}
				tokens.Add(int64(len(ids)))
				if res.stop != model.StopEOS {
					cut.Add(1)
					mt := constrain.NewMatcher(g, v)
					if !mt.AcceptBytes(out) {
						t.Errorf("schema %s: cut output %q is not a prefix", schemaJSON, out)
					}
					continue
				}
				complete.Add(1)
				doc, err := decodeNumbers(out)
				if err != nil {
					t.Errorf("schema %s: output %q does not parse: %v", schemaJSON, out, err)
					continue
				}
				schema, _ := decodeNumbers(schemaJSON)
				if err := validate(schema, doc, schema.(map[string]any)); err != nil {
					t.Errorf("schema %s: output %s does not validate: %v", schemaJSON, out, err)
				}
				if text := m.Tokenizer().Decode(ids, true); text != string(out) {
					t.Errorf("decoded text %q differs from the token bytes %q", text, out)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d schemas: %d complete and valid, %d cut at 12 tokens (valid prefixes); %d tokens in %v",
		schemas, complete.Load(), cut.Load(), tokens.Load(), time.Since(t0).Round(time.Millisecond))
	if complete.Load() < int64(schemas)/4 {
		t.Errorf("only %d of %d generations completed", complete.Load(), schemas)
	}
}

func TestChatResponseFormat(t *testing.T) {
	_, ts := testServer(t, Config{})
	schema := `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"ok":{"type":"boolean"},
		"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2}},"required":["name","age","ok","tags"],"additionalProperties":false}`
	for _, tc := range []struct {
		name, format string
		schema       string // "" : any object
	}{
		{"json_schema", `{"type":"json_schema","json_schema":{"name":"person","strict":true,"schema":` + schema + `}}`, schema},
		{"json_object", `{"type":"json_object"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"messages":[{"role":"user","content":"a person"}],"max_tokens":80,"temperature":0.8,"seed":7,"n":4,"logprobs":true,"top_logprobs":2,"response_format":` + tc.format + `}`
			resp, b := post(t, t.Context(), ts.URL+"/v1/chat/completions", body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			c := decode[chatCompletion](t, b)
			done := 0
			for _, ch := range c.Choices {
				var spelled string
				for _, lp := range ch.Logprobs.Content {
					spelled += lp.Token
				}
				if spelled != ch.Message.Content || len(ch.Logprobs.Content[0].TopLogprobs) != 2 {
					t.Errorf("choice %d: logprobs spell %q, content %q", ch.Index, spelled, ch.Message.Content)
				}
				if ch.FinishReason == "length" {
					continue
				}
				done++
				doc, err := decodeNumbers([]byte(ch.Message.Content))
				if err != nil {
					t.Fatalf("choice %d %q: %v", ch.Index, ch.Message.Content, err)
				}
				if tc.schema == "" {
					if _, ok := doc.(map[string]any); !ok {
						t.Errorf("json_object gave %q", ch.Message.Content)
					}
					continue
				}
				s, _ := decodeNumbers([]byte(tc.schema))
				if err := validate(s, doc, s.(map[string]any)); err != nil {
					t.Errorf("choice %d %q: %v", ch.Index, ch.Message.Content, err)
				}
			}
			if done == 0 {
				t.Fatalf("no choice finished: %s", b)
			}
			// Streamed, the same seed gives the same text.
			_, sb := post(t, t.Context(), ts.URL+"/v1/chat/completions", strings.Replace(body, `"n":4`, `"stream":true`, 1))
			var text string
			for _, ev := range readSSE(t, sb) {
				if ev.data == "[DONE]" {
					continue
				}
				for _, ch := range decode[chatChunk](t, []byte(ev.data)).Choices {
					if ch.Delta.Content != nil {
						text += *ch.Delta.Content
					}
				}
			}
			if text != c.Choices[0].Message.Content {
				t.Errorf("streamed %q, want %q", text, c.Choices[0].Message.Content)
			}
		})
	}
}

// TestFormatWalks: random token walks over the demo vocabulary under each
// string format end in strings the standard library's parsers accept
// (time.Parse for RFC 3339, netip for IPv4, a regexp for UUIDs).
func TestFormatWalks(t *testing.T) {
	m, err := ingot.Load(t.Context(), "", ingot.Options{Backend: "cpu", Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l := &loaded{model: m, tok: m.Tokenizer()}
	v := l.vocab()
	eos := m.Raw().EOS
	rng := rand.New(rand.NewPCG(5, 6))
	mask := make([]uint64, (m.Raw().Config.VocabSize+63)/64)
	for _, f := range []string{"date-time", "date", "time", "uuid", "ipv4"} {
		g, err := constrain.CompileSchema([]byte(`{"type":"string","format":"` + f + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		for range 200 {
			mt := constrain.NewMatcher(g, v)
			var out []byte
			for !mt.Complete() {
				mt.Mask(mask)
				var allowed []int32
				for id := range m.Raw().Config.VocabSize {
					if mask[id/64]&(1<<(id%64)) != 0 && !slices.Contains(eos, int32(id)) {
						allowed = append(allowed, int32(id))
					}
				}
				id := allowed[rng.IntN(len(allowed))]
				mt.Accept(id)
				out = append(out, m.Tokenizer().TokenBytes(id)...)
			}
			var s string
			if err := json.Unmarshal(out, &s); err != nil || !validFormat(f, s) {
				t.Fatalf("%s: %s is not valid (%v)", f, out, err)
			}
		}
	}
}
