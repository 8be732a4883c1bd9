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

// Geometry of shaders/matmul_tc.metal.
const (
	mmtcBM      = 64  // MMTC_BM: tokens per tile
	mmtcBN      = 128 // MMTC_BN: weight rows per tile
	mmtcBK      = 32  // MMTC_BK: columns per step
	mmtcThreads = 256 // MMTC_THREADS
	mmtcPieces  = 3   // MMTC_PIECES: bf16 pieces of x
	mmtcRW      = 16  // MMTC_RW: words per staged row
)

// nvTC turns the tensor-core prefill (matmul_<w>_f32_tc) on where the GPU has
// the tensor cores it needs. INGOT_NV_TC=0 turns it off, so that an A/B run on
// a GPU times it against matmul_<w>_f32_nv (the SIMT kernel) in one build.
var nvTC = os.Getenv("INGOT_NV_TC") != "0"

// tensorCores reports whether dev runs matmul_<w>_f32_tc: a device reporting a
// compute capability of 8.0 or later (mma.sync m16n8k16 with bf16; the module
// targets sm_80, and cudadev refuses it on an older GPU). The interpreter
// reports none.
func tensorCores(dev metal.Device) bool {
	cc, ok := dev.(interface{ ComputeCapability() (major, minor int) })
	if !ok {
		return false
	}
	major, _ := cc.ComputeCapability()
	return major >= 8
}

// matmulTCName returns the tensor-core prefill kernel for w (N, K), or ""
// where it does not apply (f32 and f16 weights stay on matmul_<w>_f32_nv):
//
//	weight                            kernel
//	q4, q8; groups a multiple of 32   matmul_<w>_f32_tc
//	bf16 (K % 8 = 0)                  matmul_bf16_f32_tc
func matmulTCName(w *Tensor, K int) string {
	switch w.DType {
	case DTypeQ4, DTypeQ8:
		if w.GroupSize <= 0 || w.GroupSize%mmtcBK != 0 {
			return ""
		}
		if w.DType == DTypeQ4 {
			return "matmul_q4_f32_tc"
		}
		return "matmul_q8_f32_tc"
	case DTypeBF16:
		if K%8 == 0 {
			return "matmul_bf16_f32_tc"
		}
	}
	return ""
}

// matmulNV runs dst (L, N) = x (L, K) · wᵀ as one matmul_<w>_f32_tc launch (on
// a GPU with tensor cores, see matmulTCName) or one matmul_<w>_f32_nv launch
// and reports true, or does nothing and reports false where neither applies
// (see matmulNVName; x and w must start 16-byte aligned). The caller has
// checked the shapes.
func (m *Metal) matmulNV(dst, x, w *Tensor, L, N, K int) bool {
	if !nvMatMul || x.Off%16 != 0 || w.Off%16 != 0 {
		return false
	}
	if name := matmulTCName(w, K); name != "" && nvTC && tensorCores(m.dev) {
		// (⌈N/128⌉, ⌈L/64⌉) threadgroups of 256 threads; x's bf16 pieces
		// and Σx per token, W's bf16 and (scale, bias) per row staged.
		m.begin(name)
		setArgs(m, matmulArgs{L: uint32(L), N: uint32(N), K: uint32(K), GroupSize: uint32(w.GroupSize)})
		m.bindMat(w, x, dst)
		m.tgmem(0, 4*(mmtcPieces*mmtcBM*mmtcRW+mmtcBM))
		m.tgmem(1, 4*(mmtcBN*mmtcRW+2*mmtcBN))
		m.run(metal.Size{W: (N + mmtcBN - 1) / mmtcBN, H: (L + mmtcBM - 1) / mmtcBM, D: 1}, metal.Size{W: mmtcThreads, H: 1, D: 1})
		return true
	}
	name := matmulNVName(w, K)
	if name == "" {
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
