package cudadev

import "strings"

// gridDependent returns the PTX module src made fit for programmatic
// dependent launch (cuda.Function.LaunchDependent): every entry point first
// executes griddepcontrol.wait, which returns once the kernels it depends on
// have completed and their memory is visible, so a kernel launched early
// reads nothing they write before it may; and the module declares PTX ISA
// 7.8 and sm_90, which that instruction needs. The wait goes after the
// declarations that open an entry's body, before its first instruction or
// label. n is the number of entries changed.
//
// With every kernel so changed and launched dependent, a stream (or a graph
// captured from one) runs them in the same order with the same data as
// before; the next kernel's launch overlaps the previous one's last blocks
// and flush instead of following them.
func gridDependent(src string) (out string, n int) {
	var b strings.Builder
	b.Grow(len(src) + 64*strings.Count(src, ".entry "))
	const (
		outside = iota
		header  // between ".entry" and its body's "{"
		opening // the body's declarations
	)
	state := outside
	for len(src) > 0 {
		line, rest, _ := strings.Cut(src, "\n")
		src = rest
		t := strings.TrimSpace(line)
		switch {
		case state == outside && strings.HasPrefix(t, ".version "):
			line = ".version 7.8"
		case state == outside && strings.HasPrefix(t, ".target "):
			line = ".target sm_90"
		case state == outside && (strings.HasPrefix(t, ".entry ") || strings.HasPrefix(t, ".visible .entry ")):
			state = header
		case state == header && t == "{":
			state = opening
		case state == opening && t != "" && !strings.HasPrefix(t, ".") && !strings.HasPrefix(t, "//"):
			b.WriteString("\tgriddepcontrol.wait;\n")
			n++
			state = outside
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String(), n
}
