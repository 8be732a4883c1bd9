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
// within a few calls of each other (a VM's bandwidth drifts by 2× within
// seconds, and with means kept apart the fastest arm lost many calls to
// slower ones), and it takes over once the mean of those ratios falls below 1.
//
// No one arm wins everywhere: on Zen 4 pfHW read faster than pfL2 at the
// usual bandwidth and mostly slower in the fast minutes (and no one PREFETCHT1
// distance served both); on Zen 5 pfL1 read well ahead of both, and pfL1P
// reads faster than pfL1 when the bandwidth is low and slower when it is high
// (see PACE in dotb_amd64.s). Measurements: docs/perf/cpu.md, "Prefetch arms
// (pfTune)".
type pfTune struct {
	n    uint32
	best pfArm
	ns   float32         // the best arm's mean call time in ns (EWMA); 0 until measured
	rel  [pfArms]float32 // each other arm's call times over ns at the time (EWMA); 0 until measured
	due  [pfArms]uint32  // the call at which an arm that is not the best runs next
}

// pfExplore: a slower arm runs again after pfExplore·r⁴ calls (see pfTune).
// At 16 the reruns cost the tuner a few percent against running the fastest
// arm alone on Zen 5; at 32, nothing measurable (docs/perf/cpu.md, "Prefetch
// arms (pfTune)").
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
