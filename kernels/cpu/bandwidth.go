package cpu

import (
	"slices"
	"time"
	"unsafe"
)

// ReadBandwidth measures how fast the pool's threads together read memory, in
// GB/s (10⁹ bytes per second): each thread sums its contiguous share of a
// buffer of the given size with wide loads (AVX2 on amd64). Make bytes several
// times the last-level cache (256 MB is a good default) so the figure is DRAM
// bandwidth. It returns the median of five timed passes after one warm-up, and
// allocates the buffer for the duration of the call.
func ReadBandwidth(p *Pool, bytes int) float64 {
	const page = 4096
	bytes = max(bytes, page*p.Threads()) / page * page
	buf := make([]byte, bytes)
	for i := 0; i < len(buf); i += page {
		buf[i] = 1 // fault every page in before timing
	}
	t := &bwTask{buf: buf}
	var gbs [5]float64
	p.Run(len(buf)/page, 1, t) // warm-up
	for i := range gbs {
		start := time.Now()
		p.Run(len(buf)/page, 1, t)
		gbs[i] = float64(len(buf)) / time.Since(start).Seconds() / 1e9
	}
	slices.Sort(gbs[:])
	return gbs[len(gbs)/2]
}

type bwTask struct {
	buf []byte
	sum [64]uint64 // one per chunk start page mod 64; keeps the sums live
}

func (t *bwTask) Do(lo, hi int) {
	b := t.buf[lo*4096 : hi*4096]
	s, ok := sumBytesAsm(b)
	if !ok {
		s = sumBytesGo(b)
	}
	t.sum[lo%64] += s
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
