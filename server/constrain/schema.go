package constrain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// A SchemaError is a schema this package cannot compile, with the path of
// the keyword at fault ("" for the root, else dotted: "properties.a.items").
type SchemaError struct {
	Path    string
	Message string
}

func (e *SchemaError) Error() string {
	if e.Path == "" {
		return "constrain: schema: " + e.Message
	}
	return "constrain: schema." + e.Path + ": " + e.Message
}

// AnyObject returns the grammar of any JSON object (OpenAI's
// response_format json_object).
func AnyObject() *Grammar {
	b := newBuilder()
	b.g.root = b.objectRule()
	return b.g
}

// Limits of the schemas CompileSchema accepts.
const (
	maxItemsLimit  = 256     // minItems and maxItems
	maxLengthLimit = 1 << 20 // minLength and maxLength
	maxDepth       = 64      // nesting of subschemas
)

// CompileSchema compiles a JSON schema into a grammar of the JSON documents
// it generates, all of which validate against it. The supported subset:
//
//   - type: object, array, string, number, integer, boolean, null, or a list
//     of them (any one of them); no type: as the other keywords say, or any
//     value;
//   - object: properties (generated in the schema's order), required (the
//     others may be left out), additionalProperties (with no properties: a
//     schema for the values of any keys; false: no keys; otherwise no keys
//     beyond properties are generated, which every schema accepts);
//   - array: items (one schema), minItems and maxItems (at most 256);
//   - enum (any JSON values), const;
//   - integer minimum, maximum, exclusiveMinimum, exclusiveMaximum (rounded
//     inward); number minimum and maximum when integral (numbers in range
//     are then written without an exponent);
//   - string minLength and maxLength (characters: code points; at most
//     2²⁰);
//   - format of strings: date-time, date, time (RFC 3339, with an offset;
//     February has 28 days and no leap second is generated), uuid, ipv4;
//   - anyOf; $ref to "#/$defs/NAME" or "#/definitions/NAME" (not
//     recursive);
//   - true (any value); annotations (title, description, default, examples,
//     $schema, $id, $comment, deprecated, readOnly, writeOnly) are ignored.
//
// Every other keyword (pattern, other formats, multipleOf, oneOf, allOf,
// not, prefixItems, uniqueItems, …) is a *SchemaError naming its path, as
// are a recursive $ref, fractional or exclusive bounds of numbers, and
// format, minimum or maximum beside enum or const: the grammar would not
// enforce them.
func CompileSchema(schema []byte) (g *Grammar, err error) {
	c := &compiler{b: newBuilder(), refs: map[string]int32{}, active: map[string]bool{"#": true}}
	if c.root, err = decodeOrdered(schema); err != nil {
		return nil, &SchemaError{Message: "not valid JSON: " + err.Error()}
	}
	r, err := c.node(c.root, "", 0)
	if err != nil {
		return nil, err
	}
	if c.b.tooBig {
		return nil, &SchemaError{Message: fmt.Sprintf("the schema compiles to more than %d grammar elements", maxGrammarElems)}
	}
	c.b.g.root = r
	return c.b.g, nil
}

// object is a JSON object with its keys in order.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// decodeOrdered decodes JSON into nil, bool, json.Number, string, []any and
// *object values.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("data after the value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > 2*maxDepth+8 {
		return nil, fmt.Errorf("nested deeper than %d", 2*maxDepth+8)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				if _, dup := o.vals[k]; !dup {
					o.keys = append(o.keys, k)
				}
				o.vals[k] = v
			}
			_, err := dec.Token()
			return o, err
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token()
			return a, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	}
	return tok, nil
}

type compiler struct {
	b      *builder
	root   any
	refs   map[string]int32 // compiled $ref targets
	active map[string]bool  // $refs being compiled: a recursion
}

// annotations are keywords that do not constrain values.
var annotations = map[string]bool{"title": true, "description": true, "default": true, "examples": true,
	"$schema": true, "$id": true, "$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$defs": true, "definitions": true, "strict": true}

