// Command run generates text with a Llama-family model from a Hugging Face or
// mlx-community directory, in pure Go.
//
//	run [-model DIR] -prompt TEXT [flags]       complete a prompt (streamed to stdout)
//	run -model DIR -prompt-ids 1,2,3 [flags]     complete token ids (no tokenizer needed)
//	run -model DIR -chat                         interactive multi-turn chat
//	run tokenize (-model DIR | -tokenizer FILE) [-special] [-json] TEXT
//	run chat-template (-model DIR | -tokenizer-config FILE) -messages FILE.json [-add-generation-prompt]
//	run quantize -model DIR -out DIR -bits 4|8 [-group 64]  write an mlx-lm compatible quantized copy
//	run bench [-shape NAME | -model DIR] [-dtype q4] [-test pp512,tg128] [-json]
//	run selftest [-backend metal]                 check every kernel against the CPU reference
//
// With no -model, a built-in 4M-parameter Python model (tinycode-llama) is used.
// Load time and throughput go to stderr; -json prints one JSON object at the end.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/ingot-llm/ingot"
	"github.com/ingot-llm/ingot/internal/benchtool"
	"github.com/ingot-llm/ingot/internal/demo"
	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/model"
	"github.com/ingot-llm/ingot/tokenize"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if len(args) > 0 {
		switch args[0] {
		case "-version", "--version", "version":
			fmt.Fprintln(stdout, "ingot", versionString())
			return 0
		case "tokenize":
			return runTokenize(args[1:], stdin, stdout, stderr)
		case "chat-template":
			return runChatTemplate(args[1:], stdin, stdout, stderr)
		case "quantize":
			return runQuantize(ctx, args[1:], stdout, stderr)
		case "bench":
			return benchtool.Main(ctx, args[1:], stdout, stderr)
		case "selftest":
			return runSelftest(ctx, args[1:], stdout, stderr)
		}
	}
	if err := generate(ctx, args, stdin, stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "run:", err)
		return 1
	}
	return 0
}

// genFlags are the flags of the default (generate) command.
type genFlags struct {
	model, prompt, promptIDs, backend string
	quant, kv                         string
	n, topK, threads, ctxLen          int
	temp, topP, minP, repeatPenalty   float64
	seed                              uint64
	ignoreEOS, jsonOut, chat, verbose bool
	stops                             multiFlag
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

func parseGenFlags(args []string, stderr io.Writer) (*genFlags, error) {
	f := &genFlags{}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.model, "model", "", "model directory (config.json, *.safetensors, tokenizer.json); default: the built-in tinycode-llama demo")
	fs.StringVar(&f.prompt, "prompt", "", "prompt text (encoded with the model's tokenizer, BOS added)")
	fs.StringVar(&f.promptIDs, "prompt-ids", "", "comma-separated prompt token ids (replaces -prompt)")
	fs.IntVar(&f.n, "n", 256, "maximum tokens to generate (0: until EOS or the context is full)")
	fs.Float64Var(&f.temp, "temp", 0.8, "sampling temperature (0: greedy)")
	fs.IntVar(&f.topK, "top-k", 40, "keep the k most likely tokens (0: off)")
	fs.Float64Var(&f.topP, "top-p", 0.95, "nucleus sampling mass (1: off)")
	fs.Float64Var(&f.minP, "min-p", 0.05, "drop tokens below this fraction of the top probability (0: off)")
	fs.Float64Var(&f.repeatPenalty, "repeat-penalty", 1, "penalty for the last 64 tokens (1: off)")
	fs.Uint64Var(&f.seed, "seed", 0, "random seed (0: from the clock)")
	fs.StringVar(&f.backend, "backend", "auto", "compute backend: auto (metal on Apple silicon when the model fits, else cpu), cpu, metal, or metal-emu (the MSL interpreter: slow, for developers; needs clang ≥ 16)")
	fs.StringVar(&f.quant, "quant", "", "quantize f32/f16/bf16 weights on load: q4 or q8 (MLX affine, group 64)")
	fs.IntVar(&f.threads, "threads", 0, "CPU threads (0: all cores)")
	fs.IntVar(&f.ctxLen, "ctx", 0, "context window in tokens (0: min(max_position_embeddings, 4096))")
	fs.StringVar(&f.kv, "kv", "f32", "KV cache type: f32 (exact) or f16 (half the memory; keys and values rounded to halves)")
	fs.BoolVar(&f.ignoreEOS, "ignore-eos", false, "keep generating past end-of-sequence tokens")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object at the end instead of streaming")
	fs.BoolVar(&f.chat, "chat", false, "interactive multi-turn chat using the model's chat template")
	fs.BoolVar(&f.verbose, "v", false, "log details, and per-token device counters on GPU backends, to stderr")
	fs.Var(&f.stops, "stop", "stop before this string (repeatable)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: run [-model DIR] (-prompt TEXT | -prompt-ids 1,2,3 | -chat) [flags]
       run tokenize (-model DIR | -tokenizer FILE) [-special] [-json] TEXT
       run chat-template (-model DIR | -tokenizer-config FILE) -messages FILE.json [-add-generation-prompt]
       run quantize -model DIR -out DIR [-bits 4|8] [-group 64]
       run bench [-shape NAME | -model DIR] [-dtype q4|q8|bf16|f16|f32] [-test pp512,tg128] [-threads N] [-json]
       run selftest [-backend auto|metal|metal-emu|cpu]

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags come before; see -h)", fs.Arg(0))
	}
	return f, nil
}

