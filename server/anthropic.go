package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/ingot-llm/ingot/server/constrain"
	"github.com/ingot-llm/ingot/tokenize"
)

// messagesRequest is the body of POST /v1/messages (Anthropic). Fields not
// listed are ignored.
type messagesRequest struct {
	Model         string          `json:"model"`
	MaxTokens     *int            `json:"max_tokens"`
	Messages      json.RawMessage `json:"messages"`
	System        json.RawMessage `json:"system"`
	StopSequences json.RawMessage `json:"stop_sequences"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	Stream        bool            `json:"stream"`
	Tools         json.RawMessage `json:"tools"`
	ToolChoice    json.RawMessage `json:"tool_choice"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// blocksText reads content given as a string or a list of text blocks.
func blocksText(field string, raw json.RawMessage) (string, error) {
	return partsText(field, raw, "text")
}

// partsText reads content given as a string or a list of parts whose type
// is one of types, concatenating their text.
func partsText(field string, raw json.RawMessage, types ...string) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badRequest(field, "must be a string or a list of content parts")
	}
	var b strings.Builder
	for j, pt := range parts {
		if !slices.Contains(types, pt.Type) {
			return "", badRequest(fmt.Sprintf("%s[%d].type", field, j), "only %s parts are supported, got %q", strings.Join(types, " and "), pt.Type)
		}
		b.WriteString(pt.Text)
	}
	return b.String(), nil
}

// parse turns the request into template messages and sampling settings.
func (req *messagesRequest) parse() ([]tokenize.Message, params, error) {
	var p params
	if req.MaxTokens == nil {
		return nil, p, badRequest("max_tokens", "is required")
	}
	var msgs []tokenize.Message
	if !isNull(req.System) {
		sys, err := blocksText("system", req.System)
		if err != nil {
			return nil, p, err
		}
		msgs = append(msgs, tokenize.Message{Role: "system", Content: sys})
	}
	var in []anthropicMessage
	if isNull(req.Messages) {
		return nil, p, badRequest("messages", "is required")
	}
	if err := json.Unmarshal(req.Messages, &in); err != nil {
		return nil, p, badRequest("messages", "must be a list of message objects")
	}
	if len(in) == 0 {
		return nil, p, badRequest("messages", "must not be empty")
	}
	for i, m := range in {
		if m.Role != "user" && m.Role != "assistant" {
			return nil, p, badRequest(fmt.Sprintf("messages.%d.role", i), "must be user or assistant, got %q", m.Role)
		}
		turn, err := anthropicTurn(i, m)
		if err != nil {
			return nil, p, err
		}
		msgs = append(msgs, turn...)
	}
	f := sampling{Temperature: req.Temperature, TopP: req.TopP, TopK: req.TopK}
	p, err := f.parse()
	if err != nil {
		return nil, p, err
	}
	if p.stops, err = parseStop("stop_sequences", req.StopSequences); err != nil {
		return nil, p, err
	}
	return msgs, p, nil
}

type anthropicResponse struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"` // "message"
	Role         string           `json:"role"` // "assistant"
	Model        string           `json:"model"`
	Content      []anthropicBlock `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

// anthropicBlock is a content block of a response: text, or tool_use.
type anthropicBlock struct {
	Type  string          `json:"type"` // "text" or "tool_use"
	Text  string          `json:"text"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

func (b anthropicBlock) MarshalJSON() ([]byte, error) {
	if b.Type == "text" {
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{b.Type, b.Text})
	}
	return json.Marshal(struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}{b.Type, b.ID, b.Name, b.Input})
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// stopReason maps how a choice ended to Anthropic's stop_reason and
// stop_sequence.
func stopReason(co *choiceOut, toolUse bool) (*string, *string) {
	switch {
	case toolUse:
		return ptr("tool_use"), nil
	case co.stopSeq != "":
		return ptr("stop_sequence"), &co.stopSeq
	case co.finish == "stop":
		return ptr("end_turn"), nil
	}
	return ptr("max_tokens"), nil
}

// messagesJob is a validated Anthropic messages request, admitted to the
// context window.
type messagesJob struct {
	ids     []int32
	p       params
	gen     int
	stream  bool
	tools   *tools             // nil: none
	grammar *constrain.Grammar // a forced tool call's
}

