//! The launch machinery of `kernels/elementwise/ternary.cu` that
//! [`TernaryPlan`](super::TernaryPlan) and [`WherePlan`](super::WherePlan)
//! share: one op's forward and backward map kernels over the output shape,
//! and the reduction (`reduce_back.rs`) of each broadcast input's gradient.

use baracuda_driver::Stream;
use baracuda_kernels_types::{
    BackendKind, DevPtr, DevPtrMut, Element, KernelSku, PlanPreference, Result,
};

use super::layout::{contig_shape, spec, In, MapKernels, Out};
use super::reduce_back::{pointwise_out, with_offsets, GradOut, Reduction};
use super::unary::pointwise_precision;
use crate::checks::{check_alias, Extent};
use crate::kernel_sources;

/// The op name errors and skus of the ternary kernels carry.
const OP: &str = "ternary";

/// `TernaryParams` of ternary.cu.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub(crate) struct TernaryParams {
    pub(crate) value: f64,
}

/// What [`TernaryPlan`](super::TernaryPlan) and
/// [`WherePlan`](super::WherePlan) share: one op's kernels over one
/// output shape, and the reduction of each broadcast input's gradient.
pub(crate) struct TernaryMap<const N: usize> {
    pub(crate) out_shape: [usize; N],
    pub(crate) sku: KernelSku,
    fw: MapKernels,
    bw: MapKernels,
    /// Per gradient, its reduction when its input is broadcast.
    reduce: Vec<Option<Reduction>>,
    params: TernaryParams,
}

