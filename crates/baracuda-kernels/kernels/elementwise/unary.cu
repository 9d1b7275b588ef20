// unary.cu: pointwise unary ops, forward and backward.
//
// FW  y[i]  = f(x[i])
// BW  dx[i] = dy[i] * f'(x[i])
//
//   op         f(x)                                   f'(x)
//   relu       x < 0 ? 0 : x  (NaN propagates)        x <= 0 ? 0 : 1
//   gelu_erf   x/2 (1 + erf(x/sqrt2))                 Phi(x) + x phi(x)
//   gelu_tanh  x/2 (1 + tanh(k(x + c x^3)))           (1+t)/2 + x(1-t^2) k (1 + 3c x^2)/2
//   silu       x sigmoid(x)                           s (1 + x (1 - s))
//   sigmoid    1 / (1 + e^-x)                         s (1 - s)
//   tanh       tanh(x)                                1 - t^2
//   exp        e^x                                    e^x
//   neg        -x                                     -1
//   (k = sqrt(2/pi), c = 0.044715, as PyTorch's approximate='tanh')
//
// Contiguous: pointwise.cuh (one 16-byte vector per input per
// thread, one pass of the grid, scalar tail). Strided: strided.cuh (one
// element per iteration with up to rank-8 offsets, u32 or u64 linear index).
// Traffic (n elems, b bytes/elem): FW 2nb, BW 3nb; a few FLOP per element,
// so memory bound: judged by GB/s against the copy ceiling.
//
// GELU-erf in f32 arithmetic (f32, f16, bf16) takes Phi from erfc instead
// of erff: for z = |x|/sqrt2 and t = 1/(1 + z/2),
//   erfc(z) = t exp(-z^2 + P(t)),
// P of degree 9 fitted (Chebyshev, mpmath) to ln(erfc(z)/t) + z^2 on
// t in [0, 1], max relative error 1.3e-7; Phi(x) = e for x < 0 and 1 - e
// otherwise, e = erfc(z)/2. One reciprocal and one exp2 (approximate
// hardware forms, ~1 ulp) and no branch, against erff's two divergent
// polynomial branches: bf16 GELU on H200 takes 0.259 ms this way against
// 0.310 through erff (2^28 elements), and over every bf16 (f16) input 7 (10) results differ
// from the correctly rounded one against 201 (370) through erff
// (docs/perf-notes/experiments/elementwise_math.cu). In f32 its relative error is
// within 1e-6 for |x| <= 4 (~8 ulp near 0, where erff gives ~2) and
// 7e-7 + 6.5e-8 x^2 beyond, the negative tail included, where
// x/2 (1 + erff(x/sqrt2)) cancels to 0 below x = -5.5
// (tests/gelu_erfc.rs checks the constants of this file on the host).
// f64 keeps erf.
//
// Forward sigmoid, silu and gelu-tanh on 16-bit types use
// sigmoid(v) = 1 / (1 + 2^(-v log2 e)) through the approximate reciprocal
// and exp2 (a few f32 ulp, far below a 16-bit half-ulp), and
// gelu_tanh(x) = x sigmoid(2 k (x + c x^3)), the same function as
// x/2 (1 + tanh(.)) without tanhf; exp on 16-bit types is one approximate
// exp2 (exp_16bit), lighter than expf's range reduction. f32 and f64 keep
// IEEE division, expf and tanhf.
// Specialised by: BARACUDA_DTYPE (T, ACC); BARACUDA_OP (the op's index)
// limits the module to one op's kernels, so a plan compiles only what it runs.
#include "common/dtype.cuh"
#include "common/strided.cuh"
#include "common/pointwise.cuh"

enum { RELU = 0, GELU_ERF = 1, GELU_TANH = 2, SILU = 3, SIGMOID = 4, TANH = 5, EXP = 6, NEG = 7 };

#if BARACUDA_DTYPE != 1
#include "common/fast_math.cuh"
// x Phi(x) and Phi(x).
__device__ __forceinline__ float gelu_erf(float x) {
    const float xe = x * half_erfc_abs(x);
    return x < 0.f ? xe : x - xe;
}
__device__ __forceinline__ float normal_cdf(float x) {
    const float e = half_erfc_abs(x);
    return x < 0.f ? e : 1.f - e;
}
__device__ __forceinline__ float sigmoid_approx(float v) {
    return rcp_approx(1.f + ex2_approx(-1.4426950408889634f * v));
}
// e^x for 16-bit results: 2^t with t = x log2(e) rounded to f32, through
// the hardware exp2 (ex2.approx.ftz, one MUFU op). t's rounding costs at
// most |t| 2^-24 ln2 relative (2^-18 at the f32 range's edge, 2^-21 at
// f16's), so the 16-bit result is off by one unit only for inputs within
// that distance of a rounding midpoint, as expf's own error allows too.
// Results below 2^-126 (bf16 subnormals) come from 2^(t + 24) 2^-24, which
// the multiply rounds to the subnormal; 0 below 2^-150. A measured
// variant that folded t's rounding error back in (two more FMAs) ran bf16
// exp at 0.259 ms (2^28 elements, H200) against expf's 0.254.
__device__ __forceinline__ float exp_16bit(float x) {
    const float t = x * 1.4426950408889634f;
    const bool tiny = t < -126.f;
    const float r = ex2_approx(tiny ? t + 24.f : t);
    return tiny ? r * 5.9604644775390625e-8f : r;
}
#else
__device__ __forceinline__ double normal_cdf(double x) { return 0.5 * (1.0 + erf(x * 0.70710678118654752440)); }
__device__ __forceinline__ double gelu_erf(double x) { return x * normal_cdf(x); }
#endif

