package cpu

import (
	"math"
	"unsafe"
)

// Attn is causal grouped-query attention over a KV cache (kernels.AttnParams on
// host slices). q and dst are (L, Heads·HeadDim) rows for positions [Pos, Pos+L);
// k and v hold at least Pos+L rows of KVHeads·HeadDim. Query head h reads KV head
// h/(Heads/KVHeads); query row i attends key j iff j ≤ Pos+i and, when
// Window > 0, j > Pos+i−Window. Scores are Scale·q·k, then
// Softcap·tanh(s/Softcap) when Softcap > 0. With Sinks (one per query head,
// gpt-oss) the softmax's denominator also holds e^sink, for a key that no
// value follows: out = Σ e^(s_j−M)·v_j / (Σ e^(s_j−M) + e^(sink−M)),
// M = max(max_j s_j, sink).
type Attn struct {
	Heads, KVHeads, HeadDim int
	Pos, Window             int
	Scale, Softcap          float32
	Sinks                   []float32
}

// normSink returns the factor that turns a head's unnormalized output o, of
// running max m and sum l, into the normalized output: 1/l, or with a sink
// e^(m−M)/(l·e^(m−M) + e^(sink−M)), M = max(m, sink).
func (a *Attn) normSink(h int, m, l float32) float32 {
	if a.Sinks == nil {
		return 1 / l
	}
	sk := a.Sinks[h]
	if sk <= m {
		return 1 / (l + float32(math.Exp(float64(sk-m))))
	}
	r := float32(math.Exp(float64(m - sk)))
	return r / (l*r + 1)
}

// The blocked (prefill) attention works on attnCols query vectors at a time
// against attnKeys keys at a time.
const (
	attnCols = 64
	attnKeys = 64
)

// QueryRows returns the query rows [Attn.Block] takes at a time: with the
// query heads of one KV head, about 64 query vectors.
func (a *Attn) QueryRows() int { return max(1, attnCols/(a.Heads/a.KVHeads)) }

// AttnScratch is one thread's working memory for [Attn.Block] and [Attn.Decode];
// the zero value is ready and grows on demand.
type AttnScratch struct {
	buf   []float32
	wide  []float32 // f16 K and V rows widened
	sink  float32   // keeps readLines' reads
	hsink uint16    // and those of f16 rows
}

// KV is a KV cache's K or V rows as the attention takes them: floats, or f16
// halves (F16 set), which it widens exactly into its scratch a block at a
// time, so the kernels run on floats while the cache is read at half the
// bytes.
type KV struct {
	F32 []float32
	F16 []uint16
}

// rows returns columns [off, off+w) of rows [j0, j0+n) of kv (row stride ks)
// as floats, and their row stride: kv's own rows (f32), or the rows widened
// into buf (f16; stride w, or ks when w = ks).
func (kv KV) rows(buf []float32, j0, n, ks, off, w int) ([]float32, int) {
	if kv.F16 == nil {
		return kv.F32[j0*ks+off:], ks
	}
	src := kv.F16[j0*ks+off:]
	if w == ks {
		F16sToF32(buf[:n*ks], src[:n*ks])
		return buf, ks
	}
	if !f16RowsAsm(buf, src, n, w, ks) {
		for r := range n {
			F16sToF32(buf[r*w:(r+1)*w], src[r*ks:r*ks+w])
		}
	}
	return buf, w
}

// widened returns s's room for K and V blocks of n floats each, widened from
// an f16 cache (k's type; none for f32).
func (s *AttnScratch) widened(k KV, n int) ([]float32, []float32) {
	if k.F16 == nil {
		return nil, nil
	}
	if cap(s.wide) < 2*n {
		s.wide = make([]float32, 2*n)
	}
	return s.wide[:n], s.wide[n : 2*n]
}

func (s *AttnScratch) floats(n int) []float32 {
	if cap(s.buf) < n {
		s.buf = make([]float32, n+n/4)
	}
	return s.buf[:n]
}

