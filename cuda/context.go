package cuda

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"
)

// A Context is one device's primary context, attached to one goroutine's OS
// thread (see the package documentation).
type Context struct {
	d       *driver
	ordinal int
	dev     int32
	ctx     uintptr
	tid     int // the attached OS thread
	name    string
	slab    slab
	closed  bool
	args    [11]uintptr // hot-path call arguments (see callv)
	lc      []byte      // a CUlaunchConfig and its one attribute, for LaunchDependent
	lca     uintptr
}

// Open loads the driver, initializes it, retains device opts.Device's primary
// context and attaches it to the calling goroutine, which stays locked to its
// OS thread until [Context.Detach] or [Context.Close]. Without a driver or a
// device the error wraps [ErrUnavailable].
func Open(opts Options) (*Context, error) {
	lib := opts.Library
	if lib == "" {
		lib = os.Getenv("INGOT_CUDA_LIB")
	}
	if lib == "" {
		lib = "libcuda.so.1"
	}
	if !supported {
		_, err := dlopen(lib)
		return nil, err
	}
	d, err := loadDriver(lib)
	if err != nil {
		return nil, err
	}
	if r := call(d.cuInit, 0); r != Success {
		if r == ErrorNoDevice {
			return nil, unavailable("no device", nil)
		}
		return nil, d.check("cuInit", r)
	}
	var n int32
	if err := d.check("cuDeviceGetCount", call(d.cuDeviceGetCount, uintptr(unsafe.Pointer(&n)))); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, unavailable("no device", nil)
	}
	if opts.Device < 0 || opts.Device >= int(n) {
		return nil, fmt.Errorf("cuda: no device %d (%d present)", opts.Device, n)
	}
	c := &Context{d: d, ordinal: opts.Device}
	if err := d.check("cuDeviceGet", call(d.cuDeviceGet, uintptr(unsafe.Pointer(&c.dev)), uintptr(opts.Device))); err != nil {
		return nil, err
	}
	var name [256]byte
	if err := d.check("cuDeviceGetName", call(d.cuDeviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)-1), uintptr(c.dev))); err != nil {
		return nil, err
	}
	c.name = cString(&name[0])
	if err := d.check("cuDevicePrimaryCtxRetain", call(d.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&c.ctx)), uintptr(c.dev))); err != nil {
		return nil, err
	}
	if err := c.Attach(); err != nil {
		call(d.cuDevicePrimaryCtxRelease, uintptr(c.dev))
		return nil, err
	}
	return c, nil
}

// Attach locks the calling goroutine to its OS thread and makes c current
// there; c then belongs to this goroutine. The goroutine that had it must no
// longer use it.
func (c *Context) Attach() error {
	runtime.LockOSThread()
	if err := c.d.check("cuCtxSetCurrent", call(c.d.cuCtxSetCurrent, c.ctx)); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	c.tid = gettid()
	return nil
}

// Detach unlocks the goroutine that called Open or Attach from its thread,
// which it first leaves with no current context: the thread goes back to the
// Go scheduler, and another goroutine landing on it must not find c there.
func (c *Context) Detach() {
	if c.tid != 0 && gettid() == c.tid {
		call(c.d.cuCtxSetCurrent, 0)
	}
	c.tid = 0
	runtime.UnlockOSThread()
}

// owner returns an error unless the calling goroutine is the attached one.
func (c *Context) owner(op string) error {
	if c.closed {
		return fmt.Errorf("cuda: %s: context closed", op)
	}
	if t := gettid(); t != c.tid {
		return fmt.Errorf("cuda: %s: called on OS thread %d, but the context is attached to thread %d (Attach it on this goroutine)", op, t, c.tid)
	}
	return nil
}

// Close waits for the device, releases the primary context and the
// parameter memory, and detaches. Objects made from c must be released
// first.
func (c *Context) Close() error {
	if c.closed {
		return nil
	}
	err := c.Synchronize()
	if rerr := c.d.check("cuDevicePrimaryCtxRelease", call(c.d.cuDevicePrimaryCtxRelease, uintptr(c.dev))); err == nil {
		err = rerr
	}
	c.closed = true
	c.slab.release()
	c.Detach()
	return err
}

// Synchronize waits until the device has finished all work (cuCtxSynchronize)
// and returns the first asynchronous error.
func (c *Context) Synchronize() error {
	if err := c.owner("cuCtxSynchronize"); err != nil {
		return err
	}
	return c.d.check("cuCtxSynchronize", call(c.d.cuCtxSynchronize))
}

// Name is the device name ("NVIDIA H100 80GB HBM3").
func (c *Context) Name() string { return c.name }

// Ordinal is the device's index.
func (c *Context) Ordinal() int { return c.ordinal }

// Library is the path the driver was loaded from.
func (c *Context) Library() string { return c.d.path }

// DriverVersion returns the driver's CUDA version, 1000·major + 10·minor
// (12080 for CUDA 12.8).
func (c *Context) DriverVersion() (int, error) {
	var v int32
	err := c.d.check("cuDriverGetVersion", call(c.d.cuDriverGetVersion, uintptr(unsafe.Pointer(&v))))
	return int(v), err
}

// Attribute returns a device attribute.
func (c *Context) Attribute(a Attribute) (int, error) {
	var v int32
	err := c.d.check(fmt.Sprintf("cuDeviceGetAttribute(%d)", a), call(c.d.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(c.dev)))
	return int(v), err
}

// ComputeCapability returns the device's compute capability (9, 0 for an H100).
func (c *Context) ComputeCapability() (major, minor int, err error) {
	if major, err = c.Attribute(AttrComputeCapabilityMajor); err != nil {
		return 0, 0, err
	}
	minor, err = c.Attribute(AttrComputeCapabilityMinor)
	return major, minor, err
}

// SMCount returns the number of streaming multiprocessors.
func (c *Context) SMCount() (int, error) { return c.Attribute(AttrMultiprocessorCount) }

// TotalMem returns the device memory in bytes.
func (c *Context) TotalMem() (int64, error) {
	var n uint64
	err := c.d.check("cuDeviceTotalMem", call(c.d.cuDeviceTotalMem, uintptr(unsafe.Pointer(&n)), uintptr(c.dev)))
	return int64(n), err
}

// MemInfo returns the free and total device memory in bytes (cuMemGetInfo),
// for admission: whether weights and a KV cache fit before allocating them.
func (c *Context) MemInfo() (free, total int64, err error) {
	if err := c.owner("cuMemGetInfo"); err != nil {
		return 0, 0, err
	}
	var f, t uint64
	err = c.d.check("cuMemGetInfo", call(c.d.cuMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t))))
	return int64(f), int64(t), err
}
