// Package model loads Llama-family Hugging Face model directories (config.json,
// *.safetensors) and runs them: a KV cache, batched prefill, token-by-token decode
// and sampling. It works on token ids; package tokenize turns text into ids, and
// package ingot (the repository root) joins the two. Ops run on a kernels.Backend;
// this package never talks to a device directly.
package model

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ingot-llm/ingot/kernels"
)

// ErrUnsupportedArch is returned for an architectures entry ingot does not run.
var ErrUnsupportedArch = errors.New("model: unsupported architecture")

// Options controls Load. The zero value runs on the CPU with every core and a
// context window of min(max_position_embeddings, 4096) tokens.
type Options struct {
	Backend    kernels.Backend // nil: a CPU backend owned (and closed) by the Model
	Threads    int             // CPU threads when Backend is nil; 0: all
	Context    int             // KV cache length in tokens; 0: min(max_position_embeddings, 4096)
	KV         kernels.DType   // KV cache element type: f32 (the zero value) or f16 (half the memory)
	Batch      int             // prefill chunk in tokens; 0: 512
	Quant      int             // quantize float weights on load to MLX affine with these bits (2–8); 0: keep
	QuantGroup int             // group size for Quant; 0: 64
	Progress   func(float32)   // called with the fraction of weights loaded; may be nil
}

// ParseKV maps a KV cache type's name, "f32" or "f16", to Options.KV.
func ParseKV(name string) (kernels.DType, error) {
	switch name {
	case "f32":
		return kernels.DTypeF32, nil
	case "f16":
		return kernels.DTypeF16, nil
	}
	return 0, kvTypeError(name)
}

func kvTypeError(name string) error {
	return fmt.Errorf("model: KV cache type %s: want f32 or f16", name)
}

// A Model is a loaded model with its KV cache. It is not safe for concurrent use.
type Model struct {
	Config *Config
	EOS    []int32 // generation stops on any of these

	b       kernels.Backend
	ownB    bool
	files   *weightFiles
	net     *llama
	cache   *cache
	batch   *acts    // prefill state, Batch rows
	one     *acts    // decode state, 1 row
	tokens  []int32  // the tokens whose K/V are in the cache, in order
	tok     [1]int32 // the decode step's input, kept here so the step allocates nothing
	weights int64

	topIDs  [kernels.MaxTopK]int32 // stepTopK's results
	topVals [kernels.MaxTopK]float32
	topCand []candidate
}

// Load opens a Hugging Face model directory.
func Load(ctx context.Context, dir string, o Options) (*Model, error) {
	cfg, err := loadConfig(dir)
	if err != nil {
		return nil, err
	}
	if _, ok := architectures[cfg.Arch()]; !ok {
		return nil, fmt.Errorf("%w %q in %s/config.json (ingot runs %v)", ErrUnsupportedArch, cfg.Arch(), dir, archNames())
	}
	eos, err := loadEOS(dir, cfg)
	if err != nil {
		return nil, err
	}
	quant, err := parseQuant(cfg)
	if err != nil {
		return nil, err
	}
	files, err := openWeights(dir)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		files.Close()
		return nil, err
	}
	l := &loader{files: files, quant: quant, used: map[string]bool{}}
	if !l.has("model.embed_tokens.weight") && l.has("language_model.model.embed_tokens.weight") {
		l.prefix = "language_model."
	}
	m, err := build(cfg, eos, l, o)
	if err != nil {
		files.Close()
		return nil, err
	}
	m.files = files
	if un := l.unused(); len(un) > 0 {
		slices.Sort(un)
		slog.Warn("model: unused tensors", "count", len(un), "first", un[0])
	}
	return m, nil
}

