// argmax.metal: the index of the largest element, so greedy decoding brings
// back 4 bytes per token instead of V floats.
//
// argmax_f32: out[0] = the smallest i with x[i] = max(x[0…n)); 0 when no
// element exceeds −FLT_MAX (all −∞ or NaN). NaNs are skipped here; Apple's fast
// math makes no promise about them.
//
// Grid: one threadgroup of up to 1024 threads. Each thread scans a stride of x
// keeping its first maximum; the simdgroup folds (value, index) pairs with
// simd_shuffle_down (ties to the lower index), lane 0 of each simdgroup writes
// to threadgroup memory, and simdgroup 0 folds the ≤ 32 partials the same way.
// Numerics: exact (comparisons only).
#include <metal_stdlib>
#include "common.h"
using namespace metal;

struct am_pair {
    float v;
    uint  i;
};

// am_better reports whether (v, i) beats (bv, bi).
inline bool am_better(float v, uint i, float bv, uint bi) {
    return v > bv || (v == bv && i < bi);
}

inline am_pair am_simd(am_pair p) {
    for (ushort off = 16; off > 0; off /= 2) {
        const float v = simd_shuffle_down(p.v, off);
        const uint i = simd_shuffle_down(p.i, off);
        if (am_better(v, i, p.v, p.i)) {
            p.v = v;
            p.i = i;
        }
    }
    return p;
}

kernel void argmax_f32(
        constant argmax_args & args [[buffer(0)]],
        device const float   * x    [[buffer(1)]],
        device       int     * out  [[buffer(2)]],
        threadgroup  float   * tv   [[threadgroup(0)]],
        threadgroup  uint    * ti   [[threadgroup(1)]],
        ushort tid  [[thread_position_in_threadgroup]],
        ushort ntg  [[threads_per_threadgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]],
        ushort nsg  [[simdgroups_per_threadgroup]]) {
    am_pair p = {-FLT_MAX, 0xffffffffu};
    for (uint i = tid; i < args.n; i += ntg) {
        const float v = x[i];
        if (v > p.v || (v == p.v && p.i == 0xffffffffu)) { // the first −FLT_MAX counts too
            p.v = v;
            p.i = i;
        }
    }
    p = am_simd(p);
    if (lane == 0) {
        tv[sg] = p.v;
        ti[sg] = p.i;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (sg == 0) {
        am_pair q = {-FLT_MAX, 0xffffffffu};
        if (lane < nsg) {
            q.v = tv[lane];
            q.i = ti[lane];
        }
        q = am_simd(q);
        if (lane == 0) {
            out[0] = q.i == 0xffffffffu ? 0 : int(q.i);
        }
    }
}