// keywords are the constraining keywords compiled, by the types they apply to.
var keywords = map[string]bool{"format": true, "minLength": true, "maxLength": true, "minimum": true, "maximum": true,
	"exclusiveMinimum": true, "exclusiveMaximum": true, "type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "minItems": true, "maxItems": true, "enum": true, "const": true, "anyOf": true, "$ref": true}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func fail(path, format string, a ...any) error {
	return &SchemaError{Path: path, Message: fmt.Sprintf(format, a...)}
}

// types are the JSON types a schema may name, in the order their grammar
// alternatives are built.
var types = []string{"object", "array", "string", "number", "integer", "boolean", "null"}

// node compiles schema s at path into a rule.
func (c *compiler) node(s any, path string, depth int) (int32, error) {
	if depth > maxDepth {
		return 0, fail(path, "nested deeper than %d", maxDepth)
	}
	if c.b.tooBig {
		return 0, fail(path, "the schema compiles to more than %d grammar elements", maxGrammarElems)
	}
	switch v := s.(type) {
	case bool:
		if !v {
			return 0, fail(path, "the schema false accepts no value")
		}
		return c.b.valueRule(), nil
	case *object:
		return c.object(v, path, depth)
	}
	return 0, fail(path, "a schema must be an object or a boolean")
}

func (c *compiler) object(s *object, path string, depth int) (int32, error) {
	for _, k := range s.keys {
		if !keywords[k] && !annotations[k] {
			return 0, fail(join(path, k), "the keyword %q is not supported (supported: %s)", k, supportedList())
		}
	}
	if r, ok := s.get("$ref"); ok {
		for _, k := range s.keys {
			if keywords[k] && k != "$ref" {
				return 0, fail(join(path, k), "keywords beside $ref are not supported")
			}
		}
		return c.ref(r, join(path, "$ref"), depth)
	}
	if a, ok := s.get("anyOf"); ok {
		list, ok := a.([]any)
		if !ok || len(list) == 0 {
			return 0, fail(join(path, "anyOf"), "must be a non-empty list of schemas")
		}
		for _, k := range s.keys {
			if keywords[k] && k != "anyOf" {
				return 0, fail(join(path, k), "keywords beside anyOf are not supported (move them into each alternative)")
			}
		}
		var alts [][]elem
		for i, sub := range list {
			r, err := c.node(sub, join(path, "anyOf."+strconv.Itoa(i)), depth+1)
			if err != nil {
				return 0, err
			}
			alts = append(alts, one(ref(r)))
		}
		return c.b.rule(alts...), nil
	}
	allowed, err := c.typeSet(s, path)
	if err != nil {
		return 0, err
	}
	str := c.b.strRule()
	lo, err := c.count(s, path, "minLength", 0, maxLengthLimit)
	if err != nil {
		return 0, err
	}
	hi, err := c.count(s, path, "maxLength", -1, maxLengthLimit)
	if err != nil {
		return 0, err
	}
	if hi >= 0 && hi < lo {
		return 0, fail(join(path, "maxLength"), "%d is less than minLength (%d)", hi, lo)
	}
	if lo > 0 || hi >= 0 {
		str = c.b.strLenRule(lo, hi)
	}
	if f, ok := s.get("format"); ok {
		name, _ := f.(string)
		build, known := formats[name]
		_, isEnum := s.get("enum")
		_, isConst := s.get("const")
		switch {
		case !known:
			return 0, fail(join(path, "format"), "format %v is not supported (supported: date-time, date, time, uuid, ipv4)", f)
		case isEnum || isConst:
			return 0, fail(join(path, "format"), "format beside enum or const is not supported")
		case lo > 0 || hi >= 0:
			return 0, fail(join(path, "format"), "format beside minLength or maxLength is not supported")
		}
		str = c.b.rule(seq(lit(`"`), build(c.b), lit(`"`)))
	}
	_, isEnum := s.get("enum")
	_, isConst := s.get("const")
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if _, ok := s.get(k); ok && (isEnum || isConst) {
			return 0, fail(join(path, k), "%s beside enum or const is not supported", k)
		}
	}
	integer, number := c.b.integerRule(), c.b.numberRule()
	if allowed["integer"] {
		lo, hi, set, err := c.bounds(s, path, true)
		if err != nil {
			return 0, err
		}
		if set {
			if integer = c.b.intRange(lo, hi); integer < 0 {
				return 0, fail(path, "no integer is in [%d, %d]", lo, hi)
			}
		}
	}
	if allowed["number"] {
		lo, hi, set, err := c.bounds(s, path, false)
		if err != nil {
			return 0, err
		}
		if set {
			if number = c.b.numberRange(lo, hi); number < 0 {
				return 0, fail(path, "no number is in [%d, %d]", lo, hi)
			}
		}
	}
	if e, ok := s.get("const"); ok {
		return c.enum([]any{e}, allowed, join(path, "const"))
	}
	if e, ok := s.get("enum"); ok {
		list, ok := e.([]any)
		if !ok || len(list) == 0 {
			return 0, fail(join(path, "enum"), "must be a non-empty list")
		}
		return c.enum(list, allowed, join(path, "enum"))
	}
	var alts [][]elem
	for _, t := range types {
		if !allowed[t] {
			continue
		}
		var r int32
		switch t {
		case "object":
			r, err = c.objectType(s, path, depth)
		case "array":
			r, err = c.arrayType(s, path, depth)
		case "string":
			r = str
		case "number":
			r = number
		case "integer":
			r = integer
		case "boolean":
			r = c.b.rule(lit("true"), lit("false"))
		case "null":
			r = c.b.rule(lit("null"))
		}
		if err != nil {
			return 0, err
		}
		alts = append(alts, one(ref(r)))
	}
	return c.b.rule(alts...), nil
}

