//! Norm benchmark cases, from `bench/cases/norm.json` (which
//! `bench/torch_cases/norm.py` reads too): LayerNorm (weight and bias) and
//! RMSNorm (weight) over the last dim of a contiguous matrix, their
//! residual forms (`layer_norm_residual`, `rms_norm_residual`: `s = x + r`
//! written and `y = norm(s)`; the backward on s adding a ds to dx), and
//! GroupNorm (weight and bias) of a contiguous `[N, C, spatial...]` in
//! `groups` groups, and BatchNorm in training (weight, bias, running
//! statistics updated with momentum 0.1) of a `[N, C, spatial...]` in
//! `layout` with parameters in the dtype or f32 (`params`), eps 1e-5,
//! forward (saving the statistics) and backward (dx and every parameter
//! gradient), and the device-to-device copy that sets the bandwidth
//! ceiling. Inputs rotate over buffer sets by L2 size ([`rotation_of`]).

use baracuda_kernels::*;
use half::{bf16, f16};
use serde::Deserialize;

use crate::cases::{bad_pass, by_dtype, Checked, Job, RawCase, Row, RunFn};
use crate::harness::{random_buffer, random_sets, rotation_of, time_passes, time_rotating_ms};

/// A case's parameters (the copy ceiling's too).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    /// Shape of x: (rows, h) for LayerNorm and RMSNorm, `[N, C,
    /// spatial...]` for GroupNorm.
    shape: Vec<usize>,
    /// GroupNorm's groups.
    #[serde(default)]
    groups: Option<usize>,
    /// BatchNorm's memory order: `channels_first` (default) or
    /// `channels_last`.
    #[serde(default)]
    layout: Option<String>,
    /// BatchNorm's parameter dtype: `same` (default, the activations') or
    /// `f32` (f16 and bf16 activations).
    #[serde(default)]
    params: Option<String>,
}

const EPS: f64 = 1e-5;

/// The job of one case of the norm case file.
pub(crate) fn job(c: &RawCase) -> Checked<Job> {
    if c.op == "copy" {
        return crate::reduce::copy_job(c);
    }
    let dtype = c.dtype()?;
    let size = dtype.size_bytes();
    let Params {
        shape,
        groups,
        layout,
        params,
    } = c.params()?;
    if c.op == "batch_norm" {
        if groups.is_some() {
            return Err(c.error("batch_norm takes no groups"));
        }
        return batch_job(c, shape, layout, params);
    }
    if layout.is_some() || params.is_some() {
        return Err(c.error(format!("{} takes no layout or params", c.op)));
    }
    if c.op == "group_norm" {
        return group_job(c, shape, groups);
    }
    if groups.is_some() {
        return Err(c.error(format!("{} takes no groups", c.op)));
    }
    let n: usize = shape.iter().product();
    let shape_s = format!("{shape:?}");
    let (layer, residual) = match c.op.as_str() {
        "layer_norm" => (true, false),
        "rms_norm" => (false, false),
        "layer_norm_residual" => (true, true),
        "rms_norm_residual" => (false, true),
        _ => return Err(c.unknown_op()),
    };
    let [m, h] = shape[..] else {
        return Err(c.error(format!("shape {shape:?} is not (rows, h)")));
    };
    let passes = c.passes(&["fw", "bw"])?;
    let p = if layer { 2 } else { 1 };
    // the residual form reads r besides x and writes s besides y; its
    // backward reads ds besides s and dy
    let extra = usize::from(residual);
    let rows = c.rows(&passes, dtype, &shape_s, |r| {
        let bytes = match r.pass {
            "fw" => (2 + 2 * extra) * n + p * h,
            _ => (3 + extra) * n + 2 * p * h,
        };
        r.bytes(bytes * size).rotation((3 + extra) * n * size)
    });
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32, F64 => f64], T => {
        Box::new(move |s: &Stream, rows: &[Row]| {
            if layer {
                norm::<T, LayerNorm>(s, [m, h], residual, rows)
            } else {
                norm::<T, RmsNorm>(s, [m, h], residual, rows)
            }
        })
    });
    Ok(c.job(rows, run))
}

