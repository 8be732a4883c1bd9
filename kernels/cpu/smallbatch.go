package cpu

import "fmt"

// MatVecs computes dst[i] (L, N_i) = x (L, K) · w[i]ᵀ for up to four weights
// as L mat-vecs each, every row of x with exactly the arithmetic of a one-row
// call (MatMuls with L = 1): the same activation quantization (per row), the
// same mat-vec kernel, over the same four-row blocks. A row's output so does
// not depend on L or on the other rows, which is what a batched decode step
// needs for batch invariance (a sequence decoded beside others gets the bits
// it gets alone); MatMul with 1 < L < 16 takes tile kernels that sum in
// another order.
//
// The threads claim row chunks as in a mat-vec, and each chunk runs in row
// blocks of at most cacheBlock bytes that every row of x passes over while
// the block is in cache: the weights are read from memory once for all L
// rows. x is quantized once for the weights that read it in one form. L = 1
// is MatMuls itself.
func (p *Pool) MatVecs(dst [][]float32, x []float32, L int, w []*Weight) {
	if len(dst) != len(w) || len(w) > len(p.mm) {
		panic(fmt.Sprintf("cpu: MatVecs: %d outputs for %d weights (at most %d)", len(dst), len(w), len(p.mm)))
	}
	if L == 1 {
		p.MatMuls(dst, x, 1, w)
		return
	}
	var q actKey
	for i := range w {
		q = p.matVecs(dst[i], x, L, w[i], q)
	}
}

// actKey says which form x was quantized to (see MatVecs).
type actKey struct {
	f                 actFormat
	k, gs, bits       int
	blocked, quantize bool
}

// matVecs is MatVecs of one weight, given the form x is in from the weight
// before (q), and returns the form it is in now.
func (p *Pool) matVecs(dst, x []float32, L int, w *Weight, q actKey) actKey {
	if len(dst) != L*w.N || len(x) != L*w.K {
		panic(fmt.Sprintf("cpu: MatVecs: dst %d, x %d for L=%d N=%d K=%d", len(dst), len(x), L, w.N, w.K))
	}
	if L == 0 || w.N == 0 {
		return q
	}
	t := &p.mm[0]
	f := p.plan(t, dst[:w.N], x[:w.K], 1, w) // a one-row call's kernel and activation form
	t.dst, t.x, t.L = dst, x, L
	if t.slab > 0 {
		ns := len(w.Q.slabs)
		p.part = grow(p.part, (ns-1)*L*w.N)
		t.part = p.part[:(ns-1)*L*w.N]
	}
	t.choosePF() // L > 1: the weight's best prefetch so far, not a trial
	if k := (actKey{f: f, k: w.K}); f != actNone {
		k.gs, k.bits, k.blocked, k.quantize = w.Q.GroupSize, w.Q.Bits, w.Q.Blocked != nil, true
		if k != q {
			// A batch's few rows quantize on this thread unless they are
			// many: waking the others costs more.
			pool := p
			if L*w.K < 1<<16 {
				pool = nil
			}
			switch f {
			case actBytes:
				p.actb.quantize(pool, x, L, w.K, k.gs, k.bits, k.blocked)
			case actInt16:
				p.act.quantize(pool, x, L, w.K, k.gs, k.bits)
			}
		}
		q = k
	}
	if t.act == actInt16 || t.act == actNone && w.Format != FormatQ {
		t.run = (*mmTask).doVecs
	} // doQB and doQFloat already run a one-row call's arithmetic for each row
	n := w.N
	if t.slab > 0 {
		n = len(w.Q.slabs) * t.slab
	}
	p.RunChunks(n, p.vecChunk(n), 4, t)
	t.addSlabs()
	*t = mmTask{}
	return q
}

// doVecs runs rows [n0, n1) of a 4/8-bit weight against int16 activations
// (qMatVec) or of an f32, f16 or bf16 weight (fMatVec), the mat-vec per row
// of x within row blocks that stay in cache.
func (t *mmTask) doVecs(n0, n1 int) {
	w, N, K := t.w, t.w.N, t.w.K
	rowBytes := 4 * K
	switch {
	case w.Format == FormatQ:
		rowBytes = K * w.Q.Bits / 8
	case w.Format != FormatF32:
		rowBytes = 2 * K
	}
	rb := rowBlock(rowBytes, 4)
	for nb := n0; nb < n1; nb += rb {
		ne := min(nb+rb, n1)
		l := 0
		if w.Format != FormatQ {
			for ; l+4 <= t.L && fVecs4(t.k, t.dst[l*N:], N, w, nb, ne, t.x[l*K:]); l += 4 {
			}
		}
		for ; l < t.L; l++ {
			if w.Format == FormatQ {
				t.k.qMatVec(t.dst[l*N+nb:l*N+ne], w.Q, K, nb, t.a, l)
			} else {
				t.k.fMatVec(t.dst[l*N+nb:l*N+ne], w, nb, t.x[l*K:(l+1)*K])
			}
		}
	}
}
