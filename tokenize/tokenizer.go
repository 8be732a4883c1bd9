package tokenize

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"unicode/utf8"
)

// A Tokenizer encodes text to token ids and decodes ids to text exactly as
// the Hugging Face tokenizers library does with the same tokenizer.json.
// It is safe for concurrent use.
type Tokenizer struct {
	normalizer normalizer // nil: none
	pre        pipeline
	model      *bpe
	post       *postProcessor // nil: none
	decoder    decoder        // nil: tokens joined by spaces

	byteFallback bool // decoder has ByteFallback: a run of <0xXX> tokens decodes as a whole

	added    map[int32]*addedToken
	rawTrie  trie // added tokens matched in the input text
	normTrie trie // added tokens with normalized set, matched in normalized text

	vocabSize int
	cfg       *config // nil without tokenizer_config.json
	pool      sync.Pool
}

// postProcessor holds the special token ids put around an encoded sequence.
type postProcessor struct {
	before, after []int32
}

// Encode returns the token ids of text. With addSpecial it adds the special
// tokens of the post-processor (BOS for Llama), as add_special_tokens=True does.
// Added and special tokens written in text are always matched. Invalid UTF-8
// in text is first replaced by U+FFFD.
func (t *Tokenizer) Encode(text string, addSpecial bool) []int32 {
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	sc := t.pool.Get().(*scratch)
	defer t.pool.Put(sc)
	ids := make([]int32, 0, len(text)/3+4)
	if addSpecial && t.post != nil {
		ids = append(ids, t.post.before...)
	}
	var segBuf [16]segment
	for _, seg := range t.rawTrie.split(segBuf[:0], text) {
		if seg.tok != nil {
			ids = append(ids, seg.tok.id)
			continue
		}
		s := text[seg.start:seg.end]
		if t.normalizer != nil {
			s = t.normalizer(s)
		}
		var sub [16]segment
		for _, ns := range t.normTrie.split(sub[:0], s) {
			if ns.tok != nil {
				ids = append(ids, ns.tok.id)
				continue
			}
			if ns.end > ns.start {
				ids = t.encodePiece(ids, piece{s: s[ns.start:ns.end], first: seg.start == 0 && ns.start == 0}, sc)
			}
		}
	}
	if addSpecial && t.post != nil {
		ids = append(ids, t.post.after...)
	}
	return ids
}

// encodePiece pre-tokenizes one normalized piece and runs the model on its words.
func (t *Tokenizer) encodePiece(ids []int32, p piece, sc *scratch) []int32 {
	words := append(sc.words[:0], p)
	for _, step := range t.pre.steps {
		next := sc.tmp[:0]
		for _, w := range words {
			next = step(next, w, sc)
		}
		sc.tmp, words = words, next
	}
	for _, w := range words {
		ids = t.model.tokenize(ids, w.s, sc)
	}
	sc.words = words
	return ids
}

// Decode returns the text of ids. With skipSpecial, special tokens are left
// out. Ids that name no token are ignored.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if a := t.added[id]; a != nil {
			if !skipSpecial || !a.skip {
				toks = append(toks, a.text)
			}
		} else if id >= 0 && int(id) < len(t.model.tokens) && t.model.tokens[id] != "" {
			toks = append(toks, t.model.tokens[id])
		}
	}
	if t.decoder == nil {
		return strings.Join(toks, " ")
	}
	return strings.Join(t.decoder(toks), "")
}

// IsSpecial reports whether id is an added token marked special (BOS, EOS,
// chat markers), the tokens Decode skips with skipSpecial.
func (t *Tokenizer) IsSpecial(id int32) bool {
	a := t.added[id]
	return a != nil && a.special
}

// VocabSize returns one more than the largest token id, added tokens included.
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// TokenID returns the id of a token given as its tokenizer.json string (an
// added token's content, or a model vocabulary entry).
func (t *Tokenizer) TokenID(tok string) (int32, bool) {
	if tok == "" {
		return 0, false
	}
	for id, a := range t.added {
		if a.content == tok {
			return id, true
		}
	}
	key := tok
	if t.model.byteLevel {
		key = unmapByteLevel(tok)
	}
	if id, ok := t.model.vocab[key]; ok && t.model.tokens[id] == tok {
		return id, true
	}
	return 0, false
}

