package msl

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// This file is the generator: it finds kernels and their bindings in
// preprocessed source (scanKernels), rewrites what clang cannot compile
// (sanitize) and emits launchers and the registry (emitUnit, emitRegistry).

// builtins maps Metal's builtin attribute names to the runtime's MTL_B_*
// indices (msl_runtime.h). Aliases share an index.
var builtins = map[string]int{
	"thread_position_in_grid":             0,
	"thread_position_in_threadgroup":      1,
	"thread_index_in_threadgroup":         2,
	"threadgroup_position_in_grid":        3,
	"threads_per_threadgroup":             4,
	"dispatch_threads_per_threadgroup":    4,
	"threadgroups_per_grid":               5,
	"threads_per_grid":                    6,
	"grid_size":                           6,
	"simdgroup_index_in_threadgroup":      7,
	"thread_index_in_simdgroup":           8,
	"simdgroups_per_threadgroup":          9,
	"dispatch_simdgroups_per_threadgroup": 9,
	"threads_per_simdgroup":               10,
	"thread_execution_width":              10,
	"quadgroup_index_in_threadgroup":      11,
	"thread_index_in_quadgroup":           12,
	"quadgroups_per_threadgroup":          13,
	"dispatch_quadgroups_per_threadgroup": 13,
	"grid_origin":                         14,
}

// metalAttrs are the attribute names the sanitizer blanks: clang either
// rejects them where Metal puts them or would warn about them.
var metalAttrs = map[string]bool{
	"kernel": true, "host_name": true, "buffer": true, "threadgroup": true, "texture": true,
	"sampler": true, "function_constant": true, "stage_in": true, "user": true, "id": true,
	"visible": true, "max_total_threads_per_threadgroup": true, "vertex": true, "fragment": true,
	"position": true, "attribute": true, "color": true, "raster_order_group": true,
}

func init() {
	for b := range builtins {
		metalAttrs[b] = true
	}
}

// A binding is one kernel parameter's attribute.
type binding struct {
	name  string // parameter name
	kind  string // "buffer", "threadgroup" or a builtin name
	index int    // [[buffer(index)]], [[threadgroup(index)]]
}

func (b binding) String() string {
	if b.kind == "buffer" || b.kind == "threadgroup" {
		return fmt.Sprintf("%s:%d", b.kind, b.index)
	}
	return b.kind
}

// A kernelDecl is one host-visible kernel.
type kernelDecl struct {
	host   string // host name
	target string // C++ naming the function: "rmsnorm_f32", "matvec<float>"
	params []binding
	where  string // file:line of the definition or instantiation
}

// A posError is an error at a source position.
type posError struct {
	file string
	line int
	msg  string
}

func (e posError) Error() string { return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg) }

// scanKernels finds the kernels in preprocessed source src: `kernel` and
// `[[kernel]]` functions, kernel templates and their
// `template [[host_name("x")]]` instantiations.
func scanKernels(src string, toks []token) ([]kernelDecl, []error) {
	var (
		out       []kernelDecl
		errs      []error
		templates = map[string][]binding{}
	)
	stmt := 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind == tPunct && (t.text == ";" || t.text == "{" || t.text == "}") {
			stmt = i + 1
			continue
		}
		marker := t.is("kernel") ||
			t.is("[") && i+2 < len(toks) && toks[i+1].is("[") && (toks[i+2].is("kernel") || toks[i+2].is("host_name"))
		if !marker {
			continue
		}
		end := declEnd(toks, stmt)
		if end < 0 {
			errs = append(errs, posError{t.file, t.line, "msl: cannot find the end of this kernel declaration"})
			return out, errs
		}
		k, templ, err := parseKernelDecl(src, toks[stmt:end], end < len(toks) && toks[end].is("{"), templates)
		switch {
		case err != nil:
			errs = append(errs, err)
		case templ != "":
			templates[templ] = k.params
		case k.host != "":
			out = append(out, k)
		}
		i = end - 1
	}
	return out, errs
}

// declEnd returns the index of the ";" or "{" ending the declaration that
// starts at toks[i], skipping parenthesized and bracketed groups.
func declEnd(toks []token, i int) int {
	for j := i; j < len(toks); j++ {
		switch {
		case toks[j].is("(") || toks[j].is("["):
			c := matchClose(toks, j)
			if c < 0 {
				return -1
			}
			j = c
		case toks[j].is(";") || toks[j].is("{"):
			return j
		}
	}
	return -1
}

