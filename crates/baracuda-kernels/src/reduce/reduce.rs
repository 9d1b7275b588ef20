//! Reductions over any subset of dims: `y = fold_{reduced dims} x`, and
//! the backward `dx`.
//!
//! The math of each op is in [`ReduceOp`] and at the top of
//! `kernels/reduce/reduce.cu`; the dims handling in `layout.rs`.

use core::marker::PhantomData;

use baracuda_driver::{Function, ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtr, DevPtrMut, Element, ElementKind, Error, Grad, Grads, KernelSku,
    PlanPreference, Result, TensorMut, TensorRef, Workspace,
};

use super::layout::{
    all_dims, reduced_dims_methods, state_bytes, stat_bytes, Aux, BwLaunch, ReduceKernels,
    Reduction, StatPair,
};
use crate::checks::{
    byte_span, check_disjoint, check_integer_op, check_output_element, check_views,
    invalid_descriptor, numeric_dtype_code, View,
};
use crate::kernel_sources;
use crate::plan::own_numeric_sku;
use crate::{Backward, Plan};

/// A reduction.
#[derive(Copy, Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ReduceOp {
    /// `sum x` (0 over nothing). Gradient `dy`.
    Sum,
    /// `sum x / n` (NaN over nothing). Gradient `dy / n`.
    Mean,
    /// `sum x` over the non-NaN elements. Gradient `dy`, 0 at NaNs.
    NanSum,
    /// `mean x` over the non-NaN elements. Gradient `dy / count`, 0 at NaNs.
    NanMean,
    /// `prod x` (1 over nothing). Gradient `dy * prod of the others`, also
    /// where `x` holds zeros.
    Prod,
    /// `max x`, NaN if any is NaN; an error over nothing. Gradient `dy`
    /// spread evenly over the elements equal to the max (PyTorch's `amax`).
    Amax,
    /// `min x`, as [`ReduceOp::Amax`].
    Amin,
    /// `sum (x - mean)^2 / max(n - correction, 0)` (`torch.var`).
    /// Gradient `2 dy (x - mean) / (n - correction)`.
    Var,
    /// `sqrt(var)` (`torch.std`). Gradient `var`'s with `dy / (2 std)`,
    /// 0 where `std` is 0.
    Std,
    /// `log sum exp x`, computed online from the max (-inf over nothing).
    /// Gradient `dy exp(x - y)`.
    LogSumExp,
    /// `(sum |x|^p)^(1/p)` (`torch.linalg.vector_norm`), with p = 0 (the
    /// count of non-zeros), inf (max |x|), -inf (min |x|) and any real p.
    /// Gradients as PyTorch's (ties of the inf norms share `dy`).
    Norm,
}

impl ReduceOp {
    /// Every op, in declaration order.
    pub const ALL: [ReduceOp; 11] = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::NanSum,
        ReduceOp::NanMean,
        ReduceOp::Prod,
        ReduceOp::Amax,
        ReduceOp::Amin,
        ReduceOp::Var,
        ReduceOp::Std,
        ReduceOp::LogSumExp,
        ReduceOp::Norm,
    ];

    /// The op's name (PyTorch's).
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::NanSum => "nansum",
            ReduceOp::NanMean => "nanmean",
            ReduceOp::Prod => "prod",
            ReduceOp::Amax => "amax",
            ReduceOp::Amin => "amin",
            ReduceOp::Var => "var",
            ReduceOp::Std => "std",
            ReduceOp::LogSumExp => "logsumexp",
            ReduceOp::Norm => "norm",
        }
    }

    /// True for the ops that take i32 and i64 inputs, as PyTorch's: sum,
    /// nansum (the sum: integers hold no NaN) and prod, whose output is
    /// i64, and amax and amin, whose output keeps the input's dtype. The
    /// others are float-only (PyTorch raises on integers).
    pub const fn takes_integers(self) -> bool {
        matches!(
            self,
            ReduceOp::Sum | ReduceOp::NanSum | ReduceOp::Prod | ReduceOp::Amax | ReduceOp::Amin
        )
    }

    /// True when the op has no value over an empty set (PyTorch raises).
    fn needs_elements(self, p: f64) -> bool {
        match self {
            ReduceOp::Amax | ReduceOp::Amin => true,
            ReduceOp::Norm => p.is_infinite(),
            _ => false,
        }
    }
}

