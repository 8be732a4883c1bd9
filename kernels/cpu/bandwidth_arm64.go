//go:build arm64 && !noasm

package cpu

import "unsafe"

// bwWidth is the probe loop's load width in bits: 128 (NEON, which every
// arm64 CPU has), or 0 (Go) where a test turns it off.
var bwWidth = 128

// readBytesNEON returns the sum of the n bytes at p (n a multiple of 128) as
// uint64 words, read with 128-bit loads.
//
//go:noescape
func readBytesNEON(p *byte, n int) uint64

// readSumAsm sums the longest prefix of b the NEON loop takes and returns the
// sum and the prefix's length.
func readSumAsm(b []byte) (uint64, int) {
	if n := len(b) &^ 127; bwWidth == 128 && n > 0 {
		return readBytesNEON(unsafe.SliceData(b), n), n
	}
	return 0, 0
}
