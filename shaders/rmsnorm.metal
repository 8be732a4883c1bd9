// rmsnorm.metal: RMS normalization of rows.
//
// rmsnorm_f32: y[r,:] = w[:] · (x[r,:] · 1/sqrt(mean(x[r,:]²) + eps)) for every
// n-wide row r of x (n = len(w); a 1-D view of q (L·H·Dh) with w (Dh) is the
// per-head Qwen3 q/k norm). x and y may alias: each thread writes only the
// elements it read, after the row's reduction.
//
// Grid: one threadgroup per row; ntg threads (a multiple of 32, ≤ 1024) stride
// the row. Reduction: each thread sums its squares, simd_sum folds the 32 lanes,
// lane 0 of each simdgroup writes its partial to threadgroup memory, and every
// simdgroup then re-reduces the ≤ 32 partials (so no second barrier is needed).
// Numerics: float accumulation (the CPU reference uses float64; the difference
// is O(n·2⁻²⁴) relative); 1/sqrt is precise::sqrt so fast math cannot change it.
#include <metal_stdlib>
#include "common.h"
using namespace metal;

kernel void rmsnorm_f32(
        constant rmsnorm_args & args [[buffer(0)]],
        device const float    * x    [[buffer(1)]],
        device const float    * w    [[buffer(2)]],
        device       float    * y    [[buffer(3)]],
        threadgroup  float    * part [[threadgroup(0)]],
        uint   row  [[threadgroup_position_in_grid]],
        ushort tid  [[thread_position_in_threadgroup]],
        ushort ntg  [[threads_per_threadgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]],
        ushort nsg  [[simdgroups_per_threadgroup]]) {
    const uint n = args.n;
    device const float * xr = x + (ulong)row * n;
    device       float * yr = y + (ulong)row * n;
    float ss = 0.0f;
    for (uint i = tid; i < n; i += ntg) {
        const float v = xr[i];
        ss += v * v;
    }
    ss = simd_sum(ss);
    if (lane == 0) {
        part[sg] = ss;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    ss = simd_sum(lane < nsg ? part[lane] : 0.0f);
    const float inv = 1.0f / precise::sqrt(ss / float(n) + args.eps);
    for (uint i = tid; i < n; i += ntg) {
        yr[i] = w[i] * (xr[i] * inv);
    }
}
