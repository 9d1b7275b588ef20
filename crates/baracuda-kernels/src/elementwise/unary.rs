//! Pointwise unary ops: `y = f(x)` and the backward `dx = dy * f'(x)`.
//!
//! The math of each op is in [`UnaryOp`] and at the top of
//! `kernels/elementwise/unary.cu`.

use core::marker::PhantomData;

use baracuda_driver::{ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, Element, ElementKind, KernelSku, PlanPreference, PrecisionGuarantee, Result,
    TensorMut, TensorRef, Workspace,
};

use super::layout::{
    check_operand, check_select, contig_shape, eq_by_key, spec, unary_in_place_form,
    variant_index, ContigShape, In, MapKernels, Out,
};
use crate::checks::{check_alias, Extent};
use crate::kernel_sources;
use crate::{Backward, Plan};

/// A pointwise unary function, with its parameters where it has some.
///
/// Each op follows the PyTorch function named in its doc for NaN, the
/// infinities, signed zeros, domain edges and the gradient at kinks (the
/// formula of `tools/autograd/derivatives.yaml` or the CUDA backward kernel
/// autograd runs); `kernels/elementwise/unary.cu` has the same table.
/// Ops whose gradient PyTorch defines as zero (`floor`, `sign`, ...) write
/// zeros, whatever `dy` holds.
///
/// Parameters reach the kernel as arguments, so one compiled module serves
/// every value. They are rounded as PyTorch rounds them: to the compute
/// type (f32 for f16, bf16 and f32; f64 for f64), and first to the element
/// type for `softshrink`, `hardshrink`, `threshold` and `nan_to_num`.
#[derive(Copy, Clone, Debug)]
#[non_exhaustive]
pub enum UnaryOp {
    /// `max(x, 0)`; NaN propagates. Gradient `x <= 0 ? 0 : 1`.
    Relu,
    /// `x/2 * (1 + erf(x/sqrt(2)))` (PyTorch `gelu`, approximate='none').
    /// Gradient `Phi(x) + x phi(x)` (the standard normal CDF and density).
    GeluErf,
    /// `x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))` (approximate='tanh').
    /// Gradient `(1 + t)/2 + x (1 - t^2) k (1 + 3c x^2) / 2`, with
    /// `t` the tanh, `k = sqrt(2/pi)`, `c = 0.044715`.
    GeluTanh,
    /// `x * sigmoid(x)`. Gradient `s (1 + x (1 - s))`, `s = sigmoid(x)`.
    Silu,
    /// `1 / (1 + exp(-x))`. Gradient `s (1 - s)`.
    Sigmoid,
    /// `tanh(x)`. Gradient `1 - tanh(x)^2`.
    Tanh,
    /// `exp(x)`. Gradient `exp(x)`.
    Exp,
    /// `-x`. Gradient `-1`.
    Neg,
    /// `torch.abs`: `|x|`. Gradient `sign(x)` (0 at 0 and at NaN).
    Abs,
    /// `torch.sign`: -1, 0 or 1; 0 for ±0 and NaN (PyTorch's
    /// `(0 < x) - (x < 0)`). Gradient zero.
    Sign,
    /// `torch.sgn`, the same as `sign` for real inputs. Gradient zero.
    Sgn,
    /// `torch.reciprocal`: `1/x`. Gradient `-1/x^2`.
    Reciprocal,
    /// `torch.sqrt`; NaN below 0, `sqrt(-0) = -0`. Gradient `1 / (2 sqrt(x))`.
    Sqrt,
    /// `torch.rsqrt`: `1/sqrt(x)`. Gradient `-rsqrt(x)^3 / 2`.
    Rsqrt,
    /// `torch.square`: `x^2`. Gradient `2x`.
    Square,
    /// `torch.exp2`: `2^x`. Gradient `2^x ln 2`.
    Exp2,
    /// `torch.expm1`: `e^x - 1`. Gradient `e^x`.
    Expm1,
    /// `torch.log`; NaN below 0, -inf at ±0. Gradient `1/x` (for every
    /// `x`, as PyTorch's `grad / x`).
    Log,
    /// `torch.log2`. Gradient `1 / (x ln 2)`.
    Log2,
    /// `torch.log10`. Gradient `1 / (x ln 10)`.
    Log10,
    /// `torch.log1p`: `ln(1 + x)`. Gradient `1 / (1 + x)`.
    Log1p,
    /// `torch.sin`. Gradient `cos(x)`.
    Sin,
    /// `torch.cos`. Gradient `-sin(x)`.
    Cos,
    /// `torch.tan`. Gradient `1 + tan(x)^2`.
    Tan,
    /// `torch.asin`; NaN outside [-1, 1]. Gradient `1/sqrt(1 - x^2)`
    /// (inf at ±1, NaN outside).
    Asin,
    /// `torch.acos`. Gradient `-1/sqrt(1 - x^2)`.
    Acos,
    /// `torch.atan`. Gradient `1 / (1 + x^2)`.
    Atan,
    /// `torch.sinh`. Gradient `cosh(x)`.
    Sinh,
    /// `torch.cosh`. Gradient `sinh(x)`.
    Cosh,
    /// `torch.asinh`. Gradient `1/sqrt(x^2 + 1)`.
    Asinh,
    /// `torch.acosh`; NaN below 1. Gradient `1/sqrt(x^2 - 1)` (inf at ±1,
    /// NaN inside (-1, 1)).
    Acosh,
    /// `torch.atanh`; ±inf at ±1, NaN outside. Gradient `1 / (1 - x^2)`.
    Atanh,
    /// `torch.erf`. Gradient `2/sqrt(pi) e^(-x^2)`.
    Erf,
    /// `torch.erfc`: `1 - erf(x)`. Gradient `-2/sqrt(pi) e^(-x^2)`.
    Erfc,
    /// `torch.erfinv`; ±inf at ±1, NaN outside. Gradient
    /// `sqrt(pi)/2 e^(erfinv(x)^2)`.
    Erfinv,
    /// `torch.lgamma`: `ln |Gamma(x)|`; +inf at 0, the negative integers
    /// and ±inf. Gradient `digamma(x)`.
    Lgamma,
    /// `torch.digamma`; `-inf` at +0, `+inf` at -0, NaN at the negative
    /// integers. Gradient `polygamma(1, x)` (+inf at the non-positive
    /// integers, where PyTorch's `sin(pi x)` leaves a large finite value).
    Digamma,
    /// `torch.sinc`: `sin(pi x) / (pi x)`, 1 at 0. Gradient
    /// `(cos(pi x) - sinc(x)) / x`, 0 at 0.
    Sinc,
    /// `F.logsigmoid`: `min(x, 0) - ln(1 + e^-|x|)`. Gradient
    /// `1 - sigmoid(x)`.
    LogSigmoid,
    /// `F.softsign`: `x / (1 + |x|)`; NaN at ±inf (`inf/inf`). Gradient
    /// `1 / (1 + |x|)^2`, NaN at ±inf as PyTorch's composite gradient.
    Softsign,
    /// `F.mish`: `x tanh(ln(1 + e^x))`; NaN at -inf. Gradient
    /// `t + x s (1 - t^2)`, `t` the tanh, `s = sigmoid(x)` (NaN at ±inf).
    Mish,
    /// `F.hardswish`: `x min(max(x + 3, 0), 6) / 6`, with PyTorch's f32
    /// constant 1/6 in every dtype; NaN at -inf. Gradient 0 below -3,
    /// `x/3 + 1/2` on [-3, 3], 1 above (and for NaN).
    Hardswish,
    /// `F.hardsigmoid`: `min(max(x + 3, 0), 6) / 6` (PyTorch's f32 1/6).
    /// Gradient `1/6` inside (-3, 3), 0 elsewhere (and for NaN).
    Hardsigmoid,
    /// `F.relu6`: `hardtanh(x, 0, 6)`. Gradient 1 inside (0, 6), 0 at the
    /// ends and outside; `dy` for NaN (`hardtanh_backward`).
    Relu6,
    /// `F.selu`: `scale * elu(x, alpha)` with PyTorch's constants. Gradient
    /// `scale` above 0, `scale alpha e^x` at and below 0; `scale` for NaN.
    Selu,
    /// `F.tanhshrink`: `x - tanh(x)`. Gradient `tanh(x)^2`.
    Tanhshrink,
    /// `torch.floor`. Gradient zero.
    Floor,
    /// `torch.ceil`. Gradient zero.
    Ceil,
    /// `torch.round` (decimals 0): to nearest, ties to even. Gradient zero.
    Round,
    /// `torch.trunc`. Gradient zero.
    Trunc,
    /// `torch.frac`: `x - trunc(x)`; NaN at ±inf. Gradient 1.
    Frac,
    /// `F.leaky_relu(x, negative_slope)`: `x > 0 ? x : x slope`. Gradient
    /// `x > 0 ? 1 : slope` (slope at 0 and for NaN).
    LeakyRelu {
        /// Slope below 0 (PyTorch's default 0.01).
        negative_slope: f64,
    },
    /// `F.elu(x, alpha)`: `x > 0 ? x : alpha (e^x - 1)`. Gradient 1 above
    /// 0, `alpha e^x` at and below 0; 1 for NaN (`elu_backward`).
    Elu {
        /// Scale of the negative part (default 1).
        alpha: f64,
    },
    /// `F.celu(x, alpha)`: `elu` with input scale `1/alpha`:
    /// `x > 0 ? x : alpha (e^(x/alpha) - 1)`. Gradient `e^(x/alpha)` at
    /// and below 0, 1 above and for NaN.
    Celu {
        /// Scale (default 1); not 0.
        alpha: f64,
    },
    /// `F.softplus(x, beta, threshold)`: `x beta > threshold ? x :
    /// ln(1 + e^(x beta)) / beta`. Gradient `x beta > threshold ? 1 :
    /// z / (z + 1)`, `z = e^(x beta)`.
    Softplus {
        /// Default 1; not 0.
        beta: f64,
        /// Default 20.
        threshold: f64,
    },
    /// `F.hardtanh(x, min_val, max_val)`: clamp to `[min_val, max_val]`,
    /// NaN propagates. Gradient 1 strictly inside, 0 at the ends and
    /// outside; `dy` for NaN (`hardtanh_backward`).
    Hardtanh {
        /// Default -1.
        min_val: f64,
        /// Default 1.
        max_val: f64,
    },
    /// `torch.clamp(x, min, max)` with scalar bounds, at least one given:
    /// `min(max(x, min), max)` (so `max` wins when `min > max`), NaN
    /// propagates. Gradient 1 on `[min, max]` (1 at the bounds), 0 outside
    /// and for NaN.
    Clamp {
        /// Lower bound, or none.
        min: Option<f64>,
        /// Upper bound, or none.
        max: Option<f64>,
    },
    /// `torch.logit(x, eps)`: `ln(z / (1 - z))` with `z = x` clamped to
    /// `[eps, 1 - eps]` when `eps` is given. Gradient `1 / (x (1 - x))`;
    /// with `eps` 0 outside `[eps, 1 - eps]`, without it NaN outside
    /// `[0, 1]` (`logit_backward`).
    Logit {
        /// Clamp of the input; none (PyTorch's default) or negative: no
        /// clamp.
        eps: Option<f64>,
    },
    /// `F.softshrink(x, lambd)`: `x - lambd` above `lambd`, `x + lambd`
    /// below `-lambd`, 0 between; NaN propagates. Gradient 0 on
    /// `[-lambd, lambd]`, 1 outside and for NaN.
    Softshrink {
        /// Default 0.5.
        lambd: f64,
    },
    /// `F.hardshrink(x, lambd)`: 0 on `[-lambd, lambd]`, `x` outside.
    /// Gradient as `softshrink`.
    Hardshrink {
        /// Default 0.5.
        lambd: f64,
    },
    /// `F.threshold(x, threshold, value)`: `x <= threshold ? value : x`.
    /// Gradient `x <= threshold ? 0 : 1` (1 for NaN).
    Threshold {
        /// Cut.
        threshold: f64,
        /// Value at and below the cut.
        value: f64,
    },
    /// `torch.nan_to_num(x, nan, posinf, neginf)`: NaN, +inf and -inf
    /// replaced (none: the dtype's largest and lowest finite values).
    /// Gradient 1 where `x` is finite, 0 elsewhere.
    NanToNum {
        /// Replaces NaN (default 0).
        nan: f64,
        /// Replaces +inf, or none.
        posinf: Option<f64>,
        /// Replaces -inf, or none.
        neginf: Option<f64>,
    },
    /// `torch.i0`: the modified Bessel function of the first kind of order
    /// 0, even; NaN at ±inf as PyTorch's (its expansion divides
    /// infinities). Gradient `i1(x)`.
    I0,
    /// `torch.special.i0e`: `i0(x) e^-|x|`, 0 at ±inf. Gradient
    /// `i1e(x) - sgn(x) i0e(x)`.
    I0e,
    /// `torch.special.i1`: order 1, odd, NaN at ±inf (PyTorch's). Gradient
    /// `i0(x) - i1(x) / x`, 0.5 unless `|x|` exceeds the compute type's
    /// epsilon (NaN included, PyTorch's), NaN at ±inf (PyTorch's `inf - inf`); past
    /// f64's range of `i0` (|x| > 713) +inf where PyTorch's f64 gives NaN.
    I1,
    /// `torch.special.i1e`: `i1(x) e^-|x|`, ±0 at ±inf. Gradient
    /// `i0e(x) - i1e(x) (sgn(x) + 1/x)`, 0.5 unless `|x|` exceeds the
    /// compute type's epsilon (NaN included, PyTorch's).
    I1e,
    /// `torch.polygamma(n, x)`, the `n`-th derivative of digamma: `n = 0`
    /// is `digamma`, `n = 1` trigamma (with `digamma`'s gradient's poles),
    /// `n >= 2` `(-1)^(n+1) n! zeta(n + 1, x)` as PyTorch's, `(-1)^(n+1)`
    /// inf at 0, the negative integers and -inf, NaN at +inf (PyTorch's).
    /// Gradient `polygamma(n + 1, x)`.
    Polygamma {
        /// The order, 0 to 4 (others: `InvalidDescriptor`).
        n: u32,
    },
    /// `torch.round(x, decimals)`: with `p = 10^|decimals|`,
    /// `rint(x p) / p`, or `rint(x / p) p` for negative `decimals` (ties to
    /// even), as PyTorch's; `rint` of the exact product (quotient), where
    /// PyTorch rounds it to the compute type first (they differ only
    /// where that rounding lands on a tie). Gradient zero.
    RoundDecimals {
        /// Decimal digits kept (negative: rounds to tens, hundreds, ...).
        decimals: i32,
    },
    /// `torch.pow(x, exponent)` with a scalar exponent, as PyTorch's CUDA
    /// dispatch: 1 for exponent 0 (NaN too), `x` for 1, `sqrt(x)` for 0.5,
    /// `rsqrt(x)` for -0.5, `1/x` for -1 (each on the exponent as given);
    /// then, on the exponent rounded to the element type `e`: `x x` for 2,
    /// `x x x` for 3, `1/(x x)` for -2, else `pow(x, e)` (C's: NaN for a
    /// negative base and a non-integer `e`, `pow(-0, 0.5) = +0` where
    /// `sqrt(-0) = -0`). Gradient `exponent x^(exponent - 1)` (PyTorch's
    /// `pow_backward`, the power by the same dispatch, so 1 where the
    /// exponent is 1, and `rsqrt(-0) = -inf` where it is 1.5), and 0
    /// (whatever `dy` holds) where the exponent is 0.
    PowScalar {
        /// The exponent.
        exponent: f64,
    },
    /// `torch.pow(base, x)` with a scalar base: `pow(b, x)` with the base
    /// rounded to the element type `b` (1 for a base of 1, NaN included).
    /// Gradient `dy (pow(b, x) ln(base))` (PyTorch's
    /// `pow_backward_exponent`, `ln` of the base as given), with
    /// `dy 0` in place of it where the base is 0 and `x >= 0`; so NaN for a
    /// negative base, and `-inf dy` for a zero base and `x < 0`.
    RpowScalar {
        /// The base.
        base: f64,
    },
}