// parseKernelDecl parses one declaration d. It returns the kernel (host
// non-empty) or, for a kernel template definition, the template's name.
func parseKernelDecl(src string, d []token, body bool, templates map[string][]binding) (k kernelDecl, templ string, err error) {
	if len(d) == 0 {
		return k, "", nil
	}
	at := func(t token, format string, args ...any) error {
		return posError{t.file, t.line, "msl: " + fmt.Sprintf(format, args...)}
	}
	isTemplate, isInst := false, false
	j := 0
	if d[0].is("template") {
		if len(d) > 1 && d[1].is("<") {
			c := matchClose(d, 1)
			if c < 0 {
				return k, "", at(d[0], "cannot parse template parameter list")
			}
			j, isTemplate = c+1, true
		} else {
			j, isInst = 1, true
		}
	}
	isKernel := false
	host := ""
	name, targs, paren := "", "", -1
scan:
	for ; j < len(d); j++ {
		t := d[j]
		switch {
		case t.is("[") && j+1 < len(d) && d[j+1].is("["):
			c := matchClose(d, j)
			if c < 0 {
				return k, "", at(t, "unterminated attribute")
			}
			a := d[j+2 : c]
			if len(a) > 0 && a[0].is("kernel") {
				isKernel = true
			}
			if len(a) > 0 && a[0].is("host_name") {
				if len(a) < 3 || a[2].kind != tString {
					return k, "", at(t, "host_name needs a string literal")
				}
				s, uerr := strconv.Unquote(a[2].text)
				if uerr != nil {
					return k, "", at(t, "bad host_name %s", a[2].text)
				}
				host = s
			}
			j = c
		case t.is("kernel"):
			isKernel = true
		case t.kind == tIdent && (t.text == "decltype" || t.text == "__attribute__" || t.text == "alignas"):
			if j+1 < len(d) && d[j+1].is("(") {
				if c := matchClose(d, j+1); c > 0 {
					j = c
				}
			}
		case t.kind == tIdent && j+1 < len(d) && d[j+1].is("<"):
			c := matchClose(d, j+1)
			if c < 0 {
				continue
			}
			if c+1 == len(d) || d[c+1].is("(") {
				name, targs = t.text, src[d[j+1].off:d[c].end]
				if c+1 < len(d) {
					paren = c + 1
				}
				break scan
			}
			j = c
		case t.kind == tIdent && j+1 < len(d) && d[j+1].is("("):
			name, paren = t.text, j+1
			break scan
		}
	}
	if !isKernel && !isInst {
		return k, "", nil // host_name on something else: not ours
	}
	if name == "" {
		return k, "", at(d[0], "cannot find the kernel's name in this declaration")
	}
	where := fmt.Sprintf("%s:%d", d[0].file, d[0].line)
	var params []binding
	if _, known := templates[name]; paren >= 0 && !(isInst && known) {
		var perr error
		params, perr = parseParams(d, paren)
		if perr != nil {
			return k, "", perr
		}
	}
	switch {
	case isInst:
		if host == "" {
			return k, "", at(d[0], "explicit instantiation of kernel %s needs [[host_name(\"...\")]]", name)
		}
		tp, ok := templates[name]
		if !ok {
			if paren < 0 {
				return k, "", at(d[0], "no kernel template %s defined before this instantiation", name)
			}
			tp = params
		}
		return kernelDecl{host: host, target: name + targs, params: tp, where: where}, "", nil
	case isTemplate:
		if body {
			return kernelDecl{params: params, where: where}, name, nil
		}
		return k, "", nil
	case body:
		if host == "" {
			host = name
		}
		return kernelDecl{host: host, target: name, params: params, where: where}, "", nil
	}
	return k, "", nil // a prototype
}

