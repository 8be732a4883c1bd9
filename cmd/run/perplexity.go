package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/ingot-llm/ingot"
)

// runPerplexity implements `run perplexity -model DIR -file F [-ctx N -stride S]`:
// the perplexity of a text under a model, over sliding windows for texts
// longer than the context (ingot.Session.RollingLogprob).
func runPerplexity(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run perplexity", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("model", "", "model directory or GGUF file (default: the built-in tinycode-llama)")
	file := fs.String("file", "", "text file to score (-: standard input); encoded with the tokenizer's BOS")
	window := fs.Int("ctx", 0, "window in tokens (0: min(max_position_embeddings, 4096))")
	stride := fs.Int("stride", 0, "tokens between window starts, in [1, ctx-1] (0: ctx/2); ctx-1: lm-eval's windows, the least compute")
	backend := fs.String("backend", "auto", "compute backend: auto, cpu, metal, cuda or metal-emu")
	threads := fs.Int("threads", 0, fmt.Sprintf("CPU threads, at most %d here (0: all cores)", runtime.NumCPU()))
	jsonOut := fs.Bool("json", false, "print one JSON object instead of the summary line")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: run perplexity [-model DIR] -file F [-ctx N] [-stride S] [-json]\n\n"+
			"Window j covers tokens [j·S, j·S+N), the last one the text's last N tokens, and scores the tokens no\n"+
			"earlier window scored (lm-eval's loglikelihood_rolling with S = N-1; the Hugging Face perplexity guide's\n"+
			"sliding window); PPL = exp(−mean ln p) over every token after the first (BOS).\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "run perplexity: "+format+" (see run perplexity -h)\n", a...)
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		return usageErr("unexpected argument %q (flags come first)", fs.Arg(0))
	case *file == "":
		return usageErr("-file: no text to score")
	case *window < 0 || *window == 1:
		return usageErr("-ctx %d: want 0 or ≥ 2", *window)
	case *stride < 0 || (*window > 0 && *stride >= *window):
		return usageErr("-stride %d: want 0 or in [1, ctx-1]", *stride)
	case *threads < 0 || *threads > runtime.NumCPU():
		return usageErr("-threads %d: want [0, %d]", *threads, runtime.NumCPU())
	}
	fail := func(err error) int {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "run perplexity: interrupted")
			return exitInterrupted
		}
		fmt.Fprintln(stderr, "run perplexity:", err)
		return exitError
	}
	var text []byte
	var err error
	if *file == "-" {
		text, err = io.ReadAll(stdin)
	} else {
		text, err = os.ReadFile(*file)
	}
	if err != nil {
		return fail(err)
	}
	m, err := ingot.Load(ctx, *dir, ingot.Options{Backend: *backend, Threads: *threads})
	if err != nil {
		return fail(err)
	}
	defer m.Close()
	if m.Tokenizer() == nil {
		return fail(fmt.Errorf("%s has no tokenizer.json", *dir))
	}
	s, err := m.NewSession(ingot.SessionOptions{Context: *window})
	if err != nil {
		return fail(err)
	}
	defer s.Close()
	o := ingot.RollingOptions{Window: s.ContextSize(), Stride: *stride}
	if o.Stride == 0 {
		o.Stride = o.Window / 2
	}
	if o.Stride >= o.Window {
		return usageErr("-stride %d: want [1, %d] for the window of %d tokens", o.Stride, o.Window-1, o.Window)
	}
	if isTerminal(stderr) {
		o.Progress = func(done, total int) { fmt.Fprintf(stderr, "\r%s", tokenBar(done, total, 30)) }
	}
	start := time.Now()
	r, err := s.RollingLogprob(ctx, string(text), o)
	if o.Progress != nil {
		fmt.Fprintln(stderr)
	}
	if err != nil {
		return fail(err)
	}
	took := time.Since(start)
	n := len(r.Logprobs)
	ppl := r.Perplexity()
	// The standard error of the mean negative log-likelihood, carried to PPL
	// as llama-perplexity reports it (PPL · σ/√(n−1)).
	mean := -r.Logprob / float64(n)
	var sq float64
	for _, lp := range r.Logprobs {
		sq += lp * lp
	}
	pplErr := 0.0
	if n > 1 {
		pplErr = ppl * math.Sqrt(max(sq/float64(n)-mean*mean, 0)/float64(n-1))
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(map[string]any{"ppl": ppl, "ppl_stderr": pplErr, "nll": mean, "tokens": n, "windows": r.Windows,
			"window": o.Window, "stride": o.Stride, "seconds": took.Seconds()}); err != nil {
			return fail(err)
		}
		return 0
	}
	fmt.Fprintf(stdout, "PPL %.4f ± %.4f over %d tokens (%d windows of %d, stride %d; %.1fs, %.0f tok/s)\n",
		ppl, pplErr, n, r.Windows, o.Window, o.Stride, took.Seconds(), float64(n)/took.Seconds())
	return 0
}

// tokenBar renders "[#####.....]  42%  1234/2900 tokens".
func tokenBar(done, total, width int) string {
	frac := 1.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	k := int(frac * float64(width))
	return fmt.Sprintf("[%s%s] %3.0f%%  %d/%d tokens", strings.Repeat("#", k), strings.Repeat(".", width-k), 100*frac, done, total)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
