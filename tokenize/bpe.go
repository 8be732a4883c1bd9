package tokenize

import (
	"sync"
	"unicode/utf8"
)

// bpe is the BPE model of tokenizer.json (model.type "BPE").
//
// In byte-level mode (the pre-tokenizer ends with ByteLevel) every key of
// vocab and every merge part is stored as the raw bytes it stands for, not in
// the GPT-2 byte→unicode alphabet, so the encoder never builds mapped strings:
// a word is a byte string and its first symbols are its bytes.
type bpe struct {
	vocab  map[string]int32  // token (raw bytes in byte-level mode) → id
	tokens []string          // id → token as in tokenizer.json; "" where no token has the id
	merges map[uint64]uint64 // left<<32|right → rank<<32|new id

	byteLevel    bool
	ignoreMerges bool
	fuseUnk      bool
	unk          int32 // -1: no unk_token
	prefix       string
	suffix       string // continuing_subword_prefix, end_of_word_suffix

	runeIDs [utf8.RuneSelf]int32 // id of each ASCII char (or byte, in byte-level mode); -1 if absent
	byteIDs [256]int32           // byte-level: id of each byte; else byte_fallback <0xXX> ids; -1 if absent
	hasFall bool                 // byte_fallback

	// crossable holds every (last rune of left, first rune of right) pair of
	// the merges. A word can be cut where no pair of adjacent runes is in it:
	// no merge can ever join symbols across such a point. It is nil when
	// continuing_subword_prefix or end_of_word_suffix is set.
	crossable map[uint64]struct{}

	cacheMu sync.RWMutex
	cache   map[string][]int32
}

const (
	cacheMaxEntries = 1 << 16 // words kept by the word cache
	cacheMaxWordLen = 256     // longer words are not cached (as in tokenizers)
	chunkMinLen     = 64      // words at least this long are cut at uncrossable points
)

// symbol is one node of the doubly linked list a word is merged in.
type symbol struct {
	id         int32
	prev, next int32 // index in the word; -1 at the ends
	size       int32 // bytes of the word it covers; 0 once merged away
}

// merge is a candidate merge of symbols pos and its next, ordered by rank, then pos.
type merge struct {
	rank  int32
	pos   int32
	newID int32
}

func (a merge) less(b merge) bool {
	return a.rank < b.rank || a.rank == b.rank && a.pos < b.pos
}

// mergeHeap is a binary min-heap of merges (container/heap costs an interface
// call per comparison, which is most of the merge loop).
type mergeHeap []merge

