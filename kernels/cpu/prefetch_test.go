package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestPFTune runs the tuner against arms of fixed call times: it measures
// both first, then runs the faster and explores the other once in pfExplore
// calls, and follows a change of which arm is faster.
func TestPFTune(t *testing.T) {
	for _, c := range []struct {
		name       string
		ns         [2]time.Duration // call time with prefetch (arm 0) and without (arm 1), then after flip calls
		flip       int
		after      [2]time.Duration
		wantBefore int // the arm run most before the flip
		wantAfter  int // and from 64 calls after it
	}{
		{"prefetch faster", [2]time.Duration{80, 100}, 0, [2]time.Duration{}, 0, 0},
		{"none faster", [2]time.Duration{100, 80}, 0, [2]time.Duration{}, 1, 1},
		{"prefetch, then none", [2]time.Duration{80, 100}, 200, [2]time.Duration{100, 80}, 0, 1},
		{"none, then prefetch", [2]time.Duration{100, 70}, 200, [2]time.Duration{90, 100}, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var u pfTune
			const calls = 400
			var runs [2][2]int // [before/after the flip][arm]
			for i := range calls {
				pf := u.prefetch()
				arm := 0
				if !pf {
					arm = 1
				}
				if i < 2 && arm != i {
					t.Fatalf("call %d ran arm %d: the first two calls measure arm 0, then 1", i, arm)
				}
				ns := c.ns
				if c.flip > 0 && i >= c.flip {
					ns = c.after
				}
				u.record(pf, ns[arm])
				switch {
				case c.flip == 0 || i < c.flip:
					if i >= 2 {
						runs[0][arm]++
					}
				case i >= c.flip+64:
					runs[1][arm]++
				}
			}
			for k, want := range []int{c.wantBefore, c.wantAfter} {
				r := runs[k]
				if c.flip == 0 && k == 1 {
					continue
				}
				n := r[0] + r[1]
				// the slower arm runs once in pfExplore calls, give or take one
				if got := r[1-want]; got > n/pfExplore+1 || got < n/pfExplore-1 {
					t.Errorf("phase %d: arm %d ran %d of %d calls, want ~%d (1 in %d)", k, 1-want, got, n, n/pfExplore, pfExplore)
				}
			}
		})
	}
}

// TestMatMulTunesPF checks that decode mat-vecs on kernels whose prefetch is
// tuned run through the weight's tuner, both arms, with the same results; that
// a fused MatMuls call runs through its first weight's tuner; and that other
// calls (prefill, other kernels) leave it alone.
func TestMatMulTunesPF(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	p := NewPool(2)
	defer p.Close()
	const N, K, calls = 64, 512, 40
	w := randWeight(r, FormatQ, N, K, 4, 64)
	Prepare(w)
	x := randVec(r, 16*K)
	var first []float32
	for range calls {
		dst := make([]float32, N)
		p.MatMul(dst, x[:K], 1, w)
		if first != nil {
			for i := range dst {
				if dst[i] != first[i] {
					t.Fatalf("out[%d] = %g, was %g: the prefetch arm changed a result", i, dst[i], first[i])
				}
			}
		}
		first = dst
	}
	p.MatMul(make([]float32, 16*N), x, 16, w) // prefill: not tuned

	// a fused call: q, k and v shapes of one x
	ws := []*Weight{randWeight(r, FormatQ, N, K, 4, 64), randWeight(r, FormatQ, 16, K, 4, 64), randWeight(r, FormatQ, 16, K, 4, 64)}
	for _, wi := range ws {
		Prepare(wi)
	}
	var firsts [][]float32
	for range calls {
		dst := [][]float32{make([]float32, N), make([]float32, 16), make([]float32, 16)}
		p.MatMuls(dst, x[:K], 1, ws)
		for j := range firsts {
			if !slices.Equal(dst[j], firsts[j]) {
				t.Fatalf("MatMuls output %d changed between calls: the prefetch arm changed a result", j)
			}
		}
		firsts = dst
	}

	for i, c := range []struct {
		q    *QMatrix
		want uint32
	}{{w.Q, calls}, {ws[0].Q, calls}, {ws[1].Q, 0}, {ws[2].Q, 0}} {
		u := c.q.pf
		if !kern.tunePF {
			if u.n != 0 {
				t.Fatalf("kernels %s do not tune prefetch, but tuner %d ran %d calls", kern.name, i, u.n)
			}
			continue
		}
		if u.n != c.want {
			t.Errorf("tuner %d ran %d calls, want %d (the decode calls, through the first weight of a fused call)", i, u.n, c.want)
		}
		if c.want > 0 && (u.ns[0] == 0 || u.ns[1] == 0) {
			t.Errorf("tuner %d: call times %v: both arms should have been measured", i, u.ns)
		}
	}
}
