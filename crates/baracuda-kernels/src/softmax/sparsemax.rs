//! Sparsemax along one dim (Martins & Astudillo 2016): the Euclidean
//! projection of a row onto the probability simplex, `y = max(x - tau,
//! 0)` with `sum y = 1`, and its backward.
//!
//! The method is at the top of `kernels/softmax/sparsemax.cu`.

use core::marker::PhantomData;

use baracuda_driver::{Function, LaunchConfig, ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtr, DevPtrMut, Element, ElementKind, KernelSku, PlanPreference, Result,
    TensorMut, TensorRef, Workspace, MAX_RANK,
};

use crate::checks::{byte_span, check_dim, check_disjoint, check_views, float_dtype_code, View};
use crate::kernel_sources;
use crate::launch::{grid_x, launch_params, padded};
use crate::plan::own_float_sku;
use crate::{Backward, Plan};

/// A sparsemax of a rank-`N` tensor along `dim`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SparsemaxDescriptor<const N: usize> {
    /// Element type of every tensor.
    pub element: ElementKind,
    /// Shape of `x` (and of `y`, `dy`, `dx`).
    pub shape: [usize; N],
    /// The dim the projection runs along.
    pub dim: usize,
}

impl<const N: usize> SparsemaxDescriptor<N> {
    /// Sparsemax along the last dim of `shape`.
    pub fn new(element: ElementKind, shape: [usize; N]) -> Self {
        SparsemaxDescriptor {
            element,
            shape,
            dim: N.saturating_sub(1),
        }
    }
    /// Run along `dim`.
    pub fn with_dim(mut self, dim: usize) -> Self {
        self.dim = dim;
        self
    }
}

/// Arguments of [`SparsemaxPlan`]'s [`Plan::run`].
pub struct SparsemaxArgs<'a, T, const N: usize> {
    /// Input, any strides (0 = broadcast).
    pub x: TensorRef<'a, T, N>,
    /// Output, any non-overlapping strides; must not overlap `x`.
    pub y: TensorMut<'a, T, N>,
}

/// Arguments of [`SparsemaxPlan`]'s [`Backward::run_bw`].
pub struct SparsemaxBwArgs<'a, T, const N: usize> {
    /// The forward output (its support is where it is > 0).
    pub y: TensorRef<'a, T, N>,
    /// Gradient of the output.
    pub dy: TensorRef<'a, T, N>,
    /// Gradient of the input; must not overlap `y` or `dy`.
    pub dx: TensorMut<'a, T, N>,
}

/// Sparsemax along one dim of a strided tensor, and its backward.
///
/// # Math
/// `y = max(x - tau, 0)`, `tau` the threshold with `sum y = 1` along the
/// dim (exact: bisection to a lower bound, then Michelot's iteration to
/// the support's fixed point). Backward on the support `S = {y > 0}`:
/// `dx = dy - mean_S dy`, 0 off it.
/// # Shapes
/// Every tensor `desc.shape` (rank `1 <= N <= 8`), any extent (an empty
/// tensor writes nothing). No workspace.
/// # Layout
/// Any strides; `x`, `y` (backward) and `dy` may broadcast. A thread group
/// per row, element loads; the forward passes over a row about two dozen
/// times (from L2). 64-bit offsets. Deterministic.
/// # Dtypes
/// f32, f64, f16, bf16 (f32 arithmetic, f64 in f64). Others:
/// `Unsupported`.
/// # Special values
/// A row holding NaN or +inf, or only -inf, is NaN throughout; other -inf
/// elements are 0.
/// # Errors
/// From `select`: `DtypeMismatch`, `Unsupported` (dtype, rank > 8),
/// `InvalidDescriptor` for `dim` past the rank, `PreferenceRejected`; the
/// JIT's. From `run` and `run_bw`: `ShapeMismatch`, `ContextMismatch`,
/// `InvalidArgument` for an output overlapping an input.
pub struct SparsemaxPlan<T: Element, const N: usize> {
    desc: SparsemaxDescriptor<N>,
    sku: KernelSku,
    fw: Function,
    bw: Function,
    sm_count: u32,
    _t: PhantomData<T>,
}

const OP: &str = "sparsemax";

/// The module of dtype code `dtype`.
pub(crate) fn spec(dtype: u32) -> ModuleSpec {
    ModuleSpec::new(&kernel_sources::SPARSEMAX).define("BARACUDA_DTYPE", dtype)
}

/// The checks `select` runs before it touches the GPU.
pub(crate) fn validate<T: Element, const N: usize>(desc: &SparsemaxDescriptor<N>) -> Result<u32> {
    let dtype = float_dtype_code::<T, N>(OP, desc.element, "sparsemax takes")?;
    check_dim::<N>(OP, desc.dim)?;
    Ok(dtype)
}

impl<T: Element, const N: usize> Plan for SparsemaxPlan<T, N> {
    type Descriptor = SparsemaxDescriptor<N>;
    type Args<'a> = SparsemaxArgs<'a, T, N>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let dtype = validate::<T, N>(desc)?;
        pref.check_backend(OP, &[BackendKind::Baracuda])?;
        pref.check_workspace(OP, 0)?;
        let ctx = stream.context();
        let module = ctx.module(&spec(dtype))?;
        Ok(SparsemaxPlan {
            desc: *desc,
            sku: own_float_sku::<T>(
                stream,
                "sparsemax".into(),
                "a thread group per row, bisection then Michelot",
            ),
            fw: module.function("sparsemax_fw")?,
            bw: module.function("sparsemax_bw")?,
            sm_count: ctx.device().sm_count,
            _t: PhantomData,
        })
    }

    fn sku(&self) -> &KernelSku {
        &self.sku
    }

    fn workspace_size(&self) -> usize {
        0
    }

    fn run(&self, stream: &Stream, _workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let shape = &self.desc.shape;
        let (x, y) = (&args.x, &args.y);
        check_views(OP, stream, &[View::of("x", shape, x), View::of_mut("y", shape, y)])?;
        check_disjoint(OP, &[byte_span("y", &y.as_const())], &[byte_span("x", x)])?;
        let zero = [0usize; N];
        // SAFETY: both views were bounds-checked at construction and have
        // the plan's shape; they do not overlap.
        unsafe {
            self.launch(
                stream,
                &self.fw,
                (x.data().ptr(), x.strides()),
                (DevPtr::NULL, &zero),
                (y.data().ptr(), y.strides()),
            )
        }
    }
}

