package tokenize

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ingot-llm/ingot/gguf"
)

// GGUF token types (tokenizer.ggml.token_type), as llama.cpp numbers them.
const (
	ggufNormal      = 1
	ggufUnknown     = 2
	ggufControl     = 3
	ggufUserDefined = 4
	ggufUnused      = 5
	ggufByte        = 6
)

// ggufPreRegex maps tokenizer.ggml.pre to the pre-tokenizer regex llama.cpp's
// llama-vocab.cpp uses for it, and whether it sets ignore_merges (a pre-token
// that is a whole vocabulary entry is emitted without merging).
var ggufPreRegex = map[string]struct {
	regex        string
	ignoreMerges bool
}{
	"llama-bpe": {llama3Regex, true},
	"llama3":    {llama3Regex, true},
	"llama-v3":  {llama3Regex, true},
	"qwen2":     {`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`, false},
	"gpt-2":     {`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`, false},
}

const llama3Regex = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// ggufControlLooking is the token texts llama.cpp's loader makes control
// tokens whatever their stored type (end-of-turn, end-of-generation and
// fill-in-the-middle markers), so they are matched as special tokens.
var ggufControlLooking = []string{
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
	"<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>", "</s>", "<｜end▁of▁sentence｜>",
	"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
	"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
	"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
	"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
	"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
	"<|fim_sep|>", "<|file_sep|>", "<fim-sep>", "<SEP>",
}

// LoadGGUF reads the tokenizer and chat template of a GGUF file (see [FromGGUF]).
func LoadGGUF(path string) (*Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	defer f.Close()
	t, err := FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %s: %w", path, err)
	}
	return t, nil
}

