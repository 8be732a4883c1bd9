package cpu

import (
	"fmt"
	"time"
)

// Weight is a read-only (N, K) matrix in one of the storage formats ingot loads.
// Exactly one of F32, U16 (f16 or bf16, see Format) or Q is set.
type Weight struct {
	Format Format
	N, K   int
	F32    []float32 // FormatF32: N·K
	U16    []uint16  // FormatF16, FormatBF16: N·K
	Q      *QMatrix  // FormatQ
}

// Format is the storage format of a [Weight].
type Format uint8

const (
	FormatF32 Format = iota
	FormatF16
	FormatBF16
	FormatQ
)

// QMatrix is an MLX affine-quantized (N, K) matrix: codes of Bits bits packed little
// end first into uint32 words (a little-endian bitstream for 3/5/6 bits), and
// w[n][k] = Scales[n][g]·q + Biases[n][g] with g = k/GroupSize.
type QMatrix struct {
	Bits, GroupSize int
	W               []uint32  // N · K·Bits/32
	Scales, Biases  []float32 // N · K/GroupSize

	// Blocked, if set, holds the codes, scales and biases instead (W, Scales
	// and Biases are nil) in the blocked layout of blocked.go: see Prepare.
	Blocked []byte
	meta    uint8 // Blocked's type of scales and biases: metaF32, metaBF16, metaF16 or metaK

	// slabs are a blocked q's K-slabs in order, views of Blocked (see
	// blocked.go); one, a view of all of it, when its rows fit L1. k0 is a
	// slab's first column.
	slabs []QMatrix
	k0    int
}

// row returns row n (of K) of a row-major q: its code words, scales and biases.
func (q *QMatrix) row(n, K int) (w []uint32, s, b []float32) {
	words, G := K*q.Bits/32, K/q.GroupSize
	return q.W[n*words : (n+1)*words], q.Scales[n*G : (n+1)*G], q.Biases[n*G : (n+1)*G]
}

// Bytes returns the number of bytes a mat-vec reads from w: the packed codes or
// elements plus, for FormatQ, the float32 scales and biases.
func (w *Weight) Bytes() int {
	switch w.Format {
	case FormatF32:
		return 4 * w.N * w.K
	case FormatF16, FormatBF16:
		return 2 * w.N * w.K
	case FormatQ:
		return len(w.Q.Blocked) + 4*(len(w.Q.W)+len(w.Q.Scales)+len(w.Q.Biases))
	}
	return 0
}

// MatMul computes dst (L, N) = x (L, K) · wᵀ, split over the pool's threads.
//
// Weights in FormatQ with 4 or 8 bits (any group size that is a multiple of 32)
// take the fast path: each row of x is quantized once per call to integers on a
// grid of one absmax scale dx per row, the codes are multiplied with integer dot
// products, and the affine bias is folded in as bias·Σx over the group with the
// exact Σx. With AVX-512 VNNI and GFNI, rows of whole 512-bit chunks take the
// byte-dot kernels: x ≈ dx·t with |t| < 2²³ held as three signed bytes (see
// actB), each value within amax/(2·8290000) ≈ 2⁻²⁴·amax of x_k; on amd64 they
// read the blocked layout Prepare makes (a weight not prepared takes the int16
// kernels there). Otherwise
// the int16 kernels take two int16 per value, x ≈ dx·(xh + xl/2¹⁶) with dx =
// amax/32767 (see actQ), each value within amax/(65534·65536). The activation
// rounding, the only error beyond float32 rounding, is bounded per output by
//
//	|err| ≤ res · max_k |x_k| · Σ_g |scale_g| · Σ_{k∈g} |q_k − c|
//
// with res that resolution and c = (2^bits − 1)/2: a per-group correction
// centres the codes. On Gaussian data the relative RMS error of the outputs is
// about 1–1.5e-7 either way (TestMatMulQError), as for an exact float dot
// product, where int8 activations (llama.cpp's Q8_0 path) cost 3e-3 and one
// int16 about 1e-5. Other bit widths use an exact float path that dequantizes on
// the fly (see [QMatrix.DequantRow]).
//
// For L = 1 MatMul is a bandwidth-bound mat-vec whose row chunks the threads
// claim dynamically (on the byte-dot kernels with the prefetch each weight's
// calls have measured fastest: see pfTune); for L > 1 it blocks rows so a
// weight block stays in cache while tiles of several tokens reuse each decoded
// weight. From L = 16 (prefill) a quantized weight of any width instead takes
// the exact float path: each
// thread dequantizes a block of rows to f32 (as DequantRow; a per-thread
// scratch of at most 256 KB, never a copy of the matrix) and runs the f32 tile
// kernels on it. With a panel kernel (AVX-512) the blocks are panels of 32 rows
// × 256 elements in element-major order against x rearranged once per call
// (see doQPanel); with it, f32, f16 and bf16 weights from L = 16 take the same
// panels, widened exactly to f32 (see doFPanel), and otherwise tiles that read
// their rows as stored. MatMul allocates nothing once the pool's scratch has grown to the
// largest L·K seen. A Pool runs one MatMul at a time: calls on the same Pool must
// not overlap.
func (p *Pool) MatMul(dst, x []float32, L int, w *Weight) {
	if len(dst) != L*w.N || len(x) != L*w.K {
		panic(fmt.Sprintf("cpu: MatMul: dst %d, x %d for L=%d N=%d K=%d", len(dst), len(x), L, w.N, w.K))
	}
	if L == 0 || w.N == 0 {
		return
	}
	t := &p.mm[0]
	f := p.plan(t, dst, x, L, w)
	u := t.choosePF()
	start := time.Now()
	p.quantize(f, x, L, w)
	n := w.N
	if t.slab > 0 {
		n = len(w.Q.slabs) * t.slab
	}
	if L == 1 {
		p.RunChunks(n, p.vecChunk(n), 4, t)
	} else {
		grain := 16
		if t.act == actPanel || w.Format == FormatQ && L >= deqMinL && t.k.pTile != nil {
			grain = panelN
		}
		p.Run(n, grain, t)
	}
	t.addSlabs()
	if u != nil {
		u.record(t.pf, time.Since(start))
	}
	*t = mmTask{} // drop references to the caller's slices
}

