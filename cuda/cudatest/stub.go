//go:build linux && (amd64 || arm64) && !nogpu

// Package cudatest builds and drives the stub CUDA driver
// (cuda/testdata/stubcuda.c) for tests that exercise host code on machines
// without a GPU: memory is host memory, modules load any PTX text, launches
// are recorded with their parameter bytes.
package cudatest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

var (
	once sync.Once
	path string
	h    uintptr
	err  error
)

// Stub returns the path of the stub libcuda.so.1, built with clang once per
// source into the user cache directory. With CI=true a missing compiler
// fails tb; elsewhere it skips saying what to install.
func Stub(tb testing.TB) string {
	tb.Helper()
	once.Do(func() {
		_, self, _, _ := runtime.Caller(0)
		src := filepath.Join(filepath.Dir(self), "..", "testdata", "stubcuda.c")
		var cc string
		for _, c := range []string{os.Getenv("INGOT_CLANG"), "clang-19", "clang", "cc"} {
			if c == "" {
				continue
			}
			if p, lerr := exec.LookPath(c); lerr == nil {
				cc = p
				break
			}
		}
		if cc == "" {
			err = errors.New("no C compiler to build the stub driver (apt-get install clang-19)")
			return
		}
		code, rerr := os.ReadFile(src)
		if rerr != nil {
			err = rerr
			return
		}
		// Built once per source and compiler into the user cache, not per run.
		sum := sha256.Sum256(append(code, cc...))
		base, cerr := os.UserCacheDir()
		if cerr != nil {
			base = os.TempDir()
		}
		dir := filepath.Join(base, "ingot", "stubcuda-"+hex.EncodeToString(sum[:8]))
		path = filepath.Join(dir, "libcuda.so.1")
		if _, serr := os.Stat(path); serr != nil {
			if err = os.MkdirAll(dir, 0o755); err != nil {
				return
			}
			tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
			if out, cerr := exec.Command(cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", tmp, src).CombinedOutput(); cerr != nil {
				os.Remove(tmp)
				err = fmt.Errorf("build %s: %v\n%s", src, cerr, out)
				return
			}
			if err = os.Rename(tmp, path); err != nil {
				return
			}
		}
		h, err = purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	})
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatal(err)
		}
		tb.Skip(err)
	}
	return path
}

// Call calls one of the stub's test hooks (stub_reset, stub_live_allocs, …).
func Call(tb testing.TB, name string, args ...uintptr) int {
	tb.Helper()
	Stub(tb)
	fn, derr := purego.Dlsym(h, name)
	if derr != nil {
		tb.Fatal(derr)
	}
	r, _, _ := purego.SyscallN(fn, args...)
	return int(int32(r))
}

// A Launch is one launch the stub recorded.
type Launch struct {
	Name   string
	Dims   [7]uint32 // grid x, y, z, block x, y, z, dynamic shared bytes
	Params []byte    // the parameter slots concatenated, unpadded
	// Dependent: launched (or captured) as a programmatic dependent launch
	Dependent bool
}

// Launches returns the launches recorded since the last stub_reset.
func Launches(tb testing.TB) []Launch {
	tb.Helper()
	var out []Launch
	for i := range Call(tb, "stub_launch_count") {
		var l Launch
		// One buffer for the name, the dims and the parameters, which escapes
		// (l.Params): Call may grow the stack, moving a buffer that lives on
		// it after its address was taken.
		buf := make([]byte, 64+28+1024)
		name, dims, b := buf[:64], buf[64:92], buf[92:]
		n := Call(tb, "stub_launch_get", uintptr(i), uintptr(unsafe.Pointer(&name[0])), 64,
			uintptr(unsafe.Pointer(&dims[0])), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		l.Name = string(name[:bytes.IndexByte(name, 0)])
		for j := range l.Dims {
			l.Dims[j] = binary.LittleEndian.Uint32(dims[4*j:])
		}
		l.Params = b[:n]
		l.Dependent = Call(tb, "stub_launch_dependent", uintptr(i)) == 1
		out = append(out, l)
	}
	return out
}
