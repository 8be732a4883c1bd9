package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/ingot-llm/ingot/tokenize"
)

// anthropicTool is a tool of /v1/messages (a client tool; server tools,
// which have a type, are refused).
type anthropicTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// parseAnthropicTools reads tools and tool_choice into the chat endpoint's
// form: definitions in OpenAI's shape (what chat templates take), auto,
// none, required (Anthropic's any) or a named function (tool).
func parseAnthropicTools(raw, choice json.RawMessage) (*tools, error) {
	var list []anthropicTool
	if !isNull(raw) && json.Unmarshal(raw, &list) != nil {
		return nil, badRequest("tools", "must be a list of tools")
	}
	t := &tools{params: map[string]json.RawMessage{}, choice: "auto"}
	for i, tl := range list {
		field := fmt.Sprintf("tools.%d", i)
		if tl.Type != "" && tl.Type != "custom" {
			return nil, badRequest(field+".type", "server tools are not supported, got %q", tl.Type)
		}
		if tl.Name == "" {
			return nil, badRequest(field+".name", "is required")
		}
		if slices.Contains(t.names, tl.Name) {
			return nil, badRequest(field+".name", "%q is given twice", tl.Name)
		}
		def, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]any{
			"name": tl.Name, "description": tl.Description, "parameters": tl.InputSchema}})
		t.defs = append(t.defs, json.RawMessage(def))
		t.names = append(t.names, tl.Name)
		t.params[tl.Name] = tl.InputSchema
	}
	if !isNull(choice) {
		var c struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if json.Unmarshal(choice, &c) != nil {
			return nil, badRequest("tool_choice", "must be an object with a type")
		}
		switch c.Type {
		case "auto", "none":
			t.choice = c.Type
		case "any":
			t.choice = "required"
		case "tool":
			if !slices.Contains(t.names, c.Name) {
				return nil, badRequest("tool_choice.name", "%q is not one of the tools", c.Name)
			}
			t.choice, t.forced = "function", c.Name
		default:
			return nil, badRequest("tool_choice.type", "must be auto, any, tool or none, got %q", c.Type)
		}
	}
	if len(list) == 0 {
		if t.choice == "required" || t.choice == "function" {
			return nil, badRequest("tool_choice", "needs tools")
		}
		return nil, nil
	}
	return t, nil
}

// anthropicInBlock is a content block of a request message.
type anthropicInBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`          // tool_use
	Name      string          `json:"name"`        // tool_use
	Input     json.RawMessage `json:"input"`       // tool_use
	ToolUseID string          `json:"tool_use_id"` // tool_result
	Content   json.RawMessage `json:"content"`     // tool_result: a string or text blocks
}

// anthropicTurn turns one request message into template messages: its
// text, an assistant's tool_use blocks as tool_calls, and each tool_result
// block as a tool message (before the user's text, as OpenAI orders them).
func anthropicTurn(i int, m anthropicMessage) ([]tokenize.Message, error) {
	field := fmt.Sprintf("messages.%d.content", i)
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []tokenize.Message{{Role: m.Role, Content: s}}, nil
	}
	var blocks []anthropicInBlock
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return nil, badRequest(field, "must be a string or a list of content blocks")
	}
	var out []tokenize.Message
	var text strings.Builder
	var calls []string
	for j, bl := range blocks {
		bf := fmt.Sprintf("%s.%d", field, j)
		switch {
		case bl.Type == "text":
			text.WriteString(bl.Text)
		case bl.Type == "tool_use" && m.Role == "assistant":
			if bl.Name == "" {
				return nil, badRequest(bf+".name", "is required")
			}
			input := bl.Input
			if isNull(input) {
				input = json.RawMessage("{}")
			}
			id, _ := json.Marshal(bl.ID)
			name, _ := json.Marshal(bl.Name)
			calls = append(calls, fmt.Sprintf(`{"id":%s,"type":"function","function":{"name":%s,"arguments":%s}}`, id, name, input))
		case bl.Type == "tool_result" && m.Role == "user":
			content := ""
			if !isNull(bl.Content) {
				var err error
				if content, err = blocksText(bf+".content", bl.Content); err != nil {
					return nil, err
				}
			}
			out = append(out, tokenize.Message{Role: "tool", Content: content, Fields: map[string]any{"tool_call_id": bl.ToolUseID}})
		default:
			return nil, badRequest(bf+".type", "only text, tool_use (assistant) and tool_result (user) blocks are supported, got %q", bl.Type)
		}
	}
	if text.Len() > 0 || len(calls) > 0 || len(out) == 0 {
		msg := tokenize.Message{Role: m.Role, Content: text.String()}
		if len(calls) > 0 {
			msg.Fields = map[string]any{"tool_calls": json.RawMessage("[" + strings.Join(calls, ",") + "]")}
		}
		out = append(out, msg)
	}
	return out, nil
}

// toolUseBlocks turns parsed calls into tool_use blocks.
func toolUseBlocks(calls []toolFunction) []anthropicBlock {
	out := make([]anthropicBlock, len(calls))
	for i, c := range calls {
		out[i] = anthropicBlock{Type: "tool_use", ID: callID("toolu_"), Name: c.Name, Input: json.RawMessage(c.Arguments)}
	}
	return out
}
