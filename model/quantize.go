package model

import (
	"context"
	"math"
	"sync"
	"unsafe"

	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/kernels/cpu"
)

// quantizeRows packs a (rows, cols) float matrix into MLX affine codes of the given
// bits, per group of `group` consecutive columns, the way the reference quantizer
// (and mlx-lm's min/max path) does it: bias = group min, scale = (max−min)/(2^bits−1),
// both rounded to bf16, q = round-half-even((w−bias)/scale) clipped to [0, 2^bits−1].
// Codes are a little-endian bitstream per row, lowest bits first. scales and biases
// are returned as bf16 bits, (rows, cols/group).
func quantizeRows(w []float32, rows, cols, bits, group int) (codes []uint32, scales, biases []uint16) {
	codes = make([]uint32, rows*cols*bits/32)
	scales, biases = make([]uint16, rows*(cols/group)), make([]uint16, rows*(cols/group))
	quantizeRowsInto(codes, scales, biases, w, rows, cols, bits, group)
	return codes, scales, biases
}

// quantizeRowsInto is quantizeRows into codes (rows·cols·bits/32 words, zero),
// scales and biases (rows·cols/group each). Groups are at most 128 columns.
func quantizeRowsInto(codes []uint32, scales, biases []uint16, w []float32, rows, cols, bits, group int) {
	words := cols * bits / 32
	groups := cols / group
	maxQ := float32(int(1)<<bits - 1)
	var qb [128]uint32
	q := qb[:group]
	for r := range rows {
		row, out := w[r*cols:(r+1)*cols], codes[r*words:(r+1)*words]
		for g := range groups {
			x := row[g*group : (g+1)*group]
			lo, hi := groupRange(x)
			sb, bb := cpu.F32ToBF16((hi-lo)/maxQ), cpu.F32ToBF16(lo)
			scales[r*groups+g], biases[r*groups+g] = sb, bb
			s, b := cpu.BF16ToF32(sb), cpu.BF16ToF32(bb)
			if s == 0 {
				clear(q)
			} else {
				for j, v := range x {
					y := roundEven((v - b) / s)
					if y < 0 {
						y = 0
					}
					if y > maxQ {
						y = maxQ
					}
					q[j] = uint32(y) // NaN as min(max(NaN, 0), maxQ) would leave it
				}
			}
			packCodes(out, g*group*bits, q, bits)
		}
	}
}

// groupRange returns min(x...) and max(x...) as Go's min and max give them (a
// NaN wins; -0 is below +0) at a third of their cost: it orders the floats as
// integers (the bits, with the magnitude bits flipped where the sign is set:
// -0 just below +0, a NaN beyond the infinities), whose min and max need no
// branches, and asks Go's min and max only where a NaN is present.
func groupRange(x []float32) (lo, hi float32) {
	key := func(f float32) int32 {
		b := int32(math.Float32bits(f))
		return b ^ (b >> 31 & 0x7fffffff)
	}
	l0, h0 := key(x[0]), key(x[0])
	l1, h1 := l0, h0
	i := 0
	for ; i+2 <= len(x); i += 2 {
		k0, k1 := key(x[i]), key(x[i+1])
		l0, h0 = min(l0, k0), max(h0, k0)
		l1, h1 = min(l1, k1), max(h1, k1)
	}
	for ; i < len(x); i++ {
		k := key(x[i])
		l0, h0 = min(l0, k), max(h0, k)
	}
	l0, h0 = min(l0, l1), max(h0, h1)
	if l0 < key(float32(math.Inf(-1))) || h0 > key(float32(math.Inf(1))) { // a NaN
		lo, hi = x[0], x[0]
		for _, v := range x {
			lo, hi = min(lo, v), max(hi, v)
		}
		return lo, hi
	}
	return math.Float32frombits(uint32(l0 ^ (l0 >> 31 & 0x7fffffff))), math.Float32frombits(uint32(h0 ^ (h0 >> 31 & 0x7fffffff)))
}

// roundEven returns x rounded to an integer, ties to even, as
// math.RoundToEven does, for |x| < 2²²; a larger |x| comes back at least 2²²
// in magnitude with x's sign (NaN stays NaN), which the clamps to the code
// range treat alike. Adding and taking away 1.5·2²³ rounds in float32's own
// arithmetic, without the call math.RoundToEven is on amd64 v1.
func roundEven(x float32) float32 {
	const c = 1.5 * (1 << 23)
	return float32(x+c) - c
}

