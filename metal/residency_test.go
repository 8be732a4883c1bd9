package metal

import (
	"sync"
	"testing"
	"time"
)

// fakeSet counts the MTLResidencySet calls a Residency makes.
type fakeSet struct {
	mu                                               sync.Mutex
	members                                          map[Buffer]bool
	adds, removes, commits, requests, ends, releases int
	committed                                        map[Buffer]bool // the members as of the last commit
}

func (f *fakeSet) Add(b Buffer) { f.mu.Lock(); f.adds++; f.members[b] = true; f.mu.Unlock() }
func (f *fakeSet) Remove(b Buffer) {
	f.mu.Lock()
	f.removes++
	delete(f.members, b)
	f.mu.Unlock()
}
func (f *fakeSet) Commit() {
	f.mu.Lock()
	f.commits++
	f.committed = map[Buffer]bool{}
	for b := range f.members {
		f.committed[b] = true
	}
	f.mu.Unlock()
}
func (f *fakeSet) RequestResidency() { f.mu.Lock(); f.requests++; f.mu.Unlock() }
func (f *fakeSet) EndResidency()     { f.mu.Lock(); f.ends++; f.mu.Unlock() }
func (f *fakeSet) Release()          { f.mu.Lock(); f.releases++; f.mu.Unlock() }

func (f *fakeSet) count() (adds, removes, commits, requests int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.adds, f.removes, f.commits, f.requests
}

type fakeBuf struct{ n int }

func (b *fakeBuf) Contents() []byte { return nil }
func (b *fakeBuf) Len() int         { return b.n }
func (b *fakeBuf) Release()         {}

// TestResidency: the set is filled with the large buffers as they are made,
// committed once for them all at the first command buffer, and residency is
// requested then and by the keep-alive, not per command buffer (a decoded
// token); a pause longer than KeepAlive stops the keep-alive and the next
// command buffer requests again; a released buffer leaves the set at once;
// Close ends residency and releases the set.
func TestResidency(t *testing.T) {
	f := &fakeSet{members: map[Buffer]bool{}}
	var tally Tally
	r := NewResidency(f, &tally)
	r.manual = true
	clock := time.Unix(1000, 0)
	r.now = func() time.Time { return clock }

	weights, kv, act := &fakeBuf{64 << 20}, &fakeBuf{8 << 20}, &fakeBuf{MinResident}
	tokens := &fakeBuf{2048} // a prompt's token ids: not worth a commit
	for _, b := range []Buffer{weights, kv, act, tokens, weights} {
		r.Add(b)
	}
	if adds, _, commits, requests := f.count(); adds != 3 || commits != 0 || requests != 0 {
		t.Fatalf("after making 4 buffers (one twice): %d adds, %d commits, %d requests; want 3, 0, 0", adds, commits, requests)
	}
	if c := tally.Counts().Calls; c != 3*callsResidency {
		t.Errorf("adding 3 buffers counted %d Objective-C calls, want %d", c, 3*callsResidency)
	}
	r.Use() // the prompt
	first := tally.Counts().Calls
	for range 99 { // 99 decoded tokens, 10 ms apart
		clock = clock.Add(10 * time.Millisecond)
		r.Use()
	}
	if _, _, commits, requests := f.count(); commits != 1 || requests != 1 {
		t.Fatalf("after 100 command buffers: %d commits, %d requests; want 1, 1", commits, requests)
	}
	if c := tally.Counts().Calls; first != 5*callsResidency || c != first {
		t.Errorf("Objective-C calls: %d after the first command buffer (want %d: commit, request), %d more over 99 tokens (want 0)", first, 5*callsResidency, c-first)
	}
	if !f.committed[weights] || !f.committed[kv] || !f.committed[act] || f.committed[tokens] {
		t.Fatalf("committed set %v: want the weights, KV and activations only", f.committed)
	}
	// Idle: the keep-alive requests residency every tick while the last
	// command buffer is less than KeepAlive ago, then stops.
	ticks := 0
	for r.beat() {
		ticks++
		clock = clock.Add(Heartbeat)
	}
	if want := int(KeepAlive / Heartbeat); ticks < want-1 || ticks > want+1 {
		t.Errorf("keep-alive ran %d ticks, want about %d (KeepAlive/Heartbeat)", ticks, want)
	}
	if _, _, _, requests := f.count(); requests != 1+ticks {
		t.Errorf("%d requests after %d ticks, want %d", requests, ticks, 1+ticks)
	}
	r.Use() // the next turn of the chat
	if _, _, commits, requests := f.count(); commits != 1 || requests != 2+ticks {
		t.Errorf("after the pause: %d commits, %d requests; want 1 (nothing changed), %d", commits, requests, 2+ticks)
	}
	r.Remove(kv)
	r.Remove(tokens) // never a member
	if _, removes, commits, _ := f.count(); removes != 1 || commits != 2 || f.committed[kv] {
		t.Errorf("after releasing the KV buffer: %d removes, %d commits, committed %v; want 1, 2, without it", removes, commits, f.committed)
	}
	r.Close()
	r.Use()
	r.Add(&fakeBuf{1 << 30})
	if f.ends != 1 || f.releases != 1 || f.adds != 3 || f.requests != 2+ticks {
		t.Errorf("after Close: %d ends, %d releases, %d adds, %d requests; want 1, 1, 3, %d", f.ends, f.releases, f.adds, f.requests, 2+ticks)
	}
}

// TestResidencyKeepAlive runs the keep-alive goroutine with a short period:
// it requests residency while the device is idle, and Close stops it.
func TestResidencyKeepAlive(t *testing.T) {
	f := &fakeSet{members: map[Buffer]bool{}}
	r := NewResidency(f, nil)
	r.period = time.Millisecond
	r.Add(&fakeBuf{1 << 20})
	r.Use()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, _, _, requests := f.count(); requests >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the keep-alive made fewer than 4 requests in 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	r.Close()
	_, _, _, n := f.count()
	time.Sleep(20 * time.Millisecond)
	if _, _, _, m := f.count(); m != n {
		t.Errorf("%d requests after Close", m-n)
	}
}

// TestResidencyNone: without a set (before macOS 15, the interpreter) every
// method does nothing, on a nil Residency too.
func TestResidencyNone(t *testing.T) {
	for _, r := range []*Residency{nil, NewResidency(nil, nil)} {
		r.Add(&fakeBuf{1 << 30})
		r.Use()
		r.Remove(&fakeBuf{1 << 30})
		r.Close()
		if r.Enabled() {
			t.Error("enabled without a set")
		}
	}
}
