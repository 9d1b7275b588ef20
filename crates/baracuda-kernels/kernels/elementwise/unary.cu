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
// The other ops are PyTorch's functions of the same name (UnaryOp in
// src/elementwise/unary.rs documents each): forward and backward follow
// PyTorch's CUDA kernels and derivatives.yaml for NaN, the infinities, -0,
// domain edges and kinks, each op's UnaryMath specialisation below. Their
// math is the CUDA math library's in ACC (f32 for f16, bf16 and f32; f64
// for f64), IEEE, no approximate forms; derivative formulas are rewritten
// only where that keeps digits and not semantics (1 - x^2 as one fma).
// Parameters arrive as the kernels' last argument, UnaryParams (four
// doubles, rounded to ACC where used): one module serves every value.
// digamma and its derivative (trigamma, also lgamma's) are series of this
// file: recurrence up to x >= 10, then the asymptotic expansion; the
// reflection for x < 0 takes sinpi/cospi of the exact fraction of x.
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
// Specialised by: BARACUDA_DTYPE (T, ACC); BARACUDA_OP (the op's index in
// UnaryOp::ALL, the enum below) and BARACUDA_OP_NAME (its name, the
// kernels' suffix) make the module one op's kernels, so a plan compiles
// only what it runs.
#include "common/dtype.cuh"
#include "common/strided.cuh"
#include "common/pointwise.cuh"

// UnaryOp::ALL's order.
enum {
    RELU, GELU_ERF, GELU_TANH, SILU, SIGMOID, TANH, EXP, NEG,
    ABS, SIGN, SGN, RECIPROCAL, SQRT, RSQRT, SQUARE, EXP2, EXPM1, LOG, LOG2, LOG10, LOG1P,
    SIN, COS, TAN, ASIN, ACOS, ATAN, SINH, COSH, ASINH, ACOSH, ATANH,
    ERF, ERFC, ERFINV, LGAMMA, DIGAMMA, SINC,
    LOGSIGMOID, SOFTSIGN, MISH, HARDSWISH, HARDSIGMOID, RELU6, SELU, TANHSHRINK,
    FLOOR, CEIL, ROUND, TRUNC, FRAC,
    LEAKY_RELU, ELU, CELU, SOFTPLUS, HARDTANH, CLAMP, LOGIT, SOFTSHRINK, HARDSHRINK, THRESHOLD,
    NAN_TO_NUM, I0, I0E, I1, I1E, POLYGAMMA, ROUND_DECIMALS, POW_SCALAR, RPOW_SCALAR
};

// The parameters of an op (UnaryParams in unary.rs), as the host passes
// them; each op's row says which slots it reads.
struct UnaryParams {
    double p[4];
};

#if BARACUDA_DTYPE != 1
#include "common/fast_math.cuh"
// Phi(x) = e (x < 0) or 1 - e with e = erfc(|x| / sqrt2) / 2, and
// gelu(x) = x Phi(x): +inf gives +inf (Phi = 1), -0 gives -0 (x < 0 is
// false, so -0 * (1 - e)), -inf gives NaN as PyTorch's x (1 + erf) / 2.
__device__ __forceinline__ float normal_cdf(float x) {
    const float e = half_erfc_abs(x);
    return x < 0.f ? e : 1.f - e;
}
__device__ __forceinline__ float gelu_erf(float x) { return x * normal_cdf(x); }
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

// CUDA math functions without float overloads of the same name.
__device__ __forceinline__ float m_rsqrt(float x) { return rsqrtf(x); }
__device__ __forceinline__ double m_rsqrt(double x) { return rsqrt(x); }
__device__ __forceinline__ float m_erfinv(float x) { return erfinvf(x); }
__device__ __forceinline__ double m_erfinv(double x) { return erfinv(x); }
__device__ __forceinline__ float m_sinpi(float x) { return sinpif(x); }
__device__ __forceinline__ double m_sinpi(double x) { return sinpi(x); }
__device__ __forceinline__ float m_cospi(float x) { return cospif(x); }
__device__ __forceinline__ double m_cospi(double x) { return cospi(x); }

#define M_PI_ACC ACC(3.14159265358979323846)
#define NAN_ACC ACC(__longlong_as_double(0x7FF8000000000000ll))
#define INF_ACC ACC(__longlong_as_double(0x7FF0000000000000ll))

// std::max / std::min as PyTorch's device code evaluates them: the first
// argument when the comparison is false, so a NaN first argument passes.
__device__ __forceinline__ ACC pt_max(ACC a, ACC b) { return a < b ? b : a; }
__device__ __forceinline__ ACC pt_min(ACC a, ACC b) { return b < a ? b : a; }

// sign as PyTorch's (0 < x) - (x < 0): 0 for ±0 and NaN.
__device__ __forceinline__ ACC sign_of(ACC x) { return ACC((ACC(0) < x) - (x < ACC(0))); }

