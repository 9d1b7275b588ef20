//! `torch.var_mean` and `torch.std_mean`: the variance (or standard
//! deviation) and the mean over any subset of dims from one Welford pass,
//! and the backward `dx = dvar-part + dmean / n`.
//!
//! The kernels are `kernels/reduce/reduce.cu` with op codes 16 (var_mean)
//! and 17 (std_mean): the row, column and combine kernels of
//! [`ReducePlan`](super::ReducePlan)'s var and std, whose fold writes the
//! state's mean as a second output (the reduction's auxiliary operand),
//! and an elementwise backward that reads the forward's mean (and std)
//! instead of reducing x again.

use core::marker::PhantomData;

use baracuda_driver::{Function, Stream};
use baracuda_kernels_types::{
    DevPtr, DevPtrMut, Element, Error, KernelSku, PlanPreference, Result, TensorMut, TensorRef,
    Workspace, MAX_RANK,
};

use super::layout::{launch_elementwise, state_bytes, Collapsed, OpArgs, ReduceKernels, Reduction};
use super::reduce::{check_descriptor, spec, OP};
use super::{ReduceDescriptor, ReduceOp};
use crate::checks::{byte_span, check_disjoint, check_views, invalid_descriptor, View};
use crate::plan::own_float_sku;
use crate::{Backward, Plan};

/// `BARACUDA_OP` of reduce.cu for var_mean (`std` false) or std_mean.
pub(crate) fn code(std: bool) -> u32 {
    if std {
        17
    } else {
        16
    }
}

/// Arguments of [`VarMeanPlan`]'s [`Plan::run`].
pub struct VarMeanArgs<'a, T, const N: usize, const M: usize> {
    /// Input, any strides (0 = broadcast).
    pub x: TensorRef<'a, T, N>,
    /// The variance (op `Var`) or standard deviation (op `Std`), shape
    /// [`ReduceDescriptor::output_shape`], any non-overlapping strides.
    pub y: TensorMut<'a, T, M>,
    /// The mean, the same shape, any non-overlapping strides.
    pub mean: TensorMut<'a, T, M>,
}

/// Arguments of [`VarMeanPlan`]'s [`Backward::run_bw`].
pub struct VarMeanBwArgs<'a, T, const N: usize, const M: usize> {
    /// The forward input.
    pub x: TensorRef<'a, T, N>,
    /// The forward's `y`: read by std_mean when `dy` is given; ignored
    /// (but checked) otherwise.
    pub y: Option<TensorRef<'a, T, M>>,
    /// The forward's mean.
    pub mean: TensorRef<'a, T, M>,
    /// Gradient of `y`, or `None` when the loss does not depend on it.
    pub dy: Option<TensorRef<'a, T, M>>,
    /// Gradient of the mean, or `None` when the loss does not depend on it.
    pub dmean: Option<TensorRef<'a, T, M>>,
    /// Gradient of the input, every element written (0 when neither `dy`
    /// nor `dmean` is given); must not overlap the other operands.
    pub dx: TensorMut<'a, T, N>,
}

