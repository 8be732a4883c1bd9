package tokenize

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot/gguf"
)

// ggufTokDir holds the vocab-only GGUFs and llama.cpp's ids for them.
const ggufTokDir = "../../shared/testdata/gguf/tokenizers"

type ggufCase struct {
	I               int               `json:"i"`
	Detok           map[string]string `json:"detok"`
	Text            string            `json:"text"`
	IDs             []int32           `json:"ids"`
	IDsParseSpecial []int32           `json:"ids_parse_special"`
	IDsAddSpecial   []int32           `json:"ids_add_special"`
	IDsAddParse     []int32           `json:"ids_add_parse"`
}

type ggufChatCase struct {
	Name     string          `json:"name"`
	Messages json.RawMessage `json:"messages"`
	AddGen   bool            `json:"add_generation_prompt"`
	Text     string          `json:"text"`
	IDs      []int32         `json:"ids"`
	IDsPS    []int32         `json:"ids_parse_special"`
}

type ggufCases struct {
	Cases     []ggufCase     `json:"cases"`
	ChatCases []ggufChatCase `json:"chat_cases"`
}

func readGGUFCases(t *testing.T, file string) *ggufCases {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ggufTokDir, file))
	if err != nil {
		t.Fatalf("oracle data missing (../shared must sit beside the checkout): %v", err)
	}
	var c ggufCases
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// TestGGUFTokenizers: for every string of each vocab-only GGUF's cases, the ids
// equal llama.cpp's with and without parse_special and add_special; so do the
// rendered chat texts.
func TestGGUFTokenizers(t *testing.T) {
	for _, tc := range []struct{ gguf, cases, pre string }{
		{"llama3.vocab.gguf", "llama3.llamacpp_cases.json", "llama-bpe"},
		{"qwen3.vocab.gguf", "qwen3.llamacpp_cases.json", "qwen2"},
		{"llama2.vocab.gguf", "llama2.llamacpp_cases.json", ""},
		{"../llama-F16/model.gguf", "tinyvocab_cases.json", "llama-bpe"},
	} {
		t.Run(tc.gguf, func(t *testing.T) {
			tk, err := LoadGGUF(filepath.Join(ggufTokDir, tc.gguf))
			if err != nil {
				t.Fatal(err)
			}
			c := readGGUFCases(t, tc.cases)
			bad := 0
			check := func(what string, i int, text string, got, want []int32) {
				if !slices.Equal(got, want) {
					if bad++; bad <= 8 {
						t.Errorf("case %d %s %q:\n got %v\nwant %v", i, what, text, got, want)
					}
				}
			}
			for i, cs := range c.Cases {
				check("parse_special", i, cs.Text, tk.Encode(cs.Text, false), cs.IDsParseSpecial)
				check("add+parse_special", i, cs.Text, tk.Encode(cs.Text, true), cs.IDsAddParse)
				check("literal", i, cs.Text, tk.EncodeLiteral(cs.Text, false), cs.IDs)
				check("add+literal", i, cs.Text, tk.EncodeLiteral(cs.Text, true), cs.IDsAddSpecial)
			}
			// Decoding gives llama_detokenize's text, except that llama.cpp's
			// llama-bpe detokenizer also removes the space before .,!? and some
			// contractions (clean_spaces, as transformers 4 did); ingot decodes
			// as tokenizer.json and transformers 5 do, so for those files the
			// test applies llama.cpp's rule to ingot's text first.
			for i, cs := range c.Cases {
				want, ok := cs.Detok["text"]
				if !ok {
					continue // not valid UTF-8: llama.cpp returns raw bytes, ingot U+FFFD
				}
				got := tk.Decode(cs.IDsParseSpecial, false)
				if tc.pre == "llama-bpe" {
					got = cleanSpaces(got)
				}
				if got != want {
					if bad++; bad <= 8 {
						t.Errorf("case %d decode: got %q, want %q", i, got, want)
					}
				}
			}
			for _, cc := range c.ChatCases {
				want := cc.IDsPS
				if want == nil {
					want = cc.IDs
				}
				check("chat "+cc.Name, -1, cc.Text, tk.Encode(cc.Text, false), want)
			}
			t.Logf("%d strings × 4 modes and decoded, %d chat texts; %d mismatches", len(c.Cases), len(c.ChatCases), bad)
		})
	}
}

