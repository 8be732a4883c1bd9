package tokenize

import "strings"

// A Stream detokenizes ids one at a time, for printing generated text as it
// comes. Next never returns part of a UTF-8 character, and the concatenation
// of everything Next and Flush return equals Decode of all the ids.
//
// It decodes a short window of recent ids twice (without and with the new
// id) and returns the difference, as tokenizers' DecodeStream does, so
// decoders that look at the first token (Strip, Metaspace) and byte tokens
// that complete a character later are handled. A Stream is not safe for
// concurrent use.
type Stream struct {
	t           *Tokenizer
	skipSpecial bool
	ids         []int32 // the window: ids[:read] were already returned
	read        int
}

// NewStream returns a Stream that decodes as Decode(ids, skipSpecial).
func (t *Tokenizer) NewStream(skipSpecial bool) *Stream {
	return &Stream{t: t, skipSpecial: skipSpecial}
}

// Next adds id and returns the text that is now complete, possibly "".
func (s *Stream) Next(id int32) string {
	s.ids = append(s.ids, id)
	if s.t.byteFallback && s.t.added[id] == nil {
		if _, ok := byteToken(s.t.Token(id)); ok {
			// ByteFallback turns the whole run into U+FFFDs if any byte of it
			// is invalid, so nothing of the run is final until it ends.
			return ""
		}
	}
	prev := s.t.Decode(s.ids[:s.read], s.skipSpecial)
	text := s.t.Decode(s.ids, s.skipSpecial)
	if len(text) <= len(prev) || !strings.HasPrefix(text, prev) || strings.HasSuffix(text, "\uFFFD") {
		return ""
	}
	// Start the next window at the ids that produced prev, so the first-token
	// rules of the decoder apply as they did here.
	s.ids = append(s.ids[:0], s.ids[s.read:]...)
	s.read = len(s.ids)
	return text[len(prev):]
}

// Flush returns the text still held back (an incomplete character decodes
// as U+FFFD, as in Decode) and resets the stream.
func (s *Stream) Flush() string {
	prev := s.t.Decode(s.ids[:s.read], s.skipSpecial)
	text := s.t.Decode(s.ids, s.skipSpecial)
	s.ids, s.read = s.ids[:0], 0
	if len(text) <= len(prev) || !strings.HasPrefix(text, prev) {
		return ""
	}
	return text[len(prev):]
}
