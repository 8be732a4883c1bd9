package cuda

import (
	"fmt"
	"unsafe"
)

// Alloc returns n bytes of device memory (cuMemAlloc), 256-byte aligned and
// uninitialized. Free it with [Context.Free].
func (c *Context) Alloc(n int) (DevicePtr, error) {
	op := fmt.Sprintf("cuMemAlloc(%d)", n)
	if err := c.owner(op); err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, fmt.Errorf("cuda: %s: size must be positive", op)
	}
	var p DevicePtr
	err := c.d.check(op, call(c.d.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n)))
	return p, err
}

// Free releases memory from Alloc.
func (c *Context) Free(p DevicePtr) error {
	if err := c.owner("cuMemFree"); err != nil {
		return err
	}
	return c.d.check("cuMemFree", call(c.d.cuMemFree, uintptr(p)))
}

// Memset sets n bytes at p to v, synchronously.
func (c *Context) Memset(p DevicePtr, v byte, n int) error {
	if err := c.owner("cuMemsetD8"); err != nil {
		return err
	}
	return c.d.check("cuMemsetD8", call(c.d.cuMemsetD8, uintptr(p), uintptr(v), uintptr(n)))
}

// CopyHtoD copies src to device memory at dst and returns when done.
func (c *Context) CopyHtoD(dst DevicePtr, src []byte) error {
	if err := c.owner("cuMemcpyHtoD"); err != nil || len(src) == 0 {
		return err
	}
	return c.d.check("cuMemcpyHtoD", call(c.d.cuMemcpyHtoD, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src))))
}

// CopyDtoH copies len(dst) bytes from device memory at src and returns when
// done (after the work before it on the legacy default stream).
func (c *Context) CopyDtoH(dst []byte, src DevicePtr) error {
	if err := c.owner("cuMemcpyDtoH"); err != nil || len(dst) == 0 {
		return err
	}
	return c.d.check("cuMemcpyDtoH", call(c.d.cuMemcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst))))
}

// CopyDtoD copies n bytes between device addresses.
func (c *Context) CopyDtoD(dst, src DevicePtr, n int) error {
	if err := c.owner("cuMemcpyDtoD"); err != nil || n == 0 {
		return err
	}
	return c.d.check("cuMemcpyDtoD", call(c.d.cuMemcpyDtoD, uintptr(dst), uintptr(src), uintptr(n)))
}

// AllocHost returns n bytes of page-locked host memory (cuMemAllocHost), the
// kind async copies can run from without staging. Free it with FreeHost.
func (c *Context) AllocHost(n int) ([]byte, error) {
	op := fmt.Sprintf("cuMemAllocHost(%d)", n)
	if err := c.owner(op); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("cuda: %s: size must be positive", op)
	}
	var p *byte
	if err := c.d.check(op, call(c.d.cuMemAllocHost, uintptr(unsafe.Pointer(&p)), uintptr(n))); err != nil {
		return nil, err
	}
	return unsafe.Slice(p, n), nil
}

// FreeHost releases memory from AllocHost.
func (c *Context) FreeHost(b []byte) error {
	if err := c.owner("cuMemFreeHost"); err != nil || len(b) == 0 {
		return err
	}
	return c.d.check("cuMemFreeHost", call(c.d.cuMemFreeHost, uintptr(unsafe.Pointer(unsafe.SliceData(b)))))
}
