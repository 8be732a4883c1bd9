package cpu

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// pieces records the ranges a Task is called with.
type pieces struct {
	mu sync.Mutex
	r  [][2]int
}

func (p *pieces) Do(lo, hi int) {
	p.mu.Lock()
	p.r = append(p.r, [2]int{lo, hi})
	p.mu.Unlock()
}

// TestRunChunks checks that RunChunks covers [0, n) exactly once in pieces of
// at most chunk indices (one piece with one thread) that start and end on
// multiples of quantum (the last ends at n).
func TestRunChunks(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 4} {
		p := NewPool(threads)
		for _, n := range []int{0, 1, 5, 16, 17, 100, 1000, 4099} {
			for _, cq := range [][2]int{{1, 1}, {4, 1}, {16, 4}, {64, 4}, {128, 4}} {
				chunk, quantum := cq[0], cq[1]
				name := fmt.Sprintf("threads=%d/n=%d/chunk=%d/quantum=%d", threads, n, chunk, quantum)
				var ps pieces
				for range 3 { // later calls must not see an earlier call's state
					ps.r = ps.r[:0]
					p.RunChunks(n, chunk, quantum, &ps)
					checkCover(t, name, ps.r, n, chunk, quantum, threads > 1 && n > chunk)
				}
			}
		}
		p.Close()
	}
}

// checkCover checks that pieces r cover [0, n) exactly once, start and end on
// multiples of quantum (the last ends at n) and, if split, are at most chunk.
func checkCover(t *testing.T, name string, r [][2]int, n, chunk, quantum int, split bool) {
	t.Helper()
	r = slices.Clone(r)
	slices.SortFunc(r, func(a, b [2]int) int { return a[0] - b[0] })
	if n == 0 {
		if len(r) > 1 || len(r) == 1 && r[0] != [2]int{0, 0} {
			t.Fatalf("%s: pieces %v", name, r)
		}
		return
	}
	next := 0
	for _, x := range r {
		lo, hi := x[0], x[1]
		if lo != next || hi <= lo || hi-lo > chunk && split {
			t.Fatalf("%s: pieces %v", name, r)
		}
		if lo%quantum != 0 || hi%quantum != 0 && hi != n {
			t.Fatalf("%s: piece [%d, %d) off the quantum", name, lo, hi)
		}
		next = hi
	}
	if next != n {
		t.Fatalf("%s: pieces %v end at %d", name, r, next)
	}
}

// blocker holds a worker in Do until release is closed.
type blocker struct{ in, release chan struct{} }

func (b *blocker) Do(lo, hi int) {
	close(b.in)
	<-b.release
}

// TestRunChunksLateWorker holds the only worker busy while RunChunks runs: the
// caller must run its share front to back, then the worker's from its back,
// half of what is left at a time, and return without the worker; the worker,
// joining late, must find nothing to do.
func TestRunChunksLateWorker(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	b := &blocker{in: make(chan struct{}), release: make(chan struct{})}
	p.wg.Add(1)
	p.work <- job{t: b, lo: 0, hi: 1}
	<-b.in
	const n, chunk, quantum = 1000, 64, 4
	var ps pieces
	p.RunChunks(n, chunk, quantum, &ps)
	close(b.release)
	p.wg.Wait()
	var ps2 pieces
	p.RunChunks(n, chunk, quantum, &ps2) // the late worker's job is stale by now
	next, i := 0, 0
	for ; i < len(ps.r) && ps.r[i][0] < n/2; i++ { // the caller's share, in order
		if r := ps.r[i]; r[0] != next || r[1]-r[0] > chunk || r[0]%quantum != 0 {
			t.Fatalf("own share: piece %d %v after %d: pieces %v", i, r, next, ps.r)
		}
		next = ps.r[i][1]
	}
	if next != n/2 {
		t.Fatalf("own share ends at %d: pieces %v", next, ps.r)
	}
	end := n
	for ; i < len(ps.r); i++ { // the worker's, from the back
		r := ps.r[i]
		if r[1] != end || r[1]-r[0] > chunk || r[0]%quantum != 0 || r[1]-r[0] > (end-n/2+1)/2+quantum {
			t.Fatalf("stolen piece %d %v (left before it: [%d, %d)): pieces %v", i, r, n/2, end, ps.r)
		}
		end = r[0]
	}
	if end != n/2 {
		t.Fatalf("stolen pieces end at %d: pieces %v", end, ps.r)
	}
	checkCover(t, "the call after", ps2.r, n, chunk, quantum, true)
}
