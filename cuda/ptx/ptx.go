// Package ptx holds ingot's kernels as NVIDIA PTX: one module per
// shaders/*.metal file, generated from the unmodified MSL sources by
// internal/msl and clang 19 (go generate ./cuda/ptx), committed, and embedded
// here, so building ingot needs neither clang nor the CUDA SDK.
//
// The modules use PTX ISA 7.0, which any driver from R450 (CUDA 11.0) reads,
// and target sm_70, so that the driver JIT-compiles them for every GPU since
// Volta, except a .metal file with a line "//ingot:ptx-target sm_80" (see
// internal/msl's README): its module targets that architecture (sm_80: the
// bf16 tensor-core mma of shaders/mma.h) and loads only on a GPU of compute
// capability 8.0 or later. [Target] says which. [Kernels] describes each
// entry point's parameters, so a host can map Metal's bindings onto a
// launch: see [Param]. Load a module with package cuda
// (cuda.Context.LoadModule).
//
// The package holds data only: it knows nothing of the driver (package cuda)
// or of ops (package kernels).
package ptx

//go:generate go run gen.go

import (
	"embed"
	"sort"
	"strconv"
	"strings"
)

//go:embed *.ptx
var files embed.FS

// ParamKind says how a kernel parameter is passed.
type ParamKind uint8

const (
	// Buffer is a [[buffer(i)]] pointer (device T *, constant T *): an 8-byte
	// device address. Metal's setBytes to a pointer parameter needs device
	// memory here.
	Buffer ParamKind = iota
	// Value is a [[buffer(i)]] reference (constant T &): T's bytes by value,
	// what Metal's setBytes passes. Size and Align are T's.
	Value
	// Threadgroup is a [[threadgroup(i)]] pointer: a 4-byte byte offset into
	// the launch's dynamic shared memory, whose size the host sets to the sum
	// of the lengths (each rounded up to 16 bytes).
	Threadgroup
)

func (k ParamKind) String() string {
	switch k {
	case Buffer:
		return "buffer"
	case Value:
		return "value"
	case Threadgroup:
		return "threadgroup"
	}
	return "ParamKind(" + strconv.Itoa(int(k)) + ")"
}

// A Param is one parameter of an entry point. Entry points take every
// [[buffer(i)]] in index order, then every [[threadgroup(i)]] in index order;
// builtins ([[thread_position_in_grid]], …) are not parameters.
type Param struct {
	Kind        ParamKind
	Index       int // the binding's index i
	Size, Align int // bytes
}

// A Kernel is one entry point: the MSL kernel with this host name.
type Kernel struct {
	Name   string // host name, the PTX .entry name: "rmsnorm_f32"
	Module string // the module holding it: "rmsnorm"
	Where  string // the MSL source position: "rmsnorm.metal:17"
	Params []Param
}

// Modules returns the module names in order: "argmax", "attention", ….
func Modules() []string { return append([]string(nil), modules...) }

// Source returns the PTX text of module name, and false if there is none.
func Source(name string) (string, bool) {
	b, err := files.ReadFile(name + ".ptx")
	if err != nil {
		return "", false
	}
	return string(b), true
}

// Target returns the compute capability module name targets (its .target
// line: sm_70 is 7, 0; sm_80 is 8, 0), and false if there is no such module.
// A GPU of a lower compute capability cannot load the module.
func Target(name string) (major, minor int, ok bool) {
	src, ok := Source(name)
	if !ok {
		return 0, 0, false
	}
	for _, line := range strings.Split(src, "\n") {
		if sm, found := strings.CutPrefix(line, ".target sm_"); found {
			digits := strings.IndexFunc(sm, func(r rune) bool { return r < '0' || r > '9' })
			if digits < 0 {
				digits = len(sm)
			}
			n, err := strconv.Atoi(sm[:digits])
			if err != nil {
				return 0, 0, false
			}
			return n / 10, n % 10, true
		}
	}
	return 0, 0, false
}

// Kernels returns every entry point, sorted by name.
func Kernels() []Kernel {
	out := append([]Kernel(nil), kernels...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the entry point with host name name.
func Lookup(name string) (Kernel, bool) {
	for _, k := range kernels {
		if k.Name == name {
			return k, true
		}
	}
	return Kernel{}, false
}

// Param returns k's parameter for binding kind and index ("[[buffer(2)]]":
// Buffer or Value, 2), its position in the entry's parameter list, and
// whether k has it.
func (k Kernel) Param(threadgroup bool, index int) (pos int, p Param, ok bool) {
	for i, p := range k.Params {
		if (p.Kind == Threadgroup) == threadgroup && p.Index == index {
			return i, p, true
		}
	}
	return 0, Param{}, false
}

// Sizes returns the byte size of each parameter, in order.
func (k Kernel) Sizes() []int {
	s := make([]int, len(k.Params))
	for i, p := range k.Params {
		s[i] = p.Size
	}
	return s
}

// String describes k's signature: "rmsnorm_f32(value(0)[8], buffer(1), …)".
func (k Kernel) String() string {
	var sb strings.Builder
	sb.WriteString(k.Name + "(")
	for i, p := range k.Params {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(p.Kind.String() + "(" + strconv.Itoa(p.Index) + ")")
		if p.Kind == Value {
			sb.WriteString("[" + strconv.Itoa(p.Size) + "]")
		}
	}
	return sb.String() + ")"
}
