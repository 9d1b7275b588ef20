//! Every CUDA source of the crate, embedded at build time.

use baracuda_driver::KernelSource;

/// Project headers any source may include.
pub(crate) const COMMON: &[(&str, &str)] = &[
    (
        "common/dtype.cuh",
        include_str!("../kernels/common/dtype.cuh"),
    ),
    (
        "common/strided.cuh",
        include_str!("../kernels/common/strided.cuh"),
    ),
    (
        "common/pointwise.cuh",
        include_str!("../kernels/common/pointwise.cuh"),
    ),
    (
        "common/fast_math.cuh",
        include_str!("../kernels/common/fast_math.cuh"),
    ),
];

/// Pointwise unary ops (`kernels/elementwise/unary.cu`).
pub static UNARY: KernelSource = KernelSource {
    name: "elementwise/unary.cu",
    source: include_str!("../kernels/elementwise/unary.cu"),
    headers: COMMON,
};

/// Pointwise binary ops with broadcasting (`kernels/elementwise/binary.cu`).
pub static BINARY: KernelSource = KernelSource {
    name: "elementwise/binary.cu",
    source: include_str!("../kernels/elementwise/binary.cu"),
    headers: COMMON,
};
