// binary.cu: pointwise binary ops with broadcasting, forward and backward.
//
// FW  out[i] = f(a[i], b[i])            (a, b broadcast views of out's shape)
// BW  da = reduce_to(a.shape, dy * df/da),  db = reduce_to(b.shape, dy * df/db)
//
//   op        f             df/da                         df/db
//   add       a + b         1                             1
//   sub       a - b         1                             -1
//   mul       a * b         b                             a
//   div       a / b         1 / b                         -a / b^2
//   maximum   max, NaN wins a>b: 1, a==b: 1/2, a<b: 0      mirrored
//   minimum   min, NaN wins a<b: 1, a==b: 1/2, a>b: 0      mirrored
//   (maximum/minimum gradients follow PyTorch: ties split dy in half, and
//    a NaN operand passes dy to both sides)
//   add_alpha a + alpha b    1                             alpha
//   sub_alpha the same kernel with -alpha (PyTorch's sub is add(a, b, -alpha))
//   prelu     a > 0 ? a : b a   a > 0 ? 1 : b                 a > 0 ? 0 : a
//   (prelu's b is the weight broadcast along the channel dim; a NaN a takes
//    the b a side, as PyTorch's `input > 0 ? input : weight * input`)
//
// Parameters arrive as the kernels' last argument, BinaryParams (alpha,
// rounded to ACC as PyTorch's opmath); one module serves every value, and
// the ops without one ignore it.
//
// The other ops are PyTorch's functions of the same name (BinaryOp in
// src/elementwise/binary.rs documents each): forward and backward follow
// PyTorch's CUDA kernels and derivatives.yaml for NaN, the infinities,
// zeros and kinks, each op's BinaryMath specialisation below, in ACC (f32
// for f16, bf16 and f32; f64 for f64) with the CUDA math library's IEEE
// functions.
//
// Kernels:
// - contiguous FW/BW: pointwise.cuh (one 16-byte vector per input per
//   thread, one pass of the grid, scalar tail);
// - strided FW/BW (no reduction): strided.cuh (rank-8 offsets, u32/u64
//   linear index);
// - reduce (BW of a broadcast operand): reduce_back.cuh, deterministic
//   pairwise sums split across blocks, then `finalize`.
// Traffic (n elems, b bytes): FW 3nb, BW 5nb (less when broadcast).
// Specialised by: BARACUDA_DTYPE; BARACUDA_OP (the op's index) limits the
// module to one op's kernels, so a plan compiles only what it runs;
// BARACUDA_DTYPE_A and BARACUDA_DTYPE_B (codes of dtype.cuh) make it the
// mixed-dtype module of PromotedBinaryPlan, with BARACUDA_DTYPE the result
// type (typed kernels of pointwise.cuh and reduce_back.cuh).
#include "common/dtype.cuh"
#include "common/strided.cuh"
#include "common/pointwise.cuh"
#include "common/reduce_back.cuh"

// BinaryOp::ALL's order.
enum {
    ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM, ATAN2, HYPOT, COPYSIGN, POW, FMOD, REMAINDER, XLOGY,
    LOGADDEXP, LOGADDEXP2, FMAX, FMIN, XLOG1PY, HEAVISIDE, DIV_FLOOR, DIV_TRUNC, NEXTAFTER,
    ADD_ALPHA, SUB_ALPHA, PRELU
};

// The parameter of an op (BinaryParams in binary.rs): add_alpha's alpha
// (sub_alpha's negated by the host); 0 for the other ops.
struct BinaryParams {
    double alpha;
};

// f(a, b), and da = dy df/da, db = dy df/db, one specialisation per op.
template <int OP>
struct BinaryMath;

template <>
struct BinaryMath<ADD> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return a + b; }
    static __device__ __forceinline__ ACC da(ACC, ACC, ACC dy) { return dy; }
    static __device__ __forceinline__ ACC db(ACC, ACC, ACC dy) { return dy; }
};

