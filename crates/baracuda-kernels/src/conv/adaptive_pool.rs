//! Adaptive average and max pooling, spatial rank 1 to 3 (PyTorch
//! `AdaptiveAvgPoolNd`, `AdaptiveMaxPoolNd`).
//!
//! Output `o` along an axis pools inputs `[floor(o*in/out),
//! ceil((o+1)*in/out))`; windows may overlap and differ in size. Max writes
//! optional indices (flat spatial input index) that its backward needs.
//! Runs on the generic pooling kernels of [`PoolPlan`](super::PoolPlan);
//! adaptive average to an all-1 output (global average pooling) takes
//! their deterministic global-average reduction and broadcast kernels.

use std::marker::PhantomData;

use baracuda_driver::Stream;
use baracuda_kernels_types::{Element, ElementKind, KernelSku, PlanPreference, Result, Workspace};

use super::descriptor::invalid;
use super::pool::{validate_planes, KernelMode, PoolArgs, PoolCore, PoolProblem};
use super::{check_dtype, ConvLayout};
use crate::Plan;

/// An adaptive pooling of spatial rank `N`: in and out extents only.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct AdaptivePoolDescriptor<const N: usize> {
    /// Batch.
    pub batch: i32,
    /// Channels.
    pub channels: i32,
    /// Input spatial extents.
    pub input: [i32; N],
    /// Output spatial extents.
    pub output: [i32; N],
    /// Element type.
    pub element: ElementKind,
    /// Memory order. Default channels-first.
    pub layout: ConvLayout,
}

/// 1-D adaptive pooling descriptor.
pub type AdaptivePool1dDescriptor = AdaptivePoolDescriptor<1>;
/// 2-D adaptive pooling descriptor.
pub type AdaptivePool2dDescriptor = AdaptivePoolDescriptor<2>;
/// 3-D adaptive pooling descriptor.
pub type AdaptivePool3dDescriptor = AdaptivePoolDescriptor<3>;

macro_rules! adaptive_ctor {
    ($n:literal, [$($i:ident),+], [$($o:ident),+]) => {
        impl AdaptivePoolDescriptor<$n> {
            /// A descriptor (channels-first).
            #[allow(clippy::too_many_arguments)] // the seed API's positional constructor
            pub fn new(batch: i32, channels: i32, $($i: i32,)+ $($o: i32,)+ element: ElementKind) -> Self {
                AdaptivePoolDescriptor { batch, channels, input: [$($i),+], output: [$($o),+], element, layout: ConvLayout::ChannelsFirst }
            }
        }
    };
}
adaptive_ctor!(1, [l_in], [l_out]);
adaptive_ctor!(2, [h_in, w_in], [h_out, w_out]);
adaptive_ctor!(3, [d_in, h_in, w_in], [d_out, h_out, w_out]);

impl<const N: usize> AdaptivePoolDescriptor<N> {
    /// Memory order. Default channels-first.
    pub fn with_layout(mut self, layout: ConvLayout) -> Self {
        self.layout = layout;
        self
    }
}

/// The reduction of an adaptive pooling plan, chosen by type because the
/// seed descriptor has no mode field.
pub trait AdaptiveReduce: Send + Sync + std::fmt::Debug + 'static {
    /// `"avg"` or `"max"`.
    const NAME: &'static str;
    #[doc(hidden)]
    const KERNEL: u8;
}

/// Adaptive average.
#[derive(Debug)]
pub struct AdaptiveAvg;
/// Adaptive max.
#[derive(Debug)]
pub struct AdaptiveMax;
impl AdaptiveReduce for AdaptiveAvg {
    const NAME: &'static str = "avg";
    const KERNEL: u8 = KernelMode::AdaptiveAvg as u8;
}
impl AdaptiveReduce for AdaptiveMax {
    const NAME: &'static str = "max";
    const KERNEL: u8 = KernelMode::AdaptiveMax as u8;
}

/// Adaptive pooling of spatial rank `N` on rank-`R = N + 2` tensors.
///
/// # Shapes
/// `x`: `[batch, channels, input...]`; `y`, `indices`: `[batch, channels,
/// output...]`.
/// # Layout
/// Dense channels-first or channels-last.
/// # Dtypes
/// f32, f64, f16, bf16; indices i64.
/// # Errors
/// `InvalidDescriptor` for non-positive extents; otherwise as
/// [`PoolPlan`](super::PoolPlan).
#[derive(Debug)]
pub struct AdaptivePoolPlan<T: Element, M: AdaptiveReduce, const N: usize, const R: usize> {
    core: PoolCore,
    _t: PhantomData<(T, M)>,
}

