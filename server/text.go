package server

import (
	"strings"
	"unicode/utf8"

	"github.com/ingot-llm/ingot/tokenize"
)

// textOut turns generated ids into the text each releases: whole UTF-8
// characters, with text that may begin a stop string held back until it is
// known not to. EOS tokens add no text.
type textOut struct {
	stream *tokenize.Stream
	stops  []string
	text   strings.Builder // everything decoded so far
	sent   int             // bytes of text released
	stop   string          // the stop string found, "" while none
}

func newTextOut(tok *tokenize.Tokenizer, stops []string) *textOut {
	return &textOut{stream: tok.NewStream(false), stops: stops}
}

// next adds id (eos: an EOS token, whose text is not part of the output) and
// returns the text it releases and whether a stop string ended the text. With
// last, everything held back is released.
func (o *textOut) next(id int32, eos, last bool) (string, bool) {
	if !eos {
		o.text.WriteString(o.stream.Next(id))
	}
	if last {
		o.text.WriteString(o.stream.Flush())
	}
	s := o.text.String()
	end := len(s)
	if at, st := stopIndex(s[o.sent:], o.stops); at >= 0 {
		end, o.stop = o.sent+at, st
	} else if !last {
		end -= heldBack(s[o.sent:], o.stops)
	}
	out := s[o.sent:end]
	o.sent = end
	return out, o.stop != ""
}

// flush releases the text held back when generation ends for a reason
// next did not see (cancellation, the context window).
func (o *textOut) flush() string {
	if o.stop != "" {
		return ""
	}
	out, _ := o.next(0, true, true)
	return out
}

// result is the released text.
func (o *textOut) result() string { return o.text.String()[:o.sent] }

// stopIndex returns the index of the earliest stop string in s and the
// string, or -1.
func stopIndex(s string, stops []string) (int, string) {
	best, which := -1, ""
	for _, st := range stops {
		if i := strings.Index(s, st); i >= 0 && (best < 0 || i < best) {
			best, which = i, st
		}
	}
	return best, which
}

// heldBack returns how many trailing bytes of s could begin a stop string.
func heldBack(s string, stops []string) int {
	n := 0
	for _, st := range stops {
		for k := min(len(st)-1, len(s)); k > n; k-- {
			if strings.HasSuffix(s, st[:k]) {
				n = k
				break
			}
		}
	}
	return n
}

// tokenText is the text of one token as logprobs report it.
func tokenText(tok *tokenize.Tokenizer, id int32) string {
	return tok.Decode([]int32{id}, false)
}

// runeCount is the length of s in code points, the unit of text_offset.
func runeCount(s string) int { return utf8.RuneCountInString(s) }
