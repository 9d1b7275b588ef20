//! Convolution and pooling, spatial rank 1 to 3, channels-first (NCHW
//! style) or channels-last (NHWC style), f32 / f64 / f16 / bf16.
//!
//! - [`ConvPlan`] (aliases [`Conv1dPlan`], [`Conv2dPlan`], [`Conv3dPlan`]):
//!   PyTorch `nn.ConvNd` (cross-correlation) through cuDNN: forward with an
//!   optional bias and ReLU, backward to the input, filter and bias.
//! - [`ConvTransposePlan`] (aliases `ConvTranspose{1,2,3}dPlan`): PyTorch
//!   `nn.ConvTransposeNd` with `output_padding`; its forward is the
//!   convolution's backward-data pass.
//! - [`PoolPlan`] (`MaxPool{1,2,3}dPlan` and `AvgPool{1,2,3}dPlan`, the
//!   reduction by type: [`PoolMax`], [`PoolAvg`]), [`AdaptivePoolPlan`]
//!   (`AdaptiveAvgPool*`, `AdaptiveMaxPool*`) and [`LpPoolPlan`]: one
//!   generic N-d NVRTC kernel pair (`kernels/conv/pool.cu`), with dilation
//!   and per-side padding.
//!
//! Every plan runs its backward through [`crate::Backward`].
//!
//! Tensors are always described in logical `[N, C, spatial...]` order; the
//! descriptor's [`ConvLayout`] says which dense strides they must have. A
//! channels-last buffer is `TensorRef::channels_last(buf, [n, c, h, w])?`
//! (`TensorRef::contiguous` for channels-first).
//!
//! Sizes are `usize` everywhere; the sliding window of a convolution or
//! pooling is one [`Window`] (kernel, stride, padding on each side,
//! dilation). Plans are generic over the spatial rank `N` and the tensor
//! rank `R = N + 2`, and only the valid pairs type-check ([`Rank`]).

/// The spatial rank 1, 2 and 3 aliases of a family type: descriptors
/// (`$ty<N>`), plans (`$ty<T, ..., N, R>`) and args (`$ty<'a, T, R>`),
/// with `$what` in their docs.
macro_rules! rank_aliases {
    ($what:literal, $ty:ident<N> => $a1:ident, $a2:ident, $a3:ident) => {
        #[doc = concat!("1-D ", $what, ".")]
        pub type $a1 = $ty<1>;
        #[doc = concat!("2-D ", $what, ".")]
        pub type $a2 = $ty<2>;
        #[doc = concat!("3-D ", $what, ".")]
        pub type $a3 = $ty<3>;
    };
    ($what:literal, $ty:ident<T $(, $p:ty)*> => $a1:ident, $a2:ident, $a3:ident) => {
        #[doc = concat!("`", $what, "1d`.")]
        pub type $a1<T> = $ty<T $(, $p)*, 1, 3>;
        #[doc = concat!("`", $what, "2d`.")]
        pub type $a2<T> = $ty<T $(, $p)*, 2, 4>;
        #[doc = concat!("`", $what, "3d`.")]
        pub type $a3<T> = $ty<T $(, $p)*, 3, 5>;
    };
    ($what:literal, $ty:ident<'a, T> => $a1:ident, $a2:ident, $a3:ident) => {
        #[doc = concat!("1-D ", $what, " (`[N, C, L]`).")]
        pub type $a1<'a, T> = $ty<'a, T, 3>;
        #[doc = concat!("2-D ", $what, " (`[N, C, H, W]`).")]
        pub type $a2<'a, T> = $ty<'a, T, 4>;
        #[doc = concat!("3-D ", $what, " (`[N, C, D, H, W]`).")]
        pub type $a3<'a, T> = $ty<'a, T, 5>;
    };
}

pub mod reference;
mod adaptive_pool;
#[allow(clippy::module_inception)] // the file is named after the op, as STYLE.md asks
mod conv;
mod cudnn_conv;
mod cudnn_core;
mod cudnn_graph;
mod descriptor;
#[cfg(test)]
mod fuzz;
mod lp_pool;
mod pool;
mod staging;
mod transpose;
mod window;

use baracuda_driver::ModuleSpec;
use baracuda_kernels_types::{Element, ElementKind, Error, Result};

pub use adaptive_pool::*;
pub use baracuda_driver::ConvMath;
pub use conv::*;
pub use cudnn_graph::{ConvAlgo, ConvApi, ConvDirection, CudnnConvProblem};
pub use descriptor::*;
pub use lp_pool::*;
pub use pool::*;
pub use transpose::*;
pub use window::Window;

/// A spatial rank `N` with its tensor rank `R = N + 2`, as the family's
/// plans take them (`ConvPlan<T, N, R>`). Only `Rank<1, 3>`, `Rank<2, 4>`
/// and `Rank<3, 5>` implement [`SpatialRank`], so a plan named with any
/// other pair (`ConvPlan<f32, 2, 5>`) is rejected when the program is type
/// checked. The `Conv2dPlan<T>`-style aliases name the valid pairs.
#[derive(Copy, Clone, Debug)]
pub struct Rank<const N: usize, const R: usize>;

/// Implemented by the [`Rank`]s the family takes; sealed.
pub trait SpatialRank: sealed::Sealed {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Rank<1, 3> {}
    impl Sealed for super::Rank<2, 4> {}
    impl Sealed for super::Rank<3, 5> {}
}

impl SpatialRank for Rank<1, 3> {}
impl SpatialRank for Rank<2, 4> {}
impl SpatialRank for Rank<3, 5> {}

pub use crate::memory_format::ConvLayout;

use crate::checks::check_element;
use crate::kernel_sources::{typed_spec, CONV_BIAS, CONV_LAYOUT, POOL};

/// The float kinds the family implements.
pub(crate) const FLOAT_KINDS: [ElementKind; 4] = [
    ElementKind::F32,
    ElementKind::F64,
    ElementKind::F16,
    ElementKind::Bf16,
];

/// Every NVRTC module the family can request.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    let mut v = Vec::new();
    for k in FLOAT_KINDS {
        v.extend(typed_spec(&CONV_BIAS, k));
        v.extend(typed_spec(&POOL, k));
    }
    v.extend(typed_spec(&CONV_LAYOUT, ElementKind::F64));
    v
}

/// `Unsupported` unless `T` is one of the four float kinds, and
/// `DtypeMismatch` unless the descriptor names `T`.
pub(crate) fn check_dtype<T: Element>(op: &'static str, element: ElementKind) -> Result<()> {
    if !FLOAT_KINDS.contains(&T::KIND) {
        return Err(Error::Unsupported {
            op,
            what: format!(
                "{} elements (the family takes f32, f64, f16, bf16)",
                T::KIND
            ),
        });
    }
    check_element::<T>(op, "element", element)?;
    Ok(())
}
