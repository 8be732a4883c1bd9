package ingot_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ingot-llm/ingot"
	"github.com/ingot-llm/ingot/internal/demo"
)

// TestChatReusesCache: the second turn of a chat prefills only what the cache does
// not already hold.
func TestChatReusesCache(t *testing.T) {
	src, err := demo.Dir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range []string{"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"} {
		if err := os.Symlink(filepath.Join(src, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := map[string]any{
		"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
		"chat_template": "{{ bos_token }}{% for m in messages %}# {{ m.role }}:\n{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}# assistant:\n{% endif %}",
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m := load(t, dir, ingot.Options{Threads: 2})
	s, err := m.NewSession(ingot.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sp := ingot.Sampling{MaxTokens: 8}
	msgs := []ingot.Message{{Role: "user", Content: "def add(a, b):"}}
	text := drain(t, s.Chat(ctx, msgs, sp))
	r1 := s.Last()
	if text != r1.Text || r1.GenTokens == 0 {
		t.Fatalf("first turn: streamed %q, Last().Text %q, %d tokens", text, r1.Text, r1.GenTokens)
	}
	msgs = append(msgs, ingot.Message{Role: "assistant", Content: r1.Text}, ingot.Message{Role: "user", Content: "class Stack:"})
	drain(t, s.Chat(ctx, msgs, sp))
	r2 := s.Last()
	if r2.PromptEval >= r2.PromptTokens-r1.PromptTokens || r2.PromptEval == 0 {
		t.Errorf("second turn ran %d of %d prompt tokens; the first turn's %d should have come from the cache", r2.PromptEval, r2.PromptTokens, r1.PromptTokens)
	}
}
