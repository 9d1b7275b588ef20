//! LocalResponseNorm across the channels of `[N, C, spatial...]`, forward
//! and backward.
//!
//! The math and the work split are at the top of
//! `kernels/norm/local_response_norm.cu`.

use core::marker::PhantomData;

use baracuda_driver::{Function, LaunchConfig, ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtr, DevPtrMut, Element, ElementKind, Error, KernelSku, PlanPreference, Result,
    TensorMut, TensorRef, Workspace,
};

use super::norm::{check_outputs_disjoint, span_of, Span};
use crate::checks::{check_tensor, float_dtype_code, invalid_descriptor};
use crate::conv::ConvLayout;
use crate::kernel_sources::{typed_spec, LOCAL_RESPONSE_NORM};
use crate::launch::launch_params;
use crate::plan::own_float_sku;
use crate::{Backward, Plan};

const OP: &str = "local_response_norm";

/// Threads per block.
const THREADS: u32 = 256;
/// Most elements of `x`.
const MAX_ELEMENTS: usize = 1 << 56;
/// Most blocks a grid-stride launch starts.
const MAX_GRID: usize = 1 << 30;

/// A LocalResponseNorm of `x` of logical shape `[N, C, spatial...]` (rank
/// `R`, 3 to 5).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct LocalResponseNormDescriptor<const R: usize> {
    /// Element type of `x`, `y`, `dy`, `dx`.
    pub element: ElementKind,
    /// Logical shape `[N, C, spatial...]`, whatever the layout.
    pub shape: [usize; R],
    /// Channels in the window (PyTorch's `size`), at least 1.
    pub size: usize,
    /// Scale of the window's average of squares.
    pub alpha: f64,
    /// Exponent.
    pub beta: f64,
    /// Additive constant.
    pub k: f64,
    /// Memory order. Default channels-first.
    pub layout: ConvLayout,
}

impl<const R: usize> LocalResponseNormDescriptor<R> {
    /// `torch.nn.functional.local_response_norm(x, size)`'s defaults:
    /// alpha 1e-4, beta 0.75, k 1, channels-first.
    pub fn local_response_norm(element: ElementKind, shape: [usize; R], size: usize) -> Self {
        LocalResponseNormDescriptor {
            element,
            shape,
            size,
            alpha: 1e-4,
            beta: 0.75,
            k: 1.0,
            layout: ConvLayout::ChannelsFirst,
        }
    }
    /// alpha, beta and k.
    pub fn with_constants(mut self, alpha: f64, beta: f64, k: f64) -> Self {
        self.alpha = alpha;
        self.beta = beta;
        self.k = k;
        self
    }
    /// Memory order. Default channels-first.
    pub fn with_layout(mut self, layout: ConvLayout) -> Self {
        self.layout = layout;
        self
    }
    /// Elements of `x`.
    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }

    /// `InvalidDescriptor` (or `Unsupported` for the rank) unless the plan
    /// can run the descriptor.
    pub(crate) fn validate(&self) -> Result<()> {
        if !(3..=5).contains(&R) {
            return Err(Error::Unsupported {
                op: OP,
                what: format!("rank {R}; LocalResponseNorm takes [N, C, spatial...] of rank 3 to 5"),
            });
        }
        let count = |dims: &[usize]| dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let big = |n: Option<usize>| n.is_none_or(|n| n > MAX_ELEMENTS);
        // each part too: an empty dim must not hide an overflowing rest
        let parts = (0..R).any(|skip| {
            let rest: Vec<usize> = (0..R).filter(|&i| i != skip).map(|i| self.shape[i]).collect();
            big(count(&rest))
        });
        if big(count(&self.shape)) || parts {
            let shape = format!("{:?}", self.shape);
            return Err(invalid_descriptor(OP, "shape", shape, &format!("more than {MAX_ELEMENTS} elements")));
        }
        if self.size == 0 || self.size > u32::MAX as usize {
            return Err(invalid_descriptor(OP, "size", self.size.to_string(), "must be 1 to 2^32 - 1"));
        }
        for (field, v) in [("alpha", self.alpha), ("beta", self.beta), ("k", self.k)] {
            if !v.is_finite() {
                return Err(invalid_descriptor(OP, field, v.to_string(), "must be finite"));
            }
        }
        Ok(())
    }
}

/// The checks of `select` before it touches the GPU: the dtype code, or
/// the typed error.
pub(super) fn validate<T: Element, const R: usize>(desc: &LocalResponseNormDescriptor<R>) -> Result<u32> {
    let code = float_dtype_code::<T, R>(OP, desc.element, "LocalResponseNorm takes")?;
    desc.validate()?;
    Ok(code)
}

