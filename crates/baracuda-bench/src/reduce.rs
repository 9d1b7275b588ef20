//! Reduce benchmark cases, from `bench/cases/reduce.json` (which
//! `bench/torch_cases/reduce.py` reads too): reductions of contiguous
//! tensors over the case's dims (keepdim false; the norm is p = 2; argmax
//! and argmin over one dim, writing i64 indices; all and any writing
//! bool, count_nonzero i64; var_mean and std_mean writing both outputs),
//! the trace of a contiguous matrix (bytes: its diagonal read and the
//! scalar written; it rotates by the whole matrix, which each buffer set
//! holds), and the device-to-device copy that sets the bandwidth ceiling.
//! Inputs rotate over buffer sets by L2 size ([`rotation_of`]); the
//! issue's cases are all larger than L2, so they run on one set.

use baracuda_kernels::*;
use half::{bf16, f16};
use serde::Deserialize;

use crate::cases::{bad_pass, by_dtype, Checked, Job, RawCase, Row, RunFn};
use crate::harness::{
    random_sets, rotation_of, time_eager_rotating_ms, time_passes, time_rotating_ms,
};

/// A reduction case's parameters.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    /// Shape of x.
    shape: Vec<usize>,
    /// The reduced dims.
    dims: Vec<usize>,
}

/// A trace case's parameters.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TraceParams {
    /// Shape of the matrix: `[rows, cols]`.
    shape: Vec<usize>,
}

/// The copy ceiling's parameters.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CopyParams {
    /// Shape of the tensor copied.
    shape: Vec<usize>,
}

/// The (rank of x, rank of y) pairs the bench is built for.
const RANKS: [(usize, usize); 4] = [(1, 0), (2, 1), (3, 1), (4, 1)];

/// The job of one case of the reduce case file.
pub(crate) fn job(c: &RawCase) -> Checked<Job> {
    let dtype = c.dtype()?;
    let passes = c.passes(&["fw"])?;
    let size = dtype.size_bytes();
    if c.op == "copy" {
        return copy_job(c);
    }
    if c.op == "trace" {
        return trace_job(c);
    }
    if let Some(op) = crate::scan::op(&c.op) {
        return crate::scan::job(c, op);
    }
    let arg_op = ArgReduceOp::ALL.into_iter().find(|o| o.name() == c.op);
    // var_mean and std_mean: the statistic's op, with the mean written too.
    let with_mean = matches!(c.op.as_str(), "var_mean" | "std_mean");
    let op = match c.op.as_str() {
        "var_mean" => Some(ReduceOp::Var),
        "std_mean" => Some(ReduceOp::Std),
        name => ReduceOp::ALL.into_iter().find(|o| o.name() == name),
    };
    let logical_op = LogicalReduceOp::ALL.into_iter().find(|o| o.name() == c.op);
    if arg_op.is_none() && op.is_none() && logical_op.is_none() {
        return Err(c.unknown_op());
    }
    let Params { shape, dims } = c.params()?;
    if arg_op.is_some() && dims.len() != 1 {
        return Err(c.error(format!("{} takes one dim, got {dims:?}", c.op)));
    }
    let mut seen = vec![false; shape.len()];
    for &d in &dims {
        if d >= shape.len() || std::mem::replace(&mut seen[d], true) {
            return Err(c.error(format!("dims {dims:?} of a rank-{} shape", shape.len())));
        }
    }
    let ranks = (shape.len(), shape.len() - dims.len());
    if !RANKS.contains(&ranks) {
        return Err(c.error(format!("ranks {ranks:?} are not built (takes {RANKS:?})")));
    }
    let n: usize = shape.iter().product();
    let n_out: usize = (0..shape.len())
        .filter(|d| !dims.contains(d))
        .map(|d| shape[d])
        .product();
    let out_size = match (arg_op, logical_op) {
        (Some(_), _) | (_, Some(LogicalReduceOp::CountNonzero)) => 8,
        (_, Some(_)) => 1,
        _ if with_mean => 2 * size,
        _ => size,
    };
    let bytes = n * size + n_out * out_size;
    let rows = c.rows(&passes, dtype, &format!("{shape:?}"), |r| {
        r.bytes(bytes).rotation(bytes)
    });
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32, F64 => f64], T => {
        Box::new(move |s: &Stream, rows: &[Row]| match (arg_op, op, ranks) {
            _ if logical_op.is_some() => {
                let l = logical_op.expect("matched above");
                match ranks {
                    (1, 0) => logical_reduce::<T, 1, 0>(s, l, &shape, &dims, rows),
                    (2, 1) => logical_reduce::<T, 2, 1>(s, l, &shape, &dims, rows),
                    (3, 1) => logical_reduce::<T, 3, 1>(s, l, &shape, &dims, rows),
                    _ => logical_reduce::<T, 4, 1>(s, l, &shape, &dims, rows),
                }
            }
            (Some(a), _, (2, 1)) => arg_reduce::<T, 2, 1>(s, a, &shape, dims[0], rows),
            (Some(a), _, (3, 1)) => arg_reduce::<T, 3, 1>(s, a, &shape, dims[0], rows),
            (Some(a), _, (4, 1)) => arg_reduce::<T, 4, 1>(s, a, &shape, dims[0], rows),
            (Some(a), _, _) => arg_reduce::<T, 1, 0>(s, a, &shape, dims[0], rows),
            (None, Some(op), (1, 0)) => reduce::<T, 1, 0>(s, (op, with_mean), &shape, &dims, rows),
            (None, Some(op), (2, 1)) => reduce::<T, 2, 1>(s, (op, with_mean), &shape, &dims, rows),
            (None, Some(op), (3, 1)) => reduce::<T, 3, 1>(s, (op, with_mean), &shape, &dims, rows),
            (None, Some(op), _) => reduce::<T, 4, 1>(s, (op, with_mean), &shape, &dims, rows),
            (None, None, _) => unreachable!("the op was checked to be known above"),
        })
    });
    Ok(c.job(rows, run))
}

