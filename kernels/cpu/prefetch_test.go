package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestPFTune runs the tuner against arms of fixed call times: it measures
// each arm first, then runs the fastest and a slower arm once in
// pfExplore·min(r⁴, 16) calls (r its time over the fastest's), and follows a
// change of which arm is fastest.
func TestPFTune(t *testing.T) {
	type times = [pfArms]time.Duration // call time of each arm
	for _, c := range []struct {
		name  string
		ns    times // then after flip calls
		flip  int
		after times
		want  [2]pfArm // the fastest arm before the flip and from settle calls after it
	}{
		{"L2 fastest", times{80, 100, 120, 130}, 0, times{}, [2]pfArm{pfL2}},
		{"HW fastest, L1 far behind", times{100, 80, 200, 90}, 0, times{}, [2]pfArm{pfHW}},
		{"L1 fastest", times{100, 100, 70, 75}, 0, times{}, [2]pfArm{pfL1}},
		{"all the same", times{100, 100, 100, 100}, 0, times{}, [2]pfArm{pfL2}},
		{"L2, then L1", times{80, 100, 120, 110}, 1500, times{120, 100, 80, 90}, [2]pfArm{pfL2, pfL1}},
		{"L1, then HW", times{90, 100, 60, 70}, 1500, times{100, 70, 200, 85}, [2]pfArm{pfL1, pfHW}},
		{"L1P, then L1", times{100, 110, 80, 60}, 1500, times{100, 110, 60, 80}, [2]pfArm{pfL1P, pfL1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			const calls, settle = 4000, 1500 // settle: for the ratios to reach the new times
			var u pfTune
			var runs [2][pfArms]int // [before/after the flip][arm]
			for i := range calls {
				a := u.prefetch()
				if i < int(pfArms) && a != pfArm(i) {
					t.Fatalf("call %d ran arm %d: the first calls measure the arms in order", i, a)
				}
				ns := c.ns
				if c.flip > 0 && i >= c.flip {
					ns = c.after
				}
				u.record(a, ns[a])
				switch {
				case i < int(pfArms):
				case c.flip == 0 || i < c.flip:
					runs[0][a]++
				case i >= c.flip+settle:
					runs[1][a]++
				}
			}
			for k, ns := range []times{c.ns, c.after} {
				if c.flip == 0 && k == 1 {
					continue
				}
				best, r := c.want[k], runs[k]
				n := 0
				for _, v := range r {
					n += v
				}
				for a := range pfArms {
					if a == best {
						continue
					}
					q := float64(ns[a]) / float64(ns[best])
					want := float64(n) / float64(int(pfExplore*min(q*q*q*q, 16)))
					if got := float64(r[a]); got > want+2 || got < want-2 {
						t.Errorf("phase %d: arm %d ran %d of %d calls, want ~%.1f (%.2f× the fastest's time)", k, a, r[a], n, want, q)
					}
				}
			}
		})
	}
}

// TestPFTuneDrift runs the tuner against arms whose call times all change
// together, as the VM's bandwidth does (spells of one and two times as slow,
// 20–200 calls long, and ±10 % noise a call): the fastest arm must still run
// nearly every call.
func TestPFTuneDrift(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	base := [pfArms]float64{100, 110, 85, 95} // pfL1 fastest by 11–15 %
	var u pfTune
	var runs [pfArms]int
	const calls = 20000
	slow, spell := 1.0, 0
	for range calls {
		if spell == 0 {
			slow, spell = 3-slow, 20+r.IntN(180)
		}
		spell--
		a := u.prefetch()
		runs[a]++
		u.record(a, time.Duration(base[a]*slow*(0.9+0.2*r.Float64())*1000))
	}
	// pfL1P, pfL2 and pfHW rerun every ~50, ~60 and ~90 calls: ~4.7 % of them
	if runs[pfL1] < calls*93/100 {
		t.Errorf("arms ran %v of %d calls: want pfL1, the fastest, in ≥ 93 %%", runs, calls)
	}
}

// measuredAll reports whether u has measured every arm.
func measuredAll(u *pfTune) bool {
	for a := range pfArms {
		if a != u.best && u.rel[a] == 0 {
			return false
		}
	}
	return u.ns != 0
}

// TestMatMulTunesPF checks that decode mat-vecs on kernels whose prefetch is
// tuned run through the weight's tuner, every arm, with the same results; that
// a fused MatMuls call runs through its first weight's tuner; and that other
// calls (short batches, prefill, other kernels) leave it alone.
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
		if first != nil && !slices.Equal(dst, first) {
			t.Fatalf("MatMul output changed between calls: the prefetch arm changed a result")
		}
		first = dst
	}
	p.MatMul(make([]float32, 16*N), x, 16, w)     // prefill: not tuned
	p.MatMul(make([]float32, 4*N), x[:4*K], 4, w) // a short batch: the fastest arm, not tuned

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
		u := *p.tuner(c.q)
		if !kern.tunePF {
			if u.n != 0 {
				t.Fatalf("kernels %s do not tune prefetch, but tuner %d ran %d calls", kern.name, i, u.n)
			}
			continue
		}
		if u.n != c.want {
			t.Errorf("tuner %d ran %d calls, want %d (the decode calls, through the first weight of a fused call)", i, u.n, c.want)
		}
		if c.want > 0 && !measuredAll(&u) {
			t.Errorf("tuner %d: time %g, ratios %v: every arm should have been measured", i, u.ns, u.rel)
		}
	}
}
