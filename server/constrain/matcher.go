package constrain

import "encoding/binary"

// frame is one frame of a stack: position pos in alternative alt, sub the
// string element's state when that is the element at pos, parent the frame
// to continue when the alternative ends (-1: the document's end).
type frame struct {
	alt, pos int32
	sub      uint32
	parent   int32
}

// accepted stands, in a state, for a stack that has consumed the whole
// document.
const accepted = -1

// Bounds on a state, so that no schema makes a step expensive: expansion
// depth (rules entered without consuming a byte) and stacks in a state.
// Dropping stacks past them keeps every allowed token valid.
const (
	maxExpandDepth = 256
	maxStacks      = 512
)

// A Matcher is the state of one generation against a grammar: what output
// so far, and which tokens may come next. It is not safe for concurrent use;
// each generation needs its own.
type Matcher struct {
	g *Grammar
	v *Vocab

	arena []frame // frames; [0, committed) hold the state's
	state []int32 // top frame of each stack (accepted: a finished stack)
	buf   []int32 // states during a mask walk

	cache map[string][]uint64 // masks by state structure
	key   []byte              // the state's key in Mask
	dkey  []byte              // a stack's key in dedup
}

// maxCachedMasks bounds a matcher's mask cache.
const maxCachedMasks = 64

// NewMatcher returns a matcher at the start of a document of g, for the
// tokens of v.
func NewMatcher(g *Grammar, v *Vocab) *Matcher {
	m := &Matcher{g: g, v: v, cache: map[string][]uint64{}}
	m.reset()
	return m
}

func (m *Matcher) reset() {
	m.arena = m.arena[:0]
	m.state = m.state[:0]
	for _, a := range m.g.rules[m.g.root] {
		m.state = m.expand(m.state, m.push(a, 0, 0, accepted), 0)
	}
	m.state = m.dedup(m.state, 0)
}

func (m *Matcher) push(alt, pos int32, sub uint32, parent int32) int32 {
	m.arena = append(m.arena, frame{alt: alt, pos: pos, sub: sub, parent: parent})
	return int32(len(m.arena) - 1)
}

// expand appends to out the stacks that frame fi stands for once every rule
// at the top is entered and every finished alternative left: stacks whose
// top is a byte or string element, or accepted.
func (m *Matcher) expand(out []int32, fi int32, depth int) []int32 {
	if depth > maxExpandDepth || len(out) >= maxStacks {
		return out
	}
	if fi == accepted {
		return append(out, accepted)
	}
	f := m.arena[fi]
	alt := m.g.alts[f.alt]
	if int(f.pos) == len(alt) {
		return m.expand(out, f.parent, depth+1)
	}
	e := &alt[f.pos]
	if e.kind != elemRule {
		return append(out, fi)
	}
	// The caller's continuation; a reference that ends its alternative
	// continues the caller's caller (a tail call), so that stacks which
	// differ only in finished frames are equal and dedup merges them.
	cont := f.parent
	if int(f.pos)+1 < len(alt) {
		cont = m.push(f.alt, f.pos+1, 0, f.parent)
	}
	for _, a := range m.g.rules[e.rule] {
		out = m.expand(out, m.push(a, 0, 0, cont), depth+1)
	}
	return out
}

// advance appends to out the stacks of state after byte c.
func (m *Matcher) advance(out []int32, state []int32, c byte) []int32 {
	for _, fi := range state {
		if fi == accepted {
			continue
		}
		f := m.arena[fi]
		e := &m.g.alts[f.alt][f.pos]
		switch e.kind {
		case elemBytes:
			if e.set.has(c) {
				out = m.expand(out, m.push(f.alt, f.pos+1, 0, f.parent), 0)
			}
		case elemString:
			if sub, ok := stringLenStep(e, f.sub, c); ok {
				if sub == strDone {
					out = m.expand(out, m.push(f.alt, f.pos+1, 0, f.parent), 0)
				} else {
					out = append(out, m.push(f.alt, f.pos, sub, f.parent))
				}
			}
		}
	}
	return out
}

// dedup removes stacks equal to an earlier one of s[from:]: pairwise for a
// few, by their frames' key for many.
func (m *Matcher) dedup(s []int32, from int) []int32 {
	if len(s)-from < 2 {
		return s
	}
	n := from
	if len(s)-from > 16 {
		seen := make(map[string]bool, len(s)-from)
		for i := from; i < len(s); i++ {
			m.dkey = m.stackKey(m.dkey[:0], s[i])
			if !seen[string(m.dkey)] {
				seen[string(m.dkey)] = true
				s[n] = s[i]
				n++
			}
		}
		return s[:n]
	}
outer:
	for i := from; i < len(s); i++ {
		for j := from; j < n; j++ {
			if m.same(s[i], s[j]) {
				continue outer
			}
		}
		s[n] = s[i]
		n++
	}
	return s[:n]
}

