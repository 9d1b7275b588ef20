//! Attention: scaled dot-product attention forward and backward, decode
//! against a paged KV cache, rotary embeddings and the KV append. This
//! module holds the f64 reference the plans are checked against.

pub mod reference;

use baracuda_driver::ModuleSpec;

/// Every module the family's plans can request (none yet).
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    Vec::new()
}
