package server

import (
	"math"
	"slices"
)

// scoreStep returns id's logprob under logits (V) and the k most likely
// tokens (ties: lower id first), as model.Logprob computes a logprob: the
// maximum subtracted in float32, the sum of exponentials in float64.
func scoreStep(logits []float32, id int32, k int) step {
	mx := logits[0]
	for _, v := range logits {
		mx = max(mx, v)
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v - mx))
	}
	lse := math.Log(sum)
	lp := func(i int32) float64 { return float64(logits[i]-mx) - lse }
	st := step{id: id, logprob: lp(id)}
	if k <= 0 {
		return st
	}
	k = min(k, len(logits))
	top := make([]int32, 0, k+1)
	for i := range logits {
		j := int32(i)
		if len(top) == k && !better(logits, j, top[k-1]) {
			continue
		}
		at, _ := slices.BinarySearchFunc(top, j, func(a, b int32) int {
			if better(logits, a, b) {
				return -1
			}
			return 1
		})
		top = slices.Insert(top, at, j)
		if len(top) > k {
			top = top[:k]
		}
	}
	st.top = make([]alt, len(top))
	for i, j := range top {
		st.top[i] = alt{id: j, logprob: lp(j)}
	}
	return st
}

// better orders token ids by logit, higher first, then lower id.
func better(logits []float32, a, b int32) bool {
	return logits[a] > logits[b] || (logits[a] == logits[b] && a < b)
}
