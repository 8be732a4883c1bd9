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
// multiples of quantum (the last ends at n), and that the pieces shrink toward
// the end.
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
					slices.SortFunc(ps.r, func(a, b [2]int) int { return a[0] - b[0] })
					if n == 0 {
						if len(ps.r) > 1 || len(ps.r) == 1 && ps.r[0] != [2]int{0, 0} {
							t.Fatalf("%s: pieces %v", name, ps.r)
						}
						continue
					}
					next := 0
					for _, r := range ps.r {
						lo, hi := r[0], r[1]
						if lo != next || hi <= lo || hi-lo > chunk && threads > 1 && n > chunk {
							t.Fatalf("%s: pieces %v", name, ps.r)
						}
						if lo%quantum != 0 || hi%quantum != 0 && hi != n {
							t.Fatalf("%s: piece [%d, %d) off the quantum", name, lo, hi)
						}
						next = hi
					}
					if next != n {
						t.Fatalf("%s: pieces %v end at %d", name, ps.r, next)
					}
				}
				if threads > 1 && n >= 8*chunk && chunk > quantum {
					if last := ps.r[len(ps.r)-1]; last[1]-last[0] >= chunk {
						t.Errorf("%s: the last piece %v is a whole chunk", name, last)
					}
				}
			}
		}
		p.Close()
	}
}
