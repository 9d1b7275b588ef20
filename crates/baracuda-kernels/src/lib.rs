//! baracuda-kernels: GPU operators for ML frameworks behind one Plan API.
//!
#![doc = include_str!("guide.md")]

mod autotune;
mod checks;
#[cfg(test)]
mod finite_diff;
#[cfg(test)]
mod fuzz;
mod kernel_sources;
mod launch;
mod memory_format;
mod plan;
mod scratch;

use baracuda_driver::ModuleSpec;

/// A registered op family.
#[derive(Copy, Clone, Debug)]
pub struct Family {
    /// The family's module name (`conv`, `gemm`, ...): what its GPU test
    /// rows and benchmark cases are filed under.
    pub name: &'static str,
    /// Every kernel specialisation its plans can request.
    pub module_specs: fn() -> Vec<ModuleSpec>,
}

/// Registers each family once: its module, whose public items are
/// re-exported at the crate root; its kernel specialisations, every one of
/// which [`all_module_specs`] lists for the host compile test; and its
/// entry in [`FAMILIES`], which the GPU op table and the benchmark case
/// list are checked against; and its f64 oracles as
/// `reference::<family>`. A family module provides
/// `pub(crate) fn module_specs() -> Vec<ModuleSpec>` and `pub mod
/// reference`.
macro_rules! families {
    ($($(#[$doc:meta])* $name:ident;)*) => {
        $(
            $(#[$doc])*
            pub mod $name;
            pub use $name::*;
        )*

        /// Plain f64 CPU implementations of every op: the oracles the GPU
        /// tests compare against, one module per family (each family's
        /// `reference.rs`). Obviously correct beats fast here.
        pub mod reference {
            $(pub use crate::$name::reference as $name;)*
        }

        /// Every registered family, in registration order.
        pub const FAMILIES: &[Family] = &[$(Family {
            name: stringify!($name),
            module_specs: $name::module_specs,
        }),*];
    };
}

families! {
    /// Pointwise unary and binary maps with broadcasting.
    elementwise;
    /// Convolution, transposed convolution and pooling.
    conv;
    /// Matrix products through cuBLASLt.
    gemm;
    /// Reductions over any subset of dims.
    reduce;
    /// Softmax, log-softmax and softmin along one dim.
    softmax;
    /// LayerNorm, RMSNorm, GroupNorm, InstanceNorm, BatchNorm and
    /// LocalResponseNorm, forward and backward.
    norm;
    /// Scaled dot-product attention and rotary position embeddings.
    attention;
    /// Flip, roll, tril/triu, pad, repeat, repeat_interleave, diagonal,
    /// diag_embed, diag, unfold, strided slices, cat and stack: the ops that
    /// move data.
    shape;
}

/// Every NVRTC module any plan can request (every family, dtype and
/// specialisation). The host test compiles each for sm_80 and sm_90a.
pub fn all_module_specs() -> Vec<ModuleSpec> {
    FAMILIES.iter().flat_map(|f| (f.module_specs)()).collect()
}

pub use plan::{Backward, Plan};

/// DLPack import and export ([`dlpack::DlpackTensor`], [`dlpack::into_dlpack`]).
pub use baracuda_driver::dlpack;
pub use baracuda_driver::{
    cudarc_slice, cudarc_slice_mut, Context, Device, DeviceBuffer, Event, Graph, PinnedBuffer,
    Stream,
};
/// The kernel JIT's counters and disk cache location.
pub use baracuda_driver::{jit_stats, kernel_cache_dir, JitStats};
pub use baracuda_kernels_types::*;
/// The `float8` crate, whose `F8E4M3` and `F8E5M2` are the fp8 element
/// types.
pub use float8;
/// The `half` crate, whose `f16` and `bf16` are the 16-bit element types.
pub use half;