/// Kernel arguments of an op's parameters (`UnaryParams` of unary.cu):
/// each op documents which slots it reads, in its row of the kernel table.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub(crate) struct UnaryParams {
    pub p: [f64; 4],
}

impl UnaryOp {
    /// Every op, in declaration order (the parametrised ones with
    /// PyTorch's defaults, `threshold` with 0.5 and 0, `clamp` with
    /// [-1, 1], `polygamma` with `n = 2`, `round_decimals` with 0,
    /// `pow_scalar` with exponent 2 and `rpow_scalar` with base 2).
    pub const ALL: [UnaryOp; 70] = [
        UnaryOp::Relu,
        UnaryOp::GeluErf,
        UnaryOp::GeluTanh,
        UnaryOp::Silu,
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
        UnaryOp::Exp,
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Sign,
        UnaryOp::Sgn,
        UnaryOp::Reciprocal,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Square,
        UnaryOp::Exp2,
        UnaryOp::Expm1,
        UnaryOp::Log,
        UnaryOp::Log2,
        UnaryOp::Log10,
        UnaryOp::Log1p,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tan,
        UnaryOp::Asin,
        UnaryOp::Acos,
        UnaryOp::Atan,
        UnaryOp::Sinh,
        UnaryOp::Cosh,
        UnaryOp::Asinh,
        UnaryOp::Acosh,
        UnaryOp::Atanh,
        UnaryOp::Erf,
        UnaryOp::Erfc,
        UnaryOp::Erfinv,
        UnaryOp::Lgamma,
        UnaryOp::Digamma,
        UnaryOp::Sinc,
        UnaryOp::LogSigmoid,
        UnaryOp::Softsign,
        UnaryOp::Mish,
        UnaryOp::Hardswish,
        UnaryOp::Hardsigmoid,
        UnaryOp::Relu6,
        UnaryOp::Selu,
        UnaryOp::Tanhshrink,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::Trunc,
        UnaryOp::Frac,
        UnaryOp::LeakyRelu {
            negative_slope: 0.01,
        },
        UnaryOp::Elu { alpha: 1.0 },
        UnaryOp::Celu { alpha: 1.0 },
        UnaryOp::Softplus {
            beta: 1.0,
            threshold: 20.0,
        },
        UnaryOp::Hardtanh {
            min_val: -1.0,
            max_val: 1.0,
        },
        UnaryOp::Clamp {
            min: Some(-1.0),
            max: Some(1.0),
        },
        UnaryOp::Logit { eps: None },
        UnaryOp::Softshrink { lambd: 0.5 },
        UnaryOp::Hardshrink { lambd: 0.5 },
        UnaryOp::Threshold {
            threshold: 0.5,
            value: 0.0,
        },
        UnaryOp::NanToNum {
            nan: 0.0,
            posinf: None,
            neginf: None,
        },
        UnaryOp::I0,
        UnaryOp::I0e,
        UnaryOp::I1,
        UnaryOp::I1e,
        UnaryOp::Polygamma { n: 2 },
        UnaryOp::RoundDecimals { decimals: 0 },
        UnaryOp::PowScalar { exponent: 2.0 },
        UnaryOp::RpowScalar { base: 2.0 },
    ];

