// Package cuda is a thin, typed binding of the NVIDIA CUDA driver API
// (libcuda.so.1), called through purego: no cgo, no CUDA SDK at build or run
// time, only the driver that comes with the GPU. It exposes a device's primary
// context, device memory, streams, events, PTX modules, kernel launches and
// CUDA graphs, and nothing about tensors or models: package kernels builds on
// it, and package cuda/ptx holds ingot's kernels as PTX.
//
// # Threading
//
// A CUDA context is current per OS thread, and goroutines move between
// threads. So a [Context] belongs to one goroutine at a time, locked to its
// OS thread: [Open] locks the calling goroutine (runtime.LockOSThread) and
// makes the context current there; another goroutine takes the context over
// with [Context.Attach] once the first has stopped using it, and
// [Context.Detach] unlocks. Calls from any other goroutine fail with an error
// naming both threads, except the hot path (launches, async copies, graph
// launches and updates), which is not checked: there the driver reports
// CUDA_ERROR_INVALID_CONTEXT, or worse, runs in whatever context that thread
// has. Nothing here is safe for concurrent use.
//
// # Errors
//
// Every failing driver call returns an [*Error] naming the call, the CUDA
// result and its description, e.g.
//
//	cuda: cuLaunchKernel(matvec_q4_f32): CUDA_ERROR_INVALID_VALUE: invalid argument
//
// A machine without the driver or without a GPU gets an error wrapping
// [ErrUnavailable]: "cuda: unavailable (no libcuda.so.1)" or
// "cuda: unavailable (no device)".
//
// # Memory and lifetimes
//
// Device memory ([DevicePtr]) is not visible to the host, unlike Metal's
// shared storage: data moves with the Copy methods. Objects from New*, Alloc
// and LoadModule are owned by the caller and released with Free, Destroy or
// Unload before [Context.Close]. Parameter blocks ([Params]) and graph update
// blocks live in pinned Go memory owned by the context until Close: make them
// once per launch site, not per launch, so the hot path allocates nothing.
//
// The binding targets driver API 11.4 or later (R470+); the PTX in cuda/ptx
// needs R450. Only linux/amd64 and linux/arm64 load the driver; elsewhere
// [Open] returns ErrUnavailable.
package cuda
