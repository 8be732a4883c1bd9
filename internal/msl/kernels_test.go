package msl_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"testing"

	"github.com/ingot-llm/ingot/metal"
)

func TestSimdScan(t *testing.T) {
	d := open(t, "simd.metal")
	for _, threads := range []int{1, 31, 32, 33, 64, 100} {
		t.Run(fmt.Sprintf("threads=%d", threads), func(t *testing.T) {
			groups := 3
			n := groups * threads
			x := make([]uint32, n)
			for i := range x {
				x[i] = uint32(i*7919%23 + 1)
			}
			xb, ob := u32Buffer(t, d, x), u32Buffer(t, d, make([]uint32, 8*n))
			if err := dispatch(t, d, "simd_scan_u32", size(groups), size(threads), func(e metal.Encoder) {
				e.SetBuffer(0, xb, 0)
				e.SetBuffer(1, ob, 0)
			}); err != nil {
				t.Fatal(err)
			}
			got := u32s(ob)
			for g := range groups {
				for s0 := 0; s0 < threads; s0 += 32 {
					lanes := x[g*threads+s0 : g*threads+min(s0+32, threads)]
					var incl, mx, ballot, all, any uint32
					mn := uint32(math.MaxUint32)
					all = 1
					for l, v := range lanes {
						i := g*threads + s0 + l
						want := []uint32{incl + v, incl, 0, 0, lanes[0], 0, 0, 0}
						incl += v
						mx, mn = max(mx, v), min(mn, v)
						if v&1 != 0 {
							ballot++
						}
						if v >= 1000 {
							all = 0
						}
						if v == 7 {
							any = 1
						}
						for j := range 2 {
							if got[8*i+j] != want[j] {
								t.Errorf("thread %d op %d: got %d, want %d", i, j, got[8*i+j], want[j])
							}
						}
						if got[8*i+4] != want[4] {
							t.Errorf("thread %d broadcast_first: got %d, want %d", i, got[8*i+4], want[4])
						}
					}
					for l := range lanes {
						i := g*threads + s0 + l
						want := [8]uint32{2: mx, 3: mn, 5: ballot, 6: all, 7: any}
						for _, j := range []int{2, 3, 5, 6, 7} {
							if got[8*i+j] != want[j] {
								t.Errorf("thread %d op %d: got %d, want %d", i, j, got[8*i+j], want[j])
							}
						}
					}
				}
			}
		})
	}
}

func TestSimdShuffle(t *testing.T) {
	d := open(t, "simd.metal")
	// A 2-D grid: 2x3 threadgroups of 32x2 threads (two simdgroups each).
	groups, threads := metal.Size{W: 2, H: 3, D: 1}, metal.Size{W: 32, H: 2, D: 1}
	nx, ny := groups.W*threads.W, groups.H*threads.H
	x := randn(nx*ny, 5)
	xb, ob := f32Buffer(t, d, x), f32Buffer(t, d, make([]float32, 8*nx*ny))
	if err := dispatch(t, d, "simd_shuffle_f32", groups, threads, func(e metal.Encoder) {
		e.SetBuffer(0, xb, 0)
		e.SetBuffer(1, ob, 0)
	}); err != nil {
		t.Fatal(err)
	}
	got := f32s(ob)
	for gy := range ny {
		for gx := range nx {
			i := gy*nx + gx
			lane := gx % 32 // threadgroups are 32 wide: a row of a threadgroup is one simdgroup
			at := func(l int) float32 { return x[i-lane+l] }
			sum := float32(0)
			// simd_sum's fixed pairwise tree
			v := make([]float32, 32)
			for l := range 32 {
				v[l] = at(l)
			}
			for s := 1; s < 32; s *= 2 {
				for l := 0; l+s < 32; l += 2 * s {
					v[l] += v[l+s]
				}
			}
			sum = v[0]
			q := lane &^ 3
			want := []float32{
				at(min(lane+1, 31) + map[bool]int{true: 0, false: -1}[lane+1 <= 31]*0),
				at(map[bool]int{true: lane - 3, false: lane}[lane >= 3]),
				at(lane ^ 5),
				at(31 - lane),
				at(7),
				(at(q) + at(q+1)) + (at(q+2) + at(q+3)),
				at(q + 2),
				sum,
			}
			if lane == 31 {
				want[0] = at(31)
			}
			for j, w := range want {
				if math.Float32bits(got[8*i+j]) != math.Float32bits(w) {
					t.Errorf("thread (%d,%d) op %d: got %v, want %v", gx, gy, j, got[8*i+j], w)
				}
			}
		}
	}
}

