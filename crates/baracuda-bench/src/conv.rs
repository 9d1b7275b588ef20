//! Convolution and pooling benchmark cases, from `bench/cases/conv.json`
//! (which `bench/torch_cases/conv.py` reads too): ResNet-50 convolutions at
//! batch 64 (NHWC bf16), the 3x3 64->64 56x56 layer in NCHW IEEE f32,
//! wav2vec2's feature-extractor convs (bf16), a 3-D UNet block (NDHWC
//! bf16), and two pooling cases. Plans use measured autotuning, as PyTorch
//! does with `cudnn.benchmark = True`; f32 convolutions are IEEE (TF32
//! off) on both sides. Inputs are seeded random values; timing and the
//! JSON lines come from [`crate::harness`], the same way
//! `bench/torch_baseline.py` times PyTorch.

use baracuda_kernels::*;
use half::{bf16, f16};
use serde::Deserialize;

use crate::cases::{bad_pass, by_dtype, de_conv_layout, Checked, Job, RawCase, Row, RunFn};
use crate::harness::{part, part_mut, random_buffer, rotation_of, time_passes, time_rotating_ms};

/// A convolution case's parameters (PyTorch `nn.ConvNd`; the filter,
/// stride and padding apply to every spatial axis, dilation is 1).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Conv {
    #[serde(deserialize_with = "de_conv_layout")]
    layout: ConvLayout,
    batch: usize,
    c_in: usize,
    c_out: usize,
    /// Spatial extents; their count is the rank (1, 2 or 3).
    input: Vec<usize>,
    filter: usize,
    stride: usize,
    padding: usize,
    groups: usize,
}

/// A 2-D max pooling case's parameters (`nn.MaxPool2d` with indices).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MaxPool {
    #[serde(deserialize_with = "de_conv_layout")]
    layout: ConvLayout,
    batch: usize,
    channels: usize,
    input: [usize; 2],
    window: usize,
    stride: usize,
    padding: usize,
}

/// A 2-D adaptive average pooling case's parameters.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AdaptivePool {
    #[serde(deserialize_with = "de_conv_layout")]
    layout: ConvLayout,
    batch: usize,
    channels: usize,
    input: [usize; 2],
    output: [usize; 2],
}

/// The kernels crate's descriptor of convolution case `p` at rank `N`.
fn conv_descriptor<const N: usize>(p: &Conv, dtype: ElementKind) -> ConvDescriptor<N> {
    let input: [usize; N] = std::array::from_fn(|i| p.input[i]);
    ConvDescriptor::new(p.batch, p.c_in, p.c_out, input, [p.filter; N], dtype)
        .with_stride([p.stride; N])
        .with_padding([p.padding; N])
        .with_groups(p.groups)
        .with_layout(p.layout)
}

/// The kernels crate's descriptor of a pooling case.
#[derive(Clone, Copy)]
enum PoolDescriptor2d {
    Max(Pool2dDescriptor),
    AdaptiveAvg(AdaptivePool2dDescriptor),
}

/// The descriptor of max pooling case `p`.
fn max_pool_descriptor(p: &MaxPool, dtype: ElementKind) -> PoolDescriptor2d {
    let d = Pool2dDescriptor::new(p.batch, p.channels, p.input, [p.window; 2], dtype)
        .with_stride([p.stride; 2])
        .with_padding([p.padding; 2])
        .with_layout(p.layout);
    PoolDescriptor2d::Max(d)
}

/// The descriptor of adaptive average pooling case `p`.
fn adaptive_pool_descriptor(p: &AdaptivePool, dtype: ElementKind) -> PoolDescriptor2d {
    let d = AdaptivePool2dDescriptor::new(p.batch, p.channels, p.input, p.output, dtype)
        .with_layout(p.layout);
    PoolDescriptor2d::AdaptiveAvg(d)
}

/// The job of one case of the conv case file.
pub(crate) fn job(c: &RawCase) -> Checked<Job> {
    let dtype = c.dtype()?;
    match c.op.as_str() {
        "conv" => {
            let p: Conv = c.params()?;
            match p.input.len() {
                1 => conv_job::<1, 3>(c, dtype, &p),
                2 => conv_job::<2, 4>(c, dtype, &p),
                3 => conv_job::<3, 5>(c, dtype, &p),
                r => Err(c.error(format!("spatial rank {r} (takes 1, 2, 3)"))),
            }
        }
        "max_pool2d" => pool_job(c, dtype, max_pool_descriptor(&c.params()?, dtype)),
        "adaptive_avg_pool2d" => pool_job(c, dtype, adaptive_pool_descriptor(&c.params()?, dtype)),
        _ => Err(c.unknown_op()),
    }
}

