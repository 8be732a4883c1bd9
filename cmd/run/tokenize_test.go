package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const (
	tinycode = "../../tokenize/testdata/tinycode-llama"
	tokSPM   = "../../tokenize/testdata/tok-spm"
	shared   = "../../../shared/testdata/tokenizers"
)

// tokCase is one case of tok_cases.json (HF tokenizers' output).
type tokCase struct {
	Text           string  `json:"text"`
	IDs            []int32 `json:"ids"`
	Tokens         []string
	Decoded        string  `json:"decoded"`
	IDsWithSpecial []int32 `json:"ids_with_special"`
}

func readTokCases(t *testing.T, dir string) []tokCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "tok_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Cases []tokCase }
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f.Cases
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, " ")
}

func TestRunTokenize(t *testing.T) {
	for _, dir := range []string{tinycode, tokSPM} {
		cases := readTokCases(t, dir)
		for i, c := range cases {
			if c.Text == "" || strings.HasPrefix(c.Text, "-") || i%7 != 0 {
				continue // every 7th case keeps the test short
			}
			name := filepath.Base(dir) + "/" + strconv.Itoa(i)
			t.Run(name, func(t *testing.T) {
				tests := []struct {
					args  []string
					stdin string
					want  string
				}{
					{[]string{"-model", dir, c.Text}, "", joinIDs(c.IDs) + "\n"},
					{[]string{"-special", "-tokenizer", filepath.Join(dir, "tokenizer.json"), "--", c.Text}, "", joinIDs(c.IDsWithSpecial) + "\n"},
					{[]string{"-model", dir, "-stdin"}, c.Text, joinIDs(c.IDs) + "\n"},
					{[]string{"-model", dir, "-decode", strings.ReplaceAll(joinIDs(c.IDs), " ", ",")}, "", c.Decoded},
				}
				for _, tc := range tests {
					var out, errOut bytes.Buffer
					if code := runTokenize(tc.args, strings.NewReader(tc.stdin), &out, &errOut); code != 0 {
						t.Fatalf("%q: exit %d: %s", tc.args, code, errOut.String())
					}
					if out.String() != tc.want {
						t.Errorf("%q:\n got %q\nwant %q", tc.args, out.String(), tc.want)
					}
				}
			})
		}
	}
}

func TestRunTokenizeJSON(t *testing.T) {
	c := readTokCases(t, tinycode)[20]
	var out, errOut bytes.Buffer
	if code := runTokenize([]string{"-json", "-model", tinycode, "--", c.Text}, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got struct {
		IDs    []int32  `json:"ids"`
		Tokens []string `json:"tokens"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if joinIDs(got.IDs) != joinIDs(c.IDs) || strings.Join(got.Tokens, "|") != strings.Join(c.Tokens, "|") {
		t.Errorf("%q: got %+v, want ids %v tokens %q", c.Text, got, c.IDs, c.Tokens)
	}
}

func TestRunTokenizeErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"no source", []string{"hello"}, 2},
		{"two sources", []string{"-model", tinycode, "-tokenizer", "x.json", "hello"}, 2},
		{"no text", []string{"-model", tinycode}, 2},
		{"bad flag", []string{"-nope"}, 2},
		{"missing dir", []string{"-model", "testdata/nonexistent", "hello"}, 1},
		{"bad ids", []string{"-model", tinycode, "-decode", "1,x"}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := runTokenize(tc.args, strings.NewReader(""), &out, &errOut); code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errOut.String())
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q, want nothing", out.String())
			}
		})
	}
}

// TestRunChatTemplate renders the shared chat_cases.json conversations through
// the command and compares the bytes (or the raised message).
func TestRunChatTemplate(t *testing.T) {
	for _, fam := range []string{"llama3", "phi3", "qwen2.5", "qwen3", "gemma"} {
		dir := filepath.Join(shared, fam)
		data, err := os.ReadFile(filepath.Join(dir, "chat_cases.json"))
		if err != nil {
			t.Skipf("no shared test data: %v", err)
		}
		var f struct {
			Cases []struct {
				Name                 string          `json:"name"`
				Messages             json.RawMessage `json:"messages"`
				AddGenerationPrompt  bool            `json:"add_generation_prompt"`
				ContinueFinalMessage bool            `json:"continue_final_message"`
				Tools                json.RawMessage `json:"tools"`
				Kwargs               json.RawMessage `json:"kwargs"`
				Text                 *string         `json:"text"`
				Error                string          `json:"error"`
			} `json:"cases"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		for i, c := range f.Cases {
			t.Run(fam+"/"+c.Name, func(t *testing.T) {
				tmp := t.TempDir()
				msgs := filepath.Join(tmp, "messages.json")
				if err := os.WriteFile(msgs, c.Messages, 0o644); err != nil {
					t.Fatal(err)
				}
				args := []string{"-messages", msgs}
				// Loading a real tokenizer.json takes a while: -model only once.
				if fam == "gemma" || i > 0 {
					args = append(args, "-tokenizer-config", filepath.Join(dir, "tokenizer_config.json"))
				} else {
					args = append(args, "-model", dir)
				}
				if c.AddGenerationPrompt {
					args = append(args, "-add-generation-prompt")
				}
				if c.ContinueFinalMessage {
					args = append(args, "-continue-final-message")
				}
				if c.Tools != nil {
					tools := filepath.Join(tmp, "tools.json")
					if err := os.WriteFile(tools, c.Tools, 0o644); err != nil {
						t.Fatal(err)
					}
					args = append(args, "-tools", tools)
				}
				if c.Kwargs != nil {
					args = append(args, "-vars", string(c.Kwargs))
				}
				var out, errOut bytes.Buffer
				code := runChatTemplate(args, nil, &out, &errOut)
				if c.Error != "" {
					want := strings.TrimPrefix(c.Error, "TemplateError: ") + "\n"
					if code == 0 || errOut.String() != want || out.Len() != 0 {
						t.Errorf("exit %d, stdout %q, stderr %q; want failure with %q", code, out.String(), errOut.String(), want)
					}
					return
				}
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errOut.String())
				}
				if out.String() != *c.Text {
					t.Errorf("\n got %q\nwant %q", out.String(), *c.Text)
				}
			})
		}
	}
}
