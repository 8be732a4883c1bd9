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
// NaNs (0 if there is none). It finds the largest value in four lanes, then
// its first index: four independent chains of compares run about twice as
// fast as one compare-and-keep loop (argmaxRef in the tests), where each
// element waits on the last (docs/perf/cpu.md, "Small host loops").
func ArgmaxHost(x []float32) int32 {
	m0, m1, m2, m3 := float32(math.Inf(-1)), float32(math.Inf(-1)), float32(math.Inf(-1)), float32(math.Inf(-1))
	n := len(x) &^ 3
	for i := 0; i < n; i += 4 { // a NaN is never greater
		v := x[i : i+4 : i+4]
		m0, m1, m2, m3 = maxNum(m0, v[0]), maxNum(m1, v[1]), maxNum(m2, v[2]), maxNum(m3, v[3])
	}
	for _, v := range x[n:] {
		m0 = maxNum(m0, v)
	}
	best := max(m0, m1, m2, m3) // no NaN among them
	for i, v := range x {
		if v == best {
			return int32(i)
		}
	}
	return 0 // all NaN, or empty
}

// maxNum returns v if it is greater than m, else m (also when v is NaN).
func maxNum(m, v float32) float32 {
	if v > m {
		return v
	}
	return m
}

// A Pipeliner lets greedy decoding run ahead of the host: a step's embedding
// reads the token the previous step's argmax left on the device, so step n+1
// is committed before the host waits for token n and the device's queue never
// drains. Each step is still one command buffer and one CPU wait.
//
// ArgmaxAsync followed by NextToken must be equivalent to [Argmaxer.Argmax],
// and EmbedArgmax to [Backend.Embed] of the latest ArgmaxAsync's token.
type Pipeliner interface {
	// ArgmaxAsync enqueues the argmax of x (f32; the smallest index of the
	// maximum) into a queue of tokens kept on the device and commits every
	// enqueued op without waiting. At most two tokens may be queued.
	ArgmaxAsync(x *Tensor)
	// EmbedArgmax enqueues dst (1, D) = table[t]·scale for the token t of the
	// latest ArgmaxAsync, which must still be queued, read on the device.
	EmbedArgmax(dst, table *Tensor, scale float32)
	// NextToken waits for the oldest queued token, removes it from the queue
	// and returns it.
	NextToken() (int32, error)
}
