package cpu

import "time"

// pfTune chooses, for one weight's decode mat-vecs on the byte-dot kernels
// (kernelSet.tunePF), whether the kernels prefetch the codes far ahead in
// software or leave the stream to the hardware prefetchers. Which is faster
// depends on the moment, so it is measured as the model runs: each call runs
// the arm whose mean call time is lower, every pfExplore-th call the other
// one, and the call's time updates its arm's mean. The results are the same
// bits either way; only the speed differs.
//
// Measured on Zen 4 (this 2-vCPU VM, a Llama-3.2-1B layer's matrices in
// order over DRAM, A/B alternated, 300 rounds a run): with the read bandwidth
// at its usual 30–38 GB/s the q4 matrices read 0.94–1.00 of the probe without
// software prefetch and 0.88 with it (q8 0.98–0.99 and 0.91–0.92); in the
// minutes the probe reads 45–57 GB/s, without it read from 1 % faster to
// 13 % slower than with it, by the run. No one distance serves both: 2 KB
// ahead read 8 % faster than 18 KB in the usual minutes and 32 % slower in
// the fast ones; prefetching one or two of a chunk's four lines read slower
// than all four or none. Choosing as it runs, the harness read 0.99 of
// always prefetching in the fast minutes and of never in the usual ones.
type pfTune struct {
	n  uint32
	ns [2]float32 // mean call time in ns (EWMA) with prefetch (arm 0) and without (arm 1); 0 until measured
}

// pfExplore: one call in pfExplore runs the arm that is not the faster.
const pfExplore = 16

// prefetch reports whether the next call prefetches: each arm once first,
// then the faster, and the other every pfExplore-th call.
func (u *pfTune) prefetch() bool {
	u.n++
	switch {
	case u.ns[0] == 0:
		return true
	case u.ns[1] == 0:
		return false
	}
	return (u.ns[0] <= u.ns[1]) != (u.n%pfExplore == 0)
}

// record adds a call that took d, with prefetch pf.
func (u *pfTune) record(pf bool, d time.Duration) {
	m := &u.ns[0]
	if !pf {
		m = &u.ns[1]
	}
	v := float32(max(d.Nanoseconds(), 1))
	if *m == 0 {
		*m = v
		return
	}
	*m += (v - *m) / 4
}
