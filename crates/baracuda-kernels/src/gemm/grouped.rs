//! Grouped GEMM: many independent problems of different shapes in one
//! call, `D[g] = alpha * op(A[g]) op(B[g])` (MoE experts: `A[g]` holds the
//! tokens routed to expert `g`, `B[g]` its weight).
//!
//! The cuBLASLt 13.0 API this crate binds has no grouped matmul. cuBLAS's
//! classic API has `cublasGemmGroupedBatchedEx` (since 12.5), whose
//! kernels NVIDIA describes as warp-level MMA, not Hopper's wgmma. So the
//! plan prepares one cuBLASLt matmul per group in `select` (each with its
//! own algorithm, wgmma kernels on Hopper) and `run` enqueues them back to
//! back on the stream; on H200 the MoE case of `bench/RESULTS.md` (64
//! experts of 5 to 554 tokens, 4096 -> 14336, bf16) runs 1.22 to 1.26x
//! faster than `torch._grouped_mm`. Groups with `m == 0` (an expert that
//! got no tokens) are skipped.

use baracuda_driver::Stream;
use baracuda_kernels_types::{
    BackendKind, Element, Error, KernelSku, LayoutSku, MatrixMut, MatrixRef, PlanPreference,
    Result, Shape, Workspace,
};

use super::gemm::{GemmArgs, GemmDescriptor, GemmPlan};
use crate::Plan;

const OP: &str = "grouped_gemm";

/// Shapes of the groups, all with one layout and packed operands.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupedGemmDescriptor {
    /// `(m, n, k)` of each group; `m` may be 0.
    pub problems: Vec<(usize, usize, usize)>,
    /// Storage orders, shared by every group.
    pub layout: LayoutSku,
}

/// Tensors of one grouped run, one entry per group (empty groups included).
#[derive(Debug)]
pub struct GroupedGemmArgs<'a, T> {
    /// `A[g]`, `m_g x k_g`.
    pub a: Vec<MatrixRef<'a, T>>,
    /// `B[g]`, `k_g x n_g`.
    pub b: Vec<MatrixRef<'a, T>>,
    /// `D[g]`, `m_g x n_g`, written.
    pub d: Vec<MatrixMut<'a, T>>,
    /// Scale of every product.
    pub alpha: f64,
}

/// Many GEMMs of different shapes in one call.
///
/// # Shapes
/// Group `g`: `A` `m_g x k_g`, `B` `k_g x n_g`, `D` `m_g x n_g`, packed, in
/// the descriptor's layout.
/// # Dtypes
/// `T` = f32 (IEEE; TF32 only with `allow_tf32`), f64, f16 or bf16, with
/// `D` in `T` too (f32 accumulation; f64 for f64). Others: `Unsupported`.
/// # Errors
/// `InvalidDescriptor` (no groups, `n` or `k` of 0), `Unsupported`;
/// `ShapeMismatch` when the argument lists differ from the group count,
/// and every check of [`GemmPlan`] per group.
pub struct GroupedGemmPlan<T: Element> {
    plans: Vec<Option<GemmPlan<T>>>,
    sku: KernelSku,
    workspace_bytes: usize,
}

impl<T: Element> Plan for GroupedGemmPlan<T> {
    type Descriptor = GroupedGemmDescriptor;
    type Args<'a> = GroupedGemmArgs<'a, T>;

