package tokenize

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzLoad checks that any tokenizer.json either loads or returns an error,
// and that a tokenizer that loads encodes and decodes without panicking.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}`,
		`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]], "ignore_merges": true}}`,
		`{"normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
		  "added_tokens": [{"id": 3, "content": "<s>", "special": true, "normalized": true}],
		  "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
		  "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true, "vocab": {"<unk>": 0, "<0x41>": 1, "▁": 2, "a": 4, "▁a": 5}, "merges": ["▁ a"]}}`,
		`{"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+|\\w+"}, "behavior": "MergedWithPrevious", "invert": true}, {"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}]},
		  "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}], "special_tokens": {"<s>": {"ids": [0]}}},
		  "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3}, "merges": ["a b"]}}`,
		`{"pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true}, "normalizer": {"type": "NFKC"},
		  "added_tokens": [{"id": 9, "content": "<|x|>", "special": true, "lstrip": true, "rstrip": true, "single_word": true}],
		  "post_processor": {"type": "RobertaProcessing", "cls": ["<s>", 0], "sep": ["</s>", 1]},
		  "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"}, "model": {"type": "BPE", "vocab": {"▁": 0, "x": 1}, "merges": []}}`,
		`{"model": {"type": "Unigram"}}`,
		`{"model": {"type": "BPE", "vocab": {"a": 99999999}, "merges": ["a b c"]}}`,
		`{"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "("}, "behavior": "Isolated"}, "model": {"type": "BPE", "vocab": {}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tk, err := parse(data, nil)
		if err != nil {
			if tk != nil {
				t.Fatal("tokenizer and error")
			}
			return
		}
		for _, s := range []string{"", "ab ab", " a<s>b <|x|> ", "é\x00\xff🦙\r\n\t  x"} {
			for _, special := range []bool{false, true} {
				ids := tk.Encode(s, special)
				tk.Decode(ids, false)
				tk.Decode(ids, true)
				st := tk.NewStream(false)
				for _, id := range ids {
					st.Next(id)
				}
				st.Flush()
			}
		}
		tk.Decode([]int32{-1, 0, 1, 2, 3, 1 << 30}, false)
	})
}

// FuzzEncode checks that the byte-level tokenizer round-trips any valid
// UTF-8 text without special tokens, that the SentencePiece one does not
// panic, and that streaming equals Decode.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "hello world", " \n\n  x", "it's 12345 'RE", "é你好🦙\u200d\u00a0", "<|end_of_text|>a<s>", "\xff\xfe"} {
		f.Add(s)
	}
	tiny, err := Load("testdata/tinycode-llama")
	if err != nil {
		f.Fatal(err)
	}
	spm, err := Load("testdata/tok-spm")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tk := range []*Tokenizer{tiny, spm} {
			ids := tk.Encode(s, true)
			text := tk.Decode(ids, false)
			st := tk.NewStream(false)
			var b strings.Builder
			for _, id := range ids {
				b.WriteString(st.Next(id))
			}
			b.WriteString(st.Flush())
			if b.String() != text {
				t.Fatalf("stream %q != decode %q", b.String(), text)
			}
		}
		if !utf8.ValidString(s) || strings.Contains(s, "<|begin_of_text|>") || strings.Contains(s, "<|end_of_text|>") {
			return
		}
		if got := tiny.Decode(tiny.Encode(s, false), false); got != s {
			t.Fatalf("decode(encode(%q)) = %q", s, got)
		}
	})
}

// FuzzSplit checks the hand-written splitters against regexp2 running the
// same patterns.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"Hello, world! it's 2024...\n\n  x", "  \t\r\n  y'll'VE", "١٢٣ abc١٢٣٤ ‐—x", "a\u00a0\u2028b  "} {
		f.Add(s)
	}
	pats := []string{patternLlama3, patternQwen2, patternGPT2}
	var res []matcher
	for _, p := range pats {
		m, err := newMatcher(patternJSON{Regex: &p})
		if err != nil {
			f.Fatal(err)
		}
		if _, ok := m.(splitter); !ok {
			f.Fatalf("%q has no splitter", p)
		}
		pp := "(?:" + p + ")" // not the known string: forces regexp2
		re, err := newMatcher(patternJSON{Regex: &pp})
		if err != nil {
			f.Fatal(err)
		}
		res = append(res, m, re)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) || strings.ContainsRune(s, 'ſ') || strings.ContainsRune(s, 'K') {
			return // regexp2 folds case differently from Oniguruma for these
		}
		for i := 0; i < len(res); i += 2 {
			got := res[i].matches(nil, s)
			want := res[i+1].matches(nil, s)
			if len(got) != len(want) {
				t.Fatalf("pattern %d on %q:\n got %v\nwant %v", i/2, s, got, want)
			}
			for j := range got {
				if got[j] != want[j] {
					t.Fatalf("pattern %d on %q:\n got %v\nwant %v", i/2, s, got, want)
				}
			}
		}
	})
}

// TestLoadErrors checks that bad files give errors naming the field.
func TestLoadErrors(t *testing.T) {
	tests := []struct {
		json, want string
	}{
		{`{}`, "model: missing"},
		{`{"model": {"type": "WordPiece"}}`, `model.type: unsupported model "WordPiece"`},
		{`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}`, "model.merges[0]"},
		{`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a"]}}`, "model.merges[0]"},
		{`{"model": {"type": "BPE", "vocab": {"a": -1}}}`, `model.vocab["a"]`},
		{`{"model": {"type": "BPE", "vocab": {}, "unk_token": "<unk>"}}`, "model.unk_token"},
		{`{"normalizer": {"type": "Bert"}, "model": {"type": "BPE", "vocab": {}}}`, "normalizer.type"},
		{`{"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "("}, "behavior": "Isolated"}]}, "model": {"type": "BPE", "vocab": {}}}`, "pre_tokenizer.pretokenizers[0].pattern"},
		{`{"pre_tokenizer": {"type": "Split", "pattern": {"String": "x"}, "behavior": "Bad"}, "model": {"type": "BPE", "vocab": {}}}`, "pre_tokenizer.behavior"},
		{`{"decoder": {"type": "Sequence", "decoders": [{"type": "CTC"}]}, "model": {"type": "BPE", "vocab": {}}}`, "decoder.decoders[0].type"},
		{`{"post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>"}}]}, "model": {"type": "BPE", "vocab": {}}}`, "post_processor.single[0]"},
		{`{"added_tokens": [{"id": 1, "content": ""}], "model": {"type": "BPE", "vocab": {}}}`, "added_tokens[0].content"},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		path := dir + "/tokenizer.json"
		if err := os.WriteFile(path, []byte(tc.json), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadFile(path, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "tokenize: "+path+": ") {
			t.Errorf("%s: got %v, want an error naming %q", tc.json, err, tc.want)
		}
	}
}
