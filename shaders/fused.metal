// fused.metal: small ops of a decoder layer fused, so that a decode step is
// fewer launches (each small kernel costs ~5 µs back to back on an H100, most
// of it fixed cost, not work).
//
// add_rmsnorm_f32: for every n-wide row r: x[r] ← x[r] + h[r], then
//     y[r] = w · (x[r] · 1/sqrt(mean(x[r]²) + eps))
// (the residual add and the next RMSNorm of a decoder layer); rmsnorm_vec_f32
// is the same without the add (x unchanged). n is a multiple of 4 and at most
// 4·4·ntg; x, h, w, y are 16-byte aligned (the host checks). y may alias h:
// each thread writes only the elements it read.
// Grid: one threadgroup per row of ntg threads (a multiple of 32, ≤ 1024);
// thread t holds float4s t, t + ntg, … (≤ 4) of x, h and w in registers from
// the load to the store, so the row is read once and every load (w's too) is
// issued before the first is used. Reduction as rmsnorm_f32's: simd_sum, partials in
// threadgroup memory, each simdgroup re-reduces them. Numerics: float sums
// (per float4, then per thread in order, then the tree); 1/sqrt precise.
//
// rope_store_f32, rope_store_f16_f32: rope_neox_f32 on every head of q and k
// (in place), then the rotated k and v rows stored into the caches kc, vc (row pos + l)
// — converted to half, rounding to nearest even, for an f16 cache — replacing
// two RoPE and two CopyRows launches. Grid: (heads + 2·kv_heads, L)
// threadgroups: q heads, then k heads, then v heads; threads stride the
// rotary half (k: and the unrotated tail past 2·half_rot; v: the head).
// Numerics: exactly rope_neox_f32's and copy_f16_f32's.
#include <metal_stdlib>
#include "common.h"
using namespace metal;

#define ANR_PER 4 // float4s per thread at most

