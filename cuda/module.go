package cuda

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"
	"unsafe"
)

// A Module is loaded PTX (CUmodule): the driver JIT-compiles it for the
// device when it loads, and caches the result on disk (~/.nv/ComputeCache,
// off with CUDA_CACHE_DISABLE=1).
type Module struct {
	c    *Context
	h    uintptr
	name string
	// JITTime is the compile and link time the driver reported (zero when it
	// came from the cache).
	JITTime time.Duration
	// InfoLog is the JIT's informational output, usually empty.
	InfoLog string
}

// JIT options (CUjit_option).
const (
	jitWallTime          = 2
	jitInfoLogBuffer     = 3
	jitInfoLogBufferSize = 4
	jitErrorLogBuffer    = 5
	jitErrorLogSize      = 6
)

// LoadModule JIT-compiles ptx (cuModuleLoadDataEx) under name, which errors
// and functions carry. A JIT failure returns an [*Error] whose Log holds the
// compiler's message ("ptxas application ptx input, line 12; error : …").
func (c *Context) LoadModule(name, ptx string) (*Module, error) {
	op := "cuModuleLoadDataEx(" + name + ")"
	if err := c.owner(op); err != nil {
		return nil, err
	}
	image := append([]byte(ptx), 0)
	info, elog := make([]byte, 8<<10), make([]byte, 16<<10)
	opts := []int32{jitWallTime, jitInfoLogBuffer, jitInfoLogBufferSize, jitErrorLogBuffer, jitErrorLogSize}
	vals := []uintptr{0, uintptr(unsafe.Pointer(&info[0])), uintptr(len(info)), uintptr(unsafe.Pointer(&elog[0])), uintptr(len(elog))}
	var pin runtime.Pinner // vals holds Go pointers the driver writes through
	pin.Pin(&info[0])
	pin.Pin(&elog[0])
	pin.Pin(&vals[0])
	defer pin.Unpin()
	m := &Module{c: c, name: name}
	r := call(c.d.cuModuleLoadDataEx, uintptr(unsafe.Pointer(&m.h)), uintptr(unsafe.Pointer(&image[0])),
		uintptr(len(opts)), uintptr(unsafe.Pointer(&opts[0])), uintptr(unsafe.Pointer(&vals[0])))
	logOf := func(b []byte, n uintptr) string {
		if n > uintptr(len(b)) {
			n = uintptr(len(b))
		}
		return strings.TrimRight(string(b[:n]), "\x00\n")
	}
	if err := c.d.check(op, r); err != nil {
		err.(*Error).Log = logOf(elog, vals[4])
		return nil, err
	}
	m.JITTime = time.Duration(float64(math.Float32frombits(uint32(vals[0]))) * 1e6)
	m.InfoLog = logOf(info, vals[2])
	return m, nil
}

// Name is the name given to LoadModule.
func (m *Module) Name() string { return m.name }

// Unload releases the module; its functions become invalid.
func (m *Module) Unload() error {
	if err := m.c.owner("cuModuleUnload"); err != nil {
		return err
	}
	return m.c.d.check("cuModuleUnload("+m.name+")", call(m.c.d.cuModuleUnload, m.h))
}

// A Function is a kernel entry point of a module (CUfunction).
type Function struct {
	m    *Module
	h    uintptr
	name string
	op   string // "cuLaunchKernel(name)", made once
}

// Function looks up the entry point name (CUDA_ERROR_NOT_FOUND if absent).
func (m *Module) Function(name string) (*Function, error) {
	op := "cuModuleGetFunction(" + m.name + ", " + name + ")"
	if err := m.c.owner(op); err != nil {
		return nil, err
	}
	f := &Function{m: m, name: name, op: "cuLaunchKernel(" + name + ")"}
	bname := append([]byte(name), 0)
	if err := m.c.d.check(op, call(m.c.d.cuModuleGetFunction, uintptr(unsafe.Pointer(&f.h)), m.h, uintptr(unsafe.Pointer(&bname[0])))); err != nil {
		return nil, err
	}
	return f, nil
}

// Name is the entry point's name.
func (f *Function) Name() string { return f.name }

// Attribute returns a function attribute: registers, local memory, the
// largest block it can launch with (FuncMaxThreadsPerBlock, which register
// use can bring below 1024).
func (f *Function) Attribute(a FuncAttribute) (int, error) {
	var v int32
	err := f.m.c.d.check(fmt.Sprintf("cuFuncGetAttribute(%s, %d)", f.name, a), call(f.m.c.d.cuFuncGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), f.h))
	return int(v), err
}

// SetMaxDynamicShared allows launches with up to n bytes of dynamic shared
// memory (above 48 KiB needs it).
func (f *Function) SetMaxDynamicShared(n int) error {
	return f.m.c.d.check(fmt.Sprintf("cuFuncSetAttribute(%s, MAX_DYNAMIC_SHARED_SIZE_BYTES, %d)", f.name, n),
		call(f.m.c.d.cuFuncSetAttribute, f.h, uintptr(FuncMaxDynamicSharedSize), uintptr(n)))
}
