package cpu

// kernelSet is the set of inner kernels MatMul drives. One set is chosen at
// start-up (see dot_amd64.go); kernGo is the portable one every set is checked
// against.
type kernelSet struct {
	name  string
	avail bool // this CPU runs the set

	// qMatVec writes dst[i] = row n0+i of q · token l of a, for a 4- or 8-bit q.
	qMatVec func(dst []float32, q *QMatrix, K, n0 int, a *actQ, l int)
	// qTile, if set, writes the qTileN × qTileL tile dst[j·dstride+i] = row n0+i ·
	// token l0+j.
	qTile          func(dst []float32, dstride int, q *QMatrix, K, n0 int, a *actQ, l0 int)
	qTileN, qTileL int

	// qMatVecB, if set, is qMatVec on byte-plane activations (see actB), for
	// the weights bFits takes; MatMul prefers it. pf is how it prefetches
	// the codes, where tunePF.
	qMatVecB func(dst []float32, q *QMatrix, K, n0 int, a *actB, l int, pf pfArm)
	// tunePF: qMatVecB's prefetch arm is chosen per weight as decode runs
	// (see pfTune).
	tunePF bool
	// blocked: qMatVecB reads only the blocked layout, and Prepare moves the
	// weights it takes there (see blocked.go). Its rows [n0, n0+len(dst))
	// are then whole blocks: n0 a multiple of 4, and so is len(dst) unless the
	// rows run to the last.
	blocked bool
	// q6: qMatVecB also reads q6_k weights in their blocked layout (see
	// kquant_q6.go).
	q6 bool

	// fMatVec writes dst[i] = row n0+i of w · x for f32, f16 and bf16 weights.
	fMatVec func(dst []float32, w *Weight, n0 int, x []float32)
	// fTile, if set, writes the fTileN × fTileL tile dst[j·dstride+i] = row n0+i ·
	// x[j·K:(j+1)·K]. It needs K to be a multiple of 8.
	fTile          func(dst []float32, dstride int, w *Weight, n0 int, x []float32)
	fTileN, fTileL int

	// dTile, if set, is an f32-only fTile for prefill's dequantized row blocks
	// (see doQDeq); without it they take fTile.
	dTile          func(dst []float32, dstride int, w *Weight, n0 int, x []float32)
	dTileN, dTileL int

	// pTile, if set, writes the pTileL-token × panelN-row tile of a prefill panel
	// (see doQPanel): dst[l·dstride + r] = Σ_{k<kc} x[l·xstride + k]·p[k·panelN +
	// r], or adds that to dst if acc.
	pTile  func(dst []float32, dstride int, p []float32, kc int, x []float32, xstride int, acc bool)
	pTileL int
	// dPanel, if set, is QMatrix.dequantPanel for the widths it takes (it
	// returns false for the others).
	dPanel func(p []float32, q *QMatrix, n0, K, k0, kn int) bool
	// fPanel, if set, is Weight.widenPanel for f32, f16 and bf16 weights;
	// with pTile it takes their prefill (see doFPanel).
	fPanel func(p []float32, w *Weight, n0, k0, kn int)
}

// kern is the kernel set MatMul uses.
var kern = kernGo

// kernGo is the pure-Go kernel set.
var kernGo = kernelSet{
	name:    "go",
	avail:   true,
	qMatVec: qMatVecGo,
	fMatVec: fMatVecGo,
}

// qMatVecGo is the portable 4/8-bit mat-vec: integer dot products per group,
// then dx·Σ_g scale_g·(hi + 2⁻¹⁶·lo) + Σ_g bias_g·sx_g + scale_g·cr_g (see actQ).
func qMatVecGo(dst []float32, q *QMatrix, K, n0 int, a *actQ, l int) {
	G, gs := a.G, q.GroupSize
	xq := a.xq[2*l*K : 2*(l+1)*K]
	dx, sx, cr := a.dq[l], a.sx[l*a.Gp:l*a.Gp+G], a.cr[l*a.Gp:l*a.Gp+G]
	for i := range dst {
		n := n0 + i
		w, s, b := q.row(n, K)
		var sum, bias float32
		for g := range G {
			var hi, lo int32
			x := xq[2*g*gs : 2*(g+1)*gs]
			if q.Bits == 4 {
				hi, lo = dotQ4Go(w[g*gs/8:(g+1)*gs/8], x, q4Chunk(gs))
			} else {
				hi, lo = dotQ8Go(w[g*gs/4:(g+1)*gs/4], x)
			}
			sum += s[g] * (float32(hi) + float32(lo)*(1.0/65536))
			bias += b[g]*sx[g] + s[g]*cr[g]
		}
		dst[i] = dx*sum + bias
	}
}