template <int OP>
__device__ __forceinline__ ACC unary_f(ACC x) {
    if (OP == RELU) return x < ACC(0) ? ACC(0) : x;
    if (OP == GELU_ERF) return gelu_erf(x);
#if BARACUDA_DTYPE >= 2
    if (OP == GELU_TANH) return x * sigmoid_approx(1.5957691216057308f * (x + 0.044715f * x * x * x));
    if (OP == SILU) return x * sigmoid_approx(x);
    if (OP == SIGMOID) return sigmoid_approx(x);
    if (OP == EXP) return exp_16bit(x);
#else
    if (OP == GELU_TANH) {
        const ACC k = ACC(0.79788456080286535588);
        return ACC(0.5) * x * (ACC(1) + m_tanh(k * (x + ACC(0.044715) * x * x * x)));
    }
    if (OP == SILU) return x / (ACC(1) + m_exp(-x));
    if (OP == SIGMOID) return ACC(1) / (ACC(1) + m_exp(-x));
#endif
    if (OP == TANH) return m_tanh(x);
    if (OP == EXP) return m_exp(x);
    return -x;  // NEG
}

template <int OP>
__device__ __forceinline__ ACC unary_df(ACC x, ACC dy) {
    if (OP == RELU) return x <= ACC(0) ? ACC(0) : dy;  // as threshold_backward: NaN passes dy
    if (OP == GELU_ERF) {
        const ACC cdf = normal_cdf(x);
        const ACC pdf = m_exp(ACC(-0.5) * x * x) * ACC(0.39894228040143267794);
        return dy * (cdf + x * pdf);
    }
    if (OP == GELU_TANH) {
        const ACC k = ACC(0.79788456080286535588);
        const ACC c = ACC(0.044715);
        const ACC t = m_tanh(k * (x + c * x * x * x));
        const ACC dinner = k * (ACC(1) + ACC(3) * c * x * x);
        return dy * (ACC(0.5) * (ACC(1) + t) + ACC(0.5) * x * (ACC(1) - t * t) * dinner);
    }
    if (OP == SILU) {
        const ACC s = ACC(1) / (ACC(1) + m_exp(-x));
        return dy * s * (ACC(1) + x * (ACC(1) - s));
    }
    if (OP == SIGMOID) {
        const ACC s = ACC(1) / (ACC(1) + m_exp(-x));
        return dy * s * (ACC(1) - s);
    }
    if (OP == TANH) {
        const ACC t = m_tanh(x);
        return dy * (ACC(1) - t * t);
    }
#if BARACUDA_DTYPE >= 2
    if (OP == EXP) return dy * exp_16bit(x);
#endif
    if (OP == EXP) return dy * m_exp(x);
    return -dy;  // NEG
}

template <int OP>
struct UnaryFw {
    __device__ __forceinline__ void operator()(const ACC (&a)[1], ACC (&r)[1]) const { r[0] = unary_f<OP>(a[0]); }
};

template <int OP>
struct UnaryBw {
    __device__ __forceinline__ void operator()(const ACC (&a)[2], ACC (&r)[1]) const {
        r[0] = unary_df<OP>(a[0], a[1]);
    }
};

// Contiguous kernels take (x, y, n) and (x, dy, dx, n); strided ones the
// same operands as StridedArgs inputs and outputs.
#define UNARY_KERNELS(NAME, OP)                                                                   \
    POINTWISE_KERNELS(unary_fw, NAME, UnaryFw<OP>, 1, 1, (const T* x, T* y, u64 n), (x), (y))    \
    POINTWISE_KERNELS(unary_bw, NAME, UnaryBw<OP>, 2, 1, (const T* x, const T* dy, T* dx, u64 n), \
                      (x, dy), (dx))

#if !defined(BARACUDA_OP) || BARACUDA_OP == 0
UNARY_KERNELS(relu, RELU)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 1
UNARY_KERNELS(gelu_erf, GELU_ERF)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 2
UNARY_KERNELS(gelu_tanh, GELU_TANH)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 3
UNARY_KERNELS(silu, SILU)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 4
UNARY_KERNELS(sigmoid, SIGMOID)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 5
UNARY_KERNELS(tanh, TANH)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 6
UNARY_KERNELS(exp, EXP)
#endif
#if !defined(BARACUDA_OP) || BARACUDA_OP == 7
UNARY_KERNELS(neg, NEG)
#endif
