//go:build !amd64 || noasm

package cpu

func attnScores(scores, q, k []float32, stride int) { attnScoresGo(scores, q, k, stride) }

func attnAccum(out, v []float32, stride int, p []float32) { attnAccumGo(out, v, stride, p) }

func attnTile(c []float32, ldc int, a []float32, ars, aks int, b []float32, ldb, k, n int, alpha []float32) {
	attnTileGo(c, ldc, a, ars, aks, b, ldb, k, n, alpha)
}

func attnSoftmax(s []float32, ld, rows, cols int, m, l, alpha []float32) {
	attnSoftmaxGo(s, ld, rows, cols, m, l, alpha)
}

func attnExp(s []float32, mx float32) float32 { return attnExpGo(s, mx) }

func attnScores4(s, q *[4][]float32, k []float32, stride, n int, mx *[4]float32) bool { return false }
