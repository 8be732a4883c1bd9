package tokenize

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// The Split patterns of the common byte-level tokenizers. A pattern equal to
// one of these runs through a hand-written matcher (splitter) that gives the
// same matches as Oniguruma, about ten times faster than a regex engine; any
// other pattern runs through regexp2, which has the lookaround these need.
const (
	patternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patternQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patternGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// matcher finds the non-overlapping matches of a pattern, left to right.
type matcher interface {
	// matches appends the [start, end) byte spans of the matches in s to dst.
	matches(dst [][2]int, s string) [][2]int
}

// newMatcher returns the matcher of a Split or Replace pattern.
func newMatcher(p patternJSON) (matcher, error) {
	switch {
	case p.String != nil:
		return stringMatcher(*p.String), nil
	case p.Regex == nil:
		return nil, fmt.Errorf("pattern needs String or Regex")
	case *p.Regex == patternLlama3:
		return splitter{digits: 3}, nil
	case *p.Regex == patternQwen2:
		return splitter{digits: 1}, nil
	case *p.Regex == patternGPT2:
		return splitter{gpt2: true}, nil
	}
	re, err := regexp2.Compile(*p.Regex, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %v", *p.Regex, err)
	}
	return regexMatcher{re}, nil
}

// stringMatcher matches a literal string; the empty string matches nothing.
type stringMatcher string

func (m stringMatcher) matches(dst [][2]int, s string) [][2]int {
	if m == "" {
		return dst
	}
	for i := 0; ; {
		j := strings.Index(s[i:], string(m))
		if j < 0 {
			return dst
		}
		dst = append(dst, [2]int{i + j, i + j + len(m)})
		i += j + len(m)
	}
}

// regexMatcher runs a pattern through regexp2, which indexes runes.
type regexMatcher struct{ re *regexp2.Regexp }

func (m regexMatcher) matches(dst [][2]int, s string) [][2]int {
	runes := []rune(s)
	// off[i] is the byte offset of rune i.
	off := make([]int, len(runes)+1)
	b := 0
	for i, r := range runes {
		off[i] = b
		b += utf8.RuneLen(r)
		if r == utf8.RuneError {
			b = off[i] + runeLenAt(s, off[i])
		}
	}
	off[len(runes)] = len(s)
	mt, err := m.re.FindRunesMatch(runes)
	for err == nil && mt != nil {
		dst = append(dst, [2]int{off[mt.Index], off[mt.Index+mt.Length]})
		mt, err = m.re.FindNextMatch(mt)
	}
	return dst
}

func runeLenAt(s string, i int) int {
	_, n := utf8.DecodeRuneInString(s[i:])
	return n
}

// splitter is the hand-written matcher of patternLlama3 (digits 3),
// patternQwen2 (digits 1) and patternGPT2 (gpt2). Every alternative is tried
// in the pattern's order at each position, as a backtracking engine does;
// the patterns cover every char, so the matches are contiguous.
type splitter struct {
	digits int  // max \p{N} per match; 0: unbounded
	gpt2   bool // patternGPT2
}

func (sp splitter) matches(dst [][2]int, s string) [][2]int {
	for i := 0; i < len(s); {
		j := sp.next(s, i)
		dst = append(dst, [2]int{i, j})
		i = j
	}
	return dst
}

// char classes of ASCII
const (
	clsOther = iota
	clsLetter
	clsNumber
	clsSpace
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := range t {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
			t[c] = clsLetter
		case '0' <= c && c <= '9':
			t[c] = clsNumber
		case c == ' ', '\t' <= c && c <= '\r':
			t[c] = clsSpace
		}
	}
	return t
}()

// class returns the class of the rune at s[i] and its length. \s is
// Unicode White_Space, as in Oniguruma.
func class(s string, i int) (r rune, cls uint8, n int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), asciiClass[c], 1
	}
	r, n = utf8.DecodeRuneInString(s[i:])
	switch {
	case unicode.IsLetter(r):
		return r, clsLetter, n
	case unicode.IsNumber(r):
		return r, clsNumber, n
	case unicode.IsSpace(r):
		return r, clsSpace, n
	}
	return r, clsOther, n
}

// next returns the end of the match starting at s[i].
func (sp splitter) next(s string, i int) int {
	r0, c0, n0 := class(s, i)
	j := i + n0
	// 's|'t|'re|'ve|'m|'ll|'d, case-insensitive except in GPT-2.
	if r0 == '\'' && j < len(s) {
		if e := sp.contraction(s, j); e > 0 {
			return e
		}
	}
	if sp.gpt2 {
		k, c := i, c0
		if r0 == ' ' && j < len(s) {
			if _, c1, _ := class(s, j); c1 != clsSpace {
				k, c = j, c1
			}
		}
		if c != clsSpace {
			return sp.run(s, k, c)
		}
	} else {
		// [^\r\n\p{L}\p{N}]?\p{L}+
		if c0 == clsLetter {
			return sp.run(s, j, clsLetter)
		}
		if c0 != clsNumber && r0 != '\r' && r0 != '\n' && j < len(s) {
			if _, c1, _ := class(s, j); c1 == clsLetter {
				return sp.run(s, j, clsLetter)
			}
		}
		// \p{N}{1,digits}
		if c0 == clsNumber {
			return sp.run(s, i, clsNumber)
		}
		//  ?[^\s\p{L}\p{N}]+[\r\n]*
		k := i
		if r0 == ' ' && j < len(s) {
			k = j
		}
		if _, ck, _ := class(s, k); ck == clsOther {
			e := sp.run(s, k, clsOther)
			for e < len(s) && (s[e] == '\r' || s[e] == '\n') {
				e++
			}
			return e
		}
		// \s*[\r\n]+
		end, lastNL := i, -1
		for end < len(s) {
			_, c, n := class(s, end)
			if c != clsSpace {
				break
			}
			if s[end] == '\r' || s[end] == '\n' {
				lastNL = end
			}
			end += n
		}
		if lastNL >= 0 {
			return lastNL + 1
		}
	}
	// \s+(?!\S)|\s+
	end, last := i, i
	for end < len(s) {
		_, c, n := class(s, end)
		if c != clsSpace {
			break
		}
		last = end
		end += n
	}
	if end < len(s) && last > i {
		return last
	}
	return end
}

// run returns the end of the run of class c starting at s[i]; numbers stop
// after sp.digits.
func (sp splitter) run(s string, i int, c uint8) int {
	count := 0
	for i < len(s) {
		_, ci, n := class(s, i)
		if ci != c || c == clsNumber && sp.digits > 0 && count == sp.digits {
			break
		}
		i += n
		count++
	}
	return i
}

// contraction returns the end of 's 't 're 've 'm 'll 'd whose apostrophe
// ends at s[i], or 0.
func (sp splitter) contraction(s string, i int) int {
	fold := func(k int) (rune, int) {
		r, n := utf8.DecodeRuneInString(s[k:])
		if sp.gpt2 {
			return r, n
		}
		if r == 'ſ' { // U+017F folds to s in Oniguruma
			return 's', n
		}
		return unicode.ToLower(r), n
	}
	r1, n1 := fold(i)
	switch r1 {
	case 's', 't', 'm', 'd':
		return i + n1
	case 'r', 'v', 'l':
		if i+n1 < len(s) {
			r2, n2 := fold(i + n1)
			if r1 == 'r' && r2 == 'e' || r1 == 'v' && r2 == 'e' || r1 == 'l' && r2 == 'l' {
				return i + n1 + n2
			}
		}
	}
	return 0
}
