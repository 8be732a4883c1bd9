package cuda

import (
	"runtime"
	"unsafe"
)

// A slab hands out 16-byte-aligned blocks of pinned Go memory that live until
// the context closes: kernel parameter blocks and the arrays of pointers to
// them, which the driver reads during a call. Pinning (runtime.Pinner) is what
// makes Go memory holding Go pointers legal to pass to C.
type slab struct {
	pin    runtime.Pinner
	chunks [][]uint64
	cur    []byte
}

const slabChunk = 64 << 10

// alloc returns n zeroed bytes and their address.
func (s *slab) alloc(n int) ([]byte, uintptr) {
	n = (n + 15) &^ 15
	if n > len(s.cur) {
		size := max(slabChunk, n)
		chunk := make([]uint64, size/8)
		s.pin.Pin(&chunk[0])
		s.chunks = append(s.chunks, chunk)
		s.cur = unsafe.Slice((*byte)(unsafe.Pointer(&chunk[0])), size)
	}
	b := s.cur[:n:n]
	s.cur = s.cur[n:]
	return b, uintptr(unsafe.Pointer(&b[0]))
}

func (s *slab) release() {
	s.pin.Unpin()
	s.chunks, s.cur = nil, nil
}
