//! cuDNN's backend (graph) API, for any graph: the API PyTorch 2.x
//! reaches through cudnn-frontend, which exposes every engine of the
//! installed cuDNN (the Hopper-specific ones included).
//!
//! The lifecycle, each step a safe type that owns its backend descriptors
//! (destroyed on drop) and keeps alive the ones it refers to:
//!
//! 1. [`Tensor`]s ([`Tensor::builder`]): dtype, dims, strides, uid,
//!    alignment, virtual or by value.
//! 2. [`Operation`]s ([`Operation::builder`]): an [`OpKind`]
//!    (convolution forward / backward data / backward filter, pointwise,
//!    matmul, reduction), tensors and scalars on its [`Port`]s, and its
//!    [`OpParams`]. Which ports a kind has is a table, so a new kind is
//!    data, not new unsafe code.
//! 3. An [`OperationGraph`] of operations, bound to a handle.
//! 4. [`EngineConfig`]s from [`OperationGraph::heuristics`] (a
//!    [`HeurMode`]), or rebuilt from an engine index and knob choices
//!    ([`Engine::new`], [`EngineConfig::new`]); each engine carries its
//!    [`NumericalNote`]s and [`BehaviorNote`]s, from which callers filter
//!    (determinism, TF32).
//! 5. An [`ExecutionPlan`] per config: workspace size, tag and JSON for
//!    cache keys.
//! 6. A [`VariantPack`] (uid -> address, workspace) per execution, and
//!    [`ExecutionPlan::execute`] on a stream.
//!
//! What to build and which engine to choose is the caller's policy (for
//! convolutions: `baracuda-kernels`' `conv` family).

mod descriptor;
mod engine;
mod operation;
mod params;
mod plan;
mod tensor;

pub use engine::{
    BehaviorNote, Engine, EngineConfig, HeurMode, KnobChoice, NumericalNote, OperationGraph,
};
pub use operation::{OpKind, Operation, OperationBuilder, Port};
pub use params::{
    ConvolutionMode, ConvolutionParams, OpParams, ParamsKind, PointwiseMode, PointwiseParams,
    ReductionOp, Scalar,
};
pub use plan::{ExecutionPlan, VariantPack};
pub use tensor::{Tensor, TensorBuilder, MAX_DIMS};

pub(crate) use tensor::data_type;
