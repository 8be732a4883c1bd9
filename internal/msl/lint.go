package msl

import (
	"fmt"
	"regexp"
	"strings"
)

// The lint rules reject MSL that the interpreter cannot model faithfully.
// They are part of ingot's shader style (see README.md).
const (
	// ruleVectorCast: a C-style cast to a vector type, (float4)x. clang
	// bit-casts same-size vectors where Metal converts values, and rejects
	// different sizes. Write float4(x).
	ruleVectorCast = "vector-cast"
	// ruleBoolVector: a comparison inside a vector constructor, float4(a < b).
	// Vector comparisons yield -1 here and true (1) on Metal. Write
	// select(float4(0), float4(1), a < b).
	ruleBoolVector = "bool-vector-convert"
	// ruleCompareArith: a comparison used as a number, x * (a < b). For
	// vectors this is -1 here and 1 on Metal. Write select(...) or c ? x : y.
	ruleCompareArith = "comparison-arithmetic"
)

// A LintError is a source construct the interpreter cannot model faithfully.
type LintError struct {
	File string
	Line int
	Rule string
	Msg  string
}

func (e *LintError) Error() string {
	return fmt.Sprintf("%s:%d: msl lint [%s]: %s", e.File, e.Line, e.Rule, e.Msg)
}

var vectorType = regexp.MustCompile(`^(packed_)?(float|half|bfloat|int|uint|short|ushort|char|uchar|long|ulong|bool)[234]$`)

var comparisons = map[string]bool{"<": true, ">": true, "<=": true, ">=": true, "==": true, "!=": true}

// exprStart reports whether t can begin an operand (after a cast).
func exprStart(t token) bool {
	switch t.kind {
	case tIdent, tNumber, tString:
		return true
	}
	switch t.text {
	case "(", "-", "+", "!", "~", "*", "&":
		return true
	}
	return false
}

// callable reports whether the token before "(" makes it a call, a
// declaration's parameter list or a control statement rather than a cast or a
// parenthesized expression.
func callable(t token) bool {
	switch t.kind {
	case tIdent:
		switch t.text {
		case "return", "case", "co_return", "throw", "else", "do":
			return false
		}
		return true
	case tPunct:
		return t.text == "]" || t.text == ">"
	}
	return false
}

// lintFile checks one source file. Preprocessor directives are checked too,
// so macros cannot hide a rule.
func lintFile(name, src string) []*LintError {
	toks := lex(name, src)
	var out []*LintError
	report := func(t token, rule, format string, args ...any) {
		out = append(out, &LintError{File: name, Line: t.line, Rule: rule, Msg: fmt.Sprintf(format, args...)})
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		// (float4)x
		if t.is("(") && i+3 < len(toks) && vectorType.MatchString(toks[i+1].text) && toks[i+2].is(")") &&
			exprStart(toks[i+3]) && (i == 0 || !callable(toks[i-1])) {
			vt := toks[i+1].text
			report(t, ruleVectorCast, "C-style cast (%s): the interpreter bit-casts where Metal converts values; write %s(x)", vt, vt)
		}
		// float4(a < b)
		if t.kind == tIdent && vectorType.MatchString(t.text) && i+1 < len(toks) && toks[i+1].is("(") {
			if c := matchClose(toks, i+1); c > 0 {
				if op, ok := topComparison(toks[i+2 : c]); ok {
					report(t, ruleBoolVector, "comparison (%s) converted by %s(...): vector comparisons are -1 here and 1 on Metal; write select(%s(0), %s(1), cond)",
						op, t.text, t.text, t.text)
				}
			}
		}
		// x * (a < b), (a < b) * x, -(a < b)
		if t.is("(") && (i == 0 || !callable(toks[i-1])) && !(i+2 < len(toks) && vectorType.MatchString(toks[i+1].text)) {
			c := matchClose(toks, i)
			if c < 0 {
				continue
			}
			op, ok := topComparison(toks[i+1 : c])
			if !ok {
				continue
			}
			before := i > 0 && arith(toks[i-1].text)
			after := c+1 < len(toks) && arith(toks[c+1].text)
			if before || after {
				report(t, ruleCompareArith, "comparison (%s) used as a number: vector comparisons are -1 here and 1 on Metal; write select(...) or cond ? a : b", op)
			}
		}
	}
	return out
}

func arith(s string) bool { return s == "*" || s == "/" || s == "+" || s == "-" || s == "%" }

// topComparison reports the first comparison operator at the top level of
// toks, unless the expression is a conditional (?:) or a logical combination.
// Template argument lists (IDENT<...> followed by "(" or "::") are skipped.
func topComparison(toks []token) (string, bool) {
	op := ""
	for j := 0; j < len(toks); j++ {
		t := toks[j]
		switch {
		case t.is("(") || t.is("[") || t.is("{"):
			if c := matchClose(toks, j); c > 0 {
				j = c
			}
		case t.is("?") || t.is("&&") || t.is("||") || t.is(","):
			return "", false
		case t.is("<") && j > 0 && toks[j-1].kind == tIdent:
			if c := matchClose(toks, j); c > 0 && c+1 < len(toks) && (toks[c+1].is("(") || toks[c+1].is("::")) {
				j = c
				continue
			}
			if op == "" {
				op = t.text
			}
		case t.kind == tPunct && comparisons[t.text]:
			if op == "" {
				op = t.text
			}
		}
	}
	return op, op != ""
}

// lintErrors joins lint findings into one error listing every problem;
// errors.As finds each [*LintError].
type lintErrors []*LintError

func (l lintErrors) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

func (l lintErrors) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "msl: %d lint error(s); see internal/msl/README.md (shader rules):", len(l))
	for _, e := range l {
		sb.WriteString("\n\t")
		sb.WriteString(e.Error())
	}
	return sb.String()
}
