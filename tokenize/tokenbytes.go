package tokenize

// TokenBytes returns the bytes token id adds to decoded text when it follows
// other tokens: a byte-level token's raw bytes (possibly part of a UTF-8
// character), a byte_fallback token <0xXX> as its one byte, a Metaspace or
// "▁"-replaced token with its leading space, an added token's text. Unlike
// Decode of the id alone, nothing is replaced by U+FFFD and no first-token
// rule (Strip, Metaspace prepend) applies. It returns nil for ids that name
// no token. Constrained decoding reads the vocabulary through it.
func (t *Tokenizer) TokenBytes(id int32) []byte {
	if a := t.added[id]; a != nil {
		return []byte(a.text)
	}
	if id < 0 || int(id) >= len(t.model.tokens) || t.model.tokens[id] == "" {
		return nil
	}
	tok := t.model.tokens[id]
	if t.byteFallback {
		if b, ok := byteToken(tok); ok {
			return []byte{b}
		}
	}
	if t.model.byteLevel {
		return appendByteLevel(nil, tok)
	}
	if t.decoder == nil {
		return []byte(" " + tok) // Decode joins tokens with spaces
	}
	// Decode after a sentinel token, so that rules for the first token of a
	// decode leave this one alone, and drop the sentinel's text.
	const sentinel = "a"
	out := ""
	for _, s := range t.decoder([]string{sentinel, tok}) {
		out += s
	}
	if len(out) < len(sentinel) || out[:len(sentinel)] != sentinel {
		return []byte(tok)
	}
	return []byte(out[len(sentinel):])
}
