package kernels

import (
	"fmt"
	"unsafe"

	"github.com/ingot-llm/ingot/metal"
)

// ropeStoreArgs mirrors struct rope_store_args in shaders/common.h.
type ropeStoreArgs struct {
	L, Heads, KVHeads, HeadDim, HalfRot, Pos uint32
	Scale                                    float32
	Pad                                      uint32
}

// anrPer is ANR_PER in shaders/fused.metal: float4s a thread holds.
const anrPer = 4

// vecNormThreads returns the threads of an add_rmsnorm_f32 / rmsnorm_vec_f32
// threadgroup for n-wide rows of tensors ts, or 0 where they do not run it:
// n a multiple of 4 up to 4·anrPer·1024, every tensor 16-byte aligned.
func vecNormThreads(n int, ts ...*Tensor) int {
	if n%4 != 0 || n > 4*anrPer*1024 {
		return 0
	}
	for _, t := range ts {
		if t.Off%16 != 0 {
			return 0
		}
	}
	return min(1024, (n/4+31)&^31) // one float4 a thread up to 4096-wide rows
}

// AddRMSNorm adds h into x and normalizes x's rows into dst
// (add_rmsnorm_f32: one launch), or runs Add and RMSNorm where that kernel
// does not take the shapes.
func (m *Metal) AddRMSNorm(dst, x, h, w *Tensor, eps float32) {
	n := w.Len()
	if dst.Len() != x.Len() || h.Len() != x.Len() || x.Len()%n != 0 || w.DType != DTypeF32 {
		panic(fmt.Sprintf("kernels: AddRMSNorm: dst %v, x %v, h %v, w %s%v", dst.Shape, x.Shape, h.Shape, w.DType, w.Shape))
	}
	threads := vecNormThreads(n, dst, x, h, w)
	if threads == 0 {
		m.Add(x, x, h)
		m.RMSNorm(dst, x, w, eps)
		return
	}
	m.vecNorm("add_rmsnorm_f32", dst, x, h, w, eps, threads)
}

// vecNorm dispatches add_rmsnorm_f32 or rmsnorm_vec_f32 (h unused but bound).
func (m *Metal) vecNorm(name string, dst, x, h, w *Tensor, eps float32, threads int) {
	n := w.Len()
	m.begin(name)
	setArgs(m, rmsnormArgs{N: uint32(n), Eps: eps})
	if name == "add_rmsnorm_f32" {
		m.out(1, x)
	} else {
		m.in(1, x)
	}
	m.in(2, h)
	m.in(3, w)
	m.out(4, dst)
	m.tgmem(0, 4*32)
	m.run(metal.Size{W: x.Len() / n, H: 1, D: 1}, metal.Size{W: threads, H: 1, D: 1})
}

// RoPEStore rotates q and k and writes k and v into the caches at rows
// [pos, pos+L) in one launch (rope_store_f32 / rope_store_f16_f32).
func (m *Metal) RoPEStore(q, k, v, kc, vc *Tensor, pos int, p *RoPE) {
	L, Dh := q.NumRows(), p.HeadDim
	half := len(p.InvFreq)
	if Dh <= 0 || q.Cols()%Dh != 0 || k.Cols()%Dh != 0 || 2*half != p.RotaryDim || p.RotaryDim > Dh || 4*half > 4096 {
		panic(fmt.Sprintf("kernels: RoPEStore: q %v, k %v with head dim %d, rotary dim %d, %d frequencies", q.Shape, k.Shape, Dh, p.RotaryDim, half))
	}
	kw := k.Cols()
	mustShape("RoPEStore", "k", k, L, kw)
	mustShape("RoPEStore", "v", v, L, kw)
	if kc.Cols() != kw || vc.Cols() != kw || kc.DType != vc.DType || (kc.DType != DTypeF32 && kc.DType != DTypeF16) ||
		pos < 0 || pos+L > kc.NumRows() || pos+L > vc.NumRows() {
		panic(fmt.Sprintf("kernels: RoPEStore: %s caches %v, %v for k %v at row %d", kc.DType, kc.Shape, vc.Shape, k.Shape, pos))
	}
	if L == 0 {
		return
	}
	if half == 0 {
		m.CopyRows(kc, k, pos)
		m.CopyRows(vc, v, pos)
		return
	}
	name := "rope_store_f32"
	if kc.DType == DTypeF16 {
		name = "rope_store_f16_f32"
	}
	H, Hkv := q.Cols()/Dh, kw/Dh
	m.begin(name)
	setArgs(m, ropeStoreArgs{L: uint32(L), Heads: uint32(H), KVHeads: uint32(Hkv), HeadDim: uint32(Dh), HalfRot: uint32(half), Pos: uint32(pos), Scale: p.Scale})
	m.bytes(1, unsafe.Slice((*byte)(unsafe.Pointer(&p.InvFreq[0])), 4*half))
	m.out(2, q)
	m.out(3, k)
	m.in(4, v)
	m.out(5, kc)
	m.out(6, vc)
	m.run(metal.Size{W: H + 2*Hkv, H: L, D: 1}, metal.Size{W: min(256, (max(half, Dh/2)+31)&^31), H: 1, D: 1})
}

// AddScaled adds c·x into dst (add_scaled_f32).
func (m *Metal) AddScaled(dst, x *Tensor, c float32) {
	n := dst.Len()
	if x.Len() != n {
		panic(fmt.Sprintf("kernels: AddScaled: dst %v, x %v", dst.Shape, x.Shape))
	}
	if n == 0 {
		return
	}
	m.begin("add_scaled_f32")
	setArgs(m, unaryArgs{N: uint32(n), C: c})
	m.in(1, x)
	m.out(2, dst)
	m.run(grid1(n))
}
