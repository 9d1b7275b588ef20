//! Elementwise ops: pointwise unary and binary maps with broadcasting,
//! forward and backward.
//!
//! One CUDA source per sub-family (`kernels/elementwise/unary.cu`,
//! `binary.cu`), compiled once per dtype and op; conversions between
//! element types (`cast.cu`) once per pair of types; fills and eye
//! (`fill.cu`) once per element size; ranges (`range.cu`) per op and type.

pub mod reference;
mod binary;
mod cast;
mod fill;
pub(crate) mod layout;
mod range;
mod unary;

pub use binary::{
    BinaryArgs, BinaryBwArgs, BinaryBwInPlaceArgs, BinaryDescriptor, BinaryOp, BinaryPlan,
};
pub use cast::{CastArgs, CastBwArgs, CastDescriptor, CastPlan, Fp8Mode, CAST_KINDS};
pub use fill::{fill_value, FillArgs, FillDescriptor, FillPlan};
pub use range::{
    arange_len, EyeArgs, EyeDescriptor, EyePlan, RangeArgs, RangeDescriptor, RangeOp, RangePlan,
};
pub use unary::{UnaryArgs, UnaryBwArgs, UnaryDescriptor, UnaryOp, UnaryPlan};

use baracuda_driver::ModuleSpec;

/// Every module the family's plans can request.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    let mut v = layout::family_specs();
    v.extend(cast::cast_specs());
    v.extend(fill::fill_specs());
    v.extend(range::range_specs());
    v
}