// same reports whether two stacks are equal frame by frame.
func (m *Matcher) same(a, b int32) bool {
	for a != b {
		if a == accepted || b == accepted {
			return false
		}
		fa, fb := m.arena[a], m.arena[b]
		if fa.alt != fb.alt || fa.pos != fb.pos || fa.sub != fb.sub {
			return false
		}
		a, b = fa.parent, fb.parent
	}
	return true
}

// AcceptBytes advances the matcher over b and reports whether b continues
// a valid document; if not, the matcher is unchanged.
func (m *Matcher) AcceptBytes(b []byte) bool {
	cur := append([]int32(nil), m.state...)
	mark := len(m.arena)
	for _, c := range b {
		cur = m.dedup(m.advance(nil, cur, c), 0)
		if len(cur) == 0 {
			m.arena = m.arena[:mark]
			return false
		}
	}
	m.state = cur
	m.compact()
	return true
}

// Accept advances the matcher over token id and reports whether the token
// was allowed; if not, the matcher is unchanged. EOS ids are allowed when
// the document is complete and leave the matcher as it is.
func (m *Matcher) Accept(id int32) bool {
	if m.v.isEOS(id) {
		return m.Complete()
	}
	if id < 0 || int(id) >= len(m.v.tokens) || m.v.tokens[id] == nil {
		return false
	}
	return m.AcceptBytes(m.v.tokens[id])
}

// compact copies the frames the state uses to the front of the arena.
func (m *Matcher) compact() {
	old := m.arena
	fresh := make([]frame, 0, 64)
	moved := map[int32]int32{}
	var move func(fi int32) int32
	move = func(fi int32) int32 {
		if fi == accepted {
			return accepted
		}
		if to, ok := moved[fi]; ok {
			return to
		}
		f := old[fi]
		f.parent = move(f.parent)
		fresh = append(fresh, f)
		to := int32(len(fresh) - 1)
		moved[fi] = to
		return to
	}
	for i, fi := range m.state {
		m.state[i] = move(fi)
	}
	m.arena = append(old[:0], fresh...)
}

// Complete reports whether the output so far is a whole document: EOS may
// come now.
func (m *Matcher) Complete() bool {
	for _, fi := range m.state {
		if fi == accepted {
			return true
		}
	}
	return false
}

// Mask sets in mask (a bitset of at least the vocabulary's size, bit id%64
// of word id/64) the tokens that may come next, EOS ids included when the
// document is complete, and clears the others.
func (m *Matcher) Mask(mask []uint64) {
	n := (m.v.n + 63) / 64
	mask = mask[:n]
	m.key = m.stateKey(m.key[:0])
	if c, ok := m.cache[string(m.key)]; ok {
		copy(mask, c)
		return
	}
	clear(mask)
	if m.Complete() {
		for _, id := range m.v.eos {
			mask[id>>6] |= 1 << (id & 63)
		}
	}
	base := len(m.arena)
	m.buf = append(m.buf[:0], m.state...)
	root := &m.v.all
	if room, ok := m.inStrings(); ok {
		// Every token of complete string characters continues the strings,
		// as long as it fits the room a length limit leaves in one of them.
		fit := len(m.v.plainByChars)
		if room >= 0 {
			fit = m.v.plainUpTo(room)
		}
		if fit == len(m.v.plainByChars) {
			for i, w := range m.v.plain {
				mask[i] |= w
			}
		} else if long := m.v.plainByChars[fit:]; len(long) < fit {
			for i, w := range m.v.plain {
				mask[i] |= w
			}
			for _, id := range long {
				mask[id>>6] &^= 1 << (id & 63)
			}
		} else {
			for _, id := range m.v.plainByChars[:fit] {
				mask[id>>6] |= 1 << (id & 63)
			}
		}
		root = &m.v.rest
	}
	m.walk(root, 0, 0, len(m.buf), mask)
	m.arena = m.arena[:base]
	if len(m.cache) >= maxCachedMasks {
		clear(m.cache)
	}
	m.cache[string(m.key)] = append([]uint64(nil), mask...)
}

// inStrings reports whether every stack is inside a string, between
// characters, and returns the most characters any of them may still take
// (-1: no limit), which bounds the plain tokens that may come.
func (m *Matcher) inStrings() (int, bool) {
	room := 0
	for _, fi := range m.state {
		if fi == accepted {
			return 0, false
		}
		f := m.arena[fi]
		e := &m.g.alts[f.alt][f.pos]
		if e.kind != elemString || f.sub&0xff != strChar {
			return 0, false
		}
		switch r := int(e.max) - int(f.sub>>8); {
		case e.max < 0 || room < 0:
			room = -1
		case r > room:
			room = r
		}
	}
	return room, len(m.state) > 0
}

// walk visits the children of trie node at, with the stacks of buf[lo:hi]
// as the state after its bytes, setting in mask the tokens that end at
// nodes the grammar accepts.
func (m *Matcher) walk(t *trie, at int32, lo, hi int, mask []uint64) {
	for c := t.nodes[at].first; c >= 0; c = t.nodes[c].next {
		nd := &t.nodes[c]
		amark, bmark := len(m.arena), len(m.buf)
		m.buf = m.advance(m.buf, m.buf[lo:hi], nd.b)
		if len(m.buf) > bmark {
			m.buf = m.dedup(m.buf, bmark)
			for _, id := range t.toks[nd.tokLo:nd.tokHi] {
				mask[id>>6] |= 1 << (id & 63)
			}
			if nd.first >= 0 {
				m.walk(t, c, bmark, len(m.buf), mask)
			}
		}
		m.arena, m.buf = m.arena[:amark], m.buf[:bmark]
	}
}

