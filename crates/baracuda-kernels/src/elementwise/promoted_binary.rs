//! Binary ops on inputs of different float dtypes, with PyTorch's type
//! promotion (`torch.result_type`) inside the kernel: `out = f(a, b)` of
//! the result dtype, and the backward `da` of `a`'s dtype and `db` of
//! `b`'s.
//!
//! PyTorch upcasts each input to the result dtype, then computes as the
//! same-dtype op; every mixed pair of f32, f64, f16 and bf16 promotes to
//! f32 or f64, each input converts to it exactly, and the math is
//! [`BinaryOp`]'s in the result's accumulator (f32, or f64 for an f64
//! result). The gradient of an input is computed in that accumulator,
//! summed over the axes its input is broadcast on, then rounded once to
//! the input's dtype, as PyTorch's autograd (which sums in the result
//! dtype, then casts).

use core::marker::PhantomData;

use baracuda_driver::{ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtr, DevPtrMut, Element, ElementKind, Error, Grad, Grads, KernelSku,
    PlanPreference, Result, TensorMut, TensorRef, Workspace,
};

use super::binary::{BinaryOp, BinaryParams};
use super::layout::{
    check_operand, check_out_aliases, check_select, contig_shape, spec, In, MapKernels, Out,
};
use super::reduce_back::{
    broadcast_strides, out_shape, with_offsets, GradOut, Reduction,
};
use super::unary::pointwise_precision;
use crate::checks::{byte_span, check_disjoint, ByteSpan};
use crate::kernel_sources;
use crate::{Backward, Plan};

/// PyTorch's type promotion of two different float element types
/// (`torch.result_type` of two tensors): the wider one, and f32 for f16
/// with bf16. Implemented for every ordered pair of distinct types among
/// f32, f64, f16 and bf16; a same-type pair has no implementation (use
/// [`BinaryPlan`](super::BinaryPlan)).
pub trait Promote<B: Element>: Element {
    /// The result element type.
    type Out: Element;
}

macro_rules! promote {
    ($(($a:ty, $b:ty) -> $o:ty),* $(,)?) => {
        $(impl Promote<$b> for $a {
            type Out = $o;
        })*
    };
}

promote!(
    (half::bf16, f32) -> f32,
    (f32, half::bf16) -> f32,
    (half::f16, f32) -> f32,
    (f32, half::f16) -> f32,
    (half::f16, half::bf16) -> f32,
    (half::bf16, half::f16) -> f32,
    (f32, f64) -> f64,
    (f64, f32) -> f64,
    (half::f16, f64) -> f64,
    (f64, half::f16) -> f64,
    (half::bf16, f64) -> f64,
    (f64, half::bf16) -> f64,
);

/// PyTorch's result type of two different float element kinds among f32,
/// f64, f16 and bf16 (the runtime form of [`Promote`]), or `None` for a
/// same-kind pair or another kind.
pub fn promoted_kind(a: ElementKind, b: ElementKind) -> Option<ElementKind> {
    use ElementKind::{Bf16 as BF16, F16, F32, F64};
    let rank = |k| match k {
        F16 | BF16 => Some(0),
        F32 => Some(1),
        F64 => Some(2),
        _ => None,
    };
    let (ra, rb) = (rank(a)?, rank(b)?);
    if a == b {
        None
    } else if ra == rb {
        Some(F32)
    } else if ra > rb {
        Some(a)
    } else {
        Some(b)
    }
}

/// A binary op of two rank-`N` inputs of different float dtypes broadcast
/// to a common shape ([`PromotedBinaryPlan`]).
///
/// Each axis of `a_shape` and `b_shape` must equal the other's or be 1; the
/// output shape is their broadcast, the output dtype
/// [`promoted_kind`]`(a_element, b_element)`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct PromotedBinaryDescriptor<const N: usize> {
    /// The function.
    pub op: BinaryOp,
    /// Element type of `a` (and `da`).
    pub a_element: ElementKind,
    /// Element type of `b` (and `db`); differs from `a_element`.
    pub b_element: ElementKind,
    /// Shape of `a`.
    pub a_shape: [usize; N],
    /// Shape of `b`.
    pub b_shape: [usize; N],
}

