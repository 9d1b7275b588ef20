//! Pointwise ternary ops with NumPy broadcasting: `out = f(a, b, c)`
//! ([`TernaryPlan`]: lerp, addcmul, addcdiv, clamp) and
//! `out = where(cond, a, b)` ([`WherePlan`]), and their backwards, each
//! gradient summed back to its input's shape when that input was broadcast
//! (the binary ops' reduction, `reduce_back.rs`).
//!
//! The math of each op is in [`TernaryOp`] and at the top of
//! `kernels/elementwise/ternary.cu`.

use core::marker::PhantomData;

use baracuda_driver::Stream;
use baracuda_kernels_types::{
    Element, ElementKind, Error, Grad, Grads, KernelSku, PlanPreference, Result, Shape, TensorMut,
    TensorRef, Workspace,
};

use super::layout::{check_operand, check_select, contig_shape, eq_by_key, spec, In};
use super::reduce_back::{broadcast_strides, out_shape, GradOut};
use super::ternary_map::{TernaryMap, TernaryParams};
use crate::checks::{byte_span, check_alias, check_disjoint, Extent};
use crate::kernel_sources;
use crate::{Backward, Plan};

/// A pointwise function of three tensors `a`, `b`, `c`, with its scalar
/// parameter where it has one. Each follows PyTorch's CUDA kernel for NaN
/// and the infinities, and `tools/autograd/derivatives.yaml` for the
/// gradients; the parameter is rounded to the compute type (f32 for f16,
/// bf16 and f32; f64 for f64), as PyTorch's opmath.
#[derive(Copy, Clone, Debug)]
#[non_exhaustive]
pub enum TernaryOp {
    /// `torch.lerp(a, b, c)` (start, end, weight tensor):
    /// `a + c (b - a)` where `|c| < 0.5`, else `b - (b - a)(1 - c)`.
    /// Gradients `da = dy (1 - c)`, `db = dy c`, `dc = dy (b - a)`.
    Lerp,
    /// `torch.addcmul(a, b, c, value=value)`: `a + value b c`. Gradients
    /// `da = dy`, `db = dy value c`, `dc = dy value b`.
    Addcmul {
        /// The scale of the product.
        value: f64,
    },
    /// `torch.addcdiv(a, b, c, value=value)`: `a + value (b / c)`.
    /// Gradients `da = dy`, `db = dy value / c`,
    /// `dc = -dy value b / c^2`.
    Addcdiv {
        /// The scale of the quotient.
        value: f64,
    },
    /// `torch.clamp(a, min=b, max=c)` with tensor bounds: `a`, `b` or `c`
    /// where it is NaN (in that order), else `min(max(a, b), c)`, so `c`
    /// where `b > c`. Gradients: `dy` to `a` where `b <= a <= c`, to `b`
    /// where `a < b` and `b < c`, to `c` where `a > c` or `c < b`, else 0
    /// (PyTorch's `clamp_backward` and `clamp_backward_min_max`).
    Clamp,
}

impl TernaryOp {
    /// Every op, with `value` 1 where it has one.
    pub const ALL: [TernaryOp; 4] = [
        TernaryOp::Lerp,
        TernaryOp::Addcmul { value: 1.0 },
        TernaryOp::Addcdiv { value: 1.0 },
        TernaryOp::Clamp,
    ];

    /// Position in [`TernaryOp::ALL`] (`BARACUDA_OP` of the kernel
    /// source), whatever the parameter.
    pub fn index(self) -> u32 {
        match self {
            TernaryOp::Lerp => 0,
            TernaryOp::Addcmul { .. } => 1,
            TernaryOp::Addcdiv { .. } => 2,
            TernaryOp::Clamp => 3,
        }
    }

