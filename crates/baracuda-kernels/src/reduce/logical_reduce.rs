//! Logical reductions over any subset of dims: `torch.all`, `torch.any`
//! and `torch.count_nonzero`, `c[o] = #{r : x[o, r] != 0}` and then
//! `c == n`, `c != 0` or `c` itself.
//!
//! The kernels are `kernels/reduce/logical_reduce.cu`: the row, column and
//! combine kernels of [`ReducePlan`](super::ReducePlan)
//! (`kernels/common/reduce_dims.cuh`) with the count as their fold; the
//! dims are merged and ordered, and the row, column or split launch
//! chosen, by `layout.rs`'s `Reduction`, as for `ReducePlan`.

use core::marker::PhantomData;

use baracuda_driver::{ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, Element, ElementKind, Error, KernelSku, MathPrecision, PlanPreference,
    PrecisionGuarantee, Result, TensorMut, TensorRef, Workspace, MAX_RANK,
};

use super::layout::{all_dims, reduced_dims_methods, ReduceKernels, Reduction};
use crate::checks::check_output_element;
use crate::kernel_sources;
use crate::Plan;

/// A logical reduction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogicalReduceOp {
    /// Every element is nonzero (`torch.all`); true over nothing.
    All,
    /// Some element is nonzero (`torch.any`); false over nothing.
    Any,
    /// The number of nonzero elements (`torch.count_nonzero`), as i64.
    CountNonzero,
}

impl LogicalReduceOp {
    /// Every op, in declaration order.
    pub const ALL: [LogicalReduceOp; 3] = [
        LogicalReduceOp::All,
        LogicalReduceOp::Any,
        LogicalReduceOp::CountNonzero,
    ];

    /// The op's name (PyTorch's).
    pub fn name(self) -> &'static str {
        match self {
            LogicalReduceOp::All => "all",
            LogicalReduceOp::Any => "any",
            LogicalReduceOp::CountNonzero => "count_nonzero",
        }
    }

    /// `LOGICAL_OP` of logical_reduce.cu.
    fn code(self) -> u32 {
        match self {
            LogicalReduceOp::All => 0,
            LogicalReduceOp::Any => 1,
            LogicalReduceOp::CountNonzero => 2,
        }
    }
}

/// The input kinds the plan takes: every kind but u32 and the fp8 kinds
/// (f32, f64, f16, bf16, i8, u8, i16, i32, i64, bool).
pub const LOGICAL_REDUCE_KINDS: [ElementKind; 10] = kernel_sources::kinds_except(&[
    ElementKind::U32,
    ElementKind::Fp8E4M3,
    ElementKind::Fp8E5M2,
]);

/// How logical_reduce.cu reads an input kind: its width in bytes and
/// whether it is a float (whose sign bit alone is zero), or None for a
/// kind the plan does not take.
fn storage(kind: ElementKind) -> Option<(u32, bool)> {
    LOGICAL_REDUCE_KINDS
        .contains(&kind)
        .then(|| (kind.size_bytes() as u32, kind.is_float()))
}

/// A logical reduction of a rank-`N` tensor.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct LogicalReduceDescriptor<const N: usize> {
    /// The reduction.
    pub op: LogicalReduceOp,
    /// Element type of `x`.
    pub element: ElementKind,
    /// Shape of `x`.
    pub shape: [usize; N],
    /// The reduced dims: bit `d` set reduces dim `d`. 0 reduces nothing
    /// (every output tests one element).
    pub dims: u32,
    /// `y` keeps the reduced dims with extent 1 (rank `N`); otherwise they
    /// are dropped.
    pub keepdim: bool,
}

impl<const N: usize> LogicalReduceDescriptor<N> {
    /// `op` over every dim of `shape`, keepdim false (PyTorch's defaults).
    pub fn new(op: LogicalReduceOp, element: ElementKind, shape: [usize; N]) -> Self {
        LogicalReduceDescriptor {
            op,
            element,
            shape,
            dims: all_dims(N),
            keepdim: false,
        }
    }
    /// Element type of `y`, PyTorch's: i64 for count_nonzero; for all and
    /// any u8 when `x` is u8, else bool.
    pub fn output_element(&self) -> ElementKind {
        match (self.op, self.element) {
            (LogicalReduceOp::CountNonzero, _) => ElementKind::I64,
            (_, ElementKind::U8) => ElementKind::U8,
            _ => ElementKind::Bool,
        }
    }
}

reduced_dims_methods!(LogicalReduceDescriptor);

/// Arguments of [`LogicalReducePlan`]'s [`Plan::run`].
pub struct LogicalReduceArgs<'a, I, O, const N: usize, const M: usize> {
    /// Input, any strides (0 = broadcast).
    pub x: TensorRef<'a, I, N>,
    /// Output, shape [`LogicalReduceDescriptor::output_shape`], any
    /// non-overlapping strides; must not overlap `x`.
    pub y: TensorMut<'a, O, M>,
}

