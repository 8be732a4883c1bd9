package constrain

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// byteSet is a set of bytes, one bit each.
type byteSet [4]uint64

func (s *byteSet) add(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s[c>>6] |= 1 << (c & 63)
	}
}

func (s *byteSet) has(c byte) bool { return s[c>>6]&(1<<(c&63)) != 0 }

func setOf(lo, hi byte) byteSet {
	var s byteSet
	s.add(lo, hi)
	return s
}

type elemKind uint8

const (
	elemBytes  elemKind = iota // one byte of set
	elemRule                   // rule
	elemString                 // a JSON string's body and closing quote (the opening quote is before it)
)

// elem is one element of an alternative.
type elem struct {
	kind     elemKind
	rule     int32
	set      byteSet
	min, max int32 // a string's characters (code points); max < 0: no limit
}

// A Grammar is a compiled byte-level grammar: rules of alternatives of
// element sequences. It is read-only once built and safe for concurrent use
// by any number of matchers.
type Grammar struct {
	rules [][]int32 // rule → its alternatives
	alts  [][]elem  // alternative → its elements
	root  int32
	size  int // elements in all alternatives
}

// maxGrammarElems bounds a compiled grammar, so that a schema cannot make
// the server build an unbounded one.
const maxGrammarElems = 1 << 18

// builder builds a Grammar, with JSON's common rules made once and equal
// rules shared: a schema that repeats a subschema (anyOf alternatives, the
// same property type) compiles each once, so that matcher stacks through
// them are equal and merge.
type builder struct {
	g                                    *Grammar
	ws, value, str, number, integer, obj int32 // common rules; -1 until made
	tooBig                               bool

	rules  map[string]int32    // rules made by rule, by their alternatives
	arrays map[[3]int]int32    // arrayRule's by item rule, min, max
	maps   map[int32]int32     // mapRule's by value rule
	spans  map[[2]string]int32 // sameLength's rules by their ends
}

func newBuilder() *builder {
	return &builder{g: &Grammar{}, ws: -1, value: -1, str: -1, number: -1, integer: -1, obj: -1,
		rules: map[string]int32{}, arrays: map[[3]int]int32{}, maps: map[int32]int32{}, spans: map[[2]string]int32{}}
}

// newRule reserves a rule to be given its alternatives with setRule, so
// rules can refer to each other.
func (b *builder) newRule() int32 {
	b.g.rules = append(b.g.rules, nil)
	return int32(len(b.g.rules) - 1)
}

func (b *builder) setRule(r int32, alts ...[]elem) {
	for _, a := range alts {
		b.g.size += len(a)
		if b.g.size > maxGrammarElems {
			b.tooBig = true
			return
		}
		b.g.alts = append(b.g.alts, a)
		b.g.rules[r] = append(b.g.rules[r], int32(len(b.g.alts)-1))
	}
}

// rule returns a rule of alts: an equal one made before, or a new one.
func (b *builder) rule(alts ...[]elem) int32 {
	var key []byte
	for _, a := range alts {
		key = binary.LittleEndian.AppendUint32(key, uint32(len(a)))
		for _, e := range a {
			key = append(key, byte(e.kind))
			key = binary.LittleEndian.AppendUint32(key, uint32(e.rule))
			key = binary.LittleEndian.AppendUint32(key, uint32(e.min))
			key = binary.LittleEndian.AppendUint32(key, uint32(e.max))
			for _, w := range e.set {
				key = binary.LittleEndian.AppendUint64(key, w)
			}
		}
	}
	if r, ok := b.rules[string(key)]; ok {
		return r
	}
	r := b.newRule()
	b.setRule(r, alts...)
	b.rules[string(key)] = r
	return r
}

