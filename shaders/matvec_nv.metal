// matvec_nv.metal: decode mat-vecs shaped for NVIDIA GPUs (the cuda backend);
// shaders/matvec.metal holds the Apple-shaped ones, and package kernels picks
// per device in one table (kernels/metal_nv.go).
//
// matvec_<q4|q8>_f32_nv_<bf16|f16|f32>sb: y_m (N_m) = x (K) · W_mᵀ for up to
// four MLX affine matrices W_m (N_m, K) of one bit width, K and group size G
// (q/k/v, gate/up: one launch), w = scale·q + bias per group. The codes are
// MLX's, unchanged (row-major, code i of a row in bits [i·b, (i+1)·b) of its
// little-endian words), so the embedding kernels still read a tied table; the
// (scale, bias) of each group are one interleaved pair of the type the name
// says (a layout the host makes at upload: pairs[n·K/G + g]).
//
// matvec_<q4|q8>_f32_nv_<…>sb[_xs]_glu: y (N) = act(x·W_0ᵀ)·(x·W_1ᵀ) for the
// gate W_0 and up W_1 (N, K) of a gated MLP, act = args.act: each lane's two
// rows are row n of W_0 and row n of W_1, so the activation needs no launch of
// its own; with the same geometry both sums are the unfused kernel's, bit for
// bit, and act is common.h's, as glu_* applies it.
//
// Shape (where the Apple kernel takes 4 bytes of codes and 8 scalar x per lane):
//   - loads are 16 bytes: a lane takes 16 bytes of a row's codes (32 4-bit or
//     16 8-bit codes, CPL), x as float4s, a pair as one word (16-bit pairs);
//   - lanes = 2^lane_shift consecutive lanes share a row and take consecutive
//     16-byte pieces of it (coalesced); the 32/lanes lane slots of a simdgroup
//     hold different rows, each lane MVNV_RT of them (rows rs, rs + 32/lanes,
//     …), so an x load serves MVNV_RT rows in registers and 32/lanes rows
//     across the lanes that share its address;
//   - an iteration is U = 2 (q4) or 4 (q8) loads per row, so U·16 bytes of
//     codes and U pairs of each of its MVNV_RT rows; a lane issues the next
//     iteration's loads before it uses this one's (the first before x is
//     staged), so two iterations are in flight; the inner loops have constant
//     trip counts and are unrolled, so nothing indexes a private array at run
//     time (no local memory in the PTX);
//   - the simdgroups of a threadgroup split K (iteration i of lanes·U·CPL
//     columns goes to simdgroup i mod nsg), so a small matrix still fills the
//     GPU; their partial sums meet in threadgroup memory.
//
// The _xs kernels first stage x in threadgroup memory (threadgroup(1): K + K/8
// floats, padded by mvnv_pad) and read it from there: a global float4 load of
// x costs one L1 wavefront per distinct line, i.e. per lane of a row, where
// the padded staged read is one (ncu on the H100: the L1, not DRAM, bounded
// the unstaged kernel). The host stages where K is small enough.
//
// Grid: one threadgroup per (32/lanes)·MVNV_RT rows, matrix m's threadgroups
// from tg_m on (tg_0 = 0; unused matrices: tg_m = 0xffffffff); nsg simdgroups
// (the host's table, kernels/metal_nv.go, picks lanes and nsg).
//
// Dequantization without int→float conversion: as_type<float>(0x3f800000 |
// q << (23 − b)) = 1 + q/2^b exactly (q < 2^b fills the top b mantissa bits),
// so with m = 1 + q/2^b, per lane piece (it never straddles a group: CPL
// divides G): Σ (s·q + b)·x = s·2^b·(Σ m·x − Σ x) + b·Σ x. Σ x is computed once
// per piece for all rows (the bias fold) and s, b are applied once per piece.
// Error bound: Σ m·x and Σ x round relative to Σ|m·x| ≤ 2·Σ|x| and Σ|x|, and
// both are scaled by 2^b·|s|, so the result's rounding error is at most
// γ·Σ|x|·(3·2^b·|s| + |b|) where the direct Σ (s·q + b)·x has
// γ·Σ|x|·((2^b − 1)·|s| + |b|) (γ: the accumulation's relative rounding):
// at most 3.2× (1.7 bits) more, 2.4× for centred MLX groups (b ≈ −2^(b−1)·s).
// Float accumulation order differs from the CPU reference (lane pieces, a
// butterfly over the lanes of a row, then the simdgroups in order).
//
// The _nvi kernels (integer dots) take x already quantized by quantx_<q4|q8>:
// in pieces of one 16-byte code load (P = 32 columns for q4, 16 for q8), each
// x_k ≈ dx·t_k with dx = amax/MVNI_TMAX of its piece and |t_k| ≤ MVNI_TMAX <
// 2²³, t held as three signed bytes t = hi·2¹⁶ + mid·2⁸ + lo in three planes
// (as kernels/cpu's actB, per piece instead of per row), with the piece's Σx
// and E = Σ(x − dx·t) beside it. A piece's Σ q·t is three exact integer sums
// of dp4a (4 byte products a step) and
//
//	Σ (s·q + b)·x = s·(dx·Σ q·t + c·E) + b·Σx,   c = (2^b − 1)/2,
//
// which is exact but for the rounding of x to t (and f32 rounding after the
// integer sums): |error| ≤ |s|·Σ|q − c|·|x − dx·t| ≤ |s|·(2^b/2)·P·dx/2 a
// piece (centring by c halves it), dx/2 = 1.01·2⁻²⁴·amax — f32 grade, like
// the float kernels, where int8 activations (llama.cpp's Q8_1) cost 2⁻⁸.
// An 8B decode step spends ~1.1 instead of ~7.6 lane instructions a code (q4).
// The planes are laid out so that the 4 lanes of a row (which read 4
// consecutive pieces) read one 64-byte line per load: chunk i (16 bytes) of
// piece p at byte ((p/4)·NC + i)·64 + (p%4)·16, NC = 3·P/16 chunks a piece
// (hi, mid, lo planes in order); the metadata (dx, Σx, E, 0) is a float4 a
// piece. Within a q4 piece's plane, word 2w holds the t of codes 8w, 8w+2,
// 8w+4, 8w+6 and word 2w+1 those of 8w+1, 8w+3, …, the order in which a code
// word's low and high nibbles come out of one AND each; q8 planes keep column
// order.
#include <metal_stdlib>
#include "common.h"
using namespace metal;

