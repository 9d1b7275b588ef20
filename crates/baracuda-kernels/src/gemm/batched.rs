//! Strided batched GEMM:
//! `D[i] = act(alpha * op(A[i]) op(B[i]) + beta * C[i] + bias[i])` for
//! `i < batch`, where matrix `i` of an operand starts `i * stride` elements
//! after the first. A stride of 0 broadcasts one matrix to every batch
//! entry (for `A`, `B`, `C` or the bias; never `D` or the aux output).
//!
//! The epilogues are [`GemmPlan`]'s: fused into the one cuBLASLt call
//! where cuBLASLt takes them (its bias and aux batch strides), else one
//! epilogue-kernel pass over every entry.

use baracuda_driver::{LtPointers, Stream};
use baracuda_kernels_types::{
    DevPtr, DevPtrMut, DeviceSlice, DeviceSliceMut, Element, Error, KernelSku, MatrixOrder,
    PlanPreference, Result, Shape, TensorRef, Workspace,
};

use super::args::{check_disjoint, GemmC, Region};
use super::gemm::{GemmDescriptor, GemmPlan};
use super::matmul::{scalar, Batch, Ptrs};
use crate::checks::{check_aligned, check_at_least, check_slice, optional_arg, AUX_WHY, BIAS_WHY};
use crate::Plan;

const OP: &str = "batched_gemm";

/// A strided batch of equal-shaped GEMMs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BatchedGemmDescriptor {
    /// Shape, layout, leading dimensions and epilogue of one entry.
    pub gemm: GemmDescriptor,
    /// Number of entries.
    pub batch: usize,
    /// Elements between consecutive `A` matrices (0 broadcasts).
    pub stride_a: usize,
    /// Elements between consecutive `B` matrices (0 broadcasts).
    pub stride_b: usize,
    /// Elements between consecutive `C` matrices (0 broadcasts).
    pub stride_c: usize,
    /// Elements between consecutive `D` matrices.
    pub stride_d: usize,
    /// Elements between the bias vectors of consecutive entries (0 gives
    /// every entry the same bias). Unused without a bias.
    pub stride_bias: usize,
    /// Elements between consecutive aux matrices (stored like `D`, with
    /// `ldd`). Unused without `save_aux`.
    pub stride_aux: usize,
}

/// Elements one stored `rows x cols` matrix reaches; `None` when that
/// does not fit in `usize`.
fn checked_span(order: MatrixOrder, rows: usize, cols: usize, ld: usize) -> Option<usize> {
    let (outer, inner) = match order {
        MatrixOrder::RowMajor => (rows, cols),
        MatrixOrder::ColMajor => (cols, rows),
    };
    outer.saturating_sub(1).checked_mul(ld)?.checked_add(inner)
}

/// [`checked_span`], saturating at `usize::MAX` (`validate` rejects a
/// descriptor whose output span does not fit).
pub(crate) fn span(order: MatrixOrder, rows: usize, cols: usize, ld: usize) -> usize {
    checked_span(order, rows, cols, ld).unwrap_or(usize::MAX)
}

/// Elements each whole-batch slice must hold.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Extents {
    a: usize,
    b: usize,
    c: usize,
    d: usize,
    bias: usize,
    aux: usize,
}

impl BatchedGemmDescriptor {
    /// Packed entries, one after the other, for every operand: the bias
    /// vectors `n` apart, the aux matrices as `D`'s.
    pub fn packed(gemm: GemmDescriptor, batch: usize) -> Self {
        let g = &gemm;
        let l = g.layout;
        let stride_d = span(l.c(), g.m, g.n, g.ldd);
        BatchedGemmDescriptor {
            stride_a: span(l.a(), g.m, g.k, g.lda),
            stride_b: span(l.b(), g.k, g.n, g.ldb),
            stride_c: span(l.c(), g.m, g.n, g.ldc),
            stride_d,
            stride_bias: g.n,
            stride_aux: stride_d,
            gemm,
            batch,
        }
    }

    /// Give every entry the same bias vector (`stride_bias = 0`).
    #[must_use]
    pub fn with_shared_bias(mut self) -> Self {
        self.stride_bias = 0;
        self
    }

