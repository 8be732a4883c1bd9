package tokenize

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is one entry of tokenizer.json's "added_tokens".
type addedToken struct {
	id                                     int32
	content                                string
	singleWord, lstrip, rstrip, normalized bool
	special                                bool

	// text is what decode emits for the token: the content, run through the
	// normalizer when normalized is set (as tokenizers stores it).
	text string
	// skip reports whether decode drops the token when skipping special
	// tokens: it is special and text is the content of a special token.
	skip bool
}

// trie matches added tokens in text, leftmost first and longest among those
// (Aho-Corasick MatchKind::LeftmostLongest, as tokenizers uses).
type trie struct {
	nodes []trieNode
	start [256]bool // bytes some pattern starts with
}

type trieNode struct {
	edges []trieEdge
	tok   *addedToken // pattern ending here, or nil
}

type trieEdge struct {
	b  byte
	to int32
}

// add inserts pattern p (not empty) for tok; the first token added for a pattern wins.
func (t *trie) add(p string, tok *addedToken) {
	if len(t.nodes) == 0 {
		t.nodes = append(t.nodes, trieNode{})
	}
	t.start[p[0]] = true
	n := int32(0)
	for i := 0; i < len(p); i++ {
		next := int32(-1)
		for _, e := range t.nodes[n].edges {
			if e.b == p[i] {
				next = e.to
				break
			}
		}
		if next < 0 {
			next = int32(len(t.nodes))
			t.nodes = append(t.nodes, trieNode{})
			t.nodes[n].edges = append(t.nodes[n].edges, trieEdge{p[i], next})
		}
		n = next
	}
	if t.nodes[n].tok == nil {
		t.nodes[n].tok = tok
	}
}

// find returns the leftmost-longest match in s at or after i, or tok nil.
func (t *trie) find(s string, i int) (start, end int, tok *addedToken) {
	for ; i < len(s); i++ {
		if !t.start[s[i]] {
			continue
		}
		n := int32(0)
		for j := i; j < len(s); j++ {
			next := int32(-1)
			for _, e := range t.nodes[n].edges {
				if e.b == s[j] {
					next = e.to
					break
				}
			}
			if next < 0 {
				break
			}
			n = next
			if t.nodes[n].tok != nil {
				end, tok = j+1, t.nodes[n].tok
			}
		}
		if tok != nil {
			return i, end, tok
		}
	}
	return 0, 0, nil
}

// segment is a part of a text: an added token (tok != nil) or text to tokenize.
type segment struct {
	start, end int
	tok        *addedToken
}

// split appends the segments of s to dst as tokenizers' AddedVocabulary
// find_matches does, applying single_word, lstrip and rstrip.
func (t *trie) split(dst []segment, s string) []segment {
	if len(t.nodes) == 0 {
		return append(dst, segment{0, len(s), nil})
	}
	off := 0
	for i := 0; i < len(s); {
		start, stop, tok := t.find(s, i)
		if tok == nil {
			break
		}
		i = stop
		if tok.singleWord {
			if start > 0 && endsWithWord(s[:start]) || stop < len(s) && startsWithWord(s[stop:]) {
				continue
			}
		}
		if tok.lstrip {
			start = max(len(strings.TrimRightFunc(s[:start], unicode.IsSpace)), off)
		}
		if tok.rstrip {
			stop = len(s) - len(strings.TrimLeftFunc(s[stop:], unicode.IsSpace))
			i = max(i, stop)
		}
		if start > off {
			dst = append(dst, segment{off, start, nil})
		}
		dst = append(dst, segment{start, stop, tok})
		off = stop
	}
	if off < len(s) {
		dst = append(dst, segment{off, len(s), nil})
	}
	return dst
}

func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return isWordRune(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return isWordRune(r)
}