// parseParams parses the parameter list opening at d[open].
func parseParams(d []token, open int) ([]binding, error) {
	c := matchClose(d, open)
	if c < 0 {
		return nil, posError{d[open].file, d[open].line, "msl: unterminated kernel parameter list"}
	}
	var out []binding
	var cur []token
	flush := func() error {
		if len(cur) == 0 {
			return nil
		}
		b, err := parseParam(cur)
		if err != nil {
			return err
		}
		out = append(out, b)
		cur = nil
		return nil
	}
	angle := 0
	for j := open + 1; j < c; j++ {
		t := d[j]
		switch {
		case t.is("(") || t.is("[") || t.is("{"):
			e := matchClose(d, j)
			if e < 0 {
				return nil, posError{t.file, t.line, "msl: unbalanced brackets in kernel parameters"}
			}
			cur = append(cur, d[j:e+1]...)
			j = e
			continue
		case t.is("<"):
			angle++
		case t.is(">"):
			angle--
		case t.is(">>"):
			angle -= 2
		case t.is(",") && angle <= 0:
			if err := flush(); err != nil {
				return nil, err
			}
			continue
		}
		cur = append(cur, t)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if len(out) == 1 && out[0].kind == "" && out[0].name == "void" {
		return nil, nil
	}
	return out, nil
}

func parseParam(p []token) (binding, error) {
	var b binding
	var attr []token
	for j := 0; j < len(p); j++ {
		if p[j].is("[") && j+1 < len(p) && p[j+1].is("[") {
			c := matchClose(p, j)
			if c < 0 {
				break
			}
			if attr == nil {
				attr = p[j+2 : c-1]
				if j > 0 && p[j-1].kind == tIdent {
					b.name = p[j-1].text
				}
			}
			j = c
		}
	}
	if b.name == "" {
		for j := len(p) - 1; j >= 0; j-- {
			if p[j].kind == tIdent {
				b.name = p[j].text
				break
			}
		}
	}
	at := func(format string, args ...any) error {
		return posError{p[0].file, p[0].line, "msl: kernel parameter " + b.name + ": " + fmt.Sprintf(format, args...)}
	}
	if len(attr) == 0 {
		return b, at("no [[buffer(i)]], [[threadgroup(i)]] or builtin attribute")
	}
	a := attr[0].text
	switch {
	case a == "buffer" || a == "threadgroup":
		if len(attr) < 4 || !attr[1].is("(") || attr[2].kind != tNumber {
			return b, at("[[%s(i)]] needs a literal index", a)
		}
		n, err := strconv.ParseInt(strings.TrimRight(attr[2].text, "uUlL"), 0, 32)
		if err != nil || n < 0 || n >= maxBuffers {
			return b, at("[[%s(%s)]]: index must be 0..%d", a, attr[2].text, maxBuffers-1)
		}
		b.kind, b.index = a, int(n)
	default:
		if _, ok := builtins[a]; !ok {
			return b, at("attribute [[%s]] is not supported by the MSL interpreter", a)
		}
		b.kind = a
	}
	return b, nil
}

// maxBuffers is the number of [[buffer]] and [[threadgroup]] slots (MTL_MAX_BUFFERS).
const maxBuffers = 31

type edit struct {
	off, end int
	text     string
}

func applyEdits(src string, edits []edit) string {
	sort.Slice(edits, func(i, j int) bool { return edits[i].off < edits[j].off })
	var sb strings.Builder
	last := 0
	for _, e := range edits {
		if e.off < last {
			continue // overlapping: keep the first
		}
		sb.WriteString(src[last:e.off])
		sb.WriteString(e.text)
		last = e.end
	}
	sb.WriteString(src[last:])
	return sb.String()
}

// blank replaces s with spaces, keeping newlines so line numbers hold.
func blank(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c != '\n' {
			b[i] = ' '
		}
	}
	return string(b)
}

// sanitize rewrites one source file line-preservingly for clang: Metal
// attributes are blanked, and each function-scope `threadgroup T name[N];`
// becomes a reference to per-threadgroup storage from the runtime.
func sanitize(name, src string) (string, []error) {
	toks := lex(name, src)
	var edits []edit
	var errs []error
	brace, paren := 0, 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.is("[") && i+2 < len(toks) && toks[i+1].is("[") && toks[i+1].off == t.end && metalAttrs[toks[i+2].text] {
			if c := matchClose(toks, i); c > 0 {
				edits = append(edits, edit{t.off, toks[c].end, blank(src[t.off:toks[c].end])})
				i = c
				continue
			}
		}
		if t.pp || t.kind != tPunct && !t.is("threadgroup") {
			continue
		}
		switch t.text {
		case "{":
			brace++
		case "}":
			brace--
		case "(":
			paren++
		case ")":
			paren--
		case "threadgroup":
			prev := ""
			if i > 0 {
				prev = toks[i-1].text
			}
			if brace < 1 || paren != 0 || !(prev == ";" || prev == "{" || prev == "}" || prev == ":") {
				continue
			}
			e, j, err := rewriteThreadgroupDecl(src, toks, i)
			if err != nil {
				errs = append(errs, err)
			}
			if e != nil {
				edits = append(edits, *e)
				i = j
			}
		}
	}
	return fmt.Sprintf("#line 1 %q\n", name) + applyEdits(src, edits), errs
}