/// LayerNorm or RMSNorm over `shape`, the residual form when `residual`
/// (s in its own buffer per set, read by that set's backward; a ds).
fn norm<T: Element, Kind: NormKind>(
    s: &Stream,
    shape: [usize; 2],
    residual: bool,
    rows: &[Row],
) -> Result<()> {
    let [m, h] = shape;
    let desc = if Kind::SAVES_MEAN {
        NormDescriptor::layer_norm(T::KIND, shape, 1)
    } else {
        NormDescriptor::rms_norm(T::KIND, shape, 1)
    }
    .with_eps(EPS)
    .with_residual(residual);
    let plan = NormPlan::<T, Kind, 2>::select(s, &desc, &PlanPreference::default())?;
    let sets = rotation_of(s, rows)?;
    let xs = random_sets::<T>(s, m * h, sets, 11, -2.0, 2.0)?;
    let dys = random_sets::<T>(s, m * h, sets, 12, -1.0, 1.0)?;
    let rs = random_sets::<T>(s, if residual { m * h } else { 1 }, sets, 15, -1.0, 1.0)?;
    let dss = random_sets::<T>(s, if residual { m * h } else { 1 }, sets, 16, -1.0, 1.0)?;
    let mut sums = (0..sets)
        .map(|_| DeviceBuffer::<T>::uninit(s, if residual { m * h } else { 1 }))
        .collect::<Result<Vec<_>>>()?;
    let w = random_buffer::<T>(s, h, 13, 0.5, 1.5)?;
    let b = random_buffer::<T>(s, h, 14, -1.0, 1.0)?;
    let mut y = DeviceBuffer::<T>::uninit(s, m * h)?;
    let mut dx = DeviceBuffer::<T>::uninit(s, m * h)?;
    let mut dw = DeviceBuffer::<T>::uninit(s, h)?;
    let mut db = DeviceBuffer::<T>::uninit(s, h)?;
    let mut stats = (0..sets)
        .map(|_| DeviceBuffer::<u8>::uninit(s, plan.stats_bytes().max(1)))
        .collect::<Result<Vec<_>>>()?;
    let mut ws = DeviceBuffer::<u8>::uninit(s, plan.bw_workspace_size(plan.grads()).max(1))?;
    let weight = TensorRef::contiguous(w.as_slice(), [h])?;
    let bias = Kind::SAVES_MEAN
        .then(|| TensorRef::contiguous(b.as_slice(), [h]))
        .transpose()?;
    let mut forward = |i: usize, stats: &mut DeviceBuffer<u8>, sum: &mut DeviceBuffer<T>| {
        plan.run(
            s,
            Workspace::None,
            NormArgs {
                x: TensorRef::contiguous(xs[i].as_slice(), shape)?,
                weight: Some(weight),
                bias,
                residual: residual
                    .then(|| TensorRef::contiguous(rs[i].as_slice(), shape))
                    .transpose()?,
                sum: residual
                    .then(|| TensorMut::contiguous(sum.as_slice_mut(), shape))
                    .transpose()?,
                y: TensorMut::contiguous(y.as_slice_mut(), shape)?,
                stats: Some(stats.as_slice_mut()),
            },
        )
    };
    // every set's statistics, for the backward
    for (i, (st, sum)) in stats.iter_mut().zip(&mut sums).enumerate() {
        forward(i, st, sum)?;
    }
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, sets, |i| forward(i, &mut stats[i], &mut sums[i])),
        "bw" => time_rotating_ms(s, sets, |i| {
            plan.run_bw(
                s,
                Workspace::Borrowed(ws.as_slice_mut()),
                NormBwArgs {
                    // the residual form's backward normalizes s
                    x: TensorRef::contiguous(
                        if residual {
                            sums[i].as_slice()
                        } else {
                            xs[i].as_slice()
                        },
                        shape,
                    )?,
                    weight: Some(weight),
                    stats: stats[i].as_slice(),
                    dy: TensorRef::contiguous(dys[i].as_slice(), shape)?,
                    ds: residual
                        .then(|| TensorRef::contiguous(dss[i].as_slice(), shape))
                        .transpose()?,
                    dx: Some(TensorMut::contiguous(dx.as_slice_mut(), shape)?),
                    dweight: Some(TensorMut::contiguous(dw.as_slice_mut(), [h])?),
                    dbias: Kind::SAVES_MEAN
                        .then(|| TensorMut::contiguous(db.as_slice_mut(), [h]))
                        .transpose()?,
                },
            )
        }),
        p => Err(bad_pass(p)),
    })
}

