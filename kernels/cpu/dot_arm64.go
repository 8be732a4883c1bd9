//go:build arm64 && !noasm

package cpu

import "github.com/klauspost/cpuid/v2"

// The assembly kernels in dotb_arm64.s (SDOT byte dots), dot_arm64.s (float
// tile and mat-vec) and panel_arm64.s. Pointers index Go slices the wrappers
// below have bounds-checked; strides are in bytes.

//go:noescape
func qMatVecB4NEON(dst *float32, n int, w *uint32, wstride int, s, b *float32, sstride, G int, xb *int8, nchunk, lpg int, dq, sx, cr *float32, tsum *int64)

//go:noescape
func qMatVecB8NEON(dst *float32, n int, w *uint32, wstride int, s, b *float32, sstride, G int, xb *int8, nchunk, lpg int, dq, sx, cr *float32, tsum *int64)

//go:noescape
func qMatVecB4NEONS(dst *float32, n int, w *uint32, wstride int, s, b *float32, sstride, G int, xb *int8, nchunk, lpg int, dq, sx, cr *float32, tsum *int64)

//go:noescape
func qMatVecB8NEONS(dst *float32, n int, w *uint32, wstride int, s, b *float32, sstride, G int, xb *int8, nchunk, lpg int, dq, sx, cr *float32, tsum *int64)

// qMatVecBNEON runs the byte-dot kernels with SDOT (see actB);
// qMatVecBNEONS runs them with widening multiplies, for CPUs without
// FEAT_DotProd. They leave prefetching to the hardware (pf is unused).
func qMatVecBNEON(dst []float32, q *QMatrix, K, n0 int, a *actB, l int, _ pfArm) {
	qMatVecBArm(dst, q, K, n0, a, l, true)
}

func qMatVecBNEONS(dst []float32, q *QMatrix, K, n0 int, a *actB, l int, _ pfArm) {
	qMatVecBArm(dst, q, K, n0, a, l, false)
}

// qMatVecBArm runs the byte-dot kernels (SDOT if dp) four rows at a time; a
// call of fewer than four rows runs each row as a block of four copies.
func qMatVecBArm(dst []float32, q *QMatrix, K, n0 int, a *actB, l int, dp bool) {
	n := len(dst)
	switch {
	case n == 0:
	case K == 0 || !bFits(q, K) || a.C != bChunk(q.Bits) || a.K != K || a.striped:
		qMatVecBGo(dst, q, K, n0, a, l)
	case n >= 4:
		qMatVecBRows(dst, q, K, n0, a, l, false, dp)
	default:
		var t [4]float32
		for i := range dst {
			qMatVecBRows(t[:], q, K, n0+i, a, l, true, dp)
			dst[i] = t[0]
		}
	}
}

// qMatVecBRows runs a kernel on rows [n0, n0+len(dst)), at least four, or, if
// rep, on row n0 four times.
func qMatVecBRows(dst []float32, q *QMatrix, K, n0 int, a *actB, l int, rep, dp bool) {
	n, G := len(dst), a.G
	words := K * q.Bits / 32
	rows, ws, ss := n, 4*words, 4*G
	if rep {
		rows, ws, ss = 1, 0, 0
	}
	w := q.W[n0*words : (n0+rows)*words]
	s, b := q.Scales[n0*G:(n0+rows)*G], q.Biases[n0*G:(n0+rows)*G]
	xb := a.xb[l*a.rowBytes() : (l+1)*a.rowBytes()]
	sx, cr, ts := a.sx[l*G:(l+1)*G], a.cr[l*G:(l+1)*G], a.tsum[l*G:(l+1)*G]
	nc, lpg4, lpg8 := K/a.C, q.GroupSize/32, q.GroupSize/16
	// direct calls: through a func value dst would escape
	switch {
	case q.Bits == 4 && dp:
		qMatVecB4NEON(&dst[0], n, &w[0], ws, &s[0], &b[0], ss, G, &xb[0], nc, lpg4, &a.dq[l], &sx[0], &cr[0], &ts[0])
	case q.Bits == 4:
		qMatVecB4NEONS(&dst[0], n, &w[0], ws, &s[0], &b[0], ss, G, &xb[0], nc, lpg4, &a.dq[l], &sx[0], &cr[0], &ts[0])
	case dp:
		qMatVecB8NEON(&dst[0], n, &w[0], ws, &s[0], &b[0], ss, G, &xb[0], nc, lpg8, &a.dq[l], &sx[0], &cr[0], &ts[0])
	default:
		qMatVecB8NEONS(&dst[0], n, &w[0], ws, &s[0], &b[0], ss, G, &xb[0], nc, lpg8, &a.dq[l], &sx[0], &cr[0], &ts[0])
	}
}

