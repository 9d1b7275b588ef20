//! Attention: scaled dot-product attention forward and backward through
//! cuDNN's fused attention ([`SdpaPlan`]) and rotary position embedding
//! ([`RopePlan`]). The [`mod@reference`] module holds their f64 oracles,
//! with those of decoding against a paged KV cache, variable-length
//! batches and dropout.

pub mod reference;
mod rope;
mod sdpa;

pub use reference::RopeStyle;
pub use reference::CausalAlign;
pub use rope::{RopeArgs, RopeBwArgs, RopeDescriptor, RopeFreqs, RopePlan};
pub use sdpa::{SdpaArgs, SdpaBwArgs, SdpaDescriptor, SdpaPlan};

use baracuda_driver::ModuleSpec;

/// Every module the family's plans can request: RoPE on each float dtype.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    (0..4).map(rope::spec).collect()
}