/// The logical `[n, c, spatial...]` shapes of x, w and y.
type ConvDims<const R: usize> = ([usize; R], [usize; R], [usize; R]);

fn conv_job<const N: usize, const R: usize>(
    c: &RawCase,
    dtype: ElementKind,
    p: &Conv,
) -> Checked<Job>
where
    Rank<N, R>: SpatialRank,
{
    let passes = c.passes(&["fw", "bw_data", "dw"])?;
    if p.groups == 0 || p.c_in % p.groups != 0 || p.c_out % p.groups != 0 {
        return Err(c.error("groups must divide c_in and c_out"));
    }
    let d = conv_descriptor::<N>(p, dtype);
    let out = d.output().map_err(|e| c.error(e))?;
    let xs: [usize; R] = std::array::from_fn(|i| match i {
        0 => p.batch,
        1 => p.c_in,
        _ => p.input[i - 2],
    });
    let ws: [usize; R] = std::array::from_fn(|i| match i {
        0 => p.c_out,
        1 => p.c_in / p.groups,
        _ => p.filter,
    });
    let ys: [usize; R] = std::array::from_fn(|i| match i {
        0 => p.batch,
        1 => p.c_out,
        _ => out[i - 2],
    });
    let n = |v: &[usize; R]| v.iter().product::<usize>();
    let flops = 2 * n(&ys) * (p.c_in / p.groups) * p.filter.pow(N as u32);
    // Every pass touches one x-sized, one w-sized and one y-sized tensor.
    let touched = (n(&xs) + n(&ws) + n(&ys)) * dtype.size_bytes();
    let shape = format!("x{xs:?} w{ws:?} s{} p{}", p.stride, p.padding);
    let rows = c.rows(&passes, dtype, &shape, |r| r.flops(flops).rotation(touched));
    let dims = (xs, ws, ys);
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32], T => {
        Box::new(move |s: &Stream, rows: &[Row]| conv::<T, N, R>(s, &d, dims, rows))
    });
    Ok(c.job(rows, run))
}

fn pool_job(c: &RawCase, dtype: ElementKind, d: PoolDescriptor2d) -> Checked<Job> {
    let passes = c.passes(&["fw", "bw"])?;
    let (batch, channels, input, out, index_bytes) = match d {
        PoolDescriptor2d::Max(m) => {
            let out = m.output().map_err(|e| c.error(e))?;
            (m.batch, m.channels, m.input, out, 8)
        }
        PoolDescriptor2d::AdaptiveAvg(a) => (a.batch, a.channels, a.input, a.output, 0),
    };
    let xs = [batch, channels, input[0], input[1]];
    let ys = [batch, channels, out[0], out[1]];
    let n = |v: &[usize; 4]| v.iter().product::<usize>();
    // Each pass touches an x-sized and a y-sized tensor (and max pooling
    // the i64 indices).
    let bytes = (n(&xs) + n(&ys)) * dtype.size_bytes() + n(&ys) * index_bytes;
    let rows = c.rows(&passes, dtype, &format!("x{xs:?} y{ys:?}"), |r| {
        r.bytes(bytes).rotation(bytes)
    });
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32], T => {
        Box::new(move |s: &Stream, rows: &[Row]| pool::<T>(s, d, (xs, ys), rows))
    });
    Ok(c.job(rows, run))
}

fn phys<const R: usize>(shape: [usize; R], l: ConvLayout) -> ([usize; R], [usize; R]) {
    let mut p: [usize; R] = std::array::from_fn(|i| i);
    if l == ConvLayout::ChannelsLast {
        p[1] = R - 1;
        for (i, v) in p.iter_mut().enumerate().skip(2) {
            *v = i - 1;
        }
    }
    let mut ph = [0usize; R];
    for (i, &j) in p.iter().enumerate() {
        ph[j] = shape[i];
    }
    (ph, p)
}

