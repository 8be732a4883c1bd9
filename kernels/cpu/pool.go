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

	// RunChunks state: claim is epoch<<32 | next index; done counts the
	// epoch's finished indices.
	claim atomic.Uint64
	done  atomic.Int64
	epoch uint64

	mm   [4]mmTask    // the MatMul in flight, or MatMuls' weights
	mms  mmsTask      // the MatMuls in flight
	act  actQ         // MatMul's quantized activations, grown to the largest L·K
	actb actB         // the same for the byte-dot kernels
	deq  chan *deqBuf // one dequantized row block per thread (see doQDeq)
	xp   xPanel       // MatMul's x in panel-step order (see doQPanel)
}

type job struct {
	t      Task
	lo, hi int

	// for RunChunks (chunk > 0): pieces of [0, hi) of at most chunk indices,
	// multiples of quantum, epoch
	chunk, quantum int
	epoch          uint64
}

// NewPool starts threads-1 workers (the caller is the last one). threads ≤ 0 means
// runtime.NumCPU().
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &Pool{n: threads, work: make(chan job, threads), deq: make(chan *deqBuf, threads)}
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
					p.claimChunks(j)
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
// microseconds late and the caller does most of each mat-vec alone (measured:
// 76 % of the rows, and 27–30 tok/s instead of 33–38 for q4 1B on 2 threads).
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
// workers claim one at a time, and returns when all are done. Unlike Run it
// never waits for a worker to wake: the caller starts at once and a late worker
// only takes what is left, which matters for the short mat-vecs of a decode
// step. A piece is chunk indices while plenty are left, then shrinks with what
// is left (guided scheduling: the threads end together instead of one waiting
// out another's last whole chunk), down to quantum; every piece but the last
// starts and ends on a multiple of quantum, which must divide chunk. With one
// thread, or n ≤ chunk, it calls t.Do(0, n) once.
func (p *Pool) RunChunks(n, chunk, quantum int, t Task) {
	quantum = max(quantum, 1)
	chunk = max(chunk, quantum)
	if p.n <= 1 || n <= chunk {
		t.Do(0, n)
		return
	}
	p.epoch = (p.epoch + 1) & (1<<32 - 1)
	j := job{t: t, hi: n, chunk: chunk, quantum: quantum, epoch: p.epoch}
	p.done.Store(0)
	p.claim.Store(p.epoch << 32)
	for range p.n - 1 {
		select {
		case p.work <- j:
		default: // a worker still has an old job queued; it will find this one done
		}
	}
	p.claimChunks(j)
	for p.done.Load() < int64(n) {
		runtime.Gosched()
	}
}

// claimChunks runs pieces of j's call while any are left; a job whose call
// has ended (another epoch) claims nothing.
func (p *Pool) claimChunks(j job) {
	for {
		c := p.claim.Load()
		lo := int(c & (1<<32 - 1))
		if c>>32 != j.epoch || lo >= j.hi {
			return
		}
		size := min(j.chunk, max(j.quantum, (j.hi-lo)/(2*p.n)/j.quantum*j.quantum))
		hi := min(lo+size, j.hi)
		if !p.claim.CompareAndSwap(c, c+uint64(hi-lo)) {
			continue
		}
		j.t.Do(lo, hi)
		p.done.Add(int64(hi - lo))
	}
}

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() { close(p.work) }
