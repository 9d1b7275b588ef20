//! The one GPU test binary of baracuda-kernels.
//!
//! Every test is `#[ignore = "needs a CUDA GPU"]`; `scripts/gpu-test.sh`
//! builds this binary in release mode and runs it with `--ignored` on a GPU
//! machine. The op families are driven by the op table (`table.rs`): each
//! row becomes one test that checks every claimed dtype over every sample
//! (forward and backward against the f64 reference), that every other
//! dtype is `Unsupported`, and the row's bad inputs. The elementwise rows
//! are below (their checks in `elementwise.rs`, `ternary.rs` for the
//! ternary ops and `where`, `gated.rs` for the gated activations), and the
//! comparisons, logical and bitwise ops and predicates in `logic.rs`
//! (`logic_*`) and the mixed-dtype binary ops in `promoted_binary.rs`
//! (`binary_promoted_*`); the conv family's (convolution and pooling) are in
//! `conv.rs`, the GEMM family's in `gemm.rs`, the reduce family's in
//! `reduce.rs` (reductions), `var_mean.rs` (var_mean, std_mean),
//! `trace.rs`, `arg_reduce.rs` (index reductions), `logical_reduce.rs`
//! (all, any, count_nonzero) and `scan.rs` (scans), the
//! shape family's (flip, roll, tril/triu, pad, cat, stack) in `shape.rs` and
//! (repeat, repeat_interleave, diagonal, diag_embed, diag, unfold, slice)
//! in `shape/layout.rs`. `reliability.rs` runs every row from many threads at once
//! and, over one exercise per family, shared plans, graph capture, large
//! tensors and faults.

mod arg_reduce;
mod batch_norm;
mod cast;
mod conv;
mod driver;
mod elementwise;
mod fill;
mod gated;
mod gemm;
mod group_norm;
mod gumbel_softmax;
mod harness;
mod local_response_norm;
mod logic;
mod logical_reduce;
mod norm;
mod promoted_binary;
mod range;
mod reduce;
mod reliability;
mod rope;
mod scan;
mod sdpa;
mod shape;
mod softmax;
mod sparsemax;
mod table;
mod ternary;
mod trace;
mod var_mean;

use baracuda_kernels::{BinaryOp, ElementKind, GatedOp, TernaryOp, UnaryOp, CAST_KINDS};
use harness::FLOATS;
use table::{CheckCase, Row};

/// An elementwise row: the check, bad inputs and dtype check of
/// `elementwise.rs` it runs, and the op.
macro_rules! elementwise_row {
    ($name:literal, $check:ident, $bad:ident, $unsupported:ident, $op:expr) => {
        &CheckCase {
            name: $name,
            dtypes: FLOATS,
            check: |k| with_element!(k, T => elementwise::$check::<T>($op)),
            bad_inputs: elementwise::$bad,
            unsupported: elementwise::$unsupported,
        }
    };
}

macro_rules! unary_row {
    ($name:literal, $op:expr) => {
        elementwise_row!($name, check_unary, unary_bad_inputs, unary_unsupported, $op)
    };
}

macro_rules! binary_row {
    ($name:literal, $op:expr) => {
        elementwise_row!(
            $name,
            check_binary,
            binary_bad_inputs,
            binary_unsupported,
            $op
        )
    };
}

/// A row of `ternary.rs` (ternary and where ops) or `gated.rs`: its check
/// of one dtype, bad inputs and dtype check, in module `$m`.
macro_rules! module_row {
    ($m:ident, $name:literal, $check:ident, $bad:ident, $unsupported:ident $(, $op:expr)?) => {
        &CheckCase {
            name: $name,
            dtypes: FLOATS,
            check: |k| with_element!(k, T => $m::$check::<T>($($op)?)),
            bad_inputs: $m::$bad,
            unsupported: $m::$unsupported,
        }
    };
}

macro_rules! ternary_row {
    ($name:literal, $op:expr) => {
        module_row!(
            ternary,
            $name,
            check_ternary,
            ternary_bad_inputs,
            ternary_unsupported,
            $op
        )
    };
}

macro_rules! gated_row {
    ($name:literal, $op:expr) => {
        module_row!(
            gated,
            $name,
            check_gated,
            gated_bad_inputs,
            gated_unsupported,
            $op
        )
    };
}

