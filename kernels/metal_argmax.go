package kernels

import (
	"context"
	"encoding/binary"

	"github.com/ingot-llm/ingot/metal"
)

// argmaxArgs mirrors struct argmax_args in shaders/common.h.
type argmaxArgs struct {
	N, Pad0, Pad1, Pad2 uint32
}

var _ Argmaxer = (*Metal)(nil)

// Argmax returns the smallest index of the largest element of x (argmax_f32),
// waiting for every enqueued op.
func (m *Metal) Argmax(x *Tensor) (int32, error) {
	n := x.Len()
	m.begin("argmax_f32")
	setArgs(m, argmaxArgs{N: uint32(n)})
	m.in(1, x)
	m.bind(2, m.argmaxOut, 0, true)
	m.tgmem(0, 4*32)
	m.tgmem(1, 4*32)
	// One threadgroup; 1024 threads stride x.
	m.run(metal.Size{W: 1, H: 1, D: 1}, metal.Size{W: min(1024, max(32, (n+31)&^31)), H: 1, D: 1})
	if err := m.Sync(context.Background()); err != nil {
		return 0, err
	}
	return int32(binary.LittleEndian.Uint32(m.argmaxOut.Contents())), nil
}
