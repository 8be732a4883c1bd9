// embed.metal: embedding gather.
//
// embed_<w>_f32: y[l, :] = table[tokens[l], :] · scale for a table (V, D) in
// f32, f16, bf16 or MLX affine q2…q8 (dequantized as float(s·q) + b, exactly as
// MLX and the CPU reference; the scale is Gemma's √D, 1 elsewhere).
//
// Grid: (⌈D/256⌉, L) threadgroups of 256 threads, one output element per
// thread. No reduction. Quantized codes are read as a 64-bit window of the
// row's little-endian bitstream, so widths that straddle words (3, 5, 6 bits)
// work too. Token ids are checked on the host.
#include <metal_stdlib>
#include "common.h"
using namespace metal;

inline float em_to_f32(float v) { return v; }
inline float em_to_f32(half v) { return float(v); }
inline float em_to_f32(ushort v) { return as_type<float>(uint(v) << 16); }

template <typename T>
kernel void embed_dense(
        constant embed_args & args   [[buffer(0)]],
        device const T      * table  [[buffer(1)]],
        device const int    * tokens [[buffer(2)]],
        device       float  * y      [[buffer(3)]],
        uint2 gid [[thread_position_in_grid]]) {
    const uint D = args.D, d = gid.x, l = gid.y;
    if (d >= D) {
        return;
    }
    y[(ulong)l * D + d] = em_to_f32(table[(ulong)tokens[l] * D + d]) * args.scale;
}

typedef decltype(embed_dense<float>) embed_f32_t;
typedef decltype(embed_dense<half>) embed_f16_t;
typedef decltype(embed_dense<ushort>) embed_bf16_t;
template [[host_name("embed_f32_f32")]]  kernel embed_f32_t  embed_dense<float>;
template [[host_name("embed_f16_f32")]]  kernel embed_f16_t  embed_dense<half>;
template [[host_name("embed_bf16_f32")]] kernel embed_bf16_t embed_dense<ushort>;

template <int BITS>
kernel void embed_q(
        constant embed_args & args   [[buffer(0)]],
        device const uint   * table  [[buffer(1)]],
        device const int    * tokens [[buffer(2)]],
        device       float  * y      [[buffer(3)]],
        device const float  * scales [[buffer(4)]],
        device const float  * biases [[buffer(5)]],
        uint2 gid [[thread_position_in_grid]]) {
    const uint D = args.D, d = gid.x, l = gid.y;
    if (d >= D) {
        return;
    }
    const ulong row = (ulong)tokens[l];
    device const uint * wr = table + row * (D / 32 * BITS);
    const uint bit = d * BITS, word = bit / 32, shift = bit % 32;
    ulong v = ulong(wr[word]);
    if (shift + BITS > 32) {
        v |= ulong(wr[word + 1]) << 32;
    }
    const float q = float((v >> shift) & ((1ul << BITS) - 1));
    const ulong sb = row * (D / args.group_size) + d / args.group_size;
    y[(ulong)l * D + d] = (float(scales[sb] * q) + biases[sb]) * args.scale;
}

typedef decltype(embed_q<4>) embed_q_t;
template [[host_name("embed_q2_f32")]] kernel embed_q_t embed_q<2>;
template [[host_name("embed_q3_f32")]] kernel embed_q_t embed_q<3>;
template [[host_name("embed_q4_f32")]] kernel embed_q_t embed_q<4>;
template [[host_name("embed_q5_f32")]] kernel embed_q_t embed_q<5>;
template [[host_name("embed_q6_f32")]] kernel embed_q_t embed_q<6>;
template [[host_name("embed_q8_f32")]] kernel embed_q_t embed_q<8>;
