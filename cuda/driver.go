package cuda

import (
	"fmt"
	"path/filepath"
	"sync"
	"unsafe"
)

// A driver is one loaded libcuda: the addresses of the functions the package
// calls, looked up once. Calls go through purego.SyscallN with integer and
// pointer arguments only (no reflection on the hot path).
type driver struct {
	path string
	h    uintptr

	cuInit, cuDriverGetVersion, cuGetErrorName, cuGetErrorString                         uintptr
	cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceGetAttribute                 uintptr
	cuDeviceTotalMem, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease                uintptr
	cuCtxSetCurrent, cuCtxSynchronize                                                    uintptr
	cuMemAlloc, cuMemFree, cuMemGetInfo, cuMemAllocHost, cuMemFreeHost                   uintptr
	cuMemsetD8, cuMemsetD8Async                                                          uintptr
	cuMemcpyHtoD, cuMemcpyDtoH, cuMemcpyDtoD                                             uintptr
	cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpyDtoDAsync                              uintptr
	cuStreamCreate, cuStreamDestroy, cuStreamSynchronize                                 uintptr
	cuEventCreate, cuEventDestroy, cuEventRecord, cuEventSynchronize, cuEventElapsedTime uintptr
	cuModuleLoadDataEx, cuModuleUnload, cuModuleGetFunction                              uintptr
	cuFuncGetAttribute, cuFuncSetAttribute, cuLaunchKernel, cuLaunchKernelEx             uintptr
	cuStreamBeginCapture, cuStreamEndCapture, cuStreamGetCaptureInfo                     uintptr
	cuGraphInstantiate, cuGraphLaunch, cuGraphDestroy, cuGraphExecDestroy                uintptr
	cuGraphGetNodes, cuGraphExecKernelNodeSetParams                                      uintptr
}

