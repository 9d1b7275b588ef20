// strided.cuh: offsets of one linear index into up to MAX_OPS strided operands.
//
// The host collapses contiguous axes and drops extent-1 axes first, so
// `rank` is usually small. Axis rank-1 is the innermost. Offsets are always
// 64-bit; the linear index type I is u32 when the element count fits, which
// makes the divisions cheap.
#pragma once

#define MAX_RANK 8
#define MAX_OPS 5

struct StridedArgs {
    u64 n;                          // logical elements
    u32 rank;                       // axes in use (<= MAX_RANK)
    u32 n_ops;                      // operands in use (<= MAX_OPS)
    u64 shape[MAX_RANK];            // extents, innermost last
    i64 stride[MAX_OPS][MAX_RANK];  // element strides per operand
    u64 ptr[MAX_OPS];               // device addresses (0 = unused)
};

template <int NOPS, typename I>
__device__ __forceinline__ void strided_offsets(const StridedArgs& p, I linear, i64 (&off)[NOPS]) {
#pragma unroll
    for (int k = 0; k < NOPS; ++k) off[k] = 0;
#pragma unroll
    for (int d = MAX_RANK - 1; d >= 0; --d) {
        if (d < (int)p.rank) {
            const I ext = (I)p.shape[d];
            const I c = linear % ext;
            linear /= ext;
#pragma unroll
            for (int k = 0; k < NOPS; ++k) off[k] += (i64)c * p.stride[k][d];
        }
    }
}
