//! Grouped GEMM: many independent problems of different shapes in one
//! call, `D[g] = act(alpha * op(A[g]) op(B[g]) + beta * C[g] + bias[g])`
//! (MoE experts: `A[g]` holds the tokens routed to expert `g`, `B[g]` its
//! weight, `bias[g]` its bias).
//!
//! The cuBLASLt 13.0 API this crate binds has no grouped matmul. cuBLAS's
//! classic API has `cublasGemmGroupedBatchedEx` (since 12.5), whose
//! kernels NVIDIA describes as warp-level MMA, not Hopper's wgmma. So the
//! plan prepares one cuBLASLt matmul per group in `select` (each with its
//! own algorithm, wgmma kernels on Hopper) and `run` enqueues them back to
//! back on the stream; on H200 the MoE case of `bench/RESULTS.md` (64
//! experts of 5 to 554 tokens, 4096 -> 14336, bf16) runs 1.22 to 1.26x
//! faster than `torch._grouped_mm`. Groups with `m == 0` (an expert that
//! got no tokens) are skipped. Each group's plan is a [`GemmPlan`], so
//! `C`, the bias and the activation take the same path as there (fused
//! into cuBLASLt, or one epilogue-kernel pass after the group's matmul).

use baracuda_driver::{LtScalar, Stream};
use baracuda_kernels_types::{
    Element, EpilogueKind, Error, KernelSku, LayoutSku, MatrixMut, MatrixRef,
    PlanPreference, PrecisionGuarantee, Result, Shape, TensorRef, Workspace,
};

use super::args::{check_disjoint, GemmC, Region};
use super::gemm::{compute_for, GemmArgs, GemmDescriptor, GemmPlan};
use super::matmul::{lt_sku, Ptrs};
use crate::checks::{optional_arg, AUX_WHY, BIAS_WHY};
use crate::Plan;

const OP: &str = "grouped_gemm";

/// Shapes of the groups, all with one layout, one epilogue and packed
/// operands.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupedGemmDescriptor {
    /// `(m, n, k)` of each group; `m` may be 0.
    pub problems: Vec<(usize, usize, usize)>,
    /// Storage orders, shared by every group.
    pub layout: LayoutSku,
    /// Bias and activation of every group (group `g`'s bias has `n_g`
    /// elements).
    pub epilogue: EpilogueKind,
    /// Also store each group's pre-activation in `GroupedGemmArgs::aux`.
    /// Needs an activation.
    pub save_aux: bool,
}

impl GroupedGemmDescriptor {
    /// Groups of these shapes with no epilogue.
    pub fn new(problems: Vec<(usize, usize, usize)>, layout: LayoutSku) -> Self {
        GroupedGemmDescriptor {
            problems,
            layout,
            epilogue: EpilogueKind::Identity,
            save_aux: false,
        }
    }
    epilogue_builders!();

    /// The GEMM of one group (packed operands).
    fn group(&self, (m, n, k): (usize, usize, usize)) -> GemmDescriptor {
        GemmDescriptor::new(m, n, k, self.layout)
            .with_epilogue(self.epilogue)
            .with_aux(self.save_aux)
    }

