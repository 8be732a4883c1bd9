// Package ingot runs Llama-family language models from Hugging Face and
// mlx-community model directories in pure Go: text in, streamed text out.
//
//	llm, err := ingot.Load(ctx, "path/to/model", ingot.Options{})
//	res, err := llm.Generate(ctx, "def fib(n):", ingot.GenerateOptions{MaxTokens: 64},
//		func(text string) error { fmt.Print(text); return nil })
//
// It joins package model (weights, KV cache, decoding on token ids) and package
// tokenize (tokenizer.json, chat templates). Use those directly for token-level
// control.
package ingot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ingot-llm/ingot/model"
	"github.com/ingot-llm/ingot/tokenize"
)

// Options controls Load; see [model.Options].
type Options = model.Options

// An LLM is a loaded model and its tokenizer. It is not safe for concurrent use.
type LLM struct {
	Model     *model.Model
	Tokenizer *tokenize.Tokenizer // nil when the directory has no tokenizer.json
	LoadTime  time.Duration
}

// Load opens a model directory: config.json, *.safetensors and, when present,
// tokenizer.json and tokenizer_config.json.
func Load(ctx context.Context, dir string, o Options) (*LLM, error) {
	t0 := time.Now()
	m, err := model.Load(ctx, dir, o)
	if err != nil {
		return nil, err
	}
	l := &LLM{Model: m}
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err == nil {
		if l.Tokenizer, err = tokenize.Load(dir); err != nil {
			m.Close()
			return nil, err
		}
	}
	l.LoadTime = time.Since(t0)
	return l, nil
}

// Close releases the model.
func (l *LLM) Close() error { return l.Model.Close() }

// GenerateOptions controls decoding: the sampling knobs of [model.GenerateOptions]
// plus stop strings.
type GenerateOptions struct {
	model.GenerateOptions
	Stop    []string          // generation ends before the first occurrence of any of these
	OnToken func(model.Token) // called with every generated token, before its text; may be nil
}

// Result is a finished generation.
type Result struct {
	*model.Result
	PromptIDs []int32
	Text      string // the generated text, stop string excluded
}

// Generate tokenizes prompt (with the tokenizer's special tokens, e.g. BOS) and
// continues it, streaming text to onText as it becomes valid UTF-8.
func (l *LLM) Generate(ctx context.Context, prompt string, o GenerateOptions, onText func(string) error) (*Result, error) {
	if l.Tokenizer == nil {
		return nil, errors.New("ingot: the model directory has no tokenizer.json (pass token ids with GenerateIDs)")
	}
	return l.GenerateIDs(ctx, l.Tokenizer.Encode(prompt, true), o, onText)
}

// Chat renders msgs with the model's chat template (with the generation prompt)
// and generates the assistant's reply. The KV cache keeps earlier turns, so only
// the new turn is prefilled.
func (l *LLM) Chat(ctx context.Context, msgs []tokenize.Message, o GenerateOptions, onText func(string) error) (*Result, error) {
	if l.Tokenizer == nil {
		return nil, errors.New("ingot: the model directory has no tokenizer.json")
	}
	text, err := l.Tokenizer.ApplyChatTemplate(msgs, tokenize.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		return nil, err
	}
	// The template writes BOS itself where the model wants one.
	return l.GenerateIDs(ctx, l.Tokenizer.Encode(text, false), o, onText)
}

// GenerateIDs continues a tokenized prompt. Text is streamed (and stop strings
// honoured) only when the directory has a tokenizer.
func (l *LLM) GenerateIDs(ctx context.Context, prompt []int32, o GenerateOptions, onText func(string) error) (*Result, error) {
	res := &Result{PromptIDs: prompt}
	var stream *tokenize.Stream
	if l.Tokenizer != nil {
		stream = l.Tokenizer.NewStream(false)
	}
	var text strings.Builder // everything decoded so far
	sent := 0                // bytes of text passed to onText
	stopped := false
	var cbErr error
	flush := func(final bool) {
		s := text.String()
		end := len(s)
		if cut := stopIndex(s, o.Stop); cut >= 0 {
			end, stopped = cut, true
		} else if !final {
			end = len(s) - heldBack(s, o.Stop) // a stop string may still begin here
		}
		if end > sent && onText != nil && cbErr == nil {
			cbErr = onText(s[sent:end])
		}
		sent = max(sent, end)
	}
	r, err := l.Model.Generate(ctx, prompt, o.GenerateOptions, func(t model.Token) bool {
		if o.OnToken != nil {
			o.OnToken(t)
		}
		if stream == nil || (!o.IgnoreEOS && slices.Contains(l.Model.EOS, t.ID)) {
			return true // the EOS marker ends the text; it is not part of it
		}
		text.WriteString(stream.Next(t.ID))
		flush(false)
		return !stopped && cbErr == nil
	})
	if stream != nil && !stopped {
		text.WriteString(stream.Flush())
		flush(true)
	}
	res.Result = r
	res.Text = text.String()[:sent]
	if err == nil {
		err = cbErr
	}
	return res, err
}

// stopIndex returns the index of the earliest stop string in s, or -1.
func stopIndex(s string, stops []string) int {
	best := -1
	for _, st := range stops {
		if st == "" {
			continue
		}
		if i := strings.Index(s, st); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

// heldBack returns how many trailing bytes of s could begin a stop string.
func heldBack(s string, stops []string) int {
	n := 0
	for _, st := range stops {
		for k := min(len(st)-1, len(s)); k > n; k-- {
			if strings.HasSuffix(s, st[:k]) {
				n = k
				break
			}
		}
	}
	return n
}

// String formats the timings like llama.cpp's summary line.
func (r *Result) String() string {
	return fmt.Sprintf("prompt: %d tokens (%d run) at %.1f tok/s; generated: %d tokens at %.1f tok/s; stop: %s",
		r.PromptTokens, r.PromptEval, r.PromptTokPerSec(), len(r.Tokens), r.DecodeTokPerSec(), r.Stop)
}
