//! Pointwise binary ops with NumPy broadcasting: `out = f(a, b)`, and the
//! backward `da`, `db`, each reduced (summed) back to its input's shape
//! when that input was broadcast.
//!
//! The math of each op is in [`BinaryOp`] and at the top of
//! `kernels/elementwise/binary.cu`.

use core::marker::PhantomData;

use baracuda_driver::{ModuleSpec, Stream};
use baracuda_kernels_types::{
    ArchSku, BackendKind, DevPtr, DevPtrMut, Element, ElementKind, Error, Grad, Grads, KernelSku,
    PlanPreference, Result, Shape, TensorMut, TensorRef, Workspace,
};

use super::layout::{
    binary_in_place_forms, binary_in_place_operands, binary_operands, check_operand,
    check_select, contig_shape, eq_by_key, spec, variant_index, ContigShape, In, MapKernels,
};
use super::reduce_back::{
    broadcast_strides, out_shape, pointwise_out, with_offsets, GradOut, Reduction,
};
use super::unary::pointwise_precision;
use crate::checks::{check_alias, Extent};
use crate::kernel_sources;
use crate::{Backward, Plan};

/// A pointwise binary function, with its parameter where it has one.
///
/// The parameter (`alpha`) reaches the kernels as an argument, so one
/// compiled module serves every value; it is rounded to the compute type
/// (f32 for f16, bf16 and f32; f64 for f64), as PyTorch's opmath. Equality
/// and hashing compare the parameter's bits (a NaN `alpha` equals itself).
#[derive(Copy, Clone, Debug)]
#[non_exhaustive]
pub enum BinaryOp {
    /// `a + b`. Gradients `da = dy`, `db = dy`.
    Add,
    /// `a - b`. Gradients `da = dy`, `db = -dy`.
    Sub,
    /// `a * b`. Gradients `da = dy b`, `db = dy a`.
    Mul,
    /// `a / b` (true division). Gradients `da = dy / b`,
    /// `db = -dy a / b^2`.
    Div,
    /// `max(a, b)`, NaN if either is NaN. Gradient `dy` to the larger
    /// operand, split in half on ties; a NaN operand passes `dy` to both
    /// (PyTorch's).
    Maximum,
    /// `min(a, b)`, NaN if either is NaN. Gradient `dy` to the smaller
    /// operand, otherwise as [`BinaryOp::Maximum`].
    Minimum,
    /// `atan2(a, b)`, the angle of the point `(b, a)`. Gradients
    /// `da = dy b / (a^2 + b^2)`, `db = -dy a / (a^2 + b^2)` (NaN at the
    /// origin, PyTorch's).
    Atan2,
    /// `hypot(a, b) = sqrt(a^2 + b^2)` without overflow. Gradients
    /// `da = dy a / hypot`, `db = dy b / hypot` (NaN at the origin).
    Hypot,
    /// `copysign(a, b)`: `|a|` with the sign of `b`. Gradients
    /// `da = dy copysign(a, b) / a` (0 where `a == 0`), `db = 0`.
    Copysign,
    /// `a^b` (tensor exponent). Gradients `da = dy b a^(b-1)` (0 where
    /// `b == 0`), `db = dy a^b ln(a)` (0 where `a == 0` and `b >= 0`).
    Pow,
    /// `fmod(a, b)`, the remainder of `a / b` truncated (the sign of `a`).
    /// Gradients `da = dy`, `db = -dy trunc(a / b)`.
    Fmod,
    /// Python's `a % b`, the remainder of `a / b` floored (the sign of
    /// `b`). Gradients `da = dy`, `db = -dy floor(a / b)`.
    Remainder,
    /// `xlogy(a, b) = a ln(b)`, 0 where `a == 0` unless `b` is NaN.
    /// Gradients `da = dy ln(b)` (0 where `a == 0` unless `b` is NaN),
    /// `db = dy a / b`.
    Xlogy,
    /// `ln(e^a + e^b)`, computed as `max + log1p(e^-|a - b|)`. Gradients
    /// `da = dy / (1 + e^(b - a))`, `db = dy / (1 + e^(a - b))`.
    Logaddexp,
    /// `log2(2^a + 2^b)`. Gradients `da = dy / (1 + 2^(b - a))`,
    /// `db = dy / (1 + 2^(a - b))`.
    Logaddexp2,
    /// `max(a, b)` ignoring a NaN operand (NaN only if both are). Gradient
    /// `dy` to `a` where `a >= b` or `b` is NaN, else to `b` (PyTorch's:
    /// ties go to `a`).
    Fmax,
    /// `min(a, b)` ignoring a NaN operand. Gradient `dy` to `a` where
    /// `a <= b` or `b` is NaN, else to `b`.
    Fmin,
    /// `torch.special.xlog1py(a, b) = a ln(1 + b)`, 0 where `a == 0`
    /// unless `b` is NaN. Gradients `da = dy log1p(b)` (0 where `a == 0`
    /// and `b <= -1`, PyTorch's), `db = dy a / (1 + b)`.
    Xlog1py,
    /// `torch.heaviside(a, b)`: 0 below 0, 1 above, `b` where `a == 0`
    /// (0 for a NaN `a`, as PyTorch's `a == 0 ? b : a > 0`). No gradient
    /// (PyTorch raises): the backward is `Unsupported`.
    Heaviside,
    /// `torch.div(a, b, rounding_mode="floor")`: `a / b` rounded toward
    /// -inf, exact where `a / b` is near an integer (`floor_divide`).
    /// Gradients zero (PyTorch's for a rounding mode).
    DivFloor,
    /// `torch.div(a, b, rounding_mode="trunc")`: `a / b` rounded toward 0,
    /// exactly (from `fmod`: PyTorch's `trunc(a / b)` can first round a
    /// quotient just below an integer up to it). Gradients zero
    /// (PyTorch's for a rounding mode).
    DivTrunc,
    /// `torch.nextafter(a, b)`: the neighbour of `a` toward `b` on the
    /// element type's grid (16-bit types too), `b` where `a == b`, NaN
    /// where either is, the least subnormal of `b`'s sign from a zero. No
    /// gradient (PyTorch raises): the backward is `Unsupported`.
    Nextafter,
    /// `torch.add(a, b, alpha=alpha)`: `a + alpha b` (PyTorch's
    /// `self + alpha * other`). Gradients `da = dy`, `db = dy alpha`.
    /// With `alpha` 1 it equals [`BinaryOp::Add`], which keeps its own
    /// kernel.
    AddAlpha {
        /// Scale of `b` (PyTorch's default 1).
        alpha: f64,
    },
    /// `torch.sub(a, b, alpha=alpha)`: `a - alpha b`, computed as PyTorch's
    /// `add(a, b, -alpha)`: `a + (-alpha) b`. Gradients `da = dy`,
    /// `db = -dy alpha`.
    SubAlpha {
        /// Scale of `b` (PyTorch's default 1).
        alpha: f64,
    },
    /// `F.prelu(x, weight)` with `a = x` and `b = weight`:
    /// `a > 0 ? a : b a` (a NaN `a` gives NaN). Gradients
    /// `da = a > 0 ? dy : b dy`, `db = a > 0 ? 0 : a dy` (PyTorch's
    /// `prelu_backward_kernel`), `db` summed over the axes along which the
    /// weight is broadcast. The caller passes PyTorch's 1-D weight of `C`
    /// elements (`C` = `x.shape[1]`) as `b_shape = [1, C, 1, ...]` of
    /// `x`'s rank, and a single weight as `[1, 1, ...]`, as `F.prelu`
    /// reshapes it (a rank-1 `x` takes only a single weight there).
    Prelu,
}

