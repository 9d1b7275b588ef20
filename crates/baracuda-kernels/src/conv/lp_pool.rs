//! Power-average pooling, spatial rank 1 to 3 (PyTorch `LPPool1d/2d/3d`):
//! `y = (sum_window x^p / pool * window_prod)^(1/p)` where `pool` is the
//! window clipped to the input when `ceil_mode` lets it hang over (so the
//! usual case is `(sum x^p)^(1/p)`), exactly PyTorch's
//! `avg_pool(x^p) * window_prod` form. No padding. Backward needs x and y:
//! `dx = sum_o dy[o] * (window_prod/pool(o)) * x^(p-1) * y[o]^(1-p)`.
//! Runs on the generic pooling kernels.


use baracuda_driver::Stream;
use baracuda_kernels_types::{Element, ElementKind, PlanPreference, Result, Workspace};

use super::window::invalid;
use super::pool::{validate_window, KernelMode, PoolCore, PoolProblem};
use super::window::{window_setters, Window};
use super::{check_dtype, ConvLayout, Rank, SpatialRank};

/// An Lp pooling of spatial rank `N`. Defaults: stride = kernel, no
/// padding or dilation (PyTorch's `LPPool` has neither), ceil_mode false,
/// channels-first.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct LpPoolDescriptor<const N: usize> {
    /// Batch.
    pub batch: usize,
    /// Channels.
    pub channels: usize,
    /// Input spatial extents.
    pub input: [usize; N],
    /// Kernel and stride (padding 0, dilation 1).
    pub window: Window<N>,
    /// Norm exponent `p` (> 0, finite).
    pub p: f64,
    /// Round the output size up.
    pub ceil_mode: bool,
    /// Element type.
    pub element: ElementKind,
    /// Memory order.
    pub layout: ConvLayout,
}

rank_aliases!("Lp pooling descriptor", LpPoolDescriptor<N> => LpPool1dDescriptor, LpPool2dDescriptor, LpPool3dDescriptor);

window_setters!(LpPoolDescriptor);

impl<const N: usize> LpPoolDescriptor<N> {
    /// A power-average pooling of `kernel` over `input` with exponent `p`
    /// (stride = kernel).
    pub fn new(
        batch: usize,
        channels: usize,
        input: [usize; N],
        kernel: [usize; N],
        p: f64,
        element: ElementKind,
    ) -> Self {
        LpPoolDescriptor {
            batch,
            channels,
            input,
            window: Window::new(kernel).with_stride(kernel),
            p,
            ceil_mode: false,
            element,
            layout: ConvLayout::ChannelsFirst,
        }
    }
    /// Ceil instead of floor in the output size. Default false.
    pub fn with_ceil_mode(mut self, ceil_mode: bool) -> Self {
        self.ceil_mode = ceil_mode;
        self
    }
}

super::pool::pool_plan!(
    /// Lp pooling of spatial rank `N` on rank-`R = N + 2` tensors.
    ///
    /// `y[o] = (sum_window x^p / pool(o) * kernel_prod)^(1/p)`, with
    /// `pool(o)` the window clipped to the input (the whole window unless
    /// `ceil_mode` lets the last one hang over), so usually
    /// `(sum x^p)^(1/p)`: PyTorch's `LPPool`. Backward, reading `x` and
    /// `y`: `dx[i] = sum_o dy[o] * (kernel_prod / pool(o)) * x[i]^(p-1) *
    /// y[o]^(1-p)` over the windows holding `i`. `p` runs in f32.
    ///
    /// # Shapes
    /// `x`, `dx`: `[batch, channels, input...]`; `y`, `dy`: `[batch,
    /// channels, output...]`.
    /// # Layout
    /// Dense channels-first or channels-last. No workspace.
    /// # Aliasing
    /// None, as [`PoolPlan`](super::PoolPlan): an output overlapping an input
    /// or the other output is `InvalidArgument` naming it.
    /// # Dtypes
    /// f32, f64, f16, bf16 (f32 accumulation). Others: `Unsupported`.
    /// # Errors
    /// `InvalidDescriptor` for `p` not finite and > 0, a padding other
    /// than 0 or a dilation other than 1, and the windowed-pool checks of
    /// [`PoolPlan`](super::PoolPlan); otherwise as there, with
    /// `InvalidArgument` for `indices` given to `run` and for `x` or `y`
    /// missing from `run_bw`.
    [T: Element, const N: usize, const R: usize] LpPoolPlan<T, N, R>,
    T,
    LpPoolDescriptor<N>
);

rank_aliases!("nn.LPPool", LpPoolPlan<T> => LpPool1dPlan, LpPool2dPlan, LpPool3dPlan);

const OP: &str = "lp_pool";

pub(crate) fn validate_lp<const N: usize>(d: &LpPoolDescriptor<N>) -> Result<[usize; N]> {
    if !(d.p.is_finite() && d.p > 0.0) {
        return Err(invalid(OP, "p", d.p, "must be finite and > 0"));
    }
    let w = &d.window;
    for (field, arr, want) in [
        ("padding", &w.padding, 0),
        ("padding_end", &w.padding_end, 0),
        ("dilation", &w.dilation, 1),
    ] {
        if arr.iter().any(|&v| v != want) {
            return Err(invalid(
                OP,
                field,
                arr,
                format!("Lp pooling takes {want} only"),
            ));
        }
    }
    validate_window(OP, (d.batch, d.channels), &d.input, w, d.ceil_mode)
}

impl<T: Element, const N: usize, const R: usize> LpPoolPlan<T, N, R>
where
    Rank<N, R>: SpatialRank,
{
    fn core(stream: &Stream, d: &LpPoolDescriptor<N>, pref: &PlanPreference) -> Result<PoolCore> {
        check_dtype::<T>(OP, d.element)?;
        let output = validate_lp(d)?;
        PoolCore::new(
            stream,
            T::KIND,
            pref,
            PoolProblem {
                op: OP,
                sku_op: format!("lp_pool{N}d"),
                mode: KernelMode::Lp,
                layout: d.layout,
                batch: d.batch,
                channels: d.channels,
                input: d.input,
                output,
                window: d.window,
                count_include_pad: true,
                divisor_override: 0,
                norm_p: d.p as f32,
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
        let field = |d: LpPool1dDescriptor| match validate_lp(&d) {
            Err(Error::InvalidDescriptor { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        let d = LpPool2dDescriptor::new(1, 2, [6, 6], [2, 2], 0.0, ElementKind::F32);
        assert!(matches!(
            validate_lp(&d),
            Err(Error::InvalidDescriptor { field: "p", .. })
        ));
        let d = |k, p| LpPool1dDescriptor::new(1, 2, [6], [k], p, ElementKind::F32);
        assert_eq!(field(d(2, f64::NAN)), "p");
        assert_eq!(field(d(7, 2.0)), "output");
        assert_eq!(field(d(2, 2.0).with_padding([1])), "padding");
        assert_eq!(field(d(2, 2.0).with_dilation([2])), "dilation");
        assert_eq!(
            validate_lp(
                &LpPool1dDescriptor::new(1, 2, [7], [2], 2.0, ElementKind::F32)
                    .with_ceil_mode(true)
            )
            .unwrap(),
            [4]
        );
    }
}
