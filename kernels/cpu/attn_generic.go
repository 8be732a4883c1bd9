//go:build !amd64 || noasm

package cpu

func attnScores(scores, q, k []float32, stride int) { attnScoresGo(scores, q, k, stride) }

func attnAccum(out, v []float32, stride int, p []float32) { attnAccumGo(out, v, stride, p) }
