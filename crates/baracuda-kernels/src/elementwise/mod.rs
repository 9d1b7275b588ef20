//! Elementwise ops.

use baracuda_driver::ModuleSpec;

/// Module specs of the family.
pub fn module_specs() -> Vec<ModuleSpec> {
    Vec::new()
}
