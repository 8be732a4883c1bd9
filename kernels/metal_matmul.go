package kernels

import (
	"fmt"

	"github.com/ingot-llm/ingot/metal"
)

// matvecArgs mirrors struct matvec_args in shaders/common.h.
type matvecArgs struct {
	K, N, GroupSize, L uint32
}

// matmulArgs mirrors struct matmul_args in shaders/common.h.
type matmulArgs struct {
	L, N, K, GroupSize uint32
}

// Geometry constants of shaders/matvec.metal, shaders/matmul.metal and the
// K-quant and MXFP4 matmuls (kquant.metal, mxfp4.metal).
const (
	mvRows = 4 // MV_ROWS: rows per simdgroup
	mvSG   = 2 // MV_SG: simdgroups per threadgroup

	mmBM = 32 // MM_BM: tokens per output tile
	mmBN = 64 // MM_BN: weight rows per output tile
	mmBK = 32 // MM_BK: columns per step
	mmLD = 40 // MM_LD: row stride of the staged tiles in elements; two copies of each

	kqBM, kqBN, kqBK = 32, 32, 32 // KQ_BM… and MX_BM…: 32×32 tiles of f32

	mvbMaxL = 8 // MVB_MAXL: tokens per matvecb dispatch at most
)

// Kernel names by weight dtype (_v8: dense, _v16: q4 and q8 only), made
// once: a dispatch concatenates no string.
var (
	matvecNames, matvecV8Names, matvecV16Names [DTypeQ6K + 1]string
	matmulNames                                [DTypeQ6K + 1]string
	matvecBNames                               [DTypeQ6K + 1]string  // matvecb_<w>_f32_v8 (dense), _v16 (q4, q8)
	matvecBDenseNames                          [DTypeBF16 + 1]string // matvecb_<w>_f32 (dense, any K and alignment)
)

// affineNames are the kernel names of affine weights whose scales and biases
// are 16-bit, as MLX stores them and Apple-shaped kernels read them: by op
// (affMatvec…), then scale dtype (0: f16, 1: bf16), then weight dtype. The
// f32 tables above name the kernels of f32 scales and biases.
var affineNames [5][2][DTypeQ8 + 1]string

// Ops of affineNames.
const (
	affMatvec    = iota // matvec_<w>_f32_<sb>
	affMatvecV16        // matvec_<w>_f32_v16_<sb> (q4, q8)
	affMatmul           // matmul_<w>_f32_<sb>
	affEmbed            // embed_<w>_f32_<sb>
	affMatvecB          // matvecb_<w>_f32_v16_<sb> (q4, q8)
)

// affineName returns f32, the kernel for w with f32 scales and biases (or
// none), or op's kernel for w's f16 or bf16 ones.
func affineName(f32 string, op int, w *Tensor) string {
	if w.Scales == nil {
		return f32
	}
	switch w.Scales.DType {
	case DTypeF16:
		return affineNames[op][0][w.DType]
	case DTypeBF16:
		return affineNames[op][1][w.DType]
	}
	return f32
}

func init() {
	for d := DTypeQ2; d <= DTypeQ8; d++ {
		for i, sb := range [2]string{"_f16sb", "_bf16sb"} {
			affineNames[affMatvec][i][d] = "matvec_" + d.String() + "_f32" + sb
			affineNames[affMatvecV16][i][d] = "matvec_" + d.String() + "_f32_v16" + sb
			affineNames[affMatmul][i][d] = "matmul_" + d.String() + "_f32" + sb
			affineNames[affEmbed][i][d] = "embed_" + d.String() + "_f32" + sb
			affineNames[affMatvecB][i][d] = "matvecb_" + d.String() + "_f32_v16" + sb
		}
	}
	for d := range matvecNames {
		matvecNames[d] = "matvec_" + DType(d).String() + "_f32"
		matvecV8Names[d] = matvecNames[d] + "_v8"
		matvecV16Names[d] = matvecNames[d] + "_v16"
		matmulNames[d] = "matmul_" + DType(d).String() + "_f32"
		switch dt := DType(d); {
		case dt.Float():
			matvecBNames[d] = "matvecb_" + dt.String() + "_f32_v8"
			matvecBDenseNames[d] = "matvecb_" + dt.String() + "_f32"
		case dt == DTypeQ4 || dt == DTypeQ8:
			matvecBNames[d] = "matvecb_" + dt.String() + "_f32_v16"
		}
	}
}

