// elementwise.metal: one output element per thread, no reductions.
//
//   add_f32:           y[i] = a[i] + b[i % nb]   (nb = n, or one row broadcast)
//   glu_silu_f32:      y[i] = silu(g[i])·u[i],       silu(x) = x / (1 + e^−x)
//   glu_gelu_tanh_f32: y[i] = gelu_tanh(g[i])·u[i],  ½x(1 + tanh(√(2/π)(x + 0.044715x³))) = x·σ(2√(2/π)(x + 0.044715x³))
//   glu_gelu_f32:      y[i] = gelu(g[i])·u[i],       ½x(1 + erf(x/√2))
//   glu_silu_clamp_f32: y[i] = g·σ(1.702g)·(clamp(u[i], −7, 7) + 1), g = min(g[i], 7) (gpt-oss)
//   glu_sigmoid_f32:   y[i] = σ(g[i])·u[i]            (Qwen3.5's gated attention)
// (the act_* functions are in common.h: the NVIDIA mat-vec applies them too)
//   softcap_f32:       x[i] = c·tanh(x[i]/c)         (in place)
//   copy_f32:          y[i] = x[i]                   (KV cache rows; offsets bound by the host)
//   copy_f16_f32:      y[i] = half(x[i])             (f16 KV cache rows; round to nearest even)
//
// Grid: ⌈n/256⌉ threadgroups of 256 threads; thread i handles element i.
// Every op may run in place (y aliasing an input): each thread reads its inputs
// before writing its own element.
// Numerics: precise:: exp and tanh, so fast math cannot change them; erf is not
// in the Metal standard library, so ingot_erf is a rational approximation
// (Eigen's, |error| ≲ 2 ulp on [−4, 4], ±1 outside).
#include <metal_stdlib>
#include "common.h"
using namespace metal;

kernel void add_f32(
        constant add_args & args [[buffer(0)]],
        device const float * a [[buffer(1)]],
        device const float * b [[buffer(2)]],
        device       float * y [[buffer(3)]],
        uint i [[thread_position_in_grid]]) {
    if (i < args.n) {
        y[i] = a[i] + b[i % args.nb];
    }
}

template <typename ACT>
kernel void glu(
        constant unary_args & args [[buffer(0)]],
        device const float  * g    [[buffer(1)]],
        device const float  * u    [[buffer(2)]],
        device       float  * y    [[buffer(3)]],
        uint i [[thread_position_in_grid]]) {
    if (i < args.n) {
        y[i] = ACT::f(g[i]) * u[i];
    }
}

kernel void glu_silu_clamp_f32(
        constant unary_args & args [[buffer(0)]],
        device const float  * g    [[buffer(1)]],
        device const float  * u    [[buffer(2)]],
        device       float  * y    [[buffer(3)]],
        uint i [[thread_position_in_grid]]) {
    if (i < args.n) {
        const float x = min(g[i], 7.0f), v = clamp(u[i], -7.0f, 7.0f);
        y[i] = x / (1.0f + precise::exp(-1.702f * x)) * (v + 1.0f);
    }
}

typedef decltype(glu<act_silu>) glu_t;
template [[host_name("glu_silu_f32")]]      kernel glu_t glu<act_silu>;
template [[host_name("glu_gelu_tanh_f32")]] kernel glu_t glu<act_gelu_tanh>;
template [[host_name("glu_gelu_f32")]]      kernel glu_t glu<act_gelu>;
template [[host_name("glu_sigmoid_f32")]]   kernel glu_t glu<act_sigmoid>;

kernel void softcap_f32(
        constant unary_args & args [[buffer(0)]],
        device   float      * x    [[buffer(1)]],
        uint i [[thread_position_in_grid]]) {
    if (i < args.n) {
        x[i] = args.c * precise::tanh(x[i] / args.c);
    }
}

kernel void copy_f32(
        constant unary_args & args [[buffer(0)]],
        device const float  * x    [[buffer(1)]],
        device       float  * y    [[buffer(2)]],
        uint i [[thread_position_in_grid]]) {
    if (i < args.n) {
        y[i] = x[i];
    }
}

kernel void copy_f16_f32(
        constant unary_args & args [[buffer(0)]],
        device const float  * x    [[buffer(1)]],
        device       half   * y    [[buffer(2)]],
        uint i [[thread_position_in_grid]]) {
    if (i < args.n) {
        y[i] = half(x[i]);
    }
}
