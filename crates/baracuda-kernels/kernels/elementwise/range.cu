// range.cu: PyTorch's arange, linspace and logspace into a 1-D view
// y[i * stride], i < n, with the arithmetic PyTorch's CUDA kernels do
// (range.rs documents each; the host converts start, end, step and base to
// the kernel's types first).
//
//   arange    f32/f16/bf16: start + step * i in f32 (FMA), f64 in f64;
//             integers start + step * i in i64, wrapped to the type.
//   linspace  i < n/2: start + step * i, else end - step * (n - 1 - i),
//             step = (end - start) / (n - 1): in T's own arithmetic for
//             floats (f16/bf16 round each operation to T, as c10's Half
//             and BFloat16 operators; f32 and f64 fuse the multiply-add),
//             in f32 for integers (then truncated as static_cast).
//   logspace  pow(base, linspace value) in f32 (f16, bf16, f32) or f64.
// One element per thread of a grid-stride loop; n * sizeof(T) bytes
// written, nothing read.
// Specialised by: RANGE_TO (kernel_sources::element_code), RANGE_OP
// (0 arange, 1 linspace, 2 logspace).
#include "common/convert.cuh"

#if !defined(RANGE_TO) || !defined(RANGE_OP)
#error "RANGE_TO and RANGE_OP must be defined"
#endif

typedef Ty<RANGE_TO>::S T;

// The host's parameters, as each op reads them.
struct RangeParams {
    double fstart, fend, fstep, base;  // floats in T's arithmetic type
    i64 istart, iend, istep;           // integers
    u64 n;
    i64 stride;
};

// Rounding to T of a value in f32 (f16 and bf16: each c10 operator's
// result), identity for f32.
__device__ __forceinline__ float rnd(float v) {
#if RANGE_TO == 2
    return __half2float(__float2half_rn(v));
#elif RANGE_TO == 3
    return __bfloat162float(__float2bfloat16_rn(v));
#else
    return v;
#endif
}

__device__ __forceinline__ T value(const RangeParams& p, u64 i) {
#if RANGE_OP == 0 && (RANGE_TO == 1)
    return Cvt<RANGE_TO>::f(fma(p.fstep, (double)i, p.fstart), false);
#elif RANGE_OP == 0 && (RANGE_TO == 0 || RANGE_TO == 2 || RANGE_TO == 3)
    return Cvt<RANGE_TO>::f(fmaf((float)p.fstep, (float)i, (float)p.fstart), false);
#elif RANGE_OP == 0
    return Cvt<RANGE_TO>::f((i64)((u64)p.istart + (u64)p.istep * i), false);
#elif RANGE_TO == 1
    // linspace / logspace in f64
    const i64 half = (i64)(p.n / 2);
    const double v = (i64)i < half ? fma(p.fstep, (double)i, p.fstart)
                                   : fma(-p.fstep, (double)(p.n - 1 - i), p.fend);
#if RANGE_OP == 2
    return pow(p.base, v);
#else
    return v;
#endif
#elif RANGE_TO == 0 || RANGE_TO == 2 || RANGE_TO == 3
    const i64 half = (i64)(p.n / 2);
    const float step = (float)p.fstep;
#if RANGE_TO == 0
    const float v = (i64)i < half ? fmaf(step, (float)i, (float)p.fstart)
                                  : fmaf(-step, (float)(p.n - 1 - i), (float)p.fend);
#else
    // c10: Half * int64 rounds the index to T, then the product, then the sum
    const float v = (i64)i < half ? rnd((float)p.fstart + rnd(step * rnd((float)i)))
                                  : rnd((float)p.fend - rnd(step * rnd((float)(p.n - 1 - i))));
#endif
#if RANGE_OP == 2
    return Cvt<RANGE_TO>::f(powf((float)p.base, v), false);
#else
    return Cvt<RANGE_TO>::f(v, false);
#endif
#else
    // linspace into an integer type: f32 arithmetic, truncated
    const i64 half = (i64)(p.n / 2);
    const float step = (float)p.fstep;
    const float v = (i64)i < half ? fmaf(step, (float)i, (float)p.istart)
                                  : fmaf(-step, (float)(p.n - 1 - i), (float)p.iend);
    return Cvt<RANGE_TO>::f(v, false);
#endif
}

extern "C" __global__ void __launch_bounds__(256) range_kernel(T* __restrict__ y, RangeParams p) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += (u64)gridDim.x * blockDim.x)
        y[(i64)i * p.stride] = value(p, i);
}