// digamma(x): -inf at +0, +inf at -0, NaN at the negative integers and
// -inf; otherwise psi(x) = psi(1 - x) - pi cot(pi x) for x < 0 (cot from
// the exact fraction of x), the recurrence psi(x) = psi(x + 1) - 1/x up to
// x >= 10, and ln x - 1/(2x) - sum B_2k / (2k x^2k) (k <= 7: below 1e-17
// relative from 10 on).
__device__ __forceinline__ ACC digamma(ACC x) {
    if (x == ACC(0)) return copysign(INF_ACC, -x);
    ACC r = 0;
    if (x < ACC(0)) {
        const ACC frac = x - trunc(x);
        if (frac == ACC(0)) return NAN_ACC;  // a negative integer, or -inf
        r = -M_PI_ACC * m_cospi(frac) / m_sinpi(frac);
        x = ACC(1) - x;
    }
    while (x < ACC(10)) {
        r -= ACC(1) / x;
        x += ACC(1);
    }
    const ACC z = ACC(1) / (x * x);
    const ACC s =
        z * (ACC(1.0 / 12) -
             z * (ACC(1.0 / 120) -
                  z * (ACC(1.0 / 252) -
                       z * (ACC(1.0 / 240) - z * (ACC(1.0 / 132) - z * (ACC(691.0 / 32760) - z * ACC(1.0 / 12)))))));
    return r + log(x) - ACC(0.5) / x - s;
}

// trigamma(x) = polygamma(1, x): +inf at the non-positive integers (sinpi
// of an integer is exactly 0), psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x)
// below 1/2, the recurrence psi1(x) = psi1(x + 1) + 1/x^2 up to x >= 10,
// and (1 + 1/(2x) + sum B_2k / x^2k) / x.
__device__ __forceinline__ ACC trigamma(ACC x) {
    ACC sign = 1, r = 0;
    if (x < ACC(0.5)) {
        const ACC s = m_sinpi(x);
        r = -(M_PI_ACC * M_PI_ACC) / (s * s);
        sign = -1;
        x = ACC(1) - x;
    }
    while (x < ACC(10)) {
        r += ACC(1) / (x * x);
        x += ACC(1);
    }
    const ACC z = ACC(1) / (x * x);
    const ACC t =
        z * (ACC(1.0 / 6) -
             z * (ACC(1.0 / 30) -
                  z * (ACC(1.0 / 42) - z * (ACC(1.0 / 30) - z * (ACC(5.0 / 66) - z * (ACC(691.0 / 2730) - z * ACC(7.0 / 6)))))));
    return sign * (r + (ACC(1) + ACC(0.5) / x + t) / x);
}

// polygamma(m, x) = (-1)^(m+1) m! zeta(m + 1, x) for m >= 2 (m = 0 and 1
// are digamma and trigamma above), as PyTorch's: the Hurwitz zeta as the
// sum of (x + k)^-(m+1) up to x + k >= 25, then the Euler-Maclaurin tail
// a^(1-s) / (s-1) + a^-s / 2 + sum_j B_2j / (2j)! (s)_(2j-1) a^(-s-2j+1),
// j <= 7 (below 1e-18 relative there for s <= 6). Computed in f64 for
// every dtype: for negative x the sum's terms cancel (at x = -2.5 they
// reach 10^4 times the result), which f32 arithmetic would leave 1e-4
// off. At 0, the negative integers and -inf the pole's infinity, times
// (-1)^(m+1); at +inf NaN (PyTorch's: 0 / 0 in its series).
__device__ __forceinline__ double hurwitz_polygamma(int m, double x) {
    const double sign = (m & 1) ? 1.0 : -1.0;
    double fact = 1;
    for (int k = 2; k <= m; ++k) fact *= double(k);
    if (x != x) return x;
    if (x <= 0.0 && x == floor(x)) return sign * __longlong_as_double(0x7FF0000000000000ll);
    if (isinf(x)) return __longlong_as_double(0x7FF8000000000000ll);
    const int s = m + 1;
    double sum = 0;
    while (x < 25.0) {
        const double r = 1.0 / x;
        double p = r;
        for (int k = 1; k < s; ++k) p *= r;
        sum += p;
        x += 1.0;
    }
    const double r = 1.0 / x;
    double xs = r;  // x^-s
    for (int k = 1; k < s; ++k) xs *= r;
    const double c[7] = {1.0 / 12, -1.0 / 720, 1.0 / 30240, -1.0 / 1209600,
                         1.0 / 47900160, -691.0 / 1307674368000.0, 1.0 / 74724249600.0};
    double f = double(s) * r;  // (s)_(2j-1) a^-(2j-1)
    double series = 0;
    for (int j = 1; j <= 7; ++j) {
        series += c[j - 1] * f;
        f *= double(s + 2 * j - 1) * double(s + 2 * j) * r * r;
    }
    const double tail = xs * (x / double(s - 1) + 0.5 + series);
    return sign * fact * (sum + tail);
}

__device__ __forceinline__ ACC polygamma_n(int m, ACC x) {
    if (m == 0) return digamma(x);
    if (m == 1) return trigamma(x);
    return ACC(hurwitz_polygamma(m, double(x)));
}

