//! Shape-family benchmark cases, from `bench/cases/shape.json` (which
//! `bench/torch_cases/shape.py` reads too): flip, roll, tril/triu, the
//! pads, repeat and unfold of one contiguous tensor, forward (x to y) and
//! backward (dy to dx); cat of `count` contiguous inputs of one shape along `dim`, forward
//! and backward (dy into every input's gradient); the copy of a view with
//! two dims exchanged into a contiguous tensor (`transpose`); and the
//! device-to-device copy that sets the bandwidth ceiling. Traffic: every
//! pass reads its input and writes its output once.

use baracuda_kernels::*;
use half::{bf16, f16};
use serde::Deserialize;

use crate::cases::{bad_pass, by_dtype, Checked, Job, RawCase, Row, RunFn};
use crate::harness::{random_sets, rotation_of, time_passes, time_rotating_ms};

/// `flip` parameters.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FlipParams {
    shape: Vec<usize>,
    dims: Vec<usize>,
}

/// `roll` parameters (`dims` empty: the flattened roll by `shifts[0]`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RollParams {
    shape: Vec<usize>,
    shifts: Vec<usize>,
    dims: Vec<usize>,
}

/// `tril` and `triu` parameters.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TriParams {
    shape: Vec<usize>,
    diagonal: usize,
}

/// `pad_<mode>` parameters: `F.pad`'s list.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PadParams {
    shape: Vec<usize>,
    pad: Vec<usize>,
}

/// `cat` parameters: `count` inputs of `shape`, along `dim`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatParams {
    shape: Vec<usize>,
    count: usize,
    dim: usize,
}

/// `transpose` parameters: `x.transpose(*dims).contiguous()`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TransposeParams {
    shape: Vec<usize>,
    dims: [usize; 2],
}

/// `repeat` parameters: one count per dim.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RepeatParams {
    shape: Vec<usize>,
    repeats: Vec<usize>,
}

/// `unfold` parameters.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UnfoldParams {
    shape: Vec<usize>,
    dim: usize,
    size: usize,
    step: usize,
}

fn ints(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

/// The op of a map case and its input shape.
fn map_op(c: &RawCase) -> Checked<(ShapeOp, Vec<usize>)> {
    let pad_mode = |name: &str| match name {
        "pad_constant" => Some(PadMode::Constant),
        "pad_reflect" => Some(PadMode::Reflect),
        "pad_replicate" => Some(PadMode::Replicate),
        "pad_circular" => Some(PadMode::Circular),
        _ => None,
    };
    Ok(match c.op.as_str() {
        "flip" => {
            let FlipParams { shape, dims } = c.params()?;
            (ShapeOp::flip(&ints(&dims)), shape)
        }
        "roll" => {
            let RollParams {
                shape,
                shifts,
                dims,
            } = c.params()?;
            (ShapeOp::roll(&ints(&shifts), &ints(&dims)), shape)
        }
        "tril" | "triu" => {
            let TriParams { shape, diagonal } = c.params()?;
            let diagonal = diagonal as i64;
            let op = if c.op == "tril" {
                ShapeOp::Tril { diagonal }
            } else {
                ShapeOp::Triu { diagonal }
            };
            (op, shape)
        }
        name => match pad_mode(name) {
            Some(mode) => {
                let PadParams { shape, pad } = c.params()?;
                (ShapeOp::pad(mode, &ints(&pad), 0.0), shape)
            }
            None => return Err(c.unknown_op()),
        },
    })
}

/// The job of one case of the shape case file.
pub(crate) fn job(c: &RawCase) -> Checked<Job> {
    if c.op == "copy" {
        return crate::reduce::copy_job(c);
    }
    if c.op == "cat" {
        return cat_job(c);
    }
    if c.op == "repeat" || c.op == "unfold" {
        return layout_job(c);
    }
    if c.op == "transpose" {
        return transpose_job(c);
    }
    let dtype = c.dtype()?;
    let passes = c.passes(&["fw", "bw"])?;
    let (op, shape) = map_op(c)?;
    if !(1..=5).contains(&shape.len()) {
        return Err(c.error(format!("rank {} (takes 1 to 5)", shape.len())));
    }
    let out = out_shape(op, &shape).map_err(|e| c.error(e))?;
    let size = dtype.size_bytes();
    let n_x: usize = shape.iter().product();
    let n_y: usize = out.iter().product();
    let bytes = (n_x + n_y) * size;
    let rows = c.rows(&passes, dtype, &format!("{shape:?}"), |r| {
        r.bytes(bytes).rotation(bytes)
    });
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32, F64 => f64], T => {
        Box::new(move |s: &Stream, rows: &[Row]| match shape.len() {
            1 => map::<T, 1>(s, op, &shape, rows),
            2 => map::<T, 2>(s, op, &shape, rows),
            3 => map::<T, 3>(s, op, &shape, rows),
            4 => map::<T, 4>(s, op, &shape, rows),
            _ => map::<T, 5>(s, op, &shape, rows),
        })
    });
    Ok(c.job(rows, run))
}

