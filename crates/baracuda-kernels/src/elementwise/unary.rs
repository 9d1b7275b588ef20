//! Pointwise unary ops: `y = f(x)` and the backward `dx = dy * f'(x)`.
//!
//! The math of each op is in [`UnaryOp`] and at the top of
//! `kernels/elementwise/unary.cu`.

use core::marker::PhantomData;

use baracuda_driver::Stream;
use baracuda_kernels_types::{
    BackendKind, Element, Grad, Grads, KernelSku, PlanPreference, PrecisionGuarantee, Result,
    TensorMut, TensorRef, Workspace,
};

use super::layout::{check_operand, check_select, contig_shape, spec, MapKernels};
use crate::checks::{check_alias, Extent};
use crate::kernel_sources;
use crate::{Backward, Plan};

/// A pointwise unary function.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnaryOp {
    /// `max(x, 0)`; NaN propagates. Gradient `x <= 0 ? 0 : 1`.
    Relu,
    /// `x/2 * (1 + erf(x/sqrt(2)))` (PyTorch `gelu`, approximate='none').
    /// Gradient `Phi(x) + x phi(x)` (the standard normal CDF and density).
    GeluErf,
    /// `x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))` (approximate='tanh').
    /// Gradient `(1 + t)/2 + x (1 - t^2) k (1 + 3c x^2) / 2`, with
    /// `t` the tanh, `k = sqrt(2/pi)`, `c = 0.044715`.
    GeluTanh,
    /// `x * sigmoid(x)`. Gradient `s (1 + x (1 - s))`, `s = sigmoid(x)`.
    Silu,
    /// `1 / (1 + exp(-x))`. Gradient `s (1 - s)`.
    Sigmoid,
    /// `tanh(x)`. Gradient `1 - tanh(x)^2`.
    Tanh,
    /// `exp(x)`. Gradient `exp(x)`.
    Exp,
    /// `-x`. Gradient `-1`.
    Neg,
}

impl UnaryOp {
    /// Every op, in declaration order.
    pub const ALL: [UnaryOp; 8] = [
        UnaryOp::Relu,
        UnaryOp::GeluErf,
        UnaryOp::GeluTanh,
        UnaryOp::Silu,
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
        UnaryOp::Exp,
        UnaryOp::Neg,
    ];

    /// True for ops built on exp/erf/tanh, whose math costs about as much as
    /// their memory traffic on 16-bit types.
    pub fn is_transcendental(self) -> bool {
        matches!(
            self,
            UnaryOp::GeluErf | UnaryOp::GeluTanh | UnaryOp::Silu | UnaryOp::Sigmoid | UnaryOp::Tanh
        )
    }

    /// Position in [`UnaryOp::ALL`] (`BARACUDA_OP` of the kernel source).
    pub fn index(self) -> u32 {
        Self::ALL.iter().position(|&o| o == self).unwrap_or(0) as u32
    }

    /// Kernel-name suffix and op name.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Relu => "relu",
            UnaryOp::GeluErf => "gelu_erf",
            UnaryOp::GeluTanh => "gelu_tanh",
            UnaryOp::Silu => "silu",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Exp => "exp",
            UnaryOp::Neg => "neg",
        }
    }
}

/// A unary op over a rank-`N` tensor of one element type.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct UnaryDescriptor<const N: usize> {
    /// The function.
    pub op: UnaryOp,
    /// Element type of `x` and `y`.
    pub element: baracuda_kernels_types::ElementKind,
    /// Shape of `x` and `y`.
    pub shape: [usize; N],
}

/// Arguments of [`UnaryPlan`]'s [`Plan::run`]; [`UnaryPlan::run_in_place`]
/// takes one view that is both.
pub struct UnaryArgs<'a, T, const N: usize> {
    /// Input, any strides (0 = broadcast).
    pub x: TensorRef<'a, T, N>,
    /// Output, any non-overlapping strides. It may share memory with `x`
    /// only as the same view (in place).
    pub y: TensorMut<'a, T, N>,
}