/// Arguments of [`LocalResponseNormPlan`]'s [`Plan::run`].
pub struct LocalResponseNormArgs<'a, T, const R: usize> {
    /// Input, dense in the descriptor's layout.
    pub x: TensorRef<'a, T, R>,
    /// Output, dense in the layout, disjoint from `x`.
    pub y: TensorMut<'a, T, R>,
}

/// Arguments of [`LocalResponseNormPlan`]'s [`Backward::run_bw`].
pub struct LocalResponseNormBwArgs<'a, T, const R: usize> {
    /// The forward input.
    pub x: TensorRef<'a, T, R>,
    /// Gradient of `y`.
    pub dy: TensorRef<'a, T, R>,
    /// Gradient of `x`, disjoint from `x` and `dy`.
    pub dx: TensorMut<'a, T, R>,
}

/// LocalResponseNorm (`torch.nn.functional.local_response_norm(x, size,
/// alpha, beta, k)`) over a rank-`R` tensor `[N, C, spatial...]`, forward
/// and backward.
///
/// # Math
/// `d[c] = k + alpha / size * sum_{j} x[j]^2` over the channels `j` from
/// `c - size / 2` to `c + (size - 1) / 2` that exist (PyTorch's zero
/// padding: the average is always over `size`), `y = x / d^beta`.
/// Backward: `dx[j] = dy[j] d[j]^-beta - 2 alpha beta / size * x[j] *
/// sum_c dy[c] x[c] d[c]^(-beta - 1)` over the channels `c` whose window
/// holds `j`.
/// # Shapes
/// `x`, `y`, `dy`, `dx`: `desc.shape`; any extent may be 0 (nothing is
/// written, as PyTorch returns the empty input).
/// # Layout
/// Dense in `desc.layout` ([`ConvLayout`]), the views' shape logical.
/// # Dtypes
/// f32, f64, f16, bf16; arithmetic in f32 (f64 for f64), one rounding.
/// Others: `Error::Unsupported`.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND`;
/// `Unsupported` for another dtype or a rank other than 3 to 5;
/// `InvalidDescriptor` for a size of 0, a non-finite alpha, beta or k, more
/// than 2^56 elements; `PreferenceRejected` when `pref` forces a backend
/// other than `Baracuda`. From `run` and `run_bw`: `ShapeMismatch`,
/// `ContextMismatch`, `InvalidArgument` for a view not dense in the layout
/// or an output overlapping an input. Nothing is written when an error is
/// returned.
pub struct LocalResponseNormPlan<T: Element, const R: usize> {
    desc: LocalResponseNormDescriptor<R>,
    sku: KernelSku,
    fw: Function,
    bw: Function,
    _t: PhantomData<T>,
}

/// Every module of the plan: one per float dtype.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    crate::conv::FLOAT_KINDS
        .iter()
        .filter_map(|&k| typed_spec(&LOCAL_RESPONSE_NORM, k))
        .collect()
}

/// `LrnParams` of local_response_norm.cu, field for field.
#[repr(C)]
#[derive(Copy, Clone)]
struct LrnParams<T> {
    x: DevPtr<T>,
    dy: DevPtr<T>,
    out: DevPtrMut<T>,
    total: u64,
    channels: u64,
    spatial: u64,
    alpha: f64,
    beta: f64,
    k: f64,
    size: u32,
    channels_last: u32,
}

fn span_ref<T: Element, const R: usize>(arg: &'static str, v: &TensorRef<'_, T, R>) -> Span {
    span_of(arg, v.data().ptr(), v.shape(), v.strides())
}

fn span_mut<T: Element, const R: usize>(arg: &'static str, v: &TensorMut<'_, T, R>) -> Span {
    span_of(arg, v.data().ptr().as_const(), v.shape(), v.strides())
}

impl<T: Element, const R: usize> LocalResponseNormPlan<T, R> {
    /// The descriptor.
    pub fn descriptor(&self) -> &LocalResponseNormDescriptor<R> {
        &self.desc
    }
    fn check(&self, arg: &'static str, v: &TensorRef<'_, T, R>, ctx: usize) -> Result<u64> {
        check_tensor(OP, arg, v, &self.desc.shape, self.desc.layout, ctx)
    }
    fn params(&self) -> LrnParams<T> {
        let d = &self.desc;
        LrnParams {
            x: DevPtr::NULL,
            dy: DevPtr::NULL,
            out: DevPtrMut::NULL,
            total: d.elements() as u64,
            channels: d.shape[1] as u64,
            spatial: d.shape[2..].iter().product::<usize>() as u64,
            alpha: d.alpha,
            beta: d.beta,
            k: d.k,
            size: d.size as u32,
            channels_last: (d.layout == ConvLayout::ChannelsLast) as u32,
        }
    }
    fn cfg(&self) -> LaunchConfig {
        let blocks = self.desc.elements().div_ceil(THREADS as usize);
        LaunchConfig::linear(blocks.clamp(1, MAX_GRID) as u32, THREADS)
    }
}

