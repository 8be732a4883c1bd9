package main

import (
	"math"
	"testing"
)

// TestTopMargin: the selftest's near-tie rule reads the top-2 logit margin
// and whether the backend's token was the CPU's second choice.
func TestTopMargin(t *testing.T) {
	for _, tc := range []struct {
		logits []float32
		id     int32
		margin float64
		second bool
	}{
		{[]float32{1, 10, 9.99999}, 2, 1e-6, true},
		{[]float32{1, 10, 9.99999}, 0, 1e-6, false},
		{[]float32{-2, -1, -1.5}, 2, 0.5, true},
		{[]float32{5, 4, 3}, 1, 0.2, true},
		{[]float32{7}, 0, math.Inf(1), false},
	} {
		m, s := topMargin(tc.logits, tc.id)
		if math.Abs(m-tc.margin) > 1e-6*max(1, tc.margin) && !(math.IsInf(m, 1) && math.IsInf(tc.margin, 1)) || s != tc.second {
			t.Errorf("topMargin(%v, %d) = %g, %v; want %g, %v", tc.logits, tc.id, m, s, tc.margin, tc.second)
		}
	}
	if m, _ := topMargin([]float32{1, 10, 9.99999}, 2); !(m < nearTie) {
		t.Errorf("margin %g of a near-tie is not below nearTie %g", m, nearTie)
	}
}
