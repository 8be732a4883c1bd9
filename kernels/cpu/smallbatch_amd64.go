//go:build amd64 && !noasm

package cpu

// The four-token float mat-vecs in smallbatch_amd64.s.

//go:noescape
func fVecs4F32(dst *float32, dstride int, n int, w *float32, K int, x *float32, xstride int)

//go:noescape
func fVecs4F16(dst *float32, dstride int, n int, w *uint16, K int, x *float32, xstride int)

//go:noescape
func fVecs4BF16(dst *float32, dstride int, n int, w *uint16, K int, x *float32, xstride int)

// fVecs4 computes rows [n0, n1) of w against four rows of x (K apart) into
// dst (rows N apart) as fMatVec computes each, and reports whether it could:
// the kernel set's fMatVec has fMatVecAVX2's arithmetic (its assembly or
// fMatVecPF's, K a multiple of 8) and the CPU has AVX-512VL for the kernels'
// registers.
func fVecs4(k *kernelSet, dst []float32, N int, w *Weight, n0, n1 int, x []float32) bool {
	K, n := w.K, n1-n0
	if !hasAVX512 || k.name == kernGo.name || K%8 != 0 || K == 0 || n <= 0 {
		return false
	}
	_ = dst[3*N+n1-1]
	x = x[:4*K]
	switch w.Format {
	case FormatF32:
		r := w.F32[n0*K : n1*K]
		fVecs4F32(&dst[n0], N, n, &r[0], K, &x[0], K)
	case FormatF16:
		r := w.U16[n0*K : n1*K]
		fVecs4F16(&dst[n0], N, n, &r[0], K, &x[0], K)
	case FormatBF16:
		r := w.U16[n0*K : n1*K]
		fVecs4BF16(&dst[n0], N, n, &r[0], K, &x[0], K)
	default:
		return false
	}
	return true
}