func TestSimdVector(t *testing.T) {
	d := open(t, "simd.metal")
	x := randn(4*64, 9)
	xb, ob := f32Buffer(t, d, x), f32Buffer(t, d, make([]float32, 8*64))
	if err := dispatch(t, d, "simd_vec_f32", size(1), size(64), func(e metal.Encoder) {
		e.SetBuffer(0, xb, 0)
		e.SetBuffer(1, ob, 0)
	}); err != nil {
		t.Fatal(err)
	}
	got := f32s(ob)
	for i := range 64 {
		for c := range 4 {
			var sum float64
			for l := range 32 {
				sum += float64(x[4*((i&^31)+l)+c])
			}
			if g := got[8*i+c]; math.Abs(float64(g)-sum) > 1e-5 {
				t.Errorf("thread %d simd_sum[%d]: got %v, want %v", i, c, g, sum)
			}
			if g, w := got[8*i+4+c], x[4*(i^16)+c]; g != w {
				t.Errorf("thread %d shuffle_xor[%d]: got %v, want %v", i, c, g, w)
			}
		}
	}
}

func matmulRef(a, b []float32, m, n, k int) []float64 {
	c := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for l := range k {
				s += float64(a[i*k+l]) * float64(b[l*n+j])
			}
			c[i*n+j] = s
		}
	}
	return c
}

func TestSimdgroupMatmul(t *testing.T) {
	d := open(t, "matmul.metal")
	for _, tc := range []struct {
		kernel  string
		m, n, k int
	}{
		{"matmul_sg_f32", 8, 8, 8}, {"matmul_sg_f32", 16, 24, 32}, {"matmul_sg_f16", 16, 8, 24},
		{"matmul_bt_f32", 8, 8, 8}, {"matmul_bt_f32", 24, 16, 40},
	} {
		t.Run(fmt.Sprintf("%s/%dx%dx%d", tc.kernel, tc.m, tc.n, tc.k), func(t *testing.T) {
			a, b := randn(tc.m*tc.k, 1), randn(tc.k*tc.n, 2)
			var ab, bb metal.Buffer
			tol := 1e-5
			switch tc.kernel {
			case "matmul_sg_f16":
				a, b = roundF16(a), roundF16(b)
				ab, bb = f16Buffer(t, d, a), f16Buffer(t, d, b)
			case "matmul_bt_f32":
				bt := make([]float32, len(b))
				for l := range tc.k {
					for j := range tc.n {
						bt[j*tc.k+l] = b[l*tc.n+j]
					}
				}
				ab, bb = f32Buffer(t, d, a), f32Buffer(t, d, bt)
			default:
				ab, bb = f32Buffer(t, d, a), f32Buffer(t, d, b)
			}
			cb := f32Buffer(t, d, make([]float32, tc.m*tc.n))
			err := dispatch(t, d, tc.kernel, metal.Size{W: tc.n / 8, H: tc.m / 8, D: 1}, size(32), func(e metal.Encoder) {
				e.SetBytes(0, u32Bytes(uint32(tc.m), uint32(tc.n), uint32(tc.k)))
				e.SetBuffer(1, ab, 0)
				e.SetBuffer(2, bb, 0)
				e.SetBuffer(3, cb, 0)
			})
			if err != nil {
				t.Fatal(err)
			}
			want := matmulRef(a, b, tc.m, tc.n, tc.k)
			for i, g := range f32s(cb) {
				if math.Abs(float64(g)-want[i]) > tol*math.Sqrt(float64(tc.k)) {
					t.Fatalf("C[%d,%d]: got %v, want %v", i/tc.n, i%tc.n, g, want[i])
				}
			}
		})
	}
}

// Independent references for half and bfloat: decode every bit pattern, then
// round to the nearest representable value, ties to an even pattern.
type table struct {
	vals []float64
	pats []uint16
}

func newTable(decode func(uint16) float32) *table {
	t := &table{}
	for p := range 1 << 16 {
		v := float64(decode(uint16(p)))
		if math.IsNaN(v) || math.IsInf(v, 0) || (v == 0 && p != 0) {
			continue
		}
		t.vals = append(t.vals, v)
		t.pats = append(t.pats, uint16(p))
	}
	idx := make([]int, len(t.vals))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(i, j int) bool { return t.vals[idx[i]] < t.vals[idx[j]] })
	vals, pats := make([]float64, len(idx)), make([]uint16, len(idx))
	for i, j := range idx {
		vals[i], pats[i] = t.vals[j], t.pats[j]
	}
	t.vals, t.pats = vals, pats
	return t
}

