// ingot_math.h: float math for the PTX compat <metal_stdlib>. PTX has no libm
// and its transcendental instructions (ex2/lg2/sin/cos.approx) are
// approximations: sin.approx on a raw argument is wrong by whole units at the
// angles RoPE reaches at late positions. These functions replace the libm
// builtins that the interpreter's math section calls (__builtin_expf → __ingot_expf, …).
//
// Bounds, measured by TestPTXMath (internal/msl) against float64 math over
// 2–6 million arguments per function (random bit patterns over the domain,
// uniform ranges, RoPE angles up to position 2^20, the floats nearest to
// multiples of π/2, edges); the worst seen is in parentheses:
//   exp, exp2             < 1 ulp (0.76)
//   log, log2, log10      < 1 ulp (0.84)
//   sin, cos              < 1 ulp (0.72), every finite float: Payne–Hanek past 105615
//   tan                   ≤ 2.5 ulp (2.06)
//   tanh                  < 1 ulp (0.81)
// The rest of libm (pow, exp10, sinh, cosh, asin, acos, atan, atan2, erf, cbrt,
// hypot, …) is not provided: a kernel calling one fails to generate, naming it.
// Denormals are kept (no .ftz), as the interpreter keeps them. Contraction is
// off inside these functions, and every fused multiply-add is an explicit
// fmaf, so the PTX and a host build of this file compute identical bits.
//
// It is written in the common subset of C++ and C++ for OpenCL (no address
// spaces except through __INGOT_CONST) so the test can build it for the host.
// long is 64-bit in both (OpenCL's long long is 128-bit: never use it here).
#ifndef INGOT_PTX_MATH_H
#define INGOT_PTX_MATH_H

#ifdef __OPENCL_CPP_VERSION__
#define __INGOT_CONST __constant
#else
#define __INGOT_CONST
#endif
#define __INGOT_M static inline __attribute__((always_inline))

__INGOT_M unsigned __ingot_bits(float x) { return __builtin_bit_cast(unsigned, x); }
__INGOT_M float __ingot_float(unsigned u) { return __builtin_bit_cast(float, u); }
__INGOT_M float __ingot_fabs(float x) { return __ingot_float(__ingot_bits(x) & 0x7fffffffu); }

// __ingot_scale returns x·2^k for k in [-252, 254] with one rounding: two
// exact power-of-two factors, each a normal float.
__INGOT_M float __ingot_scale(float x, int k) {
#pragma clang fp contract(off)
	int h = k / 2;
	float s1 = __ingot_float((unsigned)(h + 127) << 23);
	float s2 = __ingot_float((unsigned)(k - h + 127) << 23);
	return x * s1 * s2;
}

// __ingot_exp_core returns e^(rh + rl) for |rh| ≤ 0.35, |rl| ≤ ulp(rh):
// 1 + rh is split exactly into h + hl, so only the small tail
// hl + rl·(1 + rh) + rh²·p(rh) and the final sum are rounded. p is the
// degree-5 Taylor polynomial of (e^r − 1 − r)/r² (truncation below 2^-27).
__INGOT_M float __ingot_exp_core(float rh, float rl) {
#pragma clang fp contract(off)
	float p = 1.98412698e-4f;
	p = __builtin_fmaf(p, rh, 1.38888889e-3f);
	p = __builtin_fmaf(p, rh, 8.33333333e-3f);
	p = __builtin_fmaf(p, rh, 4.16666667e-2f);
	p = __builtin_fmaf(p, rh, 1.66666667e-1f);
	p = __builtin_fmaf(p, rh, 0.5f);
	float h = 1.0f + rh;
	float hl = (1.0f - h) + rh; // exact: 1 + rh = h + hl
	float t = __builtin_fmaf(p * rh, rh, __builtin_fmaf(rl, rh, rl) + hl);
	return h + t;
}

// __ingot_expf is e^x: x = k·ln2 + r with a two-constant (Cody–Waite)
// reduction whose first step is exact; r is carried as rh + rl.
__INGOT_M float __ingot_expf(float x) {
#pragma clang fp contract(off)
	if (x != x)
		return x;
	if (x > 88.72283935546875f)
		return __builtin_inff();
	if (x < -103.97208404541015625f)
		return 0.0f;
	float k = __builtin_rintf(x * 1.44269502f);
	float r1 = __builtin_fmaf(k, -0.693359375f, x); // exact
	float p = k * 2.12194440e-4f, pe = __builtin_fmaf(k, 2.12194440e-4f, -p);
	float rh = r1 + p;
	float t = rh - r1;
	float rl = ((r1 - (rh - t)) + (p - t)) + pe; // TwoSum: r1 + p = rh + rl
	return __ingot_scale(__ingot_exp_core(rh, rl), (int)k);
}

