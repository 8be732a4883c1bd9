package cuda

import (
	"math"
	"time"
	"unsafe"
)

// A Stream is a queue of device work (CUstream). The nil *Stream is the
// legacy default stream, which synchronizes with every other blocking stream.
type Stream struct {
	c *Context
	h uintptr
}

// NewStream returns a stream that does not synchronize with the default
// stream (CU_STREAM_NON_BLOCKING).
func (c *Context) NewStream() (*Stream, error) {
	if err := c.owner("cuStreamCreate"); err != nil {
		return nil, err
	}
	s := &Stream{c: c}
	err := c.d.check("cuStreamCreate", call(c.d.cuStreamCreate, uintptr(unsafe.Pointer(&s.h)), 1))
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Stream) handle() uintptr {
	if s == nil {
		return 0
	}
	return s.h
}

// Destroy releases the stream once its work is done.
func (s *Stream) Destroy() error {
	if err := s.c.owner("cuStreamDestroy"); err != nil {
		return err
	}
	return s.c.d.check("cuStreamDestroy", call(s.c.d.cuStreamDestroy, s.h))
}

// Synchronize waits for the stream's work and returns its first error.
func (s *Stream) Synchronize() error {
	return s.c.d.check("cuStreamSynchronize", call(s.c.d.cuStreamSynchronize, s.h))
}

// CopyHtoD enqueues a copy of src to dst. From pageable memory the driver
// stages src before returning; from AllocHost memory it does not, and src
// must not change until the stream reaches the copy.
func (s *Stream) CopyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return s.c.d.check("cuMemcpyHtoDAsync", call(s.c.d.cuMemcpyHtoDAsync, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)), s.h))
}

// CopyDtoH enqueues a copy of len(dst) bytes from src; dst holds them once
// the stream has synchronized (to pageable memory the call itself waits).
func (s *Stream) CopyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return s.c.d.check("cuMemcpyDtoHAsync", call(s.c.d.cuMemcpyDtoHAsync, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)), s.h))
}

// CopyDtoD enqueues a device-to-device copy of n bytes.
func (s *Stream) CopyDtoD(dst, src DevicePtr, n int) error {
	if n == 0 {
		return nil
	}
	return s.c.d.check("cuMemcpyDtoDAsync", call(s.c.d.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), s.h))
}

// Memset enqueues setting n bytes at p to v.
func (s *Stream) Memset(p DevicePtr, v byte, n int) error {
	return s.c.d.check("cuMemsetD8Async", call(s.c.d.cuMemsetD8Async, uintptr(p), uintptr(v), uintptr(n), s.h))
}

// An Event marks a point in a stream (CUevent), for waiting and timing.
type Event struct {
	c *Context
	h uintptr
}

// NewEvent returns an event that records timestamps.
func (c *Context) NewEvent() (*Event, error) {
	if err := c.owner("cuEventCreate"); err != nil {
		return nil, err
	}
	e := &Event{c: c}
	if err := c.d.check("cuEventCreate", call(c.d.cuEventCreate, uintptr(unsafe.Pointer(&e.h)), 0)); err != nil {
		return nil, err
	}
	return e, nil
}

// Record enqueues the event on s (nil: the default stream).
func (e *Event) Record(s *Stream) error {
	return e.c.d.check("cuEventRecord", call(e.c.d.cuEventRecord, e.h, s.handle()))
}

// Synchronize waits until the stream has passed the event.
func (e *Event) Synchronize() error {
	return e.c.d.check("cuEventSynchronize", call(e.c.d.cuEventSynchronize, e.h))
}

// Since returns the device time from start to e, both recorded and completed
// (resolution about 0.5 µs).
func (e *Event) Since(start *Event) (time.Duration, error) {
	var ms float32
	if err := e.c.d.check("cuEventElapsedTime", call(e.c.d.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), start.h, e.h)); err != nil {
		return 0, err
	}
	return time.Duration(math.Round(float64(ms) * 1e6)), nil
}

// Destroy releases the event.
func (e *Event) Destroy() error {
	return e.c.d.check("cuEventDestroy", call(e.c.d.cuEventDestroy, e.h))
}
