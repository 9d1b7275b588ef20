//! Convolution and pooling benchmark cases (same names, shapes, dtypes and
//! layouts as `bench/torch_cases/conv.py`): ResNet-50 convolutions at batch
//! 64 (NHWC bf16, all three passes), the 3x3 64->64 56x56 layer in NCHW
//! IEEE f32, wav2vec2's feature-extractor convs (bf16), a 3-D UNet block
//! (NDHWC bf16), and two pooling cases. Plans use measured autotuning, as
//! PyTorch does with `cudnn.benchmark = True`. Inputs are seeded random
//! values; timing and the JSON lines come from [`crate::harness`], the same
//! way `bench/torch_baseline.py` times PyTorch.

use baracuda_kernels::*;
use half::bf16;

use crate::harness::{
    case, emit, part, part_mut, random_buffer, rotation, time_rotating_ms, Record,
};

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

#[allow(clippy::too_many_arguments)] // one conv case
fn conv<T: Element, const N: usize, const R: usize>(
    s: &Stream,
    name: &str,
    l: ConvLayout,
    batch: usize,
    c_in: usize,
    c_out: usize,
    input: [usize; N],
    k: usize,
    stride: usize,
    pad: usize,
    allow_tf32: bool,
) -> Result<()>
where
    Rank<N, R>: SpatialRank,
{
    let d = ConvDescriptor::new(batch, c_in, c_out, input, [k; N], T::KIND)
        .with_stride([stride; N])
        .with_padding([pad; N]);
    let d = d.with_layout(l);
    let pref = PlanPreference::default()
        .with_autotune(Autotune::Measured)
        .with_allow_tf32(allow_tf32);
    let plan = ConvPlan::<T, N, R>::select(s, &d, &pref)?;
    let out = plan.output_dims();
    let xs: [usize; R] = std::array::from_fn(|i| match i {
        0 => batch,
        1 => c_in,
        _ => input[i - 2],
    });
    let ws: [usize; R] = std::array::from_fn(|i| match i {
        0 => c_out,
        1 => c_in,
        _ => k,
    });
    let ys: [usize; R] = std::array::from_fn(|i| match i {
        0 => batch,
        1 => c_out,
        _ => out[i - 2],
    });
    let n = |v: &[usize; R]| v.iter().product::<usize>();
    // Every pass touches one x-sized, one w-sized and one y-sized tensor.
    let sets = rotation(s, (n(&xs) + n(&ws) + n(&ys)) * T::KIND.size_bytes());
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
    let flop = 2.0 * n(&ys) as f64 * c_in as f64 * (k as f64).powi(N as i32);
    let shape = format!("x{xs:?} w{ws:?} s{stride} p{pad}");
    let record = |pass: &'static str, ms: f64| {
        emit(&Record {
            op: name,
            pass,
            dtype: T::KIND,
            shape: shape.clone(),
            ms,
            bytes: None,
            flops: Some(flop),
        })
    };
    let ms = time_rotating_ms(s, sets, |i| {
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
    })?;
    record("fw", ms);
    let ms = time_rotating_ms(s, sets, |i| {
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
    })?;
    record("bw_data", ms);
    let ms = time_rotating_ms(s, sets, |i| {
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
    })?;
    record("dw", ms);
    eprintln!("{name}: {} ({sets} buffer sets)", plan.sku());
    Ok(())
}

/// ResNet-50's distinct conv shapes: (c_in, c_out, k, stride, input hw).
pub const RESNET50: [(usize, usize, usize, usize, usize); 23] = [
    (3, 64, 7, 2, 224),
    (64, 64, 1, 1, 56),
    (64, 64, 3, 1, 56),
    (64, 256, 1, 1, 56),
    (256, 64, 1, 1, 56),
    (256, 128, 1, 1, 56),
    (128, 128, 3, 2, 56),
    (128, 512, 1, 1, 28),
    (256, 512, 1, 2, 56),
    (512, 128, 1, 1, 28),
    (128, 128, 3, 1, 28),
    (512, 256, 1, 1, 28),
    (256, 256, 3, 2, 28),
    (256, 1024, 1, 1, 14),
    (512, 1024, 1, 2, 28),
    (1024, 256, 1, 1, 14),
    (256, 256, 3, 1, 14),
    (1024, 512, 1, 1, 14),
    (512, 512, 3, 2, 14),
    (512, 2048, 1, 1, 7),
    (1024, 2048, 1, 2, 14),
    (2048, 512, 1, 1, 7),
    (512, 512, 3, 1, 7),
];

/// wav2vec2 feature extractor on 8 x 16 s at 16 kHz: (c_in, k, stride, length).
pub const WAV2VEC2: [(usize, usize, usize, usize); 7] = [
    (1, 10, 5, 256000),
    (512, 3, 2, 51199),
    (512, 3, 2, 25599),
    (512, 3, 2, 12799),
    (512, 3, 2, 6399),
    (512, 2, 2, 3199),
    (512, 2, 2, 1599),
];