// stateKey appends the state's structure: every stack's frames.
func (m *Matcher) stateKey(k []byte) []byte {
	for _, fi := range m.state {
		k = m.stackKey(k, fi)
	}
	return k
}

// stackKey appends a stack's frames, top first, and an end mark.
func (m *Matcher) stackKey(k []byte, fi int32) []byte {
	for ; fi != accepted; fi = m.arena[fi].parent {
		f := m.arena[fi]
		k = binary.LittleEndian.AppendUint32(k, uint32(f.alt))
		k = binary.LittleEndian.AppendUint32(k, uint32(f.pos))
		k = binary.LittleEndian.AppendUint32(k, f.sub)
	}
	return append(k, 0xff, 0xff, 0xff, 0xff)
}

// String-body states: the low byte of frame.sub of a string element (the
// bits above count the characters so far).
const (
	strChar   = 0  // between characters
	strEscape = 1  // after a backslash
	strHex    = 2  // 2..5: after \u, with 4..1 hex digits to come
	strHexD   = 6  // after \uD: 0-7 must follow (no surrogate escapes)
	strUTF8   = 16 // 16 + 8*(continuation bytes to come) + range of the next one
	strDone   = 0xffffffff
)

// stringLenStep advances the string element e in state sub over c,
// counting characters against e's limits: the new state (strDone after the
// closing quote) and whether c is allowed. A character may begin only if
// there is room for it, and the string may end only with min characters.
func stringLenStep(e *elem, sub uint32, c byte) (uint32, bool) {
	st, n := sub&0xff, int32(sub>>8)
	next, done, ok := stringStep(st, c)
	switch {
	case !ok:
		return 0, false
	case done:
		return strDone, n >= e.min
	case st == strChar && e.max >= 0 && n >= e.max:
		return 0, false // no room for another character
	case next == strChar && (e.max >= 0 || n < e.min):
		// A character ends with every step back between characters. Only
		// what a limit needs is counted, so that the states of a string
		// without one repeat (and its masks come from the cache).
		n++
	}
	return uint32(n)<<8 | next, true
}

// utf8Ranges are the allowed ranges of the next continuation byte, by the
// lead byte that set them (Unicode table 3-7).
var utf8Ranges = [5][2]byte{{0x80, 0xBF}, {0xA0, 0xBF}, {0x80, 0x9F}, {0x90, 0xBF}, {0x80, 0x8F}}

// stringStep advances a string body in state sub over c: the new state,
// whether c was the closing quote, and whether c is allowed.
func stringStep(sub uint32, c byte) (uint32, bool, bool) {
	switch {
	case sub == strChar:
		switch {
		case c == '"':
			return 0, true, true
		case c == '\\':
			return strEscape, false, true
		case c < 0x20:
			return 0, false, false
		case c < 0x80:
			return strChar, false, true
		case c >= 0xC2 && c <= 0xDF:
			return strUTF8 + 8, false, true
		case c == 0xE0:
			return strUTF8 + 16 + 1, false, true
		case c == 0xED:
			return strUTF8 + 16 + 2, false, true
		case c >= 0xE1 && c <= 0xEF:
			return strUTF8 + 16, false, true
		case c == 0xF0:
			return strUTF8 + 24 + 3, false, true
		case c >= 0xF1 && c <= 0xF3:
			return strUTF8 + 24, false, true
		case c == 0xF4:
			return strUTF8 + 24 + 4, false, true
		}
		return 0, false, false
	case sub == strEscape:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			return strChar, false, true
		case 'u':
			return strHex, false, true
		}
		return 0, false, false
	case sub == strHexD:
		if c < '0' || c > '7' {
			return 0, false, false
		}
		return strHex + 2, false, true
	case sub < strUTF8:
		switch {
		case !isHex(c):
			return 0, false, false
		case sub == strHex && (c == 'd' || c == 'D'):
			return strHexD, false, true
		case sub == strHex+3:
			return strChar, false, true
		}
		return sub + 1, false, true
	}
	left, r := (sub-strUTF8)/8, (sub-strUTF8)%8
	if c < utf8Ranges[r][0] || c > utf8Ranges[r][1] {
		return 0, false, false
	}
	if left == 1 {
		return strChar, false, true
	}
	return strUTF8 + 8*(left-1), false, true
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// clone returns an independent copy of m (its cache is not shared).
func (m *Matcher) clone() *Matcher {
	c := &Matcher{g: m.g, v: m.v, cache: map[string][]uint64{}}
	c.arena = append(c.arena, m.arena...)
	c.state = append(c.state, m.state...)
	return c
}
