//! General matrix multiply through cuBLASLt:
//! `D = act(alpha * op(A) op(B) + beta * C + bias)`.
//!
//! `op(A)` is `m x k`, `op(B)` is `k x n`, `C` and `D` are `m x n`; each is
//! stored row- or column-major as the [`LayoutSku`] says, with explicit
//! leading dimensions. The bias (length `n`) is added to every row of `D`.

use std::marker::PhantomData;

use baracuda_driver::{LtCompute, LtEpilogue, LtPointers, LtScalar, Stream};
use baracuda_kernels_types::{
    Activation, BackendKind, DevPtr, DevPtrMut, Element, ElementKind, EpilogueKind, Error,
    KernelSku, LayoutSku, MathPrecision, MatrixMut, MatrixOrder, MatrixRef, PlanPreference, Result,
    TensorRef, Workspace,
};

use super::args::{check_bias, check_disjoint, GemmC, Region};
use super::epilogue::EpilogueKernels;
use super::matmul::{lt_sku, scalar, Batch, Prepared, Problem, Ptrs};
use crate::checks::{check_at_least, check_mat, mat_mut, mat_ref, optional_arg, AUX_WHY};
use crate::Plan;

const OP: &str = "gemm";

/// A GEMM problem: sizes, storage orders, leading dimensions, epilogue.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GemmDescriptor {
    /// Rows of `op(A)`, `C`, `D`.
    pub m: usize,
    /// Columns of `op(B)`, `C`, `D`.
    pub n: usize,
    /// Columns of `op(A)`, rows of `op(B)`.
    pub k: usize,
    /// Storage orders of `A`, `B`, `C`/`D`.
    pub layout: LayoutSku,
    /// Bias and activation applied before storing `D`.
    pub epilogue: EpilogueKind,
    /// Leading dimension of `A` in elements.
    pub lda: usize,
    /// Leading dimension of `B`.
    pub ldb: usize,
    /// Leading dimension of `C`.
    pub ldc: usize,
    /// Leading dimension of `D` (and of the aux output).
    pub ldd: usize,
    /// Also store the pre-activation `Z` (what the activation backward
    /// needs) in `GemmArgs::aux`. Needs an activation.
    pub save_aux: bool,
}

/// The leading dimension of a packed `rows x cols` matrix in `order`.
pub(crate) fn packed_ld(order: MatrixOrder, rows: usize, cols: usize) -> usize {
    match order {
        MatrixOrder::RowMajor => cols.max(1),
        MatrixOrder::ColMajor => rows.max(1),
    }
}

impl GemmDescriptor {
    /// A problem with packed operands and no epilogue.
    pub fn new(m: usize, n: usize, k: usize, layout: LayoutSku) -> Self {
        GemmDescriptor {
            m,
            n,
            k,
            layout,
            epilogue: EpilogueKind::Identity,
            lda: packed_ld(layout.a(), m, k),
            ldb: packed_ld(layout.b(), k, n),
            ldc: packed_ld(layout.c(), m, n),
            ldd: packed_ld(layout.c(), m, n),
            save_aux: false,
        }
    }
    epilogue_builders!();
    /// Set the leading dimensions.
    pub fn with_ld(mut self, lda: usize, ldb: usize, ldc: usize, ldd: usize) -> Self {
        (self.lda, self.ldb, self.ldc, self.ldd) = (lda, ldb, ldc, ldd);
        self
    }

    /// Check sizes and leading dimensions.
    pub(crate) fn validate(&self, op: &'static str) -> Result<()> {
        for (field, v) in [("m", self.m), ("n", self.n), ("k", self.k)] {
            if v == 0 {
                return Err(Error::InvalidDescriptor {
                    op,
                    field,
                    value: v.to_string(),
                    reason: "must be at least 1".into(),
                });
            }
            if v > i32::MAX as usize {
                return Err(Error::InvalidDescriptor {
                    op,
                    field,
                    value: v.to_string(),
                    reason: "cuBLASLt takes dimensions up to 2^31 - 1".into(),
                });
            }
        }
        let l = self.layout;
        for (field, ld, order, r, c) in [
            ("lda", self.lda, l.a(), self.m, self.k),
            ("ldb", self.ldb, l.b(), self.k, self.n),
            ("ldc", self.ldc, l.c(), self.m, self.n),
            ("ldd", self.ldd, l.c(), self.m, self.n),
        ] {
            let need = packed_ld(order, r, c);
            check_at_least(op, field, ld, need, || {
                format!("the contiguous extent {need} ({order:?} {r}x{c})")
            })?;
        }
        if self.save_aux && self.epilogue.activation() == Activation::Identity {
            return Err(Error::InvalidDescriptor {
                op,
                field: "save_aux",
                value: "true".into(),
                reason: format!(
                    "epilogue {} has no activation, so aux would equal D",
                    self.epilogue
                ),
            });
        }
        Ok(())
    }
}

