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