#define MVNV_RT 2 // rows per thread

// mvnv_grid_wait marks where a programmatic dependent launch of the kernel
// waits for the kernels before it: on GPUs that have it, cudadev's
// gridDependent turns the marker into griddepcontrol.wait (elsewhere it is a
// PTX comment, and on Metal and the interpreter nothing). What comes before
// it may read only memory those kernels do not write: the weights. The asm's
// memory clobber keeps every load after it (x) after it.
#if defined(__INGOT_PTX__)
inline void mvnv_grid_wait() { __asm__ __volatile__("// ingot:griddepcontrol.wait" ::: "memory"); }
#else
inline void mvnv_grid_wait() {}
#endif

// mvnv_sb widens one (scale, bias) pair: bf16 pairs are a word (scale in the
// low half), f16 pairs a half2, f32 pairs a float2.
inline float2 mvnv_sb(uint p) { return float2(as_type<float>(p << 16), as_type<float>(p & 0xffff0000u)); }
inline float2 mvnv_sb(half2 p) { return float2(p); }
inline float2 mvnv_sb(float2 p) { return p; }

// mvnv_m4 returns codes j0 … j0+3 of the word w as 1 + q/2^BITS.
template <int BITS>
inline float4 mvnv_m4(uint w, uint j0) {
    const uint mask = (1u << BITS) - 1;
    return float4(
        as_type<float>(0x3f800000u | (((w >> (BITS * j0)) & mask) << (23 - BITS))),
        as_type<float>(0x3f800000u | (((w >> (BITS * (j0 + 1))) & mask) << (23 - BITS))),
        as_type<float>(0x3f800000u | (((w >> (BITS * (j0 + 2))) & mask) << (23 - BITS))),
        as_type<float>(0x3f800000u | (((w >> (BITS * (j0 + 3))) & mask) << (23 - BITS))));
}

// mvnv_load issues the loads of one iteration of a lane: columns k0 + (u·lanes
// + c)·CPL for u < U, of its MVNV_RT rows (codes at byte wrow[r] of w, pairs at
// sbrow[r] of sb; GLU: row 1's of w1 and sb1), into q and ab ([U][MVNV_RT],
// flattened). Pieces past K (of the last iteration, or of none) load zeros.
template <int BITS, typename P, bool GLU>
__attribute__((always_inline)) inline void mvnv_load(
        device const uchar * w, device const P * sb, device const uchar * w1, device const P * sb1,
        thread const ulong * wrow, thread const uint * sbrow,
        uint k0, uint K, uint gshift, uint lanes, uint c,
        thread uint4 * q, thread float2 * ab) {
    constexpr uint CPL = 128 / BITS;          // codes per 16-byte load
    constexpr uint U = BITS == 4 ? 2 : 4;     // loads per row in flight
    #pragma unroll
    for (uint u = 0; u < U; u++) {
        const uint col = k0 + (u * lanes + c) * CPL;
        const bool ok = col < K;
        #pragma unroll
        for (uint r = 0; r < MVNV_RT; r++) {
            device const uchar * wr = GLU && r == 1 ? w1 : w;
            device const P * sr = GLU && r == 1 ? sb1 : sb;
            q[u * MVNV_RT + r] = ok ? *(device const uint4 *)(wr + wrow[r] + col / 8 * BITS) : uint4(0);
            ab[u * MVNV_RT + r] = ok ? mvnv_sb(sr[sbrow[r] + (col >> gshift)]) : float2(0.0f);
        }
    }
}