/// The elementwise rows of the op table: one per op.
static TABLE: &[&dyn Row] = &[
    unary_row!("unary_relu", UnaryOp::Relu),
    unary_row!("unary_gelu_erf", UnaryOp::GeluErf),
    unary_row!("unary_gelu_tanh", UnaryOp::GeluTanh),
    unary_row!("unary_silu", UnaryOp::Silu),
    unary_row!("unary_sigmoid", UnaryOp::Sigmoid),
    unary_row!("unary_tanh", UnaryOp::Tanh),
    unary_row!("unary_exp", UnaryOp::Exp),
    unary_row!("unary_neg", UnaryOp::Neg),
    unary_row!("unary_abs", UnaryOp::Abs),
    unary_row!("unary_sign", UnaryOp::Sign),
    unary_row!("unary_sgn", UnaryOp::Sgn),
    unary_row!("unary_reciprocal", UnaryOp::Reciprocal),
    unary_row!("unary_sqrt", UnaryOp::Sqrt),
    unary_row!("unary_rsqrt", UnaryOp::Rsqrt),
    unary_row!("unary_square", UnaryOp::Square),
    unary_row!("unary_exp2", UnaryOp::Exp2),
    unary_row!("unary_expm1", UnaryOp::Expm1),
    unary_row!("unary_log", UnaryOp::Log),
    unary_row!("unary_log2", UnaryOp::Log2),
    unary_row!("unary_log10", UnaryOp::Log10),
    unary_row!("unary_log1p", UnaryOp::Log1p),
    unary_row!("unary_sin", UnaryOp::Sin),
    unary_row!("unary_cos", UnaryOp::Cos),
    unary_row!("unary_tan", UnaryOp::Tan),
    unary_row!("unary_asin", UnaryOp::Asin),
    unary_row!("unary_acos", UnaryOp::Acos),
    unary_row!("unary_atan", UnaryOp::Atan),
    unary_row!("unary_sinh", UnaryOp::Sinh),
    unary_row!("unary_cosh", UnaryOp::Cosh),
    unary_row!("unary_asinh", UnaryOp::Asinh),
    unary_row!("unary_acosh", UnaryOp::Acosh),
    unary_row!("unary_atanh", UnaryOp::Atanh),
    unary_row!("unary_erf", UnaryOp::Erf),
    unary_row!("unary_erfc", UnaryOp::Erfc),
    unary_row!("unary_erfinv", UnaryOp::Erfinv),
    unary_row!("unary_lgamma", UnaryOp::Lgamma),
    unary_row!("unary_digamma", UnaryOp::Digamma),
    unary_row!("unary_sinc", UnaryOp::Sinc),
    unary_row!("unary_logsigmoid", UnaryOp::LogSigmoid),
    unary_row!("unary_softsign", UnaryOp::Softsign),
    unary_row!("unary_mish", UnaryOp::Mish),
    unary_row!("unary_hardswish", UnaryOp::Hardswish),
    unary_row!("unary_hardsigmoid", UnaryOp::Hardsigmoid),
    unary_row!("unary_relu6", UnaryOp::Relu6),
    unary_row!("unary_selu", UnaryOp::Selu),
    unary_row!("unary_tanhshrink", UnaryOp::Tanhshrink),
    unary_row!("unary_floor", UnaryOp::Floor),
    unary_row!("unary_ceil", UnaryOp::Ceil),
    unary_row!("unary_round", UnaryOp::Round),
    unary_row!("unary_trunc", UnaryOp::Trunc),
    unary_row!("unary_frac", UnaryOp::Frac),
    unary_row!(
        "unary_leaky_relu",
        UnaryOp::LeakyRelu {
            negative_slope: 0.2
        }
    ),
    unary_row!("unary_elu", UnaryOp::Elu { alpha: 1.5 }),
    unary_row!("unary_celu", UnaryOp::Celu { alpha: 0.75 }),
    unary_row!(
        "unary_softplus",
        UnaryOp::Softplus {
            beta: 2.0,
            threshold: 4.0
        }
    ),
    unary_row!(
        "unary_softplus_default",
        UnaryOp::Softplus {
            beta: 1.0,
            threshold: 20.0
        }
    ),
    unary_row!(
        "unary_hardtanh",
        UnaryOp::Hardtanh {
            min_val: -1.5,
            max_val: 2.0
        }
    ),
    unary_row!(
        "unary_clamp",
        UnaryOp::Clamp {
            min: Some(-1.0),
            max: Some(2.0)
        }
    ),
    unary_row!(
        "unary_clamp_min",
        UnaryOp::Clamp {
            min: Some(-0.5),
            max: None
        }
    ),
    unary_row!(
        "unary_clamp_max",
        UnaryOp::Clamp {
            min: None,
            max: Some(0.25)
        }
    ),
    unary_row!("unary_logit", UnaryOp::Logit { eps: None }),
    unary_row!("unary_logit_eps", UnaryOp::Logit { eps: Some(0.125) }),
    unary_row!("unary_softshrink", UnaryOp::Softshrink { lambd: 0.75 }),
    unary_row!("unary_hardshrink", UnaryOp::Hardshrink { lambd: 1.25 }),
    unary_row!(
        "unary_threshold",
        UnaryOp::Threshold {
            threshold: -1.0,
            value: 2.0
        }
    ),
    unary_row!(
        "unary_nan_to_num",
        UnaryOp::NanToNum {
            nan: 0.0,
            posinf: None,
            neginf: None
        }
    ),
    unary_row!(
        "unary_nan_to_num_values",
        UnaryOp::NanToNum {
            nan: 1.5,
            posinf: Some(100.0),
            neginf: Some(-1e6)
        }
    ),
    unary_row!("unary_i0", UnaryOp::I0),
    unary_row!("unary_i0e", UnaryOp::I0e),
    unary_row!("unary_i1", UnaryOp::I1),
    unary_row!("unary_i1e", UnaryOp::I1e),
    unary_row!("unary_polygamma_0", UnaryOp::Polygamma { n: 0 }),
    unary_row!("unary_polygamma_1", UnaryOp::Polygamma { n: 1 }),
    unary_row!("unary_polygamma_2", UnaryOp::Polygamma { n: 2 }),
    unary_row!("unary_polygamma_3", UnaryOp::Polygamma { n: 3 }),
    unary_row!("unary_polygamma_4", UnaryOp::Polygamma { n: 4 }),
    unary_row!(
        "unary_round_decimals",
        UnaryOp::RoundDecimals { decimals: 2 }
    ),
    unary_row!(
        "unary_round_decimals_neg",
        UnaryOp::RoundDecimals { decimals: -1 }
    ),
    unary_row!("unary_pow_scalar", UnaryOp::PowScalar { exponent: 2.5 }),
    unary_row!(
        "unary_pow_scalar_sqrt",
        UnaryOp::PowScalar { exponent: 0.5 }
    ),
    unary_row!(
        "unary_pow_scalar_rsqrt",
        UnaryOp::PowScalar { exponent: -0.5 }
    ),
    unary_row!(
        "unary_pow_scalar_three_halves",
        UnaryOp::PowScalar { exponent: 1.5 }
    ),
    unary_row!(
        "unary_pow_scalar_cube",
        UnaryOp::PowScalar { exponent: 3.0 }
    ),
    unary_row!(
        "unary_pow_scalar_inv_square",
        UnaryOp::PowScalar { exponent: -2.0 }
    ),
    unary_row!(
        "unary_pow_scalar_zero",
        UnaryOp::PowScalar { exponent: 0.0 }
    ),
    unary_row!("unary_rpow_scalar", UnaryOp::RpowScalar { base: 2.0 }),
    unary_row!("unary_rpow_scalar_zero", UnaryOp::RpowScalar { base: 0.0 }),
    unary_row!("unary_rpow_scalar_half", UnaryOp::RpowScalar { base: 0.5 }),
    binary_row!("binary_add", BinaryOp::Add),
    binary_row!("binary_sub", BinaryOp::Sub),
    binary_row!("binary_mul", BinaryOp::Mul),
    binary_row!("binary_div", BinaryOp::Div),
    binary_row!("binary_maximum", BinaryOp::Maximum),
    binary_row!("binary_minimum", BinaryOp::Minimum),
    binary_row!("binary_atan2", BinaryOp::Atan2),
    binary_row!("binary_hypot", BinaryOp::Hypot),
    binary_row!("binary_copysign", BinaryOp::Copysign),
    binary_row!("binary_pow", BinaryOp::Pow),
    binary_row!("binary_fmod", BinaryOp::Fmod),
    binary_row!("binary_remainder", BinaryOp::Remainder),
    binary_row!("binary_xlogy", BinaryOp::Xlogy),
    binary_row!("binary_logaddexp", BinaryOp::Logaddexp),
    binary_row!("binary_logaddexp2", BinaryOp::Logaddexp2),
    binary_row!("binary_fmax", BinaryOp::Fmax),
    binary_row!("binary_fmin", BinaryOp::Fmin),
    binary_row!("binary_xlog1py", BinaryOp::Xlog1py),
    binary_row!("binary_heaviside", BinaryOp::Heaviside),
    binary_row!("binary_div_floor", BinaryOp::DivFloor),
    binary_row!("binary_div_trunc", BinaryOp::DivTrunc),
    binary_row!("binary_nextafter", BinaryOp::Nextafter),
    binary_row!("binary_add_alpha", BinaryOp::AddAlpha { alpha: 2.5 }),
    binary_row!("binary_sub_alpha", BinaryOp::SubAlpha { alpha: -0.75 }),
    binary_row!("binary_prelu", BinaryOp::Prelu),
    ternary_row!("ternary_lerp", TernaryOp::Lerp),
    ternary_row!("ternary_addcmul", TernaryOp::Addcmul { value: 0.5 }),
    ternary_row!("ternary_addcdiv", TernaryOp::Addcdiv { value: -1.5 }),
    ternary_row!("ternary_clamp", TernaryOp::Clamp),
    module_row!(
        ternary,
        "ternary_where",
        check_where,
        where_bad_inputs,
        where_unsupported
    ),
    gated_row!("gated_glu", GatedOp::Glu),
    gated_row!("gated_swiglu", GatedOp::Swiglu),
    gated_row!("gated_geglu_erf", GatedOp::GegluErf),
    gated_row!("gated_geglu_tanh", GatedOp::GegluTanh),
    gated_row!("gated_reglu", GatedOp::Reglu),
    &CheckCase {
        name: "cast",
        dtypes: &CAST_KINDS,
        check: cast::check_cast,
        bad_inputs: cast::cast_bad_inputs,
        unsupported: cast::cast_unsupported,
    },
    &CheckCase {
        name: "fill",
        dtypes: &ElementKind::ALL,
        check: fill::check_fill,
        bad_inputs: fill::fill_bad_inputs,
        unsupported: fill::fill_unsupported,
    },
    &CheckCase {
        name: "arange",
        dtypes: &range::RANGE_KINDS,
        check: range::check_arange,
        bad_inputs: range::range_bad_inputs,
        unsupported: range::arange_unsupported,
    },
    &CheckCase {
        name: "linspace",
        dtypes: &range::RANGE_KINDS,
        check: range::check_linspace,
        bad_inputs: range::range_bad_inputs,
        unsupported: range::linspace_unsupported,
    },
    &CheckCase {
        name: "logspace",
        dtypes: range::RANGE_KINDS.split_at(4).0,
        check: range::check_logspace,
        bad_inputs: range::range_bad_inputs,
        unsupported: range::logspace_unsupported,
    },
    &CheckCase {
        name: "eye",
        dtypes: &ElementKind::ALL,
        check: range::check_eye,
        bad_inputs: range::eye_bad_inputs,
        unsupported: range::eye_unsupported,
    },
];

