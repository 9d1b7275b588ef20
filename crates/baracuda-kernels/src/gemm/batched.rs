//! Strided batched GEMM: `D[i] = alpha * op(A[i]) op(B[i]) + beta * C[i]`
//! for `i < batch`, where matrix `i` of an operand starts `i * stride`
//! elements after the first. A stride of 0 broadcasts one matrix to every
//! batch entry (for `A`, `B` or `C`; never `D`).

use std::marker::PhantomData;

use baracuda_driver::{LtCompute, LtEpilogue, Stream};
use baracuda_kernels_types::{
    BackendKind, DeviceSlice, DeviceSliceMut, Element, EpilogueKind, Error, KernelSku, MatrixOrder,
    PlanPreference, PrecisionGuarantee, Result, Shape, Workspace,
};

use super::gemm::{check_pref, compute_for, problem, GemmDescriptor};
use super::matmul::{check_aligned, scalar, Prepared, Ptrs};
use crate::Plan;

const OP: &str = "batched_gemm";

/// A strided batch of equal-shaped GEMMs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BatchedGemmDescriptor {
    /// Shape, layout and leading dimensions of one entry. The epilogue must
    /// be `Identity`.
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
}

/// Elements one stored `rows x cols` matrix reaches.
pub(crate) fn span(order: MatrixOrder, rows: usize, cols: usize, ld: usize) -> usize {
    let (outer, inner) = match order {
        MatrixOrder::RowMajor => (rows, cols),
        MatrixOrder::ColMajor => (cols, rows),
    };
    (outer - 1) * ld + inner
}

impl BatchedGemmDescriptor {
    /// Packed entries, one after the other.
    pub fn packed(gemm: GemmDescriptor, batch: usize) -> Self {
        let g = &gemm;
        let l = g.layout;
        BatchedGemmDescriptor {
            stride_a: span(l.a(), g.m, g.k, g.lda),
            stride_b: span(l.b(), g.k, g.n, g.ldb),
            stride_c: span(l.c(), g.m, g.n, g.ldc),
            stride_d: span(l.c(), g.m, g.n, g.ldd),
            gemm,
            batch,
        }
    }

    fn validate(&self) -> Result<()> {
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
        if g.epilogue != EpilogueKind::Identity || g.save_aux {
            return Err(Error::Unsupported {
                op: OP,
                what: format!(
                    "epilogue {} (batched GEMM has no epilogue; use GemmPlan)",
                    g.epilogue
                ),
            });
        }
        let dspan = span(g.layout.c(), g.m, g.n, g.ldd);
        if self.batch > 1 && self.stride_d < dspan {
            return Err(Error::InvalidDescriptor {
                op: OP,
                field: "stride_d",
                value: self.stride_d.to_string(),
                reason: format!("output matrices would overlap (each spans {dspan} elements)"),
            });
        }
        Ok(())
    }

    /// Elements operand `which` (0 A, 1 B, 2 C, 3 D) needs in its slice.
    fn needed(&self, which: usize) -> usize {
        let g = &self.gemm;
        let l = g.layout;
        let (s, stride) = match which {
            0 => (span(l.a(), g.m, g.k, g.lda), self.stride_a),
            1 => (span(l.b(), g.k, g.n, g.ldb), self.stride_b),
            2 => (span(l.c(), g.m, g.n, g.ldc), self.stride_c),
            _ => (span(l.c(), g.m, g.n, g.ldd), self.stride_d),
        };
        (self.batch - 1).saturating_mul(stride).saturating_add(s)
    }
}

/// Tensors of one batched GEMM run: whole-batch slices.
#[derive(Debug)]
pub struct BatchedGemmArgs<'a, T, O = T> {
    /// All `A` matrices.
    pub a: DeviceSlice<'a, T>,
    /// All `B` matrices.
    pub b: DeviceSlice<'a, T>,
    /// All `C` matrices (may be `None` when `beta == 0`).
    pub c: Option<DeviceSlice<'a, O>>,
    /// All `D` matrices, written.
    pub d: DeviceSliceMut<'a, O>,
    /// Scale of the products.
    pub alpha: f64,
    /// Scale of `C`.
    pub beta: f64,
}

/// A strided batch of GEMMs in one cuBLASLt call.
///
/// # Shapes
/// Entry `i` of `A` is `m x k` at offset `i * stride_a` (orders and leading
/// dimensions as in [`GemmDescriptor`]); likewise `B`, `C`, `D`.
/// # Dtypes
/// `T -> O`, exactly as [`super::GemmPlan`]: f32 -> f32 (IEEE; TF32 only
/// with `allow_tf32`), f64 -> f64, f16 -> f16, f16 -> f32, bf16 -> bf16,
/// bf16 -> f32; `C` is `O`. Others: `Unsupported`.
/// # Errors
/// `InvalidDescriptor` (zero sizes, overlapping `D` entries), `Unsupported`
/// (an epilogue, a dtype pair); `ShapeMismatch` when a slice is too short,
/// `InvalidArgument`, `ContextMismatch`, `WorkspaceTooSmall` from `run`.
pub struct BatchedGemmPlan<T: Element, O: Element = T> {
    desc: BatchedGemmDescriptor,
    compute: LtCompute,
    prepared: Prepared,
    sku: KernelSku,
    _t: PhantomData<fn() -> (T, O)>,
}