// MatMuls computes dst[i] = x · w[i]ᵀ for up to four weights: at L = 1 on
// NVIDIA-shaped kernels one launch for them all when they share dtype, K and
// group (see matvecNVNames), else one MatMul per weight.
func (m *Metal) MatMuls(dst []*Tensor, x *Tensor, w []*Tensor) {
	if len(dst) != len(w) || len(w) > 4 {
		panic(fmt.Sprintf("kernels: MatMuls: %d outputs for %d weights (at most 4)", len(dst), len(w)))
	}
	if m.shape == shapeNVIDIA && x.NumRows() == 1 {
		for i, wi := range w {
			mustMatMul("MatMuls", dst[i], x, wi)
		}
		if m.matvecNV(dst, x, w, false, 0) {
			return
		}
	}
	for i := range w {
		m.MatMul(dst[i], x, w[i])
	}
}

// MatVecs is MatMuls with every row of x computed as a one-row call
// computes it (see [MatVecser]), on Apple-shaped kernels: each block of up
// to 8 rows runs the small-batch mat-vec where it applies (matvecBName; a
// row's bits are the one-token mat-vec's), any other row a one-row MatMul
// of its own. Rows are equal to one-row calls where x's row stride keeps
// every row on the alignment of the first (K a multiple of 4 floats), as in
// every model shape. NVIDIA-shaped kernels have no such mat-vec: there
// MatVecs is MatMuls (rows not batch-invariant), as [MatVecs] was for every
// Metal device before, rather than L one-row launches per weight.
func (m *Metal) MatVecs(dst []*Tensor, x *Tensor, w []*Tensor) {
	L := x.NumRows()
	if L <= 1 || m.shape != shapeApple {
		m.MatMuls(dst, x, w)
		return
	}
	if len(dst) != len(w) || len(w) > 4 {
		panic(fmt.Sprintf("kernels: MatVecs: %d outputs for %d weights (at most 4)", len(dst), len(w)))
	}
	for i, wi := range w {
		_, _, K := mustMatMul("MatVecs", dst[i], x, wi)
		for r0 := 0; r0 < L; r0 += mvbMaxL {
			r1 := min(L, r0+mvbMaxL)
			xs, ds := x, dst[i]
			if r0 > 0 || r1 < L {
				xs, ds = x.Rows(r0, r1), dst[i].Rows(r0, r1)
			}
			if r1-r0 >= 2 && m.matvecBName(wi, xs, K) != "" {
				m.MatMul(ds, xs, wi)
				continue
			}
			for l := r0; l < r1; l++ {
				m.MatMul(dst[i].Rows(l, l+1), x.Rows(l, l+1), wi)
			}
		}
	}
}

// MatMulGLU computes dst (L, F) = act(x·gateᵀ)·(x·upᵀ): on NVIDIA-shaped
// kernels at L = 1 one matvec_*_nv_*_glu launch (u unwritten) where it applies
// (see matvecNV), else MatMuls into dst and u, then GLU.
func (m *Metal) MatMulGLU(dst, u, x, gate, up *Tensor, act Act) {
	d, w := [2]*Tensor{dst, u}, [2]*Tensor{gate, up}
	if m.shape == shapeNVIDIA && x.NumRows() == 1 && act != ActSwiGLUClamp {
		mustMatMul("MatMulGLU", dst, x, gate)
		mustMatMul("MatMulGLU", u, x, up)
		if m.matvecNV(d[:1], x, w[:], true, act) {
			return
		}
	}
	m.MatMuls(d[:], x, w[:])
	m.GLU(dst, dst, u, act)
}