    /// True for ops built on exp/erf/tanh, whose math costs about as much as
    /// their memory traffic on 16-bit types.
    pub fn is_transcendental(self) -> bool {
        use UnaryOp as U;
        !matches!(
            self,
            U::Relu
                | U::Exp
                | U::Neg
                | U::Abs
                | U::Sign
                | U::Sgn
                | U::Reciprocal
                | U::Sqrt
                | U::Rsqrt
                | U::Square
                | U::Hardswish
                | U::Hardsigmoid
                | U::Relu6
                | U::Floor
                | U::Ceil
                | U::Round
                | U::RoundDecimals { .. }
                | U::Trunc
                | U::Frac
                | U::LeakyRelu { .. }
                | U::Hardtanh { .. }
                | U::Clamp { .. }
                | U::Softshrink { .. }
                | U::Hardshrink { .. }
                | U::Threshold { .. }
                | U::NanToNum { .. }
        )
    }

    /// Position of the op's kind in [`UnaryOp::ALL`] (`BARACUDA_OP` of the
    /// kernel source), whatever its parameters.
    pub fn index(self) -> u32 {
        variant_index(&Self::ALL, &self)
    }

    /// Kernel-name suffix and op name.
    pub fn name(self) -> &'static str {
        use UnaryOp as U;
        match self {
            U::Relu => "relu",
            U::GeluErf => "gelu_erf",
            U::GeluTanh => "gelu_tanh",
            U::Silu => "silu",
            U::Sigmoid => "sigmoid",
            U::Tanh => "tanh",
            U::Exp => "exp",
            U::Neg => "neg",
            U::Abs => "abs",
            U::Sign => "sign",
            U::Sgn => "sgn",
            U::Reciprocal => "reciprocal",
            U::Sqrt => "sqrt",
            U::Rsqrt => "rsqrt",
            U::Square => "square",
            U::Exp2 => "exp2",
            U::Expm1 => "expm1",
            U::Log => "log",
            U::Log2 => "log2",
            U::Log10 => "log10",
            U::Log1p => "log1p",
            U::Sin => "sin",
            U::Cos => "cos",
            U::Tan => "tan",
            U::Asin => "asin",
            U::Acos => "acos",
            U::Atan => "atan",
            U::Sinh => "sinh",
            U::Cosh => "cosh",
            U::Asinh => "asinh",
            U::Acosh => "acosh",
            U::Atanh => "atanh",
            U::Erf => "erf",
            U::Erfc => "erfc",
            U::Erfinv => "erfinv",
            U::Lgamma => "lgamma",
            U::Digamma => "digamma",
            U::Sinc => "sinc",
            U::LogSigmoid => "logsigmoid",
            U::Softsign => "softsign",
            U::Mish => "mish",
            U::Hardswish => "hardswish",
            U::Hardsigmoid => "hardsigmoid",
            U::Relu6 => "relu6",
            U::Selu => "selu",
            U::Tanhshrink => "tanhshrink",
            U::Floor => "floor",
            U::Ceil => "ceil",
            U::Round => "round",
            U::Trunc => "trunc",
            U::Frac => "frac",
            U::LeakyRelu { .. } => "leaky_relu",
            U::Elu { .. } => "elu",
            U::Celu { .. } => "celu",
            U::Softplus { .. } => "softplus",
            U::Hardtanh { .. } => "hardtanh",
            U::Clamp { .. } => "clamp",
            U::Logit { .. } => "logit",
            U::Softshrink { .. } => "softshrink",
            U::Hardshrink { .. } => "hardshrink",
            U::Threshold { .. } => "threshold",
            U::NanToNum { .. } => "nan_to_num",
            U::I0 => "i0",
            U::I0e => "i0e",
            U::I1 => "i1",
            U::I1e => "i1e",
            U::Polygamma { .. } => "polygamma",
            U::RoundDecimals { .. } => "round_decimals",
            U::PowScalar { .. } => "pow_scalar",
            U::RpowScalar { .. } => "rpow_scalar",
        }
    }

    /// The op's kind and its parameters as bits: what equality and
    /// hashing compare.
    fn key(self) -> (u32, [u64; 3]) {
        (self.index(), self.param_bits())
    }

    /// The op's parameters as bits (0 where it has none), so that a NaN
    /// parameter equals itself.
    fn param_bits(self) -> [u64; 3] {
        let b = |v: f64| v.to_bits();
        // an absent optional value: a NaN payload no f64 argument carries
        let o = |v: Option<f64>| v.map_or(0x7FF8_DEAD_0000_0001, f64::to_bits);
        use UnaryOp as U;
        match self {
            U::LeakyRelu { negative_slope } => [b(negative_slope), 0, 0],
            U::Elu { alpha } | U::Celu { alpha } => [b(alpha), 0, 0],
            U::Softplus { beta, threshold } => [b(beta), b(threshold), 0],
            U::Hardtanh { min_val, max_val } => [b(min_val), b(max_val), 0],
            U::Clamp { min, max } => [o(min), o(max), 0],
            U::Logit { eps } => [o(eps), 0, 0],
            U::Softshrink { lambd } | U::Hardshrink { lambd } => [b(lambd), 0, 0],
            U::Threshold { threshold, value } => [b(threshold), b(value), 0],
            U::NanToNum {
                nan,
                posinf,
                neginf,
            } => [b(nan), o(posinf), o(neginf)],
            U::Polygamma { n } => [u64::from(n), 0, 0],
            U::RoundDecimals { decimals } => [i64::from(decimals) as u64, 0, 0],
            U::PowScalar { exponent } => [b(exponent), 0, 0],
            U::RpowScalar { base } => [b(base), 0, 0],
            _ => [0; 3],
        }
    }

    /// `InvalidDescriptor` for parameters PyTorch rejects: `clamp` without
    /// either bound, a zero `celu` alpha or `softplus` beta; and a
    /// `polygamma` order past 4.
    fn check_params(self) -> Result<()> {
        let bad = |field, value: String, reason| {
            Err(crate::checks::invalid_descriptor(OP, field, value, reason))
        };
        match self {
            UnaryOp::Clamp {
                min: None,
                max: None,
            } => bad("op", "clamp".into(), "clamp needs a min or a max"),
            UnaryOp::Celu { alpha } if alpha == 0.0 => {
                bad("op", format!("celu alpha {alpha}"), "celu's alpha must not be 0")
            }
            UnaryOp::Softplus { beta, .. } if beta == 0.0 => {
                bad("op", format!("softplus beta {beta}"), "softplus's beta must not be 0")
            }
            UnaryOp::Polygamma { n } if n > 4 => {
                bad("op", format!("polygamma n {n}"), "polygamma's n must be 0 to 4")
            }
            _ => Ok(()),
        }
    }

    /// The kernel arguments of the op on element type `T` (see the kernel
    /// table in unary.cu for each op's slots).
    pub(crate) fn kernel_params<T: Element>(self) -> UnaryParams {
        // PyTorch casts these to the element type before the kernel
        let elem = |v: f64| T::from_f64(v).to_f64();
        let (lowest, largest) = largest_finite(T::KIND);
        use UnaryOp as U;
        let p = match self {
            U::LeakyRelu { negative_slope } => [negative_slope, 0.0, 0.0, 0.0],
            // elu_kernel's alpha, scale and input scale
            U::Elu { alpha } => [alpha, 1.0, 1.0, 0.0],
            U::Celu { alpha } => [alpha, 1.0, 1.0 / alpha, 0.0],
            U::Softplus { beta, threshold } => [beta, threshold, 0.0, 0.0],
            U::Hardtanh { min_val, max_val } => [min_val, max_val, 0.0, 0.0],
            U::Clamp { min, max } => [
                min.unwrap_or(f64::NEG_INFINITY),
                max.unwrap_or(f64::INFINITY),
                0.0,
                0.0,
            ],
            U::Logit { eps } => [eps.unwrap_or(-1.0), 0.0, 0.0, 0.0],
            U::Softshrink { lambd } | U::Hardshrink { lambd } => [elem(lambd), 0.0, 0.0, 0.0],
            U::Threshold { threshold, value } => [elem(threshold), elem(value), 0.0, 0.0],
            U::NanToNum {
                nan,
                posinf,
                neginf,
            } => [
                elem(nan),
                posinf.map_or(largest, elem),
                neginf.map_or(lowest, elem),
                0.0,
            ],
            U::Polygamma { n } => [f64::from(n), 0.0, 0.0, 0.0],
            U::RoundDecimals { decimals } => [
                10f64.powi(decimals.abs()),
                f64::from(u8::from(decimals < 0)),
                0.0,
                0.0,
            ],
            // p0 the forward's exponent, p1 the gradient's power's, p2 the
            // exponent (the gradient's factor), p3 the forward's form plus
            // 16 times the gradient's (POW_ZERO_GRAD: zero)
            U::PowScalar { exponent } => {
                let (fw, e_fw) = pow_form(exponent, elem);
                let (bw, e_bw) = if exponent == 0.0 {
                    (POW_ZERO_GRAD, 0.0)
                } else {
                    pow_form(exponent - 1.0, elem)
                };
                [e_fw, e_bw, exponent, f64::from(fw + 16 * bw)]
            }
            // p0 the base rounded to T, p1 ln(base), p2 1 for a zero base,
            // p3 1 for a base of 1 (the forward fills 1)
            U::RpowScalar { base } => [
                elem(base),
                base.ln(),
                f64::from(u8::from(base == 0.0)),
                f64::from(u8::from(base == 1.0)),
            ],
            _ => [0.0; 4],
        };
        UnaryParams { p }
    }
}

