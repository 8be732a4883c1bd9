package kernels

// A Mapper can use host memory that stays valid while the model runs, such as
// an mmap'd safetensors file, as device memory without copying it. After Map,
// [Backend.Upload] of a tensor whose bytes lie inside the region binds them in
// place, when their alignment allows, instead of copying them. Backends whose
// Upload copies nothing already (CPU) do not implement it.
type Mapper interface {
	// Map registers region, which must start on a page boundary (a file
	// mapping does). maxTensor is the byte length of the largest tensor in
	// it: when the region is longer than one device buffer may be, it is
	// split into buffers that overlap by that much, so each tensor lies
	// within one of them.
	//
	// unmap waits for pending ops and releases the device's buffers; call it
	// before region is unmapped. Tensors uploaded from region are invalid
	// afterwards. unmap after [Backend.Close] does nothing.
	Map(region []byte, maxTensor int) (unmap func() error, err error)
}
