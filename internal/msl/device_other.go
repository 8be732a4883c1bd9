//go:build !(linux && (amd64 || arm64))

package msl

import (
	"github.com/ingot-llm/ingot/metal"
)

const supported = false

var _ metal.Device = (*Device)(nil)

// A Device runs MSL kernels on the CPU. On this platform [Open] always fails
// with [ErrUnsupported]; the type exists so callers compile everywhere.
type Device struct{}

// Open returns [ErrUnsupported] on this platform.
func Open(files []File, opts Options) (*Device, error) { return nil, ErrUnsupported }

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