    /// Kernel-name suffix and op name.
    pub fn name(self) -> &'static str {
        match self {
            TernaryOp::Lerp => "lerp",
            TernaryOp::Addcmul { .. } => "addcmul",
            TernaryOp::Addcdiv { .. } => "addcdiv",
            TernaryOp::Clamp => "clamp",
        }
    }

    /// The scalar parameter (`value`), 0 where there is none.
    pub fn value(self) -> f64 {
        match self {
            TernaryOp::Addcmul { value } | TernaryOp::Addcdiv { value } => value,
            _ => 0.0,
        }
    }

    /// The op's kind and its parameter's bits: what equality and hashing
    /// compare, so that a NaN `value` equals itself.
    fn key(self) -> (u32, u64) {
        (self.index(), self.value().to_bits())
    }
}

eq_by_key!(TernaryOp, key);

/// `BARACUDA_OP` of `where` in ternary.cu.
const WHERE_INDEX: u32 = 4;

/// A ternary op of three rank-`N` inputs broadcast to a common shape: each
/// axis of `a_shape`, `b_shape` and `c_shape` equals the others' or is 1
/// (pad lower-rank inputs with leading 1s). The output shape is their
/// broadcast.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct TernaryDescriptor<const N: usize> {
    /// The function.
    pub op: TernaryOp,
    /// Element type of every operand.
    pub element: ElementKind,
    /// Shape of `a` (lerp's start, addcmul's and addcdiv's input, clamp's x).
    pub a_shape: [usize; N],
    /// Shape of `b` (lerp's end, `tensor1`, clamp's min).
    pub b_shape: [usize; N],
    /// Shape of `c` (lerp's weight, `tensor2`, clamp's max).
    pub c_shape: [usize; N],
}

impl<const N: usize> TernaryDescriptor<N> {
    /// The broadcast output shape.
    ///
    /// # Errors
    /// `BroadcastMismatch` naming two shapes that differ on an axis where
    /// neither is 1.
    pub fn out_shape(&self) -> Result<[usize; N]> {
        out_shape("ternary", &[&self.a_shape, &self.b_shape, &self.c_shape])
    }
}

/// Arguments of [`TernaryPlan`]'s [`Plan::run`].
pub struct TernaryArgs<'a, T, const N: usize> {
    /// First input, shape `a_shape`.
    pub a: TensorRef<'a, T, N>,
    /// Second input, shape `b_shape`.
    pub b: TensorRef<'a, T, N>,
    /// Third input, shape `c_shape`.
    pub c: TensorRef<'a, T, N>,
    /// Output, the broadcast shape. It may share memory with an input only
    /// as the same view (in place), which needs that input to have the
    /// output's shape.
    pub out: TensorMut<'a, T, N>,
}

/// Arguments of [`TernaryPlan`]'s [`Backward::run_bw`].
pub struct TernaryBwArgs<'a, T, const N: usize> {
    /// First forward input, shape `a_shape`.
    pub a: TensorRef<'a, T, N>,
    /// Second forward input, shape `b_shape`.
    pub b: TensorRef<'a, T, N>,
    /// Third forward input, shape `c_shape`.
    pub c: TensorRef<'a, T, N>,
    /// Gradient of the output, the broadcast shape.
    pub dy: TensorRef<'a, T, N>,
    /// Gradient of `a`, shape `a_shape`, when wanted. When `a` has the
    /// output's shape it may be an input or `dy` itself (the same view);
    /// otherwise (a reduction) it shares memory with no operand.
    pub da: Option<TensorMut<'a, T, N>>,
    /// Gradient of `b`, shape `b_shape`, when wanted; aliasing as `da`.
    pub db: Option<TensorMut<'a, T, N>>,
    /// Gradient of `c`, shape `c_shape`, when wanted; aliasing as `da`.
    pub dc: Option<TensorMut<'a, T, N>>,
}

