package kernels

import (
	"fmt"

	"github.com/ingot-llm/ingot/metal"
)

// rmsnormArgs mirrors struct rmsnorm_args in shaders/common.h.
type rmsnormArgs struct {
	N   uint32
	Eps float32
}

// RMSNorm normalizes every len(w)-wide row of x into dst (rmsnorm_f32; on
// NVIDIA GPUs rmsnorm_vec_f32 where it takes the shapes: float4 loads, the
// row held in registers, ~1 load latency a row instead of one per element
// a thread strides).
func (m *Metal) RMSNorm(dst, x, w *Tensor, eps float32) {
	n := w.Len()
	if dst.Len() != x.Len() || x.Len()%n != 0 || w.DType != DTypeF32 {
		panic(fmt.Sprintf("kernels: RMSNorm: dst %v, x %v, w %s%v", dst.Shape, x.Shape, w.DType, w.Shape))
	}
	rows := x.Len() / n
	if m.shape == shapeNVIDIA {
		if threads := vecNormThreads(n, dst, x, w); threads > 0 {
			if m.norm.dst != nil {
				m.flushNorm()
			}
			if rows == 1 && nvStagedBytes(n) <= nvStageBytes && !overlap(dst, x) {
				m.norm = pendingNorm{dst: dst, x: x, w: w, eps: eps} // see pendingNorm
				return
			}
			m.vecNorm("rmsnorm_vec_f32", dst, x, x, w, eps, threads)
			return
		}
	}
	// One threadgroup per row; threads stride it, at most 1024, a whole number
	// of simdgroups; one float of threadgroup memory per simdgroup.
	threads := min(1024, (n+31)&^31)
	m.begin("rmsnorm_f32")
	setArgs(m, rmsnormArgs{N: uint32(n), Eps: eps})
	m.in(1, x)
	m.in(2, w)
	m.out(3, dst)
	m.tgmem(0, 4*32)
	m.run(metal.Size{W: rows, H: 1, D: 1}, metal.Size{W: threads, H: 1, D: 1})
}

// pendingNorm is an RMSNorm of one row that an NVIDIA-shaped backend has not
// encoded yet: if the next op is a mat-vec of its output (MatMuls or MatMulGLU
// of a decode step, the _xs kernels), that launch stages the normalized row
// itself and writes dst from its first threadgroup (matvec_nv.metal, mode bit
// 1): one launch fewer. Any other op, and every commit, encodes it first
// (flushNorm), so the ops' order and results stay as enqueued.
type pendingNorm struct {
	dst, x, w *Tensor // nil dst: none
	eps       float32
}

// flushNorm encodes the pending RMSNorm.
func (m *Metal) flushNorm() {
	p := m.norm
	m.norm = pendingNorm{}
	m.vecNorm("rmsnorm_vec_f32", p.dst, p.x, p.x, p.w, p.eps, vecNormThreads(p.w.Len(), p.dst, p.x, p.w))
}

// takeNorm returns the pending RMSNorm and clears it if x is its output (the
// caller stages the normalized row instead), else false.
func (m *Metal) takeNorm(x *Tensor) (pendingNorm, bool) {
	p := m.norm
	if p.dst == nil || x.Buf != p.dst.Buf || x.Off != p.dst.Off || x.Len() != p.dst.Len() {
		return pendingNorm{}, false
	}
	m.norm = pendingNorm{}
	return p, true
}

// overlap reports whether a and b share bytes of one buffer.
func overlap(a, b *Tensor) bool {
	return a.Buf == b.Buf && a.Off < b.Off+b.DType.RowBytes(b.Len()) && b.Off < a.Off+a.DType.RowBytes(a.Len())
}

// FoldsNorm reports whether b folds a decode step's residual adds into the
// mat-vec before them (MatMulAdd) and its RMSNorms into the mat-vecs that
// read them (see pendingNorm): an NVIDIA-shaped Metal backend. A decoder then
// runs MatMulAdd and RMSNorm where it would run MatMul and AddRMSNorm, a
// launch fewer each time; elsewhere AddRMSNorm is the form with fewer ops.
func FoldsNorm(b Backend) bool {
	m, ok := b.(*Metal)
	return ok && m.shape == shapeNVIDIA
}