/// `torch.var_mean` (descriptor op [`ReduceOp::Var`]) or `torch.std_mean`
/// ([`ReduceOp::Std`]) over any subset of dims of a strided tensor, and
/// its backward. Both outputs come from one pass over x: each output's
/// Welford state (count, mean, M2) gives the variance and the mean.
/// Deterministic, as [`ReducePlan`](super::ReducePlan).
///
/// # Math
/// With `o` a position over the kept dims and `r` over the `n` reduced
/// ones: `mean[o] = sum_r x[o, r] / n`, `var[o] = sum_r (x[o, r] -
/// mean[o])^2 / max(n - correction, 0)`, `std = sqrt(var)`. Backward, as
/// PyTorch's autograd: `dx[o, r] = 2 g[o] (x[o, r] - mean[o]) / (n -
/// correction) + dmean[o] / n`, with `g = dy` for var_mean and `g = dy /
/// (2 std)` (0 where `std` is 0) for std_mean; a term is left out when its
/// gradient is `None`.
/// # Shapes
/// `x`, `dx`: `desc.shape` (rank `N <= 8`); `y`, `mean`, `dy`, `dmean`:
/// [`ReduceDescriptor::output_shape`] (rank `M`).
/// # Layout, dtypes
/// As [`ReducePlan`](super::ReducePlan)'s: any strides, broadcast inputs,
/// 64-bit offsets; f32, f64, f16, bf16 (f16/bf16 accumulate in f32),
/// others `Error::Unsupported`.
/// # Workspace
/// `workspace_size()`: the split states of the reduction. The backward
/// takes none: it reads the forward's mean.
/// # Special values
/// Over no element both outputs are NaN (PyTorch's). A NaN makes both
/// NaN; an infinity makes the mean that infinity (NaN when both signs
/// meet), as `torch.mean`, and the variance NaN.
/// # Errors
/// [`ReducePlan`](super::ReducePlan)'s from `select` and `run`, and
/// `InvalidDescriptor` for an op other than var and std; `InvalidArgument`
/// from `run` for the mean overlapping x or y, and from `run_bw` for `dx`
/// overlapping an input or a missing `y` in std_mean's backward with `dy`.
pub struct VarMeanPlan<T: Element, const N: usize, const M: usize = N> {
    desc: ReduceDescriptor<N>,
    sku: KernelSku,
    fw: ReduceKernels,
    bw32: Function,
    bw64: Function,
    red: Reduction<N>,
    _t: PhantomData<T>,
}

/// `VarMeanBwParams` of reduce.cu.
#[repr(C)]
#[derive(Copy, Clone)]
struct VarMeanBwParams<T> {
    dx: DevPtrMut<T>,
    x: DevPtr<T>,
    dy: DevPtr<T>,
    y: DevPtr<T>,
    mean: DevPtr<T>,
    dmean: DevPtr<T>,
    n: u64,
    rank: u32,
    pad: u32,
    shape: [u64; MAX_RANK],
    stride: [[i64; MAX_RANK]; 6],
    op: OpArgs,
}

/// The checks of `select` (those of [`ReducePlan`](super::ReducePlan),
/// and an op of var or std): the dtype code and whether the plan is
/// std_mean.
pub(crate) fn validate<T: Element, const N: usize, const M: usize>(
    desc: &ReduceDescriptor<N>,
    pref: &PlanPreference,
) -> Result<(u32, bool)> {
    let dtype = check_descriptor::<T, T, N, M>(desc, pref)?;
    match desc.op {
        ReduceOp::Var => Ok((dtype, false)),
        ReduceOp::Std => Ok((dtype, true)),
        other => {
            let why = "var_mean takes var (var_mean) or std (std_mean)";
            Err(invalid_descriptor(OP, "op", other.name().into(), why))
        }
    }
}

impl<T: Element, const N: usize, const M: usize> VarMeanPlan<T, N, M> {
    fn is_std(&self) -> bool {
        self.desc.op == ReduceOp::Std
    }
}

