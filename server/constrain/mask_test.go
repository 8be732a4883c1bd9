package constrain

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-llm/ingot/tokenize"
)

// vocabs caches test vocabularies by tokenizer directory.
var vocabs sync.Map

// testVocab loads the vocabulary of the tokenizer in dir, as package server
// builds it: every token's bytes, special tokens left out, eos the EOS ids.
func testVocab(t testing.TB, dir string, eos ...int32) *Vocab {
	t.Helper()
	if v, ok := vocabs.Load(dir); ok {
		return v.(*Vocab)
	}
	tk, err := tokenize.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	toks := make([][]byte, tk.VocabSize())
	for id := range toks {
		if !tk.IsSpecial(int32(id)) {
			toks[id] = tk.TokenBytes(int32(id))
		}
	}
	v := NewVocab(len(toks), toks, eos)
	vocabs.Store(dir, v)
	return v
}

const demoDir = "../../internal/demo/tinycode-llama"

// TestMaskExact: at every step of random constrained walks, the mask holds
// exactly the tokens whose bytes the grammar accepts from that state (and
// EOS exactly when the document is complete).
func TestMaskExact(t *testing.T) {
	for _, vc := range []struct{ name, dir string }{
		{"byte-level", demoDir},
		{"sentencepiece", filepath.Join("..", "..", "tokenize", "testdata", "tok-spm")},
	} {
		t.Run(vc.name, func(t *testing.T) { maskExact(t, testVocab(t, vc.dir, 2)) })
	}
}

func maskExact(t *testing.T, v *Vocab) {
	rng := rand.New(rand.NewPCG(3, 4))
	schemas := []string{
		"",
		`{"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"enum":["a","bc",7]},"maxItems":3},"n":{"type":"number"}},"required":["name","n"]}`,
		`{"anyOf":[{"type":"string"},{"type":"array","items":{"type":"integer"}},{"const":"stop"}]}`,
		`{"type":"array","items":{"type":"string","minLength":2,"maxLength":5},"maxItems":6}`,
		`{"anyOf":[{"type":"string","maxLength":3},{"type":"string","minLength":6,"maxLength":9}]}`,
		`{"type":"object","properties":{"d":{"type":"string","format":"date-time"},"s":{"type":"string","maxLength":12}},"required":["d","s"]}`,
		`{"type":"array","items":{"anyOf":[{"type":"integer","minimum":-120,"maximum":4500},{"type":"number","minimum":0,"maximum":1}]}}`,
	}
	var many []string // more stacks than dedup compares pairwise
	for i := range 20 {
		many = append(many, fmt.Sprintf(`{"type":"string","minLength":%d,"maxLength":%d}`, i%3, 2+i))
	}
	schemas = append(schemas, `{"type":"array","items":{"anyOf":[`+strings.Join(many, ",")+`]},"maxItems":3}`)
	mask := make([]uint64, (v.n+63)/64)
	for _, s := range schemas {
		g := AnyObject()
		if s != "" {
			g = mustCompile(t, s)
		}
		for walk := range 4 {
			m := NewMatcher(g, v)
			for step := range 40 {
				m.Mask(mask)
				var allowed []int32
				for id := range v.n {
					want := v.isEOS(int32(id)) && m.Complete() || v.tokens[id] != nil && m.clone().AcceptBytes(v.tokens[id])
					if got := mask[id>>6]&(1<<(id&63)) != 0; got != want {
						t.Fatalf("schema %s walk %d step %d: token %d %q: mask %v, grammar %v", s, walk, step, id, v.tokens[id], got, want)
					}
					if want && !v.isEOS(int32(id)) {
						allowed = append(allowed, int32(id))
					}
				}
				if len(allowed) == 0 {
					break
				}
				if !m.Accept(allowed[rng.IntN(len(allowed))]) {
					t.Fatal("an allowed token was refused")
				}
			}
		}
	}
}

func popcount(mask []uint64) int {
	n := 0
	for _, w := range mask {
		n += bits.OnesCount64(w)
	}
	return n
}