/// The output shape of `op` over `shape` (rank 1 to 5).
fn out_shape(op: ShapeOp, shape: &[usize]) -> Result<Vec<usize>> {
    fn of<const N: usize>(op: ShapeOp, shape: &[usize]) -> Result<Vec<usize>> {
        let s: [usize; N] = std::array::from_fn(|i| shape[i]);
        Ok(ShapeDescriptor::new(op, ElementKind::F32, s)
            .output_shape()?
            .to_vec())
    }
    match shape.len() {
        1 => of::<1>(op, shape),
        2 => of::<2>(op, shape),
        3 => of::<3>(op, shape),
        4 => of::<4>(op, shape),
        _ => of::<5>(op, shape),
    }
}

fn map<T: Element, const N: usize>(
    s: &Stream,
    op: ShapeOp,
    shape: &[usize],
    rows: &[Row],
) -> Result<()> {
    let shape: [usize; N] = std::array::from_fn(|i| shape[i]);
    let plan = ShapePlan::<T, N>::select(
        s,
        &ShapeDescriptor::new(op, T::KIND, shape),
        &PlanPreference::default(),
    )?;
    let ys = plan.output_shape();
    let (n_x, n_y) = (shape.iter().product(), ys.iter().product());
    let sets = rotation_of(s, rows)?;
    let bw = rows.iter().any(|r| r.pass == "bw");
    let xs = random_sets::<T>(s, n_x, sets, 21, -2.0, 2.0)?;
    let dys = if bw {
        random_sets::<T>(s, n_y, sets, 22, -1.0, 1.0)?
    } else {
        Vec::new()
    };
    let mut out = DeviceBuffer::<T>::uninit(s, n_x.max(n_y))?;
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, sets, |i| {
            let y = out.as_slice_mut().split_at(n_y).map(|p| p.0);
            plan.run(
                s,
                Workspace::None,
                ShapeArgs {
                    x: TensorRef::contiguous(xs[i].as_slice(), shape)?,
                    y: TensorMut::contiguous(y.ok_or_else(|| bad_pass("fw"))?, ys)?,
                },
            )
        }),
        "bw" => time_rotating_ms(s, sets, |i| {
            let dx = out.as_slice_mut().split_at(n_x).map(|p| p.0);
            plan.run_bw(
                s,
                Workspace::None,
                ShapeBwArgs {
                    dy: TensorRef::contiguous(dys[i].as_slice(), ys)?,
                    dx: TensorMut::contiguous(dx.ok_or_else(|| bad_pass("bw"))?, shape)?,
                },
            )
        }),
        p => Err(bad_pass(p)),
    })
}

/// The job of a `transpose` case: the copy of a view of x with two dims
/// exchanged into a contiguous y ([`CastPlan`] from T to T), forward only
/// (its backward is the same copy).
fn transpose_job(c: &RawCase) -> Checked<Job> {
    let dtype = c.dtype()?;
    let passes = c.passes(&["fw"])?;
    let TransposeParams { shape, dims } = c.params()?;
    if !(2..=4).contains(&shape.len()) || dims.iter().any(|&d| d >= shape.len()) {
        return Err(c.error(format!("rank {} with dims {dims:?}", shape.len())));
    }
    let n: usize = shape.iter().product();
    let bytes = 2 * n * dtype.size_bytes();
    let rows = c.rows(&passes, dtype, &format!("{shape:?}"), |r| {
        r.bytes(bytes).rotation(bytes)
    });
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32, F64 => f64], T => {
        Box::new(move |s: &Stream, rows: &[Row]| match shape.len() {
            2 => transpose::<T, 2>(s, &shape, dims, rows),
            3 => transpose::<T, 3>(s, &shape, dims, rows),
            _ => transpose::<T, 4>(s, &shape, dims, rows),
        })
    });
    Ok(c.job(rows, run))
}

