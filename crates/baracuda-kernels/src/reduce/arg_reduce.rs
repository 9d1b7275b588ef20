//! Max and min with indices (`torch.max(x, dim)`), argmax and argmin:
//! `i[o] = first argmax_r x[o, r]`, `v[o] = x[o, i[o]]`, over one dim or
//! over every dim flattened; backward `dx[o, r] = [r == i[o]] dv[o]`.
//!
//! The kernels are `kernels/reduce/arg_reduce.cu`; the kept dims are
//! merged and ordered by `layout.rs`'s [`Geometry`], the reduced dims keep
//! their logical order so that the position in them is the index.

use core::marker::PhantomData;

use baracuda_driver::{Function, LaunchConfig, ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtr, DevPtrMut, Element, ElementKind, Error, KernelSku, PlanPreference, Result,
    TensorMut, TensorRef, Workspace, MAX_RANK,
};

use super::layout::{
    launch_elementwise, launch_split, merge, Geometry, RedDim, ReducedDims, Reduction,
    BLOCKS_PER_SM, THREADS,
};
use crate::checks::{byte_span, check_dim, check_disjoint, check_views, numeric_dtype_code, View};
use crate::kernel_sources;
use crate::launch::{grid_x, padded};
use crate::plan::own_numeric_sku;
use crate::{Backward, Plan};

/// Which extreme an [`ArgReducePlan`] finds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArgReduceOp {
    /// The largest value and its first index (`torch.max(x, dim)`,
    /// `torch.argmax`); NaN counts as larger than every number.
    Max,
    /// The smallest value and its first index (`torch.min(x, dim)`,
    /// `torch.argmin`); NaN counts as smaller than every number.
    Min,
}

impl ArgReduceOp {
    /// Both ops.
    pub const ALL: [ArgReduceOp; 2] = [ArgReduceOp::Max, ArgReduceOp::Min];

    /// The op's name (PyTorch's, of the indices-only form).
    pub fn name(self) -> &'static str {
        match self {
            ArgReduceOp::Max => "argmax",
            ArgReduceOp::Min => "argmin",
        }
    }

    /// `BARACUDA_OP` of arg_reduce.cu.
    fn code(self) -> u32 {
        match self {
            ArgReduceOp::Max => 0,
            ArgReduceOp::Min => 1,
        }
    }
}

/// An index reduction of a rank-`N` tensor.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct ArgReduceDescriptor<const N: usize> {
    /// Max or min.
    pub op: ArgReduceOp,
    /// Element type of `x` (and of the values).
    pub element: ElementKind,
    /// Shape of `x`.
    pub shape: [usize; N],
    /// The reduced dim; `None` reduces every dim, the index then counting
    /// row-major over the whole tensor (`torch.argmax(x)`).
    pub dim: Option<usize>,
    /// The outputs keep the reduced dims with extent 1.
    pub keepdim: bool,
}

impl<const N: usize> ArgReduceDescriptor<N> {
    /// `op` over every dim of `shape`, keepdim false.
    pub fn new(op: ArgReduceOp, element: ElementKind, shape: [usize; N]) -> Self {
        ArgReduceDescriptor {
            op,
            element,
            shape,
            dim: None,
            keepdim: false,
        }
    }
    /// Reduce dim `dim` only.
    pub fn with_dim(mut self, dim: usize) -> Self {
        self.dim = Some(dim);
        self
    }
    /// Keep the reduced dims with extent 1.
    pub fn with_keepdim(mut self, keepdim: bool) -> Self {
        self.keepdim = keepdim;
        self
    }
    /// Whether dim `d` is reduced.
    pub fn is_reduced(&self, d: usize) -> bool {
        self.dim.is_none_or(|r| r == d)
    }
    /// Shape of the values and indices: the reduced dims as 1 (keepdim)
    /// or dropped.
    pub fn output_shape(&self) -> Vec<usize> {
        self.dims().output_shape()
    }
    fn dims(&self) -> ReducedDims<N> {
        ReducedDims::new(self.shape, self.keepdim, |d| self.is_reduced(d))
    }
}

