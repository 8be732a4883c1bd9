package kernels

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/ingot-llm/ingot/kernels/cpu"
)

// CPU is the pure-Go backend: the reference every other backend is checked against.
// Activations are host f32 tensors; Upload attaches a [cpu.Weight] view to weight
// tensors (no copy). Ops run synchronously, parallel over a persistent worker pool,
// and allocate nothing.
//
// Streams ([CPU.NewStream]) share the pool: an op that runs on it holds it
// until it returns, so the ops of concurrent streams take turns, each running
// on every thread (decode is bound by memory bandwidth, which the threads of
// one op already use).
type CPU struct {
	*cpuPool
	stream bool
	attn   attnTask
	op     opTask
	mmd    [4][]float32 // MatMuls' arguments, kept here so a call allocates nothing
	mmw    [4]*cpu.Weight
	part   cpu.AttnParts // a decode step's attention parts
}

// cpuPool is what a CPU backend's streams share: the workers and their
// per-thread scratch, one op at a time.
type cpuPool struct {
	mu      sync.Mutex // held by the op running on pool
	pool    *cpu.Pool
	scratch chan *cpu.AttnScratch // one per thread
}

// NewCPU returns a CPU backend running on threads goroutines (≤ 0: all CPUs).
func NewCPU(threads int) *CPU {
	p := cpu.NewPool(threads)
	c := &CPU{cpuPool: &cpuPool{pool: p, scratch: make(chan *cpu.AttnScratch, p.Threads())}}
	for range p.Threads() {
		c.scratch <- new(cpu.AttnScratch)
	}
	return c
}

// NewStream returns a CPU backend sharing c's pool (see [CPU]).
func (c *CPU) NewStream() (Backend, error) {
	return &CPU{cpuPool: c.cpuPool, stream: true}, nil
}

// Name returns "cpu".
func (c *CPU) Name() string { return "cpu" }

// Threads returns the number of threads ops run on.
func (c *CPU) Threads() int { return c.pool.Threads() }

// New returns a zeroed f32 host tensor.
func (c *CPU) New(shape ...int) *Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return FromF32(make([]float32, n), shape...)
}

// NewF16 returns a zeroed f16 tensor of the given shape.
func (c *CPU) NewF16(shape ...int) *Tensor {
	t := &Tensor{DType: DTypeF16, Shape: append([]int(nil), shape...)}
	t.Data = make([]byte, 2*t.Len())
	return t
}

// Upload checks a host tensor and attaches its [cpu.Weight] view ([cpu.MXFP4]
// for MXFP4, [cpu.KQuant] for the GGUF block types). It copies nothing,
// except the 4/8-bit weights this CPU's kernels read in their own layout (see
// [cpu.Prepare]), GGUF Q4_0, Q8_0, Q4_K and Q6_K among them as the affine
// weights they are (see [cpu.PrepareKQuant]): those move there in one copy, and the tensor
// returned is a new one that no longer views t's memory; and 16-bit affine
// scales and biases, which it widens to f32.
func (c *CPU) Upload(t *Tensor) (*Tensor, error) {
	if t.DType == DTypeMXFP4 { // its own kernels: see cpu.MXFP4
		n, k, err := checkWeight(t)
		if err != nil {
			return nil, err
		}
		t.Buf, err = cpu.NewMXFP4(t.Data, n, k)
		return t, err
	}
	if kt, ok := cpuKType(t.DType); ok { // GGUF blocks: see cpu.KQuant
		n, k, err := checkWeight(t)
		if err != nil {
			return nil, err
		}
		kq, err := cpu.NewKQuant(kt, t.Data, n, k)
		if err != nil {
			return nil, err
		}
		if w := cpu.PrepareKQuant(kq); w != nil { // Q4_0, Q8_0, Q4_K, Q6_K: the affine fast path
			return &Tensor{DType: t.DType, Shape: t.Shape, Buf: w}, nil
		}
		t.Buf = kq
		return t, nil
	}
	w, err := hostWeight(t)
	if err != nil {
		return nil, err
	}
	cpu.Prepare(w)
	if w.Q != nil && w.Q.Blocked != nil {
		return &Tensor{DType: t.DType, Shape: t.Shape, GroupSize: t.GroupSize, Buf: w}, nil
	}
	t.Buf = w
	return t, nil
}

