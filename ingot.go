// Package ingot runs Llama-family language models from Hugging Face and
// mlx-community model directories in pure Go: text in, streamed tokens out.
//
//	m, err := ingot.Load(ctx, dir, ingot.Options{}) // dir "": the built-in demo model
//	if err != nil { … }
//	defer m.Close()
//	s, err := m.NewSession(ingot.SessionOptions{})
//	if err != nil { … }
//	defer s.Close()
//	for tok, err := range s.Generate(ctx, "def fib(n):", ingot.Sampling{MaxTokens: 64}) {
//		if err != nil { … }
//		fmt.Print(tok.Text)
//	}
//
// A [Model] is loaded once, is read-only and safe for concurrent use; each
// [Session] has its own KV cache and history, and sessions of one model run
// concurrently. Package ingot joins package model (weights, sessions and
// decoding on token ids: use it for token-level control) and package tokenize
// (tokenizer.json, chat templates).
package ingot

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ingot-llm/ingot/internal/demo"
	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/model"
	"github.com/ingot-llm/ingot/tokenize"
)

// ErrClosed is returned by a Model or Session used after Close.
var ErrClosed = model.ErrClosed

// ErrContextFull is returned (wrapped) when a prompt does not fit a session's
// context window.
var ErrContextFull = model.ErrContextFull

// Options controls Load. The zero value chooses the backend ("auto") and
// keeps the weights as stored.
type Options struct {
	// Backend is "auto" (the zero value ""), "cpu", "metal", "cuda" or
	// "metal-emu" (the Metal kernels on the CPU interpreter, for developers).
	// "auto" picks Metal on Apple silicon when the weights and a default
	// session fit the GPU's working set, else CUDA when an NVIDIA GPU is
	// present and they fit its free memory, else the CPU; see
	// [Model.BackendReason].
	Backend string
	Threads int          // CPU threads; 0: every physical core
	Quant   string       // quantize float weights on load: "" (keep), "q4" or "q8" (MLX affine, group 64)
	Logger  *slog.Logger // load and lifecycle messages; nil: none
	// Fuse is a LoRA adapter's directory to merge into the weights as they
	// load, W + s·B·A (checkpoints of float weights only; with Quant the
	// merged weights are quantized): the model runs at the base's speed
	// and serves only the adapted weights. "": none. [Model.LoadAdapter]
	// applies an adapter unfused instead.
	Fuse string
}

// validate checks o and returns Quant's bits (0: none).
func (o Options) validate() (int, error) {
	switch strings.ToLower(o.Backend) {
	case "", "auto", "cpu", "metal", "cuda", "metal-emu":
	default:
		return 0, fmt.Errorf("ingot: backend %q: want auto, cpu, metal, cuda or metal-emu", o.Backend)
	}
	if n := runtime.NumCPU(); o.Threads < 0 || o.Threads > n {
		return 0, fmt.Errorf("ingot: threads (%d) must be in [0, %d] (0: every core; this machine has %d CPUs)", o.Threads, n, n)
	}
	switch o.Quant {
	case "":
		return 0, nil
	case "q4", "q8":
		return int(o.Quant[1] - '0'), nil
	}
	return 0, fmt.Errorf("ingot: quant %q: want \"\", q4 or q8", o.Quant)
}

// A Model is a loaded model and its tokenizer. It is read-only after Load and
// safe for concurrent use: any number of sessions share its weights.
type Model struct {
	m        *model.Model
	b        kernels.Backend
	tok      *tokenize.Tokenizer // nil when the directory has no tokenizer.json
	reason   string
	loadTime time.Duration

	mu     sync.Mutex
	closed bool
}

// Load opens a model directory (config.json, *.safetensors and, when present,
// tokenizer.json and tokenizer_config.json) or a GGUF file, whose tokenizer
// and chat template come from its metadata. An empty dir loads the built-in
// demo, tinycode-llama: a 4M-parameter model trained on Python source.
func Load(ctx context.Context, dir string, o Options) (*Model, error) {
	t0 := time.Now()
	bits, err := o.validate()
	if err != nil {
		return nil, err
	}
	if dir == "" {
		if dir, err = demo.Dir(); err != nil {
			return nil, err
		}
	}
	w, sess, err := model.Estimate(dir, model.Options{Quant: bits}, model.SessionOptions{})
	if err != nil {
		return nil, err
	}
	b, reason, err := kernels.Choose(o.Backend, o.Threads, w+sess)
	if err != nil {
		return nil, err
	}
	m, err := model.Load(ctx, dir, model.Options{Backend: b, Quant: bits, Logger: o.Logger, Fuse: o.Fuse})
	if err != nil {
		b.Close()
		return nil, err
	}
	l := &Model{m: m, b: b, reason: reason}
	if path, ok, _ := model.GGUFFile(dir); ok {
		if l.tok, err = tokenize.LoadGGUF(path); err != nil {
			l.Close()
			return nil, err
		}
	} else if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err == nil {
		if l.tok, err = tokenize.Load(dir); err != nil {
			l.Close()
			return nil, err
		}
	}
	l.loadTime = time.Since(t0)
	if o.Logger != nil {
		o.Logger.Info("backend chosen", "backend", b.Name(), "reason", reason)
	}
	return l, nil
}

