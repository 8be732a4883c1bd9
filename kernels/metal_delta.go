package kernels

import (
	"fmt"
	"unsafe"

	"github.com/ingot-llm/ingot/metal"
)

// convArgs mirrors struct conv_args in shaders/common.h.
type convArgs struct{ L, C, K uint32 }

// deltaArgs mirrors struct delta_args in shaders/common.h.
type deltaArgs struct{ L, NK, DK, NV, DV uint32 }

// CausalConvSiLU runs causal_conv_silu_f32: a thread per channel.
func (m *Metal) CausalConvSiLU(dst, x, w, state *Tensor) {
	L, C, K := x.NumRows(), x.Cols(), w.Cols()
	if dst.Len() != L*C || w.NumRows() != C || state.Len() != (K-1)*C || K < 1 {
		panic(fmt.Sprintf("kernels: CausalConvSiLU: dst %v, x %v, w %v, state %v", dst.Shape, x.Shape, w.Shape, state.Shape))
	}
	if L == 0 {
		return
	}
	m.begin("causal_conv_silu_f32")
	setArgs(m, convArgs{L: uint32(L), C: uint32(C), K: uint32(K)})
	m.in(1, x)
	m.in(2, w)
	if state.Len() > 0 {
		m.out(3, state)
	} else {
		m.in(3, x) // K = 1: no state; bound, never read
	}
	m.out(4, dst)
	m.run(grid1(C))
}

// GatedDeltaNet runs gated_deltanet_f32: a threadgroup per value head, a
// thread per column of its state.
func (m *Metal) GatedDeltaNet(dst, cq, a, b, S *Tensor, p *DeltaParams) {
	mustDelta("GatedDeltaNet", dst, cq, a, b, S, p)
	L := cq.NumRows()
	if L == 0 {
		return
	}
	threads := (max(p.KeyDim, p.ValueDim) + 31) &^ 31
	if threads > 1024 || p.ValueHeads > 1024 {
		panic(fmt.Sprintf("kernels: GatedDeltaNet: head dims %d, %d or %d value heads beyond the kernel's 1024", p.KeyDim, p.ValueDim, p.ValueHeads))
	}
	m.begin("gated_deltanet_f32")
	setArgs(m, deltaArgs{L: uint32(L), NK: uint32(p.KeyHeads), DK: uint32(p.KeyDim), NV: uint32(p.ValueHeads), DV: uint32(p.ValueDim)})
	m.in(1, cq)
	m.in(2, a)
	m.in(3, b)
	m.out(4, S)
	m.out(5, dst)
	m.bytes(6, unsafe.Slice((*byte)(unsafe.Pointer(&p.ALog[0])), 4*len(p.ALog)))
	m.bytes(7, unsafe.Slice((*byte)(unsafe.Pointer(&p.DTBias[0])), 4*len(p.DTBias)))
	m.tgmem(0, 4*(2*p.KeyDim+64))
	m.run(metal.Size{W: p.ValueHeads, H: 1, D: 1}, metal.Size{W: threads, H: 1, D: 1})
}