// WeightBytes returns the bytes a mat-vec reads of weight t: for a tensor the
// CPU backend uploaded, those of the layout it keeps (see [cpu.Prepare]); else
// (a host tensor, or one on a GPU backend) its packed elements, scales and
// biases.
func WeightBytes(t *Tensor) int {
	if w, ok := t.Buf.(*cpu.Weight); ok {
		return w.Bytes()
	}
	n := t.NumRows() * t.DType.RowBytes(t.Cols())
	for _, d := range []*Tensor{t.Scales, t.Biases} {
		if d != nil {
			n += d.Len() * d.DType.Bits() / 8
		}
	}
	return n
}

// checkWeight validates a 1-D or 2-D host tensor (a 1-D tensor is one row) and
// returns its rows and columns.
func checkWeight(t *Tensor) (n, k int, err error) {
	n, k = 1, t.Shape[len(t.Shape)-1]
	if len(t.Shape) == 2 {
		n = t.Shape[0]
	} else if len(t.Shape) != 1 {
		return 0, 0, fmt.Errorf("kernels: upload: weight of shape %v is not 1-D or 2-D", t.Shape)
	}
	if want := n * t.DType.RowBytes(k); len(t.Data) != want {
		return 0, 0, fmt.Errorf("kernels: upload: %s%v tensor has %d bytes, want %d", t.DType, t.Shape, len(t.Data), want)
	}
	if t.DType == DTypeMXFP4 && k%32 != 0 {
		return 0, 0, fmt.Errorf("kernels: upload: %s%v: %d columns are not whole 32-element blocks", t.DType, t.Shape, k)
	}
	if vals, _ := t.DType.BlockSize(); vals > 0 && k%vals != 0 {
		return 0, 0, fmt.Errorf("kernels: upload: %s%v: %d columns are not whole %d-element blocks", t.DType, t.Shape, k, vals)
	}
	if !t.DType.Quantized() {
		return n, k, nil
	}
	g := t.GroupSize
	if g <= 0 || k%g != 0 || (k*t.DType.Bits())%32 != 0 {
		return 0, 0, fmt.Errorf("kernels: upload: %s%v: group size %d does not divide the %d columns into whole words", t.DType, t.Shape, g, k)
	}
	if t.Scales == nil || t.Biases == nil || t.Scales.Len() != n*k/g || t.Biases.Len() != n*k/g ||
		!t.Scales.DType.Float() || t.Biases.DType != t.Scales.DType {
		return 0, 0, fmt.Errorf("kernels: upload: %s%v: scales and biases must be f32, f16 or bf16 alike with %d elements", t.DType, t.Shape, n*k/g)
	}
	return n, k, nil
}

// hostWeight views a checked host tensor as a cpu.Weight. Its data (and scales
// and biases) must be aligned to their elements.
func hostWeight(t *Tensor) (*cpu.Weight, error) {
	n, k, err := checkWeight(t)
	if err != nil {
		return nil, err
	}
	for _, d := range []*Tensor{t, t.Scales, t.Biases} {
		if d != nil && !Aligned(d.Data, elemAlign(d.DType)) {
			return nil, fmt.Errorf("kernels: upload: %s%v: data is not %d-byte aligned (copy it first)", d.DType, d.Shape, elemAlign(d.DType))
		}
	}
	w := &cpu.Weight{N: n, K: k}
	switch t.DType {
	case DTypeF32:
		w.Format, w.F32 = cpu.FormatF32, t.F32()
	case DTypeF16:
		w.Format, w.U16 = cpu.FormatF16, t.U16()
	case DTypeBF16:
		w.Format, w.U16 = cpu.FormatBF16, t.U16()
	default:
		w.Format = cpu.FormatQ
		// 16-bit scales and biases widen here (exactly): the CPU kernels read f32.
		w.Q = &cpu.QMatrix{Bits: t.DType.Bits(), GroupSize: t.GroupSize, W: t.U32(), Scales: t.Scales.ToF32(), Biases: t.Biases.ToF32()}
	}
	return w, nil
}

