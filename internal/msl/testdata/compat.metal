// compat.metal: the compat <metal_stdlib> math and integer functions.
#include <metal_stdlib>
using namespace metal;

#define NOUT 32

// math_f32: out[NOUT*i + j] = f_j(x[i]) for x in (0, 1].
kernel void math_f32(
        device const float * x   [[buffer(0)]],
        device       float * out [[buffer(1)]],
        uint i [[thread_position_in_grid]]) {
    float v = x[i];
    float4 v4 = float4(v, v * 0.5f, -v, 2.0f * v);
    half h = half(v);
    device float * o = out + NOUT * i;
    o[0] = sqrt(v);
    o[1] = rsqrt(v);
    o[2] = exp(v);
    o[3] = exp2(v);
    o[4] = log(v);
    o[5] = log2(v);
    o[6] = sin(v);
    o[7] = cos(v);
    o[8] = tanh(v);
    o[9] = fast::exp(v);
    o[10] = precise::divide(1.0f, v);
    o[11] = pow(v, 1.5f);
    o[12] = float(exp(h));
    o[13] = fract(v * 3.0f);
    o[14] = mix(1.0f, 3.0f, v);
    o[15] = clamp(v * 4.0f, 1.0f, 2.0f);
    o[16] = fma(v, 2.0f, 1.0f);
    o[17] = atan2(v, 1.0f);
    o[18] = erf(v);
    o[19] = max3(v, 0.5f, 0.25f);
    o[20] = median3(v, 0.5f, 0.25f);
    o[21] = sign(v - 0.5f);
    o[22] = step(0.5f, v);
    o[23] = smoothstep(0.0f, 1.0f, v);
    o[24] = length(v4);
    o[25] = normalize(v4).x;
    o[26] = abs(v4).z;
    o[27] = exp(v4).w;
    o[28] = float(popcount(uint(v * 1000.0f)));
    o[29] = float(clz(uint(v * 1000.0f) + 1u));
    o[30] = float(extract_bits(uint(v * 1000.0f), 2, 3));
    float c;
    o[31] = sincos(v, c) + c + ldexp(v, 3) + float(isnan(v)) + float(all(isfinite(v4)));
}
