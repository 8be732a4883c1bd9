package tokenize

import (
	"encoding/json"
	"fmt"
	"strings"
)

// A piece is a part of the input the model tokenizes on its own.
type piece struct {
	s     string
	first bool // starts at offset 0 of the input (Metaspace prepend_scheme "first")
}

// A preTokenizer splits (and may rewrite) one piece, appending the results to dst.
type preTokenizer func(dst []piece, p piece, sc *scratch) []piece

// Split behaviours (tokenizers' SplitDelimiterBehavior).
const (
	removed = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

var behaviours = map[string]int{
	"Removed":            removed,
	"Isolated":           isolated,
	"MergedWithPrevious": mergedWithPrevious,
	"MergedWithNext":     mergedWithNext,
	"Contiguous":         contiguous,
}

// pipeline is a flattened pre_tokenizer: its steps and whether it ends with
// ByteLevel, in which case pieces stay raw bytes (see [bpe]).
type pipeline struct {
	steps     []preTokenizer
	byteLevel bool
}

// addPreTokenizer appends the steps of tokenizer.json's "pre_tokenizer" (at
// path, for errors) to pl.
func (pl *pipeline) add(raw json.RawMessage, path string) error {
	c, err := decodeComponent(raw, path)
	if c == nil || err != nil {
		return err
	}
	if pl.byteLevel {
		return fmt.Errorf("%s: ByteLevel must be the last pre-tokenizer", path)
	}
	switch c.Type {
	case "Sequence":
		for i, r := range c.Pretokenizers {
			if err := pl.add(r, fmt.Sprintf("%s.pretokenizers[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case "Split":
		if c.Pattern == nil {
			return fmt.Errorf("%s.pattern: missing", path)
		}
		m, err := newMatcher(*c.Pattern)
		if err != nil {
			return fmt.Errorf("%s.pattern: %v", path, err)
		}
		b, ok := behaviours[c.Behavior]
		if !ok {
			return fmt.Errorf("%s.behavior: unknown %q", path, c.Behavior)
		}
		invert := c.Invert
		pl.steps = append(pl.steps, func(dst []piece, p piece, sc *scratch) []piece {
			sc.spans = m.matches(sc.spans[:0], p.s)
			return splitPiece(dst, p, sc.spans, b, invert)
		})
		return nil
	case "ByteLevel":
		prefix := c.AddPrefixSpace == nil || *c.AddPrefixSpace
		regex := c.UseRegex == nil || *c.UseRegex
		pl.byteLevel = true
		if !prefix && !regex {
			return nil
		}
		pl.steps = append(pl.steps, func(dst []piece, p piece, sc *scratch) []piece {
			if prefix && !strings.HasPrefix(p.s, " ") {
				p.s = " " + p.s
			}
			if !regex {
				return append(dst, p)
			}
			sc.spans = splitter{gpt2: true}.matches(sc.spans[:0], p.s)
			return splitPiece(dst, p, sc.spans, isolated, false)
		})
		return nil
	case "Metaspace":
		rep := c.Replacement
		if rep == "" {
			rep = "▁"
		}
		scheme := c.PrependScheme
		if scheme == "" {
			scheme = "always"
			if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
				scheme = "never"
			}
		}
		if scheme != "always" && scheme != "first" && scheme != "never" {
			return fmt.Errorf("%s.prepend_scheme: unknown %q", path, scheme)
		}
		split := c.Split == nil || *c.Split
		pl.steps = append(pl.steps, func(dst []piece, p piece, sc *scratch) []piece {
			p.s = strings.ReplaceAll(p.s, " ", rep)
			if !strings.HasPrefix(p.s, rep) && (scheme == "always" || scheme == "first" && p.first) {
				p.s = rep + p.s
			}
			if !split {
				return append(dst, p)
			}
			sc.spans = stringMatcher(rep).matches(sc.spans[:0], p.s)
			return splitPiece(dst, p, sc.spans, mergedWithNext, false)
		})
		return nil
	}
	return fmt.Errorf("%s.type: unsupported pre-tokenizer %q", path, c.Type)
}

// splitPiece appends the parts of p cut at the match spans to dst, as
// tokenizers' NormalizedString.split does for behaviour b. Empty parts are dropped.
func splitPiece(dst []piece, p piece, spans [][2]int, b int, invert bool) []piece {
	if b == isolated || b == removed {
		// Every part in order (isolated), or the parts that are not matches.
		emit := func(start, end int, match bool) {
			if end > start && (b == isolated || match == invert) {
				dst = append(dst, piece{s: p.s[start:end], first: p.first && start == 0})
			}
		}
		prev := 0
		for _, sp := range spans {
			emit(prev, sp[0], false)
			emit(sp[0], sp[1], true)
			prev = sp[1]
		}
		emit(prev, len(p.s), false)
		return dst
	}
	type part struct {
		start, end int
		match      bool
	}
	var buf [64]part
	parts := buf[:0]
	prev := 0
	for _, sp := range spans {
		if sp[0] > prev {
			parts = append(parts, part{prev, sp[0], invert})
		}
		parts = append(parts, part{sp[0], sp[1], !invert})
		prev = sp[1]
	}
	if prev < len(p.s) {
		parts = append(parts, part{prev, len(p.s), invert})
	}
	var out []part
	switch b {
	case mergedWithPrevious:
		out = make([]part, 0, len(parts))
		prevMatch := false
		for _, q := range parts {
			if q.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].end = q.end
			} else {
				out = append(out, q)
			}
			prevMatch = q.match
		}
	case mergedWithNext:
		out = make([]part, 0, len(parts))
		prevMatch := false
		for i := len(parts) - 1; i >= 0; i-- {
			q := parts[i]
			if q.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].start = q.start
			} else {
				out = append(out, q)
			}
			prevMatch = q.match
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	case contiguous:
		out = make([]part, 0, len(parts))
		prevMatch := false
		for _, q := range parts {
			if q.match == prevMatch && len(out) > 0 {
				out[len(out)-1].end = q.end
			} else {
				out = append(out, q)
			}
			prevMatch = q.match
		}
	}
	for _, q := range out {
		if q.end > q.start {
			dst = append(dst, piece{s: p.s[q.start:q.end], first: p.first && q.start == 0})
		}
	}
	return dst
}
