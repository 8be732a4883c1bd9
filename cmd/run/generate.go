package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ingot-llm/ingot"
	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/metal"
)

// genFlags are the flags of the default (generate) command.
type genFlags struct {
	model, prompt, promptIDs, backend string
	quant, kv                         string
	n, topK, threads, ctxLen          int
	temp, topP, minP, repeatPenalty   float64
	seed                              uint64
	ignoreEOS, jsonOut, chat, verbose bool
	noEcho, version                   bool
	stops                             multiFlag
	draft                             string // speculative decoding (speculative.go)
	draftMax, lookup                  int
	adapter                           string // a LoRA adapter (adapter.go)
	fuse                              bool
	set                               map[string]bool // the flags given on the command line
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

func parseGenFlags(args []string, stderr io.Writer) (*genFlags, error) {
	f := &genFlags{set: map[string]bool{}}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, by run
	fs.StringVar(&f.model, "model", "", "model directory (config.json, *.safetensors, tokenizer.json) or GGUF file; default: the built-in tinycode-llama demo")
	fs.StringVar(&f.prompt, "prompt", "", "prompt text (encoded with the model's tokenizer, BOS added); echoed before the completion")
	fs.StringVar(&f.promptIDs, "prompt-ids", "", "comma-separated prompt token ids (replaces -prompt)")
	fs.IntVar(&f.n, "n", 256, "maximum tokens to generate (0: until EOS or the context is full)")
	fs.Float64Var(&f.temp, "temp", 0.8, "sampling temperature (0: greedy)")
	fs.IntVar(&f.topK, "top-k", 40, "keep the k most likely tokens (0: off)")
	fs.Float64Var(&f.topP, "top-p", 0.95, "nucleus sampling mass in [0, 1] (1: off)")
	fs.Float64Var(&f.minP, "min-p", 0.05, "drop tokens below this fraction of the top probability, in [0, 1] (0: off)")
	fs.Float64Var(&f.repeatPenalty, "repeat-penalty", 1, "penalty > 0 for the last 64 tokens (1: off)")
	fs.Uint64Var(&f.seed, "seed", 0, "random seed (0: from the clock)")
	fs.StringVar(&f.backend, "backend", "auto", "compute backend: auto (metal on Apple silicon, else cuda with an NVIDIA GPU, when the model fits; else cpu), cpu, metal, cuda, or metal-emu (the MSL interpreter: slow, for developers; needs clang ≥ 16)")
	fs.StringVar(&f.quant, "quant", "", "quantize f32/f16/bf16 weights on load: q4 or q8 (MLX affine, group 64)")
	fs.IntVar(&f.threads, "threads", 0, fmt.Sprintf("CPU threads, at most %d here (0: all cores)", runtime.NumCPU()))
	fs.IntVar(&f.ctxLen, "ctx", 0, "context window in tokens (0: min(max_position_embeddings, 4096))")
	fs.StringVar(&f.kv, "kv", "", "KV cache type: f32 (exact) or f16 (half the memory; keys and values rounded to halves); default f16 on metal, f32 on cpu and cuda")
	fs.BoolVar(&f.ignoreEOS, "ignore-eos", false, "keep generating past end-of-sequence tokens")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object at the end instead of streaming")
	fs.BoolVar(&f.chat, "chat", false, "interactive multi-turn chat using the model's chat template")
	fs.BoolVar(&f.noEcho, "no-echo", false, "do not print the prompt before the completion")
	fs.BoolVar(&f.verbose, "v", false, "log details, the backend's reason, memory and per-token device counters to stderr")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	fs.Var(&f.stops, "stop", "stop before this string (repeatable)")
	fs.StringVar(&f.draft, "draft", "", "speculative decoding with this draft model directory (the same tokenizer; e.g. a q4 copy or a smaller model of the family)")
	fs.IntVar(&f.draftMax, "draft-max", 0, "tokens -draft drafts a round (0: 4)")
	fs.IntVar(&f.lookup, "lookup", 0, "speculative decoding by prompt lookup: draft up to N tokens that followed the last n-gram's latest earlier occurrence (0: off)")
	fs.StringVar(&f.adapter, "adapter", "", "a LoRA adapter directory (PEFT adapter_model.safetensors or mlx-lm adapters.safetensors, with adapter_config.json), applied unfused")
	fs.BoolVar(&f.fuse, "fuse", false, "merge -adapter into the weights at load (float checkpoints only): the base's speed, one model")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(fs, stderr)
			return nil, err
		}
		return nil, usageError{err}
	}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q (flags come first)", fs.Arg(0))
	}
	return f, f.validate(fs)
}

