// simd.metal: SIMD-group and quad collectives.
#include <metal_stdlib>
using namespace metal;

// simd_scan_u32: per thread, 8 results of collectives that are defined for
// partial simdgroups (every existing lane takes part).
kernel void simd_scan_u32(
        device const uint * x   [[buffer(0)]],
        device       uint * out [[buffer(1)]],
        uint gid  [[thread_position_in_grid]],
        uint lane [[thread_index_in_simdgroup]]) {
    uint v = x[gid];
    device uint * o = out + 8 * gid;
    o[0] = simd_prefix_inclusive_sum(v);
    o[1] = simd_prefix_exclusive_sum(v);
    o[2] = simd_max(v);
    o[3] = simd_min(v);
    o[4] = simd_broadcast_first(v);
    o[5] = popcount((uint)(ulong)simd_ballot((v & 1) != 0));
    o[6] = simd_all(v < 1000) ? 1 : 0;
    o[7] = simd_any(v == 7) ? 1 : 0;
}

// simd_shuffle_f32: shuffles; dispatch with whole simdgroups only.
kernel void simd_shuffle_f32(
        device const float * x   [[buffer(0)]],
        device       float * out [[buffer(1)]],
        uint2 gid  [[thread_position_in_grid]],
        uint2 ng   [[threads_per_grid]],
        ushort lane [[thread_index_in_simdgroup]]) {
    uint i = gid.y * ng.x + gid.x;
    float v = x[i];
    device float * o = out + 8 * i;
    o[0] = simd_shuffle_down(v, 1);
    o[1] = simd_shuffle_up(v, 3);
    o[2] = simd_shuffle_xor(v, 5);
    o[3] = simd_shuffle(v, (ushort)(31 - lane));
    o[4] = simd_broadcast(v, 7);
    o[5] = quad_sum(v);
    o[6] = quad_shuffle(v, 2);
    o[7] = simd_sum(v);
}

// simd_vec_f32: collectives on vector types.
kernel void simd_vec_f32(
        device const float4 * x   [[buffer(0)]],
        device       float4 * out [[buffer(1)]],
        uint gid [[thread_position_in_grid]]) {
    float4 v = x[gid];
    out[2 * gid + 0] = simd_sum(v);
    out[2 * gid + 1] = simd_shuffle_xor(v, 16);
}
