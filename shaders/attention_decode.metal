// attention_decode.metal: decode attention (L = 1) on every device;
// attention.metal holds the prefill kernel (which also runs the decode shapes
// these do not take).
//
// attn_decode_f32_g<GM>, attn_decode_f16_f32_g<GM>: for the query heads
// h = g·G … g·G+G−1 that read KV head g (G = heads/kv_heads ≤ GM ≤ ADEC_MAXG), over the keys of one split,
// [j0, j1) = [key0 + z·split_len, +split_len) ∩ [start, pos+1) (start: the
// window's first key), split_len ≤ ADEC_MAXS:
//     s_j = scale · q_h·k_j  (softcap·tanh(s_j/softcap) if softcap > 0)
//     m = max_j s_j,  d = Σ_j e^(s_j − m),  o = Σ_j e^(s_j − m)·v_j
// With splits = 1 it writes out = o/d (o·adec_norm with a sink) (L·heads·
// head_dim); else the partial
// (m, d, o) per (head, split) that attn_reduce_f32 combines.
//
// Grid (kv_heads, 1, splits) of ADEC_TG threads; head_dim a multiple of 4 (≤ 256),
// k and v 16-byte aligned (the host checks). The phases are lane-parallel and
// coalesced (MLX's sdpa_vector and ggml's vector flash attention dot a query
// across lanes too, where a serial dot per lane over staged K was
// latency-bound: 63 µs a layer at 129 keys on an H100, against 15 here):
//   A. scores: 4 consecutive lanes share a key (8 keys per simdgroup, 32 per
//      pass); lane r of the 4 loads the row's 16-byte pieces r, r+4, … (64
//      contiguous bytes per 4 lanes), dots them against the G staged queries
//      and the 4 partial dots meet by two xor shuffles;
//   B. softmax: simdgroup w takes heads w, w+4, …: max and Σ e^(s−m) over the
//      split, the weights e^(s−m) stored back in place of the scores;
//   C. values: thread t takes the 4 dimensions 4·(t mod Dh/4) of every key
//      j ≡ t div (Dh/4) (mod streams), streams = ADEC_TG/(Dh/4), for all G
//      heads (one 16-byte V load serves G heads); the streams' sums meet in
//      threadgroup memory, added in stream order.
// Every loop over memory issues several loads before it uses the first (four
// K pieces, ADEC_U V rows): a dependent load per iteration would make a split
// one memory latency per key long.
// Float accumulation order differs from the CPU reference (pieces, shuffles,
// streams); exp as in attention.metal (fast on Apple GPUs, precise in PTX).
#include <metal_stdlib>
#include "common.h"
using namespace metal;

#define ADEC_TG 128   // threads per threadgroup (4 simdgroups)
#define ADEC_MAXG 8   // query heads per KV head at most
#define ADEC_MAXS 128 // keys per split at most
#define ADEC_U 8      // V rows in flight per thread
#define ADEC_NEG (-FLT_MAX)

// adec_norm returns the factor that normalizes a head's output o of running
// max m and sum d: 1/d, or with a sink (gpt-oss: a logit in the softmax's
// denominator that no value follows) e^(m−M)/(d·e^(m−M) + e^(sink−M)),
// M = max(m, sink).
inline float adec_norm(float m, float d, bool has_sink, float sink) {
    if (!has_sink) {
        return 1.0f / d;
    }
    if (sink <= m) {
        return 1.0f / (d + exp(sink - m));
    }
    const float r = exp(m - sink);
    return r / (d * r + 1.0f);
}

template <typename KV4>
inline float4 adec_load(device const KV4 * p) { return float4(*p); }