//go:noescape
func fMatVecF32NEON(dst *float32, n int, w *float32, wstride, K int, x *float32)

//go:noescape
func fMatVecF16NEON(dst *float32, n int, w *uint16, wstride, K int, x *float32)

//go:noescape
func fMatVecBF16NEON(dst *float32, n int, w *uint16, wstride, K int, x *float32)

// fMatVecNEON runs the f32/f16/bf16 mat-vec kernels four rows at a time (a
// call of fewer than four rows runs each row as a block of four copies); K not
// a multiple of 8 takes the Go loop.
func fMatVecNEON(dst []float32, w *Weight, n0 int, x []float32) {
	n, K := len(dst), w.K
	switch {
	case n == 0:
	case K%8 != 0 || K == 0:
		fMatVecGo(dst, w, n0, x)
	case n >= 4:
		fMatVecRows(dst, w, n0, x, false)
	default:
		var t [4]float32
		for i := range dst {
			fMatVecRows(t[:], w, n0+i, x, true)
			dst[i] = t[0]
		}
	}
}

// fMatVecRows runs the kernel on rows [n0, n0+len(dst)), at least four, or, if
// rep, on row n0 four times.
func fMatVecRows(dst []float32, w *Weight, n0 int, x []float32, rep bool) {
	n, K := len(dst), w.K
	rows, es := n, 4
	if w.Format != FormatF32 {
		es = 2
	}
	ws := es * K
	if rep {
		rows, ws = 1, 0
	}
	x = x[:K]
	switch w.Format {
	case FormatF32:
		r := w.F32[n0*K : (n0+rows)*K]
		fMatVecF32NEON(&dst[0], n, &r[0], ws, K, &x[0])
	case FormatF16:
		r := w.U16[n0*K : (n0+rows)*K]
		fMatVecF16NEON(&dst[0], n, &r[0], ws, K, &x[0])
	case FormatBF16:
		r := w.U16[n0*K : (n0+rows)*K]
		fMatVecBF16NEON(&dst[0], n, &r[0], ws, K, &x[0])
	}
}

//go:noescape
func fTileF32NEON(dst *float32, dstride int, w *float32, K int, x *float32)

//go:noescape
func fTileF16NEON(dst *float32, dstride int, w *uint16, K int, x *float32)

//go:noescape
func fTileBF16NEON(dst *float32, dstride int, w *uint16, K int, x *float32)

// fTileNEON runs a 4-row × 4-token f32/f16/bf16 tile (K a multiple of 8, as
// MatMul calls tiles).
func fTileNEON(dst []float32, dstride int, w *Weight, n0 int, x []float32) {
	K := w.K
	_ = dst[3*dstride+3]
	x = x[:4*K]
	switch w.Format {
	case FormatF32:
		r := w.F32[n0*K : (n0+4)*K]
		fTileF32NEON(&dst[0], dstride, &r[0], K, &x[0])
	case FormatF16:
		r := w.U16[n0*K : (n0+4)*K]
		fTileF16NEON(&dst[0], dstride, &r[0], K, &x[0])
	case FormatBF16:
		r := w.U16[n0*K : (n0+4)*K]
		fTileBF16NEON(&dst[0], dstride, &r[0], K, &x[0])
	}
}

//go:noescape
func pTileNEON(dst *float32, dstride int, p *float32, kc int, x *float32, xstride int, acc int)

// pTileNEONL is the tokens of pTileNEON's tile.
const pTileNEONL = 8