    /// At least one group, and every group a valid GEMM once its `m` is
    /// taken as at least 1.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.problems.is_empty() {
            return Err(Error::InvalidDescriptor {
                op: OP,
                field: "problems",
                value: "[]".into(),
                reason: "needs at least one group".into(),
            });
        }
        for &(m, n, k) in &self.problems {
            self.group((m.max(1), n, k)).validate(OP)?;
        }
        Ok(())
    }

    /// Check the argument lists against the groups: one entry per group
    /// in each list given, `c` when `beta != 0`, the bias and aux lists
    /// exactly when the epilogue takes them, and the shapes of empty
    /// groups (the others are their plans' to check).
    fn check_lists<T: Element>(&self, args: &GroupedGemmArgs<'_, T>) -> Result<()> {
        let groups = self.problems.len();
        let lens = [
            ("a", Some(args.a.len())),
            ("b", Some(args.b.len())),
            (
                "c",
                match &args.c {
                    GemmC::Tensor(c) => Some(c.len()),
                    _ => None,
                },
            ),
            ("d", Some(args.d.len())),
            ("bias", args.bias.as_ref().map(Vec::len)),
            ("aux", args.aux.as_ref().map(Vec::len)),
        ];
        for (arg, len) in lens {
            match len {
                Some(len) if len != groups => {
                    return Err(Error::ShapeMismatch {
                        op: OP,
                        arg,
                        expected: Shape::from([groups]),
                        got: Shape::from([len]),
                    })
                }
                _ => {}
            }
        }
        if matches!(args.c, GemmC::None) && args.beta != 0.0 {
            return Err(Error::InvalidArgument {
                op: OP,
                arg: "c",
                reason: format!("beta = {} but no C was given", args.beta),
            });
        }
        let e = self.epilogue;
        optional_arg(
            OP,
            "bias",
            args.bias.as_ref(),
            e.has_bias(),
            BIAS_WHY,
            |_| Ok(0),
        )?;
        optional_arg(OP, "aux", args.aux.as_ref(), self.save_aux, AUX_WHY, |_| {
            Ok(0)
        })?;
        for (g, &(m, n, k)) in self.problems.iter().enumerate() {
            if m > 0 {
                continue;
            }
            let shape = |arg, got: (usize, usize), want: (usize, usize)| {
                if got == want {
                    Ok(())
                } else {
                    Err(Error::ShapeMismatch {
                        op: OP,
                        arg,
                        expected: Shape::from([want.0, want.1]),
                        got: Shape::from([got.0, got.1]),
                    })
                }
            };
            let dims = |r: usize, c: usize| (r, c);
            shape("a", dims(args.a[g].rows(), args.a[g].cols()), (0, k))?;
            shape("b", dims(args.b[g].rows(), args.b[g].cols()), (k, n))?;
            shape("d", dims(args.d[g].rows(), args.d[g].cols()), (0, n))?;
            if let GemmC::Tensor(c) = &args.c {
                shape("c", dims(c[g].rows(), c[g].cols()), (0, n))?;
            }
            if let Some(z) = &args.aux {
                shape("aux", dims(z[g].rows(), z[g].cols()), (0, n))?;
            }
            if let Some(b) = &args.bias {
                shape("bias", dims(1, b[g].shape()[0]), (1, n))?;
            }
        }
        Ok(())
    }

    /// `ContextMismatch` for an operand of an empty group (which no group
    /// plan checks) on another context than `ctx`.
    fn check_empty_contexts<T: Element>(
        &self,
        args: &GroupedGemmArgs<'_, T>,
        ctx: usize,
    ) -> Result<()> {
        for (g, &(m, _, _)) in self.problems.iter().enumerate() {
            if m > 0 {
                continue;
            }
            let mut operands = vec![
                ("a", args.a[g].data().ctx_id()),
                ("b", args.b[g].data().ctx_id()),
                ("d", args.d[g].as_const().data().ctx_id()),
            ];
            if let GemmC::Tensor(c) = &args.c {
                operands.push(("c", c[g].data().ctx_id()));
            }
            if let Some(z) = &args.aux {
                operands.push(("aux", z[g].as_const().data().ctx_id()));
            }
            if let Some(b) = &args.bias {
                operands.push(("bias", b[g].data().ctx_id()));
            }
            if let Some((arg, _)) = operands.into_iter().find(|&(_, c)| c != ctx) {
                return Err(Error::ContextMismatch { op: OP, arg });
            }
        }
        Ok(())
    }
}