crate::table_tests!(
    TABLE;
    unary_relu,
    unary_gelu_erf,
    unary_gelu_tanh,
    unary_silu,
    unary_sigmoid,
    unary_tanh,
    unary_exp,
    unary_neg,
    unary_abs,
    unary_sign,
    unary_sgn,
    unary_reciprocal,
    unary_sqrt,
    unary_rsqrt,
    unary_square,
    unary_exp2,
    unary_expm1,
    unary_log,
    unary_log2,
    unary_log10,
    unary_log1p,
    unary_sin,
    unary_cos,
    unary_tan,
    unary_asin,
    unary_acos,
    unary_atan,
    unary_sinh,
    unary_cosh,
    unary_asinh,
    unary_acosh,
    unary_atanh,
    unary_erf,
    unary_erfc,
    unary_erfinv,
    unary_lgamma,
    unary_digamma,
    unary_sinc,
    unary_logsigmoid,
    unary_softsign,
    unary_mish,
    unary_hardswish,
    unary_hardsigmoid,
    unary_relu6,
    unary_selu,
    unary_tanhshrink,
    unary_floor,
    unary_ceil,
    unary_round,
    unary_trunc,
    unary_frac,
    unary_leaky_relu,
    unary_elu,
    unary_celu,
    unary_softplus,
    unary_softplus_default,
    unary_hardtanh,
    unary_clamp,
    unary_clamp_min,
    unary_clamp_max,
    unary_logit,
    unary_logit_eps,
    unary_softshrink,
    unary_hardshrink,
    unary_threshold,
    unary_nan_to_num,
    unary_nan_to_num_values,
    unary_i0,
    unary_i0e,
    unary_i1,
    unary_i1e,
    unary_polygamma_0,
    unary_polygamma_1,
    unary_polygamma_2,
    unary_polygamma_3,
    unary_polygamma_4,
    unary_round_decimals,
    unary_round_decimals_neg,
    unary_pow_scalar,
    unary_pow_scalar_sqrt,
    unary_pow_scalar_rsqrt,
    unary_pow_scalar_three_halves,
    unary_pow_scalar_cube,
    unary_pow_scalar_inv_square,
    unary_pow_scalar_zero,
    unary_rpow_scalar,
    unary_rpow_scalar_zero,
    unary_rpow_scalar_half,
    binary_add,
    binary_sub,
    binary_mul,
    binary_div,
    binary_maximum,
    binary_minimum,
    binary_atan2,
    binary_hypot,
    binary_copysign,
    binary_pow,
    binary_fmod,
    binary_remainder,
    binary_xlogy,
    binary_logaddexp,
    binary_logaddexp2,
    binary_fmax,
    binary_fmin,
    binary_xlog1py,
    binary_heaviside,
    binary_div_floor,
    binary_div_trunc,
    binary_nextafter,
    binary_add_alpha,
    binary_sub_alpha,
    binary_prelu,
    ternary_lerp,
    ternary_addcmul,
    ternary_addcdiv,
    ternary_clamp,
    ternary_where,
    gated_glu,
    gated_swiglu,
    gated_geglu_erf,
    gated_geglu_tanh,
    gated_reglu,
    cast,
    fill,
    arange,
    linspace,
    logspace,
    eye,
);

