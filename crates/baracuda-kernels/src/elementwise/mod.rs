//! Elementwise ops: pointwise unary, binary and ternary maps with
//! broadcasting, and gated activations, forward and backward; comparisons,
//! logical and bitwise ops and predicates (no gradient).
//!
//! One CUDA source per sub-family (`kernels/elementwise/unary.cu`, which
//! also holds the gated activations, `binary.cu`, `ternary.cu`), compiled
//! once per dtype and op; conversions between element types (`cast.cu`)
//! once per pair of types; fills and eye (`fill.cu`) once per element
//! size; ranges (`range.cu`) per op and type; the logic ops (`logic.cu`)
//! per op and input type.

pub mod reference;
mod binary;
mod cast;
mod fill;
mod gated;
pub(crate) mod layout;
mod logic;
mod promoted_binary;
mod range;
mod reduce_back;
mod ternary;
mod ternary_map;
mod unary;

pub use binary::{
    BinaryArgs, BinaryBwArgs, BinaryBwInPlaceArgs, BinaryDescriptor, BinaryOp, BinaryPlan,
};
pub use cast::{CastArgs, CastBwArgs, CastDescriptor, CastPlan, Fp8Mode, CAST_KINDS};
pub use promoted_binary::{
    promoted_kind, Promote, PromotedBinaryArgs, PromotedBinaryBwArgs, PromotedBinaryDescriptor,
    PromotedBinaryPlan,
};
pub use fill::{fill_value, FillArgs, FillDescriptor, FillPlan};
pub use logic::{
    BinaryLogicArgs, BinaryLogicDescriptor, BinaryLogicOp, BinaryLogicPlan, UnaryLogicArgs,
    UnaryLogicDescriptor, UnaryLogicOp, UnaryLogicPlan, LOGIC_KINDS,
};
pub use range::{
    arange_len, EyeArgs, EyeDescriptor, EyePlan, RangeArgs, RangeDescriptor, RangeOp, RangePlan,
};
pub use gated::{GatedArgs, GatedBwArgs, GatedDescriptor, GatedOp, GatedPlan};
pub use ternary::{
    TernaryArgs, TernaryBwArgs, TernaryDescriptor, TernaryOp, TernaryPlan, WhereArgs, WhereBwArgs,
    WhereDescriptor, WherePlan,
};
pub use unary::{UnaryArgs, UnaryBwArgs, UnaryDescriptor, UnaryOp, UnaryPlan};

use baracuda_driver::ModuleSpec;

/// Every module the family's plans can request.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    let mut v = unary::unary_specs();
    v.extend(binary::binary_specs());
    v.extend(promoted_binary::promoted_binary_specs());
    v.extend(cast::cast_specs());
    v.extend(fill::fill_specs());
    v.extend(range::range_specs());
    v.extend(ternary::ternary_specs());
    v.extend(gated::gated_specs());
    v.extend(logic::logic_specs());
    v
}
