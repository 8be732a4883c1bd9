package tokenize

// Chat templates run on github.com/nikolalohinski/gonja/v2, chosen after
// rendering every chat_cases.json conversation of the real templates
// (Llama 3, Phi-3, Qwen2.5, Qwen3, Gemma) with it: its parser and evaluator
// reproduce jinja2 on all of them (trim_blocks, lstrip_blocks, namespace,
// slices, loop variables, string methods, tests), and what differed is
// filled in here rather than by writing a second engine:
//   - tojson: gonja uses encoding/json (sorted keys, no spaces, HTML
//     escaping); transformers uses json.dumps(ensure_ascii=False), which keeps
//     key order and puts ", " and ": " between items. Values are decoded with
//     their key order recorded (see orderedJSON) and printed as Python does.
//   - trim and str.strip/lstrip/rstrip/split without arguments: gonja strips
//     spaces only or uses Go's unicode.IsSpace; Python strips str.isspace().
//   - raise_exception and strftime_now (transformers' globals) and
//     continue_final_message (done around the render, as transformers does).
// gonja keeps its defaults in package variables; ChatTemplate never changes
// them and builds its own environment for every render, so renders are
// independent and safe for concurrent use.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/nikolalohinski/gonja/v2/builtins"
	gonjacfg "github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// A Message is one turn of a conversation.
type Message struct {
	Role    string
	Content string
	// Fields holds the message's other fields (tool_calls, reasoning_content,
	// name, tool_call_id, …) by their JSON names. Values are Go values that
	// encoding/json can marshal, or json.RawMessage. A "content" entry
	// replaces Content (for content that is not a string).
	Fields map[string]any
}

// UnmarshalJSON reads a message object, {"role": …, "content": …, …}. Fields
// other than role and string content go to m.Fields as json.RawMessage, so
// their key order reaches the template.
func (m *Message) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*m = Message{}
	for k, v := range raw {
		switch k {
		case "role":
			if err := json.Unmarshal(v, &m.Role); err != nil {
				return fmt.Errorf("role: %v", err)
			}
			continue
		case "content":
			if json.Unmarshal(v, &m.Content) == nil {
				continue
			}
		}
		if m.Fields == nil {
			m.Fields = map[string]any{}
		}
		m.Fields[k] = v
	}
	return nil
}

// ChatOptions are the arguments of apply_chat_template. The zero value
// renders the conversation without a generation prompt and without tools.
type ChatOptions struct {
	AddGenerationPrompt  bool // end with the header of an assistant turn
	ContinueFinalMessage bool // leave the last message open, for prefill
	// Tools are tool definitions (JSON schema objects) as the template's
	// tools variable; nil means none. Pass json.RawMessage to keep key order
	// (Go maps are printed by tojson with sorted keys).
	Tools []any
	// Extra holds more template variables, e.g. {"enable_thinking": false}.
	Extra map[string]any
}

// A ChatTemplate is the Jinja chat template of a tokenizer_config.json with
// the special tokens the template sees (bos_token, eos_token, …).
type ChatTemplate struct {
	templates map[string]string // by name; "default" is the plain one
	special   map[string]any
}

// A TemplateError is the error a chat template raised with raise_exception.
type TemplateError struct {
	Message string
}

func (e *TemplateError) Error() string { return "tokenize: chat template: " + e.Message }

// ErrNoChatTemplate is returned when a tokenizer has no chat template and no
// built-in one fits.
var ErrNoChatTemplate = errors.New("tokenize: no chat template")

// LoadChatTemplate reads the chat template and special tokens of a
// tokenizer_config.json. It is for directories without tokenizer.json.
func LoadChatTemplate(tokenizerConfig string) (*ChatTemplate, error) {
	cfg, err := readConfig(tokenizerConfig)
	if err != nil {
		return nil, err
	}
	if len(cfg.Templates) == 0 {
		return nil, fmt.Errorf("%w in %s (chat_template)", ErrNoChatTemplate, tokenizerConfig)
	}
	return newChatTemplate(cfg, cfg.Templates), nil
}

