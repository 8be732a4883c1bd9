//go:build (amd64 || arm64) && !noasm

package cpu

// dotBlocks returns the 32-weight blocks r (size bytes each) · x (len(x) a
// multiple of 32) with an assembly kernel over nb blocks (q8_0, q4_0).
func dotBlocks(kernel func(b *byte, x *float32, nb int) float32, size int, r []byte, x []float32) float32 {
	nb := len(x) / 32
	if nb == 0 {
		return 0
	}
	_ = r[nb*size-1]
	return kernel(&r[0], &x[0], nb)
}