// round returns the pattern nearest to f; max is the largest finite value and
// inf the infinity pattern: values at or past max + half an ulp overflow.
func (t *table) round(f float32, inf uint16, ulpAtMax float64) uint16 {
	v := float64(f)
	top := t.vals[len(t.vals)-1]
	switch {
	case math.IsNaN(v):
		return inf | 0x200
	case v >= top+ulpAtMax/2:
		return inf
	case v <= -top-ulpAtMax/2:
		return inf | 0x8000
	}
	p := t.nearest(v)
	if p == 0 && v < 0 {
		p = 0x8000 // rounds to -0
	}
	return p
}

func (t *table) nearest(v float64) uint16 {
	i := sort.SearchFloat64s(t.vals, v)
	if i == len(t.vals) {
		return t.pats[i-1]
	}
	if i == 0 {
		return t.pats[0]
	}
	if i < len(t.vals) && t.vals[i] == v {
		p := t.pats[i]
		if v == 0 && math.Signbit(v) {
			p |= 0x8000
		}
		return p
	}
	lo, hi := t.pats[i-1], t.pats[i]
	dl, dh := v-t.vals[i-1], t.vals[i]-v
	switch {
	case dl < dh:
		return lo
	case dh < dl:
		return hi
	case lo&1 == 0:
		return lo
	}
	return hi
}

func f16Decode(h uint16) float32 {
	s := float32(1)
	if h&0x8000 != 0 {
		s = -1
	}
	e, m := int(h>>10&31), float64(h&0x3ff)
	switch e {
	case 0:
		return s * float32(m*math.Pow(2, -24))
	case 31:
		if m != 0 {
			return float32(math.NaN())
		}
		return s * float32(math.Inf(1))
	}
	return s * float32((1+m/1024)*math.Pow(2, float64(e-15)))
}

