//! f64 oracles for the elementwise family.

mod logic;
mod ternary;
pub use logic::*;
pub use ternary::*;

use baracuda_kernels_types::ElementKind;

use crate::elementwise::{BinaryOp, Fp8Mode, UnaryOp};

/// `erf` in f64, accurate to ~1e-15: the Maclaurin series below |x| = 2.5
/// and the Laplace continued fraction of `erfc` above (Rust's std has no
/// `erf`).
pub fn erf(x: f64) -> f64 {
    // Series for small |x|, continued fraction (Lentz) for erfc otherwise.
    let ax = x.abs();
    let r = if ax < 2.5 {
        // erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1))
        let mut sum = 0.0;
        let mut term = ax;
        let x2 = ax * ax;
        // |x| < 2.5: the terms fall below 1e-17 of the sum within 60 steps.
        for n in 0..200 {
            let t = term / (2.0 * n as f64 + 1.0);
            sum += t;
            if t.abs() <= 1e-17 * sum.abs() {
                break;
            }
            term *= -x2 / (n as f64 + 1.0);
        }
        sum * std::f64::consts::FRAC_2_SQRT_PI
    } else {
        1.0 - erfc_cf(ax)
    };
    // odd, -0 included
    if x.is_sign_negative() {
        -r
    } else {
        r
    }
}

/// `erfc(x)` for `x >= 2.5` by the Laplace continued fraction (Lentz),
/// accurate to ~1e-15 relative, so deep into the tail where `1 - erf(x)`
/// has no digits left:
/// erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + 1/2/(x + 1/(x + 3/2/(x + ...)))).
fn erfc_cf(ax: f64) -> f64 {
    if ax == f64::INFINITY {
        return 0.0;
    }
    let mut f = ax;
    let mut c = ax;
    let mut d = 0.0;
    for k in 1..400 {
        let an = k as f64 / 2.0;
        d = ax + an * d;
        d = if d == 0.0 { 1e-300 } else { 1.0 / d };
        c = ax + an / c;
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    (-ax * ax).exp() / (f * std::f64::consts::PI.sqrt())
}

/// `erfc(x) = 1 - erf(x)` in f64, accurate to ~1e-15 relative for every
/// `x` (through the continued fraction from 2.5 up, where `1 - erf` would
/// cancel).
pub fn erfc(x: f64) -> f64 {
    if x >= 2.5 {
        erfc_cf(x)
    } else {
        1.0 - erf(x)
    }
}

const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
const GELU_C: f64 = 0.044715;

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `ln |Gamma(x)|` in f64, accurate to ~1e-15 (absolute near its zeros
/// at 1 and 2): Lanczos (g = 7, 9 terms) from 1/2 up, the reflection
/// `ln(pi / |sin(pi x)|) - lgamma(1 - x)` below (sin of the exact fraction
/// of `x`); +inf at 0, the negative integers and ±inf.
pub fn lgamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x.is_nan() {
        return x;
    }
    if x.is_infinite() {
        return f64::INFINITY;
    }
    if x < 0.5 {
        let frac = x - x.trunc();
        let s = (std::f64::consts::PI * frac).sin().abs();
        return (std::f64::consts::PI / s).ln() - lgamma(1.0 - x);
    }
    let z = x - 1.0;
    let mut a = G[0];
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (z + i as f64);
    }
    let t = z + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (z + 0.5) * t.ln() - t + a.ln()
}

/// `digamma(x)` in f64 (PyTorch's edges: -inf at +0, +inf at -0, NaN at
/// the negative integers and -inf): the reflection through the exact
/// fraction of `x` below 0, the recurrence up to 10, then the asymptotic
/// series.
pub fn digamma(x: f64) -> f64 {
    if x == 0.0 {
        return f64::INFINITY.copysign(-x);
    }
    let mut x = x;
    let mut r = 0.0;
    if x < 0.0 {
        let frac = x - x.trunc();
        if frac == 0.0 || frac.is_nan() {
            return f64::NAN;
        }
        r = -std::f64::consts::PI / (std::f64::consts::PI * frac).tan();
        x = 1.0 - x;
    }
    while x < 10.0 {
        r -= 1.0 / x;
        x += 1.0;
    }
    let z = 1.0 / (x * x);
    let s = z
        * (1.0 / 12.0
            - z * (1.0 / 120.0
                - z * (1.0 / 252.0
                    - z * (1.0 / 240.0 - z * (1.0 / 132.0 - z * (691.0 / 32760.0 - z / 12.0))))));
    r + x.ln() - 0.5 / x - s
}

/// `polygamma(1, x)` in f64: +inf at the non-positive integers, the
/// reflection below 1/2, the recurrence up to 10, the asymptotic series.
pub fn trigamma(x: f64) -> f64 {
    let pi = std::f64::consts::PI;
    let (mut x, mut r, mut sign) = (x, 0.0, 1.0);
    if x < 0.5 {
        let frac = x - x.trunc();
        let s = (pi * frac).sin();
        r = -(pi * pi) / (s * s);
        sign = -1.0;
        x = 1.0 - x;
    }
    while x < 10.0 {
        r += 1.0 / (x * x);
        x += 1.0;
    }
    let z = 1.0 / (x * x);
    let t = z
        * (1.0 / 6.0
            - z * (1.0 / 30.0
                - z * (1.0 / 42.0 - z * (1.0 / 30.0 - z * (5.0 / 66.0 - z * (691.0 / 2730.0 - z * 7.0 / 6.0))))));
    sign * (r + (1.0 + 0.5 / x + t) / x)
}

/// `(I0(ax), I1(ax))` of `ax = |x|` (finite, not NaN), scaled by `e^-ax`
/// when `scaled`: the power series up to 20 (positive terms, to half an
/// ulp), the asymptotic expansion beyond (its terms fall below half an ulp
/// before they turn to grow); unscaled there, times `e^(ax/2)` twice.
fn bessel_i01(ax: f64, scaled: bool) -> (f64, f64) {
    let half_ulp = f64::EPSILON / 2.0;
    let (mut s0, mut s1, mut t0, mut t1) = (1.0, 1.0, 1.0, 1.0);
    if ax <= 20.0 {
        let q = 0.25 * ax * ax;
        for k in 1..100 {
            let k = f64::from(k);
            t0 *= q / (k * k);
            t1 *= q / (k * (k + 1.0));
            s0 += t0;
            s1 += t1;
            if t0 <= half_ulp * s0 {
                break;
            }
        }
        let (i0, i1) = (s0, 0.5 * ax * s1);
        let e = if scaled { (-ax).exp() } else { 1.0 };
        return (i0 * e, i1 * e);
    }
    let z = 1.0 / (8.0 * ax);
    for k in 1..=40 {
        let m = f64::from(2 * k - 1).powi(2);
        t0 *= m * z / f64::from(k);
        t1 *= (m - 4.0) * z / f64::from(k);
        s0 += t0;
        s1 += t1;
        if t0 <= half_ulp * s0 {
            break;
        }
    }
    let c = 1.0 / (2.0 * std::f64::consts::PI * ax).sqrt();
    let (i0, i1) = (c * s0, c * s1);
    if scaled {
        (i0, i1)
    } else {
        let h = (0.5 * ax).exp();
        (i0 * h * h, i1 * h * h)
    }
}

/// The modified Bessel functions of the first kind in f64: `which` 0 `i0`,
/// 1 `i0e`, 2 `i1`, 3 `i1e`. NaN passes; at ±inf `i0` and `i1` are NaN
/// (PyTorch's: its expansion divides infinities), `i0e = 0`, `i1e = ±0`;
/// `i1` and `i1e` are odd.
pub fn bessel_i(which: u8, x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let (scaled, order1) = (which % 2 == 1, which >= 2);
    let v = if x.is_infinite() {
        if scaled {
            (0.0, 0.0)
        } else {
            (f64::NAN, f64::NAN)
        }
    } else {
        bessel_i01(x.abs(), scaled)
    };
    if order1 {
        v.1.copysign(x)
    } else {
        v.0
    }
}

/// `i1'(x) = i0(x) - i1(x) / x`: 0.5 unless `|x| > f64::EPSILON` (NaN
/// included, as PyTorch's `i1_backward`), past the series
/// `(i0e - i1e / |x|) e^|x|`; NaN at ±inf.
fn bessel_i1_derivative(x: f64) -> f64 {
    let ax = x.abs();
    // NaN included
    if ax.partial_cmp(&f64::EPSILON) != Some(core::cmp::Ordering::Greater) {
        return 0.5;
    }
    let (i0, i1) = bessel_i01(ax, ax > 20.0);
    if ax <= 20.0 {
        return i0 - i1 / ax;
    }
    let h = (0.5 * ax).exp();
    (i0 - i1 / ax) * h * h
}

/// `polygamma(m, x)` in f64: digamma and trigamma for `m` 0 and 1; for
/// `m >= 2` `(-1)^(m+1) m! zeta(m + 1, x)` (PyTorch's), the Hurwitz zeta
/// as the sum of `(x + k)^-(m+1)` up to `x + k >= 25`, then the
/// Euler-Maclaurin tail through `B_14`; `(-1)^(m+1)` inf at the poles
/// (0, the negative integers, -inf), 0 of that sign at +inf.
pub fn polygamma(m: u32, x: f64) -> f64 {
    match m {
        0 => return digamma(x),
        1 => return trigamma(x),
        _ => {}
    }
    let sign = if m % 2 == 1 { 1.0 } else { -1.0 };
    let fact: f64 = (2..=m).map(f64::from).product();
    if x.is_nan() {
        return x;
    }
    if x <= 0.0 && x == x.floor() {
        return sign * f64::INFINITY;
    }
    if x.is_infinite() {
        // +inf: NaN, as PyTorch's Hurwitz zeta (0 / 0 in its series)
        return f64::NAN;
    }
    let s = m + 1;
    let pow_neg = |x: f64| (1.0 / x).powi(s as i32);
    let (mut x, mut sum) = (x, 0.0);
    while x < 25.0 {
        sum += pow_neg(x);
        x += 1.0;
    }
    let r = 1.0 / x;
    let c = [
        1.0 / 12.0,
        -1.0 / 720.0,
        1.0 / 30240.0,
        -1.0 / 1_209_600.0,
        1.0 / 47_900_160.0,
        -691.0 / 1_307_674_368_000.0,
        1.0 / 74_724_249_600.0,
    ];
    let sf = f64::from(s);
    let mut f = sf * r;
    let mut series = 0.0;
    for (j, cj) in c.iter().enumerate() {
        series += cj * f;
        let j = j as f64 + 1.0;
        f *= (sf + 2.0 * j - 1.0) * (sf + 2.0 * j) * r * r;
    }
    let tail = pow_neg(x) * (x / (sf - 1.0) + 0.5 + series);
    sign * fact * (sum + tail)
}

/// `round(x, decimals)` in f64: `p = 10^|decimals|`, `rint(x p) / p` or
/// `rint(x / p) p`, the rint of the exact product (quotient), ties to even.
pub fn round_decimals(x: f64, decimals: i32) -> f64 {
    let rint_exact = |v: f64, e: f64| {
        let n = v.round_ties_even();
        if (v - n).abs() == 0.5 && e != 0.0 {
            if e > 0.0 {
                v.ceil()
            } else {
                v.floor()
            }
        } else {
            n
        }
    };
    let p = 10f64.powi(decimals.abs());
    if decimals < 0 {
        let q = x / p;
        rint_exact(q, (-q).mul_add(p, x)) * p
    } else {
        let r = x * p;
        rint_exact(r, x.mul_add(p, -r)) / p
    }
}

/// `erfinv(x)` in f64: ±inf at ±1, NaN outside [-1, 1]; a starting
/// approximation refined by Newton steps on `erf` (on `erfc` of `1 - |x|`
/// from |x| = 1/2 on, where `erf` has no digits left to resolve it).
pub fn erfinv(x: f64) -> f64 {
    if x.is_nan() || x.abs() > 1.0 {
        return f64::NAN;
    }
    if x.abs() == 1.0 {
        return f64::INFINITY.copysign(x);
    }
    if x == 0.0 {
        return x;
    }
    let a = x.abs();
    // starting point: erf(y) ~ sign(y) sqrt(1 - exp(-y^2 (4/pi + c y^2) / (1 + c y^2)))
    let c = 0.147;
    let l = (1.0 - a * a).ln();
    let t = 2.0 / (std::f64::consts::PI * c) + l / 2.0;
    let mut y = ((t * t - l / c).sqrt() - t).sqrt();
    let k = std::f64::consts::FRAC_2_SQRT_PI;
    // Newton converges quadratically from the starting point; it stops at
    // a step within a few ulps of y, or at the noise floor of erf/erfc
    // (~1e-15 relative), where a step no longer shrinks
    let mut last = f64::INFINITY;
    for _ in 0..60 {
        let step = if a < 0.5 {
            (erf(y) - a) / (k * (-y * y).exp())
        } else {
            // the continued fraction from 0.8 on (within 300 steps there):
            // 1 - erf(y) would leave erfc ~1e-16 / erfc(y) relative
            let c = if y >= 0.8 { erfc_cf(y) } else { erfc(y) };
            -(c - (1.0 - a)) / (k * (-y * y).exp())
        };
        if step.abs() >= last {
            break;
        }
        y -= step;
        if step.abs() <= 4.0 * f64::EPSILON * y.abs() {
            break;
        }
        last = step.abs();
    }
    y.copysign(x)
}

