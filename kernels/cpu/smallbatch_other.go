//go:build !amd64 || noasm

package cpu

// fVecs4 has no kernel here: MatVecs runs fMatVec per row.
func fVecs4(k *kernelSet, dst []float32, N int, w *Weight, n0, n1 int, x []float32) bool {
	return false
}