/// `torch.all`, `torch.any` or `torch.count_nonzero` over any subset of
/// dims of a strided tensor. Deterministic: the state is an exact count,
/// and a reduction split over several blocks adds per-block counts from
/// the workspace.
///
/// # Math
/// With `o` a position over the kept dims and `r` over the reduced ones
/// (`n` of them), `c[o] = #{r : x[o, r] != 0}`; all: `y[o] = (c[o] == n)`,
/// any: `y[o] = (c[o] != 0)`, count_nonzero: `y[o] = c[o]`. NaN is nonzero,
/// -0.0 is zero. Over no element: all true, any false, count 0.
/// # Shapes
/// `x`: `desc.shape` (rank `N <= 8`); `y`:
/// [`LogicalReduceDescriptor::output_shape`] (rank `M`: `N` with keepdim,
/// else `N` minus the reduced dims).
/// # Layout
/// Any strides; `x` may broadcast (stride 0). The row, column and split
/// kernels of [`ReducePlan`](super::ReducePlan), 16-byte loads when
/// aligned; offsets are 64-bit.
/// # Workspace
/// `workspace_size()`: one u64 count per output and split of a split
/// reduction (0 when each output is reduced by one block).
/// # Dtypes
/// `x` ([`LOGICAL_REDUCE_KINDS`]): f32, f64, f16, bf16, i8, u8, i16, i32,
/// i64, bool. `y` ([`LogicalReduceDescriptor::output_element`], PyTorch's):
/// all and any give bool, or u8 for a u8 `x`; count_nonzero gives i64.
/// fp8 and u32 `x`: `Error::Unsupported`.
/// # Gradient
/// None: the outputs are not differentiable, and the plan has no
/// [`Backward`](crate::Backward).
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != I::KIND` (arg
/// `desc.element`) or `O` is not the output element (arg `y`);
/// `Unsupported` for another input dtype or a rank `N > 8`;
/// `InvalidDescriptor` for dims past `N` or an `M` that does not match
/// dims and keepdim; `PreferenceRejected` when `pref` forces a backend
/// other than `Baracuda` or caps the workspace below `workspace_size()`;
/// the kernel JIT's errors. From `run`: `ShapeMismatch`,
/// `ContextMismatch` (a view or the workspace on another context),
/// `WorkspaceTooSmall`, and `InvalidArgument` for `y` overlapping `x`.
pub struct LogicalReducePlan<I: Element, O: Element, const N: usize, const M: usize = N> {
    sku: KernelSku,
    kernels: ReduceKernels,
    red: Reduction<N>,
    _t: PhantomData<(I, O)>,
}

const OP: &str = "reduce";

/// Bytes of one kernel state and split count (a u64).
const COUNT_BYTES: usize = 8;

/// The module of `op` on elements of `bytes` bytes, floats or not.
pub(crate) fn spec(bytes: u32, float: bool, op: LogicalReduceOp) -> ModuleSpec {
    ModuleSpec::new(&kernel_sources::LOGICAL_REDUCE)
        .define("LOGICAL_BYTES", bytes)
        .define("LOGICAL_FLOAT", u32::from(float))
        .define("LOGICAL_OP", op.code())
}

/// Every module the plan can request: each op on each (width, float)
/// pair of [`LOGICAL_REDUCE_KINDS`].
pub(crate) fn specs() -> Vec<ModuleSpec> {
    let mut storages: Vec<(u32, bool)> = LOGICAL_REDUCE_KINDS.iter().filter_map(|&k| storage(k)).collect();
    storages.sort_unstable();
    storages.dedup();
    storages
        .into_iter()
        .flat_map(|(b, f)| LogicalReduceOp::ALL.map(move |op| spec(b, f, op)))
        .collect()
}

/// The descriptor checks of `select`, before it touches the GPU: the
/// (width, float) pair the kernel reads the input as.
pub(crate) fn validate<I: Element, O: Element, const N: usize, const M: usize>(
    desc: &LogicalReduceDescriptor<N>,
) -> Result<(u32, bool)> {
    if desc.element != I::KIND {
        return Err(Error::DtypeMismatch {
            op: OP,
            arg: "desc.element",
            expected: I::KIND,
            got: desc.element,
        });
    }
    let storage = storage(I::KIND).ok_or_else(|| Error::Unsupported {
        op: OP,
        what: format!(
            "{} on dtype {}; logical reductions take f32, f64, f16, bf16, i8, u8, i16, i32, i64 and bool",
            desc.op.name(),
            I::KIND
        ),
    })?;
    if N > MAX_RANK {
        return Err(Error::Unsupported {
            op: OP,
            what: format!("rank {N} > {MAX_RANK}"),
        });
    }
    check_output_element::<O>(OP, desc.output_element())?;
    desc.dims().check_mask::<M>(OP, desc.dims)?;
    Ok(storage)
}

impl<I: Element, O: Element, const N: usize, const M: usize> Plan for LogicalReducePlan<I, O, N, M> {
    type Descriptor = LogicalReduceDescriptor<N>;
    type Args<'a> = LogicalReduceArgs<'a, I, O, N, M>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let (bytes, float) = validate::<I, O, N, M>(desc)?;
        pref.check_backend(OP, &[BackendKind::Baracuda])?;
        let module = stream.context().module(&spec(bytes, float, desc.op))?;
        let sm_count = stream.context().device().sm_count;
        let plan = LogicalReducePlan {
            sku: KernelSku {
                op: format!("reduce.{}", desc.op.name()),
                element: I::KIND,
                backend: BackendKind::Baracuda,
                arch: stream.context().device().arch,
                variant: "row / column / strided, split with a fixed-order combine".into(),
                precision: PrecisionGuarantee {
                    math: MathPrecision::Integer,
                    accumulator: ElementKind::I64,
                    deterministic: true,
                    bit_stable_on_same_hardware: true,
                },
            },
            kernels: ReduceKernels::load(&module, "logical")?,
            red: Reduction::new(desc.dims(), sm_count, COUNT_BYTES),
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
        self.red.run(OP, stream, workspace, &self.kernels, (&args.x, &args.y, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_elements_follow_pytorch() {
        let d = |op, k| LogicalReduceDescriptor::new(op, k, [2, 3]).output_element();
        assert_eq!(d(LogicalReduceOp::All, ElementKind::F32), ElementKind::Bool);
        assert_eq!(d(LogicalReduceOp::Any, ElementKind::Bool), ElementKind::Bool);
        assert_eq!(d(LogicalReduceOp::Any, ElementKind::U8), ElementKind::U8);
        assert_eq!(d(LogicalReduceOp::All, ElementKind::I8), ElementKind::Bool);
        assert_eq!(d(LogicalReduceOp::CountNonzero, ElementKind::U8), ElementKind::I64);
    }

    #[test]
    fn output_shapes_follow_dims_and_keepdim() {
        let d = LogicalReduceDescriptor::new(LogicalReduceOp::Any, ElementKind::F32, [2, 3, 4]);
        assert_eq!(d.output_shape(), Vec::<usize>::new());
        assert_eq!(d.with_dims(&[1]).output_shape(), vec![2, 4]);
        assert_eq!(d.with_dims(&[0, 2]).with_keepdim(true).output_shape(), vec![1, 3, 1]);
        assert_eq!(d.with_dims(&[]).output_shape(), vec![2, 3, 4]);
    }

    #[test]
    fn kinds_share_modules_by_width() {
        assert_eq!(storage(ElementKind::F16), storage(ElementKind::Bf16));
        assert_eq!(storage(ElementKind::Bool), Some((1, false)));
        assert_eq!(storage(ElementKind::F64), Some((8, true)));
        assert_eq!(storage(ElementKind::U32), None);
        assert_eq!(storage(ElementKind::Fp8E4M3), None);
        // (1, int) (2, int) (2, float) (4, int) (4, float) (8, int) (8, float)
        assert_eq!(specs().len(), 7 * 3);
    }

    #[test]
    fn validation_names_the_bad_field() {
        let d = LogicalReduceDescriptor::new(LogicalReduceOp::All, ElementKind::F32, [4, 5]).with_dims(&[1]);
        assert_eq!(validate::<f32, bool, 2, 1>(&d).ok(), Some((4, true)));
        let e = validate::<f32, i64, 2, 1>(&d).unwrap_err();
        assert!(matches!(e, Error::DtypeMismatch { arg: "y", .. }), "{e}");
        let e = validate::<f64, bool, 2, 1>(&d).unwrap_err();
        assert!(matches!(e, Error::DtypeMismatch { arg: "desc.element", .. }), "{e}");
        let e = validate::<f32, bool, 2, 2>(&d).unwrap_err();
        assert!(matches!(e, Error::InvalidDescriptor { field: "keepdim", .. }), "{e}");
        let e = validate::<f32, bool, 2, 1>(&d.with_dims(&[2])).unwrap_err();
        assert!(matches!(e, Error::InvalidDescriptor { field: "dims", .. }), "{e}");
        let u = LogicalReduceDescriptor::new(LogicalReduceOp::Any, ElementKind::U32, [4]);
        let e = validate::<u32, bool, 1, 0>(&u).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        let c = LogicalReduceDescriptor::new(LogicalReduceOp::CountNonzero, ElementKind::U8, [4]);
        assert_eq!(validate::<u8, i64, 1, 0>(&c).ok(), Some((1, false)));
    }
}