// d sinc / dx = (cos(pi x) - sinc(x)) / x; for |x| < 0.16 the series
// pi^2 x sum_k>=1 (-1)^k 2k (pi x)^(2k-2) / (2k+1)! (through k = 8: below
// 1e-17 relative there), which the difference would cancel. 0 at 0.
__device__ __forceinline__ ACC sinc_derivative(ACC x) {
    const ACC px = M_PI_ACC * x;
    if (fabs(x) < ACC(0.16)) {
        const ACC y = px * px;
        const ACC q =
            ACC(-1.0 / 3) +
            y * (ACC(1.0 / 30) +
                 y * (ACC(-1.0 / 840) +
                      y * (ACC(1.0 / 45360) +
                           y * (ACC(-1.0 / 3991680) +
                                y * (ACC(1.0 / 518918400) + y * (ACC(-1.0 / 93405312000.0) + y * ACC(1.0 / 22230464256000.0)))))));
        return M_PI_ACC * px * q;
    }
    return (m_cospi(x) - m_sinpi(x) / px) / x;
}

// elu_kernel and elu_backward_kernel (is_result false): p0 alpha, p1
// scale, p2 input scale, each rounded to ACC, negcoef = alpha * scale in
// ACC. A NaN x takes the positive branch of the gradient.
__device__ __forceinline__ ACC elu_f(ACC x, ACC alpha, ACC scale, ACC in_scale) {
    return x > ACC(0) ? x * scale : expm1(x * in_scale) * (alpha * scale);
}
__device__ __forceinline__ ACC elu_df(ACC x, ACC dy, ACC alpha, ACC scale, ACC in_scale) {
    return x <= ACC(0) ? dy * in_scale * (alpha * scale) * exp(x * in_scale) : dy * scale;
}

// PyTorch's clamp with scalar bounds: NaN passes, then lo, then hi.
__device__ __forceinline__ ACC clamp_f(ACC x, ACC lo, ACC hi) {
    if (m_isnan(x)) return x;
    const ACC r = x < lo ? lo : x;
    return hi < r ? hi : r;
}

// Modified Bessel functions I0 and I1 of ax = |x| (finite, not NaN),
// scaled by e^-ax when SCALED. Up to ax = 9 (f32) or 20 (f64) the power
// series I0 = sum q^k / k!^2, I1 = ax/2 sum q^k / (k! (k+1)!), q = ax^2/4
// (positive terms, summed until the next is below half an ulp: ~ax ulp
// of rounding); beyond, the asymptotic expansion
// I_v e^-ax = (2 pi ax)^-1/2 sum_k t_k, t_k = t_(k-1) ((2k-1)^2 - 4v^2) / (8k ax),
// whose terms fall below half an ulp before they turn to grow (the least
// is ~e^-2ax). Unscaled there: times e^(ax/2) twice, which overflows only
// where the result does.
template <bool SCALED>
__device__ __forceinline__ void bessel_i01(ACC ax, ACC& i0, ACC& i1) {
    const bool dbl = sizeof(ACC) == 8;
    const ACC half_ulp = dbl ? ACC(1.1102230246251565e-16) : ACC(5.9604644775390625e-8);
    ACC s0 = 1, s1 = 1, t0 = 1, t1 = 1;
    if (ax <= (dbl ? ACC(20) : ACC(9))) {
        const ACC q = ACC(0.25) * ax * ax;
        for (int k = 1; k < 100; ++k) {
            const ACC kk = ACC(k);
            t0 *= q / (kk * kk);
            t1 *= q / (kk * (kk + ACC(1)));
            s0 += t0;
            s1 += t1;
            if (t0 <= half_ulp * s0) break;
        }
        i0 = s0;
        i1 = ACC(0.5) * ax * s1;
        if (SCALED) {
            const ACC e = exp(-ax);
            i0 *= e;
            i1 *= e;
        }
        return;
    }
    const ACC z = ACC(1) / (ACC(8) * ax);
    for (int k = 1; k <= 40; ++k) {
        const ACC m = ACC(2 * k - 1) * ACC(2 * k - 1);
        t0 *= m * z / ACC(k);
        t1 *= (m - ACC(4)) * z / ACC(k);
        s0 += t0;
        s1 += t1;
        if (t0 <= half_ulp * s0) break;
    }
    const ACC c = ACC(1) / sqrt(ACC(6.283185307179586477) * ax);
    i0 = c * s0;
    i1 = c * s1;
    if (!SCALED) {
        const ACC h = exp(ACC(0.5) * ax);
        i0 = i0 * h * h;
        i1 = i1 * h * h;
    }
}

// i0, i0e, i1, i1e of x (WHICH 0..3): NaN passes; at +-inf i0 and i1 are
// NaN (PyTorch's), i0e = 0, i1e = +-0; i1 and i1e are odd (-0 gives -0).
template <int WHICH>
__device__ __forceinline__ ACC bessel_i(ACC x) {
    if (m_isnan(x)) return x;
    const bool scaled = WHICH == 1 || WHICH == 3;
    const bool order1 = WHICH >= 2;
    const ACC ax = fabs(x);
    if (isinf(x)) {
        const ACC v = scaled ? ACC(0) : NAN_ACC;
        return order1 ? copysign(v, x) : v;
    }
    ACC i0, i1;
    if (scaled)
        bessel_i01<true>(ax, i0, i1);
    else
        bessel_i01<false>(ax, i0, i1);
    return order1 ? copysign(i1, x) : i0;
}

