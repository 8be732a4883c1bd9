//go:build amd64 && !noasm

package cpu

import (
	"unsafe"

	"github.com/klauspost/cpuid/v2"
)

// The assembly kernels in dot_amd64.s. Pointers index Go slices the wrappers
// below have bounds-checked; strides are in bytes unless named G or K.

//go:noescape
func qMatVec4VNNI(dst *float32, n int, w *uint32, wstride int, s, b *float32, G int, xq *int8, dq *groupQ, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func qMatVec8VNNI(dst *float32, n int, w *uint32, wstride int, s, b *float32, G int, xq *int8, dq *groupQ, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func qMatVec4AVX2(dst *float32, n int, w *uint32, wstride int, s, b *float32, G int, xq *int8, dq *groupQ, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func qMatVec8AVX2(dst *float32, n int, w *uint32, wstride int, s, b *float32, G int, xq *int8, dq *groupQ, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func qMatVec4VNNI64(dst *float32, n int, w *uint32, wstride int, s, b *float32, G int, xq *int8, dq *groupQ, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func qMatVec8VNNI64(dst *float32, n int, w *uint32, wstride int, s, b *float32, G int, xq *int8, dq *groupQ, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func qMatVec4AVX264(dst *float32, n int, w *uint32, wstride int, s, b *float32, G int, xq *int8, dq *groupQ, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func qMatVec4VNNI64g1(dst *float32, n int, w *uint32, wstride int, s, b *float32, G int, xq *int8, dq *groupQ, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func qMatVec8VNNI64g1(dst *float32, n int, w *uint32, wstride int, s, b *float32, G int, xq *int8, dq *groupQ, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func qTile4VNNI(dst *float32, dstride int, w *uint32, wstride int, s, b *float32, G int, xq *int8, xstride int, dq *groupQ, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func qTile8VNNI(dst *float32, dstride int, w *uint32, wstride int, s, b *float32, G int, xq *int8, xstride int, dq *groupQ, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func qTile4AVX2(dst *float32, dstride int, w *uint32, wstride int, s, b *float32, G int, xq *int8, xstride int, dq *groupQ, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func qTile8AVX2(dst *float32, dstride int, w *uint32, wstride int, s, b *float32, G int, xq *int8, xstride int, dq *groupQ, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func qTile4VNNI64(dst *float32, dstride int, w *uint32, wstride int, s, b *float32, G int, xq *int8, xstride int, dq *groupQ, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func qTile8VNNI64(dst *float32, dstride int, w *uint32, wstride int, s, b *float32, G int, xq *int8, xstride int, dq *groupQ, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func qTile4AVX264(dst *float32, dstride int, w *uint32, wstride int, s, b *float32, G int, xq *int8, xstride int, dq *groupQ, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func fMatVecF32(dst *float32, n int, w *float32, K int, x *float32)

//go:noescape
func fMatVecF16(dst *float32, n int, w *uint16, K int, x *float32)

//go:noescape
func fMatVecBF16(dst *float32, n int, w *uint16, K int, x *float32)

//go:noescape
func fTileF32(dst *float32, dstride int, w *float32, K int, x *float32)

//go:noescape
func fTileF16(dst *float32, dstride int, w *uint16, K int, x *float32)

//go:noescape
func fTileBF16(dst *float32, dstride int, w *uint16, K int, x *float32)

//go:noescape
func sumBytes(p *byte, n int) uint64

type qMatVecAsm func(dst *float32, n int, w *uint32, wstride int, s, b *float32, G int, xq *int8, dq *groupQ, sx, cr *float32, bpg int, mask *int32)
type qTileAsm func(dst *float32, dstride int, w *uint32, wstride int, s, b *float32, G int, xq *int8, xstride int, dq *groupQ, sx, cr *float32, bpg int, mask *int32)

// tailMask[8-r:] starts with r all-ones lanes: the bias pass's mask for the last
// G mod 8 groups.
var tailMask = [16]int32{-1, -1, -1, -1, -1, -1, -1, -1}

// qKernels names the kernel for each case: 4 or 8 bits, groups of 32·odd codes
// or of a multiple of 64, and the chunk (32 or 64 codes) its bpg counts.
type qKernels[F any] struct {
	q4x32, q4x64, q8x32, q8x64 F
	c8x64                      int // chunk of q8x64 (the AVX2 one runs 32 at a time)
	q4g64, q8g64               F   // groups of exactly 64, if hasG64
	hasG64                     bool
}

// pick returns the kernel for q and its blocks per group.
func (t *qKernels[F]) pick(q *QMatrix) (F, int) {
	gs := q.GroupSize
	switch {
	case q.Bits == 4 && gs == 64 && t.hasG64:
		return t.q4g64, 1
	case q.Bits == 8 && gs == 64 && t.hasG64:
		return t.q8g64, 1
	case q.Bits == 4 && gs%64 == 0:
		return t.q4x64, gs / 64
	case q.Bits == 4:
		return t.q4x32, gs / 32
	case gs%64 == 0:
		return t.q8x64, gs / t.c8x64
	}
	return t.q8x32, gs / 32
}

// qMatVecWith adapts mat-vec kernels to kernelSet.qMatVec.
func qMatVecWith(t qKernels[qMatVecAsm]) func(dst []float32, q *QMatrix, K, n0 int, a *actQ, l int) {
	return func(dst []float32, q *QMatrix, K, n0 int, a *actQ, l int) {
		n := len(dst)
		if n == 0 {
			return
		}
		G, words := a.G, K*q.Bits/32
		w := q.W[n0*words : (n0+n)*words]
		s, b := q.Scales[n0*G:(n0+n)*G], q.Biases[n0*G:(n0+n)*G]
		xq, dq := a.xq[l*K:(l+1)*K], a.dq[l*G:(l+1)*G]
		sx, cr := a.sx[l*a.Gp:(l+1)*a.Gp], a.cr[l*a.Gp:(l+1)*a.Gp]
		f, bpg := t.pick(q)
		f(&dst[0], n, &w[0], words*4, &s[0], &b[0], G, &xq[0], &dq[0], &sx[0], &cr[0],
			bpg, &tailMask[8-G%8])
	}
}

// qTileWith adapts tile kernels to kernelSet.qTile for a tn × tl tile.
func qTileWith(t qKernels[qTileAsm], tn, tl int) func(dst []float32, dstride int, q *QMatrix, K, n0 int, a *actQ, l0 int) {
	return func(dst []float32, dstride int, q *QMatrix, K, n0 int, a *actQ, l0 int) {
		G, words := a.G, K*q.Bits/32
		_ = dst[(tl-1)*dstride+tn-1]
		w := q.W[n0*words : (n0+tn)*words]
		s, b := q.Scales[n0*G:(n0+tn)*G], q.Biases[n0*G:(n0+tn)*G]
		xq, dq := a.xq[l0*K:(l0+tl)*K], a.dq[l0*G:(l0+tl)*G]
		sx, cr := a.sx[l0*a.Gp:(l0+tl)*a.Gp], a.cr[l0*a.Gp:(l0+tl)*a.Gp]
		f, bpg := t.pick(q)
		f(&dst[0], dstride, &w[0], words*4, &s[0], &b[0], G, &xq[0], K, &dq[0], &sx[0], &cr[0],
			bpg, &tailMask[8-G%8])
	}
}

// fMatVecAVX2 runs the f32/f16/bf16 mat-vec kernels; K not a multiple of 8 takes
// the Go loop.
func fMatVecAVX2(dst []float32, w *Weight, n0 int, x []float32) {
	n, K := len(dst), w.K
	if n == 0 {
		return
	}
	if K%8 != 0 || K == 0 {
		fMatVecGo(dst, w, n0, x)
		return
	}
	x = x[:K]
	switch w.Format {
	case FormatF32:
		r := w.F32[n0*K : (n0+n)*K]
		fMatVecF32(&dst[0], n, &r[0], K, &x[0])
	case FormatF16:
		r := w.U16[n0*K : (n0+n)*K]
		fMatVecF16(&dst[0], n, &r[0], K, &x[0])
	case FormatBF16:
		r := w.U16[n0*K : (n0+n)*K]
		fMatVecBF16(&dst[0], n, &r[0], K, &x[0])
	}
}

// fTileAVX2 runs a 2-row × 4-token f32/f16/bf16 tile (K a multiple of 8).
func fTileAVX2(dst []float32, dstride int, w *Weight, n0 int, x []float32) {
	K := w.K
	_ = dst[3*dstride+1]
	x = x[:4*K]
	switch w.Format {
	case FormatF32:
		r := w.F32[n0*K : (n0+2)*K]
		fTileF32(&dst[0], dstride, &r[0], K, &x[0])
	case FormatF16:
		r := w.U16[n0*K : (n0+2)*K]
		fTileF16(&dst[0], dstride, &r[0], K, &x[0])
	case FormatBF16:
		r := w.U16[n0*K : (n0+2)*K]
		fTileBF16(&dst[0], dstride, &r[0], K, &x[0])
	}
}

var (
	hasAVX2 = cpuid.CPU.Supports(cpuid.AVX, cpuid.AVX2, cpuid.FMA3, cpuid.F16C)
	hasVNNI = hasAVX2 && cpuid.CPU.Supports(cpuid.AVX512F, cpuid.AVX512VL, cpuid.AVX512BW, cpuid.AVX512VNNI)
)

// kernVNNI: AVX-512 VNNI integer dots (512-bit for groups of 64·n, else
// 256-bit) for 4/8-bit, AVX2+FMA+F16C floats.
var kernVNNI = kernelSet{
	name:  "avx512vnni",
	avail: hasVNNI,
	qMatVec: qMatVecWith(qKernels[qMatVecAsm]{
		qMatVec4VNNI, qMatVec4VNNI64, qMatVec8VNNI, qMatVec8VNNI64, 64,
		qMatVec4VNNI64g1, qMatVec8VNNI64g1, true}),
	qTile: qTileWith(qKernels[qTileAsm]{
		qTile4VNNI, qTile4VNNI64, qTile8VNNI, qTile8VNNI64, 64, nil, nil, false}, 2, 4),
	qTileN: 2, qTileL: 4,
	fMatVec: fMatVecAVX2,
	fTile:   fTileAVX2,
	fTileN:  2, fTileL: 4,
}

// kernAVX2: AVX2 VPMADDUBSW integer dots, AVX2+FMA+F16C floats.
var kernAVX2 = kernelSet{
	name:  "avx2",
	avail: hasAVX2,
	qMatVec: qMatVecWith(qKernels[qMatVecAsm]{
		qMatVec4AVX2, qMatVec4AVX264, qMatVec8AVX2, qMatVec8AVX2, 32, nil, nil, false}),
	qTile: qTileWith(qKernels[qTileAsm]{
		qTile4AVX2, qTile4AVX264, qTile8AVX2, qTile8AVX2, 32, nil, nil, false}, 2, 2),
	qTileN: 2, qTileL: 2,
	fMatVec: fMatVecAVX2,
	fTile:   fTileAVX2,
	fTileN:  2, fTileL: 4,
}

// asmSets lists the assembly kernel sets this build can run, best first.
var asmSets = []*kernelSet{&kernVNNI, &kernAVX2}

func init() {
	for _, k := range asmSets {
		if k.avail {
			kern = *k
			return
		}
	}
}

// sumBytesAsm is ReadBandwidth's inner loop when the CPU has AVX2.
func sumBytesAsm(b []byte) (uint64, bool) {
	if !hasAVX2 {
		return 0, false
	}
	n := len(b) &^ 127
	if n == 0 {
		return 0, true
	}
	return sumBytes(unsafe.SliceData(b), n), true
}