/// Tensors of one GEMM run.
#[derive(Debug)]
pub struct GemmArgs<'a, T, O = T> {
    /// `A`, `m x k` in the plan's order and `lda`.
    pub a: MatrixRef<'a, T>,
    /// `B`, `k x n`.
    pub b: MatrixRef<'a, T>,
    /// `C`, `m x n` with `ldc`: its own tensor, `D` itself (in place), or
    /// none when `beta == 0`.
    pub c: GemmC<MatrixRef<'a, O>>,
    /// `D`, `m x n`, written.
    pub d: MatrixMut<'a, O>,
    /// Bias `[n]` (unit stride), when the epilogue has one.
    pub bias: Option<TensorRef<'a, O, 1>>,
    /// Pre-activation output, `m x n` with `D`'s order and `ldd`, when the
    /// descriptor has `save_aux`.
    pub aux: Option<MatrixMut<'a, O>>,
    /// Scale of the product (rounded to the scale type: f64 for f64 plans,
    /// f32 otherwise).
    pub alpha: f64,
    /// Scale of `C`.
    pub beta: f64,
}

/// The cuBLASLt arithmetic for inputs `t`, outputs `o`, or `Unsupported`.
pub(crate) fn compute_for(
    op: &'static str,
    t: ElementKind,
    o: ElementKind,
    pref: &PlanPreference,
) -> Result<(LtCompute, MathPrecision, ElementKind)> {
    use ElementKind as K;
    match (t, o) {
        (K::F32, K::F32) if pref.allow_tf32 => {
            Ok((LtCompute::F32FastTf32, MathPrecision::Tf32, K::F32))
        }
        (K::F32, K::F32) => Ok((LtCompute::F32, MathPrecision::F32, K::F32)),
        (K::F64, K::F64) => Ok((LtCompute::F64, MathPrecision::F64, K::F64)),
        (K::F16, K::F16 | K::F32) => Ok((LtCompute::F32, MathPrecision::F16, K::F32)),
        (K::Bf16, K::Bf16 | K::F32) => Ok((LtCompute::F32, MathPrecision::Bf16, K::F32)),
        _ => Err(Error::Unsupported {
            op,
            what: format!(
                "{t} inputs with {o} outputs (supported: f32->f32, f64->f64, f16->f16|f32, \
                 bf16->bf16|f32)"
            ),
        }),
    }
}

/// Reject preferences the GEMM family cannot honour.
pub(crate) fn check_pref(op: &'static str, pref: &PlanPreference) -> Result<()> {
    pref.check_backend(op, &[BackendKind::CublasLt])
}

/// The cuBLASLt problem of a descriptor.
pub(crate) fn problem(
    op: &'static str,
    desc: &GemmDescriptor,
    ab: (ElementKind, ElementKind),
    o: ElementKind,
    compute: LtCompute,
    epilogue: LtEpilogue,
) -> Problem {
    Problem {
        op,
        m: desc.m,
        n: desc.n,
        k: desc.k,
        layout: desc.layout,
        lda: desc.lda,
        ldb: desc.ldb,
        ldc: desc.ldc,
        ldd: desc.ldd,
        a_kind: ab.0,
        b_kind: ab.1,
        c_kind: o,
        d_kind: o,
        compute,
        float_scale: true,
        epilogue,
        bias_kind: if epilogue.uses_bias() { Some(o) } else { None },
        aux_ld: desc.ldd,
        batch: Batch::ONE,
        fp8_scales: false,
    }
}