// Block computes dst for query rows [l0, l1) and the query heads of KV head g
// (heads g·G … g·G+G−1, G = Heads/KVHeads), flash-attention style: the
// M = (l1−l0)·G query vectors, scaled and transposed, meet attnKeys keys at a
// time; each key block's scores Sᵀ (keys × M) = K·Qᵀ go through one online
// softmax step (running max and sum per query, earlier output rescaled), and
// O (M × Dh) += P·V. Every K and V row is read once per block of queries,
// which is what makes prefill fast: the heads of a group and the rows of a
// block share it.
func (a *Attn) Block(dst, q []float32, k, v KV, g, l0, l1 int, s *AttnScratch) {
	dh, G := a.HeadDim, a.Heads/a.KVHeads
	qs, ks := a.Heads*dh, a.KVHeads*dh // row strides of q/dst and k/v
	M := (l1 - l0) * G
	mp := (M + 7) &^ 7 // tiles are 4 rows of Sᵀ or O, and AVX2 8 columns of Sᵀ
	buf := s.floats(dh*mp + attnKeys*mp + mp*dh + 4*dh + 3*mp)
	qt, buf := buf[:dh*mp], buf[dh*mp:]                   // Qᵀ (Dh × mp), scaled
	st, buf := buf[:attnKeys*mp], buf[attnKeys*mp:]       // Sᵀ, then Pᵀ (keys × mp)
	o, buf := buf[:mp*dh], buf[mp*dh:]                    // O (mp × Dh)
	kpad, buf := buf[:4*dh], buf[4*dh:]                   // a last partial group of keys
	m, l, alpha := buf[:mp], buf[mp:2*mp], buf[2*mp:3*mp] // per query vector

	for c := range M {
		row := q[(l0+c/G)*qs+(g*G+c%G)*dh:][:dh]
		col := qt[c:]
		for d, x := range row {
			col[d*mp] = x * a.Scale
		}
	}
	for c := M; c < mp; c++ {
		for d := range dh {
			qt[d*mp+c] = 0
		}
	}
	for c := range mp {
		m[c], l[c] = -math.MaxFloat32, 0
	}

	hi := a.Pos + l1 // keys [lo, hi) are seen by some row
	lo := 0
	if a.Window > 0 {
		lo = max(0, a.Pos+l0+1-a.Window)
	}
	kw, vw := s.widened(k, attnKeys*dh)
	for j0 := lo; j0 < hi; j0 += attnKeys {
		nk := min(attnKeys, hi-j0)
		kb, kst := k.rows(kw, j0, nk, ks, g*dh, dh)
		for jj := 0; jj < nk; jj += 4 {
			kr, ars := kb[jj*kst:], kst
			if nk-jj < 4 {
				clear(kpad)
				for i := range nk - jj {
					copy(kpad[i*dh:(i+1)*dh], kr[i*kst:])
				}
				kr, ars = kpad, dh
			}
			for c0 := 0; c0 < mp; c0 += attnCols {
				attnTile(st[jj*mp+c0:], mp, kr, ars, 1, qt[c0:], mp, dh, min(attnCols, mp-c0), nil)
			}
		}
		if a.Softcap > 0 {
			sc := float64(a.Softcap)
			for jj := range nk {
				for c, x := range st[jj*mp : jj*mp+M] {
					st[jj*mp+c] = float32(sc * math.Tanh(float64(x)/sc))
				}
			}
		}
		a.mask(st, mp, j0, nk, l0, l1, G)
		attnSoftmax(st, mp, nk, mp, m, l, alpha)
		vb, vst := v.rows(vw, j0, nk, ks, g*dh, dh)
		for i0 := 0; i0 < mp; i0 += 4 {
			var al []float32
			if j0 != lo {
				al = alpha[i0:]
			}
			for d0 := 0; d0 < dh; d0 += attnCols {
				attnTile(o[i0*dh+d0:], dh, st[i0:], 1, mp, vb[d0:], vst, nk, min(attnCols, dh-d0), al)
			}
		}
	}
	for c := range M {
		inv := a.normSink(g*G+c%G, m[c], l[c])
		oc := o[c*dh : (c+1)*dh]
		out := dst[(l0+c/G)*qs+(g*G+c%G)*dh:][:len(oc)]
		for d, x := range oc {
			out[d] = x * inv
		}
	}
}