// rewriteThreadgroupDecl rewrites the declaration statement starting at
// toks[i] (the `threadgroup` keyword) if it declares threadgroup storage.
// It returns the edit and the index of the closing ";".
func rewriteThreadgroupDecl(src string, toks []token, i int) (*edit, int, error) {
	j := i + 1
	firstBracket := -1
	for ; j < len(toks); j++ {
		t := toks[j]
		if t.is(";") {
			break
		}
		switch {
		case t.is("[") && firstBracket < 0:
			firstBracket = j
		case t.is("(") || t.is("="), firstBracket < 0 && (t.is("*") || t.is("&")):
			return nil, i, nil // a pointer, reference, call or initialized variable: leave it
		case t.is(",") && firstBracket < 0, t.is("{"):
			return nil, i, nil
		}
		if t.is("[") {
			if c := matchClose(toks, j); c > 0 {
				j = c
			}
		}
	}
	if j >= len(toks) {
		return nil, i, nil
	}
	decl := toks[i+1 : j]
	nameAt := len(decl) - 1
	dims := ""
	if firstBracket >= 0 {
		nameAt = firstBracket - (i + 1) - 1
		dims = src[toks[firstBracket].off:toks[j-1].end]
		if strings.Contains(dims, ",") && !strings.Contains(dims, "(") {
			t := toks[i]
			return nil, i, posError{t.file, t.line, "msl: declare one threadgroup variable per statement"}
		}
	}
	if nameAt < 1 || decl[nameAt].kind != tIdent {
		return nil, i, nil
	}
	name := decl[nameAt].text
	typ := src[decl[0].off:decl[nameAt-1].end]
	orig := src[toks[i].off:toks[j].off]
	text := fmt.Sprintf("threadgroup %s (&%s)%s = *(threadgroup %s (*)%s)metal::__mtl_tg_alloc(sizeof(%s %s), alignof(%s), (__UINTPTR_TYPE__)__PRETTY_FUNCTION__, %d)",
		typ, name, dims, typ, dims, typ, dims, typ, toks[i].line)
	text += strings.Repeat("\n", strings.Count(orig, "\n"))
	return &edit{toks[i].off, toks[j].off, text}, j, nil
}

// emitUnit returns the C++ translation unit for one .metal file: the
// sanitized file, then one launcher per kernel. ids are the kernels' registry
// indices.
func emitUnit(name string, ks []kernelDecl, ids []int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "#include %q\n#include <metal_stdlib>\n#line 1 \"<msl launchers for %s>\"\n", name, name)
	for n, k := range ks {
		fmt.Fprintf(&sb, "extern \"C\" __attribute__((visibility(\"hidden\"))) void __mtl_launch_%d(void *const *b, void *const *tg, const mtl_thread_info *ti) {\n", ids[n])
		fmt.Fprintf(&sb, "\t::mtl_launch::invoke(&%s, b, tg, ti", k.target)
		for _, p := range k.params {
			switch p.kind {
			case "buffer":
				fmt.Fprintf(&sb, ", ::mtl_launch::Buf<%d>()", p.index)
			case "threadgroup":
				fmt.Fprintf(&sb, ", ::mtl_launch::Tg<%d>()", p.index)
			default:
				fmt.Fprintf(&sb, ", ::mtl_launch::Builtin<%d>() /* %s */", builtins[p.kind], p.kind)
			}
		}
		sb.WriteString(");\n}\n")
	}
	return sb.String()
}

// emitRegistry returns the C file listing every kernel for the runtime.
func emitRegistry(ks []kernelDecl) string {
	var sb strings.Builder
	sb.WriteString("#include \"msl_runtime.h\"\n")
	for i := range ks {
		fmt.Fprintf(&sb, "void __mtl_launch_%d(void *const *, void *const *, const mtl_thread_info *);\n", i)
	}
	sb.WriteString("const mtl_kernel_desc mtl_kernels[] = {\n")
	for i, k := range ks {
		ps := make([]string, len(k.params))
		for j, p := range k.params {
			ps[j] = p.String()
		}
		fmt.Fprintf(&sb, "\t{%s, %s, %s, __mtl_launch_%d},\n", cQuote(k.host), cQuote(strings.Join(ps, " ")), cQuote(k.where), i)
	}
	sb.WriteString("\t{0, 0, 0, 0},\n};\n")
	fmt.Fprintf(&sb, "const int mtl_nkernels = %d;\n", len(ks))
	return sb.String()
}

func cQuote(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, c := range []byte(s) {
		switch {
		case c == '"' || c == '\\':
			sb.WriteByte('\\')
			sb.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&sb, "\\%03o", c)
		default:
			sb.WriteByte(c)
		}
	}
	sb.WriteByte('"')
	return sb.String()
}