/// `pow_scalar`'s gradient form when the exponent is 0: zeros.
const POW_ZERO_GRAD: u32 = 15;

/// How PyTorch's CUDA `pow(x, exponent)` evaluates a scalar exponent
/// (`pow_Tensor_Scalar_out`, then `pow_tensor_scalar_kernel`): the form
/// (`pow_scalar` of unary.cu: 0 ones, 1 `x`, 2 sqrt, 3 rsqrt, 4 `1/x`,
/// 5 `x x`, 6 `x x x`, 7 `1/(x x)`, 8 `pow(x, e)`) and the exponent `e`
/// rounded to the element type by `elem`. The first five compare the
/// exponent as given, the next three its rounding.
pub(crate) fn pow_form(exponent: f64, elem: impl Fn(f64) -> f64) -> (u32, f64) {
    let early = [(0.0, 0), (1.0, 1), (0.5, 2), (-0.5, 3), (-1.0, 4)];
    if let Some(&(_, form)) = early.iter().find(|(v, _)| exponent == *v) {
        return (form, exponent);
    }
    let e = elem(exponent);
    let late = [(2.0, 5), (3.0, 6), (-2.0, 7)];
    let form = late.iter().find(|(v, _)| e == *v).map_or(8, |&(_, f)| f);
    (form, e)
}

