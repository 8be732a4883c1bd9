package server

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/ingot-llm/ingot/server/constrain"
	"github.com/ingot-llm/ingot/tokenize"
)

// toolFormat is how a model family writes tool calls. The parser reads them
// all; the format chosen for the model (by its vocabulary) is the one a
// forced call (tool_choice required or named) is constrained to.
type toolFormat int

const (
	// formatJSON: Llama 3.x, and models without tool-call tokens: the whole
	// reply is {"name": …, "parameters": …} (or "arguments"), optionally
	// after <|python_tag|>; several calls are separated by ';' or newlines.
	formatJSON toolFormat = iota
	// formatHermes: Qwen 2.5/3, Hermes: <tool_call>\n{"name": …,
	// "arguments": …}\n</tool_call>, one block a call, after any text.
	formatHermes
	// formatMistral: [TOOL_CALLS][{"name": …, "arguments": …}, …], or
	// (Mistral v11+) [TOOL_CALLS]name[ARGS]{…} for each call.
	formatMistral
	// formatPhi: Phi-4-mini: functools[{"name": …, "arguments": …}, …],
	// or the same list between <|tool_call|> and <|/tool_call|>.
	formatPhi
)

// modelToolFormat picks the format of a model by the tool-call tokens its
// vocabulary has.
func modelToolFormat(tok *tokenize.Tokenizer) toolFormat {
	has := func(s string) bool { _, ok := tok.TokenID(s); return ok }
	switch {
	case has("<tool_call>"):
		return formatHermes
	case has("[TOOL_CALLS]"):
		return formatMistral
	case has("<|tool_call|>"):
		return formatPhi
	}
	return formatJSON
}

// toolMarkers begin a tool call anywhere in a reply; a reply whose first
// non-space character is '{' may be a formatJSON call.
var toolMarkers = []string{"<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "functools[", "<|tool_call|>"}

// A toolCall is a call in OpenAI's shape; Index is set in stream deltas.
type toolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // a JSON object, as text
}

// callID returns a new tool call id: prefix and 24 random letters and
// digits.
func callID(prefix string) string {
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var b [24]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return prefix + string(b[:])
}

// parseToolCalls finds the tool calls in a reply: the text before the first
// call (trailing space removed) and the calls, each naming one of names. A
// reply with a malformed call, or a call of a function not in names, has
// no calls: it is all text.
func parseToolCalls(text string, names []string) (string, []toolFunction) {
	at, calls, ok := findCalls(text)
	if !ok || len(calls) == 0 {
		return text, nil
	}
	for _, c := range calls {
		if !slices.Contains(names, c.Name) {
			return text, nil
		}
	}
	return strings.TrimRightFunc(text[:at], unicode.IsSpace), calls
}

// findCalls returns where the calls of text begin and the calls, reading
// every format.
func findCalls(text string) (int, []toolFunction, bool) {
	first, which := -1, ""
	for _, m := range toolMarkers {
		if i := strings.Index(text, m); i >= 0 && (first < 0 || i < first) {
			first, which = i, m
		}
	}
	if first < 0 {
		trimmed := strings.TrimLeftFunc(text, unicode.IsSpace)
		if !strings.HasPrefix(trimmed, "{") {
			return 0, nil, false
		}
		calls, ok := jsonCalls(trimmed)
		return 0, calls, ok
	}
	rest := text[first+len(which):]
	var calls []toolFunction
	var ok bool
	switch which {
	case "<tool_call>":
		calls, ok = hermesCalls(rest)
	case "[TOOL_CALLS]":
		calls, ok = mistralCalls(rest)
	case "<|python_tag|>":
		calls, ok = jsonCalls(rest)
	case "functools[":
		calls, ok = listCalls("[" + rest)
	case "<|tool_call|>":
		body, _, _ := strings.Cut(rest, "<|/tool_call|>")
		if calls, ok = listCalls(body); !ok {
			calls, ok = jsonCalls(body)
		}
	}
	return first, calls, ok
}

// hermesCalls reads blocks {…}</tool_call> separated by <tool_call> (the
// last may lack its end tag).
func hermesCalls(rest string) ([]toolFunction, bool) {
	var calls []toolFunction
	for _, block := range strings.Split(rest, "<tool_call>") {
		body, _, _ := strings.Cut(block, "</tool_call>")
		c, ok := oneCall([]byte(strings.TrimSpace(body)))
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
	}
	return calls, true
}

// mistralCalls reads a JSON list of calls, or name[ARGS]{…} pieces
// separated by [TOOL_CALLS].
func mistralCalls(rest string) ([]toolFunction, bool) {
	if strings.HasPrefix(strings.TrimSpace(rest), "[") {
		return listCalls(rest)
	}
	var calls []toolFunction
	for _, piece := range strings.Split(rest, "[TOOL_CALLS]") {
		name, args, ok := strings.Cut(piece, "[ARGS]")
		if !ok || strings.TrimSpace(name) == "" {
			return nil, false
		}
		a, ok := arguments(json.RawMessage(strings.TrimSpace(args)))
		if !ok {
			return nil, false
		}
		calls = append(calls, toolFunction{Name: strings.TrimSpace(name), Arguments: a})
	}
	return calls, true
}

// listCalls reads a JSON list of call objects, and nothing after it but
// space.
func listCalls(s string) ([]toolFunction, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	var list []json.RawMessage
	if dec.Decode(&list) != nil || len(list) == 0 || strings.TrimSpace(s[dec.InputOffset():]) != "" {
		return nil, false
	}
	calls := make([]toolFunction, len(list))
	for i, raw := range list {
		c, ok := oneCall(raw)
		if !ok {
			return nil, false
		}
		calls[i] = c
	}
	return calls, true
}

// jsonCalls reads call objects separated by space or ';', and nothing else.
func jsonCalls(s string) ([]toolFunction, bool) {
	var calls []toolFunction
	for {
		s = strings.TrimLeftFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == ';' })
		if s == "" {
			return calls, len(calls) > 0
		}
		dec := json.NewDecoder(strings.NewReader(s))
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			return nil, false
		}
		c, ok := oneCall(raw)
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
		s = s[dec.InputOffset():]
	}
}

