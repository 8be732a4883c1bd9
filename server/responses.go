package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/ingot-llm/ingot/tokenize"
)

// responsesRequest is the body of POST /v1/responses (OpenAI's Responses API,
// text in and out). Fields not listed are ignored; tools and non-text
// formats are refused.
type responsesRequest struct {
	Model           string          `json:"model"`
	Input           json.RawMessage `json:"input"`        // a string, or a list of messages
	Instructions    json.RawMessage `json:"instructions"` // a system message
	MaxOutputTokens *int            `json:"max_output_tokens"`
	Temperature     *float64        `json:"temperature"`
	TopP            *float64        `json:"top_p"`
	Stream          bool            `json:"stream"`
	Tools           json.RawMessage `json:"tools"`
	Text            *struct {
		Format *struct {
			Type string `json:"type"`
		} `json:"format"`
	} `json:"text"`
}

// responsesInput is one input item: a message whose content is a string or
// a list of input_text / output_text parts.
type responsesInput struct {
	Type    string          `json:"type"` // "message" or absent
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// parse turns the request into template messages and sampling settings.
func (req *responsesRequest) parse() ([]tokenize.Message, params, error) {
	var p params
	var msgs []tokenize.Message
	if !isNull(req.Tools) && string(req.Tools) != "[]" {
		return nil, p, badRequest("tools", "are not supported on /v1/responses (use /v1/chat/completions)")
	}
	if req.Text != nil && req.Text.Format != nil && req.Text.Format.Type != "text" {
		return nil, p, badRequest("text.format.type", "only text is supported on /v1/responses, got %q (json_schema: /v1/chat/completions)", req.Text.Format.Type)
	}
	if !isNull(req.Instructions) {
		var s string
		if err := json.Unmarshal(req.Instructions, &s); err != nil {
			return nil, p, badRequest("instructions", "must be a string")
		}
		msgs = append(msgs, tokenize.Message{Role: "system", Content: s})
	}
	if isNull(req.Input) {
		return nil, p, badRequest("input", "is required")
	}
	var one string
	if json.Unmarshal(req.Input, &one) == nil {
		msgs = append(msgs, tokenize.Message{Role: "user", Content: one})
	} else {
		var items []responsesInput
		if err := json.Unmarshal(req.Input, &items); err != nil {
			return nil, p, badRequest("input", "must be a string or a list of messages")
		}
		if len(items) == 0 {
			return nil, p, badRequest("input", "must not be empty")
		}
		for i, it := range items {
			field := fmt.Sprintf("input[%d]", i)
			if it.Type != "" && it.Type != "message" {
				return nil, p, badRequest(field+".type", "only messages are supported, got %q", it.Type)
			}
			role := it.Role
			if role == "developer" {
				role = "system"
			}
			if role != "user" && role != "assistant" && role != "system" {
				return nil, p, badRequest(field+".role", "must be user, assistant, system or developer, got %q", it.Role)
			}
			text, err := partsText(field+".content", it.Content, "input_text", "output_text", "text")
			if err != nil {
				return nil, p, err
			}
			msgs = append(msgs, tokenize.Message{Role: role, Content: text})
		}
	}
	f := sampling{Temperature: req.Temperature, TopP: req.TopP}
	p, err := f.parse()
	return msgs, p, err
}

// responseObject is a Responses API response.
type responseObject struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"` // "response"
	CreatedAt         int64             `json:"created_at"`
	Status            string            `json:"status"` // "in_progress", "completed" or "incomplete"
	IncompleteDetails *incompleteReason `json:"incomplete_details"`
	Model             string            `json:"model"`
	Output            []responseMessage `json:"output"`
	Usage             *responseUsage    `json:"usage"`
}

type incompleteReason struct {
	Reason string `json:"reason"` // "max_output_tokens"
}

type responseMessage struct {
	Type    string         `json:"type"` // "message"
	ID      string         `json:"id"`
	Status  string         `json:"status"`
	Role    string         `json:"role"` // "assistant"
	Content []responsePart `json:"content"`
}

