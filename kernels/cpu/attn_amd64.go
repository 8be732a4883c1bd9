//go:build amd64 && !noasm

package cpu

import "github.com/klauspost/cpuid/v2"

// The attention kernels in attn_amd64.s are chosen once; tests flip these to
// cross-check the Go loops.
var (
	useAttnAVX2   = cpuid.CPU.Supports(cpuid.AVX2, cpuid.FMA3)
	useAttnAVX512 = cpuid.CPU.Supports(cpuid.AVX512F, cpuid.AVX512VL, cpuid.BMI2)
)

//go:noescape
func attnScores4AVX512(scores, q, k *float32, stride, n, dh int)

//go:noescape
func attnScoresAVX2(scores, q, k *float32, stride, n, dh int)

//go:noescape
func attnAccumAVX2(out, v *float32, stride int, p *float32, n, dh int)

//go:noescape
func attnTileAVX512(c *float32, ldc int, a *float32, ars, aks int, b *float32, ldb, k, n int, alpha *float32)

//go:noescape
func attnSoftmaxAVX512(s *float32, ld, rows, cols int, m, l, alpha *float32)

//go:noescape
func attnExpAVX512(s *float32, n int, mx float32) float32

//go:noescape
func attnTileAVX2(c *float32, ldc int, a *float32, ars, aks int, b *float32, ldb, k, n int, alpha *float32)

//go:noescape
func attnSoftmaxAVX2(s *float32, ld, rows, cols int, m, l, alpha *float32)

//go:noescape
func attnExpAVX2(s *float32, n int, mx float32) float32

func attnScores(scores, q, k []float32, stride int) {
	dh, n := len(q), len(scores)
	if !useAttnAVX2 || dh%8 != 0 || n == 0 {
		attnScoresGo(scores, q, k, stride)
		return
	}
	_ = k[(n-1)*stride+dh-1] // bounds check once
	if n4 := n &^ 3; useAttnAVX512 && dh%16 == 0 && n4 > 0 {
		attnScores4AVX512(&scores[0], &q[0], &k[0], stride*4, n4, dh)
		if n4 == n {
			return
		}
		scores, k, n = scores[n4:], k[n4*stride:], n-n4
	}
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

func attnTile(c []float32, ldc int, a []float32, ars, aks int, b []float32, ldb, k, n int, alpha []float32) {
	avx2 := useAttnAVX2 && n%8 == 0
	if !useAttnAVX512 && !avx2 || k < 1 || n < 1 || n > 64 {
		attnTileGo(c, ldc, a, ars, aks, b, ldb, k, n, alpha)
		return
	}
	_ = c[3*ldc+n-1] // bounds check once
	_ = a[3*ars+(k-1)*aks]
	_ = b[(k-1)*ldb+n-1]
	var al *float32
	if alpha != nil {
		_ = alpha[3]
		al = &alpha[0]
	}
	if useAttnAVX512 {
		attnTileAVX512(&c[0], ldc*4, &a[0], ars*4, aks*4, &b[0], ldb*4, k, n, al)
	} else {
		attnTileAVX2(&c[0], ldc*4, &a[0], ars*4, aks*4, &b[0], ldb*4, k, n, al)
	}
}

func attnSoftmax(s []float32, ld, rows, cols int, m, l, alpha []float32) {
	avx2 := useAttnAVX2 && cols%8 == 0
	if !useAttnAVX512 && !avx2 || rows < 1 || cols < 1 {
		attnSoftmaxGo(s, ld, rows, cols, m, l, alpha)
		return
	}
	_ = s[(rows-1)*ld+cols-1]
	_, _, _ = m[cols-1], l[cols-1], alpha[cols-1]
	if useAttnAVX512 {
		attnSoftmaxAVX512(&s[0], ld*4, rows, cols, &m[0], &l[0], &alpha[0])
	} else {
		attnSoftmaxAVX2(&s[0], ld*4, rows, cols, &m[0], &l[0], &alpha[0])
	}
}

func attnExp(s []float32, mx float32) float32 {
	switch n := len(s) &^ 7; {
	case useAttnAVX512 && len(s) > 0:
		return attnExpAVX512(&s[0], len(s), mx)
	case useAttnAVX2 && n > 0:
		return attnExpAVX2(&s[0], n, mx) + attnExpGo(s[n:], mx)
	}
	return attnExpGo(s, mx)
}

//go:noescape
func attnScores4x4AVX512(s0, s1, s2, s3, q0, q1, q2, q3, k *float32, stride, n, dh int, mx *float32)

// attnScores4 is attnScores for four query heads of one KV head: s[i][j] =
// q[i]·k[j·stride : j·stride+dh] for j < n, and mx[i] the max of s[i][:n];
// heads may repeat. It takes n a multiple of 4 and dh of 16 (AVX-512) and
// reports false, having written nothing, elsewhere.
func attnScores4(s, q *[4][]float32, k []float32, stride, n int, mx *[4]float32) bool {
	dh := len(q[0])
	if !useAttnAVX512 || dh%16 != 0 || n%4 != 0 || n == 0 {
		return false
	}
	for i := range 4 {
		_, _ = s[i][n-1], q[i][dh-1] // bounds checks once
	}
	_ = k[(n-1)*stride+dh-1]
	attnScores4x4AVX512(&s[0][0], &s[1][0], &s[2][0], &s[3][0], &q[0][0], &q[1][0], &q[2][0], &q[3][0],
		&k[0], stride*4, n, dh, &mx[0])
	return true
}
