//go:build amd64 && !noasm

package cpu

import (
	"unsafe"

	"github.com/klauspost/cpuid/v2"
)

// bwPrefetch is how far ahead of its loads the probe's loop prefetches, in
// bytes (0: no prefetch).
const bwPrefetch = 8192

// bwWidth is the probe loop's load width in bits: 512, 256, or 0 (Go).
var bwWidth = func() int {
	switch {
	case cpuid.CPU.Supports(cpuid.AVX512F):
		return 512
	case cpuid.CPU.Supports(cpuid.AVX, cpuid.AVX2):
		return 256
	}
	return 0
}()

// readBytes512 returns the sum of the n bytes at p (n a multiple of 256) as
// uint64 words, read with 512-bit loads and, for pf > 0, PREFETCHT1 pf bytes
// ahead.
//
//go:noescape
func readBytes512(p *byte, n, pf int) uint64

// readBytes256 is readBytes512 with 256-bit loads (AVX2), n a multiple of 128.
//
//go:noescape
func readBytes256(p *byte, n, pf int) uint64

// readSumAsm sums the longest prefix of b the loop of bwWidth takes and
// returns the sum and the prefix's length.
func readSumAsm(b []byte) (uint64, int) {
	switch bwWidth {
	case 512:
		if n := len(b) &^ 255; n > 0 {
			return readBytes512(unsafe.SliceData(b), n, bwPrefetch), n
		}
	case 256:
		if n := len(b) &^ 127; n > 0 {
			return readBytes256(unsafe.SliceData(b), n, bwPrefetch), n
		}
	}
	return 0, 0
}