// __ingot_exp2f is 2^x: x = k + f exactly, 2^f = e^(f·ln2) with f·ln2 carried
// as a sum of two floats.
__INGOT_M float __ingot_exp2f(float x) {
#pragma clang fp contract(off)
	if (x != x)
		return x;
	if (x >= 128.0f)
		return __builtin_inff();
	if (x < -151.0f)
		return 0.0f;
	float k = __builtin_rintf(x);
	float f = x - k;
	float rh = f * 0.693147182f;
	float rl = __builtin_fmaf(f, 0.693147182f, -rh) + f * -1.90465421e-9f;
	return __ingot_scale(__ingot_exp_core(rh, rl), (int)k);
}

// __ingot_log_reduce splits finite x > 0 into 2^k·(1 + f), 1 + f in
// [√½, √2), and returns f; *s = f/(2+f) and *R the tail of log(1+f) =
// 2s + s·R… in the FreeBSD/musl e_logf form.
__INGOT_M float __ingot_log_reduce(float x, int *k, float *s, float *R) {
#pragma clang fp contract(off)
	unsigned ix = __ingot_bits(x);
	int e = 0;
	if (ix < 0x00800000u) { // denormal
		e = -25;
		ix = __ingot_bits(x * 33554432.0f);
	}
	ix += 0x3f800000u - 0x3f3504f3u;
	e += (int)(ix >> 23) - 0x7f;
	ix = (ix & 0x007fffffu) + 0x3f3504f3u;
	float f = __ingot_float(ix) - 1.0f;
	float sv = f / (2.0f + f);
	float z = sv * sv;
	float w = z * z;
	float t1 = w * (0.40000972152f + w * 0.24279078841f);
	float t2 = z * (0.66666662693f + w * 0.28498786688f);
	*k = e;
	*s = sv;
	*R = t2 + t1;
	return f;
}

// __ingot_log_special handles x ≤ 0, infinities and NaN; it returns 1 and
// sets *out when x is special.
__INGOT_M int __ingot_log_special(float x, float *out) {
	if (x != x) {
		*out = x;
		return 1;
	}
	if (x == 0.0f) {
		*out = -__builtin_inff();
		return 1;
	}
	if (x < 0.0f) {
		*out = __builtin_nanf("");
		return 1;
	}
	if (x == __builtin_inff()) {
		*out = x;
		return 1;
	}
	return 0;
}

__INGOT_M float __ingot_logf(float x) {
#pragma clang fp contract(off)
	float out;
	if (__ingot_log_special(x, &out))
		return out;
	int k;
	float s, R;
	float f = __ingot_log_reduce(x, &k, &s, &R);
	float hfsq = 0.5f * f * f;
	float dk = (float)k;
	return s * (hfsq + R) + dk * 9.0580006145e-06f - hfsq + f + dk * 6.9313812256e-01f;
}

__INGOT_M float __ingot_log2f(float x) {
#pragma clang fp contract(off)
	float out;
	if (__ingot_log_special(x, &out))
		return out;
	int k;
	float s, R;
	float f = __ingot_log_reduce(x, &k, &s, &R);
	float hfsq = 0.5f * f * f;
	float hi = __ingot_float(__ingot_bits(f - hfsq) & 0xfffff000u);
	float lo = f - hi - hfsq + s * (hfsq + R);
	return (lo + hi) * -1.7605285393e-04f + lo * 1.4428710938e+00f + hi * 1.4428710938e+00f + (float)k;
}

__INGOT_M float __ingot_log10f(float x) {
#pragma clang fp contract(off)
	float out;
	if (__ingot_log_special(x, &out))
		return out;
	int k;
	float s, R;
	float f = __ingot_log_reduce(x, &k, &s, &R);
	float hfsq = 0.5f * f * f;
	float hi = __ingot_float(__ingot_bits(f - hfsq) & 0xfffff000u);
	float lo = f - hi - hfsq + s * (hfsq + R);
	float dk = (float)k;
	return dk * 7.9034151668e-07f + (lo + hi) * -3.1689971365e-05f + lo * 4.3432617188e-01f +
	       hi * 4.3432617188e-01f + dk * 3.0102920532e-01f;
}

// Bits of 2/π after the binary point, 32 per word, most significant first
// (checked against a 1200-bit computation by TestPTXMathTable).
static __INGOT_CONST const unsigned __ingot_2opi[8] = {
	0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu, 0xdebbc561u,
};