    /// Check the batch and its strides (the entry's own checks are
    /// [`GemmDescriptor`]'s).
    pub(crate) fn validate(&self) -> Result<()> {
        self.gemm.validate(OP)?;
        let g = &self.gemm;
        if self.batch == 0 || self.batch > i32::MAX as usize {
            return Err(Error::InvalidDescriptor {
                op: OP,
                field: "batch",
                value: self.batch.to_string(),
                reason: "must be in 1..2^31".into(),
            });
        }
        let dspan = checked_span(g.layout.c(), g.m, g.n, g.ldd).ok_or_else(|| Error::Overflow {
            op: OP,
            what: format!("the elements of one {}x{} output with ldd {}", g.m, g.n, g.ldd),
        })?;
        let outputs = [
            ("stride_d", self.stride_d, true),
            ("stride_aux", self.stride_aux, g.save_aux),
        ];
        for (field, stride, used) in outputs {
            if used && self.batch > 1 {
                check_at_least(OP, field, stride, dspan, || {
                    format!("the {dspan} elements of one entry: output matrices would overlap")
                })?;
            }
        }
        Ok(())
    }

    /// The batch as the matmul sees it; strides of an unused bias or aux
    /// are 0, so they change neither the algorithm nor its cache key.
    fn layout(&self) -> Batch {
        let g = &self.gemm;
        Batch {
            count: self.batch,
            a: self.stride_a,
            b: self.stride_b,
            c: self.stride_c,
            d: self.stride_d,
            bias: if g.epilogue.has_bias() {
                self.stride_bias
            } else {
                0
            },
            aux: if g.save_aux { self.stride_aux } else { 0 },
        }
    }

    fn extents(&self) -> Extents {
        let g = &self.gemm;
        let l = g.layout;
        let all =
            |stride: usize, one: usize| (self.batch - 1).saturating_mul(stride).saturating_add(one);
        let dspan = span(l.c(), g.m, g.n, g.ldd);
        Extents {
            a: all(self.stride_a, span(l.a(), g.m, g.k, g.lda)),
            b: all(self.stride_b, span(l.b(), g.k, g.n, g.ldb)),
            c: all(self.stride_c, span(l.c(), g.m, g.n, g.ldc)),
            d: all(self.stride_d, dspan),
            bias: all(self.stride_bias, g.n),
            aux: all(self.stride_aux, dspan),
        }
    }

    /// Check `args` against the descriptor on context `ctx` (as `run`
    /// does) and return their addresses, the workspace left empty.
    fn check_args<T: Element, O: Element>(
        &self,
        ctx: usize,
        args: &BatchedGemmArgs<'_, T, O>,
    ) -> Result<Ptrs> {
        let e = self.extents();
        let g = &self.gemm;
        let a = check_batch("a", &args.a, e.a, ctx)?;
        let b = check_batch("b", &args.b, e.b, ctx)?;
        let d = DevPtrMut::<O>::from_addr(check_batch("d", &args.d.as_const(), e.d, ctx)?.addr());
        let out = Region::flat::<O>(d.addr(), e.d);
        let mut inputs = vec![
            ("a", Region::flat::<T>(a.addr(), e.a)),
            ("b", Region::flat::<T>(b.addr(), e.b)),
        ];
        check_disjoint(OP, ("d", out), &inputs)?;
        let same_layout = g.ldc == g.ldd && (self.stride_c == self.stride_d || self.batch == 1);
        let c = args.c.resolve(OP, args.beta, (d.cast(), same_layout), |c| {
            let p = check_batch("c", c, e.c, ctx)?;
            let rc = Region::flat::<O>(p.addr(), e.c);
            if !(p == d.as_const() && same_layout) {
                check_disjoint(OP, ("d", out), &[("c", rc)])?;
                inputs.push(("c", rc));
            }
            Ok(p.cast())
        })?;
        let bias = optional_arg(
            OP,
            "bias",
            args.bias.as_ref(),
            g.epilogue.has_bias(),
            BIAS_WHY,
            |v| self.check_bias(v, ctx).map(DevPtr::addr),
        )?;
        if bias != 0 {
            inputs.push(("bias", Region::flat::<O>(bias, e.bias)));
            check_disjoint(OP, ("d", out), &inputs[inputs.len() - 1..])?;
        }
        let aux = optional_arg(OP, "aux", args.aux.as_ref(), g.save_aux, AUX_WHY, |s| {
            let p = check_batch("aux", &s.as_const(), e.aux, ctx)?;
            inputs.push(("d", out));
            check_disjoint(OP, ("aux", Region::flat::<O>(p.addr(), e.aux)), &inputs)?;
            Ok(p.addr())
        })?;
        Ok(Ptrs {
            mat: LtPointers {
                a: a.cast(),
                b: b.cast(),
                c,
                d: d.cast(),
                ..LtPointers::default()
            },
            bias: DevPtr::from_addr(bias),
            aux: DevPtrMut::from_addr(aux),
            ..Ptrs::default()
        })
    }