/// The job of a GroupNorm case: work as LayerNorm's with `h = C`.
fn group_job(c: &RawCase, shape: Vec<usize>, groups: Option<usize>) -> Checked<Job> {
    let dtype = c.dtype()?;
    let size = dtype.size_bytes();
    let Some(groups) = groups else {
        return Err(c.error("group_norm needs groups"));
    };
    if !(3..=5).contains(&shape.len()) {
        return Err(c.error(format!(
            "shape {shape:?} is not [N, C, spatial] of rank 3 to 5"
        )));
    }
    let n: usize = shape.iter().product();
    let ch = shape[1];
    let shape_s = format!("{shape:?}");
    let passes = c.passes(&["fw", "bw"])?;
    let rows = c.rows(&passes, dtype, &shape_s, |r| {
        let bytes = match r.pass {
            "fw" => 2 * n + 2 * ch,
            _ => 3 * n + 4 * ch,
        };
        r.bytes(bytes * size).rotation(3 * n * size)
    });
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32, F64 => f64], T => {
        let shape = shape.clone();
        Box::new(move |s: &Stream, rows: &[Row]| match shape.len() {
            3 => group_norm::<T, 3>(s, &shape, groups, rows),
            4 => group_norm::<T, 4>(s, &shape, groups, rows),
            _ => group_norm::<T, 5>(s, &shape, groups, rows),
        })
    });
    Ok(c.job(rows, run))
}

fn group_norm<T: Element, const R: usize>(
    s: &Stream,
    shape: &[usize],
    groups: usize,
    rows: &[Row],
) -> Result<()> {
    let shape: [usize; R] = core::array::from_fn(|i| shape[i]);
    let (n, ch) = (shape.iter().product::<usize>(), shape[1]);
    let desc = GroupNormDescriptor::group_norm(T::KIND, shape, groups).with_eps(EPS);
    let plan = GroupNormPlan::<T, R>::select(s, &desc, &PlanPreference::default())?;
    let sets = rotation_of(s, rows)?;
    let xs = random_sets::<T>(s, n, sets, 11, -2.0, 2.0)?;
    let dys = random_sets::<T>(s, n, sets, 12, -1.0, 1.0)?;
    let w = random_buffer::<T>(s, ch, 13, 0.5, 1.5)?;
    let b = random_buffer::<T>(s, ch, 14, -1.0, 1.0)?;
    let mut y = DeviceBuffer::<T>::uninit(s, n)?;
    let mut dx = DeviceBuffer::<T>::uninit(s, n)?;
    let mut dw = DeviceBuffer::<T>::uninit(s, ch)?;
    let mut db = DeviceBuffer::<T>::uninit(s, ch)?;
    let mut stats = (0..sets)
        .map(|_| DeviceBuffer::<u8>::uninit(s, plan.stats_bytes().max(1)))
        .collect::<Result<Vec<_>>>()?;
    let ws_bytes = plan
        .workspace_size()
        .max(plan.bw_workspace_size(plan.grads()));
    let mut ws = DeviceBuffer::<u8>::uninit(s, ws_bytes.max(1))?;
    let weight = TensorRef::contiguous(w.as_slice(), [ch])?;
    let bias = TensorRef::contiguous(b.as_slice(), [ch])?;
    let mut forward = |i: usize, stats: &mut DeviceBuffer<u8>, ws: &mut DeviceBuffer<u8>| {
        plan.run(
            s,
            Workspace::Borrowed(ws.as_slice_mut()),
            GroupNormArgs {
                x: TensorRef::contiguous(xs[i].as_slice(), shape)?,
                weight: Some(weight),
                bias: Some(bias),
                y: TensorMut::contiguous(y.as_slice_mut(), shape)?,
                stats: Some(stats.as_slice_mut()),
            },
        )
    };
    // every set's statistics, for the backward
    for (i, st) in stats.iter_mut().enumerate() {
        forward(i, st, &mut ws)?;
    }
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, sets, |i| forward(i, &mut stats[i], &mut ws)),
        "bw" => time_rotating_ms(s, sets, |i| {
            plan.run_bw(
                s,
                Workspace::Borrowed(ws.as_slice_mut()),
                GroupNormBwArgs {
                    x: TensorRef::contiguous(xs[i].as_slice(), shape)?,
                    weight: Some(weight),
                    stats: stats[i].as_slice(),
                    dy: TensorRef::contiguous(dys[i].as_slice(), shape)?,
                    dx: Some(TensorMut::contiguous(dx.as_slice_mut(), shape)?),
                    dweight: Some(TensorMut::contiguous(dw.as_slice_mut(), [ch])?),
                    dbias: Some(TensorMut::contiguous(db.as_slice_mut(), [ch])?),
                },
            )
        }),
        p => Err(bad_pass(p)),
    })
}

