// topk.metal: the k largest logits and their ids, so sampling with top-k
// brings back k (value, id) pairs per token instead of V floats.
//
// topk_f32:       out[g·k + j], j < k: the j-th best of x[g·C, (g+1)·C) ∩ [0, n)
//                 as (x[i], i)
// topk_merge_f32: the same over pairs: the j-th best of in[g·C, (g+1)·C) ∩ [0, n)
//
// Best first means higher value, then lower id: the CPU sampler's order
// (model/sample.go). A chunk with fewer than k elements pads its list with
// the id TK_NONE, which every real element beats whatever its value (even
// −∞; compared by id, since fast math need not order infinities). The host runs topk_f32
// over the logits, then topk_merge_f32 over the partial lists until one list
// remains; a chunk holds C/k lists, so each pass divides the candidates by
// C/k (16 for k = 64). The top k of the whole is within the union of every
// chunk's top k, however chunks cut the lists.
//
// Pairs in device memory are struct tk_pair: 8 bytes, the float value then
// the uint id (package kernels reads them so).
//
// Grid: one threadgroup of C/2 = 512 threads per chunk of C = 1024 elements.
// Each thread loads two elements into threadgroup memory, then a bitonic
// network sorts the chunk best first: 55 steps, each thread doing one
// compare-exchange per step, a barrier after each. Threads j < k write the
// list. Numerics: exact (comparisons only). NaN logits are not ordered (nor
// are they by the CPU sampler).
#include <metal_stdlib>
#include "common.h"
using namespace metal;

constant constexpr uint TK_C = 1024;           // elements sorted per threadgroup
constant constexpr uint TK_NONE = 0xffffffffu; // the id of padding

struct tk_pair {
    float v;
    uint  i;
};

// tk_better reports whether (v, i) comes before (bv, bi).
inline bool tk_better(float v, uint i, float bv, uint bi) {
    if (i == TK_NONE || bi == TK_NONE) {
        return bi == TK_NONE && i != TK_NONE;
    }
    return v > bv || (v == bv && i < bi);
}

// tk_sort sorts tv, ti[0, TK_C) best first and writes the first k to out.
// Every one of the TK_C/2 threads must call it.
inline void tk_sort(threadgroup float * tv, threadgroup uint * ti, device tk_pair * out, uint k, ushort tid) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint size = 2; size <= TK_C; size <<= 1) {
        for (uint stride = size / 2; stride > 0; stride >>= 1) {
            // Pair (a, a + stride) with bit `stride` of a clear; blocks of
            // `size` alternate direction until the last, best first.
            const uint a = 2 * stride * (tid / stride) + tid % stride, b = a + stride;
            const bool bestFirst = (a & size) == 0;
            const float va = tv[a], vb = tv[b];
            const uint ia = ti[a], ib = ti[b];
            if (tk_better(vb, ib, va, ia) == bestFirst) {
                tv[a] = vb;
                ti[a] = ib;
                tv[b] = va;
                ti[b] = ia;
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
    }
    if (tid < k) {
        out[tid].v = tv[tid];
        out[tid].i = ti[tid];
    }
}

kernel void topk_f32(
        constant topk_args & args [[buffer(0)]],
        device const float * x    [[buffer(1)]],
        device tk_pair      * out  [[buffer(2)]],
        threadgroup float   * tv   [[threadgroup(0)]],
        threadgroup uint    * ti   [[threadgroup(1)]],
        uint   g   [[threadgroup_position_in_grid]],
        ushort tid [[thread_position_in_threadgroup]]) {
    for (uint h = 0; h < 2; h++) {
        const uint j = tid + h * (TK_C / 2), e = g * TK_C + j;
        tv[j] = e < args.n ? x[e] : -FLT_MAX;
        ti[j] = e < args.n ? e : TK_NONE;
    }
    tk_sort(tv, ti, out + (ulong)g * args.k, args.k, tid);
}

kernel void topk_merge_f32(
        constant topk_args  & args [[buffer(0)]],
        device const tk_pair * in   [[buffer(1)]],
        device tk_pair       * out  [[buffer(2)]],
        threadgroup float    * tv   [[threadgroup(0)]],
        threadgroup uint     * ti   [[threadgroup(1)]],
        uint   g   [[threadgroup_position_in_grid]],
        ushort tid [[thread_position_in_threadgroup]]) {
    for (uint h = 0; h < 2; h++) {
        const uint j = tid + h * (TK_C / 2), e = g * TK_C + j;
        tv[j] = e < args.n ? in[e].v : -FLT_MAX;
        ti[j] = e < args.n ? in[e].i : TK_NONE;
    }
    tk_sort(tv, ti, out + (ulong)g * args.k, args.k, tid);
}
