//! Softmax benchmark cases, from `bench/cases/softmax.json` (which
//! `bench/torch_cases/softmax.py` reads too): softmax and log-softmax
//! along the last dim of a contiguous matrix, forward and backward (from
//! y and dy), masked softmax (a bool keep mask broadcast from `[1, n]`, or
//! a causal pattern `keep[r, k] = k <= r mod n` in full), and the
//! device-to-device copy that sets the bandwidth ceiling. Traffic: forward
//! reads x and writes y (2 tensors), backward reads y and dy and writes dx
//! (3); a keep mask adds its bytes to both (n for the broadcast one, one a
//! element for the full one).

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
    /// "none", "keep_row" (a `[1, n]` keep mask broadcast over the rows)
    /// or "keep_causal" (`keep[r, k] = k <= r mod n`, one byte an element).
    #[serde(default = "no_mask")]
    mask: String,
}

fn no_mask() -> String {
    "none".into()
}

/// A bench case's mask.
#[derive(Copy, Clone, PartialEq, Eq)]
enum MaskCase {
    None,
    Row,
    Causal,
}

impl MaskCase {
    /// Bytes of the mask of a `shape` softmax.
    fn bytes(self, shape: [usize; 2]) -> usize {
        match self {
            MaskCase::None => 0,
            MaskCase::Row => shape[1],
            MaskCase::Causal => shape[0] * shape[1],
        }
    }
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
    let Params { shape, mask } = c.params()?;
    let mask = match mask.as_str() {
        "none" => MaskCase::None,
        "keep_row" => MaskCase::Row,
        "keep_causal" => MaskCase::Causal,
        other => {
            return Err(c.error(format!(
                "mask {other:?} (takes none, keep_row, keep_causal)"
            )))
        }
    };
    let bytes = shape[0] * shape[1] * dtype.size_bytes();
    let rows = c.rows(&passes, dtype, &format!("{shape:?}"), |r| {
        let tensors = if r.pass == "bw" { 3 } else { 2 };
        let moved = tensors * bytes + mask.bytes(shape);
        r.bytes(moved).rotation(moved)
    });
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32, F64 => f64], T => {
        Box::new(move |s: &Stream, rows: &[Row]| softmax::<T>(s, op, shape, mask, rows))
    });
    Ok(c.job(rows, run))
}

fn softmax<T: Element>(
    s: &Stream,
    op: SoftmaxOp,
    shape: [usize; 2],
    mask_case: MaskCase,
    rows: &[Row],
) -> Result<()> {
    let mut desc = SoftmaxDescriptor::new(op, T::KIND, shape);
    if mask_case != MaskCase::None {
        desc = desc.with_mask(SoftmaxMask::Keep);
    }
    let plan = SoftmaxPlan::<T, 2>::select(s, &desc, &PlanPreference::default())?;
    // the keep mask: every third column masked (broadcast), or causal
    let keep: Vec<bool> = match mask_case {
        MaskCase::None => vec![],
        MaskCase::Row => (0..shape[1]).map(|k| k % 3 != 1).collect(),
        MaskCase::Causal => (0..shape[0] * shape[1])
            .map(|i| i % shape[1] <= (i / shape[1]) % shape[1])
            .collect(),
    };
    let keep = DeviceBuffer::from_host(s, &keep)?;
    let mask_view = || -> Result<SoftmaxMaskRef<'_, T, 2>> {
        Ok(match mask_case {
            MaskCase::None => SoftmaxMaskRef::None,
            MaskCase::Row => SoftmaxMaskRef::Keep(TensorRef::new(keep.as_slice(), shape, [0, 1])?),
            MaskCase::Causal => {
                SoftmaxMaskRef::Keep(TensorRef::contiguous(keep.as_slice(), shape)?)
            }
        })
    };
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
                    mask: mask_view()?,
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
                    mask: mask_view()?,
                    dx: TensorMut::contiguous(out.as_slice_mut(), shape)?,
                },
            )
        }),
        p => Err(bad_pass(p)),
    })
}
