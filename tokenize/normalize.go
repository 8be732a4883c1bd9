package tokenize

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// A normalizer rewrites the text of one piece before pre-tokenization.
type normalizer func(s string) string

// newNormalizer builds the normalizer of tokenizer.json's "normalizer" (at
// path, for errors). It returns nil for null.
func newNormalizer(raw json.RawMessage, path string) (normalizer, error) {
	c, err := decodeComponent(raw, path)
	if c == nil || err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		var fs []normalizer
		for i, r := range c.Normalizers {
			f, err := newNormalizer(r, fmt.Sprintf("%s.normalizers[%d]", path, i))
			if err != nil {
				return nil, err
			}
			if f != nil {
				fs = append(fs, f)
			}
		}
		return func(s string) string {
			for _, f := range fs {
				s = f(s)
			}
			return s
		}, nil
	case "NFC":
		return norm.NFC.String, nil
	case "NFD":
		return norm.NFD.String, nil
	case "NFKC":
		return norm.NFKC.String, nil
	case "NFKD":
		return norm.NFKD.String, nil
	case "Lowercase":
		return strings.ToLower, nil
	case "Prepend":
		p := c.Prepend
		return func(s string) string {
			if s == "" {
				return s
			}
			return p + s
		}, nil
	case "Replace":
		return newReplace(c, path)
	case "Strip":
		left, right := c.StripLeft, c.StripRight
		return func(s string) string {
			if left {
				s = strings.TrimLeftFunc(s, unicode.IsSpace)
			}
			if right {
				s = strings.TrimRightFunc(s, unicode.IsSpace)
			}
			return s
		}, nil
	}
	return nil, fmt.Errorf("%s.type: unsupported normalizer %q", path, c.Type)
}

// newReplace returns the Replace normalizer or decoder step: every match of
// pattern becomes content.
func newReplace(c *componentJSON, path string) (func(string) string, error) {
	if c.Pattern == nil {
		return nil, fmt.Errorf("%s.pattern: missing", path)
	}
	m, err := newMatcher(*c.Pattern)
	if err != nil {
		return nil, fmt.Errorf("%s.pattern: %v", path, err)
	}
	content := c.Content
	if sm, ok := m.(stringMatcher); ok {
		if sm == "" {
			return func(s string) string { return s }, nil
		}
		return func(s string) string { return strings.ReplaceAll(s, string(sm), content) }, nil
	}
	return func(s string) string {
		spans := m.matches(nil, s)
		if len(spans) == 0 {
			return s
		}
		var b strings.Builder
		last := 0
		for _, sp := range spans {
			b.WriteString(s[last:sp[0]])
			b.WriteString(content)
			last = sp[1]
		}
		b.WriteString(s[last:])
		return b.String()
	}, nil
}
