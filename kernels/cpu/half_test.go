package cpu

import (
	"math"
	"testing"
)

// TestF16sToF32 widens every half, at lengths and offsets around the vector
// steps (32 halves on amd64, 8 on arm64), and checks each element against
// F16ToF32 (NaNs: NaN) and that nothing past the end is written.
func TestF16sToF32(t *testing.T) {
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	check := func(src []uint16) {
		t.Helper()
		dst := make([]float32, len(src)+1)
		dst[len(src)] = 7
		F16sToF32(dst, src)
		for i, h := range src {
			want := F16ToF32(h)
			if got := dst[i]; math.Float32bits(got) != math.Float32bits(want) && !(want != want && got != got) {
				t.Fatalf("len %d: half %#04x → %v (%#08x), want %v", len(src), h, got, math.Float32bits(got), want)
			}
		}
		if dst[len(src)] != 7 {
			t.Fatalf("len %d: wrote past the end", len(src))
		}
	}
	check(all)
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 100} {
		for _, off := range []int{0, 1, 0x7bf0, 0x83f0, 0xfbf0} { // normals, the largest, subnormals, ±inf/NaN
			check(all[off : off+n])
		}
	}
}

// TestF32sToF16 checks the row form against F32ToF16 and that halves widened
// and rounded again come back unchanged.
func TestF32sToF16(t *testing.T) {
	src := []float32{0, -0, 1, -1.5, 65504, 65520, 1e-8, 6e-8, -3e-5, float32(math.Inf(1)), 0.1, 2049, 2051}
	dst := make([]uint16, len(src))
	F32sToF16(dst, src)
	for i, x := range src {
		if dst[i] != F32ToF16(x) {
			t.Errorf("%v → %#04x, want %#04x", x, dst[i], F32ToF16(x))
		}
	}
	for h := range 1 << 16 {
		if f := F16ToF32(uint16(h)); f == f {
			var back [1]uint16
			F32sToF16(back[:], []float32{f})
			if back[0] != uint16(h) {
				t.Fatalf("half %#04x → %v → %#04x", h, f, back[0])
			}
		}
	}
}

// TestKVRows widens column slices of f16 rows (the assembly's 8-half steps and
// the per-row fallback for other widths) and whole rows, and checks every
// element and that nothing past the slices is written.
func TestKVRows(t *testing.T) {
	const ks = 200
	src := make([]uint16, 40*ks)
	for i := range src {
		src[i] = uint16(i*7919) &^ 0x7c00 // finite halves
	}
	kv := KV{F16: src}
	for _, c := range []struct{ j0, n, off, w int }{
		{0, 1, 0, 8}, {3, 5, 16, 64}, {1, 7, 8, 24}, {2, 9, 5, 12}, {0, 40, 136, 64}, {4, 6, 0, ks},
	} {
		buf := make([]float32, c.n*c.w+1)
		buf[c.n*c.w] = 7
		got, stride := kv.rows(buf[:c.n*c.w], c.j0, c.n, ks, c.off, c.w)
		if want := c.w; stride != want {
			t.Fatalf("%+v: stride %d, want %d", c, stride, want)
		}
		for r := range c.n {
			for i := range c.w {
				h := src[(c.j0+r)*ks+c.off+i]
				if g := got[r*stride+i]; g != F16ToF32(h) {
					t.Fatalf("%+v: row %d col %d = %v, want %v", c, r, i, g, F16ToF32(h))
				}
			}
		}
		if buf[c.n*c.w] != 7 {
			t.Fatalf("%+v: wrote past the rows", c)
		}
	}
}

// TestHalfFastPaths: the load's integer shortcuts agree with the plain
// conversions: f16Bits with F16ToF32 on every half; isF16 with a round trip
// through F32ToF16, and toF16 (on f16 values) with F32ToF16, for every
// exponent with significands at the bits where f16's precision ends, both
// signs.
func TestHalfFastPaths(t *testing.T) {
	for h := range 1 << 16 {
		if got, want := f16Bits(uint16(h)), math.Float32bits(F16ToF32(uint16(h))); got != want {
			t.Fatalf("f16Bits(%#04x) = %#08x, want %#08x", h, got, want)
		}
	}
	mants := []uint32{0, 1, 1 << 12, 1 << 13, 1 << 14, 3 << 13, 0x7fe000, 0x7fffff, 0x400000, 0x2000 | 1}
	for e := range uint32(256) {
		for _, m := range mants {
			for _, sign := range []uint32{0, 1 << 31} {
				x := math.Float32frombits(sign | e<<23 | m)
				want := F16ToF32(F32ToF16(x)) == x
				if got := isF16(x); got != want {
					t.Fatalf("isF16(%g, bits %#08x) = %v, want %v", x, math.Float32bits(x), got, want)
				}
				if want {
					if got, want := toF16(x), F32ToF16(x); got != want {
						t.Fatalf("toF16(%g) = %#04x, want %#04x", x, got, want)
					}
				}
			}
		}
	}
}