// symbols lists every function with the exported name bound; versioned
// names (_v2) are the ABI the unversioned header names have mapped to since
// CUDA 4.0–11.x. Optional ones (graphs) may be missing from old drivers: a
// call then fails naming the function.
func (d *driver) symbols() []struct {
	name     string
	p        *uintptr
	optional bool
} {
	type s = struct {
		name     string
		p        *uintptr
		optional bool
	}
	return []s{
		{"cuInit", &d.cuInit, false},
		{"cuDriverGetVersion", &d.cuDriverGetVersion, false},
		{"cuGetErrorName", &d.cuGetErrorName, false},
		{"cuGetErrorString", &d.cuGetErrorString, false},
		{"cuDeviceGetCount", &d.cuDeviceGetCount, false},
		{"cuDeviceGet", &d.cuDeviceGet, false},
		{"cuDeviceGetName", &d.cuDeviceGetName, false},
		{"cuDeviceGetAttribute", &d.cuDeviceGetAttribute, false},
		{"cuDeviceTotalMem_v2", &d.cuDeviceTotalMem, false},
		{"cuDevicePrimaryCtxRetain", &d.cuDevicePrimaryCtxRetain, false},
		{"cuDevicePrimaryCtxRelease_v2", &d.cuDevicePrimaryCtxRelease, false},
		{"cuCtxSetCurrent", &d.cuCtxSetCurrent, false},
		{"cuCtxSynchronize", &d.cuCtxSynchronize, false},
		{"cuMemAlloc_v2", &d.cuMemAlloc, false},
		{"cuMemFree_v2", &d.cuMemFree, false},
		{"cuMemGetInfo_v2", &d.cuMemGetInfo, false},
		{"cuMemAllocHost_v2", &d.cuMemAllocHost, false},
		{"cuMemFreeHost", &d.cuMemFreeHost, false},
		{"cuMemsetD8_v2", &d.cuMemsetD8, false},
		{"cuMemsetD8Async", &d.cuMemsetD8Async, false},
		{"cuMemcpyHtoD_v2", &d.cuMemcpyHtoD, false},
		{"cuMemcpyDtoH_v2", &d.cuMemcpyDtoH, false},
		{"cuMemcpyDtoD_v2", &d.cuMemcpyDtoD, false},
		{"cuMemcpyHtoDAsync_v2", &d.cuMemcpyHtoDAsync, false},
		{"cuMemcpyDtoHAsync_v2", &d.cuMemcpyDtoHAsync, false},
		{"cuMemcpyDtoDAsync_v2", &d.cuMemcpyDtoDAsync, false},
		{"cuStreamCreate", &d.cuStreamCreate, false},
		{"cuStreamDestroy_v2", &d.cuStreamDestroy, false},
		{"cuStreamSynchronize", &d.cuStreamSynchronize, false},
		{"cuEventCreate", &d.cuEventCreate, false},
		{"cuEventDestroy_v2", &d.cuEventDestroy, false},
		{"cuEventRecord", &d.cuEventRecord, false},
		{"cuEventSynchronize", &d.cuEventSynchronize, false},
		{"cuEventElapsedTime", &d.cuEventElapsedTime, false},
		{"cuModuleLoadDataEx", &d.cuModuleLoadDataEx, false},
		{"cuModuleUnload", &d.cuModuleUnload, false},
		{"cuModuleGetFunction", &d.cuModuleGetFunction, false},
		{"cuFuncGetAttribute", &d.cuFuncGetAttribute, false},
		{"cuFuncSetAttribute", &d.cuFuncSetAttribute, false},
		{"cuLaunchKernel", &d.cuLaunchKernel, false},
		{"cuLaunchKernelEx", &d.cuLaunchKernelEx, true},
		{"cuStreamBeginCapture_v2", &d.cuStreamBeginCapture, true},
		{"cuStreamEndCapture", &d.cuStreamEndCapture, true},
		{"cuStreamGetCaptureInfo_v2", &d.cuStreamGetCaptureInfo, true},
		{"cuGraphInstantiateWithFlags", &d.cuGraphInstantiate, true},
		{"cuGraphLaunch", &d.cuGraphLaunch, true},
		{"cuGraphDestroy", &d.cuGraphDestroy, true},
		{"cuGraphExecDestroy", &d.cuGraphExecDestroy, true},
		{"cuGraphGetNodes", &d.cuGraphGetNodes, true},
		{"cuGraphExecKernelNodeSetParams", &d.cuGraphExecKernelNodeSetParams, true},
	}
}

var (
	driversMu sync.Mutex
	drivers   = map[string]*driver{}
)

// loadDriver dlopens path once per process and binds the driver's functions.
func loadDriver(path string) (*driver, error) {
	driversMu.Lock()
	defer driversMu.Unlock()
	if d, ok := drivers[path]; ok {
		return d, nil
	}
	h, err := dlopen(path)
	if err != nil {
		return nil, unavailable("no "+filepath.Base(path), err)
	}
	d := &driver{path: path, h: h}
	for _, s := range d.symbols() {
		*s.p = dlsym(h, s.name)
		if *s.p == 0 && !s.optional {
			return nil, fmt.Errorf("cuda: %s has no %s (not a CUDA driver, or older than CUDA 11.4)", path, s.name)
		}
	}
	drivers[path] = d
	return d, nil
}

// check returns nil for Success, else an *Error for op with the driver's name
// and description of r.
func (d *driver) check(op string, r Result) error {
	if r == Success {
		return nil
	}
	var name, msg *byte
	call(d.cuGetErrorName, uintptr(r), uintptr(unsafe.Pointer(&name)))
	call(d.cuGetErrorString, uintptr(r), uintptr(unsafe.Pointer(&msg)))
	return &Error{Op: op, Code: r, Name: cString(name), Msg: cString(msg)}
}

// need reports fn missing from the driver as op's error.
func (d *driver) need(fn uintptr, op string) error {
	if fn == 0 {
		return fmt.Errorf("cuda: %s: not in %s (needs a CUDA 11.4 driver or later)", op, d.path)
	}
	return nil
}

// cString copies the NUL-terminated C string at p.
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
