//! Normalization layers: LayerNorm and RMSNorm over a suffix of dims,
//! GroupNorm (and InstanceNorm), BatchNorm and LocalResponseNorm over
//! `[N, C, spatial...]`, forward and backward (dx, dweight, dbias),
//! deterministic.
//!
//! One CUDA source (`kernels/norm/norm.cu`) compiled once per dtype and
//! kind; its block reductions are `kernels/common/reduce.cuh`'s.

mod batch_norm;
#[cfg(test)]
mod fuzz;
mod group_norm;
mod local_response_norm;
pub mod reference;
#[allow(clippy::module_inception)] // the family and its one plan share the name
mod norm;

pub use batch_norm::{BatchNormArgs, BatchNormBwArgs, BatchNormDescriptor, BatchNormPlan};
pub use group_norm::{GroupNormArgs, GroupNormBwArgs, GroupNormDescriptor, GroupNormPlan};
pub use local_response_norm::{
    LocalResponseNormArgs, LocalResponseNormBwArgs, LocalResponseNormDescriptor, LocalResponseNormPlan,
};
pub use norm::{
    LayerNorm, LayerNormPlan, NormArgs, NormBwArgs, NormDescriptor, NormKind, NormPlan, RmsNorm,
    RmsNormPlan,
};

use baracuda_driver::ModuleSpec;

/// Every module the family's plans can request: each kind on each float
/// dtype.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    (0..4)
        .flat_map(|dtype| [0, 1].map(move |kind| norm::spec(dtype, kind)))
        .chain(group_norm::module_specs())
        .chain(batch_norm::module_specs())
        .chain(local_response_norm::module_specs())
        .collect()
}