/// Arguments of [`UnaryPlan`]'s [`Backward::run_bw`];
/// [`UnaryPlan::run_bw_in_place`] writes `dx` over `dy`.
pub struct UnaryBwArgs<'a, T, const N: usize> {
    /// The forward input.
    pub x: TensorRef<'a, T, N>,
    /// Gradient of the output.
    pub dy: TensorRef<'a, T, N>,
    /// Gradient of the input. It may share memory with `x` or `dy` only as
    /// the same view (in place).
    pub dx: TensorMut<'a, T, N>,
}

/// `y = f(x)` elementwise, and its backward `dx = dy * f'(x)`; `f` and
/// `f'` of each op are in [`UnaryOp`].
///
/// # Shapes
/// `x`, `y`, `dy`, `dx`: `desc.shape`, rank `N <= 8`. No workspace:
/// `workspace_size` and `bw_workspace_size` are 0 and the `workspace`
/// argument is not read.
/// # Layout
/// Any strides; `x` and `dy` may broadcast (stride 0). Contiguous, 16-byte
/// aligned operands take the vectorised kernel; others the strided kernel
/// (64-bit offsets).
/// # Aliasing
/// `y` may be `x` and `dx` may be `x` or `dy`, each as the same view (one
/// thread reads an element before writing it); from safe code through
/// [`UnaryPlan::run_in_place`] and [`UnaryPlan::run_bw_in_place`]. Any
/// other overlap of an output with an input is `InvalidArgument`.
/// # Dtypes
/// f32, f64, f16, bf16; f16/bf16 compute in f32 and round once.
/// Others: `Error::Unsupported`.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND`;
/// `Unsupported` for another dtype or a rank `N > 8`;
/// `PreferenceRejected` when `pref` forces a backend other than
/// `Baracuda`. From `run`, `run_bw` and the in-place forms:
/// `ShapeMismatch` when a view's shape is not `desc.shape`;
/// `ContextMismatch` when a view lives on another context than the
/// stream's; `InvalidArgument` when an output overlaps an input other
/// than in place.
pub struct UnaryPlan<T: Element, const N: usize> {
    desc: UnaryDescriptor<N>,
    sku: KernelSku,
    fw: MapKernels,
    bw: MapKernels,
    _t: PhantomData<T>,
}

const OP: &str = "unary";

/// Pointwise ops compute in f32 (f64 for f64), round once, and do not
/// depend on the launch shape.
pub(crate) fn pointwise_precision<T: Element>() -> PrecisionGuarantee {
    PrecisionGuarantee::float(T::KIND, true)
}

impl<T: Element, const N: usize> Plan for UnaryPlan<T, N> {
    type Descriptor = UnaryDescriptor<N>;
    type Args<'a> = UnaryArgs<'a, T, N>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let dt = check_select::<T, N>(OP, desc.element, pref)?;
        pref.check_workspace(OP, 0)?;
        let shape = contig_shape(desc.op.is_transcendental(), dt);
        let spec = spec(&kernel_sources::UNARY, dt, desc.op.index(), shape);
        let name = desc.op.name();
        Ok(UnaryPlan {
            desc: *desc,
            sku: KernelSku {
                op: format!("unary.{name}"),
                element: T::KIND,
                backend: BackendKind::Baracuda,
                arch: stream.context().device().arch,
                variant: "vec16 contiguous / rank-8 strided".into(),
                precision: pointwise_precision::<T>(),
            },
            fw: MapKernels::load(stream, &spec, "unary_fw", name, shape)?,
            bw: MapKernels::load(stream, &spec, "unary_bw", name, shape)?,
            _t: PhantomData,
        })
    }

    fn sku(&self) -> &KernelSku {
        &self.sku
    }

    fn workspace_size(&self) -> usize {
        0
    }

    fn run(&self, stream: &Stream, _workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let shape = &self.desc.shape;
        check_operand(OP, "x", stream, shape, args.x.shape(), args.x.data().ctx_id())?;
        check_operand(OP, "y", stream, shape, args.y.shape(), args.y.data().ctx_id())?;
        check_alias(OP, &Extent::of_mut("y", &args.y), &Extent::of("x", &args.x), true)?;
        // SAFETY: both views were bounds-checked at construction and match
        // the plan's shape, and y is disjoint from x or x itself (checked
        // above).
        unsafe {
            self.fw.launch::<T>(
                stream,
                shape,
                &[(args.y.data().ptr(), args.y.strides())],
                &[(args.x.data().ptr(), args.x.strides())],
            )
        }
    }
}

