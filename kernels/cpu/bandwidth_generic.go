//go:build (!amd64 && !arm64) || noasm

package cpu

// bwWidth is the probe loop's load width in bits: 0, Go's.
var bwWidth = 0

// readSumAsm reads nothing: readSum's Go loop reads all of b.
func readSumAsm(b []byte) (uint64, int) { return 0, 0 }