/// The job of a `trace` case.
fn trace_job(c: &RawCase) -> Checked<Job> {
    let dtype = c.dtype()?;
    let passes = c.passes(&["fw"])?;
    let size = dtype.size_bytes();
    let TraceParams { shape } = c.params()?;
    let &[rows_, cols] = shape.as_slice() else {
        return Err(c.error(format!("trace takes a matrix, got shape {shape:?}")));
    };
    let bytes = (rows_.min(cols) + 1) * size;
    let rows = c.rows(&passes, dtype, &format!("{shape:?}"), |r| {
        r.bytes(bytes).rotation(rows_ * cols * size)
    });
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32, F64 => f64], T => {
        Box::new(move |s: &Stream, rows: &[Row]| trace::<T>(s, [rows_, cols], rows))
    });
    Ok(c.job(rows, run))
}

/// The job of a `copy` case: the bandwidth ceiling (also of the softmax
/// and norm families' files).
pub(crate) fn copy_job(c: &RawCase) -> Checked<Job> {
    let dtype = c.dtype()?;
    let passes = c.passes(&["fw"])?;
    let size = dtype.size_bytes();
    let CopyParams { shape } = c.params()?;
    let n: usize = shape.iter().product();
    let rows = c.rows(&passes, dtype, &format!("{shape:?}"), |r| {
        r.bytes(2 * n * size).rotation(2 * n * size)
    });
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32, F64 => f64], T => {
        Box::new(move |s: &Stream, rows: &[Row]| copy::<T>(s, n, rows))
    });
    Ok(c.job(rows, run))
}

fn arr<const N: usize>(v: &[usize]) -> [usize; N] {
    std::array::from_fn(|i| v[i])
}

/// `sets` buffers of `n` seeded random values in `[-2, 2)`.
fn inputs<T: Element>(s: &Stream, n: usize, sets: usize) -> Result<Vec<DeviceBuffer<T>>> {
    random_sets::<T>(s, n, sets, 11, -2.0, 2.0)
}

/// Time the forward of a reduction of `shape` (rank `N`) whose output has
/// `out_len` elements of `O`: `run(workspace, x, y)` runs the plan, with a
/// workspace of `ws_bytes`, on one of the rotating input sets.
fn time_fw<T: Element, O: Element, const N: usize>(
    s: &Stream,
    shape: &[usize],
    (out_len, ws_bytes): (usize, usize),
    rows: &[Row],
    mut run: impl FnMut(Workspace<'_>, TensorRef<'_, T, N>, DeviceSliceMut<'_, O>) -> Result<()>,
) -> Result<()> {
    let sets = rotation_of(s, rows)?;
    let xs = inputs::<T>(s, shape.iter().product(), sets)?;
    let mut y = DeviceBuffer::<O>::uninit(s, out_len)?;
    let mut ws = DeviceBuffer::<u8>::uninit(s, ws_bytes.max(1))?;
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, sets, |i| {
            let x = TensorRef::contiguous(xs[i].as_slice(), arr::<N>(shape))?;
            run(Workspace::Borrowed(ws.as_slice_mut()), x, y.as_slice_mut())
        }),
        p => Err(bad_pass(p)),
    })
}