impl BinaryOp {
    /// Every op, in declaration order (`add_alpha` and `sub_alpha` with
    /// PyTorch's default `alpha` 1).
    pub const ALL: [BinaryOp; 25] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
        BinaryOp::Atan2,
        BinaryOp::Hypot,
        BinaryOp::Copysign,
        BinaryOp::Pow,
        BinaryOp::Fmod,
        BinaryOp::Remainder,
        BinaryOp::Xlogy,
        BinaryOp::Logaddexp,
        BinaryOp::Logaddexp2,
        BinaryOp::Fmax,
        BinaryOp::Fmin,
        BinaryOp::Xlog1py,
        BinaryOp::Heaviside,
        BinaryOp::DivFloor,
        BinaryOp::DivTrunc,
        BinaryOp::Nextafter,
        BinaryOp::AddAlpha { alpha: 1.0 },
        BinaryOp::SubAlpha { alpha: 1.0 },
        BinaryOp::Prelu,
    ];

    /// Whether the op has a backward: false where PyTorch raises for its
    /// derivative (`heaviside`, `nextafter`), whose `run_bw` is
    /// `Unsupported`.
    pub fn has_backward(self) -> bool {
        !matches!(self, BinaryOp::Heaviside | BinaryOp::Nextafter)
    }

    /// Position of the op's kind in [`BinaryOp::ALL`] (`BARACUDA_OP` of
    /// the kernel source), whatever its parameter.
    pub fn index(self) -> u32 {
        variant_index(&Self::ALL, &self)
    }

    /// The parameter as the kernels take it: `alpha` for `add_alpha`,
    /// `-alpha` for `sub_alpha` (PyTorch's `add(a, b, -alpha)`), 0 for the
    /// other ops.
    pub(crate) fn kernel_params(self) -> BinaryParams {
        let alpha = match self {
            BinaryOp::AddAlpha { alpha } => alpha,
            BinaryOp::SubAlpha { alpha } => -alpha,
            _ => 0.0,
        };
        BinaryParams { alpha }
    }

    /// The op's kind and its parameter's bits: what equality and hashing
    /// compare, so that a NaN `alpha` equals itself.
    fn key(self) -> (u32, u64) {
        let bits = match self {
            BinaryOp::AddAlpha { alpha } | BinaryOp::SubAlpha { alpha } => alpha.to_bits(),
            _ => 0,
        };
        (self.index(), bits)
    }

    /// Kernel-name suffix and op name.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::Atan2 => "atan2",
            BinaryOp::Hypot => "hypot",
            BinaryOp::Copysign => "copysign",
            BinaryOp::Pow => "pow",
            BinaryOp::Fmod => "fmod",
            BinaryOp::Remainder => "remainder",
            BinaryOp::Xlogy => "xlogy",
            BinaryOp::Logaddexp => "logaddexp",
            BinaryOp::Logaddexp2 => "logaddexp2",
            BinaryOp::Fmax => "fmax",
            BinaryOp::Fmin => "fmin",
            BinaryOp::Xlog1py => "xlog1py",
            BinaryOp::Heaviside => "heaviside",
            BinaryOp::DivFloor => "div_floor",
            BinaryOp::DivTrunc => "div_trunc",
            BinaryOp::Nextafter => "nextafter",
            BinaryOp::AddAlpha { .. } => "add_alpha",
            BinaryOp::SubAlpha { .. } => "sub_alpha",
            BinaryOp::Prelu => "prelu",
        }
    }
}

