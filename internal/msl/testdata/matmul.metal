// matmul.metal: C = A·B with 8x8 simdgroup matrices.
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

struct matmul_args {
    uint M, N, K;
};

// matmul_sg: one simdgroup (32 threads) per 8x8 tile of C; A (M, K), B (K, N)
// row-major, M, N, K multiples of 8. A is staged through threadgroup memory and
// B is read transposed from Bt (N, K) when the kernel is the _bt variant.
template <typename T>
kernel void matmul_sg(
        constant matmul_args & args [[buffer(0)]],
        device const T       * A    [[buffer(1)]],
        device const T       * B    [[buffer(2)]],
        device       float   * C    [[buffer(3)]],
        uint2  tile [[threadgroup_position_in_grid]],
        ushort lane [[thread_index_in_simdgroup]]) {
    threadgroup T a_tile[64];
    simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    for (uint k = 0; k < args.K; k += 8) {
        for (uint i = lane; i < 64; i += 32) {
            a_tile[i] = A[(tile.y * 8 + i / 8) * args.K + k + i % 8];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        simdgroup_matrix<T, 8, 8> a, b;
        simdgroup_load(a, a_tile, 8);
        simdgroup_load(b, B, args.N, ulong2(tile.x * 8, k));
        simdgroup_multiply_accumulate(acc, a, b, acc);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    simdgroup_store(acc, C, args.N, ulong2(tile.x * 8, tile.y * 8));
}

template [[host_name("matmul_sg_f32")]] kernel void matmul_sg<float>(
        constant matmul_args &, device const float *, device const float *, device float *, uint2, ushort);

typedef decltype(matmul_sg<half>) matmul_sg_t;
template [[host_name("matmul_sg_f16")]] kernel matmul_sg_t matmul_sg<half>;

// matmul_bt_f32: C = A·Bᵀ with Bt (N, K), loaded transposed.
kernel void matmul_bt_f32(
        constant matmul_args & args [[buffer(0)]],
        device const float   * A    [[buffer(1)]],
        device const float   * Bt   [[buffer(2)]],
        device       float   * C    [[buffer(3)]],
        uint2 tile [[threadgroup_position_in_grid]]) {
    simdgroup_float8x8 acc(0.0f);
    for (uint k = 0; k < args.K; k += 8) {
        simdgroup_float8x8 a, b;
        simdgroup_load(a, A, args.K, ulong2(k, tile.y * 8));
        simdgroup_load(b, Bt, args.K, ulong2(k, tile.x * 8), true);
        simdgroup_multiply_accumulate(acc, a, b, acc);
    }
    simdgroup_store(acc, C, args.N, ulong2(tile.x * 8, tile.y * 8));
}