func (h *mergeHeap) push(m merge) {
	*h = append(*h, m)
	q := *h
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q[i].less(q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *mergeHeap) pop() merge {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q[r].less(q[l]) {
			m = r
		}
		if !q[m].less(q[i]) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

// scratch holds the buffers one Encode call reuses across words.
type scratch struct {
	syms  []symbol
	heap  mergeHeap
	words []piece
	tmp   []piece
	spans [][2]int
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// tokenize appends the ids of word to dst. word is not empty.
func (m *bpe) tokenize(dst []int32, word string, sc *scratch) []int32 {
	if m.ignoreMerges {
		if id, ok := m.vocab[word]; ok {
			return append(dst, id)
		}
	}
	if len(word) >= chunkMinLen && m.crossable != nil {
		return m.tokenizeChunks(dst, word, sc)
	}
	return m.tokenizeCached(dst, word, sc)
}

// tokenizeChunks cuts a long word where no merge can cross and tokenizes the
// chunks separately, so they hit the cache and keep the heaps small. The
// result is the same as merging the whole word.
func (m *bpe) tokenizeChunks(dst []int32, word string, sc *scratch) []int32 {
	start := 0
	prev, size := m.edgeRune(word, 0)
	prevKnown := m.known(word[:size], size)
	for i := size; i < len(word); {
		r, n := m.edgeRune(word, i)
		known := m.known(word[i:i+n], n)
		_, cross := m.crossable[uint64(uint32(prev))<<32|uint64(uint32(r))]
		// Unknown chars become byte_fallback or unk symbols whose merges
		// crossable does not describe, so they are never cut off.
		if !cross && prevKnown && known {
			dst = m.tokenizeCached(dst, word[start:i], sc)
			start = i
		}
		prev, prevKnown = r, known
		i += n
	}
	return m.tokenizeCached(dst, word[start:], sc)
}

// edgeRune returns the rune (or byte, in byte-level mode) at word[i] as seen
// by crossable, and its length.
func (m *bpe) edgeRune(word string, i int) (rune, int) {
	if m.byteLevel {
		return rune(word[i]), 1
	}
	r, n := utf8.DecodeRuneInString(word[i:])
	return r, n
}

// known reports whether the symbol s (one char, n bytes) is in the vocabulary.
func (m *bpe) known(s string, n int) bool {
	if m.byteLevel {
		return m.byteIDs[s[0]] >= 0
	}
	if n == 1 && s[0] < utf8.RuneSelf {
		return m.runeIDs[s[0]] >= 0
	}
	_, ok := m.vocab[s]
	return ok
}

func (m *bpe) tokenizeCached(dst []int32, word string, sc *scratch) []int32 {
	cacheable := len(word) <= cacheMaxWordLen
	if cacheable {
		m.cacheMu.RLock()
		ids, ok := m.cache[word]
		m.cacheMu.RUnlock()
		if ok {
			return append(dst, ids...)
		}
	}
	n := len(dst)
	dst = m.mergeWord(dst, word, sc)
	if cacheable {
		ids := append([]int32(nil), dst[n:]...)
		m.cacheMu.Lock()
		if len(m.cache) < cacheMaxEntries {
			m.cache[word] = ids
		}
		m.cacheMu.Unlock()
	}
	return dst
}

// mergeWord splits word into its first symbols (chars, or bytes in byte-level
// mode; byte_fallback and unk as tokenizers does) and applies the merges in
// rank order, leftmost first among equal ranks, in O(n log n).
func (m *bpe) mergeWord(dst []int32, word string, sc *scratch) []int32 {
	syms := sc.syms[:0]
	add := func(id int32, size int) {
		syms = append(syms, symbol{id: id, prev: int32(len(syms)) - 1, next: int32(len(syms)) + 1, size: int32(size)})
	}
	unkID, unkSize := int32(-1), 0
	flushUnk := func() {
		if unkID >= 0 {
			add(unkID, unkSize)
			unkID = -1
		}
	}
	plain := m.prefix == "" && m.suffix == ""
	for i := 0; i < len(word); {
		var s string
		n := 1
		if !m.byteLevel {
			if c := word[i]; c >= utf8.RuneSelf {
				_, n = utf8.DecodeRuneInString(word[i:])
			}
		}
		s = word[i : i+n]
		id := int32(-1)
		switch {
		case !plain:
			key := s
			if i > 0 {
				key = m.prefix + key
			}
			if i+n == len(word) {
				key += m.suffix
			}
			if v, ok := m.vocab[key]; ok {
				id = v
			}
		case m.byteLevel:
			id = m.byteIDs[s[0]]
		case n == 1 && s[0] < utf8.RuneSelf:
			id = m.runeIDs[s[0]]
		default:
			if v, ok := m.vocab[s]; ok {
				id = v
			}
		}
		i += n
		if id >= 0 {
			flushUnk()
			add(id, n)
			continue
		}
		if m.hasFall && !m.byteLevel {
			ok := true
			for j := 0; j < n; j++ {
				if m.byteIDs[s[j]] < 0 {
					ok = false
				}
			}
			if ok {
				// As tokenizers does, a pending unk is not flushed here.
				for j := 0; j < n; j++ {
					add(m.byteIDs[s[j]], 1)
				}
				continue
			}
		}
		if m.unk < 0 {
			continue // tokenizers fails the whole encode here; we drop the char
		}
		switch {
		case unkID >= 0 && m.fuseUnk:
			unkSize += n
		default:
			flushUnk()
			unkID, unkSize = m.unk, n
		}
	}
	flushUnk()
	if len(syms) == 0 {
		sc.syms = syms
		return dst
	}
	syms[len(syms)-1].next = -1

	h := sc.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		if v, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h.push(merge{rank: int32(v >> 32), pos: int32(i), newID: int32(uint32(v))})
		}
	}
	for len(h) > 0 {
		top := h.pop()
		cur := &syms[top.pos]
		if cur.size == 0 || cur.next < 0 {
			continue
		}
		rightPos := cur.next
		right := syms[rightPos]
		if v, ok := m.merges[pairKey(cur.id, right.id)]; !ok || int32(uint32(v)) != top.newID {
			continue // stale entry
		}
		cur.id = top.newID
		cur.size += right.size
		cur.next = right.next
		syms[rightPos].size = 0
		if right.next >= 0 {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if v, ok := m.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				h.push(merge{rank: int32(v >> 32), pos: cur.prev, newID: int32(uint32(v))})
			}
		}
		if cur.next >= 0 {
			if v, ok := m.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				h.push(merge{rank: int32(v >> 32), pos: top.pos, newID: int32(uint32(v))})
			}
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		dst = append(dst, syms[i].id)
	}
	sc.syms, sc.heap = syms, h
	return dst
}
