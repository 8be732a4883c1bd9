package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/ingot-llm/ingot/server/constrain"
	"github.com/ingot-llm/ingot/tokenize"
)

// maxTopLogprobs is the most alternatives a token's logprobs may list.
const maxTopLogprobs = 20

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatRequest is the body of POST /v1/chat/completions. Fields not listed
// are ignored.
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            json.RawMessage `json:"messages"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Logprobs            *bool           `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ResponseFormat      json.RawMessage `json:"response_format"`
	sampling
}

// chatMessage is a message as OpenAI sends it.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls"`   // assistant
	ToolCallID *string         `json:"tool_call_id"` // tool
	Name       *string         `json:"name"`
}

// contentPart is one part of a message's content list.
type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// parseMessages reads OpenAI messages into template messages: content as a
// string or text parts (joined), the developer role as system.
func parseMessages(raw json.RawMessage) ([]tokenize.Message, error) {
	var in []chatMessage
	if isNull(raw) {
		return nil, badRequest("messages", "is required")
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, badRequest("messages", "must be a list of message objects")
	}
	if len(in) == 0 {
		return nil, badRequest("messages", "must not be empty")
	}
	out := make([]tokenize.Message, len(in))
	for i, m := range in {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		case "developer":
			m.Role = "system"
		default:
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "must be system, developer, user, assistant or tool, got %q", m.Role)
		}
		text, err := contentText(fmt.Sprintf("messages[%d].content", i), m.Content)
		if err != nil {
			return nil, err
		}
		out[i] = tokenize.Message{Role: m.Role, Content: text}
		if !isNull(m.ToolCalls) {
			calls, err := historyCalls(fmt.Sprintf("messages[%d].tool_calls", i), m.ToolCalls)
			if err != nil {
				return nil, err
			}
			out[i].Fields = map[string]any{"tool_calls": calls}
		}
		for _, f := range []struct {
			name string
			v    *string
		}{{"tool_call_id", m.ToolCallID}, {"name", m.Name}} {
			if f.v != nil {
				if out[i].Fields == nil {
					out[i].Fields = map[string]any{}
				}
				out[i].Fields[f.name] = *f.v
			}
		}
	}
	return out, nil
}

// historyCalls turns an assistant message's tool_calls into what chat
// templates expect: OpenAI's list with each call's arguments as a JSON
// object (as transformers passes them) where the string parses as one.
// Arguments given as an object (as some clients send them) are taken as
// they are.
func historyCalls(field string, raw json.RawMessage) (json.RawMessage, error) {
	var calls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &calls) != nil {
		return nil, badRequest(field, "must be a list of tool calls")
	}
	var b strings.Builder
	b.WriteByte('[')
	for j, c := range calls {
		if c.Function.Name == "" {
			return nil, badRequest(fmt.Sprintf("%s[%d].function.name", field, j), "is required")
		}
		if j > 0 {
			b.WriteByte(',')
		}
		id, _ := json.Marshal(c.ID)
		name, _ := json.Marshal(c.Function.Name)
		args := []byte(c.Function.Arguments)
		var obj map[string]json.RawMessage
		var text string
		switch {
		case isNull(c.Function.Arguments):
			args = []byte("{}")
		case json.Unmarshal(args, &obj) == nil:
		case json.Unmarshal(args, &text) == nil:
			if json.Unmarshal([]byte(text), &obj) == nil {
				args = []byte(text)
			}
		default:
			return nil, badRequest(fmt.Sprintf("%s[%d].function.arguments", field, j), "must be a string or an object")
		}
		fmt.Fprintf(&b, `{"id":%s,"type":"function","function":{"name":%s,"arguments":%s}}`, id, name, args)
	}
	b.WriteByte(']')
	return json.RawMessage(b.String()), nil
}

// contentText reads content given as a string or a list of text parts.
func contentText(field string, raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badRequest(field, "must be a string or a list of content parts")
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "text" {
			return "", badRequest(fmt.Sprintf("%s[%d].type", field, j), "only text parts are supported, got %q", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

type usage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	PromptTokensDetails promptDetails `json:"prompt_tokens_details"`
}

// promptDetails is OpenAI's usage.prompt_tokens_details.
type promptDetails struct {
	// CachedTokens are the prompt tokens taken from a session's cache (the
	// prefix cache) rather than prefilled: of the first choice of each
	// prompt (later choices of one prompt reuse it whole).
	CachedTokens int `json:"cached_tokens"`
}

func newUsage(prompt, completion, cached int) *usage {
	return &usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion,
		PromptTokensDetails: promptDetails{CachedTokens: cached}}
}

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"` // "chat.completion"
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *usage       `json:"usage"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      chatOut       `json:"message"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
}

