// Command loadtest drives an OpenAI-compatible chat server (run serve,
// llama-server, vLLM, ollama) with concurrent streamed requests and reports
// throughput and latency:
//
//	go run ./internal/loadtest -url http://127.0.0.1:8080 -c 8 -n 64 -prompt-tokens 512 -max-tokens 128
//
// Each of -c clients sends requests until -n have been sent, each a
// streamed POST /v1/chat/completions with stream_options.include_usage,
// max_tokens and ignore_eos (so every reply runs to max_tokens where the
// server honours it: run serve and llama-server do). Prompts are about
// -prompt-tokens words of English, different per request from their first
// word (so a prefix cache does not turn them into one prompt); the report
// gives the prompt tokens the server counted (usage).
//
// It reports requests/s and output tokens/s over the run's wall time, time
// to first token (request sent to the first chunk with content) and
// inter-token latency (the gaps between successive content chunks, pooled
// over requests, one chunk a token as both servers stream them), each as
// p50/p95, plus failed requests. -json prints the report as JSON.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config is one load test.
type Config struct {
	URL          string // the server's base URL, or its /v1/chat/completions URL
	Model        string // the request's "model"; "": none sent
	APIKey       string // sent as Authorization: Bearer
	Concurrency  int    // clients
	Requests     int    // requests in all
	PromptTokens int    // about this many words of prompt
	MaxTokens    int
	Temperature  float64
	IgnoreEOS    bool
	Timeout      time.Duration // one request's
	Seed         uint64        // for the prompts' words
	Client       *http.Client  // nil: a client with Concurrency idle connections per host
}

// Report is what a load test measured. Durations are in seconds.
type Report struct {
	Requests         int     `json:"requests"` // completed
	Failed           int     `json:"failed"`
	FirstError       string  `json:"first_error,omitempty"`
	WallSeconds      float64 `json:"wall_seconds"`
	RequestsPerSec   float64 `json:"requests_per_second"`
	OutputTokens     int     `json:"output_tokens"`
	OutputTokPerSec  float64 `json:"output_tokens_per_second"`
	MeanPromptTokens float64 `json:"mean_prompt_tokens"` // as the server counted them (usage); 0 if it sent none
	TTFTp50          float64 `json:"ttft_p50"`
	TTFTp95          float64 `json:"ttft_p95"`
	ITLp50           float64 `json:"itl_p50"`
	ITLp95           float64 `json:"itl_p95"`
	// DecodeTokPerSec is per request: output tokens after the first over
	// the time from the first content chunk to the last, the mean over
	// requests; a stream's own speed, as one client sees it.
	DecodeTokPerSec float64 `json:"decode_tokens_per_second"`
}

// result is one request's measurements.
type result struct {
	ttft         time.Duration
	gaps         []time.Duration // between successive content chunks
	decode       time.Duration   // first content chunk to last
	chunks       int             // content chunks
	outputTokens int             // usage.completion_tokens, else chunks
	promptTokens int             // usage.prompt_tokens; 0 without usage
	err          error
}

func main() {
	var c Config
	fs := flag.NewFlagSet("loadtest", flag.ExitOnError)
	fs.StringVar(&c.URL, "url", "http://127.0.0.1:8080", "server base `URL` (or its /v1/chat/completions URL)")
	fs.StringVar(&c.Model, "model", "", "the requests' model field (llama-server and run serve accept any; \"\": none)")
	fs.StringVar(&c.APIKey, "api-key", os.Getenv("OPENAI_API_KEY"), "bearer key; default: $OPENAI_API_KEY")
	fs.IntVar(&c.Concurrency, "c", 8, "concurrent clients")
	fs.IntVar(&c.Requests, "n", 64, "requests in all")
	fs.IntVar(&c.PromptTokens, "prompt-tokens", 512, "prompt length, in words (about a token each)")
	fs.IntVar(&c.MaxTokens, "max-tokens", 128, "max_tokens of each request")
	fs.Float64Var(&c.Temperature, "temperature", 0, "sampling temperature")
	fs.BoolVar(&c.IgnoreEOS, "ignore-eos", true, "send ignore_eos, so replies run to max_tokens")
	fs.DurationVar(&c.Timeout, "timeout", 10*time.Minute, "one request's timeout")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fs.Parse(os.Args[1:])
	r, err := Run(context.Background(), c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(2)
	}
	if *asJSON {
		json.NewEncoder(os.Stdout).Encode(r)
	} else {
		r.write(os.Stdout, c)
	}
	if r.Requests == 0 {
		os.Exit(1)
	}
}

func (r *Report) write(w io.Writer, c Config) {
	ms := func(s float64) string { return fmt.Sprintf("%.1f ms", s*1000) }
	fmt.Fprintf(w, "%s: %d requests (%d failed), %d at a time, ~%d prompt words (%.0f tokens), max_tokens %d\n",
		c.URL, r.Requests+r.Failed, r.Failed, c.Concurrency, c.PromptTokens, r.MeanPromptTokens, c.MaxTokens)
	fmt.Fprintf(w, "wall %.2f s   %.2f req/s   %d output tokens   %.1f output tok/s   %.1f tok/s per stream\n",
		r.WallSeconds, r.RequestsPerSec, r.OutputTokens, r.OutputTokPerSec, r.DecodeTokPerSec)
	fmt.Fprintf(w, "TTFT p50 %s  p95 %s   inter-token p50 %s  p95 %s\n", ms(r.TTFTp50), ms(r.TTFTp95), ms(r.ITLp50), ms(r.ITLp95))
	if r.FirstError != "" {
		fmt.Fprintln(w, "first error:", r.FirstError)
	}
}