template <typename KV, typename KV4, uint GM>
kernel void attn_decode(
        constant attn_args & args [[buffer(0)]],
        device const float * q    [[buffer(1)]],
        device const KV    * k    [[buffer(2)]],
        device const KV    * v    [[buffer(3)]],
        device       float * out  [[buffer(4)]],
        constant     float * sinks [[buffer(5)]],
        threadgroup  float * sh   [[threadgroup(0)]],
        uint3  tg   [[threadgroup_position_in_grid]],
        ushort tid  [[thread_index_in_threadgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    const uint Dh = args.head_dim, G = min(GM, args.heads / args.kv_heads);
    const uint kvw = args.kv_heads * Dh; // row stride of k and v
    const uint g = tg.x;
    const uint end = args.pos + 1;
    const uint start = args.window > 0 && end > args.window ? end - args.window : 0;
    const uint s0 = args.key0 + tg.z * args.split_len;
    const uint j0 = max(start, s0), j1 = min(end, s0 + args.split_len);
    const uint n = j1 > j0 ? j1 - j0 : 0;

    // Threadgroup memory (floats): queries G·Dh | scores, then weights,
    // G·ADEC_MAXS | (m, d) 2·ADEC_MAXG | stream sums ADEC_TG·4·G.
    threadgroup float * qs = sh;
    threadgroup float * ss = qs + G * Dh;
    threadgroup float * md = ss + G * ADEC_MAXS;
    threadgroup float4 * red = (threadgroup float4 *)(md + 2 * ADEC_MAXG);

    // The group's queries, G·Dh/4 ≤ 4·ADEC_TG float4s, every load issued first.
    device const float4 * qg = (device const float4 *)(q + (ulong)g * G * Dh);
    float4 qv[4];
    #pragma unroll
    for (uint u = 0; u < 4; u++) {
        const uint i = tid + u * ADEC_TG;
        qv[u] = i < G * Dh / 4 ? qg[i] : float4(0.0f);
    }
    #pragma unroll
    for (uint u = 0; u < 4; u++) {
        const uint i = tid + u * ADEC_TG;
        if (i < G * Dh / 4) {
            ((threadgroup float4 *)qs)[i] = qv[u];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    // A. Scores.
    device const KV * kg = k + (ulong)j0 * kvw + g * Dh;
    const uint r = lane & 3;
    for (uint jb = sg * 8; jb < n; jb += ADEC_TG / 4) {
        const uint jj = jb + lane / 4;
        const bool ok = jj < n;
        float dot[GM];
        #pragma unroll
        for (uint h = 0; h < GM; h++) {
            dot[h] = 0.0f;
        }
        if (ok) {
            device const KV * kr = kg + (ulong)jj * kvw;
            for (uint c0 = 4 * r; c0 < Dh; c0 += 4 * 16) {
                float4 kk[4]; // four loads in flight before the first is used
                #pragma unroll
                for (uint u = 0; u < 4; u++) {
                    const uint c = c0 + 16 * u;
                    kk[u] = c < Dh ? adec_load((device const KV4 *)(kr + c)) : float4(0.0f);
                }
                #pragma unroll
                for (uint u = 0; u < 4; u++) {
                    const uint c = c0 + 16 * u;
                    if (c < Dh) {
                        #pragma unroll
                        for (uint h = 0; h < GM; h++) {
                            if (h < G) {
                                dot[h] += metal::dot(*(threadgroup const float4 *)(qs + h * Dh + c), kk[u]);
                            }
                        }
                    }
                }
            }
        }
        #pragma unroll
        for (uint h = 0; h < GM; h++) {
            if (h < G) {
                dot[h] += simd_shuffle_xor(dot[h], 1);
                dot[h] += simd_shuffle_xor(dot[h], 2);
                if (ok && r == 0) {
                    float s = dot[h] * args.scale;
                    if (args.softcap > 0.0f) {
                        s = args.softcap * precise::tanh(s / args.softcap);
                    }
                    ss[h * ADEC_MAXS + jj] = s;
                }
            }
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    // B. Softmax over the split.
    for (uint h = sg; h < G; h += ADEC_TG / 32) {
        threadgroup float * sr = ss + h * ADEC_MAXS;
        float mx = ADEC_NEG;
        for (uint jj = lane; jj < n; jj += 32) {
            mx = max(mx, sr[jj]);
        }
        mx = simd_max(mx);
        float sum = 0.0f;
        for (uint jj = lane; jj < n; jj += 32) {
            const float p = exp(sr[jj] - mx);
            sr[jj] = p;
            sum += p;
        }
        sum = simd_sum(sum);
        if (lane == 0) {
            md[2 * h] = mx;
            md[2 * h + 1] = sum;
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    // C. Values.
    const uint chunks = Dh / 4, streams = ADEC_TG / chunks;
    const uint ch = tid % chunks, st = tid / chunks;
    if (st < streams) {
        float4 acc[GM];
        #pragma unroll
        for (uint h = 0; h < GM; h++) {
            acc[h] = float4(0.0f);
        }
        device const KV * vg = v + (ulong)j0 * kvw + g * Dh + 4 * ch;
        for (uint j = st; j < n; j += ADEC_U * streams) {
            float4 vv[ADEC_U]; // ADEC_U loads in flight before the first is used
            #pragma unroll
            for (uint u = 0; u < ADEC_U; u++) {
                const uint jj = j + u * streams;
                vv[u] = jj < n ? adec_load((device const KV4 *)(vg + (ulong)jj * kvw)) : float4(0.0f);
            }
            #pragma unroll
            for (uint u = 0; u < ADEC_U; u++) {
                const uint jj = j + u * streams;
                if (jj < n) {
                    #pragma unroll
                    for (uint h = 0; h < GM; h++) {
                        if (h < G) {
                            acc[h] += ss[h * ADEC_MAXS + jj] * vv[u];
                        }
                    }
                }
            }
        }
        #pragma unroll
        for (uint h = 0; h < GM; h++) {
            if (h < G) {
                red[(st * G + h) * chunks + ch] = acc[h];
            }
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    threadgroup const float * rf = (threadgroup const float *)red;
    for (uint i = tid; i < G * Dh; i += ADEC_TG) {
        const uint h = i / Dh, c = i % Dh;
        float o = 0.0f;
        for (uint s = 0; s < streams; s++) {
            o += rf[(s * G + h) * Dh + c];
        }
        const uint hq = g * G + h;
        if (args.splits == 1) {
            out[(ulong)hq * Dh + c] = o * adec_norm(md[2 * h], md[2 * h + 1], args.sinks != 0, args.sinks != 0 ? sinks[hq] : 0.0f);
        } else {
            device float * part = out + ((ulong)hq * args.splits + tg.z) * (Dh + 2);
            part[2 + c] = o;
            if (c == 0) {
                part[0] = md[2 * h];
                part[1] = md[2 * h + 1];
            }
        }
    }
}

// One instantiation per cache type and per bound GM on the query heads per
// KV head (1, 2, 4, 8: the host takes the smallest ≥ G), so the head loops
// have constant trip counts and no lanes wasted on heads that are not there.
typedef decltype(attn_decode<float, float4, 1>) attn_dec_f32_g1_t;
template [[host_name("attn_decode_f32_g1")]] kernel attn_dec_f32_g1_t attn_decode<float, float4, 1>;
typedef decltype(attn_decode<float, float4, 2>) attn_dec_f32_g2_t;
template [[host_name("attn_decode_f32_g2")]] kernel attn_dec_f32_g2_t attn_decode<float, float4, 2>;
typedef decltype(attn_decode<float, float4, 4>) attn_dec_f32_g4_t;
template [[host_name("attn_decode_f32_g4")]] kernel attn_dec_f32_g4_t attn_decode<float, float4, 4>;
typedef decltype(attn_decode<float, float4, 8>) attn_dec_f32_g8_t;
template [[host_name("attn_decode_f32_g8")]] kernel attn_dec_f32_g8_t attn_decode<float, float4, 8>;
typedef decltype(attn_decode<half, half4, 1>) attn_dec_f16_g1_t;
template [[host_name("attn_decode_f16_f32_g1")]] kernel attn_dec_f16_g1_t attn_decode<half, half4, 1>;
typedef decltype(attn_decode<half, half4, 2>) attn_dec_f16_g2_t;
template [[host_name("attn_decode_f16_f32_g2")]] kernel attn_dec_f16_g2_t attn_decode<half, half4, 2>;
typedef decltype(attn_decode<half, half4, 4>) attn_dec_f16_g4_t;
template [[host_name("attn_decode_f16_f32_g4")]] kernel attn_dec_f16_g4_t attn_decode<half, half4, 4>;
typedef decltype(attn_decode<half, half4, 8>) attn_dec_f16_g8_t;
template [[host_name("attn_decode_f16_f32_g8")]] kernel attn_dec_f16_g8_t attn_decode<half, half4, 8>;

// attn_reduce_f32: out (rows·head_dim) from attn_decode's partials, one
// threadgroup of ADEC_TG threads per row (query head): M = max_s m_s and
// den = Σ_s d_s·e^(m_s−M) with the threads striding the splits (simd_max,
// simd_sum, then the 4 simdgroups' in order), the weights e^(m_s−M) kept in
// threadgroup memory (splits floats), then thread c sums Σ_s w_s·o_s[c] with
// ADEC_U partials in flight and writes it times 1/den. Splits ≤ 4096.
kernel void attn_reduce_f32(
        constant attn_reduce_args & args [[buffer(0)]],
        device const float        * part [[buffer(1)]],
        device       float        * out  [[buffer(2)]],
        constant     float        * sinks [[buffer(3)]],
        threadgroup  float        * w    [[threadgroup(0)]],
        uint   row  [[threadgroup_position_in_grid]],
        ushort tid  [[thread_index_in_threadgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        ushort lane [[thread_index_in_simdgroup]]) {
    const uint Dh = args.head_dim, S = args.splits, stride = Dh + 2;
    device const float * p = part + (ulong)row * S * stride;
    threadgroup float * red = w + S; // ADEC_TG/32 partial maxima, then sums

    float mx = ADEC_NEG;
    for (uint s = tid; s < S; s += ADEC_TG) {
        mx = max(mx, p[s * stride]);
    }
    mx = simd_max(mx);
    if (lane == 0) {
        red[sg] = mx;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float M = red[0];
    for (uint i = 1; i < ADEC_TG / 32; i++) {
        M = max(M, red[i]);
    }
    const float sink = args.sinks != 0 ? sinks[row % args.heads] : 0.0f;
    if (args.sinks != 0) {
        M = max(M, sink);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup); // red is reused below
    // A split that saw no key has m = ADEC_NEG, d = 0, o = 0: weight 0.
    float den = 0.0f;
    for (uint s = tid; s < S; s += ADEC_TG) {
        const float e = exp(p[s * stride] - M);
        w[s] = e;
        den += p[s * stride + 1] * e;
    }
    den = simd_sum(den);
    if (lane == 0) {
        red[sg] = den;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    den = red[0];
    for (uint i = 1; i < ADEC_TG / 32; i++) {
        den += red[i];
    }
    if (args.sinks != 0) {
        den += exp(sink - M);
    }
    const float inv = 1.0f / den;
    for (uint c = tid; c < Dh; c += ADEC_TG) {
        float acc = 0.0f;
        for (uint s0 = 0; s0 < S; s0 += ADEC_U) {
            float o[ADEC_U];
            #pragma unroll
            for (uint u = 0; u < ADEC_U; u++) {
                o[u] = s0 + u < S ? p[(s0 + u) * stride + 2 + c] : 0.0f;
            }
            #pragma unroll
            for (uint u = 0; u < ADEC_U; u++) {
                if (s0 + u < S) {
                    acc += w[s0 + u] * o[u];
                }
            }
        }
        out[(ulong)row * Dh + c] = acc * inv;
    }
}
