//! What a plan selected, and what it guarantees numerically.

use core::fmt;

use crate::ElementKind;

/// Which implementation runs an op.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BackendKind {
    /// A baracuda kernel compiled at run time with NVRTC.
    Baracuda,
    /// cuBLASLt.
    CublasLt,
    /// cuBLAS.
    Cublas,
    /// cuDNN.
    Cudnn,
    /// cuFFT.
    Cufft,
    /// cuSOLVER.
    Cusolver,
    /// cuRAND.
    Curand,
    /// NCCL.
    Nccl,
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            BackendKind::Baracuda => "baracuda",
            BackendKind::CublasLt => "cublasLt",
            BackendKind::Cublas => "cublas",
            BackendKind::Cudnn => "cudnn",
            BackendKind::Cufft => "cufft",
            BackendKind::Cusolver => "cusolver",
            BackendKind::Curand => "curand",
            BackendKind::Nccl => "nccl",
        };
        f.write_str(s)
    }
}

/// A GPU architecture a kernel is built for.
///
/// Exhaustive except for `Other`, which carries an unknown compute
/// capability as `major * 10 + minor`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ArchSku {
    /// Ampere A100 (8.0).
    Sm80,
    /// Ampere consumer (8.6).
    Sm86,
    /// Jetson Orin (8.7).
    Sm87,
    /// Ada Lovelace (8.9).
    Sm89,
    /// Hopper with the arch-specific features (`wgmma`, `setmaxnreg`).
    Sm90a,
    /// Blackwell datacenter (10.0) with arch-specific features.
    Sm100a,
    /// Blackwell consumer (12.0).
    Sm120,
    /// Any other compute capability, `major * 10 + minor`.
    Other(u32),
}

impl ArchSku {
    /// The SKU that NVRTC should target for a device of this compute
    /// capability: the arch-specific variant where one exists, so kernels
    /// may use every instruction of the chip.
    pub fn from_compute_capability(major: u32, minor: u32) -> ArchSku {
        match (major, minor) {
            (8, 0) => ArchSku::Sm80,
            (8, 6) => ArchSku::Sm86,
            (8, 7) => ArchSku::Sm87,
            (8, 9) => ArchSku::Sm89,
            (9, 0) => ArchSku::Sm90a,
            (10, 0) => ArchSku::Sm100a,
            (12, 0) => ArchSku::Sm120,
            (ma, mi) => ArchSku::Other(ma * 10 + mi),
        }
    }

    /// Compute capability as `major * 10 + minor`.
    pub fn compute_capability(self) -> u32 {
        match self {
            ArchSku::Sm80 => 80,
            ArchSku::Sm86 => 86,
            ArchSku::Sm87 => 87,
            ArchSku::Sm89 => 89,
            ArchSku::Sm90a => 90,
            ArchSku::Sm100a => 100,
            ArchSku::Sm120 => 120,
            ArchSku::Other(cc) => cc,
        }
    }

    /// The `--gpu-architecture` value NVRTC takes (`sm_90a`).
    pub fn nvrtc_arch(self) -> String {
        match self {
            ArchSku::Sm90a => "sm_90a".to_string(),
            ArchSku::Sm100a => "sm_100a".to_string(),
            other => format!("sm_{}", other.compute_capability()),
        }
    }
}

impl fmt::Display for ArchSku {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.nvrtc_arch())
    }
}

/// The arithmetic the op's inner products or transcendental functions run in.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MathPrecision {
    /// IEEE binary64 arithmetic.
    F64,
    /// IEEE binary32 arithmetic.
    F32,
    /// TF32 tensor-core products (10-bit mantissa inputs), f32 accumulation.
    Tf32,
    /// f16 operands on tensor cores.
    F16,
    /// bf16 operands on tensor cores.
    Bf16,
    /// fp8 operands on tensor cores.
    Fp8,
    /// Integer arithmetic, exact.
    Integer,
}

/// What a plan promises about its numerics. Tests check these claims.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct PrecisionGuarantee {
    /// Arithmetic used for the op's math.
    pub math: MathPrecision,
    /// Type of intermediate accumulation (sums, dot products).
    pub accumulator: ElementKind,
    /// The same inputs give the same bits on every run, whatever the stream
    /// or concurrent work.
    pub deterministic: bool,
    /// The result does not depend on launch configuration choices made at
    /// plan time, so two plans for the same problem on the same GPU model
    /// agree bit for bit.
    pub bit_stable_on_same_hardware: bool,
}

impl PrecisionGuarantee {
    /// Our own kernels' guarantee on float `kind`: IEEE math and
    /// accumulation in [`ElementKind::float_accumulator`], results that do
    /// not depend on the launch shape, deterministic as stated.
    pub fn float(kind: ElementKind, deterministic: bool) -> PrecisionGuarantee {
        let accumulator = kind.float_accumulator();
        PrecisionGuarantee {
            math: if accumulator == ElementKind::F64 {
                MathPrecision::F64
            } else {
                MathPrecision::F32
            },
            accumulator,
            deterministic,
            bit_stable_on_same_hardware: deterministic,
        }
    }
}

/// The identity of what a plan selected: op, dtype, backend, arch, the
/// kernel or algorithm chosen, and its precision guarantee.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelSku {
    /// Op name (`unary.gelu_tanh`, `conv2d.fw`, ...).
    pub op: String,
    /// Main element type.
    pub element: ElementKind,
    /// Backend that runs the op.
    pub backend: BackendKind,
    /// Architecture the kernel targets.
    pub arch: ArchSku,
    /// Kernel or algorithm chosen (`contiguous_vec16`, `cudnn engine 12`...).
    pub variant: String,
    /// Numerical guarantee of the selection.
    pub precision: PrecisionGuarantee,
}

impl fmt::Display for KernelSku {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} on {} [{}] {}",
            self.op, self.element, self.backend, self.arch, self.variant
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_names() {
        assert_eq!(
            ArchSku::from_compute_capability(9, 0).nvrtc_arch(),
            "sm_90a"
        );
        assert_eq!(ArchSku::from_compute_capability(8, 0).nvrtc_arch(), "sm_80");
        assert_eq!(ArchSku::from_compute_capability(7, 5), ArchSku::Other(75));
        assert_eq!(ArchSku::Other(75).nvrtc_arch(), "sm_75");
    }
}