// mvnv_pad is column k's index in the staged x (_xs kernels): 4 floats of
// padding after every 32, so the float4s that the lanes of a row read at the
// same step (32·BITS/4 floats apart) fall in different banks. A piece (CPL
// columns from a multiple of CPL) never crosses a 32-column block, so its
// columns are at mvnv_pad(its first) + i.
inline uint mvnv_pad(uint k) { return k + (k >> 5) * 4; }

// mvnv_dot adds the iteration at k0, whose codes and pairs mvnv_load fetched,
// into acc, reading x (or its staged copy xs) for the same columns; pieces
// past K add 0.
template <int BITS, bool XS>
__attribute__((always_inline)) inline void mvnv_dot(
        device const float * x, threadgroup const float * xs,
        thread const uint4 * q, thread const float2 * ab,
        uint k0, uint K, uint lanes, uint c,
        thread float * acc) {
    constexpr uint CPL = 128 / BITS;
    constexpr uint U = BITS == 4 ? 2 : 4;
    constexpr float SCALE = float(1u << BITS);
    #pragma unroll
    for (uint u = 0; u < U; u++) {
        const uint col = k0 + (u * lanes + c) * CPL;
        const bool ok = col < K;
        device const float4 * xp = (device const float4 *)(x + col);
        threadgroup const float4 * sp = (threadgroup const float4 *)(xs + mvnv_pad(col));
        float4 xv[CPL / 4];
        float4 s4 = float4(0.0f);
        #pragma unroll
        for (uint i = 0; i < CPL / 4; i++) {
            xv[i] = !ok ? float4(0.0f) : XS ? sp[i] : xp[i];
            s4 += xv[i];
        }
        const float sx = (s4.x + s4.y) + (s4.z + s4.w);
        #pragma unroll
        for (uint r = 0; r < MVNV_RT; r++) {
            float4 d4 = float4(0.0f);
            #pragma unroll
            for (uint i = 0; i < CPL / 4; i++) {
                // codes 4i … 4i+3: word 4i/(32/BITS), from code 4i mod (32/BITS)
                const uint wd = q[u * MVNV_RT + r][i * BITS / 8];
                d4 = fma(mvnv_m4<BITS>(wd, (4 * i) % (32 / BITS)), xv[i], d4);
            }
            const float dm = (d4.x + d4.y) + (d4.z + d4.w);
            const float2 p = ab[u * MVNV_RT + r];
            acc[r] = fma(p.x * SCALE, dm - sx, fma(p.y, sx, acc[r]));
        }
    }
}


// MVNI_TMAX bounds |t| of the quantized x: hi stays within ±127 after lo and
// mid take their signed-byte share (kernels/cpu's bMaxT).
#define MVNI_TMAX 8290000