// NewChatTemplate returns a template from its Jinja source; special holds the
// special tokens the template sees, e.g. {"bos_token": "<s>"}.
func NewChatTemplate(source string, special map[string]string) *ChatTemplate {
	c := &ChatTemplate{templates: map[string]string{"default": source}, special: map[string]any{}}
	for k, v := range special {
		c.special[k] = v
	}
	return c
}

func newChatTemplate(cfg *config, templates map[string]string) *ChatTemplate {
	c := &ChatTemplate{templates: templates, special: map[string]any{}}
	for _, f := range []struct{ name, v string }{{"bos_token", cfg.BOS}, {"eos_token", cfg.EOS}, {"unk_token", cfg.UNK}, {"pad_token", cfg.PAD}} {
		if f.v != "" {
			c.special[f.name] = f.v
		}
	}
	if len(cfg.Additional) > 0 {
		list := make([]any, len(cfg.Additional))
		for i, s := range cfg.Additional {
			list[i] = s
		}
		c.special["additional_special_tokens"] = list
	}
	return c
}

// ChatTemplate returns the tokenizer's chat template: the one in
// tokenizer_config.json, else a built-in one chosen by the special tokens
// (Llama 3, ChatML, Gemma, Phi-3, Mistral). It returns ErrNoChatTemplate if
// none fits.
func (t *Tokenizer) ChatTemplate() (*ChatTemplate, error) {
	cfg := t.cfg
	if cfg == nil {
		cfg = &config{}
	}
	if len(cfg.Templates) > 0 {
		return newChatTemplate(cfg, cfg.Templates), nil
	}
	name, src := t.builtinTemplate()
	if src == "" {
		return nil, ErrNoChatTemplate
	}
	c := newChatTemplate(cfg, map[string]string{"default": src})
	// Built-in templates name their own special tokens when the config does not.
	for k, v := range builtinSpecial[name] {
		if _, ok := c.special[k]; !ok {
			c.special[k] = v
		}
	}
	return c, nil
}

// ApplyChatTemplate renders msgs with the tokenizer's chat template (see
// [Tokenizer.ChatTemplate] and [ChatTemplate.Render]).
func (t *Tokenizer) ApplyChatTemplate(msgs []Message, o ChatOptions) (string, error) {
	c, err := t.ChatTemplate()
	if err != nil {
		return "", err
	}
	return c.Render(msgs, o)
}

// continueTag is what transformers appends to the final message for
// continue_final_message, to find where that message ends.
const continueTag = "CONTINUE_FINAL_MESSAGE_TAG"

// Render renders msgs as transformers' apply_chat_template(tokenize=False)
// does. A template that raises returns a *TemplateError.
func (c *ChatTemplate) Render(msgs []Message, o ChatOptions) (string, error) {
	if o.ContinueFinalMessage {
		if o.AddGenerationPrompt {
			return "", errors.New("tokenize: chat template: continue_final_message and add_generation_prompt are exclusive")
		}
		if len(msgs) == 0 {
			return "", errors.New("tokenize: chat template: continue_final_message needs a message")
		}
		if _, ok := msgs[len(msgs)-1].Fields["content"]; ok {
			return "", errors.New("tokenize: chat template: continue_final_message needs string content")
		}
		msgs = append([]Message(nil), msgs...)
		msgs[len(msgs)-1].Content += continueTag + " "
	}
	src := c.templates["default"]
	if o.Tools != nil && c.templates["tool_use"] != "" {
		src = c.templates["tool_use"]
	}
	if src == "" {
		return "", ErrNoChatTemplate
	}
	out, err := c.render(src, msgs, o)
	if err != nil || !o.ContinueFinalMessage {
		return out, err
	}
	i := strings.LastIndex(out, continueTag)
	if i < 0 {
		return "", errors.New("tokenize: chat template: continue_final_message: the final message is not in the rendered chat")
	}
	if strings.HasPrefix(out[i:], continueTag+" ") {
		return out[:i], nil
	}
	return strings.TrimRightFunc(out[:i], pyIsSpace), nil
}