impl<const N: usize> PromotedBinaryDescriptor<N> {
    /// The broadcast output shape.
    ///
    /// # Errors
    /// `BroadcastMismatch` when an axis differs and neither is 1.
    pub fn out_shape(&self) -> Result<[usize; N]> {
        out_shape(OP, &[&self.a_shape, &self.b_shape])
    }

    /// The output element type, or `Unsupported` for a same-dtype pair or
    /// a dtype other than f32, f64, f16 and bf16.
    pub fn out_element(&self) -> Result<ElementKind> {
        promoted_kind(self.a_element, self.b_element).ok_or_else(|| Error::Unsupported {
            op: OP,
            what: format!(
                "{} with {}: promoted binary ops take two different dtypes among f32, f64, \
                 f16 and bf16 (a same-dtype pair is BinaryPlan's)",
                self.a_element, self.b_element
            ),
        })
    }
}

/// Arguments of [`PromotedBinaryPlan`]'s [`Plan::run`].
pub struct PromotedBinaryArgs<'a, A, B, O, const N: usize> {
    /// First input, shape `a_shape`.
    pub a: TensorRef<'a, A, N>,
    /// Second input, shape `b_shape`.
    pub b: TensorRef<'a, B, N>,
    /// Output, the broadcast shape, of the result dtype. It may share
    /// memory with the input of its own dtype only as the same view (in
    /// place), and with the other input not at all.
    pub out: TensorMut<'a, O, N>,
}

/// Arguments of [`PromotedBinaryPlan`]'s [`Backward::run_bw`].
pub struct PromotedBinaryBwArgs<'a, A, B, O, const N: usize> {
    /// First forward input, shape `a_shape`.
    pub a: TensorRef<'a, A, N>,
    /// Second forward input, shape `b_shape`.
    pub b: TensorRef<'a, B, N>,
    /// Gradient of the output, the broadcast shape, of the result dtype.
    pub dy: TensorRef<'a, O, N>,
    /// Gradient of `a`, shape `a_shape`, `a`'s dtype, when wanted.
    pub da: Option<TensorMut<'a, A, N>>,
    /// Gradient of `b`, shape `b_shape`, `b`'s dtype, when wanted.
    pub db: Option<TensorMut<'a, B, N>>,
}

/// `out = f(a, b)` elementwise with broadcasting for `a` and `b` of
/// different float dtypes `A` and `B`, the output of their PyTorch result
/// dtype `O` = [`Promote::Out`], and its backward; `f` and its partial
/// derivatives are [`BinaryOp`]'s, every op of [`BinaryOp::ALL`] (its
/// parameter, `alpha`, rounded to the result's accumulator).
///
/// # Shapes
/// As [`BinaryPlan`](super::BinaryPlan): `a`: `a_shape`, `b`: `b_shape`,
/// `out` and `dy`: their broadcast; rank `N <= 8`. The forward takes no
/// workspace; the backward's is `bw_workspace_size(wants)`.
/// # Layout
/// Any strides; contiguous, 16-byte-aligned, same-shape operands take the
/// vectorised kernel (per thread one 16-byte vector of `O` and as many
/// elements of each narrower input), everything else the strided kernel.
/// # Dtypes
/// Every ordered pair of distinct types among f32, f64, f16, bf16
/// ([`Promote`]): bf16/f16 with f32 and f16 with bf16 give f32 (computed
/// in f32), anything with f64 gives f64 (computed in f64). Each input
/// converts exactly to the result type, as PyTorch's upcast; `out` is
/// rounded once. A same-dtype pair is not a `PromotedBinaryPlan` (no
/// [`Promote`] impl): it is [`BinaryPlan`](super::BinaryPlan)'s.
/// # Backward
/// `dy` of `O`; `da` of `A` and `db` of `B`, each computed when given, in
/// the accumulator, summed over its input's broadcast axes by
/// [`BinaryPlan`](super::BinaryPlan)'s deterministic reductions, and
/// rounded once to its input's dtype (PyTorch's autograd sums in the
/// result dtype, then casts).
/// # Aliasing
/// `out` may be the input of its own dtype as the very same view (in
/// place); any other overlap of `out` with an input, and any overlap of a
/// gradient with an operand or the other gradient, is `InvalidArgument`
/// naming it, and nothing is written.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.a_element != A::KIND` or
/// `desc.b_element != B::KIND`; `Unsupported` for a rank `N > 8`;
/// `BroadcastMismatch`; `PreferenceRejected` when `pref` forces a backend
/// other than `Baracuda` or caps the workspace of the forward below 0
/// bytes. From `run` and `run_bw`: `ShapeMismatch`, `ContextMismatch`,
/// `InvalidArgument` (aliasing); from `run_bw`: `WorkspaceTooSmall`, and
/// `Unsupported` for an op without a backward (`heaviside`, `nextafter`).
pub struct PromotedBinaryPlan<A: Promote<B>, B: Element, const N: usize> {
    desc: PromotedBinaryDescriptor<N>,
    out_shape: [usize; N],
    sku: KernelSku,
    fw: MapKernels,
    bw: MapKernels,
    reduce_a: Option<Reduction>,
    reduce_b: Option<Reduction>,
    params: BinaryParams,
    _t: PhantomData<(A, B)>,
}