template <>
struct BinaryMath<SUB> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return a - b; }
    static __device__ __forceinline__ ACC da(ACC, ACC, ACC dy) { return dy; }
    static __device__ __forceinline__ ACC db(ACC, ACC, ACC dy) { return -dy; }
};

template <>
struct BinaryMath<MUL> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return a * b; }
    static __device__ __forceinline__ ACC da(ACC, ACC b, ACC dy) { return dy * b; }
    static __device__ __forceinline__ ACC db(ACC a, ACC, ACC dy) { return dy * a; }
};

template <>
struct BinaryMath<DIV> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return a / b; }
    static __device__ __forceinline__ ACC da(ACC, ACC b, ACC dy) { return dy / b; }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) { return -dy * a / (b * b); }
};

// maximum (MAX) or minimum: a NaN operand wins; -0 orders below +0 (the
// hardware max/min PyTorch's kernels use: maximum(0, -0) = 0, minimum
// -0, whatever the operand order); ties split dy in half, a NaN operand
// passes dy to both sides.
template <bool MAX>
struct MaxMin {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) {
        if (m_isnan(a)) return a;
        if (m_isnan(b)) return b;
        if (a == b) return m_signbit(a) == MAX ? b : a;
        return (MAX ? a > b : a < b) ? a : b;
    }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) {
        if (a == b) return dy * ACC(0.5);
        return (MAX ? a < b : a > b) ? ACC(0) : dy;
    }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) {
        if (a == b) return dy * ACC(0.5);
        return (MAX ? a > b : a < b) ? ACC(0) : dy;
    }
};
template <>
struct BinaryMath<MAXIMUM> : MaxMin<true> {};
template <>
struct BinaryMath<MINIMUM> : MaxMin<false> {};

// atan2(a, b): da = dy b / (a^2 + b^2), db = -dy a / (a^2 + b^2) (NaN at
// the origin, as PyTorch's).
template <>
struct BinaryMath<ATAN2> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return atan2(a, b); }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) {
        return dy * b * (ACC(1) / (a * a + b * b));
    }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) {
        return dy * -a * (ACC(1) / (a * a + b * b));
    }
};

// hypot(a, b): da = dy a / hypot, db = dy b / hypot (NaN at the origin).
template <>
struct BinaryMath<HYPOT> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return hypot(a, b); }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) { return dy * (a / hypot(a, b)); }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) { return dy * (b / hypot(a, b)); }
};

// copysign(a, b): da = dy copysign(a, b) / a, 0 where a == 0; db = 0.
template <>
struct BinaryMath<COPYSIGN> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return copysign(a, b); }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) {
        return dy * (a == ACC(0) ? ACC(0) : copysign(a, b) / a);
    }
    static __device__ __forceinline__ ACC db(ACC, ACC, ACC) { return ACC(0); }
};

// pow(a, b): da = dy b a^(b-1), 0 (dy not read) where b == 0;
// db = dy a^b log(a), with 0 in place of a^b log(a) where a == 0 and b >= 0.
template <>
struct BinaryMath<POW> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return m_pow(a, b); }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) {
        return b == ACC(0) ? ACC(0) : dy * (b * m_pow(a, b - ACC(1)));
    }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) {
        return dy * (a == ACC(0) && b >= ACC(0) ? ACC(0) : m_pow(a, b) * log(a));
    }
};

// fmod(a, b) (the sign of a): da = dy, db = -dy trunc(a / b).
template <>
struct BinaryMath<FMOD> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return fmod(a, b); }
    static __device__ __forceinline__ ACC da(ACC, ACC, ACC dy) { return dy; }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) { return -dy * trunc(a / b); }
};

// a / b rounded toward -inf as PyTorch's div(rounding_mode="floor"): from
// fmod, exact where a / b is near an integer.
__device__ __forceinline__ ACC div_floor(ACC a, ACC b) {
    if (b == ACC(0)) return a / b;
    const ACC mod = fmod(a, b);
    ACC div = (a - mod) / b;
    if (mod != ACC(0) && ((b < ACC(0)) != (mod < ACC(0)))) div -= ACC(1);
    if (div == ACC(0)) return copysign(ACC(0), a / b);
    ACC fl = floor(div);
    if (div - fl > ACC(0.5)) fl += ACC(1);
    return fl;
}