// FromGGUF builds the tokenizer llama.cpp builds from a GGUF file's
// tokenizer.ggml.* keys: model "gpt2" (byte-level BPE: tokens, merges, token
// types, and the pre-tokenizer regex llama.cpp maps tokenizer.ggml.pre to) or
// "llama" (SentencePiece: tokens, scores, types, byte fallback), with the BOS,
// EOS and add_bos/add_eos keys and tokenizer.chat_template. The result encodes
// as llama_tokenize does: [Tokenizer.Encode] with parse_special, and
// [Tokenizer.EncodeLiteral] without.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	kind, ok, err := f.String("tokenizer.ggml.model")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("missing key %q", "tokenizer.ggml.model")
	}
	tokens, ok, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, err
	}
	if !ok || len(tokens) == 0 {
		return nil, fmt.Errorf("missing key %q", "tokenizer.ggml.tokens")
	}
	if len(tokens) >= 1<<21 {
		return nil, fmt.Errorf("key %q: %d tokens is too many", "tokenizer.ggml.tokens", len(tokens))
	}
	types := make([]int32, len(tokens))
	for i := range types {
		types[i] = ggufNormal
	}
	if ty, ok, err := f.Int32s("tokenizer.ggml.token_type"); err != nil {
		return nil, err
	} else if ok {
		if len(ty) != len(tokens) {
			return nil, fmt.Errorf("key %q has %d entries for %d tokens", "tokenizer.ggml.token_type", len(ty), len(tokens))
		}
		copy(types, ty)
	}
	for i, s := range tokens {
		if slices.Contains(ggufControlLooking, s) && types[i] != ggufControl {
			types[i] = ggufControl
		}
	}
	cfg, err := ggufConfig(f, tokens, kind)
	if err != nil {
		return nil, err
	}
	vocab := make(map[string]int32, len(tokens))
	for i, s := range tokens {
		if _, dup := vocab[s]; !dup && s != "" {
			vocab[s] = int32(i)
		}
	}
	var added []addedJSON
	for i, s := range tokens {
		switch types[i] {
		case ggufControl, ggufUnknown, ggufUserDefined:
			if s != "" {
				added = append(added, addedJSON{ID: int32(i), Content: s, Special: types[i] != ggufUserDefined})
			}
		}
	}
	tj := map[string]any{"added_tokens": added}
	var scoreRank []int32
	switch kind {
	case "gpt2":
		pre, _, err := f.String("tokenizer.ggml.pre")
		if err != nil {
			return nil, err
		}
		if pre == "" || pre == "default" {
			pre = "gpt-2"
		}
		re, ok := ggufPreRegex[pre]
		if !ok {
			var names []string
			for k := range ggufPreRegex {
				names = append(names, k)
			}
			slices.Sort(names)
			return nil, fmt.Errorf("key %q: pre-tokenizer %q is not supported (ingot knows %s)", "tokenizer.ggml.pre", pre, strings.Join(names, ", "))
		}
		merges, _, err := f.Strings("tokenizer.ggml.merges")
		if err != nil {
			return nil, err
		}
		tj["model"] = map[string]any{"type": "BPE", "vocab": vocab, "merges": merges, "ignore_merges": re.ignoreMerges}
		tj["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": re.regex}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}}
		tj["decoder"] = map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}
	case "llama":
		scores, ok, err := f.Float32s("tokenizer.ggml.scores")
		if err != nil {
			return nil, err
		}
		if !ok || len(scores) != len(tokens) {
			return nil, fmt.Errorf("key %q has %d entries for %d tokens", "tokenizer.ggml.scores", len(scores), len(tokens))
		}
		var pairs [][2]string
		pairs, scoreRank = spmMerges(tokens, types, scores, vocab)
		m := map[string]any{"type": "BPE", "vocab": vocab, "merges": pairs, "byte_fallback": true, "fuse_unk": true}
		if unk, ok, err := f.Uint("tokenizer.ggml.unknown_token_id"); err != nil {
			return nil, err
		} else if ok && unk < uint64(len(tokens)) {
			m["unk_token"] = tokens[unk]
		}
		tj["model"] = m
		space := true
		if v, ok, err := f.Bool("tokenizer.ggml.add_space_prefix"); err != nil {
			return nil, err
		} else if ok {
			space = v
		}
		norm := []any{map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"}}
		if space {
			norm = append([]any{map[string]any{"type": "Prepend", "prepend": "▁"}}, norm...)
		}
		tj["normalizer"] = map[string]any{"type": "Sequence", "normalizers": norm}
		tj["decoder"] = map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
		}}
	default:
		return nil, fmt.Errorf("key %q: tokenizer model %q is not supported (gpt2, llama)", "tokenizer.ggml.model", kind)
	}
	data, err := json.Marshal(tj)
	if err != nil {
		return nil, err
	}
	t, err := parse(data, cfg)
	if err != nil {
		return nil, err
	}
	if scoreRank != nil {
		// SentencePiece merges the adjacent pair whose concatenation has the
		// highest score, the leftmost on ties (llm_tokenizer_spm): every merge
		// into one token gets that token's score rank, and the merge heap
		// breaks equal ranks by position.
		for k, v := range t.model.merges {
			id := int32(uint32(v))
			t.model.merges[k] = uint64(scoreRank[id])<<32 | uint64(uint32(id))
		}
	}
	return t, nil
}

// ggufConfig is the tokenizer_config.json part of a GGUF file: the BOS/EOS/UNK/PAD
// token texts, add_bos/add_eos and the chat template.
func ggufConfig(f *gguf.File, tokens []string, kind string) (*config, error) {
	cfg := &config{}
	for _, s := range []struct {
		key string
		dst *string
	}{
		{"tokenizer.ggml.bos_token_id", &cfg.BOS}, {"tokenizer.ggml.eos_token_id", &cfg.EOS},
		{"tokenizer.ggml.unknown_token_id", &cfg.UNK}, {"tokenizer.ggml.padding_token_id", &cfg.PAD},
	} {
		id, ok, err := f.Uint(s.key)
		if err != nil {
			return nil, err
		}
		if ok && id < uint64(len(tokens)) {
			*s.dst = tokens[id]
		}
	}
	pre, _, _ := f.String("tokenizer.ggml.pre")
	// llama.cpp's defaults when the keys are absent: BOS for SentencePiece and
	// for the Llama 3 pre-tokenizer.
	addBOS := kind == "llama" || ggufPreRegex[pre].regex == llama3Regex
	addEOS := false
	for _, b := range []struct {
		key string
		dst *bool
	}{{"tokenizer.ggml.add_bos_token", &addBOS}, {"tokenizer.ggml.add_eos_token", &addEOS}} {
		v, ok, err := f.Bool(b.key)
		if err != nil {
			return nil, err
		}
		if ok {
			*b.dst = v
		}
	}
	if cfg.BOS == "" {
		addBOS = false
	}
	cfg.AddBOS, cfg.AddEOS = &addBOS, &addEOS
	tmpl, ok, err := f.String("tokenizer.chat_template")
	if err != nil {
		return nil, err
	}
	if ok && tmpl != "" {
		cfg.Templates = map[string]string{"default": tmpl}
	}
	return cfg, nil
}

