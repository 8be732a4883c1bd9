package cuda

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrUnavailable is wrapped by the error [Open] returns where CUDA cannot run:
// no libcuda.so.1, no device, or an unsupported platform.
var ErrUnavailable = errors.New("cuda: unavailable")

// unavailable returns an error wrapping ErrUnavailable with the reason in
// parentheses, as "cuda: unavailable (no device)".
func unavailable(why string, err error) error {
	if err != nil {
		return fmt.Errorf("%w (%s): %v", ErrUnavailable, why, err)
	}
	return fmt.Errorf("%w (%s)", ErrUnavailable, why)
}

// A Result is a CUresult, the status every driver call returns.
type Result int32

// Results the package itself branches on; any other value may come back in an
// [*Error].
const (
	Success                 Result = 0
	ErrorInvalidValue       Result = 1
	ErrorOutOfMemory        Result = 2
	ErrorNotInitialized     Result = 3
	ErrorNoDevice           Result = 100
	ErrorInvalidDevice      Result = 101
	ErrorInvalidImage       Result = 200
	ErrorInvalidContext     Result = 201
	ErrorInvalidPTX         Result = 218
	ErrorInvalidHandle      Result = 400
	ErrorNotFound           Result = 500
	ErrorNotReady           Result = 600
	ErrorLaunchOutOfRes     Result = 701
	ErrorStreamCaptureUnsup Result = 900
)

// An Error is a failed driver call.
type Error struct {
	Op   string // the call and its subject: "cuLaunchKernel(matvec_q4_f32)"
	Code Result
	Name string // cuGetErrorName: "CUDA_ERROR_INVALID_VALUE"
	Msg  string // cuGetErrorString: "invalid argument"
	Log  string // the JIT error log of a failed module load, else ""
}

func (e *Error) Error() string {
	name, msg := e.Name, e.Msg
	if name == "" {
		name = "CUresult " + strconv.Itoa(int(e.Code))
	}
	s := "cuda: " + e.Op + ": " + name
	if msg != "" {
		s += ": " + msg
	}
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}

// Dim3 is a grid size in blocks or a block size in threads. Zero fields count
// as 1.
type Dim3 struct{ X, Y, Z int }

func (d Dim3) dims() (x, y, z uintptr) {
	f := func(v int) uintptr {
		if v <= 0 {
			return 1
		}
		return uintptr(v)
	}
	return f(d.X), f(d.Y), f(d.Z)
}

// A DevicePtr is a device address (CUdeviceptr).
type DevicePtr uint64

// Add returns p + n bytes.
func (p DevicePtr) Add(n int) DevicePtr { return p + DevicePtr(n) }

// Options configures [Open]. The zero value opens device 0 through the
// system's libcuda.so.1.
type Options struct {
	// Library is the driver library: "" means $INGOT_CUDA_LIB, else
	// "libcuda.so.1" from the dynamic loader's path. Tests point it at a stub.
	Library string
	// Device is the ordinal of the device to open.
	Device int
}

// Attribute is a CUdevice_attribute.
type Attribute int32

// Device attributes; see [Context.Attribute].
const (
	AttrMaxThreadsPerBlock       Attribute = 1
	AttrMaxSharedPerBlock        Attribute = 8
	AttrWarpSize                 Attribute = 10
	AttrClockRate                Attribute = 13 // kHz
	AttrMultiprocessorCount      Attribute = 16
	AttrIntegrated               Attribute = 18
	AttrMemoryClockRate          Attribute = 36 // kHz
	AttrGlobalMemoryBusWidth     Attribute = 37 // bits
	AttrL2CacheSize              Attribute = 38 // bytes
	AttrUnifiedAddressing        Attribute = 41
	AttrComputeCapabilityMajor   Attribute = 75
	AttrComputeCapabilityMinor   Attribute = 76
	AttrMaxSharedPerBlockOptin   Attribute = 97
	AttrMaxRegistersPerBlock     Attribute = 12
	AttrMaxThreadsPerMultiproc   Attribute = 39
	AttrPageableMemoryAccess     Attribute = 88
	AttrCanUseHostPointerForRegd Attribute = 91
)

// FuncAttribute is a CUfunction_attribute.
type FuncAttribute int32

// Function attributes; see [Function.Attribute].
const (
	FuncMaxThreadsPerBlock   FuncAttribute = 0
	FuncSharedSizeBytes      FuncAttribute = 1 // static shared memory
	FuncConstSizeBytes       FuncAttribute = 2
	FuncLocalSizeBytes       FuncAttribute = 3 // per-thread local memory (spills, indexed arrays)
	FuncNumRegs              FuncAttribute = 4
	FuncPTXVersion           FuncAttribute = 5
	FuncBinaryVersion        FuncAttribute = 6
	FuncMaxDynamicSharedSize FuncAttribute = 8
)
