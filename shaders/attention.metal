// attention.metal: causal grouped-query attention over the KV cache.
//
// For query row l (position pos + l) and query head h, reading KV head
// g = h / (H/Hkv) with keys j ∈ [start, end), end = pos + l + 1,
// start = max(0, end − window) (0 without a window):
//     s_j = scale · q·k_j;   s_j ← softcap·tanh(s_j / softcap) if softcap > 0
//     out = Σ_j softmax(s)_j · v_j
//
// attn_prefill_f32 (tiled): grid (Hkv, ⌈L/rows⌉) threadgroups of
// rows·(H/Hkv) simdgroups; simdgroup s handles query row tile·rows + s/group
// and query head g·group + s%group, so one threadgroup covers every query head
// that reads KV head g for `rows` consecutive rows. The threadgroup walks the
// keys its rows can see in blocks of blk (≤ 32) keys: all threads stage the
// block's K (stride head_dim+1: no bank conflicts) and V rows of head g in
// threadgroup memory, so each K/V element is read from device memory once per
// tile and reused by rows·group queries. Then lane i of each simdgroup scores
// key i of the block against its query (q·k over head_dim from threadgroup
// memory), the simdgroup takes the block maximum (simd_max) and sum (simd_sum)
// of an online softmax (running max m, denominator d, rescaled by e^(m−m')),
// and each lane accumulates head_dim/32 output dimensions from the staged V,
// taking each key's weight with simd_shuffle.
//
// The _f16_f32 forms read an f16 cache, widened exactly as it is staged.
// Decode (L = 1) runs attention_decode.metal's kernels, and this one (rows = 1)
// only where those do not take the shapes.
//
// Masked keys (future, outside the window) weigh exactly 0; a
// block with no visible key leaves m, d, o unchanged.
// Numerics: float throughout; exp is the fast-math exp on Apple GPUs (the
// scores are ≤ 0 after subtracting the max), tanh is precise::tanh.
#include <metal_stdlib>
#include "common.h"
using namespace metal;

#define ATTN_MAX_DH 256
#define ATTN_DPL (ATTN_MAX_DH / 32) // output dimensions per lane
// ATTN_NEG stands for −∞: Apple compiles with fast math, which assumes no
// infinities, so masks are explicit and the running max starts finite.
#define ATTN_NEG (-FLT_MAX)

// attn_norm returns the factor that normalizes a head's output o of running
// max m and sum d: 1/d, or with a sink (gpt-oss: a logit in the softmax's
// denominator that no value follows) e^(m−M)/(d·e^(m−M) + e^(sink−M)),
// M = max(m, sink).
inline float attn_norm(float m, float d, bool has_sink, float sink) {
    if (!has_sink) {
        return 1.0f / d;
    }
    if (sink <= m) {
        return 1.0f / (d + exp(sink - m));
    }
    const float r = exp(m - sink);
    return r / (d * r + 1.0f);
}

template <typename KV>
kernel void attn(
        constant attn_args & args [[buffer(0)]],
        device const float * q    [[buffer(1)]],
        device const KV    * k    [[buffer(2)]],
        device const KV    * v    [[buffer(3)]],
        device       float * out  [[buffer(4)]],
        constant     float * sinks [[buffer(5)]],
        threadgroup  float * ks   [[threadgroup(0)]],
        threadgroup  float * vs   [[threadgroup(1)]],
        uint3   tg   [[threadgroup_position_in_grid]],
        ushort3 tpt  [[threads_per_threadgroup]],
        ushort  tid  [[thread_index_in_threadgroup]],
        ushort  sg   [[simdgroup_index_in_threadgroup]],
        ushort  lane [[thread_index_in_simdgroup]]) {
    const uint ntg = tpt.x * tpt.y * tpt.z;
    const uint Dh = args.head_dim, H = args.heads, group = H / args.kv_heads;
    const uint kvw = args.kv_heads * Dh; // row stride of k and v
    const uint g = tg.x;
    const uint l = tg.y * args.rows + sg / group; // query row
    const uint h = g * group + sg % group;        // query head
    const bool live = l < args.L;

    // This simdgroup's keys [start, end) and the threadgroup's [j0, j1).
    const uint end = live ? args.pos + l + 1 : 0;
    const uint start = args.window > 0 && end > args.window ? end - args.window : 0;
    const uint first = tg.y * args.rows, last = min(first + args.rows, args.L) - 1;
    const uint tg_end = args.pos + last + 1, tg_first_end = args.pos + first + 1;
    const uint tg_start = args.window > 0 && tg_first_end > args.window ? tg_first_end - args.window : 0;
    const uint j0 = tg_start, j1 = tg_end;

    device const float * qr = q + ((ulong)(live ? l : 0) * H + h) * Dh;
    float m = ATTN_NEG, d = 0.0f;
    float o[ATTN_DPL];
    for (uint i = 0; i < ATTN_DPL; i++) {
        o[i] = 0.0f;
    }
    for (uint jb = j0; jb < j1; jb += args.blk) {
        const uint n = min(args.blk, j1 - jb);
        threadgroup_barrier(mem_flags::mem_threadgroup); // the previous block is consumed
        for (uint i = tid; i < n * Dh; i += ntg) {
            const uint r = i / Dh, c = i % Dh;
            const ulong src = (ulong)(jb + r) * kvw + g * Dh + c;
            ks[r * args.kstride + c] = float(k[src]);
            vs[r * Dh + c] = float(v[src]);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);

        const uint j = jb + lane;
        const bool visible = lane < n && j >= start && j < end;
        float s = ATTN_NEG;
        if (visible) {
            threadgroup const float * kr = ks + lane * args.kstride;
            float dot = 0.0f;
            for (uint c = 0; c < Dh; c++) {
                dot += qr[c] * kr[c];
            }
            s = dot * args.scale;
            if (args.softcap > 0.0f) {
                s = args.softcap * precise::tanh(s / args.softcap);
            }
        }
        const float mn = max(m, simd_max(s));
        const float alpha = exp(m - mn); // 1 while nothing was visible (m = mn = ATTN_NEG)
        const float p = visible ? exp(s - mn) : 0.0f;
        d = d * alpha + simd_sum(p);
        for (uint i = 0; i < ATTN_DPL; i++) {
            o[i] *= alpha;
        }
        for (uint r = 0; r < n; r++) {
            const float pr = simd_shuffle(p, r);
            for (uint i = 0; i < ATTN_DPL; i++) {
                const uint c = lane + 32 * i;
                if (c < Dh) {
                    o[i] += pr * vs[r * Dh + c];
                }
            }
        }
        m = mn;
    }
    if (!live) {
        return;
    }
    device float * y = out + ((ulong)l * H + h) * Dh;
    const float inv = attn_norm(m, d, args.sinks != 0, args.sinks != 0 ? sinks[h] : 0.0f);
    for (uint i = 0; i < ATTN_DPL; i++) {
        const uint c = lane + 32 * i;
        if (c < Dh) {
            y[c] = o[i] * inv;
        }
    }
}

typedef decltype(attn<float>) attn_t;
template [[host_name("attn_prefill_f32")]] kernel attn_t attn<float>;
typedef decltype(attn<half>) attn_half_t;
template [[host_name("attn_prefill_f16_f32")]] kernel attn_half_t attn<half>;
