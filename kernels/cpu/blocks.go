package cpu

import (
	"fmt"
	"sync"
)

// blockMatrix is a matrix of quantized blocks the pool multiplies as stored
// (KQuant, MXFP4): its shape, a row's exact dequantization (Row) and a row's
// dot product with x over the same values.
type blockMatrix interface {
	dims() (n, k int)
	Row(dst []float32, n int)
	dot(n int, x []float32) float32
}

// matMulBlocks computes dst (L, N) = x (L, K) · wᵀ, split over the pool's
// threads. Below blockDeqMinL tokens each output is w.dot; from blockDeqMinL
// on, each thread dequantizes a block of rows to f32 (w.Row: the same values)
// and runs the f32 kernels on it, so a dequantized weight serves every token.
func (p *Pool) matMulBlocks(op string, dst, x []float32, L int, w blockMatrix) {
	N, K := w.dims()
	if len(dst) != L*N || len(x) != L*K {
		panic(fmt.Sprintf("cpu: %s: dst %d, x %d for L=%d N=%d K=%d", op, len(dst), len(x), L, N, K))
	}
	if L == 0 || N == 0 {
		return
	}
	t := blockTasks.Get().(*blockTask)
	*t = blockTask{dst: dst, x: x, L: L, N: N, K: K, w: w, p: p}
	if L == 1 {
		p.RunChunks(N, p.vecChunk(N), 4, t)
	} else {
		p.Run(N, 16, t)
	}
	*t = blockTask{} // drop references to the caller's slices
	blockTasks.Put(t)
}

// blockTasks holds matMulBlocks' tasks, so a call allocates nothing.
var blockTasks = sync.Pool{New: func() any { return new(blockTask) }}

// blockDeqMinL is the fewest tokens for which matMulBlocks dequantizes row
// blocks.
const blockDeqMinL = 4

// blockTask is one matMulBlocks call.
type blockTask struct {
	dst, x  []float32
	L, N, K int
	w       blockMatrix
	p       *Pool
}

// Do runs rows [n0, n1).
func (t *blockTask) Do(n0, n1 int) {
	w, N, K, L := t.w, t.N, t.K, t.L
	if L < blockDeqMinL {
		for n := n0; n < n1; n++ {
			for l := range L {
				t.dst[l*N+n] = w.dot(n, t.x[l*K:(l+1)*K])
			}
		}
		return
	}
	k := &kern
	db := <-t.p.deq
	defer func() { t.p.deq <- db }()
	tile, tn, tl := k.deqTiles(K, L)
	rb := rowBlock(K*4, tn)
	db.f = grow(db.f, min(rb, n1-n0)*K)
	for nb := n0; nb < n1; nb += rb {
		ne := min(nb+rb, n1)
		for n := nb; n < ne; n++ {
			w.Row(db.f[(n-nb)*K:(n-nb+1)*K], n)
		}
		k.mulDequant(t.dst, N, nb, db, ne-nb, K, t.x, L, tile, tn, tl)
	}
}