// mvni_dp4a returns c + Σ_i a_i·b_i over the four bytes of a (unsigned) and
// b (signed): PTX's dp4a (sm_61+), elsewhere four integer products.
#if defined(__INGOT_PTX__)
inline int mvni_dp4a(uint a, uint b, int c) {
    int d;
    __asm__ __volatile__("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
#else
inline int mvni_dp4a(uint a, uint b, int c) {
    const uchar4 u = as_type<uchar4>(a);
    const char4 v = as_type<char4>(b);
    return c + int(u.x) * int(v.x) + int(u.y) * int(v.y) + int(u.z) * int(v.z) + int(u.w) * int(v.w);
}
#endif

// quantx_<q4|q8>_f32: x (K, a multiple of P = 128/BITS) into the planes and
// metadata of the _nvi kernels (see the top of this file). One thread a
// column; a piece is P lanes of one simdgroup, which reduce its absmax, Σx and
// E by butterflies (every lane ends with the same bits). x = 0 pieces get dx
// = 0 (t = 0); NaN in x reaches Σx and so every output of the piece's rows.
template <int BITS>
kernel void quantx(
        constant uint  & K      [[buffer(0)]],
        device const float * x  [[buffer(1)]],
        device uchar   * planes [[buffer(2)]],
        device float4  * meta   [[buffer(3)]],
        uint k [[thread_position_in_grid]]) {
    constexpr uint P = 128 / BITS, NC = 3 * P / 16;
    const float v = k < K ? x[k] : 0.0f;
    float a = fabs(v), sx = v;
    for (uint s = 1; s < P; s <<= 1) {
        a = max(a, simd_shuffle_xor(a, ushort(s)));
        sx += simd_shuffle_xor(sx, ushort(s));
    }
    // t = v/dx rounded to nearest: v·inv is within ~1 of v/dx (|v/dx| ≤
    // 2²³, two f32 roundings), so one step toward v after the first rounding
    // leaves |v − dx·t| ≤ dx/2 (the residual is one fma: dx·f is exact in it).
    const float inv = a > 0.0f ? float(MVNI_TMAX) / a : 0.0f;
    const float dx = a / float(MVNI_TMAX);
    float f = rint(v * inv);
    f = f == f ? clamp(f, -float(MVNI_TMAX), float(MVNI_TMAX)) : 0.0f;
    float e = fma(-dx, f, v);
    if (fabs(e) > 0.5f * dx && fabs(f) < float(MVNI_TMAX)) {
        f += e > 0.0f ? 1.0f : -1.0f;
        e = fma(-dx, f, v);
    }
    const int t = int(f);
    for (uint s = 1; s < P; s <<= 1) {
        e += simd_shuffle_xor(e, ushort(s));
    }
    if (k >= K) {
        return;
    }
    const int lo = (t << 24) >> 24, t1 = (t - lo) >> 8;
    const int mid = (t1 << 24) >> 24, hi = (t1 - mid) >> 8;
    const uint p = k / P, j = k % P;
    const uint b = BITS == 4 ? (2 * (j / 8) + j % 2) * 4 + (j % 8) / 2 : j; // byte in the piece's plane
    device uchar * base = planes + (p / 4) * NC * 64 + (p % 4) * 16 + (b / 16) * 64 + b % 16;
    base[0] = uchar(hi);
    base[(P / 16) * 64] = uchar(mid);
    base[2 * (P / 16) * 64] = uchar(lo);
    if (j == 0) {
        meta[p] = float4(dx, sx, e, 0.0f);
    }
}

typedef decltype(quantx<4>) quantx_t;
template [[host_name("quantx_q4_f32")]] kernel quantx_t quantx<4>;
template [[host_name("quantx_q8_f32")]] kernel quantx_t quantx<8>;

// mvni_dot adds the iteration at k0, whose codes and pairs mvnv_load fetched,
// into acc, from the quantized x (planes, meta) of the same columns; pieces
// past K add 0.
template <int BITS>
__attribute__((always_inline)) inline void mvni_dot(
        device const uchar * planes, device const float4 * meta,
        thread const uint4 * q, thread const float2 * ab,
        uint k0, uint K, uint lanes, uint c,
        thread float * acc) {
    constexpr uint CPL = 128 / BITS;
    constexpr uint U = BITS == 4 ? 2 : 4;
    constexpr uint NC = 3 * CPL / 16;
    constexpr float C = float((1u << BITS) - 1) * 0.5f;
    #pragma unroll
    for (uint u = 0; u < U; u++) {
        const uint col = k0 + (u * lanes + c) * CPL;
        const bool ok = col < K;
        const uint p = col / CPL;
        device const uint4 * xp = (device const uint4 *)(planes + (p / 4) * NC * 64 + (p % 4) * 16);
        uint4 xc[NC];
        #pragma unroll
        for (uint i = 0; i < NC; i++) {
            xc[i] = ok ? xp[4 * i] : uint4(0);
        }
        const float4 mt = ok ? meta[p] : float4(0.0f);
        const float ce = C * mt.z;
        #pragma unroll
        for (uint r = 0; r < MVNV_RT; r++) {
            const uint4 w = q[u * MVNV_RT + r];
            int sh = 0, sm = 0, sl = 0;
            #pragma unroll
            for (uint i = 0; i < 4; i++) {
                if (BITS == 4) { // plane words 2i (even codes) and 2i+1 (odd) of chunks 2π, 2π+1
                    const uint ev = w[i] & 0x0f0f0f0fu, od = (w[i] >> 4) & 0x0f0f0f0fu;
                    const uint c0 = i / 2, j0 = (2 * i) % 4;
                    sh = mvni_dp4a(od, xc[c0][j0 + 1], mvni_dp4a(ev, xc[c0][j0], sh));
                    sm = mvni_dp4a(od, xc[2 + c0][j0 + 1], mvni_dp4a(ev, xc[2 + c0][j0], sm));
                    sl = mvni_dp4a(od, xc[4 + c0][j0 + 1], mvni_dp4a(ev, xc[4 + c0][j0], sl));
                } else {
                    sh = mvni_dp4a(w[i], xc[0][i], sh);
                    sm = mvni_dp4a(w[i], xc[1][i], sm);
                    sl = mvni_dp4a(w[i], xc[2][i], sl);
                }
            }
            // Σ q·t = sh·2¹⁶ + sm·2⁸ + sl: sm·2⁸ + sl fits an int, the sum a long
            const float T = float(long(sh) * 65536 + long(sm * 256 + sl));
            const float2 pr = ab[u * MVNV_RT + r];
            acc[r] = fma(pr.x, fma(mt.x, T, ce), fma(pr.y, mt.y, acc[r]));
        }
    }
}

template <int BITS, typename P, bool XS, bool GLU, bool XI>
kernel void matvec_q_nv(
        constant matvec_nv_args & args [[buffer(0)]],
        device const float   * x      [[buffer(1)]],
        device const uchar   * w0     [[buffer(2)]],
        device const uchar   * w1     [[buffer(3)]],
        device const uchar   * w2     [[buffer(4)]],
        device const uchar   * w3     [[buffer(5)]],
        device const P       * sb0    [[buffer(6)]],
        device const P       * sb1    [[buffer(7)]],
        device const P       * sb2    [[buffer(8)]],
        device const P       * sb3    [[buffer(9)]],
        device       float   * y0     [[buffer(10)]],
        device       float   * y1     [[buffer(11)]],
        device       float   * y2     [[buffer(12)]],
        device       float   * y3     [[buffer(13)]],
        device const float4  * xmeta  [[buffer(14)]],
        threadgroup  float   * part   [[threadgroup(0)]],
        threadgroup  float   * xs     [[threadgroup(1)]],
        uint   tg   [[threadgroup_position_in_grid]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort nsg  [[simdgroups_per_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    constexpr uint CPL = 128 / BITS;
    constexpr uint U = BITS == 4 ? 2 : 4;
    // The matrix of this threadgroup (uniform over it). Every field is read
    // up front: selecting among loads would make clang select their
    // addresses, and put the arguments in local memory.
    const uint tg1 = args.tg1, tg2 = args.tg2, tg3 = args.tg3;
    const uint n0 = args.n0, n1 = args.n1, n2 = args.n2, n3 = args.n3;
    const bool m1 = tg >= tg1, m2 = tg >= tg2, m3 = tg >= tg3;
    const uint t0 = m3 ? tg3 : m2 ? tg2 : m1 ? tg1 : 0;
    const uint N = m3 ? n3 : m2 ? n2 : m1 ? n1 : n0;
    device const uchar * w = m3 ? w3 : m2 ? w2 : m1 ? w1 : w0;
    device const P * sb = m3 ? sb3 : m2 ? sb2 : m1 ? sb1 : sb0;
    device float * y = m3 ? y3 : m2 ? y2 : m1 ? y1 : y0;
    const uint K = args.K;
    const uint lanes = 1u << args.lane_shift;  // lanes per row
    const uint rl = 32u >> args.lane_shift;    // row slots per simdgroup
    const uint c = lane & (lanes - 1), rs = lane >> args.lane_shift;
    const uint rows = rl * MVNV_RT;            // rows per threadgroup (GLU: rl of each matrix)
    const uint r0 = (tg - t0) * (GLU ? rl : rows);
    const uint rb = K / 8 * BITS, ng = K >> args.group_shift;
    ulong wrow[MVNV_RT];
    uint  sbrow[MVNV_RT];
    float acc[MVNV_RT];
    #pragma unroll
    for (uint r = 0; r < MVNV_RT; r++) {
        // rows past N read row N−1, and are not written; GLU: a lane's rows
        // are row r0 + rs of W_0 and of W_1
        const uint n = min(r0 + rs + (GLU ? 0 : rl * r), N - 1);
        wrow[r] = (ulong)n * rb;
        sbrow[r] = n * ng;
        acc[r] = 0.0f;
    }
    // The first iteration's loads go out before x is staged, and each
    // iteration's loads before the previous one's arithmetic: a lane keeps
    // two iterations' codes in flight (a decode mat-vec lasts a few memory
    // latencies, so what waits for what decides its time). Every iteration
    // runs the one guarded body: on the H100 a second, unguarded copy of it
    // (or a loop unrolled by two) made the q4 kernel slower, not faster.
    const uint step = lanes * U * CPL; // columns per iteration
    const uint stride = nsg * step;    // between a simdgroup's iterations
    uint k0 = sg * step;
    uint4  q[U * MVNV_RT], q1[U * MVNV_RT];
    float2 ab[U * MVNV_RT], ab1[U * MVNV_RT];
    mvnv_load<BITS, P, GLU>(w, sb, w1, sb1, wrow, sbrow, k0, K, args.group_shift, lanes, c, q, ab);
    mvnv_grid_wait(); // the weights' first loads go out while the kernel before ends
    if (XS) { // x (K floats, K a multiple of 4) into xs, 8 float4 loads in flight a thread
        const uint n4 = K / 4, ntg = nsg * 32, t = sg * 32 + lane;
        device const float4 * x4 = (device const float4 *)x;
        for (uint i0 = t; i0 < n4; i0 += 8 * ntg) {
            float4 xv[8];
            #pragma unroll
            for (uint u = 0; u < 8; u++) {
                xv[u] = i0 + u * ntg < n4 ? x4[i0 + u * ntg] : float4(0.0f);
            }
            #pragma unroll
            for (uint u = 0; u < 8; u++) {
                if (i0 + u * ntg < n4) {
                    *(threadgroup float4 *)(xs + mvnv_pad(4 * (i0 + u * ntg))) = xv[u];
                }
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (; k0 < K; k0 += stride) { // q, ab hold iteration k0
        mvnv_load<BITS, P, GLU>(w, sb, w1, sb1, wrow, sbrow, k0 + stride, K, args.group_shift, lanes, c, q1, ab1);
        if (XI) {
            mvni_dot<BITS>((device const uchar *)x, xmeta, q, ab, k0, K, lanes, c, acc);
        } else {
            mvnv_dot<BITS, XS>(x, xs, q, ab, k0, K, lanes, c, acc);
        }
        #pragma unroll
        for (uint i = 0; i < U * MVNV_RT; i++) {
            q[i] = q1[i];
            ab[i] = ab1[i];
        }
    }
    // Sum the lanes of each row: a butterfly over the low lane bits.
    #pragma unroll
    for (uint r = 0; r < MVNV_RT; r++) {
        for (uint s = 1; s < lanes; s <<= 1) {
            acc[r] += simd_shuffle_xor(acc[r], ushort(s));
        }
    }
    if (nsg == 1) {
        if (c == 0) {
            if (GLU) {
                if (r0 + rs < N) {
                    y[r0 + rs] = ingot_act(args.act, acc[0]) * acc[1];
                }
            } else {
                #pragma unroll
                for (uint r = 0; r < MVNV_RT; r++) {
                    const uint n = r0 + rs + rl * r;
                    if (n < N) {
                        y[n] = acc[r];
                    }
                }
            }
        }
        return;
    }
    // Sum the simdgroups' partials in order (GLU: W_0's rows at [0, rl), W_1's
    // at [rl, 2·rl) of each simdgroup's part).
    if (c == 0) {
        #pragma unroll
        for (uint r = 0; r < MVNV_RT; r++) {
            part[sg * rows + rs + rl * r] = acc[r];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = sg * 32 + lane; i < (GLU ? rl : rows); i += nsg * 32) {
        float s = part[i];
        for (uint j = 1; j < nsg; j++) {
            s += part[j * rows + i];
        }
        if (GLU) {
            float u = part[rl + i];
            for (uint j = 1; j < nsg; j++) {
                u += part[j * rows + rl + i];
            }
            s = ingot_act(args.act, s) * u;
        }
        if (r0 + i < N) {
            y[r0 + i] = s;
        }
    }
}

typedef decltype(matvec_q_nv<4, uint, false, false, false>) matvec_nv_q4_bf16sb_t;
template [[host_name("matvec_q4_f32_nv_bf16sb")]] kernel matvec_nv_q4_bf16sb_t matvec_q_nv<4, uint, false, false, false>;
typedef decltype(matvec_q_nv<4, half2, false, false, false>) matvec_nv_q4_f16sb_t;
template [[host_name("matvec_q4_f32_nv_f16sb")]] kernel matvec_nv_q4_f16sb_t matvec_q_nv<4, half2, false, false, false>;
typedef decltype(matvec_q_nv<4, float2, false, false, false>) matvec_nv_q4_f32sb_t;
template [[host_name("matvec_q4_f32_nv_f32sb")]] kernel matvec_nv_q4_f32sb_t matvec_q_nv<4, float2, false, false, false>;
typedef decltype(matvec_q_nv<8, uint, false, false, false>) matvec_nv_q8_bf16sb_t;
template [[host_name("matvec_q8_f32_nv_bf16sb")]] kernel matvec_nv_q8_bf16sb_t matvec_q_nv<8, uint, false, false, false>;
typedef decltype(matvec_q_nv<8, half2, false, false, false>) matvec_nv_q8_f16sb_t;
template [[host_name("matvec_q8_f32_nv_f16sb")]] kernel matvec_nv_q8_f16sb_t matvec_q_nv<8, half2, false, false, false>;
typedef decltype(matvec_q_nv<8, float2, false, false, false>) matvec_nv_q8_f32sb_t;
template [[host_name("matvec_q8_f32_nv_f32sb")]] kernel matvec_nv_q8_f32sb_t matvec_q_nv<8, float2, false, false, false>;
typedef decltype(matvec_q_nv<4, uint, true, false, false>) matvec_nv_q4_bf16sb_xs_t;
template [[host_name("matvec_q4_f32_nv_bf16sb_xs")]] kernel matvec_nv_q4_bf16sb_xs_t matvec_q_nv<4, uint, true, false, false>;
typedef decltype(matvec_q_nv<4, half2, true, false, false>) matvec_nv_q4_f16sb_xs_t;
template [[host_name("matvec_q4_f32_nv_f16sb_xs")]] kernel matvec_nv_q4_f16sb_xs_t matvec_q_nv<4, half2, true, false, false>;
typedef decltype(matvec_q_nv<4, float2, true, false, false>) matvec_nv_q4_f32sb_xs_t;
template [[host_name("matvec_q4_f32_nv_f32sb_xs")]] kernel matvec_nv_q4_f32sb_xs_t matvec_q_nv<4, float2, true, false, false>;
typedef decltype(matvec_q_nv<8, uint, true, false, false>) matvec_nv_q8_bf16sb_xs_t;
template [[host_name("matvec_q8_f32_nv_bf16sb_xs")]] kernel matvec_nv_q8_bf16sb_xs_t matvec_q_nv<8, uint, true, false, false>;
typedef decltype(matvec_q_nv<8, half2, true, false, false>) matvec_nv_q8_f16sb_xs_t;
template [[host_name("matvec_q8_f32_nv_f16sb_xs")]] kernel matvec_nv_q8_f16sb_xs_t matvec_q_nv<8, half2, true, false, false>;
typedef decltype(matvec_q_nv<8, float2, true, false, false>) matvec_nv_q8_f32sb_xs_t;
template [[host_name("matvec_q8_f32_nv_f32sb_xs")]] kernel matvec_nv_q8_f32sb_xs_t matvec_q_nv<8, float2, true, false, false>;
typedef decltype(matvec_q_nv<4, uint, false, true, false>) matvec_nv_q4_bf16sb_glu_t;
template [[host_name("matvec_q4_f32_nv_bf16sb_glu")]] kernel matvec_nv_q4_bf16sb_glu_t matvec_q_nv<4, uint, false, true, false>;
typedef decltype(matvec_q_nv<4, half2, false, true, false>) matvec_nv_q4_f16sb_glu_t;
template [[host_name("matvec_q4_f32_nv_f16sb_glu")]] kernel matvec_nv_q4_f16sb_glu_t matvec_q_nv<4, half2, false, true, false>;
typedef decltype(matvec_q_nv<4, float2, false, true, false>) matvec_nv_q4_f32sb_glu_t;
template [[host_name("matvec_q4_f32_nv_f32sb_glu")]] kernel matvec_nv_q4_f32sb_glu_t matvec_q_nv<4, float2, false, true, false>;
typedef decltype(matvec_q_nv<8, uint, false, true, false>) matvec_nv_q8_bf16sb_glu_t;
template [[host_name("matvec_q8_f32_nv_bf16sb_glu")]] kernel matvec_nv_q8_bf16sb_glu_t matvec_q_nv<8, uint, false, true, false>;
typedef decltype(matvec_q_nv<8, half2, false, true, false>) matvec_nv_q8_f16sb_glu_t;
template [[host_name("matvec_q8_f32_nv_f16sb_glu")]] kernel matvec_nv_q8_f16sb_glu_t matvec_q_nv<8, half2, false, true, false>;
typedef decltype(matvec_q_nv<8, float2, false, true, false>) matvec_nv_q8_f32sb_glu_t;
template [[host_name("matvec_q8_f32_nv_f32sb_glu")]] kernel matvec_nv_q8_f32sb_glu_t matvec_q_nv<8, float2, false, true, false>;
typedef decltype(matvec_q_nv<4, uint, true, true, false>) matvec_nv_q4_bf16sb_xs_glu_t;
template [[host_name("matvec_q4_f32_nv_bf16sb_xs_glu")]] kernel matvec_nv_q4_bf16sb_xs_glu_t matvec_q_nv<4, uint, true, true, false>;
typedef decltype(matvec_q_nv<4, half2, true, true, false>) matvec_nv_q4_f16sb_xs_glu_t;
template [[host_name("matvec_q4_f32_nv_f16sb_xs_glu")]] kernel matvec_nv_q4_f16sb_xs_glu_t matvec_q_nv<4, half2, true, true, false>;
typedef decltype(matvec_q_nv<4, float2, true, true, false>) matvec_nv_q4_f32sb_xs_glu_t;
template [[host_name("matvec_q4_f32_nv_f32sb_xs_glu")]] kernel matvec_nv_q4_f32sb_xs_glu_t matvec_q_nv<4, float2, true, true, false>;
typedef decltype(matvec_q_nv<8, uint, true, true, false>) matvec_nv_q8_bf16sb_xs_glu_t;
template [[host_name("matvec_q8_f32_nv_bf16sb_xs_glu")]] kernel matvec_nv_q8_bf16sb_xs_glu_t matvec_q_nv<8, uint, true, true, false>;
typedef decltype(matvec_q_nv<8, half2, true, true, false>) matvec_nv_q8_f16sb_xs_glu_t;
template [[host_name("matvec_q8_f32_nv_f16sb_xs_glu")]] kernel matvec_nv_q8_f16sb_xs_glu_t matvec_q_nv<8, half2, true, true, false>;
typedef decltype(matvec_q_nv<8, float2, true, true, false>) matvec_nv_q8_f32sb_xs_glu_t;
template [[host_name("matvec_q8_f32_nv_f32sb_xs_glu")]] kernel matvec_nv_q8_f32sb_xs_glu_t matvec_q_nv<8, float2, true, true, false>;
typedef decltype(matvec_q_nv<4, uint, false, false, true>) matvec_nvi_q4_bf16sb_t;
template [[host_name("matvec_q4_f32_nvi_bf16sb")]] kernel matvec_nvi_q4_bf16sb_t matvec_q_nv<4, uint, false, false, true>;
typedef decltype(matvec_q_nv<4, half2, false, false, true>) matvec_nvi_q4_f16sb_t;
template [[host_name("matvec_q4_f32_nvi_f16sb")]] kernel matvec_nvi_q4_f16sb_t matvec_q_nv<4, half2, false, false, true>;
typedef decltype(matvec_q_nv<4, float2, false, false, true>) matvec_nvi_q4_f32sb_t;
template [[host_name("matvec_q4_f32_nvi_f32sb")]] kernel matvec_nvi_q4_f32sb_t matvec_q_nv<4, float2, false, false, true>;
typedef decltype(matvec_q_nv<8, uint, false, false, true>) matvec_nvi_q8_bf16sb_t;
template [[host_name("matvec_q8_f32_nvi_bf16sb")]] kernel matvec_nvi_q8_bf16sb_t matvec_q_nv<8, uint, false, false, true>;
typedef decltype(matvec_q_nv<8, half2, false, false, true>) matvec_nvi_q8_f16sb_t;
template [[host_name("matvec_q8_f32_nvi_f16sb")]] kernel matvec_nvi_q8_f16sb_t matvec_q_nv<8, half2, false, false, true>;
typedef decltype(matvec_q_nv<8, float2, false, false, true>) matvec_nvi_q8_f32sb_t;
template [[host_name("matvec_q8_f32_nvi_f32sb")]] kernel matvec_nvi_q8_f32sb_t matvec_q_nv<8, float2, false, false, true>;
typedef decltype(matvec_q_nv<4, uint, false, true, true>) matvec_nvi_q4_bf16sb_glu_t;
template [[host_name("matvec_q4_f32_nvi_bf16sb_glu")]] kernel matvec_nvi_q4_bf16sb_glu_t matvec_q_nv<4, uint, false, true, true>;
typedef decltype(matvec_q_nv<4, half2, false, true, true>) matvec_nvi_q4_f16sb_glu_t;
template [[host_name("matvec_q4_f32_nvi_f16sb_glu")]] kernel matvec_nvi_q4_f16sb_glu_t matvec_q_nv<4, half2, false, true, true>;
typedef decltype(matvec_q_nv<4, float2, false, true, true>) matvec_nvi_q4_f32sb_glu_t;
template [[host_name("matvec_q4_f32_nvi_f32sb_glu")]] kernel matvec_nvi_q4_f32sb_glu_t matvec_q_nv<4, float2, false, true, true>;
typedef decltype(matvec_q_nv<8, uint, false, true, true>) matvec_nvi_q8_bf16sb_glu_t;
template [[host_name("matvec_q8_f32_nvi_bf16sb_glu")]] kernel matvec_nvi_q8_bf16sb_glu_t matvec_q_nv<8, uint, false, true, true>;
typedef decltype(matvec_q_nv<8, half2, false, true, true>) matvec_nvi_q8_f16sb_glu_t;
template [[host_name("matvec_q8_f32_nvi_f16sb_glu")]] kernel matvec_nvi_q8_f16sb_glu_t matvec_q_nv<8, half2, false, true, true>;
typedef decltype(matvec_q_nv<8, float2, false, true, true>) matvec_nvi_q8_f32sb_glu_t;
template [[host_name("matvec_q8_f32_nvi_f32sb_glu")]] kernel matvec_nvi_q8_f32sb_glu_t matvec_q_nv<8, float2, false, true, true>;