/// `out = f(a, b, c)` elementwise with broadcasting, and its backward
/// `da = reduce(dy df/da)` (and so for `b` and `c`), where `reduce` sums
/// over the axes along which that input was broadcast; `f` and its
/// partial derivatives for each op are in [`TernaryOp`].
///
/// # Shapes
/// `a`, `b`, `c`: their descriptor shapes, `out` and `dy`: their broadcast
/// ([`TernaryDescriptor::out_shape`]); rank `N <= 8`. The forward takes no
/// workspace; the backward's is `bw_workspace_size(wants)`.
/// # Layout
/// Any strides; contiguous, 16-byte-aligned, same-shape operands take the
/// vectorised kernel, everything else the strided kernel (64-bit offsets).
/// # Dtypes
/// f32, f64, f16, bf16 (f16/bf16 compute in f32). Others: `Unsupported`.
/// # Backward
/// Each gradient is computed when given. A gradient whose input was
/// broadcast is summed over the broadcast axes first, as
/// [`BinaryPlan`](super::BinaryPlan)'s: deterministic pairwise sums in
/// f32 (f64 for f64), split across blocks with partials in the workspace
/// (unsplit under a `max_workspace_bytes` cap too small for them); then
/// the gradients whose input has the output's shape are written by one
/// pointwise pass.
/// # Aliasing
/// `out` may be an input of the output's shape (the same view): in place
/// over `a` from safe code through [`TernaryPlan::run_in_place_a`]. A
/// gradient computed pointwise may be an input or `dy` itself (the same
/// view); a reduced gradient shares memory with no operand; gradients
/// never share memory with each other. Any other overlap is
/// `InvalidArgument` naming the output, and nothing is written.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND`;
/// `Unsupported` for another dtype or a rank `N > 8`;
/// `BroadcastMismatch` when the shapes do not broadcast;
/// `PreferenceRejected` when `pref` forces a backend other than
/// `Baracuda`. From `run` and `run_bw`: `ShapeMismatch` when a view's
/// shape is not the one above; `ContextMismatch` when a view (or the
/// workspace) lives on another context; `InvalidArgument` for an overlap
/// the aliasing rules forbid; `WorkspaceTooSmall` from `run_bw`.
pub struct TernaryPlan<T: Element, const N: usize> {
    desc: TernaryDescriptor<N>,
    map: TernaryMap<N>,
    _t: PhantomData<T>,
}

const OP: &str = "ternary";
const WHERE: &str = "where";

impl<T: Element, const N: usize> Plan for TernaryPlan<T, N> {
    type Descriptor = TernaryDescriptor<N>;
    type Args<'a> = TernaryArgs<'a, T, N>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let dt = check_select::<T, N>(OP, desc.element, pref)?;
        pref.check_workspace(OP, 0)?;
        let shapes = [&desc.a_shape, &desc.b_shape, &desc.c_shape];
        let out = out_shape(OP, &shapes)?;
        let params = TernaryParams {
            value: desc.op.value(),
        };
        let map = TernaryMap::select::<T>(
            stream,
            pref,
            (desc.op.index(), desc.op.name()),
            dt,
            &shapes,
            out,
            params,
        )?;
        Ok(TernaryPlan {
            desc: *desc,
            map,
            _t: PhantomData,
        })
    }

    fn sku(&self) -> &KernelSku {
        &self.map.sku
    }

    fn workspace_size(&self) -> usize {
        0
    }

    fn run(&self, stream: &Stream, _workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let d = &self.desc;
        let out_shape = self.map.out_shape;
        let ins = [
            ("a", &args.a, &d.a_shape),
            ("b", &args.b, &d.b_shape),
            ("c", &args.c, &d.c_shape),
        ];
        for (arg, v, shape) in ins {
            check_operand(OP, arg, stream, shape, v.shape(), v.data().ctx_id())?;
        }
        let out = &args.out;
        check_operand(
            OP,
            "out",
            stream,
            &out_shape,
            out.shape(),
            out.data().ctx_id(),
        )?;
        let a = args.a.broadcast_to(out_shape)?;
        let b = args.b.broadcast_to(out_shape)?;
        let c = args.c.broadcast_to(out_shape)?;
        let out_ext = Extent::of_mut("out", out);
        for (arg, v) in [("a", &a), ("b", &b), ("c", &c)] {
            check_alias(OP, &out_ext, &Extent::of(arg, v), true)?;
        }
        let ins: [In<'_, T>; 3] = [
            (a.data().ptr(), a.strides()),
            (b.data().ptr(), b.strides()),
            (c.data().ptr(), c.strides()),
        ];
        // SAFETY: views bounds-checked at construction (broadcast views
        // reach no new elements), shapes checked above; out is disjoint
        // from each input or that input itself.
        unsafe {
            self.map
                .forward(stream, (out.data().ptr(), out.strides()), &ins)
        }
    }
}