/// The fused cuBLASLt epilogue for `desc` with output `o` over `batch`, or
/// `None` when the epilogue kernel must do the work (GELU-erf; a bias along
/// a column-major `D`; the pre-activation of ReLU, which cuBLASLt stores
/// only as a bit mask; GELU-tanh into f64, which cuBLASLt evaluates to
/// ~3e-10 relative error where the kernel's f64 `tanh` keeps f64 accuracy;
/// in a batch, bias or aux entries that do not start on 16 bytes, as the
/// first entry's pointer does, since cuBLASLt's alignment rules for
/// epilogue batch strides are undocumented).
fn fused_epilogue(desc: &GemmDescriptor, o: ElementKind, batch: &Batch) -> Option<LtEpilogue> {
    let row = desc.layout.c() == MatrixOrder::RowMajor;
    let bias = desc.epilogue.has_bias();
    if bias && !row {
        return None;
    }
    if o == ElementKind::F64 && desc.epilogue.activation() == Activation::GeluTanh {
        return None;
    }
    if batch.count > 1 {
        let aligned = |stride: usize| (stride * o.size_bytes()) % 16 == 0;
        // The aux stride also keeps the aux ld's multiple of 8 (below).
        let aux_ok = aligned(batch.aux) && batch.aux % 8 == 0;
        if (bias && !aligned(batch.bias)) || (desc.save_aux && !aux_ok) {
            return None;
        }
    }
    match (desc.epilogue.activation(), bias, desc.save_aux) {
        (Activation::Identity, false, _) => Some(LtEpilogue::Default),
        (Activation::Identity, true, _) => Some(LtEpilogue::Bias),
        (Activation::Relu, false, false) => Some(LtEpilogue::Relu),
        (Activation::Relu, true, false) => Some(LtEpilogue::ReluBias),
        (Activation::GeluTanh, false, false) => Some(LtEpilogue::Gelu),
        (Activation::GeluTanh, true, false) => Some(LtEpilogue::GeluBias),
        // cuBLASLt wants the aux leading dimension a multiple of 8.
        (Activation::GeluTanh, false, true) if row && desc.ldd % 8 == 0 => {
            Some(LtEpilogue::GeluAux)
        }
        (Activation::GeluTanh, true, true) if row && desc.ldd % 8 == 0 => {
            Some(LtEpilogue::GeluAuxBias)
        }
        _ => None,
    }
}

