//go:build !(linux && (amd64 || arm64)) || nogpu

package msl

import (
	"fmt"
	"runtime"

	"github.com/ingot-llm/ingot/metal"
)

const supported = false

// unsupported is the error of Open and Available here. On linux/amd64 and
// linux/arm64 this file is built only under -tags nogpu, the CPU-only static
// build that leaves out purego and so the interpreter's loader: the error
// says that, not that the platform cannot run it.
func unsupported() error {
	if runtime.GOOS == "linux" && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") {
		return fmt.Errorf("%w: not in this build (built with -tags nogpu, CPU only; use the default linux build for metal-emu)", ErrUnsupported)
	}
	return ErrUnsupported
}

var _ metal.Device = (*Device)(nil)

// A Device runs MSL kernels on the CPU. On this platform or build [Open] always fails
// with [ErrUnsupported]; the type exists so callers compile everywhere.
type Device struct{}

// Open returns [ErrUnsupported] on this platform or build.
func Open(files []File, opts Options) (*Device, error) { return nil, unsupported() }

func (d *Device) Name() string                                { return "msl-interpreter" }
func (d *Device) Kernels() []string                           { return nil }
func (d *Device) NewBuffer(n int) (metal.Buffer, error)       { return nil, ErrUnsupported }
func (d *Device) BufferNoCopy(b []byte) (metal.Buffer, error) { return nil, ErrUnsupported }
func (d *Device) Pipeline(name string) (metal.Pipeline, error) {
	return nil, ErrUnsupported
}
func (d *Device) CommandBuffer() (metal.CommandBuffer, error) { return nil, ErrUnsupported }
func (d *Device) MaxWorkingSet() int64                        { return 0 }
func (d *Device) MaxBufferLength() int                        { return 0 }
func (d *Device) Release()                                    {}

func (d *Device) Counts() metal.Counts                          { return metal.Counts{} }
func (d *Device) CommandBufferWork() int                        { return metal.CommandBufferWork }
func (d *Device) FailCommandBuffer(e *metal.CommandBufferError) {}
func (d *Device) FailNewBuffers(fail bool)                      {}