impl<T: Element, const N: usize> TernaryPlan<T, N> {
    /// `a = f(a, b, c)` in place (PyTorch's `addcmul_`, `addcdiv_`,
    /// `lerp_`, `clamp_`): [`Plan::run`] with `out` the same view as `a`,
    /// which must have the output's shape. `b` and `c` may be `a` itself
    /// (the same view).
    ///
    /// # Errors
    /// As [`Plan::run`]; `InvalidArgument` naming `a` when `a` is
    /// broadcast, or `b` / `c` when it overlaps `a` other than as the same
    /// view.
    pub fn run_in_place_a(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        a: TensorMut<'_, T, N>,
        b: TensorRef<'_, T, N>,
        c: TensorRef<'_, T, N>,
    ) -> Result<()> {
        let d = &self.desc;
        let out_shape = self.map.out_shape;
        if d.a_shape != out_shape {
            return Err(Error::InvalidArgument {
                op: OP,
                arg: "a",
                reason: format!(
                    "a of shape {} is broadcast to the output shape {}, so it cannot hold the \
                     output",
                    Shape::from(&d.a_shape[..]),
                    Shape::from(&out_shape[..])
                ),
            });
        }
        check_operand(OP, "a", stream, &d.a_shape, a.shape(), a.data().ctx_id())?;
        check_operand(OP, "b", stream, &d.b_shape, b.shape(), b.data().ctx_id())?;
        check_operand(OP, "c", stream, &d.c_shape, c.shape(), c.data().ctx_id())?;
        let b = b.broadcast_to(out_shape)?;
        let c = c.broadcast_to(out_shape)?;
        let a_ext = Extent::of_mut("a", &a);
        // the inputs' names on the written view: an overlap names them
        for (arg, v) in [("b", &b), ("c", &c)] {
            let ext = Extent::of(arg, v);
            check_alias(OP, &Extent { arg, ..a_ext }, &ext, true)?;
        }
        let (ptr, strides) = (a.data().ptr(), a.strides());
        let ins: [In<'_, T>; 3] = [
            (ptr.as_const(), strides),
            (b.data().ptr(), b.strides()),
            (c.data().ptr(), c.strides()),
        ];
        // SAFETY: views bounds-checked at construction, shapes checked
        // above; out is a itself, and disjoint from b and c or one of them
        // itself.
        unsafe { self.map.forward(stream, (ptr, strides), &ins) }
    }
}

impl<T: Element, const N: usize> Backward for TernaryPlan<T, N> {
    type BwArgs<'a> = TernaryBwArgs<'a, T, N>;

    fn grads(&self) -> Grads {
        Grad::A | Grad::B | Grad::C
    }

    fn bw_workspace_size(&self, wants: Grads) -> usize {
        self.map
            .ws_bytes::<T>(&[Grad::A, Grad::B, Grad::C].map(|g| wants.contains(g)))
    }

