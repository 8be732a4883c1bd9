// reduce.metal: row sums with simd_sum and a threadgroup reduction.
#include <metal_stdlib>
using namespace metal;

struct reduce_args {
    uint n;
};

// reduce_sum_f32: y[row] = sum(x[row*n : (row+1)*n]). One threadgroup per row;
// threads stride the row, simd_sum per simdgroup, then simdgroup 0 sums the
// partials from threadgroup memory.
kernel void reduce_sum_f32(
        constant reduce_args & args [[buffer(0)]],
        device const float   * x    [[buffer(1)]],
        device       float   * y    [[buffer(2)]],
        uint   row  [[threadgroup_position_in_grid]],
        ushort tid  [[thread_position_in_threadgroup]],
        ushort ntg  [[threads_per_threadgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]],
        ushort nsg  [[simdgroups_per_threadgroup]]) {
    threadgroup float partial[32];
    float s = 0.0f;
    for (uint i = tid; i < args.n; i += ntg) {
        s += x[row * args.n + i];
    }
    s = simd_sum(s);
    if (lane == 0) {
        partial[sg] = s;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (sg == 0) {
        s = lane < nsg ? partial[lane] : 0.0f;
        s = simd_sum(s);
        if (lane == 0) {
            y[row] = s;
        }
    }
}
