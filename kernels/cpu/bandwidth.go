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

// BandwidthProbe reads a buffer it keeps with all of a pool's threads, each
// thread its contiguous share, and reports the bytes read per second. It is
// the denominator of the bench's bandwidth fractions, so it reads as fast as
// the best plain read loop does (scripts/bwloop.c is the yardstick; see
// docs/bench.md): a core's DRAM bandwidth is set by the lines it keeps in
// flight, and a wide load takes one load-buffer entry per 64 bytes where
// 64-bit loads take eight.
//
// On amd64 a thread sums its share with 512-bit loads (AVX-512F; 256-bit with
// AVX2 only), four independent adds per 256 bytes, and prefetches each line
// 8 KiB ahead with PREFETCHT1, which adds a few percent. On arm64 it reads with
// 128-bit NEON loads, 128 bytes an iteration. Elsewhere, and under the noasm
// tag, it reads 64-bit words from four places of its share at once, which is
// faster than one stream of them but slower than the assembly: there the probe
// reads low and a kernel's fraction of it high.
//
// Make the buffer several times the last-level cache so a sample is DRAM
// bandwidth (512 MB is a good default). A virtual machine's bandwidth can
// drift by 2× within seconds, so take samples while the thing it is compared
// with runs.
type BandwidthProbe struct {
	p *Pool
	t bwTask
}

// NewBandwidthProbe allocates the buffer (bytes rounded down to whole 4 KiB
// pages, at least one a thread), faults it in and reads it once.
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

// Bytes returns the size of the buffer, which each [BandwidthProbe.Sample]
// reads once.
func (b *BandwidthProbe) Bytes() int { return len(b.t.buf) }

// Sample times one pass over the buffer and returns its GB/s.
func (b *BandwidthProbe) Sample() float64 {
	start := time.Now()
	b.p.Run(len(b.t.buf)/4096, 1, &b.t)
	return float64(len(b.t.buf)) / time.Since(start).Seconds() / 1e9
}

type bwTask struct {
	buf []byte
	sum atomic.Uint64 // the sums of every pass: keeps them live, and tests check it
}

func (t *bwTask) Do(lo, hi int) {
	t.sum.Add(readSum(t.buf[lo*4096 : hi*4096]))
}

// readSum returns the sum of b's little-endian uint64 words (len(b) a multiple
// of 8; b 8-byte aligned): the probe's read of b.
func readSum(b []byte) uint64 {
	s, n := readSumAsm(b)
	return s + readSumGo(b[n:])
}

// readSumGo is readSum in Go: it reads four quarters of b at once (four
// streams), 64 bytes of each at a time, then the words left over.
func readSumGo(b []byte) uint64 {
	const line = 64
	w := unsafe.Slice((*[line / 8]uint64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/line)
	q := len(w) / 4
	w0, w1, w2, w3 := w[:q], w[q:2*q], w[2*q:3*q], w[3*q:4*q]
	var s0, s1, s2, s3 uint64
	for i := range w0 {
		a, c, d, e := &w0[i], &w1[i], &w2[i], &w3[i]
		s0 += a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7]
		s1 += c[0] + c[1] + c[2] + c[3] + c[4] + c[5] + c[6] + c[7]
		s2 += d[0] + d[1] + d[2] + d[3] + d[4] + d[5] + d[6] + d[7]
		s3 += e[0] + e[1] + e[2] + e[3] + e[4] + e[5] + e[6] + e[7]
	}
	s := s0 + s1 + s2 + s3
	rest := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)[4*q*line/8:]
	for _, v := range rest {
		s += v
	}
	return s
}
