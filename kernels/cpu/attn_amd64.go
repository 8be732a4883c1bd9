//go:build amd64 && !noasm

package cpu

import "github.com/klauspost/cpuid/v2"

// useAttnAVX2 is chosen once; tests flip it to cross-check the Go loops.
var useAttnAVX2 = cpuid.CPU.Supports(cpuid.AVX2, cpuid.FMA3)

//go:noescape
func attnScoresAVX2(scores, q, k *float32, stride, n, dh int)

//go:noescape
func attnAccumAVX2(out, v *float32, stride int, p *float32, n, dh int)

func attnScores(scores, q, k []float32, stride int) {
	dh, n := len(q), len(scores)
	if !useAttnAVX2 || dh%8 != 0 || n == 0 {
		attnScoresGo(scores, q, k, stride)
		return
	}
	_ = k[(n-1)*stride+dh-1] // bounds check once
	attnScoresAVX2(&scores[0], &q[0], &k[0], stride*4, n, dh)
}

func attnAccum(out, v []float32, stride int, p []float32) {
	dh, n := len(out), len(p)
	if !useAttnAVX2 || dh%8 != 0 || n == 0 {
		attnAccumGo(out, v, stride, p)
		return
	}
	_ = v[(n-1)*stride+dh-1]
	attnAccumAVX2(&out[0], &v[0], stride*4, &p[0], n, dh)
}