    /// Check the bias view `[batch, n]`: on context `ctx`, 16-byte
    /// aligned, unit stride along `n` (unless `n` is 1) and `stride_bias`
    /// between entries (unless there is one). Its address.
    fn check_bias<O: Element>(&self, v: &TensorRef<'_, O, 2>, ctx: usize) -> Result<DevPtr<O>> {
        let n = self.gemm.n;
        if v.data().ctx_id() != ctx {
            return Err(Error::ContextMismatch { op: OP, arg: "bias" });
        }
        if v.shape() != &[self.batch, n] {
            return Err(Error::ShapeMismatch {
                op: OP,
                arg: "bias",
                expected: Shape::from([self.batch, n]),
                got: Shape::from(&v.shape()[..]),
            });
        }
        let [entry, elem] = *v.strides();
        if (n > 1 && elem != 1) || (self.batch > 1 && entry != self.stride_bias) {
            return Err(Error::InvalidArgument {
                op: OP,
                arg: "bias",
                reason: format!(
                    "strides {:?}: the plan reads [stride_bias, 1] = [{}, 1]",
                    v.strides(),
                    self.stride_bias
                ),
            });
        }
        check_aligned(OP, "bias", v.data().addr())?;
        Ok(v.data().ptr())
    }
}

/// Tensors of one batched GEMM run: whole-batch slices.
#[derive(Debug)]
pub struct BatchedGemmArgs<'a, T, O = T> {
    /// All `A` matrices.
    pub a: DeviceSlice<'a, T>,
    /// All `B` matrices.
    pub b: DeviceSlice<'a, T>,
    /// All `C` matrices: their own slice, `D` itself (in place), or none
    /// when `beta == 0`.
    pub c: GemmC<DeviceSlice<'a, O>>,
    /// All `D` matrices, written.
    pub d: DeviceSliceMut<'a, O>,
    /// The bias vectors, `[batch, n]` with strides `[stride_bias, 1]` (a
    /// shared bias is a broadcast view, stride 0), when the epilogue has a
    /// bias.
    pub bias: Option<TensorRef<'a, O, 2>>,
    /// All pre-activation matrices (`stride_aux` apart, in `D`'s order and
    /// `ldd`), written, when the descriptor has `save_aux`.
    pub aux: Option<DeviceSliceMut<'a, O>>,
    /// Scale of the products.
    pub alpha: f64,
    /// Scale of `C`.
    pub beta: f64,
}

/// A strided batch of GEMMs in one cuBLASLt call:
/// `D[i] = act(alpha op(A[i]) op(B[i]) + beta C[i] + bias[i])` for
/// `i < batch`, each entry computed as [`GemmPlan`] computes one (aux
/// entries hold the pre-activation). No backward.
///
/// # Shapes
/// Entry `i` of `A` is `m x k` at offset `i * stride_a` (orders and leading
/// dimensions as in [`GemmDescriptor`]); likewise `B`, `C`, `D` and the
/// aux output; entry `i`'s bias is `n` elements at `i * stride_bias`.
/// # Layout
/// `A`, `B`, `C`, `D` and aux are whole-batch [`DeviceSlice`]s, each at
/// least `(batch - 1) * stride + one entry's span` elements long and
/// 16-byte aligned; a stride of 0 broadcasts one `A`, `B`, `C` or bias
/// to every entry. The bias is a `[batch, n]` view of strides
/// `[stride_bias, 1]`, 16-byte aligned. The workspace is
/// `workspace_size()` bytes.
/// # Dtypes
/// `T -> O`, exactly as [`GemmPlan`]: f32 -> f32 (IEEE; TF32 only with
/// `allow_tf32`), f64 -> f64, f16 -> f16, f16 -> f32, bf16 -> bf16,
/// bf16 -> f32; `C`, bias and aux are `O`. Others: `Unsupported`.
/// # Epilogues
/// Every [`GemmPlan`] epilogue. They fuse into cuBLASLt as for
/// [`GemmPlan`] when, in addition, each entry's bias and aux start on 16
/// bytes (and aux entries lie a multiple of 8 elements apart); otherwise
/// one epilogue-kernel pass covers the whole batch (the SKU says which).
/// # Errors
/// From `select`: `InvalidDescriptor` ([`GemmPlan`]'s descriptor checks,
/// a `batch` of 0 or past 2^31 - 1, `stride_d` or `stride_aux` below one
/// entry's span so that output entries would overlap); `Overflow` when
/// one output entry's span does not fit in `usize`; `Unsupported` (a
/// dtype pair, or no cuBLASLt algorithm), `PreferenceRejected` and the
/// library errors as [`GemmPlan`]. From `run`: `ShapeMismatch` when a
/// slice is too short or the bias is not `[batch, n]`; `InvalidArgument`
/// (a slice or bias not 16-byte aligned, bias strides other than
/// `[stride_bias, 1]`, `beta != 0` without `c`, [`GemmC::Output`] without
/// `ldc == ldd` and (for `batch > 1`) `stride_c == stride_d`, a bias or
/// aux given against the descriptor or missing, an overlap the aliasing
/// rules refuse);
/// `ContextMismatch` for a slice or workspace on another context;
/// `WorkspaceTooSmall`.
/// # Aliasing
/// `D` may be `C` ([`GemmC::Output`], or a `C` slice at `D`'s address)
/// when `ldc == ldd` and `stride_c == stride_d`: every entry accumulates
/// in place. Otherwise the byte ranges the whole-batch `D` and aux reach
/// overlap neither each other nor `A`, `B`, `C` or the bias:
/// `InvalidArgument` naming the output.
pub struct BatchedGemmPlan<T: Element, O: Element = T> {
    desc: BatchedGemmDescriptor,
    gemm: GemmPlan<T, O>,
}

