package kernels

import (
	"fmt"
	"math"
)

// An Argmaxer finds the largest logit on the device, so greedy decoding copies
// 4 bytes per token back instead of V floats. Argmax waits for pending ops.
// It must be equivalent to [ArgmaxHost] on the downloaded tensor.
type Argmaxer interface {
	Argmax(x *Tensor) (int32, error) // x f32; the smallest index of the maximum
}

// Argmax returns the index of the largest element of x on b's device when b is
// an [Argmaxer], else by downloading x into buf (len ≥ x.Len()).
func Argmax(b Backend, x *Tensor, buf []float32) (int32, error) {
	if a, ok := b.(Argmaxer); ok {
		return a.Argmax(x)
	}
	if len(buf) < x.Len() {
		panic(fmt.Sprintf("kernels: Argmax: buffer of %d floats for %v", len(buf), x.Shape))
	}
	if err := b.Download(buf[:x.Len()], x); err != nil {
		return 0, err
	}
	return ArgmaxHost(buf[:x.Len()]), nil
}

// ArgmaxHost returns the smallest index of the largest element of x, skipping
// NaNs (0 if there is none).
func ArgmaxHost(x []float32) int32 {
	best, bi := float32(math.Inf(-1)), -1
	for i, v := range x {
		if v > best || (bi < 0 && v == best) {
			best, bi = v, i
		}
	}
	return int32(max(bi, 0))
}
