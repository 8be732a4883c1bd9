package cpu

import "encoding/binary"

// The blocked layout of a GGUF Q6_K weight (metaQ6; see PrepareKQuant). A
// q6_k superblock of 256 values is sixteen affine groups of 16, group j with
// scale d·sc_j (f16 d, int8 sc_j) and bias −32·d·sc_j, codes q < 64; it is
// one stripe of the byte-dot kernels, whose lanes sum one group each. A code
// splits into its low nibble and its top two bits, q = lo + 16·hi: a chunk
// of a row is the 64 bytes of the 4-bit layout's chunk (lane j: word c of
// group j's low nibbles, c = 0, 1), then 32 bytes of their top bits, byte k
// holding those of lane byte k's low nibble (bits 0–1) and high nibble (bits
// 4–5), and of lane byte k+32's (bits 2–3 and 6–7). A row's stripes are its
// superblocks, and its scales per stripe d (f16) and the sixteen sc (int8):
// 18 bytes. The biases are −32 times the scales, so none are stored (the
// activations fold them in: see actB). Per 256 values 2·96 + 18 bytes: the
// 6.5625 bits a weight q6_k stores.
//
// A four-row block is, per stripe and chunk, the four rows' chunks in row
// order (96 bytes each), then the four rows' scales; a one-row block the
// row's chunks, then its scales.

// q6Chunk is the bytes of one row's chunk of a blocked q6_k weight.
const q6Chunk = 96

// putQ6K writes a block of a q6_k weight (rows: the stored rows of its slab
// of kw columns) into blk: per stripe and chunk the rows' chunks, then each
// row's scales. It returns false if some d is not finite.
func putQ6K(blk []byte, rows [][]byte, kw int) bool {
	S, r := kw/256, len(rows)
	var mx uint16 // the largest |d|, as f16 bits
	for i, row := range rows {
		for s := range S {
			b := (*[210]byte)(row[210*s:])
			for c := range 2 {
				putQ6Chunk((*[q6Chunk]byte)(blk[((2*s+c)*r+i)*q6Chunk:]), b, c)
			}
			sc := blk[2*S*r*q6Chunk+18*(i*S+s):][:18]
			sc[0], sc[1] = b[208], b[209]
			copy(sc[2:], b[192:208])
			mx = max(mx, binary.LittleEndian.Uint16(b[208:])&0x7fff)
		}
	}
	return mx < 0x7c00
}

// putQ6Chunk writes chunk c of q6_k superblock b into ch. Lane j holds values
// v … v+7 with v = 16j + 8c, consecutive in ggml-common.h's layout: value
// 128n + 32t + l (t < 4, l < 32) has the low (t < 2) or high nibble of
// ql[64n + 32(t mod 2) + l] and bits 2t, 2t+1 of qh[32n + l] (see deqQ6K).
func putQ6Chunk(ch *[q6Chunk]byte, b *[210]byte, c int) {
	var top [16]uint32 // each lane's top bits, two bits a nibble
	for j := range 16 {
		// v = 128n + 32t + l: n = j/8, t = j mod 8 / 2, l = 16(j mod 2) + 8c
		n, t, l := j/8, j%8/2, 16*(j%2)+8*(c&1)
		lo := binary.LittleEndian.Uint64(b[64*n+32*(t&1)+l:]) >> (4 * (t >> 1)) & 0x0f0f0f0f0f0f0f0f
		hi := binary.LittleEndian.Uint64(b[128+32*n+l:]) >> (2 * t) & 0x0303030303030303
		binary.LittleEndian.PutUint32(ch[4*j:], packNibbles(lo))
		top[j] = packNibbles(hi)
	}
	for j := range 8 { // lane j's top bits at bits 0–1 and 4–5, lane j+8's at 2–3 and 6–7
		binary.LittleEndian.PutUint32(ch[64+4*j:], top[j]|top[j+8]<<2)
	}
}

// q6Pos returns the value (of a stripe's 256) that byte p (< 64) of chunk c's
// low nibbles holds, in its low nibble (h = 0) or high one (h = 1): lane p/4
// is group p/4, whose word c has values 8c … 8c+7, two a byte.
func q6Pos(c, p, h int) int { return 16*(p/4) + 8*c + 2*(p%4) + h }

// q6Code returns the code of byte p's nibble h of chunk ch (see the layout
// above).
func q6Code(ch []byte, p, h int) uint8 {
	return ch[p]>>(4*h)&15 | (ch[64+p%32]>>(2*(p/32)+4*h)&3)<<4
}

// q6Stripe sets codes and scales to stripe s (values [256s, 256s+256)) of
// row n of a metaQ6 q (rows of K): its codes in value order and its scales
// d·sc.
func (q *QMatrix) q6Stripe(codes *[256]uint8, scales *[16]float32, n, K, s int) {
	j := len(q.slabs) - 1
	for q.slabs[j].k0 > 256*s {
		j--
	}
	sl, kw := &q.slabs[j], q.slabCols(j, K)
	blk, r, i, _, _ := sl.blockedRow(n, kw)
	S, s := kw/256, s-sl.k0/256 // the slab's stripes, and s among them
	for c := range 2 {
		ch := blk[((2*s+c)*r+i)*q6Chunk:]
		for p := range 64 {
			codes[q6Pos(c, p, 0)], codes[q6Pos(c, p, 1)] = q6Code(ch, p, 0), q6Code(ch, p, 1)
		}
	}
	sc := blk[r*S*2*q6Chunk+i*18*S+18*s:]
	d := f16At(sc)
	for g := range scales {
		scales[g] = d * float32(int8(sc[2+g]))
	}
}

// unblockQ6 is unblock for a metaQ6 q: the rows become 8-bit codes in
// groups of 16 with scales d·sc and biases −32·d·sc, all exact in float32
// (d·sc·q has at most 11 + 7 + 6 significant bits), so DequantRow's
// float32(scale·q) + bias is d·sc·(q − 32) as gguf-py computes it.
func (q *QMatrix) unblockQ6(dst *QMatrix, n0, n1, K int) {
	G := K / 16
	dst.Bits, dst.GroupSize = 8, 16
	dst.W = grow(dst.W, (n1-n0)*K/4)
	dst.Scales, dst.Biases = grow(dst.Scales, (n1-n0)*G), grow(dst.Biases, (n1-n0)*G)
	var codes [256]uint8
	var scales [16]float32
	for n := n0; n < n1; n++ {
		i := n - n0
		for s := range K / 256 {
			q.q6Stripe(&codes, &scales, n, K, s)
			w := dst.W[i*K/4+64*s:]
			for j := range 64 {
				w[j] = binary.LittleEndian.Uint32(codes[4*j:])
			}
			for g, v := range scales {
				dst.Scales[i*G+16*s+g], dst.Biases[i*G+16*s+g] = v, -32*v
			}
		}
	}
}

// dequantBlockedRowQ6 is dequantBlockedRow for a metaQ6 q: float32(scale·q)
// + bias, as DequantRow of its unblocked rows.
func (q *QMatrix) dequantBlockedRowQ6(dst []float32, n, K int) {
	var codes [256]uint8
	var scales [16]float32
	for s := range K / 256 {
		q.q6Stripe(&codes, &scales, n, K, s)
		d := dst[256*s : 256*s+256]
		for k, c := range codes {
			v := scales[k/16]
			d[k] = float32(v*float32(c)) + -32*v
		}
	}
}