// __ingot_2opi_bits returns the 32 bits of 2/π starting at fraction bit i
// (bit 1 is the first after the point).
__INGOT_M unsigned __ingot_2opi_bits(int i) {
	int w = (i - 1) >> 5, o = (i - 1) & 31;
	unsigned long v = ((unsigned long)__ingot_2opi[w] << 32) | __ingot_2opi[w + 1];
	return (unsigned)((v << o) >> 32);
}

// __ingot_trig_reduce returns r = rh + *rl, |r| ≤ π/4, and *q with
// x = r + q·π/2 (q mod 4 is what matters). |x| ≤ 105615: three-constant
// Cody–Waite, the first step exact and the rest carried in two floats.
// Larger finite x: Payne–Hanek, x·2/π in integer arithmetic from a 96-bit
// window of 2/π's bits, so every float angle is reduced exactly before r is
// rounded. Infinities and NaN give NaN.
__INGOT_M float __ingot_trig_reduce(float x, float *rl, int *q) {
#pragma clang fp contract(off)
	float a = __ingot_fabs(x);
	if (a <= 105615.0f) {
		float k = __builtin_rintf(x * 0.636619772f);
		float r1 = __builtin_fmaf(k, -1.5707962512969971e+00f, x); // exact
		float p = k * -7.5497894158615964e-08f, pe = __builtin_fmaf(k, -7.5497894158615964e-08f, -p);
		float rh = r1 + p;
		float t = rh - r1;
		*rl = ((r1 - (rh - t)) + (p - t)) + __builtin_fmaf(k, -5.3903029534742384e-15f, pe);
		*q = (int)k;
		return rh;
	}
	unsigned ix = __ingot_bits(x);
	if ((ix & 0x7f800000u) == 0x7f800000u) {
		*q = 0;
		*rl = 0.0f;
		return x - x;
	}
	// x = M·2^E; x·2/π mod 4 only needs 2/π's bits from E−1 on.
	int E = (int)((ix >> 23) & 0xff) - 150;
	unsigned M = (ix & 0x7fffffu) | 0x800000u;
	int i0 = E - 1 > 1 ? E - 1 : 1;
	unsigned w2 = __ingot_2opi_bits(i0), w1 = __ingot_2opi_bits(i0 + 32), w0 = __ingot_2opi_bits(i0 + 64);
	// P = M·W (120 bits, 32-bit limbs p0…p3); x·2/π ≡ P·2^-sh (mod 4).
	unsigned long c = (unsigned long)M * w0;
	unsigned p0 = (unsigned)c;
	c = (c >> 32) + (unsigned long)M * w1;
	unsigned p1 = (unsigned)c;
	c = (c >> 32) + (unsigned long)M * w2;
	unsigned long p32 = c; // limbs 3:2
	unsigned long p10 = ((unsigned long)p1 << 32) | p0, p21 = (p32 << 32) | p1;
	int sh = i0 + 95 - E; // 94 … 103
	// The 32 bits of P from bit pos (pos < 104), from registers: no
	// indexed arrays, which would live in local memory.
#define __INGOT_P32(pos) \
	((unsigned)(((pos) < 32 ? p10 : (pos) < 64 ? p21 : (pos) < 96 ? p32 : (p32 >> 32)) >> ((pos) & 31)))
	int qq = (int)(__INGOT_P32(sh) & 3u);
	unsigned long F = ((unsigned long)__INGOT_P32(sh - 32) << 32) | __INGOT_P32(sh - 64);
#undef __INGOT_P32
	// The fraction F/2^64 in [0, 1), as a signed value in [-½, ½) of a quadrant.
	long S = (long)F;
	if (S < 0)
		qq++;
	int neg = (S < 0) != (x < 0.0f);
	unsigned long A = S < 0 ? 0ul - F : F;
	float hi = (float)A;
	float lo = (float)(long)(A - (unsigned long)hi);
	// (hi + lo)·π/2 as rh + tail, then scaled by 2^-64 (exact).
	float rh = hi * 1.57079637f;
	float tail = __builtin_fmaf(hi, 1.57079637f, -rh) + __builtin_fmaf(hi, -4.37113883e-08f, lo * 1.57079637f);
	float r = rh + tail;
	float r_lo = tail - (r - rh);
	r *= 0x1p-64f;
	r_lo *= 0x1p-64f;
	if (x < 0.0f)
		qq = -qq;
	*q = qq;
	*rl = neg ? -r_lo : r_lo;
	return neg ? -r : r;
}