/// The job of a BatchNorm case: x, y (dy, dx) and the `[C]` operands.
fn batch_job(
    c: &RawCase,
    shape: Vec<usize>,
    layout: Option<String>,
    params: Option<String>,
) -> Checked<Job> {
    let dtype = c.dtype()?;
    let size = dtype.size_bytes();
    if !(2..=5).contains(&shape.len()) {
        return Err(c.error(format!(
            "shape {shape:?} is not [N, C, spatial...] of rank 2 to 5"
        )));
    }
    let layout = match layout.as_deref() {
        None | Some("channels_first") => ConvLayout::ChannelsFirst,
        Some("channels_last") => ConvLayout::ChannelsLast,
        Some(other) => return Err(c.error(format!("layout {other:?}"))),
    };
    let f32_params = match params.as_deref() {
        None | Some("same") => false,
        Some("f32") if matches!(dtype, ElementKind::F16 | ElementKind::Bf16) => true,
        Some(other) => return Err(c.error(format!("params {other:?} for {dtype}"))),
    };
    let n: usize = shape.iter().product();
    let ch = shape[1];
    let psize = if f32_params { 4 } else { size };
    let shape_s = format!("{shape:?}");
    let passes = c.passes(&["fw", "bw"])?;
    // fw: x read, y written; weight, bias, and the running statistics
    // read and written. bw: x and dy read, dx written; weight read,
    // dweight and dbias written.
    let rows = c.rows(&passes, dtype, &shape_s, |r| {
        let bytes = match r.pass {
            "fw" => 2 * n * size + 6 * ch * psize,
            _ => 3 * n * size + 3 * ch * psize,
        };
        r.bytes(bytes).rotation(3 * n * size)
    });
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32, F64 => f64], T => {
        let shape = shape.clone();
        Box::new(move |s: &Stream, rows: &[Row]| {
            if f32_params {
                batch_norm_ranked::<T, f32>(s, &shape, layout, rows)
            } else {
                batch_norm_ranked::<T, T>(s, &shape, layout, rows)
            }
        })
    });
    Ok(c.job(rows, run))
}

fn batch_norm_ranked<T: Element, P: Element>(
    s: &Stream,
    shape: &[usize],
    layout: ConvLayout,
    rows: &[Row],
) -> Result<()> {
    match shape.len() {
        2 => batch_norm::<T, 2, P>(s, shape, layout, rows),
        3 => batch_norm::<T, 3, P>(s, shape, layout, rows),
        4 => batch_norm::<T, 4, P>(s, shape, layout, rows),
        _ => batch_norm::<T, 5, P>(s, shape, layout, rows),
    }
}

/// Dense strides of a logical `[N, C, spatial...]` shape in `layout`.
fn layout_strides<const R: usize>(shape: [usize; R], layout: ConvLayout) -> [usize; R] {
    let mut st = [1usize; R];
    match layout {
        ConvLayout::ChannelsFirst => {
            for a in (0..R - 1).rev() {
                st[a] = st[a + 1] * shape[a + 1];
            }
        }
        ConvLayout::ChannelsLast => {
            let mut acc = shape[1];
            for a in (2..R).rev() {
                st[a] = acc;
                acc *= shape[a];
            }
            st[0] = acc;
        }
    }
    st
}