    fn run_bw(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let d = &self.desc;
        let out_shape = &self.map.out_shape;
        let (a, b, c, dy) = (&args.a, &args.b, &args.c, &args.dy);
        check_operand(OP, "a", stream, &d.a_shape, a.shape(), a.data().ctx_id())?;
        check_operand(OP, "b", stream, &d.b_shape, b.shape(), b.data().ctx_id())?;
        check_operand(OP, "c", stream, &d.c_shape, c.shape(), c.data().ctx_id())?;
        check_operand(OP, "dy", stream, out_shape, dy.shape(), dy.data().ctx_id())?;
        let grads = [
            GradOut::checked(OP, stream, "da", args.da.as_ref(), &d.a_shape)?,
            GradOut::checked(OP, stream, "db", args.db.as_ref(), &d.b_shape)?,
            GradOut::checked(OP, stream, "dc", args.dc.as_ref(), &d.c_shape)?,
        ];
        let inputs = [
            Extent::of("a", a),
            Extent::of("b", b),
            Extent::of("c", c),
            Extent::of("dy", dy),
        ];
        self.map.check_grad_aliases(OP, &grads, &inputs)?;
        let wants = grads.each_ref().map(Option::is_some);
        let ctx = stream.context().id();
        let ws = workspace.check_ptr(OP, self.map.ws_bytes::<T>(&wants), ctx)?;
        let reads = inputs.map(|e| (e.ptr, broadcast_strides(e.shape, e.strides, out_shape)));
        // SAFETY: every view was bounds-checked at construction and its
        // shape checked above; the gradients' aliasing and the workspace
        // size were checked above.
        unsafe { self.map.backward(stream, ws, &reads, &grads) }
    }
}

/// `where(cond, a, b)` with broadcasting: `torch.where`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct WhereDescriptor<const N: usize> {
    /// Element type of `a`, `b` and `out` (`cond` is bool).
    pub element: ElementKind,
    /// Shape of `cond`.
    pub cond_shape: [usize; N],
    /// Shape of `a`.
    pub a_shape: [usize; N],
    /// Shape of `b`.
    pub b_shape: [usize; N],
}

impl<const N: usize> WhereDescriptor<N> {
    /// The broadcast output shape.
    ///
    /// # Errors
    /// `BroadcastMismatch` naming two shapes that differ on an axis where
    /// neither is 1.
    pub fn out_shape(&self) -> Result<[usize; N]> {
        out_shape(WHERE, &[&self.cond_shape, &self.a_shape, &self.b_shape])
    }
}

/// Arguments of [`WherePlan`]'s [`Plan::run`].
pub struct WhereArgs<'a, T, const N: usize> {
    /// The condition, shape `cond_shape`.
    pub cond: TensorRef<'a, bool, N>,
    /// Taken where `cond` holds, shape `a_shape`.
    pub a: TensorRef<'a, T, N>,
    /// Taken elsewhere, shape `b_shape`.
    pub b: TensorRef<'a, T, N>,
    /// Output, the broadcast shape; it may be `a` or `b` itself (the same
    /// view) and shares no memory with `cond`.
    pub out: TensorMut<'a, T, N>,
}

/// Arguments of [`WherePlan`]'s [`Backward::run_bw`]: the gradients read
/// only `cond` and `dy`.
pub struct WhereBwArgs<'a, T, const N: usize> {
    /// The forward's condition, shape `cond_shape`.
    pub cond: TensorRef<'a, bool, N>,
    /// Gradient of the output, the broadcast shape.
    pub dy: TensorRef<'a, T, N>,
    /// Gradient of `a`, shape `a_shape`, when wanted: `dy` where `cond`
    /// holds, else 0 (summed where `a` was broadcast). When not reduced it
    /// may be `dy` itself (the same view).
    pub da: Option<TensorMut<'a, T, N>>,
    /// Gradient of `b`, shape `b_shape`, when wanted: `dy` where `cond`
    /// does not hold; aliasing as `da`.
    pub db: Option<TensorMut<'a, T, N>>,
}

/// `out = cond ? a : b` elementwise with broadcasting (`torch.where`), and
/// its backward `da = reduce(cond ? dy : 0)`, `db = reduce(cond ? 0 : dy)`.
///
/// # Shapes
/// `cond`, `a`, `b`: their descriptor shapes, `out` and `dy`: their
/// broadcast; rank `N <= 8`. No forward workspace; the backward's is
/// `bw_workspace_size(wants)`.
/// # Layout, backward
/// As [`TernaryPlan`]; `cond` is one byte per element (bool).
/// # Dtypes
/// f32, f64, f16, bf16 for `a`, `b`, `out`. Others: `Unsupported`.
/// # Aliasing
/// `out` may be `a` or `b` (the same view); a gradient computed pointwise
/// may be `dy` itself; nothing written shares memory with `cond`, a
/// reduced gradient with no operand, the two gradients with each other.
/// Any other overlap is `InvalidArgument`.
/// # Errors
/// As [`TernaryPlan`].
pub struct WherePlan<T: Element, const N: usize> {
    desc: WhereDescriptor<N>,
    map: TernaryMap<N>,
    _t: PhantomData<T>,
}

