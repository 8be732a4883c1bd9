package kernels

import (
	"fmt"
	"unsafe"

	"github.com/ingot-llm/ingot/metal"
)

// attnArgs mirrors struct attn_args in shaders/common.h.
type attnArgs struct {
	L, Pos, Heads, KVHeads, HeadDim uint32
	Scale                           float32
	Window                          uint32
	Softcap                         float32
	Rows, Splits, SplitLen, Blk     uint32
	KStride, Key0, Sinks, Pad2      uint32
}

// attnReduceArgs mirrors struct attn_reduce_args in shaders/common.h.
type attnReduceArgs struct {
	Heads, HeadDim, Splits, Rows, Sinks uint32
}

const (
	attnMaxDh   = 256       // ATTN_MAX_DH in attention.metal
	attnTGBytes = 30 << 10  // staged K and V blocks stay under Metal's 32 kB
	attnWarps   = 8         // prefill: simdgroups per threadgroup to aim for
	attnMaxSG   = 1024 / 32 // simdgroups per threadgroup at most
)

// Attention runs causal GQA over the KV cache; see [AttnParams].
//
// L = 1 runs attn_decode_*_g<G> over splits of the keys and, when there are
// several, attn_reduce_f32 (see attnDecode). L > 1, and the decode shapes
// attn_decode does not take, run the tiled attn_prefill_f32: one threadgroup
// per (KV head, tile of rows), rows chosen so a tile has about 8 simdgroups,
// staging blk keys of K and V per step in threadgroup memory, read once for
// all the query heads of a KV head; an f16 cache (the _f16_f32 kernels) is
// widened to floats as it is staged.
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
	if p.Sinks != nil && (len(p.Sinks) != H || H > 1024) {
		panic(fmt.Sprintf("kernels: Attention: %d sinks for %d heads (one each, at most 1024)", len(p.Sinks), H))
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
	if p.Sinks != nil {
		a.Sinks = 1
	}
	if L == 1 {
		end := pos + 1
		key0 := 0
		if p.Window > 0 {
			key0 = max(0, end-p.Window)
		}
		if n := end - key0; attnDecodeFits(k, v, group, Dh) && n <= attnDecMaxS*attnDecMaxSplits {
			m.attnDecode(dst, q, k, v, a, key0, n, p.Sinks)
			return
		}
	}
	rows := max(1, min(attnWarps, attnMaxSG)/group)
	a.Rows, a.Splits = uint32(rows), 1
	name := "attn_prefill_f32"
	if k.DType == DTypeF16 {
		name = "attn_prefill_f16_f32"
	}
	// On a device that limits command buffers, the rows run in blocks whose
	// estimated work is at most half the limit, each its own dispatch (rows
	// are independent: the bits are those of one dispatch), so the
	// command buffers shrink as the KV length grows (see attnWork). A row
	// reads at most pos+L keys, or the window.
	keys := pos + L
	if p.Window > 0 {
		keys = min(keys, p.Window)
	}
	per, step := attnWork(keys), L
	if m.workLimit > 0 {
		step = max(rows, m.workLimit/2/per/rows*rows)
	}
	for r0 := 0; r0 < L; r0 += step {
		r1 := min(L, r0+step)
		qs, ds := q, dst
		if step < L {
			qs, ds = q.Rows(r0, r1), dst.Rows(r0, r1)
		}
		a.L, a.Pos, a.SplitLen = uint32(r1-r0), uint32(pos+r0), uint32(pos+r1)
		m.begin(name)
		m.call.work = max((r1-r0)*per, 64)
		setArgs(m, a)
		m.bindAttn(qs, k, v, blk, Dh)
		m.out(4, ds)
		m.bindSinks(5, qs, p.Sinks)
		m.run(metal.Size{W: Hkv, H: (r1 - r0 + rows - 1) / rows, D: 1}, metal.Size{W: 32 * rows * group, H: 1, D: 1})
	}
}