// remainder(a, b) (Python's %, the sign of b): da = dy, db = -dy floor(a / b).
template <>
struct BinaryMath<REMAINDER> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) {
        ACC r = fmod(a, b);
        if (r != ACC(0) && ((b < ACC(0)) != (r < ACC(0)))) r += b;
        return r;
    }
    static __device__ __forceinline__ ACC da(ACC, ACC, ACC dy) { return dy; }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) { return -dy * div_floor(a, b); }
};

// xlogy(a, b) = a log(b), 0 where a == 0 unless b is NaN:
// da = xlogy(dy, b), 0 where a == 0 and b <= 0 (PyTorch's rule),
// db = dy a / b.
template <>
struct BinaryMath<XLOGY> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) {
        if (m_isnan(b)) return b;
        return a == ACC(0) ? ACC(0) : a * log(b);
    }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) {
        if (m_isnan(b)) return b;
        return (a == ACC(0) && b <= ACC(0)) || dy == ACC(0) ? ACC(0) : dy * log(b);
    }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) { return dy * a / b; }
};

// logaddexp(a, b) = log(e^a + e^b) as max + log1p(e^-|a-b|) (a where both
// are the same infinity): da = dy / (1 + e^(b-a)), db = dy / (1 + e^(a-b)).
template <>
struct BinaryMath<LOGADDEXP> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) {
        if (isinf(a) && a == b) return a;
        return fmax(a, b) + log1p(exp(-fabs(a - b)));
    }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) { return dy / (ACC(1) + exp(b - a)); }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) { return dy / (ACC(1) + exp(a - b)); }
};

// logaddexp2(a, b) = log2(2^a + 2^b) as max + log1p(2^-|a-b|) / ln 2:
// da = dy / (1 + 2^(b-a)), db = dy / (1 + 2^(a-b)).
template <>
struct BinaryMath<LOGADDEXP2> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) {
        if (isinf(a) && a == b) return a;
        return fmax(a, b) + log1p(exp2(-fabs(a - b))) * ACC(1.4426950408889634);
    }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) { return dy / (ACC(1) + exp2(b - a)); }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) { return dy / (ACC(1) + exp2(a - b)); }
};

// fmax / fmin: a NaN operand is ignored. The whole of dy goes to a where
// a >= b (fmin: a <= b) or b is NaN, else to b.
template <bool MAX>
struct FmaxFmin {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return MAX ? fmax(a, b) : fmin(a, b); }
    static __device__ __forceinline__ bool to_a(ACC a, ACC b) { return (MAX ? a >= b : a <= b) || m_isnan(b); }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) { return to_a(a, b) ? dy : ACC(0); }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) { return to_a(a, b) ? ACC(0) : dy; }
};
template <>
struct BinaryMath<FMAX> : FmaxFmin<true> {};
template <>
struct BinaryMath<FMIN> : FmaxFmin<false> {};

// xlog1py(a, b) = a log1p(b), 0 where a == 0 unless b is NaN:
// da = xlog1py(dy, b), 0 where a == 0 and b <= -1 (PyTorch's rule),
// db = dy a / (1 + b).
template <>
struct BinaryMath<XLOG1PY> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) {
        if (m_isnan(b)) return b;
        return a == ACC(0) ? ACC(0) : a * log1p(b);
    }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) {
        if (m_isnan(b)) return b;
        return (a == ACC(0) && b <= ACC(-1)) || dy == ACC(0) ? ACC(0) : dy * log1p(b);
    }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy) { return dy * a / (b + ACC(1)); }
};

// heaviside(a, b) = a == 0 ? b : (a > 0), so 0 for a NaN a (PyTorch's).
// No backward: the plan refuses run_bw, and these gradients are never
// launched.
template <>
struct BinaryMath<HEAVISIDE> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return a == ACC(0) ? b : ACC(a > ACC(0)); }
    static __device__ __forceinline__ ACC da(ACC, ACC, ACC) { return ACC(0); }
    static __device__ __forceinline__ ACC db(ACC, ACC, ACC) { return ACC(0); }
};

