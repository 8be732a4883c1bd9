package cudadev

import "strings"

// gridWaitMarker is the PTX comment a kernel puts where its programmatic
// dependent launch waits, when that is not its first instruction
// (shaders/matvec_nv.metal: mvnv_grid_wait).
const gridWaitMarker = "// ingot:griddepcontrol.wait"

// gridDependent returns the PTX module src made fit for programmatic
// dependent launch (cuda.Function.LaunchDependent): every entry point
// executes griddepcontrol.wait, which returns once the kernels it depends on
// have completed and their memory is visible, before it reads anything they
// write, and griddepcontrol.launch_dependents right after it, which lets the
// next kernel launch (and run up to its own wait) while this one works. The
// wait goes where the entry marks it (gridWaitMarker: a mat-vec first issues
// its weights' loads), else after the declarations that open the entry's
// body, before its first instruction or label. The module then declares PTX
// ISA 7.8 and sm_90, which the instructions need. n is the number of entries
// changed.
//
// With every kernel so changed and launched dependent, a stream (or a graph
// captured from one) computes what it computed before: a kernel reads what
// the one before it wrote only after it completed. What changes is that a
// kernel's launch and its first weight loads overlap the kernel before it.
func gridDependent(src string) (out string, n int) {
	const (
		wait    = "\tgriddepcontrol.wait;\n"
		trigger = "\tgriddepcontrol.launch_dependents;\n"
	)
	var b strings.Builder
	b.Grow(len(src) + 64*strings.Count(src, ".entry "))
	const (
		outside = iota
		header  // between ".entry" and its body's "{"
		opening // the body's declarations
		body
	)
	state, marked := outside, false
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
			marked = entryMarked(src)
		case state == header && t == "{":
			state = opening
		case state == opening && t != "" && !strings.HasPrefix(t, ".") && !strings.HasPrefix(t, "//"):
			if !marked {
				b.WriteString(wait + trigger)
			}
			n++
			state = body
		case state == body && t == gridWaitMarker:
			b.WriteString(wait + trigger)
			continue
		case state == body && line == "}":
			state = outside
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String(), n
}

// entryMarked reports whether the entry whose header and body follow in src
// has the wait marker: a line of it before the body's closing "}".
func entryMarked(src string) bool {
	for len(src) > 0 {
		var l string
		l, src, _ = strings.Cut(src, "\n")
		switch {
		case l == "}":
			return false
		case strings.TrimSpace(l) == gridWaitMarker:
			return true
		}
	}
	return false
}
