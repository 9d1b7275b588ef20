// scan.cuh: building blocks of deterministic scans (prefix combines) for
// any state type S (a trivially copyable struct of 32-bit words) and an
// associative combine functor `S combine(S earlier, S later)`.
//
//   warp_inclusive_scan  Kogge-Stone over the 32 lanes with shfl_up: lane
//                        i ends with combine(v_0, ..., v_i), in lane order.
//   block_scan           ITEMS independent sub-tiles of blockDim.x values
//                        (thread t holds element k * blockDim.x + t of
//                        sub-tile k, so loads are coalesced): each value
//                        becomes its sub-tile's inclusive prefix and every
//                        thread gets each sub-tile's total. Warp scans, then
//                        the warp totals scanned by warp 0 through shared
//                        memory; three barriers for all ITEMS sub-tiles.
// The combine order depends only on the block size, so results are bitwise
// reproducible. The caller carries the prefix of earlier tiles.
// No element type here: includers supply u32 (dtype.cuh does).
#pragma once
#include "common/reduce.cuh"

// `v` of lane `lane - off` in the warp (lanes below `off` keep their own).
template <typename S>
__device__ __forceinline__ S shfl_up_state(const S& v, int off) {
    return map_words(v, [off](unsigned w) { return __shfl_up_sync(0xffffffffu, w, off); });
}

template <typename S, typename F>
__device__ __forceinline__ S warp_inclusive_scan(S v, F combine) {
    const u32 lane = threadIdx.x & 31u;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        const S o = shfl_up_state(v, off);
        if (lane >= (u32)off) v = combine(o, v);
    }
    return v;
}

// Every thread of the block calls; blockDim.x a multiple of 32 (<= 1024);
// `smem` holds ITEMS * 32 states.
template <typename S, int ITEMS, typename F>
__device__ __forceinline__ void block_scan(S (&v)[ITEMS], S (&total)[ITEMS], F combine, S* smem) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warp = threadIdx.x >> 5;
    const u32 warps = blockDim.x >> 5;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) v[k] = warp_inclusive_scan(v[k], combine);
    __syncthreads();  // the previous call's readers are done with smem
    if (lane == 31u) {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) smem[k * 32 + warp] = v[k];
    }
    __syncthreads();
    if (warp == 0) {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            S w = smem[k * 32 + (lane < warps ? lane : warps - 1)];
            w = warp_inclusive_scan(w, combine);
            __syncwarp();  // every lane has read its slot before any is rewritten
            if (lane < warps) smem[k * 32 + lane] = w;
        }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        if (warp > 0) v[k] = combine(smem[k * 32 + warp - 1], v[k]);
        total[k] = smem[k * 32 + warps - 1];
    }
}