/// Tensors of one grouped run, one entry per group (empty groups included)
/// in each list.
#[derive(Debug)]
pub struct GroupedGemmArgs<'a, T> {
    /// `A[g]`, `m_g x k_g`.
    pub a: Vec<MatrixRef<'a, T>>,
    /// `B[g]`, `k_g x n_g`.
    pub b: Vec<MatrixRef<'a, T>>,
    /// `C[g]`, `m_g x n_g` in `D`'s order: one per group, every `D`
    /// itself (in place), or none when `beta == 0`.
    pub c: GemmC<Vec<MatrixRef<'a, T>>>,
    /// `D[g]`, `m_g x n_g`, written.
    pub d: Vec<MatrixMut<'a, T>>,
    /// `bias[g]`, `[n_g]` with unit stride, when the epilogue has a bias.
    pub bias: Option<Vec<TensorRef<'a, T, 1>>>,
    /// `Z[g]`, `m_g x n_g` in `D`'s order, written, when the descriptor has
    /// `save_aux`.
    pub aux: Option<Vec<MatrixMut<'a, T>>>,
    /// Scale of every product.
    pub alpha: f64,
    /// Scale of every `C`.
    pub beta: f64,
}

/// Many GEMMs of different shapes in one call:
/// `D[g] = act(alpha op(A[g]) op(B[g]) + beta C[g] + bias[g])` for every
/// group `g`, each computed as [`GemmPlan`] computes one (aux holds the
/// pre-activation); groups with `m_g = 0` are skipped. No backward.
///
/// # Shapes
/// Group `g`: `A` `m_g x k_g`, `B` `k_g x n_g`, `C`, `D` and aux
/// `m_g x n_g`, packed, in the descriptor's layout; bias `n_g`.
/// # Layout
/// One list entry per group (empty groups included) in each list given.
/// Every matrix packed (leading dimension the row or column length its
/// order gives) and 16-byte aligned; `C`, `D` and aux in `D`'s order;
/// each bias a unit-stride view, 16-byte aligned. The workspace is
/// `workspace_size()` bytes, the largest group's, shared by the groups
/// in stream order.
/// # Dtypes
/// `T` = f32 (IEEE; TF32 only with `allow_tf32`), f64, f16 or bf16, with
/// `C`, `D`, bias and aux in `T` too (f32 accumulation; f64 for f64).
/// Others: `Unsupported`.
/// # Epilogues
/// Every [`GemmPlan`] epilogue, per group as there.
/// # Errors
/// From `select`: `InvalidDescriptor` (no groups, an `n` or `k` of 0 or a
/// size past 2^31 - 1, aux without activation); `Unsupported` (a dtype
/// not listed, or no cuBLASLt algorithm for a group); `PreferenceRejected`
/// when `pref` forces a backend other than `CublasLt` or caps the
/// workspace below the largest group's; the library errors as
/// [`GemmPlan`]. From `run`: `ShapeMismatch` when an argument list
/// differs from the group count or an empty group's operand from its
/// shape; `InvalidArgument` for `beta != 0` without `c` or a missing or
/// unexpected bias or aux list; `WorkspaceTooSmall`, and
/// `ContextMismatch` for a workspace on another context; every check of
/// [`GemmPlan`] per group, and the overlap checks across groups below.
/// Every group is checked before any is enqueued, so a bad argument
/// writes nothing.
/// # Aliasing
/// Each group's `D` may be its `C` ([`GemmC::Output`]: every group
/// accumulates in place). No other output (`D`, aux) overlaps an input or
/// another output of any group: `InvalidArgument` naming the output.
pub struct GroupedGemmPlan<T: Element> {
    desc: GroupedGemmDescriptor,
    plans: Vec<Option<GemmPlan<T>>>,
    sku: KernelSku,
    workspace_bytes: usize,
}

/// One group, checked and ready to enqueue.
struct Checked<'p, 'a, T: Element> {
    plan: &'p GemmPlan<T>,
    /// Holds the group's borrows until it is enqueued.
    args: GemmArgs<'a, T>,
    ptrs: Ptrs,
    alpha: LtScalar,
    beta: LtScalar,
}

/// A second borrow of `w` (for one group's checks).
fn reborrow<'w>(w: &'w mut Workspace<'_>) -> Workspace<'w> {
    match w {
        Workspace::None => Workspace::None,
        Workspace::Borrowed(s) => Workspace::Borrowed(s.reborrow()),
    }
}

/// The `g`-th entry of an optional list (already checked to have one per
/// group), taken out.
fn take<A>(list: &mut Option<std::vec::IntoIter<A>>) -> Option<A> {
    list.as_mut().and_then(Iterator::next)
}

