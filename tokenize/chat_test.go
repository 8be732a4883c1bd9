package tokenize

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// chatCase is one case of shared/testdata/tokenizers/<family>/chat_cases.json.
type chatCase struct {
	Name                 string            `json:"name"`
	Messages             []Message         `json:"messages"`
	AddGenerationPrompt  bool              `json:"add_generation_prompt"`
	ContinueFinalMessage bool              `json:"continue_final_message"`
	Tools                []json.RawMessage `json:"tools"`
	Kwargs               map[string]any    `json:"kwargs"`
	Text                 *string           `json:"text"`
	Error                string            `json:"error"`
	IDs                  []int32           `json:"ids"`
	IDsTokenizers        []int32           `json:"ids_tokenizers"`
}

func (c chatCase) options() ChatOptions {
	o := ChatOptions{AddGenerationPrompt: c.AddGenerationPrompt, ContinueFinalMessage: c.ContinueFinalMessage, Extra: c.Kwargs}
	for _, t := range c.Tools {
		o.Tools = append(o.Tools, t)
	}
	return o
}

// TestChatCases renders every chat_cases.json conversation and compares the
// text (or the raised error) byte for byte, then the ids of the text.
func TestChatCases(t *testing.T) {
	for _, fam := range []string{"llama3", "phi3", "qwen2.5", "qwen3", "gemma"} {
		t.Run(fam, func(t *testing.T) {
			dir := filepath.Join(shared, "tokenizers", fam)
			var f struct {
				Cases []chatCase `json:"cases"`
			}
			readJSON(t, filepath.Join(dir, "chat_cases.json"), &f)
			var tk *Tokenizer
			var tpl *ChatTemplate
			var err error
			if fam == "gemma" {
				tpl, err = LoadChatTemplate(filepath.Join(dir, "tokenizer_config.json"))
			} else {
				tk = loadDir(t, dir)
				tpl, err = tk.ChatTemplate()
			}
			if err != nil {
				t.Fatal(err)
			}
			pass := 0
			for _, c := range f.Cases {
				got, err := tpl.Render(c.Messages, c.options())
				switch {
				case c.Error != "":
					var te *TemplateError
					if !errors.As(err, &te) || "TemplateError: "+te.Message != c.Error {
						t.Errorf("%s: got (%q, %v), want error %q", c.Name, got, err, c.Error)
						continue
					}
				case err != nil:
					t.Errorf("%s: %v", c.Name, err)
					continue
				case got != *c.Text:
					t.Errorf("%s:\n got %q\nwant %q", c.Name, got, *c.Text)
					continue
				}
				if tk != nil && c.Text != nil {
					want := c.IDs
					if c.IDsTokenizers != nil {
						want = c.IDsTokenizers
					}
					if ids := tk.Encode(got, false); !slices.Equal(ids, want) {
						t.Errorf("%s: ids\n got %v\nwant %v", c.Name, ids, want)
						continue
					}
				}
				pass++
			}
			t.Logf("%d/%d conversations pass", pass, len(f.Cases))
		})
	}
}

// TestChatTemplateBuiltin checks that tokenizers without a chat_template get
// the built-in template of their family, and the Python-compatible helpers.
func TestChatTemplateBuiltin(t *testing.T) {
	msgs := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}}
	tests := []struct {
		name, dir, want string
	}{
		{"mistral for llama2", filepath.Join(shared, "tokenizers", "llama2"), "<s> [INST] Be brief.\n\nHi [/INST]"},
		{"none for tinycode", "testdata/tinycode-llama", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tk := loadDir(t, tc.dir)
			got, err := tk.ApplyChatTemplate(msgs, ChatOptions{})
			if tc.want == "" {
				if !errors.Is(err, ErrNoChatTemplate) {
					t.Errorf("got (%q, %v), want ErrNoChatTemplate", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestChatTemplateJSON(t *testing.T) {
	tpl := NewChatTemplate(`{{ tools | tojson }}|{{ x | tojson(indent=2) }}|{{ "  a b\u001f" | trim }}|{{ "a  b\tc".split() | length }}`, nil)
	got, err := tpl.Render(nil, ChatOptions{
		Tools: []any{json.RawMessage(`{"z": 1, "a": [1.5, 1e20, 1.0, "é\n<"], "m": {}}`)},
		Extra: map[string]any{"x": map[string]any{"b": true, "a": nil}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"z": 1, "a": [1.5, 1e+20, 1.0, "é\n<"], "m": {}}]|{
  "a": null,
  "b": true
}|a b|3`
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if !strings.Contains(want, "é") {
		t.Fatal("bad test")
	}
}
