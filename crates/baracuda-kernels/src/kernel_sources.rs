//! Every CUDA source of the crate, embedded at build time, and the one map
//! from element types to kernel specialisations.
//!
//! Each source is registered here once, with the project headers it may
//! include (`kernels/common/*.cuh`). A kernel specialised by element type
//! includes `common/dtype.cuh` and is compiled with `-DBARACUDA_DTYPE=`
//! [`dtype_code`]; [`typed_spec`] builds that module spec.

use baracuda_driver::{KernelSource, ModuleSpec};
use baracuda_kernels_types::ElementKind;

/// Project headers any source may include.
pub(crate) const COMMON: &[(&str, &str)] = &[
    (
        "common/dtype.cuh",
        include_str!("../kernels/common/dtype.cuh"),
    ),
    (
        "common/convert.cuh",
        include_str!("../kernels/common/convert.cuh"),
    ),
    (
        "common/offsets.cuh",
        include_str!("../kernels/common/offsets.cuh"),
    ),
    (
        "common/strided.cuh",
        include_str!("../kernels/common/strided.cuh"),
    ),
    (
        "common/typed_map.cuh",
        include_str!("../kernels/common/typed_map.cuh"),
    ),
    (
        "common/pointwise.cuh",
        include_str!("../kernels/common/pointwise.cuh"),
    ),
    (
        "common/reduce_back.cuh",
        include_str!("../kernels/common/reduce_back.cuh"),
    ),
    (
        "common/fast_math.cuh",
        include_str!("../kernels/common/fast_math.cuh"),
    ),
    (
        "common/reduce.cuh",
        include_str!("../kernels/common/reduce.cuh"),
    ),
    (
        "common/reduce_dims.cuh",
        include_str!("../kernels/common/reduce_dims.cuh"),
    ),
    (
        "common/scan.cuh",
        include_str!("../kernels/common/scan.cuh"),
    ),
    (
        "common/softmax_row.cuh",
        include_str!("../kernels/common/softmax_row.cuh"),
    ),
];

