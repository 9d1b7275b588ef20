// fill.cu: y[i] = v for every element of a view (PyTorch's fill_, full,
// zeros, ones), and eye: y[r, c] = (r == c ? one : zero).
//
// The host converts the value to the element type (fill.rs, PyTorch's
// rules) and passes its bits, so one module per element size serves every
// dtype of that size.
// Contiguous, 16-byte aligned views: each thread stores one 16-byte vector
// of the repeated pattern (MapKernels' one-pass contiguous launch), the
// last block the tail. Others: strided.cuh's offsets (rank <= 8, 64-bit
// offsets, u32 or u64 linear index), one element per iteration.
// Traffic: n * FILL_BYTES bytes written, nothing read: judged by GB/s
// against the copy ceiling.
// Specialised by: FILL_BYTES (1, 2, 4 or 8).
typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;

// strided.cuh names T and ACC; the fill kernels use only its StridedArgs
// and strided_offsets.
typedef float T;
typedef float ACC;
#include "common/strided.cuh"

#if FILL_BYTES == 1
typedef unsigned char E;
#elif FILL_BYTES == 2
typedef unsigned short E;
#elif FILL_BYTES == 4
typedef unsigned int E;
#elif FILL_BYTES == 8
typedef unsigned long long E;
#else
#error "FILL_BYTES must be 1, 2, 4 or 8"
#endif

#define FVEC ((int)(16 / sizeof(E)))

extern "C" __global__ void __launch_bounds__(256) fill_contig(E* __restrict__ y, u64 n, u64 bits) {
    const E e = (E)bits;
    const u64 groups = n / FVEC;
    const u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (g < groups) {
        E r[FVEC];
#pragma unroll
        for (int k = 0; k < FVEC; ++k) r[k] = e;
        uint4 v;
        memcpy(&v, r, 16);
        reinterpret_cast<uint4*>(y)[g] = v;
    }
    if (blockIdx.x == gridDim.x - 1) {
        for (u64 t = groups * FVEC + threadIdx.x; t < n; t += blockDim.x) y[t] = e;
    }
}

template <typename I>
__device__ __forceinline__ void fill_strided(const StridedArgs& p, u64 bits) {
    const E e = (E)bits;
    const I n = (I)p.n;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        i64 oo[1], io[1];  // no inputs: io stays 0
        strided_offsets<1, 1, I>(p, i, oo, io);
        ((E*)p.out[0])[oo[0]] = e;
    }
}

extern "C" __global__ void __launch_bounds__(256) fill_strided32(StridedArgs p, u64 bits) {
    fill_strided<u32>(p, bits);
}
extern "C" __global__ void __launch_bounds__(256) fill_strided64(StridedArgs p, u64 bits) {
    fill_strided<u64>(p, bits);
}

// eye over a rows x cols view with element strides s0, s1: the bits of
// one on the diagonal, zero elsewhere; one element per iteration.
extern "C" __global__ void __launch_bounds__(256)
    eye_kernel(E* __restrict__ y, u64 rows, u64 cols, i64 s0, i64 s1, u64 one) {
    const u64 n = rows * cols;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        const u64 r = i / cols, c = i - r * cols;
        y[(i64)r * s0 + (i64)c * s1] = r == c ? (E)one : (E)0;
    }
}
