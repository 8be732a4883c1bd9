package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ingot-llm/ingot/model"
	"github.com/ingot-llm/ingot/tokenize"
)

const tokenizeUsage = `usage:
  run tokenize (-model DIR | -tokenizer FILE) [-special] [-json] [-stdin | [--] TEXT]
  run tokenize (-model DIR | -tokenizer FILE) -decode 1,2,3 [-skip-special] [-json]

Encodes TEXT (or all of standard input, byte for byte, with -stdin) and prints
the token ids on one line, separated by spaces. -special adds the special
tokens of the post-processor (BOS), as add_special_tokens=True does; special
tokens written in TEXT are always matched. -json prints {"ids":[…],"tokens":[…]}
instead, tokens as tokenizer.json spells them.

With -decode, prints the text of the comma-separated ids exactly, with no
newline added (-json: {"text":"…"}); -skip-special leaves special tokens out.

flags:
`

// runTokenize is the "run tokenize" command. It returns the exit code.
func runTokenize(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run tokenize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, tokenizeUsage)
		fs.PrintDefaults()
	}
	modelDir := fs.String("model", "", "model `directory` holding tokenizer.json (and tokenizer_config.json), or a GGUF file")
	tokFile := fs.String("tokenizer", "", "tokenizer.json `file`")
	special := fs.Bool("special", false, "add the post-processor's special tokens (BOS), as add_special_tokens=True")
	jsonOut := fs.Bool("json", false, `print {"ids":[…],"tokens":[…]} (with -decode: {"text":"…"})`)
	useStdin := fs.Bool("stdin", false, "read TEXT from standard input, byte for byte")
	decode := fs.String("decode", "", "decode these comma-separated `ids` instead of encoding")
	skipSpecial := fs.Bool("skip-special", false, "with -decode: leave special tokens out")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	tk, err := loadTokenizer(*modelDir, *tokFile)
	if err != nil {
		fmt.Fprintln(stderr, "run tokenize:", err)
		return sourceExit(err)
	}
	if *decode != "" {
		if len(pos) > 0 || *useStdin {
			fmt.Fprintln(stderr, "run tokenize: -decode takes no TEXT")
			return 2
		}
		ids, err := parseTokenIDs(*decode)
		if err != nil {
			fmt.Fprintln(stderr, "run tokenize: -decode:", err)
			return 2
		}
		text := tk.Decode(ids, *skipSpecial)
		if *jsonOut {
			return printJSON(stdout, stderr, map[string]string{"text": text})
		}
		if _, err := io.WriteString(stdout, text); err != nil {
			fmt.Fprintln(stderr, "run tokenize:", err)
			return 1
		}
		return 0
	}
	var text string
	switch {
	case *useStdin && len(pos) > 0:
		fmt.Fprintln(stderr, "run tokenize: -stdin and TEXT are exclusive")
		return 2
	case *useStdin:
		b, err := io.ReadAll(stdin)
		if err != nil {
			fmt.Fprintln(stderr, "run tokenize: reading stdin:", err)
			return 1
		}
		text = string(b)
	case len(pos) == 0:
		fmt.Fprintln(stderr, "run tokenize: missing TEXT (or -stdin)")
		fs.Usage()
		return 2
	default:
		text = strings.Join(pos, " ")
	}
	ids := tk.Encode(text, *special)
	if *jsonOut {
		toks := make([]string, len(ids))
		for i, id := range ids {
			toks[i] = tk.Token(id)
		}
		return printJSON(stdout, stderr, struct {
			IDs    []int32  `json:"ids"`
			Tokens []string `json:"tokens"`
		}{ids, toks})
	}
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(int(id)))
	}
	b.WriteByte('\n')
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		fmt.Fprintln(stderr, "run tokenize:", err)
		return 1
	}
	return 0
}

const chatTemplateUsage = `usage:
  run chat-template (-model DIR | -tokenizer-config FILE) -messages FILE.json [-add-generation-prompt]

Renders the conversation in FILE.json (a JSON array of {"role", "content", …}
objects; "-" reads standard input) with the model's chat template, as
transformers' apply_chat_template(tokenize=False) does, and prints exactly the
rendered bytes. A template that raises exits with status 1 and its message on
standard error.

flags:
`

