//! Attention: rotary position embedding ([`RopePlan`]); scaled
//! dot-product attention, decode against a paged KV cache and the KV
//! append follow. [`reference`] holds the f64 oracles of all of them.

pub mod reference;
mod rope;

pub use reference::RopeStyle;
pub use rope::{RopeArgs, RopeBwArgs, RopeDescriptor, RopeFreqs, RopePlan};

use baracuda_driver::ModuleSpec;

/// Every module the family's plans can request: RoPE on each float dtype.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    (0..4).map(rope::spec).collect()
}
