// fast_math.cuh: f32 helpers on the hardware's approximate exp2 and
// reciprocal (one MUFU op each, ftz), and the erfc evaluation GELU-erf and
// the normal CDF use on 16-bit types. No element type: included by
// elementwise/unary.cu and by docs/perf-notes/experiments/elementwise_math.cu, which
// checks and times these exact functions.
//
// The erfc evaluation: for z >= 0, t = 1 / (1 + z/2),
//   erfc(z) = t exp(-z^2 + P(t)),  P of degree 9 fitted (Chebyshev) to
// ln(erfc(z)/t) + z^2 on t in [0, 1]: max relative error 1.3e-7 over every
// z in exact arithmetic. tests/gelu_erfc.rs reads the constants below and
// checks the result against f64 on every bf16 and f16 input.
#pragma once

__device__ __forceinline__ float ex2_approx(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ float rcp_approx(float x) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
// erfc(|x|/sqrt2)/2 = Phi(-|x|). P's coefficients carry log2(e), and its
// constant term the -1 of the halving, so the exponential is one ex2.
__device__ __forceinline__ float half_erfc_abs(float x) {
    const float t = rcp_approx(fmaf(fabsf(x), 0.35355339059327376f, 1.f));
    float q = 2.626355708e-01f;
    q = fmaf(q, t, -1.258955786e+00f);
    q = fmaf(q, t, 2.284647155e+00f);
    q = fmaf(q, t, -1.777056158e+00f);
    q = fmaf(q, t, 4.847548746e-01f);
    q = fmaf(q, t, -2.973965222e-01f);
    q = fmaf(q, t, 1.452133126e-01f);
    q = fmaf(q, t, 5.391565473e-01f);
    q = fmaf(q, t, 1.442749534e+00f);
    q = fmaf(q, t, -2.825748336e+00f);
    return t * ex2_approx(fmaf(x * x, -0.72134752044448170f, q));
}