// mustMatMul panics unless w is a 2-D weight (N, K), x (L, K) and dst (L, N),
// and returns L, N and K.
func mustMatMul(op string, dst, x, w *Tensor) (L, N, K int) {
	if len(w.Shape) != 2 || int(w.DType) >= len(matvecNames) {
		panic(fmt.Sprintf("kernels: %s: weight %s%v is not a 2-D matrix", op, w.DType, w.Shape))
	}
	N, K = w.Shape[0], w.Cols()
	L = x.NumRows()
	mustShape(op, "x", x, L, K)
	mustShape(op, "dst", dst, L, N)
	return L, N, K
}

// MatMul computes dst (L, N) = x (L, K) · wᵀ for w (N, K) in any [DType].
//
// Kernel selection (ggml get_pipeline_mul_mv): L = 1 is a bandwidth-bound
// mat-vec (matvec_<w>_f32: every weight byte read once, x in registers);
// 2 ≤ L ≤ 8 on Apple-shaped kernels the small-batch mat-vec for dense
// weights and where the one-token one is _v16 (matvecb_<w>_f32*, see
// matvecBName: the weights read once for all L tokens, each token's output
// bit for bit the one-token mat-vec's); other L > 1
// uses the tiled mat-mat (matmul_<w>_f32: 32×64 output tiles with simdgroup 8×8
// matrices, w dequantized into threadgroup memory and reused by 32 tokens,
// double-buffered; K-quants and MXFP4 32×32 tiles).
// Both handle any N and K (quantized K is a multiple of the group size).
// Affine weights with f16 or bf16 scales and biases run the same kernels
// for that type, named with _f16sb or _bf16sb (see affineNames). On
// NVIDIA-shaped kernels, L = 1 runs matvec_<w>_f32_nv_<sb>sb where it applies
// (see matvecNVNames), and L > 1 matmul_<w>_f32_nv (see matmulNVName).
func (m *Metal) MatMul(dst, x, w *Tensor) {
	L, N, K := mustMatMul("MatMul", dst, x, w)
	if L == 0 || N == 0 {
		return
	}
	if L == 1 && m.shape == shapeNVIDIA {
		d1, w1 := [1]*Tensor{dst}, [1]*Tensor{w}
		if m.matvecNV(d1[:], x, w1[:], false, 0) {
			return
		}
	}
	if L > 1 && m.shape == shapeNVIDIA && m.matmulNV(dst, x, w, L, N, K) {
		m.stats.WeightBytes += weightBytes(w, N)
		return
	}
	a := matvecArgs{K: uint32(K), N: uint32(N), GroupSize: uint32(w.GroupSize), L: uint32(L)}
	if L >= 2 && L <= mvbMaxL && m.shape == shapeApple && !m.noMVB {
		if name := m.matvecBName(w, x, K); name != "" {
			// (⌈N/8⌉, 1) threadgroups of 2 simdgroups, 4 weight rows each
			// for all L tokens: the weights read once.
			m.begin(name)
			setArgs(m, a)
			m.bindMat(w, x, dst)
			m.run(metal.Size{W: (N + mvRows*mvSG - 1) / (mvRows * mvSG), H: 1, D: 1}, metal.Size{W: 32 * mvSG, H: 1, D: 1})
			m.stats.WeightBytes += weightBytes(w, N)
			return
		}
	}
	if L == 1 {
		// (⌈N/8⌉, L) threadgroups of 2 simdgroups, 4 rows each.
		name := affineName(matvecNames[w.DType], affMatvec, w)
		switch {
		case w.DType.Float() && K%8 == 0 && w.Off%16 == 0 && x.Off%16 == 0:
			name = matvecV8Names[w.DType] // 16-byte loads, no tail
		case (w.DType == DTypeQ4 || w.DType == DTypeQ8) && w.Off%2 == 0 && x.Off%16 == 0 && !m.noV16:
			name = affineName(matvecV16Names[w.DType], affMatvecV16, w) // 16 codes a lane, masked in place against pre-scaled x
		}
		m.begin(name)
		setArgs(m, a)
		m.bindMat(w, x, dst)
		m.run(metal.Size{W: (N + mvRows*mvSG - 1) / (mvRows * mvSG), H: L, D: 1}, metal.Size{W: 32 * mvSG, H: 1, D: 1})
	} else if w.DType.Float() || w.DType.Quantized() {
		// (⌈N/64⌉, ⌈L/32⌉) threadgroups of 4 simdgroups; two copies each of
		// the x tile (32×32 floats) and the w tile (64×32, half for f16 and
		// float for the others), rows padded to mmLD elements.
		m.begin(affineName(matmulNames[w.DType], affMatmul, w))
		setArgs(m, matmulArgs{L: uint32(L), N: uint32(N), K: uint32(K), GroupSize: uint32(w.GroupSize)})
		m.bindMat(w, x, dst)
		wb := 4
		if w.DType == DTypeF16 {
			wb = 2
		}
		m.tgmem(0, 2*4*mmBM*mmLD)
		m.tgmem(1, 2*wb*mmBN*mmLD)
		m.run(metal.Size{W: (N + mmBN - 1) / mmBN, H: (L + mmBM - 1) / mmBM, D: 1}, metal.Size{W: 128, H: 1, D: 1})
	} else {
		// K-quants and MXFP4: (⌈N/32⌉, ⌈L/32⌉) threadgroups of 4
		// simdgroups; x and w tiles of 32×32 floats in threadgroup memory.
		m.begin(matmulNames[w.DType])
		setArgs(m, matmulArgs{L: uint32(L), N: uint32(N), K: uint32(K), GroupSize: uint32(w.GroupSize)})
		m.bindMat(w, x, dst)
		m.tgmem(0, 4*kqBM*kqBK)
		m.tgmem(1, 4*kqBK*kqBN)
		m.run(metal.Size{W: (N + kqBN - 1) / kqBN, H: (L + kqBM - 1) / kqBM, D: 1}, metal.Size{W: 128, H: 1, D: 1})
	}
	m.stats.WeightBytes += weightBytes(w, N)
}

