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