// attnDecodeKeys is the keys [Attn.Decode] takes at a time: every head reads
// them while they are in cache (the 1B shape's 128 K and V rows are 512 KB, in
// a 1 MB L2), and each block's fixed work (a Go loop over the KV heads and
// their query heads, a kernel call per pass) is shared by four times the
// keys of 32-key blocks. On Zen 4 128 keys ran faster than 32 or 256 at every
// depth (docs/perf/cpu.md, "Decode attention").
const attnDecodeKeys = 128

// AttnParts holds the parts of a split decode step (see [Attn.Decode]): per
// part, each head's running max and sum of exponentials and its unnormalized
// output. The zero value is ready for Reset.
type AttnParts struct {
	o, m, l []float32 // parts·Heads·HeadDim, parts·Heads, parts·Heads
}

// Reset makes room for n parts of a's heads; it allocates only to grow.
func (p *AttnParts) Reset(a *Attn, n int) {
	p.o = grow(p.o, n*a.Heads*a.HeadDim)
	p.m, p.l = grow(p.m, n*a.Heads), grow(p.l, n*a.Heads)
}

// Decode computes one part of a decode step (one query row, at position Pos),
// flash-decoding style: keys [lo, hi) for the query heads of KV heads [g0,
// g1), attnDecodeKeys keys at a time, with an online softmax. Over many keys
// the parts of a step split the keys between threads, so each thread reads a
// stretch of the cache rather than every row's slice for some heads; over a
// few they split the KV heads, so no part needs merging with another (each
// thread reads its heads' contiguous stretch of every row). The query heads
// of a KV head share each read of a K row's slice and of a V row's, four at a
// time (attnScores4, attnTile), so each slice is loaded once per KV head
// rather than once per query head (docs/perf/cpu.md, "Decode attention"). The
// result is those heads' entries of part i of ps (see [AttnParts]);
// [Attn.Merge] combines the parts. q (Heads·HeadDim); s's scores grow to
// attnDecodeKeys.
func (a *Attn) Decode(ps *AttnParts, i int, q []float32, k, v KV, lo, hi, g0, g1 int, s *AttnScratch) {
	if g0 >= g1 {
		return
	}
	dh, G, H := a.HeadDim, a.Heads/a.KVHeads, a.Heads
	h0, h1 := g0*G, g1*G // the query heads
	o, m, l := ps.o[(i*H+h0)*dh:(i*H+h1)*dh], ps.m[i*H+h0:i*H+h1], ps.l[i*H+h0:i*H+h1]
	ks := a.KVHeads * dh       // row stride of k and v
	c0, w := g0*dh, (g1-g0)*dh // the columns of the KV heads
	buf := s.floats(G*attnDecodeKeys + 2*G + (h1-h0)*dh)
	p, buf := buf[:G*attnDecodeKeys], buf[G*attnDecodeKeys:] // a group's probabilities (G × keys)
	alpha, gmx, qs := buf[:G], buf[G:2*G], buf[2*G:]         // their rescales and block maxes; q·Scale: scores come out scaled
	for i, x := range q[h0*dh : h1*dh] {
		qs[i] = x * a.Scale
	}
	ninf := float32(math.Inf(-1))
	for h := range m {
		m[h], l[h] = ninf, 0
	}
	clear(o)
	kw, vw := s.widened(k, attnDecodeKeys*w)
	for j0 := lo; j0 < hi; j0 += attnDecodeKeys {
		nk := min(attnDecodeKeys, hi-j0)
		// Read the block's K and V rows once in order first. The passes
		// below read a KV head's slice of each row, 2 KB apart (a row holds
		// every KV head), which the prefetchers follow badly; read in order,
		// the block comes into L2 at stream speed (on Zen 4 a layer's
		// attention past the LLC took 12–24 % less: docs/perf/cpu.md,
		// "Decode attention"). An f16 block is read so too, then widened
		// from L2: widened straight from DRAM, its stores hold back the
		// loads (~20 % slower; docs/perf/cpu.md, "2026-11-22, Zen 4: the
		// f16 KV cache").
		if k.F16 == nil {
			s.sink += readRows(k.F32, j0, nk, ks, c0, w) + readRows(v.F32, j0, nk, ks, c0, w)
		} else {
			s.hsink += readRows(k.F16, j0, nk, ks, c0, w) + readRows(v.F16, j0, nk, ks, c0, w)
		}
		kr, rs := k.rows(kw, j0, nk, ks, c0, w)
		vr, _ := v.rows(vw, j0, nk, ks, c0, w)
		for g := g0; g < g1; g++ {
			gl := g - g0 // the KV head among this part's
			kb, vb := kr[gl*dh:], vr[gl*dh:]
			// The group's scores and their maxes, four heads a call where
			// the kernel takes them (padded by repeating the last head),
			// else one head at a time. Groups of two, half padding, took
			// as long either way (one thread, 256 keys in L2), so they keep
			// the per-head path.
			i0 := 0
			for ; G > 2 && i0 < G; i0 += 4 {
				var sp, qh [4][]float32
				var bm [4]float32
				for t := range 4 {
					i := min(i0+t, G-1)
					sp[t], qh[t] = p[i*attnDecodeKeys:][:nk], qs[(gl*G+i)*dh:][:dh]
				}
				if !attnScores4(&sp, &qh, kb, rs, nk, &bm) {
					break
				}
				copy(gmx[i0:min(i0+4, G)], bm[:])
			}
			for i := i0; i < G; i++ {
				ph := p[i*attnDecodeKeys:][:nk]
				attnScores(ph, qs[(gl*G+i)*dh:(gl*G+i+1)*dh], kb, rs)
				gmx[i] = maxOf(ph)
			}
			for i := range G {
				h := gl*G + i
				ph := p[i*attnDecodeKeys:][:nk]
				if a.Softcap > 0 {
					for j, x := range ph {
						ph[j] = a.Softcap * float32(math.Tanh(float64(x/a.Softcap)))
					}
					gmx[i] = maxOf(ph)
				}
				mx := m[h]
				if gmx[i] > mx {
					mx = gmx[i]
				}
				sum := attnExp(ph, mx)
				alpha[i] = 1
				if mx != m[h] { // after the first few blocks the max mostly stands
					alpha[i] = float32(math.Exp(float64(m[h] - mx))) // 0 on the first block
					m[h] = mx
				}
				l[h] = l[h]*alpha[i] + sum
			}
			// o = alpha·o + P·V for the group's heads, four at a time (each V
			// row read once for the four), then one by one
			og := o[gl*G*dh:]
			i := 0
			for ; i+4 <= G; i += 4 {
				for d0 := 0; d0 < dh; d0 += attnCols {
					attnTile(og[i*dh+d0:], dh, p[i*attnDecodeKeys:], attnDecodeKeys, 1, vb[d0:], rs, nk, min(attnCols, dh-d0), alpha[i:])
				}
			}
			for ; i < G; i++ {
				oh := og[i*dh : (i+1)*dh]
				if alpha[i] != 1 {
					for x := range oh {
						oh[x] *= alpha[i]
					}
				}
				attnAccum(oh, vb, rs, p[i*attnDecodeKeys:][:nk])
			}
		}
	}
}

