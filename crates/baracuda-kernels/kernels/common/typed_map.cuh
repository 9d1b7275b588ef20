// typed_map.cuh: pointwise maps whose operands have element types of their
// own rather than dtype.cuh's T: NIN inputs of TI, one output of TO (cast.cu
// converts between them; logic.cu compares, tests and combines bits).
//
// F is a functor `TO operator()(const TI (&x)[NIN]) const`.
//
// Contiguous, 16-byte aligned operands (typed_contig): each thread maps
// LANES = 16 / min(sizeof TI, sizeof TO) elements, so the narrower side
// moves one 16-byte vector and the wider side several; one pass of the
// grid, which the host sizes from the same LANES (layout.rs
// `MapKernels::launch_with`), and the last block also does the tail.
// Otherwise (typed_strided) offsets.cuh's offsets, one element per
// iteration of a grid-stride loop.
#pragma once
#include "common/offsets.cuh"

// Elements per thread of the contiguous kernel, and the 16-byte vectors
// they fill on the input and the output side.
template <typename TI, typename TO>
struct Lanes {
    enum {
        N = (int)(16 / (sizeof(TI) < sizeof(TO) ? sizeof(TI) : sizeof(TO))),
        IN_VECS = (int)(N * sizeof(TI) / 16),
        OUT_VECS = (int)(N * sizeof(TO) / 16),
    };
};

// out = f(in) over n contiguous elements, every pointer 16-byte aligned.
template <typename TI, typename TO, int NIN, typename F>
__device__ __forceinline__ void typed_contig(const TI* const (&in)[NIN], TO* __restrict__ out, u64 n,
                                             F f) {
    typedef Lanes<TI, TO> L;
    const u64 groups = n / L::N;
    const u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (g < groups) {
        TI a[NIN][L::N];
        TO r[L::N];
#pragma unroll
        for (int k = 0; k < NIN; ++k) {
#pragma unroll
            for (int v = 0; v < L::IN_VECS; ++v) {
                const uint4 w = reinterpret_cast<const uint4*>(in[k])[g * L::IN_VECS + v];
                memcpy(reinterpret_cast<char*>(a[k]) + 16 * v, &w, 16);
            }
        }
#pragma unroll
        for (int e = 0; e < L::N; ++e) {
            TI x[NIN];
#pragma unroll
            for (int k = 0; k < NIN; ++k) x[k] = a[k][e];
            r[e] = f(x);
        }
#pragma unroll
        for (int v = 0; v < L::OUT_VECS; ++v) {
            uint4 w;
            memcpy(&w, reinterpret_cast<const char*>(r) + 16 * v, 16);
            reinterpret_cast<uint4*>(out)[g * L::OUT_VECS + v] = w;
        }
    }
    if (blockIdx.x == gridDim.x - 1) {
        for (u64 t = groups * L::N + threadIdx.x; t < n; t += blockDim.x) {
            TI x[NIN];
#pragma unroll
            for (int k = 0; k < NIN; ++k) x[k] = in[k][t];
            out[t] = f(x);
        }
    }
}

// out = f(in) at the offsets of StridedArgs p (output 0, inputs 0..NIN-1),
// linear index type I.
template <typename TI, typename TO, int NIN, typename I, typename F>
__device__ __forceinline__ void typed_strided(const StridedArgs& p, F f) {
    const I n = (I)p.n;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        i64 oo[1], io[NIN];
        strided_offsets<1, NIN, I>(p, i, oo, io);
        TI x[NIN];
#pragma unroll
        for (int k = 0; k < NIN; ++k) x[k] = ((const TI*)p.in[k])[io[k]];
        ((TO*)p.out[0])[oo[0]] = f(x);
    }
}
