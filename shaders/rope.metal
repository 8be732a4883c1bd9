// rope.metal: rotary position embedding, half-split ("neox") pairing.
//
// rope_neox_f32: for each row l (position p = pos + l) and head of x (L, cols),
// element j < half of the head is paired with j + half (half = RotaryDim/2):
//     a = float(p)·inv_freq[j];  c = cos(a)·scale;  s = sin(a)·scale
//     x[j] ← x[j]·c − x[j+half]·s;   x[j+half] ← x[j+half]·c + x[j]·s
// Elements past 2·half (partial rotary) are left alone. In place.
//
// Grid: (heads, L) threadgroups; threads stride j < half. No reduction.
// Numerics: the angle is the float product, as transformers computes it;
// cos and sin are precise:: (fast math would lose accuracy at the large angles
// of late positions); inv_freq arrives precomputed (scaling applied) by setBytes.
#include <metal_stdlib>
#include "common.h"
using namespace metal;

kernel void rope_neox_f32(
        constant rope_args & args     [[buffer(0)]],
        constant float     * inv_freq [[buffer(1)]],
        device   float     * x        [[buffer(2)]],
        uint2   tg  [[threadgroup_position_in_grid]],
        ushort2 tpt [[threads_per_threadgroup]],
        ushort  tid [[thread_index_in_threadgroup]]) {
    const uint ntg = tpt.x; // the host dispatches (n, 1, 1) threads
    const uint half_rot = args.half_rot;
    const float p = float(args.pos + tg.y);
    device float * xh = x + (ulong)tg.y * args.cols + tg.x * args.head_dim;
    for (uint j = tid; j < half_rot; j += ntg) {
        const float a = p * inv_freq[j];
        const float c = precise::cos(a) * args.scale, s = precise::sin(a) * args.scale;
        const float x0 = xh[j], x1 = xh[j + half_rot];
        xh[j] = x0 * c - x1 * s;
        xh[j + half_rot] = x1 * c + x0 * s;
    }
}