// div(a, b, rounding_mode="floor" / "trunc"): gradients zero (PyTorch's
// for a rounding mode), whatever dy holds.
template <>
struct BinaryMath<DIV_FLOOR> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return div_floor(a, b); }
    static __device__ __forceinline__ ACC da(ACC, ACC, ACC) { return ACC(0); }
    static __device__ __forceinline__ ACC db(ACC, ACC, ACC) { return ACC(0); }
};
// a / b rounded toward 0, exactly: (a - fmod(a, b)) / b is an integer up
// to rounding, taken to the nearest (PyTorch's trunc(a / b) may round a
// quotient just below an integer up to it first); a zero takes the sign of
// a / b; a zero or infinite operand gives trunc(a / b).
__device__ __forceinline__ ACC div_trunc(ACC a, ACC b) {
    if (b == ACC(0) || isinf(a) || isinf(b)) return trunc(a / b);
    const ACC q = rint((a - fmod(a, b)) / b);
    return q == ACC(0) ? copysign(ACC(0), a / b) : q;
}
template <>
struct BinaryMath<DIV_TRUNC> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return div_trunc(a, b); }
    static __device__ __forceinline__ ACC da(ACC, ACC, ACC) { return ACC(0); }
    static __device__ __forceinline__ ACC db(ACC, ACC, ACC) { return ACC(0); }
};

// nextafter(a, b) on the grid of the element type T (a is exact in T):
// one step of T's bit pattern toward b; b where a == b, NaN where either
// is, the least subnormal of b's sign from a zero. No backward.
template <int BYTES>
struct UintOf;
template <>
struct UintOf<2> { typedef unsigned short t; };
template <>
struct UintOf<4> { typedef unsigned int t; };
template <>
struct UintOf<8> { typedef unsigned long long t; };
__device__ __forceinline__ ACC next_after(ACC a, ACC b) {
    if (m_isnan(a) || m_isnan(b)) return a + b;
    if (a == b) return b;
    typedef typename UintOf<sizeof(T)>::t U;
    T t = from_acc(a);
    U u;
    memcpy(&u, &t, sizeof(T));
    if (a == ACC(0))
        u = U(1) | (b < ACC(0) ? U(U(1) << (8 * sizeof(T) - 1)) : U(0));
    else if ((a < b) == (a > ACC(0)))
        ++u;
    else
        --u;
    memcpy(&t, &u, sizeof(T));
    return to_acc(t);
}
template <>
struct BinaryMath<NEXTAFTER> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return next_after(a, b); }
    static __device__ __forceinline__ ACC da(ACC, ACC, ACC) { return ACC(0); }
    static __device__ __forceinline__ ACC db(ACC, ACC, ACC) { return ACC(0); }
};

// prelu(a, w) = a > 0 ? a : w a: da = a > 0 ? dy : w dy,
// dw = a > 0 ? 0 : a dy (PyTorch's prelu_backward_kernel; a NaN a gives
// da = w dy, dw = NaN).
template <>
struct BinaryMath<PRELU> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b) { return a > ACC(0) ? a : b * a; }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy) { return a > ACC(0) ? dy : b * dy; }
    static __device__ __forceinline__ ACC db(ACC a, ACC, ACC dy) { return a > ACC(0) ? ACC(0) : a * dy; }
};

// The ops with a parameter: BinaryMathP<OP> takes alpha; the others pass
// through to BinaryMath<OP>.
template <int OP>
struct BinaryMathP {
    static __device__ __forceinline__ ACC f(ACC a, ACC b, ACC) { return BinaryMath<OP>::f(a, b); }
    static __device__ __forceinline__ ACC da(ACC a, ACC b, ACC dy, ACC) { return BinaryMath<OP>::da(a, b, dy); }
    static __device__ __forceinline__ ACC db(ACC a, ACC b, ACC dy, ACC) { return BinaryMath<OP>::db(a, b, dy); }
};

