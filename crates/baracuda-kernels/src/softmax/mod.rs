//! Softmax, log-softmax and softmin along any one dim of a strided tensor,
//! forward and backward, deterministic; softmax and log-softmax masked (a
//! bool keep mask or an additive one) and, on f16/bf16, with an f32 output.
//!
//! Gumbel-softmax (`GumbelSoftmaxPlan`: given or Philox noise, soft or
//! hard) and sparsemax (`SparsemaxPlan`).
//!
//! `kernels/softmax/softmax.cu` is compiled once per dtype, op and output
//! dtype, `gumbel_softmax.cu` and `sparsemax.cu` once per dtype; their group reductions come
//! from `kernels/common/reduce.cuh` and `common/softmax_row.cuh`.

pub mod reference;
#[cfg(test)]
mod fuzz;
mod gumbel_softmax;
mod sparsemax;
#[allow(clippy::module_inception)] // the family and its one plan share the name
mod softmax;

pub use gumbel_softmax::{
    GumbelNoise, GumbelNoiseRef, GumbelSoftmaxArgs, GumbelSoftmaxBwArgs, GumbelSoftmaxDescriptor,
    GumbelSoftmaxPlan,
};
pub use sparsemax::{SparsemaxArgs, SparsemaxBwArgs, SparsemaxDescriptor, SparsemaxPlan};
pub use softmax::{
    SoftmaxArgs, SoftmaxBwArgs, SoftmaxDescriptor, SoftmaxMask, SoftmaxMaskRef, SoftmaxOp,
    SoftmaxPlan,
};

use baracuda_driver::ModuleSpec;

/// Every module the family's plans can request: each op on each float
/// dtype, with an f32 `y` on f16 and bf16 (codes 2 and 3), and each mask
/// on softmax and log-softmax.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    (0..4)
        .flat_map(|dtype| {
            let widened: &[bool] = if dtype >= 2 { &[false, true] } else { &[false] };
            widened.iter().flat_map(move |&out_f32| {
                SoftmaxOp::ALL.into_iter().flat_map(move |op| {
                    let masks: &[SoftmaxMask] = match op {
                        SoftmaxOp::Softmin => &[SoftmaxMask::None],
                        _ => &SoftmaxMask::ALL,
                    };
                    masks.iter().map(move |&mask| softmax::spec(dtype, op, out_f32, mask))
                })
            })
        })
        .chain((0..4).map(gumbel_softmax::spec))
        .chain((0..4).map(sparsemax::spec))
        .collect()
}