fn batch_norm<T: Element, const R: usize, P: Element>(
    s: &Stream,
    shape: &[usize],
    layout: ConvLayout,
    rows: &[Row],
) -> Result<()> {
    let shape: [usize; R] = core::array::from_fn(|i| shape[i]);
    let strides = layout_strides(shape, layout);
    let (n, ch) = (shape.iter().product::<usize>(), shape[1]);
    let desc = BatchNormDescriptor::batch_norm(T::KIND, shape)
        .with_param(P::KIND)
        .with_eps(EPS)
        .with_layout(layout);
    let plan = BatchNormPlan::<T, R, P>::select(s, &desc, &PlanPreference::default())?;
    let sets = rotation_of(s, rows)?;
    let xs = random_sets::<T>(s, n, sets, 11, -2.0, 2.0)?;
    let dys = random_sets::<T>(s, n, sets, 12, -1.0, 1.0)?;
    let w = random_buffer::<P>(s, ch, 13, 0.5, 1.5)?;
    let b = random_buffer::<P>(s, ch, 14, -1.0, 1.0)?;
    let mut rm = random_buffer::<P>(s, ch, 15, -0.5, 0.5)?;
    let mut rv = random_buffer::<P>(s, ch, 16, 0.5, 1.5)?;
    let mut y = DeviceBuffer::<T>::uninit(s, n)?;
    let mut dx = DeviceBuffer::<T>::uninit(s, n)?;
    let mut dw = DeviceBuffer::<P>::uninit(s, ch)?;
    let mut db = DeviceBuffer::<P>::uninit(s, ch)?;
    let mut stats = (0..sets)
        .map(|_| DeviceBuffer::<u8>::uninit(s, plan.stats_bytes().max(1)))
        .collect::<Result<Vec<_>>>()?;
    let ws_bytes = plan
        .workspace_size()
        .max(plan.bw_workspace_size(plan.grads()));
    let mut ws = DeviceBuffer::<u8>::uninit(s, ws_bytes.max(1))?;
    let weight = TensorRef::contiguous(w.as_slice(), [ch])?;
    let bias = TensorRef::contiguous(b.as_slice(), [ch])?;
    let mut forward = |i: usize, stats: &mut DeviceBuffer<u8>, ws: &mut DeviceBuffer<u8>| {
        plan.run(
            s,
            Workspace::Borrowed(ws.as_slice_mut()),
            BatchNormArgs {
                x: TensorRef::new(xs[i].as_slice(), shape, strides)?,
                weight: Some(weight),
                bias: Some(bias),
                running_mean: Some(TensorMut::contiguous(rm.as_slice_mut(), [ch])?),
                running_var: Some(TensorMut::contiguous(rv.as_slice_mut(), [ch])?),
                y: TensorMut::new(y.as_slice_mut(), shape, strides)?,
                stats: Some(stats.as_slice_mut()),
            },
        )
    };
    // every set's statistics, for the backward
    for (i, st) in stats.iter_mut().enumerate() {
        forward(i, st, &mut ws)?;
    }
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, sets, |i| forward(i, &mut stats[i], &mut ws)),
        "bw" => time_rotating_ms(s, sets, |i| {
            plan.run_bw(
                s,
                Workspace::Borrowed(ws.as_slice_mut()),
                BatchNormBwArgs {
                    x: TensorRef::new(xs[i].as_slice(), shape, strides)?,
                    weight: Some(weight),
                    stats: stats[i].as_slice(),
                    dy: TensorRef::new(dys[i].as_slice(), shape, strides)?,
                    dx: Some(TensorMut::new(dx.as_slice_mut(), shape, strides)?),
                    dweight: Some(TensorMut::contiguous(dw.as_slice_mut(), [ch])?),
                    dbias: Some(TensorMut::contiguous(db.as_slice_mut(), [ch])?),
                },
            )
        }),
        p => Err(bad_pass(p)),
    })
}