// oneCall reads {"name": …, "arguments"|"parameters": …} (also OpenAI's
// {"type":"function","function":{…}}).
func oneCall(raw []byte) (toolFunction, bool) {
	var c struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
		Function   *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &c) != nil {
		return toolFunction{}, false
	}
	if c.Function != nil && c.Name == "" {
		c.Name, c.Arguments = c.Function.Name, c.Function.Arguments
	}
	if c.Name == "" {
		return toolFunction{}, false
	}
	args := c.Arguments
	if args == nil {
		args = c.Parameters
	}
	a, ok := arguments(args)
	return toolFunction{Name: c.Name, Arguments: a}, ok
}

// arguments returns a call's arguments as OpenAI's JSON text: an object
// compacted, a string as it is (models that write the JSON as a string),
// none as {}.
func arguments(raw json.RawMessage) (string, bool) {
	if isNull(raw) {
		return "{}", true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil || b.Len() == 0 || b.Bytes()[0] != '{' {
		return "", false
	}
	return b.String(), true
}

// toolStream releases a streamed reply's text as content until a tool call
// may have begun, and holds the rest until the reply ends: text from a
// marker on, a marker's possible beginning at the end, trailing space, and
// a reply that so far is only space or begins with '{'.
type toolStream struct {
	text strings.Builder
	sent int
	held bool
}

// add appends s and returns the content it releases.
func (ts *toolStream) add(s string) string {
	ts.text.WriteString(s)
	if ts.held {
		return ""
	}
	all := ts.text.String()
	if ts.sent == 0 {
		trimmed := strings.TrimLeftFunc(all, unicode.IsSpace)
		if trimmed == "" || trimmed[0] == '{' {
			ts.held = trimmed != ""
			return ""
		}
	}
	end := len(all)
	if i, _ := stopIndex(all[ts.sent:], toolMarkers); i >= 0 {
		end, ts.held = ts.sent+i, true
	} else {
		end -= heldBack(all[ts.sent:], toolMarkers)
	}
	end = ts.sent + len(strings.TrimRightFunc(all[ts.sent:end], unicode.IsSpace))
	out := all[ts.sent:end]
	ts.sent = end
	return out
}

// finish parses the whole reply and returns the content still to release
// and the calls (none: the held text is content).
func (ts *toolStream) finish(names []string) (string, []toolFunction) {
	all := ts.text.String()
	content, calls := parseToolCalls(all, names)
	if len(calls) == 0 {
		return all[ts.sent:], nil
	}
	if len(content) < ts.sent {
		return "", calls
	}
	return content[ts.sent:], calls
}

// tools is a request's validated tools and tool choice.
type tools struct {
	defs   []any    // the tool definitions for the chat template (json.RawMessage)
	names  []string // function names
	params map[string]json.RawMessage
	choice string // auto, none, required or function
	forced string // the function tool_choice names
}

// active reports whether replies are parsed for tool calls.
func (t *tools) active() bool { return t != nil && t.choice != "none" }

// openAITool is a tool of /v1/chat/completions.
type openAITool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// parseTools reads OpenAI's tools and tool_choice; nil when there are no
// tools.
func parseTools(raw, choice json.RawMessage) (*tools, error) {
	var list []json.RawMessage
	if !isNull(raw) {
		if json.Unmarshal(raw, &list) != nil {
			return nil, badRequest("tools", "must be a list of tools")
		}
	}
	t := &tools{params: map[string]json.RawMessage{}, choice: "auto"}
	for i, r := range list {
		var tl openAITool
		field := fmt.Sprintf("tools[%d]", i)
		if json.Unmarshal(r, &tl) != nil {
			return nil, badRequest(field, "must be a tool object")
		}
		if tl.Type != "function" {
			return nil, badRequest(field+".type", "only \"function\" tools are supported, got %q", tl.Type)
		}
		if tl.Function == nil || tl.Function.Name == "" {
			return nil, badRequest(field+".function.name", "is required")
		}
		if slices.Contains(t.names, tl.Function.Name) {
			return nil, badRequest(field+".function.name", "%q is given twice", tl.Function.Name)
		}
		t.defs = append(t.defs, r)
		t.names = append(t.names, tl.Function.Name)
		t.params[tl.Function.Name] = tl.Function.Parameters
	}
	if !isNull(choice) {
		var s string
		var named struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		switch {
		case json.Unmarshal(choice, &s) == nil:
			if s != "auto" && s != "none" && s != "required" {
				return nil, badRequest("tool_choice", "must be auto, none, required or a function, got %q", s)
			}
			t.choice = s
		case json.Unmarshal(choice, &named) == nil && named.Type == "function":
			if !slices.Contains(t.names, named.Function.Name) {
				return nil, badRequest("tool_choice.function.name", "%q is not one of the tools", named.Function.Name)
			}
			t.choice, t.forced = "function", named.Function.Name
		default:
			return nil, badRequest("tool_choice", "must be auto, none, required or {\"type\":\"function\",\"function\":{\"name\":…}}")
		}
	}
	if len(list) == 0 {
		if t.choice == "required" || t.choice == "function" {
			return nil, badRequest("tool_choice", "%s needs tools", t.choice)
		}
		return nil, nil
	}
	return t, nil
}

// forcedGrammar returns the grammar of one call in format f to the function
// tool_choice names, or to any tool for required; nil otherwise. A tool
// whose parameters are not "type": "object" within the supported schema
// subset gets any JSON object as arguments.
func (t *tools) forcedGrammar(f toolFormat) (*constrain.Grammar, error) {
	if t == nil || (t.choice != "required" && t.choice != "function") {
		return nil, nil
	}
	names := t.names
	if t.choice == "function" {
		names = []string{t.forced}
	}
	argsKey := "arguments"
	if f == formatJSON {
		argsKey = "parameters"
	}
	var alts []string
	for _, n := range names {
		params := t.params[n]
		if !objectSchema(params) {
			params = json.RawMessage(`{"type":"object"}`)
		}
		name, _ := json.Marshal(n)
		alts = append(alts, fmt.Sprintf(`{"type":"object","properties":{"name":{"const":%s},%q:%s},"required":["name",%q]}`,
			name, argsKey, params, argsKey))
	}
	schema := `{"anyOf":[` + strings.Join(alts, ",") + `]}`
	var prefix, suffix string
	switch f {
	case formatHermes:
		prefix, suffix = "<tool_call>\n", "\n</tool_call>"
	case formatMistral:
		prefix, suffix = "[TOOL_CALLS][", "]"
	case formatPhi:
		prefix, suffix = "functools[", "]"
	}
	g, err := constrain.CompileSchema([]byte(schema))
	if err != nil {
		return nil, badRequest("tools", "the forced call's grammar: %v", err)
	}
	return g.Wrap(prefix, suffix), nil
}

// objectSchema reports whether a tool's parameters are a schema of objects
// within the supported subset, which a forced call's arguments can follow.
func objectSchema(params json.RawMessage) bool {
	var s struct {
		Type json.RawMessage `json:"type"`
	}
	if isNull(params) || json.Unmarshal(params, &s) != nil || string(s.Type) != `"object"` {
		return false
	}
	_, err := constrain.CompileSchema(params)
	return err == nil
}