impl<T: Element, const N: usize> Plan for WherePlan<T, N> {
    type Descriptor = WhereDescriptor<N>;
    type Args<'a> = WhereArgs<'a, T, N>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let dt = check_select::<T, N>(WHERE, desc.element, pref)?;
        pref.check_workspace(WHERE, 0)?;
        let out = desc.out_shape()?;
        let map = TernaryMap::select::<T>(
            stream,
            pref,
            (WHERE_INDEX, WHERE),
            dt,
            &[&desc.a_shape, &desc.b_shape],
            out,
            TernaryParams::default(),
        )?;
        Ok(WherePlan {
            desc: *desc,
            map,
            _t: PhantomData,
        })
    }

    fn sku(&self) -> &KernelSku {
        &self.map.sku
    }

    fn workspace_size(&self) -> usize {
        0
    }

    fn run(&self, stream: &Stream, _workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let d = &self.desc;
        let out_shape = self.map.out_shape;
        let cond = &args.cond;
        check_operand(
            WHERE,
            "cond",
            stream,
            &d.cond_shape,
            cond.shape(),
            cond.data().ctx_id(),
        )?;
        check_operand(
            WHERE,
            "a",
            stream,
            &d.a_shape,
            args.a.shape(),
            args.a.data().ctx_id(),
        )?;
        check_operand(
            WHERE,
            "b",
            stream,
            &d.b_shape,
            args.b.shape(),
            args.b.data().ctx_id(),
        )?;
        let out = &args.out;
        check_operand(
            WHERE,
            "out",
            stream,
            &out_shape,
            out.shape(),
            out.data().ctx_id(),
        )?;
        let cond = cond.broadcast_to(out_shape)?;
        let a = args.a.broadcast_to(out_shape)?;
        let b = args.b.broadcast_to(out_shape)?;
        let out_ext = Extent::of_mut("out", out);
        check_alias(WHERE, &out_ext, &Extent::of("a", &a), true)?;
        check_alias(WHERE, &out_ext, &Extent::of("b", &b), true)?;
        check_disjoint(
            WHERE,
            &[byte_span("out", &out.as_const())],
            &[byte_span("cond", &cond)],
        )?;
        let ins: [In<'_, T>; 3] = [
            (cond.data().ptr().cast(), cond.strides()),
            (a.data().ptr(), a.strides()),
            (b.data().ptr(), b.strides()),
        ];
        // SAFETY: views bounds-checked at construction, shapes checked
        // above; the kernels read cond as bytes (its element type); out is
        // disjoint from cond and from a and b or one of them itself.
        unsafe {
            self.map
                .forward(stream, (out.data().ptr(), out.strides()), &ins)
        }
    }
}

impl<T: Element, const N: usize> Backward for WherePlan<T, N> {
    type BwArgs<'a> = WhereBwArgs<'a, T, N>;

    fn grads(&self) -> Grads {
        Grad::A | Grad::B
    }

    fn bw_workspace_size(&self, wants: Grads) -> usize {
        self.map
            .ws_bytes::<T>(&[Grad::A, Grad::B].map(|g| wants.contains(g)))
    }

