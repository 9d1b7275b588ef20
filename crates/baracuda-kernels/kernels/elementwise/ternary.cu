// ternary.cu: pointwise ternary ops with broadcasting, forward and backward.
//
// FW  out[i] = f(a[i], b[i], c[i])      (a, b, c broadcast views of out's shape)
// BW  da = reduce_to(a.shape, dy df/da), and so for b and c
//
//   op       f(a, b, c)                           df/da        df/db            df/dc
//   lerp     |c| < 0.5 ? a + c (b - a)            1 - c        c                b - a
//                      : b - (b - a) (1 - c)
//   addcmul  a + v b c                            1            v c              v b
//   addcdiv  a + v (b / c)                        1            v / c            -v b / c^2
//   clamp    a, b or c where NaN (in that         [b<=a<=c]    [a<b and b<c]    [a>c or c<b]
//            order), else min(max(a, b), c)
//   where    a ? b : c  (a bool)                  -            [a]              [not a]
//
// (v the op's scalar `value`; [p] is 1 where p holds, else 0.) These are
// PyTorch's CUDA kernels (lerp's two forms, clamp's NaN order and its
// result c where b > c) and derivatives.yaml (clamp_backward and
// clamp_backward_min_max: min's gradient only where min < max, max's also
// wherever max < min), in ACC (f32 for f16, bf16 and f32; f64 for f64).
// `where`'s backward reads only a and dy.
//
// Kernels: contiguous FW/BW pointwise.cuh (one 16-byte vector per operand
// per thread; `where`'s bool condition VEC bytes), strided FW/BW
// strided.cuh, and the reduction of a broadcast operand's gradient
// reduce_back.cuh (deterministic pairwise sums, split across blocks, then
// ternary_bw_finalize).
// Traffic (n elems, b bytes): FW 4nb (where: 3nb + n), BW 7nb (where:
// 3nb + n); less when broadcast.
// Specialised by: BARACUDA_DTYPE; BARACUDA_OP (the op's index in
// TernaryOp's order, `where` last) limits the module to one op's kernels.
#include "common/dtype.cuh"
#include "common/strided.cuh"
#include "common/pointwise.cuh"
#include "common/reduce_back.cuh"

enum { LERP, ADDCMUL, ADDCDIV, CLAMP, WHERE };

// The scalar parameter of an op (TernaryParams in ternary.rs): addcmul's
// and addcdiv's value, rounded to ACC as PyTorch's opmath.
struct TernaryParams {
    double value;
};

// f(a, b, c), and the three partial derivatives times dy, one
// specialisation per op.
template <int OP>
struct TernaryMath;

template <>
struct TernaryMath<LERP> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b, ACC c, ACC) {
        return fabs(c) < ACC(0.5) ? a + c * (b - a) : b - (b - a) * (ACC(1) - c);
    }
    static __device__ __forceinline__ ACC da(ACC, ACC, ACC c, ACC dy, ACC) { return dy * (ACC(1) - c); }
    static __device__ __forceinline__ ACC db(ACC, ACC, ACC c, ACC dy, ACC) { return dy * c; }
    static __device__ __forceinline__ ACC dc(ACC a, ACC b, ACC, ACC dy, ACC) { return dy * (b - a); }
};

template <>
struct TernaryMath<ADDCMUL> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b, ACC c, ACC v) { return a + v * b * c; }
    static __device__ __forceinline__ ACC da(ACC, ACC, ACC, ACC dy, ACC) { return dy; }
    static __device__ __forceinline__ ACC db(ACC, ACC, ACC c, ACC dy, ACC v) { return dy * (c * v); }
    static __device__ __forceinline__ ACC dc(ACC, ACC b, ACC, ACC dy, ACC v) { return dy * (b * v); }
};

template <>
struct TernaryMath<ADDCDIV> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b, ACC c, ACC v) { return a + v * (b / c); }
    static __device__ __forceinline__ ACC da(ACC, ACC, ACC, ACC dy, ACC) { return dy; }
    static __device__ __forceinline__ ACC db(ACC, ACC, ACC c, ACC dy, ACC v) { return dy * (v / c); }
    static __device__ __forceinline__ ACC dc(ACC, ACC b, ACC c, ACC dy, ACC v) {
        return -dy * (v * b / (c * c));
    }
};

template <>
struct TernaryMath<CLAMP> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b, ACC c, ACC) {
        if (m_isnan(a)) return a;
        if (m_isnan(b)) return b;
        if (m_isnan(c)) return c;
        // std::min(std::max(a, b), c) as PyTorch's kernel: each returns
        // its first argument unless the comparison holds (the sign of a
        // zero follows)
        const ACC m = a < b ? b : a;
        return c < m ? c : m;
    }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC c, ACC dy, ACC) {
        return a >= b && a <= c ? dy : ACC(0);
    }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC c, ACC dy, ACC) {
        return a < b && b < c ? dy : ACC(0);
    }
    static __device__ __forceinline__ ACC dc(ACC a, ACC b, ACC c, ACC dy, ACC) {
        return a > c || c < b ? dy : ACC(0);
    }
};

