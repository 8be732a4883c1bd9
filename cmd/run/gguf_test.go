package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ggufDir is the GGUF oracle data beside the checkout.
const ggufDir = "../../../shared/testdata/gguf"

// TestGGUFJSON checks the -json contract on every oracle GGUF: run -model
// x.gguf -prompt-ids … -temp 0 -json gives the exact reference's greedy ids,
// and the load line names the file's type mix.
func TestGGUFJSON(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(ggufDir, "*", "model.gguf"))
	if len(files) == 0 {
		t.Fatal("GGUF oracle data missing (../shared must sit beside the checkout)")
	}
	for _, file := range files {
		t.Run(filepath.Base(filepath.Dir(file)), func(t *testing.T) {
			var ref struct {
				InputIDs []int32 `json:"input_ids"`
				Exact    struct {
					GreedyNoStop []int32 `json:"greedy_nostop"`
				} `json:"exact"`
			}
			b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "ref.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &ref); err != nil {
				t.Fatal(err)
			}
			out, stderr := runCLI(t, "-model", file, "-backend", "cpu", "-prompt-ids", commaIDs(ref.InputIDs), "-temp", "0", "-n", "16", "-ignore-eos", "-json")
			var got jsonResult
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
			}
			if !slices.Equal(got.IDs, ref.Exact.GreedyNoStop) {
				t.Errorf("ids %v, want %v", got.IDs, ref.Exact.GreedyNoStop)
			}
			if !strings.Contains(stderr, "gguf ") || !strings.Contains(stderr, "F32×") {
				t.Errorf("load line names no GGUF type mix: %q", stderr)
			}
		})
	}
}

// TestGGUFText runs the tiny llama GGUF on its prompt as text: the tokenizer
// comes from the file, and the prompt's ids are llama.cpp's.
func TestGGUFText(t *testing.T) {
	file := filepath.Join(ggufDir, "llama-Q8_0", "model.gguf")
	var ref struct {
		PromptText string  `json:"prompt_text"`
		InputIDs   []int32 `json:"input_ids"`
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	out, _ := runCLI(t, "-model", file, "-backend", "cpu", "-prompt", ref.PromptText, "-temp", "0", "-n", "4", "-json")
	var got jsonResult
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	if !slices.Equal(got.PromptIDs, ref.InputIDs) {
		t.Errorf("prompt ids %v, want %v", got.PromptIDs, ref.InputIDs)
	}
	out, _ = runCLI(t, "tokenize", "-model", file, "-json", "--", ref.PromptText)
	var tok struct {
		IDs []int32 `json:"ids"`
	}
	if err := json.Unmarshal([]byte(out), &tok); err != nil {
		t.Fatalf("tokenize -json: %v\n%s", err, out)
	}
	if !slices.Equal(tok.IDs, ref.InputIDs[1:]) && !slices.Equal(tok.IDs, ref.InputIDs) {
		t.Errorf("tokenize: %v, want %v (with or without BOS)", tok.IDs, ref.InputIDs)
	}
	out, _ = runCLI(t, "chat-template", "-model", file, "-messages", writeMessages(t), "-add-generation-prompt")
	if want := "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWrite a function.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"; !strings.Contains(out, want) {
		t.Errorf("chat-template: %q, want %q", out, want)
	}
}

func writeMessages(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "messages.json")
	if err := os.WriteFile(p, []byte(`[{"role":"user","content":"Write a function."}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