// i1'(x) = i0(x) - i1(x) / x, 0.5 unless |x| > the ACC epsilon (NaN
// included: PyTorch's i1_backward); past the series, (i0e - i1e / |x|) e^|x| (no inf - inf
// where i0 overflows but the difference does not; NaN at +-inf).
__device__ __forceinline__ ACC bessel_i1_derivative(ACC x) {
    const ACC eps = sizeof(ACC) == 8 ? ACC(2.220446049250313e-16) : ACC(1.1920928955078125e-7);
    const ACC ax = fabs(x);
    if (!(ax > eps)) return ACC(0.5);
    ACC i0, i1;
    if (ax <= (sizeof(ACC) == 8 ? ACC(20) : ACC(9))) {
        bessel_i01<false>(ax, i0, i1);
        return i0 - i1 / ax;
    }
    bessel_i01<true>(ax, i0, i1);
    const ACC h = exp(ACC(0.5) * ax);
    return (i0 - i1 / ax) * h * h;
}

// i1e'(x) = i0e(x) - i1e(x) (sgn(x) + 1/x), 0.5 unless |x| > the ACC
// epsilon (NaN included: PyTorch's i1e_backward).
__device__ __forceinline__ ACC bessel_i1e_derivative(ACC x) {
    const ACC eps = sizeof(ACC) == 8 ? ACC(2.220446049250313e-16) : ACC(1.1920928955078125e-7);
    if (!(fabs(x) > eps)) return ACC(0.5);
    return bessel_i<1>(x) - bessel_i<3>(x) * (sign_of(x) + ACC(1) / x);
}

// rint of v + e (e the rounding error of v, far below its ulp): rint(v),
// but past a tie of v toward e's side.
__device__ __forceinline__ ACC rint_exact(ACC v, ACC e) {
    const ACC n = rint(v);
    if (fabs(v - n) == ACC(0.5) && e != ACC(0)) return e > ACC(0) ? ceil(v) : floor(v);
    return n;
}

// round(x, decimals), p = 10^|decimals|: rint(x p) / p, or rint(x / p) p
// when NEG, with rint of the exact product (quotient) from its fma residual.
__device__ __forceinline__ ACC round_decimals(ACC x, ACC p, bool neg) {
    if (neg) {
        const ACC q = x / p;
        return rint_exact(q, fma(-q, p, x)) * p;
    }
    const ACC r = x * p;
    return rint_exact(r, fma(x, p, -r)) / p;
}

// x to a scalar power as PyTorch's CUDA pow(Tensor, Scalar) evaluates it,
// in the form the host chose (unary.rs `pow_form`): 0 ones, 1 x, 2 sqrt,
// 3 rsqrt, 4 1/x, 5 x x, 6 x x x, 7 1/(x x), else pow(x, e).
__device__ __forceinline__ ACC pow_scalar(ACC x, int form, ACC e) {
    switch (form) {
        case 0: return ACC(1);
        case 1: return x;
        case 2: return sqrt(x);
        case 3: return m_rsqrt(x);
        case 4: return ACC(1) / x;
        case 5: return x * x;
        case 6: return x * x * x;
        case 7: return ACC(1) / (x * x);
        default: return m_pow(x, e);
    }
}

// One op: y = f(x), dx = df(x, dy); q the op's parameters.
template <int OP>
struct UnaryMath;

#define UNARY_OP(ID, FW, BW)                                                                \
    template <>                                                                             \
    struct UnaryMath<ID> {                                                                  \
        static __device__ __forceinline__ ACC f(ACC x, const UnaryParams& q) { FW }         \
        static __device__ __forceinline__ ACC df(ACC x, ACC dy, const UnaryParams& q) { BW } \
    };

UNARY_OP(RELU, return x < ACC(0) ? ACC(0) : x;,
         return x <= ACC(0) ? ACC(0) : dy;)  // as threshold_backward: NaN passes dy
UNARY_OP(GELU_ERF, return gelu_erf(x);, {
    const ACC cdf = normal_cdf(x);
    const ACC pdf = m_exp(ACC(-0.5) * x * x) * ACC(0.39894228040143267794);
    return dy * (cdf + x * pdf);
})
#if BARACUDA_DTYPE >= 2
#define GELU_TANH_FW return x * sigmoid_approx(1.5957691216057308f * (x + 0.044715f * x * x * x));
#define SILU_FW return x * sigmoid_approx(x);
#define SIGMOID_FW return sigmoid_approx(x);
#define EXP_FW return exp_16bit(x);
#define EXP_BW return dy * exp_16bit(x);
#else
#define GELU_TANH_FW                                                      \
    const ACC k = ACC(0.79788456080286535588);                            \
    return ACC(0.5) * x * (ACC(1) + m_tanh(k * (x + ACC(0.044715) * x * x * x)));
