//! Adaptive average and max pooling, spatial rank 1 to 3 (PyTorch
//! `AdaptiveAvgPoolNd`, `AdaptiveMaxPoolNd`).
//!
//! Output `o` along an axis pools inputs `[floor(o*in/out),
//! ceil((o+1)*in/out))`; windows may overlap and differ in size. Max writes
//! optional indices (flat spatial input index) that its backward needs.
//! Runs on the generic pooling kernels of [`PoolPlan`](super::PoolPlan);
//! adaptive average to an all-1 output (global average pooling) takes
//! their deterministic global-average reduction and broadcast kernels.


use baracuda_driver::Stream;
use baracuda_kernels_types::{Element, ElementKind, PlanPreference, Result, Workspace};

use super::window::invalid;
use super::pool::{
    validate_planes, KernelMode, PoolAvg, PoolCore, PoolMax, PoolProblem, PoolReduce,
};
use super::window::Window;
use super::{check_dtype, ConvLayout, Rank, SpatialRank};

/// An adaptive pooling of spatial rank `N`: in and out extents only.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct AdaptivePoolDescriptor<const N: usize> {
    /// Batch.
    pub batch: usize,
    /// Channels.
    pub channels: usize,
    /// Input spatial extents.
    pub input: [usize; N],
    /// Output spatial extents.
    pub output: [usize; N],
    /// Element type.
    pub element: ElementKind,
    /// Memory order. Default channels-first.
    pub layout: ConvLayout,
}

rank_aliases!("adaptive pooling descriptor", AdaptivePoolDescriptor<N> => AdaptivePool1dDescriptor, AdaptivePool2dDescriptor, AdaptivePool3dDescriptor);

impl<const N: usize> AdaptivePoolDescriptor<N> {
    /// An adaptive pooling of `input` down (or up) to `output`.
    pub fn new(
        batch: usize,
        channels: usize,
        input: [usize; N],
        output: [usize; N],
        element: ElementKind,
    ) -> Self {
        AdaptivePoolDescriptor {
            batch,
            channels,
            input,
            output,
            element,
            layout: ConvLayout::ChannelsFirst,
        }
    }
    /// Memory order. Default channels-first.
    pub fn with_layout(mut self, layout: ConvLayout) -> Self {
        self.layout = layout;
        self
    }
}

super::pool::pool_plan!(
    /// Adaptive pooling of spatial rank `N` on rank-`R = N + 2` tensors.
    ///
    /// Output `o` along an axis of `input` extent `in` and `output` extent
    /// `out` pools the inputs `[floor(o*in/out), ceil((o+1)*in/out))`;
    /// windows may overlap and differ in size. Max (`M` = [`PoolMax`]):
    /// `y[o] = max x` over the window (NaN wins), `indices[o]` the flat
    /// spatial input index of the first maximum; avg ([`PoolAvg`]): the
    /// window's mean. Backward as [`PoolPlan`](super::PoolPlan)'s: max
    /// `dx[i] = sum of dy[o] with indices[o] == i`, avg `dx[i] = sum of
    /// dy[o] / |window(o)|` over the windows holding `i`.
    ///
    /// # Shapes
    /// `x`, `dx`: `[batch, channels, input...]`; `y`, `dy`, `indices`:
    /// `[batch, channels, output...]` (an `output` extent may exceed the
    /// input's).
    /// # Layout
    /// Dense channels-first or channels-last. No workspace.
    /// # Aliasing
    /// None, as [`PoolPlan`](super::PoolPlan): an output overlapping an input
    /// or the other output is `InvalidArgument` naming it.
    /// # Dtypes
    /// f32, f64, f16, bf16; indices i64. Others: `Unsupported`.
    /// # Errors
    /// `InvalidDescriptor` for a zero batch, channel count, input or
    /// output extent; otherwise as [`PoolPlan`](super::PoolPlan)
    /// (`indices` given to, or missing from, the max modes only).
    [T: Element, M: PoolReduce, const N: usize, const R: usize] AdaptivePoolPlan<T, M, N, R>,
    (T, M),
    AdaptivePoolDescriptor<N>
);

rank_aliases!("nn.AdaptiveAvgPool", AdaptivePoolPlan<T, PoolAvg> => AdaptiveAvgPool1dPlan, AdaptiveAvgPool2dPlan, AdaptiveAvgPool3dPlan);
rank_aliases!("nn.AdaptiveMaxPool", AdaptivePoolPlan<T, PoolMax> => AdaptiveMaxPool1dPlan, AdaptiveMaxPool2dPlan, AdaptiveMaxPool3dPlan);

const OP: &str = "adaptive_pool";

pub(crate) fn validate_adaptive<const N: usize>(d: &AdaptivePoolDescriptor<N>) -> Result<()> {
    validate_planes::<N>(OP, (d.batch, d.channels), &d.input)?;
    if d.output.contains(&0) {
        return Err(invalid(OP, "output", d.output, "every extent must be > 0"));
    }
    Ok(())
}

impl<T: Element, M: PoolReduce, const N: usize, const R: usize> AdaptivePoolPlan<T, M, N, R>
where
    Rank<N, R>: SpatialRank,
{
    fn core(stream: &Stream, d: &AdaptivePoolDescriptor<N>, pref: &PlanPreference) -> Result<PoolCore> {
        check_dtype::<T>(OP, d.element)?;
        validate_adaptive(d)?;
        let mode = if M::MAX {
            KernelMode::AdaptiveMax
        } else {
            KernelMode::AdaptiveAvg
        };
        PoolCore::new(
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
                input: d.input,
                output: d.output,
                window: Window::new([1; N]),
                count_include_pad: false,
                divisor_override: 0,
                norm_p: 1.0,
            },
        )
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use baracuda_kernels_types::Error;

    #[test]
    fn descriptor_errors() {
        let d = AdaptivePool2dDescriptor::new(1, 3, [7, 7], [0, 1], ElementKind::F32);
        assert!(matches!(
            validate_adaptive(&d),
            Err(Error::InvalidDescriptor {
                field: "output",
                ..
            })
        ));
        let d = AdaptivePool1dDescriptor::new(1, 3, [0], [2], ElementKind::F32);
        assert!(matches!(
            validate_adaptive(&d),
            Err(Error::InvalidDescriptor { field: "input", .. })
        ));
        // output larger than input is allowed (windows repeat), as in PyTorch
        assert!(validate_adaptive(&AdaptivePool1dDescriptor::new(
            1,
            3,
            [2],
            [5],
            ElementKind::F32
        ))
        .is_ok());
    }
}
