//! Softmax benchmark cases, from `bench/cases/softmax.json` (which
//! `bench/torch_cases/softmax.py` reads too): softmax and log-softmax
//! along the last dim of a contiguous matrix, forward and backward (from
//! y and dy), and the device-to-device copy that sets the bandwidth
//! ceiling. Traffic: forward reads x and writes y (2 tensors), backward
//! reads y and dy and writes dx (3).

use baracuda_kernels::*;
use half::{bf16, f16};
use serde::Deserialize;

use crate::cases::{bad_pass, by_dtype, Checked, Job, RawCase, Row, RunFn};
use crate::harness::{random_buffer, rotation_of, time_passes, time_rotating_ms};

/// A softmax case's parameters.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    /// Shape of x, `[rows, extent]`; the softmax runs along the extent.
    shape: [usize; 2],
}

/// The job of one case of the softmax case file.
pub(crate) fn job(c: &RawCase) -> Checked<Job> {
    if c.op == "copy" {
        return crate::reduce::copy_job(c);
    }
    let op = SoftmaxOp::ALL
        .into_iter()
        .find(|o| o.name() == c.op)
        .ok_or_else(|| c.unknown_op())?;
    let dtype = c.dtype()?;
    let passes = c.passes(&["fw", "bw"])?;
    let Params { shape } = c.params()?;
    let bytes = shape[0] * shape[1] * dtype.size_bytes();
    let rows = c.rows(&passes, dtype, &format!("{shape:?}"), |r| {
        let tensors = if r.pass == "bw" { 3 } else { 2 };
        r.bytes(tensors * bytes).rotation(tensors * bytes)
    });
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32, F64 => f64], T => {
        Box::new(move |s: &Stream, rows: &[Row]| softmax::<T>(s, op, shape, rows))
    });
    Ok(c.job(rows, run))
}

fn softmax<T: Element>(s: &Stream, op: SoftmaxOp, shape: [usize; 2], rows: &[Row]) -> Result<()> {
    let desc = SoftmaxDescriptor::new(op, T::KIND, shape);
    let plan = SoftmaxPlan::<T, 2>::select(s, &desc, &PlanPreference::default())?;
    let sets = rotation_of(s, rows)?;
    let n = shape[0] * shape[1];
    let xs = (0..sets as u64)
        .map(|i| random_buffer::<T>(s, n, 13 + 16 * i, -4.0, 4.0))
        .collect::<Result<Vec<_>>>()?;
    let dys = (0..sets as u64)
        .map(|i| random_buffer::<T>(s, n, 14 + 16 * i, -1.0, 1.0))
        .collect::<Result<Vec<_>>>()?;
    let mut out = DeviceBuffer::<T>::uninit(s, n)?;
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, sets, |i| {
            plan.run(
                s,
                Workspace::None,
                SoftmaxArgs {
                    x: TensorRef::contiguous(xs[i].as_slice(), shape)?,
                    mask: SoftmaxMaskRef::None,
                    y: TensorMut::contiguous(out.as_slice_mut(), shape)?,
                },
            )
        }),
        // the backward from y = x (any values of the right range time the
        // same): reads y and dy, writes dx
        "bw" => time_rotating_ms(s, sets, |i| {
            plan.run_bw(
                s,
                Workspace::None,
                SoftmaxBwArgs {
                    y: TensorRef::contiguous(xs[i].as_slice(), shape)?,
                    dy: TensorRef::contiguous(dys[i].as_slice(), shape)?,
                    mask: SoftmaxMaskRef::None,
                    dx: TensorMut::contiguous(out.as_slice_mut(), shape)?,
                },
            )
        }),
        p => Err(bad_pass(p)),
    })
}