#define SILU_FW return x / (ACC(1) + m_exp(-x));
#define SIGMOID_FW return ACC(1) / (ACC(1) + m_exp(-x));
#define EXP_FW return m_exp(x);
#define EXP_BW return dy * m_exp(x);
#endif
UNARY_OP(GELU_TANH, GELU_TANH_FW, {
    const ACC k = ACC(0.79788456080286535588);
    const ACC c = ACC(0.044715);
    const ACC t = m_tanh(k * (x + c * x * x * x));
    const ACC dinner = k * (ACC(1) + ACC(3) * c * x * x);
    return dy * (ACC(0.5) * (ACC(1) + t) + ACC(0.5) * x * (ACC(1) - t * t) * dinner);
})
UNARY_OP(SILU, SILU_FW, {
    const ACC s = ACC(1) / (ACC(1) + m_exp(-x));
    return dy * s * (ACC(1) + x * (ACC(1) - s));
})
UNARY_OP(SIGMOID, SIGMOID_FW, {
    const ACC s = ACC(1) / (ACC(1) + m_exp(-x));
    return dy * s * (ACC(1) - s);
})
UNARY_OP(TANH, return m_tanh(x);, {
    const ACC t = m_tanh(x);
    return dy * (ACC(1) - t * t);
})
UNARY_OP(EXP, EXP_FW, EXP_BW)
UNARY_OP(NEG, return -x;, return -dy;)

//       op           forward                                   backward (dx)
UNARY_OP(ABS,         return fabs(x);,                          return dy * sign_of(x);)
UNARY_OP(SIGN,        return sign_of(x);,                       return ACC(0);)
UNARY_OP(SGN,         return sign_of(x);,                       return ACC(0);)
UNARY_OP(RECIPROCAL,  return ACC(1) / x;,                       const ACC r = ACC(1) / x; return -dy * (r * r);)
UNARY_OP(SQRT,        return sqrt(x);,                          return dy / (ACC(2) * sqrt(x));)
UNARY_OP(RSQRT,       return m_rsqrt(x);,                       const ACC r = m_rsqrt(x); return ACC(-0.5) * dy * (r * r * r);)
UNARY_OP(SQUARE,      return x * x;,                            return dy * (ACC(2) * x);)
UNARY_OP(EXP2,        return exp2(x);,                          return dy * exp2(x) * ACC(0.69314718055994530942);)
UNARY_OP(EXPM1,       return expm1(x);,                         return dy * exp(x);)
UNARY_OP(LOG,         return log(x);,                           return dy / x;)
UNARY_OP(LOG2,        return log2(x);,                          return dy / (x * ACC(0.69314718055994530942));)
UNARY_OP(LOG10,       return log10(x);,                         return dy / (x * ACC(2.30258509299404568402));)
UNARY_OP(LOG1P,       return log1p(x);,                         return dy / (x + ACC(1));)
UNARY_OP(SIN,         return sin(x);,                           return dy * cos(x);)
UNARY_OP(COS,         return cos(x);,                           return dy * -sin(x);)
UNARY_OP(TAN,         return tan(x);,                           const ACC t = tan(x); return dy * (ACC(1) + t * t);)
UNARY_OP(ASIN,        return asin(x);,                          return dy * m_rsqrt(fma(-x, x, ACC(1)));)
UNARY_OP(ACOS,        return acos(x);,                          return dy * -m_rsqrt(fma(-x, x, ACC(1)));)
UNARY_OP(ATAN,        return atan(x);,                          return dy / fma(x, x, ACC(1));)
UNARY_OP(SINH,        return sinh(x);,                          return dy * cosh(x);)
UNARY_OP(COSH,        return cosh(x);,                          return dy * sinh(x);)
UNARY_OP(ASINH,       return asinh(x);,                         return dy * m_rsqrt(fma(x, x, ACC(1)));)
UNARY_OP(ACOSH,       return acosh(x);,                         return dy * m_rsqrt(fma(x, x, ACC(-1)));)
UNARY_OP(ATANH,       return atanh(x);,                         return dy / fma(-x, x, ACC(1));)
UNARY_OP(ERF,         return erf(x);,                           return ACC(1.12837916709551257390) * exp(-(x * x)) * dy;)
UNARY_OP(ERFC,        return erfc(x);,                          return ACC(-1.12837916709551257390) * exp(-(x * x)) * dy;)
UNARY_OP(ERFINV,      return m_erfinv(x);,                      const ACC e = m_erfinv(x);
                      return ACC(0.88622692545275801365) * exp(e * e) * dy;)
UNARY_OP(LGAMMA,      return lgamma(x);,                        return dy * digamma(x);)
UNARY_OP(DIGAMMA,     return digamma(x);,                       return dy * trigamma(x);)
UNARY_OP(SINC,        if (x == ACC(0)) return ACC(1);
                      const ACC px = M_PI_ACC * x; return m_sinpi(x) / px;,
                      return x == ACC(0) ? ACC(0) : dy * sinc_derivative(x);)