/// The lowest and largest finite values of a float element type.
fn largest_finite(kind: ElementKind) -> (f64, f64) {
    let m = match kind {
        ElementKind::F64 => f64::MAX,
        ElementKind::F32 => f64::from(f32::MAX),
        ElementKind::F16 => 65504.0,
        // 0x7F7F: (2 - 2^-7) 2^127
        _ => (2.0 - 2f64.powi(-7)) * 2f64.powi(127),
    };
    (-m, m)
}

eq_by_key!(UnaryOp, key);

/// A unary op over a rank-`N` tensor: a [`UnaryOp`] of [`UnaryPlan`], or
/// a [`UnaryLogicOp`](super::UnaryLogicOp) of
/// [`UnaryLogicPlan`](super::UnaryLogicPlan)
/// ([`UnaryLogicDescriptor`](super::UnaryLogicDescriptor)).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct UnaryDescriptor<const N: usize, Op = UnaryOp> {
    /// The function.
    pub op: Op,
    /// Element type of `x`, and of `y` where the op's output is not bool.
    pub element: ElementKind,
    /// Shape of `x` and `y`.
    pub shape: [usize; N],
}

/// Arguments of [`UnaryPlan`]'s [`Plan::run`]; [`UnaryPlan::run_in_place`]
/// takes one view that is both.
pub struct UnaryArgs<'a, T, const N: usize> {
    /// Input, any strides (0 = broadcast).
    pub x: TensorRef<'a, T, N>,
    /// Output, any non-overlapping strides. It may share memory with `x`
    /// only as the same view (in place).
    pub y: TensorMut<'a, T, N>,
}

