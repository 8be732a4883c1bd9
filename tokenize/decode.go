package tokenize

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// A decoder rewrites the token strings of a decode, as tokenizers'
// Decoder.decode_chain does; the decoded text is the concatenation.
type decoder func(tokens []string) []string

// newDecoder builds the decoder of tokenizer.json's "decoder" (at path, for
// errors). It returns nil for null. It sets *fallback if the decoder has a
// ByteFallback step.
func newDecoder(raw json.RawMessage, path string, fallback *bool) (decoder, error) {
	c, err := decodeComponent(raw, path)
	if c == nil || err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		var ds []decoder
		for i, r := range c.Decoders {
			d, err := newDecoder(r, fmt.Sprintf("%s.decoders[%d]", path, i), fallback)
			if err != nil {
				return nil, err
			}
			if d != nil {
				ds = append(ds, d)
			}
		}
		return func(t []string) []string {
			for _, d := range ds {
				t = d(t)
			}
			return t
		}, nil
	case "ByteLevel":
		return decodeByteLevel, nil
	case "ByteFallback":
		*fallback = true
		return decodeByteFallback, nil
	case "Fuse":
		return func(t []string) []string { return []string{strings.Join(t, "")} }, nil
	case "Replace":
		f, err := newReplace(c, path)
		if err != nil {
			return nil, err
		}
		return func(t []string) []string {
			for i := range t {
				t[i] = f(t[i])
			}
			return t
		}, nil
	case "Strip":
		r, n := utf8.DecodeRuneInString(c.Content)
		if n == 0 || n != len(c.Content) {
			return nil, fmt.Errorf("%s.content: %q is not one char", path, c.Content)
		}
		return func(t []string) []string {
			for i := range t {
				t[i] = stripToken(t[i], r, c.Start, c.Stop)
			}
			return t
		}, nil
	case "Metaspace":
		rep, n := utf8.DecodeRuneInString(c.Replacement)
		if n == 0 {
			rep = '▁'
		}
		never := c.PrependScheme == "never" || c.PrependScheme == "" && c.AddPrefixSpace != nil && !*c.AddPrefixSpace
		return func(t []string) []string {
			for i := range t {
				var b strings.Builder
				for _, r := range t[i] {
					switch {
					case r != rep:
						b.WriteRune(r)
					case i > 0 || never:
						b.WriteByte(' ')
					}
				}
				t[i] = b.String()
			}
			return t
		}, nil
	}
	return nil, fmt.Errorf("%s.type: unsupported decoder %q", path, c.Type)
}

// stripToken removes up to start leading and stop trailing c from s.
func stripToken(s string, c rune, start, stop int) string {
	rs := []rune(s)
	lo := 0
	for lo < len(rs) && lo < start && rs[lo] == c {
		lo++
	}
	hi := len(rs)
	for n := 0; hi > lo && n < stop && rs[hi-1] == c; n++ {
		hi--
	}
	return string(rs[lo:hi])
}

// decodeByteLevel maps every token through the GPT-2 unicode→byte table (a
// token with a char outside it is kept as its UTF-8 bytes) and decodes the
// bytes as Rust's from_utf8_lossy does.
func decodeByteLevel(t []string) []string {
	var b []byte
	for _, tok := range t {
		b = appendByteLevel(b, tok)
	}
	return []string{lossyUTF8(b)}
}

// appendByteLevel appends the bytes a byte-level token string stands for.
func appendByteLevel(b []byte, tok string) []byte {
	n := len(b)
	for _, r := range tok {
		if r >= 0 && int(r) < len(unicodeToByte) && unicodeToByte[r] >= 0 {
			b = append(b, byte(unicodeToByte[r]))
			continue
		}
		return append(b[:n], tok...)
	}
	return b
}

// decodeByteFallback turns runs of <0xXX> tokens into their bytes if the run
// is valid UTF-8, else into one U+FFFD per byte token.
func decodeByteFallback(t []string) []string {
	out := t[:0:0]
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		if utf8.Valid(run) {
			out = append(out, string(run))
		} else {
			for range run {
				out = append(out, "\uFFFD")
			}
		}
		run = run[:0]
	}
	for _, tok := range t {
		if b, ok := byteToken(tok); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, tok)
	}
	flush()
	return out
}

// byteToken parses a byte_fallback token <0xXX>.
func byteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexVal(s[3])
	lo, ok2 := hexVal(s[4])
	return hi<<4 | lo, ok1 && ok2
}

func hexVal(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// lossyUTF8 converts b to a string with one U+FFFD per maximal invalid
// subpart, as Rust's String::from_utf8_lossy (and Python's "replace") does.
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var s strings.Builder
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || n > 1 {
			s.Write(b[i : i+n])
			i += n
			continue
		}
		i += invalidLen(b[i:])
		s.WriteString("\uFFFD")
	}
	return s.String()
}

// invalidLen returns the length of the maximal subpart of a UTF-8 sequence
// at the start of b, which is not valid UTF-8 (at least 1).
func invalidLen(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case 0xC2 <= c && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case 0xE1 <= c && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case 0xF1 <= c && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(b); n++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}

// byteToUnicode is GPT-2's byte→char table (bytes_to_unicode); unicodeToByte
// is its inverse, -1 where a char stands for no byte.
var byteToUnicode, unicodeToByte = func() (b2u [256]rune, u2b [324]int16) {
	for i := range u2b {
		u2b[i] = -1
	}
	n := 0
	for b := 0; b < 256; b++ {
		if '!' <= b && b <= '~' || '¡' <= b && b <= '¬' || '®' <= b && b <= 'ÿ' {
			b2u[b] = rune(b)
		} else {
			b2u[b] = rune(256 + n)
			n++
		}
		u2b[b2u[b]] = int16(b)
	}
	return b2u, u2b
}()
