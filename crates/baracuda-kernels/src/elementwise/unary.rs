//! Pointwise unary ops: `y = f(x)` and the backward `dx = dy * f'(x)`.
//!
//! The math of each op is in [`UnaryOp`] and at the top of
//! `kernels/elementwise/unary.cu`.

use core::marker::PhantomData;

use baracuda_driver::Stream;
use baracuda_kernels_types::{
    BackendKind, Element, Error, Grad, Grads, KernelSku, PlanPreference,
    PrecisionGuarantee, Result, TensorMut, TensorRef, Workspace,
};

use super::layout::{contig_shape, dtype_id, spec, MapKernels};
use crate::kernel_sources;
use crate::{Backward, Plan};
use crate::checks::{check_ctx, check_no_partial_overlap, check_shape};

/// A pointwise unary function.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnaryOp {
    /// `max(x, 0)`; NaN propagates. Gradient `x <= 0 ? 0 : 1`.
    Relu,
    /// `x/2 * (1 + erf(x/sqrt(2)))` (PyTorch `gelu`, approximate='none').
    GeluErf,
    /// `x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))` (approximate='tanh').
    GeluTanh,
    /// `x * sigmoid(x)`.
    Silu,
    /// `1 / (1 + exp(-x))`.
    Sigmoid,
    /// `tanh(x)`.
    Tanh,
    /// `exp(x)`.
    Exp,
    /// `-x`.
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

/// Arguments of [`UnaryPlan`]'s [`Plan::run`].
pub struct UnaryArgs<'a, T, const N: usize> {
    /// Input, any strides (0 = broadcast).
    pub x: TensorRef<'a, T, N>,
    /// Output, any non-overlapping strides; may be `x` itself (in place).
    pub y: TensorMut<'a, T, N>,
}

/// Arguments of [`UnaryPlan`]'s [`Backward::run_bw`].
pub struct UnaryBwArgs<'a, T, const N: usize> {
    /// The forward input.
    pub x: TensorRef<'a, T, N>,
    /// Gradient of the output.
    pub dy: TensorRef<'a, T, N>,
    /// Gradient of the input; may be `dy` itself (in place).
    pub dx: TensorMut<'a, T, N>,
}

/// `y = f(x)` elementwise, and its backward `dx = dy * f'(x)`.
///
/// # Shapes
/// `x`, `y`, `dy`, `dx`: `desc.shape`, rank `N <= 8`.
/// # Layout
/// Any strides; `x` and `dy` may broadcast (stride 0). Contiguous, 16-byte
/// aligned operands take the vectorised kernel; others the strided kernel
/// (64-bit offsets).
/// # Dtypes
/// f32, f64, f16, bf16; f16/bf16 compute in f32 and round once.
/// Others: `Error::Unsupported`.
/// # Errors
/// `DtypeMismatch` if `desc.element != T::KIND`; `ShapeMismatch` from `run`
/// and `run_bw` when a view's shape differs; `ContextMismatch`;
/// `InvalidArgument` when an output partly overlaps an input.
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
        if desc.element != T::KIND {
            return Err(Error::DtypeMismatch {
                op: OP,
                arg: "desc.element",
                expected: T::KIND,
                got: desc.element,
            });
        }
        let dt = dtype_id(OP, T::KIND)?;
        if N > baracuda_kernels_types::MAX_RANK {
            return Err(Error::Unsupported {
                op: OP,
                what: format!("rank {N} > 8"),
            });
        }
        pref.check_backend(OP, &[BackendKind::Baracuda])?;
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
        check_shape(OP, "x", &self.desc.shape, args.x.shape())?;
        check_shape(OP, "y", &self.desc.shape, args.y.shape())?;
        check_ctx(OP, "x", stream, args.x.data().ctx_id())?;
        check_ctx(OP, "y", stream, args.y.data().ctx_id())?;
        let (y, x) = (args.y.data().addr(), args.x.data().addr());
        check_no_partial_overlap::<T>(
            OP,
            "y",
            (y, args.y.shape(), args.y.strides()),
            &[("x", x, args.x.shape(), args.x.strides())],
        )?;
        // SAFETY: both views were bounds-checked at construction and match
        // the plan's shape (checked above); operand order is the kernels'
        // (strided: y, x; contiguous: x, y, n).
        unsafe {
            self.fw.launch::<T>(
                stream,
                &self.desc.shape,
                &[(y, args.y.strides()), (x, args.x.strides())],
                &[1, 0],
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
        check_shape(OP, "x", &self.desc.shape, args.x.shape())?;
        check_shape(OP, "dy", &self.desc.shape, args.dy.shape())?;
        check_shape(OP, "dx", &self.desc.shape, args.dx.shape())?;
        check_ctx(OP, "x", stream, args.x.data().ctx_id())?;
        check_ctx(OP, "dy", stream, args.dy.data().ctx_id())?;
        check_ctx(OP, "dx", stream, args.dx.data().ctx_id())?;
        let (dx, x, dy) = (
            args.dx.data().addr(),
            args.x.data().addr(),
            args.dy.data().addr(),
        );
        check_no_partial_overlap::<T>(
            OP,
            "dx",
            (dx, args.dx.shape(), args.dx.strides()),
            &[
                ("x", x, args.x.shape(), args.x.strides()),
                ("dy", dy, args.dy.shape(), args.dy.strides()),
            ],
        )?;
        // SAFETY: views bounds-checked at construction, shapes checked
        // above; order strided (dx, x, dy), contiguous (x, dy, dx, n).
        unsafe {
            self.bw.launch::<T>(
                stream,
                &self.desc.shape,
                &[
                    (dx, args.dx.strides()),
                    (x, args.x.strides()),
                    (dy, args.dy.strides()),
                ],
                &[1, 2, 0],
            )
        }
    }
}