// MatMuls computes dst[i] (L, N_i) = x (L, K) · w[i]ᵀ for weights that read
// the same x: a layer's q, k and v projections, or gate and up. In a decode
// step (L = 1) whose weights take the same kernel, x is quantized once and the
// threads claim the rows of all the weights in one call, so they wait for each
// other once, not once per weight (a 512-row k or v projection alone is too
// short to split well). Otherwise it is MatMul per weight. At most four
// weights.
func (p *Pool) MatMuls(dst [][]float32, x []float32, L int, w []*Weight) {
	if len(dst) != len(w) || len(w) > len(p.mm) {
		panic(fmt.Sprintf("cpu: MatMuls: %d outputs for %d weights (at most %d)", len(dst), len(w), len(p.mm)))
	}
	if L != 1 || len(w) == 1 || !p.planAll(dst, x, w) {
		for i := range w {
			p.MatMul(dst[i], x, L, w[i])
		}
		return
	}
	t := &p.mms
	*t = mmsTask{tasks: p.mm[:len(w)]}
	u := t.tasks[0].choosePF() // the first weight's tuner serves the call
	for i := range t.tasks {
		t.n += (w[i].N + 3) &^ 3 // every weight starts on a four-row block
		t.tasks[i].pf = t.tasks[0].pf
	}
	start := time.Now()
	p.quantize(t.tasks[0].act, x, 1, w[0])
	p.RunChunks(t.n, p.vecChunk(t.n), 4, t)
	if u != nil {
		u.record(t.tasks[0].pf, time.Since(start))
	}
	clear(p.mm[:])
}

// planAll plans a fused decode step over w and reports whether it can run as
// one: every weight takes the same kernel and activation format.
func (p *Pool) planAll(dst [][]float32, x []float32, w []*Weight) bool {
	w0 := w[0]
	for i, wi := range w {
		if len(dst[i]) != wi.N || len(x) != wi.K {
			panic(fmt.Sprintf("cpu: MatMuls: dst %d, x %d for weight %d with N=%d K=%d", len(dst[i]), len(x), i, wi.N, wi.K))
		}
		t := &p.mm[i]
		p.plan(t, dst[i], x, 1, wi)
		if wi.N == 0 || t.slab > 0 || t.act != p.mm[0].act || (t.act != actNone && (wi.Q.Bits != w0.Q.Bits || wi.Q.GroupSize != w0.Q.GroupSize)) {
			clear(p.mm[:])
			return false
		}
	}
	return true
}

