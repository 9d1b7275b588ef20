//! Every NVRTC module any plan can request, for the host compile test.

use baracuda_driver::ModuleSpec;

/// All module specs the plans of this crate can ask for (every family,
/// dtype and specialisation). The host test compiles each for sm_80 and
/// sm_90a.
pub fn all_module_specs() -> Vec<ModuleSpec> {
    let mut specs = Vec::new();
    specs.extend(crate::elementwise::module_specs());
    specs.extend(crate::conv::kernel_specs());
    specs.extend(crate::gemm::module_specs());
    specs
}
