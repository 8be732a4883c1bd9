// Package cpu holds ingot's pure-Go kernels on plain slices: the readable reference
// every other backend is checked against, and the fast CPU paths. It knows nothing
// of tensors or devices: package kernels adapts it to the Backend interface.
package cpu

import (
	"runtime"
	"sync"
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

	mm  mmTask // the MatMul in flight
	act actQ   // MatMul's quantized activations, grown to the largest L·K
}

type job struct {
	t      Task
	lo, hi int
}

// NewPool starts threads-1 workers (the caller is the last one). threads ≤ 0 means
// runtime.NumCPU().
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &Pool{n: threads, work: make(chan job, threads)}
	for range threads - 1 {
		go func() {
			for j := range p.work {
				j.t.Do(j.lo, j.hi)
				p.wg.Done()
			}
		}()
	}
	return p
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
		p.work <- job{t, lo, lo + per}
		lo += per
	}
	t.Do(lo, n)
	p.wg.Wait()
}

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() { close(p.work) }