/// Check a whole-batch slice: on context `ctx`, at least `need` elements,
/// 16-byte aligned. Its address.
fn check_batch<T>(
    arg: &'static str,
    s: &DeviceSlice<'_, T>,
    need: usize,
    ctx: usize,
) -> Result<DevPtr<T>> {
    check_slice(OP, arg, s, need, false, ctx)?;
    Ok(s.ptr())
}

impl<T: Element, O: Element> Plan for BatchedGemmPlan<T, O> {
    type Descriptor = BatchedGemmDescriptor;
    type Args<'a> = BatchedGemmArgs<'a, T, O>;

    fn select(
        stream: &Stream,
        desc: &BatchedGemmDescriptor,
        pref: &PlanPreference,
    ) -> Result<Self> {
        desc.validate()?;
        let gemm = GemmPlan::select_batched(OP, stream, &desc.gemm, &desc.layout(), pref)?;
        Ok(BatchedGemmPlan {
            desc: desc.clone(),
            gemm,
        })
    }
    fn sku(&self) -> &KernelSku {
        self.gemm.sku()
    }
    fn workspace_size(&self) -> usize {
        self.gemm.workspace_size()
    }
    fn run(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: BatchedGemmArgs<'_, T, O>,
    ) -> Result<()> {
        let ctx = stream.context().id();
        let bytes = self.gemm.workspace_size();
        let ws = workspace.check_ptr(OP, bytes, ctx)?;
        let ptrs = self.desc.check_args(ctx, &args)?.with_workspace(ws, bytes);
        let compute = self.gemm.compute();
        // SAFETY: check_args proved every slice holds (batch-1)*stride +
        // one entry's span elements on this context, 16-byte aligned (bias
        // and aux included when the plan uses them), and the workspace the
        // plan's bytes; the borrows in `args` keep them alive and D and aux
        // exclusive while the work is enqueued.
        unsafe {
            self.gemm.enqueue_checked(
                stream,
                scalar(compute, true, args.alpha),
                scalar(compute, true, args.beta),
                ptrs,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baracuda_kernels_types::{EpilogueKind, LayoutSku};

    fn desc(e: EpilogueKind, batch: usize) -> BatchedGemmDescriptor {
        let g = GemmDescriptor::new(4, 5, 3, LayoutSku::Rrr)
            .with_epilogue(e)
            .with_aux(e.activation() != baracuda_kernels_types::Activation::Identity);
        BatchedGemmDescriptor::packed(g, batch)
    }

    #[test]
    fn packed_strides_and_extents() {
        let b = desc(EpilogueKind::BiasRelu, 6);
        assert_eq!((b.stride_a, b.stride_b, b.stride_d), (12, 15, 20));
        assert_eq!((b.stride_bias, b.stride_aux), (5, 20));
        let e = b.extents();
        assert_eq!((e.d, e.bias, e.aux), (120, 30, 120));
        let mut bc = b.clone().with_shared_bias();
        bc.stride_b = 0; // broadcast B
        assert!(bc.validate().is_ok());
        let e = bc.extents();
        assert_eq!((e.b, e.bias), (15, 5));
        assert_eq!(bc.layout().bias, 0);
    }

    #[test]
    fn unused_strides_stay_out_of_the_matmul() {
        let mut b = desc(EpilogueKind::Identity, 3);
        b.stride_bias = 7;
        b.stride_aux = 1;
        assert!(b.validate().is_ok(), "unused strides are not checked");
        let l = b.layout();
        assert_eq!((l.bias, l.aux), (0, 0));
        let b = desc(EpilogueKind::BiasGeluErf, 3);
        let l = b.layout();
        assert_eq!((l.count, l.bias, l.aux), (3, 5, 20));
    }

    #[test]
    fn bad_descriptors() {
        let mut b = desc(EpilogueKind::Identity, 0);
        assert!(matches!(
            b.validate(),
            Err(Error::InvalidDescriptor { field: "batch", .. })
        ));
        b.batch = 2;
        b.stride_d = 19;
        assert!(matches!(
            b.validate(),
            Err(Error::InvalidDescriptor {
                field: "stride_d",
                ..
            })
        ));
        // Every epilogue is accepted; overlapping aux entries are not.
        for e in EpilogueKind::ALL {
            assert!(desc(e, 3).validate().is_ok(), "{e}");
        }
        let mut b = desc(EpilogueKind::GeluTanh, 2);
        b.stride_aux = 19;
        assert!(matches!(
            b.validate(),
            Err(Error::InvalidDescriptor {
                field: "stride_aux",
                ..
            })
        ));
        // One entry cannot overlap itself.
        b.batch = 1;
        assert!(b.validate().is_ok());
        // The entry's own checks still apply.
        let mut b = desc(EpilogueKind::Bias, 2);
        b.gemm.save_aux = true;
        assert!(matches!(
            b.validate(),
            Err(Error::InvalidDescriptor {
                field: "save_aux",
                ..
            })
        ));
        let mut b = desc(EpilogueKind::Bias, 2);
        b.gemm.ldd = 4;
        assert!(matches!(
            b.validate(),
            Err(Error::InvalidDescriptor { field: "ldd", .. })
        ));
    }

    /// A fake slice of `len` f32 at `addr` on context 1 (never read).
    fn fake<'a>(addr: u64, len: usize) -> DeviceSlice<'a, f32> {
        // SAFETY: host-only inspection of a fake address.
        unsafe { DeviceSlice::from_raw_parts(addr, len, 1) }
    }
    fn fake_mut<'a>(addr: u64, len: usize) -> DeviceSliceMut<'a, f32> {
        // SAFETY: as above.
        unsafe { DeviceSliceMut::from_raw_parts(addr, len, 1) }
    }

    /// A `[rows, cols]` bias view with `strides` at `addr`.
    fn bias_view<'a>(addr: u64, shape: [usize; 2], strides: [usize; 2]) -> TensorRef<'a, f32, 2> {
        TensorRef::new(fake(addr, 1000), shape, strides).unwrap()
    }

    /// Arguments of `d` with no C; the bias `[batch, n]` at the
    /// descriptor's strides and the aux slice of `aux` elements when given.
    fn args<'a>(
        d: &BatchedGemmDescriptor,
        bias: bool,
        aux: Option<usize>,
    ) -> BatchedGemmArgs<'a, f32> {
        let e = d.extents();
        let n = d.gemm.n;
        BatchedGemmArgs {
            a: fake(0x10000, e.a),
            b: fake(0x20000, e.b),
            c: GemmC::None,
            d: fake_mut(0x30000, e.d),
            bias: bias.then(|| bias_view(0x40000, [d.batch, n], [d.stride_bias, 1])),
            aux: aux.map(|n| fake_mut(0x50000, n)),
            alpha: 1.0,
            beta: 0.0,
        }
    }

    #[test]
    fn argument_checks() {
        let d = desc(EpilogueKind::BiasGeluTanh, 4);
        let e = d.extents();
        let p = d.check_args(1, &args(&d, true, Some(e.aux))).unwrap();
        // No C with beta 0: a null C, which cuBLASLt does not read.
        let addrs = (p.mat.c.addr(), p.bias.addr(), p.aux.addr());
        assert_eq!(addrs, (0, 0x40000, 0x50000));
        let bad = |a: BatchedGemmArgs<'_, f32>| d.check_args(1, &a).unwrap_err();
        let mut a = args(&d, true, Some(e.aux));
        a.bias = Some(bias_view(0x40000, [3, 5], [5, 1]));
        assert!(matches!(bad(a), Error::ShapeMismatch { arg: "bias", .. }));
        for strides in [[6, 1], [10, 2]] {
            let mut a = args(&d, true, Some(e.aux));
            a.bias = Some(bias_view(0x40000, [4, 5], strides));
            assert!(matches!(bad(a), Error::InvalidArgument { arg: "bias", .. }));
        }
        assert!(matches!(
            bad(args(&d, false, Some(e.aux))),
            Error::InvalidArgument { arg: "bias", .. }
        ));
        assert!(matches!(
            bad(args(&d, true, Some(e.aux - 1))),
            Error::ShapeMismatch { arg: "aux", .. }
        ));
        assert!(matches!(
            bad(args(&d, true, None)),
            Error::InvalidArgument { arg: "aux", .. }
        ));
        let mut a = args(&d, true, Some(e.aux));
        a.beta = 0.5;
        assert!(matches!(bad(a), Error::InvalidArgument { arg: "c", .. }));
        let mut a = args(&d, true, Some(e.aux));
        a.bias = Some(bias_view(0x40004, [4, 5], [5, 1]));
        assert!(matches!(bad(a), Error::InvalidArgument { arg: "bias", .. }));
        // A shared bias is a broadcast view.
        let shared = d.clone().with_shared_bias();
        assert!(shared.check_args(1, &args(&shared, true, Some(e.aux))).is_ok());
        // Neither bias nor aux for an epilogue without them.
        let plain = desc(EpilogueKind::Identity, 4);
        let pe = plain.extents();
        assert!(plain.check_args(1, &args(&plain, false, None)).is_ok());
        assert!(matches!(
            plain.check_args(1, &args(&plain, true, None)),
            Err(Error::InvalidArgument { arg: "bias", .. })
        ));
        assert!(matches!(
            plain.check_args(1, &args(&plain, false, Some(pe.aux))),
            Err(Error::InvalidArgument { arg: "aux", .. })
        ));
    }

    #[test]
    fn aliasing() {
        let d = desc(EpilogueKind::BiasGeluTanh, 4);
        let e = d.extents();
        // C as D itself: the same layout, so D's address.
        let mut a = args(&d, true, Some(e.aux));
        (a.c, a.beta) = (GemmC::Output, 1.0);
        assert_eq!(d.check_args(1, &a).unwrap().mat.c.addr(), 0x30000);
        // ... and not when stride_c differs from stride_d.
        let mut other = d.clone();
        other.stride_c += 4;
        let mut a = args(&other, true, Some(e.aux));
        (a.c, a.beta) = (GemmC::Output, 1.0);
        let err = other.check_args(1, &a).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { arg: "c", .. }));
        // D over A, the bias over D, aux over D: refused.
        let mut a = args(&d, true, Some(e.aux));
        a.a = fake(0x30000 + 16, e.a);
        let err = d.check_args(1, &a).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { arg: "d", .. }));
        let mut a = args(&d, true, Some(e.aux));
        a.bias = Some(bias_view(0x30000, [4, 5], [5, 1]));
        let err = d.check_args(1, &a).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { arg: "d", .. }));
        let mut a = args(&d, true, Some(e.aux));
        a.aux = Some(fake_mut(0x30000 + 64, e.aux));
        let err = d.check_args(1, &a).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { arg: "aux", .. }));
    }

    #[test]
    fn slice_checks() {
        assert!(matches!(
            check_batch("a", &fake(0x100, 10), 11, 1),
            Err(Error::ShapeMismatch { arg: "a", .. })
        ));
        assert!(matches!(
            check_batch("a", &fake(0x100, 10), 10, 2),
            Err(Error::ContextMismatch { .. })
        ));
        assert!(matches!(
            check_batch("a", &fake(0x104, 10), 10, 1),
            Err(Error::InvalidArgument { .. })
        ));
        // Longer is fine for a batch (a bias must match exactly).
        let p = check_batch("a", &fake(0x100, 12), 10, 1).unwrap();
        assert_eq!(p.addr(), 0x100);
    }
}