// pTileN runs the 8-token × 32-row panel tile (see kernelSet.pTile).
func pTileN(dst []float32, dstride int, p []float32, kc int, x []float32, xstride int, acc bool) {
	_ = dst[(pTileNEONL-1)*dstride+panelN-1]
	_ = p[kc*panelN-1]
	_ = x[(pTileNEONL-1)*xstride+kc-1]
	a := 0
	if acc {
		a = 1
	}
	pTileNEON(&dst[0], dstride, &p[0], kc, &x[0], xstride, a)
}

//go:noescape
func dequantPanel4NEON(p *float32, w *uint32, wstride int, s, b *float32, sstride, groups, wpg int)

//go:noescape
func dequantPanel8NEON(p *float32, w *uint32, wstride int, s, b *float32, sstride, groups, wpg int)

// dPanelNEON dequantizes a prefill panel of 4/8-bit codes (see
// QMatrix.dequantPanel) for all 32 rows at once; other widths return false.
func dPanelNEON(p []float32, q *QMatrix, n0, K, k0, kn int) bool {
	gs, bits := q.GroupSize, q.Bits
	if bits != 4 && bits != 8 || gs%32 != 0 || kn < gs {
		return false
	}
	words, G := K*bits/32, K/gs
	_ = p[panelN*kn-1]
	_ = q.W[(n0+panelN)*words-1]
	_ = q.Scales[(n0+panelN)*G-1]
	_ = q.Biases[(n0+panelN)*G-1]
	w := &q.W[n0*words+k0*bits/32]
	s, b := &q.Scales[n0*G+k0/gs], &q.Biases[n0*G+k0/gs]
	// direct calls: through a func value the arguments would escape
	if bits == 4 {
		dequantPanel4NEON(&p[0], w, 4*words, s, b, 4*G, kn/gs, gs/8)
	} else {
		dequantPanel8NEON(&p[0], w, 4*words, s, b, 4*G, kn/gs, gs/4)
	}
	return true
}

var (
	hasASIMD   = cpuid.CPU.Supports(cpuid.ASIMD)
	hasDotProd = hasASIMD && cpuid.CPU.Supports(cpuid.ASIMDDP)
)

// kernNEONDP: SDOT byte dots for 4/8-bit rows of whole chunks (FEAT_DotProd,
// ARMv8.2: Apple M1 and later, Neoverse N1, Cortex-A76 and later), and the
// NEON float kernels.
var kernNEONDP = kernelSet{
	name:     "neon-dotprod",
	avail:    hasDotProd,
	qMatVec:  qMatVecGo,
	qMatVecB: qMatVecBNEON,
	fMatVec:  fMatVecNEON,
	fTile:    fTileNEON,
	fTileN:   4, fTileL: 4,
	pTile:  pTileN,
	pTileL: pTileNEONL,
	dPanel: dPanelNEON,
}

// kernNEON: every arm64 CPU (ARMv8.0 NEON: Cortex-A53/A72, Graviton 1);
// the byte dots by widening multiplies (SMULL, SADALP), 2–3× SDOT's
// instructions.
var kernNEON = kernelSet{
	name:     "neon",
	avail:    hasASIMD,
	qMatVec:  qMatVecGo,
	qMatVecB: qMatVecBNEONS,
	fMatVec:  fMatVecNEON,
	fTile:    fTileNEON,
	fTileN:   4, fTileL: 4,
	pTile:  pTileN,
	pTileL: pTileNEONL,
	dPanel: dPanelNEON,
}

// asmSets lists the assembly kernel sets this build can run, best first.
var asmSets = []*kernelSet{&kernNEONDP, &kernNEON}

func init() {
	for _, k := range asmSets {
		if k.avail {
			kern = *k
			return
		}
	}
}

func absMaxBitsAsm(x []float32) (uint32, bool) { return 0, false }

func quantRowBAsm(xb []int8, x []float32, gs, C int, striped bool, id float64, sums []float64, tsum []int64) bool {
	return false
}

//go:noescape
func f16sToF32NEON(dst *float32, src *uint16, n int)

// f16sAsm widens the longest prefix of src it handles (whole 8-half steps)
// into dst and returns its length.
func f16sAsm(dst []float32, src []uint16) int {
	n := len(src) &^ 7
	if !hasASIMD || n == 0 {
		return 0
	}
	f16sToF32NEON(&dst[0], &src[0], n)
	return n
}

func f16RowsAsm(dst []float32, src []uint16, n, w, stride int) bool { return false }
