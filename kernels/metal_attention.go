package kernels

import (
	"fmt"

	"github.com/ingot-llm/ingot/metal"
)

// attnArgs mirrors struct attn_args in shaders/common.h.
type attnArgs struct {
	L, Pos, Heads, KVHeads, HeadDim uint32
	Scale                           float32
	Window                          uint32
	Softcap                         float32
	Rows, Splits, SplitLen, Blk     uint32
	KStride, Key0, Pad1, Pad2       uint32
}

// attnReduceArgs mirrors struct attn_reduce_args in shaders/common.h.
type attnReduceArgs struct {
	Heads, HeadDim, Splits, Rows uint32
}

const (
	attnMaxDh   = 256       // ATTN_MAX_DH in attention.metal
	attnTGBytes = 30 << 10  // staged K and V blocks stay under Metal's 32 kB
	attnSplit   = 256       // decode: aim for this many keys per split …
	attnSplits  = 32        // … and at most this many splits
	attnWarps   = 8         // prefill: simdgroups per threadgroup to aim for
	attnMaxSG   = 1024 / 32 // simdgroups per threadgroup at most
)

// Attention runs causal GQA over the KV cache; see [AttnParams].
//
// L = 1 is flash-decoding (attn_decode_f32 + attn_reduce_f32): the visible keys
// are cut into ≤ 32 splits of ≥ 256 keys, one threadgroup per (KV head, split)
// with one simdgroup per query head of the group, then a reduce. L > 1 is tiled
// (attn_prefill_f32): one threadgroup per (KV head, tile of rows), rows chosen
// so a tile has about 8 simdgroups. Both stage blk keys of K and V per step in
// threadgroup memory, read once for all the query heads of a KV head; an f16
// cache (the _f16_f32 kernels) is widened to floats as it is staged.
func (m *Metal) Attention(dst, q, k, v *Tensor, pos int, p *AttnParams) {
	L := q.NumRows()
	H, Hkv, Dh := p.Heads, p.KVHeads, p.HeadDim
	qw, kw := H*Dh, Hkv*Dh
	mustShape("Attention", "q", q, L, qw)
	mustShape("Attention", "dst", dst, L, qw)
	if k.Cols() != kw || v.Cols() != kw || k.NumRows() < pos+L || v.NumRows() < pos+L || Hkv <= 0 || H%Hkv != 0 {
		panic(fmt.Sprintf("kernels: Attention: k %v, v %v for pos %d, L %d, %d/%d heads of %d", k.Shape, v.Shape, pos, L, H, Hkv, Dh))
	}
	group := H / Hkv
	if k.DType != v.DType || (k.DType != DTypeF32 && k.DType != DTypeF16) {
		panic(fmt.Sprintf("kernels: Attention: %s k, %s v (want f32 or f16, both alike)", k.DType, v.DType))
	}
	if Dh > attnMaxDh || group > attnMaxSG {
		panic(fmt.Sprintf("kernels: Attention: head dim %d (max %d) or %d query heads per KV head (max %d) unsupported by the metal kernels", Dh, attnMaxDh, group, attnMaxSG))
	}
	if L == 0 {
		return
	}
	// Keys per staged block: K (stride Dh+1) and V rows within attnTGBytes.
	blk := min(32, attnTGBytes/4/(2*Dh+1))
	a := attnArgs{L: uint32(L), Pos: uint32(pos), Heads: uint32(H), KVHeads: uint32(Hkv), HeadDim: uint32(Dh),
		Scale: p.Scale, Window: uint32(max(p.Window, 0)), Softcap: p.Softcap, Blk: uint32(blk), KStride: uint32(Dh + 1)}

	if L > 1 {
		rows := max(1, min(attnWarps, attnMaxSG)/group)
		a.Rows, a.Splits, a.SplitLen = uint32(rows), 1, uint32(pos+L)
		m.begin(attnKernel(false, k.DType))
		setArgs(m, a)
		m.bindAttn(q, k, v, blk, Dh)
		m.out(4, dst)
		m.run(metal.Size{W: Hkv, H: (L + rows - 1) / rows, D: 1}, metal.Size{W: 32 * rows * group, H: 1, D: 1})
		return
	}

	end := pos + 1
	key0 := 0
	if p.Window > 0 {
		key0 = max(0, end-p.Window)
	}
	n := end - key0
	if m.shape == shapeNVIDIA && attnNVFits(k, v, group, Dh) && n <= attnNVMaxS*attnNVMaxSplits {
		m.attnDecodeNV(dst, q, k, v, a, key0, n)
		return
	}
	splits := min(attnSplits, max(1, n/attnSplit))
	splitLen := (n + splits - 1) / splits
	splitLen = (splitLen + blk - 1) / blk * blk
	splits = (n + splitLen - 1) / splitLen
	a.Rows, a.Splits, a.SplitLen, a.Key0 = 1, uint32(splits), uint32(splitLen), uint32(key0)
	part := m.partials(L * H * splits * (Dh + 2))
	if part == nil {
		return
	}
	m.begin(attnKernel(true, k.DType))
	setArgs(m, a)
	m.bindAttn(q, k, v, blk, Dh)
	m.bind(4, part, 0, true)
	m.run(metal.Size{W: Hkv, H: 1, D: splits}, metal.Size{W: 32 * group, H: 1, D: 1})

	m.begin("attn_reduce_f32")
	setArgs(m, attnReduceArgs{Heads: uint32(H), HeadDim: uint32(Dh), Splits: uint32(splits), Rows: uint32(L * H)})
	m.bind(1, part, 0, false)
	m.out(2, dst)
	m.run(metal.Size{W: L * H, H: 1, D: 1}, metal.Size{W: 32, H: 1, D: 1})
}