// cpuKType returns the CPU kernels' block type of a GGUF block dtype.
func cpuKType(d DType) (cpu.KType, bool) {
	if !d.Block() {
		return 0, false
	}
	return cpu.KQ8_0 + cpu.KType(d-DTypeQ8_0), true
}

func weightOf(op string, t *Tensor) *cpu.Weight {
	w, ok := t.Buf.(*cpu.Weight)
	if !ok {
		panic(fmt.Sprintf("kernels: %s: weight %s%v was not uploaded to the cpu backend", op, t.DType, t.Shape))
	}
	return w
}

// Download copies src into dst.
func (c *CPU) Download(dst []float32, src *Tensor) error {
	copy(dst, src.F32())
	return nil
}

// Argmax returns the smallest index of the largest element of the f32 x,
// reading it in place (see [ArgmaxHost]).
func (c *CPU) Argmax(x *Tensor) (int32, error) { return ArgmaxHost(x.F32()), nil }

// Embed gathers rows of table (V, D) for tokens into dst (L, D) and multiplies them
// by scale. Token ids out of range panic (callers validate ids against V).
func (c *CPU) Embed(dst, table *Tensor, tokens []int32, scale float32) {
	if kq, ok := table.Buf.(*cpu.KQuant); ok {
		mustShape("Embed", "dst", dst, len(tokens), kq.K)
		d := dst.F32()
		for i, tok := range tokens {
			row := d[i*kq.K : (i+1)*kq.K]
			kq.Row(row, int(tok))
			if scale != 1 {
				for j := range row {
					row[j] *= scale
				}
			}
		}
		return
	}
	w := weightOf("Embed", table)
	mustShape("Embed", "dst", dst, len(tokens), w.K)
	d := dst.F32()
	for i, tok := range tokens {
		row := d[i*w.K : (i+1)*w.K]
		w.Row(row, int(tok))
		if scale != 1 {
			for j := range row {
				row[j] *= scale
			}
		}
	}
}

// RMSNorm normalizes every len(w)-wide row of x into dst.
func (c *CPU) RMSNorm(dst, x, w *Tensor, eps float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if dst.Len() != x.Len() || x.Len()%w.Len() != 0 {
		panic(fmt.Sprintf("kernels: RMSNorm: dst %v, x %v, w %v", dst.Shape, x.Shape, w.Shape))
	}
	c.op = opTask{op: opRMSNorm, d: dst.F32(), x: x.F32(), y: weightOf("RMSNorm", w).F32, eps: eps}
	c.op.run(c.pool, x.Len()/w.Len(), w.Len())
}

// MatMul computes dst (L, N) = x (L, K) · wᵀ.
func (c *CPU) MatMul(dst, x, w *Tensor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if mx, ok := w.Buf.(*cpu.MXFP4); ok {
		L := x.NumRows()
		mustShape("MatMul", "x", x, L, mx.K)
		mustShape("MatMul", "dst", dst, L, mx.N)
		c.pool.MatMulMXFP4(dst.F32(), x.F32(), L, mx)
		return
	}
	if kq, ok := w.Buf.(*cpu.KQuant); ok {
		L := x.NumRows()
		mustShape("MatMul", "x", x, L, kq.K)
		mustShape("MatMul", "dst", dst, L, kq.N)
		c.pool.MatMulKQuant(dst.F32(), x.F32(), L, kq)
		return
	}
	wt := weightOf("MatMul", w)
	L := x.NumRows()
	mustShape("MatMul", "x", x, L, wt.K)
	mustShape("MatMul", "dst", dst, L, wt.N)
	c.pool.MatMul(dst.F32(), x.F32(), L, wt)
}

