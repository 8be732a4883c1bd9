package kernels

import (
	"os"

	"github.com/ingot-llm/ingot/metal"
)

// Geometry of shaders/matmul_nv.metal.
const (
	mmnvBM      = 64         // MMNV_BM: tokens per tile
	mmnvBN      = 128        // MMNV_BN: weight rows per tile
	mmnvBK      = 32         // MMNV_BK: columns per step
	mmnvXS      = mmnvBM + 4 // MMNV_XS: staged x, floats per column
	mmnvWS      = mmnvBN + 4 // MMNV_WS: staged W, floats per column
	mmnvThreads = 128        // MMNV_THREADS
)

// nvMatMul turns the NVIDIA-shaped prefill mat-mat on. INGOT_NV_MATMUL=0
// turns it off, so that an A/B run on a GPU times matmul_<w>_f32 (the
// Apple-shaped tiles) against it in one build; tests switch it too.
var nvMatMul = os.Getenv("INGOT_NV_MATMUL") != "0"

// matmulNVName returns the NVIDIA-shaped prefill kernel for w (N, K), or ""
// where it does not apply:
//
//	weight                                  kernel
//	q4, q8; groups a multiple of 32         matmul_<w>_f32_nv
//	f32 (K % 4 = 0), f16, bf16 (K % 8 = 0)  matmul_<w>_f32_nv
//	any other                               "" (matmul_<w>_f32)
//
// The K rules keep each 16-byte load of W and x inside a row.
func matmulNVName(w *Tensor, K int) string {
	switch w.DType {
	case DTypeQ4, DTypeQ8:
		if w.GroupSize%mmnvBK != 0 {
			return ""
		}
		if w.DType == DTypeQ4 {
			return "matmul_q4_f32_nv"
		}
		return "matmul_q8_f32_nv"
	case DTypeF32:
		if K%4 == 0 {
			return "matmul_f32_f32_nv"
		}
	case DTypeF16:
		if K%8 == 0 {
			return "matmul_f16_f32_nv"
		}
	case DTypeBF16:
		if K%8 == 0 {
			return "matmul_bf16_f32_nv"
		}
	}
	return ""
}

// matmulNV runs dst (L, N) = x (L, K) · wᵀ as one matmul_<w>_f32_nv launch and
// reports true, or does nothing and reports false where the kernel does not
// apply (see matmulNVName; x and w must start 16-byte aligned). The caller has
// checked the shapes.
func (m *Metal) matmulNV(dst, x, w *Tensor, L, N, K int) bool {
	name := matmulNVName(w, K)
	if name == "" || !nvMatMul || x.Off%16 != 0 || w.Off%16 != 0 {
		return false
	}
	// (⌈N/128⌉, ⌈L/64⌉) threadgroups of 128 threads; x and W steps of 32
	// columns transposed in threadgroup memory.
	m.begin(name)
	setArgs(m, matmulArgs{L: uint32(L), N: uint32(N), K: uint32(K), GroupSize: uint32(w.GroupSize)})
	m.bindMat(w, x, dst)
	m.tgmem(0, 4*mmnvBK*mmnvXS)
	m.tgmem(1, 4*mmnvBK*mmnvWS)
	m.run(metal.Size{W: (N + mmnvBN - 1) / mmnvBN, H: (L + mmnvBM - 1) / mmnvBM, D: 1}, metal.Size{W: mmnvThreads, H: 1, D: 1})
	return true
}
