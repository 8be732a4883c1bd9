// deltanet.metal: Qwen3.5's linear attention (Gated DeltaNet): a causal
// depthwise convolution and the gated delta rule, recurrent over the tokens.
//
// causal_conv_silu_f32: over in = [state; x], state (K−1, C) and x (L, C),
// w (C, K): dst[t, c] = silu(Σ_j w[c, j]·in[t+j, c]); then state = in's last
// K−1 rows. Grid: ⌈C/256⌉ threadgroups of 256 threads, thread c one channel
// through every token (the rows of state it overwrites, r, read row L+r > r
// of in: ahead of the writes).
//
// gated_deltanet_f32: one threadgroup per value head j (key head j/(nv/nk)),
// threads ≥ max(dk, dv), a multiple of 32; per token t, in order:
//   1. threads i < dk load q_i, k_i; Σq², Σk² by simd_sum and the
//      simdgroups' partials; q and k are L2-normalized into threadgroup
//      memory, q also × dk^−½;
//   2. every thread takes β = σ(b[t, j]), decay = e^g, g =
//      −e^ALog[j]·softplus(a[t, j] + DTBias[j]) (softplus(x) = x past 20);
//   3. thread col < dv runs its column of S (dk floats, in device memory):
//      u = Σ_i k_i·decay·S_i; S_i ← decay·S_i + k_i·β(v_col − u);
//      dst[t, j·dv + col] = Σ_i q_i·S_i.
// Columns of S are independent, which is why a thread owns one. Numerics:
// float; precise exp/log.
#include <metal_stdlib>
#include "common.h"
using namespace metal;

kernel void causal_conv_silu_f32(
        constant conv_args & args  [[buffer(0)]],
        device const float * x     [[buffer(1)]],
        device const float * w     [[buffer(2)]],
        device       float * state [[buffer(3)]],
        device       float * dst   [[buffer(4)]],
        uint c [[thread_position_in_grid]]) {
    const uint L = args.L, C = args.C, K = args.K;
    if (c >= C) {
        return;
    }
    for (uint t = 0; t < L; t++) {
        float s = 0.0f;
        for (uint j = 0; j < K; j++) {
            const uint i = t + j; // row of in
            const float v = i < K - 1 ? state[i * C + c] : x[(ulong)(i - (K - 1)) * C + c];
            s += w[c * K + j] * v;
        }
        dst[(ulong)t * C + c] = s / (1.0f + precise::exp(-s));
    }
    for (uint r = 0; r + 1 < K; r++) {
        const uint i = L + r;
        state[r * C + c] = i < K - 1 ? state[i * C + c] : x[(ulong)(i - (K - 1)) * C + c];
    }
}

kernel void gated_deltanet_f32(
        constant delta_args & args   [[buffer(0)]],
        device const float  * cq     [[buffer(1)]],
        device const float  * a      [[buffer(2)]],
        device const float  * b      [[buffer(3)]],
        device       float  * S      [[buffer(4)]],
        device       float  * dst    [[buffer(5)]],
        constant     float  * a_log  [[buffer(6)]],
        constant     float  * dt_bias [[buffer(7)]],
        threadgroup  float  * sh     [[threadgroup(0)]],
        uint   j    [[threadgroup_position_in_grid]],
        ushort tid  [[thread_index_in_threadgroup]],
        ushort ntg  [[threads_per_threadgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    const uint nk = args.nk, dk = args.dk, nv = args.nv, dv = args.dv;
    const uint C = 2 * nk * dk + nv * dv, kh = j / (nv / nk), nsg = ntg / 32;
    threadgroup float * qn = sh;          // dk
    threadgroup float * kn = sh + dk;     // dk
    threadgroup float * red = sh + 2 * dk; // 2 × 32 partial sums
    device float * Sj = S + (ulong)j * dk * dv;
    for (uint t = 0; t < args.L; t++) {
        device const float * row = cq + (ulong)t * C;
        const float qi = tid < dk ? row[kh * dk + tid] : 0.0f;
        const float ki = tid < dk ? row[nk * dk + kh * dk + tid] : 0.0f;
        const float sq = simd_sum(qi * qi), sk = simd_sum(ki * ki);
        if (lane == 0) {
            red[sg] = sq;
            red[32 + sg] = sk;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        float qq = 0.0f, kk = 0.0f;
        for (uint s = 0; s < nsg; s++) {
            qq += red[s];
            kk += red[32 + s];
        }
        if (tid < dk) {
            qn[tid] = qi / precise::sqrt(qq + 1e-6f) / precise::sqrt(float(dk));
            kn[tid] = ki / precise::sqrt(kk + 1e-6f);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const float beta = 1.0f / (1.0f + precise::exp(-b[t * nv + j]));
        const float xs = a[t * nv + j] + dt_bias[j];
        const float sp = xs > 20.0f ? xs : precise::log(1.0f + precise::exp(xs));
        const float decay = precise::exp(-precise::exp(a_log[j]) * sp);
        if (tid < dv) {
            const uint col = tid;
            float u = 0.0f;
            for (uint i = 0; i < dk; i++) {
                u += kn[i] * (decay * Sj[i * dv + col]);
            }
            const float d = beta * (row[2 * nk * dk + j * dv + col] - u);
            float o = 0.0f;
            for (uint i = 0; i < dk; i++) {
                const float s = decay * Sj[i * dv + col] + kn[i] * d;
                Sj[i * dv + col] = s;
                o += qn[i] * s;
            }
            dst[(ulong)t * nv * dv + j * dv + col] = o;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup); // qn, kn and red are rewritten next token
    }
}
