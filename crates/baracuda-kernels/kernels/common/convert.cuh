// convert.cuh: the element types by code (kernel_sources::element_code)
// and the conversion of an f32, f64 or i64 value to each, as PyTorch's
// static_cast on the GPU (cast.cu documents the rules). Includes
// cuda_fp16/bf16/fp8.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;

// Storage type of each code; SRC is how a value of that type enters a
// conversion: 0 as f32, 1 as f64, 2 as i64.
template <int C> struct Ty;
template <> struct Ty<0> { typedef float S; enum { SRC = 0 }; };
template <> struct Ty<1> { typedef double S; enum { SRC = 1 }; };
template <> struct Ty<2> { typedef __half S; enum { SRC = 0 }; };
template <> struct Ty<3> { typedef __nv_bfloat16 S; enum { SRC = 0 }; };
template <> struct Ty<4> { typedef __nv_fp8_e4m3 S; enum { SRC = 0 }; };
template <> struct Ty<5> { typedef __nv_fp8_e5m2 S; enum { SRC = 0 }; };
template <> struct Ty<6> { typedef signed char S; enum { SRC = 2 }; };
template <> struct Ty<7> { typedef unsigned char S; enum { SRC = 2 }; };
template <> struct Ty<8> { typedef short S; enum { SRC = 2 }; };
template <> struct Ty<9> { typedef int S; enum { SRC = 2 }; };
template <> struct Ty<10> { typedef long long S; enum { SRC = 2 }; };
template <> struct Ty<11> { typedef unsigned char S; enum { SRC = 2 }; };  // bool, one byte

// ---- float -> integer: the GPU's cvt.rzi, as PyTorch's static_cast ----
// To i8, i16, i32: cvt.rzi.s32 (toward zero, saturating to int32; NaN is 0
// from f32 and INT32_MIN from f64), then two's complement truncation. To
// i64 and u8: cvt.rzi.s64 (saturating; NaN is INT64_MIN), u8 its low byte.

// ---- f32 -> fp8: round to nearest even, the mode's overflow rule ----
// SATFINITE (hardware cvt on sm_89+, cuda_fp8's exact software path
// below) is correct for every value the non-saturating rule does not
// replace: those past the rounding midpoint above the largest finite value.
__device__ __forceinline__ __nv_fp8_storage_t fp8_bits(float v, __nv_fp8_interpretation_t k, bool saturate) {
    const bool e4m3 = k == __NV_E4M3;
    if (!saturate && fabsf(v) >= (e4m3 ? 464.0f : 61440.0f)) {
        // 464 itself rounds to even, down to 448 in e4m3; in e5m2 61440 rounds up.
        const bool over = e4m3 ? fabsf(v) > 464.0f : true;
        if (over) {
            const __nv_fp8_storage_t sign = v < 0.f ? 0x80 : 0;
            return sign | (e4m3 ? 0x7F : 0x7C);  // NaN : inf
        }
    }
    return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, k);
}

// ---- conversion of a source value to TO ----
template <int C> struct Cvt;
template <> struct Cvt<0> {
    static __device__ __forceinline__ float f(float v, bool) { return v; }
    static __device__ __forceinline__ float f(double v, bool) { return __double2float_rn(v); }
    static __device__ __forceinline__ float f(i64 v, bool) { return __ll2float_rn(v); }
};
template <> struct Cvt<1> {
    static __device__ __forceinline__ double f(float v, bool) { return v; }
    static __device__ __forceinline__ double f(double v, bool) { return v; }
    static __device__ __forceinline__ double f(i64 v, bool) { return __ll2double_rn(v); }
};
template <> struct Cvt<2> {
    static __device__ __forceinline__ __half f(float v, bool) { return __float2half_rn(v); }
    static __device__ __forceinline__ __half f(double v, bool) { return __float2half_rn(__double2float_rn(v)); }
    static __device__ __forceinline__ __half f(i64 v, bool) { return __float2half_rn(__ll2float_rn(v)); }
};
template <> struct Cvt<3> {
    static __device__ __forceinline__ __nv_bfloat16 f(float v, bool) { return __float2bfloat16_rn(v); }
    static __device__ __forceinline__ __nv_bfloat16 f(double v, bool) {
        return __float2bfloat16_rn(__double2float_rn(v));
    }
    static __device__ __forceinline__ __nv_bfloat16 f(i64 v, bool) { return __float2bfloat16_rn(__ll2float_rn(v)); }
};
template <__nv_fp8_interpretation_t K, typename S>
struct CvtFp8 {
    static __device__ __forceinline__ S make(__nv_fp8_storage_t b) {
        S r;
        r.__x = b;
        return r;
    }
    static __device__ __forceinline__ S f(float v, bool sat) { return make(fp8_bits(v, K, sat)); }
    static __device__ __forceinline__ S f(double v, bool sat) { return make(fp8_bits(__double2float_rn(v), K, sat)); }
    static __device__ __forceinline__ S f(i64 v, bool sat) { return make(fp8_bits(__ll2float_rn(v), K, sat)); }
};
template <> struct Cvt<4> : CvtFp8<__NV_E4M3, __nv_fp8_e4m3> {};
template <> struct Cvt<5> : CvtFp8<__NV_E5M2, __nv_fp8_e5m2> {};
template <typename I>
struct CvtInt {
    static __device__ __forceinline__ I f(float v, bool) { return (I)__float2int_rz(v); }
    static __device__ __forceinline__ I f(double v, bool) { return (I)__double2int_rz(v); }
    static __device__ __forceinline__ I f(i64 v, bool) { return (I)v; }
};
template <> struct Cvt<6> : CvtInt<signed char> {};
template <> struct Cvt<8> : CvtInt<short> {};
template <> struct Cvt<9> : CvtInt<int> {};
template <typename I>
struct CvtLong {
    static __device__ __forceinline__ I f(float v, bool) { return (I)__float2ll_rz(v); }
    static __device__ __forceinline__ I f(double v, bool) { return (I)__double2ll_rz(v); }
    static __device__ __forceinline__ I f(i64 v, bool) { return (I)v; }
};
template <> struct Cvt<10> : CvtLong<i64> {};
template <> struct Cvt<7> : CvtLong<unsigned char> {};
template <> struct Cvt<11> {
    static __device__ __forceinline__ unsigned char f(float v, bool) { return v != 0.f; }
    static __device__ __forceinline__ unsigned char f(double v, bool) { return v != 0.0; }
    static __device__ __forceinline__ unsigned char f(i64 v, bool) { return v != 0; }
};
