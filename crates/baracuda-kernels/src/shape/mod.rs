//! Shape and layout ops that move data: flip, roll, tril/triu, pad
//! (constant, reflect, replicate, circular), repeat, repeat_interleave,
//! diagonal, diag_embed, diag, unfold, strided slices, cat and stack,
//! forward and backward.
//!
//! One CUDA source (`kernels/shape/shape.cu`) compiled once per dtype:
//! the index-map gather of [`ShapePlan`] (and the accumulating pad
//! backward), the group-map gather of [`LayoutPlan`] (rank-changing ops,
//! and backwards that sum copies), and the batched strided copy of
//! [`CatPlan`] and [`StackPlan`].

pub mod reference;
mod cat;
mod gather;
mod layout;

pub use cat::{
    CatArgs, CatBwArgs, CatDescriptor, CatPlan, StackArgs, StackBwArgs, StackDescriptor,
    StackPlan, CAT_PIECES, CAT_STACK_KINDS,
};
pub use layout::{LayoutArgs, LayoutBwArgs, LayoutDescriptor, LayoutOp, LayoutPlan, Repeats};
pub use gather::{
    IntList, PadMode, ShapeArgs, ShapeBwArgs, ShapeDescriptor, ShapeOp, ShapePlan, INT_LIST_CAP,
};

use baracuda_driver::ModuleSpec;

/// Every module the family's plans can request: the one source per float
/// dtype.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    (0..4).map(gather::shape_spec).collect()
}