/// Arguments of [`ArgReducePlan`]'s [`Plan::run`].
pub struct ArgReduceArgs<'a, T, const N: usize, const M: usize> {
    /// Input, any strides (0 = broadcast).
    pub x: TensorRef<'a, T, N>,
    /// The extreme values (`torch.max(x, dim).values`), or `None` for the
    /// indices only (argmax, argmin).
    pub values: Option<TensorMut<'a, T, M>>,
    /// The indices of the extremes.
    pub indices: TensorMut<'a, i64, M>,
}

/// Arguments of [`ArgReducePlan`]'s [`Backward::run_bw`]: the gradient of
/// the values.
pub struct ArgReduceBwArgs<'a, T, const N: usize, const M: usize> {
    /// The forward's indices.
    pub indices: TensorRef<'a, i64, M>,
    /// Gradient of the values.
    pub dv: TensorRef<'a, T, M>,
    /// Gradient of x: `dv` at each returned index, 0 elsewhere.
    pub dx: TensorMut<'a, T, N>,
}

/// Max or min with indices over one dim or over all dims, and the
/// backward of the values. Deterministic: the (value, index) merge is a
/// total order, and split reductions merge their states from the
/// workspace without atomics.
///
/// # Math
/// With `o` a position over the kept dims and `r` the row-major position
/// over the reduced ones: `indices[o] = first argmax_r x[o, r]` (argmin
/// for [`ArgReduceOp::Min`]), `values[o] = x[o, indices[o]]`. Backward
/// of the values: `dx[o, r] = dv[o]` where `r == indices[o]`, 0
/// elsewhere.
/// # Shapes
/// `x`, `dx`: `desc.shape` (rank `N <= 8`); values, indices, `dv`:
/// [`ArgReduceDescriptor::output_shape`] (rank `M`).
/// # Layout
/// Any strides; `x` and `dv` may broadcast. A reduction over one
/// contiguous aligned run per output (the last dim, or all dims of a
/// contiguous tensor) uses 16-byte loads and one block per long row;
/// others read with strides. `workspace_size()` holds the (value,
/// index) states of a split reduction (0 when each output is reduced by
/// one block); the backward takes no workspace.
/// # Dtypes
/// f32, f64, f16, bf16, i32 and i64 in `x` and the values (integers
/// compared exactly, as PyTorch's); indices i64. Others:
/// `Error::Unsupported`.
/// # Gradient
/// Float plans only: the backward of an integer plan is
/// `Error::Unsupported` (PyTorch has no integer gradients).
/// # Ties and NaN
/// The first index of the extreme in row-major order; a NaN is the
/// extreme of both ops, so a set holding NaN yields its first NaN
/// (PyTorch's).
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND`;
/// `Unsupported` for another dtype or a rank `N > 8`; `InvalidDescriptor`
/// for a dim past `N` or an `M` that does not match dim and keepdim;
/// `InvalidArgument` for a reduction over no element (PyTorch raises);
/// `PreferenceRejected` when `pref` forces a backend other than
/// `Baracuda` or caps the workspace below `workspace_size()`; the kernel
/// JIT's errors. From `run` and `run_bw`: `ShapeMismatch`,
/// `ContextMismatch` (a view or the workspace on another context),
/// `WorkspaceTooSmall` (`run`), and `InvalidArgument` for an output
/// overlapping an input or the other output.
pub struct ArgReducePlan<T: Element, const N: usize, const M: usize = N> {
    desc: ArgReduceDescriptor<N>,
    sku: KernelSku,
    row: Function,
    combine: Function,
    bw32: Function,
    bw64: Function,
    red: Reduction<N>,
    _t: PhantomData<T>,
}

const OP: &str = "reduce";

/// Bytes of the kernels' `ArgSt` (an accumulator padded to 8, an i64).
const STATE_BYTES: usize = 16;

/// The module of `op` on dtype code `dtype`.
pub(crate) fn spec(dtype: u32, op: ArgReduceOp) -> ModuleSpec {
    ModuleSpec::new(&kernel_sources::ARG_REDUCE)
        .define("BARACUDA_DTYPE", dtype)
        .define("BARACUDA_OP", op.code())
}

/// `ArgParams` of arg_reduce.cu, field for field.
#[repr(C)]
#[derive(Copy, Clone)]
struct ArgParams<T> {
    x: DevPtr<T>,
    values: DevPtrMut<T>,
    indices: DevPtrMut<i64>,
    partial: DevPtrMut<u8>,
    n_out: u64,
    nk: u32,
    nr: u32,
    kshape: [u64; MAX_RANK],
    kx: [i64; MAX_RANK],
    kv: [i64; MAX_RANK],
    ki: [i64; MAX_RANK],
    rshape: [u64; MAX_RANK],
    rx: [i64; MAX_RANK],
    n_red: u64,
    chunk: u64,
    splits: u32,
    group: u32,
    vec: u32,
    pad: u32,
}

/// `ArgBwParams` of arg_reduce.cu.
#[repr(C)]
#[derive(Copy, Clone)]
struct ArgBwParams<T> {
    dx: DevPtrMut<T>,
    dv: DevPtr<T>,
    indices: DevPtr<i64>,
    n: u64,
    rank: u32,
    pad: u32,
    shape: [u64; MAX_RANK],
    stride: [[i64; MAX_RANK]; 4],
}

/// The reduced dims in logical order, extent-1 dims dropped and
/// neighbours contiguous in x merged: the linear position over them is
/// the row-major index PyTorch returns.
fn logical_red(shape: &[usize], reduced: &[bool], x: &[usize]) -> Vec<RedDim> {
    let dims = (0..shape.len())
        .filter(|&d| reduced[d] && shape[d] != 1)
        .map(|d| RedDim {
            extent: shape[d],
            x: x[d],
        })
        .collect();
    let red = merge(dims, |o: &RedDim, i: &RedDim| {
        (o.x == i.x * i.extent).then_some(RedDim {
            extent: o.extent * i.extent,
            x: i.x,
        })
    });
    if red.is_empty() {
        vec![RedDim { extent: 1, x: 1 }]
    } else {
        red
    }
}

/// The launch shape of one reduction of `n_out` outputs of `n_red`
/// elements: (group, splits, chunk). Worked example (H200, 132 SMs,
/// argmax of bf16 [512, 128256] over the last dim): a group of 256 (one
/// block per row), 512 blocks for 2,112 wanted, so 5 splits of 25,656
/// positions (3,207 16-byte vectors, 12.5 per thread).
fn shape_launch(n_out: usize, n_red: usize, vec_elems: usize, sm_count: u32, max: usize) -> (usize, usize, usize) {
    let group = n_red
        .div_ceil(vec_elems)
        .next_power_of_two()
        .min(THREADS as usize);
    let blocks = n_out.div_ceil(THREADS as usize / group);
    let target = BLOCKS_PER_SM * sm_count.max(1) as usize;
    let splits = target
        .div_ceil(blocks)
        .min(max)
        .min((n_red / 2048).max(1))
        .max(1);
    // A chunk of a multiple of 8 positions keeps every split's run
    // 16-byte aligned for every dtype.
    let chunk = n_red.div_ceil(splits).next_multiple_of(8);
    (group, n_red.div_ceil(chunk), chunk)
}

impl<T: Element, const N: usize, const M: usize> ArgReducePlan<T, N, M> {
    fn out_shape(&self) -> [usize; M] {
        self.red.dims.output_array()
    }
    /// A view's strides over x's `N` dims: 0 along reduced dims.
    fn spread(&self, strides: &[usize; M]) -> [usize; N] {
        self.red.dims.spread(strides)
    }
}

impl<T: Element, const N: usize, const M: usize> Plan for ArgReducePlan<T, N, M> {
    type Descriptor = ArgReduceDescriptor<N>;
    type Args<'a> = ArgReduceArgs<'a, T, N, M>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let dtype = numeric_dtype_code::<T, N>(OP, desc.element, "index reductions take")?;
        if let Some(d) = desc.dim {
            check_dim::<N>(OP, d)?;
        }
        let dims = desc.dims();
        dims.check_output_rank::<M>(OP, |r| {
            format!("the outputs have rank {r} with this dim, the plan's rank {M}")
        })?;
        if dims.n_red() == 0 {
            return Err(Error::InvalidArgument {
                op: OP,
                arg: "desc.shape",
                reason: format!("{} over an empty set of elements has no value", desc.op.name()),
            });
        }
        pref.check_backend(OP, &[BackendKind::Baracuda])?;
        let module = stream.context().module(&spec(dtype, desc.op))?;
        let sm_count = stream.context().device().sm_count;
        let plan = ArgReducePlan {
            desc: *desc,
            sku: own_numeric_sku::<T>(
                stream,
                format!("reduce.{}", desc.op.name()),
                "row (16-byte loads) / strided, split with a (value, index) combine",
            ),
            row: module.function("arg_row")?,
            combine: module.function("arg_combine")?,
            bw32: module.function("arg_bw32")?,
            bw64: module.function("arg_bw64")?,
            red: Reduction::new(dims, sm_count, STATE_BYTES),
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
        let out = self.out_shape();
        let x = &args.x;
        let views = [
            View::of("x", &self.desc.shape, x),
            View::of_mut("indices", &out, &args.indices),
        ];
        check_views(OP, stream, &views)?;
        let xp = x.data().ptr();
        let ip = args.indices.data().ptr();
        let x_span = byte_span("x", x);
        let i_span = byte_span("indices", &args.indices.as_const());
        check_disjoint(OP, &[i_span], &[x_span])?;
        let (vp, v_strides) = match &args.values {
            Some(v) => {
                check_views(OP, stream, &[View::of_mut("values", &out, v)])?;
                let vp = v.data().ptr();
                check_disjoint(OP, &[byte_span("values", &v.as_const())], &[x_span, i_span])?;
                (vp, self.spread(v.strides()))
            }
            None => (DevPtrMut::NULL, [0; N]),
        };
        let partial = workspace.check_ptr(OP, self.red.partial_bytes(), stream.context().id())?;
        let reduced = self.red.dims.reduced;
        let i_strides = self.spread(args.indices.strides());
        let kept = Geometry::new(&self.desc.shape, &reduced, x.strides(), &v_strides, &i_strides).kept;
        let red = logical_red(&self.desc.shape, &reduced, x.strides());
        let n_out: usize = kept.iter().map(|k| k.extent).product();
        let n_red: usize = red.iter().map(|r| r.extent).product();
        if n_out == 0 {
            return Ok(());
        }
        let vec_elems = 16 / core::mem::size_of::<T>();
        let vec = red.len() == 1
            && red[0].x == 1
            && xp.addr() % 16 == 0
            && kept.iter().all(|k| k.x % vec_elems == 0);
        let (group, splits, chunk) = shape_launch(
            n_out,
            n_red,
            if vec { vec_elems } else { 1 },
            self.red.sm_count,
            self.red.splits,
        );
        let p = ArgParams {
            x: xp,
            values: vp,
            indices: ip,
            partial,
            n_out: n_out as u64,
            nk: kept.len() as u32,
            nr: red.len() as u32,
            kshape: padded(kept.iter().map(|k| k.extent as u64)),
            kx: padded(kept.iter().map(|k| k.x as i64)),
            kv: padded(kept.iter().map(|k| k.y as i64)),
            ki: padded(kept.iter().map(|k| k.aux as i64)),
            rshape: padded(red.iter().map(|r| r.extent as u64)),
            rx: padded(red.iter().map(|r| r.x as i64)),
            n_red: n_red as u64,
            chunk: chunk as u64,
            splits: splits as u32,
            group: group as u32,
            vec: u32::from(vec),
            pad: 0,
        };
        let blocks = n_out.div_ceil(THREADS as usize / group);
        let cfg = LaunchConfig {
            grid: (grid_x(blocks), splits as u32, 1),
            block: (THREADS, 1, 1),
            smem_bytes: 0,
        };
        let kernels = (&self.row, &self.combine);
        // SAFETY: x, values and indices were bounds-checked at their views'
        // construction and their shapes against the plan above; the
        // geometry comes from those shapes and strides; `splits` is at most
        // `self.red.splits`, for which `partial` was checked.
        unsafe { launch_split(stream, kernels, cfg, p, splits, n_out) }
    }
}

impl<T: Element, const N: usize, const M: usize> Backward for ArgReducePlan<T, N, M> {
    type BwArgs<'a> = ArgReduceBwArgs<'a, T, N, M>;

    fn run_bw(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        if !T::KIND.is_float() {
            return Err(Error::Unsupported {
                op: OP,
                what: format!(
                    "the backward of {} on dtype {}: integer values have no gradient",
                    self.desc.op.name(),
                    T::KIND
                ),
            });
        }
        let out = self.out_shape();
        let views = [
            View::of("indices", &out, &args.indices),
            View::of("dv", &out, &args.dv),
            View::of_mut("dx", &self.desc.shape, &args.dx),
        ];
        check_views(OP, stream, &views)?;
        let (ip, dvp, dxp) = (
            args.indices.data().ptr(),
            args.dv.data().ptr(),
            args.dx.data().ptr(),
        );
        check_disjoint(
            OP,
            &[byte_span("dx", &args.dx.as_const())],
            &[byte_span("indices", &args.indices), byte_span("dv", &args.dv)],
        )?;
        let n = args.dx.n_elems();
        if n == 0 {
            return Ok(());
        }
        // The position r steps: row-major over the reduced dims.
        let strides = [
            *args.dx.strides(),
            self.spread(args.dv.strides()),
            self.spread(args.indices.strides()),
            self.red.dims.dense_strides(true),
        ];
        let mut p = ArgBwParams {
            dx: dxp,
            dv: dvp,
            indices: ip,
            n: n as u64,
            rank: N as u32,
            pad: 0,
            shape: padded(self.desc.shape.iter().map(|&e| e as u64)),
            stride: [[0; MAX_RANK]; 4],
        };
        for (row, s) in p.stride.iter_mut().zip(&strides) {
            *row = padded(s.iter().map(|&v| v as i64));
        }
        // SAFETY: dx, dv and the indices were bounds-checked at their
        // views' construction and their shapes against the plan above; the
        // kernel reaches only offsets of those views.
        unsafe { launch_elementwise(stream, n, self.red.sm_count, (&self.bw32, &self.bw64), p) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_shapes_follow_dim_and_keepdim() {
        let d = ArgReduceDescriptor::new(ArgReduceOp::Max, ElementKind::F32, [2, 3, 4]);
        assert_eq!(d.output_shape(), Vec::<usize>::new());
        assert_eq!(d.with_keepdim(true).output_shape(), vec![1, 1, 1]);
        assert_eq!(d.with_dim(1).output_shape(), vec![2, 4]);
        assert_eq!(d.with_dim(1).with_keepdim(true).output_shape(), vec![2, 1, 4]);
        let dims = d.with_dim(2).dims();
        assert_eq!((dims.n_red(), dims.n_out()), (4, 6));
    }

    #[test]
    fn reduced_dims_keep_their_logical_order() {
        // contiguous: one run
        let r = logical_red(&[2, 3, 4], &[true; 3], &[12, 4, 1]);
        assert_eq!(r, vec![RedDim { extent: 24, x: 1 }]);
        // transposed: not merged, still outermost first
        let r = logical_red(&[3, 4], &[true; 2], &[1, 3]);
        assert_eq!(r, vec![RedDim { extent: 3, x: 1 }, RedDim { extent: 4, x: 3 }]);
        let r = logical_red(&[5, 1], &[false, true], &[1, 1]);
        assert_eq!(r, vec![RedDim { extent: 1, x: 1 }]);
    }

    #[test]
    fn bench_shape_splits_over_aligned_chunks() {
        let (group, splits, chunk) = shape_launch(512, 128_256, 8, 132, 66);
        assert_eq!((group, splits, chunk), (256, 5, 25_656));
        let (group, splits, _) = shape_launch(1 << 20, 7, 1, 132, 1);
        assert_eq!((group, splits), (8, 1));
    }

    #[test]
    fn strides_spread_over_x_dims() {
        let d = ArgReduceDescriptor::new(ArgReduceOp::Min, ElementKind::F32, [2, 3, 4]).with_dim(1);
        assert_eq!(d.dims().spread(&[4, 1]), [4, 0, 1]);
        assert_eq!(d.with_keepdim(true).dims().spread(&[4, 4, 1]), [4, 0, 1]);
        assert_eq!(d.dims().dense_strides(true), [0, 1, 0]);
        assert_eq!(d.dims().dense_strides(false), [4, 0, 1]);
    }

    #[test]
    fn params_layout_matches_cuda() {
        // 4 pointers, n_out, nk/nr, 6 arrays of 8, n_red, chunk, 4 u32
        assert_eq!(
            core::mem::size_of::<ArgParams<f32>>(),
            32 + 8 + 8 + 6 * 64 + 16 + 16
        );
        assert_eq!(core::mem::size_of::<ArgBwParams<f32>>(), 24 + 8 + 8 + 64 + 4 * 64);
    }
}
