//! The one GPU test binary of baracuda-kernels.
//!
//! Every test is `#[ignore = "needs a CUDA GPU"]`; `scripts/gpu-test.sh`
//! builds this binary in release mode and runs it with `--ignored` on a GPU
//! machine. The elementwise family is driven by the op table below: each
//! row becomes one test that checks every claimed dtype over every sample
//! (forward and backward against the f64 reference), that every other
//! dtype is `Unsupported`, and the row's bad inputs.

mod conv;
mod driver;
mod elementwise;
mod gemm;
mod harness;

use baracuda_kernels::{BinaryOp, UnaryOp};
use harness::{run_case, OpCase};

macro_rules! unary_row {
    ($name:literal, $op:expr) => {
        OpCase {
            name: $name,
            dtypes: elementwise::FLOATS,
            check: |k| with_element!(k, T => elementwise::check_unary::<T>($op)),
            bad_inputs: elementwise::unary_bad_inputs,
            unsupported: elementwise::unary_unsupported,
        }
    };
}

macro_rules! binary_row {
    ($name:literal, $op:expr) => {
        OpCase {
            name: $name,
            dtypes: elementwise::FLOATS,
            check: |k| with_element!(k, T => elementwise::check_binary::<T>($op)),
            bad_inputs: elementwise::binary_bad_inputs,
            unsupported: elementwise::binary_unsupported,
        }
    };
}

/// The op table: one row per plan family member.
static TABLE: &[OpCase] = &[
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
];

fn row(name: &str) -> &'static OpCase {
    TABLE
        .iter()
        .find(|c| c.name == name)
        .expect("a table row of that name")
}

macro_rules! table_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            #[ignore = "needs a CUDA GPU"]
            fn $name() {
                run_case(row(stringify!($name)));
            }
        )*

        #[test]
        fn every_table_row_has_a_test() {
            let names = [$(stringify!($name)),*];
            for case in TABLE {
                assert!(names.contains(&case.name), "row {} has no test", case.name);
            }
            assert_eq!(names.len(), TABLE.len());
        }
    };
}

table_tests!(
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
);

#[test]
#[ignore = "needs a CUDA GPU"]
fn elementwise_64bit_offsets() {
    elementwise::check_64bit_offsets().unwrap();
}