/// `sinc(x) = sin(pi x) / (pi x)`, 1 at 0.
fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        return 1.0;
    }
    let px = std::f64::consts::PI * x;
    sin_pi(x) / px
}

/// `sin(pi x)` with `x` reduced exactly first (0 at every integer).
fn sin_pi(x: f64) -> f64 {
    let r = x % 2.0; // exact
    (std::f64::consts::PI * r).sin()
}

/// `cos(pi x)` with `x` reduced exactly first.
fn cos_pi(x: f64) -> f64 {
    let r = x % 2.0;
    (std::f64::consts::PI * r).cos()
}

/// `d sinc / dx`: the series near 0 (where the difference cancels), else
/// `(cos(pi x) - sinc(x)) / x`; 0 at 0.
fn sinc_derivative(x: f64) -> f64 {
    let pi = std::f64::consts::PI;
    if x == 0.0 {
        return 0.0;
    }
    if x.abs() < 0.16 {
        let y = (pi * x) * (pi * x);
        // sum_k>=1 (-1)^k 2k y^(k-1) / (2k+1)!
        let mut q = 0.0;
        let mut fact = 1.0; // (2k+1)!
        let mut yk = 1.0;
        for k in 1..=12 {
            fact *= (2 * k) as f64 * (2 * k + 1) as f64;
            let term = 2.0 * k as f64 * yk / fact;
            q += if k % 2 == 1 { -term } else { term };
            yk *= y;
        }
        return pi * pi * x * q;
    }
    (cos_pi(x) - sinc(x)) / x
}

/// PyTorch's f32 constant 1/6 of hardswish and hardsigmoid, in every dtype.
const ONE_SIXTH: f64 = (1.0f32 / 6.0f32) as f64;
const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;
const SELU_SCALE: f64 = 1.050_700_987_355_480_5;

/// `std::max` / `std::min` as PyTorch's device code evaluates them (the
/// first argument when the comparison is false).
fn pt_max(a: f64, b: f64) -> f64 {
    if a < b {
        b
    } else {
        a
    }
}
fn pt_min(a: f64, b: f64) -> f64 {
    if b < a {
        b
    } else {
        a
    }
}

/// PyTorch's sign: `(0 < x) - (x < 0)`, 0 for ±0 and NaN.
fn sign_of(x: f64) -> f64 {
    f64::from(u8::from(0.0 < x)) - f64::from(u8::from(x < 0.0))
}

/// PyTorch's scalar clamp: NaN passes, then `lo`, then `hi`.
fn clamp(x: f64, lo: f64, hi: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let r = if x < lo { lo } else { x };
    if hi < r {
        hi
    } else {
        r
    }
}

/// `elu(x)` with PyTorch's alpha, scale and input scale.
fn elu(x: f64, alpha: f64, scale: f64, in_scale: f64) -> f64 {
    if x > 0.0 {
        x * scale
    } else {
        (x * in_scale).exp_m1() * (alpha * scale)
    }
}

/// `elu_backward` (is_result false) over `dy = 1`: NaN takes `scale`.
fn elu_derivative(x: f64, alpha: f64, scale: f64, in_scale: f64) -> f64 {
    if x <= 0.0 {
        in_scale * (alpha * scale) * (x * in_scale).exp()
    } else {
        scale
    }
}

/// `f(x)` for one element.
pub fn unary_scalar(op: UnaryOp, x: f64) -> f64 {
    use UnaryOp as U;
    match op {
        U::Relu => {
            if x < 0.0 {
                0.0
            } else {
                x
            }
        }
        U::GeluErf => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        U::GeluTanh => 0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + GELU_C * x * x * x)).tanh()),
        U::Silu => x * sigmoid(x),
        U::Sigmoid => sigmoid(x),
        U::Tanh => x.tanh(),
        U::Exp => x.exp(),
        U::Neg => -x,
        U::Abs => x.abs(),
        U::Sign | U::Sgn => sign_of(x),
        U::Reciprocal => 1.0 / x,
        U::Sqrt => x.sqrt(),
        U::Rsqrt => 1.0 / x.sqrt(),
        U::Square => x * x,
        U::Exp2 => x.exp2(),
        U::Expm1 => x.exp_m1(),
        U::Log => x.ln(),
        U::Log2 => x.log2(),
        U::Log10 => x.log10(),
        U::Log1p => x.ln_1p(),
        U::Sin => x.sin(),
        U::Cos => x.cos(),
        U::Tan => x.tan(),
        U::Asin => x.asin(),
        U::Acos => x.acos(),
        U::Atan => x.atan(),
        U::Sinh => x.sinh(),
        U::Cosh => x.cosh(),
        U::Asinh => x.asinh(),
        U::Acosh => x.acosh(),
        U::Atanh => x.atanh(),
        U::Erf => erf(x),
        U::Erfc => erfc(x),
        U::Erfinv => erfinv(x),
        U::Lgamma => lgamma(x),
        U::Digamma => digamma(x),
        U::Sinc => sinc(x),
        U::LogSigmoid => pt_min(0.0, x) - (-x.abs()).exp().ln_1p(),
        U::Softsign => x / (1.0 + x.abs()),
        U::Mish => x * x.exp().ln_1p().tanh(),
        U::Hardswish => x * pt_min(pt_max(x + 3.0, 0.0), 6.0) * ONE_SIXTH,
        U::Hardsigmoid => pt_min(pt_max(x + 3.0, 0.0), 6.0) * ONE_SIXTH,
        U::Relu6 => clamp(x, 0.0, 6.0),
        U::Selu => elu(x, SELU_ALPHA, SELU_SCALE, 1.0),
        U::Tanhshrink => x - x.tanh(),
        U::Floor => x.floor(),
        U::Ceil => x.ceil(),
        U::Round => x.round_ties_even(),
        U::Trunc => x.trunc(),
        U::Frac => x - x.trunc(),
        U::LeakyRelu { negative_slope } => {
            if x > 0.0 {
                x
            } else {
                x * negative_slope
            }
        }
        U::Elu { alpha } => elu(x, alpha, 1.0, 1.0),
        U::Celu { alpha } => elu(x, alpha, 1.0, 1.0 / alpha),
        U::Softplus { beta, threshold } => {
            if x * beta > threshold {
                x
            } else {
                (x * beta).exp().ln_1p() / beta
            }
        }
        U::Hardtanh { min_val, max_val } => clamp(x, min_val, max_val),
        U::Clamp { min, max } => clamp(
            x,
            min.unwrap_or(f64::NEG_INFINITY),
            max.unwrap_or(f64::INFINITY),
        ),
        U::Logit { eps } => {
            let z = match eps {
                Some(e) if e >= 0.0 => clamp(x, e, 1.0 - e),
                _ => x,
            };
            (z / (1.0 - z)).ln()
        }
        U::Softshrink { lambd } => {
            if x.is_nan() {
                x
            } else if x > lambd {
                x - lambd
            } else if x < -lambd {
                x + lambd
            } else {
                0.0
            }
        }
        U::Hardshrink { lambd } => {
            if x >= -lambd && x <= lambd {
                0.0
            } else {
                x
            }
        }
        U::Threshold { threshold, value } => {
            if x <= threshold {
                value
            } else {
                x
            }
        }
        U::NanToNum {
            nan,
            posinf,
            neginf,
        } => {
            if x.is_nan() {
                nan
            } else if x == f64::INFINITY {
                posinf.unwrap_or(f64::MAX)
            } else if x == f64::NEG_INFINITY {
                neginf.unwrap_or(f64::MIN)
            } else {
                x
            }
        }
        U::I0 => bessel_i(0, x),
        U::I0e => bessel_i(1, x),
        U::I1 => bessel_i(2, x),
        U::I1e => bessel_i(3, x),
        U::Polygamma { n } => polygamma(n, x),
        U::RoundDecimals { decimals } => round_decimals(x, decimals),
        U::PowScalar { exponent } => pow_scalar(x, exponent),
        U::RpowScalar { base } => rpow_scalar(base, x),
    }
}

/// `pow(x, exponent)` as PyTorch's CUDA `pow(Tensor, Scalar)` in f64: 1
/// for exponent 0, `x` for 1, `sqrt` for 0.5, `1/sqrt` for -0.5, `1/x`
/// for -1, `x x` for 2, `x x x` for 3, `1/(x x)` for -2, else `powf` (so
/// `sqrt(-0) = -0` and `sqrt(-inf) = NaN` where `powf` gives +0 and +inf).
pub fn pow_scalar(x: f64, exponent: f64) -> f64 {
    let (form, e) = crate::elementwise::unary::pow_form(exponent, |v| v);
    match form {
        0 => 1.0,
        1 => x,
        2 => x.sqrt(),
        3 => 1.0 / x.sqrt(),
        4 => 1.0 / x,
        5 => x * x,
        6 => x * x * x,
        7 => 1.0 / (x * x),
        _ => x.powf(e),
    }
}

/// `pow(base, x)` as PyTorch's `pow(Scalar, Tensor)`: 1 for a base of 1
/// (whatever `x`), else `powf`.
pub fn rpow_scalar(base: f64, x: f64) -> f64 {
    if base == 1.0 {
        1.0
    } else {
        base.powf(x)
    }
}

/// `dx` for one element: `dy * f'(x)`, and 0 for the ops whose gradient
/// PyTorch defines as zero whatever `dy` holds. The masked gradients
/// (`hardtanh`, `clamp`, the shrinks, ...) are PyTorch's selects between
/// `dy` and 0, which equal `dy * 1` and `dy * 0` for a finite `dy`.
pub fn unary_grad(op: UnaryOp, x: f64, dy: f64) -> f64 {
    use UnaryOp as U;
    match op {
        U::Sign
        | U::Sgn
        | U::Floor
        | U::Ceil
        | U::Round
        | U::Trunc
        | U::RoundDecimals { .. } => 0.0,
        // pow_backward: zeros for exponent 0, whatever dy holds
        U::PowScalar { exponent: 0.0 } => 0.0,
        _ => dy * unary_derivative(op, x),
    }
}