func supportedList() string {
	k := make([]string, 0, len(keywords))
	for w := range keywords {
		k = append(k, w)
	}
	sort.Strings(k)
	return strings.Join(k, ", ")
}

// typeSet returns the types s allows: its type keyword's, or those its other
// keywords imply (all without any).
func (c *compiler) typeSet(s *object, path string) (map[string]bool, error) {
	set := map[string]bool{}
	t, ok := s.get("type")
	if !ok {
		_, props := s.get("properties")
		_, addl := s.get("additionalProperties")
		_, req := s.get("required")
		_, items := s.get("items")
		_, minI := s.get("minItems")
		_, maxI := s.get("maxItems")
		switch {
		case props || addl || req:
			set["object"] = true
		case items || minI || maxI:
			set["array"] = true
		default:
			for _, t := range types {
				set[t] = true
			}
			delete(set, "integer") // number covers it
		}
		return set, nil
	}
	var names []any
	switch v := t.(type) {
	case string:
		names = []any{v}
	case []any:
		names = v
	}
	if len(names) == 0 {
		return nil, fail(join(path, "type"), "must be a type name or a non-empty list of them")
	}
	for i, n := range names {
		name, _ := n.(string)
		if !slices.Contains(types, name) {
			p := join(path, "type")
			if _, list := t.([]any); list {
				p = join(p, strconv.Itoa(i))
			}
			return nil, fail(p, "unknown type %v (want one of %s)", n, strings.Join(types, ", "))
		}
		set[name] = true
	}
	if set["number"] {
		delete(set, "integer") // number covers it
	}
	return set, nil
}