/// `D = act(alpha * op(A) op(B) + beta * C + bias)` through cuBLASLt:
/// `Z[i, j] = alpha sum_l A[i, l] B[l, j] + beta C[i, j] + bias[j]`,
/// `D = act(Z)` with `act` the epilogue's activation, and `aux = Z` when
/// the descriptor has `save_aux` (what an activation's backward reads).
/// No backward: a GEMM's gradients are GEMMs of their own
/// ([`super::LinearPlan`] runs a layer's).
///
/// # Shapes
/// `A`: `m x k`, `B`: `k x n`, `C`, `D`, `aux`: `m x n`, bias: `n`; orders
/// from the [`LayoutSku`], leading dimensions from the descriptor.
/// # Layout
/// Each matrix a [`MatrixRef`] / [`MatrixMut`] whose order is the
/// layout's and whose leading dimension is the descriptor's (`lda`,
/// `ldb`, `ldc`, `ldd`; aux shares `ldd`), 16-byte aligned; the bias a
/// unit-stride `[n]` view, 16-byte aligned. The workspace is
/// `workspace_size()` bytes (the algorithm's).
/// # Dtypes
/// `T -> O`, exactly: f32 -> f32 (IEEE; TF32 only with `allow_tf32`),
/// f64 -> f64 (f64 accumulation), f16 -> f16, f16 -> f32, bf16 -> bf16,
/// bf16 -> f32 (f32 accumulation); bias, `C` and aux are `O`. Every pair in
/// every layout and epilogue. Others: `Unsupported`.
/// # Epilogues
/// Bias, ReLU and GELU-tanh fuse into cuBLASLt when `D` is row-major
/// (GELU-tanh into f64 excepted: the kernel keeps f64 accuracy);
/// GELU-erf, a bias on a column-major `D`, and ReLU's aux run in one extra
/// elementwise pass over `D` (the SKU says which).
/// # Errors
/// From `select`: `InvalidDescriptor` (an `m`, `n` or `k` of 0 or past
/// 2^31 - 1, a leading dimension below the packed one, `save_aux` without
/// an activation); `Unsupported` for a `T -> O` pair not listed above, or
/// when cuBLASLt offers no algorithm for the problem (within
/// `max_workspace_bytes`, and deterministic when `pref` asks);
/// `PreferenceRejected` when `pref` forces a backend other than
/// `CublasLt` or caps the workspace below the algorithm's;
/// `LibraryNotFound` or `Cublas` from loading and querying cuBLASLt, and
/// the kernel JIT's errors for the epilogue kernel. From `run`:
/// `ShapeMismatch` for a matrix or bias of other extents;
/// `InvalidArgument` for a matrix in another order or with another
/// leading dimension than the plan's, an operand not 16-byte aligned, a
/// bias of stride other than 1, `beta != 0` without `c`, [`GemmC::Output`]
/// with `ldc != ldd`, a bias or aux given against the descriptor or
/// missing, and an overlap the aliasing rules refuse; `ContextMismatch`
/// for an operand or workspace on another context; `WorkspaceTooSmall`.
/// # Aliasing
/// `D` may be `C`: [`GemmC::Output`] (or a `C` view of exactly `D`'s
/// elements) accumulates in place, `D = act(alpha op(A) op(B) + beta D +
/// bias)`, when `ldc == ldd`. `D` and aux overlap nothing else (`A`, `B`,
/// `C`, the bias, each other): `InvalidArgument` naming the output.
pub struct GemmPlan<T: Element, O: Element = T> {
    desc: GemmDescriptor,
    /// [`Batch::ONE`], or the strided batch of a `BatchedGemmPlan`.
    batch: Batch,
    compute: LtCompute,
    prepared: Prepared,
    post: Option<EpilogueKernels>,
    sku: KernelSku,
    _t: PhantomData<fn() -> (T, O)>,
}

impl<T: Element, O: Element> GemmPlan<T, O> {
    /// The descriptor the plan was selected for.
    pub fn descriptor(&self) -> &GemmDescriptor {
        &self.desc
    }

    /// Whether the epilogue runs in the epilogue kernel after the matmul.
    pub(crate) fn has_post(&self) -> bool {
        self.post.is_some()
    }

    /// The cuBLASLt compute type of the matmul.
    pub(crate) fn compute(&self) -> LtCompute {
        self.compute
    }

    pub(crate) fn select_as(
        op: &'static str,
        stream: &Stream,
        desc: &GemmDescriptor,
        pref: &PlanPreference,
    ) -> Result<Self> {
        Self::select_batched(op, stream, desc, &Batch::ONE, pref)
    }

    /// Select for every entry of `batch` (whose strides the caller checked
    /// against `desc`).
    pub(crate) fn select_batched(
        op: &'static str,
        stream: &Stream,
        desc: &GemmDescriptor,
        batch: &Batch,
        pref: &PlanPreference,
    ) -> Result<Self> {
        desc.validate(op)?;
        check_pref(op, pref)?;
        let (compute, math, acc) = compute_for(op, T::KIND, O::KIND, pref)?;
        let ab = (T::KIND, T::KIND);
        let batched = |e| Problem {
            batch: *batch,
            ..problem(op, desc, ab, O::KIND, compute, e)
        };
        let mut chosen = None;
        if let Some(e) = fused_epilogue(desc, O::KIND, batch) {
            if let Some(p) = Prepared::new(stream, &batched(e), pref)? {
                chosen = Some((p, None));
            }
        }
        if chosen.is_none() {
            let p = Prepared::new(stream, &batched(LtEpilogue::Default), pref)?
                .ok_or_else(|| no_algo(op, desc, T::KIND, O::KIND))?;
            chosen = Some((p, Some(EpilogueKernels::load(stream, O::KIND)?)));
        }
        let Some((prepared, post)) = chosen else {
            return Err(no_algo(op, desc, T::KIND, O::KIND));
        };
        pref.check_workspace(op, prepared.algo.workspace_bytes)?;
        let deterministic = prepared.algo.is_deterministic();
        let sku = lt_sku(
            op,
            stream,
            T::KIND,
            format!(
                "{}{} {} {}->{} | {}{}",
                desc.layout,
                if batch.count > 1 {
                    format!(" x{}", batch.count)
                } else {
                    String::new()
                },
                desc.epilogue,
                T::KIND,
                O::KIND,
                prepared.describe(),
                if post.is_some() {
                    " + epilogue kernel"
                } else {
                    ""
                }
            ),
            (math, acc, deterministic),
        );
        Ok(GemmPlan {
            desc: desc.clone(),
            batch: *batch,
            compute,
            prepared,
            post,
            sku,
            _t: PhantomData,
        })
    }

