// offsets.cuh: the parameter block of every strided elementwise kernel
// (StridedArgs, filled by layout.rs) and the offsets of one linear index
// into its outputs and inputs. Element types play no part here, so kernels
// with their own operand types (cast.cu, logic.cu) include this alone;
// strided.cuh adds the map over dtype.cuh's T.
//
// The host collapses contiguous axes and drops extent-1 axes first, so
// `rank` is usually small. Axis rank-1 is the innermost. Offsets are always
// 64-bit; the linear index type I is u32 when the element count fits, which
// makes the divisions cheap.
#pragma once

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;

#define MAX_RANK 8
#define MAX_OUTS 3
#define MAX_INS 4

struct StridedArgs {
    u64 n;                              // logical elements
    u32 rank;                           // axes in use (<= MAX_RANK)
    u32 pad;
    u64 shape[MAX_RANK];                // extents, innermost last
    i64 out_stride[MAX_OUTS][MAX_RANK]; // element strides per output
    i64 in_stride[MAX_INS][MAX_RANK];   // element strides per input
    u64 out[MAX_OUTS];                  // output addresses (0 = not written)
    u64 in[MAX_INS];                    // input addresses
};

// Offsets of `linear` into the first NOUT outputs and NIN inputs. Member
// arrays are indexed with unrolled constants so the parameters stay in the
// constant bank.
template <int NOUT, int NIN, typename I>
__device__ __forceinline__ void strided_offsets(const StridedArgs& p, I linear, i64 (&oo)[NOUT],
                                                i64 (&io)[NIN]) {
#pragma unroll
    for (int k = 0; k < NOUT; ++k) oo[k] = 0;
#pragma unroll
    for (int k = 0; k < NIN; ++k) io[k] = 0;
#pragma unroll
    for (int d = MAX_RANK - 1; d >= 0; --d) {
        if (d < (int)p.rank) {
            const I ext = (I)p.shape[d];
            const I c = linear % ext;
            linear /= ext;
#pragma unroll
            for (int k = 0; k < NOUT; ++k) oo[k] += (i64)c * p.out_stride[k][d];
#pragma unroll
            for (int k = 0; k < NIN; ++k) io[k] += (i64)c * p.in_stride[k][d];
        }
    }
}
