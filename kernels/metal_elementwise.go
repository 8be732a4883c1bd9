package kernels

import (
	"fmt"
)

// addArgs mirrors struct add_args in shaders/common.h.
type addArgs struct{ N, NB uint32 }

// unaryArgs mirrors struct unary_args in shaders/common.h.
type unaryArgs struct {
	N uint32
	C float32
}

var gluNames = [...]string{ActSiLU: "glu_silu_f32", ActGELUTanh: "glu_gelu_tanh_f32", ActGELU: "glu_gelu_f32", ActSwiGLUClamp: "glu_silu_clamp_f32", ActSigmoid: "glu_sigmoid_f32"}

// Add computes dst = a + b, b of a's shape or one row broadcast (add_f32).
func (m *Metal) Add(dst, a, b *Tensor) {
	n, nb := a.Len(), b.Len()
	if dst.Len() != n || nb == 0 || n%nb != 0 || (nb != n && nb != a.Cols()) {
		panic(fmt.Sprintf("kernels: Add: dst %v, a %v, b %v", dst.Shape, a.Shape, b.Shape))
	}
	m.begin("add_f32")
	setArgs(m, addArgs{N: uint32(n), NB: uint32(nb)})
	m.in(1, a)
	m.in(2, b)
	m.out(3, dst)
	m.run(grid1(n))
}

// GLU computes dst = act(gate)·up (glu_<act>_f32).
func (m *Metal) GLU(dst, gate, up *Tensor, act Act) {
	n := gate.Len()
	if dst.Len() != n || up.Len() != n || int(act) >= len(gluNames) {
		panic(fmt.Sprintf("kernels: GLU: dst %v, gate %v, up %v, act %d", dst.Shape, gate.Shape, up.Shape, act))
	}
	m.begin(gluNames[act])
	setArgs(m, unaryArgs{N: uint32(n)})
	m.in(1, gate)
	m.in(2, up)
	m.out(3, dst)
	m.run(grid1(n))
}

// Softcap applies x = c·tanh(x/c) in place (softcap_f32).
func (m *Metal) Softcap(x *Tensor, c float32) {
	n := x.Len()
	m.begin("softcap_f32")
	setArgs(m, unaryArgs{N: uint32(n), C: c})
	m.out(1, x)
	m.run(grid1(n))
}

// CopyRows copies src's rows into dst from row on (copy_f32), rounding them
// to halves for an f16 dst (copy_f16_f32).
func (m *Metal) CopyRows(dst, src *Tensor, row int) {
	if src.Cols() != dst.Cols() || row < 0 || row+src.NumRows() > dst.NumRows() || (dst.DType != DTypeF32 && dst.DType != DTypeF16) {
		panic(fmt.Sprintf("kernels: CopyRows: %s src %v into %s dst %v at row %d", src.DType, src.Shape, dst.DType, dst.Shape, row))
	}
	n := src.Len()
	if dst.DType == DTypeF16 {
		m.begin("copy_f16_f32")
	} else {
		m.begin("copy_f32")
	}
	setArgs(m, unaryArgs{N: uint32(n)})
	m.in(1, src)
	m.bind(2, bufOf("CopyRows", dst), dst.Off+dst.DType.RowBytes(dst.Cols())*row, true)
	m.run(grid1(n))
}