fn transpose<T: Element, const N: usize>(
    s: &Stream,
    shape: &[usize],
    [d0, d1]: [usize; 2],
    rows: &[Row],
) -> Result<()> {
    let x_shape: [usize; N] = std::array::from_fn(|i| shape[i]);
    let mut perm: [usize; N] = std::array::from_fn(|i| i);
    perm.swap(d0, d1);
    let mut y_shape = x_shape;
    y_shape.swap(d0, d1);
    let plan = CastPlan::<T, T, N>::select(
        s,
        &CastDescriptor::new(T::KIND, T::KIND, y_shape),
        &PlanPreference::default(),
    )?;
    let n = shape.iter().product();
    let sets = rotation_of(s, rows)?;
    let xs = random_sets::<T>(s, n, sets, 27, -2.0, 2.0)?;
    let mut y = DeviceBuffer::<T>::uninit(s, n)?;
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, sets, |i| {
            plan.run(
                s,
                Workspace::None,
                CastArgs {
                    x: TensorRef::contiguous(xs[i].as_slice(), x_shape)?.permute(perm)?,
                    y: TensorMut::contiguous(y.as_slice_mut(), y_shape)?,
                },
            )
        }),
        p => Err(bad_pass(p)),
    })
}

/// The job of a `repeat` or `unfold` case ([`LayoutPlan`]).
fn layout_job(c: &RawCase) -> Checked<Job> {
    let dtype = c.dtype()?;
    let passes = c.passes(&["fw", "bw"])?;
    let (op, shape) = if c.op == "repeat" {
        let RepeatParams { shape, repeats } = c.params()?;
        (LayoutOp::repeat(&ints(&repeats)), shape)
    } else {
        let UnfoldParams {
            shape,
            dim,
            size,
            step,
        } = c.params()?;
        let op = LayoutOp::Unfold {
            dim: dim as i64,
            size: size as i64,
            step: step as i64,
        };
        (op, shape)
    };
    let grows = usize::from(c.op == "unfold");
    if !(1..=5 - grows).contains(&shape.len()) {
        return Err(c.error(format!("rank {} (takes 1 to {})", shape.len(), 5 - grows)));
    }
    let out = layout_out_shape(&op, &shape).map_err(|e| c.error(e))?;
    let size = dtype.size_bytes();
    let n_x: usize = shape.iter().product();
    let n_y: usize = out.iter().product();
    let bytes = (n_x + n_y) * size;
    let rows = c.rows(&passes, dtype, &format!("{shape:?}"), |r| {
        r.bytes(bytes).rotation(bytes)
    });
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32, F64 => f64], T => {
        Box::new(move |s: &Stream, rows: &[Row]| match (shape.len(), grows) {
            (1, 0) => layout::<T, 1, 1>(s, &op, &shape, rows),
            (2, 0) => layout::<T, 2, 2>(s, &op, &shape, rows),
            (3, 0) => layout::<T, 3, 3>(s, &op, &shape, rows),
            (4, 0) => layout::<T, 4, 4>(s, &op, &shape, rows),
            (5, 0) => layout::<T, 5, 5>(s, &op, &shape, rows),
            (1, _) => layout::<T, 1, 2>(s, &op, &shape, rows),
            (2, _) => layout::<T, 2, 3>(s, &op, &shape, rows),
            (3, _) => layout::<T, 3, 4>(s, &op, &shape, rows),
            _ => layout::<T, 4, 5>(s, &op, &shape, rows),
        })
    });
    Ok(c.job(rows, run))
}

/// The output shape of a layout `op` over `shape` (rank 1 to 5).
fn layout_out_shape(op: &LayoutOp, shape: &[usize]) -> Result<Vec<usize>> {
    fn of<const N: usize>(op: &LayoutOp, shape: &[usize]) -> Result<Vec<usize>> {
        let s: [usize; N] = std::array::from_fn(|i| shape[i]);
        LayoutDescriptor::new(op.clone(), ElementKind::F32, s).output_shape()
    }
    match shape.len() {
        1 => of::<1>(op, shape),
        2 => of::<2>(op, shape),
        3 => of::<3>(op, shape),
        4 => of::<4>(op, shape),
        _ => of::<5>(op, shape),
    }
}

