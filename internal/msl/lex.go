package msl

import (
	"strconv"
	"strings"
)

// tokKind classifies a token of MSL (C++) source.
type tokKind uint8

const (
	tIdent tokKind = iota
	tNumber
	tString // string or character literal
	tPunct
)

// A token is one lexical token with its byte offset and position.
type token struct {
	kind tokKind
	text string
	off  int    // byte offset in the lexed text
	end  int    // byte offset just past the token
	file string // source file (from #line markers in preprocessed text)
	line int
	pp   bool // inside a preprocessor directive
}

func (t token) is(s string) bool { return t.kind != tString && t.text == s }

// puncts lists multi-character punctuators, longest first.
var puncts = []string{
	"<<=", ">>=", "...", "->*",
	"::", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||",
	"+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "##",
}

// lex splits src into tokens, dropping comments and whitespace. Line markers
// of preprocessed output (`# 12 "file"`) update file and line and produce no
// tokens; other directives are lexed with pp set. name is the initial file.
func lex(name, src string) []token {
	var toks []token
	file, line := name, 1
	inPP := false
	atLineStart := true
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
			inPP = false
			atLineStart = true
			continue
		case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
			line++
			i += 2
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				if src[i] == '\\' && i+1 < len(src) && src[i+1] == '\n' {
					line++
					i++
				}
				i++
			}
			continue
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			j := strings.Index(src[i+2:], "*/")
			end := len(src)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			line += strings.Count(src[i:end], "\n")
			i = end
			continue
		case c == '#' && atLineStart:
			// A line marker "# 12 "file" flags" from clang -E, or a directive.
			j := i + 1
			for j < len(src) && (src[j] == ' ' || src[j] == '\t') {
				j++
			}
			k := j
			for k < len(src) && src[k] >= '0' && src[k] <= '9' {
				k++
			}
			if k > j {
				n, _ := strconv.Atoi(src[j:k])
				rest := src[k:]
				if e := strings.IndexByte(rest, '\n'); e >= 0 {
					rest = rest[:e]
				}
				if q := strings.IndexByte(rest, '"'); q >= 0 {
					if r := strings.IndexByte(rest[q+1:], '"'); r >= 0 {
						file = rest[q+1 : q+1+r]
					}
				}
				line = n - 1 // the newline ending the marker advances it
				for i < len(src) && src[i] != '\n' {
					i++
				}
				continue
			}
			inPP = true
		}
		atLineStart = false
		start := i
		kind := tPunct
		switch {
		case isIdentStart(c):
			for i < len(src) && isIdentChar(src[i]) {
				i++
			}
			kind = tIdent
			// String literal prefixes (u8"", L'') are rare in MSL; ignored.
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			for i < len(src) {
				d := src[i]
				if (d == '+' || d == '-') && i > start && strings.ContainsRune("eEpP", rune(src[i-1])) {
					i++
					continue
				}
				if !isIdentChar(d) && d != '.' && d != '\'' {
					break
				}
				i++
			}
			kind = tNumber
		case c == '"' || c == '\'':
			i++
			for i < len(src) && src[i] != c && src[i] != '\n' {
				if src[i] == '\\' {
					i++
				}
				i++
			}
			if i < len(src) && src[i] == c {
				i++
			}
			kind = tString
		default:
			n := 1
			for _, p := range puncts {
				if strings.HasPrefix(src[i:], p) {
					n = len(p)
					break
				}
			}
			i += n
		}
		toks = append(toks, token{kind: kind, text: src[start:i], off: start, end: i, file: file, line: line, pp: inPP})
	}
	return toks
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// matchClose returns the index of the token closing the bracket at toks[i]
// ("(", "[", "{" or "<"), or -1. For "<", parentheses and brackets nest and
// ">>" closes two levels; a ";" or "{" ends the search.
func matchClose(toks []token, i int) int {
	open := toks[i].text
	if open == "<" {
		depth := 0
		for j := i; j < len(toks); j++ {
			switch toks[j].text {
			case "<":
				depth++
			case ">":
				depth--
			case ">>":
				depth -= 2
			case "(", "[":
				if k := matchClose(toks, j); k >= 0 {
					j = k
				}
				continue
			case ";", "{", "}":
				return -1
			}
			if depth <= 0 {
				return j
			}
		}
		return -1
	}
	closeTok := map[string]string{"(": ")", "[": "]", "{": "}"}[open]
	depth := 0
	for j := i; j < len(toks); j++ {
		switch toks[j].text {
		case "(", "[", "{":
			if toks[j].kind == tPunct {
				depth++
			}
		case ")", "]", "}":
			if toks[j].kind == tPunct {
				depth--
				if depth == 0 {
					if toks[j].text != closeTok {
						return -1
					}
					return j
				}
			}
		}
	}
	return -1
}
