package kernels

import (
	"fmt"
	"unsafe"

	"github.com/ingot-llm/ingot/metal"
)

// ropeArgs mirrors struct rope_args in shaders/common.h.
type ropeArgs struct {
	L, Cols, HeadDim, HalfRot, Pos uint32
	Scale                          float32
}

// RoPE rotates x (L, heads·Dh) in place for positions [pos, pos+L)
// (rope_neox_f32). The inverse frequencies travel with the dispatch (setBytes).
func (m *Metal) RoPE(x *Tensor, pos int, p *RoPE) {
	cols := x.Cols()
	half := len(p.InvFreq)
	if p.HeadDim <= 0 || cols%p.HeadDim != 0 || 2*half != p.RotaryDim || p.RotaryDim > p.HeadDim || 4*half > 4096 {
		panic(fmt.Sprintf("kernels: RoPE: x %v with head dim %d, rotary dim %d, %d frequencies", x.Shape, p.HeadDim, p.RotaryDim, half))
	}
	L := x.NumRows()
	if L == 0 || half == 0 {
		return
	}
	m.begin("rope_neox_f32")
	setArgs(m, ropeArgs{L: uint32(L), Cols: uint32(cols), HeadDim: uint32(p.HeadDim), HalfRot: uint32(half), Pos: uint32(pos), Scale: p.Scale})
	m.bytes(1, unsafe.Slice((*byte)(unsafe.Pointer(&p.InvFreq[0])), 4*half))
	m.out(2, x)
	// (heads, L) threadgroups; threads stride the rotary half.
	m.run(metal.Size{W: cols / p.HeadDim, H: L, D: 1}, metal.Size{W: min(half, 256), H: 1, D: 1})
}
