//! Reductions: sum, mean, prod, amax/amin, var/std, logsumexp, the NaN
//! variants and vector norms over any subset of dims of a strided tensor,
//! forward and backward, deterministic; var_mean and std_mean from one
//! pass (`var_mean.rs`); the trace of a matrix (`trace.rs`, the sum over
//! its diagonal view); max and min with indices, argmax and argmin
//! (`arg_reduce.rs`); all, any and count_nonzero (`logical_reduce.rs`).
//!
//! Three CUDA sources, each compiled once per dtype and op:
//! `kernels/reduce/reduce.cu` (the value reductions),
//! `kernels/reduce/arg_reduce.cu` (the index reductions) and
//! `kernels/reduce/logical_reduce.cu` (the logical reductions, once per
//! element width). The first and the last share their row, column and
//! combine kernels (`kernels/common/reduce_dims.cuh`, each with its own
//! fold) and their host side (`layout.rs`); the building blocks of all
//! three (group reductions, Welford and online log-sum-exp merges) are in
//! `kernels/common/reduce.cuh`.

pub mod reference;
mod arg_reduce;
#[cfg(test)]
mod fuzz;
mod layout;
mod logical_reduce;
#[allow(clippy::module_inception)] // the family and its one plan share the name
mod reduce;
mod scan;
mod trace;
mod var_mean;

pub use arg_reduce::{
    ArgReduceArgs, ArgReduceBwArgs, ArgReduceDescriptor, ArgReduceOp, ArgReducePlan,
};
pub use logical_reduce::{
    LogicalReduceArgs, LogicalReduceDescriptor, LogicalReduceOp, LogicalReducePlan,
    LOGICAL_REDUCE_KINDS,
};
pub use reduce::{ReduceArgs, ReduceBwArgs, ReduceDescriptor, ReduceOp, ReducePlan};
pub use scan::{ScanArgs, ScanBwArgs, ScanDescriptor, ScanOp, ScanPlan};
pub use trace::{TraceArgs, TraceBwArgs, TraceDescriptor, TracePlan};
pub use var_mean::{VarMeanArgs, VarMeanBwArgs, VarMeanPlan};

use baracuda_driver::ModuleSpec;


/// Every module the family's plans can request: each reduction (var_mean
/// and std_mean among them; trace uses the sum's) on each float dtype, the
/// logical reductions of each element width, and the scans of each float
/// dtype.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    (0..4)
        .flat_map(|dtype| reduce::OP_CODES.map(move |code| reduce::spec(dtype, code)))
        .chain((0..4).flat_map(|dtype| {
            ArgReduceOp::ALL.map(|op| arg_reduce::spec(dtype, op))
        }))
        .chain(logical_reduce::specs())
        .chain((0..4).map(scan::spec))
        .collect()
}