// attnKernel names the prefill or decode kernel for a cache of type kv.
func attnKernel(decode bool, kv DType) string {
	switch {
	case decode && kv == DTypeF16:
		return "attn_decode_f16_f32"
	case decode:
		return "attn_decode_f32"
	case kv == DTypeF16:
		return "attn_prefill_f16_f32"
	}
	return "attn_prefill_f32"
}

func (m *Metal) bindAttn(q, k, v *Tensor, blk, Dh int) {
	m.in(1, q)
	m.in(2, k)
	m.in(3, v)
	m.tgmem(0, 4*blk*(Dh+1))
	m.tgmem(1, 4*blk*Dh)
}

// partials returns the flash-decoding scratch buffer of at least n floats.
func (m *Metal) partials(n int) metal.Buffer {
	if m.attnPart == nil || m.attnPart.Len() < 4*n {
		if m.attnPart != nil {
			m.pending = append(m.pending, m.attnPart) // in use until the next Sync
		}
		b, err := m.newBuffer(4 * max(n, 4096))
		if err != nil {
			m.fail(err)
			return nil
		}
		m.attnPart = b
	}
	return m.attnPart
}

// Constants of shaders/attention_nv.metal.
const (
	attnNVThreads = 128 // ANV_TG
	attnNVMaxG    = 8   // ANV_MAXG
	attnNVMaxS    = 128 // ANV_MAXS

	attnNVMaxSplits = 4096 // attn_reduce_nv_f32's weights in threadgroup memory
)

// attnNVFits reports whether attn_decode_nv runs a cache of these tensors: at
// most 8 query heads per KV head, a head dim that is a multiple of 4 up to
// 256, and k, v bound at 16-byte boundaries (its vector loads).
func attnNVFits(k, v *Tensor, group, Dh int) bool {
	return group <= attnNVMaxG && Dh%4 == 0 && Dh <= attnMaxDh && k.Off%16 == 0 && v.Off%16 == 0
}

// attnNVSplits cuts n keys for Hkv KV heads into splits for attn_decode_nv:
// about n·Hkv/528 keys each (four blocks per SM of an H100's 132, so the
// keys' loads overlap across the GPU) but 32 at least (one scoring pass) and
// 128 at most (its score buffer). One split (≤ 32 keys) needs no reduce.
func attnNVSplits(n, Hkv int) (splits, splitLen int) {
	splitLen = min(attnNVMaxS, max(32, (n*Hkv+527)/528))
	splits = (n + splitLen - 1) / splitLen
	return splits, (n + splits - 1) / splits
}

// attnNVKernel names attn_decode_nv for a cache of type kv and group query
// heads per KV head: the instance for the smallest power of two ≥ group.
func attnNVKernel(kv DType, group int) string {
	gm := 1
	for gm < group {
		gm *= 2
	}
	if kv == DTypeF16 {
		return fmt.Sprintf("attn_decode_nv_f16_f32_g%d", gm)
	}
	return fmt.Sprintf("attn_decode_nv_f32_f32_g%d", gm)
}

// attnDecodeNV runs decode attention with the NVIDIA-shaped attn_decode_nv
// over keys [key0, key0+n), then attn_reduce_nv_f32 when it took several splits.
func (m *Metal) attnDecodeNV(dst, q, k, v *Tensor, a attnArgs, key0, n int) {
	H, Hkv, Dh := int(a.Heads), int(a.KVHeads), int(a.HeadDim)
	group := H / Hkv
	splits, splitLen := attnNVSplits(n, Hkv)
	a.Rows, a.Splits, a.SplitLen, a.Key0 = 1, uint32(splits), uint32(splitLen), uint32(key0)
	name := attnNVKernel(k.DType, group)
	var part metal.Buffer
	if splits > 1 {
		if part = m.partials(H * splits * (Dh + 2)); part == nil {
			return
		}
	}
	m.begin(name)
	setArgs(m, a)
	m.in(1, q)
	m.in(2, k)
	m.in(3, v)
	if splits > 1 {
		m.bind(4, part, 0, true)
	} else {
		m.out(4, dst)
	}
	m.tgmem(0, 4*(group*Dh+group*attnNVMaxS+2*attnNVMaxG+attnNVThreads*4*group))
	m.run(metal.Size{W: Hkv, H: 1, D: splits}, metal.Size{W: attnNVThreads, H: 1, D: 1})
	if splits == 1 {
		return
	}
	m.begin("attn_reduce_nv_f32")
	setArgs(m, attnReduceArgs{Heads: uint32(H), HeadDim: uint32(Dh), Splits: uint32(splits), Rows: uint32(H)})
	m.bind(1, part, 0, false)
	m.out(2, dst)
	m.tgmem(0, 4*(splits+attnNVThreads/32))
	m.run(metal.Size{W: H, H: 1, D: 1}, metal.Size{W: attnNVThreads, H: 1, D: 1})
}