// Close closes the model's sessions and releases the weights and the
// backend. Later calls on the model or its sessions return [ErrClosed];
// Close again does nothing.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	return errors.Join(m.m.Close(), m.b.Close())
}

// Raw returns the token-level model (package model): its config, EOS ids and
// sessions on token ids.
func (m *Model) Raw() *model.Model { return m.m }

// Tokenizer returns the model's tokenizer, nil when its directory has none.
func (m *Model) Tokenizer() *tokenize.Tokenizer { return m.tok }

// Backend returns the name of the backend the model runs on ("cpu",
// "metal:Apple M2", …).
func (m *Model) Backend() string { return m.b.Name() }

// BackendReason says why the backend was chosen, in a sentence for users.
func (m *Model) BackendReason() string { return m.reason }

// LoadTime is how long Load took.
func (m *Model) LoadTime() time.Duration { return m.loadTime }

// SessionOptions sizes a [Session]. The zero value is a context window of
// min(max_position_embeddings, 4096) tokens with the backend's KV cache type
// (kernels.DefaultKV: f16 on Metal, f32 on the CPU and CUDA).
type SessionOptions struct {
	Context int    // KV cache length in tokens; 0: min(max_position_embeddings, 4096)
	KV      string // KV cache type: "f32" (exact) or "f16" (half the memory); "": the backend's default
}

// NewSession makes a session: its own KV cache, activations and history on
// the model's backend.
func (m *Model) NewSession(o SessionOptions) (*Session, error) {
	kv := kernels.DefaultKV(m.m.Backend())
	if o.KV != "" {
		var err error
		if kv, err = model.ParseKV(o.KV); err != nil {
			return nil, err
		}
	}
	if o.Context < 0 {
		return nil, fmt.Errorf("ingot: context (%d) must be ≥ 0 (0: min(max_position_embeddings, 4096))", o.Context)
	}
	s, err := m.m.NewSession(model.SessionOptions{Context: o.Context, KV: kv})
	if err != nil {
		return nil, err
	}
	return &Session{m: m, s: s}, nil
}

// Score returns Σ ln p(completion tokens | prompt) under the model, on a
// fresh session sized to the text, from one batched prefill: the prompt is
// encoded with the tokenizer's special tokens (e.g. BOS), the completion
// without, as lm-evaluation-harness encodes a context and its continuation.
// [Session.Score] gives the per-token values and reuses a session's cache.
func (m *Model) Score(ctx context.Context, prompt, completion string) (float64, error) {
	if m.tok == nil {
		return 0, errors.New("ingot: the model directory has no tokenizer.json (score token ids with package model)")
	}
	p, c := m.tok.Encode(prompt, true), m.tok.Encode(completion, false)
	if len(p) == 0 || len(c) == 0 {
		return 0, fmt.Errorf("ingot: score: the prompt (%d tokens) and the completion (%d tokens) must not be empty", len(p), len(c))
	}
	s, err := m.m.NewSession(model.SessionOptions{Context: len(p) + len(c) - 1})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	sc, err := s.Score(ctx, p, c)
	if err != nil {
		return 0, err
	}
	return sc.Logprob, nil
}

// Message is one turn of a conversation for [Session.Chat].
type Message = tokenize.Message

// Sampling controls how tokens are chosen and when generation stops. The zero
// value decodes greedily until EOS or the end of the context window.
type Sampling struct {
	Temperature   float32  // 0: greedy (argmax)
	TopK          int      // keep the k most likely tokens; 0: off
	TopP          float32  // nucleus sampling mass in [0, 1]; 0 or 1: off
	MinP          float32  // drop tokens below this fraction of the top probability, in [0, 1]; 0: off
	RepeatPenalty float32  // > 1 discourages the last RepeatLastN tokens; 0 or 1: off
	RepeatLastN   int      // 0: 64
	Seed          uint64   // 0: from the clock
	MaxTokens     int      // 0: until EOS or the end of the context window
	Stop          []string // generation ends before the first occurrence of any of these
	IgnoreEOS     bool     // keep going past EOS tokens
	Logprobs      bool     // fill Token.Logprob (every step then reads all logits back)
}

