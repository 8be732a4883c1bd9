//go:build !(amd64 || arm64) || noasm

package cpu

// kqAsm is false: dotKQuant runs the portable dot products.
var kqAsm = false

func dotQ4KAsm(b *[144]byte, x *[256]float32) float32 { return dotQ4K(b, x) }

func dotQ6KAsm(b *[210]byte, x *[256]float32) float32 { return dotQ6K(b, x) }

func dotQ8_0Asm(r []byte, x []float32) float32 {
	var sum float32
	for j := range len(x) / 32 {
		sum += dotQ8_0((*[34]byte)(r[j*34:]), (*[32]float32)(x[j*32:]))
	}
	return sum
}

func (w *KQuant) rowAsm(dst []float32, n int) bool { return false }

func dotQ5KAsm(b *[176]byte, x *[256]float32) float32 { return dotQ5K(b, x) }

func dotQ4_0Asm(r []byte, x []float32) float32 {
	var sum float32
	for j := range len(x) / 32 {
		sum += dotQ4_0((*[18]byte)(r[j*18:]), (*[32]float32)(x[j*32:]))
	}
	return sum
}
