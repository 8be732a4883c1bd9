package tokenize

import (
	"testing"
	"unicode/utf8"

	"github.com/ingot-llm/ingot/gguf"
)

// FuzzFromGGUF: any GGUF metadata either builds a tokenizer or gives an error;
// a tokenizer that builds encodes (both modes) and decodes without panicking.
// The seed corpus is testdata/fuzz/FuzzFromGGUF plus the files made here.
func FuzzFromGGUF(f *testing.F) {
	toks := ggufKV{"tokenizer.ggml.tokens", []string{"a", "b", "ab", "<s>", "<0x41>", "▁", "▁a"}}
	types := ggufKV{"tokenizer.ggml.token_type", []int32{1, 1, 1, 3, 6, 1, 4}}
	f.Add(ggufBytes(ggufKV{"tokenizer.ggml.model", "gpt2"}, ggufKV{"tokenizer.ggml.pre", "qwen2"}, toks, types,
		ggufKV{"tokenizer.ggml.merges", []string{"a b"}}, ggufKV{"tokenizer.ggml.bos_token_id", uint32(3)},
		ggufKV{"tokenizer.chat_template", "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}"}))
	f.Add(ggufBytes(ggufKV{"tokenizer.ggml.model", "llama"}, toks, types,
		ggufKV{"tokenizer.ggml.bos_token_id", uint32(3)}, ggufKV{"tokenizer.ggml.unknown_token_id", uint32(0)}))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := gguf.Parse("fuzz.gguf", b)
		if err != nil {
			return
		}
		tk, err := FromGGUF(file)
		if err != nil {
			return
		}
		for _, s := range []string{"", "ab a<s>b", "▁a\x00é", "<0x41>  \n\t12345"} {
			ids := tk.Encode(s, true)
			tk.EncodeLiteral(s, true)
			if out := tk.Decode(ids, false); !utf8.ValidString(out) && utf8.ValidString(s) && len(out) > 1<<20 {
				t.Fatalf("decode of %v: %d bytes", ids, len(out))
			}
		}
	})
}