// The comparisons are PyTorch's as written: a NaN `x` fails each, which
// decides the side of a mask it takes (`!(x <= t)` is not `x > t`).
#[allow(clippy::neg_cmp_op_on_partial_ord, clippy::manual_range_contains)]
/// `f'(x)` for one element, where it is a function of `x` alone (the
/// relu subgradient at 0 is 0, as PyTorch's); see [`unary_grad`] for what
/// the backward writes.
pub fn unary_derivative(op: UnaryOp, x: f64) -> f64 {
    use UnaryOp as U;
    let pi = std::f64::consts::PI;
    match op {
        U::Relu => {
            if x <= 0.0 {
                0.0
            } else {
                1.0
            }
        }
        U::GeluErf => {
            let cdf = 0.5 * (1.0 + erf(x / std::f64::consts::SQRT_2));
            let pdf = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
            cdf + x * pdf
        }
        U::GeluTanh => {
            let t = (SQRT_2_OVER_PI * (x + GELU_C * x * x * x)).tanh();
            0.5 * (1.0 + t)
                + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_C * x * x)
        }
        U::Silu => {
            let s = sigmoid(x);
            s * (1.0 + x * (1.0 - s))
        }
        U::Sigmoid => {
            let s = sigmoid(x);
            s * (1.0 - s)
        }
        U::Tanh => 1.0 - x.tanh() * x.tanh(),
        U::Exp => x.exp(),
        U::Neg => -1.0,
        U::Abs => sign_of(x),
        U::Sign
        | U::Sgn
        | U::Floor
        | U::Ceil
        | U::Round
        | U::Trunc
        | U::RoundDecimals { .. } => 0.0,
        U::Reciprocal => -(1.0 / x) * (1.0 / x),
        U::Sqrt => 1.0 / (2.0 * x.sqrt()),
        U::Rsqrt => -0.5 / (x.sqrt() * x.sqrt() * x.sqrt()),
        U::Square => 2.0 * x,
        U::Exp2 => x.exp2() * std::f64::consts::LN_2,
        U::Expm1 => x.exp(),
        U::Log => 1.0 / x,
        U::Log2 => 1.0 / (x * std::f64::consts::LN_2),
        U::Log10 => 1.0 / (x * std::f64::consts::LN_10),
        U::Log1p => 1.0 / (x + 1.0),
        U::Sin => x.cos(),
        U::Cos => -x.sin(),
        U::Tan => 1.0 + x.tan() * x.tan(),
        U::Asin => 1.0 / (-x).mul_add(x, 1.0).sqrt(),
        U::Acos => -1.0 / (-x).mul_add(x, 1.0).sqrt(),
        U::Atan => 1.0 / x.mul_add(x, 1.0),
        U::Sinh => x.cosh(),
        U::Cosh => x.sinh(),
        U::Asinh => 1.0 / x.mul_add(x, 1.0).sqrt(),
        U::Acosh => 1.0 / x.mul_add(x, -1.0).sqrt(),
        U::Atanh => 1.0 / (-x).mul_add(x, 1.0),
        U::Erf => std::f64::consts::FRAC_2_SQRT_PI * (-(x * x)).exp(),
        U::Erfc => -std::f64::consts::FRAC_2_SQRT_PI * (-(x * x)).exp(),
        U::Erfinv => {
            let e = erfinv(x);
            0.5 * pi.sqrt() * (e * e).exp()
        }
        U::Lgamma => digamma(x),
        U::Digamma => trigamma(x),
        U::Sinc => sinc_derivative(x),
        U::LogSigmoid => {
            let z = (-x.abs()).exp();
            if x < 0.0 {
                1.0 - z / (1.0 + z)
            } else {
                z / (1.0 + z)
            }
        }
        U::Softsign => {
            if x.is_infinite() {
                return f64::NAN;
            }
            let b = 1.0 + x.abs();
            1.0 / (b * b)
        }
        U::Mish => {
            let s = 1.0 / (1.0 + (-x).exp());
            let t = x.exp().ln_1p().tanh();
            t + x * s * (1.0 - t * t)
        }
        U::Hardswish => {
            // PyTorch's kinks: 0 at -3, 1 at 3 (NaN takes the last branch)
            if x <= -3.0 {
                0.0
            } else if x < 3.0 {
                x / 3.0 + 0.5
            } else {
                1.0
            }
        }
        U::Hardsigmoid => {
            if x > -3.0 && x < 3.0 {
                ONE_SIXTH
            } else {
                0.0
            }
        }
        U::Relu6 => f64::from(u8::from(!(x <= 0.0 || x >= 6.0))),
        U::Selu => elu_derivative(x, SELU_ALPHA, SELU_SCALE, 1.0),
        U::Tanhshrink => x.tanh() * x.tanh(),
        U::Frac => 1.0,
        U::LeakyRelu { negative_slope } => {
            if x > 0.0 {
                1.0
            } else {
                negative_slope
            }
        }
        U::Elu { alpha } => elu_derivative(x, alpha, 1.0, 1.0),
        U::Celu { alpha } => elu_derivative(x, alpha, 1.0, 1.0 / alpha),
        U::Softplus { beta, threshold } => {
            if x * beta > threshold {
                1.0
            } else {
                let z = (x * beta).exp();
                z / (z + 1.0)
            }
        }
        U::Hardtanh { min_val, max_val } => f64::from(u8::from(!(x <= min_val || x >= max_val))),
        U::Clamp { min, max } => f64::from(u8::from(
            x >= min.unwrap_or(f64::NEG_INFINITY) && x <= max.unwrap_or(f64::INFINITY),
        )),
        U::Logit { eps } => match eps {
            Some(e) if e >= 0.0 && (x < e || x > 1.0 - e) => 0.0,
            Some(e) if e >= 0.0 => 1.0 / (x * (1.0 - x)),
            _ if x < 0.0 || x > 1.0 => f64::NAN,
            _ => 1.0 / (x * (1.0 - x)),
        },
        U::Softshrink { lambd } | U::Hardshrink { lambd } => {
            f64::from(u8::from(!(x >= -lambd && x <= lambd)))
        }
        U::Threshold { threshold, .. } => f64::from(u8::from(!(x <= threshold))),
        U::NanToNum { .. } => f64::from(u8::from(x.is_finite())),
        U::I0 => bessel_i(2, x),
        U::I0e => bessel_i(3, x) - sign_of(x) * bessel_i(1, x),
        U::I1 => bessel_i1_derivative(x),
        U::I1e if x.abs().partial_cmp(&f64::EPSILON) != Some(core::cmp::Ordering::Greater) => 0.5,
        U::I1e => bessel_i(1, x) - bessel_i(3, x) * (sign_of(x) + 1.0 / x),
        U::Polygamma { n } => polygamma(n + 1, x),
        // pow_backward: exponent x^(exponent - 1) by the forward's dispatch
        U::PowScalar { exponent: 0.0 } => 0.0,
        U::PowScalar { exponent } => exponent * pow_scalar(x, exponent - 1.0),
        // pow_backward_exponent: 0 for a zero base and x >= 0 (dy 0 in the
        // backward), else pow(base, x) ln(base)
        U::RpowScalar { base } if base == 0.0 && x >= 0.0 => 0.0,
        U::RpowScalar { base } => rpow_scalar(base, x) * base.ln(),
    }
}

/// The unary ops the tests check, by case name: [`UnaryOp::ALL`]'s (the
/// parametrised ones with other values than PyTorch's defaults, and both
/// kinds of an optional argument), as the GPU rows (`unary_<name>`), the
/// goldens (`scripts/goldens/elementwise.py`) and the finite-difference
/// test name them.
pub fn unary_cases() -> Vec<(&'static str, UnaryOp)> {
    use UnaryOp as U;
    let mut v: Vec<(&'static str, UnaryOp)> = UnaryOp::ALL
        .into_iter()
        .filter(|op| {
            !matches!(
                op,
                U::LeakyRelu { .. }
                    | U::Elu { .. }
                    | U::Celu { .. }
                    | U::Softplus { .. }
                    | U::Hardtanh { .. }
                    | U::Clamp { .. }
                    | U::Logit { .. }
                    | U::Softshrink { .. }
                    | U::Hardshrink { .. }
                    | U::Threshold { .. }
                    | U::NanToNum { .. }
                    | U::Polygamma { .. }
                    | U::RoundDecimals { .. }
                    | U::PowScalar { .. }
                    | U::RpowScalar { .. }
            )
        })
        .map(|op| (op.name(), op))
        .collect();
    v.extend([
        (
            "leaky_relu",
            U::LeakyRelu {
                negative_slope: 0.2,
            },
        ),
        ("elu", U::Elu { alpha: 1.5 }),
        ("celu", U::Celu { alpha: 0.75 }),
        (
            "softplus",
            U::Softplus {
                beta: 2.0,
                threshold: 4.0,
            },
        ),
        (
            "softplus_default",
            U::Softplus {
                beta: 1.0,
                threshold: 20.0,
            },
        ),
        (
            "hardtanh",
            U::Hardtanh {
                min_val: -1.5,
                max_val: 2.0,
            },
        ),
        (
            "clamp",
            U::Clamp {
                min: Some(-1.0),
                max: Some(2.0),
            },
        ),
        (
            "clamp_min",
            U::Clamp {
                min: Some(-0.5),
                max: None,
            },
        ),
        (
            "clamp_max",
            U::Clamp {
                min: None,
                max: Some(0.25),
            },
        ),
        ("logit", U::Logit { eps: None }),
        ("logit_eps", U::Logit { eps: Some(0.125) }),
        ("softshrink", U::Softshrink { lambd: 0.75 }),
        ("hardshrink", U::Hardshrink { lambd: 1.25 }),
        (
            "threshold",
            U::Threshold {
                threshold: -1.0,
                value: 2.0,
            },
        ),
        (
            "nan_to_num",
            U::NanToNum {
                nan: 0.0,
                posinf: None,
                neginf: None,
            },
        ),
        (
            "nan_to_num_values",
            U::NanToNum {
                nan: 1.5,
                posinf: Some(100.0),
                neginf: Some(-1e6),
            },
        ),
        ("polygamma_0", U::Polygamma { n: 0 }),
        ("polygamma_1", U::Polygamma { n: 1 }),
        ("polygamma_2", U::Polygamma { n: 2 }),
        ("polygamma_3", U::Polygamma { n: 3 }),
        ("polygamma_4", U::Polygamma { n: 4 }),
        ("round_decimals", U::RoundDecimals { decimals: 2 }),
        ("round_decimals_neg", U::RoundDecimals { decimals: -1 }),
        ("pow_scalar", U::PowScalar { exponent: 2.5 }),
        ("pow_scalar_sqrt", U::PowScalar { exponent: 0.5 }),
        ("pow_scalar_rsqrt", U::PowScalar { exponent: -0.5 }),
        ("pow_scalar_three_halves", U::PowScalar { exponent: 1.5 }),
        ("pow_scalar_cube", U::PowScalar { exponent: 3.0 }),
        ("pow_scalar_inv_square", U::PowScalar { exponent: -2.0 }),
        ("pow_scalar_zero", U::PowScalar { exponent: 0.0 }),
        ("rpow_scalar", U::RpowScalar { base: 2.0 }),
        ("rpow_scalar_zero", U::RpowScalar { base: 0.0 }),
        ("rpow_scalar_half", U::RpowScalar { base: 0.5 }),
    ]);
    v
}

/// Where `op`'s inputs are drawn from in the tests: its domain, or the
/// part of it where the values are of interest (the special values and
/// [`unary_edges`] add the rest, out-of-domain inputs included).
pub fn unary_domain(op: UnaryOp) -> (f64, f64) {
    use UnaryOp as U;
    match op {
        U::Exp => (-4.0, 4.0),
        U::Sqrt | U::Rsqrt | U::Log | U::Log2 | U::Log10 => (0.01, 10.0),
        U::Log1p => (-0.99, 5.0),
        U::Tan => (-1.5, 1.5),
        U::Asin | U::Acos | U::Atanh | U::Erfinv => (-0.999, 0.999),
        U::Acosh => (1.001, 10.0),
        U::Lgamma | U::Digamma => (0.05, 12.0),
        U::Polygamma { .. } => (0.25, 30.0),
        U::RoundDecimals { decimals } if decimals < 0 => (-50.0, 50.0),
        U::Logit { .. } => (0.01, 0.99),
        U::Reciprocal => (0.05, 5.0),
        // real results: integer exponents over both signs, the others
        // positive bases away from 0 (where 1/(x x) would pass f16's range)
        U::PowScalar { exponent } if exponent >= 0.0 && exponent.fract() == 0.0 => (-3.0, 3.0),
        U::PowScalar { .. } => (0.2, 4.0),
        // a zero base: x >= 0 (x < 0 gives inf, and -inf dy: the specials)
        U::RpowScalar { base: 0.0 } => (0.0, 3.0),
        // both sides of the f32 (9) switch from series to expansion
        U::I0 | U::I0e | U::I1 | U::I1e => (-12.0, 12.0),
        _ => (-5.0, 5.0),
    }
}

/// The inputs where `op` changes form: kinks, domain edges, poles, the
/// ends of its parameters' ranges, and ties of the roundings.
pub fn unary_edges(op: UnaryOp) -> Vec<f64> {
    use UnaryOp as U;
    match op {
        U::Log1p => vec![-1.0, -1.5, -0.999, -2.0],
        U::Asin | U::Acos | U::Atanh | U::Erfinv => vec![1.0, -1.0, 0.999, -0.999, 1.001, -1.001],
        U::Acosh => vec![1.0, 0.5, -1.0, 1.001, -2.0],
        // poles, zeros, the digamma root, negative non-integers where CUDA's
        // lgamma keeps its bound (above -2.264)
        U::Lgamma | U::Digamma => vec![
            0.0,
            -0.0,
            -1.0,
            -2.0,
            1.0,
            2.0,
            -0.5,
            -1.5,
            -0.25,
            1.461_632_144_968_362_2,
        ],
        // poles, negative non-integers, the switches to the tail (f32 10,
        // f64 25)
        U::Polygamma { .. } => vec![
            0.0, -0.0, -1.0, -2.0, 1.0, 2.0, -0.5, -1.5, -0.25, 10.0, 9.5, 25.0, 24.5,
        ],
        U::Sinc => vec![1.0, -1.0, 2.0, 0.5, 0.125, -0.01],
        U::PowScalar { .. } | U::RpowScalar { .. } => vec![0.0, -0.0, 1.0, -1.0, 0.5, -0.5],
        U::Hardswish | U::Hardsigmoid => vec![-3.0, 3.0, -2.999, 2.999],
        U::Relu6 => vec![0.0, 6.0, 5.999],
        // ties of each side's grid, and values a tenth of a step off them
        U::RoundDecimals { decimals } => {
            let p = 10f64.powi(-decimals);
            [0.5, 1.5, 2.5, -0.5, -2.5, 12.5, 0.45, 0.55]
                .into_iter()
                .map(|v| v * p)
                .collect()
        }
        U::Round | U::Floor | U::Ceil | U::Trunc | U::Frac => {
            vec![0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.499_999_97, 4096.5, 1e7 + 0.5]
        }
        U::Softplus { beta, threshold } => vec![threshold / beta, -threshold / beta],
        U::Hardtanh { min_val, max_val } => vec![min_val, max_val],
        U::Clamp { min, max } => [min, max].into_iter().flatten().collect(),
        U::Logit { eps } => {
            let mut v = vec![0.0, 1.0, -0.5, 1.5, 0.5];
            if let Some(e) = eps {
                v.extend([e, 1.0 - e, e / 2.0]);
            }
            v
        }
        U::Softshrink { lambd } | U::Hardshrink { lambd } => vec![lambd, -lambd],
        U::Threshold { threshold, .. } => vec![threshold],
        // the switches from series to expansion (f32 9, f64 20), f32's and
        // f64's overflow of i0 and i1
        U::I0 | U::I0e | U::I1 | U::I1e => {
            vec![9.0, -9.0, 9.5, 20.0, -20.0, 21.0, 40.0, 88.0, 90.0, -90.0, 700.0, 720.0]
        }
        _ => Vec::new(),
    }
}

/// `y = f(x)`.
pub fn unary(op: UnaryOp, x: &[f64]) -> Vec<f64> {
    x.iter().map(|&v| unary_scalar(op, v)).collect()
}

/// `dx = dy * f'(x)` ([`unary_grad`] of each element).
pub fn unary_backward(op: UnaryOp, x: &[f64], dy: &[f64]) -> Vec<f64> {
    x.iter()
        .zip(dy)
        .map(|(&v, &g)| unary_grad(op, v, g))
        .collect()
}

/// `f(a, b)` for one element pair.
pub fn binary_scalar(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Maximum | BinaryOp::Minimum if a.is_nan() => a,
        BinaryOp::Maximum | BinaryOp::Minimum if b.is_nan() => b,
        // -0 below +0, as the kernels and PyTorch's
        BinaryOp::Maximum if a == b => {
            if a.is_sign_negative() {
                b
            } else {
                a
            }
        }
        BinaryOp::Minimum if a == b => {
            if a.is_sign_negative() {
                a
            } else {
                b
            }
        }
        BinaryOp::Maximum => a.max(b),
        BinaryOp::Minimum => a.min(b),
        BinaryOp::Atan2 => a.atan2(b),
        BinaryOp::Hypot => a.hypot(b),
        BinaryOp::Copysign => a.copysign(b),
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Fmod => a % b,
        BinaryOp::Remainder => {
            let r = a % b;
            if r != 0.0 && ((b < 0.0) != (r < 0.0)) {
                r + b
            } else {
                r
            }
        }
        BinaryOp::Xlogy if b.is_nan() => b,
        BinaryOp::Xlogy if a == 0.0 => 0.0,
        BinaryOp::Xlogy => a * b.ln(),
        BinaryOp::Logaddexp | BinaryOp::Logaddexp2 if a.is_infinite() && a == b => a,
        BinaryOp::Logaddexp => a.max(b) + (-(a - b).abs()).exp().ln_1p(),
        BinaryOp::Logaddexp2 => a.max(b) + (-(a - b).abs()).exp2().ln_1p() / std::f64::consts::LN_2,
        BinaryOp::Fmax => a.max(b),
        BinaryOp::Fmin => a.min(b),
        BinaryOp::Xlog1py if b.is_nan() => b,
        BinaryOp::Xlog1py if a == 0.0 => 0.0,
        BinaryOp::Xlog1py => a * b.ln_1p(),
        BinaryOp::Heaviside if a == 0.0 => b,
        BinaryOp::Heaviside => f64::from(u8::from(a > 0.0)),
        BinaryOp::DivFloor => div_floor(a, b),
        BinaryOp::DivTrunc => div_trunc(a, b),
        BinaryOp::Nextafter => nextafter_in(ElementKind::F64, a, b),
        BinaryOp::AddAlpha { alpha } => a + alpha * b,
        // PyTorch's sub is add(a, b, -alpha)
        BinaryOp::SubAlpha { alpha } => a + (-alpha) * b,
        BinaryOp::Prelu => {
            if a > 0.0 {
                a
            } else {
                b * a
            }
        }
    }
}

