package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

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
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// blocksText reads content given as a string or a list of text blocks.
func blocksText(field string, raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []contentPart
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", badRequest(field, "must be a string or a list of content blocks")
	}
	var b strings.Builder
	for j, bl := range blocks {
		if bl.Type != "text" {
			return "", badRequest(fmt.Sprintf("%s[%d].type", field, j), "only text blocks are supported, got %q", bl.Type)
		}
		b.WriteString(bl.Text)
	}
	return b.String(), nil
}

// parse turns the request into template messages and sampling settings.
func (req *messagesRequest) parse() ([]tokenize.Message, params, error) {
	var p params
	if req.MaxTokens == nil {
		return nil, p, badRequest("max_tokens", "is required")
	}
	if !isNull(req.Tools) && string(req.Tools) != "[]" {
		return nil, p, badRequest("tools", "tool use is not supported yet")
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
		text, err := blocksText(fmt.Sprintf("messages.%d.content", i), m.Content)
		if err != nil {
			return nil, p, err
		}
		msgs = append(msgs, tokenize.Message{Role: m.Role, Content: text})
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

type anthropicBlock struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// stopReason maps how a choice ended to Anthropic's stop_reason and
// stop_sequence.
func stopReason(co *choiceOut) (*string, *string) {
	switch {
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
	ids    []int32
	p      params
	gen    int
	stream bool
}

// parseMessagesRequest reads and validates a messages request: a 400 names
// the first bad field.
func parseMessagesRequest(r *http.Request, l *loaded) (*messagesJob, error) {
	var req messagesRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	msgs, p, err := req.parse()
	if err != nil {
		return nil, err
	}
	text, err := l.tmpl.Render(msgs, tokenize.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		return nil, badRequest("messages", "%v", err)
	}
	j := &messagesJob{ids: l.tok.Encode(text, false), p: p, stream: req.Stream}
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
	sl, err := rq.l.sched.acquire(ctx)
	if err != nil {
		return err
	}
	defer sl.release()
	o := p.opts
	o.MaxTokens = gen
	seq := &sequence{prompt: ids, opts: o}
	msg := anthropicResponse{ID: "msg_" + rq.id, Type: "message", Role: "assistant", Model: s.cfg.ModelName,
		Content: []anthropicBlock{}, Usage: anthropicUsage{InputTokens: len(ids)}}
	if !j.stream {
		co, err := s.runChoice(ctx, rq, sl, seq, p.stops, func(string, *step) error { return nil })
		if err != nil {
			return err
		}
		msg.Content = append(msg.Content, anthropicBlock{Type: "text", Text: co.text})
		msg.StopReason, msg.StopSequence = stopReason(&co)
		msg.Usage.OutputTokens = co.tokens
		writeJSON(w, http.StatusOK, msg)
		return nil
	}
	e := newSSE(w)
	type obj = map[string]any
	for _, ev := range []struct {
		name string
		v    any
	}{
		{"message_start", obj{"type": "message_start", "message": msg}},
		{"content_block_start", obj{"type": "content_block_start", "index": 0, "content_block": anthropicBlock{Type: "text"}}},
		{"ping", obj{"type": "ping"}},
	} {
		if err := e.send(ev.name, ev.v); err != nil {
			return nil
		}
	}
	co, err := s.runChoice(ctx, rq, sl, seq, p.stops, func(text string, _ *step) error {
		if text == "" {
			return nil
		}
		return e.send("content_block_delta", obj{"type": "content_block_delta", "index": 0,
			"delta": obj{"type": "text_delta", "text": text}})
	})
	if err != nil {
		s.streamError(e, apiAnthropic, rq, ctx, err)
		return nil
	}
	reason, seqStr := stopReason(&co)
	for _, ev := range []struct {
		name string
		v    any
	}{
		{"content_block_stop", obj{"type": "content_block_stop", "index": 0}},
		{"message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": reason, "stop_sequence": seqStr},
			"usage": anthropicUsage{InputTokens: len(ids), OutputTokens: co.tokens}}},
		{"message_stop", obj{"type": "message_stop"}},
	} {
		if err := e.send(ev.name, ev.v); err != nil {
			return nil
		}
	}
	return nil
}