/// `kernels/<path>` as a [`KernelSource`] with the [`COMMON`] headers.
macro_rules! source {
    ($(#[$doc:meta])* $name:ident = $path:literal) => {
        $(#[$doc])*
        pub(crate) static $name: KernelSource = KernelSource {
            name: $path,
            source: include_str!(concat!("../kernels/", $path)),
            headers: COMMON,
        };
    };
}

source!(
    /// Pointwise unary ops.
    UNARY = "elementwise/unary.cu"
);
source!(
    /// Pointwise binary ops with broadcasting.
    BINARY = "elementwise/binary.cu"
);
source!(
    /// Pointwise ternary ops (lerp, addcmul, addcdiv, clamp, where) with
    /// broadcasting.
    TERNARY = "elementwise/ternary.cu"
);
source!(
    /// Conversions between element types.
    CAST = "elementwise/cast.cu"
);
source!(
    /// Comparisons, logical and bitwise ops, shifts, gcd, lcm and the
    /// predicates (isnan, ...) with broadcasting.
    LOGIC = "elementwise/logic.cu"
);
source!(
    /// Filling a view with one value.
    FILL = "elementwise/fill.cu"
);
source!(
    /// arange, linspace and logspace.
    RANGE = "elementwise/range.cu"
);
source!(
    /// Flip, roll, tril/triu, pad, cat and stack, forward and backward.
    SHAPE = "shape/shape.cu"
);
source!(
    /// Reductions over any dims, forward and backward.
    REDUCE = "reduce/reduce.cu"
);
source!(
    /// Max and min with indices, argmax and argmin.
    ARG_REDUCE = "reduce/arg_reduce.cu"
);
source!(
    /// all, any and count_nonzero over any dims.
    LOGICAL_REDUCE = "reduce/logical_reduce.cu"
);
source!(
    /// Scans along one dim, forward and backward.
    SCAN = "reduce/scan.cu"
);
source!(
    /// Softmax, log-softmax and softmin along one dim, forward and backward.
    SOFTMAX = "softmax/softmax.cu"
);
source!(
    /// Gumbel-softmax along one dim (given or Philox noise), forward and
    /// backward, and the Philox gumbels alone.
    GUMBEL_SOFTMAX = "softmax/gumbel_softmax.cu"
);
source!(
    /// Sparsemax along one dim, forward and backward.
    SPARSEMAX = "softmax/sparsemax.cu"
);
source!(
    /// LayerNorm and RMSNorm, forward and backward.
    NORM = "norm/norm.cu"
);
source!(
    /// GroupNorm (and InstanceNorm), forward and backward.
    GROUP_NORM = "norm/group_norm.cu"
);
source!(
    /// BatchNorm, forward (training and eval) and backward.
    BATCH_NORM = "norm/batch_norm.cu"
);
source!(
    /// LocalResponseNorm, forward and backward.
    LOCAL_RESPONSE_NORM = "norm/local_response_norm.cu"
);
source!(
    /// Rotary position embedding, forward and backward.
    ROPE = "attention/rope.cu"
);
source!(
    /// Convolution bias epilogue, bias and ReLU gradients.
    CONV_BIAS = "conv/bias.cu"
);
source!(
    /// Channels-last <-> channels-first copies.
    CONV_LAYOUT = "conv/layout.cu"
);
source!(
    /// Generic N-d pooling.
    POOL = "conv/pool.cu"
);
source!(
    /// Elementwise work around cuBLASLt matmuls, and the skinny linear.
    GEMM_EPILOGUE = "gemm/gemm_epilogue.cu"
);
source!(
    /// The narrow tensor-core matmul of pointwise convolutions.
    NARROW_MATMUL = "gemm/narrow_matmul.cu"
);

/// The `BARACUDA_DTYPE` code of `kernels/common/dtype.cuh` for `kind`, or
/// None for kinds it has no specialisation of.
pub(crate) fn dtype_code(kind: ElementKind) -> Option<u32> {
    match kind {
        ElementKind::F32 => Some(0),
        ElementKind::F64 => Some(1),
        ElementKind::F16 => Some(2),
        ElementKind::Bf16 => Some(3),
        _ => None,
    }
}

/// The `BARACUDA_DTYPE` code of `kernels/common/dtype.cuh` for `kind` in
/// the kernels that also take i32 and i64 (the reductions and scans):
/// [`dtype_code`] for the floats, [`element_code`]'s for the two integer
/// kinds; None for the others.
pub(crate) fn numeric_dtype_code(kind: ElementKind) -> Option<u32> {
    match kind {
        ElementKind::I32 | ElementKind::I64 => element_code(kind),
        k => dtype_code(k),
    }
}

/// The element-type code of `kernels/elementwise/cast.cu` (`CAST_FROM`,
/// `CAST_TO`) for `kind`, or None for kinds it does not convert (u32). The
/// float kinds keep their [`dtype_code`].
pub(crate) fn element_code(kind: ElementKind) -> Option<u32> {
    match kind {
        ElementKind::Fp8E4M3 => Some(4),
        ElementKind::Fp8E5M2 => Some(5),
        ElementKind::I8 => Some(6),
        ElementKind::U8 => Some(7),
        ElementKind::I16 => Some(8),
        ElementKind::I32 => Some(9),
        ElementKind::I64 => Some(10),
        ElementKind::Bool => Some(11),
        ElementKind::U32 => None,
        k => dtype_code(k),
    }
}

/// [`ElementKind::ALL`] without the kinds in `drop`, in order; `N` must be
/// the count left (a wrong `N` fails the build of a constant).
pub(crate) const fn kinds_except<const N: usize>(drop: &[ElementKind]) -> [ElementKind; N] {
    let mut out = [ElementKind::F32; N];
    let (mut i, mut n) = (0, 0);
    while i < ElementKind::ALL.len() {
        let k = ElementKind::ALL[i];
        let mut d = 0;
        while d < drop.len() && drop[d] as u8 != k as u8 {
            d += 1;
        }
        if d == drop.len() {
            out[n] = k;
            n += 1;
        }
        i += 1;
    }
    assert!(n == N, "N is not the count of the kinds left");
    out
}

/// `source` specialised for `kind` (`-DBARACUDA_DTYPE`), or None when
/// `dtype.cuh` has no such specialisation.
pub(crate) fn typed_spec(source: &'static KernelSource, kind: ElementKind) -> Option<ModuleSpec> {
    dtype_code(kind).map(|code| ModuleSpec::new(source).define("BARACUDA_DTYPE", code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_float_kind_has_a_distinct_code() {
        let codes: Vec<u32> = [
            ElementKind::F32,
            ElementKind::F64,
            ElementKind::F16,
            ElementKind::Bf16,
        ]
        .into_iter()
        .map(|k| dtype_code(k).unwrap())
        .collect();
        assert_eq!(codes, [0, 1, 2, 3]);
        assert_eq!(dtype_code(ElementKind::I32), None);
        assert_eq!(numeric_dtype_code(ElementKind::I32), Some(9));
        assert_eq!(numeric_dtype_code(ElementKind::I64), Some(10));
        assert_eq!(numeric_dtype_code(ElementKind::Bf16), Some(3));
        assert_eq!(numeric_dtype_code(ElementKind::I16), None);
    }

    #[test]
    fn element_codes_extend_the_float_codes() {
        let mut seen = Vec::new();
        for k in ElementKind::ALL {
            if let Some(c) = element_code(k) {
                assert!(!seen.contains(&c), "{k}: code {c} twice");
                if let Some(d) = dtype_code(k) {
                    assert_eq!(c, d, "{k}");
                }
                seen.push(c);
            }
        }
        assert_eq!(seen.len(), 12);
        assert_eq!(element_code(ElementKind::U32), None);
    }
}
