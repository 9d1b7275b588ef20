//! Host-only vocabulary shared by every baracuda crate.
//!
//! Nothing here touches CUDA: element types ([`Element`], [`ElementKind`]),
//! device memory views whose safe constructors prove every reachable element
//! lies inside the buffer ([`TensorRef`], [`TensorMut`], [`MatrixRef`],
//! [`MatrixMut`]), the identity of a selected kernel ([`KernelSku`]), what a
//! caller may ask of plan selection ([`PlanPreference`]), caller-provided
//! scratch memory ([`Workspace`]) and the one [`Error`] enum of the workspace.

mod element;
mod error;
mod gemm;
mod grad;
mod preference;
mod ptr;
mod shape;
mod sku;
mod tensor;

pub use element::{Element, ElementKind};
pub use error::{Error, LibraryStatus, Result};
pub use gemm::*;
pub use grad::{Grad, Grads};
pub use preference::{Autotune, PlanPreference};
pub use ptr::{DevPtr, DevPtrMut};
pub use shape::{broadcast_shapes, Shape};
pub use sku::{ArchSku, BackendKind, KernelSku, MathPrecision, PrecisionGuarantee};
pub use tensor::{
    contiguous_strides, DeviceSlice, DeviceSliceMut, MatrixMut, MatrixOrder, MatrixRef, TensorMut,
    TensorRef, Workspace, MAX_RANK,
};
