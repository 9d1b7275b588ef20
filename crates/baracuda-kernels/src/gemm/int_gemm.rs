//! Integer GEMM: `D = scale * (A B)` with s8 operands and exact s32
//! accumulation; output s32 (`scale` must be 1) or f32 / bf16 (the s32
//! result, kept in the workspace, scaled by one elementwise pass).

use std::marker::PhantomData;

use baracuda_driver::{LtCompute, LtEpilogue, LtScalar, Stream};
use baracuda_kernels_types::{
    DevPtrMut, Element, ElementKind, EpilogueKind, Error, KernelSku, LayoutSku, MathPrecision,
    MatrixMut, MatrixOrder, MatrixRef, PlanPreference, Result, Workspace,
};

use super::batched::span;
use super::epilogue::{kernel_args, EpilogueKernels};
use super::gemm::{check_operands, check_pref, problem, GemmDescriptor};
use super::matmul::{lt_sku, Prepared, Problem, Ptrs};
use crate::Plan;

const OP: &str = "int_gemm";

/// An s8 x s8 GEMM. `gemm.epilogue` must be `Identity`; `gemm.layout` must
/// be `Rcr` or `Rcc` (row-major `A`, column-major `B`: cuBLASLt's int8
/// tensor-core kernels read both operands K-contiguous).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IntGemmDescriptor {
    /// Sizes, layout, leading dimensions.
    pub gemm: GemmDescriptor,
}

/// Tensors of one integer GEMM.
#[derive(Debug)]
pub struct IntGemmArgs<'a, O> {
    /// `A`, `m x k` s8.
    pub a: MatrixRef<'a, i8>,
    /// `B`, `k x n` s8.
    pub b: MatrixRef<'a, i8>,
    /// `D`, `m x n`, written.
    pub d: MatrixMut<'a, O>,
    /// Per-tensor scale of the result (must be 1 for s32 output).
    pub scale: f32,
}

/// Checks shared by the int8 and fp8 plans.
pub(crate) fn check_tn(op: &'static str, g: &GemmDescriptor) -> Result<()> {
    g.validate(op)?;
    if g.epilogue != EpilogueKind::Identity || g.save_aux {
        return Err(Error::Unsupported {
            op,
            what: format!("epilogue {} (only identity)", g.epilogue),
        });
    }
    if !matches!(g.layout, LayoutSku::Rcr | LayoutSku::Rcc) {
        return Err(Error::Unsupported {
            op,
            what: format!(
                "layout {} (cuBLASLt's int8/fp8 kernels need A row-major and B column-major: rcr or rcc)",
                g.layout
            ),
        });
    }
    for (field, ld) in [("lda", g.lda), ("ldb", g.ldb)] {
        if ld % 16 != 0 {
            return Err(Error::InvalidDescriptor {
                op,
                field,
                value: ld.to_string(),
                reason: "must be a multiple of 16 for 8-bit operands".into(),
            });
        }
    }
    Ok(())
}

/// The matmul of an int8 or fp8 plan (operands `ab`, output `o`, no `C`,
/// identity epilogue) after [`check_tn`] and the preference check;
/// `Unsupported` saying `what` when cuBLASLt has no algorithm for it.
pub(crate) fn prepare_tn(
    op: &'static str,
    stream: &Stream,
    g: &GemmDescriptor,
    (ab, o, compute): ((ElementKind, ElementKind), ElementKind, LtCompute),
    adjust: impl FnOnce(&mut Problem),
    pref: &PlanPreference,
    what: impl FnOnce() -> String,
) -> Result<Prepared> {
    check_tn(op, g)?;
    check_pref(op, pref)?;
    let mut p = problem(op, g, ab, o, compute, LtEpilogue::Default);
    adjust(&mut p);
    Prepared::new(stream, &p, pref)?.ok_or_else(|| Error::Unsupported { op, what: what() })
}

/// s8 x s8 -> s32 / f32 / bf16 GEMM through cuBLASLt:
/// `D[i, j] = scale * sum_l A[i, l] B[l, j]`, the sum exact in s32. With
/// an f32 or bf16 output the s32 result is kept in the workspace and one
/// elementwise pass writes `scale * acc` rounded once to `O`. No bias,
/// activation or `C`, and no backward.
///
/// # Shapes
/// `A`: `m x k`, `B`: `k x n`, `D`: `m x n`.
/// # Layout
/// Layout `Rcr` or `Rcc` (row-major `A`, column-major `B`, `D` in either
/// order), the descriptor's leading dimensions with `lda` and `ldb`
/// multiples of 16; every matrix 16-byte aligned. The workspace is
/// `workspace_size()` bytes: the algorithm's, plus the s32 result for f32
/// and bf16 outputs.
/// # Dtypes
/// Operands s8, s32 accumulation; output `O` = i32 (exact, `scale` 1),
/// f32 or bf16 (scaled, one rounding). Other outputs: `Unsupported`.
/// # Errors
/// From `select`: `Unsupported` (a layout other than `Rcr`/`Rcc`, an
/// epilogue or `save_aux`, an output dtype other than i32, f32, bf16, or
/// no cuBLASLt int8 algorithm), `InvalidDescriptor`
/// ([`super::GemmPlan`]'s descriptor checks, `lda` or `ldb` not a
/// multiple of 16), `PreferenceRejected` and the library errors as
/// [`super::GemmPlan`]. From `run`: as [`super::GemmPlan`] for `A`, `B`,
/// `D` and the workspace, and `InvalidArgument` for `scale != 1` with s32
/// output.
/// # Aliasing
/// `D` overlaps neither `A` nor `B` (`InvalidArgument` naming `d`).
pub struct IntGemmPlan<O: Element> {
    desc: IntGemmDescriptor,
    prepared: Prepared,
    post: Option<EpilogueKernels>,
    acc_offset: usize,
    workspace_bytes: usize,
    sku: KernelSku,
    _o: PhantomData<fn() -> O>,
}

