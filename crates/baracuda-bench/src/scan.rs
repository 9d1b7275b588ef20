//! Scan benchmark cases of the reduce family (`bench/cases/reduce.json`,
//! ops cumsum, cumprod, cummax, cummin, logcumsumexp): an inclusive
//! forward scan of a contiguous tensor along the case's dim, on the float
//! dtypes and i32 and i64 (whose cumsum and cumprod write i64). Bytes are
//! x read and y written once (cummax/cummin: plus the i64 indices).

use baracuda_kernels::*;
use half::{bf16, f16};
use serde::Deserialize;

use crate::cases::{bad_pass, by_dtype, Checked, Job, RawCase, Row, RunFn};
use crate::harness::{random_buffer, rotation_of, time_passes, time_rotating_ms};

/// A scan case's parameters.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    /// Shape of x.
    shape: Vec<usize>,
    /// The scanned dim.
    dim: usize,
}

/// The scan op named `name`, if any.
pub fn op(name: &str) -> Option<ScanOp> {
    ScanOp::ALL.into_iter().find(|o| o.name() == name)
}

/// The job of a scan case (`op` is its op, already parsed).
pub fn job(c: &RawCase, op: ScanOp) -> Checked<Job> {
    let dtype = c.dtype()?;
    let passes = c.passes(&["fw"])?;
    let Params { shape, dim } = c.params()?;
    if dim >= shape.len() || !(1..=2).contains(&shape.len()) {
        return Err(c.error(format!(
            "dim {dim} of shape {shape:?} (ranks 1 and 2 are built)"
        )));
    }
    let n: usize = shape.iter().product();
    let idx = if op.has_indices() { 8 * n } else { 0 };
    let out = ScanDescriptor::new(op, dtype, [n], 0).output_element();
    let bytes = n * (dtype.size_bytes() + out.size_bytes()) + idx;
    let rows = c.rows(&passes, dtype, &format!("{shape:?}"), |r| {
        r.bytes(bytes).rotation(bytes)
    });
    let widen = out != dtype;
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32, F64 => f64, I32 => i32, I64 => i64], T => {
        Box::new(move |s: &Stream, rows: &[Row]| match (shape.len(), widen) {
            (1, false) => scan::<T, T, 1>(s, op, &shape, dim, rows),
            (1, true) => scan::<T, i64, 1>(s, op, &shape, dim, rows),
            (_, false) => scan::<T, T, 2>(s, op, &shape, dim, rows),
            (_, true) => scan::<T, i64, 2>(s, op, &shape, dim, rows),
        })
    });
    Ok(c.job(rows, run))
}

/// The scan of `op` on x of `T` into y of `O` (the descriptor's output
/// element).
fn scan<T: Element, O: Element, const N: usize>(
    s: &Stream,
    op: ScanOp,
    shape: &[usize],
    dim: usize,
    rows: &[Row],
) -> Result<()> {
    let shape: [usize; N] = std::array::from_fn(|i| shape[i]);
    let desc = ScanDescriptor::new(op, T::KIND, shape, dim);
    let plan = ScanPlan::<T, N, O>::select(s, &desc, &PlanPreference::default())?;
    let sets = rotation_of(s, rows)?;
    let n: usize = shape.iter().product();
    let xs = (0..sets as u64)
        .map(|i| random_buffer::<T>(s, n, 11 + 16 * i, -2.0, 2.0))
        .collect::<Result<Vec<_>>>()?;
    let mut y = DeviceBuffer::<O>::uninit(s, n)?;
    let mut idx = DeviceBuffer::<i64>::uninit(s, if op.has_indices() { n } else { 1 })?;
    let mut ws = DeviceBuffer::<u8>::uninit(s, plan.workspace_size().max(1))?;
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, sets, |i| {
            let indices = if op.has_indices() {
                Some(TensorMut::contiguous(idx.as_slice_mut(), shape)?)
            } else {
                None
            };
            plan.run(
                s,
                Workspace::Borrowed(ws.as_slice_mut()),
                ScanArgs {
                    x: TensorRef::contiguous(xs[i].as_slice(), shape)?,
                    y: TensorMut::contiguous(y.as_slice_mut(), shape)?,
                    indices,
                },
            )
        }),
        p => Err(bad_pass(p)),
    })
}