/// Arguments of [`UnaryPlan`]'s [`Backward::run_bw`];
/// [`UnaryPlan::run_bw_in_place`] writes `dx` over `dy`.
pub struct UnaryBwArgs<'a, T, const N: usize> {
    /// The forward input.
    pub x: TensorRef<'a, T, N>,
    /// Gradient of the output.
    pub dy: TensorRef<'a, T, N>,
    /// Gradient of the input. It may share memory with `x` or `dy` only as
    /// the same view (in place).
    pub dx: TensorMut<'a, T, N>,
}

/// `y = f(x)` elementwise, and its backward `dx = dy * f'(x)`; `f` and
/// `f'` of each op are in [`UnaryOp`].
///
/// # Shapes
/// `x`, `y`, `dy`, `dx`: `desc.shape`, rank `N <= 8`. No workspace:
/// `workspace_size` and `bw_workspace_size` are 0 and the `workspace`
/// argument is not read.
/// # Layout
/// Any strides; `x` and `dy` may broadcast (stride 0). Contiguous, 16-byte
/// aligned operands take the vectorised kernel; others the strided kernel
/// (64-bit offsets).
/// # Aliasing
/// `y` may be `x` and `dx` may be `x` or `dy`, each as the same view (one
/// thread reads an element before writing it); from safe code through
/// [`UnaryPlan::run_in_place`] and [`UnaryPlan::run_bw_in_place`]. Any
/// other overlap of an output with an input is `InvalidArgument`.
/// # Dtypes
/// f32, f64, f16, bf16; f16/bf16 compute in f32 and round once.
/// Others: `Error::Unsupported`.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND`;
/// `Unsupported` for another dtype or a rank `N > 8`; `InvalidDescriptor`
/// for parameters PyTorch rejects (`clamp` without a bound, a zero `celu`
/// alpha or `softplus` beta) and a `polygamma` order past 4;
/// `PreferenceRejected` when `pref` forces a backend other than
/// `Baracuda`. From `run`, `run_bw` and the in-place forms:
/// `ShapeMismatch` when a view's shape is not `desc.shape`;
/// `ContextMismatch` when a view lives on another context than the
/// stream's; `InvalidArgument` when an output overlaps an input other
/// than in place.
pub struct UnaryPlan<T: Element, const N: usize> {
    desc: UnaryDescriptor<N>,
    sku: KernelSku,
    fw: MapKernels,
    bw: MapKernels,
    /// The op's parameters as the kernels take them.
    params: UnaryParams,
    _t: PhantomData<T>,
}

