//! baracuda-kernels: GPU operators for ML frameworks behind one Plan API.
//!
//! Every op follows one lifecycle: build a descriptor, `Plan::select` it on
//! a stream (which validates it, compiles or finds kernels and picks the
//! fastest correct backend), ask `workspace_size`, then `run` with args as
//! often as needed. `plan.sku()` says what was selected. See [`Plan`].
//!
//! Families live one per module; [`mod@reference`] holds the f64 CPU oracles
//! the GPU tests compare against.

pub mod conv;
pub mod elementwise;
pub mod gemm;
mod kernel_sources;
mod plan;
pub mod reference;
mod scratch;
mod specs;

pub use conv::*;
pub use elementwise::{
    BinaryArgs, BinaryBwArgs, BinaryDescriptor, BinaryOp, BinaryPlan, UnaryArgs, UnaryBwArgs,
    UnaryDescriptor, UnaryOp, UnaryPlan,
};
pub use gemm::{
    BatchedGemmArgs, BatchedGemmDescriptor, BatchedGemmPlan, Fp8GemmArgs, Fp8GemmDescriptor,
    Fp8GemmPlan, GemmArgs, GemmDescriptor, GemmPlan, GroupedGemmArgs, GroupedGemmDescriptor,
    GroupedGemmPlan, IntGemmArgs, IntGemmDescriptor, IntGemmPlan, LinearArgs, LinearBwArgs,
    LinearDescriptor, LinearPlan,
};
pub use plan::{Backward, Plan};
pub use specs::all_module_specs;

pub use baracuda_driver::{
    cudarc_slice, cudarc_slice_mut, Context, Device, DeviceBuffer, Event, Graph, PinnedBuffer,
    Stream,
};
pub use baracuda_kernels_types::*;
/// The `float8` crate, whose `F8E4M3` and `F8E5M2` are the fp8 element
/// types.
pub use float8;
/// The `half` crate, whose `f16` and `bf16` are the 16-bit element types.
pub use half;