    pub(crate) fn run_as(
        &self,
        op: &'static str,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: GemmArgs<'_, T, O>,
    ) -> Result<()> {
        let (ptrs, alpha, beta) = self.checked(op, stream, workspace, &args)?;
        // SAFETY: `checked` proved A, B, C, D (and aux) hold the extents
        // their layouts reach on this context and are 16-byte aligned, the
        // bias n elements, and the workspace the algorithm's bytes. The
        // borrows in `args` keep them alive and D exclusive while the work
        // is enqueued.
        unsafe { self.enqueue_checked(stream, alpha, beta, ptrs) }
    }

    /// Check `args` against the plan (as [`GemmPlan::run`] does) and
    /// return their addresses and the scalars in the compute type.
    pub(crate) fn checked(
        &self,
        op: &'static str,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: &GemmArgs<'_, T, O>,
    ) -> Result<(Ptrs, LtScalar, LtScalar)> {
        let ctx = stream.context().id();
        let d = &self.desc;
        let l = d.layout;
        let (a, b, dp) = check_operands(op, d, (&args.a, &args.b, &args.d), ctx)?;
        let out = Region::matrix_mut(&args.d);
        let mut inputs = vec![("a", Region::matrix(&args.a)), ("b", Region::matrix(&args.b))];
        let c = args
            .c
            .resolve(op, args.beta, (dp.cast(), d.ldc == d.ldd), |c| {
                check_mat(op, "c", mat_ref(c), (d.m, d.n, l.c(), d.ldc), ctx)?;
                let rc = Region::matrix(c);
                if rc != out {
                    check_disjoint(op, ("d", out), &[("c", rc)])?;
                    inputs.push(("c", rc));
                }
                Ok(c.data().ptr().cast())
            })?;
        let has_bias = d.epilogue.has_bias();
        let bias = check_bias(op, "bias", has_bias, args.bias.as_ref(), d.n, ctx)?;
        if let Some(b) = &args.bias {
            inputs.push(("bias", Region::vector(b)));
            check_disjoint(op, ("d", out), &inputs[inputs.len() - 1..])?;
        }
        let aux = optional_arg(op, "aux", args.aux.as_ref(), d.save_aux, AUX_WHY, |z| {
            check_mat(op, "aux", mat_mut(z), (d.m, d.n, l.c(), d.ldd), ctx)?;
            inputs.push(("d", out));
            check_disjoint(op, ("aux", Region::matrix_mut(z)), &inputs)?;
            Ok(z.data().addr())
        })?;
        let ws_bytes = self.prepared.algo.workspace_bytes;
        let ws = workspace.check_ptr(op, ws_bytes, ctx)?;
        let ptrs = Ptrs {
            mat: LtPointers {
                a: a.cast(),
                b: b.cast(),
                c,
                d: dp.cast(),
                workspace: ws,
                workspace_bytes: ws_bytes,
            },
            bias: bias.cast(),
            aux: DevPtrMut::from_addr(aux),
            ..Ptrs::default()
        };
        let alpha = scalar(self.compute, true, args.alpha);
        let beta = scalar(self.compute, true, args.beta);
        Ok((ptrs, alpha, beta))
    }