impl<T: Element, const N: usize> UnaryPlan<T, N> {
    /// `xy = f(xy)` in place: [`Plan::run`] with `y` the same view as `x`.
    ///
    /// # Errors
    /// As [`Plan::run`], naming `xy`.
    pub fn run_in_place(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        xy: TensorMut<'_, T, N>,
    ) -> Result<()> {
        let shape = &self.desc.shape;
        check_operand(OP, "xy", stream, shape, xy.shape(), xy.data().ctx_id())?;
        let (ptr, strides) = (xy.data().ptr(), xy.strides());
        // SAFETY: the view was bounds-checked at construction and matches
        // the plan's shape; output and input are one view.
        unsafe { self.fw.launch::<T>(stream, shape, &[(ptr, strides)], &[(ptr.as_const(), strides)]) }
    }

    /// The backward with `dx` written over `dy`: `dy_dx` holds the
    /// gradient of the output on entry and the gradient of the input on
    /// return.
    ///
    /// # Errors
    /// As [`Backward::run_bw`], naming `dy_dx`; `InvalidArgument` when `x`
    /// overlaps `dy_dx` other than as the same view.
    pub fn run_bw_in_place(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        x: TensorRef<'_, T, N>,
        dy_dx: TensorMut<'_, T, N>,
    ) -> Result<()> {
        let shape = &self.desc.shape;
        check_operand(OP, "x", stream, shape, x.shape(), x.data().ctx_id())?;
        check_operand(OP, "dy_dx", stream, shape, dy_dx.shape(), dy_dx.data().ctx_id())?;
        check_alias(OP, &Extent::of_mut("dy_dx", &dy_dx), &Extent::of("x", &x), true)?;
        let (ptr, strides) = (dy_dx.data().ptr(), dy_dx.strides());
        // SAFETY: views bounds-checked at construction, shapes checked
        // above; dx is dy itself and disjoint from x or x itself.
        unsafe {
            self.bw.launch::<T>(
                stream,
                shape,
                &[(ptr, strides)],
                &[(x.data().ptr(), x.strides()), (ptr.as_const(), strides)],
            )
        }
    }
}

impl<T: Element, const N: usize> Backward for UnaryPlan<T, N> {
    type BwArgs<'a> = UnaryBwArgs<'a, T, N>;

    fn grads(&self) -> Grads {
        Grad::X.into()
    }

    fn bw_workspace_size(&self, _wants: Grads) -> usize {
        0
    }

    fn run_bw(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let shape = &self.desc.shape;
        check_operand(OP, "x", stream, shape, args.x.shape(), args.x.data().ctx_id())?;
        check_operand(OP, "dy", stream, shape, args.dy.shape(), args.dy.data().ctx_id())?;
        check_operand(OP, "dx", stream, shape, args.dx.shape(), args.dx.data().ctx_id())?;
        let dx = Extent::of_mut("dx", &args.dx);
        check_alias(OP, &dx, &Extent::of("x", &args.x), true)?;
        check_alias(OP, &dx, &Extent::of("dy", &args.dy), true)?;
        // SAFETY: views bounds-checked at construction, shapes checked
        // above; dx is disjoint from x and dy or one of them itself.
        unsafe {
            self.bw.launch::<T>(
                stream,
                shape,
                &[(args.dx.data().ptr(), args.dx.strides())],
                &[
                    (args.x.data().ptr(), args.x.strides()),
                    (args.dy.data().ptr(), args.dy.strides()),
                ],
            )
        }
    }
}
