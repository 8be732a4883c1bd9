// metal_stdlib for PTX: ingot's compat <metal_stdlib> when the MSL kernels are
// compiled to NVIDIA PTX by clang (C++ for OpenCL 2021, nvptx64), see
// internal/msl/ptx.go. The generator assembles it from
//   rt/ptx/head.h       this prologue: address spaces, libm → ingot_math.h
//   rt/metal_stdlib     the interpreter's header from "scalar types" up to
//                       "memory flags" (types, vectors, constructors, traits,
//                       math), verbatim
//   rt/ptx/runtime.h    barriers, simd_* collectives, simdgroup_matrix on shfl.sync
//   rt/metal_stdlib     the interpreter's atomics, verbatim
//   rt/ptx/launch.h     entry-point support: builtins, parameters, shared memory
// so a kernel computes the same thing here as in the interpreter, with the
// interpreter's reduction orders, and nothing about types is written twice.
#ifndef INGOT_METAL_STDLIB
#define INGOT_METAL_STDLIB

#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#pragma OPENCL EXTENSION __cl_clang_function_pointers : enable
#pragma OPENCL EXTENSION __cl_clang_variadic_functions : enable

#define __INGOT_PTX__ 1

// Metal's address spaces. `constant` data reaches a kernel by value (a .param
// struct, Metal's setBytes) or through a device pointer, so it is the generic
// address space here; program-scope constants live in .global.
#define device __global
#define constant const
#define threadgroup __local
#define thread __private
#define kernel
// OpenCL keywords that are ordinary identifiers in Metal.
#define local __mtl_id_local
#define global __mtl_id_global
#define generic __mtl_id_generic
#define read_only __mtl_id_read_only
#define write_only __mtl_id_write_only
#define read_write __mtl_id_read_write
#define pipe __mtl_id_pipe
#define METAL_FUNC inline __attribute__((always_inline))
#define __MTL inline __attribute__((always_inline))

// PTX has no libm: the math section's libm builtins become ingot_math.h's
// (sqrt, fma, floor, … map to PTX instructions and stay builtins).
#include "ingot_math.h"
#define __builtin_expf __ingot_expf
#define __builtin_exp2f __ingot_exp2f
#define __builtin_logf __ingot_logf
#define __builtin_log2f __ingot_log2f
#define __builtin_log10f __ingot_log10f
#define __builtin_sinf __ingot_sinf
#define __builtin_cosf __ingot_cosf
#define __builtin_tanf __ingot_tanf
#define __builtin_tanhf __ingot_tanhf
#define __builtin_ldexpf __ingot_ldexpf
#define __builtin_nextafterf __ingot_nextafterf
// The rest of libm's float functions are declared and never defined: a kernel
// that uses one leaves an .extern .func __ingot_no_<f> in the PTX, which the
// generator reports by name. (Left as builtins, some would crash the NVPTX
// backend; an unavailable attribute would fire on the unused templates too.)
#define __INGOT_NO_LIBM(f, params) extern "C" float __ingot_no_##f params;
__INGOT_NO_LIBM(powf, (float, float))
__INGOT_NO_LIBM(atan2f, (float, float))
__INGOT_NO_LIBM(hypotf, (float, float))
__INGOT_NO_LIBM(fdimf, (float, float))
__INGOT_NO_LIBM(asinf, (float))
__INGOT_NO_LIBM(acosf, (float))
__INGOT_NO_LIBM(atanf, (float))
__INGOT_NO_LIBM(sinhf, (float))
__INGOT_NO_LIBM(coshf, (float))
__INGOT_NO_LIBM(asinhf, (float))
__INGOT_NO_LIBM(acoshf, (float))
__INGOT_NO_LIBM(atanhf, (float))
__INGOT_NO_LIBM(erff, (float))
__INGOT_NO_LIBM(cbrtf, (float))
#undef __INGOT_NO_LIBM
#define __builtin_powf __ingot_no_powf
#define __builtin_atan2f __ingot_no_atan2f
#define __builtin_hypotf __ingot_no_hypotf
#define __builtin_fdimf __ingot_no_fdimf
#define __builtin_asinf __ingot_no_asinf
#define __builtin_acosf __ingot_no_acosf
#define __builtin_atanf __ingot_no_atanf
#define __builtin_sinhf __ingot_no_sinhf
#define __builtin_coshf __ingot_no_coshf
#define __builtin_asinhf __ingot_no_asinhf
#define __builtin_acoshf __ingot_no_acoshf
#define __builtin_atanhf __ingot_no_atanhf
#define __builtin_erff __ingot_no_erff
#define __builtin_cbrtf __ingot_no_cbrtf