eq_by_key!(BinaryOp, key);

/// Kernel argument of an op's parameter (`BinaryParams` of binary.cu).
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub(crate) struct BinaryParams {
    pub alpha: f64,
}

/// A binary op of two rank-`N` inputs broadcast to a common shape: a
/// [`BinaryOp`] of [`BinaryPlan`], or a
/// [`BinaryLogicOp`](super::BinaryLogicOp) of
/// [`BinaryLogicPlan`](super::BinaryLogicPlan)
/// ([`BinaryLogicDescriptor`](super::BinaryLogicDescriptor)).
///
/// Each axis of `a_shape` and `b_shape` must equal the other's or be 1
/// (pad lower-rank inputs with leading 1s). The output shape is their
/// broadcast.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct BinaryDescriptor<const N: usize, Op = BinaryOp> {
    /// The function.
    pub op: Op,
    /// Element type of `a` and `b`, and of the output where the op's is
    /// not bool.
    pub element: ElementKind,
    /// Shape of `a`.
    pub a_shape: [usize; N],
    /// Shape of `b`.
    pub b_shape: [usize; N],
}

impl<const N: usize, Op> BinaryDescriptor<N, Op> {
    /// The broadcast output shape.
    ///
    /// # Errors
    /// `BroadcastMismatch` when an axis differs and neither is 1.
    pub fn out_shape(&self) -> Result<[usize; N]> {
        self.broadcast("binary")
    }

    /// The broadcast output shape, or `BroadcastMismatch` naming `op`.
    pub(crate) fn broadcast(&self, op: &'static str) -> Result<[usize; N]> {
        out_shape(op, &[&self.a_shape, &self.b_shape])
    }
}

/// Arguments of [`BinaryPlan`]'s [`Plan::run`]; [`BinaryPlan::run_in_place_a`]
/// and [`BinaryPlan::run_in_place_b`] write `out` over an input.
pub struct BinaryArgs<'a, T, const N: usize> {
    /// First input, shape `a_shape`.
    pub a: TensorRef<'a, T, N>,
    /// Second input, shape `b_shape`.
    pub b: TensorRef<'a, T, N>,
    /// Output, the broadcast shape. It may share memory with `a` or `b`
    /// only as the same view (in place), which needs that input to have the
    /// output's shape.
    pub out: TensorMut<'a, T, N>,
}

/// Arguments of [`BinaryPlan`]'s [`Backward::run_bw`].
pub struct BinaryBwArgs<'a, T, const N: usize> {
    /// First forward input, shape `a_shape`.
    pub a: TensorRef<'a, T, N>,
    /// Second forward input, shape `b_shape`.
    pub b: TensorRef<'a, T, N>,
    /// Gradient of the output, the broadcast shape.
    pub dy: TensorRef<'a, T, N>,
    /// Gradient of `a`, shape `a_shape`, when wanted. When `a` has the
    /// output's shape it may be `a`, `b` or `dy` itself (the same view);
    /// otherwise (a reduction) it shares memory with no operand.
    pub da: Option<TensorMut<'a, T, N>>,
    /// Gradient of `b`, shape `b_shape`, when wanted; aliasing as `da`.
    pub db: Option<TensorMut<'a, T, N>>,
}