    fn select(
        stream: &Stream,
        desc: &GroupedGemmDescriptor,
        pref: &PlanPreference,
    ) -> Result<Self> {
        if desc.problems.is_empty() {
            return Err(Error::InvalidDescriptor {
                op: OP,
                field: "problems",
                value: "[]".into(),
                reason: "needs at least one group".into(),
            });
        }
        let mut plans = Vec::with_capacity(desc.problems.len());
        let mut cache: Vec<((usize, usize, usize), GemmDescriptor)> = Vec::new();
        for &(m, n, k) in &desc.problems {
            if m == 0 {
                // n and k must still be valid
                GemmDescriptor::new(1, n, k, desc.layout).validate(OP)?;
                plans.push(None);
                continue;
            }
            let g = GemmDescriptor::new(m, n, k, desc.layout);
            if !cache.iter().any(|(s, _)| *s == (m, n, k)) {
                cache.push(((m, n, k), g.clone()));
            }
            plans.push(Some(GemmPlan::<T>::select_as(OP, stream, &g, pref)?));
        }
        let workspace_bytes = plans
            .iter()
            .flatten()
            .map(|p| p.workspace_size())
            .max()
            .unwrap_or(0);
        pref.check_workspace(OP, workspace_bytes)?;
        let first = plans.iter().flatten().next().map(|p| p.sku().clone());
        let precision = match &first {
            Some(s) => s.precision,
            None => {
                super::gemm::compute_for(OP, T::KIND, T::KIND, pref).map(|(_, math, acc)| {
                    baracuda_kernels_types::PrecisionGuarantee {
                        math,
                        accumulator: acc,
                        deterministic: true,
                        bit_stable_on_same_hardware: true,
                    }
                })?
            }
        };
        let deterministic = plans
            .iter()
            .flatten()
            .all(|p| p.sku().precision.deterministic);
        let sku = KernelSku {
            op: OP.to_string(),
            element: T::KIND,
            backend: BackendKind::CublasLt,
            arch: stream.context().device().arch,
            variant: format!(
                "{} groups ({} distinct shapes), one cuBLASLt matmul per group, {}",
                desc.problems.len(),
                cache.len(),
                desc.layout
            ),
            precision: baracuda_kernels_types::PrecisionGuarantee {
                deterministic,
                bit_stable_on_same_hardware: deterministic,
                ..precision
            },
        };
        Ok(GroupedGemmPlan {
            plans,
            sku,
            workspace_bytes,
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
        mut workspace: Workspace<'_>,
        args: GroupedGemmArgs<'_, T>,
    ) -> Result<()> {
        let groups = self.plans.len();
        for (arg, len) in [
            ("a", args.a.len()),
            ("b", args.b.len()),
            ("d", args.d.len()),
        ] {
            if len != groups {
                return Err(Error::ShapeMismatch {
                    op: OP,
                    arg,
                    expected: Shape::from([groups]),
                    got: Shape::from([len]),
                });
            }
        }
        workspace.check(OP, self.workspace_bytes, stream.context().id())?;
        // Check every group before enqueueing any, so a bad argument
        // writes nothing.
        for (g, plan) in self.plans.iter().enumerate() {
            let want = match plan {
                Some(p) => (p.descriptor().m, p.descriptor().k, p.descriptor().n),
                None => (0, args.a[g].cols(), args.b[g].cols()),
            };
            if (args.a[g].rows(), args.a[g].cols()) != (want.0, want.1) {
                return Err(Error::ShapeMismatch {
                    op: OP,
                    arg: "a",
                    expected: Shape::from([want.0, want.1]),
                    got: Shape::from([args.a[g].rows(), args.a[g].cols()]),
                });
            }
            if (args.d[g].rows(), args.d[g].cols()) != (want.0, want.2) {
                return Err(Error::ShapeMismatch {
                    op: OP,
                    arg: "d",
                    expected: Shape::from([want.0, want.2]),
                    got: Shape::from([args.d[g].rows(), args.d[g].cols()]),
                });
            }
        }
        for ((plan, (a, b)), d) in self
            .plans
            .iter()
            .zip(args.a.into_iter().zip(args.b))
            .zip(args.d)
        {
            let Some(plan) = plan else { continue };
            let ws = match &mut workspace {
                Workspace::None => Workspace::None,
                Workspace::Borrowed(s) => Workspace::Borrowed(s.reborrow()),
            };
            plan.run_as(
                OP,
                stream,
                ws,
                GemmArgs {
                    a,
                    b,
                    c: None,
                    d,
                    bias: None,
                    aux: None,
                    alpha: args.alpha,
                    beta: 0.0,
                },
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_descriptor_is_rejected() {
        // select validates before touching the GPU only for the empty case;
        // the per-group checks are GemmDescriptor::validate's.
        let d = GroupedGemmDescriptor {
            problems: vec![],
            layout: LayoutSku::Rcr,
        };
        assert!(d.problems.is_empty());
        let e = GemmDescriptor::new(1, 0, 4, LayoutSku::Rcr)
            .validate(OP)
            .unwrap_err();
        assert!(matches!(e, Error::InvalidDescriptor { field: "n", .. }));
    }
}