// vecChunk is the largest piece of a mat-vec of n rows a thread claims (half
// a thread's share: RunChunks shrinks pieces further as a share ends), in
// whole blocks of the four-row kernels.
func (p *Pool) vecChunk(n int) int { return max(16, n/(2*p.n)) &^ 3 }

// plan sets t up for dst (L, N) = x (L, K) · wᵀ and returns the activation
// format it needs x quantized to (see quantize).
func (p *Pool) plan(t *mmTask, dst, x []float32, L int, w *Weight) actFormat {
	*t = mmTask{dst: dst, x: x, L: L, w: w, k: &kern, p: p}
	switch {
	case w.Format == FormatQ && L >= deqMinL:
		q := w.Q
		if q.GroupSize <= 0 || w.K%q.GroupSize != 0 || w.K*q.Bits%32 != 0 {
			panic(fmt.Sprintf("cpu: MatMul: K=%d not a multiple of group size %d (bits %d)", w.K, q.GroupSize, q.Bits))
		}
		t.run = (*mmTask).doQDeq
		if t.k.pTile != nil && w.N >= panelN {
			t.act = actPanel
		}
	case w.Format == FormatQ && w.Q.Blocked != nil && !t.k.blocked:
		panic(fmt.Sprintf("cpu: MatMul: a blocked weight (see Prepare) with the %s kernels", t.k.name))
	case w.Format == FormatQ && t.k.qMatVecB != nil && bFits(w.Q, w.K) && (w.Q.Blocked != nil) == t.k.blocked:
		t.b, t.run, t.act = &p.actb, (*mmTask).doQB, actBytes
		if ns := len(w.Q.slabs); ns > 1 {
			t.slab = (w.N + 3) &^ 3
			p.part = grow(p.part, (ns-1)*L*w.N)
			t.part = p.part[:(ns-1)*L*w.N]
		}
	case w.Format == FormatQ && qFast(w.Q, w.K):
		t.a, t.run, t.act = &p.act, (*mmTask).doQ, actInt16
	case w.Format == FormatQ:
		q := w.Q
		if q.GroupSize <= 0 || w.K%q.GroupSize != 0 || w.K*q.Bits%32 != 0 {
			panic(fmt.Sprintf("cpu: MatMul: K=%d not a multiple of group size %d (bits %d)", w.K, q.GroupSize, q.Bits))
		}
		t.run = (*mmTask).doQFloat
	default:
		t.run = (*mmTask).doF
		if L >= deqMinL && t.k.pTile != nil && t.k.fPanel != nil && w.N >= panelN {
			t.act = actPanel
		}
	}
	return t.act
}

// choosePF sets t.pf and returns the tuner that chose it (see pfTune): for a
// decode mat-vec on kernels whose prefetch is tuned, else nil with t.pf the
// weight's fastest arm so far.
func (t *mmTask) choosePF() *pfTune {
	t.pf = pfL2
	if t.act != actBytes || !t.k.tunePF {
		return nil
	}
	u := t.p.tuner(t.w.Q)
	if t.L != 1 {
		t.pf = u.best
		return nil
	}
	t.pf = u.prefetch()
	return u
}

// actFormat is the form a MatMul needs its x in.
type actFormat uint8

const (
	actNone  actFormat = iota // x as it is
	actBytes                  // byte planes (p.actb), for doQB
	actInt16                  // int16 pairs (p.act), for doQ
	actPanel                  // panel-step order (p.xp), for doQPanel and doFPanel
)

// quantize puts x (L, K) in form f for weight w.
func (p *Pool) quantize(f actFormat, x []float32, L int, w *Weight) {
	switch f {
	case actBytes:
		p.actb.quantize(p, x, L, w.K, w.Q.GroupSize, w.Q.Bits, w.Q.Blocked != nil)
	case actInt16:
		p.act.quantize(p, x, L, w.K, w.Q.GroupSize, w.Q.Bits)
	case actPanel:
		kc := panelKC // f32, f16, bf16 (doFPanel)
		if w.Format == FormatQ {
			kc = panelStep(w.Q.GroupSize)
		}
		p.xp.pack(p, x, L, w.K, kc, kern.pTileL)
	}
}

// mmsTask is a fused MatMuls call: rows [0, n) run through tasks in turn,
// each weight's rows rounded up to whole four-row blocks.
type mmsTask struct {
	tasks []mmTask
	n     int
}