/// Every unary case of the reference (what the goldens and the
/// finite-difference test check) has its row, `unary_<case>`, and so every
/// binary case (`binary_<case>`), ternary case (`ternary_<case>`) and gated
/// op (`gated_<name>`).
#[test]
fn every_unary_case_has_a_row() {
    let reference = baracuda_kernels::reference::elementwise::unary_cases();
    let binary = baracuda_kernels::reference::elementwise::binary_cases();
    let ternary = baracuda_kernels::reference::elementwise::ternary_cases();
    let rows = reference
        .iter()
        .map(|(name, _)| format!("unary_{name}"))
        .chain(binary.iter().map(|(name, _)| format!("binary_{name}")))
        .chain(ternary.iter().map(|(name, _)| format!("ternary_{name}")))
        .chain(GatedOp::ALL.iter().map(|op| format!("gated_{}", op.name())));
    for row in rows {
        assert!(TABLE.iter().any(|r| r.name() == row), "no row {row}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn elementwise_64bit_offsets() {
    elementwise::check_64bit_offsets().unwrap();
}

/// Every family's rows of the op table, by family name: what the
/// reliability tests (`reliability.rs`) iterate over.
pub(crate) static FAMILY_ROWS: &[(&str, &[&dyn Row])] = &[
    ("elementwise", TABLE),
    ("elementwise", logic::ROWS),
    ("elementwise", promoted_binary::ROWS),
    ("conv", conv::ROWS),
    ("gemm", gemm::ROWS),
    ("reduce", reduce::ROWS),
    ("reduce", arg_reduce::ROWS),
    ("reduce", logical_reduce::ROWS),
    ("reduce", scan::ROWS),
    ("reduce", var_mean::ROWS),
    ("reduce", trace::ROWS),
    ("softmax", softmax::ROWS),
    ("softmax", gumbel_softmax::ROWS),
    ("softmax", sparsemax::ROWS),
    ("norm", norm::ROWS),
    ("attention", rope::ROWS),
    ("attention", sdpa::ROWS),
    ("shape", shape::ROWS),
];

#[test]
#[ignore = "needs a CUDA GPU"]
fn elementwise_in_place() {
    for &kind in FLOATS {
        with_float!(kind, T => elementwise::check_in_place::<T>()).unwrap();
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn elementwise_rejected_aliases() {
    elementwise::check_rejected_aliases().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn elementwise_pairwise_sums() {
    elementwise::check_pairwise_sums().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn reduce_64bit_offsets() {
    reduce::check_64bit().unwrap();
}

/// Registered families whose GPU tests are not rows of the op table yet,
/// each with the reason: a gap written down, not skipped.
const NOT_IN_TABLE: &[(&str, &str)] = &[];

/// Every family registered in `baracuda_kernels::FAMILIES` has rows in the
/// op table, or is listed in [`NOT_IN_TABLE`] with its reason (and then
/// has none).
#[test]
fn every_registered_family_has_table_rows() {
    for family in baracuda_kernels::FAMILIES {
        let n = FAMILY_ROWS
            .iter()
            .find(|(name, _)| *name == family.name)
            .map_or(0, |r| r.1.len());
        let gap = NOT_IN_TABLE.iter().find(|(name, _)| *name == family.name);
        match (n, gap) {
            (0, None) => panic!("family {} has no op-table rows", family.name),
            (_, Some((name, why))) if n > 0 => {
                panic!("{name} has {n} rows but is listed as missing ({why})")
            }
            _ => {}
        }
    }
}