/// The kernel of `op` (with norm order `p`): `BARACUDA_OP` of reduce.cu.
pub(crate) fn op_code(op: ReduceOp, p: f64) -> u32 {
    match op {
        ReduceOp::Sum => 0,
        ReduceOp::Mean => 1,
        ReduceOp::NanSum => 2,
        ReduceOp::NanMean => 3,
        ReduceOp::Prod => 4,
        ReduceOp::Amax => 5,
        ReduceOp::Amin => 6,
        ReduceOp::Var => 7,
        ReduceOp::Std => 8,
        ReduceOp::LogSumExp => 9,
        ReduceOp::Norm if p == 0.0 => 10,
        ReduceOp::Norm if p == 1.0 => 11,
        ReduceOp::Norm if p == 2.0 => 12,
        ReduceOp::Norm if p == f64::INFINITY => 13,
        ReduceOp::Norm if p == f64::NEG_INFINITY => 14,
        ReduceOp::Norm => 15,
    }
}

/// Kernels codes that compute a statistic before the backward (reduce.cu's
/// `STAT_OP`): nanmean, prod, amax, amin, var, std, the inf norms.
fn has_stat(code: u32) -> bool {
    matches!(code, 3..=8 | 13 | 14)
}

/// Kernel codes whose backward reads the forward output `y`.
fn bw_reads_y(code: u32) -> bool {
    matches!(code, 5 | 6 | 8 | 9 | 12..=15)
}

/// Every kernel code (`BARACUDA_OP`): the reductions' (0 to 15) and
/// var_mean's and std_mean's (16, 17, [`super::var_mean`]).
pub(crate) const OP_CODES: core::ops::RangeInclusive<u32> = 0..=17;

/// A reduction of a rank-`N` tensor of one element type.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct ReduceDescriptor<const N: usize> {
    /// The reduction.
    pub op: ReduceOp,
    /// Element type of `x` (and of `y`, but for the integer sums and
    /// products: [`ReduceDescriptor::output_element`]).
    pub element: ElementKind,
    /// Shape of `x`.
    pub shape: [usize; N],
    /// The reduced dims: bit `d` set reduces dim `d`. 0 reduces nothing
    /// (every output folds one element).
    pub dims: u32,
    /// `y` keeps the reduced dims with extent 1 (rank `N`); otherwise they
    /// are dropped (rank `N` minus the reduced dims).
    pub keepdim: bool,
    /// Var and std: the divisor is `n - correction` (PyTorch's default 1).
    pub correction: f64,
    /// Norm: the order p (PyTorch's default 2).
    pub p: f64,
}

impl<const N: usize> ReduceDescriptor<N> {
    /// `op` over every dim of `shape`, PyTorch's defaults otherwise
    /// (keepdim false, correction 1, p 2).
    pub fn new(op: ReduceOp, element: ElementKind, shape: [usize; N]) -> Self {
        ReduceDescriptor {
            op,
            element,
            shape,
            dims: all_dims(N),
            keepdim: false,
            correction: 1.0,
            p: 2.0,
        }
    }
    /// Element type of `y`, PyTorch's: i64 for sum, nansum and prod of
    /// an integer `x`, else `x`'s.
    pub fn output_element(&self) -> ElementKind {
        let sum_like = matches!(self.op, ReduceOp::Sum | ReduceOp::NanSum | ReduceOp::Prod);
        if sum_like && !self.element.is_float() {
            ElementKind::I64
        } else {
            self.element
        }
    }
    /// The var/std correction.
    pub fn with_correction(mut self, correction: f64) -> Self {
        self.correction = correction;
        self
    }
    /// The norm order.
    pub fn with_p(mut self, p: f64) -> Self {
        self.p = p;
        self
    }
}

reduced_dims_methods!(ReduceDescriptor);

/// Arguments of [`ReducePlan`]'s [`Plan::run`]; `O` is the output's
/// element type ([`ReduceDescriptor::output_element`]).
pub struct ReduceArgs<'a, T, const N: usize, const M: usize, O = T> {
    /// Input, any strides (0 = broadcast).
    pub x: TensorRef<'a, T, N>,
    /// Output, shape [`ReduceDescriptor::output_shape`], any
    /// non-overlapping strides; must not overlap `x`.
    pub y: TensorMut<'a, O, M>,
}

