// collectives.metal: the PTX runtime's simd_* collectives and
// simdgroup_matrix on the device, for the GPU test (cuda/gpu_test.go), which
// compares them with the interpreter's definitions (internal/msl/README.md):
// reductions in a fixed pairwise tree, prefix sums in lane order, shuffles
// that keep the lane's own value past the simdgroup's ends.
#include <metal_stdlib>
using namespace metal;

// coll_f32: for thread i of a 1-D grid (threadgroups of any size), 8 results:
//   y[8i+0] simd_sum(x)          y[8i+1] simd_prefix_inclusive_sum(x)
//   y[8i+2] simd_prefix_exclusive_sum(x)   y[8i+3] simd_max(x)
//   y[8i+4] simd_shuffle_down(x, 3)        y[8i+5] simd_shuffle_up(x, 5)
//   y[8i+6] simd_broadcast(x, 2)           y[8i+7] ballot(x > 0) as a count of bits
kernel void coll_f32(
        device const float * x [[buffer(0)]],
        device       float * y [[buffer(1)]],
        uint i [[thread_position_in_grid]]) {
    const float v = x[i];
    device float * o = y + 8 * (ulong)i;
    o[0] = simd_sum(v);
    o[1] = simd_prefix_inclusive_sum(v);
    o[2] = simd_prefix_exclusive_sum(v);
    o[3] = simd_max(v);
    o[4] = simd_shuffle_down(v, 3);
    o[5] = simd_shuffle_up(v, 5);
    o[6] = simd_broadcast(v, 2);
    o[7] = float(popcount(uint(ulong(simd_ballot(v > 0.0f)))));
}

// mm8_f32: one simdgroup per threadgroup: d (8×8) = a·b + c, row-major.
kernel void mm8_f32(
        device const float * a [[buffer(0)]],
        device const float * b [[buffer(1)]],
        device const float * c [[buffer(2)]],
        device       float * d [[buffer(3)]]) {
    simdgroup_float8x8 ma, mb, mc, md;
    simdgroup_load(ma, a, 8);
    simdgroup_load(mb, b, 8);
    simdgroup_load(mc, c, 8);
    simdgroup_multiply_accumulate(md, ma, mb, mc);
    simdgroup_store(md, d, 8);
}
