package tokenize

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestStream checks that streaming every hf_cases string (and its decode
// cases) one id at a time gives Decode's text, in pieces of whole characters.
func TestStream(t *testing.T) {
	dirs := []string{"testdata/tinycode-llama", "testdata/tok-spm"}
	for _, fam := range families {
		dirs = append(dirs, filepath.Join(shared, "tokenizers", fam))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			tk := loadDir(t, dir)
			var f hfCases
			readJSON(t, filepath.Join(dir, "hf_cases.json"), &f)
			if f.Cases == nil {
				var tc struct {
					Cases []struct {
						Text string `json:"text"`
					} `json:"cases"`
				}
				readJSON(t, filepath.Join(dir, "tok_cases.json"), &tc)
				for _, c := range tc.Cases {
					f.Cases = append(f.Cases, struct {
						Text               string  `json:"text"`
						IDs                []int32 `json:"ids"`
						IDsSpecial         []int32 `json:"ids_special"`
						Decoded            string  `json:"decoded"`
						DecodedSkip        string  `json:"decoded_skip"`
						DecodedSpecial     string  `json:"decoded_special"`
						DecodedSpecialSkip string  `json:"decoded_special_skip"`
					}{Text: c.Text})
				}
			}
			var lists [][]int32
			for _, c := range f.Cases {
				lists = append(lists, tk.Encode(c.Text, true))
			}
			for _, c := range f.DecodeCases {
				lists = append(lists, c.IDs)
			}
			for _, ids := range lists {
				for _, skip := range []bool{false, true} {
					s := tk.NewStream(skip)
					var b strings.Builder
					for _, id := range ids {
						piece := s.Next(id)
						if !utf8.ValidString(piece) {
							t.Errorf("%v: Next(%d) = %q is not valid UTF-8", ids, id, piece)
						}
						b.WriteString(piece)
					}
					b.WriteString(s.Flush())
					if want := tk.Decode(ids, skip); b.String() != want {
						t.Errorf("%v skip=%v: streamed %q, want %q", ids, skip, b.String(), want)
					}
				}
			}
		})
	}
}

// TestStreamHoldsPartialChars checks that byte tokens of one character come
// out together, with the last of them.
func TestStreamHoldsPartialChars(t *testing.T) {
	tests := []struct {
		dir  string
		text string
	}{
		{"testdata/tinycode-llama", "é你好🦙 ok"},
		{"testdata/tok-spm", "é你好🦙 ok"},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.dir), func(t *testing.T) {
			tk := loadDir(t, tc.dir)
			s := tk.NewStream(false)
			var got []string
			for _, id := range tk.Encode(tc.text, false) {
				if p := s.Next(id); p != "" {
					got = append(got, p)
				}
			}
			got = append(got, s.Flush())
			if strings.Join(got, "") != tc.text {
				t.Fatalf("got %q, want %q", got, tc.text)
			}
			for _, p := range got {
				if strings.ContainsRune(p, utf8.RuneError) {
					t.Errorf("piece %q has U+FFFD", p)
				}
			}
		})
	}
}