// log_sigmoid_forward / log_sigmoid_backward
UNARY_OP(LOGSIGMOID,  return pt_min(ACC(0), x) - log1p(exp(-fabs(x)));, {
                      const ACC z = exp(-fabs(x));
                      return x < ACC(0) ? dy * (ACC(1) - z / (ACC(1) + z)) : dy * (z / (ACC(1) + z));
})
// x / (1 + |x|) as PyTorch's composite; its gradient is NaN at ±inf
UNARY_OP(SOFTSIGN,    return x / (ACC(1) + fabs(x));, {
                      const ACC b = ACC(1) + fabs(x);
                      return isinf(x) ? NAN_ACC : dy / (b * b);
})
UNARY_OP(MISH,        return x * tanh(log1p(exp(x)));, {
                      const ACC s = ACC(1) / (ACC(1) + exp(-x));
                      const ACC t = tanh(log1p(exp(x)));
                      return dy * (t + x * s * (ACC(1) - t * t));
})
// hardswish / hardsigmoid with PyTorch's one_sixth, (float)(1.0f / 6.0f)
UNARY_OP(HARDSWISH,   return x * pt_min(pt_max(x + ACC(3), ACC(0)), ACC(6)) * ACC(1.0f / 6.0f);,
                      if (x <= ACC(-3)) return ACC(0);
                      if (x < ACC(3)) return dy * (x / ACC(3) + ACC(0.5));
                      return dy;)
UNARY_OP(HARDSIGMOID, return pt_min(pt_max(x + ACC(3), ACC(0)), ACC(6)) * ACC(1.0f / 6.0f);,
                      return x > ACC(-3) && x < ACC(3) ? dy * ACC(1.0f / 6.0f) : ACC(0);)
// hardtanh(x, 0, 6)
UNARY_OP(RELU6,       return clamp_f(x, ACC(0), ACC(6));,
                      return x <= ACC(0) || x >= ACC(6) ? ACC(0) : dy;)
// elu with PyTorch's alpha and scale
UNARY_OP(SELU,        return elu_f(x, ACC(1.6732632423543772848170429916717), ACC(1.0507009873554804934193349852946), ACC(1));,
                      return elu_df(x, dy, ACC(1.6732632423543772848170429916717), ACC(1.0507009873554804934193349852946), ACC(1));)
UNARY_OP(TANHSHRINK,  return x - tanh(x);,                      const ACC t = tanh(x); return dy * (t * t);)
UNARY_OP(FLOOR,       return floor(x);,                         return ACC(0);)
UNARY_OP(CEIL,        return ceil(x);,                          return ACC(0);)
UNARY_OP(ROUND,       return rint(x);,                          return ACC(0);)
UNARY_OP(TRUNC,       return trunc(x);,                         return ACC(0);)
UNARY_OP(FRAC,        return x - trunc(x);,                     return dy;)
// p0 negative_slope
UNARY_OP(LEAKY_RELU,  return x > ACC(0) ? x : x * ACC(q.p[0]);,
                      return x > ACC(0) ? dy : dy * ACC(q.p[0]);)
// p0 alpha, p1 scale, p2 input scale (celu: 1 / alpha)
UNARY_OP(ELU,         return elu_f(x, ACC(q.p[0]), ACC(q.p[1]), ACC(q.p[2]));,
                      return elu_df(x, dy, ACC(q.p[0]), ACC(q.p[1]), ACC(q.p[2]));)
UNARY_OP(CELU,        return elu_f(x, ACC(q.p[0]), ACC(q.p[1]), ACC(q.p[2]));,
                      return elu_df(x, dy, ACC(q.p[0]), ACC(q.p[1]), ACC(q.p[2]));)
// p0 beta, p1 threshold
UNARY_OP(SOFTPLUS,    const ACC beta = ACC(q.p[0]);
                      return x * beta > ACC(q.p[1]) ? x : log1p(exp(x * beta)) / beta;, {
                      const ACC beta = ACC(q.p[0]);
                      const ACC z = exp(x * beta);
                      return x * beta > ACC(q.p[1]) ? dy : dy * z / (z + ACC(1));
})
// p0 min_val, p1 max_val
UNARY_OP(HARDTANH,    return clamp_f(x, ACC(q.p[0]), ACC(q.p[1]));,
                      return x <= ACC(q.p[0]) || x >= ACC(q.p[1]) ? ACC(0) : dy;)
// p0 min (-inf: none), p1 max (inf: none)
UNARY_OP(CLAMP,       return clamp_f(x, ACC(q.p[0]), ACC(q.p[1]));,
                      return x >= ACC(q.p[0]) && x <= ACC(q.p[1]) ? dy : ACC(0);)
// p0 eps (negative: none); logit_backward
UNARY_OP(LOGIT,       const ACC eps = ACC(q.p[0]);
                      const ACC z = eps < ACC(0) ? x : (x < eps ? eps : (x > ACC(1) - eps ? ACC(1) - eps : x));
                      return log(z / (ACC(1) - z));, {
                      const ACC eps = ACC(q.p[0]);
                      const ACC g = dy / (x * (ACC(1) - x));
                      if (eps < ACC(0)) return x < ACC(0) || x > ACC(1) ? NAN_ACC : g;
                      return x < eps || x > ACC(1) - eps ? ACC(0) : g;
})
// p0 lambd (rounded to T)
UNARY_OP(SOFTSHRINK,  const ACC l = ACC(q.p[0]);
                      return m_isnan(x) ? x : (x > l ? x - l : (x < -l ? x + l : ACC(0)));,
                      const ACC l = ACC(q.p[0]); return x >= -l && x <= l ? ACC(0) : dy;)