impl<T: Element, const N: usize> Backward for SparsemaxPlan<T, N> {
    type BwArgs<'a> = SparsemaxBwArgs<'a, T, N>;

    fn run_bw(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let shape = &self.desc.shape;
        let (y, dy, dx) = (&args.y, &args.dy, &args.dx);
        let views = [
            View::of("y", shape, y),
            View::of("dy", shape, dy),
            View::of_mut("dx", shape, dx),
        ];
        check_views(OP, stream, &views)?;
        check_disjoint(
            OP,
            &[byte_span("dx", &dx.as_const())],
            &[byte_span("y", y), byte_span("dy", dy)],
        )?;
        // SAFETY: every view was bounds-checked at construction and has
        // the plan's shape; dx overlaps neither input.
        unsafe {
            self.launch(
                stream,
                &self.bw,
                (y.data().ptr(), y.strides()),
                (dy.data().ptr(), dy.strides()),
                (dx.data().ptr(), dx.strides()),
            )
        }
    }
}

impl<T: Element, const N: usize> SparsemaxPlan<T, N> {
    /// Enqueue `f` over every row: `x` (the backward's `y`), `g` (the
    /// backward's `dy`, null forward), `out`.
    ///
    /// # Safety
    /// Every non-null operand must hold every element its strides reach
    /// over the plan's shape, and `out` must overlap no input.
    unsafe fn launch(
        &self,
        stream: &Stream,
        f: &Function,
        x: (DevPtr<T>, &[usize; N]),
        g: (DevPtr<T>, &[usize; N]),
        out: (DevPtrMut<T>, &[usize; N]),
    ) -> Result<()> {
        let dim = self.desc.dim;
        let shape = &self.desc.shape;
        let n = shape[dim];
        let outer: Vec<usize> = (0..N).filter(|&d| d != dim).collect();
        let rows: usize = outer.iter().map(|&d| shape[d]).product();
        if n == 0 || rows == 0 {
            return Ok(());
        }
        let group = super::gumbel_softmax::group_of(n);
        let threads = group.max(256);
        let strides = |s: &[usize; N]| padded(outer.iter().map(|&d| s[d] as i64));
        let p = SparsemaxParams {
            x: x.0,
            g: g.0,
            out: out.0,
            rows: rows as u64,
            n: n as u64,
            rank: outer.len() as u32,
            group: group as u32,
            shape: padded(outer.iter().map(|&d| shape[d] as u64)),
            sx: strides(x.1),
            sg: strides(g.1),
            so: strides(out.1),
            ax: x.1[dim] as i64,
            ag: g.1[dim] as i64,
            ao: out.1[dim] as i64,
        };
        let blocks = rows
            .div_ceil(threads / group)
            .min(self.sm_count.max(1) as usize * (2048 / threads).max(1) * 8);
        let cfg = LaunchConfig {
            grid: (grid_x(blocks), 1, 1),
            block: (threads as u32, 1, 1),
            smem_bytes: 0,
        };
        // SAFETY: forwarded from the caller's contract; the kernels reach
        // exactly the offsets the shape and strides give.
        unsafe { launch_params(stream, f, cfg, p) }
    }
}

/// `SparsemaxParams` of `sparsemax.cu`, field for field.
#[repr(C)]
#[derive(Copy, Clone)]
struct SparsemaxParams<T> {
    x: DevPtr<T>,
    g: DevPtr<T>,
    out: DevPtrMut<T>,
    rows: u64,
    n: u64,
    rank: u32,
    group: u32,
    shape: [u64; MAX_RANK],
    sx: [i64; MAX_RANK],
    sg: [i64; MAX_RANK],
    so: [i64; MAX_RANK],
    ax: i64,
    ag: i64,
    ao: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use baracuda_kernels_types::Error;

    #[test]
    fn params_layout_matches_cuda() {
        // 3 pointers, 2 u64, 2 u32, 4 arrays of 8, 3 i64
        assert_eq!(
            core::mem::size_of::<SparsemaxParams<f32>>(),
            24 + 16 + 8 + 4 * 64 + 24
        );
    }

    #[test]
    fn descriptors_are_checked() {
        let desc = SparsemaxDescriptor::new(ElementKind::Bf16, [4, 10]);
        assert_eq!(validate::<half::bf16, 2>(&desc).ok(), Some(3));
        assert!(matches!(
            validate::<half::bf16, 2>(&desc.with_dim(2)),
            Err(Error::InvalidDescriptor { field: "dim", .. })
        ));
        assert!(matches!(
            validate::<f32, 2>(&desc),
            Err(Error::DtypeMismatch { .. })
        ));
        let i64_desc = SparsemaxDescriptor::new(ElementKind::I64, [4, 10]);
        assert!(matches!(
            validate::<i64, 2>(&i64_desc),
            Err(Error::Unsupported { .. })
        ));
    }
}
