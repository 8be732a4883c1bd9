package tokenize

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTokenBytes: the TokenBytes of ids that follow a first token concatenate
// to what Decode adds for them, wherever that decode is valid UTF-8 (Decode
// replaces partial characters; TokenBytes keeps the raw bytes).
func TestTokenBytes(t *testing.T) {
	for _, dir := range []string{"testdata/tinycode-llama", "testdata/tok-spm",
		filepath.Join(shared, "tokenizers", "llama2"), filepath.Join(shared, "tokenizers", "llama3")} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			tk := loadDir(t, dir)
			rng := rand.New(rand.NewPCG(1, 2))
			checked := 0
			for range 2000 {
				ids := make([]int32, 2+rng.IntN(4))
				for i := range ids {
					ids[i] = int32(rng.IntN(tk.VocabSize()))
				}
				if tk.IsSpecial(ids[0]) || tk.TokenBytes(ids[0]) == nil {
					continue
				}
				head, whole := tk.Decode(ids[:1], false), tk.Decode(ids, false)
				var got []byte
				for _, id := range ids[1:] {
					got = append(got, tk.TokenBytes(id)...)
				}
				if !utf8.Valid(got) || !utf8.ValidString(head) || strings.ContainsRune(head+whole, utf8.RuneError) || !bytes.HasPrefix([]byte(whole), []byte(head)) {
					continue
				}
				checked++
				if want := whole[len(head):]; string(got) != want {
					t.Fatalf("ids %v: TokenBytes give %q, Decode adds %q", ids, got, want)
				}
			}
			if checked < 100 {
				t.Fatalf("only %d sequences checked", checked)
			}
		})
	}
	tk := loadDir(t, "testdata/tinycode-llama")
	for _, id := range []int32{-1, int32(tk.VocabSize()) + 5} {
		if b := tk.TokenBytes(id); b != nil {
			t.Errorf("TokenBytes(%d) = %q, want nil", id, b)
		}
	}
}
