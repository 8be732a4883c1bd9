package tokenize

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// shared is the test data that sits beside the checkout.
const shared = "../../shared/testdata"

// loaded caches tokenizers across tests: the real files take a while to parse.
var loaded sync.Map // path → *Tokenizer

func loadDir(t testing.TB, dir string) *Tokenizer {
	t.Helper()
	if v, ok := loaded.Load(dir); ok {
		return v.(*Tokenizer)
	}
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Skipf("no %s (the shared test data sits beside the checkout)", dir)
	}
	tk, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	loaded.Store(dir, tk)
	return tk
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("no %s: %v", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestTokCases checks the tokenizers-generated cases of the two small
// tokenizers in testdata (byte-level and SentencePiece-style).
func TestTokCases(t *testing.T) {
	for _, dir := range []string{"testdata/tinycode-llama", "testdata/tok-spm"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			tk := loadDir(t, dir)
			var f struct {
				Cases []struct {
					Text           string  `json:"text"`
					IDs            []int32 `json:"ids"`
					Decoded        string  `json:"decoded"`
					IDsWithSpecial []int32 `json:"ids_with_special"`
				} `json:"cases"`
			}
			readJSON(t, filepath.Join(dir, "tok_cases.json"), &f)
			pass := 0
			for i, c := range f.Cases {
				ok := true
				if got := tk.Encode(c.Text, false); !slices.Equal(got, c.IDs) {
					t.Errorf("case %d: Encode(%q)\n got %v\nwant %v", i, c.Text, got, c.IDs)
					ok = false
				}
				if got := tk.Encode(c.Text, true); !slices.Equal(got, c.IDsWithSpecial) {
					t.Errorf("case %d: Encode(%q, special)\n got %v\nwant %v", i, c.Text, got, c.IDsWithSpecial)
					ok = false
				}
				if got := tk.Decode(c.IDs, false); got != c.Decoded {
					t.Errorf("case %d: Decode(%v) = %q, want %q", i, c.IDs, got, c.Decoded)
					ok = false
				}
				if ok {
					pass++
				}
			}
			t.Logf("%d/%d cases pass", pass, len(f.Cases))
		})
	}
}

// hfCases is the format of shared/testdata/tokenizers/<family>/hf_cases.json.
type hfCases struct {
	Cases []struct {
		Text               string  `json:"text"`
		IDs                []int32 `json:"ids"`
		IDsSpecial         []int32 `json:"ids_special"`
		Decoded            string  `json:"decoded"`
		DecodedSkip        string  `json:"decoded_skip"`
		DecodedSpecial     string  `json:"decoded_special"`
		DecodedSpecialSkip string  `json:"decoded_special_skip"`
	} `json:"cases"`
	DecodeCases []struct {
		Name        string  `json:"name"`
		IDs         []int32 `json:"ids"`
		Decoded     string  `json:"decoded"`
		DecodedSkip string  `json:"decoded_skip"`
	} `json:"decode_cases"`
}

var families = []string{"llama2", "llama3", "phi3", "qwen2.5", "qwen3"}

// TestHFCases checks every family's hf_cases.json: ids with and without
// special tokens and the four decodes, then the hand-made decode cases.
func TestHFCases(t *testing.T) {
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			dir := filepath.Join(shared, "tokenizers", fam)
			tk := loadDir(t, dir)
			var f hfCases
			readJSON(t, filepath.Join(dir, "hf_cases.json"), &f)
			pass := 0
			for i, c := range f.Cases {
				ok := true
				check := func(what string, got, want any) {
					if !equalAny(got, want) {
						t.Errorf("case %d %q: %s\n got %#v\nwant %#v", i, c.Text, what, got, want)
						ok = false
					}
				}
				check("ids", tk.Encode(c.Text, false), c.IDs)
				check("ids_special", tk.Encode(c.Text, true), c.IDsSpecial)
				check("decoded", tk.Decode(c.IDs, false), c.Decoded)
				check("decoded_skip", tk.Decode(c.IDs, true), c.DecodedSkip)
				check("decoded_special", tk.Decode(c.IDsSpecial, false), c.DecodedSpecial)
				check("decoded_special_skip", tk.Decode(c.IDsSpecial, true), c.DecodedSpecialSkip)
				if ok {
					pass++
				}
			}
			for _, c := range f.DecodeCases {
				if got := tk.Decode(c.IDs, false); got != c.Decoded {
					t.Errorf("decode case %s: got %q, want %q", c.Name, got, c.Decoded)
				}
				if got := tk.Decode(c.IDs, true); got != c.DecodedSkip {
					t.Errorf("decode case %s skip: got %q, want %q", c.Name, got, c.DecodedSkip)
				}
			}
			t.Logf("%d/%d cases pass, %d decode cases", pass, len(f.Cases), len(f.DecodeCases))
		})
	}
}

