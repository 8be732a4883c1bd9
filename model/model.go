// Package model loads Llama-family Hugging Face model directories (config.json,
// *.safetensors) and runs them on token ids. A [Model] holds the weights, is
// read-only after [Load] and is shared by any number of [Session]s; a Session
// owns a KV cache, activations and its token history, prefills, decodes and
// samples. Package tokenize turns text into ids, and package ingot (the
// repository root) joins the two. Ops run on a kernels.Backend; this package
// never talks to a device directly.
package model

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ingot-llm/ingot/kernels"
)

// ErrUnsupportedArch is returned for an architectures entry ingot does not run.
var ErrUnsupportedArch = errors.New("model: unsupported architecture")

// ErrClosed is returned by a Model or Session used after Close.
var ErrClosed = errors.New("model: closed")

// Options controls Load. The zero value runs on the CPU with every core.
type Options struct {
	Backend    kernels.Backend // nil: a CPU backend owned (and closed) by the Model
	Threads    int             // CPU threads when Backend is nil; 0: all cores
	Quant      int             // quantize float weights on load to MLX affine with these bits (2–8); 0: keep
	QuantGroup int             // group size for Quant; 0: 64
	Progress   func(float32)   // called with the fraction of weights loaded; may be nil
	Logger     *slog.Logger    // load and lifecycle messages; nil: none
	Fuse       string          // a LoRA adapter's directory to merge into the weights at load (W + s·B·A; float weights only); "": none
}

// ParseKV maps a KV cache type's name, "f32" or "f16", to SessionOptions.KV.
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

// A Model is a loaded network: its config and weights on a backend. It is
// read-only after Load and safe for concurrent use; [Model.NewSession] makes
// the sessions that run it.
type Model struct {
	Config    *Config
	EOS       []int32 // generation stops on any of these
	GGUFTypes string  // a GGUF file's tensor types and counts, "Q4_K×13 Q6_K×3 F32×6"; "" for safetensors

	b       kernels.Backend // weights were uploaded through it; sessions run streams of it
	ownB    bool
	files   *weightFiles
	net     *llama
	weights int64
	active  int64 // weights a decode step reads
	log     *slog.Logger

	// mu is held for reading by every session step and for writing by Close,
	// which so waits for the steps running and fails the later ones.
	mu       sync.RWMutex
	closed   bool
	sessions map[*Session]struct{} // open sessions, closed with the model
}

// Load opens a Hugging Face model directory, or a GGUF file (or a directory
// holding one GGUF model and no config.json).
func Load(ctx context.Context, dir string, o Options) (*Model, error) {
	if path, ok, err := GGUFFile(dir); err != nil {
		return nil, err
	} else if ok {
		return loadGGUF(ctx, path, o)
	}
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
	l := &loader{files: files, quant: quant, used: map[string]bool{}, ctx: ctx}
	if !l.has("model.embed_tokens.weight") && l.has("language_model.model.embed_tokens.weight") {
		l.prefix = "language_model."
	}
	if !l.has("model.embed_tokens.weight") && l.has("model.language_model.embed_tokens.weight") {
		l.inner = "language_model."
	}
	m, err := build(cfg, eos, l, o)
	if err != nil {
		files.Close()
		return nil, err
	}
	m.files = files
	if un := l.unused(); len(un) > 0 {
		slices.Sort(un)
		m.log.Warn("model: unused tensors", "count", len(un), "first", un[0])
	}
	return m, nil
}

// build loads the network through l onto the backend of o (made here if nil).
func build(cfg *Config, eos []int32, l *loader, o Options) (*Model, error) {
	if o.Threads < 0 {
		return nil, fmt.Errorf("model: threads (%d) must be ≥ 0 (0: all cores)", o.Threads)
	}
	m := &Model{Config: cfg, EOS: eos, b: o.Backend, log: o.Logger, sessions: map[*Session]struct{}{}}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.b == nil {
		m.b, m.ownB = kernels.NewCPU(o.Threads), true
	}
	start := time.Now()
	l.b = m.b
	if l.ctx == nil {
		l.ctx = context.Background()
	}
	if l.threads = o.Threads; l.threads == 0 {
		l.threads = kernels.DefaultThreads()
		if t, ok := m.b.(interface{ Threads() int }); ok {
			l.threads = t.Threads()
		}
	}
	if l.files != nil {
		l.files.mapInto(m.b, m.log)
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
	if err := l.fuseAdapter(o.Fuse, cfg); err != nil {
		m.Close()
		return nil, err
	}
	// The CPU backend's uploads (repacking each matrix) are safe to run at
	// once, so matrices load on as many goroutines as the backend has threads
	// while newLlama goes on. Synthetic weights come from one random stream in
	// order, and an adapter is merged in order: those load in line.
	if _, ok := m.b.(*kernels.CPU); ok && l.synth == nil && l.fuse == nil {
		l.par = newLoadGroup(l.threads)
	}
	var err error
	m.net, err = newLlama(cfg, architectures[cfg.Arch()], l)
	if werr := l.wait(); err == nil {
		err = werr
	}
	if err == nil {
		err = l.fusedAll()
	}
	if err != nil {
		m.Close()
		return nil, err
	}
	m.weights = l.bytes
	m.active = l.bytes - m.net.idleExpertBytes()
	if o.Progress != nil {
		o.Progress(1)
	}
	m.log.Info("model loaded", "arch", cfg.Arch(), "layers", cfg.NumLayers, "weight_bytes", m.weights,
		"quant", l.quant.String(), "backend", m.b.Name(), "took", time.Since(start))
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

// Close waits for the session steps running, closes every open session,
// releases the weights and, if the Model made it, the backend. Later calls
// on the model or its sessions return [ErrClosed]; Close again does nothing.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	var err error
	for s := range m.sessions {
		err = errors.Join(err, s.release())
	}
	m.sessions = nil
	if m.ownB && m.b != nil {
		err = errors.Join(err, m.b.Close())
	}
	if m.files != nil {
		err = errors.Join(err, m.files.Close())
	}
	return err
}

// Backend returns the backend the weights are on.
func (m *Model) Backend() kernels.Backend { return m.b }

// WeightBytes returns the bytes of the model's weights.
func (m *Model) WeightBytes() int64 { return m.weights }

// ActiveWeightBytes returns the bytes of weights a decode step reads: all of
// them, but of a mixture of experts only the k of E experts a token picks
// (on average, experts being alike).
func (m *Model) ActiveWeightBytes() int64 { return m.active }

// DefaultContext is the context window a session gets when it asks for none:
// min(max_position_embeddings, 4096).
func (c *Config) DefaultContext() int {
	if c.MaxPositions > 0 {
		return min(4096, c.MaxPositions)
	}
	return 4096
}

// SessionBytes returns the device memory a session with options o holds: its
// KV cache and activations.
func (m *Model) SessionBytes(o SessionOptions) (int64, error) {
	if err := o.fill(m.Config); err != nil {
		return 0, err
	}
	return cacheBytes(m.Config, o.Context, o.KV) + actsBytes(m.Config, min(o.Batch, o.Context)) + actsBytes(m.Config, 1), nil
}
