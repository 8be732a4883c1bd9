//go:build amd64 && !noasm

package cpu

import "testing"

// TestMatVecBNoGFNI runs the byte-dot tests with the 4-bit kernel that unpacks
// high nibbles by shift and mask (CPUs with AVX-512 VNNI but no GFNI).
func TestMatVecBNoGFNI(t *testing.T) {
	if !hasVNNI {
		t.Skip("no AVX-512 VNNI")
	}
	old := hasGFNI
	hasGFNI = false
	defer func() { hasGFNI = old }()
	checkMatVecB(t)
}