/// `Unsupported` for an op without a backward ([`BinaryOp::has_backward`]).
fn check_has_backward(op: BinaryOp) -> Result<()> {
    if op.has_backward() {
        Ok(())
    } else {
        Err(Error::Unsupported {
            op: OP,
            what: format!("the backward of {} (not differentiable)", op.name()),
        })
    }
}

/// Arguments of [`BinaryPlan::run_bw_in_place`]: the backward with one
/// gradient written over `dy`.
pub struct BinaryBwInPlaceArgs<'a, T, const N: usize> {
    /// First forward input, shape `a_shape`.
    pub a: TensorRef<'a, T, N>,
    /// Second forward input, shape `b_shape`.
    pub b: TensorRef<'a, T, N>,
    /// The gradient of the output on entry; the gradient named by `into` on
    /// return.
    pub dy: TensorMut<'a, T, N>,
    /// The gradient written over `dy`: `Grad::A` (`da`) or `Grad::B`
    /// (`db`); its input must have the output's shape (not be broadcast).
    pub into: Grad,
    /// The other gradient, when wanted, in its own memory.
    pub other: Option<TensorMut<'a, T, N>>,
}

fn check_desc<T: Element, const N: usize>(
    op: &'static str,
    desc: &BinaryDescriptor<N>,
    pref: &PlanPreference,
) -> Result<(u32, [usize; N])> {
    let dt = check_select::<T, N>(op, desc.element, pref)?;
    Ok((dt, desc.broadcast(op)?))
}

/// `out = f(a, b)` elementwise with broadcasting, and its backward
/// `da = reduce(dy * df/da)`, `db = reduce(dy * df/db)`, where `reduce`
/// sums over the axes along which that input was broadcast; `f` and its
/// partial derivatives for each op are in [`BinaryOp`].
///
/// # Shapes
/// `a`: `a_shape`, `b`: `b_shape`, `out`: their broadcast
/// ([`BinaryDescriptor::out_shape`]); rank `N <= 8`. The forward takes no
/// workspace (`workspace_size` is 0 and `run` does not read it); the
/// backward's is `bw_workspace_size(wants)`.
/// # Layout
/// Any strides; contiguous, 16-byte-aligned, same-shape operands take the
/// vectorised kernel, everything else the strided kernel (64-bit offsets).
/// # Dtypes
/// f32, f64, f16, bf16 (f16/bf16 compute in f32). Others: `Unsupported`.
/// # Backward
/// `dy`: the broadcast shape, `da`: `a_shape`, `db`: `b_shape`, each
/// computed when given. A gradient whose input was broadcast is summed
/// over the broadcast axes by a reduction kernel, split across blocks when
/// there are few outputs, with partial sums in the workspace, first; then
/// the gradients whose input has the output's shape are written by the
/// pointwise kernel. Sums accumulate in f32 (f64 for f64), pairwise within
/// each thread and across splits and by a tree within a block, in a fixed
/// order: deterministic, with a rounding error of at most
/// `(2 log2(n) + 20) u sum|terms|` for `n` terms (`u` the accumulator's
/// unit roundoff). Under a `max_workspace_bytes` cap too small for the
/// partials, a reduction runs unsplit (one block column per output tile,
/// no workspace).
/// # Aliasing
/// `out` may be `a` or `b` (the same view, so that input has the output's
/// shape): [`BinaryPlan::run_in_place_a`], [`BinaryPlan::run_in_place_b`].
/// A gradient computed pointwise (its input not broadcast) may be `a`, `b`
/// or `dy` itself, since the reductions that read them across the whole
/// output run before it: [`BinaryPlan::run_bw_in_place`] writes `da` or
/// `db` over `dy`. A reduced gradient shares memory with no operand, and
/// `da` and `db` never share memory. Any other overlap is
/// `InvalidArgument` naming the output, and nothing is written.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND`;
/// `Unsupported` for another dtype or a rank `N > 8`;
/// `BroadcastMismatch` when an axis of `a_shape` and `b_shape` differs and
/// neither is 1; `PreferenceRejected` when `pref` forces a backend other
/// than `Baracuda`. From `run`, `run_bw` and the in-place forms:
/// `ShapeMismatch` when a view's shape is not the one above;
/// `ContextMismatch` when a view (or the backward's workspace) lives on
/// another context; `InvalidArgument` for an overlap the aliasing rules
/// above forbid, or an in-place form whose written input is broadcast.
/// From `run_bw`: `WorkspaceTooSmall` when the workspace is smaller than
/// `bw_workspace_size` of the gradients given. From `run_bw` and
/// `run_bw_in_place`: `Unsupported` for an op without a backward
/// ([`BinaryOp::has_backward`]: `heaviside`, `nextafter`), whose `grads`
/// is empty.
pub struct BinaryPlan<T: Element, const N: usize> {
    desc: BinaryDescriptor<N>,
    out_shape: [usize; N],
    sku: KernelSku,
    fw: MapKernels,
    bw: MapKernels,
    reduce_a: Option<Reduction>,
    reduce_b: Option<Reduction>,
    /// The op's parameter as the kernels take it.
    params: BinaryParams,
    _t: PhantomData<T>,
}