const OP: &str = "promoted_binary";

/// The output element type of the plan on `A` and `B`.
type OutOf<A, B> = <A as Promote<B>>::Out;

impl<A: Promote<B>, B: Element, const N: usize> PromotedBinaryPlan<A, B, N> {
    /// The output's element type (`torch.result_type(a, b)`).
    pub fn out_element(&self) -> ElementKind {
        OutOf::<A, B>::KIND
    }

    /// The shapes of `a`, `b` and the output.
    fn shapes(&self) -> (&[usize; N], &[usize; N], &[usize; N]) {
        (&self.desc.a_shape, &self.desc.b_shape, &self.out_shape)
    }
}

impl<A: Promote<B>, B: Element, const N: usize> Plan for PromotedBinaryPlan<A, B, N> {
    type Descriptor = PromotedBinaryDescriptor<N>;
    type Args<'a> = PromotedBinaryArgs<'a, A, B, OutOf<A, B>, N>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let a_dt = check_select::<A, N>(OP, desc.a_element, pref)
            .map_err(|e| rename_arg(e, "desc.a_element"))?;
        let b_dt = check_select::<B, N>(OP, desc.b_element, pref)
            .map_err(|e| rename_arg(e, "desc.b_element"))?;
        let out_shape = desc.out_shape()?;
        pref.check_workspace(OP, 0)?;
        let o_dt = kernel_sources::dtype_code(OutOf::<A, B>::KIND).ok_or_else(|| {
            Error::Unsupported {
                op: OP,
                what: format!("result dtype {}", OutOf::<A, B>::KIND),
            }
        })?;
        let spec = promoted_binary_spec(a_dt, b_dt, o_dt, desc.op);
        let name = desc.op.name();
        let shape = contig_shape(false, o_dt);
        let fw = MapKernels::load(stream, &spec, "binary_fw", name, shape)?;
        let bw = MapKernels::load(stream, &spec, "binary_bw", name, shape)?;
        let module = stream.context().module(&spec)?;
        let sm = stream.context().device().sm_count;
        let mut room = pref.max_workspace_bytes.unwrap_or(usize::MAX);
        let mut reduction = |shape: &[usize; N], which: &str| {
            Reduction::plan::<OutOf<A, B>>(shape, &out_shape, sm, &mut room, || {
                let reduce = module.function(&format!("binary_bw_reduce_{which}_{name}"))?;
                Ok((reduce, module.function(&format!("binary_bw_finalize_{which}"))?))
            })
        };
        let reduce_a = reduction(&desc.a_shape, "a")?;
        let reduce_b = reduction(&desc.b_shape, "b")?;
        let splits = |r: &Option<Reduction>| r.as_ref().map_or(0, Reduction::splits);
        let variant = format!(
            "{} + {} -> {}: vec16 contiguous / rank-8 strided; bw pointwise + reduce \
             (splits a={}, b={})",
            A::KIND,
            B::KIND,
            OutOf::<A, B>::KIND,
            splits(&reduce_a),
            splits(&reduce_b)
        );
        Ok(PromotedBinaryPlan {
            desc: *desc,
            out_shape,
            sku: KernelSku {
                op: format!("promoted_binary.{name}"),
                element: OutOf::<A, B>::KIND,
                backend: BackendKind::Baracuda,
                arch: stream.context().device().arch,
                variant,
                precision: pointwise_precision::<OutOf<A, B>>(),
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
        let (a_shape, b_shape, o_shape) = self.shapes();
        let (a, b, out) = (&args.a, &args.b, &args.out);
        check_operand(OP, "a", stream, a_shape, a.shape(), a.data().ctx_id())?;
        check_operand(OP, "b", stream, b_shape, b.shape(), b.data().ctx_id())?;
        check_operand(OP, "out", stream, o_shape, out.shape(), out.data().ctx_id())?;
        let a = a.broadcast_to(*o_shape)?;
        let b = b.broadcast_to(*o_shape)?;
        check_out_aliases(OP, ("out", out), &[("a", &a)])?;
        check_out_aliases(OP, ("out", out), &[("b", &b)])?;
        let q = self.params;
        // SAFETY: views bounds-checked at construction (broadcast views
        // reach no new elements), shapes checked above; out is disjoint
        // from a and b or one of them itself (same type, same view). The
        // pointers are cast to the output type only to size the launch:
        // the kernels read each operand as its own type.
        unsafe {
            self.fw.launch_with(
                OP,
                stream,
                o_shape,
                &[(out.data().ptr(), out.strides())],
                &[
                    (OutOf::<A, B>::cast_ptr(a.data().ptr()), a.strides()),
                    (OutOf::<A, B>::cast_ptr(b.data().ptr()), b.strides()),
                ],
                |args| args.push(q).map(|_| ()),
            )
        }
    }
}

/// An address of any element type as one of `Self` (the kernels take the
/// operands untyped; the launch sizes its vectors from the output type).
trait CastPtr: Element {
    fn cast_ptr<X>(p: DevPtr<X>) -> DevPtr<Self> {
        p.cast()
    }
    fn cast_ptr_mut<X>(p: DevPtrMut<X>) -> DevPtrMut<Self> {
        p.cast()
    }
}
impl<T: Element> CastPtr for T {}

/// An operand's address (as the output type's) and its strides over the
/// output shape.
type Operand<T, const N: usize> = (DevPtr<T>, [usize; N]);

/// `DtypeMismatch` from `check_select` names the descriptor field checked.
fn rename_arg(e: Error, arg: &'static str) -> Error {
    match e {
        Error::DtypeMismatch {
            op, expected, got, ..
        } => Error::DtypeMismatch {
            op,
            arg,
            expected,
            got,
        },
        e => e,
    }
}

impl<A: Promote<B>, B: Element, const N: usize> Backward for PromotedBinaryPlan<A, B, N> {
    type BwArgs<'a> = PromotedBinaryBwArgs<'a, A, B, OutOf<A, B>, N>;

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
            .map(|(_, r, at)| at + r.ws_bytes::<OutOf<A, B>>())
            .max()
            .unwrap_or(0)
    }

    fn run_bw(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let op = self.desc.op;
        if !op.has_backward() {
            return Err(Error::Unsupported {
                op: OP,
                what: format!("the backward of {} (not differentiable)", op.name()),
            });
        }
        let (a_shape, b_shape, o_shape) = self.shapes();
        let (a, b, dy) = (&args.a, &args.b, &args.dy);
        check_operand(OP, "a", stream, a_shape, a.shape(), a.data().ctx_id())?;
        check_operand(OP, "b", stream, b_shape, b.shape(), b.data().ctx_id())?;
        check_operand(OP, "dy", stream, o_shape, dy.shape(), dy.data().ctx_id())?;
        let da = GradOut::checked(OP, stream, "da", args.da.as_ref(), a_shape)?;
        let db = GradOut::checked(OP, stream, "db", args.db.as_ref(), b_shape)?;
        // No gradient shares memory with an operand or the other gradient.
        let ins: [ByteSpan; 3] = [byte_span("a", a), byte_span("b", b), byte_span("dy", dy)];
        let outs: Vec<ByteSpan> = args
            .da
            .iter()
            .map(|g| byte_span("da", &g.as_const()))
            .chain(args.db.iter().map(|g| byte_span("db", &g.as_const())))
            .collect();
        check_disjoint(OP, &outs, &ins)?;
        if outs.len() == 2 {
            check_disjoint(OP, &outs[1..], &outs[..1])?;
        }
        let wants = Grads::present(&[(Grad::A, da.is_some()), (Grad::B, db.is_some())]);
        let ctx = stream.context().id();
        let ws = workspace.check_ptr(OP, self.bw_workspace_size(wants), ctx)?;

        type O<A, B> = OutOf<A, B>;
        // a, b, dy as read over the output shape, addresses as O's.
        let ops: [Operand<O<A, B>, N>; 3] = [
            (O::<A, B>::cast_ptr(a.data().ptr()), broadcast_strides(a.shape(), a.strides(), o_shape)),
            (O::<A, B>::cast_ptr(b.data().ptr()), broadcast_strides(b.shape(), b.strides(), o_shape)),
            (dy.data().ptr(), broadcast_strides(dy.shape(), dy.strides(), o_shape)),
        ];
        let reads = ops.each_ref().map(|(p, st)| (p.cast::<u8>(), &st[..]));
        let da_o = da.as_ref().map(|g| (O::<A, B>::cast_ptr_mut(g.ptr), g.ext.strides));
        let db_o = db.as_ref().map(|g| (O::<A, B>::cast_ptr_mut(g.ptr), g.ext.strides));
        for (which, r, at) in self.reductions(wants) {
            let g = if which == 0 { da_o } else { db_o };
            if let Some(g) = g {
                // SAFETY: every address comes from a bounds-checked view
                // whose shape matches the plan, read over the output shape;
                // grad is disjoint from the operands (checked above) and the
                // workspace holds the partials (checked above). The kernel
                // reads and writes each as its own type.
                unsafe {
                    r.launch::<O<A, B>>(stream, o_shape, &reads, g, ws.byte_add(at), |args| {
                        args.push(self.params).map(|_| ())
                    })?;
                }
            }
        }
        // Pointwise pass for the gradients whose input is not broadcast.
        let absent = &ops[2].1;
        let pda: Out<'_, O<A, B>> = match (da_o, &self.reduce_a) {
            (Some(g), None) => g,
            _ => (DevPtrMut::NULL, &absent[..]),
        };
        let pdb: Out<'_, O<A, B>> = match (db_o, &self.reduce_b) {
            (Some(g), None) => g,
            _ => (DevPtrMut::NULL, &absent[..]),
        };
        if pda.0.is_null() && pdb.0.is_null() {
            return Ok(());
        }
        let ins: [In<'_, O<A, B>>; 3] = [
            (ops[0].0, &ops[0].1),
            (ops[1].0, &ops[1].1),
            (ops[2].0, &ops[2].1),
        ];
        // SAFETY: all views bounds-checked at construction and shapes
        // checked above; absent gradients are null, which the kernels skip;
        // each gradient is disjoint from every operand (checked above), and
        // the reductions were enqueued before.
        unsafe {
            self.bw.launch_with(OP, stream, o_shape, &[pda, pdb], &ins, |args| {
                args.push(self.params).map(|_| ())
            })
        }
    }
}