impl<T: Element> Plan for GroupedGemmPlan<T> {
    type Descriptor = GroupedGemmDescriptor;
    type Args<'a> = GroupedGemmArgs<'a, T>;

    fn select(
        stream: &Stream,
        desc: &GroupedGemmDescriptor,
        pref: &PlanPreference,
    ) -> Result<Self> {
        desc.validate()?;
        let mut plans = Vec::with_capacity(desc.problems.len());
        let mut shapes: Vec<(usize, usize, usize)> = Vec::new();
        for &shape in &desc.problems {
            if shape.0 == 0 {
                plans.push(None);
                continue;
            }
            if !shapes.contains(&shape) {
                shapes.push(shape);
            }
            let g = desc.group(shape);
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
            None => compute_for(OP, T::KIND, T::KIND, pref).map(|(_, math, acc)| {
                PrecisionGuarantee {
                    math,
                    accumulator: acc,
                    deterministic: true,
                    bit_stable_on_same_hardware: true,
                }
            })?,
        };
        let deterministic = plans
            .iter()
            .flatten()
            .all(|p| p.sku().precision.deterministic);
        let post = plans.iter().flatten().filter(|p| p.has_post()).count();
        let sku = lt_sku(
            OP,
            stream,
            T::KIND,
            format!(
                "{} groups ({} distinct shapes), one cuBLASLt matmul per group, {} {}{}",
                desc.problems.len(),
                shapes.len(),
                desc.layout,
                desc.epilogue,
                if post > 0 {
                    format!(" + epilogue kernel in {post} groups")
                } else {
                    String::new()
                }
            ),
            (precision.math, precision.accumulator, deterministic),
        );
        Ok(GroupedGemmPlan {
            desc: desc.clone(),
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
        self.desc.check_lists(&args)?;
        self.desc
            .check_empty_contexts(&args, stream.context().id())?;
        workspace.check(OP, self.workspace_bytes, stream.context().id())?;
        let (alpha, beta) = (args.alpha, args.beta);
        let c_is_d = matches!(args.c, GemmC::Output);
        let mut c = match args.c {
            GemmC::Tensor(c) => Some(c.into_iter()),
            _ => None,
        };
        let mut bias = args.bias.map(Vec::into_iter);
        let mut aux = args.aux.map(Vec::into_iter);
        // Check every group before enqueueing any, so a bad argument
        // writes nothing. `checked` holds each group's borrows until the
        // enqueues below.
        let mut checked: Vec<Checked<'_, '_, T>> = Vec::with_capacity(self.plans.len());
        let groups = args.a.into_iter().zip(args.b).zip(args.d);
        for (plan, ((a, b), d)) in self.plans.iter().zip(groups) {
            let group = GemmArgs {
                a,
                b,
                c: match take(&mut c) {
                    Some(c) => GemmC::Tensor(c),
                    None if c_is_d => GemmC::Output,
                    None => GemmC::None,
                },
                d,
                bias: take(&mut bias),
                aux: take(&mut aux),
                alpha,
                beta,
            };
            // Empty groups were checked by `check_lists`.
            let Some(plan) = plan else { continue };
            let (ptrs, alpha, beta) = plan.checked(OP, stream, reborrow(&mut workspace), &group)?;
            checked.push(Checked {
                plan,
                args: group,
                ptrs,
                alpha,
                beta,
            });
        }
        check_across_groups(&checked)?;
        for g in &checked {
            // SAFETY: `checked` proved this group's operands hold the
            // extents their layouts reach on this context, 16-byte aligned,
            // and the workspace the largest group's bytes; `args` keeps
            // the borrows (D and aux exclusive) alive while the work is
            // enqueued. Groups run one after another on the stream, so they
            // share the workspace safely.
            unsafe { g.plan.enqueue_checked(stream, g.alpha, g.beta, g.ptrs) }?;
        }
        Ok(())
    }
}

/// What a group's run reads (`C` only when it is not `D` itself) and
/// writes.
type Regions = (Vec<(&'static str, Region)>, Vec<(&'static str, Region)>);

fn regions<T: Element>(g: &GemmArgs<'_, T>) -> Regions {
    let d = Region::matrix_mut(&g.d);
    let mut reads = vec![("a", Region::matrix(&g.a)), ("b", Region::matrix(&g.b))];
    if let GemmC::Tensor(c) = &g.c {
        let rc = Region::matrix(c);
        if rc != d {
            reads.push(("c", rc));
        }
    }
    reads.extend(g.bias.as_ref().map(|b| ("bias", Region::vector(b))));
    let mut writes = vec![("d", d)];
    writes.extend(g.aux.as_ref().map(|z| ("aux", Region::matrix_mut(z))));
    (reads, writes)
}

/// Every output of a group against the inputs and outputs of every other
/// group (each group's plan checked its own).
fn check_across_groups<T: Element>(checked: &[Checked<'_, '_, T>]) -> Result<()> {
    let all: Vec<Regions> = checked.iter().map(|g| regions(&g.args)).collect();
    for (i, (_, writes)) in all.iter().enumerate() {
        let others: Vec<(&'static str, Region)> = all
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .flat_map(|(_, (r, w))| r.iter().chain(w).copied())
            .collect();
        for &out in writes {
            check_disjoint(OP, out, &others)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use baracuda_kernels_types::{DeviceSlice, DeviceSliceMut, MatrixOrder};

    fn moe(e: EpilogueKind) -> GroupedGemmDescriptor {
        GroupedGemmDescriptor::new(vec![(5, 8, 4), (0, 8, 4), (3, 6, 4)], LayoutSku::Rcr)
            .with_epilogue(e)
    }

    #[test]
    fn bad_descriptors() {
        let e = GroupedGemmDescriptor::new(vec![], LayoutSku::Rcr)
            .validate()
            .unwrap_err();
        assert!(matches!(
            e,
            Error::InvalidDescriptor {
                field: "problems",
                ..
            }
        ));
        for (shape, field) in [((4, 0, 4), "n"), ((0, 4, 0), "k"), ((0, 0, 4), "n")] {
            let d = GroupedGemmDescriptor::new(vec![(4, 4, 4), shape], LayoutSku::Rcr);
            let e = d.validate().unwrap_err();
            assert!(
                matches!(e, Error::InvalidDescriptor { field: f, .. } if f == field),
                "{shape:?}: {e}"
            );
        }
        let e = moe(EpilogueKind::Bias)
            .with_aux(true)
            .validate()
            .unwrap_err();
        assert!(matches!(
            e,
            Error::InvalidDescriptor {
                field: "save_aux",
                ..
            }
        ));
        for e in EpilogueKind::ALL {
            let d = moe(e).with_aux(e.activation() != baracuda_kernels_types::Activation::Identity);
            assert!(d.validate().is_ok(), "{e}");
            assert_eq!(d.group((5, 8, 4)).epilogue, e);
        }
    }

    fn fake<'a>(addr: u64, len: usize) -> DeviceSlice<'a, f32> {
        // SAFETY: host-only inspection of a fake address.
        unsafe { DeviceSlice::from_raw_parts(addr, len, 1) }
    }
    fn fake_mut<'a>(addr: u64, len: usize) -> DeviceSliceMut<'a, f32> {
        // SAFETY: as above; each fake slice has its own address.
        unsafe { DeviceSliceMut::from_raw_parts(addr, len, 1) }
    }

    /// Argument lists for `d`'s groups (packed, row-major D); the bias of
    /// group `g` has `n_g + bias_extra[g]` elements.
    fn lists<'a>(d: &GroupedGemmDescriptor, bias_extra: [usize; 3]) -> GroupedGemmArgs<'a, f32> {
        let row = MatrixOrder::RowMajor;
        let col = MatrixOrder::ColMajor;
        let mut addr = 0x10000u64;
        let mut next = || {
            addr += 0x10000;
            addr
        };
        let p = &d.problems;
        GroupedGemmArgs {
            a: p.iter()
                .map(|&(m, _, k)| MatrixRef::new(fake(next(), m * k), m, k, k, row).unwrap())
                .collect(),
            b: p.iter()
                .map(|&(_, n, k)| MatrixRef::new(fake(next(), k * n), k, n, k, col).unwrap())
                .collect(),
            c: GemmC::Tensor(
                p.iter()
                    .map(|&(m, n, _)| MatrixRef::new(fake(next(), m * n), m, n, n, row).unwrap())
                    .collect(),
            ),
            d: p.iter()
                .map(|&(m, n, _)| MatrixMut::new(fake_mut(next(), m * n), m, n, n, row).unwrap())
                .collect(),
            bias: d.epilogue.has_bias().then(|| {
                p.iter()
                    .zip(bias_extra)
                    .map(|(&(_, n, _), x)| TensorRef::new(fake(next(), n + x), [n + x], [1]).unwrap())
                    .collect()
            }),
            aux: None,
            alpha: 1.0,
            beta: 0.5,
        }
    }

    #[test]
    fn list_checks() {
        let d = moe(EpilogueKind::Bias);
        assert!(d.check_lists(&lists(&d, [0; 3])).is_ok());
        // A wrong bias on the empty group is still caught.
        assert!(matches!(
            d.check_lists(&lists(&d, [0, 1, 0])),
            Err(Error::ShapeMismatch { arg: "bias", .. })
        ));
        let mut a = lists(&d, [0; 3]);
        a.bias.as_mut().unwrap().pop();
        assert!(matches!(
            d.check_lists(&a),
            Err(Error::ShapeMismatch { arg: "bias", .. })
        ));
        let mut a = lists(&d, [0; 3]);
        a.bias = None;
        assert!(matches!(
            d.check_lists(&a),
            Err(Error::InvalidArgument { arg: "bias", .. })
        ));
        let mut a = lists(&d, [0; 3]);
        a.c = GemmC::None;
        assert!(matches!(
            d.check_lists(&a),
            Err(Error::InvalidArgument { arg: "c", .. })
        ));
        a.beta = 0.0;
        assert!(d.check_lists(&a).is_ok());
        let mut a = lists(&d, [0; 3]);
        if let GemmC::Tensor(c) = &mut a.c {
            c.truncate(1);
        }
        assert!(matches!(
            d.check_lists(&a),
            Err(Error::ShapeMismatch { arg: "c", .. })
        ));
        // An aux list without save_aux, one of the wrong length with it,
        // and an empty group's A of the wrong width.
        let aux = |d: &GroupedGemmDescriptor| -> Vec<MatrixMut<'static, f32>> {
            d.problems
                .iter()
                .enumerate()
                .map(|(g, &(m, n, _))| {
                    let s = fake_mut(0x900000 + 0x10000 * g as u64, m * n);
                    MatrixMut::new(s, m, n, n, MatrixOrder::RowMajor).unwrap()
                })
                .collect()
        };
        let mut a = lists(&d, [0; 3]);
        a.aux = Some(aux(&d));
        assert!(matches!(
            d.check_lists(&a),
            Err(Error::InvalidArgument { arg: "aux", .. })
        ));
        let da = moe(EpilogueKind::BiasGeluErf).with_aux(true);
        let mut a = lists(&da, [0; 3]);
        assert!(matches!(
            da.check_lists(&a),
            Err(Error::InvalidArgument { arg: "aux", .. })
        ));
        a.aux = Some(aux(&da));
        assert!(da.check_lists(&a).is_ok());
        a.aux.as_mut().unwrap().pop();
        assert!(matches!(
            da.check_lists(&a),
            Err(Error::ShapeMismatch { arg: "aux", .. })
        ));
        let mut a = lists(&d, [0; 3]);
        a.a[1] = MatrixRef::new(fake(0x100, 0), 0, 3, 3, MatrixOrder::RowMajor).unwrap();
        assert!(matches!(
            d.check_lists(&a),
            Err(Error::ShapeMismatch { arg: "a", .. })
        ));
        let plain = moe(EpilogueKind::Relu);
        assert!(matches!(
            plain.check_lists(&lists(&moe(EpilogueKind::Bias), [0; 3])),
            Err(Error::InvalidArgument { arg: "bias", .. })
        ));
    }
}