// build loads the network through l onto the backend of o (made here if nil) and
// allocates the cache and activations.
func build(cfg *Config, eos []int32, l *loader, o Options) (*Model, error) {
	if o.KV != kernels.DTypeF32 && o.KV != kernels.DTypeF16 {
		return nil, kvTypeError(o.KV.String())
	}
	m := &Model{Config: cfg, EOS: eos, b: o.Backend}
	if m.b == nil {
		m.b, m.ownB = kernels.NewCPU(o.Threads), true
	}
	start := time.Now()
	l.b = m.b
	if l.files != nil {
		l.files.mapInto(m.b)
	}
	if o.Quant != 0 {
		g := o.QuantGroup
		if g == 0 {
			g = 64
		}
		if _, ok := kernels.QuantDType(o.Quant); !ok || (g != 32 && g != 64 && g != 128) {
			m.Close()
			return nil, fmt.Errorf("model: cannot quantize to %d bits with group size %d (bits 2, 3, 4, 5, 6, 8; groups 32, 64, 128)", o.Quant, g)
		}
		l.toQ = &quantConfig{Bits: o.Quant, GroupSize: g}
	}
	n := o.Context
	if n <= 0 {
		n = 4096
		if cfg.MaxPositions > 0 {
			n = min(n, cfg.MaxPositions)
		}
	}
	var err error
	if m.net, err = newLlama(cfg, architectures[cfg.Arch()], l, n); err != nil {
		m.Close()
		return nil, err
	}
	m.weights = l.bytes
	batch := o.Batch
	if batch <= 0 {
		batch = 512
	}
	m.cache = newCache(m.b, cfg, n, o.KV)
	m.batch = newActs(m.b, cfg, min(batch, n))
	m.one = newActs(m.b, cfg, 1)
	if o.Progress != nil {
		o.Progress(1)
	}
	slog.Info("model loaded", "arch", cfg.Arch(), "layers", cfg.NumLayers, "weight_bytes", m.weights,
		"context", n, "backend", m.b.Name(), "took", time.Since(start))
	return m, nil
}

func archNames() []string {
	var s []string
	for k := range architectures {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Close releases the weights and, if the Model made it, the backend.
func (m *Model) Close() error {
	var err error
	if m.ownB && m.b != nil {
		err = m.b.Close()
	}
	if m.files != nil {
		err = errors.Join(err, m.files.Close())
	}
	return err
}

// Backend returns the backend the model runs on.
func (m *Model) Backend() kernels.Backend { return m.b }

// ContextSize returns the KV cache length in tokens.
func (m *Model) ContextSize() int { return m.cache.maxSeq }

// CacheBytes returns the size of the KV cache in bytes.
func (m *Model) CacheBytes() int64 { return m.cache.bytes }

// WeightBytes returns the bytes of weights the model reads per token.
func (m *Model) WeightBytes() int64 { return m.weights }

// Cached returns the tokens whose keys and values are in the cache.
func (m *Model) Cached() []int32 { return m.tokens }

// Truncate drops cached tokens from position n on (n ≥ 0). A later call reuses the
// rest as a prompt prefix.
func (m *Model) Truncate(n int) {
	n = min(max(n, 0), len(m.tokens))
	m.tokens = m.tokens[:n]
	m.cache.truncate(n)
}

// Forward appends tokens to the cache (running them at positions [len(Cached()),
// …)) and returns the logits (V) after the last one. The slice is reused by the next
// call. Prompts longer than the batch run in chunks.
func (m *Model) Forward(ctx context.Context, tokens []int32) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, errors.New("model: no tokens to run")
	}
	pos := len(m.tokens)
	if pos+len(tokens) > m.cache.maxSeq {
		return nil, fmt.Errorf("model: %d tokens at position %d do not fit the context window of %d tokens", len(tokens), pos, m.cache.maxSeq)
	}
	V := int32(m.Config.VocabSize)
	for i, t := range tokens {
		if t < 0 || t >= V {
			return nil, fmt.Errorf("model: token %d (at %d) is outside the vocabulary of %d", t, i, V)
		}
	}
	s := m.one
	for len(tokens) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := min(len(tokens), m.batch.L)
		if n > 1 {
			s = m.batch.rows(n)
		} else {
			s = m.one
		}
		m.net.forward(m.b, s, m.cache, tokens[:n], pos)
		m.tokens = append(m.tokens, tokens[:n]...)
		pos += n
		tokens = tokens[n:]
	}
	if err := m.b.Download(s.hostLogit, s.logits); err != nil {
		return nil, err
	}
	return s.hostLogit, nil
}

