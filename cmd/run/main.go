// Command run generates text with a Llama-family model from a Hugging Face or
// mlx-community directory, or a GGUF file (-model x.gguf), in pure Go.
//
//	run [-model DIR] -prompt TEXT [flags]       complete a prompt (streamed to stdout)
//	run -model DIR -prompt-ids 1,2,3 [flags]     complete token ids (no tokenizer needed)
//	run -model DIR -chat                         interactive multi-turn chat
//	run tokenize (-model DIR | -tokenizer FILE) [-special] [-json] TEXT
//	run chat-template (-model DIR | -tokenizer-config FILE) -messages FILE.json [-add-generation-prompt]
//	run quantize -model DIR -out DIR -bits 4|8 [-group 64]  write an mlx-lm compatible quantized copy
//	run bench [-shape NAME | -model DIR] [-dtype q4] [-test pp512,tg128] [-json]
//	run perplexity [-model DIR] -file F [-ctx N] [-stride S]  perplexity of a text over sliding windows
//	run selftest [-backend metal]                 check every kernel against the CPU reference
//	run serve [-model DIR] [-addr 127.0.0.1:8080] [-parallel 4]  OpenAI/Anthropic-compatible HTTP server
//	run -version
//
// With no -model, a built-in 4M-parameter Python model (tinycode-llama) is used.
// Load time and throughput go to stderr; -json prints one JSON object at the end.
// Exit status: 0 done, 1 an error, 2 a bad flag, 130 interrupted (Ctrl-C).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/ingot-llm/ingot/internal/benchtool"
)

func main() {
	intr := make(chan os.Signal, 1)
	signal.Notify(intr, os.Interrupt, syscall.SIGTERM)
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, intr))
}

// Exit codes.
const (
	exitError       = 1
	exitUsage       = 2
	exitInterrupted = 130 // as a shell reports a command killed by SIGINT
)

// errInterrupted ends a command stopped by a signal after it reported what it had.
var errInterrupted = errors.New("interrupted")

// A usageError is a bad flag or argument: exit status 2.
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// run is main without the process: it returns the exit status. intr delivers
// SIGINT and SIGTERM (nil: none).
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, intr <-chan os.Signal) int {
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
		case "serve":
			return runServe(args[1:], stderr, intr)
		case "quantize", "bench", "selftest", "perplexity":
			ctx, stop := cancelOn(intr)
			defer stop()
			switch args[0] {
			case "quantize":
				return runQuantize(ctx, args[1:], stdout, stderr)
			case "bench":
				return benchtool.Main(ctx, args[1:], stdout, stderr)
			case "perplexity":
				return runPerplexity(ctx, args[1:], stdin, stdout, stderr)
			}
			return runSelftest(ctx, args[1:], stdout, stderr)
		}
	}
	err := generate(args, stdin, stdout, stderr, intr)
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errInterrupted):
		return exitInterrupted
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "run: %v (see run -h)\n", err)
		return exitUsage
	}
	fmt.Fprintln(stderr, "run:", err)
	return exitError
}

// cancelOn returns a context cancelled by the first signal on intr; stop
// ends the watch (and cancels the context).
func cancelOn(intr <-chan os.Signal) (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-intr:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