fn layout<T: Element, const N: usize, const M: usize>(
    s: &Stream,
    op: &LayoutOp,
    shape: &[usize],
    rows: &[Row],
) -> Result<()> {
    let shape: [usize; N] = std::array::from_fn(|i| shape[i]);
    let plan = LayoutPlan::<T, N, M>::select(
        s,
        &LayoutDescriptor::new(op.clone(), T::KIND, shape),
        &PlanPreference::default(),
    )?;
    let ys = plan.output_shape();
    let (n_x, n_y) = (shape.iter().product(), ys.iter().product());
    let sets = rotation_of(s, rows)?;
    let bw = rows.iter().any(|r| r.pass == "bw");
    let xs = random_sets::<T>(s, n_x, sets, 25, -2.0, 2.0)?;
    let dys = if bw {
        random_sets::<T>(s, n_y, sets, 26, -1.0, 1.0)?
    } else {
        Vec::new()
    };
    let mut out = DeviceBuffer::<T>::uninit(s, n_x.max(n_y))?;
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, sets, |i| {
            let y = out.as_slice_mut().split_at(n_y).map(|p| p.0);
            plan.run(
                s,
                Workspace::None,
                LayoutArgs {
                    x: TensorRef::contiguous(xs[i].as_slice(), shape)?,
                    y: TensorMut::contiguous(y.ok_or_else(|| bad_pass("fw"))?, ys)?,
                },
            )
        }),
        "bw" => time_rotating_ms(s, sets, |i| {
            let dx = out.as_slice_mut().split_at(n_x).map(|p| p.0);
            plan.run_bw(
                s,
                Workspace::None,
                LayoutBwArgs {
                    dy: TensorRef::contiguous(dys[i].as_slice(), ys)?,
                    dx: TensorMut::contiguous(dx.ok_or_else(|| bad_pass("bw"))?, shape)?,
                },
            )
        }),
        p => Err(bad_pass(p)),
    })
}

fn cat_job(c: &RawCase) -> Checked<Job> {
    let dtype = c.dtype()?;
    let passes = c.passes(&["fw", "bw"])?;
    let CatParams { shape, count, dim } = c.params()?;
    if shape.len() != 2 || dim >= 2 || count == 0 {
        return Err(c.error("cat cases take a [rows, cols] shape, dim 0 or 1 and count >= 1"));
    }
    let shape = [shape[0], shape[1]];
    let bytes = 2 * count * shape[0] * shape[1] * dtype.size_bytes();
    let rows = c.rows(&passes, dtype, &format!("{count}x{shape:?}"), |r| {
        r.bytes(bytes).rotation(bytes)
    });
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32, F64 => f64], T => {
        Box::new(move |s: &Stream, rows: &[Row]| cat::<T>(s, shape, count, dim, rows))
    });
    Ok(c.job(rows, run))
}

fn cat<T: Element>(
    s: &Stream,
    shape: [usize; 2],
    count: usize,
    dim: usize,
    rows: &[Row],
) -> Result<()> {
    let desc = CatDescriptor {
        element: T::KIND,
        dim: dim as i64,
        shapes: vec![shape; count],
    };
    let plan = CatPlan::<T, 2>::select(s, &desc, &PlanPreference::default())?;
    let ys = desc.output_shape()?;
    let n = shape[0] * shape[1];
    let sets = rotation_of(s, rows)?;
    // set i: inputs i * count .. (i + 1) * count
    let xs = random_sets::<T>(s, n, sets * count, 23, -2.0, 2.0)?;
    let dys = random_sets::<T>(s, n * count, sets, 24, -1.0, 1.0)?;
    let mut y = DeviceBuffer::<T>::uninit(s, n * count)?;
    let mut dxs: Vec<DeviceBuffer<T>> = (0..count)
        .map(|_| DeviceBuffer::<T>::uninit(s, n))
        .collect::<Result<_>>()?;
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, sets, |i| {
            let views = xs[i * count..(i + 1) * count]
                .iter()
                .map(|b| TensorRef::contiguous(b.as_slice(), shape))
                .collect::<Result<Vec<_>>>()?;
            plan.run(
                s,
                Workspace::None,
                CatArgs {
                    xs: &views,
                    y: TensorMut::contiguous(y.as_slice_mut(), ys)?,
                },
            )
        }),
        "bw" => time_rotating_ms(s, sets, |i| {
            let views = dxs
                .iter_mut()
                .map(|b| TensorMut::contiguous(b.as_slice_mut(), shape).map(Some))
                .collect::<Result<Vec<_>>>()?;
            plan.run_bw(
                s,
                Workspace::None,
                CatBwArgs {
                    dy: TensorRef::contiguous(dys[i].as_slice(), ys)?,
                    dxs: views,
                },
            )
        }),
        p => Err(bad_pass(p)),
    })
}
