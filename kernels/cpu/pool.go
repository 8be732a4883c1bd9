// Package cpu holds ingot's pure-Go kernels on plain slices: the readable reference
// every other backend is checked against, and the fast CPU paths. It knows nothing
// of tensors or devices: package kernels adapts it to the Backend interface.
package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// A Task is work split into index ranges. Do runs [lo, hi) and may be called
// concurrently on disjoint ranges.
type Task interface {
	Do(lo, hi int)
}

// A Pool runs Tasks on a fixed set of goroutines started once, so an op spawns no
// goroutine and allocates nothing. The zero Pool is not usable: see NewPool.
type Pool struct {
	n    int
	work chan job
	wg   sync.WaitGroup

	// RunChunks state: join is epoch<<32 | active<<16 | joined, the call's
	// participants so far (the caller is the first) and the workers among
	// them still claiming; shares[i] is what is left of participant i's share,
	// lo<<32 | hi.
	join   atomic.Uint64
	shares []share
	epoch  uint64

	mm   [4]mmTask    // the MatMul in flight, or MatMuls' weights
	mms  mmsTask      // the MatMuls in flight
	act  actQ         // MatMul's quantized activations, grown to the largest L·K
	actb actB         // the same for the byte-dot kernels
	deq  chan *deqBuf // one dequantized row block per thread (see doQDeq)
	xp   xPanel       // MatMul's x in panel-step order (see doQPanel)
	part []float32    // MatMul's outputs of K-slabs after the first (see mmTask)

	// tune holds each weight's decode prefetch tuner (see pfTune): runtime
	// state kept here, beside the calls it times, so weights stay read-only.
	tune map[*QMatrix]*pfTune
}

// share is one thread's part of a RunChunks call, alone on its cache line.
type share struct {
	r atomic.Uint64
	_ [56]byte
}

type job struct {
	t      Task
	lo, hi int

	// for RunChunks (chunk > 0): pieces of at most chunk indices, multiples
	// of quantum, of the shares of call epoch
	chunk, quantum int
	epoch          uint64
}

// NewPool starts threads-1 workers (the caller is the last one). threads ≤ 0 means
// runtime.NumCPU().
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &Pool{n: threads, work: make(chan job, threads), deq: make(chan *deqBuf, threads), shares: make([]share, threads)}
	for range threads {
		p.deq <- new(deqBuf)
	}
	for range threads - 1 {
		go func() {
			for {
				j, ok := p.next()
				if !ok {
					return
				}
				if j.chunk > 0 {
					p.joinShares(j)
					continue
				}
				j.t.Do(j.lo, j.hi)
				p.wg.Done()
			}
		}()
	}
	return p
}

// spinFor is how long a worker polls for its next job before it blocks. A
// decode step is a hundred short mat-vecs with a few microseconds of serial
// work between them; a worker that blocks there is woken by the OS tens of
// microseconds late and the caller does most of each mat-vec alone
// (docs/perf/cpu.md, "Pool spinning").
const spinFor = time.Millisecond

// next returns a worker's next job, polling the queue for spinFor (yielding
// to other goroutines now and then) before it blocks; false once the pool is
// closed.
func (p *Pool) next() (job, bool) {
	var start time.Time
	for n := 0; ; n++ {
		select {
		case j, ok := <-p.work:
			return j, ok
		default:
		}
		if n%1024 == 1023 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > spinFor {
				j, ok := <-p.work
				return j, ok
			}
			runtime.Gosched()
		}
	}
}

// Threads returns the number of threads the pool runs tasks on.
func (p *Pool) Threads() int { return p.n }

// Run calls t.Do over [0, n) split into contiguous chunks, one per thread, each a
// multiple of grain (except the last), and returns when all are done.
func (p *Pool) Run(n, grain int, t Task) {
	if grain < 1 {
		grain = 1
	}
	chunks := min(p.n, (n+grain-1)/grain)
	if chunks <= 1 {
		t.Do(0, n)
		return
	}
	per := ((n+chunks-1)/chunks + grain - 1) / grain * grain
	chunks = (n + per - 1) / per
	p.wg.Add(chunks - 1)
	lo := 0
	for range chunks - 1 {
		p.work <- job{t: t, lo: lo, hi: lo + per}
		lo += per
	}
	t.Do(lo, n)
	p.wg.Wait()
}

