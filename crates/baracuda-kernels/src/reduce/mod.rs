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


/// The `BARACUDA_DTYPE` codes of the integer kinds the reductions and
/// scans take (i32, i64).
const INT_CODES: [u32; 2] = [9, 10];

/// Every module the family's plans can request: each reduction (var_mean
/// and std_mean among them; trace uses the sum's) on each float dtype and
/// those that take integers on i32 and i64, the index reductions and the
/// scans of each of those six dtypes, and the logical reductions of each
/// element width.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    let int_ops = ReduceOp::ALL
        .into_iter()
        .filter(|op| op.takes_integers())
        .map(|op| reduce::op_code(op, 2.0));
    let numeric = || (0..4).chain(INT_CODES);
    (0..4)
        .flat_map(|dtype| reduce::OP_CODES.map(move |code| reduce::spec(dtype, code)))
        .chain(INT_CODES.into_iter().flat_map(|dtype| int_ops.clone().map(move |code| reduce::spec(dtype, code))))
        .chain(numeric().flat_map(|dtype| {
            ArgReduceOp::ALL.map(|op| arg_reduce::spec(dtype, op))
        }))
        .chain(logical_reduce::specs())
        .chain(numeric().map(scan::spec))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel_sources::numeric_dtype_code;
    use baracuda_kernels_types::ElementKind;

    #[test]
    fn integer_codes_are_the_kernels_codes() {
        let codes = [ElementKind::I32, ElementKind::I64].map(|k| numeric_dtype_code(k).unwrap());
        assert_eq!(codes, INT_CODES);
        // 18 float reductions x 4, 5 integer ones x 2, 2 index reductions
        // x 6, 21 logical, 6 scans
        assert_eq!(module_specs().len(), 18 * 4 + 5 * 2 + 2 * 6 + 21 + 6);
    }
}
