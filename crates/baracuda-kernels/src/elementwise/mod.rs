//! Elementwise ops: pointwise unary and binary maps with broadcasting,
//! forward and backward.
//!
//! One CUDA source per sub-family (`kernels/elementwise/unary.cu`,
//! `binary.cu`), compiled once per dtype with every op in it.

pub mod reference;
mod binary;
mod layout;
mod unary;

pub use binary::{
    BinaryArgs, BinaryBwArgs, BinaryBwInPlaceArgs, BinaryDescriptor, BinaryOp, BinaryPlan,
};
pub use unary::{UnaryArgs, UnaryBwArgs, UnaryDescriptor, UnaryOp, UnaryPlan};

use baracuda_driver::ModuleSpec;

/// Every module the family's plans can request.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    layout::family_specs()
}
