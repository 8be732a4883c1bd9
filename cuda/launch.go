package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Params is a preallocated kernel parameter block: one slot per entry-point
// parameter, in order, each 16-byte aligned, and the array of pointers to the
// slots that cuLaunchKernel and graph updates take. A launch copies the
// values, so the block can be changed right after Launch returns. Setters
// panic on a slot index or size the block does not have (a programmer error).
//
// For ingot's kernels the slot sizes come from package cuda/ptx
// (ptx.Kernel.Sizes): 8 for a device pointer, the struct size for a by-value
// argument struct, 4 for a threadgroup offset.
type Params struct {
	arr   uintptr  // address of the pointer array
	slots [][]byte // views of the slots
}

// NewParams returns a zeroed block with slots of the given byte sizes. The
// memory belongs to c until Close: make one block per launch site.
func (c *Context) NewParams(sizes ...int) *Params {
	n := 8 * len(sizes)
	for _, s := range sizes {
		if s <= 0 {
			panic(fmt.Sprintf("cuda: NewParams: slot size %d", s))
		}
		n += (s + 15) &^ 15
	}
	b, addr := c.slab.alloc(max(n, 16))
	p := &Params{arr: addr}
	off := (8*len(sizes) + 15) &^ 15
	for i, s := range sizes {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(addr)+uint64(off))
		p.slots = append(p.slots, b[off:off+s:off+s])
		off += (s + 15) &^ 15
	}
	return p
}

// Len is the number of slots.
func (p *Params) Len() int { return len(p.slots) }

// Slot returns the bytes of parameter i, to fill in place.
func (p *Params) Slot(i int) []byte { return p.slots[i] }

// SetPtr sets pointer parameter i.
func (p *Params) SetPtr(i int, d DevicePtr) { binary.LittleEndian.PutUint64(p.slots[i][:8], uint64(d)) }

// SetU32 sets the 4 bytes at offset off of parameter i (0 for a uint
// parameter, a field's offset in a struct).
func (p *Params) SetU32(i, off int, v uint32) {
	binary.LittleEndian.PutUint32(p.slots[i][off:off+4], v)
}

// SetF32 is SetU32 for a float.
func (p *Params) SetF32(i, off int, v float32) { p.SetU32(i, off, math.Float32bits(v)) }

// SetBytes copies b into parameter i, which must be exactly len(b) bytes.
func (p *Params) SetBytes(i int, b []byte) {
	if len(b) != len(p.slots[i]) {
		panic(fmt.Sprintf("cuda: Params.SetBytes(%d): %d bytes for a %d-byte parameter", i, len(b), len(p.slots[i])))
	}
	copy(p.slots[i], b)
}

func (p *Params) addr() uintptr {
	if p == nil || len(p.slots) == 0 {
		return 0
	}
	return p.arr
}

// Launch enqueues f on s (nil: the default stream) over grid blocks of block
// threads, with shared bytes of dynamic shared memory, passing p's current
// values (cuLaunchKernel). It allocates nothing and does not check the
// calling thread (see the package documentation).
func (f *Function) Launch(s *Stream, grid, block Dim3, shared int, p *Params) error {
	gx, gy, gz := grid.dims()
	bx, by, bz := block.dims()
	c := f.m.c
	d, a := c.d, &c.args
	a[0], a[1], a[2], a[3], a[4], a[5], a[6] = f.h, gx, gy, gz, bx, by, bz
	a[7], a[8], a[9], a[10] = uintptr(shared), s.handle(), p.addr(), 0
	r := callv(d.cuLaunchKernel, a[:11])
	if r != Success {
		return d.check(f.op, r)
	}
	return nil
}

// CUlaunchConfig: grid and block dimensions, sharedMemBytes, 4 bytes of
// padding, hStream, attrs, numAttrs (and padding); then the one
// CUlaunchAttribute it points at: id, 4 bytes of padding, a 64-byte value.
const (
	launchConfigSize = 56
	launchAttrSize   = 72
	// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
	attrProgrammaticSerialization = 6
)

// LaunchDependent is Launch as a programmatic dependent launch
// (cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
// compute capability 9.0 and later): f's blocks may start once every block
// of the kernel before it on s has exited, before that kernel's memory
// operations are flushed, so f must execute griddepcontrol.wait before it
// touches memory the work before it wrote. It saves the gap between two
// kernels of a stream (and of a graph captured from one). It allocates
// nothing.
func (f *Function) LaunchDependent(s *Stream, grid, block Dim3, shared int, p *Params) error {
	c := f.m.c
	d := c.d
	if err := d.need(d.cuLaunchKernelEx, "cuLaunchKernelEx"); err != nil {
		return err
	}
	if c.lc == nil {
		c.lc, c.lca = c.slab.alloc(launchConfigSize + launchAttrSize)
	}
	b, le := c.lc, binary.LittleEndian
	putDims(b, grid, block, shared)
	le.PutUint64(b[32:], uint64(s.handle()))
	le.PutUint64(b[40:], uint64(c.lca+launchConfigSize))
	le.PutUint32(b[48:], 1)
	le.PutUint32(b[launchConfigSize:], attrProgrammaticSerialization)
	le.PutUint32(b[launchConfigSize+8:], 1)
	a := &c.args
	a[0], a[1], a[2], a[3] = c.lca, f.h, p.addr(), 0
	if r := callv(d.cuLaunchKernelEx, a[:4]); r != Success {
		return d.check("cuLaunchKernelEx("+f.name+")", r)
	}
	return nil
}

// putDims writes grid, block and shared as the seven uint32s that open a
// CUlaunchConfig and, after a function handle, a CUDA_KERNEL_NODE_PARAMS.
func putDims(b []byte, grid, block Dim3, shared int) {
	gx, gy, gz := grid.dims()
	bx, by, bz := block.dims()
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(gx))
	le.PutUint32(b[4:], uint32(gy))
	le.PutUint32(b[8:], uint32(gz))
	le.PutUint32(b[12:], uint32(bx))
	le.PutUint32(b[16:], uint32(by))
	le.PutUint32(b[20:], uint32(bz))
	le.PutUint32(b[24:], uint32(shared))
}