func (c *ChatTemplate) render(src string, msgs []Message, o ChatOptions) (out string, err error) {
	r := &renderer{order: map[uintptr][]string{}}
	defer func() {
		if p := recover(); p != nil {
			out, err = "", fmt.Errorf("tokenize: chat template: %v", p)
		}
	}()
	ctx := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	messages := make([]any, len(msgs))
	for i, m := range msgs {
		obj := map[string]any{"role": m.Role, "content": m.Content}
		keys := []string{"role", "content"}
		for k, v := range m.Fields {
			if k == "role" {
				continue
			}
			if obj[k], err = r.value(v); err != nil {
				return "", fmt.Errorf("tokenize: chat template: messages[%d].%s: %v", i, k, err)
			}
			if k != "content" {
				keys = append(keys, k)
			}
		}
		r.setOrder(obj, keys)
		messages[i] = obj
	}
	vars := map[string]any{
		"messages":              messages,
		"tools":                 nil,
		"documents":             nil,
		"add_generation_prompt": o.AddGenerationPrompt,
		"raise_exception": func(msg string) (string, error) {
			r.raised = &TemplateError{Message: msg}
			return "", r.raised
		},
		"strftime_now": func(format string) string { return strftime(time.Now(), format) },
	}
	if o.Tools != nil {
		tools := make([]any, len(o.Tools))
		for i, tool := range o.Tools {
			if tools[i], err = r.value(tool); err != nil {
				return "", fmt.Errorf("tokenize: chat template: tools[%d]: %v", i, err)
			}
		}
		vars["tools"] = tools
	}
	for k, v := range c.special {
		vars[k] = v
	}
	for k, v := range o.Extra {
		if vars[k], err = r.value(v); err != nil {
			return "", fmt.Errorf("tokenize: chat template: %s: %v", k, err)
		}
	}
	ctx.Update(exec.NewContext(vars))

	cfg := gonjacfg.New()
	cfg.TrimBlocks, cfg.LeftStripBlocks = true, true
	loader, err := loaders.NewFileSystemLoader("")
	if err != nil {
		return "", fmt.Errorf("tokenize: chat template: %v", err)
	}
	shifted, err := loaders.NewShiftedLoader("chat_template", strings.NewReader(src), loader)
	if err != nil {
		return "", fmt.Errorf("tokenize: chat template: %v", err)
	}
	tpl, err := exec.NewTemplate("chat_template", cfg, shifted, r.environment(ctx))
	if err != nil {
		return "", fmt.Errorf("tokenize: chat template: %v", err)
	}
	out, err = tpl.ExecuteToString(ctx)
	if r.raised != nil {
		return "", r.raised
	}
	if err != nil {
		return "", fmt.Errorf("tokenize: chat template: %v", err)
	}
	return out, nil
}

// renderer holds the state of one render: the key order of every JSON
// object handed to the template, and what it raised.
type renderer struct {
	order  map[uintptr][]string
	raised *TemplateError
}

func (r *renderer) setOrder(m map[string]any, keys []string) {
	r.order[reflect.ValueOf(m).Pointer()] = keys
}

// environment returns gonja's builtins with the Python-compatible filters and
// string methods described at the top of this file.
func (r *renderer) environment(ctx *exec.Context) *exec.Environment {
	filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	filters.Replace("tojson", r.tojson)
	filters.Replace("trim", func(_ *exec.Evaluator, in *exec.Value, p *exec.VarArgs) *exec.Value {
		return exec.AsValue(pyStrip(in.String(), p, true, true))
	})
	str := map[string]exec.Method[string]{}
	for _, name := range strings.Fields(`capitalize capwords casefold center count encode endswith expandtabs find
		format format_map isalnum isalpha isascii isdecimal isdigit islower isnumeric isprintable isspace istitle
		isupper join ljust lower partition removeprefix removesuffix replace rfind rjust rpartition rsplit
		splitlines startswith swapcase title upper zfill`) {
		if m, ok := builtins.Methods.Str.Get(name); ok {
			str[name] = m
		}
	}
	strip := func(left, right bool) exec.Method[string] {
		return func(s string, _ *exec.Value, p *exec.VarArgs) (any, error) { return pyStrip(s, p, left, right), nil }
	}
	str["strip"], str["lstrip"], str["rstrip"] = strip(true, true), strip(true, false), strip(false, true)
	gonjaSplit, _ := builtins.Methods.Str.Get("split")
	str["split"] = func(s string, v *exec.Value, p *exec.VarArgs) (any, error) {
		if len(p.Args) == 0 && len(p.KwArgs) == 0 || len(p.Args) == 1 && p.Args[0].IsNil() {
			parts := strings.FieldsFunc(s, pyIsSpace)
			list := make([]any, len(parts))
			for i, x := range parts {
				list[i] = x
			}
			return list, nil
		}
		return gonjaSplit(s, v, p)
	}
	methods := builtins.Methods
	methods.Str = exec.NewMethodSet(str)
	return &exec.Environment{
		Context:           ctx,
		Filters:           filters,
		Tests:             builtins.Tests,
		ControlStructures: builtins.ControlStructures,
		Methods:           methods,
	}
}

