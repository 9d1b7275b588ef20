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
// Kernels: typed_map.cuh's. Contiguous, 16-byte aligned operands: each
// thread converts 16 / min(sizeof TI, sizeof TO) elements, so the narrower
// side moves one 16-byte vector and the wider side several; one pass of
// the grid, the last block does the tail. A permuted x whose unit-stride
// dim is not y's (a transposing copy) moves in 64 x 64 tiles through
// shared memory (cast_tiled). Otherwise offsets.cuh's offsets (rank <= 8,
// 64-bit offsets, u32 or u64 linear index) one element per iteration.
// Traffic: n (sizeof TI + sizeof TO) bytes; a few integer or float ops per
// element, so memory bound: judged by GB/s against the copy ceiling.
// Specialised by: CAST_FROM, CAST_TO (kernel_sources::element_code); the
// scale and the fp8 mode are launch parameters.
#include "common/convert.cuh"
#include "common/typed_map.cuh"

#if !defined(CAST_FROM) || !defined(CAST_TO)
#error "CAST_FROM and CAST_TO must be defined (kernel_sources::element_code)"
#endif

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

// cast1 as typed_map.cuh's functor.
struct Cast {
    float scale;
    bool sat;
    __device__ __forceinline__ TO operator()(const TI (&x)[1]) const { return cast1(x[0], scale, sat); }
};

// y = cast(x) over n contiguous elements; x and y 16-byte aligned.
extern "C" __global__ void __launch_bounds__(256)
    cast_contig(const TI* __restrict__ x, TO* __restrict__ y, u64 n, float scale, int saturate) {
    const TI* const in[1] = {x};
    typed_contig<TI, TO, 1>(in, y, n, Cast{scale, saturate != 0});
}

extern "C" __global__ void __launch_bounds__(256) cast_strided32(StridedArgs p, float scale, int saturate) {
    typed_strided<TI, TO, 1, u32>(p, Cast{scale, saturate != 0});
}
extern "C" __global__ void __launch_bounds__(256) cast_strided64(StridedArgs p, float scale, int saturate) {
    typed_strided<TI, TO, 1, u64>(p, Cast{scale, saturate != 0});
}

// The same map over permuted views: typed_map.cuh's tiles.
extern "C" __global__ void __launch_bounds__(256) cast_tiled(TiledArgs p, float scale, int saturate) {
    typed_tiled<TI, TO>(p, Cast{scale, saturate != 0});
}