// maxOf returns the largest of x (−Inf for none; NaNs skipped).
func maxOf(x []float32) float32 {
	mx := float32(math.Inf(-1))
	for _, v := range x {
		if v > mx {
			mx = v
		}
	}
	return mx
}

// Merge writes query heads [h0, h1) of dst (Heads·HeadDim) from parts [0,
// parts) of a decode step.
func (a *Attn) Merge(dst []float32, ps *AttnParts, parts, h0, h1 int) {
	H, dh := a.Heads, a.HeadDim
	o, m, l := ps.o, ps.m, ps.l
	for h := h0; h < h1; h++ {
		mx := float32(math.Inf(-1))
		for p := range parts {
			mx = max(mx, m[p*H+h])
		}
		d := dst[h*dh : (h+1)*dh]
		clear(d)
		var sum float32
		for p := range parts {
			w := float32(math.Exp(float64(m[p*H+h] - mx)))
			sum += w * l[p*H+h]
			for i, x := range o[(p*H+h)*dh:][:dh] {
				d[i] += w * x
			}
		}
		inv := a.normSink(h, mx, sum)
		for i := range d {
			d[i] *= inv
		}
	}
}

// mask sets the scores of keys [j0, j0+nk) that query rows [l0, l1) must not
// see to −Inf in st (keys × mp, query vector c of row l0 + c/G).
func (a *Attn) mask(st []float32, mp, j0, nk, l0, l1, G int) {
	last := j0 + nk - 1
	if last <= a.Pos+l0 && (a.Window == 0 || j0 > a.Pos+l1-1-a.Window) {
		return // every row sees every key of the block
	}
	ninf := float32(math.Inf(-1))
	for jj := range nk {
		j := j0 + jj
		for l := l0; l < l1; l++ {
			if j <= a.Pos+l && (a.Window == 0 || j > a.Pos+l-a.Window) {
				continue
			}
			row := st[jj*mp+(l-l0)*G:][:G]
			for c := range row {
				row[c] = ninf
			}
		}
	}
}