type chatOut struct {
	Role      string     `json:"role"`
	Content   string     `json:"content"` // null in JSON when "" and there are tool calls
	Refusal   *string    `json:"refusal"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

func (c chatOut) MarshalJSON() ([]byte, error) {
	type plain chatOut
	var content *string
	if c.Content != "" || len(c.ToolCalls) == 0 {
		content = &c.Content
	}
	return json.Marshal(struct {
		plain
		Content *string `json:"content"`
	}{plain(c), content})
}

type chatLogprobs struct {
	Content []tokenLogprob `json:"content"`
	Refusal *[]any         `json:"refusal"`
}

type tokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []topLogprob `json:"top_logprobs"`
}

type topLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type chatChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"` // "chat.completion.chunk"
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   any           `json:"usage,omitempty"` // null in every chunk but the last with include_usage
}

type chunkChoice struct {
	Index        int           `json:"index"`
	Delta        delta         `json:"delta"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type delta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

// jsonLogprob keeps a logprob JSON can carry.
func jsonLogprob(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, -1) {
		return -9999
	}
	return x
}

func byteList(s string) []int {
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}

// chatLogprob is a generated token's entry in OpenAI's chat shape.
func chatLogprob(tok *tokenize.Tokenizer, st *step) tokenLogprob {
	t := tokenText(tok, st.id)
	e := tokenLogprob{Token: t, Logprob: jsonLogprob(st.logprob), Bytes: byteList(t), TopLogprobs: []topLogprob{}}
	for _, a := range st.top {
		at := tokenText(tok, a.id)
		e.TopLogprobs = append(e.TopLogprobs, topLogprob{Token: at, Logprob: jsonLogprob(a.logprob), Bytes: byteList(at)})
	}
	return e
}

// chatJob is a validated chat request, admitted to the context window.
type chatJob struct {
	ids          []int32 // the rendered, tokenized conversation
	p            params
	gen          int // tokens to generate at most
	logprobs     bool
	topK         int
	stream       bool
	includeUsage bool
	grammar      *constrain.Grammar // response_format's or a forced tool call's; nil: free text
	tools        *tools             // nil: none
}

// parseChat reads and validates a chat request: a 400 names the first bad
// field.
func parseChat(r *http.Request, l *loaded) (*chatJob, error) {
	var req chatRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	if err := l.pick(r, req.Model); err != nil {
		return nil, err
	}
	msgs, err := parseMessages(req.Messages)
	if err != nil {
		return nil, err
	}
	j := &chatJob{stream: req.Stream, includeUsage: req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage}
	if j.p, err = req.sampling.parse(); err != nil {
		return nil, err
	}
	if j.grammar, err = parseResponseFormat(req.ResponseFormat); err != nil {
		return nil, err
	}
	if j.tools, err = parseTools(req.Tools, req.ToolChoice); err != nil {
		return nil, err
	}
	co := tokenize.ChatOptions{AddGenerationPrompt: true}
	if j.tools.active() {
		co.Tools = j.tools.defs
		forced, err := j.tools.forcedGrammar(l.toolFormat)
		if err != nil {
			return nil, err
		}
		if forced != nil && j.grammar != nil {
			return nil, badRequest("response_format", "cannot be combined with tool_choice %s", j.tools.choice)
		}
		if forced != nil {
			j.grammar = forced
		}
	}
	j.logprobs = req.Logprobs != nil && *req.Logprobs
	if req.TopLogprobs != nil {
		if *req.TopLogprobs < 0 || *req.TopLogprobs > maxTopLogprobs {
			return nil, badRequest("top_logprobs", "must be in [0, %d], got %d", maxTopLogprobs, *req.TopLogprobs)
		}
		if !j.logprobs && *req.TopLogprobs > 0 {
			return nil, badRequest("top_logprobs", "needs logprobs: true")
		}
		j.topK = *req.TopLogprobs
	}
	text, err := l.tmpl.Render(msgs, co)
	if err != nil {
		var te *tokenize.TemplateError
		if errors.As(err, &te) {
			return nil, badRequest("messages", "the chat template refused them: %s", te.Message)
		}
		return nil, badRequest("messages", "%v", err)
	}
	j.ids = l.tok.Encode(text, false) // the template writes BOS where the model wants one
	maxField, maxTok := "max_tokens", req.MaxTokens
	if req.MaxCompletionTokens != nil {
		maxField, maxTok = "max_completion_tokens", req.MaxCompletionTokens
	}
	if j.gen, err = admit(len(j.ids), l.ctxSize, maxTok, maxField, "messages", false); err != nil {
		return nil, err
	}
	return j, nil
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	rq := reqOf(ctx)
	j, err := parseChat(r, rq.l)
	if err != nil {
		return err
	}
	ids, p, gen, logprobs, topK := j.ids, j.p, j.gen, j.logprobs, j.topK
	rq.prompt = len(ids)
	sl, err := rq.l.sched.acquire(ctx, ids, rq.adapter)
	if err != nil {
		return err
	}
	defer sl.release()

	id, created, name := "chatcmpl-"+rq.id, time.Now().Unix(), rq.model
	seqFor := func(i int) *sequence {
		o := p.opts
		o.MaxTokens, o.Seed, o.Logprobs = gen, seedFor(p.seed, i), logprobs
		seq := &sequence{prompt: ids, opts: o, topK: topK, grammar: j.grammar, adapter: rq.adapter}
		if j.grammar != nil {
			seq.vocab = rq.l.vocab()
		}
		return seq
	}
	var logprobsOf func(st *step) *chatLogprobs
	if logprobs {
		logprobsOf = func(st *step) *chatLogprobs {
			return &chatLogprobs{Content: []tokenLogprob{chatLogprob(rq.l.tok, st)}}
		}
	}
	completion, cached := 0, 0
	if !j.stream {
		resp := chatCompletion{ID: id, Object: "chat.completion", Created: created, Model: name}
		for i := range p.n {
			co, err := s.runChoice(ctx, rq, sl, seqFor(i), p.stops, func(string, *step) error { return nil })
			if err != nil {
				return err
			}
			completion += co.tokens
			if i == 0 {
				cached = co.cached
			}
			c := chatChoice{Index: i, Message: chatOut{Role: "assistant", Content: co.text}, FinishReason: co.finish}
			if j.tools.active() {
				content, calls := parseToolCalls(co.text, j.tools.names)
				if len(calls) > 0 {
					c.Message.Content, c.Message.ToolCalls, c.FinishReason = content, openAICalls(calls, false), "tool_calls"
				}
			}
			if logprobs {
				c.Logprobs = &chatLogprobs{Content: []tokenLogprob{}}
				for j := range co.steps {
					c.Logprobs.Content = append(c.Logprobs.Content, chatLogprob(rq.l.tok, &co.steps[j]))
				}
			}
			resp.Choices = append(resp.Choices, c)
		}
		resp.Usage = newUsage(len(ids), completion, cached)
		writeJSON(w, http.StatusOK, resp)
		return nil
	}

	includeUsage := j.includeUsage
	e := newSSE(w)
	chunk := func(c chunkChoice) error {
		ch := chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: name, Choices: []chunkChoice{c}}
		if includeUsage {
			ch.Usage = json.RawMessage("null")
		}
		return e.send("", ch)
	}
	for i := range p.n {
		empty := ""
		if err := chunk(chunkChoice{Index: i, Delta: delta{Role: "assistant", Content: &empty}}); err != nil {
			return err
		}
		var ts *toolStream
		if j.tools.active() {
			ts = &toolStream{}
		}
		co, err := s.runChoice(ctx, rq, sl, seqFor(i), p.stops, func(text string, st *step) error {
			c := chunkChoice{Index: i}
			if st != nil && logprobsOf != nil {
				c.Logprobs = logprobsOf(st)
			}
			if ts != nil {
				text = ts.add(text)
			}
			if text == "" && c.Logprobs == nil {
				return nil
			}
			c.Delta.Content = &text
			return chunk(c)
		})
		if err != nil {
			s.streamError(e, apiOpenAI, rq, ctx, err)
			return nil
		}
		completion += co.tokens
		if i == 0 {
			cached = co.cached
		}
		finish := co.finish
		if ts != nil {
			rest, calls := ts.finish(j.tools.names)
			if rest != "" {
				if err := chunk(chunkChoice{Index: i, Delta: delta{Content: &rest}}); err != nil {
					return nil
				}
			}
			// Each call whole in one delta: arguments are not streamed
			// piece by piece.
			for _, c := range openAICalls(calls, true) {
				if err := chunk(chunkChoice{Index: i, Delta: delta{ToolCalls: []toolCall{c}}}); err != nil {
					return nil
				}
			}
			if len(calls) > 0 {
				finish = "tool_calls"
			}
		}
		if err := chunk(chunkChoice{Index: i, FinishReason: &finish}); err != nil {
			return nil
		}
	}
	if includeUsage {
		e.send("", chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: name, Choices: []chunkChoice{}, Usage: newUsage(len(ids), completion, cached)})
	}
	e.raw("data: [DONE]\n\n")
	return nil
}

// openAICalls gives parsed calls ids, and with indexed their index (for
// stream deltas).
func openAICalls(calls []toolFunction, indexed bool) []toolCall {
	out := make([]toolCall, len(calls))
	for k, c := range calls {
		out[k] = toolCall{ID: callID("call_"), Type: "function", Function: c}
		if indexed {
			out[k].Index = &k
		}
	}
	return out
}