/// Arguments of [`ReducePlan`]'s [`Backward::run_bw`] (float plans only,
/// where `O` is `T`).
pub struct ReduceBwArgs<'a, T, const N: usize, const M: usize, O = T> {
    /// The forward input.
    pub x: TensorRef<'a, T, N>,
    /// The forward output: needed by amax, amin, std, logsumexp and the
    /// norms of p other than 0 and 1; ignored (but checked) otherwise.
    pub y: Option<TensorRef<'a, O, M>>,
    /// Gradient of the output.
    pub dy: TensorRef<'a, O, M>,
    /// Gradient of the input; must not overlap the other operands.
    pub dx: TensorMut<'a, T, N>,
}

/// A reduction over any subset of dims of a strided tensor, and its
/// backward. Deterministic: no atomics; a reduction split over several
/// blocks writes per-block states to the workspace and merges them in a
/// fixed order.
///
/// # Math
/// With `o` a position over the kept dims and `r` over the reduced ones,
/// `y[o] = fold_r x[o, r]` and `dx[o, r] = dy[o] * dfold/dx[o, r]`, the
/// fold and its gradient per [`ReduceOp`] (var and std with the
/// descriptor's `correction`, norm with its `p`).
/// # Shapes
/// `x`, `dx`: `desc.shape` (rank `N <= 8`); `y`, `dy`:
/// [`ReduceDescriptor::output_shape`] (rank `M`: `N` with keepdim, else
/// `N` minus the reduced dims).
/// # Layout
/// Any strides; `x` and `dy` may broadcast (stride 0). A reduction over
/// the innermost contiguous dims runs the row kernel (16-byte loads when
/// aligned), one over outer dims of a tensor whose innermost dim is kept
/// the column kernel; offsets are 64-bit.
/// # Workspace
/// `workspace_size()`: the per-block states of a split reduction (0 when
/// each output is folded by one block). `bw_workspace_size(Grad::X)`: for
/// nanmean, prod, amax, amin, var, std and the inf norms, whose backward
/// first reduces a statistic, one statistic per output plus that
/// reduction's split states; 0 for the others.
/// # Dtypes
/// f32, f64, f16, bf16; f16/bf16 accumulate in f32, f64 in f64. i32 and
/// i64 ([`ReduceOp::takes_integers`], as PyTorch): sum, nansum and prod
/// accumulate in i64 with two's complement wrap-around and write i64 (`O`
/// = i64), amax and amin write the input's dtype (`O` = `T`); exact, so
/// the same whatever the fold order. Others (and the float-only ops on
/// integers): `Error::Unsupported`.
/// # Gradient
/// Float plans only: the backward of an integer plan is
/// `Error::Unsupported` (PyTorch has no integer gradients).
/// # Empty reductions
/// sum, nansum, norm (p finite): 0; prod: 1; mean, nanmean, var, std: NaN;
/// logsumexp: -inf; amax, amin and the inf norms: `InvalidArgument` from
/// `select`, as PyTorch raises.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND` (arg
/// `desc.element`) or `O` is not [`ReduceDescriptor::output_element`]
/// (arg `y`); `Unsupported` for another dtype or a rank `N > 8`;
/// `InvalidDescriptor`
/// for dims past `N`, an `M` that does not match dims and keepdim, a NaN
/// p or correction; `InvalidArgument` for an empty amax, amin or inf-norm
/// reduction (above); `PreferenceRejected` when `pref` forces a backend
/// other than `Baracuda` or caps the workspace below `workspace_size()`;
/// the kernel JIT's errors. From `run` and `run_bw`: `ShapeMismatch` for
/// a view of another shape; `ContextMismatch` for a view or workspace on
/// another context; `WorkspaceTooSmall`; `InvalidArgument` for an output
/// overlapping an input, or a missing `y` in the backward of an op that
/// reads it.
pub struct ReducePlan<T: Element, const N: usize, const M: usize = N, O: Element = T> {
    desc: ReduceDescriptor<N>,
    sku: KernelSku,
    code: u32,
    fw: ReduceKernels,
    stat: Option<ReduceKernels>,
    /// The backward's 32- and 64-bit-index kernels; None on integers.
    bw: Option<(Function, Function)>,
    red: Reduction<N>,
    _t: PhantomData<(T, O)>,
}

pub(crate) const OP: &str = "reduce";