func (t *mmsTask) Do(lo, hi int) {
	off := 0
	for i := range t.tasks {
		u := &t.tasks[i]
		if a, b := max(lo-off, 0), min(hi-off, u.w.N); a < b {
			u.run(u, a, b)
		}
		off += (u.w.N + 3) &^ 3
	}
}

// qFast reports whether q takes the int16 activation path: 4 or 8 bits, groups a
// multiple of the 32-element block.
func qFast(q *QMatrix, K int) bool {
	return (q.Bits == 4 || q.Bits == 8) && q.GroupSize >= 32 && q.GroupSize%32 == 0 && K%q.GroupSize == 0
}

// mmTask is one MatMul in flight. It lives in the Pool so a call allocates nothing.
type mmTask struct {
	dst, x []float32
	L      int
	w      *Weight
	a      *actQ
	b      *actB
	k      *kernelSet
	p      *Pool
	run    func(t *mmTask, n0, n1 int)
	act    actFormat // the form of x run reads

	// A weight in K-slabs (see blocked.go) runs rows [j·slab, j·slab+N) as
	// slab j's rows, slab 0 into dst and slab j > 0 into part[j−1] (L, N);
	// addSlabs adds them up. slab is 0 otherwise.
	slab int
	part []float32

	pf pfArm // how qMatVecB prefetches
}

// deqMinL is the number of tokens from which MatMul runs a quantized weight as
// f32 row blocks dequantized once per call (doQDeq) rather than as mat-vecs
// per token: a dequantized element then serves at least this many tokens, and
// the f32 tile kernels do the rest exactly.
const deqMinL = 16

// deqBuf is one thread's dequantized row block; the Pool keeps them so a call
// allocates nothing once they have grown.
type deqBuf struct {
	w Weight // FormatF32 view of buf
	f []float32
	q QMatrix // rows of a blocked weight, unblocked

	p  []float32 // a panel step: panelN rows × kc elements, element-major (see doQPanel)
	tt []float32 // the last token tile's output
}

// panelN is the number of weight rows in a prefill panel, and panelKC the
// elements per panel step (rounded to whole groups). Tests shrink panelKC.
const panelN = 32

var panelKC = 256

// xPanel is x (L, K) rearranged for the panel tiles: the elements [k0, k0+kn)
// of every token, one panel step, lie together at xp[k0·L:], token l at
// xp[k0·L + l·kn:], so a tile's twelve rows of x are a few KB apart, not K·4
// bytes (a multiple of 4 KB that would put them all in one L1 set). A pad of
// one tile past the end lets the last tokens run as a full tile.
type xPanel struct {
	xp, x    []float32
	L, K, kc int
}

// pack fills xp from x over p's threads.
func (a *xPanel) pack(p *Pool, x []float32, L, K, kc, tl int) {
	a.x, a.L, a.K, a.kc = x, L, K, kc
	a.xp = grow(a.xp, L*K+tl*kc)
	clear(a.xp[L*K:])
	p.Run(L, 1, a)
	a.x = nil
}

// Do packs tokens [lo, hi).
func (a *xPanel) Do(lo, hi int) {
	L, K, kc := a.L, a.K, a.kc
	for l := lo; l < hi; l++ {
		x := a.x[l*K : (l+1)*K]
		for k0 := 0; k0 < K; k0 += kc {
			kn := min(kc, K-k0)
			copy(a.xp[k0*L+l*kn:k0*L+(l+1)*kn], x[k0:k0+kn])
		}
	}
}

// panelStep returns the elements per panel step for groups of gs: panelKC
// rounded to whole groups.
func panelStep(gs int) int { return gs * max(1, panelKC/gs) }

// doQPanel runs rows [n0, n0 + m·panelN) of a quantized weight, for the largest
// such m that fits [n0, n1), and returns where it stopped. Each panel of panelN
// rows is dequantized (exactly, as DequantRow) kc elements at a time into
// element-major order, p[k·panelN + r], so the tile kernel broadcasts x and
// multiplies whole vectors of rows with no horizontal sums; every token of the
// call runs against one panel step while it is in cache, the outputs adding up
// the steps' sums.
func (t *mmTask) doQPanel(db *deqBuf, n0, n1 int) int {
	q, K, k := t.w.Q, t.w.K, t.k
	kc := panelStep(q.GroupSize)
	db.p = grow(db.p, panelN*kc)
	db.tt = grow(db.tt, k.pTileL*panelN)
	nb := n0
	for ; nb+panelN <= n1; nb += panelN {
		qp, base := q.rowMajor(&db.q, nb, nb+panelN, K)
		for k0 := 0; k0 < K; k0 += kc {
			kn := min(kc, K-k0)
			pn := db.p[:panelN*kn]
			if k.dPanel == nil || !k.dPanel(pn, qp, nb-base, K, k0, kn) {
				qp.dequantPanel(pn, nb-base, K, k0, kn)
			}
			t.panelTiles(db, pn, nb, k0, kn)
		}
	}
	return nb
}

