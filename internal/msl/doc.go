// Package msl runs ingot's Metal Shading Language kernels on Linux CPUs: an
// MSL interpreter for tests and the metal-emu backend, not a fast backend and
// not Metal.
//
// [Open] compiles unmodified .metal sources with clang (≥ 16) in OpenCL C++
// mode against a compat <metal_stdlib>, after a generator has found each
// kernel's bindings, rewritten what clang cannot take (line-preservingly) and
// linted for constructs the interpreter cannot model faithfully. The library
// is cached by a hash of sources, compiler and options and loaded with purego
// (no cgo). Each threadgroup's threads run as fibers, so threadgroup_barrier
// and the simd_* collectives (32 lanes) have their real semantics; threadgroups
// run in parallel on OS threads.
//
// [*Device] implements [metal.Device], the seam under package kernels, so the
// same dispatch code drives Apple's GPU and this interpreter. Tests open a
// device with package msltest. Setting INGOT_MSL_TRACE=FILE appends the name of
// every dispatched kernel to FILE.
//
// See README.md for what the interpreter proves and what it cannot, and for
// the shader rules its lint enforces. Nothing here has run on Apple hardware.
package msl