/// The binary ops the tests check, by case name: [`BinaryOp::ALL`]'s, with
/// `add_alpha` and `sub_alpha` at an `alpha` other than the default 1, as
/// the GPU rows (`binary_<name>`) and the goldens
/// (`scripts/goldens/elementwise.py`) name them.
pub fn binary_cases() -> Vec<(&'static str, BinaryOp)> {
    BinaryOp::ALL
        .into_iter()
        .map(|op| match op {
            BinaryOp::AddAlpha { .. } => BinaryOp::AddAlpha { alpha: 2.5 },
            BinaryOp::SubAlpha { .. } => BinaryOp::SubAlpha { alpha: -0.75 },
            op => op,
        })
        .map(|op| (op.name(), op))
        .collect()
}

/// `nextafter(a, b)` on the grid of `kind` (f64, f32, f16, bf16; `a` and
/// `b` values of it): one step of its bit pattern toward `b`; `b` where
/// `a == b`, NaN where either is, the least subnormal of `b`'s sign from a
/// zero.
///
/// # Panics
/// For a `kind` other than the four floats.
pub fn nextafter_in(kind: ElementKind, a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return a + b;
    }
    if a == b {
        return b;
    }
    let (bits, width): (u64, u32) = match kind {
        ElementKind::F64 => (a.to_bits(), 64),
        ElementKind::F32 => (u64::from((a as f32).to_bits()), 32),
        ElementKind::F16 => (u64::from(half::f16::from_f64(a).to_bits()), 16),
        ElementKind::Bf16 => (u64::from(half::bf16::from_f64(a).to_bits()), 16),
        other => panic!("nextafter on {other}"),
    };
    let u = if a == 0.0 {
        1 | if b < 0.0 { 1 << (width - 1) } else { 0 }
    } else if (a < b) == (a > 0.0) {
        bits + 1
    } else {
        bits - 1
    };
    match kind {
        ElementKind::F64 => f64::from_bits(u),
        ElementKind::F32 => f64::from(f32::from_bits(u as u32)),
        ElementKind::F16 => half::f16::from_bits(u as u16).to_f64(),
        _ => half::bf16::from_bits(u as u16).to_f64(),
    }
}

/// `a / b` rounded toward -inf as PyTorch's `div(rounding_mode="floor")`:
/// from `fmod`, exact where `a / b` is near an integer.
fn div_floor(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return a / b;
    }
    let m = a % b;
    let mut div = (a - m) / b;
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        div -= 1.0;
    }
    if div == 0.0 {
        return 0f64.copysign(a / b);
    }
    let fl = div.floor();
    if div - fl > 0.5 {
        fl + 1.0
    } else {
        fl
    }
}

/// `a / b` rounded toward 0 exactly: `(a - fmod(a, b)) / b` to the
/// nearest integer; `trunc(a / b)` for a zero divisor or an infinity.
fn div_trunc(a: f64, b: f64) -> f64 {
    if b == 0.0 || a.is_infinite() || b.is_infinite() {
        return (a / b).trunc();
    }
    let q = ((a - a % b) / b).round_ties_even();
    if q == 0.0 {
        0f64.copysign(a / b)
    } else {
        q
    }
}

/// `(dy * df/da, dy * df/db)` for one element (PyTorch's tie rule for
/// maximum and minimum: each side gets `dy / 2`); `heaviside` and
/// `nextafter`, which have no backward, give zeros.
pub fn binary_grad_scalar(op: BinaryOp, a: f64, b: f64, dy: f64) -> (f64, f64) {
    match op {
        BinaryOp::Add => (dy, dy),
        BinaryOp::Sub => (dy, -dy),
        BinaryOp::Mul => (dy * b, dy * a),
        BinaryOp::Div => (dy / b, -dy * a / (b * b)),
        BinaryOp::Maximum | BinaryOp::Minimum => {
            if a == b {
                return (dy / 2.0, dy / 2.0);
            }
            let a_loses = if op == BinaryOp::Maximum {
                a < b
            } else {
                a > b
            };
            let b_loses = if op == BinaryOp::Maximum {
                a > b
            } else {
                a < b
            };
            (
                if a_loses { 0.0 } else { dy },
                if b_loses { 0.0 } else { dy },
            )
        }
        BinaryOp::Atan2 => {
            let r = 1.0 / (a * a + b * b);
            (dy * b * r, dy * -a * r)
        }
        BinaryOp::Hypot => (dy * (a / a.hypot(b)), dy * (b / a.hypot(b))),
        BinaryOp::Copysign => (
            dy * if a == 0.0 { 0.0 } else { a.copysign(b) / a },
            0.0,
        ),
        BinaryOp::Pow => (
            if b == 0.0 {
                0.0
            } else {
                dy * (b * a.powf(b - 1.0))
            },
            dy * if a == 0.0 && b >= 0.0 {
                0.0
            } else {
                a.powf(b) * a.ln()
            },
        ),
        BinaryOp::Fmod => (dy, -dy * (a / b).trunc()),
        BinaryOp::Remainder => (dy, -dy * div_floor(a, b)),
        // PyTorch: da = xlogy(dy, b), 0 where a == 0 and b <= 0
        BinaryOp::Xlogy => {
            let da = if b.is_nan() {
                b
            } else if (a == 0.0 && b <= 0.0) || dy == 0.0 {
                0.0
            } else {
                dy * b.ln()
            };
            (da, dy * a / b)
        }
        BinaryOp::Logaddexp => (dy / (1.0 + (b - a).exp()), dy / (1.0 + (a - b).exp())),
        BinaryOp::Logaddexp2 => (dy / (1.0 + (b - a).exp2()), dy / (1.0 + (a - b).exp2())),
        BinaryOp::Fmax | BinaryOp::Fmin => {
            let to_a = b.is_nan() || if op == BinaryOp::Fmax { a >= b } else { a <= b };
            if to_a {
                (dy, 0.0)
            } else {
                (0.0, dy)
            }
        }
        // PyTorch: da = xlog1py(dy, b), 0 where a == 0 and b <= -1
        BinaryOp::Xlog1py => {
            let da = if b.is_nan() {
                b
            } else if (a == 0.0 && b <= -1.0) || dy == 0.0 {
                0.0
            } else {
                dy * b.ln_1p()
            };
            (da, dy * a / (b + 1.0))
        }
        BinaryOp::Heaviside | BinaryOp::DivFloor | BinaryOp::DivTrunc | BinaryOp::Nextafter => {
            (0.0, 0.0)
        }
        BinaryOp::AddAlpha { alpha } => (dy, dy * alpha),
        BinaryOp::SubAlpha { alpha } => (dy, dy * -alpha),
        // prelu_backward_kernel: a NaN a takes the weight's side
        BinaryOp::Prelu => {
            if a > 0.0 {
                (dy, 0.0)
            } else {
                (b * dy, a * dy)
            }
        }
    }
}

/// Row-major index of every element of `target` mapped into a broadcast
/// input of `shape` (same rank, each axis equal or 1).
fn broadcast_index(shape: &[usize], target: &[usize]) -> Vec<usize> {
    let n: usize = target.iter().product();
    let mut out = Vec::with_capacity(n);
    for lin in 0..n {
        let mut rem = lin;
        let mut idx = 0;
        let mut mul = 1;
        for d in (0..target.len()).rev() {
            let c = rem % target[d];
            rem /= target[d];
            let c_in = if shape[d] == 1 { 0 } else { c };
            idx += c_in * mul;
            mul *= shape[d];
        }
        out.push(idx);
    }
    out
}

/// Broadcast `x` of `shape` to `target` (row-major, same rank).
pub fn broadcast(x: &[f64], shape: &[usize], target: &[usize]) -> Vec<f64> {
    broadcast_index(shape, target)
        .into_iter()
        .map(|i| x[i])
        .collect()
}

/// Sum `x` of `target` shape over the axes where `shape` has extent 1.
pub fn reduce_to(x: &[f64], shape: &[usize], target: &[usize]) -> Vec<f64> {
    let mut out = vec![0.0; shape.iter().product()];
    for (i, j) in broadcast_index(shape, target).into_iter().enumerate() {
        out[j] += x[i];
    }
    out
}

/// The broadcast of two same-rank shapes (each axis equal or 1).
fn broadcast_shape(a_shape: &[usize], b_shape: &[usize]) -> Vec<usize> {
    a_shape
        .iter()
        .zip(b_shape)
        .map(|(&x, &y)| if x == 1 { y } else { x })
        .collect()
}

/// `out = f(a, b)` with broadcasting, in the broadcast shape.
pub fn binary(
    op: BinaryOp,
    a: &[f64],
    a_shape: &[usize],
    b: &[f64],
    b_shape: &[usize],
) -> Vec<f64> {
    let out_shape = broadcast_shape(a_shape, b_shape);
    let ab = broadcast(a, a_shape, &out_shape);
    let bb = broadcast(b, b_shape, &out_shape);
    ab.iter()
        .zip(&bb)
        .map(|(&x, &y)| binary_scalar(op, x, y))
        .collect()
}