// MatMuls computes dst[i] = x · w[i]ᵀ for up to four weights: in a decode
// step, one mat-vec over the rows of them all (see [cpu.Pool.MatMuls]).
func (c *CPU) MatMuls(dst []*Tensor, x *Tensor, w []*Tensor) {
	if len(dst) == len(w) && slices.ContainsFunc(w, blockWeight) {
		for i := range w { // no fused form: a MatMul each
			c.MatMul(dst[i], x, w[i])
		}
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(dst) != len(w) || len(w) > len(c.mmw) {
		panic(fmt.Sprintf("kernels: MatMuls: %d outputs for %d weights (at most %d)", len(dst), len(w), len(c.mmw)))
	}
	L := x.NumRows()
	for i := range w {
		wt := weightOf("MatMuls", w[i])
		mustShape("MatMuls", "x", x, L, wt.K)
		mustShape("MatMuls", "dst", dst[i], L, wt.N)
		c.mmd[i], c.mmw[i] = dst[i].F32(), wt
	}
	c.pool.MatMuls(c.mmd[:len(w)], x.F32(), L, c.mmw[:len(w)])
	c.mmd, c.mmw = [4][]float32{}, [4]*cpu.Weight{}
}

// blockWeight reports whether t runs on block kernels ([cpu.MXFP4],
// [cpu.KQuant]), which have no fused or several-row form.
func blockWeight(t *Tensor) bool {
	switch t.Buf.(type) {
	case *cpu.MXFP4, *cpu.KQuant:
		return true
	}
	return false
}

// MatVecs is MatMuls with every row computed as a one-row call computes it
// (see [MatVecser] and [cpu.Pool.MatVecs]). MXFP4 weights and GGUF blocks
// kept as stored (blockWeight), whose kernels have no such form, run a
// one-row MatMul per row.
func (c *CPU) MatVecs(dst []*Tensor, x *Tensor, w []*Tensor) {
	L := x.NumRows()
	if L == 1 {
		c.MatMuls(dst, x, w)
		return
	}
	if len(dst) == len(w) && slices.ContainsFunc(w, blockWeight) {
		for i := range w {
			for l := range L {
				c.MatMul(dst[i].Rows(l, l+1), x.Rows(l, l+1), w[i])
			}
		}
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(dst) != len(w) || len(w) > len(c.mmw) {
		panic(fmt.Sprintf("kernels: MatVecs: %d outputs for %d weights (at most %d)", len(dst), len(w), len(c.mmw)))
	}
	for i := range w {
		wt := weightOf("MatVecs", w[i])
		mustShape("MatVecs", "x", x, L, wt.K)
		mustShape("MatVecs", "dst", dst[i], L, wt.N)
		c.mmd[i], c.mmw[i] = dst[i].F32(), wt
	}
	c.pool.MatVecs(c.mmd[:len(w)], x.F32(), L, c.mmw[:len(w)])
	c.mmd, c.mmw = [4][]float32{}, [4]*cpu.Weight{}
}

// Add computes dst = a + b, where b has a's shape or is one row broadcast over a's rows.
func (c *CPU) Add(dst, a, b *Tensor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, x, y := dst.F32(), a.F32(), b.F32()
	if len(d) != len(x) || len(y) == 0 || len(x)%len(y) != 0 || (len(y) != len(x) && len(y) != a.Cols()) {
		panic(fmt.Sprintf("kernels: Add: dst %v, a %v, b %v", dst.Shape, a.Shape, b.Shape))
	}
	c.op = opTask{op: opAdd, d: d, x: x, y: y}
	c.op.run(c.pool, len(d), 1)
}

// RoPE rotates x (L, heads·Dh) in place for positions [pos, pos+L).
func (c *CPU) RoPE(x *Tensor, pos int, p *RoPE) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if x.Cols()%p.HeadDim != 0 || 2*len(p.InvFreq) != p.RotaryDim || p.RotaryDim > p.HeadDim {
		panic(fmt.Sprintf("kernels: RoPE: x %v with head dim %d, rotary dim %d, %d frequencies", x.Shape, p.HeadDim, p.RotaryDim, len(p.InvFreq)))
	}
	c.op = opTask{op: opRoPE, d: x.F32(), pos: pos, rope: p}
	c.op.run(c.pool, x.NumRows(), x.Cols())
}

// Attention runs causal GQA; see [AttnParams]. More than one query row
// (prefill) runs [cpu.Attn.Block] over (KV head, query block) units,
// numbered largest first, that the threads claim (RunChunks: each its own
// share, then the others' leftovers). A decode step (L = 1) runs
// [cpu.Attn.Decode]: over at least 2·attnPartKeys keys it splits them into
// parts of at least attnPartKeys, up to two per thread, that the threads
// claim and [cpu.Attn.Merge] combines (at depth each thread then reads its
// own stretch of the cache, which takes about half as long as whole heads a
// thread); over fewer it splits the KV heads, a part per thread, and each
// part merges its own heads, which beats the threads claiming one KV head at
// a time (docs/perf/cpu.md, "Decode attention").
func (c *CPU) Attention(dst, q, k, v *Tensor, pos int, p *AttnParams) {
	c.mu.Lock()
	defer c.mu.Unlock()
	L := q.NumRows()
	qw, kw := p.Heads*p.HeadDim, p.KVHeads*p.HeadDim
	mustShape("Attention", "q", q, L, qw)
	mustShape("Attention", "dst", dst, L, qw)
	if k.Cols() != kw || v.Cols() != kw || k.NumRows() < pos+L || v.NumRows() < pos+L || p.Heads%p.KVHeads != 0 || k.DType != v.DType {
		panic(fmt.Sprintf("kernels: Attention: %s k %v, %s v %v for pos %d, L %d, %d/%d heads of %d", k.DType, k.Shape, v.DType, v.Shape, pos, L, p.Heads, p.KVHeads, p.HeadDim))
	}
	c.attn = attnTask{c: c, dst: dst.F32(), q: q.F32(), k: cacheKV(k), v: cacheKV(v), L: L, a: cpu.Attn{
		Heads: p.Heads, KVHeads: p.KVHeads, HeadDim: p.HeadDim,
		Pos: pos, Window: p.Window, Scale: p.Scale, Softcap: p.Softcap, Sinks: p.Sinks,
	}}
	start := 0
	if p.Window > 0 {
		start = max(0, pos+1-p.Window)
	}
	if L == 1 {
		t := &c.attn
		t.start, t.end = start, pos+1
		most := 2 * c.pool.Threads()
		t.parts, t.heads = 1, min(c.pool.Threads(), p.KVHeads)
		if t.end-t.start >= 2*attnPartKeys {
			t.parts, t.heads = min(most, (t.end-t.start)/attnPartKeys), 1
		}
		c.part.Reset(&t.a, most) // room for the most parts, so it grows once
		c.pool.RunChunks(t.parts*t.heads, 1, 1, t)
		if t.parts > 1 {
			t.a.Merge(t.dst, &c.part, t.parts, 0, p.Heads)
		}
		return
	}
	c.attn.blocks = (L + c.attn.a.QueryRows() - 1) / c.attn.a.QueryRows()
	c.pool.RunChunks(c.attn.blocks*p.KVHeads, 1, 1, &c.attn)
}

// attnPartKeys is the fewest keys worth a part of a decode step of its own.
const attnPartKeys = 128

type attnTask struct {
	c      *CPU
	dst, q []float32
	k, v   cpu.KV
	L      int
	a      cpu.Attn
	blocks int // prefill: query blocks per KV head (see cpu.Attn.Block)

	// a decode step (parts > 0): keys [start, end) in parts, each over the KV
	// heads in heads parts (see cpu.Attn.Decode), one (key part, head part)
	// per index
	start, end, parts, heads int
}

func (t *attnTask) Do(lo, hi int) {
	a := &t.a
	s := <-t.c.scratch
	defer func() { t.c.scratch <- s }()
	if t.parts > 0 {
		n, G := t.end-t.start, a.Heads/a.KVHeads
		for i := lo; i < hi; i++ {
			p, h := i/t.heads, i%t.heads
			g0, g1 := h*a.KVHeads/t.heads, (h+1)*a.KVHeads/t.heads
			a.Decode(&t.c.part, p, t.q, t.k, t.v, t.start+p*n/t.parts, t.start+(p+1)*n/t.parts, g0, g1, s)
			if t.parts == 1 {
				a.Merge(t.dst, &t.c.part, 1, g0*G, g1*G)
			}
		}
		return
	}
	bq := a.QueryRows()
	for i := lo; i < hi; i++ {
		b, g := t.blocks-1-i/a.KVHeads, i%a.KVHeads // last (longest) rows first
		a.Block(t.dst, t.q, t.k, t.v, g, b*bq, min((b+1)*bq, t.L), s)
	}
}

// MatMulGLU computes dst = act(x·gateᵀ)·(x·upᵀ) through u.
func (c *CPU) MatMulGLU(dst, u, x, gate, up *Tensor, act Act) {
	d, w := [2]*Tensor{dst, u}, [2]*Tensor{gate, up}
	c.MatMuls(d[:], x, w[:])
	c.GLU(dst, dst, u, act)
}

// GLU computes dst = act(gate)·up elementwise.
func (c *CPU) GLU(dst, gate, up *Tensor, act Act) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, g, u := dst.F32(), gate.F32(), up.F32()
	if len(d) != len(g) || len(g) != len(u) || act > ActSigmoid {
		panic(fmt.Sprintf("kernels: GLU: dst %v, gate %v, up %v, activation %d", dst.Shape, gate.Shape, up.Shape, act))
	}
	c.op = opTask{op: opGLU, act: act, d: d, x: g, y: u}
	c.op.run(c.pool, len(d), 1)
}

