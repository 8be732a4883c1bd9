package model

import (
	"math"

	"github.com/ingot-llm/ingot/kernels/cpu"
)

// quantizeRows packs a (rows, cols) float matrix into MLX affine codes of the given
// bits, per group of `group` consecutive columns, the way the reference quantizer
// (and mlx-lm's min/max path) does it: bias = group min, scale = (max−min)/(2^bits−1),
// both rounded to bf16, q = round-half-even((w−bias)/scale) clipped to [0, 2^bits−1].
// Codes are a little-endian bitstream per row, lowest bits first. scales and biases
// are returned as bf16 bits, (rows, cols/group).
func quantizeRows(w []float32, rows, cols, bits, group int) (codes []uint32, scales, biases []uint16) {
	words := cols * bits / 32
	groups := cols / group
	codes = make([]uint32, rows*words)
	scales, biases = make([]uint16, rows*groups), make([]uint16, rows*groups)
	maxQ := float32(int(1)<<bits - 1)
	for r := range rows {
		row, out := w[r*cols:(r+1)*cols], codes[r*words:(r+1)*words]
		for g := range groups {
			x := row[g*group : (g+1)*group]
			lo, hi := x[0], x[0]
			for _, v := range x {
				lo, hi = min(lo, v), max(hi, v)
			}
			sb, bb := cpu.F32ToBF16((hi-lo)/maxQ), cpu.F32ToBF16(lo)
			scales[r*groups+g], biases[r*groups+g] = sb, bb
			s, b := cpu.BF16ToF32(sb), cpu.BF16ToF32(bb)
			for j, v := range x {
				var q float32
				if s != 0 {
					q = float32(math.RoundToEven(float64((v - b) / s)))
				}
				q = min(max(q, 0), maxQ)
				bit := (g*group + j) * bits
				out[bit/32] |= uint32(q) << (bit % 32)
				if bit%32+bits > 32 {
					out[bit/32+1] |= uint32(q) >> (32 - bit%32)
				}
			}
		}
	}
	return codes, scales, biases
}
