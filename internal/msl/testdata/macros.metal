// macros.metal: kernels instantiated by macros, a shared header, helper
// functions with barriers and threadgroup arrays, and OpenCL keywords used
// as names.
#include <metal_stdlib>
#include "common.h"
using namespace metal;

// block_sum sums v over the threadgroup (helper with its own threadgroup array).
template <typename T>
T block_sum(T v, ushort tid, ushort ntg) {
    threadgroup T partial[32];
    v = simd_sum(v);
    if (tid % 32 == 0) {
        partial[tid / 32] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    T total = 0;
    for (ushort i = 0; i < (ntg + 31) / 32; i++) {
        total += partial[i];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return total;
}

template <typename T>
kernel void scale_by_sum(
        constant scale_args & args [[buffer(0)]],
        device const T      * x    [[buffer(1)]],
        device       T      * y    [[buffer(2)]],
        ushort tid [[thread_index_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    T local = tid < args.n ? x[tid] : T(0);
    T global = block_sum(local, tid, ntg);
    T again = block_sum(local * T(2), tid, ntg);
    if (tid < args.n) {
        y[tid] = local * T(args.s) / global + again * T(0);
    }
}

#define INSTANTIATE(name, T) \
    template [[host_name(#name)]] kernel void scale_by_sum<T>( \
        constant scale_args &, device const T *, device T *, ushort, ushort);

INSTANTIATE(scale_f32, float)
INSTANTIATE(scale_f16, half)
