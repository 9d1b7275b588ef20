//! CUDA runtime layer of baracuda: devices, contexts, streams, events,
//! device and pinned buffers, per-context library handles, the NVRTC
//! kernel JIT, cuBLASLt wrappers and cuDNN's graph API ([`cudnn::graph`]).
//!
//! This is the only crate that calls `cudarc::sys`/`cudarc::*::result` or
//! holds raw device pointers. Everything above it talks to the safe types
//! here. Every CUDA library is loaded at run time; a missing one is an
//! [`Error::LibraryNotFound`](baracuda_kernels_types::Error) naming where it
//! was looked for and the command that installs it, never a panic; and
//! [`Device::count`] is `Ok(0)` on a machine without a driver or GPU.
//! [`dlpack`] imports and exports DLPack tensors.

mod context;
mod cubin;
mod cublaslt;
pub mod cudnn;
mod device;
pub mod dlpack;
mod handles;
mod jit;
mod libs;
mod memory;
mod registry;
mod status;

pub use context::{Context, Event, Graph, Stream};
pub use cublaslt::{
    lt_heuristic, lt_matmul, LtAlgo, LtCompute, LtEpilogue, LtLayout, LtLayouts, LtMatmulDesc,
    LtPointers, LtPreference, LtScalar,
};
pub use cudnn::{legacy_algo_name, ConvMath, LegacyAlgo, LegacyConv, LegacyConvShape};
pub use device::Device;
pub use handles::{CublasLtHandle, CudnnHandle, LibraryHandle};
pub use jit::{
    compile_cubin, cuda_include_dir, jit_stats, kernel_cache_dir, nvrtc_version, Function,
    JitStats, KernelSource, LaunchArgs, LaunchConfig, Module, ModuleSpec,
};
pub use libs::{ensure_loaded, loaded_library, CudaLib};
pub use memory::{cudarc_slice, cudarc_slice_mut, DeviceBuffer, PinnedBuffer};
pub use status::{alloc_error, cublas_error, cuda_error, cudnn_error};

pub use baracuda_kernels_types as types;
pub use baracuda_kernels_types::{Error, Result};