/// Run every conv/pool case, printing JSON lines; errors go to stderr and
/// the run continues.
pub fn run(s: &Stream) {
    let cl = ConvLayout::ChannelsLast;
    let cf = ConvLayout::ChannelsFirst;
    for (ci, co, k, st, hw) in RESNET50 {
        let name = format!("resnet50_conv_{ci}_{co}_k{k}_s{st}_{hw}");
        case("conv", &name, || {
            conv::<bf16, 2, 4>(s, &name, cl, 64, ci, co, [hw, hw], k, st, k / 2, false)
        });
    }
    case("conv", "resnet50_conv3x3_64_nchw_f32", || {
        conv::<f32, 2, 4>(
            s,
            "resnet50_conv3x3_64_nchw_f32",
            cf,
            64,
            64,
            64,
            [56, 56],
            3,
            1,
            1,
            false,
        )
    });
    for (ci, k, st, len) in WAV2VEC2 {
        let name = format!("wav2vec2_conv_{ci}_k{k}_s{st}_{len}");
        case("conv", &name, || {
            conv::<bf16, 1, 3>(s, &name, cf, 8, ci, 512, [len], k, st, 0, false)
        });
    }
    case("conv", "unet3d_conv3x3x3_64", || {
        conv::<bf16, 3, 5>(
            s,
            "unet3d_conv3x3x3_64",
            cl,
            2,
            64,
            64,
            [64, 64, 64],
            3,
            1,
            1,
            false,
        )
    });
    case("conv", "resnet50_maxpool3x3s2", || pool(s, false));
    case("conv", "resnet50_adaptive_avgpool", || pool(s, true));
}

fn pool(s: &Stream, adaptive: bool) -> Result<()> {
    let l = ConvLayout::ChannelsLast;
    let (name, xs, ys) = if adaptive {
        (
            "resnet50_adaptive_avgpool",
            [64usize, 2048, 7, 7],
            [64usize, 2048, 1, 1],
        )
    } else {
        (
            "resnet50_maxpool3x3s2",
            [64usize, 64, 112, 112],
            [64usize, 64, 56, 56],
        )
    };
    let n = |v: &[usize; 4]| v.iter().product::<usize>();
    // Each pass touches an x-sized and a y-sized tensor (and max pooling
    // the i64 indices).
    let index_bytes = if adaptive { 0 } else { n(&ys) * 8 };
    let sets = rotation(s, (n(&xs) + n(&ys)) * 2 + index_bytes);
    let xb = random_buffer::<bf16>(s, sets * n(&xs), 21, -1.0, 1.0)?;
    let dyb = random_buffer::<bf16>(s, sets * n(&ys), 22, -1.0, 1.0)?;
    // Outputs: one buffer per pass (see `rotation`); the forward's indices
    // are an output, the backward reads set i's from their own buffer.
    let mut yb = DeviceBuffer::<bf16>::uninit(s, n(&ys))?;
    let mut ib = DeviceBuffer::<i64>::zeros(s, sets * n(&ys))?;
    let mut iout = DeviceBuffer::<i64>::zeros(s, n(&ys))?;
    let mut dxb = DeviceBuffer::<bf16>::uninit(s, n(&xs))?;
    let bytes_fw = (n(&xs) + n(&ys)) as f64 * 2.0;
    let shape = format!("x{xs:?} y{ys:?}");
    let record = |pass: &'static str, ms: f64, bytes: f64| {
        emit(&Record {
            op: name,
            pass,
            dtype: ElementKind::Bf16,
            shape: shape.clone(),
            ms,
            bytes: Some(bytes),
            flops: None,
        })
    };
    if adaptive {
        let d = AdaptivePool2dDescriptor::new(64, 2048, [7, 7], [1, 1], ElementKind::Bf16)
            .with_layout(l);
        let plan = AdaptiveAvgPool2dPlan::<bf16>::select(s, &d, &PlanPreference::default())?;
        let ms = time_rotating_ms(s, sets, |i| {
            plan.run(
                s,
                Workspace::None,
                PoolArgs {
                    x: tref(&xb, i, xs, l)?,
                    y: tmut(&mut yb, 0, ys, l)?,
                    indices: None,
                },
            )
        })?;
        record("fw", ms, bytes_fw);
        let ms = time_rotating_ms(s, sets, |i| {
            plan.run_bw(
                s,
                Workspace::None,
                PoolBwArgs {
                    dy: tref(&dyb, i, ys, l)?,
                    indices: None,
                    x: None,
                    y: None,
                    dx: tmut(&mut dxb, 0, xs, l)?,
                },
            )
        })?;
        record("bw", ms, bytes_fw);
    } else {
        let d = Pool2dDescriptor::new(64, 64, [112, 112], [3, 3], ElementKind::Bf16)
            .with_stride([2, 2])
            .with_padding([1, 1])
            .with_layout(l);
        let plan = MaxPool2dPlan::<bf16>::select(s, &d, &PlanPreference::default())?;
        let ms = time_rotating_ms(s, sets, |i| {
            plan.run(
                s,
                Workspace::None,
                PoolArgs {
                    x: tref(&xb, i, xs, l)?,
                    y: tmut(&mut yb, 0, ys, l)?,
                    indices: Some(tmut(&mut iout, 0, ys, l)?),
                },
            )
        })?;
        record("fw", ms, bytes_fw + n(&ys) as f64 * 8.0);
        // The backward of set i scatters through the indices of set i's
        // forward.
        for i in 0..sets {
            plan.run(
                s,
                Workspace::None,
                PoolArgs {
                    x: tref(&xb, i, xs, l)?,
                    y: tmut(&mut yb, 0, ys, l)?,
                    indices: Some(tmut(&mut ib, i, ys, l)?),
                },
            )?;
        }
        let ms = time_rotating_ms(s, sets, |i| {
            plan.run_bw(
                s,
                Workspace::None,
                PoolBwArgs {
                    dy: tref(&dyb, i, ys, l)?,
                    indices: Some(tref(&ib, i, ys, l)?),
                    x: None,
                    y: None,
                    dx: tmut(&mut dxb, 0, xs, l)?,
                },
            )
        })?;
        record("bw", ms, bytes_fw + n(&ys) as f64 * 8.0);
    }
    Ok(())
}