const OP: &str = "unary";

/// The module of `op`'s kernels on `dtype` (a `BARACUDA_DTYPE` value), and
/// the launch shape it is built for.
pub(crate) fn unary_spec(dtype: u32, op: UnaryOp) -> (ModuleSpec, ContigShape) {
    let shape = contig_shape(op.is_transcendental(), dtype);
    let spec = spec(&kernel_sources::UNARY, dtype, op.index(), shape).define("BARACUDA_OP_NAME", op.name());
    (spec, shape)
}

/// Pointwise ops compute in f32 (f64 for f64), round once, and do not
/// depend on the launch shape.
pub(crate) fn pointwise_precision<T: Element>() -> PrecisionGuarantee {
    PrecisionGuarantee::float(T::KIND, true)
}

impl<T: Element, const N: usize> Plan for UnaryPlan<T, N> {
    type Descriptor = UnaryDescriptor<N>;
    type Args<'a> = UnaryArgs<'a, T, N>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let dt = check_select::<T, N>(OP, desc.element, pref)?;
        pref.check_workspace(OP, 0)?;
        desc.op.check_params()?;
        let (spec, shape) = unary_spec(dt, desc.op);
        let name = desc.op.name();
        Ok(UnaryPlan {
            desc: *desc,
            sku: KernelSku {
                op: format!("unary.{name}"),
                element: T::KIND,
                backend: BackendKind::Baracuda,
                arch: stream.context().device().arch,
                variant: "vec16 contiguous / rank-8 strided".into(),
                precision: pointwise_precision::<T>(),
            },
            fw: MapKernels::load(stream, &spec, "unary_fw", name, shape)?,
            bw: MapKernels::load(stream, &spec, "unary_bw", name, shape)?,
            params: desc.op.kernel_params::<T>(),
            _t: PhantomData,
        })
    }

    fn sku(&self) -> &KernelSku {
        &self.sku
    }

    fn workspace_size(&self) -> usize {
        0
    }

    fn run(&self, stream: &Stream, _workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let shape = &self.desc.shape;
        check_operand(OP, "x", stream, shape, args.x.shape(), args.x.data().ctx_id())?;
        check_operand(OP, "y", stream, shape, args.y.shape(), args.y.data().ctx_id())?;
        check_alias(OP, &Extent::of_mut("y", &args.y), &Extent::of("x", &args.x), true)?;
        let (y, x) = (&args.y, &args.x);
        // SAFETY: both views were bounds-checked at construction and match
        // the plan's shape, and y is disjoint from x or x itself (checked
        // above).
        unsafe {
            self.forward(
                stream,
                (y.data().ptr(), y.strides()),
                (x.data().ptr(), x.strides()),
            )
        }
    }
}

impl<T: Element, const N: usize> UnaryPlan<T, N> {
    unary_in_place_form!();

    /// Launch the forward map `y = f(x)` over the plan's shape.
    ///
    /// # Safety
    /// `y` and `x` are checked views of the plan's shape; `y` is disjoint
    /// from `x` or `x` itself.
    unsafe fn forward(&self, stream: &Stream, y: Out<'_, T>, x: In<'_, T>) -> Result<()> {
        let q = self.params;
        // SAFETY: forwarded from the caller's contract.
        unsafe {
            self.fw.launch_with(OP, stream, &self.desc.shape, &[y], &[x], |a| {
                a.push(q).map(|_| ())
            })
        }
    }