// Token returns the tokenizer.json string of id, or "" if no token has it.
func (t *Tokenizer) Token(id int32) string {
	if a := t.added[id]; a != nil {
		return a.content
	}
	if id >= 0 && int(id) < len(t.model.tokens) {
		return t.model.tokens[id]
	}
	return ""
}

// BOS returns the id of tokenizer_config.json's bos_token, if it names a token.
func (t *Tokenizer) BOS() (int32, bool) {
	if t.cfg == nil {
		return 0, false
	}
	return t.TokenID(t.cfg.BOS)
}

// EOS returns the id of tokenizer_config.json's eos_token, if it names a token.
func (t *Tokenizer) EOS() (int32, bool) {
	if t.cfg == nil {
		return 0, false
	}
	return t.TokenID(t.cfg.EOS)
}

// config is the part of tokenizer_config.json that ingot reads.
type config struct {
	BOS, EOS, UNK, PAD string
	Additional         []string
	AddBOS, AddEOS     *bool
	Templates          map[string]string // chat templates by name; "default" for a plain string
}

// configJSON is tokenizer_config.json; special tokens are strings or
// AddedToken objects, the chat template a string or a list of named templates.
type configJSON struct {
	BOS          json.RawMessage   `json:"bos_token"`
	EOS          json.RawMessage   `json:"eos_token"`
	UNK          json.RawMessage   `json:"unk_token"`
	PAD          json.RawMessage   `json:"pad_token"`
	Additional   []json.RawMessage `json:"additional_special_tokens"`
	AddBOS       *bool             `json:"add_bos_token"`
	AddEOS       *bool             `json:"add_eos_token"`
	ChatTemplate json.RawMessage   `json:"chat_template"`
}

func readConfig(path string) (*config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	c, err := parseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %s: %w", path, err)
	}
	return c, nil
}

func parseConfig(data []byte) (*config, error) {
	var cj configJSON
	if err := json.Unmarshal(data, &cj); err != nil {
		return nil, err
	}
	c := &config{AddBOS: cj.AddBOS, AddEOS: cj.AddEOS, Templates: map[string]string{}}
	var err error
	for _, f := range []struct {
		dst  *string
		raw  json.RawMessage
		name string
	}{{&c.BOS, cj.BOS, "bos_token"}, {&c.EOS, cj.EOS, "eos_token"}, {&c.UNK, cj.UNK, "unk_token"}, {&c.PAD, cj.PAD, "pad_token"}} {
		if *f.dst, err = tokenString(f.raw); err != nil {
			return nil, fmt.Errorf("%s: %v", f.name, err)
		}
	}
	for i, r := range cj.Additional {
		s, err := tokenString(r)
		if err != nil {
			return nil, fmt.Errorf("additional_special_tokens[%d]: %v", i, err)
		}
		c.Additional = append(c.Additional, s)
	}
	if len(cj.ChatTemplate) > 0 && string(cj.ChatTemplate) != "null" {
		var s string
		if json.Unmarshal(cj.ChatTemplate, &s) == nil {
			c.Templates["default"] = s
		} else {
			var list []struct {
				Name     string `json:"name"`
				Template string `json:"template"`
			}
			if err := json.Unmarshal(cj.ChatTemplate, &list); err != nil {
				return nil, fmt.Errorf("chat_template: want a string or a list of {name, template}: %v", err)
			}
			for _, l := range list {
				c.Templates[l.Name] = l.Template
			}
		}
	}
	return c, nil
}

// tokenString reads a special token given as a string, an AddedToken object
// ({"content": …}) or null.
func tokenString(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var o struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", fmt.Errorf("want a string or {\"content\": …}")
	}
	return o.Content, nil
}
