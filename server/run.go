package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ingot-llm/ingot/model"
)

// A choiceOut is what one sequence produced.
type choiceOut struct {
	text    string
	steps   []step // the generated tokens but EOS (with logprobs when asked)
	finish  string // "stop" (EOS or a stop string) or "length"
	stopSeq string // the stop string that ended the text
	eos     bool   // an EOS token ended it
	tokens  int    // generated tokens, EOS included
	cached  int    // prompt tokens taken from the session's cache, not prefilled
}

// runChoice runs seq on sl and turns its ids into text, cut at the first
// of stops. onText gets the text each token releases (often "", and a last
// call with the text held back to the end) and the token's step (nil for EOS
// and that last call); its error stops the run and is returned.
func (s *Server) runChoice(ctx context.Context, rq *request, sl slot, seq *sequence, stops []string, onText func(text string, st *step) error) (choiceOut, error) {
	out := newTextOut(rq.l.tok, stops)
	eosIDs := rq.l.model.Raw().EOS
	var co choiceOut
	var werr error
	res, err := sl.run(ctx, seq, func(st step) bool {
		now := time.Now()
		if rq.firstTok.IsZero() {
			rq.firstTok = now
			s.metrics.token(true, now.Sub(rq.start))
		} else {
			s.metrics.token(false, now.Sub(rq.lastTok))
		}
		rq.lastTok = now
		co.tokens++
		rq.generated++
		if s.onToken != nil {
			s.onToken(ctx)
		}
		eos := (!seq.opts.IgnoreEOS || seq.grammar != nil) && slices.Contains(eosIDs, st.id)
		text, stopped := out.next(st.id, eos, false)
		var sp *step
		if !eos {
			co.steps = append(co.steps, st)
			sp = &co.steps[len(co.steps)-1]
		}
		co.eos = eos
		if werr = onText(text, sp); werr != nil {
			return false
		}
		return !stopped
	})
	co.cached = res.cached
	s.metrics.prefill(len(seq.prompt)-res.cached, res.cached)
	s.metrics.speculation(res.drafted, res.accepted)
	if werr != nil {
		return co, werr
	}
	if err != nil {
		return co, err
	}
	if tail := out.flush(); tail != "" {
		if err := onText(tail, nil); err != nil {
			return co, err
		}
	}
	co.text, co.stopSeq = out.result(), out.stop
	co.finish = "length"
	if res.stop == model.StopEOS || co.stopSeq != "" {
		co.finish = "stop"
	}
	return co, nil
}

// decodeBody reads a JSON request body into v.
func decodeBody(r *http.Request, v any) error {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		return decodeError(err)
	}
	return nil
}

// sampling holds the sampling fields OpenAI's endpoints share (and a few
// llama.cpp and vLLM add). Pointers tell absent from zero.
type sampling struct {
	Temperature       *float64        `json:"temperature"`
	TopP              *float64        `json:"top_p"`
	TopK              *int            `json:"top_k"`
	MinP              *float64        `json:"min_p"`
	Seed              *int64          `json:"seed"`
	Stop              json.RawMessage `json:"stop"`
	FrequencyPenalty  *float64        `json:"frequency_penalty"`
	PresencePenalty   *float64        `json:"presence_penalty"`
	RepetitionPenalty *float64        `json:"repetition_penalty"`
	N                 *int            `json:"n"`
	LogitBias         json.RawMessage `json:"logit_bias"`
	IgnoreEOS         bool            `json:"ignore_eos"`
}

// maxN is the most sequences one request may ask for.
const maxN = 16

// maxStops is the most stop strings one request may give.
const maxStops = 16

