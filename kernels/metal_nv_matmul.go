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
// q4/q8 weights take the int8 kernels (matmulTC8Name; the backend's nvTC8
// field) unless INGOT_NV_TC=bf16.
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
		if name8 := matmulTC8Name(w); name8 != "" && m.nvTC8 {
			return m.matmulTC8(dst, x, w, L, N, K, name8)
		}
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

// Geometry of matmul_tc.metal's _tc8 kernels (the tiles are matmul_tc's).
const (
	mmt8RW       = 8                                   // MMT8_RW: words per staged row (32 bytes)
	mmt8XWords   = 3*mmtcBM*mmt8RW + mmtcBM + 2*mmtcBM // xs: three planes, dx, (Σx, c·E) per token
	mmt8WWords   = mmtcBN*mmt8RW + 2*mmtcBN            // ws: codes as bytes, (scale, bias) per row
	mmt8QThreads = 128                                 // quantx_tc8: 4 groups a threadgroup
)

// matmulTC8Name returns the int8 tensor-core prefill kernel for w, or ""
// where it does not apply: q4 and q8 with groups of 32, 64 or 128 (a group
// must divide quantx_tc8's threadgroup of 4 pieces).
func matmulTC8Name(w *Tensor) string {
	if w.GroupSize != 32 && w.GroupSize != 64 && w.GroupSize != 128 {
		return ""
	}
	switch w.DType {
	case DTypeQ4:
		return "matmul_q4_f32_tc8"
	case DTypeQ8:
		return "matmul_q8_f32_tc8"
	}
	return ""
}

// quantXTC8Bytes is the size of quantx_tc8's output for x (L, K) and groups
// of G (matmul_tc.metal: 96 bytes of planes a token a 32-column piece, then a
// float dx a token a piece, then a float2 (Σx, c·E) a token a group, each
// part starting 16-byte aligned) and the offsets of dx and the group sums.
func quantXTC8Bytes(L, K, G int) (total, dxOff, gsOff int) {
	np := K / 32
	dxOff = 96 * np * L
	gsOff = (dxOff + 4*np*L + 15) &^ 15
	return gsOff + 8*(K/G)*L, dxOff, gsOff
}

// matmulTC8 runs dst (L, N) = x (L, K) · wᵀ as quantx_<w>_f32_tc8 into the
// backend's scratch buffer nvQX8 (grown on demand; reused by the next call,
// ordered by the hazard tracking) and one matmul_<w>_f32_tc8 launch, and
// reports true (also after recording an allocation error).
func (m *Metal) matmulTC8(dst, x, w *Tensor, L, N, K int, name string) bool {
	G := w.GroupSize
	n, dxOff, gsOff := quantXTC8Bytes(L, K, G)
	if m.nvQX8 == nil || m.nvQX8.Len() < n {
		if m.nvQX8 != nil {
			m.pending = append(m.pending, m.nvQX8) // in use until the next Sync
		}
		b, err := m.newBuffer(max(n, 1<<20))
		if err != nil {
			m.fail(err)
			return true
		}
		m.nvQX8 = b
	}
	args := matmulArgs{L: uint32(L), N: uint32(N), K: uint32(K), GroupSize: uint32(G)}
	quant := "quantx_q4_f32_tc8"
	if w.DType == DTypeQ8 {
		quant = "quantx_q8_f32_tc8"
	}
	// (L, ⌈(K/G)/4⌉) threadgroups of 128 threads: a simdgroup a group of a token.
	m.begin(quant)
	setArgs(m, args)
	m.in(1, x)
	m.bind(2, m.nvQX8, 0, true)
	m.bind(3, m.nvQX8, dxOff, true)
	m.bind(4, m.nvQX8, gsOff, true)
	m.run(metal.Size{W: L, H: (K/G + 3) / 4, D: 1}, metal.Size{W: mmt8QThreads, H: 1, D: 1})
	// (⌈N/128⌉, ⌈L/64⌉) threadgroups of 256 threads, as matmul_<w>_f32_tc.
	m.begin(name)
	setArgs(m, args)
	m.in(1, w)
	m.bind(2, m.nvQX8, 0, false)
	m.out(3, dst)
	m.in(4, w.Scales)
	m.in(5, w.Biases)
	m.bind(6, m.nvQX8, dxOff, false)
	m.bind(7, m.nvQX8, gsOff, false)
	m.tgmem(0, 4*mmt8XWords)
	m.tgmem(1, 4*mmt8WWords)
	m.run(metal.Size{W: (N + mmtcBN - 1) / mmtcBN, H: (L + mmtcBM - 1) / mmtcBM, D: 1}, metal.Size{W: mmtcThreads, H: 1, D: 1})
	return true
}
