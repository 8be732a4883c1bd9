package cpu

import "time"

// pfArm is how a byte-dot mat-vec (kernelSet.qMatVecB) prefetches the codes
// it streams. Every arm gives the same bits; only the speed differs.
type pfArm uint8

const (
	pfL2 pfArm = iota // PREFETCHT1 (into L2) pfMin bytes ahead
	pfHW              // nothing ahead: the hardware prefetchers (PREFETCHT1 of the lines being loaded)
	pfL1              // PREFETCHT0 (into L1) pfL1Ahead and 4 KB ahead and of the lines being loaded
	pfArms
)

// pfTune chooses, for one weight's decode mat-vecs on the byte-dot kernels
// (kernelSet.tunePF), how the kernels prefetch (pfArm). Which arm is fastest
// depends on the CPU and on the moment, so it is measured as the model runs:
// each call runs the arm whose mean call time is lowest, and a slower arm
// again after pfExplore·r⁴ calls (r its mean over the fastest's, r⁴ at most
// 16), so an arm that is far behind costs little to keep measuring; the
// call's time updates its arm's mean.
//
// Measured on Zen 4 (a 2-vCPU VM, a Llama-3.2-1B layer's matrices in order
// over DRAM, A/B alternated, 300 rounds a run): with the read bandwidth at its
// usual 30–38 GB/s the q4 matrices read 0.94–1.00 of the probe with pfHW and
// 0.88 with pfL2 (q8 0.98–0.99 and 0.91–0.92); in the minutes the probe reads
// 45–57 GB/s, pfHW read from 1 % faster to 13 % slower than pfL2, by the run.
// No one PREFETCHT1 distance serves both: 2 KB ahead read 8 % faster than 18
// KB in the usual minutes and 32 % slower in the fast ones. On Zen 5 (the same
// kind of VM, the same harness, 50–60 rounds) pfL1 (then without its lines 4
// KB ahead) read 0.84–0.89 of a 35–39 GB/s probe and 0.85–0.89 of a 57–65
// GB/s one, where pfL2 read 0.76 and 0.61 and pfHW ~0.55 (q8: pfL1 0.96–0.99
// and 0.93, the tuner between pfL2 and pfHW 0.89 and 0.73); see dotb_amd64.s
// for the lines 4 KB ahead.
type pfTune struct {
	n   uint32
	ns  [pfArms]float32 // mean call time per arm in ns (EWMA); 0 until measured
	due [pfArms]uint32  // the call at which an arm that is not the fastest runs next
}

// pfExplore: a slower arm runs again after pfExplore·r⁴ calls (see pfTune).
// Measured on Zen 5 (the harness above, 80 rounds, pfL1 fastest): with 16 the
// tuner read 0.837 of the probe where pfL1 alone read 0.861, with 32 both
// 0.877 (pfL2 ran 3 % of the calls, pfHW 0.2 %).
const pfExplore = 32

// prefetch returns the arm the next call runs: each arm once first, then the
// fastest, and a slower one when it is due.
func (u *pfTune) prefetch() pfArm {
	u.n++
	for a := range pfArms {
		if u.ns[a] == 0 {
			return a
		}
	}
	best := u.best()
	for a := range pfArms {
		if a != best && u.n >= u.due[a] {
			r := u.ns[a] / u.ns[best]
			u.due[a] = u.n + uint32(pfExplore*min(r*r*r*r, 16))
			return a
		}
	}
	return best
}

// best returns the arm of lowest mean call time (pfL2 until one is measured).
func (u *pfTune) best() pfArm {
	b := pfL2
	for a := range pfArms {
		if u.ns[a] != 0 && (u.ns[b] == 0 || u.ns[a] < u.ns[b]) {
			b = a
		}
	}
	return b
}

// record adds a call of arm a that took d.
func (u *pfTune) record(a pfArm, d time.Duration) {
	m := &u.ns[a]
	v := float32(max(d.Nanoseconds(), 1))
	if *m == 0 {
		*m = v
		return
	}
	*m += (v - *m) / 4
}