impl<A: Promote<B>, B: Element, const N: usize> PromotedBinaryPlan<A, B, N> {
    /// The reductions of the gradients in `wants`, each with the byte
    /// offset of its partials in the workspace (laid out in that order).
    fn reductions(&self, wants: Grads) -> impl Iterator<Item = (usize, &Reduction, usize)> {
        with_offsets::<OutOf<A, B>>(
            [(Grad::A, &self.reduce_a), (Grad::B, &self.reduce_b)]
                .into_iter()
                .map(move |(g, r)| r.as_ref().filter(|_| wants.contains(g))),
        )
    }
}

/// The mixed-dtype module of one binary op: `binary.cu` with the result
/// type as `BARACUDA_DTYPE` and the inputs' types as `BARACUDA_DTYPE_A`
/// and `BARACUDA_DTYPE_B`, one vector per thread (no register floor: the
/// same-dtype measurements do not carry over).
pub(crate) fn promoted_binary_spec(a_dt: u32, b_dt: u32, o_dt: u32, op: BinaryOp) -> ModuleSpec {
    spec(&kernel_sources::BINARY, o_dt, op.index(), contig_shape(false, o_dt))
        .define("BARACUDA_DTYPE_A", a_dt)
        .define("BARACUDA_DTYPE_B", b_dt)
}

