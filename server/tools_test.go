package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ingot-llm/ingot"
	"github.com/ingot-llm/ingot/model"
	"github.com/ingot-llm/ingot/server/constrain"
	"github.com/ingot-llm/ingot/tokenize"
)

func TestParseToolCalls(t *testing.T) {
	names := []string{"get_weather", "add"}
	w := func(args string) toolFunction { return toolFunction{Name: "get_weather", Arguments: args} }
	add := toolFunction{Name: "add", Arguments: `{"a":1,"b":2}`}
	for _, tc := range []struct {
		name, text string
		content    string
		calls      []toolFunction
	}{
		{"plain text", "It is sunny.", "It is sunny.", nil},
		{"text with braces", "Use {x} here", "Use {x} here", nil},
		{"llama json", `{"name": "get_weather", "parameters": {"city": "Paris"}}`, "", []toolFunction{w(`{"city":"Paris"}`)}},
		{"llama python_tag", `<|python_tag|>{"name": "get_weather", "arguments": {"city": "Oslo"}}`, "", []toolFunction{w(`{"city":"Oslo"}`)}},
		{"llama two calls", "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}; \n{\"name\": \"get_weather\", \"parameters\": {}}", "", []toolFunction{add, w(`{}`)}},
		{"llama no arguments", `{"name": "get_weather"}`, "", []toolFunction{w(`{}`)}},
		{"llama text after", `{"name": "add", "parameters": {}} and more`, `{"name": "add", "parameters": {}} and more`, nil},
		{"hermes one", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>", "", []toolFunction{w(`{"city":"Rome"}`)}},
		{"hermes two after text", "Let me check.\n\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\":1,\"b\":2}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>",
			"Let me check.", []toolFunction{add, w(`{}`)}},
		{"hermes unclosed", "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}", "", []toolFunction{add}},
		{"hermes malformed", "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1,}}\n</tool_call>", "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1,}}\n</tool_call>", nil},
		{"mistral list", `[TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "get_weather", "arguments": {"city": "Bern"}}]`, "", []toolFunction{add, w(`{"city":"Bern"}`)}},
		{"mistral v11", `[TOOL_CALLS]add[ARGS]{"a": 1, "b": 2}[TOOL_CALLS]get_weather[ARGS]{}`, "", []toolFunction{add, w(`{}`)}},
		{"mistral truncated", `[TOOL_CALLS][{"name": "add", "arguments": {"a": 1`, `[TOOL_CALLS][{"name": "add", "arguments": {"a": 1`, nil},
		{"phi functools", `functools[{"name": "get_weather", "arguments": {"city": "Kyiv"}}]`, "", []toolFunction{w(`{"city":"Kyiv"}`)}},
		{"phi tool_call tag", `<|tool_call|>[{"name": "add", "arguments": {"a": 1, "b": 2}}]<|/tool_call|>`, "", []toolFunction{add}},
		{"unknown function", `{"name": "rm_rf", "parameters": {}}`, `{"name": "rm_rf", "parameters": {}}`, nil},
		{"arguments as string", `{"name": "add", "arguments": "{\"a\":1,\"b\":2}"}`, "", []toolFunction{add}},
		{"arguments not object", `{"name": "add", "arguments": [1, 2]}`, `{"name": "add", "arguments": [1, 2]}`, nil},
		{"openai shape", `[TOOL_CALLS][{"type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": 2}}}]`, "", []toolFunction{add}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content, calls := parseToolCalls(tc.text, names)
			if content != tc.content || !reflect.DeepEqual(calls, tc.calls) {
				t.Errorf("parseToolCalls(%q) = %q, %+v; want %q, %+v", tc.text, content, calls, tc.content, tc.calls)
			}
		})
	}
}

// TestToolStream: fed a reply in pieces of every size, the stream releases
// content that, with what finish releases, is the content parseToolCalls
// finds, and never releases any of a call.
func TestToolStream(t *testing.T) {
	names := []string{"add"}
	for _, text := range []string{
		"The sum is 3.",
		"Let me add.\n\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>",
		"  {\"name\": \"add\", \"parameters\": {}}",
		"{not a call} but text",
		"a <tool_cal b",
		"x [TOOL_CALLS][{\"name\": \"add\", \"arguments\": {}}]",
	} {
		wantContent, wantCalls := parseToolCalls(text, names)
		for size := 1; size <= len(text); size++ {
			ts := &toolStream{}
			var got string
			for i := 0; i < len(text); i += size {
				got += ts.add(text[i:min(i+size, len(text))])
				if len(wantCalls) > 0 && len(got) > len(wantContent) {
					t.Fatalf("%q in pieces of %d: released %q past the content %q", text, size, got, wantContent)
				}
			}
			rest, calls := ts.finish(names)
			if got+rest != wantContent || !reflect.DeepEqual(calls, wantCalls) {
				t.Fatalf("%q in pieces of %d: content %q, calls %+v; want %q, %+v", text, size, got+rest, calls, wantContent, wantCalls)
			}
		}
	}
}

