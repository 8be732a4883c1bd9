package constrain

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// noVocab is an empty vocabulary, for matching bytes.
var noVocab = NewVocab(0, nil, nil)

// match reports whether doc is a whole document of g.
func match(g *Grammar, doc string) bool {
	m := NewMatcher(g, noVocab)
	return m.AcceptBytes([]byte(doc)) && m.Complete()
}

// prefix reports whether doc begins a document of g.
func prefix(g *Grammar, doc string) bool {
	return NewMatcher(g, NewVocab(0, nil, nil)).AcceptBytes([]byte(doc))
}

func mustCompile(t testing.TB, schema string) *Grammar {
	t.Helper()
	g, err := CompileSchema([]byte(schema))
	if err != nil {
		t.Fatalf("%s: %v", schema, err)
	}
	return g
}

func TestGrammarDocuments(t *testing.T) {
	any := AnyObject()
	cases := []struct {
		name   string
		schema string // "" : any object
		doc    string
		ok     bool
	}{
		{"empty object", "", `{}`, true},
		{"nested", "", `{"a":[1,[2,[]],{"b":null}],"c": true, "d":"x"}`, true},
		{"escapes", "", `{"a":"\"\\\/\b\f\n\r\t\u00e9\uCAFE"}`, true},
		{"surrogate escape", "", `{"a":"\uD83D\uDE00"}`, false},
		{"bad escape", "", `{"a":"\x"}`, false},
		{"short unicode escape", "", `{"a":"\u12"}`, false},
		{"raw newline in string", "", "{\"a\":\"\n\"}", false},
		{"utf8", "", `{"é":"日本語😀"}`, true},
		{"overlong utf8", "", "{\"a\":\"\xc0\xaf\"}", false},
		{"surrogate in utf8", "", "{\"a\":\"\xed\xa0\x80\"}", false},
		{"beyond U+10FFFF", "", "{\"a\":\"\xf4\x90\x80\x80\"}", false},
		{"truncated utf8", "", "{\"a\":\"\xe6\x97\"}", false},
		{"minus zero", "", `{"a":-0}`, true},
		{"exponent", "", `{"a":1e10,"b":-2.5E-3,"c":0.0}`, true},
		{"leading zero", "", `{"a":01}`, false},
		{"bare dot", "", `{"a":1.}`, false},
		{"plus sign", "", `{"a":+1}`, false},
		{"17 integer digits", "", `{"a":12345678901234567}`, false},
		{"16 integer digits", "", `{"a":1234567890123456}`, true},
		{"4 exponent digits", "", `{"a":1e1000}`, false},
		{"two spaces", "", `{"a":  1}`, false},
		{"space before colon", "", `{"a" :1}`, false},
		{"newline", "", "{\n\"a\":1}", false},
		{"trailing comma", "", `{"a":1,}`, false},
		{"array at root", "", `[1]`, false},
		{"text after", "", `{} `, false},
		{"nested arrays", `{"type":"array","items":{"type":"array","items":{"type":"integer"}}}`, `[[1,2],[],[3]]`, true},
		{"nested arrays, bad item", `{"type":"array","items":{"type":"array","items":{"type":"integer"}}}`, `[[1.5]]`, false},
		{"minItems", `{"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":3}`, `[true]`, false},
		{"in range", `{"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":3}`, `[true, false,true]`, true},
		{"maxItems", `{"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":3}`, `[true,true,true,true]`, false},
		{"required order", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number"}},"required":["a","b"]}`, `{"a":"x", "b":1}`, true},
		{"other order", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number"}},"required":["a","b"]}`, `{"b":1,"a":"x"}`, false},
		{"missing required", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number"}},"required":["a","b"]}`, `{"a":"x"}`, false},
		{"optional left out", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number"},"c":{"type":"null"}},"required":["b"]}`, `{"b":1,"c":null}`, true},
		{"no property", `{"type":"object","properties":{"a":{"type":"string"}}}`, `{}`, true},
		{"extra key", `{"type":"object","properties":{"a":{"type":"string"}}}`, `{"a":"1","z":1}`, false},
		{"enum", `{"enum":["red",1,null,{"x":[true]}]}`, `{"x":[true]}`, true},
		{"enum miss", `{"enum":["red",1,null]}`, `"blue"`, false},
		{"string enum with type", `{"type":"string","enum":["a","b",3]}`, `3`, false},
		{"const", `{"const":"a\"b"}`, `"a\"b"`, true},
		{"anyOf", `{"anyOf":[{"type":"integer"},{"type":"object","properties":{"k":{"type":"string"}},"required":["k"]}]}`, `{"k":"v"}`, true},
		{"type list", `{"type":["string","null"]}`, `null`, true},
		{"integer", `{"type":"integer"}`, `-12`, true},
		{"integer fraction", `{"type":"integer"}`, `1.0`, false},
		{"ref", `{"$defs":{"p":{"type":"boolean"}},"type":"object","properties":{"x":{"$ref":"#/$defs/p"}},"required":["x"]}`, `{"x":false}`, true},
		{"map", `{"type":"object","additionalProperties":{"type":"integer"}}`, `{"a":1,"b":2}`, true},
		{"map bad value", `{"type":"object","additionalProperties":{"type":"integer"}}`, `{"a":"1"}`, false},
		{"closed empty", `{"type":"object","additionalProperties":false}`, `{}`, true},
		{"true schema", `true`, `[1,"a",{}]`, true},
		{"maxLength", `{"type":"string","maxLength":3}`, `"aé\n"`, true},
		{"maxLength exceeded", `{"type":"string","maxLength":3}`, `"abcd"`, false},
		{"maxLength escape", `{"type":"string","maxLength":3}`, `"ab\u00e9x"`, false},
		{"minLength", `{"type":"string","minLength":2}`, `"日本"`, true},
		{"minLength short", `{"type":"string","minLength":2}`, `"日"`, false},
		{"length zero", `{"type":"string","maxLength":0}`, `""`, true},
		{"integer range", `{"type":"integer","minimum":-5,"maximum":120}`, `-5`, true},
		{"integer range above", `{"type":"integer","minimum":-5,"maximum":120}`, `121`, false},
		{"integer exclusive", `{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10}`, `0`, false},
		{"integer rounded bound", `{"type":"integer","minimum":0.5}`, `1`, true},
		{"number range decimal", `{"type":"number","minimum":0,"maximum":1}`, `0.25`, true},
		{"number range above", `{"type":"number","minimum":0,"maximum":1}`, `1.25`, false},
		{"number range exponent", `{"type":"number","minimum":0,"maximum":1}`, `1e-1`, false},
		{"number minimum only", `{"type":"number","minimum":0}`, `12345.5`, true},
		{"date", `{"type":"string","format":"date"}`, `"2024-12-31"`, true},
		{"date february 30", `{"type":"string","format":"date"}`, `"2024-02-30"`, false},
		{"date april 31", `{"type":"string","format":"date"}`, `"2024-04-31"`, false},
		{"date month 13", `{"type":"string","format":"date"}`, `"2024-13-01"`, false},
		{"date-time", `{"type":"string","format":"date-time"}`, `"2024-06-01T23:59:59.123+05:30"`, true},
		{"date-time Z", `{"type":"string","format":"date-time"}`, `"1999-01-09T00:00:00Z"`, true},
		{"date-time no offset", `{"type":"string","format":"date-time"}`, `"1999-01-09T00:00:00"`, false},
		{"time hour 24", `{"type":"string","format":"time"}`, `"24:00:00Z"`, false},
		{"uuid", `{"type":"string","format":"uuid"}`, `"123e4567-e89b-12d3-A456-426614174000"`, true},
		{"uuid short", `{"type":"string","format":"uuid"}`, `"123e4567-e89b-12d3-a456-42661417400"`, false},
		{"ipv4", `{"type":"string","format":"ipv4"}`, `"192.168.0.255"`, true},
		{"ipv4 256", `{"type":"string","format":"ipv4"}`, `"192.168.0.256"`, false},
		{"ipv4 leading zero", `{"type":"string","format":"ipv4"}`, `"192.168.01.1"`, false},
		{"format in type list", `{"type":["string","null"],"format":"date"}`, `null`, true},
		{"key escaping", `{"type":"object","properties":{"a\"b":{"type":"null"}},"required":["a\"b"]}`, `{"a\"b":null}`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := any
			if tc.schema != "" {
				g = mustCompile(t, tc.schema)
			}
			if got := match(g, tc.doc); got != tc.ok {
				t.Errorf("match(%s) = %v, want %v", tc.doc, got, tc.ok)
			}
		})
	}
}

func TestPrefixes(t *testing.T) {
	g := mustCompile(t, `{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}},"required":["name","n"]}`)
	for _, tc := range []struct {
		doc string
		ok  bool
	}{
		{`{"na`, true}, {`{"nb`, false}, {`{"name": "x\u00`, true}, {"{\"name\":\"\xe6", true}, {`{"name":"x","n":-`, true},
		{`{"name":"x","n":-0`, true}, {`{"name":"x","n":-00`, false},
	} {
		if got := prefix(g, tc.doc); got != tc.ok {
			t.Errorf("prefix(%s) = %v, want %v", tc.doc, got, tc.ok)
		}
	}
}

func TestWrap(t *testing.T) {
	g := mustCompile(t, `{"type":"integer"}`)
	w := g.Wrap("<a>", "</a>")
	for _, tc := range []struct {
		g   *Grammar
		doc string
		ok  bool
	}{{w, "<a>12</a>", true}, {w, "12", false}, {w, "<a>12", false}, {g, "12", true}, {g, "<a>12</a>", false}} {
		if got := match(tc.g, tc.doc); got != tc.ok {
			t.Errorf("match(%q) = %v, want %v", tc.doc, got, tc.ok)
		}
	}
}

func TestCompileSchemaErrors(t *testing.T) {
	for _, tc := range []struct {
		name, schema, path string
	}{
		{"not json", `{"type":`, ""},
		{"false", `false`, ""},
		{"number schema", `3`, ""},
		{"pattern", `{"type":"object","properties":{"a":{"type":"string","pattern":"x"}}}`, "properties.a.pattern"},
		{"format", `{"type":"string","format":"email"}`, "format"},
		{"format beside enum", `{"type":"string","format":"date","enum":["2020-01-01"]}`, "format"},
		{"multipleOf", `{"type":"array","items":{"type":"integer","multipleOf":2}}`, "items.multipleOf"},
		{"fractional number bound", `{"type":"number","minimum":0.5}`, "minimum"},
		{"exclusive number bound", `{"type":"number","exclusiveMinimum":0}`, "exclusiveMinimum"},
		{"bound not a number", `{"type":"integer","maximum":"9"}`, "maximum"},
		{"bound beside enum", `{"type":"integer","enum":[1,2],"minimum":0}`, "minimum"},
		{"empty integer range", `{"type":"integer","minimum":5,"exclusiveMaximum":5}`, ""},
		{"oneOf", `{"oneOf":[{"type":"string"}]}`, "oneOf"},
		{"allOf", `{"allOf":[]}`, "allOf"},
		{"unknown type", `{"type":"date"}`, "type"},
		{"unknown type in list", `{"type":["string","date"]}`, "type.1"},
		{"required not a list", `{"type":"object","properties":{"a":true},"required":"a"}`, "required"},
		{"required unknown", `{"type":"object","properties":{"a":true},"required":["a","b"]}`, "required.1"},
		{"tuple items", `{"type":"array","items":[{"type":"string"}]}`, "items"},
		{"minItems too big", `{"type":"array","minItems":1000}`, "minItems"},
		{"maxItems below minItems", `{"type":"array","minItems":3,"maxItems":2}`, "maxItems"},
		{"maxItems fraction", `{"type":"array","maxItems":1.5}`, "maxItems"},
		{"empty anyOf", `{"anyOf":[]}`, "anyOf"},
		{"anyOf sibling", `{"anyOf":[{"type":"string"}],"type":"string"}`, "type"},
		{"empty enum", `{"enum":[]}`, "enum"},
		{"enum of other type", `{"type":"string","enum":[1,2]}`, "enum"},
		{"recursive ref", `{"$defs":{"n":{"type":"array","items":{"$ref":"#/$defs/n"}}},"$ref":"#/$defs/n"}`, "$ref.items.$ref"},
		{"root ref", `{"type":"object","properties":{"self":{"$ref":"#"}}}`, "properties.self.$ref"},
		{"remote ref", `{"$ref":"https://example.com/s.json"}`, "$ref"},
		{"missing def", `{"$ref":"#/$defs/nope"}`, "$ref"},
		{"ref sibling", `{"$defs":{"a":true},"$ref":"#/$defs/a","type":"string"}`, "type"},
		{"additionalProperties number", `{"type":"object","additionalProperties":3}`, "additionalProperties"},
		{"minLength negative", `{"type":"string","minLength":-1}`, "minLength"},
		{"maxLength below minLength", `{"type":"string","minLength":3,"maxLength":2}`, "maxLength"},
		{"maxLength huge", `{"type":"string","maxLength":10000000}`, "maxLength"},
		{"format and maxLength", `{"type":"string","format":"uuid","maxLength":36}`, "format"},
		{"nested too deep", `{"type":"array","items":` + strings.Repeat(`{"type":"array","items":`, 70) + `true` + strings.Repeat(`}`, 71), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CompileSchema([]byte(tc.schema))
			se, ok := err.(*SchemaError)
			if !ok {
				t.Fatalf("error %v (%T), want a *SchemaError", err, err)
			}
			if tc.path != "" && se.Path != tc.path || se.Message == "" || !strings.HasPrefix(se.Error(), "constrain: schema") {
				t.Errorf("error %q at %q, want the path %q", se.Message, se.Path, tc.path)
			}
		})
	}
}

// TestLargeEnum: an enum of thousands of strings sharing prefixes keeps
// every value reachable (a stack per possible next byte, not per value).
func TestLargeEnum(t *testing.T) {
	var vals []string
	for i := range 3000 {
		vals = append(vals, fmt.Sprintf(`"item-%d"`, i))
	}
	g := mustCompile(t, `{"enum":[`+strings.Join(vals, ",")+`,"item"]}`)
	for _, doc := range []string{`"item-0"`, `"item-2999"`, `"item-1234"`, `"item"`} {
		if !match(g, doc) {
			t.Errorf("%s refused", doc)
		}
	}
	for _, doc := range []string{`"item-3000"`, `"item-"`, `"ite"`} {
		if match(g, doc) {
			t.Errorf("%s accepted", doc)
		}
	}
	m := NewMatcher(g, NewVocab(0, nil, nil))
	m.AcceptBytes([]byte(`"item-1`))
	if len(m.state) > 11 { // one per next byte: the closing quote or a digit
		t.Errorf("%d stacks after a shared prefix", len(m.state))
	}
}

// TestEqualAlternativesMerge: anyOf alternatives that compile to equal rules
// leave one matcher stack, not one each (equal rules are shared and a
// reference that ends its alternative is a tail call), so a schema of many
// equal alternatives costs what one does.
func TestEqualAlternativesMerge(t *testing.T) {
	alts := func(s string, n int) string {
		return `{"anyOf":[` + strings.TrimSuffix(strings.Repeat(s+",", n), ",") + `]}`
	}
	for _, tc := range []struct{ schema, prefix string }{
		{alts(`{"type":"string"}`, 256), `"ab`},
		{alts(`{"type":"array","items":{"type":"string"}}`, 64), `["x", `},
		{alts(`{"type":"object","properties":{"a":{"type":"string"}}}`, 64), `{"a":"`},
		{`{"anyOf":[{"anyOf":[{"type":"string"},{"type":"string"}]},{"anyOf":[{"type":"string"},{"type":"string"}]}]}`, `"`},
	} {
		m := NewMatcher(mustCompile(t, tc.schema), NewVocab(0, nil, nil))
		if !m.AcceptBytes([]byte(tc.prefix)) {
			t.Fatalf("%s refused", tc.prefix)
		}
		if len(m.state) != 1 {
			t.Errorf("%.60s… after %s: %d stacks, want 1", tc.schema, tc.prefix, len(m.state))
		}
	}
}

// TestIntRange: the numerals intRange accepts are exactly the integers in
// range, for every small range and random large ones; numberRange accepts
// only numbers in range, and every integer in it.
func TestIntRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	type rg struct{ lo, hi int64 }
	ranges := []rg{{maxMagnitude - 5, maxMagnitude}, {-maxMagnitude, -maxMagnitude + 3}, {-maxMagnitude, maxMagnitude}}
	for lo := int64(-40); lo <= 40; lo += 7 {
		for hi := lo; hi <= 130; hi += 11 {
			ranges = append(ranges, rg{lo, hi})
		}
	}
	for range 50 {
		a, c := rng.Int64N(2*maxMagnitude)-maxMagnitude, rng.Int64N(2*maxMagnitude)-maxMagnitude
		ranges = append(ranges, rg{min(a, c), max(a, c)})
	}
	for _, r := range ranges {
		b := newBuilder()
		b.g.root = b.intRange(r.lo, r.hi)
		nb := newBuilder()
		nb.g.root = nb.numberRange(r.lo, r.hi)
		probe := []int64{r.lo, r.hi, r.lo - 1, r.hi + 1, 0, -1, 1, (r.lo + r.hi) / 2}
		for n := int64(-50); n <= 140 && r.hi-r.lo < 1000; n++ {
			probe = append(probe, n)
		}
		for range 30 {
			probe = append(probe, r.lo+rng.Int64N(r.hi-r.lo+1), rng.Int64N(2*maxMagnitude)-maxMagnitude)
		}
		for _, n := range probe {
			s := strconv.FormatInt(n, 10)
			want := n >= r.lo && n <= r.hi && n >= -maxMagnitude && n <= maxMagnitude
			if got := match(b.g, s); got != want {
				t.Fatalf("[%d, %d]: intRange matches %s: %v, want %v", r.lo, r.hi, s, got, want)
			}
			if got := match(nb.g, s); got != want {
				t.Fatalf("[%d, %d]: numberRange matches %s: %v, want %v", r.lo, r.hi, s, got, want)
			}
			for _, f := range []string{".0", ".5", ".999", ".000001"} {
				d := s + f
				v, _ := strconv.ParseFloat(d, 64)
				if n < 0 || s == "-0" {
					v = -(math.Abs(float64(n)) + math.Abs(v-float64(n)))
				}
				if match(nb.g, d) && (v < float64(r.lo) || v > float64(r.hi)) {
					t.Fatalf("[%d, %d]: numberRange matches %s = %g", r.lo, r.hi, d, v)
				}
			}
		}
		for _, s := range []string{"01", "-0", "00", "-", "1e3", "+1"} {
			if match(b.g, s) {
				t.Fatalf("[%d, %d]: intRange matches %q", r.lo, r.hi, s)
			}
		}
	}
	nb := newBuilder()
	nb.g.root = nb.numberRange(0, 1)
	for _, tc := range []struct {
		s  string
		ok bool
	}{{"0.5", true}, {"0", true}, {"1", true}, {"0.999", true}, {"1.5", false}, {"-0.5", false}, {"2", false}} {
		if got := match(nb.g, tc.s); got != tc.ok {
			t.Errorf("[0, 1] matches %s: %v, want %v", tc.s, got, tc.ok)
		}
	}
	nb = newBuilder()
	nb.g.root = nb.numberRange(-2, 0)
	for _, tc := range []struct {
		s  string
		ok bool
	}{{"-0.5", true}, {"-1.5", true}, {"-2", true}, {"-2.5", false}, {"0", true}, {"0.5", false}} {
		if got := match(nb.g, tc.s); got != tc.ok {
			t.Errorf("[-2, 0] matches %s: %v, want %v", tc.s, got, tc.ok)
		}
	}
}
