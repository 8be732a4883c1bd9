package kernels

import (
	"cmp"
	"fmt"
	"slices"
)

// MaxTopK is the largest k a [TopKer] selects.
const MaxTopK = 64

// A TopKer finds the k largest logits on the device, so sampling with top-k
// copies back k (id, logit) pairs per token instead of V floats. It must be
// equivalent to [TopKHost] on the downloaded tensor. Backends without it
// download the logits and the sampler selects on the host.
type TopKer interface {
	// TopK writes the min(k, x.Len()) largest elements of x (f32) to vals and
	// their indices to ids, best first (ties: lower index first), where k =
	// len(ids) = len(vals) ≤ MaxTopK, and returns how many it wrote. It waits
	// for pending ops.
	TopK(ids []int32, vals []float32, x *Tensor) (int, error)
}

// checkTopK validates TopK's outputs against x and returns k.
func checkTopK(ids []int32, vals []float32, x *Tensor) (int, error) {
	k := len(ids)
	switch {
	case len(vals) != k:
		return 0, fmt.Errorf("kernels: TopK: %d ids but %d values", k, len(vals))
	case k < 1 || k > MaxTopK:
		return 0, fmt.Errorf("kernels: TopK: k = %d outside [1, %d]", k, MaxTopK)
	case x.DType != DTypeF32:
		return 0, fmt.Errorf("kernels: TopK: x is %s%v, want f32", x.DType, x.Shape)
	}
	return k, nil
}

// TopKHost is the reference of [TopKer.TopK] on the host: it writes the
// min(len(ids), len(x)) largest elements of x to vals and their indices to ids,
// best first (higher value, then lower index), and returns how many it wrote.
// NaNs are not ordered.
func TopKHost(ids []int32, vals []float32, x []float32) int {
	idx := make([]int32, len(x))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		if c := cmp.Compare(x[b], x[a]); c != 0 { // higher value first
			return c
		}
		return cmp.Compare(a, b)
	})
	n := min(len(ids), len(vals), len(x))
	for j := range n {
		ids[j], vals[j] = idx[j], x[idx[j]]
	}
	return n
}
