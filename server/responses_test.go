package server

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestResponses: /v1/responses answers a string or a list of messages with
// one output message (usage counted, status incomplete when
// max_output_tokens cut it), streams the same text through the Responses
// API's events in order with increasing sequence numbers, and refuses what
// it does not support, naming the field.
func TestResponses(t *testing.T) {
	_, ts := testServer(t, Config{})
	body := `{"model":"m","instructions":"python","input":[{"role":"developer","content":"be short"},{"role":"user","content":[{"type":"input_text","text":"def add(a, b):"}]}],"temperature":0,"max_output_tokens":8%s}`
	resp, b := post(t, t.Context(), ts.URL+"/v1/responses", strings.Replace(body, "%s", "", 1))
	r := decode[responseObject](t, b)
	if resp.StatusCode != 200 || !strings.HasPrefix(r.ID, "resp_") || r.Object != "response" || len(r.Output) != 1 ||
		r.Output[0].Type != "message" || r.Output[0].Role != "assistant" || len(r.Output[0].Content) != 1 ||
		r.Output[0].Content[0].Type != "output_text" || r.Usage == nil || r.Usage.InputTokens == 0 ||
		r.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens {
		t.Fatalf("%d: %s", resp.StatusCode, b)
	}
	if (r.Status == "incomplete") != (r.IncompleteDetails != nil && r.IncompleteDetails.Reason == "max_output_tokens") ||
		r.Status != "completed" && r.Status != "incomplete" || r.Status == "incomplete" && r.Usage.OutputTokens != 8 {
		t.Errorf("status %s, details %+v, %d tokens", r.Status, r.IncompleteDetails, r.Usage.OutputTokens)
	}

	_, b = post(t, t.Context(), ts.URL+"/v1/responses", strings.Replace(body, "%s", `,"stream":true`, 1))
	var names []string
	var text string
	for i, ev := range readSSE(t, b) {
		var v struct {
			Type     string `json:"type"`
			Sequence int    `json:"sequence_number"`
			Delta    string `json:"delta"`
		}
		if err := json.Unmarshal([]byte(ev.data), &v); err != nil || v.Type != ev.name || v.Sequence != i {
			t.Fatalf("event %d %s: data %s", i, ev.name, ev.data)
		}
		if len(names) == 0 || names[len(names)-1] != ev.name {
			names = append(names, ev.name)
		}
		text += v.Delta
	}
	last := "response.completed"
	if r.Status == "incomplete" {
		last = "response.incomplete"
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done", last}
	if !slices.Equal(names, want) {
		t.Errorf("events %v, want %v", names, want)
	}
	if text != r.Output[0].Content[0].Text {
		t.Errorf("streamed %q, whole %q", text, r.Output[0].Content[0].Text)
	}

	resp, b = post(t, t.Context(), ts.URL+"/v1/responses", `{"input":"hi","temperature":0,"max_output_tokens":3}`)
	if r := decode[responseObject](t, b); resp.StatusCode != 200 || len(r.Output) != 1 {
		t.Errorf("string input: %d %s", resp.StatusCode, b)
	}
	for _, c := range []struct{ body, param string }{
		{`{"input":"hi","tools":[{"type":"function","name":"f"}]}`, "tools"},
		{`{"input":"hi","text":{"format":{"type":"json_schema"}}}`, "text.format.type"},
		{`{"model":"m"}`, "input"},
		{`{"input":[]}`, "input"},
		{`{"input":[{"role":"robot","content":"x"}]}`, "input[0].role"},
		{`{"input":[{"role":"user","content":[{"type":"input_image"}]}]}`, "input[0].content[0].type"},
		{`{"input":[{"type":"function_call_output"}]}`, "input[0].type"},
		{`{"input":"hi","instructions":3}`, "instructions"},
		{`{"input":"hi","max_output_tokens":0}`, "max_output_tokens"},
		{`{"input":"hi","temperature":-1}`, "temperature"},
	} {
		resp, b := post(t, t.Context(), ts.URL+"/v1/responses", c.body)
		var e struct {
			Error struct{ Param string } `json:"error"`
		}
		if json.Unmarshal(b, &e); resp.StatusCode != 400 || e.Error.Param != c.param {
			t.Errorf("%s: %d %s, want 400 naming %s", c.body, resp.StatusCode, b, c.param)
		}
	}
}
