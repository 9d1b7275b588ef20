//! Launches of the elementwise kernels in `kernels/gemm/gemm_epilogue.cu`:
//! what cuBLASLt's fused epilogues do not cover (GELU-erf, a bias along a
//! column-major `D`, the pre-activation of ReLU, activation backward, int
//! GEMM scaling, amax).

use baracuda_driver::{Function, KernelSource, LaunchArgs, LaunchConfig, ModuleSpec, Stream};
use baracuda_kernels_types::{Activation, ElementKind, Error, Result};

static SOURCE: KernelSource = KernelSource {
    name: "gemm_epilogue.cu",
    source: include_str!("../../kernels/gemm/gemm_epilogue.cu"),
    headers: &[],
};

/// The `-DDTYPE` value of a `D` element kind.
fn dtype_code(op: &'static str, kind: ElementKind) -> Result<u32> {
    Ok(match kind {
        ElementKind::F32 => 0,
        ElementKind::F64 => 1,
        ElementKind::F16 => 2,
        ElementKind::Bf16 => 3,
        other => {
            return Err(Error::Unsupported {
                op,
                what: format!("no GEMM epilogue kernel for {other} outputs"),
            })
        }
    })
}

/// The module spec for outputs of `kind`.
pub(crate) fn spec(kind: ElementKind) -> Result<ModuleSpec> {
    Ok(ModuleSpec::new(&SOURCE).define("DTYPE", dtype_code("gemm epilogue", kind)?))
}

/// Every spec a GEMM plan can request.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    [
        ElementKind::F32,
        ElementKind::F64,
        ElementKind::F16,
        ElementKind::Bf16,
    ]
    .into_iter()
    .filter_map(|k| spec(k).ok())
    .collect()
}

pub(crate) fn act_code(a: Activation) -> i32 {
    match a {
        Activation::Identity => 0,
        Activation::Relu => 1,
        Activation::GeluErf => 2,
        Activation::GeluTanh => 3,
    }
}

/// The epilogue kernels for one output dtype, loaded in `select`.
#[derive(Clone, Debug)]
pub(crate) struct EpilogueKernels {
    pub bias_act: Function,
    pub dact: Function,
    pub col_sum: Function,
    pub scale_i32: Function,
    pub amax_init: Function,
    pub amax: Function,
    sm_count: u32,
}

impl EpilogueKernels {
    pub(crate) fn load(stream: &Stream, kind: ElementKind) -> Result<Self> {
        let ctx = stream.context();
        let m = ctx.module(&spec(kind)?)?;
        Ok(EpilogueKernels {
            bias_act: m.function("bias_act")?,
            dact: m.function("dact")?,
            col_sum: m.function("col_sum")?,
            scale_i32: m.function("scale_i32")?,
            amax_init: m.function("amax_init")?,
            amax: m.function("amax")?,
            sm_count: ctx.device().sm_count,
        })
    }

    /// A grid-stride launch over `total` items: enough blocks to fill the
    /// GPU a few times over (132 SMs * 8 = 1056 blocks of 256 on an H200),
    /// fewer for small problems.
    pub(crate) fn cfg(&self, total: usize) -> LaunchConfig {
        let blocks = total
            .div_ceil(256)
            .clamp(1, (self.sm_count.max(1) * 8) as usize);
        LaunchConfig::linear(blocks as u32, 256)
    }
}

/// Push a list of kernel parameters.
pub(crate) fn kernel_args(push: impl FnOnce(&mut LaunchArgs) -> Result<()>) -> Result<LaunchArgs> {
    let mut a = LaunchArgs::new();
    push(&mut a)?;
    Ok(a)
}