// packCodes ors the bits-bit codes q into the little-endian bitstream out
// from bit offset bit on.
func packCodes(out []uint32, bit int, q []uint32, bits int) {
	switch {
	case bits == 8 && bit%32 == 0 && len(q)%4 == 0:
		o := out[bit/32 : bit/32+len(q)/4]
		for i := range o {
			c := q[4*i : 4*i+4]
			o[i] |= c[0] | c[1]<<8 | c[2]<<16 | c[3]<<24
		}
	case bits == 4 && bit%32 == 0 && len(q)%8 == 0:
		o := out[bit/32 : bit/32+len(q)/8]
		for i := range o {
			c := q[8*i : 8*i+8]
			o[i] |= c[0] | c[1]<<4 | c[2]<<8 | c[3]<<12 | c[4]<<16 | c[5]<<20 | c[6]<<24 | c[7]<<28
		}
	default:
		for _, c := range q {
			out[bit/32] |= c << (bit % 32)
			if bit%32+bits > 32 {
				out[bit/32+1] |= c >> (32 - bit%32)
			}
			bit += bits
		}
	}
}

// quantizeBlock is how many rows quantizeStored converts to float32 and
// quantizes at a time.
const quantizeBlock = 64

// quantizeStored quantizes the float tensor st, viewed as (rows, cols), as
// quantizeRows does, quantizeBlock rows at a time on up to threads goroutines, each holding
// only its block as float32, and checks ctx between blocks: a cancelled run
// stops within milliseconds even inside a large matrix. After a block it
// passes the block's stored bytes to release (if not nil), so that the pages
// of a mapped file can leave memory as they are done.
func quantizeStored(ctx context.Context, st *stTensor, rows, cols, bits, group, threads int, release func([]byte)) (codes []uint32, scales, biases []uint16, err error) {
	dt, err := floatDType(st)
	if err != nil {
		return nil, nil, nil, err
	}
	codes = make([]uint32, rows*cols*bits/32)
	scales, biases = make([]uint16, rows*(cols/group)), make([]uint16, rows*(cols/group))
	rowBytes := cols * dt.Bits() / 8
	words, groups := cols*bits/32, cols/group
	blocks := (rows + quantizeBlock - 1) / quantizeBlock
	var (
		mu   sync.Mutex
		next int
		wg   sync.WaitGroup
	)
	for range max(1, min(threads, blocks)) {
		wg.Go(func() {
			x := make([]float32, min(rows, quantizeBlock)*cols)
			for {
				mu.Lock()
				i := next
				next++
				if err == nil {
					err = ctx.Err()
				}
				stop := err != nil
				mu.Unlock()
				if stop || i >= blocks {
					return
				}
				r0, r1 := i*quantizeBlock, min(rows, (i+1)*quantizeBlock)
				src := st.Data[r0*rowBytes : r1*rowBytes]
				n := (r1 - r0) * cols
				widen(x[:n], src, dt)
				quantizeRowsInto(codes[r0*words:r1*words], scales[r0*groups:r1*groups], biases[r0*groups:r1*groups], x[:n], r1-r0, cols, bits, group)
				if release != nil {
					release(src)
				}
			}
		})
	}
	wg.Wait()
	if err != nil {
		return nil, nil, nil, err
	}
	return codes, scales, biases, nil
}

// widen converts the little-endian floats of dtype dt in b to dst
// (len(b)/(dt.Bits()/8) values).
func widen(dst []float32, b []byte, dt kernels.DType) {
	switch dt {
	case kernels.DTypeF32:
		if kernels.Aligned(b, 4) {
			copy(dst, unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4))
			return
		}
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
		}
	case kernels.DTypeF16:
		if kernels.Aligned(b, 2) {
			cpu.F16sToF32(dst, unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2))
			return
		}
		for i := range dst {
			dst[i] = cpu.F16ToF32(uint16(b[2*i]) | uint16(b[2*i+1])<<8)
		}
	case kernels.DTypeBF16:
		for i := range dst {
			dst[i] = cpu.BF16ToF32(uint16(b[2*i]) | uint16(b[2*i+1])<<8)
		}
	}
}