// matvecBName returns the small-batch mat-vec (shaders/matvec_batch.metal)
// for w and x, or "" where none computes each of x's rows as the one-token
// mat-vec does, bit for bit: every dense w (the _v8 form where K is a
// multiple of 8 and w and x sit at 16-byte offsets, as matvec_<w>_f32_v8;
// else scalar loads; all three dense mat-vecs compute alike, so a weight's
// place in memory never changes a result); q4 and q8 where the one-token
// mat-vec is _v16 (codes at even offsets, x at a 16-byte one).
func (m *Metal) matvecBName(w, x *Tensor, K int) string {
	switch {
	case w.DType.Float() && K%8 == 0 && w.Off%16 == 0 && x.Off%16 == 0:
		return matvecBNames[w.DType]
	case w.DType.Float():
		return matvecBDenseNames[w.DType]
	case (w.DType == DTypeQ4 || w.DType == DTypeQ8) && w.Off%2 == 0 && x.Off%16 == 0 && !m.noV16:
		return affineName(matvecBNames[w.DType], affMatvecB, w)
	}
	return ""
}

// bindMat binds the buffers shared by matvec and matmul: w, x, y, then the
// affine scales and biases.
func (m *Metal) bindMat(w, x, dst *Tensor) {
	m.in(1, w)
	m.in(2, x)
	m.out(3, dst)
	if w.DType.Quantized() {
		m.in(4, w.Scales)
		m.in(5, w.Biases)
	}
}