UNARY_OP(HARDSHRINK,  const ACC l = ACC(q.p[0]); return x >= -l && x <= l ? ACC(0) : x;,
                      const ACC l = ACC(q.p[0]); return x >= -l && x <= l ? ACC(0) : dy;)
// p0 threshold, p1 value (rounded to T)
UNARY_OP(THRESHOLD,   return x <= ACC(q.p[0]) ? ACC(q.p[1]) : x;,
                      return x <= ACC(q.p[0]) ? ACC(0) : dy;)
// p0 nan, p1 posinf, p2 neginf (rounded to T; the host fills the defaults)
UNARY_OP(NAN_TO_NUM,  if (m_isnan(x)) return ACC(q.p[0]);
                      if (isinf(x)) return x > ACC(0) ? ACC(q.p[1]) : ACC(q.p[2]);
                      return x;,
                      return dy * ACC(isfinite(x) ? 1 : 0);)
// modified Bessel functions (bessel_i above)
UNARY_OP(I0,          return bessel_i<0>(x);,                   return dy * bessel_i<2>(x);)
UNARY_OP(I0E,         return bessel_i<1>(x);,                   return dy * (bessel_i<3>(x) - sign_of(x) * bessel_i<1>(x));)
UNARY_OP(I1,          return bessel_i<2>(x);,                   return dy * bessel_i1_derivative(x);)
UNARY_OP(I1E,         return bessel_i<3>(x);,                   return dy * bessel_i1e_derivative(x);)
// p0 10^|decimals|, p1 1 for negative decimals
UNARY_OP(ROUND_DECIMALS, return round_decimals(x, ACC(q.p[0]), q.p[1] != 0.0);, return ACC(0);)
// p0 n (0..=4); the gradient is polygamma(n + 1)
UNARY_OP(POLYGAMMA,   return polygamma_n(int(q.p[0]), x);,      return dy * polygamma_n(int(q.p[0]) + 1, x);)
// p0 the forward's exponent, p1 the gradient's power's, p2 the exponent,
// p3 the forward's form + 16 x the gradient's (15: zero, exponent 0);
// pow_backward: dy (exponent x^(exponent - 1))
UNARY_OP(POW_SCALAR,  return pow_scalar(x, int(q.p[3]) & 15, ACC(q.p[0]));, {
                      const int form = int(q.p[3]) >> 4;
                      if (form == 15) return ACC(0);
                      return dy * (ACC(q.p[2]) * pow_scalar(x, form, ACC(q.p[1])));
})
// p0 the base rounded to T, p1 ln(base), p2 1 for a zero base, p3 1 for a
// base of 1 (the forward fills 1); pow_backward_exponent:
// dy (b^x ln(base)), dy 0 where the base is 0 and x >= 0
UNARY_OP(RPOW_SCALAR, return q.p[3] != 0.0 ? ACC(1) : m_pow(ACC(q.p[0]), x);, {
                      if (q.p[2] != 0.0 && x >= ACC(0)) return dy * ACC(0);
                      const ACC r = q.p[3] != 0.0 ? ACC(1) : m_pow(ACC(q.p[0]), x);
                      return dy * (r * ACC(q.p[1]));
})

template <int OP>
struct UnaryFw {
    UnaryParams q;
    __device__ __forceinline__ void operator()(const ACC (&a)[1], ACC (&r)[1]) const {
        r[0] = UnaryMath<OP>::f(a[0], q);
    }
};

template <int OP>
struct UnaryBw {
    UnaryParams q;
    __device__ __forceinline__ void operator()(const ACC (&a)[2], ACC (&r)[1]) const {
        r[0] = UnaryMath<OP>::df(a[0], a[1], q);
    }
};

// Contiguous kernels take (x, y, n, q) and (x, dy, dx, n, q); strided ones
// the same operands as StridedArgs inputs and outputs, then q.
#define UNARY_KERNELS(NAME, OP)                                                                        \
    POINTWISE_KERNELS_P(unary_fw, NAME, UnaryFw<OP>, 1, 1, (const T* x, T* y, u64 n), (x), (y),        \
                        UnaryParams)                                                                   \
    POINTWISE_KERNELS_P(unary_bw, NAME, UnaryBw<OP>, 2, 1, (const T* x, const T* dy, T* dx, u64 n),    \
                        (x, dy), (dx), UnaryParams)
// Expands BARACUDA_OP_NAME before UNARY_KERNELS pastes it.
#define UNARY_KERNELS_OF(NAME, OP) UNARY_KERNELS(NAME, OP)

#if !defined(BARACUDA_OP) || !defined(BARACUDA_OP_NAME)
#error "BARACUDA_OP and BARACUDA_OP_NAME must be defined (an op of UnaryOp::ALL)"
#endif
UNARY_KERNELS_OF(BARACUDA_OP_NAME, BARACUDA_OP)