// opTask is one of the small ops. Do runs elements [lo, hi) of Add (d = x + y,
// y of x's length or one row repeated) and GLU (d = act(x)·y), and rows [lo, hi)
// of RMSNorm (d = x normalized, times y) and RoPE (d in place).
type opTask struct {
	op      uint8
	act     Act
	d, x, y []float32
	eps     float32
	cols    int // row length for RMSNorm and RoPE
	pos     int
	rope    *RoPE
}

const (
	opAdd = iota
	opGLU
	opRMSNorm
	opRoPE
)

// run runs t over [0, n) of units of size elements, split over the threads
// when it is large enough (a prefill's, not a decode step's) to pay for waking
// them.
func (t *opTask) run(p *cpu.Pool, n, size int) {
	t.cols = size
	if n*size < 1<<16 {
		t.Do(0, n)
	} else {
		p.Run(n, max(1, 64/size), t)
	}
}

func (t *opTask) Do(lo, hi int) {
	switch t.op {
	case opRMSNorm:
		cpu.RMSNorm(t.d[lo*t.cols:hi*t.cols], t.x[lo*t.cols:hi*t.cols], t.y, t.eps)
		return
	case opRoPE:
		p := t.rope
		cpu.RoPE(t.d[lo*t.cols:hi*t.cols], t.cols, p.HeadDim, t.pos+lo, p.InvFreq, p.Scale)
		return
	}
	d, x := t.d[lo:hi], t.x[lo:hi]
	switch {
	case t.op == opGLU && t.act == ActSiLU:
		cpu.SwiGLU(d, x, t.y[lo:hi])
	case t.op == opGLU && t.act == ActGELUTanh:
		cpu.GeGLUTanh(d, x, t.y[lo:hi])
	case t.op == opGLU && t.act == ActSwiGLUClamp:
		cpu.SwiGLUClamp(d, x, t.y[lo:hi])
	case t.op == opGLU && t.act == ActSigmoid:
		cpu.SigmoidGLU(d, x, t.y[lo:hi])
	case t.op == opGLU:
		cpu.GeGLU(d, x, t.y[lo:hi])
	default:
		n := len(t.y)
		for i := 0; i < len(d); { // runs of y from lo's column on
			y := t.y[(lo+i)%n:]
			y = y[:min(len(y), len(d)-i)]
			for j, v := range y {
				d[i+j] = x[i+j] + v
			}
			i += len(y)
		}
	}
}

