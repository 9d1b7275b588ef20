// strided.cuh: the strided path shared by every pointwise kernel: offsets
// of one linear index into up to MAX_OUTS outputs and MAX_INS inputs, and
// the grid-stride map over them. Input 0 may have its own element type C0
// (the bool condition of `where`); every other operand is T.
//
// The host collapses contiguous axes and drops extent-1 axes first, so
// `rank` is usually small. Axis rank-1 is the innermost. Offsets are always
// 64-bit; the linear index type I is u32 when the element count fits, which
// makes the divisions cheap.
#pragma once

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

typedef unsigned char u8;

// A bool (one byte, 0 or 1) read as 0 or 1 in the accumulator type.
__device__ __forceinline__ ACC to_acc(u8 v) { return v ? ACC(1) : ACC(0); }

// One element per iteration of a grid-stride loop: load the NIN inputs
// (input 0 of type C0), apply F (as pointwise_contig's functor), store the
// outputs that are set.
template <int NIN, int NOUT, typename I, typename F, typename C0 = T>
__device__ __forceinline__ void pointwise_strided(const StridedArgs& p, F f) {
    const I n = (I)p.n;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        i64 oo[NOUT], io[NIN];
        strided_offsets<NOUT, NIN, I>(p, i, oo, io);
        ACC a[NIN], r[NOUT];
#pragma unroll
        for (int k = 0; k < NIN; ++k)
            a[k] = k == 0 ? to_acc(((const C0*)p.in[0])[io[0]]) : to_acc(((const T*)p.in[k])[io[k]]);
        f(a, r);
#pragma unroll
        for (int k = 0; k < NOUT; ++k)
            if (p.out[k]) ((T*)p.out[k])[oo[k]] = from_acc(r[k]);
    }
}
