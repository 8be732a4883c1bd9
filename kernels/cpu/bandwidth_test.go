package cpu

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// wordSum is the sum of b's little-endian uint64 words, one at a time.
func wordSum(b []byte) uint64 {
	var s uint64
	for i := 0; i+8 <= len(b); i += 8 {
		s += binary.LittleEndian.Uint64(b[i:])
	}
	return s
}

func randBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// bwLens are lengths at the edges of the loops' blocks (64 bytes in Go, 128
// and 256 in assembly, a quarter in Go's four streams).
var bwLens = []int{0, 8, 56, 64, 120, 128, 136, 248, 256, 264, 384, 1016, 4096, 4104, 4096 + 256 + 64 + 8, 1 << 16, 1<<16 + 8*37}

// TestReadSum checks that the probe's read adds every word of its buffer, with
// the assembly this build has and with Go's loop, at offsets 0 and 8.
func TestReadSum(t *testing.T) {
	width := bwWidth
	defer func() { bwWidth = width }()
	for _, w := range []int{width, 0} {
		bwWidth = w
		for _, n := range bwLens {
			for _, off := range []int{0, 8} {
				b := randBytes(n+off, uint64(n))[off:]
				if got, want := readSum(b), wordSum(b); got != want {
					t.Errorf("width %d: readSum(%d bytes at offset %d) = %#x, want %#x", w, n, off, got, want)
				}
			}
		}
	}
}

// TestBandwidthProbe checks that a sample is a positive rate and reads every
// byte of the buffer it claims, once.
func TestBandwidthProbe(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	b := NewBandwidthProbe(p, 5<<20+100)
	if got, want := b.Bytes(), 5<<20; got != want {
		t.Fatalf("Bytes() = %d, want %d (whole 4 KiB pages)", got, want)
	}
	copy(b.t.buf, randBytes(len(b.t.buf), 3))
	want := wordSum(b.t.buf)
	b.t.sum.Store(0)
	for i := range 3 {
		if gbs := b.Sample(); !(gbs > 0) || gbs > 1e5 {
			t.Errorf("Sample() = %v GB/s, want a positive rate", gbs)
		}
		if got := b.t.sum.Load(); got != uint64(i+1)*want {
			t.Fatalf("after %d samples the probe's sum is %#x, want %d × %#x: it did not read each byte once", i+1, got, i+1, want)
		}
	}
	if gbs := ReadBandwidth(p, 8<<20); !(gbs > 0) {
		t.Errorf("ReadBandwidth = %v GB/s, want a positive rate", gbs)
	}
	if small := NewBandwidthProbe(p, 1); small.Bytes() != 2*4096 {
		t.Errorf("NewBandwidthProbe(p, 1).Bytes() = %d, want a page a thread (8192)", small.Bytes())
	}
}

// BenchmarkReadBandwidth reports the 2-thread DRAM read bandwidth over 512 MB,
// the bench's probe.
func BenchmarkReadBandwidth(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	var gbs float64
	for b.Loop() {
		gbs = ReadBandwidth(p, 512<<20)
	}
	b.ReportMetric(gbs, "GB/s")
}