type responsePart struct {
	Type        string `json:"type"` // "output_text"
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type responseUsage struct {
	InputTokens        int          `json:"input_tokens"`
	OutputTokens       int          `json:"output_tokens"`
	TotalTokens        int          `json:"total_tokens"`
	InputTokensDetails inputDetails `json:"input_tokens_details"`
}

// inputDetails is the Responses API's usage.input_tokens_details.
type inputDetails struct {
	CachedTokens int `json:"cached_tokens"` // input tokens taken from a session's cache
}

// responses serves POST /v1/responses: one output message, or with stream
// the events response.created … response.completed (response.incomplete
// when max_output_tokens cut it), each with a sequence_number.
func (s *Server) responses(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	rq := reqOf(ctx)
	var req responsesRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if err := rq.l.pick(r, req.Model); err != nil {
		return err
	}
	msgs, p, err := req.parse()
	if err != nil {
		return err
	}
	text, err := rq.l.tmpl.Render(msgs, tokenize.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		return badRequest("input", "%v", err)
	}
	ids := rq.l.tok.Encode(text, false)
	gen, err := admit(len(ids), rq.l.ctxSize, req.MaxOutputTokens, "max_output_tokens", "input", false)
	if err != nil {
		return err
	}
	rq.prompt = len(ids)
	sl, err := rq.l.sched.acquire(ctx, ids, rq.adapter)
	if err != nil {
		return err
	}
	defer sl.release()
	o := p.opts
	o.MaxTokens = gen
	seq := &sequence{prompt: ids, opts: o, adapter: rq.adapter}
	resp := responseObject{ID: "resp_" + rq.id, Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress",
		Model: rq.model, Output: []responseMessage{}}
	item := responseMessage{Type: "message", ID: "msg_" + rq.id, Status: "in_progress", Role: "assistant", Content: []responsePart{}}
	finish := func(co choiceOut) {
		resp.Status, item.Status = "completed", "completed"
		if co.finish == "length" {
			resp.Status, item.Status = "incomplete", "incomplete"
			resp.IncompleteDetails = &incompleteReason{Reason: "max_output_tokens"}
		}
		item.Content = []responsePart{{Type: "output_text", Text: co.text, Annotations: []any{}}}
		resp.Output = []responseMessage{item}
		resp.Usage = &responseUsage{InputTokens: len(ids), OutputTokens: co.tokens, TotalTokens: len(ids) + co.tokens,
			InputTokensDetails: inputDetails{CachedTokens: co.cached}}
	}
	if !req.Stream {
		co, err := s.runChoice(ctx, rq, sl, seq, p.stops, func(string, *step) error { return nil })
		if err != nil {
			return err
		}
		finish(co)
		writeJSON(w, http.StatusOK, resp)
		return nil
	}
	e := newSSE(w)
	type obj = map[string]any
	n := 0
	send := func(typ string, v obj) error {
		v["type"], v["sequence_number"] = typ, n
		n++
		return e.send(typ, v)
	}
	part := responsePart{Type: "output_text", Text: "", Annotations: []any{}}
	for _, ev := range []struct {
		typ string
		v   obj
	}{
		{"response.created", obj{"response": resp}},
		{"response.in_progress", obj{"response": resp}},
		{"response.output_item.added", obj{"output_index": 0, "item": item}},
		{"response.content_part.added", obj{"item_id": item.ID, "output_index": 0, "content_index": 0, "part": part}},
	} {
		if send(ev.typ, ev.v) != nil {
			return nil
		}
	}
	co, err := s.runChoice(ctx, rq, sl, seq, p.stops, func(text string, _ *step) error {
		if text == "" {
			return nil
		}
		return send("response.output_text.delta", obj{"item_id": item.ID, "output_index": 0, "content_index": 0, "delta": text})
	})
	if err != nil {
		s.streamError(e, apiOpenAI, rq, ctx, err)
		return nil
	}
	finish(co)
	part.Text = co.text
	terminal := "response.completed"
	if resp.Status == "incomplete" {
		terminal = "response.incomplete"
	}
	for _, ev := range []struct {
		typ string
		v   obj
	}{
		{"response.output_text.done", obj{"item_id": item.ID, "output_index": 0, "content_index": 0, "text": co.text}},
		{"response.content_part.done", obj{"item_id": item.ID, "output_index": 0, "content_index": 0, "part": part}},
		{"response.output_item.done", obj{"output_index": 0, "item": resp.Output[0]}},
		{terminal, obj{"response": resp}},
	} {
		if send(ev.typ, ev.v) != nil {
			return nil
		}
	}
	return nil
}