// decode runs one token at the next position; it allocates nothing (after the
// cache's token list has grown to capacity).
func (m *Model) decode(tok int32) error {
	pos := len(m.tokens)
	if pos >= m.cache.maxSeq {
		return fmt.Errorf("model: context window of %d tokens is full", m.cache.maxSeq)
	}
	m.tok[0] = tok
	m.net.forward(m.b, m.one, m.cache, m.tok[:], pos)
	m.tokens = append(m.tokens, tok)
	return nil
}

// step decodes tok and returns the logits on the host.
func (m *Model) step(tok int32) ([]float32, error) {
	if err := m.decode(tok); err != nil {
		return nil, err
	}
	if err := m.b.Download(m.one.hostLogit, m.one.logits); err != nil {
		return nil, err
	}
	return m.one.hostLogit, nil
}

// stepArgmax decodes tok and returns the argmax of the logits, computed on the
// device when the backend can.
func (m *Model) stepArgmax(tok int32) (int32, error) {
	if err := m.decode(tok); err != nil {
		return 0, err
	}
	return kernels.Argmax(m.b, m.one.logits, m.one.hostLogit)
}

// Token is one generated token.
type Token struct {
	ID      int32
	Logprob float32 // ln p(ID) under the raw model distribution (before any sampling transform); set with GenerateOptions.Logprobs
}

// Stop says why generation ended.
type Stop string

const (
	StopEOS    Stop = "eos"    // an EOS id was sampled
	StopLength Stop = "length" // MaxTokens reached or the context window is full
	StopCaller Stop = "stop"   // the emit callback asked to stop (e.g. a stop string)
)

// Result describes one Generate call.
type Result struct {
	Tokens         []Token
	Stop           Stop
	PromptTokens   int           // tokens in the prompt
	PromptEval     int           // prompt tokens actually run (the rest came from the cache)
	PromptDuration time.Duration // prefill time
	DecodeSteps    int           // decode forwards run (generated tokens after the first)
	DecodeDuration time.Duration // time in decode forwards and sampling
}

// PromptTokPerSec is the prefill throughput.
func (r *Result) PromptTokPerSec() float64 { return rate(r.PromptEval, r.PromptDuration) }

// DecodeTokPerSec is the decode throughput.
func (r *Result) DecodeTokPerSec() float64 { return rate(r.DecodeSteps, r.DecodeDuration) }