// ref compiles the target of a $ref.
func (c *compiler) ref(r any, path string, depth int) (int32, error) {
	p, _ := r.(string)
	if rule, ok := c.refs[p]; ok {
		return rule, nil
	}
	if c.active[p] {
		return 0, fail(path, "recursive $ref %q is not supported", p)
	}
	var target any
	switch {
	case p == "#":
		target = c.root
	case strings.HasPrefix(p, "#/$defs/"), strings.HasPrefix(p, "#/definitions/"):
		section, name, _ := strings.Cut(p[2:], "/")
		root, _ := c.root.(*object)
		var defs *object
		if root != nil {
			d, _ := root.get(section)
			defs, _ = d.(*object)
		}
		name = strings.ReplaceAll(strings.ReplaceAll(name, "~1", "/"), "~0", "~")
		var ok bool
		if defs != nil {
			target, ok = defs.get(name)
		}
		if !ok {
			return 0, fail(path, "%q names no schema of the root's %s", p, section)
		}
	default:
		return 0, fail(path, "only #, #/$defs/NAME and #/definitions/NAME references are supported, got %v", r)
	}
	c.active[p] = true
	rule, err := c.node(target, path, depth+1)
	delete(c.active, p)
	if err != nil {
		return 0, err
	}
	c.refs[p] = rule
	return rule, nil
}

// enum compiles a list of values (those of the allowed types) as literals.
func (c *compiler) enum(list []any, allowed map[string]bool, path string) (int32, error) {
	var lits []string
	seen := map[string]bool{}
	for _, v := range list {
		if !allowed[jsonType(v)] && !(jsonType(v) == "integer" && allowed["number"]) {
			continue
		}
		var b bytes.Buffer
		if err := writeCanonical(&b, v); err != nil {
			return 0, fail(path, "%v", err)
		}
		if seen[b.String()] {
			continue
		}
		seen[b.String()] = true
		lits = append(lits, b.String())
	}
	if len(lits) == 0 {
		return 0, fail(path, "no value has the schema's type")
	}
	slices.Sort(lits)
	return c.b.literals(lits), nil
}

// jsonType names the JSON type of a decoded value ("integer" for numbers
// with an integer value).
func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if f, err := x.Float64(); err == nil && f == math.Trunc(f) && !math.IsInf(f, 0) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	}
	return "object"
}

