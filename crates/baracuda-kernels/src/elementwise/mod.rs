//! Elementwise ops: pointwise unary and binary maps with broadcasting,
//! forward and backward.
//!
//! One CUDA source per sub-family (`kernels/elementwise/unary.cu`,
//! `binary.cu`), compiled once per dtype and op; conversions between
//! element types (`cast.cu`) once per pair of types.

pub mod reference;
mod binary;
mod cast;
pub(crate) mod layout;
mod unary;

pub use binary::{
    BinaryArgs, BinaryBwArgs, BinaryBwInPlaceArgs, BinaryDescriptor, BinaryOp, BinaryPlan,
};
pub use cast::{CastArgs, CastBwArgs, CastDescriptor, CastPlan, Fp8Mode, CAST_KINDS};
pub use unary::{UnaryArgs, UnaryBwArgs, UnaryDescriptor, UnaryOp, UnaryPlan};

use baracuda_driver::ModuleSpec;

/// Every module the family's plans can request.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    let mut v = layout::family_specs();
    v.extend(cast::cast_specs());
    v
}