// runChatTemplate is the "run chat-template" command. It returns the exit code.
func runChatTemplate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run chat-template", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, chatTemplateUsage)
		fs.PrintDefaults()
	}
	modelDir := fs.String("model", "", "model `directory` holding tokenizer_config.json, or a GGUF file")
	cfgFile := fs.String("tokenizer-config", "", "tokenizer_config.json `file`")
	msgFile := fs.String("messages", "", "JSON `file` with the array of messages (\"-\": standard input)")
	genPrompt := fs.Bool("add-generation-prompt", false, "end with the header of an assistant turn")
	cont := fs.Bool("continue-final-message", false, "leave the last message open (prefill)")
	toolsFile := fs.String("tools", "", "JSON `file` with the array of tool definitions")
	extra := fs.String("vars", "", `more template variables as a JSON object, e.g. '{"enable_thinking": false}'`)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if len(pos) > 0 || *msgFile == "" {
		fmt.Fprintln(stderr, "run chat-template: want -messages FILE.json and no arguments")
		fs.Usage()
		return 2
	}
	var opts tokenize.ChatOptions
	opts.AddGenerationPrompt, opts.ContinueFinalMessage = *genPrompt, *cont
	var msgs []tokenize.Message
	if err := readJSONFile(*msgFile, stdin, &msgs); err != nil {
		fmt.Fprintln(stderr, "run chat-template: -messages:", err)
		return 1
	}
	if *toolsFile != "" {
		var tools []json.RawMessage
		if err := readJSONFile(*toolsFile, stdin, &tools); err != nil {
			fmt.Fprintln(stderr, "run chat-template: -tools:", err)
			return 1
		}
		opts.Tools = []any{}
		for _, t := range tools {
			opts.Tools = append(opts.Tools, t)
		}
	}
	if *extra != "" {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(*extra), &raw); err != nil {
			fmt.Fprintln(stderr, "run chat-template: -vars:", err)
			return 2
		}
		opts.Extra = map[string]any{}
		for k, v := range raw {
			opts.Extra[k] = v
		}
	}
	tpl, err := loadChatTemplate(*modelDir, *cfgFile)
	if err != nil {
		fmt.Fprintln(stderr, "run chat-template:", err)
		return sourceExit(err)
	}
	out, err := tpl.Render(msgs, opts)
	if err != nil {
		var te *tokenize.TemplateError
		if errors.As(err, &te) {
			fmt.Fprintln(stderr, te.Message)
		} else {
			fmt.Fprintln(stderr, "run chat-template:", err)
		}
		return 1
	}
	if _, err := io.WriteString(stdout, out); err != nil {
		fmt.Fprintln(stderr, "run chat-template:", err)
		return 1
	}
	return 0
}

// errNeedSource is returned when neither or both of -model and the file flag are given.
var errNeedSource = errors.New("pass exactly one of -model DIR and the file flag")

// sourceExit is the exit status of a failure to find the tokenizer: 2 for a
// missing or doubled source flag.
func sourceExit(err error) int {
	if errors.Is(err, errNeedSource) {
		return 2
	}
	return 1
}

// loadTokenizer loads a tokenizer from -model DIR or -tokenizer FILE (with a
// tokenizer_config.json beside FILE, if any).
func loadTokenizer(dir, file string) (*tokenize.Tokenizer, error) {
	switch {
	case (dir == "") == (file == ""):
		return nil, fmt.Errorf("%w (-tokenizer)", errNeedSource)
	case dir != "":
		if path, ok, err := model.GGUFFile(dir); err != nil {
			return nil, err
		} else if ok {
			return tokenize.LoadGGUF(path)
		}
		return tokenize.Load(dir)
	}
	cfg := filepath.Join(filepath.Dir(file), "tokenizer_config.json")
	if _, err := os.Stat(cfg); err != nil {
		cfg = ""
	}
	return tokenize.LoadFile(file, cfg)
}

// loadChatTemplate loads the chat template of -model DIR (its tokenizer.json
// picks a built-in template if the config has none) or -tokenizer-config FILE.
func loadChatTemplate(dir, file string) (*tokenize.ChatTemplate, error) {
	switch {
	case (dir == "") == (file == ""):
		return nil, fmt.Errorf("%w (-tokenizer-config)", errNeedSource)
	case file != "":
		return tokenize.LoadChatTemplate(file)
	}
	if path, ok, err := model.GGUFFile(dir); err != nil {
		return nil, err
	} else if ok {
		tk, err := tokenize.LoadGGUF(path)
		if err != nil {
			return nil, err
		}
		return tk.ChatTemplate()
	}
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		return tokenize.LoadChatTemplate(filepath.Join(dir, "tokenizer_config.json"))
	}
	tk, err := tokenize.Load(dir)
	if err != nil {
		return nil, err
	}
	return tk.ChatTemplate()
}

// parseInterspersed parses flags that may come before or after positional
// arguments; everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func parseTokenIDs(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("bad id %q", f)
		}
		ids = append(ids, int32(n))
	}
	return ids, nil
}

func readJSONFile(name string, stdin io.Reader, v any) error {
	var data []byte
	var err error
	if name == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	return nil
}

func printJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintln(stderr, "run:", err)
		return 1
	}
	return 0
}
