//! Power-average pooling, spatial rank 1 to 3 (PyTorch `LPPool1d/2d/3d`):
//! `y = (sum_window x^p / pool * window_prod)^(1/p)` where `pool` is the
//! window clipped to the input when `ceil_mode` lets it hang over (so the
//! usual case is `(sum x^p)^(1/p)`), exactly PyTorch's
//! `avg_pool(x^p) * window_prod` form. No padding. Backward needs x and y:
//! `dx = sum_o dy[o] * (window_prod/pool(o)) * x^(p-1) * y[o]^(1-p)`.
//! Runs on the generic pooling kernels.

use std::marker::PhantomData;

use baracuda_driver::Stream;
use baracuda_kernels_types::{Element, ElementKind, KernelSku, PlanPreference, Result, Workspace};

use super::descriptor::invalid;
use super::pool::{validate_window, KernelMode, PoolArgs, PoolCore, PoolProblem};
use super::{check_dtype, ConvLayout};
use crate::Plan;

/// An Lp pooling of spatial rank `N`. Defaults: stride = window,
/// ceil_mode false, channels-first.
#[derive(Copy, Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LpPoolDescriptor<const N: usize> {
    /// Batch.
    pub batch: i32,
    /// Channels.
    pub channels: i32,
    /// Input spatial extents.
    pub input: [i32; N],
    /// Window.
    pub window: [i32; N],
    /// Norm exponent `p` (> 0, finite).
    pub p: f64,
    /// Stride.
    pub stride: [i32; N],
    /// Round the output size up.
    pub ceil_mode: bool,
    /// Element type.
    pub element: ElementKind,
    /// Memory order.
    pub layout: ConvLayout,
}

/// 1-D Lp pooling descriptor.
pub type LpPool1dDescriptor = LpPoolDescriptor<1>;
/// 2-D Lp pooling descriptor.
pub type LpPool2dDescriptor = LpPoolDescriptor<2>;
/// 3-D Lp pooling descriptor.
pub type LpPool3dDescriptor = LpPoolDescriptor<3>;

macro_rules! lp_ctor {
    ($n:literal, [$($i:ident),+], [$($k:ident),+], [$($s:ident),+]) => {
        impl LpPoolDescriptor<$n> {
            /// A descriptor with PyTorch's defaults (stride = window).
            #[allow(clippy::too_many_arguments)] // the seed API's positional constructor
            pub fn new(batch: i32, channels: i32, $($i: i32,)+ $($k: i32,)+ p: f64, element: ElementKind) -> Self {
                LpPoolDescriptor {
                    batch, channels, input: [$($i),+], window: [$($k),+], p, stride: [$($k),+],
                    ceil_mode: false, element, layout: ConvLayout::ChannelsFirst,
                }
            }
            /// Stride per axis. Default: the window.
            pub fn with_stride(mut self, $($s: i32),+) -> Self { self.stride = [$($s),+]; self }
        }
    };
}
lp_ctor!(1, [l_in], [window], [stride_l]);
lp_ctor!(2, [h_in, w_in], [window_h, window_w], [stride_h, stride_w]);
lp_ctor!(
    3,
    [d_in, h_in, w_in],
    [window_d, window_h, window_w],
    [stride_d, stride_h, stride_w]
);

impl<const N: usize> LpPoolDescriptor<N> {
    /// Ceil instead of floor in the output size. Default false.
    pub fn with_ceil_mode(mut self, ceil_mode: bool) -> Self {
        self.ceil_mode = ceil_mode;
        self
    }
    /// Memory order. Default channels-first.
    pub fn with_layout(mut self, layout: ConvLayout) -> Self {
        self.layout = layout;
        self
    }
}

/// Lp pooling of spatial rank `N` on rank-`R = N + 2` tensors.
///
/// # Shapes
/// `x`: `[batch, channels, input...]`; `y`: `[batch, channels, output...]`.
/// # Layout
/// Dense channels-first or channels-last.
/// # Dtypes
/// f32, f64, f16, bf16 (f32 accumulation).
/// # Errors
/// `InvalidDescriptor` for `p` not finite and > 0 and the windowed-pool
/// checks; `run_bw` needs `x` and `y` (`InvalidArgument` otherwise).
#[derive(Debug)]
pub struct LpPoolPlan<T: Element, const N: usize, const R: usize> {
    core: PoolCore,
    _t: PhantomData<T>,
}

/// `nn.LPPool1d`.
pub type LpPool1dPlan<T> = LpPoolPlan<T, 1, 3>;
/// `nn.LPPool2d`.
pub type LpPool2dPlan<T> = LpPoolPlan<T, 2, 4>;
/// `nn.LPPool3d`.
pub type LpPool3dPlan<T> = LpPoolPlan<T, 3, 5>;

const OP: &str = "lp_pool";

pub(crate) fn validate_lp<const N: usize>(d: &LpPoolDescriptor<N>) -> Result<[i32; N]> {
    if !(d.p.is_finite() && d.p > 0.0) {
        return Err(invalid(OP, "p", d.p, "must be finite and > 0"));
    }
    validate_window(
        OP,
        d.batch,
        d.channels,
        &d.input,
        &d.window,
        &[0; N],
        &d.stride,
        d.ceil_mode,
    )
}

impl<T: Element, const N: usize, const R: usize> Plan for LpPoolPlan<T, N, R> {
    type Descriptor = LpPoolDescriptor<N>;
    type Args<'a> = PoolArgs<'a, T, R>;

    fn select(stream: &Stream, d: &LpPoolDescriptor<N>, pref: &PlanPreference) -> Result<Self> {
        const { assert!(R == N + 2, "tensor rank R must be spatial rank N + 2") };
        check_dtype::<T>(OP, d.element)?;
        let output = validate_lp(d)?;
        let core = PoolCore::new(
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
                input: &d.input,
                output: &output,
                window: &d.window,
                stride: &d.stride,
                padding: &[0; N],
                count_include_pad: true,
                divisor_override: 0,
                norm_p: d.p as f32,
            },
        )?;
        Ok(LpPoolPlan {
            core,
            _t: PhantomData,
        })
    }

    fn sku(&self) -> &KernelSku {
        self.core.sku()
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

super::pool::pool_backward!([T: Element, const N: usize, const R: usize] LpPoolPlan<T, N, R>);

#[cfg(test)]
mod tests {
    use super::*;
    use baracuda_kernels_types::Error;

    #[test]
    fn descriptor_errors() {
        let d = LpPool2dDescriptor::new(1, 2, 6, 6, 2, 2, 0.0, ElementKind::F32);
        assert!(matches!(
            validate_lp(&d),
            Err(Error::InvalidDescriptor { field: "p", .. })
        ));
        let d = LpPool1dDescriptor::new(1, 2, 6, 2, f64::NAN, ElementKind::F32);
        assert!(matches!(
            validate_lp(&d),
            Err(Error::InvalidDescriptor { field: "p", .. })
        ));
        let d = LpPool1dDescriptor::new(1, 2, 6, 7, 2.0, ElementKind::F32);
        assert!(matches!(
            validate_lp(&d),
            Err(Error::InvalidDescriptor {
                field: "output",
                ..
            })
        ));
        assert_eq!(
            validate_lp(
                &LpPool1dDescriptor::new(1, 2, 7, 2, 2.0, ElementKind::F32).with_ceil_mode(true)
            )
            .unwrap(),
            [4]
        );
    }
}
