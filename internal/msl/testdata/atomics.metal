// atomics.metal: device and threadgroup atomics.
#include <metal_stdlib>
using namespace metal;

// histogram_u32: counts[x[i] % nbins] += 1 for every i, with per-threadgroup
// counts in threadgroup memory merged into device memory; total counts the
// elements and sum accumulates them as floats.
kernel void histogram_u32(
        device const uint   * x      [[buffer(0)]],
        device atomic_uint  * counts [[buffer(1)]],
        device atomic_float * sum    [[buffer(2)]],
        constant uint       & n      [[buffer(3)]],
        constant uint       & nbins  [[buffer(4)]],
        uint   gid [[thread_position_in_grid]],
        ushort tid [[thread_index_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    threadgroup atomic_uint local[16];
    for (uint b = tid; b < nbins; b += ntg) {
        atomic_store_explicit(&local[b], 0u, memory_order_relaxed);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (gid < n) {
        atomic_fetch_add_explicit(&local[x[gid] % nbins], 1u, memory_order_relaxed);
        atomic_fetch_add_explicit(sum, 1.0f, memory_order_relaxed);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint b = tid; b < nbins; b += ntg) {
        atomic_fetch_add_explicit(&counts[b], atomic_load_explicit(&local[b], memory_order_relaxed), memory_order_relaxed);
    }
}