/// `(da, db)` of `out = f(a, b)` with broadcasting, each reduced to its
/// input's shape. Also returns, per gradient element, the sum of the
/// absolute values of its terms (the scale of its rounding error).
pub fn binary_backward(
    op: BinaryOp,
    a: &[f64],
    a_shape: &[usize],
    b: &[f64],
    b_shape: &[usize],
    dy: &[f64],
) -> BinaryGrads {
    let out_shape = broadcast_shape(a_shape, b_shape);
    let ab = broadcast(a, a_shape, &out_shape);
    let bb = broadcast(b, b_shape, &out_shape);
    let (ga, gb): (Vec<f64>, Vec<f64>) = (0..dy.len())
        .map(|i| binary_grad_scalar(op, ab[i], bb[i], dy[i]))
        .unzip();
    let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
    BinaryGrads {
        da: reduce_to(&ga, a_shape, &out_shape),
        db: reduce_to(&gb, b_shape, &out_shape),
        da_abs: reduce_to(&abs(&ga), a_shape, &out_shape),
        db_abs: reduce_to(&abs(&gb), b_shape, &out_shape),
    }
}

/// Gradients of a binary op, with the absolute term sums that bound their
/// rounding error.
#[derive(Clone, Debug)]
pub struct BinaryGrads {
    /// Gradient of `a`.
    pub da: Vec<f64>,
    /// Gradient of `b`.
    pub db: Vec<f64>,
    /// Sum of `|term|` per element of `da`.
    pub da_abs: Vec<f64>,
    /// Sum of `|term|` per element of `db`.
    pub db_abs: Vec<f64>,
}

// ---------------------------------------------------------------------------
// Casts
// ---------------------------------------------------------------------------

/// A source value of a cast: a float (exactly an f32, or an f64 for f64
/// sources, after the scale) or an integer.
#[derive(Copy, Clone, Debug)]
enum Src {
    F32(f32),
    F64(f64),
    Int(i64),
}

/// `a` rounded to nearest even onto the grid of a binary float format with
/// `p` significand bits (the implicit one included) and least normal
/// exponent `emin`, its exponent range unbounded above: exact, since `a` is
/// an f32 and every such grid point is an f64.
fn round_to_grid(a: f32, p: i32, emin: i32) -> f64 {
    let x = f64::from(a);
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    // f32 values are normal f64 values: the biased exponent is exact.
    let e = (((x.to_bits() >> 52) & 0x7FF) as i32 - 1023).max(emin);
    let q = 2f64.powi(e - (p - 1));
    (x / q).round_ties_even() * q
}

/// `a` (an f32) converted to fp8 `to` under `mode`, as a value: nearest
/// even, then the mode's overflow rule (see [`Fp8Mode`]).
///
/// [`Fp8Mode`]: crate::elementwise::Fp8Mode
pub fn fp8_value(a: f32, to: ElementKind, mode: Fp8Mode) -> f64 {
    let (p, emin, max) = match to {
        ElementKind::Fp8E4M3 => (4, -6, 448.0f32),
        _ => (3, -14, 57344.0f32),
    };
    if a.is_nan() {
        return f64::NAN;
    }
    if mode == Fp8Mode::Saturate {
        return round_to_grid(a.clamp(-max, max), p, emin);
    }
    let r = round_to_grid(a, p, emin);
    if r.abs() <= f64::from(max) {
        r
    } else if to == ElementKind::Fp8E4M3 {
        f64::NAN
    } else {
        f64::INFINITY.copysign(r)
    }
}

/// The f32 a source enters a narrow float conversion as.
fn src_f32(s: Src) -> f32 {
    match s {
        Src::F32(v) => v,
        Src::F64(v) => v as f32,
        Src::Int(i) => i as f32,
    }
}

/// One element cast from `from` to `to` (the rules of
/// [`CastPlan`](crate::elementwise::CastPlan)). `x` is the element's value
/// (exact for every kind, i64 within 2^53 and its limits that are powers
/// of two); the result is the value `to` holds, NaN for any NaN.
pub fn cast_scalar(
    from: ElementKind,
    to: ElementKind,
    x: f64,
    fp8: Fp8Mode,
    scale: Option<f32>,
) -> f64 {
    use ElementKind as K;
    let scale = scale.unwrap_or(1.0);
    let src = match from {
        K::F64 => Src::F64(x * f64::from(scale)),
        k if k.is_float() => Src::F32(x as f32 * scale),
        _ => {
            // integer and bool sources: scaled only into fp8
            let i = if from == K::Bool {
                i64::from(x != 0.0)
            } else {
                x as i64
            };
            if matches!(to, K::Fp8E4M3 | K::Fp8E5M2) {
                Src::F32(i as f32 * scale)
            } else {
                Src::Int(i)
            }
        }
    };
    let float = match src {
        Src::F32(v) => Some(f64::from(v)),
        Src::F64(v) => Some(v),
        Src::Int(_) => None,
    };
    match to {
        K::F64 => match src {
            Src::Int(i) => i as f64,
            _ => float.unwrap_or(f64::NAN),
        },
        K::F32 => match src {
            Src::F32(v) => f64::from(v),
            Src::F64(v) => f64::from(v as f32),
            Src::Int(i) => f64::from(i as f32),
        },
        K::F16 => half::f16::from_f32(src_f32(src)).to_f64(),
        K::Bf16 => half::bf16::from_f32(src_f32(src)).to_f64(),
        K::Fp8E4M3 | K::Fp8E5M2 => fp8_value(src_f32(src), to, fp8),
        K::Bool => match (src, float) {
            (Src::Int(i), _) => f64::from(u8::from(i != 0)),
            (_, Some(v)) => f64::from(u8::from(v != 0.0)),
            _ => unreachable!("a float source has a value"),
        },
        K::U8 => f64::from(rzi_s64(src) as u8),
        K::I8 => f64::from(rzi_s32(src) as i8),
        K::I16 => f64::from(rzi_s32(src) as i16),
        K::I32 => f64::from(rzi_s32(src) as i32),
        K::I64 => rzi_s64(src) as f64,
        K::U32 => f64::from(match src {
            Src::F32(v) => v as u32,
            Src::F64(v) => v as u32,
            Src::Int(i) => i as u32,
        }),
    }
}

/// The GPU's `cvt.rzi.s32` of a float source (toward zero, saturating to
/// int32; NaN is 0 from f32 and `i32::MIN` from f64), an integer source
/// as is: what PyTorch's `static_cast` to i8, i16 and i32 starts from (the
/// caller's `as` then wraps it).
fn rzi_s32(s: Src) -> i64 {
    match s {
        Src::F32(v) if v.is_nan() => 0,
        Src::F64(v) if v.is_nan() => i64::from(i32::MIN),
        Src::F32(v) => i64::from(v as i32),
        Src::F64(v) => i64::from(v as i32),
        Src::Int(i) => i,
    }
}

/// The GPU's `cvt.rzi.s64` of a float source (toward zero, saturating;
/// NaN is `i64::MIN`), an integer source as is.
fn rzi_s64(s: Src) -> i64 {
    match s {
        Src::F32(v) if v.is_nan() => i64::MIN,
        Src::F64(v) if v.is_nan() => i64::MIN,
        Src::F32(v) => v as i64,
        Src::F64(v) => v as i64,
        Src::Int(i) => i,
    }
}

/// [`cast_scalar`] over a slice.
pub fn cast(
    from: ElementKind,
    to: ElementKind,
    x: &[f64],
    fp8: Fp8Mode,
    scale: Option<f32>,
) -> Vec<f64> {
    x.iter()
        .map(|&v| cast_scalar(from, to, v, fp8, scale))
        .collect()
}