impl<T: Element, const N: usize, const M: usize> Plan for VarMeanPlan<T, N, M> {
    type Descriptor = ReduceDescriptor<N>;
    type Args<'a> = VarMeanArgs<'a, T, N, M>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let (dtype, std) = validate::<T, N, M>(desc, pref)?;
        let module = stream.context().module(&spec(dtype, code(std)))?;
        let sm_count = stream.context().device().sm_count;
        let name = if std { "std_mean" } else { "var_mean" };
        let plan = VarMeanPlan {
            desc: *desc,
            sku: own_float_sku::<T>(
                stream,
                format!("reduce.{name}"),
                "one Welford pass writing both outputs: row / column / strided, split with a fixed-order combine",
            ),
            fw: ReduceKernels::load(&module, "reduce")?,
            bw32: module.function("var_mean_bw32")?,
            bw64: module.function("var_mean_bw64")?,
            red: Reduction::new(desc.dims(), sm_count, state_bytes::<T>())
                .with_scalars(desc.p, desc.correction),
            _t: PhantomData,
        };
        pref.check_workspace(OP, plan.workspace_size())?;
        Ok(plan)
    }

    fn sku(&self) -> &KernelSku {
        &self.sku
    }

    fn workspace_size(&self) -> usize {
        self.red.partial_bytes()
    }

    fn run(&self, stream: &Stream, workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let operands = (&args.x, &args.y, Some(("mean", &args.mean)));
        self.red.run(OP, stream, workspace, &self.fw, operands)
    }
}

impl<T: Element, const N: usize, const M: usize> Backward for VarMeanPlan<T, N, M> {
    type BwArgs<'a> = VarMeanBwArgs<'a, T, N, M>;

    fn run_bw(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let out: [usize; M] = self.red.dims.output_array();
        let shape = &self.desc.shape;
        let mut views = vec![
            View::of("x", shape, &args.x),
            View::of("mean", &out, &args.mean),
            View::of_mut("dx", shape, &args.dx),
        ];
        let mut inputs = vec![byte_span("x", &args.x), byte_span("mean", &args.mean)];
        // The optional per-output inputs: (name, view).
        let optional = [("y", &args.y), ("dy", &args.dy), ("dmean", &args.dmean)];
        for (name, v) in optional {
            if let Some(v) = v {
                views.push(View::of(name, &out, v));
                inputs.push(byte_span(name, v));
            }
        }
        check_views(OP, stream, &views)?;
        if self.is_std() && args.dy.is_some() && args.y.is_none() {
            return Err(Error::InvalidArgument {
                op: OP,
                arg: "y",
                reason: "missing: the backward of std_mean reads the forward std".into(),
            });
        }
        check_disjoint(OP, &[byte_span("dx", &args.dx.as_const())], &inputs)?;
        let n = args.dx.n_elems();
        if n == 0 {
            return Ok(());
        }
        // Each per-output operand: its address and strides over x's dims.
        let spread = |v: &Option<TensorRef<'_, T, M>>| match v {
            Some(v) => (v.data().ptr(), self.red.dims.spread(v.strides())),
            None => (DevPtr::NULL, [0; N]),
        };
        let (y, dy, dmean) = (spread(&args.y), spread(&args.dy), spread(&args.dmean));
        let mean = spread(&Some(args.mean));
        let c = Collapsed::new(
            shape,
            [
                args.dx.strides(),
                args.x.strides(),
                &dy.1,
                &y.1,
                &mean.1,
                &dmean.1,
            ],
        );
        let p = VarMeanBwParams {
            dx: args.dx.data().ptr(),
            x: args.x.data().ptr(),
            dy: dy.0,
            y: y.0,
            mean: mean.0,
            dmean: dmean.0,
            n: n as u64,
            rank: c.rank,
            pad: 0,
            shape: c.shape,
            stride: c.strides,
            op: self.red.op,
        };
        // SAFETY: every view was bounds-checked at its construction and
        // its shape checked above; the kernel reaches only offsets of those
        // views (null operands are not read).
        unsafe { launch_elementwise(stream, n, self.red.sm_count, (&self.bw32, &self.bw64), p) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_layout_matches_cuda() {
        // 6 pointers, n, rank/pad, shape, 6 stride rows, OpArgs
        assert_eq!(
            core::mem::size_of::<VarMeanBwParams<f32>>(),
            48 + 8 + 8 + 64 + 6 * 64 + 24
        );
    }

    #[test]
    fn codes_follow_the_reductions() {
        assert_eq!((code(false), code(true)), (16, 17));
        assert!(super::super::reduce::OP_CODES.contains(&code(true)));
    }
}