    fn run_bw(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let d = &self.desc;
        let out_shape = &self.map.out_shape;
        let (cond, dy) = (&args.cond, &args.dy);
        check_operand(
            WHERE,
            "cond",
            stream,
            &d.cond_shape,
            cond.shape(),
            cond.data().ctx_id(),
        )?;
        check_operand(
            WHERE,
            "dy",
            stream,
            out_shape,
            dy.shape(),
            dy.data().ctx_id(),
        )?;
        let grads = [
            GradOut::checked(WHERE, stream, "da", args.da.as_ref(), &d.a_shape)?,
            GradOut::checked(WHERE, stream, "db", args.db.as_ref(), &d.b_shape)?,
        ];
        self.map
            .check_grad_aliases(WHERE, &grads, &[Extent::of("dy", dy)])?;
        let spans: Vec<_> = grads
            .iter()
            .flatten()
            .map(|g| (g.ext.arg, g.ptr.addr(), byte_span_of(&g.ext)))
            .collect();
        check_disjoint(WHERE, &spans, &[byte_span("cond", cond)])?;
        let wants = grads.each_ref().map(Option::is_some);
        let ctx = stream.context().id();
        let ws = workspace.check_ptr(WHERE, self.map.ws_bytes::<T>(&wants), ctx)?;
        let reads = [
            (
                cond.data().ptr().cast::<T>(),
                broadcast_strides(cond.shape(), cond.strides(), out_shape),
            ),
            (
                dy.data().ptr(),
                broadcast_strides(dy.shape(), dy.strides(), out_shape),
            ),
        ];
        // SAFETY: every view was bounds-checked at construction and its
        // shape checked above; the kernels read cond as bytes; the
        // gradients' aliasing and the workspace size were checked above.
        unsafe { self.map.backward(stream, ws, &reads, &grads) }
    }
}

/// Bytes an extent spans.
fn byte_span_of<T>(e: &Extent<'_, T>) -> usize {
    crate::checks::span_bytes::<T>(e.shape, e.strides)
}

/// Every module the ternary plans can request.
pub(crate) fn ternary_specs() -> Vec<baracuda_driver::ModuleSpec> {
    let mut v = Vec::new();
    for dt in 0..4 {
        for index in (0..TernaryOp::ALL.len() as u32).chain([WHERE_INDEX]) {
            v.push(spec(
                &kernel_sources::TERNARY,
                dt,
                index,
                contig_shape(false, dt),
            ));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_shape_broadcasts_three_shapes() {
        let d = TernaryDescriptor {
            op: TernaryOp::Lerp,
            element: ElementKind::F32,
            a_shape: [4, 1, 1],
            b_shape: [1, 3, 1],
            c_shape: [1, 1, 5],
        };
        assert_eq!(d.out_shape().unwrap(), [4, 3, 5]);
        let bad = TernaryDescriptor {
            c_shape: [1, 2, 5],
            ..d
        };
        assert!(matches!(
            bad.out_shape(),
            Err(Error::BroadcastMismatch { op: "ternary", .. })
        ));
        let w = WhereDescriptor {
            element: ElementKind::F32,
            cond_shape: [4, 1],
            a_shape: [1, 3],
            b_shape: [1, 1],
        };
        assert_eq!(w.out_shape().unwrap(), [4, 3]);
    }

    #[test]
    fn ops_compare_by_parameter_bits() {
        assert_eq!(
            TernaryOp::Addcmul { value: f64::NAN },
            TernaryOp::Addcmul { value: f64::NAN }
        );
        assert_ne!(
            TernaryOp::Addcmul { value: 1.0 },
            TernaryOp::Addcdiv { value: 1.0 }
        );
        assert_ne!(
            TernaryOp::Addcmul { value: 1.0 },
            TernaryOp::Addcmul { value: 2.0 }
        );
        for (i, op) in TernaryOp::ALL.iter().enumerate() {
            assert_eq!(op.index() as usize, i);
        }
    }

    #[test]
    fn params_layout_matches_cuda() {
        assert_eq!(std::mem::size_of::<TernaryParams>(), 8);
        assert!(kernel_sources::TERNARY
            .source
            .contains("enum { LERP, ADDCMUL, ADDCDIV, CLAMP, WHERE };"));
        assert_eq!(WHERE_INDEX, TernaryOp::ALL.len() as u32);
    }
}
