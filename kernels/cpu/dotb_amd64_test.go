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

// TestMatVecBPaced runs the byte-dot tests with the paced 4-bit kernels (with
// and without GFNI), which MatMul takes for rows too long for L1.
func TestMatVecBPaced(t *testing.T) {
	if !hasVNNI {
		t.Skip("no AVX-512 VNNI")
	}
	old, oldG := paceL1, hasGFNI
	defer func() { paceL1, hasGFNI = old, oldG }()
	paceL1 = 0
	checkMatVecB(t)
	hasGFNI = false
	checkMatVecB(t)
}