// attnTileGo is attnTile in Go: c[i][0:n] = alpha[i]·c[i][0:n] (0 when alpha is
// nil) + Σ_{p<k} a[i·ars + p·aks]·b[p·ldb : p·ldb+n] for rows i < 4.
func attnTileGo(c []float32, ldc int, a []float32, ars, aks int, b []float32, ldb, k, n int, alpha []float32) {
	for i := range 4 {
		ci := c[i*ldc : i*ldc+n]
		if alpha == nil {
			clear(ci)
		} else {
			for j := range ci {
				ci[j] *= alpha[i]
			}
		}
		for p := range k {
			ap := a[i*ars+p*aks]
			for j, bv := range b[p*ldb : p*ldb+n] {
				ci[j] += ap * bv
			}
		}
	}
}

// attnSoftmaxGo is attnSoftmax in Go (float64 exp): one key block's online
// softmax step over rows × cols scores s (row stride ld). Per column c:
// mx = max(m[c], s[·][c]); alpha[c] = exp(m[c] − mx); s[j][c] = exp(s[j][c] − mx);
// l[c] = l[c]·alpha[c] + Σ_j s[j][c]; m[c] = mx.
func attnSoftmaxGo(s []float32, ld, rows, cols int, m, l, alpha []float32) {
	for c := range cols {
		mx := m[c]
		for j := range rows {
			mx = max(mx, s[j*ld+c])
		}
		al := float32(math.Exp(float64(m[c] - mx)))
		var sum float32
		for j := range rows {
			e := float32(math.Exp(float64(s[j*ld+c] - mx)))
			s[j*ld+c] = e
			sum += e
		}
		l[c], m[c], alpha[c] = l[c]*al+sum, mx, al
	}
}

// attnExpGo is attnExp in Go: s[i] = exp(s[i] − mx), returning Σ s[i].
func attnExpGo(s []float32, mx float32) float32 {
	var sum float32
	for i, x := range s {
		e := float32(math.Exp(float64(x - mx)))
		s[i] = e
		sum += e
	}
	return sum
}

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

// readRows reads columns [c0, c0+w) of rows [j0, j0+n) of x (row stride ks)
// with readLines: the whole stretch when the columns are whole rows.
func readRows[T float32 | uint16](x []T, j0, n, ks, c0, w int) T {
	if w == ks {
		return readLines(x[j0*ks : (j0+n)*ks])
	}
	var s T
	for j := j0; j < j0+n; j++ {
		s += readLines(x[j*ks+c0 : j*ks+c0+w])
	}
	return s
}

// readLines reads one element of every 64 bytes of x (x starts on an
// element) and returns their sum, which keeps the reads: it brings x into
// cache with demand loads, which a CPU does not drop as it may a burst of
// prefetches.
func readLines[T float32 | uint16](x []T) T {
	var s0, s1, s2, s3 T
	per := 64 / int(unsafe.Sizeof(s0)) // elements a line
	for ; len(x) >= 4*per; x = x[4*per:] {
		s0, s1, s2, s3 = s0+x[0], s1+x[per], s2+x[2*per], s3+x[3*per]
	}
	for i := 0; i < len(x); i += per {
		s0 += x[i]
	}
	return s0 + s1 + s2 + s3
}