func rate(n int, d time.Duration) float64 {
	if n == 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Generate continues prompt, calling emit with each token as it is produced (emit
// returning false stops with [StopCaller]). The cached prefix shared with prompt
// is reused and only the rest is prefilled. Cancelling ctx stops within one token;
// the partial result is returned with ctx's error.
func (m *Model) Generate(ctx context.Context, prompt []int32, o GenerateOptions, emit func(Token) bool) (*Result, error) {
	r := &Result{PromptTokens: len(prompt)}
	if len(prompt) == 0 {
		return r, errors.New("model: empty prompt")
	}
	if len(prompt) >= m.cache.maxSeq {
		return r, fmt.Errorf("model: prompt of %d tokens does not fit the context window of %d tokens (leave room for at least one generated token)", len(prompt), m.cache.maxSeq)
	}
	n := 0
	for n < len(m.tokens) && n < len(prompt)-1 && m.tokens[n] == prompt[n] {
		n++
	}
	m.Truncate(n)
	r.PromptEval = len(prompt) - n
	t0 := time.Now()
	logits, err := m.Forward(ctx, prompt[n:])
	r.PromptDuration = time.Since(t0)
	if err != nil {
		return r, err
	}
	smp := newSampler(o)
	history := slices.Clone(prompt)
	// Greedy decoding that needs neither logprobs nor the penalty asks the device for
	// the argmax, so only the token crosses back (kernels.Argmaxer; the CPU downloads).
	// A kernels.Pipeliner also runs one step ahead (see stepAhead).
	onDevice := o.Temperature <= 0 && !o.Logprobs && (o.RepeatPenalty <= 0 || o.RepeatPenalty == 1)
	pipe, _ := m.b.(kernels.Pipeliner)
	if !onDevice {
		pipe = nil
	}
	// Sampling with a top-k the device can select copies back only k candidates
	// (kernels.TopKer). The penalty changes logits before top-k, and logprobs need
	// them all: both download the logits instead.
	topk, _ := m.b.(kernels.TopKer)
	if o.Temperature <= 0 || o.TopK <= 0 || o.TopK > kernels.MaxTopK || o.Logprobs || (o.RepeatPenalty > 0 && o.RepeatPenalty != 1) {
		topk = nil
	}
	ahead := false // the step of tok (the token about to be emitted) already runs
	finish := func(stop Stop, err error) (*Result, error) {
		if ahead { // generation ends at tok: undo its step
			if derr := m.dropAhead(pipe); err == nil {
				err = derr
			}
			ahead = false
		}
		r.Stop = stop
		return r, err
	}
	tok := smp.sample(logits, history)
	t0 = time.Now()
	defer func() { r.DecodeDuration = time.Since(t0) }()
	for {
		if err := ctx.Err(); err != nil {
			return finish("", err)
		}
		tk := Token{ID: tok}
		if o.Logprobs {
			tk.Logprob = logProb(logits, tok)
		}
		r.Tokens = append(r.Tokens, tk)
		history = append(history, tok)
		if emit != nil && !emit(tk) {
			return finish(StopCaller, nil)
		}
		if !o.IgnoreEOS && slices.Contains(m.EOS, tok) {
			return finish(StopEOS, nil)
		}
		if (o.MaxTokens > 0 && len(r.Tokens) >= o.MaxTokens) || len(m.tokens) >= m.cache.maxSeq {
			return finish(StopLength, nil)
		}
		switch {
		case pipe != nil:
			// Run ahead unless the token after tok is sure to be the last.
			more := len(m.tokens)+1 < m.cache.maxSeq && (o.MaxTokens <= 0 || len(r.Tokens)+1 < o.MaxTokens)
			tok, ahead, err = m.stepAhead(pipe, tok, ahead, more)
		case onDevice:
			tok, err = m.stepArgmax(tok)
		case topk != nil:
			var c []candidate
			if c, err = m.stepTopK(topk, tok, o.TopK); err == nil {
				tok = smp.pick(c)
			}
		default:
			if logits, err = m.step(tok); err == nil {
				tok = smp.sample(logits, history)
			}
		}
		if err != nil {
			return finish("", err)
		}
		r.DecodeSteps++
	}
}

// stepTopK decodes tok and returns the k best candidates for the next token,
// selected on the device, sorted as topK sorts them.
func (m *Model) stepTopK(t kernels.TopKer, tok int32, k int) ([]candidate, error) {
	if err := m.decode(tok); err != nil {
		return nil, err
	}
	n, err := t.TopK(m.topIDs[:k], m.topVals[:k], m.one.logits)
	if err != nil {
		return nil, err
	}
	c := m.topCand[:0]
	for j := range n {
		c = append(c, candidate{m.topIDs[j], m.topVals[j]})
	}
	m.topCand = c
	return c, nil
}

// stepAhead returns the greedy token after tok on a pipelining backend. Unless
// tok's step already runs (ahead), it starts it from the host's tok. With more,
// it then starts the step after, whose input is tok's step's argmax, still on
// the device, before waiting for that argmax: while the host waits for token
// n, step n+1 is queued behind it. It reports whether that step was started.
func (m *Model) stepAhead(p kernels.Pipeliner, tok int32, ahead, more bool) (next int32, started bool, err error) {
	if ahead {
		m.tokens = append(m.tokens, tok) // its step ran at this position: keep it
	} else {
		if err := m.decode(tok); err != nil {
			return 0, false, err
		}
		p.ArgmaxAsync(m.one.logits)
	}
	if more { // the caller checked that position len(m.tokens) is in the context
		m.net.forwardArgmax(p, m.b, m.one, m.cache, len(m.tokens))
		p.ArgmaxAsync(m.one.logits)
	}
	next, err = p.NextToken()
	return next, more, err
}

// dropAhead undoes the step started ahead for a token generation will not
// run: it waits for it and forgets the K/V it wrote, so that the cache holds
// exactly m.tokens.
func (m *Model) dropAhead(p kernels.Pipeliner) error {
	_, err := p.NextToken()
	m.cache.truncate(len(m.tokens))
	return err
}
