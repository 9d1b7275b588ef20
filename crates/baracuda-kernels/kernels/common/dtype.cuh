// dtype.cuh: element type T and accumulator ACC selected by -DBARACUDA_DTYPE,
// with conversions and overloaded math for the accumulator. Every kernel
// specialised by element type includes it; the host side's one map from
// element types to codes is `kernel_sources::dtype_code`.
//
//   BARACUDA_DTYPE  T               ACC
//   0               float           float
//   1               double          double
//   2               __half          float
//   3               __nv_bfloat16   float
//
// Low-precision types compute in f32 and round once, to nearest even, when
// stored.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;

#ifndef BARACUDA_DTYPE
#error "BARACUDA_DTYPE must be defined (0 f32, 1 f64, 2 f16, 3 bf16)"
#endif

#if BARACUDA_DTYPE == 0
typedef float T;
typedef float ACC;
__device__ __forceinline__ ACC to_acc(T v) { return v; }
__device__ __forceinline__ T from_acc(ACC v) { return v; }
#elif BARACUDA_DTYPE == 1
typedef double T;
typedef double ACC;
__device__ __forceinline__ ACC to_acc(T v) { return v; }
__device__ __forceinline__ T from_acc(ACC v) { return v; }
#elif BARACUDA_DTYPE == 2
typedef __half T;
typedef float ACC;
__device__ __forceinline__ ACC to_acc(T v) { return __half2float(v); }
__device__ __forceinline__ T from_acc(ACC v) { return __float2half_rn(v); }
#elif BARACUDA_DTYPE == 3
typedef __nv_bfloat16 T;
typedef float ACC;
__device__ __forceinline__ ACC to_acc(T v) { return __bfloat162float(v); }
__device__ __forceinline__ T from_acc(ACC v) { return __float2bfloat16_rn(v); }
#else
#error "unknown BARACUDA_DTYPE"
#endif

// Math on the accumulator type, IEEE (no fast-math approximations).
__device__ __forceinline__ float m_exp(float x) { return expf(x); }
__device__ __forceinline__ double m_exp(double x) { return exp(x); }
__device__ __forceinline__ float m_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double m_tanh(double x) { return tanh(x); }
__device__ __forceinline__ bool m_isnan(float x) { return x != x; }
__device__ __forceinline__ bool m_isnan(double x) { return x != x; }
__device__ __forceinline__ float m_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double m_pow(double a, double b) { return pow(a, b); }

// Elements of T in one 16-byte vector.
#define VEC (16 / (int)sizeof(T))

__device__ __forceinline__ void load_vec(const T* __restrict__ p, u64 i, T (&v)[VEC]) {
    uint4 r = reinterpret_cast<const uint4*>(p)[i];
    memcpy(&v[0], &r, 16);
}

__device__ __forceinline__ void store_vec(T* __restrict__ p, u64 i, const T (&v)[VEC]) {
    uint4 r;
    memcpy(&r, &v[0], 16);
    reinterpret_cast<uint4*>(p)[i] = r;
}
