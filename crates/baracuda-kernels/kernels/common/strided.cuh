// strided.cuh: the strided path shared by every pointwise kernel: the
// grid-stride map over offsets.cuh's offsets of one linear index into up to
// MAX_OUTS outputs and MAX_INS inputs. Input 0 may have its own element
// type C0 (the bool condition of `where`); every other operand is T.
#pragma once
#include "common/offsets.cuh"

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