// panelTiles runs every token of the call against one panel step pn: elements
// [k0, k0+kn) of rows [nb, nb+panelN), element-major (see doQPanel). It writes
// those outputs for the first step (k0 = 0) and adds to them after.
func (t *mmTask) panelTiles(db *deqBuf, pn []float32, nb, k0, kn int) {
	N, L, k := t.w.N, t.L, t.k
	tl, xp := k.pTileL, t.p.xp.xp
	acc := k0 > 0
	l := 0
	for ; l+tl <= L; l += tl {
		k.pTile(t.dst[l*N+nb:], N, pn, kn, xp[k0*L+l*kn:], kn, acc)
	}
	if l == L {
		return
	}
	// the last L mod tl tokens as a full tile into scratch (the rows past L
	// read the next step's x or the pad)
	k.pTile(db.tt, panelN, pn, kn, xp[k0*L+l*kn:], kn, false)
	for j := range L - l {
		d, s := t.dst[(l+j)*N+nb:(l+j)*N+nb+panelN], db.tt[j*panelN:(j+1)*panelN]
		if !acc {
			copy(d, s)
			continue
		}
		for i := range d {
			d[i] += s[i]
		}
	}
}

// doFPanel is doQPanel for an f32, f16 or bf16 weight: each panel step is
// widened to f32 (exactly) into element-major order (kernelSet.fPanel) and
// every token of the call runs against it. It returns where it stopped.
func (t *mmTask) doFPanel(db *deqBuf, n0, n1 int) int {
	w, K, k := t.w, t.w.K, t.k
	kc := panelKC
	db.p = grow(db.p, panelN*kc)
	db.tt = grow(db.tt, k.pTileL*panelN)
	nb := n0
	for ; nb+panelN <= n1; nb += panelN {
		for k0 := 0; k0 < K; k0 += kc {
			kn := min(kc, K-k0)
			pn := db.p[:panelN*kn]
			k.fPanel(pn, w, nb, k0, kn)
			t.panelTiles(db, pn, nb, k0, kn)
		}
	}
	return nb
}

// widenPanel writes elements [k0, k0+kn) of rows [n0, n0+panelN) of an f32,
// f16 or bf16 w into p in element-major order, p[(k−k0)·panelN + r], widened
// to f32 exactly (as Row). It is the reference the fPanel kernels match.
func (w *Weight) widenPanel(p []float32, n0, k0, kn int) {
	K := w.K
	p = p[:panelN*kn]
	for r := range panelN {
		o := (n0+r)*K + k0
		switch w.Format {
		case FormatF32:
			for j, v := range w.F32[o : o+kn] {
				p[j*panelN+r] = v
			}
		case FormatF16:
			for j, v := range w.U16[o : o+kn] {
				p[j*panelN+r] = F16ToF32(v)
			}
		case FormatBF16:
			for j, v := range w.U16[o : o+kn] {
				p[j*panelN+r] = BF16ToF32(v)
			}
		}
	}
}