func equalAny(a, b any) bool {
	switch a := a.(type) {
	case []int32:
		return slices.Equal(a, b.([]int32))
	case string:
		return a == b.(string)
	}
	return false
}

// TestHFReference checks the llama.cpp hf_reference.inp/.out pairs
// (transformers' encode without special tokens).
func TestHFReference(t *testing.T) {
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			dir := filepath.Join(shared, "tokenizers", fam)
			inp, err1 := os.ReadFile(filepath.Join(dir, "hf_reference.inp"))
			out, err2 := os.ReadFile(filepath.Join(dir, "hf_reference.out"))
			if err1 != nil || err2 != nil {
				t.Skip("no hf_reference files")
			}
			tk := loadDir(t, dir)
			texts := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
			lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			if len(texts) > len(lines) {
				texts = texts[:len(lines)]
			}
			for i, text := range texts {
				var want []int32
				for _, f := range strings.Fields(lines[i]) {
					n, err := strconv.Atoi(f)
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, int32(n))
				}
				if got := tk.Encode(text, false); !slices.Equal(got, want) {
					t.Errorf("%q:\n got %v\nwant %v", text, got, want)
				}
			}
		})
	}
}

// TestConcurrentEncode checks that one Tokenizer encodes from many goroutines
// at once (the word cache is shared) with the results of a serial encode.
func TestConcurrentEncode(t *testing.T) {
	tk := loadDir(t, "testdata/tinycode-llama")
	var f struct {
		Cases []struct {
			Text string  `json:"text"`
			IDs  []int32 `json:"ids"`
		} `json:"cases"`
	}
	readJSON(t, "testdata/tinycode-llama/tok_cases.json", &f)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Go(func() {
			for i := range f.Cases {
				c := f.Cases[(i+g*31)%len(f.Cases)]
				if got := tk.Encode(c.Text, false); !slices.Equal(got, c.IDs) {
					t.Errorf("Encode(%q) = %v, want %v", c.Text, got, c.IDs)
				}
			}
		})
	}
	wg.Wait()
}

func TestTokenLookup(t *testing.T) {
	tests := []struct {
		dir, tok string
		id       int32
	}{
		{"testdata/tinycode-llama", "<|end_of_text|>", 4095},
		{"testdata/tinycode-llama", "Ġ", 220},
		{"testdata/tok-spm", "<0x0A>", 13},
		{"testdata/tok-spm", "</s>", 2},
	}
	for _, tc := range tests {
		tk := loadDir(t, tc.dir)
		if id, ok := tk.TokenID(tc.tok); !ok || id != tc.id {
			t.Errorf("%s: TokenID(%q) = %d, %v, want %d", tc.dir, tc.tok, id, ok, tc.id)
		}
		if got := tk.Token(tc.id); got != tc.tok {
			t.Errorf("%s: Token(%d) = %q, want %q", tc.dir, tc.id, got, tc.tok)
		}
	}
	tk := loadDir(t, "testdata/tinycode-llama")
	if id, ok := tk.BOS(); !ok || id != 4094 || !tk.IsSpecial(id) || tk.IsSpecial(220) || tk.VocabSize() != 4096 {
		t.Errorf("BOS() = %d, %v; VocabSize() = %d", id, ok, tk.VocabSize())
	}
}