/// `nn.AdaptiveAvgPool1d`.
pub type AdaptiveAvgPool1dPlan<T> = AdaptivePoolPlan<T, AdaptiveAvg, 1, 3>;
/// `nn.AdaptiveAvgPool2d`.
pub type AdaptiveAvgPool2dPlan<T> = AdaptivePoolPlan<T, AdaptiveAvg, 2, 4>;
/// `nn.AdaptiveAvgPool3d`.
pub type AdaptiveAvgPool3dPlan<T> = AdaptivePoolPlan<T, AdaptiveAvg, 3, 5>;
/// `nn.AdaptiveMaxPool1d`.
pub type AdaptiveMaxPool1dPlan<T> = AdaptivePoolPlan<T, AdaptiveMax, 1, 3>;
/// `nn.AdaptiveMaxPool2d`.
pub type AdaptiveMaxPool2dPlan<T> = AdaptivePoolPlan<T, AdaptiveMax, 2, 4>;
/// `nn.AdaptiveMaxPool3d`.
pub type AdaptiveMaxPool3dPlan<T> = AdaptivePoolPlan<T, AdaptiveMax, 3, 5>;

const OP: &str = "adaptive_pool";

pub(crate) fn validate_adaptive<const N: usize>(d: &AdaptivePoolDescriptor<N>) -> Result<()> {
    validate_planes::<N>(OP, d.batch, d.channels, &d.input)?;
    if d.output.iter().any(|&v| v <= 0) {
        return Err(invalid(OP, "output", d.output, "every extent must be > 0"));
    }
    Ok(())
}

impl<T: Element, M: AdaptiveReduce, const N: usize, const R: usize> Plan
    for AdaptivePoolPlan<T, M, N, R>
{
    type Descriptor = AdaptivePoolDescriptor<N>;
    type Args<'a> = PoolArgs<'a, T, R>;

    fn select(
        stream: &Stream,
        d: &AdaptivePoolDescriptor<N>,
        pref: &PlanPreference,
    ) -> Result<Self> {
        const { assert!(R == N + 2, "tensor rank R must be spatial rank N + 2") };
        check_dtype::<T>(OP, d.element)?;
        validate_adaptive(d)?;
        let mode = if M::KERNEL == KernelMode::AdaptiveMax as u8 {
            KernelMode::AdaptiveMax
        } else {
            KernelMode::AdaptiveAvg
        };
        let ones = [1i32; N];
        let zeros = [0i32; N];
        let core = PoolCore::new(
            stream,
            T::KIND,
            pref,
            PoolProblem {
                op: OP,
                sku_op: format!("adaptive_{}_pool{N}d", M::NAME),
                mode,
                layout: d.layout,
                batch: d.batch,
                channels: d.channels,
                input: &d.input,
                output: &d.output,
                window: &ones,
                stride: &ones,
                padding: &zeros,
                count_include_pad: false,
                divisor_override: 0,
                norm_p: 1.0,
            },
        )?;
        Ok(AdaptivePoolPlan {
            core,
            _t: PhantomData,
        })
    }

    fn sku(&self) -> &KernelSku {
        self.core_sku()
    }

    fn workspace_size(&self) -> usize {
        0
    }

    fn run(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: PoolArgs<'_, T, R>,
    ) -> Result<()> {
        self.core.run_fw(stream, args)
    }
}

impl<T: Element, M: AdaptiveReduce, const N: usize, const R: usize> AdaptivePoolPlan<T, M, N, R> {
    fn core_sku(&self) -> &KernelSku {
        self.core.sku()
    }
}

super::pool::pool_backward!(
    [T: Element, M: AdaptiveReduce, const N: usize, const R: usize] AdaptivePoolPlan<T, M, N, R>
);

#[cfg(test)]
mod tests {
    use super::*;
    use baracuda_kernels_types::Error;

    #[test]
    fn descriptor_errors() {
        let d = AdaptivePool2dDescriptor::new(1, 3, 7, 7, 0, 1, ElementKind::F32);
        assert!(matches!(
            validate_adaptive(&d),
            Err(Error::InvalidDescriptor {
                field: "output",
                ..
            })
        ));
        let d = AdaptivePool1dDescriptor::new(1, 3, 0, 2, ElementKind::F32);
        assert!(matches!(
            validate_adaptive(&d),
            Err(Error::InvalidDescriptor { field: "input", .. })
        ));
        // output larger than input is allowed (windows repeat), as in PyTorch
        assert!(
            validate_adaptive(&AdaptivePool1dDescriptor::new(1, 3, 2, 5, ElementKind::F32)).is_ok()
        );
    }
}