/// Buffer set `i` of `b` as a tensor of `shape` in layout `l`.
fn tref<T: Element, const R: usize>(
    b: &DeviceBuffer<T>,
    i: usize,
    shape: [usize; R],
    l: ConvLayout,
) -> Result<TensorRef<'_, T, R>> {
    let (ph, p) = phys(shape, l);
    TensorRef::contiguous(part(b, i, shape.iter().product())?, ph)?.permute(p)
}

/// [`tref`] for writing.
fn tmut<T: Element, const R: usize>(
    b: &mut DeviceBuffer<T>,
    i: usize,
    shape: [usize; R],
    l: ConvLayout,
) -> Result<TensorMut<'_, T, R>> {
    let (ph, p) = phys(shape, l);
    TensorMut::contiguous(part_mut(b, i, shape.iter().product())?, ph)?.permute(p)
}

fn conv<T: Element, const N: usize, const R: usize>(
    s: &Stream,
    d: &ConvDescriptor<N>,
    (xs, ws, ys): ConvDims<R>,
    rows: &[Row],
) -> Result<()>
where
    Rank<N, R>: SpatialRank,
{
    let l = d.layout;
    let pref = PlanPreference::default()
        .with_autotune(Autotune::Measured)
        .with_allow_tf32(false);
    let plan = ConvPlan::<T, N, R>::select(s, d, &pref)?;
    if plan.output_dims()[..] != ys[2..] {
        return Err(Error::InvalidArgument {
            op: "bench",
            arg: "y",
            reason: format!("plan output {:?}, case {ys:?}", plan.output_dims()),
        });
    }
    let n = |v: &[usize; R]| v.iter().product::<usize>();
    let sets = rotation_of(s, rows)?;
    let xb = random_buffer::<T>(s, sets * n(&xs), 11, -1.0, 1.0)?;
    let wb = random_buffer::<T>(s, sets * n(&ws), 12, -1.0, 1.0)?;
    let dyb = random_buffer::<T>(s, sets * n(&ys), 13, -1.0, 1.0)?;
    // Outputs: one buffer per pass (see `rotation`).
    let mut yb = DeviceBuffer::<T>::uninit(s, n(&ys))?;
    let mut dxb = DeviceBuffer::<T>::uninit(s, n(&xs))?;
    let mut dwb = DeviceBuffer::<T>::uninit(s, n(&ws))?;
    let ws_bytes = plan
        .workspace_size()
        .max(plan.bw_workspace_size(Grad::X | Grad::Weight));
    let mut wsb = DeviceBuffer::<u8>::uninit(s, ws_bytes.max(1))?;
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, sets, |i| {
            plan.run(
                s,
                Workspace::Borrowed(wsb.as_slice_mut()),
                ConvArgs {
                    x: tref(&xb, i, xs, l)?,
                    w: tref(&wb, i, ws, l)?,
                    bias: None,
                    y: tmut(&mut yb, 0, ys, l)?,
                },
            )
        }),
        "bw_data" => time_rotating_ms(s, sets, |i| {
            plan.run_bw(
                s,
                Workspace::Borrowed(wsb.as_slice_mut()),
                ConvBwArgs {
                    x: tref(&xb, i, xs, l)?,
                    w: tref(&wb, i, ws, l)?,
                    y: None,
                    dy: tref(&dyb, i, ys, l)?,
                    dx: Some(tmut(&mut dxb, 0, xs, l)?),
                    dw: None,
                    dbias: None,
                },
            )
        }),
        "dw" => time_rotating_ms(s, sets, |i| {
            plan.run_bw(
                s,
                Workspace::Borrowed(wsb.as_slice_mut()),
                ConvBwArgs {
                    x: tref(&xb, i, xs, l)?,
                    w: tref(&wb, i, ws, l)?,
                    y: None,
                    dy: tref(&dyb, i, ys, l)?,
                    dx: None,
                    dw: Some(tmut(&mut dwb, 0, ws, l)?),
                    dbias: None,
                },
            )
        }),
        p => Err(bad_pass(p)),
    })?;
    let name = rows.first().map_or("conv", |r| r.name.as_str());
    eprintln!("{name}: {} ({sets} buffer sets)", plan.sku());
    Ok(())
}