// spmMerges turns SentencePiece scores into BPE merges: every split of a token
// into two vocabulary entries merges into it. rank[id] orders the tokens by
// score, highest first; equal scores share a rank.
func spmMerges(tokens []string, types []int32, scores []float32, vocab map[string]int32) ([][2]string, []int32) {
	byScore := make([]int32, len(tokens))
	for i := range byScore {
		byScore[i] = int32(i)
	}
	slices.SortStableFunc(byScore, func(a, b int32) int {
		switch {
		case scores[a] > scores[b]:
			return -1
		case scores[a] < scores[b]:
			return 1
		}
		return 0
	})
	rank := make([]int32, len(tokens))
	r := int32(0)
	for i, id := range byScore {
		if i > 0 && scores[id] != scores[byScore[i-1]] {
			r++
		}
		rank[id] = r
	}
	var pairs [][2]string
	for _, id := range byScore {
		s := tokens[id]
		if vocab[s] != id || types[id] == ggufUnused {
			continue
		}
		for k := 0; k < len(s); {
			_, n := utf8.DecodeRuneInString(s[k:])
			k += n
			if k >= len(s) {
				break
			}
			if _, ok := vocab[s[:k]]; ok {
				if _, ok := vocab[s[k:]]; ok {
					pairs = append(pairs, [2]string{s[:k], s[k:]})
				}
			}
		}
	}
	return pairs, rank
}

// EncodeLiteral is [Tokenizer.Encode] with control and unknown tokens written
// in text encoded as text (llama.cpp's parse_special=false); user-defined
// added tokens are still matched. With addSpecial it adds BOS/EOS as Encode does.
func (t *Tokenizer) EncodeLiteral(text string, addSpecial bool) []int32 {
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	sc := t.pool.Get().(*scratch)
	defer t.pool.Put(sc)
	var ids []int32
	if addSpecial && t.post != nil {
		ids = append(ids, t.post.before...)
	}
	start := 0 // text[start:] is not yet encoded
	flush := func(end int) {
		if end > start {
			ids = t.encodeText(ids, text[start:end], start == 0, sc)
		}
	}
	for _, seg := range t.rawTrie.split(nil, text) {
		if seg.tok == nil || seg.tok.special {
			continue
		}
		flush(seg.start)
		ids = append(ids, seg.tok.id)
		start = seg.end
	}
	flush(len(text))
	if addSpecial && t.post != nil {
		ids = append(ids, t.post.after...)
	}
	return ids
}

// encodeText normalizes s (no added tokens matched in the raw text) and runs
// the pre-tokenizer and model on it.
func (t *Tokenizer) encodeText(ids []int32, s string, first bool, sc *scratch) []int32 {
	if t.normalizer != nil {
		s = t.normalizer(s)
	}
	var sub [16]segment
	for _, ns := range t.normTrie.split(sub[:0], s) {
		if ns.tok != nil && !ns.tok.special {
			ids = append(ids, ns.tok.id)
		} else if ns.end > ns.start {
			ids = t.encodePiece(ids, piece{s: s[ns.start:ns.end], first: first && ns.start == 0}, sc)
		}
	}
	return ids
}
