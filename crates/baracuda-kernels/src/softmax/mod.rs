//! Softmax, log-softmax and softmin along any one dim of a strided tensor,
//! forward and backward, deterministic.
//!
//! One CUDA source (`kernels/softmax/softmax.cu`) compiled once per dtype
//! and op; its group reductions come from `kernels/common/reduce.cuh`.

pub mod reference;
#[cfg(test)]
mod fuzz;
#[allow(clippy::module_inception)] // the family and its one plan share the name
mod softmax;

pub use softmax::{SoftmaxArgs, SoftmaxBwArgs, SoftmaxDescriptor, SoftmaxOp, SoftmaxPlan};

use baracuda_driver::ModuleSpec;

/// Every module the family's plans can request: each op on each float
/// dtype.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    (0..4)
        .flat_map(|dtype| SoftmaxOp::ALL.map(move |op| softmax::spec(dtype, op)))
        .collect()
}
