package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ingot-llm/ingot/tokenize"
)

// completionRequest is the body of POST /v1/completions. Fields not listed
// are ignored.
type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Suffix        *string         `json:"suffix"`
	MaxTokens     *int            `json:"max_tokens"`
	Echo          bool            `json:"echo"`
	Logprobs      *int            `json:"logprobs"`
	BestOf        *int            `json:"best_of"`
	Stream        bool            `json:"stream"`
	StreamOptions *streamOptions  `json:"stream_options"`
	sampling
}

// defaultCompletionTokens is OpenAI's max_tokens default for /v1/completions.
const defaultCompletionTokens = 16

// A prompt is one prompt of a completions request.
type prompt struct {
	text string // as given, or decoded from ids
	ids  []int32
}

// parsePrompts reads a string, a list of strings, a list of token ids or a
// list of id lists. Strings are encoded with the tokenizer's special tokens
// (BOS); ids are taken as they are.
func parsePrompts(raw json.RawMessage, tok *tokenize.Tokenizer, vocab int) ([]prompt, error) {
	if isNull(raw) {
		return nil, badRequest("prompt", "is required")
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []prompt{{text: one, ids: tok.Encode(one, true)}}, nil
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil && len(strs) > 0 {
		out := make([]prompt, len(strs))
		for i, s := range strs {
			out[i] = prompt{text: s, ids: tok.Encode(s, true)}
		}
		return out, nil
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		p, err := idPrompt("prompt", ids, tok, vocab)
		return []prompt{p}, err
	}
	var lists [][]int64
	if json.Unmarshal(raw, &lists) == nil && len(lists) > 0 {
		out := make([]prompt, len(lists))
		for i, l := range lists {
			var err error
			if out[i], err = idPrompt(fmt.Sprintf("prompt[%d]", i), l, tok, vocab); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, badRequest("prompt", "must be a string, a non-empty list of strings, of token ids, or of lists of token ids")
}

func idPrompt(field string, ids []int64, tok *tokenize.Tokenizer, vocab int) (prompt, error) {
	p := prompt{ids: make([]int32, len(ids))}
	for j, id := range ids {
		if id < 0 || id >= int64(vocab) {
			return p, badRequest(fmt.Sprintf("%s[%d]", field, j), "token id %d is outside the vocabulary [0, %d)", id, vocab)
		}
		p.ids[j] = int32(id)
	}
	p.text = tok.Decode(p.ids, false)
	return p, nil
}

type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"` // "text_completion"
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   any                `json:"usage,omitempty"`
}

type completionChoice struct {
	Text         string          `json:"text"`
	Index        int             `json:"index"`
	Logprobs     *legacyLogprobs `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

// legacyLogprobs is the logprobs object of /v1/completions.
type legacyLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// logprobsBuilder fills legacyLogprobs token by token, with text offsets
// (in code points) into the choice's text.
type logprobsBuilder struct {
	tok  *tokenize.Tokenizer
	text string // the text the offsets index: the choice's text so far
	cur  int    // bytes of text the tokens so far cover
	base int    // code points before text[cur]
}

// add appends st (first: a prompt's first token, which has no logprob).
func (b *logprobsBuilder) add(lp *legacyLogprobs, st *step, first bool) {
	t := tokenText(b.tok, st.id)
	lp.Tokens = append(lp.Tokens, t)
	lp.TextOffset = append(lp.TextOffset, b.base)
	switch rest := b.text[b.cur:]; {
	case strings.HasPrefix(rest, t):
		b.cur += len(t)
		b.base += runeCount(t)
	case b.tok.IsSpecial(st.id): // a special token the text leaves out (BOS)
	default:
		n := min(len(t), len(rest))
		b.base += runeCount(rest[:n])
		b.cur += n
	}
	if first {
		lp.TokenLogprobs = append(lp.TokenLogprobs, nil)
		lp.TopLogprobs = append(lp.TopLogprobs, nil)
		return
	}
	v := jsonLogprob(st.logprob)
	lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
	top := map[string]float64{}
	for _, a := range st.top {
		if k := tokenText(b.tok, a.id); top[k] == 0 { // first (the likelier) of tokens with one text
			top[k] = jsonLogprob(a.logprob)
		}
	}
	top[t] = v
	lp.TopLogprobs = append(lp.TopLogprobs, top)
}

// completionJob is a validated completions request, each prompt admitted
// to the context window.
type completionJob struct {
	req      completionRequest
	p        params
	prompts  []prompt
	gens     []int // tokens to generate per prompt (0: none, e.g. scoring)
	logprobs bool
	k        int // alternatives per token
	promptN  int // prompt tokens, all prompts
}

// parseCompletion reads and validates a completions request: a 400 names
// the first bad field.
func parseCompletion(r *http.Request, l *loaded) (*completionJob, error) {
	j := &completionJob{}
	req := &j.req
	if err := decodeBody(r, req); err != nil {
		return nil, err
	}
	if err := l.pick(r, req.Model); err != nil {
		return nil, err
	}
	var err error
	if j.p, err = req.sampling.parse(); err != nil {
		return nil, err
	}
	if req.Suffix != nil && *req.Suffix != "" {
		return nil, badRequest("suffix", "is not supported")
	}
	if req.BestOf != nil && *req.BestOf != j.p.n {
		return nil, badRequest("best_of", "is not supported (only equal to n)")
	}
	if j.logprobs = req.Logprobs != nil; j.logprobs {
		if j.k = *req.Logprobs; j.k < 0 || j.k > maxTopLogprobs {
			return nil, badRequest("logprobs", "must be in [0, %d], got %d", maxTopLogprobs, j.k)
		}
	}
	if j.prompts, err = parsePrompts(req.Prompt, l.tok, l.model.Raw().Config.VocabSize); err != nil {
		return nil, err
	}
	maxTok := req.MaxTokens
	if maxTok == nil {
		d := defaultCompletionTokens
		maxTok = &d
	}
	j.gens = make([]int, len(j.prompts))
	for i, pr := range j.prompts {
		// max_tokens 0 is scoring with echo, and an empty completion without.
		field := "prompt"
		if len(j.prompts) > 1 {
			field = fmt.Sprintf("prompt[%d]", i)
		}
		if j.gens[i], err = admit(len(pr.ids), l.ctxSize, maxTok, "max_tokens", field, true); err != nil {
			return nil, err
		}
		j.promptN += len(pr.ids)
	}
	return j, nil
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	rq := reqOf(ctx)
	j, err := parseCompletion(r, rq.l)
	if err != nil {
		return err
	}
	req, p, prompts, gens, logprobs, k := &j.req, j.p, j.prompts, j.gens, j.logprobs, j.k
	rq.prompt = j.promptN
	var first []int32 // what the first sequence runs; none for scoring, which starts from an empty cache
	if !(req.Echo && logprobs) {
		first = prompts[0].ids
	}
	sl, err := rq.l.sched.acquire(ctx, first, rq.adapter)
	if err != nil {
		return err
	}
	defer sl.release()

	id, created, name := "cmpl-"+rq.id, time.Now().Unix(), rq.model
	includeUsage := req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	var e *sseWriter
	if req.Stream {
		e = newSSE(w)
	}
	send := func(c completionChoice) error {
		ch := completion{ID: id, Object: "text_completion", Created: created, Model: name, Choices: []completionChoice{c}}
		if includeUsage {
			ch.Usage = json.RawMessage("null")
		}
		return e.send("", ch)
	}
	var choices []completionChoice
	completionTokens, cached := 0, 0
	for pi, pr := range prompts {
		for i := range p.n {
			index := pi*p.n + i
			o := p.opts
			o.MaxTokens, o.Seed, o.Logprobs = gens[pi], seedFor(p.seed, i), logprobs
			seq := &sequence{prompt: pr.ids, opts: o, topK: k, scorePrompt: req.Echo && logprobs, scoreTopK: k, adapter: rq.adapter}
			if gens[pi] == 0 && !seq.scorePrompt {
				// nothing to run: an empty completion (or the prompt, with echo)
				c := completionChoice{Index: index, FinishReason: ptr("length")}
				if req.Echo {
					c.Text = pr.text
				}
				if req.Stream {
					if err := send(c); err != nil {
						return nil
					}
				}
				choices = append(choices, c)
				continue
			}
			co, err := s.completionChoice(ctx, rq, sl, seq, pr, index, req, p.stops, send)
			if err != nil {
				if e != nil {
					s.streamError(e, apiOpenAI, rq, ctx, err)
					return nil
				}
				return err
			}
			completionTokens += co.tokens
			if i == 0 {
				cached += co.cached
			}
			choices = append(choices, co.choice)
		}
	}
	if e == nil {
		writeJSON(w, http.StatusOK, completion{ID: id, Object: "text_completion", Created: created, Model: name,
			Choices: choices, Usage: newUsage(rq.prompt, completionTokens, cached)})
		return nil
	}
	if includeUsage {
		e.send("", completion{ID: id, Object: "text_completion", Created: created, Model: name,
			Choices: []completionChoice{}, Usage: newUsage(rq.prompt, completionTokens, cached)})
	}
	e.raw("data: [DONE]\n\n")
	return nil
}

// completionOut is one choice of a completions request.
type completionOut struct {
	choice completionChoice
	tokens int
	cached int // prompt tokens from the session's cache
}

// completionChoice runs one sequence of a completions request. With send
// (streaming) it sends the echoed prompt, each token's text and logprobs,
// then the finish reason; without, it returns the whole choice.
func (s *Server) completionChoice(ctx context.Context, rq *request, sl slot, seq *sequence, pr prompt, index int,
	req *completionRequest, stops []string, send func(completionChoice) error) (completionOut, error) {
	stream, logprobs := req.Stream, seq.opts.Logprobs
	echoSent := !req.Echo
	off := 0 // code points of text before the next token, when streaming
	echo := func() error {
		echoSent = true
		c := completionChoice{Index: index, Text: pr.text}
		if seq.scorePrompt {
			c.Logprobs = emptyLegacy()
			b := &logprobsBuilder{tok: rq.l.tok, text: pr.text}
			for j := range seq.scored {
				b.add(c.Logprobs, &seq.scored[j], j == 0)
			}
		}
		off = runeCount(pr.text)
		return send(c)
	}
	co, err := s.runChoice(ctx, rq, sl, seq, stops, func(text string, st *step) error {
		if !stream {
			return nil
		}
		if !echoSent {
			if err := echo(); err != nil {
				return err
			}
		}
		c := completionChoice{Index: index, Text: text}
		if logprobs && st != nil {
			c.Logprobs = emptyLegacy()
			b := &logprobsBuilder{tok: rq.l.tok, text: tokenText(rq.l.tok, st.id), base: off}
			b.add(c.Logprobs, st, false)
			off = b.base
		}
		if c.Text == "" && c.Logprobs == nil {
			return nil
		}
		return send(c)
	})
	out := completionOut{tokens: co.tokens, cached: co.cached}
	if err != nil {
		return out, err
	}
	if stream {
		if !echoSent {
			if err := echo(); err != nil {
				return out, err
			}
		}
		out.choice = completionChoice{Index: index, FinishReason: &co.finish}
		return out, send(out.choice)
	}
	c := completionChoice{Index: index, Text: co.text, FinishReason: &co.finish}
	if req.Echo {
		c.Text = pr.text + co.text
	}
	if logprobs {
		c.Logprobs = emptyLegacy()
		b := &logprobsBuilder{tok: rq.l.tok, text: c.Text}
		for j := range seq.scored {
			b.add(c.Logprobs, &seq.scored[j], j == 0)
		}
		for j := range co.steps {
			b.add(c.Logprobs, &co.steps[j], false)
		}
	}
	out.choice = c
	return out, nil
}

func emptyLegacy() *legacyLogprobs {
	return &legacyLogprobs{Tokens: []string{}, TokenLogprobs: []*float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
}

func ptr[T any](v T) *T { return &v }