impl<const N: usize> TernaryMap<N> {
    /// Load op `(index, name)` of ternary.cu on `dtype` for an output of
    /// shape `out`, with the reductions of the gradients of inputs of
    /// `grad_shapes` (in order: `reduce_a`, `reduce_b`, `reduce_c`).
    pub(crate) fn select<T: Element>(
        stream: &Stream,
        pref: &PlanPreference,
        (index, name): (u32, &'static str),
        dtype: u32,
        grad_shapes: &[&[usize; N]],
        out: [usize; N],
        params: TernaryParams,
    ) -> Result<Self> {
        let shape = contig_shape(false, dtype);
        let spec = spec(&kernel_sources::TERNARY, dtype, index, shape);
        let fw = MapKernels::load(stream, &spec, "ternary_fw", name, shape)?;
        let bw = MapKernels::load(stream, &spec, "ternary_bw", name, shape)?;
        let module = stream.context().module(&spec)?;
        let sm = stream.context().device().sm_count;
        let mut room = pref.max_workspace_bytes.unwrap_or(usize::MAX);
        let reduce = grad_shapes
            .iter()
            .zip(["a", "b", "c"])
            .map(|(s, which)| {
                Reduction::plan::<T>(&s[..], &out, sm, &mut room, || {
                    let reduce = module.function(&format!("ternary_bw_reduce_{which}_{name}"))?;
                    Ok((reduce, module.function("ternary_bw_finalize")?))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let splits: Vec<String> = reduce
            .iter()
            .zip(["a", "b", "c"])
            .map(|(r, w)| format!("{w}={}", r.as_ref().map_or(0, Reduction::splits)))
            .collect();
        let sku = KernelSku {
            op: format!("{OP}.{name}"),
            element: T::KIND,
            backend: BackendKind::Baracuda,
            arch: stream.context().device().arch,
            variant: format!(
                "vec16 contiguous / rank-8 strided; bw pointwise + reduce (splits {})",
                splits.join(", ")
            ),
            precision: pointwise_precision::<T>(),
        };
        Ok(TernaryMap {
            out_shape: out,
            sku,
            fw,
            bw,
            reduce,
            params,
        })
    }

    /// The reductions of the wanted gradients with their workspace offsets.
    pub(crate) fn reductions<'s, T: Element>(
        &'s self,
        wants: &'s [bool],
    ) -> impl Iterator<Item = (usize, &'s Reduction, usize)> + 's {
        with_offsets::<T>(
            self.reduce
                .iter()
                .zip(wants)
                .map(|(r, &w)| r.as_ref().filter(|_| w)),
        )
    }

    /// Workspace of the backward computing the gradients in `wants`.
    pub(crate) fn ws_bytes<T: Element>(&self, wants: &[bool]) -> usize {
        self.reductions::<T>(wants)
            .map(|(_, r, at)| at + r.ws_bytes::<T>())
            .max()
            .unwrap_or(0)
    }

    /// The aliasing rules of the gradients: one computed pointwise may be
    /// an input itself (the reductions, which read every input across the
    /// whole output, run before the pointwise pass, and that pass reads
    /// each element before it writes it); a reduced one shares memory with
    /// nothing; no two share memory.
    pub(crate) fn check_grad_aliases<T>(
        &self,
        op: &'static str,
        grads: &[Option<GradOut<'_, T>>],
        inputs: &[Extent<'_, T>],
    ) -> Result<()> {
        for (k, g) in grads.iter().enumerate() {
            let Some(g) = g else { continue };
            for input in inputs {
                check_alias(op, &g.ext, input, self.reduce[k].is_none())?;
            }
            for other in grads[..k].iter().flatten() {
                check_alias(op, &g.ext, &other.ext, false)?;
            }
        }
        Ok(())
    }

    /// Launch the forward map.
    ///
    /// # Safety
    /// The inputs are views of the output shape (bounds-checked) in the
    /// kernels' order, and `out` a checked view of it, disjoint from each
    /// input or that input itself.
    pub(crate) unsafe fn forward<T: Element>(
        &self,
        stream: &Stream,
        out: Out<'_, T>,
        ins: &[In<'_, T>],
    ) -> Result<()> {
        let q = self.params;
        // SAFETY: forwarded from the caller's contract.
        unsafe {
            self.fw
                .launch_with(OP, stream, &self.out_shape, &[out], ins, |a| {
                    a.push(q).map(|_| ())
                })
        }
    }

    /// The reductions of the broadcast gradients, then the pointwise pass
    /// of the others: `reads` are the backward kernels' inputs with their
    /// strides over the output shape, `ws` the checked workspace.
    ///
    /// # Safety
    /// Every address holds what its strides reach over the output shape;
    /// the gradients' aliasing was checked (`check_grad_aliases`) and `ws`
    /// holds `ws_bytes` of the gradients given.
    pub(crate) unsafe fn backward<T: Element>(
        &self,
        stream: &Stream,
        ws: DevPtrMut<u8>,
        reads: &[(DevPtr<T>, [usize; N])],
        grads: &[Option<GradOut<'_, T>>],
    ) -> Result<()> {
        let q = self.params;
        let out = &self.out_shape;
        let wants: Vec<bool> = grads.iter().map(Option::is_some).collect();
        let raw: Vec<(DevPtr<u8>, &[usize])> = reads
            .iter()
            .map(|(p, st)| (p.cast::<u8>(), &st[..]))
            .collect();
        for (k, r, at) in self.reductions::<T>(&wants) {
            if let Some(g) = &grads[k] {
                // SAFETY: the caller's contract; the reductions run before
                // the pointwise pass that may write over an input.
                unsafe {
                    r.launch::<T>(
                        stream,
                        out,
                        &raw,
                        (g.ptr, g.ext.strides),
                        ws.byte_add(at),
                        |a| a.push(q).map(|_| ()),
                    )?;
                }
            }
        }
        let dy_strides = &reads[reads.len() - 1].1;
        let outs: Vec<Out<'_, T>> = grads
            .iter()
            .zip(&self.reduce)
            .map(|(g, r)| pointwise_out(g, r, dy_strides))
            .collect();
        if outs.iter().all(|o| o.0.is_null()) {
            return Ok(());
        }
        let ins: Vec<In<'_, T>> = reads.iter().map(|(p, st)| (*p, &st[..])).collect();
        // SAFETY: the caller's contract; absent or reduced gradients are
        // null, which the kernels skip.
        unsafe {
            self.bw
                .launch_with(OP, stream, out, &outs, &ins, |a| a.push(q).map(|_| ()))
        }
    }
}