    /// Enqueue the matmul (and the epilogue kernel, if any) on addresses
    /// from [`GemmPlan::checked`].
    ///
    /// # Safety
    /// `ptrs` must come from `checked` of this plan (or cover the same
    /// extents, aligned alike), and stay valid until the work completes.
    pub(crate) unsafe fn enqueue_checked(
        &self,
        stream: &Stream,
        alpha: LtScalar,
        beta: LtScalar,
        ptrs: Ptrs,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.prepared.enqueue(stream, alpha, beta, ptrs) }?;
        if let Some(k) = &self.post {
            // SAFETY: forwarded from the caller.
            unsafe { self.launch_post(stream, k, ptrs) }?;
        }
        Ok(())
    }

    /// The epilogue kernel's pass over `D` (and aux).
    ///
    /// # Safety
    /// As [`GemmPlan::enqueue_checked`]: `p` covers every entry's `D` and
    /// aux (`m x n` at `ldd` in `D`'s order) and bias (`n`, or 0 = none).
    unsafe fn launch_post(&self, stream: &Stream, k: &EpilogueKernels, p: Ptrs) -> Result<()> {
        let d = &self.desc;
        let shape = (d.m, d.n, d.ldd, d.layout.c());
        // SAFETY: forwarded from the caller.
        unsafe {
            k.bias_act(
                stream,
                shape,
                &self.batch,
                (p.mat.d, p.bias, p.aux),
                d.epilogue.activation(),
            )
        }
    }
}

fn no_algo(op: &'static str, d: &GemmDescriptor, t: ElementKind, o: ElementKind) -> Error {
    Error::Unsupported {
        op,
        what: format!(
            "cuBLASLt has no algorithm for {t}->{o} {}x{}x{} layout {} (lda {}, ldb {}, ldd {})",
            d.m, d.n, d.k, d.layout, d.lda, d.ldb, d.ldd
        ),
    }
}

impl<T: Element, O: Element> Plan for GemmPlan<T, O> {
    type Descriptor = GemmDescriptor;
    type Args<'a> = GemmArgs<'a, T, O>;

    fn select(stream: &Stream, desc: &GemmDescriptor, pref: &PlanPreference) -> Result<Self> {
        Self::select_as(OP, stream, desc, pref)
    }
    fn sku(&self) -> &KernelSku {
        &self.sku
    }
    fn workspace_size(&self) -> usize {
        self.prepared.algo.workspace_bytes
    }
    fn run(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: GemmArgs<'_, T, O>,
    ) -> Result<()> {
        self.run_as(OP, stream, workspace, args)
    }
}

