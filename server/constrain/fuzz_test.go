package constrain

import (
	"testing"
)

// FuzzCompileSchema: no input makes CompileSchema panic or hang; what it
// compiles gives masks and accepts bytes without panicking, and every byte
// string the matcher accepts as a whole document is one the grammar
// accepted byte by byte.
func FuzzCompileSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3}},"required":["a"]}`,
		`{"enum":[1,"x",null,{"k":[true]}]}`,
		`{"anyOf":[{"type":"number"},{"const":"c"}]}`,
		`{"type":["string","null"]}`,
		`{"$defs":{"p":{"type":"boolean"}},"type":"object","properties":{"x":{"$ref":"#/$defs/p"}}}`,
		`{"$ref":"#"}`,
		`{"type":"object","additionalProperties":{"type":"integer"}}`,
		`{"type":"array","minItems":300}`,
		`{"pattern":"a"}`,
		`true`, `false`, `[]`, `{"type":7}`, `{"properties":{"a":1}}`, `{"required":["x"]}`,
	} {
		f.Add([]byte(s), []byte(`{"a":"x","b":[1]}`))
	}
	v := NewVocab(8, [][]byte{[]byte(`{`), []byte(`}`), []byte(`"`), []byte(`a`), []byte(`1`), []byte(`,`), []byte(`":`), nil}, []int32{7})
	f.Fuzz(func(t *testing.T, schema, doc []byte) {
		g, err := CompileSchema(schema)
		if err != nil {
			if _, ok := err.(*SchemaError); !ok {
				t.Fatalf("error %v is %T, want *SchemaError", err, err)
			}
			return
		}
		m := NewMatcher(g, v)
		mask := make([]uint64, 1)
		m.Mask(mask)
		ok := m.AcceptBytes(doc)
		if !ok {
			return
		}
		m.Mask(mask)
		b := NewMatcher(g, v)
		for i := range doc {
			if !b.AcceptBytes(doc[i : i+1]) {
				t.Fatalf("accepted %q whole, refused it at byte %d", doc, i)
			}
		}
		if b.Complete() != m.Complete() {
			t.Fatalf("complete %v byte by byte, %v whole", b.Complete(), m.Complete())
		}
	})
}