// Softcap applies x = c·tanh(x/c) in place.
func (c *CPU) Softcap(x *Tensor, cap float32) { cpu.Softcap(x.F32(), cap) }

// CopyRows copies src's rows into dst starting at row.
func (c *CPU) CopyRows(dst, src *Tensor, row int) {
	if src.Cols() != dst.Cols() || row < 0 || row+src.NumRows() > dst.NumRows() || (dst.DType != DTypeF32 && dst.DType != DTypeF16) {
		panic(fmt.Sprintf("kernels: CopyRows: %s src %v into %s dst %v at row %d", src.DType, src.Shape, dst.DType, dst.Shape, row))
	}
	if dst.DType == DTypeF16 {
		cpu.F32sToF16(dst.U16()[row*dst.Cols():], src.F32())
		return
	}
	copy(dst.F32()[row*dst.Cols():], src.F32())
}

// AddRMSNorm is Add(x, x, h) then RMSNorm(dst, x, w, eps).
func (c *CPU) AddRMSNorm(dst, x, h, w *Tensor, eps float32) {
	c.Add(x, x, h)
	c.RMSNorm(dst, x, w, eps)
}

// RoPEStore rotates q and k and copies k and v into the caches at row pos.
func (c *CPU) RoPEStore(q, k, v, kc, vc *Tensor, pos int, p *RoPE) {
	c.RoPE(q, pos, p)
	c.RoPE(k, pos, p)
	c.CopyRows(kc, k, pos)
	c.CopyRows(vc, v, pos)
}

