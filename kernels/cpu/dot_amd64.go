//go:build amd64 && !noasm

package cpu

import "github.com/klauspost/cpuid/v2"

// The assembly kernels in dot_amd64.s. Pointers index Go slices the wrappers
// below have bounds-checked; strides are in bytes unless named G or K.

//go:noescape
func qMatVec8AVX2(dst *float32, n int, w *uint32, wstride int, s, b *float32, G int, xq *int16, dq *float32, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func qMatVec4AVX2(dst *float32, n int, w *uint32, wstride int, s, b *float32, G int, xq *int16, dq *float32, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func qMatVec4AVX264(dst *float32, n int, w *uint32, wstride int, s, b *float32, G int, xq *int16, dq *float32, sx, cr *float32, bpg int, mask *int32)

//go:noescape
func fTileF32x46(dst *float32, dstride int, w *float32, K int, x *float32)

//go:noescape
func pTileF32(dst *float32, dstride int, p *float32, kc int, x *float32, xstride int, acc int)

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

// tailMask[8-r:] starts with r all-ones lanes: the bias pass's mask for the last
// G mod 8 groups.
var tailMask = [16]int32{-1, -1, -1, -1, -1, -1, -1, -1}

// qMatVecAVX2 runs the int16 mat-vec kernels: the 4-bit ones follow actQ's
// chunk (q4Chunk), 64 values when groups allow, else 32; the 8-bit one takes
// blocks of 32.
func qMatVecAVX2(dst []float32, q *QMatrix, K, n0 int, a *actQ, l int) {
	n := len(dst)
	if n == 0 {
		return
	}
	G, words := a.G, K*q.Bits/32
	w := q.W[n0*words : (n0+n)*words]
	s, b := q.Scales[n0*G:(n0+n)*G], q.Biases[n0*G:(n0+n)*G]
	xq, dq := a.xq[2*l*K:2*(l+1)*K], a.dq[l:l+1]
	sx, cr := a.sx[l*a.Gp:(l+1)*a.Gp], a.cr[l*a.Gp:(l+1)*a.Gp]
	gs := q.GroupSize
	f, bpg := qMatVec8AVX2, gs/32
	switch {
	case q.Bits == 4 && gs%64 == 0:
		f, bpg = qMatVec4AVX264, gs/64
	case q.Bits == 4:
		f = qMatVec4AVX2
	}
	f(&dst[0], n, &w[0], words*4, &s[0], &b[0], G, &xq[0], &dq[0], &sx[0], &cr[0], bpg, &tailMask[8-G%8])
}

// qMatVecBAsm runs the byte-dot kernels (see actB) on a blocked q of one
// K-slab (a slab of a matrix, or one whole) and striped planes, prefetching
// as arm pf says (with pfHW the prefetches fall on the lines being loaded,
// which leaves the stream to the hardware prefetchers).
func qMatVecBAsm(dst []float32, q *QMatrix, K, n0 int, a *actB, l int, pf pfArm) {
	n := len(dst)
	if n == 0 {
		return
	}
	if !a.striped {
		panic("cpu: byte-dot kernels: activations not in the blocked layout's order")
	}
	if len(q.slabs) > 1 {
		panic("cpu: byte-dot kernels: a matrix of several K-slabs (run each)")
	}
	G, S1, g0 := K/q.GroupSize, blockRowBytes(q, K), q.k0/q.GroupSize
	q.checkBlocked(n0, n, S1)
	w := q.Blocked[n0*S1 : (n0+n)*S1]
	xb := a.xb[l*a.rowBytes()+a.at(q.k0):] // a slab starts a stripe: lane 0 of its first chunk
	sx, cr := a.sx[l*a.G+g0:], a.cr[l*a.G+g0:]
	v, wpg := 2, q.wordsPerGroup() // kernel variant: 4-bit GFNI, 4-bit shifts, 8-bit; chunks a stripe
	switch {
	case q.Bits == 4 && hasGFNI, q.meta == metaQ6: // q6_k: GFNI only (see kern.q6)
		v = 0
	case q.Bits == 4:
		v = 1
	}
	if q.meta == metaQ6 {
		wpg = 2
	}
	S := (G + 15) / 16 // stripes
	dist, hint := 0, 0
	switch pf {
	case pfL2:
		dist = max(4*S1, pfMin(q.Bits))
	case pfL1, pfL1P:
		dist, hint = max(4*S1, pfL1Ahead), 1+int(pf-pfL1)
	}
	f := qMatVecBKernels[q.meta][hint][v]
	f(&dst[0], n, &w[0], K*q.Bits/8, G, &xb[0], wpg, S, 1<<(G-16*(S-1))-1,
		dist, &a.dq[l], &sx[0], &cr[0], 1<<(G%16)-1)
}

// pfMin is the least distance in bytes the four-row byte-dot kernels prefetch
// ahead when they do (see dotb_amd64.s and pfTune): 9 KB for 4-bit codes,
// which read 1–2 % faster than at 18 KB in Zen 4's fast minutes; 18 KB for
// 8-bit codes, which streamed faster at 18 KB than at 9 when Zen 4's
// bandwidth burst (docs/perf/cpu.md, "Prefetch distances").
func pfMin(bits int) int {
	if bits == 4 {
		return 9216
	}
	return 18432
}

// pfL1Ahead is how far ahead pfL1 prefetches: on Zen 5, 4-bit codes read
// 5–15 % more of the fast minutes' bandwidth 8 KB ahead than 3–6 KB ahead,
// and a point or two less of the slow minutes'; 8-bit codes read the same
// 8–16 KB ahead (docs/perf/cpu.md, "Prefetch distances").
const pfL1Ahead = 8192

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

// dTileAVX512 runs a 4-row × 6-token f32 tile in 512-bit registers (K a
// multiple of 16; others take the mat-vec per token).
func dTileAVX512(dst []float32, dstride int, w *Weight, n0 int, x []float32) {
	K := w.K
	_ = dst[5*dstride+3]
	x = x[:6*K]
	if K%16 != 0 {
		for l := range 6 {
			fMatVecAVX2(dst[l*dstride:l*dstride+4], w, n0, x[l*K:(l+1)*K])
		}
		return
	}
	r := w.F32[n0*K : (n0+4)*K]
	fTileF32x46(&dst[0], dstride, &r[0], K, &x[0])
}

// pTileAVX512 runs the 12-token × 32-row panel tile in 512-bit registers.
func pTileAVX512(dst []float32, dstride int, p []float32, kc int, x []float32, xstride int, acc bool) {
	_ = dst[11*dstride+panelN-1]
	_ = p[kc*panelN-1]
	_ = x[11*xstride+kc-1]
	a := 0
	if acc {
		a = 1
	}
	pTileF32(&dst[0], dstride, &p[0], kc, &x[0], xstride, a)
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
	hasAVX2   = cpuid.CPU.Supports(cpuid.AVX, cpuid.AVX2, cpuid.FMA3, cpuid.F16C)
	hasVNNI   = hasAVX2 && cpuid.CPU.Supports(cpuid.AVX512F, cpuid.AVX512VL, cpuid.AVX512BW, cpuid.AVX512VNNI)
	hasGFNI   = hasVNNI && cpuid.CPU.Supports(cpuid.GFNI)
	hasAVX512 = hasAVX2 && cpuid.CPU.Supports(cpuid.AVX512F, cpuid.AVX512BW, cpuid.AVX512VL)
)

// kernVNNI: AVX-512 VNNI byte dots (VPDPBUSD) for 4/8-bit rows of whole
// chunks, the AVX2 int16 ones otherwise; AVX2+FMA+F16C floats (f16 and bf16
// mat-vecs with a software prefetch), AVX-512 tiles.
var kernVNNI = kernelSet{
	name:     "avx512vnni",
	avail:    hasVNNI,
	qMatVec:  qMatVecAVX2,
	qMatVecB: qMatVecBAsm,
	blocked:  true,
	q6:       hasGFNI,
	tunePF:   true,
	fMatVec:  fMatVecPF,
	fTile:    fTileAVX2,
	fTileN:   2, fTileL: 4,
	dTile:  dTileAVX512,
	dTileN: 4, dTileL: 6,
	pTile:  pTileAVX512,
	dPanel: dPanelAVX512,
	fPanel: fPanelAVX512,
	pTileL: 12,
}

// kernAVX2: AVX2 VPMADDWD int16 dots, AVX2+FMA+F16C floats.
var kernAVX2 = kernelSet{
	name:    "avx2",
	avail:   hasAVX2,
	qMatVec: qMatVecAVX2,
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

// qMatVecBKernels are the byte-dot kernels by type of scales (metaF32,
// metaBF16, metaF16, metaK: 4-bit only, metaQ6: q6_k only), prefetch (PREFETCHT1, PREFETCHT0,
// PREFETCHT0 with the 4-bit kernels paced: pfL1P) and variant.
var qMatVecBKernels = [5][3][3]func(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64){
	{{qMatVecB4, qMatVecB4S, qMatVecB8}, {qMatVecB4T0, qMatVecB4ST0, qMatVecB8T0}, {qMatVecB4T0P, qMatVecB4ST0P, qMatVecB8T0}},
	{{qMatVecB4BF, qMatVecB4SBF, qMatVecB8BF}, {qMatVecB4BFT0, qMatVecB4SBFT0, qMatVecB8BFT0}, {qMatVecB4BFT0P, qMatVecB4SBFT0P, qMatVecB8BFT0}},
	{{qMatVecB4H, qMatVecB4SH, qMatVecB8H}, {qMatVecB4HT0, qMatVecB4SHT0, qMatVecB8HT0}, {qMatVecB4HT0P, qMatVecB4SHT0P, qMatVecB8HT0}},
	{{qMatVecB4K, qMatVecB4SK, nil}, {qMatVecB4KT0, qMatVecB4SKT0, nil}, {qMatVecB4KT0P, qMatVecB4SKT0P, nil}},
	{{qMatVecB6, nil, nil}, {qMatVecB6T0, nil, nil}, {qMatVecB6T0, nil, nil}},
}

//go:noescape
func qMatVecB4(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4S(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB8(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4BF(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4SBF(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB8BF(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4H(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4SH(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB8H(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4T0(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4ST0(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4T0P(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4ST0P(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB8T0(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4BFT0(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4SBFT0(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4BFT0P(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4SBFT0P(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB8BFT0(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4HT0(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4SHT0(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4HT0P(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4SHT0P(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB8HT0(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4K(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4SK(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4KT0(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4SKT0(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4KT0P(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB4SKT0P(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB6(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func qMatVecB6T0(dst *float32, n int, w *byte, rb, G int, xb *int8, wpg, S int, smsk uint64, pf int, dq, sx, cr *float32, tmsk uint64)

//go:noescape
func dequantPanel4(p *float32, w *uint32, s, b *float32, groups, wpg int, woff, soff *int32)

//go:noescape
func dequantPanel8(p *float32, w *uint32, s, b *float32, groups, wpg int, woff, soff *int32)

// dPanelAVX512 dequantizes a prefill panel of 4/8-bit codes (see
// QMatrix.dequantPanel) sixteen rows at a time; other widths return false.
func dPanelAVX512(p []float32, q *QMatrix, n0, K, k0, kn int) bool {
	gs, bits := q.GroupSize, q.Bits
	if bits != 4 && bits != 8 || gs%32 != 0 {
		return false
	}
	words, G := K*bits/32, K/gs
	wpg := gs * bits / 32
	_ = p[panelN*kn-1]
	_ = q.W[(n0+panelN)*words-1]
	_ = q.Scales[(n0+panelN)*G-1]
	_ = q.Biases[(n0+panelN)*G-1]
	var woff, soff [16]int32
	for r := range woff {
		woff[r], soff[r] = int32(4*r*words), int32(4*r*G)
	}
	for h := 0; h < panelN; h += 16 {
		n := n0 + h
		w, s, b := &q.W[n*words+k0*bits/32], &q.Scales[n*G+k0/gs], &q.Biases[n*G+k0/gs]
		// direct calls: through a func value the offsets would escape
		if bits == 4 {
			dequantPanel4(&p[h], w, s, b, kn/gs, wpg, &woff[0], &soff[0])
		} else {
			dequantPanel8(&p[h], w, s, b, kn/gs, wpg, &woff[0], &soff[0])
		}
	}
	return true
}

//go:noescape
func absMaxBits(x *float32, n int) uint32

//go:noescape
func quantRowB(xb *int8, x *float32, groups, gs, C int, id float64, sums *float64, tsum *int64)

// absMaxBitsAsm is actB's amax when the CPU has AVX-512 (n a multiple of 16).
func absMaxBitsAsm(x []float32) (uint32, bool) {
	if !hasAVX512 || len(x) == 0 || len(x)%16 != 0 {
		return 0, false
	}
	return absMaxBits(&x[0], len(x)), true
}

// quantRowBAsm is actB's quantization of one row in striped order when the CPU
// has AVX-512: xb gets the planes (its last stripe's lanes past the groups
// left as they are), sums and tsum (one per group of gs) Σx and Σt.
func quantRowBAsm(xb []int8, x []float32, gs, C int, striped bool, id float64, sums []float64, tsum []int64) bool {
	G := len(x) / gs
	if !hasAVX512 || !striped || G == 0 || gs%32 != 0 || len(x) != G*gs {
		return false
	}
	_, _, _ = xb[(G+15)/16*48*gs-1], sums[G-1], tsum[G-1]
	quantRowB(&xb[0], &x[0], G, gs, C, id, &sums[0], &tsum[0])
	return true
}

//go:noescape
func f16sToF32(dst *float32, src *uint16, n int)

// f16sAsm widens the longest prefix of src it handles (whole 32-half steps,
// F16C) into dst and returns its length.
func f16sAsm(dst []float32, src []uint16) int {
	n := len(src) &^ 31
	if !hasAVX2 || n == 0 {
		return 0
	}
	f16sToF32(&dst[0], &src[0], n)
	return n
}

//go:noescape
func f16RowsToF32(dst *float32, src *uint16, rows, w, stride int)

// f16RowsAsm widens n rows of w halves, stride apart in src, into dst packed,
// if it can (F16C, w a multiple of 8), and reports whether it did.
func f16RowsAsm(dst []float32, src []uint16, n, w, stride int) bool {
	if !hasAVX2 || w%8 != 0 || n == 0 {
		return false
	}
	_ = dst[n*w-1]
	_ = src[(n-1)*stride+w-1]
	f16RowsToF32(&dst[0], &src[0], n, w, stride)
	return true
}
