//! `torch.trace`: the sum of a matrix's diagonal, `y = sum_i x[i, i]`,
//! and the backward `dx = dy` on the diagonal, 0 elsewhere.
//!
//! The diagonal of an `[m, n]` view with strides `(s0, s1)` is a 1-D view
//! of `min(m, n)` elements with stride `s0 + s1`; the forward is
//! [`ReducePlan`]'s sum over it (its row kernel, split over blocks when
//! the diagonal is long). The backward is `trace_bw` of the sum's module
//! (`kernels/reduce/reduce.cu`), one pass writing every element of `dx`.

use baracuda_driver::{Function, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtr, DevPtrMut, Element, ElementKind, Error, KernelSku, PlanPreference, Result,
    TensorMut, TensorRef, Workspace,
};

use super::layout::launch_elementwise;
use super::reduce::{op_code, spec};
use super::{ReduceArgs, ReduceDescriptor, ReduceOp, ReducePlan};
use crate::checks::{
    byte_span, check_disjoint, check_output_element, check_views, numeric_dtype_code, View,
};
use crate::plan::own_numeric_sku;
use crate::{Backward, Plan};

const OP: &str = "trace";

/// The trace of a matrix.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TraceDescriptor {
    /// Element type of `x` (and of `y`, but for integers:
    /// [`TraceDescriptor::output_element`]).
    pub element: ElementKind,
    /// Shape of `x`: `[rows, cols]`, not necessarily square.
    pub shape: [usize; 2],
}

impl TraceDescriptor {
    /// The trace of a `[rows, cols]` matrix of `element`.
    pub fn new(element: ElementKind, rows: usize, cols: usize) -> Self {
        TraceDescriptor {
            element,
            shape: [rows, cols],
        }
    }
    /// Element type of `y`, PyTorch's: i64 for an integer `x`, else `x`'s.
    pub fn output_element(&self) -> ElementKind {
        self.sum_descriptor().output_element()
    }
    /// The sum over the diagonal, a 1-D view of `min(rows, cols)` elements.
    fn sum_descriptor(&self) -> ReduceDescriptor<1> {
        ReduceDescriptor::new(ReduceOp::Sum, self.element, [self.diagonal_len()])
    }
    /// Elements on the diagonal: `min(rows, cols)`.
    pub fn diagonal_len(&self) -> usize {
        self.shape[0].min(self.shape[1])
    }
}

/// Arguments of [`TracePlan`]'s [`Plan::run`]; `O` is the trace's
/// element type ([`TraceDescriptor::output_element`]).
pub struct TraceArgs<'a, T, O = T> {
    /// The matrix, any strides (0 = broadcast).
    pub x: TensorRef<'a, T, 2>,
    /// The trace, a rank-0 view (as `torch.trace` returns); must not
    /// overlap `x`.
    pub y: TensorMut<'a, O, 0>,
}

/// Arguments of [`TracePlan`]'s [`Backward::run_bw`] (float plans only,
/// where `O` is `T`).
pub struct TraceBwArgs<'a, T, O = T> {
    /// Gradient of the trace.
    pub dy: TensorRef<'a, O, 0>,
    /// Gradient of the matrix, any non-overlapping strides: `dy` on the
    /// diagonal and 0 elsewhere, every element written; must not overlap
    /// `dy`.
    pub dx: TensorMut<'a, T, 2>,
}