// Minimax polynomials on [-π/4, π/4] for sin and cos of rh + rl, |rl| ≤
// ulp(rh): sin(rh + rl) ≈ sin(rh) + rl·cos(rh), cos(rh + rl) ≈ cos(rh) − rl·rh.
__INGOT_M float __ingot_sin_poly(float r, float rl) {
#pragma clang fp contract(off)
	float z = r * r;
	float s = 2.86567956e-6f;
	s = __builtin_fmaf(s, z, -1.98559923e-4f);
	s = __builtin_fmaf(s, z, 8.33338592e-3f);
	s = __builtin_fmaf(s, z, -1.66666672e-1f);
	return r + __builtin_fmaf(s * z, r, __builtin_fmaf(-0.5f * z, rl, rl));
}
__INGOT_M float __ingot_cos_poly(float r, float rl) {
#pragma clang fp contract(off)
	float z = r * r;
	float ze = __builtin_fmaf(r, r, -z); // r² = z + ze
	float c = 2.44677067e-5f;
	c = __builtin_fmaf(c, z, -1.38877297e-3f);
	c = __builtin_fmaf(c, z, 4.16666567e-2f);
	// 1 − z/2 + z²·c: the ½z term carries r²'s rounding error and rl.
	float h = 1.0f - 0.5f * z;
	float e = ((1.0f - h) - 0.5f * z) - 0.5f * ze - r * rl; // exact except the last two products
	return h + __builtin_fmaf(z * z, c, e);
}

__INGOT_M float __ingot_sinf(float x) {
	if (__ingot_fabs(x) < 0x1p-12f)
		return x; // also keeps −0
	int q;
	float rl;
	float r = __ingot_trig_reduce(x, &rl, &q);
	float v = (q & 1) ? __ingot_cos_poly(r, rl) : __ingot_sin_poly(r, rl);
	return (q & 2) ? -v : v;
}

__INGOT_M float __ingot_cosf(float x) {
	int q;
	float rl;
	float r = __ingot_trig_reduce(x, &rl, &q);
	float v = (q & 1) ? __ingot_sin_poly(r, rl) : __ingot_cos_poly(r, rl);
	return ((q + 1) & 2) ? -v : v;
}

__INGOT_M float __ingot_tanf(float x) {
#pragma clang fp contract(off)
	if (__ingot_fabs(x) < 0x1p-12f)
		return x;
	int q;
	float rl;
	float r = __ingot_trig_reduce(x, &rl, &q);
	float s = __ingot_sin_poly(r, rl), c = __ingot_cos_poly(r, rl);
	return (q & 1) ? -c / s : s / c;
}

// __ingot_tanhf: an odd polynomial below 0.625, else (1 − e^{−2|x|})/(1 + e^{−2|x|}).
__INGOT_M float __ingot_tanhf(float x) {
#pragma clang fp contract(off)
	float a = __ingot_fabs(x);
	if (a < 0.625f) {
		float z = x * x;
		float p = -5.70498872745e-3f;
		p = __builtin_fmaf(p, z, 2.06390887954e-2f);
		p = __builtin_fmaf(p, z, -5.37397155531e-2f);
		p = __builtin_fmaf(p, z, 1.33314422036e-1f);
		p = __builtin_fmaf(p, z, -3.33332819422e-1f);
		return __builtin_fmaf(p * z, x, x);
	}
	if (!(a < 9.1f)) // also NaN
		return a != a ? x : __builtin_copysignf(1.0f, x);
	// (1 − E)/(1 + E), E = e^{−2a} ≤ 0.29: numerator and denominator split
	// exactly into two floats, the quotient corrected by its exact remainder.
	float E = __ingot_expf(-2.0f * a);
	float uh = 1.0f - E, ul = (1.0f - uh) - E;
	float vh = 1.0f + E, vl = E - (vh - 1.0f);
	float q = uh / vh;
	float rem = __builtin_fmaf(-q, vh, uh);
	float t = q + (rem + ul - q * vl) / vh;
	return __builtin_copysignf(t, x);
}

// __ingot_ldexpf is x·2^e in up to three exact steps (a denormal result may
// be rounded twice).
__INGOT_M float __ingot_ldexpf(float x, int e) {
#pragma clang fp contract(off)
	for (int i = 0; i < 3 && e != 0; i++) {
		int s = e > 127 ? 127 : e < -126 ? -126 : e;
		x *= __ingot_float((unsigned)(s + 127) << 23);
		e -= s;
	}
	return x;
}

__INGOT_M float __ingot_nextafterf(float x, float y) {
	if (x != x || y != y)
		return x + y;
	if (x == y)
		return y;
	unsigned ux = __ingot_bits(x);
	if (x == 0.0f)
		return __builtin_copysignf(__ingot_float(1u), y);
	if ((x < y) == (x > 0.0f))
		ux++;
	else
		ux--;
	return __ingot_float(ux);
}

#endif // INGOT_PTX_MATH_H
