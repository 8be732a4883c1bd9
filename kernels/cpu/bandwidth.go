package cpu

import (
	"slices"
	"sync/atomic"
	"time"
	"unsafe"
)

// ReadBandwidth measures how fast the pool's threads together read memory, in
// GB/s (10⁹ bytes per second): the median of five timed passes of a
// [BandwidthProbe] over a buffer of the given size, which it allocates for the
// duration of the call.
func ReadBandwidth(p *Pool, bytes int) float64 {
	b := NewBandwidthProbe(p, bytes)
	var gbs [5]float64
	for i := range gbs {
		gbs[i] = b.Sample()
	}
	slices.Sort(gbs[:])
	return gbs[len(gbs)/2]
}

// BandwidthProbe reads a buffer it keeps with all of a pool's threads: each
// thread sums its contiguous share with wide loads (AVX2 on amd64). Make the
// buffer several times the last-level cache (256 MB is a good default) so a
// sample is DRAM bandwidth. A virtual machine's bandwidth can drift by 2× within
// seconds, so take samples while the thing it is compared with runs.
type BandwidthProbe struct {
	p *Pool
	t bwTask
}

// NewBandwidthProbe allocates the buffer, faults it in and reads it once.
func NewBandwidthProbe(p *Pool, bytes int) *BandwidthProbe {
	const page = 4096
	bytes = max(bytes, page*p.Threads()) / page * page
	b := &BandwidthProbe{p: p, t: bwTask{buf: make([]byte, bytes)}}
	for i := 0; i < len(b.t.buf); i += page {
		b.t.buf[i] = 1 // fault every page in before timing
	}
	b.Sample() // warm-up
	return b
}

// Sample times one pass over the buffer and returns its GB/s.
func (b *BandwidthProbe) Sample() float64 {
	start := time.Now()
	b.p.Run(len(b.t.buf)/4096, 1, &b.t)
	return float64(len(b.t.buf)) / time.Since(start).Seconds() / 1e9
}

type bwTask struct {
	buf []byte
	sum atomic.Uint64 // keeps the sums live
}

func (t *bwTask) Do(lo, hi int) {
	b := t.buf[lo*4096 : hi*4096]
	s, ok := sumBytesAsm(b)
	if !ok {
		s = sumBytesGo(b)
	}
	t.sum.Add(s)
}

// sumBytesGo adds b (a multiple of 32 bytes, 8-aligned) as uint64 words, four
// at a time.
func sumBytesGo(b []byte) uint64 {
	if len(b) < 32 {
		return 0
	}
	w := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
	var s0, s1, s2, s3 uint64
	for i := 0; i+4 <= len(w); i += 4 {
		s0 += w[i]
		s1 += w[i+1]
		s2 += w[i+2]
		s3 += w[i+3]
	}
	return s0 + s1 + s2 + s3
}