/// The trace of a matrix (`torch.trace`) and its backward.
///
/// # Math
/// `y = sum_{i < min(m, n)} x[i, i]` (0 for an empty matrix);
/// `dx[i, j] = dy` where `i == j`, else 0.
/// # Shapes
/// `x`, `dx`: `desc.shape` `[m, n]`; `y`, `dy`: rank 0.
/// # Layout
/// Any strides of `x` and `dx`. The forward reads only the diagonal,
/// through the 1-D view of stride `s0 + s1`, as [`ReducePlan`]'s sum
/// (deterministic, split with a fixed-order combine when long).
/// # Workspace
/// `workspace_size()`: the sum's split states (0 when one block sums the
/// diagonal). The backward takes none.
/// # Dtypes
/// f32, f64, f16, bf16; f16/bf16 accumulate in f32, f64 in f64. i32 and
/// i64 (as PyTorch's CUDA trace): summed in i64 with two's complement
/// wrap-around, the trace an i64 (`O` = i64), exact. Others:
/// `Error::Unsupported`.
/// # Gradient
/// Float plans only: the backward of an integer plan is
/// `Error::Unsupported` (PyTorch has no integer gradients).
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND` or `O` is
/// not [`TraceDescriptor::output_element`];
/// `Unsupported` for another dtype; `PreferenceRejected` when `pref`
/// forces a backend other than `Baracuda` or caps the workspace below
/// `workspace_size()`; the kernel JIT's errors. From `run` and `run_bw`:
/// `ShapeMismatch` for a view of another shape; `ContextMismatch` for a
/// view or workspace on another context; `WorkspaceTooSmall`;
/// `InvalidArgument` for an output overlapping an input.
pub struct TracePlan<T: Element, O: Element = T> {
    desc: TraceDescriptor,
    sku: KernelSku,
    sum: ReducePlan<T, 1, 0, O>,
    /// The backward's 32- and 64-bit-index kernels; None on integers.
    bw: Option<(Function, Function)>,
    sm_count: u32,
}

/// `TraceBwParams` of reduce.cu.
#[repr(C)]
#[derive(Copy, Clone)]
struct TraceBwParams<T> {
    dx: DevPtrMut<T>,
    dy: DevPtr<T>,
    rows: u64,
    cols: u64,
    s0: i64,
    s1: i64,
}

impl<T: Element, O: Element> Plan for TracePlan<T, O> {
    type Descriptor = TraceDescriptor;
    type Args<'a> = TraceArgs<'a, T, O>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let dtype = numeric_dtype_code::<T, 2>(OP, desc.element, "trace takes")?;
        check_output_element::<O>(OP, desc.output_element())?;
        pref.check_backend(OP, &[BackendKind::Baracuda])?;
        let uncapped = PlanPreference {
            max_workspace_bytes: None,
            ..*pref
        };
        let sum = ReducePlan::<T, 1, 0, O>::select(stream, &desc.sum_descriptor(), &uncapped)?;
        pref.check_workspace(OP, sum.workspace_size())?;
        let bw = if T::KIND.is_float() {
            let module = stream
                .context()
                .module(&spec(dtype, op_code(ReduceOp::Sum, 2.0)))?;
            Some((module.function("trace_bw32")?, module.function("trace_bw64")?))
        } else {
            None
        };
        Ok(TracePlan {
            desc: *desc,
            sku: own_numeric_sku::<T>(
                stream,
                "reduce.trace".into(),
                "sum of the strided diagonal view (row, split with a fixed-order combine)",
            ),
            sum,
            bw,
            sm_count: stream.context().device().sm_count,
        })
    }

    fn sku(&self) -> &KernelSku {
        &self.sku
    }

    fn workspace_size(&self) -> usize {
        self.sum.workspace_size()
    }

    fn run(&self, stream: &Stream, workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let x = &args.x;
        let views = [
            View::of("x", &self.desc.shape, x),
            View::of_mut("y", &[], &args.y),
        ];
        check_views(OP, stream, &views)?;
        workspace.check(OP, self.workspace_size(), stream.context().id())?;
        check_disjoint(OP, &[byte_span("y", &args.y.as_const())], &[byte_span("x", x)])?;
        let [s0, s1] = *x.strides();
        // The diagonal: every element lies in x's view, so in its buffer.
        let diagonal = TensorRef::new(x.data(), [self.desc.diagonal_len()], [s0 + s1])?;
        self.sum.run(
            stream,
            workspace,
            ReduceArgs {
                x: diagonal,
                y: args.y,
            },
        )
    }
}

impl<T: Element, O: Element> Backward for TracePlan<T, O> {
    type BwArgs<'a> = TraceBwArgs<'a, T, O>;

    fn run_bw(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let Some((bw32, bw64)) = &self.bw else {
            return Err(Error::Unsupported {
                op: OP,
                what: format!("the backward of trace on dtype {}: integer outputs have no gradient", T::KIND),
            });
        };
        let [rows, cols] = self.desc.shape;
        let views = [
            View::of("dy", &[], &args.dy),
            View::of_mut("dx", &self.desc.shape, &args.dx),
        ];
        check_views(OP, stream, &views)?;
        check_disjoint(
            OP,
            &[byte_span("dx", &args.dx.as_const())],
            &[byte_span("dy", &args.dy)],
        )?;
        let n = rows * cols;
        if n == 0 {
            return Ok(());
        }
        let [s0, s1] = *args.dx.strides();
        let p = TraceBwParams {
            dx: args.dx.data().ptr(),
            // A float plan: O is T.
            dy: args.dy.data().ptr().cast::<T>(),
            rows: rows as u64,
            cols: cols as u64,
            s0: s0 as i64,
            s1: s1 as i64,
        };
        // SAFETY: dx and dy were bounds-checked at their views'
        // construction and their shapes checked above; the kernel writes
        // dx's rows x cols elements at its strides and reads dy's one.
        unsafe { launch_elementwise(stream, n, self.sm_count, (bw32, bw64), p) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diagonal_is_the_shorter_side() {
        assert_eq!(TraceDescriptor::new(ElementKind::F32, 3, 5).diagonal_len(), 3);
        assert_eq!(TraceDescriptor::new(ElementKind::F32, 7, 2).diagonal_len(), 2);
        assert_eq!(TraceDescriptor::new(ElementKind::F32, 0, 4).diagonal_len(), 0);
    }

    #[test]
    fn params_layout_matches_cuda() {
        assert_eq!(core::mem::size_of::<TraceBwParams<f32>>(), 48);
    }
}