impl<O: Element> Plan for IntGemmPlan<O> {
    type Descriptor = IntGemmDescriptor;
    type Args<'a> = IntGemmArgs<'a, O>;

    fn select(stream: &Stream, desc: &IntGemmDescriptor, pref: &PlanPreference) -> Result<Self> {
        let g = &desc.gemm;
        if !matches!(
            O::KIND,
            ElementKind::I32 | ElementKind::F32 | ElementKind::Bf16
        ) {
            return Err(Error::Unsupported {
                op: OP,
                what: format!("{} output (i32, f32, bf16)", O::KIND),
            });
        }
        let int = ((ElementKind::I8, ElementKind::I8), ElementKind::I32, LtCompute::I32);
        let prepared = prepare_tn(
            OP,
            stream,
            g,
            int,
            |p| p.float_scale = false,
            pref,
            || format!("cuBLASLt has no int8 algorithm for {g:?}"),
        )?;
        let lt_ws = prepared.algo.workspace_bytes;
        let (post, acc_offset, workspace_bytes) = if O::KIND == ElementKind::I32 {
            (None, 0, lt_ws)
        } else {
            let off = lt_ws.div_ceil(256) * 256;
            (
                Some(EpilogueKernels::load(stream, O::KIND)?),
                off,
                off + span(g.layout.c(), g.m, g.n, g.ldd) * 4,
            )
        };
        pref.check_workspace(OP, workspace_bytes)?;
        let sku = lt_sku(
            OP,
            stream,
            ElementKind::I8,
            format!(
                "{} s8->{} | {}{}",
                g.layout,
                O::KIND,
                prepared.describe(),
                if post.is_some() {
                    " + scale kernel"
                } else {
                    ""
                }
            ),
            (MathPrecision::Integer, ElementKind::I32, true),
        );
        Ok(IntGemmPlan {
            desc: desc.clone(),
            prepared,
            post,
            acc_offset,
            workspace_bytes,
            sku,
            _o: PhantomData,
        })
    }
    fn sku(&self) -> &KernelSku {
        &self.sku
    }
    fn workspace_size(&self) -> usize {
        self.workspace_bytes
    }
    fn run(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: IntGemmArgs<'_, O>,
    ) -> Result<()> {
        let g = &self.desc.gemm;
        let ctx = stream.context().id();
        let (a, b, d) = check_operands(OP, g, (&args.a, &args.b, &args.d), ctx)?;
        if self.post.is_none() && args.scale != 1.0 {
            return Err(Error::InvalidArgument {
                op: OP,
                arg: "scale",
                reason: format!(
                    "{} with s32 output; scale an f32 output instead",
                    args.scale
                ),
            });
        }
        let ws = workspace.check_ptr(OP, self.workspace_bytes, ctx)?;
        let out: DevPtrMut<i32> = if self.post.is_some() {
            ws.byte_add(self.acc_offset).cast()
        } else {
            d.cast()
        };
        let ptrs = Ptrs::matmul(a.cast(), b.cast(), out.cast())
            .with_workspace(ws, self.prepared.algo.workspace_bytes);
        // SAFETY: A, B, D checked above; the s32 accumulator lies in the
        // workspace at acc_offset, sized in select for D's span.
        unsafe {
            self.prepared
                .enqueue(stream, LtScalar::I32(1), LtScalar::I32(0), ptrs)
        }?;
        if let Some(k) = &self.post {
            let row = i32::from(g.layout.c() == MatrixOrder::RowMajor);
            let ld = g.ldd as i64;
            let mut a = kernel_args(|a| {
                a.push(out.as_const())?
                    .push(ld)?
                    .push(d)?
                    .push(ld)?
                    .push(row)?;
                a.push(g.m as i64)?.push(g.n as i64)?.push(args.scale)?;
                Ok(())
            })?;
            // SAFETY: the accumulator and D both hold m x n at ldd in D's order.
            unsafe { k.scale_i32.launch(stream, k.cfg(g.m * g.n), &mut a) }?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tn_layouts_only() {
        for l in LayoutSku::ALL {
            let r = check_tn(OP, &GemmDescriptor::new(32, 32, 32, l));
            if matches!(l, LayoutSku::Rcr | LayoutSku::Rcc) {
                assert!(r.is_ok(), "{l}");
            } else {
                assert!(matches!(r, Err(Error::Unsupported { .. })), "{l}");
            }
        }
        let e = check_tn(OP, &GemmDescriptor::new(32, 32, 24, LayoutSku::Rcr)).unwrap_err();
        assert!(matches!(e, Error::InvalidDescriptor { field: "lda", .. }));
        let e = check_tn(
            OP,
            &GemmDescriptor::new(32, 32, 32, LayoutSku::Rcr).with_epilogue(EpilogueKind::Relu),
        )
        .unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }));
    }
}