    /// The backward with `dx` written over `dy`: `dy_dx` holds the
    /// gradient of the output on entry and the gradient of the input on
    /// return.
    ///
    /// # Errors
    /// As [`Backward::run_bw`], naming `dy_dx`; `InvalidArgument` when `x`
    /// overlaps `dy_dx` other than as the same view.
    pub fn run_bw_in_place(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        x: TensorRef<'_, T, N>,
        dy_dx: TensorMut<'_, T, N>,
    ) -> Result<()> {
        let shape = &self.desc.shape;
        check_operand(OP, "x", stream, shape, x.shape(), x.data().ctx_id())?;
        check_operand(OP, "dy_dx", stream, shape, dy_dx.shape(), dy_dx.data().ctx_id())?;
        check_alias(OP, &Extent::of_mut("dy_dx", &dy_dx), &Extent::of("x", &x), true)?;
        let (ptr, strides) = (dy_dx.data().ptr(), dy_dx.strides());
        // SAFETY: views bounds-checked at construction, shapes checked
        // above; dx is dy itself and disjoint from x or x itself.
        unsafe {
            self.bw.launch_with(
                OP,
                stream,
                shape,
                &[(ptr, strides)],
                &[(x.data().ptr(), x.strides()), (ptr.as_const(), strides)],
                |a| a.push(self.params).map(|_| ()),
            )
        }
    }
}

impl<T: Element, const N: usize> Backward for UnaryPlan<T, N> {
    type BwArgs<'a> = UnaryBwArgs<'a, T, N>;

    fn run_bw(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let shape = &self.desc.shape;
        check_operand(OP, "x", stream, shape, args.x.shape(), args.x.data().ctx_id())?;
        check_operand(OP, "dy", stream, shape, args.dy.shape(), args.dy.data().ctx_id())?;
        check_operand(OP, "dx", stream, shape, args.dx.shape(), args.dx.data().ctx_id())?;
        let dx = Extent::of_mut("dx", &args.dx);
        check_alias(OP, &dx, &Extent::of("x", &args.x), true)?;
        check_alias(OP, &dx, &Extent::of("dy", &args.dy), true)?;
        // SAFETY: views bounds-checked at construction, shapes checked
        // above; dx is disjoint from x and dy or one of them itself.
        unsafe {
            self.bw.launch_with(
                OP,
                stream,
                shape,
                &[(args.dx.data().ptr(), args.dx.strides())],
                &[
                    (args.x.data().ptr(), args.x.strides()),
                    (args.dy.data().ptr(), args.dy.strides()),
                ],
                |a| a.push(self.params).map(|_| ()),
            )
        }
    }
}

/// Every module of the unary ops.
pub(crate) fn unary_specs() -> Vec<ModuleSpec> {
    (0..4)
        .flat_map(|dt| UnaryOp::ALL.into_iter().map(move |op| unary_spec(dt, op).0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The forms of PyTorch's CUDA `pow(Tensor, Scalar)`: 0, 1, 0.5, -0.5
    /// and -1 compared as given, 2, 3 and -2 after rounding to the element
    /// type; the gradient's power is the exponent less 1, by the same rule.
    #[test]
    fn pow_scalar_forms_follow_pytorch_dispatch() {
        let same = |v: f64| v;
        let f16 = |v: f64| half::f16::from_f64(v).to_f64();
        assert_eq!(pow_form(0.0, same), (0, 0.0));
        assert_eq!(pow_form(1.0, same), (1, 1.0));
        assert_eq!(pow_form(0.5, same), (2, 0.5));
        assert_eq!(pow_form(-0.5, same), (3, -0.5));
        assert_eq!(pow_form(-1.0, same), (4, -1.0));
        assert_eq!(pow_form(2.0, same), (5, 2.0));
        assert_eq!(pow_form(3.0, same), (6, 3.0));
        assert_eq!(pow_form(-2.0, same), (7, -2.0));
        assert_eq!(pow_form(2.5, same), (8, 2.5));
        // 2.0001 is 2 in f16: x * x; 1.00001 is 1 in f16 but not as given
        assert_eq!(pow_form(2.0001, f16), (5, 2.0));
        assert_eq!(pow_form(1.00001, f16), (8, 1.0));
        let q = UnaryOp::PowScalar { exponent: 1.5 }.kernel_params::<f32>().p;
        // forward pow(x, 1.5); gradient 1.5 sqrt(x)
        assert_eq!(q, [1.5, 0.5, 1.5, f64::from(8 + 16 * 2)]);
        let q = UnaryOp::PowScalar { exponent: 0.0 }.kernel_params::<f32>().p;
        assert_eq!(q[3], f64::from(16 * POW_ZERO_GRAD));
        let q = UnaryOp::RpowScalar { base: 0.1 }.kernel_params::<half::f16>().p;
        assert_eq!(q, [f16(0.1), 0.1f64.ln(), 0.0, 0.0]);
        let q = UnaryOp::RpowScalar { base: 0.0 }.kernel_params::<f64>().p;
        assert_eq!(q, [0.0, f64::NEG_INFINITY, 1.0, 0.0]);
        // parameters compare by bits
        assert_eq!(
            UnaryOp::PowScalar { exponent: f64::NAN },
            UnaryOp::PowScalar { exponent: f64::NAN }
        );
        assert_ne!(
            UnaryOp::PowScalar { exponent: 2.0 },
            UnaryOp::RpowScalar { base: 2.0 }
        );
    }
}
