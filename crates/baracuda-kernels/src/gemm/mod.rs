//! The GEMM family, through cuBLASLt: [`GemmPlan`] (any layout, fused
//! bias/activation epilogues), [`BatchedGemmPlan`] (strided batches,
//! stride 0 broadcasts), [`GroupedGemmPlan`] (many shapes in one call),
//! [`IntGemmPlan`] (s8 x s8 -> s32 / scaled f32, bf16), [`Fp8GemmPlan`]
//! (e4m3/e5m2 with per-tensor scales and amax) and [`LinearPlan`]
//! (`Y = act(X W^T + b)` forward and backward).
//!
//! Every plan builds its cuBLASLt descriptors, layouts and algorithm once in
//! `select`; `run` checks arguments and enqueues, never allocating or
//! synchronizing. Elementwise work cuBLASLt cannot fuse runs in
//! `kernels/gemm/gemm_epilogue.cu`.
//!
//! Tensors are views: matrices as [`MatrixRef`] / [`MatrixMut`], a bias
//! (or bias gradient) as a unit-stride `[n]` tensor view, a batch's biases
//! as a `[batch, n]` view. Aliasing: the one in-place form is `C = D`
//! ([`GemmC::Output`]: `D = alpha op(A) op(B) + beta D`) in `GemmPlan`,
//! `BatchedGemmPlan` and `GroupedGemmPlan`; every other overlap of an
//! output with an input or another output is `InvalidArgument` naming the
//! output, refused before anything runs (each plan's doc says which).

/// `with_epilogue` and `with_aux`, the builders of a descriptor with
/// `epilogue` and `save_aux` fields.
macro_rules! epilogue_builders {
    () => {
        /// Set the epilogue.
        #[must_use]
        pub fn with_epilogue(mut self, epilogue: baracuda_kernels_types::EpilogueKind) -> Self {
            self.epilogue = epilogue;
            self
        }
        /// Also store the pre-activation `Z` (what the activation backward
        /// needs) in the aux output.
        #[must_use]
        pub fn with_aux(mut self, save_aux: bool) -> Self {
            self.save_aux = save_aux;
            self
        }
    };
}

pub mod reference;
mod args;
mod batched;
mod epilogue;
mod fp8_gemm;
#[cfg(test)]
mod fuzz;
#[allow(clippy::module_inception)] // the family's plain GEMM is named after the family
mod gemm;
mod grouped;
mod int_gemm;
mod linear;
mod linear_kernel;
mod matmul;
mod narrow;
mod plain;

pub use args::GemmC;
pub use batched::{BatchedGemmArgs, BatchedGemmDescriptor, BatchedGemmPlan};
pub use fp8_gemm::{Fp8GemmArgs, Fp8GemmDescriptor, Fp8GemmPlan};
pub use gemm::{GemmArgs, GemmDescriptor, GemmPlan};
pub use grouped::{GroupedGemmArgs, GroupedGemmDescriptor, GroupedGemmPlan};
pub use int_gemm::{IntGemmArgs, IntGemmDescriptor, IntGemmPlan};
pub use linear::{LinearArgs, LinearBwArgs, LinearDescriptor, LinearPlan};
pub(crate) use linear_kernel::LinearKernel;
pub(crate) use narrow::{narrow_fits, NarrowMatmul};
pub(crate) use plain::{LinearMatmul, PlainMatmul};

/// Every NVRTC module the GEMM plans can request.
pub(crate) fn module_specs() -> Vec<baracuda_driver::ModuleSpec> {
    let mut v = epilogue::module_specs();
    v.extend(narrow::module_specs());
    v
}
