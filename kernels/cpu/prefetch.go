package cpu

import "time"

// pfArm is how a byte-dot mat-vec (kernelSet.qMatVecB) prefetches the codes
// it streams. Every arm gives the same bits; only the speed differs.
type pfArm uint8

const (
	pfL2  pfArm = iota // PREFETCHT1 (into L2) pfMin bytes ahead
	pfHW               // nothing ahead: the hardware prefetchers (PREFETCHT1 of the lines being loaded)
	pfL1               // PREFETCHT0 (into L1) pfL1Ahead and 4 KB ahead and of the lines being loaded
	pfL1P              // pfL1 with the 4-bit kernels paced as the 8-bit ones always are (PACE in dotb_amd64.s)
	pfArms
)

// pfTune chooses, for one weight's decode mat-vecs on the byte-dot kernels
// (kernelSet.tunePF), how the kernels prefetch (pfArm). Which arm is fastest
// depends on the CPU and on the moment, so it is measured as the model runs:
// each call runs the fastest arm, and a slower one again after pfExplore·r⁴
// calls (r its time over the fastest's, r⁴ at most 16), so an arm far behind
// costs little to keep measuring. The fastest arm's calls keep its mean time;
// a slower arm's call is weighed against that mean, so the two are compared
// within a few calls of each other (this VM's bandwidth drifts by 2× within
// seconds, and means kept apart drift with it), and it takes over once the
// mean of those ratios falls below 1. With each arm's own mean instead, a
// synthetic Llama-3.2-1B q4 decode on Zen 5 ran pfL1 in 79 % of the q and o
// calls and 51–64 % of gate/up's and down's, where pfL1 was 5–25 % faster
// than the others; with ratios in 95–97 %, and the bench's tg128 (alternated,
// paired by the probe) read 0.940 and 0.946 of ~46 GB/s where it read 0.847
// and 0.863, 0.925 of ~29 against 0.917, 0.848 of ~50 against 0.838.
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
// for the lines 4 KB ahead. pfL1P is pfL1 with the 4-bit kernels paced, which
// reads faster than pfL1 in the VM's slower minutes and slower in its fast
// ones (see PACE in dotb_amd64.s).
type pfTune struct {
	n    uint32
	best pfArm
	ns   float32         // the best arm's mean call time in ns (EWMA); 0 until measured
	rel  [pfArms]float32 // each other arm's call times over ns at the time (EWMA); 0 until measured
	due  [pfArms]uint32  // the call at which an arm that is not the best runs next
}

// pfExplore: a slower arm runs again after pfExplore·r⁴ calls (see pfTune).
// Measured on Zen 5 (the harness above, 80 rounds, pfL1 fastest): with 16 the
// tuner read 0.837 of the probe where pfL1 alone read 0.861, with 32 both
// 0.877 (pfL2 ran 3 % of the calls, pfHW 0.2 %).
const pfExplore = 32

// prefetch returns the arm the next call runs: each arm once first (pfL2,
// pfHW, pfL1, pfL1P), then the fastest, and a slower one when it is due.
func (u *pfTune) prefetch() pfArm {
	u.n++
	if u.ns == 0 {
		return u.best
	}
	for a := range pfArms {
		if a != u.best && u.rel[a] == 0 {
			return a
		}
	}
	for a := range pfArms {
		if a != u.best && u.n >= u.due[a] {
			r := u.rel[a]
			u.due[a] = u.n + uint32(pfExplore*min(r*r*r*r, 16))
			return a
		}
	}
	return u.best
}

// record adds a call of arm a that took d.
func (u *pfTune) record(a pfArm, d time.Duration) {
	v := float32(max(d.Nanoseconds(), 1))
	if a == u.best {
		ewma(&u.ns, v)
		return
	}
	ewma(&u.rel[a], v/u.ns)
	if k := u.rel[a]; k < 1 { // a is faster: the others are weighed against it now
		for b := range u.rel {
			u.rel[b] /= k
		}
		u.rel[u.best], u.rel[a] = 1/k, 0
		u.ns *= k
		u.best = a
	}
}

// ewma moves mean m a quarter of the way to v (to v if m is 0: unmeasured).
func ewma(m *float32, v float32) {
	if *m == 0 {
		*m = v
		return
	}
	*m += (v - *m) / 4
}