/// Check `A`, `B` and `D` against `g` (shapes, orders, leading dimensions,
/// context, alignment) and `D` against `A` and `B` (no overlap). Their
/// addresses.
pub(crate) fn check_operands<A: Element, B: Element, O: Element>(
    op: &'static str,
    g: &GemmDescriptor,
    (a, b, d): (&MatrixRef<'_, A>, &MatrixRef<'_, B>, &MatrixMut<'_, O>),
    ctx: usize,
) -> Result<(DevPtr<A>, DevPtr<B>, DevPtrMut<O>)> {
    let l = g.layout;
    check_mat(op, "a", mat_ref(a), (g.m, g.k, l.a(), g.lda), ctx)?;
    check_mat(op, "b", mat_ref(b), (g.k, g.n, l.b(), g.ldb), ctx)?;
    check_mat(op, "d", mat_mut(d), (g.m, g.n, l.c(), g.ldd), ctx)?;
    let inputs = [("a", Region::matrix(a)), ("b", Region::matrix(b))];
    check_disjoint(op, ("d", Region::matrix_mut(d)), &inputs)?;
    Ok((a.data().ptr(), b.data().ptr(), d.data().ptr()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use baracuda_kernels_types::{Autotune, DeviceSlice};

    fn desc() -> GemmDescriptor {
        GemmDescriptor::new(64, 48, 32, LayoutSku::Rcr)
    }

    #[test]
    fn packed_leading_dimensions() {
        let d = GemmDescriptor::new(5, 7, 3, LayoutSku::Rrr);
        assert_eq!((d.lda, d.ldb, d.ldc, d.ldd), (3, 7, 7, 7));
        let d = GemmDescriptor::new(5, 7, 3, LayoutSku::Ccc);
        assert_eq!((d.lda, d.ldb, d.ldc, d.ldd), (5, 3, 5, 5));
        let d = GemmDescriptor::new(5, 7, 3, LayoutSku::Rcr);
        assert_eq!((d.lda, d.ldb, d.ldd), (3, 3, 7));
        for l in LayoutSku::ALL {
            assert!(GemmDescriptor::new(1, 1, 1, l).validate(OP).is_ok());
        }
    }

    #[test]
    fn zero_sizes_are_rejected() {
        for (m, n, k, f) in [(0, 4, 4, "m"), (4, 0, 4, "n"), (4, 4, 0, "k")] {
            let e = GemmDescriptor::new(m, n, k, LayoutSku::Rrr)
                .validate(OP)
                .unwrap_err();
            assert!(
                matches!(e, Error::InvalidDescriptor { field, .. } if field == f),
                "{e}"
            );
        }
    }

    #[test]
    fn short_leading_dimensions_are_rejected() {
        let base = desc();
        for (d, f) in [
            (base.clone().with_ld(31, 32, 48, 48), "lda"),
            (base.clone().with_ld(32, 31, 48, 48), "ldb"),
            (base.clone().with_ld(32, 32, 47, 48), "ldc"),
            (base.clone().with_ld(32, 32, 48, 47), "ldd"),
        ] {
            let e = d.validate(OP).unwrap_err();
            assert!(
                matches!(e, Error::InvalidDescriptor { field, .. } if field == f),
                "{e}"
            );
        }
        assert!(base.with_ld(40, 40, 64, 56).validate(OP).is_ok());
    }

    #[test]
    fn aux_needs_an_activation() {
        let e = desc()
            .with_epilogue(EpilogueKind::Bias)
            .with_aux(true)
            .validate(OP)
            .unwrap_err();
        assert!(matches!(
            e,
            Error::InvalidDescriptor {
                field: "save_aux",
                ..
            }
        ));
        assert!(desc()
            .with_epilogue(EpilogueKind::BiasRelu)
            .with_aux(true)
            .validate(OP)
            .is_ok());
    }

    #[test]
    fn dtype_pairs() {
        use ElementKind as K;
        let p = PlanPreference::default();
        assert_eq!(
            compute_for(OP, K::F32, K::F32, &p).unwrap().0,
            LtCompute::F32
        );
        let tf = p.with_allow_tf32(true);
        assert_eq!(
            compute_for(OP, K::F32, K::F32, &tf).unwrap().0,
            LtCompute::F32FastTf32
        );
        assert_eq!(
            compute_for(OP, K::Bf16, K::F32, &p).unwrap().1,
            MathPrecision::Bf16
        );
        assert_eq!(
            compute_for(OP, K::F64, K::F64, &p).unwrap().0,
            LtCompute::F64
        );
        for (t, o) in [
            (K::F32, K::F16),
            (K::F16, K::Bf16),
            (K::I8, K::I32),
            (K::F64, K::F32),
            (K::I32, K::I32),
        ] {
            assert!(
                matches!(compute_for(OP, t, o, &p), Err(Error::Unsupported { .. })),
                "{t}->{o}"
            );
        }
    }

    #[test]
    fn backend_preference() {
        let p = PlanPreference::default().with_backend(BackendKind::Cudnn);
        assert!(matches!(
            check_pref(OP, &p),
            Err(Error::PreferenceRejected {
                field: "backend",
                ..
            })
        ));
        let p = PlanPreference::default()
            .with_backend(BackendKind::CublasLt)
            .with_autotune(Autotune::Measured);
        assert!(check_pref(OP, &p).is_ok());
    }

    #[test]
    fn fused_epilogue_choice() {
        let row = GemmDescriptor::new(8, 8, 8, LayoutSku::Rcr);
        let col = GemmDescriptor::new(8, 8, 8, LayoutSku::Rcc);
        let f = |d: &GemmDescriptor, e| {
            fused_epilogue(&d.clone().with_epilogue(e), ElementKind::Bf16, &Batch::ONE)
        };
        assert_eq!(
            f(&row, EpilogueKind::BiasGeluTanh),
            Some(LtEpilogue::GeluBias)
        );
        assert_eq!(f(&row, EpilogueKind::BiasRelu), Some(LtEpilogue::ReluBias));
        assert_eq!(f(&row, EpilogueKind::GeluErf), None);
        assert_eq!(f(&col, EpilogueKind::Bias), None);
        assert_eq!(f(&col, EpilogueKind::Relu), Some(LtEpilogue::Relu));
        let aux = row
            .clone()
            .with_epilogue(EpilogueKind::BiasGeluTanh)
            .with_aux(true);
        assert_eq!(
            fused_epilogue(&aux, ElementKind::Bf16, &Batch::ONE),
            Some(LtEpilogue::GeluAuxBias)
        );
        assert_eq!(fused_epilogue(&aux, ElementKind::F64, &Batch::ONE), None);
        let aux = row.with_epilogue(EpilogueKind::Relu).with_aux(true);
        assert_eq!(fused_epilogue(&aux, ElementKind::Bf16, &Batch::ONE), None);
    }

    #[test]
    fn fused_epilogue_in_a_batch() {
        let d = GemmDescriptor::new(8, 8, 8, LayoutSku::Rcr)
            .with_epilogue(EpilogueKind::BiasGeluTanh)
            .with_aux(true);
        let batch = |bias, aux| Batch {
            count: 3,
            bias,
            aux,
            ..Batch::ONE
        };
        let f = |b: Batch, o| fused_epilogue(&d, o, &b);
        use ElementKind::{Bf16, F32};
        // Shared bias (stride 0) and entries 16 bytes apart fuse.
        assert_eq!(f(batch(0, 64), Bf16), Some(LtEpilogue::GeluAuxBias));
        assert_eq!(f(batch(8, 64), Bf16), Some(LtEpilogue::GeluAuxBias));
        assert_eq!(f(batch(4, 64), F32), Some(LtEpilogue::GeluAuxBias));
        // A bias entry off 16 bytes, or aux entries not a multiple of 8
        // elements, fall back to the kernel.
        assert_eq!(f(batch(9, 64), Bf16), None);
        assert_eq!(f(batch(0, 68), Bf16), None);
        assert_eq!(f(batch(0, 68), F32), None);
        // A single entry ignores the strides.
        let one = Batch {
            bias: 9,
            aux: 3,
            ..Batch::ONE
        };
        assert_eq!(f(one, Bf16), Some(LtEpilogue::GeluAuxBias));
    }

    #[test]
    fn argument_checks() {
        // SAFETY: host-only inspection of a fake address.
        let s = unsafe { DeviceSlice::<f32>::from_raw_parts(0x1000, 64, 7) };
        let good = MatrixRef::new(s, 4, 8, 8, MatrixOrder::RowMajor).unwrap();
        let want = (4, 8, MatrixOrder::RowMajor, 8);
        assert!(check_mat(OP, "a", mat_ref(&good), want, 7).is_ok());
        assert!(matches!(
            check_mat(OP, "a", mat_ref(&good), want, 8),
            Err(Error::ContextMismatch { .. })
        ));
        assert!(matches!(
            check_mat(OP, "a", mat_ref(&good), (8, 4, MatrixOrder::RowMajor, 8), 7),
            Err(Error::ShapeMismatch { arg: "a", .. })
        ));
        assert!(matches!(
            check_mat(OP, "a", mat_ref(&good), (4, 8, MatrixOrder::ColMajor, 8), 7),
            Err(Error::InvalidArgument { arg: "a", .. })
        ));
        assert!(matches!(
            check_mat(
                OP,
                "a",
                mat_ref(&good),
                (4, 8, MatrixOrder::RowMajor, 16),
                7
            ),
            Err(Error::InvalidArgument { arg: "a", .. })
        ));
        let off = s.slice(1..64).unwrap();
        let mis = MatrixRef::new(off, 4, 8, 8, MatrixOrder::RowMajor).unwrap();
        assert!(matches!(
            check_mat(OP, "a", mat_ref(&mis), want, 7),
            Err(Error::InvalidArgument { .. })
        ));
    }
}