// writeCanonical writes v as compact JSON (keys in their order, no HTML
// escaping).
func writeCanonical(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case *object:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			if err := writeCanonical(b, x.vals[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case string:
		writeString(b, x)
	case json.Number:
		b.WriteString(x.String())
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case nil:
		b.WriteString("null")
	default:
		return fmt.Errorf("unexpected value %T", v)
	}
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	b.Truncate(b.Len() - 1) // Encode's newline
}

// objectType compiles s as an object.
func (c *compiler) objectType(s *object, path string, depth int) (int32, error) {
	var props *object
	if p, ok := s.get("properties"); ok {
		if props, ok = p.(*object); !ok {
			return 0, fail(join(path, "properties"), "must be an object of schemas")
		}
	}
	required := map[string]bool{}
	if r, ok := s.get("required"); ok {
		list, ok := r.([]any)
		if !ok {
			return 0, fail(join(path, "required"), "must be a list of property names")
		}
		for i, n := range list {
			name, ok := n.(string)
			if !ok {
				return 0, fail(join(path, "required."+strconv.Itoa(i)), "must be a property name")
			}
			if props == nil || props.vals[name] == nil {
				return 0, fail(join(path, "required."+strconv.Itoa(i)), "%q is not in properties", name)
			}
			required[name] = true
		}
	}
	addl, hasAddl := s.get("additionalProperties")
	if props == nil || len(props.keys) == 0 {
		switch a := addl.(type) {
		case bool:
			if !a {
				return c.b.rule(lit("{}")), nil
			}
		case *object:
			v, err := c.node(a, join(path, "additionalProperties"), depth+1)
			if err != nil {
				return 0, err
			}
			return c.b.mapRule(v), nil
		default:
			if hasAddl {
				return 0, fail(join(path, "additionalProperties"), "must be a boolean or a schema")
			}
		}
		return c.b.objectRule(), nil
	}
	if _, ok := addl.(*object); hasAddl && !ok {
		if _, ok := addl.(bool); !ok {
			return 0, fail(join(path, "additionalProperties"), "must be a boolean or a schema")
		}
	}
	n := len(props.keys)
	kv := make([]int32, n)
	for i, name := range props.keys {
		v, err := c.node(props.vals[name], join(path, "properties."+name), depth+1)
		if err != nil {
			return 0, err
		}
		var key bytes.Buffer
		writeString(&key, name)
		kv[i] = c.b.rule(seq(lit(key.String()+":"), one(ref(c.b.wsRule())), one(ref(v))))
	}
	// rest[i]: the properties from i on, after one was written; first[i]:
	// the same before any was.
	rest, first := make([]int32, n+1), make([]int32, n+1)
	rest[n], first[n] = c.b.rule(nil), c.b.rule(nil)
	for i := n - 1; i >= 0; i-- {
		name := props.keys[i]
		r := [][]elem{seq(lit(","), one(ref(c.b.wsRule())), one(ref(kv[i])), one(ref(rest[i+1])))}
		f := [][]elem{seq(one(ref(kv[i])), one(ref(rest[i+1])))}
		if !required[name] {
			r = append(r, one(ref(rest[i+1])))
			f = append(f, one(ref(first[i+1])))
		}
		rest[i], first[i] = c.b.rule(r...), c.b.rule(f...)
	}
	return c.b.rule(seq(lit("{"), one(ref(first[0])), lit("}"))), nil
}

// bounds reads minimum, maximum, exclusiveMinimum and exclusiveMaximum as
// the inclusive range [lo, hi] they leave, within ±maxMagnitude, and
// whether any is set. For integers any bound is rounded inward; for
// numbers only integral minimum and maximum are supported.
func (c *compiler) bounds(s *object, path string, integer bool) (lo, hi int64, set bool, err error) {
	lo, hi = -maxMagnitude, maxMagnitude
	clamp := func(f float64) int64 { return int64(max(-maxMagnitude, min(maxMagnitude, f))) }
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		v, ok := s.get(k)
		if !ok {
			continue
		}
		num, _ := v.(json.Number)
		f, perr := strconv.ParseFloat(num.String(), 64)
		if perr != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, 0, false, fail(join(path, k), "must be a finite number, got %v", v)
		}
		exclusive := strings.HasPrefix(k, "exclusive")
		if !integer && (exclusive || f != math.Trunc(f)) {
			return 0, 0, false, fail(join(path, k), "on numbers only integral minimum and maximum are supported, got %s %v", k, v)
		}
		set = true
		switch k {
		case "minimum":
			lo = max(lo, clamp(math.Ceil(f)))
		case "exclusiveMinimum":
			lo = max(lo, clamp(math.Floor(f)+1))
		case "maximum":
			hi = min(hi, clamp(math.Floor(f)))
		case "exclusiveMaximum":
			hi = min(hi, clamp(math.Ceil(f)-1))
		}
	}
	return lo, hi, set, nil
}

// count reads the count keyword k of s: an integer in [0, limit], def
// when absent.
func (c *compiler) count(s *object, path, k string, def, limit int) (int, error) {
	v, ok := s.get(k)
	if !ok {
		return def, nil
	}
	num, _ := v.(json.Number)
	n, err := strconv.Atoi(num.String())
	if err != nil || n < 0 || n > limit {
		return 0, fail(join(path, k), "must be an integer in [0, %d], got %v", limit, v)
	}
	return n, nil
}

// arrayType compiles s as an array.
func (c *compiler) arrayType(s *object, path string, depth int) (int32, error) {
	lo, err := c.count(s, path, "minItems", 0, maxItemsLimit)
	if err != nil {
		return 0, err
	}
	hi, err := c.count(s, path, "maxItems", -1, maxItemsLimit)
	if err != nil {
		return 0, err
	}
	if hi >= 0 && hi < lo {
		return 0, fail(join(path, "maxItems"), "%d is less than minItems (%d)", hi, lo)
	}
	item := c.b.valueRule()
	if it, ok := s.get("items"); ok {
		if _, list := it.([]any); list {
			return 0, fail(join(path, "items"), "a list of schemas (tuple validation) is not supported")
		}
		if item, err = c.node(it, join(path, "items"), depth+1); err != nil {
			return 0, err
		}
	}
	return c.b.arrayRule(item, lo, hi), nil
}