// params is a request's validated generation settings.
type params struct {
	opts  model.GenerateOptions // all but MaxTokens, Seed and Logprobs
	seed  *int64
	stops []string
	n     int
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// parse validates the fields, naming the first bad one.
func (f *sampling) parse() (params, error) {
	p := params{opts: model.GenerateOptions{Temperature: 1, IgnoreEOS: f.IgnoreEOS}, seed: f.Seed, n: 1}
	if v := f.Temperature; v != nil {
		if !finite(*v) || *v < 0 {
			return p, badRequest("temperature", "must be a number ≥ 0 (0: greedy), got %g", *v)
		}
		p.opts.Temperature = float32(*v)
	}
	if v := f.TopP; v != nil {
		if !(*v >= 0 && *v <= 1) {
			return p, badRequest("top_p", "must be in [0, 1], got %g", *v)
		}
		p.opts.TopP = float32(*v)
	}
	if v := f.TopK; v != nil {
		if *v < -1 {
			return p, badRequest("top_k", "must be ≥ -1 (-1 or 0: off), got %d", *v)
		}
		p.opts.TopK = max(*v, 0)
	}
	if v := f.MinP; v != nil {
		if !(*v >= 0 && *v <= 1) {
			return p, badRequest("min_p", "must be in [0, 1] (0: off), got %g", *v)
		}
		p.opts.MinP = float32(*v)
	}
	if v := f.RepetitionPenalty; v != nil {
		if !finite(*v) || *v <= 0 {
			return p, badRequest("repetition_penalty", "must be a number > 0 (1: off), got %g", *v)
		}
		p.opts.RepeatPenalty = float32(*v)
	}
	for _, pen := range []struct {
		name string
		v    *float64
	}{{"frequency_penalty", f.FrequencyPenalty}, {"presence_penalty", f.PresencePenalty}} {
		if pen.v != nil && *pen.v != 0 {
			return p, badRequest(pen.name, "is not supported (only 0); use repetition_penalty, got %g", *pen.v)
		}
	}
	if v := f.N; v != nil {
		if *v < 1 || *v > maxN {
			return p, badRequest("n", "must be in [1, %d], got %d", maxN, *v)
		}
		p.n = *v
	}
	if len(f.LogitBias) > 0 && !isNull(f.LogitBias) && string(f.LogitBias) != "{}" {
		return p, badRequest("logit_bias", "is not supported")
	}
	var err error
	if p.stops, err = parseStop("stop", f.Stop); err != nil {
		return p, err
	}
	return p, nil
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// parseStop reads a string or a list of strings.
func parseStop(field string, raw json.RawMessage) ([]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, badRequest(field, "must not be empty")
		}
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badRequest(field, "must be a string or a list of strings")
	}
	if len(list) > maxStops {
		return nil, badRequest(field, "has %d strings, at most %d", len(list), maxStops)
	}
	for i, s := range list {
		if s == "" {
			return nil, badRequest(fmt.Sprintf("%s[%d]", field, i), "must not be empty")
		}
	}
	return list, nil
}

// seedFor is the sampler seed of choice i: the request's seed mixed with i
// (splitmix64), never 0 (which seeds from the clock); 0 without a seed.
func seedFor(seed *int64, i int) uint64 {
	if seed == nil {
		return 0
	}
	z := uint64(*seed) + uint64(i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	if z == 0 {
		z = 1
	}
	return z
}

// admit checks that a prompt of n tokens and maxTokens more fit the context
// window of ctxSize tokens and returns the tokens to generate (nil
// maxTokens: as many as fit). scoring allows max_tokens 0.
func admit(n, ctxSize int, maxTokens *int, maxField, promptField string, scoring bool) (int, error) {
	if n == 0 {
		return 0, badRequest(promptField, "is empty")
	}
	if maxTokens != nil && (*maxTokens < 0 || *maxTokens == 0 && !scoring) {
		return 0, badRequest(maxField, "must be ≥ 1, got %d", *maxTokens)
	}
	gen := ctxSize - n
	if maxTokens != nil {
		gen = *maxTokens
	}
	if gen == 0 && n <= ctxSize && scoring {
		return 0, nil
	}
	if n >= ctxSize {
		return 0, badRequest(promptField, "the prompt has %d tokens; the context window holds %d (the server's -ctx)", n, ctxSize)
	}
	if n+gen > ctxSize {
		return 0, badRequest(maxField, "%d tokens with the prompt's %d exceed the context window of %d (at most %d)", gen, n, ctxSize, ctxSize-n)
	}
	return gen, nil
}

// sseWriter writes server-sent events.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	e := &sseWriter{w: w, rc: http.NewResponseController(w)}
	e.rc.Flush()
	return e
}

// send writes one event (event "": data only) and flushes.
func (e *sseWriter) send(event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var sb strings.Builder
	if event != "" {
		sb.WriteString("event: " + event + "\n")
	}
	sb.WriteString("data: ")
	sb.Write(b)
	sb.WriteString("\n\n")
	return e.raw(sb.String())
}

func (e *sseWriter) raw(s string) error {
	if _, err := e.w.Write([]byte(s)); err != nil {
		return err
	}
	return e.rc.Flush()
}

// streamError reports err inside a stream that has begun.
func (s *Server) streamError(e *sseWriter, kind api, rq *request, ctx context.Context, err error) {
	ae := asAPIError(ctx, err)
	rq.log.Warn("stream ended by an error", "err", err)
	if ctx.Err() == context.Canceled {
		return // the client is gone
	}
	if kind == apiAnthropic {
		e.send("error", ae.anthropic())
		return
	}
	e.send("", ae.openAI())
}
