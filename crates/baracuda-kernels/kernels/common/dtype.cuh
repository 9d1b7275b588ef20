// dtype.cuh: element type T and accumulator ACC selected by -DBARACUDA_DTYPE,
// with conversions and overloaded math for the accumulator. Every kernel
// specialised by element type includes it; the host side's one map from
// element types to codes is `kernel_sources::dtype_code` (the floats) and
// `kernel_sources::numeric_dtype_code` (which adds the integer codes, those
// of `element_code`).
//
//   BARACUDA_DTYPE  T               ACC   BARACUDA_INTEGER
//   0               float           float   0
//   1               double          double  0
//   2               __half          float   0
//   3               __nv_bfloat16   float   0
//   9               int             i64     1
//   10              long long       i64     1
//
// Low-precision types compute in f32 and round once, to nearest even, when
// stored. Integer types accumulate in i64 with two's complement wrap-around
// (acc_add, acc_mul: the arithmetic runs in u64, where overflow is defined);
// only the kernels that take them (the reductions and scans) are compiled
// with codes 9 and 10.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;

#ifndef BARACUDA_DTYPE
#error "BARACUDA_DTYPE must be defined (0 f32, 1 f64, 2 f16, 3 bf16, 9 i32, 10 i64)"
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
#elif BARACUDA_DTYPE == 9
typedef int T;
typedef i64 ACC;
#define BARACUDA_INTEGER 1
__device__ __forceinline__ ACC to_acc(T v) { return v; }
__device__ __forceinline__ T from_acc(ACC v) { return (T)v; }
__device__ __forceinline__ ACC acc_lowest() { return -2147483647LL - 1; }
__device__ __forceinline__ ACC acc_highest() { return 2147483647LL; }
#elif BARACUDA_DTYPE == 10
typedef long long T;
typedef i64 ACC;
#define BARACUDA_INTEGER 1
__device__ __forceinline__ ACC to_acc(T v) { return v; }
__device__ __forceinline__ T from_acc(ACC v) { return v; }
__device__ __forceinline__ ACC acc_lowest() { return -9223372036854775807LL - 1; }
__device__ __forceinline__ ACC acc_highest() { return 9223372036854775807LL; }
#else
#error "unknown BARACUDA_DTYPE"
#endif

#ifndef BARACUDA_INTEGER
#define BARACUDA_INTEGER 0
// The identities of max and min: -inf and +inf (T's lowest and highest
// value for the integer types).
__device__ __forceinline__ ACC acc_lowest() { return -ACC(__int_as_float(0x7f800000)); }
__device__ __forceinline__ ACC acc_highest() { return ACC(__int_as_float(0x7f800000)); }
#endif

#if !BARACUDA_INTEGER
// The float element types by code (BARACUDA_DTYPE's), and the conversion
// of each to and from ACC, for maps whose operands have element types of
// their own (mixed-dtype binary ops). acc_of is exact wherever ACC is at
// least as wide as the operand (always, for a promoted result type);
// acc_to rounds once to nearest even, except an f64 ACC stored as f16 or
// bf16 goes through f32 first, as PyTorch's static_cast.
template <int C>
struct FloatOf;
template <>
struct FloatOf<0> { typedef float t; };
template <>
struct FloatOf<1> { typedef double t; };
template <>
struct FloatOf<2> { typedef __half t; };
template <>
struct FloatOf<3> { typedef __nv_bfloat16 t; };
__device__ __forceinline__ ACC acc_of(float v) { return ACC(v); }
__device__ __forceinline__ ACC acc_of(double v) { return ACC(v); }
__device__ __forceinline__ ACC acc_of(__half v) { return ACC(__half2float(v)); }
__device__ __forceinline__ ACC acc_of(__nv_bfloat16 v) { return ACC(__bfloat162float(v)); }
// A bool (one byte, 0 or 1) read as 0 or 1 (the condition of `where`).
__device__ __forceinline__ ACC acc_of(unsigned char v) { return v ? ACC(1) : ACC(0); }
template <typename C>
struct AccTo;
template <>
struct AccTo<float> {
    static __device__ __forceinline__ float f(ACC v) { return (float)v; }
};
template <>
struct AccTo<double> {
    static __device__ __forceinline__ double f(ACC v) { return (double)v; }
};
template <>
struct AccTo<__half> {
    static __device__ __forceinline__ __half f(ACC v) { return __float2half_rn((float)v); }
};
template <>
struct AccTo<__nv_bfloat16> {
    static __device__ __forceinline__ __nv_bfloat16 f(ACC v) { return __float2bfloat16_rn((float)v); }
};
template <typename C>
__device__ __forceinline__ C acc_to(ACC v) {
    return AccTo<C>::f(v);
}
#endif

// The element type of a sum or product stored as it accumulated (sum,
// prod, cumsum, cumprod): T for the floats (rounded once), i64 for the
// integer types (PyTorch promotes integer sums and products to int64).
#if BARACUDA_INTEGER
typedef i64 T_SUM;
__device__ __forceinline__ T_SUM to_sum(ACC v) { return v; }
#else
typedef T T_SUM;
__device__ __forceinline__ T_SUM to_sum(ACC v) { return from_acc(v); }
#endif

// a + b and a * b in the accumulator: IEEE for the floats, two's
// complement wrap-around for i64 (computed in u64, where overflow is
// defined; the conversion back is modular).
__device__ __forceinline__ float acc_add(float a, float b) { return a + b; }
__device__ __forceinline__ double acc_add(double a, double b) { return a + b; }
__device__ __forceinline__ i64 acc_add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
__device__ __forceinline__ float acc_mul(float a, float b) { return a * b; }
__device__ __forceinline__ double acc_mul(double a, double b) { return a * b; }
__device__ __forceinline__ i64 acc_mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }

// Math on the accumulator type, IEEE (no fast-math approximations).
__device__ __forceinline__ float m_exp(float x) { return expf(x); }
__device__ __forceinline__ double m_exp(double x) { return exp(x); }
__device__ __forceinline__ float m_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double m_tanh(double x) { return tanh(x); }
__device__ __forceinline__ bool m_isnan(float x) { return x != x; }
__device__ __forceinline__ bool m_isnan(double x) { return x != x; }
__device__ __forceinline__ bool m_isnan(i64) { return false; }
__device__ __forceinline__ bool m_signbit(float x) { return signbit(x); }
__device__ __forceinline__ bool m_signbit(double x) { return signbit(x); }
__device__ __forceinline__ bool m_signbit(i64 x) { return x < 0; }
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