// AddScaled adds c·x into dst: dst[i] = dst[i] + c·x[i], the product rounded
// first (as transformers' expert output × routing weight, then index_add).
func (c *CPU) AddScaled(dst, x *Tensor, cs float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, v := dst.F32(), x.F32()
	if len(d) != len(v) {
		panic(fmt.Sprintf("kernels: AddScaled: dst %v, x %v", dst.Shape, x.Shape))
	}
	for i := range d {
		p := cs * v[i]
		d[i] += float32(p) // float32(): no fused multiply-add
	}
}

// cacheKV views a KV cache tensor (f32 or f16) for the attention kernels.
func cacheKV(t *Tensor) cpu.KV {
	switch t.DType {
	case DTypeF32:
		return cpu.KV{F32: t.F32()}
	case DTypeF16:
		return cpu.KV{F16: t.U16()}
	}
	panic("kernels: Attention: " + t.DType.String() + " KV cache")
}

// Sync returns ctx's error, if any: CPU ops have already completed.
func (c *CPU) Sync(ctx context.Context) error { return ctx.Err() }

// Close stops the worker pool; a stream's Close does nothing.
func (c *CPU) Close() error {
	if !c.stream {
		c.pool.Close()
	}
	return nil
}

// CausalConvSiLU is the causal depthwise convolution with SiLU of Qwen3.5's
// linear attention (see [Backend]).
func (c *CPU) CausalConvSiLU(dst, x, w, state *Tensor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	L, C, K := x.NumRows(), x.Cols(), w.Cols()
	if dst.Len() != L*C || w.NumRows() != C || state.Len() != (K-1)*C || K < 1 {
		panic(fmt.Sprintf("kernels: CausalConvSiLU: dst %v, x %v, w %v, state %v", dst.Shape, x.Shape, w.Shape, state.Shape))
	}
	cpu.CausalConvSiLU(dst.F32(), x.F32(), w.F32(), state.F32(), L, C, K)
}

// GatedDeltaNet runs Qwen3.5's gated delta rule (see [Backend]).
func (c *CPU) GatedDeltaNet(dst, cq, a, b, S *Tensor, p *DeltaParams) {
	c.mu.Lock()
	defer c.mu.Unlock()
	L := cq.NumRows()
	mustDelta("GatedDeltaNet", dst, cq, a, b, S, p)
	cpu.GatedDeltaNet(dst.F32(), cq.F32(), a.F32(), b.F32(), S.F32(), L, p.KeyHeads, p.KeyDim, p.ValueHeads, p.ValueDim, p.ALog, p.DTBias)
}

// mustDelta panics unless the tensors fit p (see [Backend.GatedDeltaNet]).
func mustDelta(op string, dst, cq, a, b, S *Tensor, p *DeltaParams) {
	nk, dk, nv, dv := p.KeyHeads, p.KeyDim, p.ValueHeads, p.ValueDim
	L := cq.NumRows()
	if nk <= 0 || nv%nk != 0 || dk <= 0 || dv <= 0 || len(p.ALog) != nv || len(p.DTBias) != nv ||
		cq.Cols() != 2*nk*dk+nv*dv || dst.Len() != L*nv*dv || a.Len() != L*nv || b.Len() != L*nv || S.Len() != nv*dk*dv {
		panic(fmt.Sprintf("kernels: %s: dst %v, c %v, a %v, b %v, S %v for %+v", op, dst.Shape, cq.Shape, a.Shape, b.Shape, S.Shape, *p))
	}
}