/// The module of op `code` on dtype code `dtype`.
pub(crate) fn spec(dtype: u32, code: u32) -> ModuleSpec {
    ModuleSpec::new(&kernel_sources::REDUCE)
        .define("BARACUDA_DTYPE", dtype)
        .define("BARACUDA_OP", code)
}

/// The checks `select` makes of `desc` for a plan of element `T`, output
/// element `O` and output rank `M` (reductions, var_mean): the dtype (an
/// integer one for the ops that take it), the output's, the dims and
/// keepdim, a NaN correction or norm order, an empty reduction of an op
/// without an identity, the backend; the dtype code.
pub(crate) fn check_descriptor<T: Element, O: Element, const N: usize, const M: usize>(
    desc: &ReduceDescriptor<N>,
    pref: &PlanPreference,
) -> Result<u32> {
    let dtype = numeric_dtype_code::<T, N>(OP, desc.element, "reductions take")?;
    let integers = " (integers: sum, nansum, prod, amax, amin)";
    check_integer_op::<T>(OP, desc.op.name(), desc.op.takes_integers(), integers)?;
    check_output_element::<O>(OP, desc.output_element())?;
    let dims = desc.dims();
    dims.check_mask::<M>(OP, desc.dims)?;
    if desc.correction.is_nan() {
        let why = "must be a number";
        return Err(invalid_descriptor(OP, "correction", "NaN".into(), why));
    }
    if desc.op == ReduceOp::Norm && desc.p.is_nan() {
        let why = "must be a number or +-inf";
        return Err(invalid_descriptor(OP, "p", "NaN".into(), why));
    }
    if dims.n_red() == 0 && desc.op.needs_elements(desc.p) {
        return Err(Error::InvalidArgument {
            op: OP,
            arg: "desc.shape",
            reason: format!(
                "{} over an empty set of elements has no identity",
                desc.op.name()
            ),
        });
    }
    pref.check_backend(OP, &[BackendKind::Baracuda])?;
    Ok(dtype)
}

impl<T: Element, const N: usize, const M: usize, O: Element> ReducePlan<T, N, M, O> {
    /// Bytes of the backward statistic.
    fn stat_bytes(&self) -> usize {
        if self.stat.is_some() {
            (self.red.dims.n_out() * stat_bytes::<T>()).next_multiple_of(256)
        } else {
            0
        }
    }
}

impl<T: Element, const N: usize, const M: usize, O: Element> Plan for ReducePlan<T, N, M, O> {
    type Descriptor = ReduceDescriptor<N>;
    type Args<'a> = ReduceArgs<'a, T, N, M, O>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let dtype = check_descriptor::<T, O, N, M>(desc, pref)?;
        let dims = desc.dims();
        let code = op_code(desc.op, desc.p);
        let module = stream.context().module(&spec(dtype, code))?;
        let sm_count = stream.context().device().sm_count;
        let plan = ReducePlan {
            desc: *desc,
            sku: own_numeric_sku::<T>(
                stream,
                format!("reduce.{}", desc.op.name()),
                "row / column / strided, split with a fixed-order combine",
            ),
            code,
            fw: ReduceKernels::load(&module, "reduce")?,
            stat: if has_stat(code) && T::KIND.is_float() {
                Some(ReduceKernels::load(&module, "stat")?)
            } else {
                None
            },
            bw: if T::KIND.is_float() {
                Some((module.function("reduce_bw32")?, module.function("reduce_bw64")?))
            } else {
                None
            },
            red: Reduction::new(dims, sm_count, state_bytes::<T>())
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
        let operands = (&args.x, &args.y, None);
        self.red.run(OP, stream, workspace, &self.fw, operands)
    }
}

impl<T: Element, const N: usize, const M: usize, O: Element> Backward for ReducePlan<T, N, M, O> {
    type BwArgs<'a> = ReduceBwArgs<'a, T, N, M, O>;

    fn bw_workspace_size(&self, wants: Grads) -> usize {
        if wants.contains(Grad::X) && self.stat.is_some() {
            self.stat_bytes() + self.red.partial_bytes()
        } else {
            0
        }
    }