// pyStrip is Python's str.strip (lstrip, rstrip) with the chars argument of p.
func pyStrip(s string, p *exec.VarArgs, left, right bool) string {
	var chars *exec.Value
	if len(p.Args) > 0 {
		chars = p.Args[0]
	} else if v, ok := p.KwArgs["chars"]; ok {
		chars = v
	}
	f := pyIsSpace
	if chars != nil && !chars.IsNil() {
		set := chars.String()
		f = func(r rune) bool { return strings.ContainsRune(set, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, f)
	}
	if right {
		s = strings.TrimRightFunc(s, f)
	}
	return s
}

// pyIsSpace is Python's str.isspace for one char.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || 0x1c <= r && r <= 0x1f
}

// tojson is transformers' tojson filter: json.dumps(x, ensure_ascii=False,
// indent=indent, sort_keys=sort_keys).
func (r *renderer) tojson(_ *exec.Evaluator, in *exec.Value, p *exec.VarArgs) *exec.Value {
	indent := -1
	sortKeys := false
	if v, ok := p.KwArgs["indent"]; ok && !v.IsNil() {
		indent = v.Integer()
	} else if len(p.Args) > 0 && !p.Args[0].IsNil() {
		indent = p.Args[0].Integer()
	}
	if v, ok := p.KwArgs["sort_keys"]; ok {
		sortKeys = v.IsTrue()
	}
	var b strings.Builder
	if err := r.writeJSON(&b, in.Interface(), indent, sortKeys, 0); err != nil {
		return exec.AsValue(fmt.Errorf("tojson: %v", err))
	}
	return exec.AsSafeValue(b.String())
}

// writeJSON writes v as Python's json.dumps does.
func (r *renderer) writeJSON(b *strings.Builder, v any, indent int, sortKeys bool, depth int) error {
	newline := func(d int) {
		if indent >= 0 {
			b.WriteByte('\n')
			b.WriteString(strings.Repeat(" ", indent*d))
		}
	}
	itemSep := ", "
	if indent >= 0 {
		itemSep = ","
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(map[bool]string{true: "true", false: "false"}[x])
	case string:
		writePyString(b, x)
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(pyFloat(x))
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(itemSep)
			}
			newline(depth + 1)
			if err := r.writeJSON(b, e, indent, sortKeys, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte(']')
	case map[string]any:
		if len(x) == 0 {
			b.WriteString("{}")
			return nil
		}
		keys := r.order[reflect.ValueOf(x).Pointer()]
		if len(keys) != len(x) || sortKeys {
			keys = sortedKeys(x)
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(itemSep)
			}
			newline(depth + 1)
			writePyString(b, k)
			b.WriteString(": ")
			if err := r.writeJSON(b, x[k], indent, sortKeys, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte('}')
	default:
		// Other Go values (from gonja or callers) go through encoding/json.
		w, err := r.value(x)
		if err != nil {
			return err
		}
		if reflect.TypeOf(w) == reflect.TypeOf(v) {
			return fmt.Errorf("cannot encode %T", v)
		}
		return r.writeJSON(b, w, indent, sortKeys, depth)
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// writePyString writes s as json.dumps(s, ensure_ascii=False) does.
func writePyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// pyFloat formats f as Python's repr(float) does.
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expStr, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expStr)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s = strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// value converts a Go value for the template: json.RawMessage is decoded,
// other values go through encoding/json, so objects become map[string]any
// (with their key order recorded), arrays []any, integers int and other
// numbers float64.
func (r *renderer) value(v any) (any, error) {
	var data []byte
	switch x := v.(type) {
	case nil, bool, string, int, float64:
		return x, nil
	case json.RawMessage:
		data = x
	default:
		var err error
		if data, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	out, err := r.decode(dec)
	if err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after JSON value")
	}
	return out, nil
}

// decode reads one JSON value from dec, recording object key order.
func (r *renderer) decode(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '[':
			list := []any{}
			for dec.More() {
				e, err := r.decode(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, e)
			}
			_, err := dec.Token()
			return list, err
		case '{':
			obj := map[string]any{}
			var keys []string
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				e, err := r.decode(dec)
				if err != nil {
					return nil, err
				}
				if _, dup := obj[k]; !dup {
					keys = append(keys, k)
				}
				obj[k] = e
			}
			r.setOrder(obj, keys)
			_, err := dec.Token()
			return obj, err
		}
		return nil, fmt.Errorf("unexpected %v", x)
	case json.Number:
		if i, err := strconv.Atoi(x.String()); err == nil {
			return i, nil
		}
		f, err := x.Float64()
		return f, err
	}
	return tok, nil
}