template <bool ADD>
kernel void add_rmsnorm(
        constant rmsnorm_args & args [[buffer(0)]],
        device       float    * x    [[buffer(1)]],
        device const float    * h    [[buffer(2)]],
        device const float    * w    [[buffer(3)]],
        device       float    * y    [[buffer(4)]],
        threadgroup  float    * part [[threadgroup(0)]],
        uint   row  [[threadgroup_position_in_grid]],
        ushort tid  [[thread_position_in_threadgroup]],
        ushort ntg  [[threads_per_threadgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]],
        ushort nsg  [[simdgroups_per_threadgroup]]) {
    const uint n4 = args.n / 4;
    device float4 * xr = (device float4 *)(x + (ulong)row * args.n);
    device const float4 * hr = (device const float4 *)(h + (ulong)row * args.n);
    device float4 * yr = (device float4 *)(y + (ulong)row * args.n);
    device const float4 * w4 = (device const float4 *)w;
    float4 v[ANR_PER], hv[ANR_PER], wv[ANR_PER];
    #pragma unroll
    for (uint k = 0; k < ANR_PER; k++) {
        const uint i = tid + k * ntg;
        v[k] = i < n4 ? xr[i] : float4(0.0f);
        hv[k] = ADD && i < n4 ? hr[i] : float4(0.0f);
        wv[k] = i < n4 ? w4[i] : float4(0.0f);
    }
    #pragma unroll
    for (uint k = 0; k < ANR_PER; k++) {
        v[k] += hv[k];
    }
    float ss = 0.0f;
    #pragma unroll
    for (uint k = 0; k < ANR_PER; k++) {
        const uint i = tid + k * ntg;
        if (ADD && i < n4) {
            xr[i] = v[k];
        }
        ss += (v[k].x * v[k].x + v[k].y * v[k].y) + (v[k].z * v[k].z + v[k].w * v[k].w);
    }
    ss = simd_sum(ss);
    if (lane == 0) {
        part[sg] = ss;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    ss = simd_sum(lane < nsg ? part[lane] : 0.0f);
    const float inv = 1.0f / precise::sqrt(ss / float(args.n) + args.eps);
    #pragma unroll
    for (uint k = 0; k < ANR_PER; k++) {
        const uint i = tid + k * ntg;
        if (i < n4) {
            yr[i] = wv[k] * (v[k] * inv);
        }
    }
}

typedef decltype(add_rmsnorm<true>) add_rmsnorm_t;
template [[host_name("add_rmsnorm_f32")]] kernel add_rmsnorm_t add_rmsnorm<true>;
template [[host_name("rmsnorm_vec_f32")]] kernel add_rmsnorm_t add_rmsnorm<false>;

template <typename KV>
kernel void rope_store(
        constant rope_store_args & args     [[buffer(0)]],
        constant float           * inv_freq [[buffer(1)]],
        device   float           * q        [[buffer(2)]],
        device   float           * k        [[buffer(3)]],
        device const float       * v        [[buffer(4)]],
        device   KV              * kc       [[buffer(5)]],
        device   KV              * vc       [[buffer(6)]],
        uint2   tg  [[threadgroup_position_in_grid]],
        ushort2 tpt [[threads_per_threadgroup]],
        ushort  tid [[thread_index_in_threadgroup]]) {
    const uint ntg = tpt.x;
    const uint Dh = args.head_dim, half_rot = args.half_rot, H = args.heads, Hkv = args.kv_heads;
    const uint l = tg.y, hx = tg.x;
    const uint kvw = Hkv * Dh;
    const ulong crow = (ulong)(args.pos + l) * kvw; // the cache row
    if (hx >= H + Hkv) { // v head g: copy
        const uint g = hx - H - Hkv;
        device const float * vh = v + (ulong)l * kvw + g * Dh;
        for (uint j = tid; j < Dh; j += ntg) {
            vc[crow + g * Dh + j] = KV(vh[j]);
        }
        return;
    }
    const bool isk = hx >= H;
    const uint g = isk ? hx - H : hx;
    device float * xh = isk ? k + (ulong)l * kvw + g * Dh : q + ((ulong)l * H + g) * Dh;
    const float p = float(args.pos + l);
    for (uint j = tid; j < half_rot; j += ntg) {
        const float a = p * inv_freq[j];
        const float c = precise::cos(a) * args.scale, s = precise::sin(a) * args.scale;
        const float x0 = xh[j], x1 = xh[j + half_rot];
        const float y0 = x0 * c - x1 * s, y1 = x1 * c + x0 * s;
        xh[j] = y0;
        xh[j + half_rot] = y1;
        if (isk) {
            kc[crow + g * Dh + j] = KV(y0);
            kc[crow + g * Dh + j + half_rot] = KV(y1);
        }
    }
    if (isk) { // the unrotated tail of a partial rotary
        for (uint j = 2 * half_rot + tid; j < Dh; j += ntg) {
            kc[crow + g * Dh + j] = KV(xh[j]);
        }
    }
}

typedef decltype(rope_store<float>) rope_store_t;
template [[host_name("rope_store_f32")]] kernel rope_store_t rope_store<float>;
typedef decltype(rope_store<half>) rope_store_half_t;
template [[host_name("rope_store_f16_f32")]] kernel rope_store_half_t rope_store<half>;

// add_scaled_f32: y[i] += c·x[i] for i < n (unary_args; c the scale): a
// mixture-of-experts layer's weighted sum of its experts' outputs. Grid as
// elementwise.metal's: ⌈n/256⌉ threadgroups of 256 threads, thread i element i.
// Numerics: the product rounded, then the sum (no fma: fast math on Apple
// GPUs may contract it; the PTX is built without contraction).
kernel void add_scaled_f32(
        constant unary_args & args [[buffer(0)]],
        device const float  * x    [[buffer(1)]],
        device       float  * y    [[buffer(2)]],
        uint i [[thread_position_in_grid]]) {
    if (i < args.n) {
        y[i] = y[i] + args.c * x[i];
    }
}