// Run runs the load test c describes.
func Run(ctx context.Context, c Config) (*Report, error) {
	switch {
	case c.Concurrency < 1 || c.Requests < 1:
		return nil, fmt.Errorf("-c (%d) and -n (%d) must be ≥ 1", c.Concurrency, c.Requests)
	case c.PromptTokens < 1 || c.MaxTokens < 1:
		return nil, fmt.Errorf("-prompt-tokens (%d) and -max-tokens (%d) must be ≥ 1", c.PromptTokens, c.MaxTokens)
	}
	url := strings.TrimRight(c.URL, "/")
	if !strings.HasSuffix(url, "/chat/completions") {
		url += "/v1/chat/completions"
	}
	client := c.Client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c.Concurrency}}
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Minute
	}
	results := make([]result, c.Requests)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(c.Concurrency, c.Requests) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= c.Requests || ctx.Err() != nil {
					return
				}
				rctx, cancel := context.WithTimeout(ctx, c.Timeout)
				results[i] = do(rctx, client, url, c, body(c, i))
				cancel()
			}
		})
	}
	wg.Wait()
	return summarize(results, time.Since(start)), nil
}

// words are the prompts' vocabulary: common English words, most one token
// in Llama-3's and Qwen's tokenizers.
var words = strings.Fields(`the of and to in is was for that on with as by at from his her it an
were are which this be or has had not but also first one their its new after who they have two
been she he other all when there up time into more out over most years some only would city
may about later state can world made than many war under part best school then known these
during where such through found being used both well three before while world music family`)

// body returns request i's JSON.
func body(c Config, i int) []byte {
	rng := rand.New(rand.NewPCG(c.Seed, uint64(i)))
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d", i) // distinct from the first token
	for range c.PromptTokens - 1 {
		sb.WriteString(" ")
		sb.WriteString(words[rng.IntN(len(words))])
	}
	req := map[string]any{
		"messages":       []map[string]string{{"role": "user", "content": sb.String()}},
		"max_tokens":     c.MaxTokens,
		"temperature":    c.Temperature,
		"stream":         true,
		"stream_options": map[string]bool{"include_usage": true},
	}
	if c.IgnoreEOS {
		req["ignore_eos"] = true
	}
	if c.Model != "" {
		req["model"] = c.Model
	}
	b, _ := json.Marshal(req)
	return b
}

// chunk is the part of a chat.completion.chunk the test reads.
type chunk struct {
	Choices []struct {
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// do sends one streamed request and times its chunks.
func do(ctx context.Context, client *http.Client, url string, c Config, b []byte) (r result) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(b))
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return result{err: fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))}
	}
	var first, last time.Time
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	done := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		now := time.Now()
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			done = true
			break
		}
		var ch chunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return result{err: fmt.Errorf("a chunk is not JSON: %v: %.200s", err, data)}
		}
		if len(ch.Error) > 0 && string(ch.Error) != "null" {
			return result{err: fmt.Errorf("error event: %.300s", ch.Error)}
		}
		if ch.Usage != nil {
			r.promptTokens, r.outputTokens = ch.Usage.PromptTokens, ch.Usage.CompletionTokens
		}
		content := false
		for _, c := range ch.Choices {
			content = content || c.Delta.Content != nil && *c.Delta.Content != "" ||
				c.Delta.ReasoningContent != nil && *c.Delta.ReasoningContent != ""
		}
		if !content {
			continue
		}
		if r.chunks == 0 {
			first, r.ttft = now, now.Sub(t0)
		} else {
			r.gaps = append(r.gaps, now.Sub(last))
		}
		last = now
		r.chunks++
	}
	if err := sc.Err(); err != nil {
		return result{err: err}
	}
	if !done {
		return result{err: errors.New("the stream ended without data: [DONE]")}
	}
	if r.chunks == 0 {
		return result{err: errors.New("no content in the reply")}
	}
	if r.outputTokens == 0 {
		r.outputTokens = r.chunks
	}
	r.decode = last.Sub(first)
	return r
}

// summarize turns the requests' results into a report.
func summarize(results []result, wall time.Duration) *Report {
	rep := &Report{WallSeconds: wall.Seconds()}
	var ttft, gaps []time.Duration
	var prompt, withUsage int
	var decodeRate float64
	var rates int
	for _, r := range results {
		if r.err != nil {
			rep.Failed++
			if rep.FirstError == "" {
				rep.FirstError = r.err.Error()
			}
			continue
		}
		rep.Requests++
		rep.OutputTokens += r.outputTokens
		ttft = append(ttft, r.ttft)
		gaps = append(gaps, r.gaps...)
		if r.promptTokens > 0 {
			prompt += r.promptTokens
			withUsage++
		}
		if r.decode > 0 && r.outputTokens > 1 {
			decodeRate += float64(r.outputTokens-1) / r.decode.Seconds()
			rates++
		}
	}
	if wall > 0 {
		rep.RequestsPerSec = float64(rep.Requests) / wall.Seconds()
		rep.OutputTokPerSec = float64(rep.OutputTokens) / wall.Seconds()
	}
	if withUsage > 0 {
		rep.MeanPromptTokens = float64(prompt) / float64(withUsage)
	}
	if rates > 0 {
		rep.DecodeTokPerSec = decodeRate / float64(rates)
	}
	rep.TTFTp50, rep.TTFTp95 = percentile(ttft, 50), percentile(ttft, 95)
	rep.ITLp50, rep.ITLp95 = percentile(gaps, 50), percentile(gaps, 95)
	return rep
}

// percentile is the nearest-rank p-th percentile of d in seconds (0 for none).
func percentile(d []time.Duration, p int) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[min(max(i, 0), len(s)-1)].Seconds()
}