    fn run_bw(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let Some((bw32, bw64)) = &self.bw else {
            return Err(Error::Unsupported {
                op: OP,
                what: format!(
                    "the backward of {} on dtype {}: integer outputs have no gradient",
                    self.desc.op.name(),
                    T::KIND
                ),
            });
        };
        let out: [usize; M] = self.red.dims.output_array();
        let shape = &self.desc.shape;
        let views = [
            View::of("x", shape, &args.x),
            View::of("dy", &out, &args.dy),
            View::of_mut("dx", shape, &args.dx),
        ];
        check_views(OP, stream, &views)?;
        let y = match (&args.y, bw_reads_y(self.code)) {
            (Some(y), _) => {
                check_views(OP, stream, &[View::of("y", &out, y)])?;
                Some(*y)
            }
            (None, false) => None,
            (None, true) => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    arg: "y",
                    reason: format!(
                        "missing: the backward of {} reads the forward output",
                        self.desc.op.name()
                    ),
                })
            }
        };
        let ctx = stream.context().id();
        let ws = workspace.check_ptr(OP, self.bw_workspace_size(Grad::X.into()), ctx)?;
        // A float plan: O is T.
        let (xp, dyp, dxp) = (args.x.data().ptr(), args.dy.data().ptr().cast::<T>(), args.dx.data().ptr());
        let mut inputs = vec![byte_span("x", &args.x), byte_span("dy", &args.dy)];
        if let Some(y) = &y {
            inputs.push(byte_span("y", y));
        }
        check_disjoint(OP, &[byte_span("dx", &args.dx.as_const())], &inputs)?;
        if args.x.n_elems() == 0 {
            return Ok(());
        }
        let (yp, y_strides) = match &y {
            Some(y) => (y.data().ptr().cast::<T>(), self.red.dims.spread(y.strides())),
            None => (DevPtr::NULL, [0; N]),
        };
        // The statistic: one Stat2 per output, dense over the kept dims.
        let stat_ptr: DevPtrMut<StatPair> = ws.cast();
        let stat_strides = self.red.dims.dense_strides(false);
        if let Some(stat) = &self.stat {
            let partial = ws.byte_add(self.stat_bytes());
            // SAFETY: the views were bounds-checked at their construction
            // and their shapes checked above; the statistic and the split
            // states lie in the checked workspace.
            unsafe {
                self.red.launch(
                    stream,
                    stat,
                    (xp, args.x.strides()),
                    (stat_ptr, stat_strides),
                    (Aux::Input(yp), y_strides),
                    partial,
                )
            }?;
        }
        let dy_strides = self.red.dims.spread(args.dy.strides());
        let bw = BwLaunch {
            dx: (dxp, args.dx.strides().as_slice()),
            x: (xp, args.x.strides().as_slice()),
            dy: (dyp, dy_strides.as_slice()),
            y: (yp, y_strides.as_slice()),
            stat: (
                if self.stat.is_some() {
                    stat_ptr.as_const()
                } else {
                    DevPtr::NULL
                },
                stat_strides.as_slice(),
            ),
            op: self.red.op,
        };
        // SAFETY: every view was bounds-checked at construction and its
        // shape checked above; the statistic spans n_out Stat2 of the
        // checked workspace.
        unsafe {
            bw.run(
                stream,
                &self.desc.shape,
                bw32,
                bw64,
                self.red.sm_count,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_shapes_follow_keepdim() {
        let d = ReduceDescriptor::new(ReduceOp::Sum, ElementKind::F32, [2, 3, 4]).with_dims(&[0, 2]);
        assert_eq!(d.output_shape(), vec![3]);
        assert_eq!(d.with_keepdim(true).output_shape(), vec![1, 3, 1]);
        let all = ReduceDescriptor::new(ReduceOp::Sum, ElementKind::F32, [2, 3]);
        assert_eq!(all.output_shape(), Vec::<usize>::new());
        assert_eq!(all.with_dims(&[]).output_shape(), vec![2, 3]);
        assert!(all.with_dims(&[40]).is_reduced(31));
    }

    #[test]
    fn norm_orders_pick_their_kernels() {
        let codes: Vec<u32> = [0.0, 1.0, 2.0, f64::INFINITY, f64::NEG_INFINITY, 3.5, -1.0]
            .iter()
            .map(|&p| op_code(ReduceOp::Norm, p))
            .collect();
        assert_eq!(codes, [10, 11, 12, 13, 14, 15, 15]);
        assert!(ReduceOp::Norm.needs_elements(f64::NEG_INFINITY));
        assert!(!ReduceOp::Norm.needs_elements(2.0));
        assert!(ReduceOp::ALL.iter().all(|&o| OP_CODES.contains(&op_code(o, 2.0))));
    }
}
