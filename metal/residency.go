package metal

import (
	"sync"
	"time"
)

// Residency policy (review #7). macOS unwires a process's GPU memory soon
// after the GPU goes idle: llama.cpp measured decode going from 56 to 318
// ms/token after a pause of more than a second (llama.cpp #10119). A
// residency set (MTLResidencySet, macOS 15+) keeps its buffers wired while
// residency is requested; since macOS 26 the OS collects even a requested
// set about a second after the last use unless residency is requested again
// (llama.cpp #17766 added a keep-alive heartbeat for it).
const (
	// MinResident is the smallest buffer a device puts in its residency set:
	// weights, the KV cache, activations, and the 64 KiB argument buffers
	// (pooled: each joins once); not the small per-call uploads (token ids),
	// whose churn would make the set commit every token.
	MinResident = 64 << 10

	// KeepAlive is how long after its last command buffer a device keeps
	// requesting residency (ggml-metal's default keep-alive: 3 minutes). A
	// session that pauses longer than this (a chat turn read for minutes)
	// pays the rewiring once on its next token.
	KeepAlive = 3 * time.Minute

	// Heartbeat is the period of the keep-alive's requests, under the ≈1 s
	// after which macOS 26 collects an idle set.
	Heartbeat = 250 * time.Millisecond
)

// A ResidencySet is the part of MTLResidencySet that [Residency] drives.
// Apple's device implements it with one MTLResidencySet attached to its
// command queue; tests with a counting fake. Each method is one
// Objective-C message sent inside an autorelease pool of its own (Release:
// two), which Residency counts in the device's [Tally].

type ResidencySet interface {
	Add(b Buffer)      // addAllocation:
	Remove(b Buffer)   // removeAllocation:
	Commit()           // commit: the adds and removes take effect
	RequestResidency() // requestResidency: wire the set's allocations now
	EndResidency()     // endResidency
	Release()          // detach from the queue and release the set
}

// Residency keeps a device's long-lived buffers (at least [MinResident]
// bytes) in a [ResidencySet] and resident while the device is in use:
// buffers join and leave the set as they are made and released (pending
// until the next command buffer, which commits the set once for all of
// them); the first command buffer after an idle period requests residency
// and starts a keep-alive that requests it again every [Heartbeat] until
// [KeepAlive] has passed without a command buffer. Decoding a token thus
// makes no residency call: the set is made once, filled as buffers are made,
// committed when they change, and requested by the keep-alive.
//
// A Residency with no set (before macOS 15, or on the interpreter) does
// nothing. Its methods are safe for concurrent use.
type Residency struct {
	mu      sync.Mutex
	set     ResidencySet // nil: no residency set
	members map[Buffer]bool
	dirty   bool      // adds or removes not committed yet
	last    time.Time // the last command buffer
	beating bool      // the keep-alive is running
	stop    chan struct{}
	tally   *Tally           // the device's: the set's Objective-C calls (nil: not counted)
	period  time.Duration    // Heartbeat, or a test's
	manual  bool             // tests: no keep-alive goroutine; they call beat
	now     func() time.Time // time.Now, or a test's clock
}

// Objective-C calls of a ResidencySet method: the message between an
// autorelease-pool push and pop (Release: removeResidencySet: and release).
const (
	callsResidency        = 3
	callsResidencyRelease = 4
)

// NewResidency returns a Residency over set (nil: none) whose calls are
// counted in tally (nil: not counted).
func NewResidency(set ResidencySet, tally *Tally) *Residency {
	return &Residency{set: set, members: map[Buffer]bool{}, now: time.Now, stop: make(chan struct{}), period: Heartbeat, tally: tally}
}

// count adds n Objective-C calls to the tally.
func (r *Residency) count(n int64) {
	if r.tally != nil {
		r.tally.Add(n)
	}
}

// Enabled reports whether r has a residency set.
func (r *Residency) Enabled() bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.set != nil
}

// Add puts b in the set if it has at least MinResident bytes.
func (r *Residency) Add(b Buffer) {
	if r == nil || b == nil || b.Len() < MinResident {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.set == nil || r.members[b] {
		return
	}
	r.members[b] = true
	r.set.Add(b)
	r.count(callsResidency)
	r.dirty = true
}

// Remove takes b out of the set, before it is released, and commits the
// set so that its memory is not held (buffers this large are released
// rarely: at a stream's or model's end).
func (r *Residency) Remove(b Buffer) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.set == nil || !r.members[b] {
		return
	}
	delete(r.members, b)
	r.set.Remove(b)
	r.set.Commit()
	r.count(2 * callsResidency)
}

// Use records a command buffer made now: it commits pending changes and,
// after an idle period, requests residency and starts the keep-alive.
func (r *Residency) Use() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.set == nil {
		return
	}
	r.last = r.now()
	if r.dirty {
		r.set.Commit()
		r.count(callsResidency)
		r.dirty = false
	}
	if !r.beating {
		r.set.RequestResidency()
		r.count(callsResidency)
		r.beating = true
		if !r.manual {
			go r.keepAlive()
		}
	}
}

// keepAlive requests residency every Heartbeat until beat says stop.
func (r *Residency) keepAlive() {
	t := time.NewTicker(r.period)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			if !r.beat() {
				return
			}
		}
	}
}

// beat is one keep-alive tick: it requests residency and reports true while
// the last command buffer is less than KeepAlive ago, and otherwise stops
// the keep-alive (the next Use requests residency again).
func (r *Residency) beat() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.set == nil || !r.beating {
		return false
	}
	if r.now().Sub(r.last) >= KeepAlive {
		r.beating = false
		return false
	}
	r.set.RequestResidency()
	r.count(callsResidency)
	return true
}

// Close stops the keep-alive, ends residency and releases the set.
func (r *Residency) Close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.set == nil {
		return
	}
	close(r.stop)
	r.set.EndResidency()
	r.set.Release()
	r.count(callsResidency + callsResidencyRelease)
	r.set, r.members, r.beating = nil, nil, false
}