// parseMessagesRequest reads and validates a messages request: a 400 names
// the first bad field.
func parseMessagesRequest(r *http.Request, l *loaded) (*messagesJob, error) {
	var req messagesRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	if err := l.pick(r, req.Model); err != nil {
		return nil, err
	}
	msgs, p, err := req.parse()
	if err != nil {
		return nil, err
	}
	j := &messagesJob{p: p, stream: req.Stream}
	if j.tools, err = parseAnthropicTools(req.Tools, req.ToolChoice); err != nil {
		return nil, err
	}
	co := tokenize.ChatOptions{AddGenerationPrompt: true}
	if j.tools.active() {
		co.Tools = j.tools.defs
		if j.grammar, err = j.tools.forcedGrammar(l.toolFormat); err != nil {
			return nil, err
		}
	}
	text, err := l.tmpl.Render(msgs, co)
	if err != nil {
		return nil, badRequest("messages", "%v", err)
	}
	j.ids = l.tok.Encode(text, false)
	if j.gen, err = admit(len(j.ids), l.ctxSize, req.MaxTokens, "max_tokens", "messages", false); err != nil {
		return nil, err
	}
	return j, nil
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	rq := reqOf(ctx)
	j, err := parseMessagesRequest(r, rq.l)
	if err != nil {
		return err
	}
	ids, p, gen := j.ids, j.p, j.gen
	rq.prompt = len(ids)
	sl, err := rq.l.sched.acquire(ctx, ids, rq.adapter)
	if err != nil {
		return err
	}
	defer sl.release()
	o := p.opts
	o.MaxTokens = gen
	seq := &sequence{prompt: ids, opts: o, grammar: j.grammar, adapter: rq.adapter}
	if j.grammar != nil {
		seq.vocab = rq.l.vocab()
	}
	msg := anthropicResponse{ID: "msg_" + rq.id, Type: "message", Role: "assistant", Model: rq.model,
		Content: []anthropicBlock{}, Usage: anthropicUsage{InputTokens: len(ids)}}
	if !j.stream {
		co, err := s.runChoice(ctx, rq, sl, seq, p.stops, func(string, *step) error { return nil })
		if err != nil {
			return err
		}
		content, calls := co.text, []toolFunction(nil)
		if j.tools.active() {
			content, calls = parseToolCalls(co.text, j.tools.names)
		}
		if content != "" || len(calls) == 0 {
			msg.Content = append(msg.Content, anthropicBlock{Type: "text", Text: content})
		}
		msg.Content = append(msg.Content, toolUseBlocks(calls)...)
		msg.StopReason, msg.StopSequence = stopReason(&co, len(calls) > 0)
		msg.Usage.OutputTokens = co.tokens
		writeJSON(w, http.StatusOK, msg)
		return nil
	}
	e := newSSE(w)
	type obj = map[string]any
	var ts *toolStream
	if j.tools.active() {
		ts = &toolStream{}
	}
	// The text block is index 0. With tools it starts at the first text, so
	// that a reply of calls only has none, as Anthropic's.
	textOpen := false
	openText := func() error {
		textOpen = true
		return e.send("content_block_start", obj{"type": "content_block_start", "index": 0, "content_block": anthropicBlock{Type: "text"}})
	}
	if e.send("message_start", obj{"type": "message_start", "message": msg}) != nil {
		return nil
	}
	if ts == nil && openText() != nil {
		return nil
	}
	if e.send("ping", obj{"type": "ping"}) != nil {
		return nil
	}
	textDelta := func(text string) error {
		if !textOpen {
			if err := openText(); err != nil {
				return err
			}
		}
		return e.send("content_block_delta", obj{"type": "content_block_delta", "index": 0,
			"delta": obj{"type": "text_delta", "text": text}})
	}
	co, err := s.runChoice(ctx, rq, sl, seq, p.stops, func(text string, _ *step) error {
		if ts != nil {
			text = ts.add(text)
		}
		if text == "" {
			return nil
		}
		return textDelta(text)
	})
	if err != nil {
		s.streamError(e, apiAnthropic, rq, ctx, err)
		return nil
	}
	var calls []toolFunction
	if ts != nil {
		var rest string
		if rest, calls = ts.finish(j.tools.names); rest != "" {
			if textDelta(rest) != nil {
				return nil
			}
		}
	}
	type event struct {
		name string
		v    any
	}
	if !textOpen && len(calls) == 0 && openText() != nil {
		return nil
	}
	var evs []event
	first := 0
	if textOpen {
		evs, first = append(evs, event{"content_block_stop", obj{"type": "content_block_stop", "index": 0}}), 1
	}
	// Each tool_use block's input whole in one input_json_delta: it is not
	// streamed piece by piece.
	for k, b := range toolUseBlocks(calls) {
		index := first + k
		input := string(b.Input)
		b.Input = json.RawMessage("{}")
		evs = append(evs,
			event{"content_block_start", obj{"type": "content_block_start", "index": index, "content_block": b}},
			event{"content_block_delta", obj{"type": "content_block_delta", "index": index,
				"delta": obj{"type": "input_json_delta", "partial_json": input}}},
			event{"content_block_stop", obj{"type": "content_block_stop", "index": index}})
	}
	reason, seqStr := stopReason(&co, len(calls) > 0)
	for _, ev := range append(evs, []event{
		{"message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": reason, "stop_sequence": seqStr},
			"usage": anthropicUsage{InputTokens: len(ids), OutputTokens: co.tokens}}},
		{"message_stop", obj{"type": "message_stop"}},
	}...) {
		if err := e.send(ev.name, ev.v); err != nil {
			return nil
		}
	}
	return nil
}
