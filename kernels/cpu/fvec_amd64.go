//go:build amd64 && !noasm

package cpu

//go:noescape
func fMatVecF16P(dst *float32, n int, w *uint16, K int, x *float32, pf int)

//go:noescape
func fMatVecBF16P(dst *float32, n int, w *uint16, K int, x *float32, pf int)

// fVecPF is how far ahead, in bytes, fMatVecPF prefetches f16 and bf16 rows.
var fVecPF = 8192

// fMatVecPF is fMatVecAVX2 with f16 and bf16 rows read through the
// prefetching kernels: the same arithmetic, so the same bits.
func fMatVecPF(dst []float32, w *Weight, n0 int, x []float32) {
	n, K := len(dst), w.K
	if n == 0 || K%8 != 0 || K == 0 || w.Format == FormatF32 {
		fMatVecAVX2(dst, w, n0, x)
		return
	}
	x = x[:K]
	r := w.U16[n0*K : (n0+n)*K]
	if w.Format == FormatF16 {
		fMatVecF16P(&dst[0], n, &r[0], K, &x[0], fVecPF)
	} else {
		fMatVecBF16P(&dst[0], n, &r[0], K, &x[0], fVecPF)
	}
}