// Gated activations (BARACUDA_GATED defined: gated.rs), built on the op's
// activation `act` (relu, gelu, silu, sigmoid): x splits along one dim into
// halves a (first) and b (second); the gate g is a (BARACUDA_GATED 0:
// swiglu, geglu, reglu) or b (1: glu), the other half u.
//
// FW  y  = act(g) u
// BW  dg = act'(g) (dy u)   (the unary backward at dy u),   du = dy act(g)
//
// Kernels: gated_fw / gated_bw over the halves as any two strided views
// (pointwise.cuh, strided.cuh), and gated_fw_split / gated_bw_split over
// a contiguous x seen as [outer, 2, inner] with inner % VEC == 0: one
// 16-byte vector of each half per thread, its gradients written to dx in
// the same pass. Traffic (y of n elements, b bytes): FW 3nb, BW 5nb.
#ifdef BARACUDA_GATED
template <int OP>
struct GatedFw {
    UnaryParams q;
    __device__ __forceinline__ void operator()(const ACC (&a)[2], ACC (&r)[1]) const {
        r[0] = UnaryMath<OP>::f(a[0], q) * a[1];
    }
};

// Inputs g, u, dy; outputs dg, du.
template <int OP>
struct GatedBw {
    UnaryParams q;
    __device__ __forceinline__ void operator()(const ACC (&a)[3], ACC (&r)[2]) const {
        r[0] = UnaryMath<OP>::df(a[0], a[2] * a[1], q);
        r[1] = a[2] * UnaryMath<OP>::f(a[0], q);
    }
};

// Vector i of the output's VEC-element vectors in [outer, inner]: the
// vector index of the gate and of the other half in x's [outer, 2, inner].
__device__ __forceinline__ void gated_split_index(u64 i, u64 inner_vec, u64& g, u64& u) {
    const u64 o = i / inner_vec, c = i - o * inner_vec;
    const u64 a = o * 2 * inner_vec + c;
    g = BARACUDA_GATED == 0 ? a : a + inner_vec;
    u = BARACUDA_GATED == 0 ? a + inner_vec : a;
}

template <int OP>
__device__ __forceinline__ void gated_fw_split(const T* x, T* y, u64 n, u64 inner, const UnaryParams& q) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n / VEC) return;
    u64 gi, ui;
    gated_split_index(i, inner / VEC, gi, ui);
    T g[VEC], u[VEC], r[VEC];
    load_vec(x, gi, g);
    load_vec(x, ui, u);
#pragma unroll
    for (int e = 0; e < VEC; ++e)
        r[e] = from_acc(UnaryMath<OP>::f(to_acc(g[e]), q) * to_acc(u[e]));
    store_vec(y, i, r);
}

template <int OP>
__device__ __forceinline__ void gated_bw_split(const T* x, const T* dy, T* dx, u64 n, u64 inner,
                                               const UnaryParams& q) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n / VEC) return;
    u64 gi, ui;
    gated_split_index(i, inner / VEC, gi, ui);
    T g[VEC], u[VEC], d[VEC], dg[VEC], du[VEC];
    load_vec(x, gi, g);
    load_vec(x, ui, u);
    load_vec(dy, i, d);
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
        const ACC ga = to_acc(g[e]), ua = to_acc(u[e]), da = to_acc(d[e]);
        dg[e] = from_acc(UnaryMath<OP>::df(ga, da * ua, q));
        du[e] = from_acc(da * UnaryMath<OP>::f(ga, q));
    }
    store_vec(dx, gi, dg);
    store_vec(dx, ui, du);
}

// Map kernels take (g, u, y, n, q) and (g, u, dy, dg, du, n, q); split
// kernels (x, y, n, inner, q) and (x, dy, dx, n, inner, q), n counting y's
// elements.
#define GATED_KERNELS(NAME, OP)                                                                    \
    POINTWISE_KERNELS_P(gated_fw, NAME, GatedFw<OP>, 2, 1, (const T* g, const T* u, T* y, u64 n),  \
                        (g, u), (y), UnaryParams)                                                  \
    POINTWISE_KERNELS_P(gated_bw, NAME, GatedBw<OP>, 3, 2,                                         \
                        (const T* g, const T* u, const T* dy, T* dg, T* du, u64 n), (g, u, dy),    \
                        (dg, du), UnaryParams)                                                     \
    extern "C" __global__ void __launch_bounds__(256)                                              \
        gated_fw_split_##NAME(const T* x, T* y, u64 n, u64 inner, const UnaryParams q) {           \
        gated_fw_split<OP>(x, y, n, inner, q);                                                     \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(256)                                              \
        gated_bw_split_##NAME(const T* x, const T* dy, T* dx, u64 n, u64 inner,                    \
                              const UnaryParams q) {                                               \
        gated_bw_split<OP>(x, dy, dx, n, inner, q);                                                \
    }
#define GATED_KERNELS_OF(NAME, OP) GATED_KERNELS(NAME, OP)
GATED_KERNELS_OF(BARACUDA_OP_NAME, BARACUDA_OP)
#endif