fn check_slice(
    op: &'static str,
    arg: &'static str,
    addr: u64,
    len: usize,
    ctx_got: usize,
    need: usize,
    ctx: usize,
) -> Result<()> {
    if ctx_got != ctx {
        return Err(Error::ContextMismatch { op, arg });
    }
    if len < need {
        return Err(Error::ShapeMismatch {
            op,
            arg,
            expected: Shape::from([need]),
            got: Shape::from([len]),
        });
    }
    check_aligned(op, arg, addr)
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
        check_pref(OP, pref)?;
        let (compute, math, acc) = compute_for(OP, T::KIND, O::KIND, pref)?;
        let mut p = problem(
            OP,
            &desc.gemm,
            (T::KIND, T::KIND),
            O::KIND,
            compute,
            LtEpilogue::Default,
        );
        p.batch = desc.batch;
        p.strides = [desc.stride_a, desc.stride_b, desc.stride_c, desc.stride_d];
        let prepared = Prepared::new(stream, &p, pref)?.ok_or_else(|| Error::Unsupported {
            op: OP,
            what: format!(
                "cuBLASLt has no algorithm for {desc:?} ({}->{})",
                T::KIND,
                O::KIND
            ),
        })?;
        pref.check_workspace(OP, prepared.algo.workspace_bytes)?;
        let det = prepared.algo.is_deterministic();
        let g = &desc.gemm;
        let sku = KernelSku {
            op: OP.to_string(),
            element: T::KIND,
            backend: BackendKind::CublasLt,
            arch: stream.context().device().arch,
            variant: format!(
                "{} x{} {}->{} | {}",
                g.layout,
                desc.batch,
                T::KIND,
                O::KIND,
                prepared.describe()
            ),
            precision: PrecisionGuarantee {
                math,
                accumulator: acc,
                deterministic: det,
                bit_stable_on_same_hardware: det,
            },
        };
        Ok(BatchedGemmPlan {
            desc: desc.clone(),
            compute,
            prepared,
            sku,
            _t: PhantomData,
        })
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
        args: BatchedGemmArgs<'_, T, O>,
    ) -> Result<()> {
        let ctx = stream.context().id();
        let d = &self.desc;
        check_slice(
            OP,
            "a",
            args.a.addr(),
            args.a.len(),
            args.a.ctx_id(),
            d.needed(0),
            ctx,
        )?;
        check_slice(
            OP,
            "b",
            args.b.addr(),
            args.b.len(),
            args.b.ctx_id(),
            d.needed(1),
            ctx,
        )?;
        check_slice(
            OP,
            "d",
            args.d.addr(),
            args.d.len(),
            args.d.ctx_id(),
            d.needed(3),
            ctx,
        )?;
        let c = match args.c {
            Some(c) => {
                check_slice(OP, "c", c.addr(), c.len(), c.ctx_id(), d.needed(2), ctx)?;
                c.addr()
            }
            None if args.beta != 0.0 => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    arg: "c",
                    reason: format!("beta = {} but no C was given", args.beta),
                })
            }
            None => args.d.addr(),
        };
        let ws_bytes = self.prepared.algo.workspace_bytes;
        let ws = workspace.check(OP, ws_bytes, ctx)?;
        let ptrs = Ptrs {
            a: args.a.addr(),
            b: args.b.addr(),
            c,
            d: args.d.addr(),
            workspace: ws,
            workspace_bytes: ws_bytes,
            bias: 0,
            aux: 0,
            scales: None,
        };
        // SAFETY: check_slice proved every slice holds (batch-1)*stride +
        // one entry's span elements on this context, 16-byte aligned; the
        // borrows keep them alive and D exclusive.
        unsafe {
            self.prepared.enqueue(
                stream,
                scalar(self.compute, true, args.alpha),
                scalar(self.compute, true, args.beta),
                ptrs,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baracuda_kernels_types::LayoutSku;

    #[test]
    fn packed_strides_and_needs() {
        let b = BatchedGemmDescriptor::packed(GemmDescriptor::new(4, 5, 3, LayoutSku::Rrr), 6);
        assert_eq!((b.stride_a, b.stride_b, b.stride_d), (12, 15, 20));
        assert_eq!(b.needed(3), 120);
        let mut bc = b.clone();
        bc.stride_b = 0; // broadcast B
        assert!(bc.validate().is_ok());
        assert_eq!(bc.needed(1), 15);
    }

    #[test]
    fn bad_descriptors() {
        let g = GemmDescriptor::new(4, 5, 3, LayoutSku::Rrr);
        let mut b = BatchedGemmDescriptor::packed(g.clone(), 0);
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
        let b = BatchedGemmDescriptor::packed(g.with_epilogue(EpilogueKind::Relu), 2);
        assert!(matches!(b.validate(), Err(Error::Unsupported { .. })));
    }

    #[test]
    fn slice_checks() {
        assert!(matches!(
            check_slice(OP, "a", 0x100, 10, 1, 11, 1),
            Err(Error::ShapeMismatch { arg: "a", .. })
        ));
        assert!(matches!(
            check_slice(OP, "a", 0x100, 10, 2, 10, 1),
            Err(Error::ContextMismatch { .. })
        ));
        assert!(matches!(
            check_slice(OP, "a", 0x104, 10, 1, 10, 1),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(check_slice(OP, "a", 0x100, 10, 1, 10, 1).is_ok());
    }
}