// strftime formats t with a C strftime format, as transformers' strftime_now.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) {
			b.WriteByte(format[i])
			continue
		}
		i++
		switch format[i] {
		case 'Y':
			b.WriteString(t.Format("2006"))
		case 'y':
			b.WriteString(t.Format("06"))
		case 'm':
			b.WriteString(t.Format("01"))
		case 'd':
			b.WriteString(t.Format("02"))
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'B':
			b.WriteString(t.Format("January"))
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'H':
			b.WriteString(t.Format("15"))
		case 'I':
			b.WriteString(t.Format("03"))
		case 'M':
			b.WriteString(t.Format("04"))
		case 'S':
			b.WriteString(t.Format("05"))
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}

// builtinTemplate picks a built-in template by the tokenizer's added tokens.
func (t *Tokenizer) builtinTemplate() (name, src string) {
	has := func(tok string) bool { _, ok := t.TokenID(tok); return ok }
	switch {
	case has("<|start_header_id|>") && has("<|eot_id|>"):
		name = "llama3"
	case has("<|im_start|>") && has("<|im_end|>"):
		name = "chatml"
	case has("<start_of_turn>") && has("<end_of_turn>"):
		name = "gemma"
	case has("<|user|>") && has("<|assistant|>") && has("<|end|>"):
		name = "phi3"
	case has("[INST]") || has("<s>") && has("</s>"):
		name = "mistral"
	}
	return name, builtinTemplates[name]
}

// builtinTemplates are the official templates of the families, for
// tokenizer_config.json files that have none.
var builtinTemplates = map[string]string{
	"llama3": `{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>

'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>

' }}{% endif %}`,
	"chatml": `{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`,
	"gemma": `{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '
' + message['content'] | trim + '<end_of_turn>
' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model
'}}{% endif %}`,
	"phi3": `{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'user' %}{{'<|user|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>
' + message['content'] + '<|end|>
'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>
' }}{% else %}{{ eos_token }}{% endif %}`,
	// Mistral-7B-Instruct: a system message is put before the first user turn.
	"mistral": `{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] %}{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}{{- bos_token }}{%- for message in loop_messages %}{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}{%- endif %}{%- if message['role'] == 'user' %}{%- if loop.first and system_message is defined %}{{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}{%- else %}{{- ' [INST] ' + message['content'] + ' [/INST]' }}{%- endif %}{%- elif message['role'] == 'assistant' %}{{- ' ' + message['content'] + eos_token}}{%- else %}{{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}{%- endif %}{%- endfor %}`,
}

// builtinSpecial are the special tokens of the built-in templates.
var builtinSpecial = map[string]map[string]any{
	"llama3":  {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
	"chatml":  {"eos_token": "<|im_end|>"},
	"gemma":   {"bos_token": "<bos>", "eos_token": "<eos>"},
	"phi3":    {"bos_token": "<s>", "eos_token": "<|endoftext|>"},
	"mistral": {"bos_token": "<s>", "eos_token": "</s>"},
}