/// Every mixed-dtype module: each ordered pair of distinct float dtypes,
/// each op.
pub(crate) fn promoted_binary_specs() -> Vec<ModuleSpec> {
    use ElementKind::{Bf16 as BF16, F16, F32, F64};
    let kinds = [F32, F64, F16, BF16];
    let mut v = Vec::new();
    for a in kinds {
        for b in kinds {
            let Some(o) = promoted_kind(a, b) else { continue };
            let code = |k| kernel_sources::dtype_code(k).expect("a float kind has a code");
            for op in BinaryOp::ALL {
                v.push(promoted_binary_spec(code(a), code(b), code(o), op));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_is_pytorchs() {
        use ElementKind::{Bf16 as BF16, F16, F32, F64, I32};
        assert_eq!(promoted_kind(BF16, F32), Some(F32));
        assert_eq!(promoted_kind(F32, BF16), Some(F32));
        assert_eq!(promoted_kind(F16, BF16), Some(F32));
        assert_eq!(promoted_kind(BF16, F16), Some(F32));
        assert_eq!(promoted_kind(F16, F32), Some(F32));
        assert_eq!(promoted_kind(F32, F64), Some(F64));
        assert_eq!(promoted_kind(BF16, F64), Some(F64));
        assert_eq!(promoted_kind(F64, F16), Some(F64));
        assert_eq!(promoted_kind(F32, F32), None);
        assert_eq!(promoted_kind(I32, F32), None);
        // the trait agrees with the runtime form
        fn out<A: Promote<B>, B: Element>() -> ElementKind {
            <A as Promote<B>>::Out::KIND
        }
        assert_eq!(out::<half::bf16, f32>(), F32);
        assert_eq!(out::<half::f16, half::bf16>(), F32);
        assert_eq!(out::<f32, f64>(), F64);
        assert_eq!(out::<f64, half::bf16>(), F64);
        assert_eq!(promoted_binary_specs().len(), 12 * BinaryOp::ALL.len());
    }

    #[test]
    fn descriptor_checks() {
        let d = PromotedBinaryDescriptor {
            op: BinaryOp::Add,
            a_element: ElementKind::Bf16,
            b_element: ElementKind::F32,
            a_shape: [4, 1],
            b_shape: [1, 3],
        };
        assert_eq!(d.out_shape().unwrap(), [4, 3]);
        assert_eq!(d.out_element().unwrap(), ElementKind::F32);
        let same = PromotedBinaryDescriptor {
            b_element: ElementKind::Bf16,
            ..d
        };
        assert!(matches!(same.out_element(), Err(Error::Unsupported { .. })));
        let bad = PromotedBinaryDescriptor {
            a_shape: [4, 2],
            ..d
        };
        assert!(matches!(
            bad.out_shape(),
            Err(Error::BroadcastMismatch { op: "promoted_binary", .. })
        ));
        let pref = PlanPreference::default();
        assert!(check_select::<half::bf16, 2>(OP, d.a_element, &pref).is_ok());
        let e = check_select::<f32, 2>(OP, d.a_element, &pref)
            .map_err(|e| rename_arg(e, "desc.a_element"));
        assert!(matches!(
            e,
            Err(Error::DtypeMismatch { arg: "desc.a_element", .. })
        ));
    }
}