const OP: &str = "binary";

impl<T: Element, const N: usize> Plan for BinaryPlan<T, N> {
    type Descriptor = BinaryDescriptor<N>;
    type Args<'a> = BinaryArgs<'a, T, N>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let (dt, out_shape) = check_desc::<T, N>(OP, desc, pref)?;
        pref.check_workspace(OP, 0)?;
        let arch = stream.context().device().arch;
        let spec = binary_spec(dt, desc.op, arch);
        let name = desc.op.name();
        let fw = MapKernels::load(stream, &spec, "binary_fw", name, binary_fw_shape(dt))?;
        let bw = MapKernels::load(stream, &spec, "binary_bw", name, contig_shape(false, dt))?;
        let module = stream.context().module(&spec)?;
        let sm = stream.context().device().sm_count;
        // Workspace the backward may still take under the caller's cap.
        let mut room = pref.max_workspace_bytes.unwrap_or(usize::MAX);
        let mut reduction = |shape: &[usize; N], which: &str| {
            Reduction::plan::<T>(shape, &out_shape, sm, &mut room, || {
                let reduce = module.function(&format!("binary_bw_reduce_{which}_{name}"))?;
                Ok((reduce, module.function("binary_bw_finalize")?))
            })
        };
        let reduce_a = reduction(&desc.a_shape, "a")?;
        let reduce_b = reduction(&desc.b_shape, "b")?;
        let splits = |r: &Option<Reduction>| r.as_ref().map_or(0, Reduction::splits);
        let variant = format!(
            "vec16 contiguous / rank-8 strided; bw pointwise + reduce (splits a={}, b={})",
            splits(&reduce_a),
            splits(&reduce_b)
        );
        Ok(BinaryPlan {
            desc: *desc,
            out_shape,
            sku: KernelSku {
                op: format!("binary.{name}"),
                element: T::KIND,
                backend: BackendKind::Baracuda,
                arch,
                variant,
                precision: pointwise_precision::<T>(),
            },
            fw,
            bw,
            reduce_a,
            reduce_b,
            params: desc.op.kernel_params(),
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
        let out = &args.out;
        let [a, b] = binary_operands(OP, stream, self.shapes(), &args.a, &args.b, out)?;
        // SAFETY: views bounds-checked at construction (broadcast views
        // reach no new elements), shapes checked above; out is disjoint
        // from a and b or one of them itself.
        unsafe { self.forward(stream, (out.data().ptr(), out.strides()), &a, &b) }
    }
}

impl<T: Element, const N: usize> BinaryPlan<T, N> {
    binary_in_place_forms!(BinaryPlan);

    /// The shapes of `a`, `b` and the output.
    fn shapes(&self) -> [&[usize; N]; 3] {
        [&self.desc.a_shape, &self.desc.b_shape, &self.out_shape]
    }

    /// Launch the forward map over the output shape.
    ///
    /// # Safety
    /// `a` and `b` are views of the output shape and `out` is a checked
    /// view of it; `out` is disjoint from each input or that input itself.
    unsafe fn forward(
        &self,
        stream: &Stream,
        out: (DevPtrMut<T>, &[usize; N]),
        a: &TensorRef<'_, T, N>,
        b: &TensorRef<'_, T, N>,
    ) -> Result<()> {
        let q = self.params;
        // SAFETY: forwarded from the caller's contract.
        unsafe {
            self.fw.launch_with(
                OP,
                stream,
                &self.out_shape,
                &[(out.0, out.1)],
                &[
                    (a.data().ptr(), a.strides()),
                    (b.data().ptr(), b.strides()),
                ],
                |args| args.push(q).map(|_| ()),
            )
        }
    }
}

impl<T: Element, const N: usize> BinaryPlan<T, N> {
    /// The reductions of the gradients in `wants`, each with the byte
    /// offset of its partials in the workspace (laid out in that order).
    fn reductions(&self, wants: Grads) -> impl Iterator<Item = (usize, &Reduction, usize)> {
        with_offsets::<T>(
            [(Grad::A, &self.reduce_a), (Grad::B, &self.reduce_b)]
                .into_iter()
                .map(move |(g, r)| r.as_ref().filter(|_| wants.contains(g))),
        )
    }
}

impl<T: Element, const N: usize> Backward for BinaryPlan<T, N> {
    type BwArgs<'a> = BinaryBwArgs<'a, T, N>;