/// The backward of a float cast `from -> to`: `dx = from(dy * scale)`,
/// without saturation.
pub fn cast_backward(from: ElementKind, to: ElementKind, dy: &[f64], scale: Option<f32>) -> Vec<f64> {
    cast(to, from, dy, Fp8Mode::NoSaturate, scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // values from tables (15+ digits)
        assert!((erf(0.5) - 0.520_499_877_813_046_5).abs() < 1e-15);
        assert!((erf(1.0) - 0.842_700_792_949_714_9).abs() < 1e-15);
        assert!((erf(3.0) - 0.999_977_909_503_001_4).abs() < 1e-15);
        assert!((erf(-2.0) + 0.995_322_265_018_952_7).abs() < 1e-15);
        assert_eq!(erf(0.0), 0.0);
    }

/// Every op of [`UnaryOp::ALL`] and of [`unary_cases`].
    fn ops_with_parameters() -> Vec<UnaryOp> {
        let mut v = UnaryOp::ALL.to_vec();
        v.extend(unary_cases().into_iter().map(|(_, op)| op));
        v
    }

    /// Central differences in f64 confirm every derivative, over each op's
    /// test domain away from its edges (and the integers, for the
    /// roundings and `sign`).
    #[test]
    fn unary_derivatives_match_finite_differences() {
        let h = 1e-6;
        for op in ops_with_parameters() {
            let (lo, hi) = unary_domain(op);
            let mut edges = unary_edges(op);
            edges.extend([0.0, 6.0, -3.0, 3.0]);
            let mut checked = 0;
            for i in 0..41 {
                let x = lo + (hi - lo) * (i as f64 + 0.5) / 41.0 + 0.0013;
                let near_integer = (x - x.round()).abs() < 1e-3;
                if x >= hi || edges.iter().any(|e| (x - e).abs() < 1e-3) || near_integer {
                    continue;
                }
                let f = unary_scalar(op, x);
                let fd = (unary_scalar(op, x + h) - unary_scalar(op, x - h)) / (2.0 * h);
                let an = unary_derivative(op, x);
                assert!(
                    (fd - an).abs() <= 1e-7 * (1.0 + an.abs()) + 1e-9 * f.abs(),
                    "{op:?} at {x}: fd {fd} vs {an}"
                );
                assert_eq!(unary_grad(op, x, 0.5), 0.5 * an, "{op:?} at {x}");
                checked += 1;
            }
            assert!(checked > 20, "{op:?}: {checked} points");
        }
    }

    fn close(what: &str, got: f64, want: f64, tol: f64) {
        assert!(
            (got - want).abs() <= tol * want.abs().max(1e-300),
            "{what}: {got:e}, expected {want:e}"
        );
    }

    /// i0, i1 (and their scaled forms) at known values, and the series
    /// and the asymptotic expansion agreeing on both sides of their switch.
    #[test]
    #[allow(clippy::excessive_precision)]
    fn bessel_functions_match_known_values() {
        let table = [
            (1.0, 1.2660658777520082, 0.5651591039924851),
            (2.0, 2.2795853023360673, 1.5906368546373291),
            (10.0, 2815.716628466254, 2670.988303701255),
        ];
        for (x, i0, i1) in table {
            close(&format!("i0({x})"), bessel_i(0, x), i0, 4e-15);
            close(&format!("i1({x})"), bessel_i(2, x), i1, 4e-15);
            close(&format!("i1({})", -x), bessel_i(2, -x), -i1, 4e-15);
            close(&format!("i0e({x})"), bessel_i(1, x), i0 * (-x).exp(), 4e-15);
            close(&format!("i1e({x})"), bessel_i(3, x), i1 * (-x).exp(), 4e-15);
        }
        for ax in [15.0, 18.0, 20.0, 25.0, 40.0] {
            let (e0, e1) = bessel_i01(ax, true);
            // the series at ax (summed to half an ulp) against the expansion
            let q = 0.25 * ax * ax;
            let (mut s0, mut s1, mut t0, mut t1) = (1.0f64, 1.0f64, 1.0f64, 1.0f64);
            for k in 1..200 {
                let k = f64::from(k);
                t0 *= q / (k * k);
                t1 *= q / (k * (k + 1.0));
                s0 += t0;
                s1 += t1;
            }
            let e = (-ax).exp();
            close(&format!("i0e({ax})"), e0, s0 * e, 3e-14);
            close(&format!("i1e({ax})"), e1, 0.5 * ax * s1 * e, 3e-14);
        }
        assert_eq!(bessel_i(0, 0.0), 1.0);
        assert!(bessel_i(2, -0.0) == 0.0 && bessel_i(2, -0.0).is_sign_negative());
        assert!(bessel_i(0, f64::NEG_INFINITY).is_nan());
        assert!(bessel_i(2, f64::INFINITY).is_nan());
        assert_eq!(bessel_i(1, f64::INFINITY), 0.0);
        assert!(bessel_i(3, f64::NEG_INFINITY).is_sign_negative());
        assert!(bessel_i(0, f64::NAN).is_nan());
        // i0 overflows f64 just past 713.98; i0e does not
        assert!(bessel_i(0, 713.0).is_finite() && bessel_i(0, 714.5).is_infinite());
        assert_eq!(unary_derivative(UnaryOp::I1, 0.0), 0.5);
        assert_eq!(unary_derivative(UnaryOp::I1e, -1e-300), 0.5);
        assert_eq!(unary_derivative(UnaryOp::I1, f64::NAN), 0.5);
        assert_eq!(unary_derivative(UnaryOp::I1e, f64::NAN), 0.5);
        assert!(unary_derivative(UnaryOp::I1, f64::INFINITY).is_nan());
        assert_eq!(unary_derivative(UnaryOp::I1e, f64::INFINITY), 0.0);
        assert_eq!(unary_derivative(UnaryOp::I0e, f64::INFINITY), 0.0);
    }

    /// polygamma at known values: `(-1)^(n+1) n! zeta(n + 1)` at 1, the
    /// Hurwitz zeta at 1/2 (`(2^(n+1) - 1) zeta(n + 1)`), and the poles.
    #[test]
    #[allow(clippy::excessive_precision)]
    fn polygamma_matches_known_values() {
        let pi = std::f64::consts::PI;
        let zeta3 = 1.2020569031595942854;
        let zeta5 = 1.0369277551433699263;
        close("polygamma(1, 1)", polygamma(1, 1.0), pi * pi / 6.0, 1e-14);
        close("polygamma(2, 1)", polygamma(2, 1.0), -2.0 * zeta3, 1e-14);
        close("polygamma(3, 1)", polygamma(3, 1.0), pi.powi(4) / 15.0, 1e-14);
        close("polygamma(4, 1)", polygamma(4, 1.0), -24.0 * zeta5, 1e-14);
        close("polygamma(2, 0.5)", polygamma(2, 0.5), -14.0 * zeta3, 1e-14);
        close("polygamma(4, 0.5)", polygamma(4, 0.5), -24.0 * 31.0 * zeta5, 1e-14);
        // the recurrence polygamma(n, x + 1) = polygamma(n, x) + (-1)^n n! / x^(n+1)
        for x in [-2.5, -0.25, 0.3, 7.7, 24.2, 40.0] {
            let r = polygamma(2, x + 1.0) - polygamma(2, x);
            close(&format!("recurrence at {x}"), r, 2.0 / (x * x * x), 1e-11);
        }
        assert_eq!(polygamma(0, 1.0), digamma(1.0));
        assert_eq!(polygamma(2, 0.0), f64::NEG_INFINITY);
        assert_eq!(polygamma(3, -2.0), f64::INFINITY);
        assert_eq!(polygamma(3, f64::NEG_INFINITY), f64::INFINITY);
        assert!(polygamma(2, f64::INFINITY).is_nan());
        assert!(polygamma(4, f64::NAN).is_nan());
        let g = unary_grad(UnaryOp::Polygamma { n: 1 }, 1.0, 1.0);
        close("polygamma(1)'(1)", g, -2.0 * zeta3, 1e-14);
    }

    #[test]
    fn nextafter_steps_on_each_grid() {
        let n = nextafter_in;
        assert_eq!(n(ElementKind::F32, 1.0, 2.0), 1.0 + 2f64.powi(-23));
        assert_eq!(n(ElementKind::F16, 1.0, 2.0), 1.0 + 2f64.powi(-10));
        assert_eq!(n(ElementKind::Bf16, 1.0, -2.0), 1.0 - 2f64.powi(-8));
        assert_eq!(n(ElementKind::F16, 0.0, 1.0), 2f64.powi(-24));
        assert_eq!(n(ElementKind::Bf16, -0.0, -1.0), -(2f64.powi(-133)));
        assert_eq!(n(ElementKind::F16, -1.0, 0.0), -1.0 + 2f64.powi(-11));
        assert_eq!(n(ElementKind::F16, 65504.0, f64::INFINITY), f64::INFINITY);
        assert_eq!(n(ElementKind::F32, f64::NEG_INFINITY, 0.0), -f64::from(f32::MAX));
        assert!(n(ElementKind::F16, 1.0, f64::NAN).is_nan());
    }

    #[test]
    fn round_decimals_rounds_the_exact_product() {
        let r = |x: f64, d: i32| round_decimals(x, d);
        assert_eq!(r(0.125, 2), 0.12);
        assert_eq!(r(0.375, 2), 0.38);
        assert_eq!(r(1.2345, 3), 1.234 + 0.001 * f64::from(u8::from(1.2345 * 1000.0 > 1234.5)));
        assert_eq!(r(25.0, -1), 20.0);
        assert_eq!(r(35.0, -1), 40.0);
        assert_eq!(r(-149.0, -2), -100.0);
        // 0.005 is a little above 1/200: its exact product passes the tie
        assert_eq!(r(0.005, 2), 0.01);
        assert!(r(-0.001, 2) == 0.0 && r(-0.001, 2).is_sign_negative());
        assert!(r(f64::NAN, 1).is_nan());
        assert_eq!(r(f64::INFINITY, 3), f64::INFINITY);
        assert_eq!(r(2.5, 0), 2.0);
    }

    /// lgamma, digamma and trigamma against mpmath (30 digits).
    #[test]
    #[allow(clippy::excessive_precision)] // mpmath's digits
    fn gamma_functions_match_known_values() {
        let table = [
            (0.1, 2.252712651734205902, -10.423754940411076232, 101.4332991507927477),
            (0.5, 0.57236494292470008707, -1.9635100260214234794, 4.9348022005446793094),
            (1.5, -0.12078223763524522235, 0.036489973978576520559, 0.93480220054467930942),
            (2.5, 0.28468287047291915963, 0.70315664064524318723, 0.49035775610023486497),
            (7.3, 7.1478925230222486921, 1.9178203356379860723, 0.14679576813142710199),
            (12.0, 17.502307845873885839, 2.4426616799758120167, 0.08690187287176839075),
            (-0.5, 1.2655121234846453965, 0.036489973978576520559, 8.9348022005446793094),
            (-1.5, 0.86004701537648101451, 0.70315664064524318723, 9.3792466449891237539),
            (-2.3, 0.36956666345500803746, 3.3173231575618227391, 14.725912160961291488),
            (1e-05, 11.512919692895825626, -100000.57719921567289, 10000000001.64490839),
            (100.0, 359.13420536957539878, 4.6001618527380874002, 0.010050166663333571395),
        ];
        for (x, lg, dg, tg) in table {
            close(&format!("lgamma({x})"), lgamma(x), lg, 1e-14);
            close(&format!("digamma({x})"), digamma(x), dg, 1e-14);
            close(&format!("trigamma({x})"), trigamma(x), tg, 1e-14);
        }
        // near 1 and 2, lgamma's zeros: absolute
        assert!(lgamma(1.0).abs() < 1e-15 && lgamma(2.0).abs() < 1e-15);
        assert!(digamma(1.461_632_144_968_362_2).abs() < 1e-15);
        // PyTorch's edges
        assert_eq!(digamma(0.0), f64::NEG_INFINITY);
        assert_eq!(digamma(-0.0), f64::INFINITY);
        assert!(digamma(-2.0).is_nan() && digamma(f64::NEG_INFINITY).is_nan());
        assert_eq!(digamma(f64::INFINITY), f64::INFINITY);
        assert_eq!(lgamma(0.0), f64::INFINITY);
        assert_eq!(lgamma(-3.0), f64::INFINITY);
        assert_eq!(lgamma(f64::NEG_INFINITY), f64::INFINITY);
        assert_eq!(trigamma(0.0), f64::INFINITY);
        assert_eq!(trigamma(-2.0), f64::INFINITY);
    }

    #[test]
    #[allow(clippy::excessive_precision)] // mpmath's digits
    fn erfinv_and_sinc_match_known_values() {
        for (x, want) in [
            (0.1, 0.088855990494257691974),
            (0.5, 0.47693627620446987338),
            (-0.9, -1.1630871536766741628),
            (0.999, 2.3267537655135244939),
            (0.999999, 3.4589107372754987775),
            (1e-10, 8.8622692545275804594e-11),
            (0.75, 0.81341984759761854169),
        ] {
            close(&format!("erfinv({x})"), erfinv(x), want, 1e-14);
        }
        assert_eq!(erfinv(1.0), f64::INFINITY);
        assert_eq!(erfinv(-1.0), f64::NEG_INFINITY);
        assert!(erfinv(1.5).is_nan());
        for (x, want) in [
            (0.01, -0.032895434481712398668),
            (0.3, -0.90202813013888879218),
            (1.2, -0.54425176145292309631),
            (-2.7, 0.25302308485458441119),
            (10.5, -0.0028871645005332487214),
        ] {
            close(&format!("sinc'({x})"), sinc_derivative(x), want, 1e-13);
        }
    }

    /// PyTorch's values at NaN, ±inf, ±0 and the domain edges.
    #[test]
    fn unary_special_values_follow_pytorch() {
        use UnaryOp as U;
        let nan = f64::NAN;
        let inf = f64::INFINITY;
        let same = |a: f64, b: f64| (a.is_nan() && b.is_nan()) || (a == b && a.is_sign_negative() == b.is_sign_negative());
        let cases = [
            (U::Sign, nan, 0.0),
            (U::Sign, -0.0, 0.0),
            (U::Abs, -0.0, 0.0),
            (U::Sqrt, -0.0, -0.0),
            (U::Sqrt, -1.0, nan),
            (U::Rsqrt, -0.0, -inf),
            (U::Log, 0.0, -inf),
            (U::Log, -1.0, nan),
            (U::Log1p, -1.0, -inf),
            (U::Expm1, -0.0, -0.0),
            (U::Atanh, 1.0, inf),
            (U::Atanh, -1.0, -inf),
            (U::Acosh, 1.0, 0.0),
            (U::Acosh, 0.5, nan),
            (U::Asin, 1.5, nan),
            (U::Erfinv, -1.0, -inf),
            (U::Softsign, inf, nan),
            (U::Mish, -inf, nan),
            (U::Mish, inf, inf),
            (U::Hardswish, -inf, nan),
            (U::Hardswish, inf, inf),
            (U::Hardsigmoid, nan, nan),
            (U::Hardsigmoid, inf, 6.0 * ONE_SIXTH),
            (U::Relu6, -0.0, -0.0),
            (U::Relu6, nan, nan),
            (U::Frac, inf, nan),
            (U::Frac, -0.0, 0.0),
            (U::Round, -0.4, -0.0),
            (U::Round, 2.5, 2.0),
            (U::Round, -1.5, -2.0),
            (U::Tanhshrink, -0.0, 0.0),
            (U::Softshrink { lambd: 0.5 }, nan, nan),
            (U::Softshrink { lambd: 0.5 }, -0.0, 0.0),
            (U::Hardshrink { lambd: 0.5 }, nan, nan),
            (U::Clamp { min: Some(0.0), max: None }, -0.0, -0.0),
            (U::Clamp { min: Some(2.0), max: Some(1.0) }, 0.0, 1.0),
            (U::Clamp { min: Some(0.0), max: Some(1.0) }, nan, nan),
            (U::Logit { eps: None }, 0.0, -inf),
            (U::Logit { eps: Some(0.25) }, 0.0, (1.0f64 / 3.0).ln()),
            (U::NanToNum { nan: 0.0, posinf: None, neginf: None }, -inf, f64::MIN),
            (U::NanToNum { nan: 2.0, posinf: Some(3.0), neginf: None }, nan, 2.0),
            (U::Lgamma, -inf, inf),
            (U::Erf, inf, 1.0),
            (U::Erf, -inf, -1.0),
            (U::Erfc, inf, 0.0),
            (U::Erfc, -inf, 2.0),
            (U::Digamma, 0.0, -inf),
        ];
        for (op, x, want) in cases {
            let got = unary_scalar(op, x);
            assert!(same(got, want), "{op:?}({x:e}) = {got:e}, expected {want:e}");
        }
        let grads = [
            (U::Abs, 0.0, 0.0),
            (U::Abs, nan, 0.0),
            (U::Relu6, 6.0, 0.0),
            (U::Relu6, nan, 1.0),
            (U::Hardtanh { min_val: -1.0, max_val: 1.0 }, 1.0, 0.0),
            (U::Clamp { min: Some(-1.0), max: Some(1.0) }, 1.0, 1.0),
            (U::Clamp { min: Some(-1.0), max: None }, nan, 0.0),
            (U::Hardswish, -3.0, 0.0),
            (U::Hardswish, 3.0, 1.0),
            (U::Hardswish, nan, 1.0),
            (U::Hardsigmoid, 3.0, 0.0),
            (U::LeakyRelu { negative_slope: 0.25 }, 0.0, 0.25),
            (U::LeakyRelu { negative_slope: 0.25 }, nan, 0.25),
            (U::Elu { alpha: 2.0 }, 0.0, 2.0),
            (U::Elu { alpha: 2.0 }, nan, 1.0),
            (U::Softshrink { lambd: 0.5 }, 0.5, 0.0),
            (U::Softshrink { lambd: 0.5 }, nan, 1.0),
            (U::Threshold { threshold: 1.0, value: 5.0 }, 1.0, 0.0),
            (U::Logit { eps: None }, 1.5, nan),
            (U::Logit { eps: Some(0.25) }, 0.125, 0.0),
            (U::Softsign, inf, nan),
            (U::Sqrt, 0.0, inf),
            (U::Sinc, 0.0, 0.0),
            (U::Frac, 2.5, 1.0),
            (U::Floor, nan, 0.0),
            (U::NanToNum { nan: 0.0, posinf: None, neginf: None }, inf, 0.0),
            (U::Digamma, -3.0, inf),
            (U::Mish, inf, nan),
        ];
        for (op, x, want) in grads {
            let got = unary_grad(op, x, 1.0);
            assert!(same(got, want) || (got == want), "{op:?}'({x:e}) = {got:e}, expected {want:e}");
        }
    }

    #[test]
    fn binary_gradients_match_finite_differences() {
        let h = 1e-6;
        // (not the ops without a backward: nextafter moves with a)
        let ops = BinaryOp::ALL.into_iter().chain(binary_cases().into_iter().map(|c| c.1));
        for op in ops.filter(|op| op.has_backward()) {
            for &(a, b) in &[(0.7f64, -1.3f64), (-2.1, 0.4), (1.5, 1.25), (-0.3, -0.9)] {
                // inside each op's real domain: pow's base and xlogy's y > 0
                let (a, b) = match op {
                    BinaryOp::Pow => (a.abs(), b),
                    BinaryOp::Xlogy | BinaryOp::Xlog1py => (a, b.abs()),
                    _ => (a, b),
                };
                let (ga, gb) = binary_grad_scalar(op, a, b, 1.0);
                let fa = (binary_scalar(op, a + h, b) - binary_scalar(op, a - h, b)) / (2.0 * h);
                let fb = (binary_scalar(op, a, b + h) - binary_scalar(op, a, b - h)) / (2.0 * h);
                assert!(
                    (fa - ga).abs() < 1e-7 * (1.0 + ga.abs()),
                    "{op:?} da at ({a},{b})"
                );
                assert!(
                    (fb - gb).abs() < 1e-7 * (1.0 + gb.abs()),
                    "{op:?} db at ({a},{b})"
                );
            }
        }
        // ties split the gradient
        assert_eq!(
            binary_grad_scalar(BinaryOp::Maximum, 1.0, 1.0, 2.0),
            (1.0, 1.0)
        );
        assert_eq!(
            binary_grad_scalar(BinaryOp::Minimum, 3.0, 1.0, 2.0),
            (0.0, 2.0)
        );
    }

    #[test]
    fn binary_special_values_follow_pytorch() {
        let nan = f64::NAN;
        let inf = f64::INFINITY;
        let same = |x: f64, y: f64| (x.is_nan() && y.is_nan()) || x == y;
        // (op, a, b, f, da, db) with dy = 1
        let cases = [
            (BinaryOp::Pow, 0.0, 2.0, 0.0, 0.0, 0.0),
            (BinaryOp::Pow, 0.0, 0.0, 1.0, 0.0, 0.0),
            (BinaryOp::Pow, 0.0, -1.0, inf, -inf, -inf),
            (BinaryOp::Pow, 2.0, 3.0, 8.0, 12.0, 8.0 * 2f64.ln()),
            (BinaryOp::Fmod, -7.0, 2.0, -1.0, 1.0, 3.0),
            (BinaryOp::Remainder, -7.0, 2.0, 1.0, 1.0, 4.0),
            (BinaryOp::Remainder, 7.0, -2.0, -1.0, 1.0, 4.0),
            (BinaryOp::Copysign, 2.0, -0.0, -2.0, -1.0, 0.0),
            (BinaryOp::Copysign, 0.0, -1.0, -0.0, 0.0, 0.0),
            (BinaryOp::Xlogy, 0.0, 0.0, 0.0, 0.0, nan),
            (BinaryOp::Xlogy, 0.0, nan, nan, nan, nan),
            (BinaryOp::Xlog1py, 0.0, -1.0, 0.0, 0.0, nan),
            (BinaryOp::Xlog1py, 0.0, -2.0, 0.0, 0.0, -0.0),
            (BinaryOp::Xlog1py, 0.0, nan, nan, nan, nan),
            (BinaryOp::Xlog1py, 2.0, -1.0, -inf, -inf, inf),
            (BinaryOp::Heaviside, 0.0, 0.5, 0.5, 0.0, 0.0),
            (BinaryOp::Heaviside, -0.0, nan, nan, 0.0, 0.0),
            (BinaryOp::Heaviside, nan, 0.5, 0.0, 0.0, 0.0),
            (BinaryOp::Heaviside, -inf, 0.5, 0.0, 0.0, 0.0),
            (BinaryOp::DivFloor, -7.0, 2.0, -4.0, 0.0, 0.0),
            (BinaryOp::DivFloor, 1.0, 0.0, inf, 0.0, 0.0),
            (BinaryOp::DivFloor, 0.0, 0.0, nan, 0.0, 0.0),
            (BinaryOp::DivTrunc, -7.0, 2.0, -3.0, 0.0, 0.0),
            (BinaryOp::DivTrunc, -1.0, 0.0, -inf, 0.0, 0.0),
            (BinaryOp::Nextafter, 1.0, 2.0, 1.0 + f64::EPSILON, 0.0, 0.0),
            (BinaryOp::Nextafter, 1.0, 0.0, 1.0 - f64::EPSILON / 2.0, 0.0, 0.0),
            (BinaryOp::Nextafter, 0.0, -1.0, -f64::from_bits(1), 0.0, 0.0),
            (BinaryOp::Nextafter, -0.0, 0.0, 0.0, 0.0, 0.0),
            (BinaryOp::Nextafter, inf, 0.0, f64::MAX, 0.0, 0.0),
            (BinaryOp::Nextafter, f64::MAX, inf, inf, 0.0, 0.0),
            (BinaryOp::Nextafter, -2.0, nan, nan, 0.0, 0.0),
            (BinaryOp::Logaddexp, -inf, -inf, -inf, nan, nan),
            (BinaryOp::Logaddexp2, 1.0, 1.0, 2.0, 0.5, 0.5),
            (BinaryOp::Fmax, nan, 1.0, 1.0, 0.0, 1.0),
            (BinaryOp::Fmax, 1.0, nan, 1.0, 1.0, 0.0),
            (BinaryOp::Fmax, 2.0, 2.0, 2.0, 1.0, 0.0),
            (BinaryOp::Fmin, 1.0, 2.0, 1.0, 1.0, 0.0),
            (BinaryOp::Fmin, nan, nan, nan, 1.0, 0.0),
            (BinaryOp::Atan2, 0.0, 0.0, 0.0, nan, nan),
            (BinaryOp::Hypot, 3.0, -4.0, 5.0, 0.6, -0.8),
            (BinaryOp::AddAlpha { alpha: 2.0 }, 1.0, 3.0, 7.0, 1.0, 2.0),
            (BinaryOp::AddAlpha { alpha: 0.0 }, 1.0, inf, nan, 1.0, 0.0),
            (BinaryOp::AddAlpha { alpha: 2.0 }, -0.0, -0.0, -0.0, 1.0, 2.0),
            (BinaryOp::SubAlpha { alpha: 2.0 }, 1.0, 3.0, -5.0, 1.0, -2.0),
            (BinaryOp::SubAlpha { alpha: 1.0 }, inf, inf, nan, 1.0, -1.0),
            (BinaryOp::SubAlpha { alpha: 1.0 }, -0.0, 0.0, -0.0, 1.0, -1.0),
            (BinaryOp::Prelu, 2.0, 0.25, 2.0, 1.0, 0.0),
            (BinaryOp::Prelu, -2.0, 0.25, -0.5, 0.25, -2.0),
            (BinaryOp::Prelu, 0.0, 0.25, 0.0, 0.25, 0.0),
            (BinaryOp::Prelu, -0.0, 0.25, -0.0, 0.25, -0.0),
            (BinaryOp::Prelu, nan, 0.25, nan, 0.25, nan),
            (BinaryOp::Prelu, -inf, 0.25, -inf, 0.25, -inf),
            (BinaryOp::Prelu, -inf, 0.0, nan, 0.0, -inf),
            (BinaryOp::Prelu, inf, nan, inf, 1.0, 0.0),
        ];
        for (op, a, b, f, da, db) in cases {
            let got = binary_scalar(op, a, b);
            let (ga, gb) = binary_grad_scalar(op, a, b, 1.0);
            assert!(same(got, f), "{op:?}({a}, {b}) = {got}, expected {f}");
            assert!(
                same(ga, da) && same(gb, db),
                "{op:?} grads at ({a}, {b}) = ({ga}, {gb}), expected ({da}, {db})"
            );
        }
    }

    #[test]
    fn broadcast_reduce_round_trip() {
        let b = [1.0, 2.0, 3.0];
        let full = broadcast(&b, &[1, 3], &[2, 3]);
        assert_eq!(full, vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
        assert_eq!(reduce_to(&full, &[1, 3], &[2, 3]), vec![2.0, 4.0, 6.0]);
        assert_eq!(reduce_to(&full, &[2, 1], &[2, 3]), vec![6.0, 6.0]);
        // the backward of a broadcast add sums dy over the broadcast axis
        let g = binary_backward(BinaryOp::Add, &[0.0; 6], &[2, 3], &b, &[1, 3], &[1.0; 6]);
        assert_eq!(g.db, vec![2.0, 2.0, 2.0]);
        assert_eq!(g.da, vec![1.0; 6]);
    }
}

#[cfg(test)]
mod cast_tests {
    use super::*;
    use ElementKind as K;

    const NS: Fp8Mode = Fp8Mode::NoSaturate;
    const SAT: Fp8Mode = Fp8Mode::Saturate;

    fn c(from: K, to: K, x: f64) -> f64 {
        cast_scalar(from, to, x, NS, None)
    }

    /// Equal values, NaN equal to NaN, and the sign of zero checked.
    fn same(got: f64, want: f64) -> bool {
        (got.is_nan() && want.is_nan()) || (got == want && got.is_sign_negative() == want.is_sign_negative())
    }

    fn check(cases: &[(K, K, f64, f64)]) {
        for &(from, to, x, want) in cases {
            let got = c(from, to, x);
            assert!(same(got, want), "{from} -> {to} of {x:e}: {got:e}, expected {want:e}");
        }
    }

    #[test]
    fn float_to_narrow_float_rounds_to_nearest_even() {
        let p = |e: i32| 2f64.powi(e);
        check(&[
            (K::F32, K::F16, 65504.0, 65504.0),
            (K::F32, K::F16, 65519.0, 65504.0),
            (K::F32, K::F16, 65520.0, f64::INFINITY),
            (K::F32, K::F16, 1.0 + p(-11), 1.0),
            (K::F32, K::F16, 1.0 + 3.0 * p(-11), 1.0 + p(-9)),
            (K::F32, K::F16, -0.0, -0.0),
            (K::F32, K::F16, p(-24), p(-24)),
            (K::F32, K::F16, p(-25), 0.0),
            (K::F32, K::F16, -1.5 * p(-25), -p(-24)),
            (K::F32, K::F16, f64::NEG_INFINITY, f64::NEG_INFINITY),
            (K::F32, K::F16, f64::NAN, f64::NAN),
            (K::F32, K::Bf16, 1.0 + p(-8), 1.0),
            (K::F32, K::Bf16, 1.0 + 3.0 * p(-8), 1.0 + p(-6)),
            (K::F32, K::Bf16, f64::from(f32::MAX), f64::INFINITY),
            (K::F32, K::Bf16, p(-133), p(-133)),
            (K::F64, K::F32, 1.0 + p(-24), 1.0),
            (K::F64, K::F32, 1e300, f64::INFINITY),
            (K::F64, K::F32, 1e-50, 0.0),
            // f64 -> f16 rounds through f32: 1 + 2^-11 + 2^-40 is above the
            // f16 midpoint, but its f32 is the midpoint, which ties to 1.
            (K::F64, K::F16, 1.0 + p(-11) + p(-40), 1.0),
            (K::F16, K::F32, 65504.0, 65504.0),
            (K::Bf16, K::F16, p(100), f64::INFINITY),
            (K::F16, K::Bf16, 1.0 + p(-10), 1.0),
        ]);
    }

    #[test]
    fn fp8_follows_its_mode() {
        let p = |e: i32| 2f64.powi(e);
        check(&[
            (K::F32, K::Fp8E4M3, 448.0, 448.0),
            (K::F32, K::Fp8E4M3, 464.0, 448.0),
            (K::F32, K::Fp8E4M3, 465.0, f64::NAN),
            (K::F32, K::Fp8E4M3, f64::INFINITY, f64::NAN),
            (K::F32, K::Fp8E4M3, -1e6, f64::NAN),
            (K::F32, K::Fp8E4M3, p(-9), p(-9)),
            (K::F32, K::Fp8E4M3, p(-10), 0.0),
            (K::F32, K::Fp8E4M3, -3.0 * p(-10), -p(-8)),
            (K::F32, K::Fp8E4M3, 1.0625, 1.0),
            (K::F32, K::Fp8E4M3, 1.1875, 1.25),
            (K::F32, K::Fp8E5M2, 57344.0, 57344.0),
            (K::F32, K::Fp8E5M2, 61439.0, 57344.0),
            (K::F32, K::Fp8E5M2, 61440.0, f64::INFINITY),
            (K::F32, K::Fp8E5M2, f64::NEG_INFINITY, f64::NEG_INFINITY),
            (K::F32, K::Fp8E5M2, p(-16), p(-16)),
            (K::F32, K::Fp8E5M2, p(-17), 0.0),
            (K::F32, K::Fp8E5M2, f64::NAN, f64::NAN),
            (K::Fp8E5M2, K::Fp8E4M3, 512.0, f64::NAN),
            (K::Fp8E4M3, K::Fp8E5M2, 448.0, 448.0),
            (K::I32, K::Fp8E4M3, 17.0, 16.0),
            (K::I32, K::Fp8E4M3, 1000.0, f64::NAN),
        ]);
        let sat = |to, x| cast_scalar(K::F32, to, x, SAT, None);
        assert_eq!(sat(K::Fp8E4M3, 1e6), 448.0);
        assert_eq!(sat(K::Fp8E4M3, f64::NEG_INFINITY), -448.0);
        assert_eq!(sat(K::Fp8E4M3, 465.0), 448.0);
        assert!(sat(K::Fp8E4M3, f64::NAN).is_nan());
        assert_eq!(sat(K::Fp8E5M2, f64::INFINITY), 57344.0);
        assert_eq!(sat(K::Fp8E5M2, -61440.0), -57344.0);
        // the scale multiplies first, in f32
        assert_eq!(cast_scalar(K::Bf16, K::Fp8E4M3, 3.0, NS, Some(100.0)), 288.0);
        assert!(cast_scalar(K::F32, K::Fp8E4M3, 3.0, NS, Some(200.0)).is_nan());
        assert_eq!(cast_scalar(K::F32, K::Fp8E4M3, 3.0, SAT, Some(200.0)), 448.0);
        assert_eq!(cast_scalar(K::F64, K::Fp8E5M2, 0.25, NS, Some(0.5)), 0.125);
    }

    #[test]
    fn saturating_fp8_matches_the_float8_crate() {
        // float8's from_f32 is NVIDIA's SATFINITE conversion; sweep a few
        // hundred thousand f32 values through both.
        let mut bits = 0u32;
        while bits < 0xFF80_0000 {
            let a = f32::from_bits(bits);
            if a.is_finite() {
                let e4 = fp8_value(a, K::Fp8E4M3, SAT);
                let e5 = fp8_value(a, K::Fp8E5M2, SAT);
                assert_eq!(e4, float8::F8E4M3::from_f32(a).to_f64(), "e4m3 {a:e}");
                assert_eq!(e5, float8::F8E5M2::from_f32(a).to_f64(), "e5m2 {a:e}");
            }
            bits = bits.wrapping_add(0x2A3B);
        }
    }

    #[test]
    fn float_to_int_truncates_and_saturates() {
        check(&[
            (K::F32, K::I32, 2.7, 2.0),
            (K::F32, K::I32, -2.7, -2.0),
            (K::F32, K::I32, f64::NAN, 0.0),
            (K::F64, K::I32, f64::NAN, f64::from(i32::MIN)),
            (K::F32, K::I32, 1e10, f64::from(i32::MAX)),
            // through int32, then wrapped (PyTorch's static_cast on the GPU)
            (K::F32, K::I8, 300.0, 44.0),
            (K::F32, K::I8, f64::INFINITY, -1.0),
            (K::F32, K::I8, f64::NEG_INFINITY, 0.0),
            (K::Fp8E4M3, K::I8, 448.0, -64.0),
            (K::F16, K::I16, -65504.0, 32.0),
            (K::F64, K::I16, 1e300, -1.0),
            (K::F32, K::I64, f64::NAN, i64::MIN as f64),
            (K::F64, K::I64, 1e300, i64::MAX as f64),
            (K::F64, K::I64, -1e300, i64::MIN as f64),
            (K::F32, K::U8, -1.0, 255.0),
            (K::F32, K::U8, -1.5, 255.0),
            (K::F32, K::U8, 300.0, 44.0),
            (K::F32, K::U8, 256.5, 0.0),
            (K::F32, K::U8, f64::NAN, 0.0),
            (K::F32, K::U8, f64::INFINITY, 255.0),
            (K::F32, K::U8, f64::NEG_INFINITY, 0.0),
            (K::Bf16, K::I32, -0.0, 0.0),
        ]);
    }

    #[test]
    fn int_and_bool_casts() {
        check(&[
            (K::I32, K::I8, 300.0, 44.0),
            (K::I32, K::U8, -1.0, 255.0),
            (K::I64, K::I32, i64::MIN as f64, 0.0),
            (K::I16, K::I8, -129.0, 127.0),
            (K::U8, K::I8, 200.0, -56.0),
            (K::I64, K::F32, 16777217.0, 16777216.0),
            (K::I32, K::F32, 16777219.0, 16777220.0),
            // through f32, as c10: 2^24 + 2^16 + 1 -> 2^24 + 2^16 -> 2^24
            (K::I32, K::Bf16, 16842753.0, 16777216.0),
            (K::I32, K::F16, 70000.0, f64::INFINITY),
            (K::I64, K::F64, -9007199254740992.0, -9007199254740992.0),
            (K::F32, K::Bool, f64::NAN, 1.0),
            (K::F32, K::Bool, -0.0, 0.0),
            (K::F32, K::Bool, 1e-30, 1.0),
            (K::I64, K::Bool, -5.0, 1.0),
            (K::Bool, K::F32, 1.0, 1.0),
            (K::Bool, K::I64, 0.0, 0.0),
            (K::Bool, K::Fp8E4M3, 1.0, 1.0),
            (K::I8, K::I8, -7.0, -7.0),
        ]);
    }

    #[test]
    fn backward_casts_the_gradient_back() {
        let dy = [1.0, -0.25, 448.0];
        assert_eq!(
            cast_backward(K::F32, K::Fp8E4M3, &dy, Some(2.0)),
            vec![2.0, -0.5, 896.0]
        );
        let dx = cast_backward(K::Fp8E5M2, K::F32, &[1e6, 3.0], None);
        assert!(dx[0].is_infinite());
        assert_eq!(dx[1], 3.0);
    }
}

/// `torch.arange` / `linspace` / `logspace` of `n` elements of `kind`
/// ([`RangePlan`](crate::RangePlan)'s rules): each element's arithmetic
/// emulated in the kernel's types (f32 with the fused multiply-add, f16 and
/// bf16 rounding each operation), the result exactly representable in
/// `kind`. logspace's `pow` is taken in f64 of the rounded operands, so it
/// is the correctly rounded value, where the GPU's `powf` may differ by a
/// few units in the last place.
///
/// # Errors
/// As [`RangePlan`](crate::RangePlan)'s `select`.
pub fn range(kind: ElementKind, op: crate::RangeOp, n: usize) -> crate::Result<Vec<f64>> {
    use crate::RangeOp;
    let p = super::range::range_params(kind, op, n)?;
    let half = n / 2;
    // v is an f32 value here; half's from_f64 does not round bf16 to
    // nearest, from_f32 does
    let to_t = |v: f64| match kind {
        ElementKind::F16 => half::f16::from_f32(v as f32).to_f64(),
        ElementKind::Bf16 => half::bf16::from_f32(v as f32).to_f64(),
        ElementKind::F32 => f64::from(v as f32),
        _ => v,
    };
    // an f32 value into an integer kind, as cast.cu's static_cast
    let to_int = |v: f32| -> f64 {
        match kind {
            ElementKind::I8 => f64::from(v as i32 as i8),
            ElementKind::I16 => f64::from(v as i32 as i16),
            ElementKind::I32 => f64::from(v as i32),
            ElementKind::U8 => f64::from(v as i64 as u8),
            _ => (v as i64) as f64,
        }
    };
    let wrap = |v: i64| -> f64 {
        match kind {
            ElementKind::I8 => f64::from(v as i8),
            ElementKind::U8 => f64::from(v as u8),
            ElementKind::I16 => f64::from(v as i16),
            ElementKind::I32 => f64::from(v as i32),
            _ => v as f64,
        }
    };
    // f16 / bf16: an f32 value rounded to the type and back
    let r = |v: f32| -> f32 {
        match kind {
            ElementKind::F16 => half::f16::from_f32(v).to_f32(),
            ElementKind::Bf16 => half::bf16::from_f32(v).to_f32(),
            _ => v,
        }
    };
    let int = !kind.is_float();
    let value = |i: usize| -> f64 {
        let k = n.saturating_sub(1 + i);
        match op {
            RangeOp::Arange { .. } if kind == ElementKind::F64 => {
                p.fstep.mul_add(i as f64, p.fstart)
            }
            RangeOp::Arange { .. } if int => {
                wrap((p.istart as u64).wrapping_add((p.istep as u64).wrapping_mul(i as u64)) as i64)
            }
            RangeOp::Arange { .. } => to_t(f64::from(
                (p.fstep as f32).mul_add(i as f32, p.fstart as f32),
            )),
            _ if int => {
                let s = p.fstep as f32;
                to_int(if i < half {
                    s.mul_add(i as f32, p.istart as f32)
                } else {
                    (-s).mul_add(k as f32, p.iend as f32)
                })
            }
            _ if kind == ElementKind::F64 => {
                let v = if i < half {
                    p.fstep.mul_add(i as f64, p.fstart)
                } else {
                    (-p.fstep).mul_add(k as f64, p.fend)
                };
                match op {
                    RangeOp::Logspace { .. } => p.base.powf(v),
                    _ => v,
                }
            }
            _ => {
                let (s, st, e) = (p.fstart as f32, p.fstep as f32, p.fend as f32);
                let v = match kind {
                    ElementKind::F32 if i < half => st.mul_add(i as f32, s),
                    ElementKind::F32 => (-st).mul_add(k as f32, e),
                    _ if i < half => r(s + r(st * r(i as f32))),
                    _ => r(e - r(st * r(k as f32))),
                };
                match op {
                    // powf's result in f32 (overflowing to inf), then T
                    RangeOp::Logspace { .. } => to_t(f64::from(p.base.powf(f64::from(v)) as f32)),
                    _ => to_t(f64::from(v)),
                }
            }
        }
    };
    Ok((0..n).map(value).collect())
}

/// `torch.eye(rows, cols)` row-major.
pub fn eye(rows: usize, cols: usize) -> Vec<f64> {
    (0..rows * cols)
        .map(|i| f64::from(i / cols.max(1) == i % cols.max(1)))
        .collect()
}

#[cfg(test)]
mod range_tests {
    use super::*;
    use crate::RangeOp;

    #[test]
    fn ranges_of_small_cases() {
        let lin = |s, e| RangeOp::Linspace { start: s, end: e };
        let f32s = ElementKind::F32;
        assert_eq!(
            range(f32s, RangeOp::Arange { start: 0.0, step: 1.0 }, 5).unwrap(),
            [0.0, 1.0, 2.0, 3.0, 4.0]
        );
        assert_eq!(range(f32s, lin(0.0, 1.0), 5).unwrap(), [0.0, 0.25, 0.5, 0.75, 1.0]);
        // truncated bounds -2 and 9, step 2.75 in f32, truncated values
        assert_eq!(range(ElementKind::I32, lin(-2.7, 9.9), 5).unwrap(), [-2.0, 0.0, 3.0, 6.0, 9.0]);
        // i64 arange wrapped to i8
        assert_eq!(
            range(ElementKind::I8, RangeOp::Arange { start: 126.0, step: 1.0 }, 3).unwrap(),
            [126.0, 127.0, -128.0]
        );
        let log = RangeOp::Logspace { start: 0.0, end: 3.0, base: 10.0 };
        assert_eq!(range(ElementKind::F64, log, 4).unwrap(), [1.0, 10.0, 100.0, 1000.0]);
        // one step is start; none is empty
        assert_eq!(range(f32s, lin(2.5, 9.0), 1).unwrap(), [2.5]);
        assert!(range(f32s, lin(2.5, 9.0), 0).unwrap().is_empty());
        // bf16: the index 257 rounds to 256 before the product
        let v = range(ElementKind::Bf16, lin(0.0, 1000.0), 1001).unwrap();
        assert_eq!(v[257], half::bf16::from_f32(256.0).to_f64());
        assert_eq!(eye(2, 3), [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
    }
}
