// Package shaders holds ingot's hand-written Metal Shading Language kernels:
// one .metal file per op family, common.h, the host↔shader argument
// structs, and other headers of device functions (mma.h). It holds no logic: package kernels picks the kernels, binds their
// buffers and dispatches them (on Apple's Metal or on the MSL interpreter in
// internal/msl), and mirrors common.h in Go.
//
// Kernel names follow <op>_<weight dtype>_<activation dtype>[_<variant>], e.g.
// matvec_q4_f32, rmsnorm_f32, rope_neox_f32.
package shaders

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.h *.metal
var files embed.FS

// A File is one source file: a .metal file of kernels or a header (.h) they
// include.
type File struct {
	Name   string // base name: "matvec.metal", "common.h"
	Source string
}

// Header is the name of the shared header every .metal file includes.
const Header = "common.h"

// Files returns common.h, the other headers in name order, then every .metal
// file in name order.
func Files() []File {
	out := []File{{Name: Header, Source: read(Header)}}
	for _, pat := range []string{"*.h", "*.metal"} {
		names, err := fs.Glob(files, pat)
		if err != nil {
			panic(err) // the pattern is constant
		}
		sort.Strings(names)
		for _, n := range names {
			if n != Header {
				out = append(out, File{Name: n, Source: read(n)})
			}
		}
	}
	return out
}

// Source returns one translation unit for newLibraryWithSource: the headers
// followed by each .metal file in the order of [Files], with their
// `#include "<header>.h"` lines removed (a source string cannot include; each
// header comes once, before the files that include it).
func Source() string {
	var sb strings.Builder
	fs := Files()
	includes := map[string]bool{}
	for _, f := range fs {
		if strings.HasSuffix(f.Name, ".h") {
			includes[`#include "`+f.Name+`"`] = true
		}
	}
	for _, f := range fs {
		sb.WriteString("// ---- " + f.Name + "\n")
		for _, line := range strings.SplitAfter(f.Source, "\n") {
			if includes[strings.TrimSpace(line)] {
				sb.WriteString("\n") // keep line numbers of the file
				continue
			}
			sb.WriteString(line)
		}
		if !strings.HasSuffix(f.Source, "\n") {
			sb.WriteString("\n")
		}
	}
	return sb.String()
}

func read(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(err) // embedded: cannot happen
	}
	return string(b)
}
