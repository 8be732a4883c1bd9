package kernels

import (
	"fmt"
	"unsafe"

	"github.com/ingot-llm/ingot/metal"
)

// embedArgs mirrors struct embed_args in shaders/common.h.
type embedArgs struct {
	D, GroupSize uint32
	Scale        float32
	L            uint32
}

var embedNames [DTypeQ6K + 1]string

func init() {
	for d := range embedNames {
		embedNames[d] = "embed_" + DType(d).String() + "_f32"
	}
}

// Embed gathers rows of table (V, D) for tokens into dst (L, D), times scale
// (embed_<table dtype>_f32). Token ids out of range panic.
func (m *Metal) Embed(dst, table *Tensor, tokens []int32, scale float32) {
	V, D := table.Shape[0], table.Cols()
	L := len(tokens)
	mustShape("Embed", "dst", dst, L, D)
	for _, t := range tokens {
		if t < 0 || int(t) >= V {
			panic(fmt.Sprintf("kernels: Embed: token %d out of range [0, %d)", t, V))
		}
	}
	if L == 0 {
		return
	}
	m.beginEmbed(dst, table, scale, L)
	ids := unsafe.Slice((*byte)(unsafe.Pointer(&tokens[0])), 4*L)
	if len(ids) <= 4096 { // setBytes' limit
		m.bytes(2, ids)
	} else if b := m.transient(ids); b != nil {
		m.bind(2, b, 0, false)
	}
	m.runEmbed(table, L)
}

// beginEmbed starts embed_<table dtype>_f32 (affine tables with 16-bit scales
// and biases: embed_<w>_f32_<sb>, see affineNames) for L tokens, the first op of a
// forward call (see startCall); the caller binds their ids at [[buffer(2)]]
// and calls runEmbed.
func (m *Metal) beginEmbed(dst, table *Tensor, scale float32, L int) {
	m.startCall(L)
	m.begin(affineName(embedNames[table.DType], affEmbed, table))
	setArgs(m, embedArgs{D: uint32(table.Cols()), GroupSize: uint32(table.GroupSize), Scale: scale, L: uint32(L)})
	m.in(1, table)
	m.out(3, dst)
	if table.DType.Quantized() {
		m.in(4, table.Scales)
		m.in(5, table.Biases)
	}
}

func (m *Metal) runEmbed(table *Tensor, L int) {
	// (⌈D/256⌉, L) threadgroups of 256 threads: one element per thread.
	m.run(metal.Size{W: (table.Cols() + 255) / 256, H: L, D: 1}, metal.Size{W: 256, H: 1, D: 1})
	m.stats.WeightBytes += weightBytes(table, L)
}
