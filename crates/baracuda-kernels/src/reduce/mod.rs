//! Reductions: sum, mean, prod, amax/amin, var/std, logsumexp, the NaN
//! variants and vector norms over any subset of dims of a strided tensor,
//! forward and backward, deterministic.
//!
//! One CUDA source (`kernels/reduce/reduce.cu`) compiled once per dtype and
//! op; its building blocks (group reductions, Welford and online
//! log-sum-exp merges) are in `kernels/common/reduce.cuh`.

mod layout;
#[allow(clippy::module_inception)] // the family and its one plan share the name
mod reduce;
mod scan;

pub use reduce::{ReduceArgs, ReduceBwArgs, ReduceDescriptor, ReduceOp, ReducePlan};
pub use scan::{ScanArgs, ScanBwArgs, ScanDescriptor, ScanOp, ScanPlan};

use baracuda_driver::ModuleSpec;

/// Every module the family's plans can request: each reduction on each
/// float dtype, and the scans of each float dtype.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    (0..4)
        .flat_map(|dtype| reduce::OP_CODES.map(move |code| reduce::spec(dtype, code)))
        .chain((0..4).map(scan::spec))
        .collect()
}
