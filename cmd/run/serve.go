package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/ingot-llm/ingot"
	"github.com/ingot-llm/ingot/server"
)

const serveUsage = `usage: run serve [-model DIR] [-addr 127.0.0.1:8080] [-parallel N] [-ctx N] [-kv f16|f32]
                 [-api-key KEY] [-max-queue Q] [-timeout D] [-backend B] [-threads N]
                 [-adapter NAME=DIR]... [-prefix-cache=false] [-batch=false]
                 [-lookup N | -draft DIR [-draft-max N]]

Serves the model over HTTP with OpenAI's API (/v1/chat/completions,
/v1/completions, /v1/responses, /v1/embeddings, /v1/models) and Anthropic's
(/v1/messages), plus /health and
Prometheus /metrics; see docs/server.md. Each -adapter serves a LoRA adapter
beside the base model: a request whose "model" is NAME runs with it. It listens at once (/health answers
503 until the model is loaded). SIGINT or SIGTERM stops accepting, lets the
requests in flight finish for -grace, cancels the rest and exits 0.

flags:
`

// runServe is the "run serve" command. It returns the exit code.
func runServe(args []string, stderr io.Writer, intr <-chan os.Signal) int {
	fs := flag.NewFlagSet("run serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	modelDir := fs.String("model", "", "model directory; default: the built-in tinycode-llama demo")
	addr := fs.String("addr", "127.0.0.1:8080", "listen `address` (host:port; port 0 picks a free one)")
	parallel := fs.Int("parallel", 4, "sessions: requests that run at once (each holds a KV cache of -ctx tokens)")
	ctxLen := fs.Int("ctx", 0, "each session's context window in tokens (0: min(max_position_embeddings, 4096))")
	kv := fs.String("kv", "", "KV cache type: f32 (exact) or f16 (half the memory); default: the backend's")
	apiKey := fs.String("api-key", "", "require this key (Authorization: Bearer KEY or x-api-key: KEY); default: $INGOT_API_KEY")
	maxQueue := fs.Int("max-queue", 64, "requests that may wait for a session; more get 429 (0: none wait)")
	timeout := fs.Duration("timeout", 10*time.Minute, "a request's longest run")
	grace := fs.Duration("grace", 30*time.Second, "on shutdown, how long requests in flight may finish")
	backend := fs.String("backend", "auto", "compute backend: auto, cpu, metal, cuda or metal-emu")
	threads := fs.Int("threads", 0, fmt.Sprintf("CPU threads, at most %d here (0: all cores)", runtime.NumCPU()))
	verbose := fs.Bool("v", false, "log every request (default: warnings and lifecycle only)")
	batch := fs.Bool("batch", true, "decode the sessions' sequences together, one forward a step (continuous batching; false: each on its own)")
	prefixCache := fs.Bool("prefix-cache", true, "keep each session's cache after its request, so that the next request sharing its prefix prefills only the rest (false: every request from an empty cache)")
	lookup := fs.Int("lookup", 0, "speculative decoding by prompt lookup: draft up to N tokens a round (0: off); for greedy and unseeded sampling requests, whose output it leaves unchanged")
	draft := fs.String("draft", "", "speculative decoding with this draft model `directory` (the same tokenizer; e.g. a q4 copy or a smaller model of the family)")
	draftMax := fs.Int("draft-max", 0, "tokens -draft drafts a round (0: 4)")
	var adapters multiFlag
	fs.Var(&adapters, "adapter", "serve a LoRA adapter as `NAME=DIR` (repeatable): requests with \"model\": NAME run with it")
	usage := func() {
		fmt.Fprint(stderr, serveUsage)
		fs.SetOutput(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return 0
		}
		fmt.Fprintf(stderr, "run serve: %v (see run serve -h)\n", err)
		return exitUsage
	}
	bad := func(name, want string) int {
		fmt.Fprintf(stderr, "run serve: -%s %s: want %s\n", name, fs.Lookup(name).Value, want)
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "run serve: unexpected argument %q (flags come first)\n", fs.Arg(0))
		return exitUsage
	case *parallel < 1:
		return bad("parallel", "≥ 1")
	case *ctxLen < 0:
		return bad("ctx", "≥ 0 (0: min(max_position_embeddings, 4096))")
	case *kv != "" && *kv != "f32" && *kv != "f16":
		return bad("kv", "f32 or f16")
	case *maxQueue < 0:
		return bad("max-queue", "≥ 0")
	case *timeout <= 0:
		return bad("timeout", "a duration > 0")
	case *grace < 0:
		return bad("grace", "a duration ≥ 0")
	case *lookup < 0:
		return bad("lookup", "≥ 0 (0: off)")
	case *draftMax < 0:
		return bad("draft-max", "≥ 0 (0: 4)")
	case *lookup > 0 && *draft != "":
		fmt.Fprintln(stderr, "run serve: pass -draft or -lookup, not both")
		return exitUsage
	case *threads < 0 || *threads > runtime.NumCPU():
		return bad("threads", fmt.Sprintf("in [0, %d] (0: all cores)", runtime.NumCPU()))
	}
	switch *backend {
	case "auto", "cpu", "metal", "cuda", "metal-emu":
	default:
		return bad("backend", "auto, cpu, metal, cuda or metal-emu")
	}
	if _, _, err := net.SplitHostPort(*addr); err != nil {
		return bad("addr", "host:port")
	}
	var ads []server.AdapterDir
	for _, a := range adapters {
		name, dir, ok := strings.Cut(a, "=")
		if !ok || name == "" || dir == "" {
			fmt.Fprintf(stderr, "run serve: -adapter %s: want NAME=DIR\n", a)
			return exitUsage
		}
		ads = append(ads, server.AdapterDir{Name: name, Dir: dir})
	}
	if *apiKey == "" {
		*apiKey = os.Getenv("INGOT_API_KEY")
	}
	level := slog.LevelInfo
	if !*verbose {
		level = slog.LevelWarn
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	q := *maxQueue
	if q == 0 {
		q = -1 // server.Config: -1 is no queue
	}
	srv, err := server.New(server.Config{
		ModelDir: *modelDir, LoadOptions: ingot.Options{Backend: *backend, Threads: *threads},
		Parallel: *parallel, Session: ingot.SessionOptions{Context: *ctxLen, KV: *kv}, MaxQueue: q,
		APIKey: *apiKey, RequestTimeout: *timeout, ShutdownGrace: max(*grace, time.Nanosecond), Logger: log,
		Adapters: ads, NoPrefixCache: !*prefixCache, NoBatch: !*batch, Lookup: *lookup, DraftDir: *draft, DraftTokens: *draftMax,
	})
	if err != nil {
		fmt.Fprintln(stderr, "run serve:", err)
		return exitUsage
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "run serve:", err)
		return exitError
	}
	fmt.Fprintf(stderr, "run serve: listening on http://%s (loading the model)\n", ln.Addr())
	ctx, stop := cancelOn(intr)
	defer stop()
	if err := srv.Run(ctx, ln); err != nil {
		fmt.Fprintln(stderr, "run serve:", err)
		return exitError
	}
	return 0
}