// add(a, b, alpha) = a + alpha b as PyTorch's `self + alpha * other`:
// da = dy, db = dy alpha. sub(a, b, alpha) is this with -alpha.
template <>
struct BinaryMathP<ADD_ALPHA> {
    static __device__ __forceinline__ ACC f(ACC a, ACC b, ACC alpha) { return a + alpha * b; }
    static __device__ __forceinline__ ACC da(ACC, ACC, ACC dy, ACC) { return dy; }
    static __device__ __forceinline__ ACC db(ACC, ACC, ACC dy, ACC alpha) { return dy * alpha; }
};

template <int OP>
__device__ __forceinline__ ACC binary_f(ACC a, ACC b, const BinaryParams& q) {
    return BinaryMathP<OP>::f(a, b, ACC(q.alpha));
}

// Gradient with respect to a (WHICH = 0) or b (WHICH = 1).
template <int OP, int WHICH>
__device__ __forceinline__ ACC binary_df(ACC a, ACC b, ACC dy, const BinaryParams& q) {
    return WHICH == 0 ? BinaryMathP<OP>::da(a, b, dy, ACC(q.alpha))
                      : BinaryMathP<OP>::db(a, b, dy, ACC(q.alpha));
}

template <int OP>
struct BinaryFw {
    BinaryParams q;
    __device__ __forceinline__ void operator()(const ACC (&a)[2], ACC (&r)[1]) const {
        r[0] = binary_f<OP>(a[0], a[1], q);
    }
};

// Inputs a, b, dy; outputs da, db (either may be null: not stored).
template <int OP>
struct BinaryBw {
    BinaryParams q;
    __device__ __forceinline__ void operator()(const ACC (&a)[3], ACC (&r)[2]) const {
        r[0] = binary_df<OP, 0>(a[0], a[1], a[2], q);
        r[1] = binary_df<OP, 1>(a[0], a[1], a[2], q);
    }
};

// Gradient of input WHICH (0: a, 1: b) at one element of a, b, dy.
template <int OP, int WHICH>
struct BinaryDf {
    BinaryParams q;
    __device__ __forceinline__ ACC operator()(const ACC (&v)[3]) const {
        return binary_df<OP, WHICH>(v[0], v[1], v[2], q);
    }
};

#ifndef BARACUDA_DTYPE_A
extern "C" __global__ void __launch_bounds__(256) binary_bw_finalize(ReduceArgs p) {
    reduce_back_finalize(p);
}

// Contiguous kernels take (a, b, out, n, q) and (a, b, dy, da, db, n, q);
// strided ones StridedArgs, then q; reductions ReduceArgs, then q.
#define BINARY_KERNELS(NAME, OP)                                                                    \
    POINTWISE_KERNELS_P(binary_fw, NAME, BinaryFw<OP>, 2, 1, (const T* a, const T* b, T* out, u64 n), \
                        (a, b), (out), BinaryParams)                                                \
    POINTWISE_KERNELS_P(binary_bw, NAME, BinaryBw<OP>, 3, 2,                                        \
                        (const T* a, const T* b, const T* dy, T* da, T* db, u64 n), (a, b, dy),     \
                        (da, db), BinaryParams)                                                     \
    extern "C" __global__ void __launch_bounds__(256)                                               \
        binary_bw_reduce_a_##NAME(ReduceArgs p, const BinaryParams q) {                             \
        reduce_back<3, T>(p, BinaryDf<OP, 0>{q});                                                   \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(256)                                               \
        binary_bw_reduce_b_##NAME(ReduceArgs p, const BinaryParams q) {                             \
        reduce_back<3, T>(p, BinaryDf<OP, 1>{q});                                                   \
    }