// Validate reports the first field out of range, by its JSON name
// ("ingot: sampling: min_p must be in [0, 1] (0: off), got 2"). The
// generation methods call it and yield its error before any token.
func (sp Sampling) Validate() error {
	if err := sp.options().Validate(); err != nil {
		return fmt.Errorf("ingot: sampling: %s", strings.TrimPrefix(err.Error(), "model: "))
	}
	for i, s := range sp.Stop {
		if s == "" {
			return fmt.Errorf("ingot: sampling: stop[%d] is empty", i)
		}
	}
	return nil
}

func (sp Sampling) options() model.GenerateOptions {
	return model.GenerateOptions{MaxTokens: sp.MaxTokens, Temperature: sp.Temperature, TopK: sp.TopK, TopP: sp.TopP,
		MinP: sp.MinP, RepeatPenalty: sp.RepeatPenalty, RepeatLastN: sp.RepeatLastN, Seed: sp.Seed,
		IgnoreEOS: sp.IgnoreEOS, Logprobs: sp.Logprobs}
}

// Token is one generated token.
type Token struct {
	ID int32
	// Text is the text this token completes: "" while it ends in an
	// unfinished UTF-8 character or may begin a stop string, and then held
	// text is given with a later token. The Texts of a generation concatenate
	// to its text; an EOS token and a stop string add nothing.
	Text    string
	Logprob float32 // ln p(ID) under the model's raw distribution (with Sampling.Logprobs)
}

// Stop says why generation ended.
type Stop = model.Stop

// The reasons in [Result.Stop].
const (
	StopEOS       = model.StopEOS       // an EOS token was generated
	StopLength    = model.StopLength    // MaxTokens were generated
	StopContext   = model.StopContext   // the context window is full
	StopString    = model.StopCaller    // a stop string was generated, or the caller stopped iterating
	StopCancelled = model.StopCancelled // ctx was cancelled
)

// Result describes a session's last generation.
type Result struct {
	PromptTokens   int           // tokens in the prompt
	PromptEval     int           // prompt tokens run (the rest came from the session's cache)
	GenTokens      int           // tokens generated
	PromptDuration time.Duration // prefill time
	DecodeSteps    int           // decode steps run (tokens after the first, which the prefill gives)
	DecodeDuration time.Duration
	Stop           Stop   // why it ended; "" after an error other than cancellation
	Text           string // the generated text, stop string excluded
	Drafted        int    // speculative decoding (Session.Speculate): tokens drafted
	Accepted       int    // speculative decoding: drafted tokens the model accepted
}

// PromptTokPerSec is the prefill throughput.
func (r Result) PromptTokPerSec() float64 { return rate(r.PromptEval, r.PromptDuration) }

// DecodeTokPerSec is the decode throughput (llama.cpp's eval rate).
func (r Result) DecodeTokPerSec() float64 { return rate(r.DecodeSteps, r.DecodeDuration) }

