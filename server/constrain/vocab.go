package constrain

import (
	"bytes"
	"math"
	"slices"
)

// A Vocab is a tokenizer's vocabulary as a matcher sees it: each token id's
// bytes in a trie, and which ids end a generation. It is read-only once
// built and safe for concurrent use.
type Vocab struct {
	n      int      // ids in [0, n)
	tokens [][]byte // by id; nil: never allowed (special tokens, unused ids)
	eos    []int32

	all   trie     // every token
	plain []uint64 // tokens of complete JSON string characters only
	rest  trie     // every token not in plain

	// plainByChars lists plain's tokens by their characters, fewest first;
	// plainStarts[k] is where those of more than k characters begin.
	plainByChars []int32
	plainStarts  []int
}

// plainUpTo returns how many of plainByChars have at most k characters.
func (v *Vocab) plainUpTo(k int) int {
	if k >= len(v.plainStarts) {
		return len(v.plainByChars)
	}
	return v.plainStarts[k]
}

// trie is a byte trie of tokens; node 0 is the root.
type trie struct {
	nodes []trieNode
	toks  []int32 // token ids, grouped by the node they end at
}

type trieNode struct {
	b            byte
	first, next  int32 // first child, next sibling; -1: none
	tokLo, tokHi int32 // the tokens ending here: toks[tokLo:tokHi]
}

// NewVocab returns the vocabulary of n ids whose bytes are tokens[id] (nil
// or empty: the id is never allowed, as special tokens must not be) and
// whose EOS ids are eos (allowed when a document is complete).
func NewVocab(n int, tokens [][]byte, eos []int32) *Vocab {
	v := &Vocab{n: n, tokens: make([][]byte, n), plain: make([]uint64, (n+63)/64)}
	for id := range min(n, len(tokens)) {
		if len(tokens[id]) > 0 {
			v.tokens[id] = tokens[id]
		}
	}
	for _, id := range eos {
		if id >= 0 && int(id) < n {
			v.eos = append(v.eos, id)
			v.tokens[id] = nil
		}
	}
	var all, rest []int32
	chars := map[int32]int{}
	for id, b := range v.tokens {
		if b == nil {
			continue
		}
		all = append(all, int32(id))
		if n, ok := plainString(b); ok {
			v.plain[id>>6] |= 1 << (id & 63)
			v.plainByChars = append(v.plainByChars, int32(id))
			chars[int32(id)] = n
		} else {
			rest = append(rest, int32(id))
		}
	}
	slices.SortStableFunc(v.plainByChars, func(a, b int32) int { return chars[a] - chars[b] })
	for i, id := range v.plainByChars {
		for len(v.plainStarts) < chars[id] {
			v.plainStarts = append(v.plainStarts, i)
		}
	}
	v.all = v.buildTrie(all)
	v.rest = v.buildTrie(rest)
	return v
}

// plainString reports whether b is whole characters of a JSON string's
// body, and how many.
func plainString(b []byte) (int, bool) {
	e := &elem{kind: elemString, max: math.MaxInt32} // counts every character
	sub := uint32(strChar)
	for _, c := range b {
		var ok bool
		if sub, ok = stringLenStep(e, sub, c); !ok || sub == strDone {
			return 0, false
		}
	}
	return int(sub >> 8), sub&0xff == strChar
}

func (v *Vocab) isEOS(id int32) bool { return slices.Contains(v.eos, id) }

// buildTrie builds the trie of ids: sorted by bytes, each token shares the
// path of its common prefix with the one before.
func (v *Vocab) buildTrie(ids []int32) trie {
	slices.SortStableFunc(ids, func(a, b int32) int { return bytes.Compare(v.tokens[a], v.tokens[b]) })
	t := trie{nodes: []trieNode{{first: -1, next: -1}}, toks: make([]int32, 0, len(ids))}
	path := []int32{0}  // nodes of the previous token's bytes, root first
	last := []int32{-1} // last child of each node of path
	var prev []byte
	for _, id := range ids {
		b := v.tokens[id]
		cp := 0
		for cp < len(prev) && cp < len(b) && prev[cp] == b[cp] {
			cp++
		}
		path, last = path[:cp+1], last[:cp+1]
		for i := cp; i < len(b); i++ {
			parent := path[i]
			t.nodes = append(t.nodes, trieNode{b: b[i], first: -1, next: -1})
			n := int32(len(t.nodes) - 1)
			if last[i] < 0 {
				t.nodes[parent].first = n
			} else {
				t.nodes[last[i]].next = n
			}
			last[i] = n
			path, last = append(path, n), append(last, -1)
		}
		end := path[len(b)]
		if t.nodes[end].tokHi == 0 {
			t.nodes[end].tokLo = int32(len(t.toks))
		}
		t.toks = append(t.toks, id)
		t.nodes[end].tokHi = int32(len(t.toks))
		prev = b
	}
	return t
}