    /// `Grad::A | Grad::B`; none for an op without a backward.
    fn grads(&self) -> Grads {
        if self.desc.op.has_backward() {
            Grad::A | Grad::B
        } else {
            Grads::NONE
        }
    }

    fn bw_workspace_size(&self, wants: Grads) -> usize {
        self.reductions(wants)
            .map(|(_, r, at)| at + r.ws_bytes::<T>())
            .max()
            .unwrap_or(0)
    }

    fn run_bw(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        check_has_backward(self.desc.op)?;
        let d = &self.desc;
        let (a, b, dy) = (&args.a, &args.b, &args.dy);
        check_operand(OP, "a", stream, &d.a_shape, a.shape(), a.data().ctx_id())?;
        check_operand(OP, "b", stream, &d.b_shape, b.shape(), b.data().ctx_id())?;
        check_operand(OP, "dy", stream, &self.out_shape, dy.shape(), dy.data().ctx_id())?;
        let da = GradOut::checked(OP, stream, "da", args.da.as_ref(), &d.a_shape)?;
        let db = GradOut::checked(OP, stream, "db", args.db.as_ref(), &d.b_shape)?;
        let inputs = [Extent::of("a", a), Extent::of("b", b), Extent::of("dy", dy)];
        self.backward(stream, workspace, &inputs, da, db)
    }
}

impl<T: Element, const N: usize> BinaryPlan<T, N> {
    /// The backward with one gradient written over `dy`: `da = dy`
    /// (`into: Grad::A`) or `db = dy` (`into: Grad::B`), in place, and the
    /// other gradient, when given, in its own memory. `bw_workspace_size`
    /// of the gradients computed sizes the workspace.
    ///
    /// # Errors
    /// As [`Backward::run_bw`]; `InvalidArgument` naming `into` when it is
    /// neither `Grad::A` nor `Grad::B`, or its input is broadcast (its
    /// gradient is a reduction, which cannot be written over `dy`).
    pub fn run_bw_in_place(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: BinaryBwInPlaceArgs<'_, T, N>,
    ) -> Result<()> {
        check_has_backward(self.desc.op)?;
        let d = &self.desc;
        let (input, into_shape, other_arg, other_shape) = match args.into {
            Grad::A => ("a", &d.a_shape, "db", &d.b_shape),
            Grad::B => ("b", &d.b_shape, "da", &d.a_shape),
            g => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    arg: "into",
                    reason: format!("{g:?}: a binary op has gradients A and B"),
                })
            }
        };
        if *into_shape != self.out_shape {
            return Err(Error::InvalidArgument {
                op: OP,
                arg: "into",
                reason: format!(
                    "{input} has shape {}, broadcast to {}: its gradient is a reduction and \
                     cannot be written over dy",
                    Shape::from(&into_shape[..]),
                    Shape::from(&self.out_shape[..])
                ),
            });
        }
        let (a, b, dy) = (&args.a, &args.b, &args.dy);
        check_operand(OP, "a", stream, &d.a_shape, a.shape(), a.data().ctx_id())?;
        check_operand(OP, "b", stream, &d.b_shape, b.shape(), b.data().ctx_id())?;
        check_operand(OP, "dy", stream, &self.out_shape, dy.shape(), dy.data().ctx_id())?;
        let other = GradOut::checked(OP, stream, other_arg, args.other.as_ref(), other_shape)?;
        let dy_ext = Extent::of_mut("dy", dy);
        let inputs = [Extent::of("a", a), Extent::of("b", b), dy_ext];
        let into = GradOut {
            ptr: dy.data().ptr(),
            ext: Extent { arg: args.into.arg(), ..dy_ext },
        };
        let (da, db) = match args.into {
            Grad::A => (Some(into), other),
            _ => (other, Some(into)),
        };
        self.backward(stream, workspace, &inputs, da, db)
    }

    /// The backward on checked operands (`inputs`: a, b, dy): aliasing,
    /// workspace, then the reductions and the pointwise pass.
    fn backward(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        inputs: &[Extent<'_, T>; 3],
        da: Option<GradOut<'_, T>>,
        db: Option<GradOut<'_, T>>,
    ) -> Result<()> {
        for (g, reduce) in [(&da, &self.reduce_a), (&db, &self.reduce_b)] {
            if let Some(g) = g {
                // A pointwise gradient may be an input itself: the
                // reductions, which read every input across the whole
                // output, run before the pointwise pass, and that pass
                // reads each element before it writes it. A reduced
                // gradient shares memory with nothing.
                for input in inputs {
                    check_alias(OP, &g.ext, input, reduce.is_none())?;
                }
            }
        }
        if let (Some(da), Some(db)) = (&da, &db) {
            check_alias(OP, &db.ext, &da.ext, false)?;
        }
        let wants = Grads::present(&[(Grad::A, da.is_some()), (Grad::B, db.is_some())]);
        let ctx = stream.context().id();
        let ws = workspace.check_ptr(OP, self.bw_workspace_size(wants), ctx)?;

        // a, b, dy as read over the output shape.
        let out = &self.out_shape;
        let ops: [(DevPtr<T>, [usize; N]); 3] =
            inputs.map(|e| (e.ptr, broadcast_strides(e.shape, e.strides, out)));
        let reads = ops.each_ref().map(|(p, st)| (p.cast::<u8>(), &st[..]));
        for (which, r, at) in self.reductions(wants) {
            let g = if which == 0 { &da } else { &db };
            if let Some(g) = g {
                // SAFETY: every address comes from a bounds-checked view
                // whose shape matches the plan, read over the output shape;
                // grad is disjoint from the inputs (checked above) and the
                // workspace holds the partials (checked above).
                unsafe {
                    r.launch::<T>(
                        stream,
                        out,
                        &reads,
                        (g.ptr, g.ext.strides),
                        ws.byte_add(at),
                        |args| args.push(self.params).map(|_| ()),
                    )?;
                }
            }
        }
        // Pointwise pass for the gradients whose input is not broadcast;
        // an absent one is null, with dy's strides.
        let da = pointwise_out(&da, &self.reduce_a, &ops[2].1);
        let db = pointwise_out(&db, &self.reduce_b, &ops[2].1);
        if da.0.is_null() && db.0.is_null() {
            return Ok(());
        }
        let ins: [In<'_, T>; 3] = [(ops[0].0, &ops[0].1), (ops[1].0, &ops[1].1), (ops[2].0, &ops[2].1)];
        // SAFETY: all views bounds-checked at construction and shapes
        // checked by the callers; absent gradients are null, which the
        // kernels skip; each gradient is disjoint from every input or that
        // input itself (checked above), and the reductions reading the
        // inputs were enqueued before.
        unsafe {
            self.bw.launch_with(OP, stream, out, &[da, db], &ins, |args| {
                args.push(self.params).map(|_| ())
            })
        }
    }

}

/// The contiguous launch shape of a binary forward on `dtype`: on 16-bit
/// types 128-thread blocks (the shape PyTorch launches for the same
/// one-vector-per-thread kernel), which `docs/perf-notes/experiments/binary_hints.cu`
/// measured 0.18% faster than 256 on the H200 bf16 add of 2^28 elements;
/// otherwise [`contig_shape`]`(false, dtype)`. Its residency is set by
/// [`binary_fw_register_floor`].
pub(crate) fn binary_fw_shape(dtype: u32) -> ContigShape {
    match dtype {
        2 | 3 => ContigShape {
            threads: 128,
            tile: 1,
        },
        _ => contig_shape(false, dtype),
    }
}

/// Registers per thread allocated to the contiguous forward kernel of `op`
/// on `arch` (a [`ModuleSpec::register_floor`]), or `None` to keep what
/// ptxas needs.
///
/// A streaming kernel with two loads, a store and one arithmetic
/// instruction per element runs fastest on the H200 with about 40 warps
/// per SM: at 48 registers, 10 blocks of 128 threads (16-bit types) or 5
/// of 256 (f32) fit per SM, where the kernel's own 20-28 registers fit 64
/// warps. `docs/perf-notes/experiments/residency.py` (2^28 elements, same tensors,
/// against PyTorch), ms:
///
/// | case     | as compiled     | 40 regs | 48 regs | 56 regs |
/// |----------|-----------------|---------|---------|---------|
/// | add bf16 | 0.3677 (64 w)   | 0.3666  | 0.3646  | 0.3692  |
/// | mul bf16 | 0.3677          | 0.3666  | 0.3647  | 0.3692  |
/// | add f32  | 0.7326 (64 w)   | 0.7304  | 0.7277  | 0.7641  |
///
/// (PyTorch: 0.3666, 0.3666, 0.7347; its bf16 add takes 34 registers, 48
/// warps per SM.) Ops with more work per element lose from the same cap:
/// in the benchmark (`scripts/bench-vs-torch.sh elementwise`, H200) bf16
/// `div` runs 0.3737 ms at 48 registers against 0.3664 as compiled, and
/// `maximum`/`minimum` 0.3723 against 0.3686; f32 `div`, `maximum`,
/// `minimum` differ by under 0.2%. Ops
/// with one load per element lose too (relu bf16 0.2541 ms as compiled,
/// 0.2828 at 48 registers): unary kernels keep full residency. Other
/// architectures keep ptxas's allocation (no floor is measured there).
pub(crate) fn binary_fw_register_floor(arch: ArchSku, op: BinaryOp) -> Option<u32> {
    use BinaryOp::{Add, Mul, Sub};
    match (arch, op) {
        (ArchSku::Sm90a, Add | Sub | Mul) => Some(48),
        _ => None,
    }
}

/// The module of one binary op on one dtype for `arch`, shared by the
/// forward and backward plans: both launch one vector per thread
/// (`TILE_UNROLL` 1), and the forward contiguous kernel gets
/// [`binary_fw_register_floor`].
pub(crate) fn binary_spec(dtype: u32, op: BinaryOp, arch: ArchSku) -> ModuleSpec {
    let s = spec(
        &kernel_sources::BINARY,
        dtype,
        op.index(),
        binary_fw_shape(dtype),
    );
    match binary_fw_register_floor(arch, op) {
        Some(regs) => s.register_floor(&format!("binary_fw_contig_{}", op.name()), regs),
        None => s,
    }
}

/// Every module of the binary ops, for every architecture whose modules
/// differ.
pub(crate) fn binary_specs() -> Vec<ModuleSpec> {
    let mut v = Vec::new();
    for dt in 0..4 {
        for op in BinaryOp::ALL {
            v.push(binary_spec(dt, op, ArchSku::Sm80));
            if binary_fw_register_floor(ArchSku::Sm90a, op).is_some() {
                v.push(binary_spec(dt, op, ArchSku::Sm90a));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_shape_broadcasts() {
        let d = BinaryDescriptor {
            op: BinaryOp::Add,
            element: ElementKind::F32,
            a_shape: [4, 1],
            b_shape: [1, 3],
        };
        assert_eq!(d.out_shape().unwrap(), [4, 3]);
        let bad = BinaryDescriptor {
            op: BinaryOp::Add,
            element: ElementKind::F32,
            a_shape: [4, 2],
            b_shape: [1, 3],
        };
        assert!(matches!(
            bad.out_shape(),
            Err(Error::BroadcastMismatch { .. })
        ));
    }

    #[test]
    fn select_names_the_op_of_a_broadcast_mismatch() {
        let bad = BinaryDescriptor {
            op: BinaryOp::Add,
            element: ElementKind::F32,
            a_shape: [4, 2],
            b_shape: [1, 3],
        };
        let pref = PlanPreference::default();
        assert!(matches!(
            check_desc::<f32, 2>("binary", &bad, &pref),
            Err(Error::BroadcastMismatch { op: "binary", .. })
        ));
        let f16 = BinaryDescriptor {
            element: ElementKind::F16,
            ..bad
        };
        assert!(matches!(
            check_desc::<f32, 2>("binary", &f16, &pref),
            Err(Error::DtypeMismatch { .. })
        ));
    }

    #[test]
    fn binary_ops_compare_their_parameter_by_bits() {
        use std::collections::hash_map::DefaultHasher;
        use std::hash::{Hash, Hasher};
        let hash = |op: BinaryOp| {
            let mut h = DefaultHasher::new();
            op.hash(&mut h);
            h.finish()
        };
        let nan = BinaryOp::AddAlpha { alpha: f64::NAN };
        assert_eq!(nan, nan);
        assert_eq!(hash(nan), hash(BinaryOp::AddAlpha { alpha: f64::NAN }));
        assert_ne!(BinaryOp::AddAlpha { alpha: 2.0 }, BinaryOp::AddAlpha { alpha: 3.0 });
        assert_ne!(BinaryOp::AddAlpha { alpha: 0.0 }, BinaryOp::AddAlpha { alpha: -0.0 });
        assert_ne!(BinaryOp::AddAlpha { alpha: 1.0 }, BinaryOp::SubAlpha { alpha: 1.0 });
        assert_ne!(BinaryOp::AddAlpha { alpha: 1.0 }, BinaryOp::Add);
        assert_eq!(BinaryOp::Prelu, BinaryOp::Prelu);
        // kernel indices follow ALL whatever the parameter; sub negates alpha
        for (i, op) in BinaryOp::ALL.into_iter().enumerate() {
            assert_eq!(op.index() as usize, i, "{op:?}");
        }
        assert_eq!(BinaryOp::SubAlpha { alpha: 7.0 }.index(), 23);
        assert_eq!(BinaryOp::SubAlpha { alpha: 2.5 }.kernel_params().alpha, -2.5);
        assert_eq!(BinaryOp::AddAlpha { alpha: 2.5 }.kernel_params().alpha, 2.5);
        assert_eq!(BinaryOp::Mul.kernel_params().alpha, 0.0);
        assert_eq!(std::mem::size_of::<BinaryParams>(), 8);
    }
}
