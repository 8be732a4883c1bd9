package cpu

import "math"

// F16ToF32 converts an IEEE 754 half (binary16) to float32 exactly.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// subnormal: renormalize
	e := uint32(113)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}

// F16sToF32 widens halves to float32 exactly: dst[i] = src[i] for i < len(src)
// (dst at least as long).
func F16sToF32(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i := f16sAsm(dst, src); i < len(src); i++ {
		dst[i] = F16ToF32(src[i])
	}
}

// F32sToF16 rounds floats to halves (see [F32ToF16]): dst[i] = src[i] for
// i < len(src) (dst at least as long).
func F32sToF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, x := range src {
		dst[i] = F32ToF16(x)
	}
}

// BF16ToF32 converts a bfloat16 to float32 exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToF16 rounds a float32 to the nearest half (ties to even), saturating to ±inf.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		half := mant >> shift
		rem := mant & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++
	}
	return sign | uint16(half)
}

// F32ToBF16 rounds a float32 to the nearest bfloat16 (ties to even).
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// isF16 reports whether x is an f16 value: F16ToF32(F32ToF16(x)) == x, in a
// few integer operations where x is in f16's normal range.
func isF16(x float32) bool {
	u := math.Float32bits(x)
	if e := u >> 23 & 0xff; e-113 < 30 { // f16's normal exponents, 2⁻¹⁴ … 2¹⁵
		return u&0x1fff == 0
	}
	return F16ToF32(F32ToF16(x)) == x
}

// toF16 is F32ToF16 for an f16 value x (see isF16), in a few integer
// operations where x is in f16's normal range.
func toF16(x float32) uint16 {
	u := math.Float32bits(x)
	if e := u >> 23 & 0xff; e-113 < 30 && u&0x1fff == 0 {
		return uint16(u>>16)&0x8000 | uint16((u&0x7fffffff)>>13-112<<10)
	}
	return F32ToF16(x)
}

// f16Bits is F16ToF32(h)'s bits, in a few integer operations where h is a
// normal number.
func f16Bits(h uint16) uint32 {
	if e := h >> 10 & 0x1f; e-1 < 30 {
		return uint32(h&0x8000)<<16 | (uint32(h&0x7fff)<<13 + 112<<23)
	}
	return math.Float32bits(F16ToF32(h))
}