// TestGGUFChatTemplate renders conversations with tokenizer.chat_template of
// the GGUFs through the Jinja engine: the tiny models' template against
// jinja2's rendering, and the Llama 3 and Qwen3 templates against every
// shared/testdata/tokenizers/<family>/chat_cases.json text (transformers').
func TestGGUFChatTemplate(t *testing.T) {
	tiny, err := LoadGGUF(filepath.Join(ggufTokDir, "../llama-F16/model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := tiny.ChatTemplate()
	if err != nil {
		t.Fatal(err)
	}
	for _, cc := range readGGUFCases(t, "tinyvocab_cases.json").ChatCases {
		var msgs []Message
		if err := json.Unmarshal(cc.Messages, &msgs); err != nil {
			t.Fatal(err)
		}
		got, err := tpl.Render(msgs, ChatOptions{AddGenerationPrompt: cc.AddGen})
		if err != nil || got != cc.Text {
			t.Errorf("tiny %s: got (%q, %v), want %q", cc.Name, got, err, cc.Text)
		}
	}
	for _, fam := range []string{"llama3", "qwen3"} {
		tk, err := LoadGGUF(filepath.Join(ggufTokDir, fam+".vocab.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		tpl, err := tk.ChatTemplate()
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Cases []chatCase `json:"cases"`
		}
		readJSON(t, filepath.Join(shared, "tokenizers", fam, "chat_cases.json"), &f)
		pass := 0
		for _, c := range f.Cases {
			if c.Text == nil {
				continue // cases where transformers raises: TestChatCases covers the error text
			}
			got, err := tpl.Render(c.Messages, c.options())
			if err != nil || got != *c.Text {
				t.Errorf("%s %s: got (%q, %v), want %q", fam, c.Name, got, err, *c.Text)
				continue
			}
			pass++
		}
		t.Logf("%s: %d of %d rendered texts equal", fam, pass, len(f.Cases))
	}
}

// cleanSpaces is llama.cpp's clean_spaces step of llama_detokenize: drop the
// space before ? ! . , and before 's 'm 're 've.
func cleanSpaces(s string) string {
	b := []byte(s)
	var out []byte
	for i := 0; i < len(b); i++ {
		if i > 0 && b[i-1] == ' ' && len(out) > 0 && out[len(out)-1] == ' ' {
			rest := string(b[i:])
			if strings.ContainsRune("?!.,", rune(b[i])) || strings.HasPrefix(rest, "'s") || strings.HasPrefix(rest, "'m") ||
				strings.HasPrefix(rest, "'re") || strings.HasPrefix(rest, "'ve") {
				out = out[:len(out)-1]
			}
		}
		out = append(out, b[i])
	}
	return string(out)
}

// ggufKV is one metadata entry for ggufBytes: a string, uint32, int32,
// []string or []int32 value.
type ggufKV struct {
	key string
	val any
}

// ggufBytes encodes a tensor-less GGUF v3 file.
func ggufBytes(kvs ...ggufKV) []byte {
	le := binary.LittleEndian
	b := append([]byte("GGUF"), 3, 0, 0, 0)
	b = le.AppendUint64(b, 0)
	b = le.AppendUint64(b, uint64(len(kvs)))
	str := func(s string) { b = le.AppendUint64(b, uint64(len(s))); b = append(b, s...) }
	for _, kv := range kvs {
		str(kv.key)
		switch v := kv.val.(type) {
		case string:
			b = le.AppendUint32(b, uint32(gguf.TypeString))
			str(v)
		case uint32:
			b = le.AppendUint32(b, uint32(gguf.TypeUint32))
			b = le.AppendUint32(b, v)
		case []string:
			b = le.AppendUint32(b, uint32(gguf.TypeArray))
			b = le.AppendUint32(b, uint32(gguf.TypeString))
			b = le.AppendUint64(b, uint64(len(v)))
			for _, s := range v {
				str(s)
			}
		case []int32:
			b = le.AppendUint32(b, uint32(gguf.TypeArray))
			b = le.AppendUint32(b, uint32(gguf.TypeInt32))
			b = le.AppendUint64(b, uint64(len(v)))
			for _, x := range v {
				b = le.AppendUint32(b, uint32(x))
			}
		}
	}
	return b
}

// TestGGUFTokenizerErrors: each broken tokenizer is one error naming the key.
func TestGGUFTokenizerErrors(t *testing.T) {
	toks := ggufKV{"tokenizer.ggml.tokens", []string{"a", "b", "ab"}}
	for _, tc := range []struct {
		name string
		kvs  []ggufKV
		want string
	}{
		{"no model", []ggufKV{toks}, `missing key "tokenizer.ggml.model"`},
		{"model type", []ggufKV{{"tokenizer.ggml.model", uint32(1)}, toks}, `key "tokenizer.ggml.model" is uint32, want string`},
		{"unknown model", []ggufKV{{"tokenizer.ggml.model", "bert"}, toks}, `key "tokenizer.ggml.model": tokenizer model "bert" is not supported`},
		{"no tokens", []ggufKV{{"tokenizer.ggml.model", "gpt2"}}, `missing key "tokenizer.ggml.tokens"`},
		{"unknown pre", []ggufKV{{"tokenizer.ggml.model", "gpt2"}, {"tokenizer.ggml.pre", "mystery"}, toks}, `key "tokenizer.ggml.pre": pre-tokenizer "mystery" is not supported`},
		{"types", []ggufKV{{"tokenizer.ggml.model", "gpt2"}, toks, {"tokenizer.ggml.token_type", []int32{1}}}, `key "tokenizer.ggml.token_type" has 1 entries for 3 tokens`},
		{"no scores", []ggufKV{{"tokenizer.ggml.model", "llama"}, toks}, `key "tokenizer.ggml.scores" has 0 entries for 3 tokens`},
		{"bad merge", []ggufKV{{"tokenizer.ggml.model", "gpt2"}, toks, {"tokenizer.ggml.merges", []string{"a c"}}}, `model.merges[0]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := gguf.Parse("x.gguf", ggufBytes(tc.kvs...))
			if err != nil {
				t.Fatal(err)
			}
			_, err = FromGGUF(f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want …%s…", err, tc.want)
			}
		})
	}
	f, _ := gguf.Parse("x.gguf", ggufBytes(ggufKV{"tokenizer.ggml.model", "gpt2"}, toks, ggufKV{"tokenizer.ggml.merges", []string{"a b"}}))
	tk, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if ids := tk.Encode("abba", false); !slices.Equal(ids, []int32{2, 1, 0}) {
		t.Errorf("abba = %v, want [2 1 0]", ids)
	}
}
