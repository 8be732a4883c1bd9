package cpu

// attnScores writes scores[j] = q·k[j·stride : j·stride+len(q)] for j < len(scores).
// attnAccum adds Σ_j p[j]·v[j·stride : j·stride+len(out)] to out. Both dispatch to
// AVX2/FMA assembly when the head dim is a multiple of 8 (see attn_amd64.go).

func attnScoresGo(scores, q, k []float32, stride int) {
	dh := len(q)
	for j := range scores {
		scores[j] = Dot(q, k[j*stride:j*stride+dh])
	}
}

func attnAccumGo(out, v []float32, stride int, p []float32) {
	for j, pj := range p {
		vr := v[j*stride : j*stride+len(out)]
		for i := range out {
			out[i] += pj * vr[i]
		}
	}
}