// bindSinks binds the attention sinks at [[buffer(i)]] (setBytes), or, when
// there are none, q in their place (the kernels then read nothing there).
func (m *Metal) bindSinks(i int, q *Tensor, sinks []float32) {
	if sinks == nil {
		m.in(i, q)
		return
	}
	m.bytes(i, unsafe.Slice((*byte)(unsafe.Pointer(&sinks[0])), 4*len(sinks)))
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

// Constants of shaders/attention_decode.metal.
const (
	attnDecThreads = 128 // ADEC_TG
	attnDecMaxG    = 8   // ADEC_MAXG
	attnDecMaxS    = 128 // ADEC_MAXS

	attnDecMaxSplits = 4096 // attn_reduce_f32's weights in threadgroup memory
)

// attnDecodeFits reports whether attn_decode runs a cache of these tensors: at
// most 8 query heads per KV head, a head dim that is a multiple of 4 up to
// 256, and k, v bound at 16-byte boundaries (its vector loads).
func attnDecodeFits(k, v *Tensor, group, Dh int) bool {
	return group <= attnDecMaxG && Dh%4 == 0 && Dh <= attnMaxDh && k.Off%16 == 0 && v.Off%16 == 0
}

// attnDecodeSplits cuts n keys for Hkv KV heads into splits for attn_decode:
// about n·Hkv/528 keys each (four blocks per SM of an H100's 132, so the
// keys' loads overlap across the GPU; Apple's GPUs have 8–40 cores, for which
// this is many waves) but 32 at least (one scoring pass) and 128 at most (its
// score buffer). One split (≤ 32 keys) needs no reduce.
func attnDecodeSplits(n, Hkv int) (splits, splitLen int) {
	splitLen = min(attnDecMaxS, max(32, (n*Hkv+527)/528))
	splits = (n + splitLen - 1) / splitLen
	return splits, (n + splits - 1) / splits
}

// attnDecodeNames are the attn_decode instances by cache type (f32, f16) and
// bound on the query heads per KV head (1, 2, 4, 8).
var attnDecodeNames = [2][4]string{
	{"attn_decode_f32_g1", "attn_decode_f32_g2", "attn_decode_f32_g4", "attn_decode_f32_g8"},
	{"attn_decode_f16_f32_g1", "attn_decode_f16_f32_g2", "attn_decode_f16_f32_g4", "attn_decode_f16_f32_g8"},
}

// attnDecodeKernel names attn_decode for a cache of type kv and group ≤ 8
// query heads per KV head: the instance for the smallest power of two ≥ group.
func attnDecodeKernel(kv DType, group int) string {
	i := 0
	for 1<<i < group {
		i++
	}
	if kv == DTypeF16 {
		return attnDecodeNames[1][i]
	}
	return attnDecodeNames[0][i]
}

// attnDecode runs decode attention over keys [key0, key0+n) with attn_decode,
// then attn_reduce_f32 when it took several splits.
func (m *Metal) attnDecode(dst, q, k, v *Tensor, a attnArgs, key0, n int, sinks []float32) {
	H, Hkv, Dh := int(a.Heads), int(a.KVHeads), int(a.HeadDim)
	group := H / Hkv
	splits, splitLen := attnDecodeSplits(n, Hkv)
	a.Rows, a.Splits, a.SplitLen, a.Key0 = 1, uint32(splits), uint32(splitLen), uint32(key0)
	var part metal.Buffer
	if splits > 1 {
		if part = m.partials(H * splits * (Dh + 2)); part == nil {
			return
		}
	}
	m.begin(attnDecodeKernel(k.DType, group))
	setArgs(m, a)
	m.in(1, q)
	m.in(2, k)
	m.in(3, v)
	if splits > 1 {
		m.bind(4, part, 0, true)
	} else {
		m.out(4, dst)
	}
	m.bindSinks(5, q, sinks)
	m.tgmem(0, 4*(group*Dh+group*attnDecMaxS+2*attnDecMaxG+attnDecThreads*4*group))
	m.run(metal.Size{W: Hkv, H: 1, D: splits}, metal.Size{W: attnDecThreads, H: 1, D: 1})
	if splits == 1 {
		return
	}
	m.begin("attn_reduce_f32")
	setArgs(m, attnReduceArgs{Heads: uint32(H), HeadDim: uint32(Dh), Splits: uint32(splits), Rows: uint32(H), Sinks: a.Sinks})
	m.bind(1, part, 0, false)
	m.out(2, dst)
	m.bindSinks(3, q, sinks)
	m.tgmem(0, 4*(splits+attnDecThreads/32))
	m.run(metal.Size{W: H, H: 1, D: 1}, metal.Size{W: attnDecThreads, H: 1, D: 1})
}