// dequantPanel writes elements [k0, k0+kn) of rows [n0, n0+panelN) of q (K
// columns) into p in element-major order, p[(k−k0)·panelN + r], exactly as
// DequantRow. k0 and kn are whole groups.
func (q *QMatrix) dequantPanel(p []float32, n0, K, k0, kn int) {
	gs, bits := q.GroupSize, q.Bits
	p = p[:panelN*kn]
	for r := range panelN {
		n := n0 + r
		w, s, b := q.row(n, K)
		for g := k0 / gs; g < (k0+kn)/gs; g++ {
			sg, bg := s[g], b[g]
			o := (g*gs-k0)*panelN + r // p index of the group's first element
			switch {
			case bits == 4 && gs%8 == 0:
				var lut [16]float32 // the group's 16 values, as DequantRow computes them
				for c := range lut {
					lut[c] = float32(sg*float32(c)) + bg
				}
				for j, v := range w[g*gs/8 : (g+1)*gs/8] {
					e := p[o+8*j*panelN : o+8*j*panelN+7*panelN+1]
					e[0] = lut[v&15]
					e[1*panelN] = lut[v>>4&15]
					e[2*panelN] = lut[v>>8&15]
					e[3*panelN] = lut[v>>12&15]
					e[4*panelN] = lut[v>>16&15]
					e[5*panelN] = lut[v>>20&15]
					e[6*panelN] = lut[v>>24&15]
					e[7*panelN] = lut[v>>28]
				}
			case bits == 8 && gs%4 == 0:
				for j, v := range w[g*gs/4 : (g+1)*gs/4] {
					e := p[o+4*j*panelN : o+4*j*panelN+3*panelN+1]
					for i := range 4 {
						e[i*panelN] = float32(sg*float32(v>>(8*i)&255)) + bg
					}
				}
			default:
				for k := g * gs; k < (g+1)*gs; k++ {
					p[o+(k-g*gs)*panelN] = float32(sg*float32(code(w, k, bits))) + bg
				}
			}
		}
	}
}

// doQDeq runs rows [n0, n1) of a quantized weight by dequantizing blocks of rows
// to f32 (exactly, as DequantRow) and running the f32 kernels on them.
func (t *mmTask) doQDeq(n0, n1 int) {
	q, N, K, L, k := t.w.Q, t.w.N, t.w.K, t.L, t.k
	db := <-t.p.deq
	if k.pTile != nil && t.w.N >= panelN {
		n0 = t.doQPanel(db, n0, n1)
	}
	tile, tn, tl := k.deqTiles(K, L)
	rb := rowBlock(K*4, tn)
	db.f = grow(db.f, min(rb, n1-n0)*K)
	for nb := n0; nb < n1; nb += rb {
		ne := min(nb+rb, n1)
		qb, base := q.rowMajor(&db.q, nb, ne, K)
		for n := nb; n < ne; n++ {
			qb.dequantRowFast(db.f[(n-nb)*K:(n-nb+1)*K], n-base, K)
		}
		k.mulDequant(t.dst, N, nb, db, ne-nb, K, t.x, L, tile, tn, tl)
	}
	t.p.deq <- db
}

// deqTiles returns the tile kernel for f32 rows dequantized from a weight of
// K columns, with its rows and tokens a call, or a nil tile (mat-vecs only).
func (k *kernelSet) deqTiles(K, L int) (tile func(dst []float32, dstride int, w *Weight, n0 int, x []float32), tn, tl int) {
	tile, tn, tl = k.dTile, k.dTileN, k.dTileL
	if tile == nil {
		tile, tn, tl = k.fTile, k.fTileN, k.fTileL
	}
	if tile == nil || K%8 != 0 {
		tn, tl = 1, L+1
	}
	return tile, tn, tl
}

// mulDequant computes rows [nb, nb+rows) of dst (L, N) = x (L, K) · wᵀ from
// those rows of w dequantized to f32 in db.f: whole tiles of tn rows and tl
// tokens, then mat-vecs for the tokens and rows left over (deqTiles).
func (k *kernelSet) mulDequant(dst []float32, N, nb int, db *deqBuf, rows, K int, x []float32, L int,
	tile func(dst []float32, dstride int, w *Weight, n0 int, x []float32), tn, tl int) {
	db.w = Weight{Format: FormatF32, N: rows, K: K, F32: db.f[:rows*K]}
	w := &db.w
	ne := nb + rows
	nt := rows / tn * tn // rows [0, nt) of the block in full tiles
	l := 0
	for ; l+tl <= L; l += tl {
		for n := 0; n < nt; n += tn {
			tile(dst[l*N+nb+n:], N, w, n, x[l*K:])
		}
	}
	for ; l < L; l++ {
		k.fMatVec(dst[l*N+nb:l*N+nb+nt], w, 0, x[l*K:(l+1)*K])
	}
	if nt < rows {
		for l := range L {
			k.fMatVec(dst[l*N+nb+nt:l*N+ne], w, nt, x[l*K:(l+1)*K])
		}
	}
	db.w = Weight{}
}

func (t *mmTask) Do(n0, n1 int) { t.run(t, n0, n1) }

// cacheBlock is the weight bytes a prefill row block keeps hot (a quarter of a
// 1 MB L2). Tests shrink it to cross block edges.
var cacheBlock = 256 << 10