// BenchmarkMask measures one mask computation with the cache off, in the
// states a generation passes through (in a free string: the plain-token fast
// path; after a key: the whole trie; in a string with maxLength, whose
// states do not repeat, the plain tokens that fit), for the demo vocabulary
// (4k) and Llama 3's (128k).
func BenchmarkMask(b *testing.B) {
	for _, vc := range []struct{ name, dir string }{
		{"demo", demoDir},
		{"llama3", filepath.Join("..", "..", "..", "shared", "testdata", "tokenizers", "llama3")},
	} {
		t0 := time.Now()
		v := testVocab(b, vc.dir, 0)
		b.Logf("vocab=%s: %d tokens, trie %d nodes (rest %d), built in %v", vc.name, v.n, len(v.all.nodes), len(v.rest.nodes), time.Since(t0))
		g := mustCompile(b, `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}},
			"nick":{"type":"string","maxLength":100}},"required":["name","age","tags","nick"]}`)
		for _, st := range []struct{ name, prefix string }{
			{"start", ``},
			{"string", `{"name":"Ada Love`},
			{"integer", `{"name":"Ada", "age":3`},
			{"array", `{"name":"Ada", "age":36, "tags":["x", `},
			{"string-maxLength", `{"name":"Ada", "age":36, "tags":[], "nick":"A`},
		} {
			b.Run("vocab="+vc.name+"/state="+st.name, func(b *testing.B) {
				m := NewMatcher(g, v)
				if !m.AcceptBytes([]byte(st.prefix)) {
					b.Fatalf("prefix %q refused", st.prefix)
				}
				mask := make([]uint64, (v.n+63)/64)
				b.ReportAllocs()
				for b.Loop() {
					clear(m.cache)
					m.Mask(mask)
				}
				b.ReportMetric(float64(popcount(mask)), "allowed")
			})
		}
	}
}

// BenchmarkMaskWalk measures a generation's mask cost per token as the
// server pays it (the cache on, Accept included): random walks of 64 tokens
// under a schema, in Llama 3's 128k vocabulary.
func BenchmarkMaskWalk(b *testing.B) {
	v := testVocab(b, filepath.Join("..", "..", "..", "shared", "testdata", "tokenizers", "llama3"), 0)
	g := mustCompile(b, `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}},
		"address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string"}},"required":["city","zip"]}},"required":["name","age","tags","address"]}`)
	mask := make([]uint64, (v.n+63)/64)
	rng := rand.New(rand.NewPCG(1, 1))
	var allowed []int32
	tokens := 0
	for b.Loop() {
		m := NewMatcher(g, v)
		for range 64 {
			m.Mask(mask)
			id := int32(-1)
			for range 64 { // most states allow most tokens
				if c := rng.Int32N(int32(v.n)); mask[c>>6]&(1<<(c&63)) != 0 {
					id = c
					break
				}
			}
			if id < 0 {
				allowed = allowed[:0]
				for i, w := range mask {
					for ; w != 0; w &= w - 1 {
						allowed = append(allowed, int32(i*64+bits.TrailingZeros64(w)))
					}
				}
				id = allowed[rng.IntN(len(allowed))]
			}
			if v.isEOS(id) {
				break
			}
			m.Accept(id)
			tokens++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(tokens), "ns/token")
}

// TestLongStringCache: masks cached along a string of maxLength 600 are
// told apart by the full character count: walking it with a plain token of
// 2^k characters, a key that kept only the count's low byte reused a mask
// of 256 fewer characters within the cache's 64 entries.
func TestLongStringCache(t *testing.T) {
	v := testVocab(t, demoDir, 2)
	long, n := int32(-1), 0
	for _, id := range v.plainByChars { // the longest of 8, 16, 32, … characters
		if c, _ := plainString(v.tokens[id]); c >= 8 && c&(c-1) == 0 {
			long, n = id, c
		}
	}
	if long < 0 {
		t.Fatal("no plain token of 8, 16, 32, … characters")
	}
	m := NewMatcher(mustCompile(t, `{"type":"string","maxLength":600}`), v)
	mask := make([]uint64, (v.n+63)/64)
	m.AcceptBytes([]byte(`"`))
	for chars := 0; ; chars += n {
		m.Mask(mask)
		for id := range v.n {
			want := v.tokens[id] != nil && m.clone().AcceptBytes(v.tokens[id])
			if got := mask[id>>6]&(1<<(id&63)) != 0; got != want {
				t.Fatalf("after %d characters: token %q: mask %v, grammar %v", chars, v.tokens[id], got, want)
			}
		}
		if !m.Accept(long) {
			if chars+n <= 600 {
				t.Fatalf("refused at %d characters", chars)
			}
			break
		}
	}
}
