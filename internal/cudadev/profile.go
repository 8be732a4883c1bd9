package cudadev

import (
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/ingot-llm/ingot/cuda"
)

// A profiler times every kernel of every command buffer (Options.Profile): graphs are off, and each command buffer's launches
// are queued behind a large memset, the blocker, with an event after each,
// so that they run back to back as a graph's nodes would (the CPU takes
// microseconds to launch one, more than many kernels run) and the time
// between two events is one kernel's, its launch gap included. Release prints
// the totals by kernel name.
type profiler struct {
	w       io.Writer
	block   cuda.DevicePtr // the blocker's memory
	blockN  int
	size    int // the blocker's size to try first
	by      map[string]*kernelTime
	cbs     int
	late    int // command buffers whose launching outlasted the blocker
	blocked time.Duration
}

type kernelTime struct {
	n int
	t time.Duration
}

// profileBlock is the blocker's size: a memset of 8 GiB takes ~3 ms on an
// H100, the time to launch ~500 kernels with an event each.
const profileBlock = 8 << 30

// launchProfiled is Commit with a profiler: the blocker, then each launch
// followed by an event.
func (cb *commandBuffer) launchProfiled() error {
	d, pr := cb.d, cb.d.prof
	if pr.block == 0 && pr.size > 0 {
		for n := pr.size; n >= pr.size/128; n /= 2 {
			if p, err := d.c.Alloc(n); err == nil {
				pr.block, pr.blockN = p, n
				break
			}
		}
	}
	var err error
	if len(cb.consts) > 0 {
		if cb.constBuf, err = d.c.Alloc(len(cb.consts)); err != nil {
			return err
		}
		if err := d.s.CopyHtoD(cb.constBuf, cb.consts); err != nil {
			return err
		}
	}
	if cb.b0, err = d.event(); err != nil {
		return err
	}
	if err := cb.b0.Record(d.s); err != nil {
		return err
	}
	if pr.block != 0 {
		if err := d.s.Memset(pr.block, 0, pr.blockN); err != nil {
			return err
		}
	}
	if err := cb.start.Record(d.s); err != nil {
		return err
	}
	t0 := time.Now()
	for i := range cb.launches {
		l := &cb.launches[i]
		if err := l.p.f.Launch(d.s, l.grid, l.block, l.shared, cb.fill(l, cb.constBuf)); err != nil {
			return err
		}
		e, err := d.event()
		if err != nil {
			return err
		}
		cb.marks = append(cb.marks, e)
		if err := e.Record(d.s); err != nil {
			return err
		}
	}
	cb.submit = time.Since(t0)
	return cb.end.Record(d.s)
}

// account adds a finished profiled command buffer's kernel times and returns
// its events to the pool.
func (cb *commandBuffer) account() {
	d, pr := cb.d, cb.d.prof
	if blocked, err := cb.start.Since(cb.b0); err == nil {
		pr.blocked += blocked
		if cb.submit > blocked {
			pr.late++
		}
	}
	prev := cb.start
	for i, e := range cb.marks {
		if dt, err := e.Since(prev); err == nil {
			name := cb.launches[i].p.k.Name
			k := pr.by[name]
			if k == nil {
				k = &kernelTime{}
				pr.by[name] = k
			}
			k.n++
			k.t += dt
		}
		prev = e
	}
	pr.cbs++
	d.events = append(d.events, cb.marks...)
	d.events = append(d.events, cb.b0)
	cb.marks, cb.b0 = nil, nil
}

// report writes the totals by kernel, the longest first.
func (pr *profiler) report() {
	var total time.Duration
	launches := 0
	names := make([]string, 0, len(pr.by))
	for name, k := range pr.by {
		names = append(names, name)
		total += k.t
		launches += k.n
	}
	sort.Slice(names, func(i, j int) bool { return pr.by[names[i]].t > pr.by[names[j]].t })
	fmt.Fprintf(pr.w, "cudadev profile: %d launches in %d command buffers, %.3f ms of kernels (blocker %d MiB; %d command buffers launched slower than it ran: their times include launch waits)\n",
		launches, pr.cbs, total.Seconds()*1e3, pr.blockN>>20, pr.late)
	fmt.Fprintf(pr.w, "%-32s %9s %10s %9s %6s\n", "kernel", "launches", "total ms", "mean µs", "share")
	for _, name := range names {
		k := pr.by[name]
		fmt.Fprintf(pr.w, "%-32s %9d %10.3f %9.2f %5.1f%%\n", name, k.n, k.t.Seconds()*1e3,
			k.t.Seconds()*1e6/float64(k.n), 100*k.t.Seconds()/total.Seconds())
	}
}

// newProfiler returns the profiler Options ask for, or nil.
func newProfiler(o Options) *profiler {
	w := o.Profile
	if w == nil && os.Getenv("INGOT_CUDA_PROFILE") == "1" {
		w = os.Stderr
	}
	if w == nil {
		return nil
	}
	size := o.ProfileBlock
	if size == 0 {
		size = profileBlock
	}
	return &profiler{w: w, size: size, by: map[string]*kernelTime{}}
}
