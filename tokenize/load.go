package tokenize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// fileJSON is the part of tokenizer.json that ingot reads.
type fileJSON struct {
	AddedTokens   []addedJSON     `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         *modelJSON      `json:"model"`
}

type addedJSON struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    string           `json:"type"`
	UnkToken                *string          `json:"unk_token"`
	ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
	FuseUnk                 bool             `json:"fuse_unk"`
	ByteFallback            bool             `json:"byte_fallback"`
	IgnoreMerges            bool             `json:"ignore_merges"`
	Dropout                 *float64         `json:"dropout"`
	Vocab                   map[string]int32 `json:"vocab"`
	Merges                  json.RawMessage  `json:"merges"`
}

// componentJSON holds the fields of every normalizer, pre-tokenizer,
// post-processor and decoder ingot knows; Type says which is meant.
type componentJSON struct {
	Type string `json:"type"`

	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Processors    []json.RawMessage `json:"processors"`
	Decoders      []json.RawMessage `json:"decoders"`

	Prepend        string       `json:"prepend"`
	Pattern        *patternJSON `json:"pattern"`
	Content        string       `json:"content"`
	Behavior       string       `json:"behavior"`
	Invert         bool         `json:"invert"`
	Replacement    string       `json:"replacement"`
	PrependScheme  string       `json:"prepend_scheme"`
	AddPrefixSpace *bool        `json:"add_prefix_space"`
	Split          *bool        `json:"split"`
	UseRegex       *bool        `json:"use_regex"`
	Start          int          `json:"start"`
	Stop           int          `json:"stop"`
	StripLeft      bool         `json:"strip_left"`
	StripRight     bool         `json:"strip_right"`

	Single        []templateItemJSON          `json:"single"`
	SpecialTokens map[string]specialTokenJSON `json:"special_tokens"`
	Cls           []json.RawMessage           `json:"cls"`
	Sep           []json.RawMessage           `json:"sep"`
}

type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

type templateItemJSON struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

type specialTokenJSON struct {
	IDs []int32 `json:"ids"`
}

// decodeComponent decodes one component; null gives nil.
func decodeComponent(raw json.RawMessage, path string) (*componentJSON, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return &c, nil
}

// Load reads dir/tokenizer.json and, if present, dir/tokenizer_config.json.
func Load(dir string) (*Tokenizer, error) {
	tj := filepath.Join(dir, "tokenizer.json")
	if _, err := os.Stat(tj); err != nil {
		return nil, fmt.Errorf("tokenize: no tokenizer.json in %s (pass -tokenizer)", dir)
	}
	tc := filepath.Join(dir, "tokenizer_config.json")
	if _, err := os.Stat(tc); err != nil {
		tc = ""
	}
	return LoadFile(tj, tc)
}

// LoadFile reads a tokenizer.json file and, unless tokenizerConfig is "", a
// tokenizer_config.json file (special token names, add_bos_token and the chat template).
func LoadFile(tokenizerJSON, tokenizerConfig string) (*Tokenizer, error) {
	data, err := os.ReadFile(tokenizerJSON)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	var cfg *config
	if tokenizerConfig != "" {
		if cfg, err = readConfig(tokenizerConfig); err != nil {
			return nil, err
		}
	}
	t, err := parse(data, cfg)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %s: %w", tokenizerJSON, err)
	}
	return t, nil
}

// parse builds a Tokenizer from the bytes of a tokenizer.json; cfg may be nil.
// Errors name the JSON field.
func parse(data []byte, cfg *config) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	if f.Model == nil {
		return nil, errors.New("model: missing")
	}
	if f.Model.Type != "BPE" && !(f.Model.Type == "" && f.Model.Merges != nil) {
		return nil, fmt.Errorf("model.type: unsupported model %q (only BPE)", f.Model.Type)
	}
	t := &Tokenizer{cfg: cfg}
	var err error
	if t.normalizer, err = newNormalizer(f.Normalizer, "normalizer"); err != nil {
		return nil, err
	}
	if err := t.pre.add(f.PreTokenizer, "pre_tokenizer"); err != nil {
		return nil, err
	}
	if t.decoder, err = newDecoder(f.Decoder, "decoder", &t.byteFallback); err != nil {
		return nil, err
	}
	if t.model, err = newBPE(f.Model, t.pre.byteLevel); err != nil {
		return nil, err
	}
	for id, s := range t.model.tokens {
		if s != "" && id >= t.vocabSize {
			t.vocabSize = id + 1
		}
	}
	if err := t.addTokens(f.AddedTokens); err != nil {
		return nil, err
	}
	if t.post, err = t.newPostProcessor(f.PostProcessor, "post_processor"); err != nil {
		return nil, err
	}
	if f.PostProcessor == nil || string(f.PostProcessor) == "null" {
		t.post = t.configPostProcessor()
	}
	t.pool.New = func() any { return new(scratch) }
	return t, nil
}

func (t *Tokenizer) addTokens(list []addedJSON) error {
	t.added = make(map[int32]*addedToken, len(list))
	special := map[string]bool{}
	for i, a := range list {
		if a.Content == "" {
			return fmt.Errorf("added_tokens[%d].content: empty", i)
		}
		if a.ID < 0 {
			return fmt.Errorf("added_tokens[%d].id: %d is negative", i, a.ID)
		}
		tok := &addedToken{id: a.ID, content: a.Content, singleWord: a.SingleWord, lstrip: a.LStrip,
			rstrip: a.RStrip, normalized: a.Normalized, special: a.Special, text: a.Content}
		if a.Normalized && t.normalizer != nil {
			tok.text = t.normalizer(a.Content)
		}
		if tok.text == "" {
			continue
		}
		if a.Special {
			special[a.Content] = true
		}
		t.added[a.ID] = tok
		if a.Normalized && t.normalizer != nil {
			t.normTrie.add(tok.text, tok)
		} else {
			t.rawTrie.add(tok.text, tok)
		}
		if int(a.ID) >= t.vocabSize {
			t.vocabSize = int(a.ID) + 1
		}
	}
	for _, tok := range t.added {
		tok.skip = tok.special && special[tok.text]
	}
	return nil
}

// newBPE builds the BPE model; byteLevel keys it by raw bytes (see [bpe]).
func newBPE(mj *modelJSON, byteLevel bool) (*bpe, error) {
	if mj.Dropout != nil && *mj.Dropout != 0 {
		return nil, fmt.Errorf("model.dropout: %v is not supported (only 0 or null)", *mj.Dropout)
	}
	m := &bpe{
		vocab:        make(map[string]int32, len(mj.Vocab)),
		byteLevel:    byteLevel,
		ignoreMerges: mj.IgnoreMerges,
		fuseUnk:      mj.FuseUnk,
		hasFall:      mj.ByteFallback,
		unk:          -1,
		cache:        map[string][]int32{},
	}
	if mj.ContinuingSubwordPrefix != nil {
		m.prefix = *mj.ContinuingSubwordPrefix
	}
	if mj.EndOfWordSuffix != nil {
		m.suffix = *mj.EndOfWordSuffix
	}
	key := func(s string) string { return s }
	if byteLevel {
		key = unmapByteLevel
	}
	maxID := int32(-1)
	for s, id := range mj.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("model.vocab[%q]: id %d is negative", s, id)
		}
		maxID = max(maxID, id)
	}
	if maxID >= 1<<21 {
		return nil, fmt.Errorf("model.vocab: id %d is too large", maxID)
	}
	m.tokens = make([]string, maxID+1)
	for s, id := range mj.Vocab {
		m.vocab[key(s)] = id
		m.tokens[id] = s
	}
	if mj.UnkToken != nil && *mj.UnkToken != "" {
		id, ok := mj.Vocab[*mj.UnkToken]
		if !ok {
			return nil, fmt.Errorf("model.unk_token: %q not in model.vocab", *mj.UnkToken)
		}
		m.unk = id
	}
	for i := range m.runeIDs {
		m.runeIDs[i] = -1
		if id, ok := mj.Vocab[string(rune(i))]; ok {
			m.runeIDs[i] = id
		}
	}
	for b := range m.byteIDs {
		m.byteIDs[b] = -1
		name := fmt.Sprintf("<0x%02X>", b)
		if byteLevel {
			name = string(byteToUnicode[b])
		} else if !mj.ByteFallback {
			continue
		}
		if id, ok := mj.Vocab[name]; ok {
			m.byteIDs[b] = id
		}
	}
	pairs, err := parseMerges(mj.Merges)
	if err != nil {
		return nil, err
	}
	m.merges = make(map[uint64]uint64, len(pairs))
	if m.prefix == "" && m.suffix == "" {
		m.crossable = make(map[uint64]struct{})
	}
	for rank, p := range pairs {
		a, b := key(p[0]), key(p[1])
		ida, ok1 := m.vocab[a]
		idb, ok2 := m.vocab[b]
		idn, ok3 := m.vocab[a+b]
		if rank >= 1<<31-1 || !ok1 || !ok2 || !ok3 || a == "" || b == "" {
			return nil, fmt.Errorf("model.merges[%d]: %q, %q or their merge not in model.vocab", rank, p[0], p[1])
		}
		k := pairKey(ida, idb)
		if _, dup := m.merges[k]; !dup {
			m.merges[k] = uint64(rank)<<32 | uint64(uint32(idn))
		}
		if m.crossable != nil {
			l, r := rune(a[len(a)-1]), rune(b[0])
			if !byteLevel {
				l, _ = utf8.DecodeLastRuneInString(a)
				r, _ = utf8.DecodeRuneInString(b)
			}
			m.crossable[uint64(uint32(l))<<32|uint64(uint32(r))] = struct{}{}
		}
	}
	return m, nil
}

// parseMerges accepts merges as "a b" strings or as [a, b] pairs.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err == nil {
		pairs := make([][2]string, len(strs))
		for i, s := range strs {
			var n int
			for j := 0; j < len(s); j++ {
				if s[j] == ' ' {
					if n++; n == 1 {
						pairs[i] = [2]string{s[:j], s[j+1:]}
					}
				}
			}
			if n != 1 {
				return nil, fmt.Errorf("model.merges[%d]: %q is not two tokens separated by one space", i, s)
			}
		}
		return pairs, nil
	}
	var lists [][]string
	if err := json.Unmarshal(raw, &lists); err != nil {
		return nil, fmt.Errorf("model.merges: want strings or [a, b] pairs: %v", err)
	}
	pairs := make([][2]string, len(lists))
	for i, l := range lists {
		if len(l) != 2 {
			return nil, fmt.Errorf("model.merges[%d]: %d parts, want 2", i, len(l))
		}
		pairs[i] = [2]string{l[0], l[1]}
	}
	return pairs, nil
}

// unmapByteLevel returns the bytes a byte-level token string stands for, or
// s itself if it has a char outside the GPT-2 alphabet.
func unmapByteLevel(s string) string {
	return string(appendByteLevel(make([]byte, 0, len(s)), s))
}

// newPostProcessor builds the ids-only part of tokenizer.json's
// "post_processor": the special tokens around a single sequence.
func (t *Tokenizer) newPostProcessor(raw json.RawMessage, path string) (*postProcessor, error) {
	c, err := decodeComponent(raw, path)
	if c == nil || err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		p := &postProcessor{}
		for i, r := range c.Processors {
			q, err := t.newPostProcessor(r, fmt.Sprintf("%s.processors[%d]", path, i))
			if err != nil {
				return nil, err
			}
			if q != nil {
				p.before = append(p.before, q.before...)
				p.after = append(q.after, p.after...)
			}
		}
		return p, nil
	case "ByteLevel":
		return nil, nil // offsets only
	case "TemplateProcessing":
		p := &postProcessor{}
		seen := false
		for i, it := range c.Single {
			switch {
			case it.Sequence != nil:
				if seen {
					return nil, fmt.Errorf("%s.single[%d]: second sequence", path, i)
				}
				seen = true
			case it.SpecialToken != nil:
				st, ok := c.SpecialTokens[it.SpecialToken.ID]
				if !ok {
					return nil, fmt.Errorf("%s.single[%d]: %q not in special_tokens", path, i, it.SpecialToken.ID)
				}
				if seen {
					p.after = append(p.after, st.IDs...)
				} else {
					p.before = append(p.before, st.IDs...)
				}
			default:
				return nil, fmt.Errorf("%s.single[%d]: want SpecialToken or Sequence", path, i)
			}
		}
		return p, nil
	case "RobertaProcessing", "BertProcessing":
		cls, err := pairID(c.Cls, path+".cls")
		if err != nil {
			return nil, err
		}
		sep, err := pairID(c.Sep, path+".sep")
		if err != nil {
			return nil, err
		}
		return &postProcessor{before: []int32{cls}, after: []int32{sep}}, nil
	}
	return nil, fmt.Errorf("%s.type: unsupported post-processor %q", path, c.Type)
}

// pairID reads the id of a ["token", id] pair.
func pairID(p []json.RawMessage, path string) (int32, error) {
	var id int32
	if len(p) != 2 || json.Unmarshal(p[1], &id) != nil {
		return 0, fmt.Errorf("%s: want [token, id]", path)
	}
	return id, nil
}

// configPostProcessor adds BOS/EOS as tokenizer_config.json's add_bos_token and
// add_eos_token say, for a tokenizer.json without a post_processor.
func (t *Tokenizer) configPostProcessor() *postProcessor {
	if t.cfg == nil {
		return nil
	}
	p := &postProcessor{}
	if t.cfg.AddBOS != nil && *t.cfg.AddBOS {
		if id, ok := t.TokenID(t.cfg.BOS); ok {
			p.before = []int32{id}
		}
	}
	if t.cfg.AddEOS != nil && *t.cfg.AddEOS {
		if id, ok := t.TokenID(t.cfg.EOS); ok {
			p.after = []int32{id}
		}
	}
	return p
}
