//! The one GPU test binary of baracuda-kernels.
//!
//! Every test is `#[ignore = "needs a CUDA GPU"]`; `scripts/gpu-test.sh`
//! builds this binary in release mode and runs it with `--ignored` on a GPU
//! machine. The op families are driven by the op table (`table.rs`): each
//! row becomes one test that checks every claimed dtype over every sample
//! (forward and backward against the f64 reference), that every other
//! dtype is `Unsupported`, and the row's bad inputs. The elementwise rows
//! are below; the conv family's (convolution and pooling) are in
//! `conv.rs`, the GEMM family's in `gemm.rs`, the reduce family's in
//! `reduce.rs` (reductions), `arg_reduce.rs` (index reductions),
//! `logical_reduce.rs` (all, any, count_nonzero) and `scan.rs` (scans). `reliability.rs` runs every row from many threads at once
//! and, over one exercise per family, shared plans, graph capture, large
//! tensors and faults.

mod arg_reduce;
mod cast;
mod conv;
mod driver;
mod elementwise;
mod gemm;
mod group_norm;
mod harness;
mod logical_reduce;
mod norm;
mod reduce;
mod reliability;
mod rope;
mod scan;
mod sdpa;
mod softmax;
mod table;

use baracuda_kernels::{BinaryOp, UnaryOp, CAST_KINDS};
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
    binary_row!("binary_add", BinaryOp::Add),
    binary_row!("binary_sub", BinaryOp::Sub),
    binary_row!("binary_mul", BinaryOp::Mul),
    binary_row!("binary_div", BinaryOp::Div),
    binary_row!("binary_maximum", BinaryOp::Maximum),
    binary_row!("binary_minimum", BinaryOp::Minimum),
    &CheckCase {
        name: "cast",
        dtypes: &CAST_KINDS,
        check: cast::check_cast,
        bad_inputs: cast::cast_bad_inputs,
        unsupported: cast::cast_unsupported,
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
    binary_add,
    binary_sub,
    binary_mul,
    binary_div,
    binary_maximum,
    binary_minimum,
    cast,
);

#[test]
#[ignore = "needs a CUDA GPU"]
fn elementwise_64bit_offsets() {
    elementwise::check_64bit_offsets().unwrap();
}

/// Every family's rows of the op table, by family name: what the
/// reliability tests (`reliability.rs`) iterate over.
pub(crate) static FAMILY_ROWS: &[(&str, &[&dyn Row])] = &[
    ("elementwise", TABLE),
    ("conv", conv::ROWS),
    ("gemm", gemm::ROWS),
    ("reduce", reduce::ROWS),
    ("reduce", arg_reduce::ROWS),
    ("reduce", logical_reduce::ROWS),
    ("reduce", scan::ROWS),
    ("softmax", softmax::ROWS),
    ("norm", norm::ROWS),
    ("attention", rope::ROWS),
    ("attention", sdpa::ROWS),
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
