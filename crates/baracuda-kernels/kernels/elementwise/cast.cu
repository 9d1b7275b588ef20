// cast.cu: y = convert(x) from one element type to another; the backward
// dx = convert(dy) is the same kernel with the types swapped.
//
// FW  y[i] = TO(x[i] * scale)      (a scale only into fp8, from any source)
//
// Rules (PyTorch's `x.to(dtype)` on CUDA; cast.rs documents them in full):
//   float -> float  round to nearest even once from f32 (from f64 for f32
//                   and f64 outputs; f64 -> f16/bf16/fp8 go through f32, as
//                   c10's Half/BFloat16/Float8 constructors take a float);
//                   NaN, +-inf and -0 kept; overflow to inf (f16, bf16).
//   -> fp8 e4m3     no inf: |v| > 464 gives NaN, unless SATURATE, which
//                   clamps every finite or infinite value to +-448.
//   -> fp8 e5m2     |v| >= 61440 gives +-inf, unless SATURATE (+-57344).
//                   NaN stays NaN in both modes.
//   float -> int    PyTorch's static_cast on the GPU: i8, i16, i32 through
//                   cvt.rzi.s32 (saturating to int32, NaN 0 from f32 and
//                   INT32_MIN from f64) then wrapped; i64 by cvt.rzi.s64
//                   (NaN INT64_MIN); u8 the low byte of that i64, as c10
//                   routes float -> uint8 through int64.
//   int -> float    round to nearest even (i64 -> f32 directly; -> f16,
//                   bf16, fp8 through f32, as c10 does).
//   int -> int      two's complement truncation (wraps).
//   x -> bool       x != 0 (NaN -> true);  bool -> x: 0 or 1.
//
// Contiguous, 16-byte aligned operands: each thread converts VEC elements,
// VEC = 16 / min(sizeof TI, sizeof TO), so the narrower side moves one
// 16-byte vector and the wider side several; one pass of the grid, the
// last block does the tail. Otherwise strided.cuh's offsets (rank <= 8,
// 64-bit offsets, u32 or u64 linear index) one element per iteration.
// Traffic: n (sizeof TI + sizeof TO) bytes; a few integer or float ops per
// element, so memory bound: judged by GB/s against the copy ceiling.
// Specialised by: CAST_FROM, CAST_TO (kernel_sources::element_code); the
// scale and the fp8 mode are launch parameters.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;

// strided.cuh's generic map names T and ACC; the cast kernels use only its
// StridedArgs and strided_offsets, with their own element types.
typedef float T;
typedef float ACC;
#include "common/strided.cuh"

#if !defined(CAST_FROM) || !defined(CAST_TO)
#error "CAST_FROM and CAST_TO must be defined (kernel_sources::element_code)"
#endif

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

typedef Ty<CAST_FROM>::S TI;
typedef Ty<CAST_TO>::S TO;
enum { SRC = Ty<CAST_FROM>::SRC };

// ---- loads: an element as its source value ----
__device__ __forceinline__ float src_f(float v) { return v; }
__device__ __forceinline__ float src_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float src_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float src_f(__nv_fp8_e4m3 v) { return float(v); }
__device__ __forceinline__ float src_f(__nv_fp8_e5m2 v) { return float(v); }
template <typename I>
__device__ __forceinline__ i64 src_i(I v) {
#if CAST_FROM == 11
    return v != 0;  // any nonzero byte is true
#else
    return (i64)v;
#endif
}

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

// One element: load, scale (only into fp8; bool and integers through f32),
// convert.
__device__ __forceinline__ TO cast1(TI x, float scale, bool sat) {
#if CAST_FROM == 1
    return Cvt<CAST_TO>::f(x * (double)scale, sat);
#elif CAST_FROM == 0 || CAST_FROM == 2 || CAST_FROM == 3 || CAST_FROM == 4 || CAST_FROM == 5
    return Cvt<CAST_TO>::f(src_f(x) * scale, sat);
#elif CAST_TO == 4 || CAST_TO == 5
    return Cvt<CAST_TO>::f(__ll2float_rn(src_i(x)) * scale, sat);
#else
    return Cvt<CAST_TO>::f(src_i(x), sat);
#endif
}

#define SMALLER (sizeof(TI) < sizeof(TO) ? sizeof(TI) : sizeof(TO))
#define CVEC ((int)(16 / SMALLER))
#define IN_VECS ((int)(CVEC * sizeof(TI) / 16))
#define OUT_VECS ((int)(CVEC * sizeof(TO) / 16))

// y = cast(x) over n contiguous elements; x and y 16-byte aligned.
extern "C" __global__ void __launch_bounds__(256)
    cast_contig(const TI* __restrict__ x, TO* __restrict__ y, u64 n, float scale, int saturate) {
    const bool sat = saturate != 0;
    const u64 groups = n / CVEC;
    const u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (g < groups) {
        TI a[CVEC];
        TO r[CVEC];
#pragma unroll
        for (int k = 0; k < IN_VECS; ++k) {
            const uint4 v = reinterpret_cast<const uint4*>(x)[g * IN_VECS + k];
            memcpy(reinterpret_cast<char*>(a) + 16 * k, &v, 16);
        }
#pragma unroll
        for (int e = 0; e < CVEC; ++e) r[e] = cast1(a[e], scale, sat);
#pragma unroll
        for (int k = 0; k < OUT_VECS; ++k) {
            uint4 v;
            memcpy(&v, reinterpret_cast<const char*>(r) + 16 * k, 16);
            reinterpret_cast<uint4*>(y)[g * OUT_VECS + k] = v;
        }
    }
    if (blockIdx.x == gridDim.x - 1) {
        for (u64 t = groups * CVEC + threadIdx.x; t < n; t += blockDim.x) y[t] = cast1(x[t], scale, sat);
    }
}

template <typename I>
__device__ __forceinline__ void cast_strided(const StridedArgs& p, float scale, bool sat) {
    const I n = (I)p.n;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        i64 oo[1], io[1];
        strided_offsets<1, 1, I>(p, i, oo, io);
        ((TO*)p.out[0])[oo[0]] = cast1(((const TI*)p.in[0])[io[0]], scale, sat);
    }
}

extern "C" __global__ void __launch_bounds__(256) cast_strided32(StridedArgs p, float scale, int saturate) {
    cast_strided<u32>(p, scale, saturate != 0);
}
extern "C" __global__ void __launch_bounds__(256) cast_strided64(StridedArgs p, float scale, int saturate) {
    cast_strided<u64>(p, scale, saturate != 0);
}