func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprint(w, `usage: run [-model DIR] (-prompt TEXT | -prompt-ids 1,2,3 | -chat) [flags]
       run tokenize (-model DIR | -tokenizer FILE) [-special] [-json] TEXT
       run chat-template (-model DIR | -tokenizer-config FILE) -messages FILE.json [-add-generation-prompt]
       run quantize -model DIR -out DIR [-bits 4|8] [-group 64]
       run bench [-shape NAME | -model DIR] [-dtype q4|q8|bf16|f16|f32] [-test pp512,tg128] [-threads N] [-json]
       run perplexity [-model DIR] -file F [-ctx N] [-stride S] [-json]
       run selftest [-backend auto|metal|metal-emu|cpu]
       run -version

flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// validate checks every flag's value, naming the flag.
func (f *genFlags) validate(fs *flag.FlagSet) error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	for _, c := range []struct {
		ok         bool
		name, want string
	}{
		{f.n >= 0, "n", "≥ 0 (0: until EOS or the context is full)"},
		{finite(f.temp) && f.temp >= 0, "temp", "a number ≥ 0 (0: greedy)"},
		{f.topK >= 0, "top-k", "≥ 0 (0: off)"},
		{f.topP >= 0 && f.topP <= 1, "top-p", "in [0, 1] (1: off)"},
		{f.minP >= 0 && f.minP <= 1, "min-p", "in [0, 1] (0: off)"},
		{finite(f.repeatPenalty) && f.repeatPenalty > 0, "repeat-penalty", "a number > 0 (1: off)"},
		{f.threads >= 0 && f.threads <= runtime.NumCPU(), "threads", fmt.Sprintf("in [0, %d] (0: all cores; this machine has %d CPUs)", runtime.NumCPU(), runtime.NumCPU())},
		{f.ctxLen >= 0, "ctx", "≥ 0 (0: min(max_position_embeddings, 4096))"},
		{f.kv == "" || f.kv == "f32" || f.kv == "f16", "kv", "f32 or f16"},
		{f.quant == "" || f.quant == "q4" || f.quant == "q8", "quant", "q4 or q8"},
		{f.draftMax >= 0, "draft-max", "≥ 0 (0: 4)"},
		{f.lookup >= 0, "lookup", "≥ 0 (0: off)"},
		{f.backend == "auto" || f.backend == "cpu" || f.backend == "metal" || f.backend == "cuda" || f.backend == "metal-emu", "backend", "auto, cpu, metal, cuda or metal-emu"},
	} {
		if !c.ok {
			return usagef("-%s %s: want %s", c.name, fs.Lookup(c.name).Value, c.want)
		}
	}
	for i, s := range f.stops {
		if s == "" {
			return usagef("-stop: stop string %d is empty", i+1)
		}
	}
	switch {
	case f.version:
	case f.prompt != "" && f.promptIDs != "":
		return usagef("pass -prompt or -prompt-ids, not both")
	case f.chat && (f.prompt != "" || f.promptIDs != ""):
		return usagef("-chat reads its turns from stdin: drop -prompt / -prompt-ids")
	case f.chat && f.jsonOut:
		return usagef("-json is for one completion, not -chat")
	case f.draft != "" && f.lookup > 0:
		return usagef("pass -draft or -lookup, not both")
	case f.fuse && f.adapter == "":
		return usagef("-fuse merges -adapter DIR: pass one")
	case f.prompt == "" && f.promptIDs == "" && !f.chat:
		return usagef("nothing to do: pass -prompt TEXT, -prompt-ids 1,2,3 or -chat")
	}
	if f.promptIDs != "" {
		if _, err := parseIDs(f.promptIDs); err != nil {
			return usageError{err}
		}
	}
	return nil
}

// demoDefaults sets the sampling the built-in demo runs with, for the flags
// not given: a 4M-parameter model at llama.cpp's defaults (temperature 0.8)
// soon loops on one line; cooler and with a repeat penalty it writes
// plausible Python.
func (f *genFlags) demoDefaults() {
	if !f.set["temp"] {
		f.temp = 0.3
	}
	if !f.set["repeat-penalty"] {
		f.repeatPenalty = 1.15
	}
	if !f.set["n"] {
		f.n = 96
	}
}

func (f *genFlags) sampling() ingot.Sampling {
	return ingot.Sampling{
		MaxTokens: f.n, Temperature: float32(f.temp), TopK: f.topK, TopP: float32(f.topP),
		MinP: float32(f.minP), RepeatPenalty: float32(f.repeatPenalty), Seed: f.seed, IgnoreEOS: f.ignoreEOS,
		Stop: f.stops, Logprobs: f.jsonOut,
	}
}

func generate(args []string, stdin io.Reader, stdout, stderr io.Writer, intr <-chan os.Signal) error {
	f, err := parseGenFlags(args, stderr)
	if err != nil {
		return err
	}
	if f.version {
		fmt.Fprintln(stdout, "ingot", versionString())
		return nil
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(logger)
	if f.model == "" {
		fmt.Fprintln(stderr, "No -model given: running the built-in demo, tinycode-llama, a 4M-parameter model trained on Python source\n"+
			"(it continues code; it does not chat). To run a real model, download one and pass its directory, e.g.\n"+
			"  huggingface-cli download mlx-community/Llama-3.2-1B-Instruct-4bit --local-dir Llama-3.2-1B-Instruct-4bit\n"+
			"  run -model Llama-3.2-1B-Instruct-4bit -chat")
		f.demoDefaults()
	}

	ctx, stop := cancelOn(intr)
	m, err := ingot.Load(ctx, f.model, ingot.Options{Backend: f.backend, Threads: f.threads, Quant: f.quant, Logger: logger, Fuse: f.fused()})
	interrupted := ctx.Err() != nil
	stop()
	if err != nil {
		if interrupted {
			return errInterrupted
		}
		return err
	}
	defer m.Close()
	raw := m.Raw()
	name := f.model
	if name == "" {
		name = "tinycode-llama (built in)"
	}
	arch := raw.Config.Arch()
	if raw.GGUFTypes != "" {
		arch += ", " + raw.Config.DType + ": " + raw.GGUFTypes
	}
	fmt.Fprintf(stderr, "loaded %s (%s, %d layers, %.1f MB of weights) on %s in %.2fs\n", name, arch,
		raw.Config.NumLayers, float64(raw.WeightBytes())/1e6, m.Backend(), m.LoadTime().Seconds())
	s, err := m.NewSession(ingot.SessionOptions{Context: f.ctxLen, KV: f.kv})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := f.setAdapter(m, s, stderr); err != nil {
		return err
	}
	closeDraft, err := f.speculate(intr, m, s, stderr)
	if err != nil {
		return err
	}
	defer closeDraft()
	if f.verbose {
		kv := f.kv
		if kv == "" {
			kv = kernels.DefaultKV(raw.Backend()).String()
		}
		fmt.Fprintf(stderr, "[backend: %s]\n[session: %.1f MB: a %s KV cache of %d tokens (%.1f MB) and activations]\n", m.BackendReason(),
			float64(s.MemoryBytes())/1e6, kv, s.ContextSize(), float64(s.Raw().CacheBytes())/1e6)
		if st, ok := raw.Backend().(statser); ok {
			c := st.Stats()
			fmt.Fprintf(stderr, "[weights: %.2f MB used in place from the mapped files, %.2f MB copied to the device]\n",
				float64(c.MappedBytes)/1e6, float64(c.CopiedBytes)/1e6)
		}
	}
	if f.chat {
		return chat(m, s, f, stdin, stdout, stderr, intr)
	}

	var ids []int32
	if f.promptIDs != "" {
		ids, _ = parseIDs(f.promptIDs)
	} else {
		if m.Tokenizer() == nil {
			return fmt.Errorf("%s has no tokenizer.json: pass -prompt-ids", f.model)
		}
		ids = m.Tokenizer().Encode(f.prompt, true)
	}
	if f.prompt != "" && !f.noEcho && !f.jsonOut {
		io.WriteString(stdout, f.prompt)
	}
	var (
		counters func()
		dev      *jsonMetal // per decoded token, for -json
	)
	start := time.Now()
	if st, ok := s.Raw().Backend().(statser); ok && f.verbose {
		st.ResetStats()
		dev = &jsonMetal{}
		var (
			n     int
			calls func() int64 // Objective-C calls so far, counted at the device seam
			last  int64
			sum   jsonMetal
		)
		if mb, ok := st.(*kernels.Metal); ok {
			if c, ok := mb.Device().(metal.Counter); ok {
				calls = func() int64 { return c.Counts().Calls }
				last = calls()
			}
		}
		cfg := raw.Config
		kvBytes := int64(kernels.DefaultKV(raw.Backend()).Bits() / 8)
		if f.kv == "f32" {
			kvBytes = 4
		} else if f.kv == "f16" {
			kvBytes = 2
		}
		dh := cfg.HeadDim
		if dh == 0 {
			dh = cfg.HiddenSize / cfg.NumHeads
		}
		pos := len(ids)
		counters = func() {
			// Counters since the last token: the prefill for the first, one decode step
			// after. Greedy decoding on a pipelining backend (kernels.Pipeliner) commits
			// each step one token early: token 1 shows two command buffers, the last none.
			c := st.Stats()
			st.ResetStats()
			var objc int64
			if calls != nil {
				now := calls()
				objc, last = now-last, now
			}
			fmt.Fprintf(stderr, "[token %d: %d dispatches, %d command buffers, %d CPU waits, %.2f MB of weights read, %d Objective-C calls]\n",
				n, c.Dispatches, c.CommandBuffers, c.Waits, float64(c.WeightBytes)/1e6, objc)
			if n == 0 {
				dev.TTFTS = time.Since(start).Seconds()
				fmt.Fprintf(stderr, "[first token after %.3fs]\n", dev.TTFTS)
			} else {
				// Decode attention reads every cached key and value once per step.
				kv := int64(cfg.NumLayers) * 2 * int64(cfg.NumKVHeads) * int64(dh) * int64(pos) * kvBytes
				sum.Dispatches += float64(c.Dispatches)
				sum.CommandBuffers += float64(c.CommandBuffers)
				sum.Waits += float64(c.Waits)
				sum.WeightBytes += float64(c.WeightBytes)
				sum.KVBytes += float64(kv)
				sum.ObjCCalls += float64(objc)
				k := float64(n)
				*dev = jsonMetal{Tokens: n, Dispatches: sum.Dispatches / k, CommandBuffers: sum.CommandBuffers / k, Waits: sum.Waits / k,
					WeightBytes: sum.WeightBytes / k, KVBytes: sum.KVBytes / k, ObjCCalls: sum.ObjCCalls / k, TTFTS: dev.TTFTS}
			}
			pos++
			n++
		}
	}
	gctx, stop := cancelOn(intr)
	defer stop()
	var out []ingot.Token
	var genErr error
	for tok, err := range s.GenerateIDs(gctx, ids, f.sampling()) {
		if err != nil {
			genErr = err
			break
		}
		out = append(out, tok)
		if counters != nil {
			counters()
		}
		if !f.jsonOut {
			if _, err := io.WriteString(stdout, tok.Text); err != nil {
				return err
			}
		}
	}
	res := s.Last()
	cancelled := gctx.Err() != nil && res.Stop == ingot.StopCancelled
	if genErr != nil && !cancelled {
		if errors.Is(genErr, ingot.ErrContextFull) {
			return fmt.Errorf("%w (raise -ctx; the session's window is %d tokens)", genErr, s.ContextSize())
		}
		return genErr
	}
	if !f.jsonOut {
		fmt.Fprintln(stdout)
	}
	fmt.Fprintf(stderr, "\n%s\n", res)
	if f.verbose {
		reportSpeculation(stderr, res)
	}
	switch {
	case cancelled:
		fmt.Fprintln(stderr, "[interrupted]")
	case res.Stop == ingot.StopContext:
		fmt.Fprintf(stderr, "[the context window of %d tokens is full: raise -ctx for longer output]\n", s.ContextSize())
	}
	if f.jsonOut {
		if err := writeJSON(stdout, m, ids, out, res, dev); err != nil {
			return err
		}
	}
	if cancelled {
		return errInterrupted
	}
	return nil
}

// statser is implemented by GPU backends that count their work (kernels.Metal).
type statser interface {
	Stats() kernels.Stats
	ResetStats()
}

// jsonResult is the -json output; the field names are a contract.
type jsonResult struct {
	PromptIDs []int32    `json:"prompt_ids"`
	IDs       []int32    `json:"ids"`
	Text      string     `json:"text"`
	Logprobs  []float32  `json:"logprobs"`
	Stop      ingot.Stop `json:"stop"`
	Timings   struct {
		LoadS        float64    `json:"load_s"`
		PromptTokens int        `json:"prompt_tokens"`
		PromptTokS   float64    `json:"prompt_tok_s"`
		GenTokens    int        `json:"gen_tokens"`
		GenTokS      float64    `json:"gen_tok_s"`
		Metal        *jsonMetal `json:"metal,omitempty"` // with -v on a GPU backend
	} `json:"timings"`
}

// jsonMetal is the device's work per decoded token (the averages over the
// tokens after the first, which the prefill makes) and the time to the first.
type jsonMetal struct {
	Tokens         int     `json:"tokens"`          // decoded tokens averaged
	Dispatches     float64 `json:"dispatches"`      // kernels encoded
	CommandBuffers float64 `json:"command_buffers"` // committed
	Waits          float64 `json:"cpu_waits"`       // CPU waits for the device
	WeightBytes    float64 `json:"weight_bytes"`    // weight bytes the kernels read
	KVBytes        float64 `json:"kv_bytes"`        // KV cache bytes decode attention reads (layers × 2 × Hkv × Dh × cached tokens × element size)
	ObjCCalls      float64 `json:"objc_calls"`      // Objective-C calls, counted at the device seam (the interpreter counts those Apple's device sends)
	TTFTS          float64 `json:"ttft_s"`          // seconds from the start of generation to the first token
}

func writeJSON(w io.Writer, m *ingot.Model, prompt []int32, toks []ingot.Token, res ingot.Result, dev *jsonMetal) error {
	out := jsonResult{PromptIDs: prompt, IDs: []int32{}, Logprobs: []float32{}, Text: res.Text, Stop: res.Stop}
	for _, t := range toks {
		out.IDs = append(out.IDs, t.ID)
		out.Logprobs = append(out.Logprobs, t.Logprob)
	}
	out.Timings.LoadS = m.LoadTime().Seconds()
	out.Timings.PromptTokens = res.PromptTokens
	out.Timings.PromptTokS = res.PromptTokPerSec()
	out.Timings.GenTokens = len(toks)
	out.Timings.GenTokS = res.DecodeTokPerSec()
	out.Timings.Metal = dev
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}

// parseIDs parses "1,2,3" (spaces allowed).
func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("-prompt-ids: %q is not a token id", f)
		}
		ids = append(ids, int32(v))
	}
	if len(ids) == 0 {
		return nil, errors.New("-prompt-ids: no ids")
	}
	return ids, nil
}
