// mathcheck.metal: the PTX compat's math functions on the device, for the
// GPU test (cuda/gpu_test.go): math_<f>(n, x, y): y[i] = f(x[i]) for i < n.
// The interpreter maps the same calls to libm; on Metal they are Apple's.
#include <metal_stdlib>
using namespace metal;

template <typename F>
kernel void mathcheck(
        constant uint  & n [[buffer(0)]],
        device const float * x [[buffer(1)]],
        device       float * y [[buffer(2)]],
        uint i [[thread_position_in_grid]]) {
    if (i < n) {
        y[i] = F::f(x[i]);
    }
}

struct f_exp   { static float f(float x) { return precise::exp(x); } };
struct f_exp2  { static float f(float x) { return precise::exp2(x); } };
struct f_log   { static float f(float x) { return precise::log(x); } };
struct f_log2  { static float f(float x) { return precise::log2(x); } };
struct f_log10 { static float f(float x) { return precise::log10(x); } };
struct f_sin   { static float f(float x) { return precise::sin(x); } };
struct f_cos   { static float f(float x) { return precise::cos(x); } };
struct f_tan   { static float f(float x) { return precise::tan(x); } };
struct f_tanh  { static float f(float x) { return precise::tanh(x); } };

typedef decltype(mathcheck<f_exp>) mathcheck_t;
template [[host_name("math_exp")]]   kernel mathcheck_t mathcheck<f_exp>;
template [[host_name("math_exp2")]]  kernel mathcheck_t mathcheck<f_exp2>;
template [[host_name("math_log")]]   kernel mathcheck_t mathcheck<f_log>;
template [[host_name("math_log2")]]  kernel mathcheck_t mathcheck<f_log2>;
template [[host_name("math_log10")]] kernel mathcheck_t mathcheck<f_log10>;
template [[host_name("math_sin")]]   kernel mathcheck_t mathcheck<f_sin>;
template [[host_name("math_cos")]]   kernel mathcheck_t mathcheck<f_cos>;
template [[host_name("math_tan")]]   kernel mathcheck_t mathcheck<f_tan>;
template [[host_name("math_tanh")]]  kernel mathcheck_t mathcheck<f_tanh>;
