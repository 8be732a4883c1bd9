package cpu

// kernelSet is the set of inner kernels MatMul drives. One set is chosen at
// start-up (see dot_amd64.go); kernGo is the portable one every set is checked
// against.
type kernelSet struct {
	name  string
	avail bool // this CPU runs the set

	// qMatVec writes dst[i] = row n0+i of q · token l of a, for a 4- or 8-bit q.
	qMatVec func(dst []float32, q *QMatrix, K, n0 int, a *actQ, l int)
	// qTile, if set, writes the qTileN × qTileL tile dst[j·dstride+i] = row n0+i ·
	// token l0+j.
	qTile          func(dst []float32, dstride int, q *QMatrix, K, n0 int, a *actQ, l0 int)
	qTileN, qTileL int

	// fMatVec writes dst[i] = row n0+i of w · x for f32, f16 and bf16 weights.
	fMatVec func(dst []float32, w *Weight, n0 int, x []float32)
	// fTile, if set, writes the fTileN × fTileL tile dst[j·dstride+i] = row n0+i ·
	// x[j·K:(j+1)·K]. It needs K to be a multiple of 8.
	fTile          func(dst []float32, dstride int, w *Weight, n0 int, x []float32)
	fTileN, fTileL int
}

// kern is the kernel set MatMul uses.
var kern = kernGo

// kernGo is the pure-Go kernel set.
var kernGo = kernelSet{
	name:    "go",
	avail:   true,
	qMatVec: qMatVecGo,
	fMatVec: fMatVecGo,
}

// qMatVecGo is the portable 4/8-bit mat-vec: integer dot products per group,
// then Σ_g scale_g·dx_g·Σq·xq + bias_g·sx_g + scale_g·cr_g (see actQ).
func qMatVecGo(dst []float32, q *QMatrix, K, n0 int, a *actQ, l int) {
	G, gs := a.G, q.GroupSize
	words := K * q.Bits / 32
	xq := a.xq[l*K : (l+1)*K]
	dq, sx, cr := a.dq[l*G:(l+1)*G], a.sx[l*a.Gp:l*a.Gp+G], a.cr[l*a.Gp:l*a.Gp+G]
	for i := range dst {
		n := n0 + i
		w := q.W[n*words : (n+1)*words]
		s, b := q.Scales[n*G:(n+1)*G], q.Biases[n*G:(n+1)*G]
		var sum, bias float32
		for g := range G {
			var acc int32
			if q.Bits == 4 {
				acc = dotQ4Go(w[g*gs/8:(g+1)*gs/8], xq[g*gs:(g+1)*gs], q4Chunk(gs))
			} else {
				acc = dotQ8Go(w[g*gs/4:(g+1)*gs/4], xq[g*gs:(g+1)*gs])
			}
			sum += s[g] * (dq[g].dx * float32(acc))
			bias += b[g]*sx[g] + s[g]*cr[g]
		}
		dst[i] = sum + bias
	}
}

// dotQ4Go returns Σ code·xq over chunks of c 4-bit codes (c/8 words each)
// against the permuted int8 layout of actQ.
func dotQ4Go(w []uint32, xq []int8, c int) int32 {
	var acc int32
	h, cw := c/2, c/8
	for b := 0; b+cw <= len(w); b += cw {
		x := xq[b*8 : b*8+c]
		for j, v := range w[b : b+cw] {
			e, o := x[4*j:4*j+4], x[h+4*j:h+4*j+4]
			acc += int32(v&15)*int32(e[0]) + int32(v>>4&15)*int32(o[0]) +
				int32(v>>8&15)*int32(e[1]) + int32(v>>12&15)*int32(o[1]) +
				int32(v>>16&15)*int32(e[2]) + int32(v>>20&15)*int32(o[2]) +
				int32(v>>24&15)*int32(e[3]) + int32(v>>28)*int32(o[3])
		}
	}
	return acc
}

// dotQ8Go returns Σ code·xq for 8-bit codes (4 per word).
func dotQ8Go(w []uint32, xq []int8) int32 {
	var acc int32
	xq = xq[:len(w)*4]
	for j, v := range w {
		x := xq[4*j : 4*j+4]
		acc += int32(v&255)*int32(x[0]) + int32(v>>8&255)*int32(x[1]) +
			int32(v>>16&255)*int32(x[2]) + int32(v>>24)*int32(x[3])
	}
	return acc
}

// fMatVecGo is the portable f32/f16/bf16 mat-vec.
func fMatVecGo(dst []float32, w *Weight, n0 int, x []float32) {
	K := w.K
	x = x[:K]
	for i := range dst {
		n := n0 + i
		switch w.Format {
		case FormatF32:
			dst[i] = Dot(w.F32[n*K:(n+1)*K], x)
		case FormatF16:
			dst[i] = dotF16Go(w.U16[n*K:(n+1)*K], x)
		case FormatBF16:
			dst[i] = dotBF16Go(w.U16[n*K:(n+1)*K], x)
		}
	}
}

func dotF16Go(w []uint16, x []float32) float32 {
	x = x[:len(w)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(w); i += 4 {
		s0 += F16ToF32(w[i]) * x[i]
		s1 += F16ToF32(w[i+1]) * x[i+1]
		s2 += F16ToF32(w[i+2]) * x[i+2]
		s3 += F16ToF32(w[i+3]) * x[i+3]
	}
	for ; i < len(w); i++ {
		s0 += F16ToF32(w[i]) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotBF16Go(w []uint16, x []float32) float32 {
	x = x[:len(w)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(w); i += 4 {
		s0 += BF16ToF32(w[i]) * x[i]
		s1 += BF16ToF32(w[i+1]) * x[i+1]
		s2 += BF16ToF32(w[i+2]) * x[i+2]
		s3 += BF16ToF32(w[i+3]) * x[i+3]
	}
	for ; i < len(w); i++ {
		s0 += BF16ToF32(w[i]) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func (k *kernelSet) usable() bool { return k.avail }

// disableAsm switches MatMul to the pure-Go kernels until restore is called, so
// one machine tests both paths (klauspost's DisableBMI2). Not safe to call while
// a MatMul runs.
func disableAsm() (restore func()) {
	old := kern
	kern = kernGo
	return func() { kern = old }
}
