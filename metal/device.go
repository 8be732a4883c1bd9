// Package metal is a thin, typed layer over Metal.framework, called through purego.
// It exposes devices, buffers, pipelines and command encoders, and nothing about
// tensors or models: see package kernels for ops.
//
// This file holds the seam every GPU-style device implements: Apple's Metal
// (darwin) and the MSL interpreter (package internal/msl, any OS). Code above the
// seam (the Metal half of package kernels) cannot tell them apart.
//
// Objects returned by New* methods are owned by the caller and must be released
// with Release. Methods are not safe for concurrent use unless documented.
package metal

import (
	"errors"
	"time"
)

// ErrUnavailable is returned where no Metal device can be opened (not darwin/arm64,
// or no GPU).
var ErrUnavailable = errors.New("metal: unavailable")

// Size is a grid or threadgroup size in threads or threadgroups.
type Size struct{ W, H, D int }

// A Device compiles one library of MSL source and runs its kernels.
type Device interface {
	// Name is the device name ("Apple M2", "msl-interpreter").
	Name() string
	// NewBuffer returns a zeroed shared-storage buffer of n bytes.
	NewBuffer(n int) (Buffer, error)
	// BufferNoCopy wraps host memory (e.g. mmap'd weights) without copying. b must
	// be page-aligned and stay alive until the buffer is released.
	BufferNoCopy(b []byte) (Buffer, error)
	// Pipeline returns the compute pipeline for the kernel with this host name,
	// compiled once and cached.
	Pipeline(name string) (Pipeline, error)
	// CommandBuffer starts a command buffer.
	CommandBuffer() (CommandBuffer, error)
	// MaxWorkingSet is the recommended limit on resident bytes.
	MaxWorkingSet() int64
	// MaxBufferLength is the largest buffer in bytes (maxBufferLength). Longer
	// data, such as a weight file wrapped with BufferNoCopy, must be split.
	MaxBufferLength() int
	Release()
}

// A Buffer is device memory. On Apple GPUs and the interpreter it is
// visible to the host (shared storage) through Contents; a discrete GPU's
// buffer returns nil from Contents and is a [HostCopier].
type Buffer interface {
	Contents() []byte // host view of the whole buffer; nil where the host cannot address it
	Len() int
	Release()
}

// A HostCopier is a Buffer the host reads and writes by copying: len(dst)
// or len(src) bytes at byte offset off, after the work already queued on
// the device.
type HostCopier interface {
	ReadAt(dst []byte, off int) error
	WriteAt(src []byte, off int) error
}

// A Pipeline is one compiled kernel.
type Pipeline interface {
	Name() string
	MaxThreads() int // maxTotalThreadsPerThreadgroup
}

// A CommandBuffer records compute passes and runs them when committed.
type CommandBuffer interface {
	// Encoder returns a compute encoder; End it before starting another or committing.
	Encoder() Encoder
	Commit()
	// Wait blocks until the buffer completed and returns its error, naming the kernel
	// when the device can tell.
	Wait() error
	// GPUDuration is the device time between start and end of execution.
	GPUDuration() time.Duration
}

// An Encoder records dispatches. Bindings persist across dispatches until changed.
type Encoder interface {
	SetPipeline(Pipeline)
	SetBuffer(index int, b Buffer, offset int) // [[buffer(index)]]
	SetBytes(index int, v []byte)              // small argument struct at [[buffer(index)]]
	SetThreadgroupMemory(index, n int)         // [[threadgroup(index)]] length in bytes
	Dispatch(groups, threads Size)             // dispatchThreadgroups:threadsPerThreadgroup:
	Barrier()                                  // memory barrier between dependent dispatches
	End()
}