#else
// Mixed dtypes (PromotedBinaryPlan): a of TA (BARACUDA_DTYPE_A), b of TB
// (BARACUDA_DTYPE_B), out and dy of T, PyTorch's result type of TA and TB
// (BARACUDA_DTYPE); da of TA, db of TB. Each input converts exactly to ACC
// (T's accumulator: T is f32 or f64 here, at least as wide as TA and TB),
// as PyTorch's upcast to the result type; the math is the same-dtype
// op's, and each gradient, summed in ACC where its input is broadcast, is
// rounded once to its input's type. The kernels keep the same-dtype names
// (the module's defines select them), with one finalize per gradient type.
typedef FloatOf<BARACUDA_DTYPE_A>::t TA;
typedef FloatOf<BARACUDA_DTYPE_B>::t TB;
typedef Types<TA, TB> PromotedIn;
typedef Types<T> PromotedOut;
typedef Types<TA, TB, T> PromotedBwIn;
typedef Types<TA, TB> PromotedBwOut;

extern "C" __global__ void __launch_bounds__(256) binary_bw_finalize_a(ReduceArgs p) {
    reduce_back_finalize_typed<TA>(p);
}
extern "C" __global__ void __launch_bounds__(256) binary_bw_finalize_b(ReduceArgs p) {
    reduce_back_finalize_typed<TB>(p);
}

// Contiguous kernels take (a, b, out, n, q) and (a, b, dy, da, db, n, q);
// strided ones StridedArgs, then q; reductions ReduceArgs, then q.
#define BINARY_KERNELS(NAME, OP)                                                                    \
    POINTWISE_KERNELS_TYPED(binary_fw, NAME, BinaryFw<OP>, PromotedIn, PromotedOut,                 \
                            (const TA* a, const TB* b, T* out, u64 n), (a, b), (out), BinaryParams) \
    POINTWISE_KERNELS_TYPED(binary_bw, NAME, BinaryBw<OP>, PromotedBwIn, PromotedBwOut,             \
                            (const TA* a, const TB* b, const T* dy, TA* da, TB* db, u64 n),         \
                            (a, b, dy), (da, db), BinaryParams)                                     \
    extern "C" __global__ void __launch_bounds__(256)                                               \
        binary_bw_reduce_a_##NAME(ReduceArgs p, const BinaryParams q) {                             \
        reduce_back_typed<PromotedBwIn, TA>(p, BinaryDf<OP, 0>{q});                                 \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(256)                                               \
        binary_bw_reduce_b_##NAME(ReduceArgs p, const BinaryParams q) {                             \
        reduce_back_typed<PromotedBwIn, TB>(p, BinaryDf<OP, 1>{q});                                 \
    }
#endif

#if !defined(BARACUDA_OP) || BARACUDA_OP == 0
BINARY_KERNELS(add, ADD)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 1
BINARY_KERNELS(sub, SUB)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 2
BINARY_KERNELS(mul, MUL)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 3
BINARY_KERNELS(div, DIV)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 4
BINARY_KERNELS(maximum, MAXIMUM)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 5
BINARY_KERNELS(minimum, MINIMUM)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 6
BINARY_KERNELS(atan2, ATAN2)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 7
BINARY_KERNELS(hypot, HYPOT)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 8
BINARY_KERNELS(copysign, COPYSIGN)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 9
BINARY_KERNELS(pow, POW)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 10
BINARY_KERNELS(fmod, FMOD)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 11
BINARY_KERNELS(remainder, REMAINDER)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 12
BINARY_KERNELS(xlogy, XLOGY)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 13
BINARY_KERNELS(logaddexp, LOGADDEXP)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 14
BINARY_KERNELS(logaddexp2, LOGADDEXP2)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 15
BINARY_KERNELS(fmax, FMAX)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 16
BINARY_KERNELS(fmin, FMIN)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 17
BINARY_KERNELS(xlog1py, XLOG1PY)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 18
BINARY_KERNELS(heaviside, HEAVISIDE)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 19
BINARY_KERNELS(div_floor, DIV_FLOOR)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 20
BINARY_KERNELS(div_trunc, DIV_TRUNC)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 21
BINARY_KERNELS(nextafter, NEXTAFTER)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 22
BINARY_KERNELS(add_alpha, ADD_ALPHA)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 23
BINARY_KERNELS(sub_alpha, ADD_ALPHA)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 24
BINARY_KERNELS(prelu, PRELU)
#endif
