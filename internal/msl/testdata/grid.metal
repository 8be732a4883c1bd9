// grid.metal: builtins on 3-D grids.
#include <metal_stdlib>
using namespace metal;

// grid_ids: out[linear thread id] = 8 words describing the thread.
kernel void grid_ids(
        device uint * out [[buffer(0)]],
        uint3  gid  [[thread_position_in_grid]],
        uint3  ng   [[threads_per_grid]],
        ushort3 tid [[thread_position_in_threadgroup]],
        uint3  tg   [[threadgroup_position_in_grid]],
        uint3  ntgs [[threadgroups_per_grid]],
        uint   idx  [[thread_index_in_threadgroup]],
        ushort sg   [[simdgroup_index_in_threadgroup]],
        uint2  tptg [[threads_per_threadgroup]]) {
    uint i = (gid.z * ng.y + gid.y) * ng.x + gid.x;
    device uint * o = out + 8 * i;
    o[0] = gid.x | gid.y << 10 | gid.z << 20;
    o[1] = tid.x | tid.y << 10 | tid.z << 20;
    o[2] = tg.x | tg.y << 10 | tg.z << 20;
    o[3] = ntgs.x | ntgs.y << 10 | ntgs.z << 20;
    o[4] = idx;
    o[5] = sg;
    o[6] = tptg.x | tptg.y << 10;
    o[7] = 1;
}
