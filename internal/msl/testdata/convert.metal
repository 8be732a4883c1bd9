// convert.metal: half and bfloat conversions, vector constructors, packed types.
#include <metal_stdlib>
using namespace metal;

// convert_f32: for each x, out holds 8 words: half bits, bfloat bits,
// float(half(x)), float(bfloat(x)), then half4/float4 round trips.
kernel void convert_f32(
        device const float  * x   [[buffer(0)]],
        device       uint   * out [[buffer(1)]],
        device const half   * hx  [[buffer(2)]],
        device const bfloat * bx  [[buffer(3)]],
        uint i [[thread_position_in_grid]]) {
    float v = x[i];
    half h = half(v);
    bfloat b = bfloat(v);
    device uint * o = out + 8 * i;
    o[0] = as_type<ushort>(h);
    o[1] = as_type<ushort>(b);
    o[2] = as_type<uint>(float(h));
    o[3] = as_type<uint>(float(b));
    float4 f4 = float4(half4(v, -v, 2.0h * h, h + h));
    o[4] = as_type<uint>(f4.y + f4.w);
    o[5] = as_type<uint>(float(hx[i]));
    o[6] = as_type<uint>(float(bx[i]));
    packed_float3 p = packed_float3(float3(v, 1.0f, 2.0f));
    float3 q = float3(p);
    int2 n = int2(float2(v * 100.0f, -2.5f));
    o[7] = as_type<uint>(q.x + q.z + float(n.x) + float(n.y));
}

// vector_ops_f32: swizzles, value-converting constructors and math on vectors.
kernel void vector_ops_f32(
        device const float4 * x   [[buffer(0)]],
        device       float4 * out [[buffer(1)]],
        uint i [[thread_position_in_grid]]) {
    float4 v = x[i];
    uint4 u = uint4(abs(v) * 10.0f);          // converts values, not bits
    float4 w = float4(u);
    float2 lo = v.xy, hi = v.zw;
    out[4 * i + 0] = float4(hi, lo);          // concatenation
    out[4 * i + 1] = w + float4(1);           // splat
    out[4 * i + 2] = select(float4(0), float4(1), v > 0.0f);
    out[4 * i + 3] = float4(dot(v, v), length(v.xy), max(v, 0.25f).x, clamp(v, -0.5f, 0.5f).w);
}