const weatherTool = `{"type":"function","function":{"name":"get_weather","description":"the weather in a city",
	"parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city","days"]}}}`

// toolReply is the part of a chat completion a tool call test reads, with
// content as a pointer to tell null from "".
type toolReply struct {
	Choices []struct {
		Message struct {
			Content   *string    `json:"content"`
			ToolCalls []toolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
}

// TestChatToolCallForced: tool_choice naming a function (or required)
// makes the demo model call it, constrained to the call's schema:
// tool_calls with call_ ids and finish_reason tool_calls, and in a stream
// one delta per call with its index.
func TestChatToolCallForced(t *testing.T) {
	_, ts := testServer(t, Config{})
	for _, choice := range []string{`{"type":"function","function":{"name":"get_weather"}}`, `"required"`} {
		body := `{"messages":[{"role":"user","content":"weather in Paris?"}],"max_tokens":120,"temperature":0.7,"seed":3,
			"tools":[` + weatherTool + `,{"type":"function","function":{"name":"noop"}}],"tool_choice":` + choice + `}`
		resp, b := post(t, t.Context(), ts.URL+"/v1/chat/completions", body)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		raw := decode[toolReply](t, b)
		ch := raw.Choices[0]
		if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.Content != nil {
			t.Fatalf("tool_choice %s: %s", choice, b)
		}
		c := ch.Message.ToolCalls[0]
		if !strings.HasPrefix(c.ID, "call_") || len(c.ID) != 29 || c.Type != "function" || c.Index != nil {
			t.Errorf("call %+v", c)
		}
		if choice != `"required"` && c.Function.Name != "get_weather" {
			t.Errorf("called %q, want get_weather", c.Function.Name)
		}
		if c.Function.Name == "get_weather" {
			var args struct {
				City *string
				Days *json.Number
			}
			if err := json.Unmarshal([]byte(c.Function.Arguments), &args); err != nil || args.City == nil || args.Days == nil {
				t.Errorf("arguments %q: %v", c.Function.Arguments, err)
			}
		}

		// Streamed: role, then one tool_calls delta with index 0, then finish.
		_, sb := post(t, t.Context(), ts.URL+"/v1/chat/completions", strings.Replace(body, `"seed":3`, `"seed":3,"stream":true`, 1))
		var deltas []toolCall
		var finish string
		for _, ev := range readSSE(t, sb) {
			if ev.data == "[DONE]" {
				continue
			}
			for _, ch := range decode[chatChunk](t, []byte(ev.data)).Choices {
				if ch.Delta.Content != nil && *ch.Delta.Content != "" {
					t.Errorf("content %q in a forced call's stream", *ch.Delta.Content)
				}
				deltas = append(deltas, ch.Delta.ToolCalls...)
				if ch.FinishReason != nil {
					finish = *ch.FinishReason
				}
			}
		}
		if len(deltas) != 1 || deltas[0].Index == nil || *deltas[0].Index != 0 || deltas[0].Function != c.Function || finish != "tool_calls" {
			t.Errorf("stream: deltas %+v, finish %q; want the call %+v", deltas, finish, c.Function)
		}
	}
}

// TestChatToolHistory: assistant tool_calls and tool messages are accepted
// and reach the chat template: the demo's plain one, and Qwen 2.5's real
// one renders them as <tool_call> and <tool_response> blocks.
func TestChatToolHistory(t *testing.T) {
	s, ts := testServer(t, Config{})
	body := `{"messages":[{"role":"user","content":"weather in Paris?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"days\": 1}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"sunny, 21 C"}],
		"tools":[` + weatherTool + `],"max_tokens":8,"temperature":0}`
	if resp, b := post(t, t.Context(), ts.URL+"/v1/chat/completions", body); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	l := s.ready.Load()
	j, err := parseChat(httptest.NewRequest("POST", "/", strings.NewReader(body)), l)
	if err != nil {
		t.Fatal(err)
	}
	prompt := l.tok.Decode(j.ids, false)
	for _, want := range []string{`# tools:`, `"name": "get_weather"`, `# assistant:`, `"arguments": {"city": "Paris", "days": 1}`, "# tool:\nsunny, 21 C"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the prompt has no %q:\n%s", want, prompt)
		}
	}

	var req chatRequest
	json.Unmarshal([]byte(body), &req)
	msgs, err := parseMessages(req.Messages)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := tokenize.LoadChatTemplate(filepath.Join("..", "..", "shared", "testdata", "tokenizers", "qwen2.5", "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	tl, _ := parseTools(req.Tools, nil)
	text, err := tmpl.Render(msgs, tokenize.ChatOptions{AddGenerationPrompt: true, Tools: tl.defs})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"<tools>\n" + `{"type": "function", "function": {"name": "get_weather", "description": "the weather in a city"`,
		"<|im_start|>assistant\n<tool_call>\n" + `{"name": "get_weather", "arguments": {"city": "Paris", "days": 1}}` + "\n</tool_call><|im_end|>",
		"<|im_start|>user\n<tool_response>\nsunny, 21 C\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("qwen2.5 rendering has no %q:\n%s", want, text)
		}
	}
}

// TestChatToolChoiceNone: with tool_choice none the tools are not rendered
// and the reply is not parsed.
func TestChatToolChoiceNone(t *testing.T) {
	s, _ := testServer(t, Config{})
	body := `{"messages":[{"role":"user","content":"x"}],"tools":[` + weatherTool + `],"tool_choice":"none"}`
	j, err := parseChat(httptest.NewRequest("POST", "/", strings.NewReader(body)), s.ready.Load())
	if err != nil {
		t.Fatal(err)
	}
	if j.tools.active() || j.grammar != nil || strings.Contains(s.ready.Load().tok.Decode(j.ids, false), "get_weather") {
		t.Errorf("tool_choice none: tools %+v, grammar %v", j.tools, j.grammar)
	}
}

// TestChatToolsAutoText: with tools offered and a reply that is text, the
// stream gives the same content and finish_reason as the whole response.
func TestChatToolsAutoText(t *testing.T) {
	_, ts := testServer(t, Config{})
	body := `{"messages":[{"role":"user","content":"def fib(n):"}],"max_tokens":24,"temperature":0,"tools":[` + weatherTool + `]%s}`
	_, b := post(t, t.Context(), ts.URL+"/v1/chat/completions", strings.Replace(body, "%s", "", 1))
	want := decode[toolReply](t, b).Choices[0]
	if want.Message.Content == nil || len(want.Message.ToolCalls) != 0 {
		t.Fatalf("reply %s", b)
	}
	_, sb := post(t, t.Context(), ts.URL+"/v1/chat/completions", strings.Replace(body, "%s", `,"stream":true`, 1))
	var text, finish string
	for _, ev := range readSSE(t, sb) {
		if ev.data == "[DONE]" {
			continue
		}
		for _, ch := range decode[chatChunk](t, []byte(ev.data)).Choices {
			if ch.Delta.Content != nil {
				text += *ch.Delta.Content
			}
			if len(ch.Delta.ToolCalls) > 0 {
				t.Errorf("tool call delta in %s", ev.data)
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if text != *want.Message.Content || finish != want.FinishReason {
		t.Errorf("stream %q (%s), whole %q (%s)", text, finish, *want.Message.Content, want.FinishReason)
	}
}

// TestMessagesToolUse: Anthropic tools with tool_choice tool give a
// tool_use block (stop_reason tool_use), streamed as a tool_use
// content_block_start at index 0 (no text block), one input_json_delta and
// content_block_stop.
func TestMessagesToolUse(t *testing.T) {
	_, ts := testServer(t, Config{})
	body := `{"max_tokens":120,"temperature":0.7,"messages":[{"role":"user","content":"weather in Paris?"}],
		"tools":[{"name":"get_weather","description":"the weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
		"tool_choice":{"type":"tool","name":"get_weather"}}`
	resp, b := post(t, t.Context(), ts.URL+"/v1/messages", body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	msg := decode[struct {
		Content []struct {
			Type, ID, Name string
			Input          map[string]any
		}
		StopReason string `json:"stop_reason"`
	}](t, b)
	if msg.StopReason != "tool_use" || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" || msg.Content[0].Name != "get_weather" ||
		!strings.HasPrefix(msg.Content[0].ID, "toolu_") || msg.Content[0].Input["city"] == nil {
		t.Fatalf("reply %s", b)
	}

	_, sb := post(t, t.Context(), ts.URL+"/v1/messages", strings.Replace(body, `"max_tokens":120`, `"max_tokens":120,"stream":true`, 1))
	var names []string
	var input string
	for _, ev := range readSSE(t, sb) {
		names = append(names, ev.name)
		var d struct {
			Index        int
			ContentBlock *struct{ Type, Name string } `json:"content_block"`
			Delta        struct {
				Type        string
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			}
		}
		json.Unmarshal([]byte(ev.data), &d)
		switch {
		case ev.name == "content_block_start":
			if d.ContentBlock == nil || d.ContentBlock.Type != "tool_use" || d.ContentBlock.Name != "get_weather" {
				t.Errorf("tool_use start %s", ev.data)
			}
		case ev.name == "content_block_delta":
			if d.Delta.Type != "input_json_delta" || d.Index != 0 {
				t.Errorf("delta %s", ev.data)
			}
			input += d.Delta.PartialJSON
		case ev.name == "message_delta" && d.Delta.StopReason != "tool_use":
			t.Errorf("message_delta %s", ev.data)
		}
	}
	want := []string{"message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("events %v, want %v", names, want)
	}
	var in map[string]any
	if json.Unmarshal([]byte(input), &in) != nil || in["city"] == nil {
		t.Errorf("streamed input %q", input)
	}
}

// TestMessagesToolHistory: tool_use and tool_result blocks come back in a
// conversation and reach the template as tool_calls and tool messages.
func TestMessagesToolHistory(t *testing.T) {
	s, ts := testServer(t, Config{})
	body := `{"max_tokens":4,"temperature":0,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"messages":[
		{"role":"user","content":"weather in Paris?"},
		{"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny"}]},{"type":"text","text":"and tomorrow?"}]}]}`
	if resp, b := post(t, t.Context(), ts.URL+"/v1/messages", body); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	l := s.ready.Load()
	j, err := parseMessagesRequest(httptest.NewRequest("POST", "/", strings.NewReader(body)), l)
	if err != nil {
		t.Fatal(err)
	}
	prompt := l.tok.Decode(j.ids, false)
	for _, want := range []string{"# assistant:\nChecking.\n" + `[{"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]`,
		"# tool:\nsunny\n# user:\nand tomorrow?\n# assistant:\n"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the prompt has no %q:\n%s", want, prompt)
		}
	}
}

// scriptSched is a scheduler whose one slot "generates" the tokens of a
// fixed reply and then EOS, whatever the prompt: replies a test chooses.
type scriptSched struct {
	ids []int32
	eos int32
}

func (f *scriptSched) acquire(context.Context, []int32, *ingot.Adapter) (slot, error) { return f, nil }
func (f *scriptSched) stats() schedStats                                              { return schedStats{} }
func (f *scriptSched) close() error                                                   { return nil }
func (f *scriptSched) contextSize() int                                               { return 256 }
func (f *scriptSched) release()                                                       {}

func (f *scriptSched) run(ctx context.Context, seq *sequence, emit func(step) bool) (seqResult, error) {
	for _, id := range f.ids {
		if !emit(step{id: id}) {
			return seqResult{stop: model.StopCaller}, nil
		}
	}
	emit(step{id: f.eos})
	return seqResult{stop: model.StopEOS}, nil
}

// TestToolCallShapes: a reply of text and two Hermes calls, as OpenAI's
// message and stream deltas and as Anthropic's blocks and events.
func TestToolCallShapes(t *testing.T) {
	s, ts := testServer(t, Config{})
	l := s.ready.Load()
	reply := "Let me check.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n" +
		"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"days\": 1}}\n</tool_call>"
	pool := l.sched
	defer func() { l.sched = pool }()
	l.sched = &scriptSched{ids: l.tok.Encode(reply, false), eos: l.model.Raw().EOS[0]}
	wantArgs := []string{`{"city":"Paris","days":2}`, `{"city":"Rome","days":1}`}

	body := `{"messages":[{"role":"user","content":"weather?"}],"max_tokens":100,"tools":[` + weatherTool + `]}`
	_, b := post(t, t.Context(), ts.URL+"/v1/chat/completions", body)
	ch := decode[toolReply](t, b).Choices[0]
	if ch.Message.Content == nil || *ch.Message.Content != "Let me check." || ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 2 ||
		ch.Message.ToolCalls[0].Function.Arguments != wantArgs[0] || ch.Message.ToolCalls[1].Function.Arguments != wantArgs[1] ||
		ch.Message.ToolCalls[0].ID == ch.Message.ToolCalls[1].ID {
		t.Errorf("chat: %s", b)
	}

	_, sb := post(t, t.Context(), ts.URL+"/v1/chat/completions", strings.Replace(body, `"max_tokens"`, `"stream":true,"max_tokens"`, 1))
	var text string
	var calls []toolCall
	for _, ev := range readSSE(t, sb) {
		if ev.data == "[DONE]" {
			continue
		}
		for _, c := range decode[chatChunk](t, []byte(ev.data)).Choices {
			if c.Delta.Content != nil {
				text += *c.Delta.Content
			}
			calls = append(calls, c.Delta.ToolCalls...)
		}
	}
	if text != "Let me check." || len(calls) != 2 {
		t.Fatalf("stream: content %q, calls %+v", text, calls)
	}
	for i, c := range calls {
		if c.Index == nil || *c.Index != i || c.Function.Arguments != wantArgs[i] || !strings.HasPrefix(c.ID, "call_") {
			t.Errorf("stream call %d: %+v", i, c)
		}
	}

	abody := `{"max_tokens":100,"messages":[{"role":"user","content":"weather?"}],"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]}`
	_, b = post(t, t.Context(), ts.URL+"/v1/messages", abody)
	msg := decode[anthropicResponse](t, b)
	if len(msg.Content) != 3 || msg.Content[0].Text != "Let me check." || msg.Content[1].Type != "tool_use" || string(msg.Content[2].Input) != wantArgs[1] ||
		*msg.StopReason != "tool_use" {
		t.Errorf("messages: %s", b)
	}
	_, sb = post(t, t.Context(), ts.URL+"/v1/messages", strings.Replace(abody, `"max_tokens"`, `"stream":true,"max_tokens"`, 1))
	var got []string
	for _, ev := range readSSE(t, sb) {
		var d struct {
			Index        *int
			ContentBlock *struct{ Type string } `json:"content_block"`
			Delta        struct{ Type string }
		}
		json.Unmarshal([]byte(ev.data), &d)
		e := ev.name
		if d.Index != nil {
			e += fmt.Sprint(" ", *d.Index)
		}
		if d.ContentBlock != nil {
			e += " " + d.ContentBlock.Type
		}
		if ev.name == "content_block_delta" {
			e += " " + d.Delta.Type
		}
		if len(got) == 0 || got[len(got)-1] != e {
			got = append(got, e)
		}
	}
	want := []string{"message_start", "ping", "content_block_start 0 text", "content_block_delta 0 text_delta", "content_block_stop 0",
		"content_block_start 1 tool_use", "content_block_delta 1 input_json_delta", "content_block_stop 1",
		"content_block_start 2 tool_use", "content_block_delta 2 input_json_delta", "content_block_stop 2", "message_delta", "message_stop"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events\n%v\nwant\n%v", got, want)
	}
}

// TestForcedCallRealVocab: Llama 3's and Qwen 2.5's tokenizers get their
// family's format, and a forced call in Qwen's vocabulary may begin with its
// <tool_call> token and then follows the grammar to a complete call.
func TestForcedCallRealVocab(t *testing.T) {
	dir := func(name string) string { return filepath.Join("..", "..", "shared", "testdata", "tokenizers", name) }
	var tk *tokenize.Tokenizer
	for _, tc := range []struct {
		name string
		want toolFormat
	}{{"llama3", formatJSON}, {"qwen2.5", formatHermes}} {
		var err error
		if tk, err = tokenize.Load(dir(tc.name)); err != nil {
			t.Fatal(err)
		}
		if got := modelToolFormat(tk); got != tc.want {
			t.Errorf("%s: format %d, want %d", tc.name, got, tc.want)
		}
	}
	eos, _ := tk.TokenID("<|im_end|>")
	var vc vocab
	v := vc.get(tk, tk.VocabSize(), []int32{eos})
	tl, err := parseTools(json.RawMessage(`[`+weatherTool+`]`), json.RawMessage(`"required"`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := tl.forcedGrammar(formatHermes)
	if err != nil {
		t.Fatal(err)
	}
	m := constrain.NewMatcher(g, v)
	mask := make([]uint64, (tk.VocabSize()+63)/64)
	m.Mask(mask)
	open, _ := tk.TokenID("<tool_call>")
	if mask[open/64]&(1<<(open%64)) == 0 {
		t.Fatalf("<tool_call> (%d) is not allowed first", open)
	}
	reply := "<tool_call>\n" + `{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}` + "\n</tool_call>"
	for _, id := range tk.Encode(reply, false) {
		m.Mask(mask)
		if mask[id/64]&(1<<(id%64)) == 0 || !m.Accept(id) {
			t.Fatalf("token %d %q of the reply refused", id, tk.Decode([]int32{id}, false))
		}
	}
	m.Mask(mask)
	if !m.Complete() || mask[eos/64]&(1<<(eos%64)) == 0 {
		t.Error("the call is not complete: <|im_end|> not allowed")
	}
	if _, calls := parseToolCalls(reply, tl.names); len(calls) != 1 {
		t.Errorf("the forced reply does not parse: %q", reply)
	}
}

// TestForcedGrammarParams: a forced call's arguments follow the tool's
// parameters when they are an object schema of the supported subset, and
// are any object otherwise; every forced reply parses as a call.
func TestForcedGrammarParams(t *testing.T) {
	for _, tc := range []struct {
		name, params string
		want         string // a reply the grammar must accept
		bad          string // one it must refuse ("" : none)
	}{
		{"object schema", `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`, `{"name":"f","parameters":{"n":1}}`, `{"name":"f","parameters":{"x":1}}`},
		{"no parameters", ``, `{"name":"f","parameters":{"x":[1]}}`, `{"name":"f","parameters":5}`},
		{"empty schema", `{}`, `{"name":"f","parameters":{}}`, `{"name":"f","parameters":"s"}`},
		{"unsupported keyword", `{"type":"object","properties":{"d":{"type":"string","pattern":"^a"}}}`, `{"name":"f","parameters":{"x":null}}`, `{"name":"f","parameters":[]}`},
		{"string schema", `{"type":"string"}`, `{"name":"f","parameters":{}}`, `{"name":"f","parameters":"s"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := `{"type":"function","function":{"name":"f"}}`
			if tc.params != "" {
				tool = `{"type":"function","function":{"name":"f","parameters":` + tc.params + `}}`
			}
			tl, err := parseTools(json.RawMessage(`[`+tool+`]`), json.RawMessage(`"required"`))
			if err != nil {
				t.Fatal(err)
			}
			g, err := tl.forcedGrammar(formatJSON)
			if err != nil {
				t.Fatal(err)
			}
			v := constrain.NewVocab(0, nil, nil)
			if m := constrain.NewMatcher(g, v); !m.AcceptBytes([]byte(tc.want)) || !m.Complete() {
				t.Errorf("%s refused", tc.want)
			}
			if _, calls := parseToolCalls(tc.want, tl.names); len(calls) != 1 {
				t.Errorf("%s does not parse as a call", tc.want)
			}
			if m := constrain.NewMatcher(g, v); tc.bad != "" && m.AcceptBytes([]byte(tc.bad)) && m.Complete() {
				t.Errorf("%s accepted", tc.bad)
			}
		})
	}
}

// TestHistoryCalls: an assistant's tool_calls reach the template with
// arguments as objects, whether the client sent a JSON string (OpenAI), an
// object, a string that is not JSON, or none.
func TestHistoryCalls(t *testing.T) {
	for _, tc := range []struct {
		name, args, want string
	}{
		{"json string", `"{\"a\": 1}"`, `{"a": 1}`},
		{"object", `{"a":1}`, `{"a":1}`},
		{"not json", `"a=1"`, `"a=1"`},
		{"absent", `null`, `{}`},
	} {
		raw := `[{"id":"c1","type":"function","function":{"name":"f","arguments":` + tc.args + `}}]`
		got, err := historyCalls("tool_calls", json.RawMessage(raw))
		want := `[{"id":"c1","type":"function","function":{"name":"f","arguments":` + tc.want + `}}]`
		if err != nil || string(got) != want {
			t.Errorf("%s: %s, %v; want %s", tc.name, got, err, want)
		}
	}
	if _, err := historyCalls("tool_calls", json.RawMessage(`[{"function":{"name":"f","arguments":[1]}}]`)); err == nil {
		t.Error("arguments [1] accepted")
	}
}