// Gradient with respect to input WHICH (0: a, 1: b, 2: c).
template <int OP, int WHICH>
__device__ __forceinline__ ACC ternary_df(ACC a, ACC b, ACC c, ACC dy, ACC v) {
    if (WHICH == 0) return TernaryMath<OP>::da(a, b, c, dy, v);
    if (WHICH == 1) return TernaryMath<OP>::db(a, b, c, dy, v);
    return TernaryMath<OP>::dc(a, b, c, dy, v);
}

template <int OP>
struct TernaryFw {
    TernaryParams q;
    __device__ __forceinline__ void operator()(const ACC (&a)[3], ACC (&r)[1]) const {
        r[0] = TernaryMath<OP>::f(a[0], a[1], a[2], ACC(q.value));
    }
};

// Inputs a, b, c, dy; outputs da, db, dc (any may be null: not stored).
template <int OP>
struct TernaryBw {
    TernaryParams q;
    __device__ __forceinline__ void operator()(const ACC (&a)[4], ACC (&r)[3]) const {
        const ACC v = ACC(q.value);
        r[0] = ternary_df<OP, 0>(a[0], a[1], a[2], a[3], v);
        r[1] = ternary_df<OP, 1>(a[0], a[1], a[2], a[3], v);
        r[2] = ternary_df<OP, 2>(a[0], a[1], a[2], a[3], v);
    }
};

template <int OP, int WHICH>
struct TernaryDf {
    TernaryParams q;
    __device__ __forceinline__ ACC operator()(const ACC (&v)[4]) const {
        return ternary_df<OP, WHICH>(v[0], v[1], v[2], v[3], ACC(q.value));
    }
};

// where(cond, a, b): inputs cond (bool), a, b. Its backward takes cond and
// dy and writes da = cond ? dy : 0, db = cond ? 0 : dy.
struct WhereFw {
    TernaryParams q;
    __device__ __forceinline__ void operator()(const ACC (&a)[3], ACC (&r)[1]) const {
        r[0] = a[0] != ACC(0) ? a[1] : a[2];
    }
};

struct WhereBw {
    TernaryParams q;
    __device__ __forceinline__ void operator()(const ACC (&a)[2], ACC (&r)[2]) const {
        r[0] = a[0] != ACC(0) ? a[1] : ACC(0);
        r[1] = a[0] != ACC(0) ? ACC(0) : a[1];
    }
};

template <int WHICH>
struct WhereDf {
    TernaryParams q;
    __device__ __forceinline__ ACC operator()(const ACC (&v)[2]) const {
        return (v[0] != ACC(0)) == (WHICH == 0) ? v[1] : ACC(0);
    }
};

extern "C" __global__ void __launch_bounds__(256) ternary_bw_finalize(ReduceArgs p) {
    reduce_back_finalize(p);
}

#define TERNARY_KERNELS(NAME, OP)                                                                  \
    POINTWISE_KERNELS_P(ternary_fw, NAME, TernaryFw<OP>, 3, 1,                                     \
                        (const T* a, const T* b, const T* c, T* out, u64 n), (a, b, c), (out),     \
                        TernaryParams)                                                             \
    POINTWISE_KERNELS_P(ternary_bw, NAME, TernaryBw<OP>, 4, 3,                                     \
                        (const T* a, const T* b, const T* c, const T* dy, T* da, T* db, T* dc,     \
                         u64 n),                                                                   \
                        (a, b, c, dy), (da, db, dc), TernaryParams)                                \
    extern "C" __global__ void __launch_bounds__(256)                                              \
        ternary_bw_reduce_a_##NAME(ReduceArgs p, const TernaryParams q) {                          \
        reduce_back<4, T>(p, TernaryDf<OP, 0>{q});                                                 \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(256)                                              \
        ternary_bw_reduce_b_##NAME(ReduceArgs p, const TernaryParams q) {                          \
        reduce_back<4, T>(p, TernaryDf<OP, 1>{q});                                                 \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(256)                                              \
        ternary_bw_reduce_c_##NAME(ReduceArgs p, const TernaryParams q) {                          \
        reduce_back<4, T>(p, TernaryDf<OP, 2>{q});                                                 \
    }

#if !defined(BARACUDA_OP) || BARACUDA_OP == 0
TERNARY_KERNELS(lerp, LERP)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 1
TERNARY_KERNELS(addcmul, ADDCMUL)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 2
TERNARY_KERNELS(addcdiv, ADDCDIV)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 3
TERNARY_KERNELS(clamp, CLAMP)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 4
POINTWISE_KERNELS_P_C0(ternary_fw, where, WhereFw, 3, 1,
                       (const u8* cond, const T* a, const T* b, T* out, u64 n), (cond, a, b),
                       (out), TernaryParams, u8)
POINTWISE_KERNELS_P_C0(ternary_bw, where, WhereBw, 2, 2,
                       (const u8* cond, const T* dy, T* da, T* db, u64 n), (cond, dy), (da, db),
                       TernaryParams, u8)
extern "C" __global__ void __launch_bounds__(256) ternary_bw_reduce_a_where(ReduceArgs p,
                                                                           const TernaryParams q) {
    reduce_back<2, u8>(p, WhereDf<0>{q});
}
extern "C" __global__ void __launch_bounds__(256) ternary_bw_reduce_b_where(ReduceArgs p,
                                                                           const TernaryParams q) {
    reduce_back<2, u8>(p, WhereDf<1>{q});
}
#endif