func ref(r int32) elem       { return elem{kind: elemRule, rule: r} }
func bytesOf(s byteSet) elem { return elem{kind: elemBytes, set: s} }
func stringBody() elem       { return elem{kind: elemString, max: -1} }
func seq(parts ...[]elem) []elem {
	var out []elem
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// lit is the elements of a literal byte string.
func lit(s string) []elem {
	out := make([]elem, len(s))
	for i := range len(s) {
		out[i] = bytesOf(setOf(s[i], s[i]))
	}
	return out
}

func one(e elem) []elem { return []elem{e} }

// wsRule: nothing or one space, the only whitespace the grammar allows
// (after ':' and ',').
func (b *builder) wsRule() int32 {
	if b.ws < 0 {
		b.ws = b.rule(lit(" "), nil)
	}
	return b.ws
}

// strRule: a JSON string of any content.
func (b *builder) strRule() int32 {
	if b.str < 0 {
		b.str = b.rule(seq(lit(`"`), one(stringBody())))
	}
	return b.str
}

// strLenRule: a JSON string of min to max characters (max < 0: any).
func (b *builder) strLenRule(min, max int) int32 {
	return b.rule(seq(lit(`"`), one(elem{kind: elemString, min: int32(min), max: int32(max)})))
}

// digits is a rule of lo to hi decimal digits (lo ≥ 0, hi ≥ lo).
func (b *builder) digits(lo, hi int) []elem {
	d := bytesOf(setOf('0', '9'))
	opt := b.rule(nil) // ε
	for range hi - lo {
		opt = b.rule(seq(one(d), one(ref(opt))), nil)
	}
	out := make([]elem, 0, lo+1)
	for range lo {
		out = append(out, d)
	}
	return append(out, ref(opt))
}

// Digit limits of generated numbers: a float64 holds them, and the model
// cannot write digits forever.
const (
	maxIntDigits  = 16
	maxFracDigits = 16
	maxExpDigits  = 3
)

// integerRule: -?(0|[1-9][0-9]{0,15}).
func (b *builder) integerRule() int32 {
	if b.integer < 0 {
		sign := b.rule(lit("-"), nil)
		b.integer = b.rule(seq(one(ref(sign)), lit("0")),
			seq(one(ref(sign)), one(bytesOf(setOf('1', '9'))), b.digits(0, maxIntDigits-1)))
	}
	return b.integer
}

// numberRule: an integer, then an optional fraction and exponent.
func (b *builder) numberRule() int32 {
	if b.number < 0 {
		frac := b.rule(seq(lit("."), b.digits(1, maxFracDigits)), nil)
		var e, pm byteSet
		e.add('e', 'e')
		e.add('E', 'E')
		pm.add('+', '+')
		pm.add('-', '-')
		sign := b.rule(one(bytesOf(pm)), nil)
		exp := b.rule(seq(one(bytesOf(e)), one(ref(sign)), b.digits(1, maxExpDigits)), nil)
		b.number = b.rule(seq(one(ref(b.integerRule())), one(ref(frac)), one(ref(exp))))
	}
	return b.number
}

// valueRule: any JSON value.
func (b *builder) valueRule() int32 {
	if b.value < 0 {
		b.value = b.newRule()
		arr := b.arrayRule(b.value, 0, -1)
		b.setRule(b.value, one(ref(b.objectRule())), one(ref(arr)), one(ref(b.strRule())),
			one(ref(b.numberRule())), lit("true"), lit("false"), lit("null"))
	}
	return b.value
}

// objectRule: any JSON object.
func (b *builder) objectRule() int32 {
	if b.obj < 0 {
		b.obj = b.newRule()
		b.setRule(b.obj, one(ref(b.mapRule(b.valueRule()))))
	}
	return b.obj
}

// mapRule: an object of any keys, each value of rule v.
func (b *builder) mapRule(v int32) int32 {
	if r, ok := b.maps[v]; ok {
		return r
	}
	kv := b.rule(seq(one(ref(b.strRule())), lit(":"), one(ref(b.wsRule())), one(ref(v))))
	rest := b.newRule()
	b.setRule(rest, seq(lit(","), one(ref(b.wsRule())), one(ref(kv)), one(ref(rest))), nil)
	r := b.rule(lit("{}"), seq(lit("{"), one(ref(kv)), one(ref(rest)), lit("}")))
	b.maps[v] = r
	return r
}

// arrayRule: an array of min to max (-1: any number of) items of rule item.
func (b *builder) arrayRule(item int32, min, max int) int32 {
	key := [3]int{int(item), min, max}
	if r, ok := b.arrays[key]; ok {
		return r
	}
	sep := seq(lit(","), one(ref(b.wsRule())), one(ref(item)))
	// tail(j): what may follow j items.
	var tail int32
	if max < 0 {
		tail = b.newRule()
		b.setRule(tail, seq(sep, one(ref(tail))), nil)
		for j := min - 1; j >= 1; j-- {
			tail = b.rule(seq(sep, one(ref(tail))))
		}
	} else {
		tail = b.rule(nil) // j == max
		for j := max - 1; j >= 1; j-- {
			if j >= min {
				tail = b.rule(seq(sep, one(ref(tail))), nil)
			} else {
				tail = b.rule(seq(sep, one(ref(tail))))
			}
		}
	}
	var alts [][]elem
	if min == 0 {
		alts = append(alts, lit("[]"))
	}
	if max != 0 {
		alts = append(alts, seq(lit("["), one(ref(item)), one(ref(tail)), lit("]")))
	}
	r := b.rule(alts...)
	b.arrays[key] = r
	return r
}

// Wrap returns the grammar of g's documents between the literal bytes
// prefix and suffix (a tool call's markers, say); g is unchanged.
func (g *Grammar) Wrap(prefix, suffix string) *Grammar {
	w := &Grammar{rules: slices.Clone(g.rules), alts: slices.Clone(g.alts), size: g.size}
	w.alts = append(w.alts, seq(lit(prefix), one(ref(g.root)), lit(suffix)))
	w.rules = append(w.rules, []int32{int32(len(w.alts) - 1)})
	w.root = int32(len(w.rules) - 1)
	return w
}

// literals is a rule of the sorted, distinct byte strings lits, as a trie:
// one alternative per distinct first byte, so a matcher keeps one stack
// however many strings share a prefix (an enum of thousands of values).
func (b *builder) literals(lits []string) int32 {
	var alts [][]elem
	for i := 0; i < len(lits); {
		if lits[i] == "" {
			alts = append(alts, nil)
			i++
			continue
		}
		c, j := lits[i][0], i
		var rest []string
		for ; j < len(lits) && lits[j] != "" && lits[j][0] == c; j++ {
			rest = append(rest, lits[j][1:])
		}
		if len(rest) == 1 {
			alts = append(alts, lit(lits[i]))
		} else {
			alts = append(alts, seq(lit(string(c)), one(ref(b.literals(rest)))))
		}
		i = j
	}
	return b.rule(alts...)
}

// formats builds the body (between the quotes) of the string formats
// supported, each a subset of what RFC 3339, RFC 4122 and RFC 2673 allow,
// so that every generated string is valid: February has 28 days and
// seconds stop at 59.
var formats = map[string]func(b *builder) []elem{
	"date":      (*builder).date,
	"time":      (*builder).time,
	"date-time": func(b *builder) []elem { return seq(b.date(), lit("T"), b.time()) },
	"uuid": func(b *builder) []elem {
		var hex byteSet
		hex.add('0', '9')
		hex.add('a', 'f')
		hex.add('A', 'F')
		var out []elem
		for i, n := range []int{8, 4, 4, 4, 12} {
			if i > 0 {
				out = append(out, lit("-")...)
			}
			for range n {
				out = append(out, bytesOf(hex))
			}
		}
		return out
	},
	"ipv4": func(b *builder) []elem {
		d := func(lo, hi byte) elem { return bytesOf(setOf(lo, hi)) }
		octet := b.rule(seq(lit("25"), one(d('0', '5'))), seq(lit("2"), one(d('0', '4')), one(d('0', '9'))),
			seq(lit("1"), one(d('0', '9')), one(d('0', '9'))), seq(one(d('1', '9')), one(d('0', '9'))), one(d('0', '9')))
		o := one(ref(octet))
		return seq(o, lit("."), o, lit("."), o, lit("."), o)
	},
}

// date: YYYY-MM-DD with the days of each month (28 in February).
func (b *builder) date() []elem {
	d := func(lo, hi byte) elem { return bytesOf(setOf(lo, hi)) }
	day28 := [][]elem{seq(lit("0"), one(d('1', '9'))), seq(lit("1"), one(d('0', '9'))), seq(lit("2"), one(d('0', '8')))}
	day30 := append(slices.Clone(day28), lit("29"), lit("30"))
	day31 := append(slices.Clone(day30), lit("31"))
	var md [][]elem
	for m := 1; m <= 12; m++ {
		days := day31
		switch m {
		case 2:
			days = day28
		case 4, 6, 9, 11:
			days = day30
		}
		md = append(md, seq(lit(fmt.Sprintf("%02d-", m)), one(ref(b.rule(days...)))))
	}
	year := []elem{d('0', '9'), d('0', '9'), d('0', '9'), d('0', '9')}
	return seq(year, lit("-"), one(ref(b.rule(md...))))
}

// time: HH:MM:SS, an optional fraction of 1 to 9 digits, and Z or an
// offset ±HH:MM.
func (b *builder) time() []elem {
	d := func(lo, hi byte) elem { return bytesOf(setOf(lo, hi)) }
	hour := b.rule(seq(one(d('0', '1')), one(d('0', '9'))), seq(lit("2"), one(d('0', '3'))))
	sixty := []elem{d('0', '5'), d('0', '9')}
	frac := b.rule(seq(lit("."), b.digits(1, 9)), nil)
	var pm byteSet
	pm.add('+', '+')
	pm.add('-', '-')
	offset := b.rule(lit("Z"), seq(one(bytesOf(pm)), one(ref(hour)), lit(":"), sixty))
	return seq(one(ref(hour)), lit(":"), sixty, lit(":"), sixty, one(ref(frac)), one(ref(offset)))
}

// maxMagnitude is the largest integer magnitude the grammar writes
// (maxIntDigits nines).
const maxMagnitude = 9_999_999_999_999_999

// uintRange is a rule of the decimal numerals, without leading zeros, of
// the integers in [lo, hi] (hi ≤ maxMagnitude): for each length, the
// numerals between the range's ends of that length, split digit by digit.
func (b *builder) uintRange(lo, hi uint64) int32 {
	var alts [][]elem
	pow := uint64(1) // 10^(L-1)
	for l := 1; l <= maxIntDigits && (l == 1 || pow <= hi); l++ {
		x, y := max(lo, pow), min(hi, pow*10-1)
		if l == 1 {
			x = lo
		}
		if x <= y {
			alts = append(alts, b.sameLength(fmt.Sprintf("%0*d", l, x), fmt.Sprintf("%0*d", l, y)))
		}
		pow *= 10
	}
	return b.rule(alts...)
}

// sameLength is the elements of the digit strings from x to y, which have
// one length (x ≤ y). Each pair of ends is built once: the ranges below a
// split repeat (all zeros to all nines), and building them again at every
// level would take 2^length steps.
func (b *builder) sameLength(x, y string) []elem {
	d := func(lo, hi byte) elem { return bytesOf(setOf(lo, hi)) }
	switch {
	case x == y:
		return lit(x)
	case len(x) == 1:
		return one(d(x[0], y[0]))
	case x[0] == y[0]:
		return seq(lit(x[:1]), one(ref(b.rule(b.sameLength(x[1:], y[1:])))))
	}
	if r, ok := b.spans[[2]string{x, y}]; ok {
		return one(ref(r))
	}
	n := len(x) - 1
	alts := [][]elem{seq(lit(x[:1]), one(ref(b.rule(b.sameLength(x[1:], strings.Repeat("9", n))))))}
	if x[0]+1 < y[0] {
		mid := one(d(x[0]+1, y[0]-1))
		for range n {
			mid = append(mid, d('0', '9'))
		}
		alts = append(alts, mid)
	}
	alts = append(alts, seq(lit(y[:1]), one(ref(b.rule(b.sameLength(strings.Repeat("0", n), y[1:]))))))
	r := b.rule(alts...)
	b.spans[[2]string{x, y}] = r
	return one(ref(r))
}

// intRange is a rule of the integers in [lo, hi] (within ±maxMagnitude),
// or -1 if there is none.
func (b *builder) intRange(lo, hi int64) int32 {
	var alts [][]elem
	if hi >= 0 && lo <= hi {
		alts = append(alts, one(ref(b.uintRange(uint64(max(lo, 0)), uint64(hi)))))
	}
	if lo < 0 && max(-hi, 1) <= -lo {
		alts = append(alts, seq(lit("-"), one(ref(b.uintRange(uint64(max(-hi, 1)), uint64(-lo))))))
	}
	if len(alts) == 0 {
		return -1
	}
	return b.rule(alts...)
}

// numberRange is a rule of numbers in [lo, hi] (integers within
// ±maxMagnitude): integers in range, and decimals whose integer part leaves
// all of its fractions in range; no exponent. It returns -1 if lo > hi.
func (b *builder) numberRange(lo, hi int64) int32 {
	if lo > hi {
		return -1
	}
	frac := seq(lit("."), b.digits(1, maxFracDigits))
	alts := [][]elem{one(ref(b.intRange(lo, hi)))}
	if f0, f1 := max(lo, 0), hi-1; f0 <= f1 && hi >= 1 { // I.F in [I, I+1)
		alts = append(alts, seq(one(ref(b.uintRange(uint64(f0), uint64(f1)))), frac))
	}
	if m0, m1 := max(-hi, 0), -lo-1; lo < 0 && m0 <= m1 { // -M.F in (-(M+1), -M]
		alts = append(alts, seq(lit("-"), one(ref(b.uintRange(uint64(m0), uint64(m1)))), frac))
	}
	return b.rule(alts...)
}
