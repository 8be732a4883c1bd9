// broken.metal: deliberately wrong kernels the interpreter must catch.
#include <metal_stdlib>
using namespace metal;

// missing_barrier: reads a neighbour's threadgroup slot without a barrier.
kernel void missing_barrier(
        device float * out [[buffer(0)]],
        uint tid [[thread_position_in_threadgroup]],
        uint ntg [[threads_per_threadgroup]]) {
    threadgroup float buf[64];
    buf[tid] = float(tid);
    out[tid] = buf[(tid + 1) % ntg];    // no threadgroup_barrier before this
}

// divergent_barrier: only half the threads reach the barrier.
kernel void divergent_barrier(
        device float * out [[buffer(0)]],
        uint tid [[thread_position_in_threadgroup]]) {
    if (tid < 16) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    out[tid] = 1.0f;
}

// divergent_simd_sum: only some lanes reach simd_sum.
kernel void divergent_simd_sum(
        device float * out [[buffer(0)]],
        uint lane [[thread_index_in_simdgroup]]) {
    float v = 1.0f;
    if (lane < 16) {
        v = simd_sum(v);
    }
    out[lane] = v;
}

// shuffle_inactive: lane 0 reads lane 20 in a simdgroup of 16 threads.
kernel void shuffle_inactive(
        device float * out [[buffer(0)]],
        uint lane [[thread_index_in_simdgroup]]) {
    out[lane] = simd_shuffle(float(lane), 20);
}

// read_past_end: reads x[n], one element past the end.
kernel void read_past_end(
        device const float * x   [[buffer(0)]],
        device       float * out [[buffer(1)]],
        constant uint      & n   [[buffer(2)]],
        uint gid [[thread_position_in_grid]]) {
    out[gid] = x[gid + n];
}

// tg_overflow: more threadgroup memory than Metal allows.
kernel void tg_overflow(
        device float * out [[buffer(0)]],
        uint tid [[thread_position_in_threadgroup]]) {
    threadgroup float big[9000];
    big[tid] = 1.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[tid] = big[tid];
}

// uninit_private: reads a private array that was never written.
kernel void uninit_private(
        device float * out [[buffer(0)]],
        uint tid [[thread_position_in_threadgroup]]) {
    float acc[4];
    if (tid > 1000) {
        acc[0] = 1.0f;
    }
    out[tid] = acc[tid % 4];
}