/// Forward arguments over buffer set `i` of x (and `indices`).
fn pool_args<'a, T: Element>(
    xb: &'a DeviceBuffer<T>,
    yb: &'a mut DeviceBuffer<T>,
    indices: Option<TensorMut<'a, i64, 4>>,
    i: usize,
    (xs, ys): ([usize; 4], [usize; 4]),
    l: ConvLayout,
) -> Result<PoolArgs<'a, T, 4>> {
    Ok(PoolArgs {
        x: tref(xb, i, xs, l)?,
        y: tmut(yb, 0, ys, l)?,
        indices,
    })
}

/// Backward arguments over buffer set `i` of dy (and `indices`).
fn pool_bw_args<'a, T: Element>(
    dyb: &'a DeviceBuffer<T>,
    dxb: &'a mut DeviceBuffer<T>,
    indices: Option<TensorRef<'a, i64, 4>>,
    i: usize,
    (xs, ys): ([usize; 4], [usize; 4]),
    l: ConvLayout,
) -> Result<PoolBwArgs<'a, T, 4>> {
    Ok(PoolBwArgs {
        dy: tref(dyb, i, ys, l)?,
        indices,
        x: None,
        y: None,
        dx: tmut(dxb, 0, xs, l)?,
    })
}

fn pool<T: Element>(
    s: &Stream,
    d: PoolDescriptor2d,
    (xs, ys): ([usize; 4], [usize; 4]),
    rows: &[Row],
) -> Result<()> {
    let n = |v: &[usize; 4]| v.iter().product::<usize>();
    let sets = rotation_of(s, rows)?;
    let xb = random_buffer::<T>(s, sets * n(&xs), 21, -1.0, 1.0)?;
    let dyb = random_buffer::<T>(s, sets * n(&ys), 22, -1.0, 1.0)?;
    // Outputs: one buffer per pass (see `rotation`).
    let mut yb = DeviceBuffer::<T>::uninit(s, n(&ys))?;
    let mut dxb = DeviceBuffer::<T>::uninit(s, n(&xs))?;
    let dims = (xs, ys);
    match d {
        PoolDescriptor2d::AdaptiveAvg(d) => {
            let l = d.layout;
            let plan = AdaptiveAvgPool2dPlan::<T>::select(s, &d, &PlanPreference::default())?;
            time_passes(rows, |pass| match pass {
                "fw" => time_rotating_ms(s, sets, |i| {
                    let args = pool_args(&xb, &mut yb, None, i, dims, l)?;
                    plan.run(s, Workspace::None, args)
                }),
                "bw" => time_rotating_ms(s, sets, |i| {
                    let args = pool_bw_args(&dyb, &mut dxb, None, i, dims, l)?;
                    plan.run_bw(s, Workspace::None, args)
                }),
                p => Err(bad_pass(p)),
            })
        }
        PoolDescriptor2d::Max(d) => {
            let l = d.layout;
            // The forward's indices are an output; the backward reads set
            // i's from their own buffer.
            let mut ib = DeviceBuffer::<i64>::zeros(s, sets * n(&ys))?;
            let mut iout = DeviceBuffer::<i64>::zeros(s, n(&ys))?;
            let plan = MaxPool2dPlan::<T>::select(s, &d, &PlanPreference::default())?;
            time_passes(rows, |pass| match pass {
                "fw" => time_rotating_ms(s, sets, |i| {
                    let indices = Some(tmut(&mut iout, 0, ys, l)?);
                    plan.run(
                        s,
                        Workspace::None,
                        pool_args(&xb, &mut yb, indices, i, dims, l)?,
                    )
                }),
                "bw" => {
                    // The backward of set i scatters through the indices of
                    // set i's forward.
                    for i in 0..sets {
                        let indices = Some(tmut(&mut ib, i, ys, l)?);
                        plan.run(
                            s,
                            Workspace::None,
                            pool_args(&xb, &mut yb, indices, i, dims, l)?,
                        )?;
                    }
                    time_rotating_ms(s, sets, |i| {
                        let indices = Some(tref(&ib, i, ys, l)?);
                        let args = pool_bw_args(&dyb, &mut dxb, indices, i, dims, l)?;
                        plan.run_bw(s, Workspace::None, args)
                    })
                }
                p => Err(bad_pass(p)),
            })
        }
    }
}