/// `op` over `dims` ([`ReducePlan`]), or with `with_mean` var_mean or
/// std_mean ([`VarMeanPlan`], y and the mean in one buffer).
fn reduce<T: Element, const N: usize, const M: usize>(
    s: &Stream,
    (op, with_mean): (ReduceOp, bool),
    shape: &[usize],
    dims: &[usize],
    rows: &[Row],
) -> Result<()> {
    let desc = ReduceDescriptor::new(op, T::KIND, arr::<N>(shape)).with_dims(dims);
    let out = arr::<M>(&desc.output_shape());
    let n_out: usize = out.iter().product();
    let pref = PlanPreference::default();
    if with_mean {
        let plan = VarMeanPlan::<T, N, M>::select(s, &desc, &pref)?;
        let sizes = (2 * n_out, plan.workspace_size());
        return time_fw::<T, T, N>(s, shape, sizes, rows, |ws, x, both| {
            let (y, mean) = both.split_at(n_out).expect("two outputs");
            let y = TensorMut::contiguous(y, out)?;
            let mean = TensorMut::contiguous(mean, out)?;
            plan.run(s, ws, VarMeanArgs { x, y, mean })
        });
    }
    let plan = ReducePlan::<T, N, M>::select(s, &desc, &pref)?;
    time_fw::<T, T, N>(
        s,
        shape,
        (n_out, plan.workspace_size()),
        rows,
        |ws, x, y| {
            let y = TensorMut::contiguous(y, out)?;
            plan.run(s, ws, ReduceArgs { x, y })
        },
    )
}

/// The trace of a `shape` matrix.
fn trace<T: Element>(s: &Stream, shape: [usize; 2], rows: &[Row]) -> Result<()> {
    let desc = TraceDescriptor::new(T::KIND, shape[0], shape[1]);
    let plan = TracePlan::<T>::select(s, &desc, &PlanPreference::default())?;
    time_fw::<T, T, 2>(s, &shape, (1, plan.workspace_size()), rows, |ws, x, y| {
        let y = TensorMut::new(y, [], [])?;
        plan.run(s, ws, TraceArgs { x, y })
    })
}

/// Indices of the extremes over `dim` (argmax, argmin).
fn arg_reduce<T: Element, const N: usize, const M: usize>(
    s: &Stream,
    op: ArgReduceOp,
    shape: &[usize],
    dim: usize,
    rows: &[Row],
) -> Result<()> {
    let desc = ArgReduceDescriptor::new(op, T::KIND, arr::<N>(shape)).with_dim(dim);
    let plan = ArgReducePlan::<T, N, M>::select(s, &desc, &PlanPreference::default())?;
    let out = arr::<M>(&desc.output_shape());
    let sizes = (out.iter().product(), plan.workspace_size());
    time_fw::<T, i64, N>(s, shape, sizes, rows, |ws, x, idx| {
        let indices = TensorMut::contiguous(idx, out)?;
        plan.run(
            s,
            ws,
            ArgReduceArgs {
                x,
                values: None,
                indices,
            },
        )
    })
}

/// all, any (bool output) or count_nonzero (i64) over `dims`.
fn logical_reduce<T: Element, const N: usize, const M: usize>(
    s: &Stream,
    op: LogicalReduceOp,
    shape: &[usize],
    dims: &[usize],
    rows: &[Row],
) -> Result<()> {
    if op == LogicalReduceOp::CountNonzero {
        logical_reduce_into::<T, i64, N, M>(s, op, shape, dims, rows)
    } else {
        logical_reduce_into::<T, bool, N, M>(s, op, shape, dims, rows)
    }
}

fn logical_reduce_into<T: Element, O: Element, const N: usize, const M: usize>(
    s: &Stream,
    op: LogicalReduceOp,
    shape: &[usize],
    dims: &[usize],
    rows: &[Row],
) -> Result<()> {
    let desc = LogicalReduceDescriptor::new(op, T::KIND, arr::<N>(shape)).with_dims(dims);
    let plan = LogicalReducePlan::<T, O, N, M>::select(s, &desc, &PlanPreference::default())?;
    let out = arr::<M>(&desc.output_shape());
    let sizes = (out.iter().product(), plan.workspace_size());
    time_fw::<T, O, N>(s, shape, sizes, rows, |ws, x, y| {
        let y = TensorMut::contiguous(y, out)?;
        plan.run(s, ws, LogicalReduceArgs { x, y })
    })
}

/// Device-to-device copy of `n` elements: the bandwidth ceiling (bytes
/// read + bytes written), timed eagerly as the elementwise family's.
fn copy<T: Element>(s: &Stream, n: usize, rows: &[Row]) -> Result<()> {
    let sets = rotation_of(s, rows)?;
    let xs = inputs::<T>(s, n, sets)?;
    let mut ys = (0..sets)
        .map(|_| DeviceBuffer::<T>::uninit(s, n))
        .collect::<Result<Vec<_>>>()?;
    time_passes(rows, |pass| match pass {
        "fw" => time_eager_rotating_ms(s, sets, |i| ys[i].copy_from(s, &xs[i])),
        p => Err(bad_pass(p)),
    })
}