impl<T: Element, const R: usize> Plan for LocalResponseNormPlan<T, R> {
    type Descriptor = LocalResponseNormDescriptor<R>;
    type Args<'a> = LocalResponseNormArgs<'a, T, R>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        validate::<T, R>(desc)?;
        pref.check_backend(OP, &[BackendKind::Baracuda])?;
        let spec = typed_spec(&LOCAL_RESPONSE_NORM, T::KIND).expect("a float dtype");
        let module = stream.context().module(&spec)?;
        let plan = LocalResponseNormPlan {
            desc: *desc,
            sku: own_float_sku::<T>(
                stream,
                "norm.local_response_norm".into(),
                "element-wise channel window",
            ),
            fw: module.function("lrn_fw")?,
            bw: module.function("lrn_bw")?,
            _t: PhantomData,
        };
        pref.check_workspace(OP, plan.workspace_size())?;
        Ok(plan)
    }

    fn sku(&self) -> &KernelSku {
        &self.sku
    }

    fn workspace_size(&self) -> usize {
        0
    }

    fn run(&self, stream: &Stream, _workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let ctx = stream.context().id();
        let xp = self.check("x", &args.x, ctx)?;
        let yp = self.check("y", &args.y.as_const(), ctx)?;
        check_outputs_disjoint(OP, &[span_mut("y", &args.y)], vec![span_ref("x", &args.x)])?;
        if self.desc.elements() == 0 {
            return Ok(());
        }
        let mut p = self.params();
        p.x = DevPtr::from_addr(xp);
        p.out = DevPtrMut::from_addr(yp);
        // SAFETY: x and y were checked against the descriptor's shape,
        // dense in its layout, and disjoint; the kernel reads x and writes
        // y at offsets below N C S.
        unsafe { launch_params(stream, &self.fw, self.cfg(), p) }
    }
}

impl<T: Element, const R: usize> Backward for LocalResponseNormPlan<T, R> {
    type BwArgs<'a> = LocalResponseNormBwArgs<'a, T, R>;

    fn run_bw(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let ctx = stream.context().id();
        let xp = self.check("x", &args.x, ctx)?;
        let dyp = self.check("dy", &args.dy, ctx)?;
        let dxp = self.check("dx", &args.dx.as_const(), ctx)?;
        let inputs = vec![span_ref("x", &args.x), span_ref("dy", &args.dy)];
        check_outputs_disjoint(OP, &[span_mut("dx", &args.dx)], inputs)?;
        if self.desc.elements() == 0 {
            return Ok(());
        }
        let mut p = self.params();
        p.x = DevPtr::from_addr(xp);
        p.dy = DevPtr::from_addr(dyp);
        p.out = DevPtrMut::from_addr(dxp);
        // SAFETY: x, dy and dx were checked against the descriptor's
        // shape, dense in its layout, dx disjoint from both; the kernel
        // reads x and dy and writes dx at offsets below N C S.
        unsafe { launch_params(stream, &self.bw, self.cfg(), p) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_checks_follow_pytorch() {
        let d = LocalResponseNormDescriptor::local_response_norm(ElementKind::F32, [2, 16, 8, 8], 5);
        assert!(d.validate().is_ok());
        assert!(LocalResponseNormDescriptor { size: 0, ..d }.validate().is_err());
        let nan = d.with_constants(f64::NAN, 0.75, 1.0).validate();
        assert!(matches!(nan, Err(Error::InvalidDescriptor { field: "alpha", .. })));
        let empty = LocalResponseNormDescriptor::local_response_norm(ElementKind::F32, [0, 3, 4], 2);
        assert!(empty.validate().is_ok());
        let hidden = LocalResponseNormDescriptor::local_response_norm(ElementKind::F32, [0, 1 << 40, 1 << 40], 2);
        assert!(matches!(hidden.validate(), Err(Error::InvalidDescriptor { field: "shape", .. })));
        let rank2 = LocalResponseNormDescriptor::local_response_norm(ElementKind::F32, [2, 3], 2);
        assert!(matches!(rank2.validate(), Err(Error::Unsupported { .. })));
    }
}