// rowBlock returns how many rows of rowBytes each fit a cache block, a multiple
// of tn.
func rowBlock(rowBytes, tn int) int {
	return max(tn, cacheBlock/max(rowBytes, 1)/tn*tn)
}

// doQ runs rows [n0, n1) of a 4/8-bit weight against the quantized activations.
func (t *mmTask) doQ(n0, n1 int) {
	q, N, L, a, k := t.w.Q, t.w.N, t.L, t.a, t.k
	if L == 1 {
		k.qMatVec(t.dst[n0:n1], q, t.w.K, n0, a, 0)
		return
	}
	tn, tl := k.qTileN, k.qTileL
	if k.qTile == nil {
		tn, tl = 1, L+1 // no tile kernel: mat-vec per token within each row block
	}
	rb := rowBlock(t.w.K*q.Bits/8, tn)
	for nb := n0; nb < n1; nb += rb {
		ne := min(nb+rb, n1)
		nt := nb + (ne-nb)/tn*tn // rows [nb, nt) in full tiles
		l := 0
		for ; l+tl <= L; l += tl {
			for n := nb; n < nt; n += tn {
				k.qTile(t.dst[l*N+n:], N, q, t.w.K, n, a, l)
			}
		}
		for ; l < L; l++ {
			k.qMatVec(t.dst[l*N+nb:l*N+nt], q, t.w.K, nb, a, l)
		}
		if nt < ne {
			for l := range L {
				k.qMatVec(t.dst[l*N+nt:l*N+ne], q, t.w.K, nt, a, l)
			}
		}
	}
}

// doQB runs rows [n0, n1) of a 4/8-bit weight against byte-plane activations
// (with K-slabs, the rows of mmTask.slab's index space).
func (t *mmTask) doQB(n0, n1 int) {
	q, N, K := t.w.Q, t.w.N, t.w.K
	if t.slab == 0 {
		t.doQBSlab(t.dst, q, K, n0, n1)
		return
	}
	for j := range q.slabs {
		lo, hi := max(n0-j*t.slab, 0), min(n1-j*t.slab, N)
		if lo >= hi {
			continue
		}
		out := t.dst
		if j > 0 {
			out = t.part[(j-1)*t.L*N : j*t.L*N]
		}
		t.doQBSlab(out, &q.slabs[j], q.slabCols(j, K), lo, hi)
	}
}

// doQBSlab runs rows [n0, n1) of q (a weight's matrix or one of its K-slabs,
// rows of K) into out (L, N), a mat-vec per token within row blocks that stay
// in cache.
func (t *mmTask) doQBSlab(out []float32, q *QMatrix, K, n0, n1 int) {
	N := t.w.N
	rb := rowBlock(K*q.Bits/8, 4)
	for nb := n0; nb < n1; nb += rb {
		ne := min(nb+rb, n1)
		for l := range t.L {
			t.k.qMatVecB(out[l*N+nb:l*N+ne], q, K, nb, t.b, l, t.pf)
		}
	}
}

// addSlabs adds the K-slabs' outputs after the first to dst, in slab order.
func (t *mmTask) addSlabs() {
	if t.slab == 0 {
		return
	}
	n := len(t.dst)
	for j := 0; j < len(t.part); j += n {
		for i, v := range t.part[j : j+n] {
			t.dst[i] += v
		}
	}
}

// doQFloat runs rows [n0, n1) of a quantized weight of any width on the exact
// float path.
func (t *mmTask) doQFloat(n0, n1 int) {
	N, K := t.w.N, t.w.K
	for n := n0; n < n1; n++ {
		for l := range t.L {
			t.dst[l*N+n] = dotQFloat(t.w.Q, n, K, t.x[l*K:(l+1)*K])
		}
	}
}