// dotQ4Go returns Σ code·xh and Σ code·xl over chunks of c 4-bit codes (c/8
// words each) against actQ's layout of a group: byte j of a chunk holds values j
// (low nibble) and c/2+j (high nibble) of its permuted order.
func dotQ4Go(w []uint32, xq []int16, c int) (hi, lo int32) {
	cw := c / 8
	for b := 0; b+cw <= len(w); b += cw {
		for jw, v := range w[b : b+cw] {
			for t := range 4 {
				p := b*8 + 4*jw + t // permuted index of the low nibble
				e, o := xqIndex(p), xqIndex(p+c/2)
				ce, co := int32(v>>(8*t)&15), int32(v>>(8*t+4)&15)
				hi += ce*int32(xq[e]) + co*int32(xq[o])
				lo += ce*int32(xq[e+32]) + co*int32(xq[o+32])
			}
		}
	}
	return hi, lo
}

// dotQ8Go returns Σ code·xh and Σ code·xl for 8-bit codes (4 per word).
func dotQ8Go(w []uint32, xq []int16) (hi, lo int32) {
	for u := 0; 8*u < len(w); u++ {
		h, l := xq[64*u:64*u+32], xq[64*u+32:64*u+64]
		for j, v := range w[8*u : 8*u+8] {
			for t := range 4 {
				c := int32(v >> (8 * t) & 255)
				hi += c * int32(h[4*j+t])
				lo += c * int32(l[4*j+t])
			}
		}
	}
	return hi, lo
}

// fMatVecGo is the portable f32/f16/bf16 mat-vec.
func fMatVecGo(dst []float32, w *Weight, n0 int, x []float32) {
	K := w.K
	x = x[:K]
	for i := range dst {
		n := n0 + i
		switch w.Format {
		case FormatF32:
			dst[i] = Dot(w.F32[n*K:(n+1)*K], x)
		case FormatF16:
			dst[i] = dotF16Go(w.U16[n*K:(n+1)*K], x)
		case FormatBF16:
			dst[i] = dotBF16Go(w.U16[n*K:(n+1)*K], x)
		}
	}
}

func dotF16Go(w []uint16, x []float32) float32 {
	x = x[:len(w)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(w); i += 4 {
		s0 += F16ToF32(w[i]) * x[i]
		s1 += F16ToF32(w[i+1]) * x[i+1]
		s2 += F16ToF32(w[i+2]) * x[i+2]
		s3 += F16ToF32(w[i+3]) * x[i+3]
	}
	for ; i < len(w); i++ {
		s0 += F16ToF32(w[i]) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotBF16Go(w []uint16, x []float32) float32 {
	x = x[:len(w)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(w); i += 4 {
		s0 += BF16ToF32(w[i]) * x[i]
		s1 += BF16ToF32(w[i+1]) * x[i+1]
		s2 += BF16ToF32(w[i+2]) * x[i+2]
		s3 += BF16ToF32(w[i+3]) * x[i+3]
	}
	for ; i < len(w); i++ {
		s0 += BF16ToF32(w[i]) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func (k *kernelSet) usable() bool { return k.avail }

// disableAsm switches MatMul to the pure-Go kernels until restore is called, so
// one machine tests both paths (klauspost's DisableBMI2). Not safe to call while
// a MatMul runs.
func disableAsm() (restore func()) {
	old := kern
	kern = kernGo
	return func() { kern = old }
}