func rate(n int, d time.Duration) float64 {
	if n == 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// String formats the result like llama.cpp's summary line.
func (r Result) String() string {
	return fmt.Sprintf("prompt: %d tokens (%d run) at %.1f tok/s; generated: %d tokens at %.1f tok/s; stop: %s",
		r.PromptTokens, r.PromptEval, r.PromptTokPerSec(), r.GenTokens, r.DecodeTokPerSec(), r.Stop)
}

// A Session is one conversation with a model: a KV cache, its token history
// and its decoding. It runs one generation at a time; use one session per
// goroutine (sessions of one model run concurrently).
type Session struct {
	m    *Model
	s    *model.Session
	last Result
	spec *model.Speculation // nil: plain decoding (see Speculate)
}

// Close releases the session's cache and activations. Later calls return
// [ErrClosed]; Close again does nothing.
func (s *Session) Close() error { return s.s.Close() }

// Raw returns the token-level session (package model): Forward on ids,
// logits, Truncate.
func (s *Session) Raw() *model.Session { return s.s }

// ContextSize returns the session's context window in tokens.
func (s *Session) ContextSize() int { return s.s.ContextSize() }

// MemoryBytes returns the memory the session holds on the model's device:
// its KV cache and activations.
func (s *Session) MemoryBytes() int64 { return s.s.MemoryBytes() }

// Last returns the result of the session's last generation (complete once
// its iterator has finished).
func (s *Session) Last() Result { return s.last }

// Generate encodes prompt (with the tokenizer's special tokens, e.g. BOS)
// and continues it. The iterator yields each generated token; an invalid
// Sampling, a prompt that does not fit and other errors are yielded (with a
// zero Token) before any token, and a cancelled ctx stops generation within
// one token and yields ctx's error after the tokens so far. The session's
// cache keeps the prompt and the generated tokens: a later prompt that
// extends them is prefilled only past the shared prefix.
func (s *Session) Generate(ctx context.Context, prompt string, sp Sampling) iter.Seq2[Token, error] {
	if s.m.tok == nil {
		return fail(errors.New("ingot: the model directory has no tokenizer.json (use GenerateIDs)"))
	}
	return s.GenerateIDs(ctx, s.m.tok.Encode(prompt, true), sp)
}

// Chat renders msgs with the model's chat template (with the generation
// prompt) and generates the assistant's reply, as [Session.Generate]. The KV
// cache keeps earlier turns, so only the new turn is prefilled.
func (s *Session) Chat(ctx context.Context, msgs []Message, sp Sampling) iter.Seq2[Token, error] {
	if s.m.tok == nil {
		return fail(errors.New("ingot: the model directory has no tokenizer.json"))
	}
	text, err := s.m.tok.ApplyChatTemplate(msgs, tokenize.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		return fail(err)
	}
	// The template writes BOS itself where the model wants one.
	return s.GenerateIDs(ctx, s.m.tok.Encode(text, false), sp)
}

// fail is an iterator yielding only err.
func fail(err error) iter.Seq2[Token, error] {
	return func(yield func(Token, error) bool) { yield(Token{}, err) }
}

// GenerateIDs continues a tokenized prompt, as [Session.Generate]. Tokens
// carry text (and stop strings apply) only when the model has a tokenizer.
func (s *Session) GenerateIDs(ctx context.Context, prompt []int32, sp Sampling) iter.Seq2[Token, error] {
	return func(yield func(Token, error) bool) {
		s.last = Result{PromptTokens: len(prompt)}
		if err := sp.Validate(); err != nil {
			yield(Token{}, err)
			return
		}
		out := textOut{stops: sp.Stop}
		if s.m.tok != nil {
			out.stream = s.m.tok.NewStream(false)
		}
		eos := s.m.m.EOS
		n, quit := 0, false
		r, err := s.generate(ctx, prompt, sp.options(), func(t model.Token) bool {
			n++
			isEOS := !sp.IgnoreEOS && slices.Contains(eos, t.ID)
			last := isEOS || (sp.MaxTokens > 0 && n >= sp.MaxTokens) || len(prompt)+n-1 >= s.s.ContextSize()
			tk := Token{ID: t.ID, Logprob: t.Logprob}
			var stop bool
			tk.Text, stop = out.next(t.ID, isEOS, last)
			if !yield(tk, nil) {
				quit = true
				return false
			}
			return !stop
		})
		s.last = Result{PromptTokens: r.PromptTokens, PromptEval: r.PromptEval, GenTokens: len(r.Tokens),
			PromptDuration: r.PromptDuration, DecodeSteps: r.DecodeSteps, DecodeDuration: r.DecodeDuration,
			Stop: r.Stop, Text: out.text.String()[:out.sent], Drafted: r.Drafted, Accepted: r.Accepted}
		if err != nil && !quit {
			yield(Token{}, err)
		}
	}
}

// textOut turns generated ids into the text each token releases: whole UTF-8
// characters, with any text that may begin a stop string held back until it
// is known not to.
type textOut struct {
	stream *tokenize.Stream // nil without a tokenizer
	stops  []string
	text   strings.Builder // everything decoded so far
	sent   int             // bytes of text released
}

// next adds token id and returns the text it releases, and whether a stop
// string ended the text. The EOS token adds no text; the last token releases
// everything held back.
func (o *textOut) next(id int32, isEOS, last bool) (string, bool) {
	if o.stream == nil {
		return "", false
	}
	if !isEOS {
		o.text.WriteString(o.stream.Next(id))
	}
	if last {
		o.text.WriteString(o.stream.Flush())
	}
	s := o.text.String()
	end, stop := len(s), false
	if cut := stopIndex(s[o.sent:], o.stops); cut >= 0 {
		end, stop = o.sent+cut, true
	} else if !last {
		end -= heldBack(s[o.sent:], o.stops) // a stop string may still begin here
	}
	out := s[o.sent:end]
	o.sent = end
	return out, stop
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
