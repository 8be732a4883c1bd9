// embed.metal: embedding gather.
//
// embed_<w>_f32: y[l, :] = table[tokens[l], :] · scale for a table (V, D) in
// f32, f16, bf16 or MLX affine q2…q8 (scales and biases f32, or f16/bf16 as
// stored: _f16sb, _bf16sb; dequantized as float(s·q) + b, exactly as
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

// embed_q<BITS, S>: S is the type of the scales and biases as stored (float;
// half for f16; ushort for bf16), widened exactly by em_to_f32.
template <int BITS, typename S>
kernel void embed_q(
        constant embed_args & args   [[buffer(0)]],
        device const uint   * table  [[buffer(1)]],
        device const int    * tokens [[buffer(2)]],
        device       float  * y      [[buffer(3)]],
        device const S      * scales [[buffer(4)]],
        device const S      * biases [[buffer(5)]],
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
    y[(ulong)l * D + d] = (float(em_to_f32(scales[sb]) * q) + em_to_f32(biases[sb])) * args.scale;
}

// Host names: embed_<w>_f32 for f32 scales and biases, _f16sb or _bf16sb
// appended for 16-bit ones.
typedef decltype(embed_q<4, float>) embed_q_f32_t;
template [[host_name("embed_q2_f32")]] kernel embed_q_f32_t embed_q<2, float>;
template [[host_name("embed_q3_f32")]] kernel embed_q_f32_t embed_q<3, float>;
template [[host_name("embed_q4_f32")]] kernel embed_q_f32_t embed_q<4, float>;
template [[host_name("embed_q5_f32")]] kernel embed_q_f32_t embed_q<5, float>;
template [[host_name("embed_q6_f32")]] kernel embed_q_f32_t embed_q<6, float>;
template [[host_name("embed_q8_f32")]] kernel embed_q_f32_t embed_q<8, float>;
typedef decltype(embed_q<4, half>) embed_q_f16_t;
template [[host_name("embed_q2_f32_f16sb")]] kernel embed_q_f16_t embed_q<2, half>;
template [[host_name("embed_q3_f32_f16sb")]] kernel embed_q_f16_t embed_q<3, half>;
template [[host_name("embed_q4_f32_f16sb")]] kernel embed_q_f16_t embed_q<4, half>;
template [[host_name("embed_q5_f32_f16sb")]] kernel embed_q_f16_t embed_q<5, half>;
template [[host_name("embed_q6_f32_f16sb")]] kernel embed_q_f16_t embed_q<6, half>;
template [[host_name("embed_q8_f32_f16sb")]] kernel embed_q_f16_t embed_q<8, half>;
typedef decltype(embed_q<4, ushort>) embed_q_bf16_t;
template [[host_name("embed_q2_f32_bf16sb")]] kernel embed_q_bf16_t embed_q<2, ushort>;
template [[host_name("embed_q3_f32_bf16sb")]] kernel embed_q_bf16_t embed_q<3, ushort>;
template [[host_name("embed_q4_f32_bf16sb")]] kernel embed_q_bf16_t embed_q<4, ushort>;
template [[host_name("embed_q5_f32_bf16sb")]] kernel embed_q_bf16_t embed_q<5, ushort>;
template [[host_name("embed_q6_f32_bf16sb")]] kernel embed_q_bf16_t embed_q<6, ushort>;
template [[host_name("embed_q8_f32_bf16sb")]] kernel embed_q_bf16_t embed_q<8, ushort>;
