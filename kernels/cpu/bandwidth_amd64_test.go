//go:build amd64 && !noasm

package cpu

import (
	"testing"
	"unsafe"

	"github.com/klauspost/cpuid/v2"
)

// TestReadBytesAsm checks both amd64 loops, with and without prefetch, against
// Go's loop; the dispatch test (TestReadSum) covers only the widest.
func TestReadBytesAsm(t *testing.T) {
	loops := []struct {
		name  string
		ok    bool
		block int
		f     func(p *byte, n, pf int) uint64
	}{
		{"avx512", cpuid.CPU.Supports(cpuid.AVX512F), 256, readBytes512},
		{"avx2", cpuid.CPU.Supports(cpuid.AVX, cpuid.AVX2), 128, readBytes256},
	}
	ran := 0
	for _, l := range loops {
		if !l.ok {
			continue
		}
		ran++
		for _, n := range bwLens {
			n = n / l.block * l.block
			b := randBytes(n+8, uint64(n))[8:] // unaligned to the vector
			want := readSumGo(b)
			for _, pf := range []int{0, 64, bwPrefetch} {
				if got := l.f(unsafe.SliceData(b), n, pf); got != want {
					t.Errorf("%s: %d bytes, prefetch %d: %#x, want %#x", l.name, n, pf, got, want)
				}
			}
		}
	}
	if ran == 0 && bwWidth != 0 {
		t.Errorf("bwWidth = %d but the CPU has neither AVX-512F nor AVX2", bwWidth)
	}
}
