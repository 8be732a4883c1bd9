//go:build linux && (amd64 || arm64) && !nogpu

package cuda

import (
	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"
)

const supported = true

func dlopen(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
}

func dlsym(h uintptr, name string) uintptr {
	p, err := purego.Dlsym(h, name)
	if err != nil {
		return 0
	}
	return p
}

// call invokes the C function fn with integer and pointer arguments and
// returns its int result (a CUresult). Pointers converted to uintptr in the
// call expression stay valid through it: the directive moves what they point
// to onto the heap, as it does for purego.SyscallN (a stack that grows under
// the call would otherwise leave the driver writing to the old one).
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) Result {
	r, _, _ := purego.SyscallN(fn, args...)
	return Result(int32(r))
}

// callv is call with the arguments in a caller-owned slice, which SyscallN
// takes as is: no variadic array is allocated (the hot path's calls). The
// arguments must not point into a goroutine stack.
func callv(fn uintptr, args []uintptr) Result {
	r, _, _ := purego.SyscallN(fn, args...)
	return Result(int32(r))
}

func gettid() int { return unix.Gettid() }