func (f *genFlags) options() ingot.GenerateOptions {
	return ingot.GenerateOptions{
		GenerateOptions: model.GenerateOptions{
			MaxTokens: f.n, Temperature: float32(f.temp), TopK: f.topK, TopP: float32(f.topP),
			MinP: float32(f.minP), RepeatPenalty: float32(f.repeatPenalty), Seed: f.seed, IgnoreEOS: f.ignoreEOS,
			Logprobs: f.jsonOut,
		},
		Stop: f.stops,
	}
}

func generate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	f, err := parseGenFlags(args, stderr)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
	if f.prompt == "" && f.promptIDs == "" && !f.chat {
		return errors.New("nothing to do: pass -prompt TEXT, -prompt-ids 1,2,3 or -chat (see -h)")
	}
	if f.prompt != "" && f.promptIDs != "" {
		return errors.New("pass -prompt or -prompt-ids, not both")
	}
	dir := f.model
	if dir == "" {
		if dir, err = demo.Dir(); err != nil {
			return err
		}
	}
	o := ingot.Options{Context: f.ctxLen}
	switch f.quant {
	case "":
	case "q4", "q8":
		o.Quant = int(f.quant[1] - '0')
	default:
		return fmt.Errorf("-quant %q: want q4 or q8", f.quant)
	}
	if o.KV, err = model.ParseKV(f.kv); err != nil {
		return fmt.Errorf("-kv: %w", err)
	}
	b, err := openBackend(f.backend, f.threads, dir, o, stderr)
	if err != nil {
		return err
	}
	defer b.Close()
	o.Backend = b
	llm, err := ingot.Load(ctx, dir, o)
	if err != nil {
		return err
	}
	defer llm.Close()
	fmt.Fprintf(stderr, "loaded %s (%s, %d layers, %.1f MB of weights) on %s in %.2fs\n", dir, llm.Model.Config.Arch(),
		llm.Model.Config.NumLayers, float64(llm.Model.WeightBytes())/1e6, b.Name(), llm.LoadTime.Seconds())
	if f.chat {
		return chat(ctx, llm, f, stdin, stdout, stderr)
	}

	var ids []int32
	if f.promptIDs != "" {
		if ids, err = parseIDs(f.promptIDs); err != nil {
			return err
		}
	} else {
		if llm.Tokenizer == nil {
			return fmt.Errorf("%s has no tokenizer.json: pass -prompt-ids", dir)
		}
		ids = llm.Tokenizer.Encode(f.prompt, true)
	}
	onText := func(s string) error { _, err := io.WriteString(stdout, s); return err }
	if f.jsonOut {
		onText = nil
	}
	o2 := f.options()
	if st, ok := b.(statser); ok && f.verbose {
		s := st.Stats()
		fmt.Fprintf(stderr, "[weights: %.2f MB used in place from the mapped files, %.2f MB copied to the device]\n",
			float64(s.MappedBytes)/1e6, float64(s.CopiedBytes)/1e6)
		st.ResetStats()
		n := 0
		o2.OnToken = func(model.Token) {
			// Counters since the last token: the prefill for the first, one decode step
			// after. Greedy decoding on a pipelining backend (kernels.Pipeliner) commits
			// each step one token early: token 1 shows two command buffers, the last none.
			s := st.Stats()
			st.ResetStats()
			fmt.Fprintf(stderr, "[token %d: %d dispatches, %d command buffers, %d CPU waits, %.2f MB of weights read]\n",
				n, s.Dispatches, s.CommandBuffers, s.Waits, float64(s.WeightBytes)/1e6)
			n++
		}
	}
	res, err := llm.GenerateIDs(ctx, ids, o2, onText)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "\n%s\n", res)
	if !f.jsonOut {
		fmt.Fprintln(stdout)
		return nil
	}
	return writeJSON(stdout, llm, res)
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
	Stop      model.Stop `json:"stop"`
	Timings   struct {
		LoadS        float64 `json:"load_s"`
		PromptTokens int     `json:"prompt_tokens"`
		PromptTokS   float64 `json:"prompt_tok_s"`
		GenTokens    int     `json:"gen_tokens"`
		GenTokS      float64 `json:"gen_tok_s"`
	} `json:"timings"`
}

func writeJSON(w io.Writer, llm *ingot.LLM, res *ingot.Result) error {
	out := jsonResult{PromptIDs: res.PromptIDs, IDs: []int32{}, Logprobs: []float32{}, Text: res.Text, Stop: res.Stop}
	for _, t := range res.Tokens {
		out.IDs = append(out.IDs, t.ID)
		out.Logprobs = append(out.Logprobs, t.Logprob)
	}
	out.Timings.LoadS = llm.LoadTime.Seconds()
	out.Timings.PromptTokens = res.PromptTokens
	out.Timings.PromptTokS = res.PromptTokPerSec()
	out.Timings.GenTokens = len(res.Tokens)
	out.Timings.GenTokS = res.DecodeTokPerSec()
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

// chat runs an interactive conversation: each line of stdin is a user turn. The KV
// cache persists between turns, so only the new turn is prefilled.
func chat(ctx context.Context, llm *ingot.LLM, f *genFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	if llm.Tokenizer == nil {
		return errors.New("-chat needs a tokenizer.json in the model directory")
	}
	var msgs []tokenize.Message
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for {
		fmt.Fprint(stdout, "> ")
		if !in.Scan() {
			fmt.Fprintln(stdout)
			return in.Err()
		}
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		msgs = append(msgs, tokenize.Message{Role: "user", Content: line})
		res, err := llm.Chat(ctx, msgs, f.options(), func(s string) error { _, err := io.WriteString(stdout, s); return err })
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout)
		fmt.Fprintf(stderr, "[%s]\n", res)
		msgs = append(msgs, tokenize.Message{Role: "assistant", Content: res.Text})
	}
}
