//go:build amd64 && !noasm

package cpu

import "testing"

// TestPrepareKQuantVNNI: on a CPU with AVX-512 VNNI, q4_0, q8_0, q4_k and (with GFNI) q6_k weights
// take the byte-dot fast path: PrepareKQuant makes them affine weights, and a
// decode MatMul plans byte-plane activations for them.
func TestPrepareKQuantVNNI(t *testing.T) {
	if !hasVNNI {
		if kern.blocked {
			t.Errorf("the %s kernels read the blocked layout without AVX-512 VNNI", kern.name)
		}
		return
	}
	p := NewPool(1)
	defer p.Close()
	for _, kt := range []KType{KQ4_0, KQ8_0, KQ4K, KQ6K} {
		w := PrepareKQuant(randKQuant(kt, 8, 2048, 1))
		if kt == KQ6K && !hasGFNI {
			if w != nil {
				t.Errorf("q6_k: an affine weight without GFNI (its kernel's unpacking)")
			}
			continue
		}
		if w == nil {
			t.Fatalf("%s: no affine weight on the %s kernels", kt, kern.name)
		}
		var mt mmTask
		if f := p.plan(&mt, make([]float32, 8), make([]float32, 2048), 1, w); f != actBytes {
			t.Errorf("%s: MatMul plans activation form %d, want byte planes (%d)", kt, f, actBytes)
		}
	}
}