func bf16Decode(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

var (
	f16Table  = newTable(f16Decode)
	bf16Table = newTable(bf16Decode)
)

func toF16(f float32) uint16  { return f16Table.round(f, 0x7c00, 32) }
func toBF16(f float32) uint16 { return bf16Table.round(f, 0x7f80, math.Ldexp(1, 127-7)) }

func roundF16(xs []float32) []float32 {
	out := make([]float32, len(xs))
	for i, x := range xs {
		out[i] = f16Decode(toF16(x))
	}
	return out
}

func f16Buffer(tb testing.TB, d metal.Device, xs []float32) metal.Buffer {
	tb.Helper()
	b, err := d.NewBuffer(2 * max(1, len(xs)))
	if err != nil {
		tb.Fatal(err)
	}
	for i, x := range xs {
		binary.LittleEndian.PutUint16(b.Contents()[2*i:], toF16(x))
	}
	tb.Cleanup(b.Release)
	return b
}

func TestConvert(t *testing.T) {
	d := open(t, "convert.metal")
	x := []float32{0, 1, -1, 0.1, 1.0 / 3, 65504, 65520, 65519.99, 1e6, -1e6, 6e-8, 3e-8, 2.98e-8, 1e-10,
		float32(math.Inf(1)), float32(math.Inf(-1)), 1.00048828125, 1.000732421875, 3.14159265, -2.71828,
		0x1.fep127, 0x1.ffp127, 1.00390625, 1.01171875, 5.96046448e-08, 6.1035156e-05, 6.09755516e-05}
	x = append(x, randn(64, 3)...)
	for i := range 16 {
		x = append(x, float32(math.Ldexp(float64(randn(1, uint64(i))[0]), i*4-30)))
	}
	n := len(x)
	hx := make([]byte, 2*n)
	bx := make([]byte, 2*n)
	for i, v := range x {
		binary.LittleEndian.PutUint16(hx[2*i:], toF16(v))
		binary.LittleEndian.PutUint16(bx[2*i:], toBF16(v))
	}
	xb, ob := f32Buffer(t, d, x), u32Buffer(t, d, make([]uint32, 8*n))
	hb, err := d.NewBuffer(len(hx))
	if err != nil {
		t.Fatal(err)
	}
	copy(hb.Contents(), hx)
	bb, err := d.NewBuffer(len(bx))
	if err != nil {
		t.Fatal(err)
	}
	copy(bb.Contents(), bx)
	if err := dispatch(t, d, "convert_f32", size(1), size(n), func(e metal.Encoder) {
		e.SetBuffer(0, xb, 0)
		e.SetBuffer(1, ob, 0)
		e.SetBuffer(2, hb, 0)
		e.SetBuffer(3, bb, 0)
	}); err != nil {
		t.Fatal(err)
	}
	got := u32s(ob)
	f := func(u uint32) float32 { return math.Float32frombits(u) }
	for i, v := range x {
		o := got[8*i:]
		h, b := toF16(v), toBF16(v)
		hv := f16Decode(h)
		// half4(v, -v, 2h, h+h): y = -v rounded, w = h+h in half; f4.y + f4.w in float.
		wantY := f16Decode(toF16(-v)) + f16Decode(toF16(hv+hv))
		var p float32
		if big := math.Abs(float64(v * 100)); big < 1<<31 {
			p = float32(int32(v * 100))
		} else {
			p = float32(math.NaN()) // int conversion out of range is undefined: not checked
		}
		checks := []struct {
			name      string
			got, want uint32
		}{
			{"half(x)", o[0], uint32(h)},
			{"bfloat(x)", o[1], uint32(b)},
			{"float(half(x))", o[2], math.Float32bits(hv)},
			{"float(bfloat(x))", o[3], math.Float32bits(bf16Decode(b))},
			{"half4 round trip", o[4], math.Float32bits(wantY)},
			{"float(half load)", o[5], math.Float32bits(hv)},
			{"float(bfloat load)", o[6], math.Float32bits(bf16Decode(b))},
			{"packed/int2", o[7], math.Float32bits(v + 2 + p + -2)},
		}
		for _, c := range checks {
			if c.name == "packed/int2" && p != p {
				continue
			}
			if c.got != c.want && !(math.IsNaN(float64(f(c.got))) && math.IsNaN(float64(f(c.want)))) {
				t.Errorf("x=%g (%#08x): %s: got %#x, want %#x", v, math.Float32bits(v), c.name, c.got, c.want)
			}
		}
	}
}

func TestVectorOps(t *testing.T) {
	d := open(t, "convert.metal")
	x := randn(4*40, 4)
	xb, ob := f32Buffer(t, d, x), f32Buffer(t, d, make([]float32, 16*40))
	if err := dispatch(t, d, "vector_ops_f32", size(2), size(20), func(e metal.Encoder) {
		e.SetBuffer(0, xb, 0)
		e.SetBuffer(1, ob, 0)
	}); err != nil {
		t.Fatal(err)
	}
	got := f32s(ob)
	for i := range 40 {
		v := x[4*i : 4*i+4]
		var want [16]float32
		copy(want[0:], []float32{v[2], v[3], v[0], v[1]})
		for c := range 4 {
			want[4+c] = float32(uint32(float32(math.Abs(float64(v[c])))*10)) + 1
			if v[c] > 0 {
				want[8+c] = 1
			}
		}
		dot := float32(0)
		for c := range 4 {
			dot += v[c] * v[c]
		}
		want[12] = dot
		want[13] = float32(math.Sqrt(float64(v[0]*v[0] + v[1]*v[1])))
		want[14] = max(v[0], 0.25)
		want[15] = min(max(v[3], -0.5), 0.5)
		for j := range 16 {
			if g := got[16*i+j]; math.Abs(float64(g-want[j])) > 1e-6 {
				t.Errorf("thread %d out[%d]: got %v, want %v", i, j, g, want[j])
			}
		}
	}
}

func TestAtomics(t *testing.T) {
	for _, threads := range []int{1, 2} {
		t.Run(fmt.Sprintf("cpus=%d", threads), func(t *testing.T) {
			d := openOpts(t, threads, 0, "atomics.metal")
			const n, nbins, tg = 1000, 13, 64
			x := make([]uint32, n)
			want := make([]uint32, nbins)
			for i := range x {
				x[i] = uint32(bits.RotateLeft32(uint32(i)*2654435761, 7))
				want[x[i]%nbins]++
			}
			xb, cb, sb := u32Buffer(t, d, x), u32Buffer(t, d, make([]uint32, nbins)), f32Buffer(t, d, []float32{0})
			if err := dispatch(t, d, "histogram_u32", size((n+tg-1)/tg), size(tg), func(e metal.Encoder) {
				e.SetBuffer(0, xb, 0)
				e.SetBuffer(1, cb, 0)
				e.SetBuffer(2, sb, 0)
				e.SetBytes(3, u32Bytes(n))
				e.SetBytes(4, u32Bytes(nbins))
			}); err != nil {
				t.Fatal(err)
			}
			for b, c := range u32s(cb) {
				if c != want[b] {
					t.Errorf("bin %d: got %d, want %d", b, c, want[b])
				}
			}
			if s := f32s(sb)[0]; s != n {
				t.Errorf("sum: got %v, want %d", s, n)
			}
		})
	}
}

func TestGrid3D(t *testing.T) {
	d := open(t, "grid.metal")
	groups, threads := metal.Size{W: 2, H: 3, D: 2}, metal.Size{W: 4, H: 2, D: 5}
	nx, ny, nz := groups.W*threads.W, groups.H*threads.H, groups.D*threads.D
	ob := u32Buffer(t, d, make([]uint32, 8*nx*ny*nz))
	if err := dispatch(t, d, "grid_ids", groups, threads, func(e metal.Encoder) { e.SetBuffer(0, ob, 0) }); err != nil {
		t.Fatal(err)
	}
	got := u32s(ob)
	p := func(x, y, z int) uint32 { return uint32(x | y<<10 | z<<20) }
	for z := range nz {
		for y := range ny {
			for x := range nx {
				i := (z*ny+y)*nx + x
				tx, ty, tz := x%threads.W, y%threads.H, z%threads.D
				idx := (tz*threads.H+ty)*threads.W + tx
				want := []uint32{p(x, y, z), p(tx, ty, tz), p(x/threads.W, y/threads.H, z/threads.D),
					p(groups.W, groups.H, groups.D), uint32(idx), uint32(idx / 32), p(threads.W, threads.H, 0), 1}
				for j, w := range want {
					if got[8*i+j] != w {
						t.Fatalf("thread (%d,%d,%d) word %d: got %#x, want %#x", x, y, z, j, got[8*i+j], w)
					}
				}
			}
		}
	}
}

func TestMath(t *testing.T) {
	d := open(t, "compat.metal")
	const n, nout = 40, 32
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i+1) / n
	}
	xb, ob := f32Buffer(t, d, x), f32Buffer(t, d, make([]float32, nout*n))
	if err := dispatch(t, d, "math_f32", size(2), size(n/2), func(e metal.Encoder) {
		e.SetBuffer(0, xb, 0)
		e.SetBuffer(1, ob, 0)
	}); err != nil {
		t.Fatal(err)
	}
	got := f32s(ob)
	for i, xf := range x {
		v := float64(xf)
		u := uint32(xf * 1000)
		c := math.Min(math.Max(v*4, 1), 2)
		l := math.Sqrt(v*v + v*v/4 + v*v + 4*v*v)
		ss := math.Max(0, math.Min(1, v))
		want := []float64{
			math.Sqrt(v), 1 / math.Sqrt(v), math.Exp(v), math.Exp2(v), math.Log(v), math.Log2(v),
			math.Sin(v), math.Cos(v), math.Tanh(v), math.Exp(v), 1 / v, math.Pow(v, 1.5),
			float64(f16Decode(toF16(float32(math.Exp(float64(f16Decode(toF16(xf)))))))),
			v*3 - math.Floor(v*3), 1 + 2*v, c, 2*v + 1, math.Atan2(v, 1), math.Erf(v),
			math.Max(v, 0.5), math.Max(math.Min(v, 0.5), math.Min(math.Max(v, 0.5), 0.25)),
			map[bool]float64{true: 1, false: -1}[v > 0.5] * map[bool]float64{true: 0, false: 1}[v == 0.5],
			map[bool]float64{true: 1, false: 0}[v >= 0.5], ss * ss * (3 - 2*ss),
			l, v / l, v, math.Exp(2 * v),
			float64(bits.OnesCount32(u)), float64(bits.LeadingZeros32(u + 1)), float64(u >> 2 & 7),
			math.Sin(v) + math.Cos(v) + v*8 + 0 + 1,
		}
		for j, w := range want {
			g := float64(got[nout*i+j])
			if math.Abs(g-w) > 2e-6*math.Max(1, math.Abs(w)) {
				t.Errorf("x=%v out[%d]: got %v, want %v", v, j, g, w)
			}
		}
	}
}