// doF runs rows [n0, n1) of an f32, f16 or bf16 weight: in prefill, with a
// panel kernel, whole panels as doFPanel and the rows left over (N mod panelN
// at the end) as tiles.
func (t *mmTask) doF(n0, n1 int) {
	w, N, K, L, k := t.w, t.w.N, t.w.K, t.L, t.k
	if L == 1 {
		k.fMatVec(t.dst[n0:n1], w, n0, t.x)
		return
	}
	if t.act == actPanel {
		db := <-t.p.deq
		n0 = t.doFPanel(db, n0, n1)
		t.p.deq <- db
	}
	tn, tl := k.fTileN, k.fTileL
	if k.fTile == nil || K%8 != 0 {
		tn, tl = 1, L+1
	}
	esize := 4
	if w.Format != FormatF32 {
		esize = 2
	}
	rb := rowBlock(K*esize, tn)
	for nb := n0; nb < n1; nb += rb {
		ne := min(nb+rb, n1)
		nt := nb + (ne-nb)/tn*tn
		l := 0
		for ; l+tl <= L; l += tl {
			for n := nb; n < nt; n += tn {
				k.fTile(t.dst[l*N+n:], N, w, n, t.x[l*K:])
			}
		}
		for ; l < L; l++ {
			k.fMatVec(t.dst[l*N+nb:l*N+nt], w, nb, t.x[l*K:(l+1)*K])
		}
		if nt < ne {
			for l := range L {
				k.fMatVec(t.dst[l*N+nt:l*N+ne], w, nt, t.x[l*K:(l+1)*K])
			}
		}
	}
}

// Row writes row n of w, dequantized or widened to f32, into dst (K).
func (w *Weight) Row(dst []float32, n int) {
	K := w.K
	switch w.Format {
	case FormatF32:
		copy(dst, w.F32[n*K:(n+1)*K])
	case FormatF16:
		for k, h := range w.U16[n*K : (n+1)*K] {
			dst[k] = F16ToF32(h)
		}
	case FormatBF16:
		for k, h := range w.U16[n*K : (n+1)*K] {
			dst[k] = BF16ToF32(h)
		}
	case FormatQ:
		w.Q.DequantRow(dst, n, K)
	}
}

// DequantRow writes row n (K elements) of q into dst in float32, exactly as MLX
// evaluates it: float32(scale·q) rounded, then + bias.
func (q *QMatrix) DequantRow(dst []float32, n, K int) {
	if q.Blocked != nil {
		q.dequantBlockedRow(dst[:K], n, K)
		return
	}
	w, s, b := q.row(n, K)
	dst = dst[:K]
	for k := range dst {
		g := k / q.GroupSize
		// The explicit conversion rounds the product, so no platform fuses it
		// with the add into an FMA.
		dst[k] = float32(s[g]*float32(code(w, k, q.Bits))) + b[g]
	}
}

// dequantRowFast is DequantRow with unrolled loops for 4 and 8 bits; the same
// float32 operations, so the same bits.
func (q *QMatrix) dequantRowFast(dst []float32, n, K int) {
	gs := q.GroupSize
	if (q.Bits != 4 && q.Bits != 8) || gs%8 != 0 || q.Blocked != nil {
		q.DequantRow(dst, n, K)
		return
	}
	w, s, b := q.row(n, K)
	groups := K / gs
	dst = dst[:K]
	per := 32 / q.Bits // codes per word
	for g := range groups {
		sg, bg := s[g], b[g]
		d := dst[g*gs : (g+1)*gs]
		ws := w[g*gs/per : (g+1)*gs/per]
		if q.Bits == 4 {
			for j, v := range ws {
				e := d[8*j : 8*j+8]
				for i := range e {
					e[i] = float32(sg*float32(v>>(4*i)&15)) + bg
				}
			}
		} else {
			for j, v := range ws {
				e := d[4*j : 4*j+4]
				for i := range e {
					e[i] = float32(sg*float32(v>>(8*i)&255)) + bg
				}
			}
		}
	}
}

// code returns code k of a row's bitstream of bits-wide codes.
func code(w []uint32, k, bits int) uint32 {
	bit := k * bits
	v := uint64(w[bit/32])
	if bit%32+bits > 32 {
		v |= uint64(w[bit/32+1]) << 32
	}
	return uint32(v>>(bit%32)) & (1<<bits - 1)
}

// dotQFloat returns row n of q (dequantized exactly as DequantRow) · x, summed in
// float32 per group and float64 across groups.
func dotQFloat(q *QMatrix, n, K int, x []float32) float32 {
	w, s, b := q.row(n, K)
	gs := q.GroupSize
	groups := K / gs
	var sum float64
	for g := range groups {
		var acc float32
		for k := g * gs; k < (g+1)*gs; k++ {
			acc += (float32(s[g]*float32(code(w, k, q.Bits))) + b[g]) * x[k]
		}
		sum += float64(acc)
	}
	return float32(sum)
}

// Dot returns Σ a[i]·b[i] with four float32 accumulators.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}