// RunChunks calls t.Do over [0, n) in pieces that the calling goroutine and the
// workers claim, and returns when all are done. Each thread has a contiguous
// share of [0, n) and runs it front to back in pieces that shrink as it ends;
// one done with its share takes pieces from the back of what is left of the
// others', half of it at a time. So each thread reads one stream of memory
// until the shares meet (pieces claimed from one shared front restart each
// thread's stream many times a call, which reads slower when the bandwidth is
// high: docs/perf/cpu.md, "RunChunks shares"), and the caller never waits for
// a worker to wake: a late worker's share is taken from its back. Pieces are
// at most chunk indices and start and end on multiples of quantum, which must
// divide chunk (but the one ending at n). With one thread, or n ≤ chunk, it
// calls t.Do(0, n) once.
func (p *Pool) RunChunks(n, chunk, quantum int, t Task) {
	quantum = max(quantum, 1)
	chunk = max(chunk, quantum)
	if p.n <= 1 || n <= chunk {
		t.Do(0, n)
		return
	}
	p.epoch = (p.epoch + 1) & (1<<32 - 1)
	// Close the last call to late joiners (a full one, under the new epoch)
	// once no worker is active in it, set the shares up, then open this one.
	for {
		c := p.join.Load()
		if c>>16&0xffff == 0 && p.join.CompareAndSwap(c, p.epoch<<32|uint64(p.n)) {
			break
		}
		runtime.Gosched()
	}
	per := (n/p.n + quantum - 1) / quantum * quantum
	for i := range p.shares {
		lo, hi := min(i*per, n), min((i+1)*per, n)
		if i == p.n-1 {
			hi = n
		}
		p.shares[i].r.Store(uint64(lo)<<32 | uint64(hi))
	}
	p.join.Store(p.epoch<<32 | 1)
	j := job{t: t, chunk: chunk, quantum: quantum, epoch: p.epoch}
	for range p.n - 1 {
		select {
		case p.work <- j:
		default: // a worker still has an old job queued; it will find this one over
		}
	}
	// All is claimed when the caller's claimShares returns, and done once
	// no worker is still active in the call.
	p.claimShares(j, 0)
	for p.join.Load()>>16&0xffff != 0 {
		runtime.Gosched()
	}
}

// joinShares takes the next participant's place in j's call, if the call is
// still on and has one free, and claims pieces until none are left.
func (p *Pool) joinShares(j job) {
	for {
		c := p.join.Load()
		if c>>32 != j.epoch || int(c&0xffff) >= p.n {
			return
		}
		if p.join.CompareAndSwap(c, c+1<<16+1) {
			p.claimShares(j, int(c&0xffff))
			p.join.Add(^uint64(1<<16 - 1)) // active - 1
			return
		}
	}
}

// claimShares runs participant me's share front to back, in pieces that
// shrink as it ends (a quarter of what is left, at most chunk, at least
// quantum), then takes pieces from the back of the others' shares, half of
// what is left of one at a time (at most chunk), until all are done.
func (p *Pool) claimShares(j job, me int) {
	q := j.quantum
	s := &p.shares[me].r
	for {
		c := s.Load()
		lo, hi := int(c>>32), int(c&(1<<32-1))
		if lo >= hi {
			break
		}
		end := min(hi, lo+min(j.chunk, max(q, (hi-lo)/4/q*q)))
		if !s.CompareAndSwap(c, uint64(end)<<32|uint64(hi)) {
			continue
		}
		j.t.Do(lo, end)
	}
	for k := 1; k < p.n; k++ {
		s := &p.shares[(me+k)%p.n].r
		for {
			c := s.Load()
			lo, hi := int(c>>32), int(c&(1<<32-1))
			if lo >= hi {
				break
			}
			mid := max(lo+(hi-lo)/2, hi-j.chunk)
			if mid = (mid + q - 1) / q * q; mid >= hi {
				mid = lo
			}
			if !s.CompareAndSwap(c, uint64(lo)<<32|uint64(mid)) {
				continue
			}
			j.t.Do(mid, hi)
		}
	}
}

// tuner returns q's prefetch tuner, made on its first decode call.
func (p *Pool) tuner(q *QMatrix) *pfTune {
	u := p.tune[q]
	if u == nil {
		if p.tune == nil {
			p.tune = map[*QMatrix]*pfTune{}
		}
		u = new(pfTune)
		p.tune[q] = u
	}
	return u
}

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() { close(p.work) }
