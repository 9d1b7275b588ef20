//! The pooling rows of the conv family: `max_pool`, `avg_pool`,
//! `adaptive_avg_pool`, `adaptive_max_pool` and `lp_pool`, ranks 1 to 3,
//! against `reference::conv::pool_fw` and `pool_bw`.
//!
//! Each row sweeps 24 random windows per setting (ceil_mode,
//! count_include_pad, a divisor override, p), over ranks and layouts; the
//! max and avg windows draw padding up to half the kernel on each side
//! (unequal on a third) and dilation 2 on a third. The global average
//! (adaptive avg to all 1s, an avg window as large as the input) takes
//! pool.cu's global-average kernels: both layouts, channels a multiple of
//! 8 (vN) and odd (v1), channel and plane counts that span several CTAs.
//! Every row adds a realistic shape and size 1.

use baracuda_kernels::reference::conv::{self as r, PoolGeometry, PoolKind};
use baracuda_kernels::*;

use super::bad_inputs::{adaptive_pool_bad_inputs, lp_pool_bad_inputs};
use super::bad_inputs::{pool_unsupported, window_pool_bad_inputs};
use super::{family_row, n_elems, shape, Dense, Out, LAYOUTS};
use crate::harness::*;
use crate::table::{OpCase, Tensors};

/// The pooling a row checks, as a type, so that the row's samples, bad
/// inputs and dtype check are functions generic over it.
pub trait Pooling: 'static {
    /// The reference's kind (Lp: p = 2).
    const KIND: PoolKind;
}

/// Declares the [`Pooling`]s.
macro_rules! poolings {
    ($($(#[$doc:meta])* $t:ident = $kind:expr;)*) => {$(
        $(#[$doc])*
        pub struct $t;
        impl Pooling for $t {
            const KIND: PoolKind = $kind;
        }
    )*};
}

poolings! {
    /// `nn.MaxPoolNd`.
    MaxPool = PoolKind::Max;
    /// `nn.AvgPoolNd`.
    AvgPool = PoolKind::Avg;
    /// `nn.AdaptiveAvgPoolNd`.
    AdaptiveAvgPool = PoolKind::AdaptiveAvg;
    /// `nn.AdaptiveMaxPoolNd`.
    AdaptiveMaxPool = PoolKind::AdaptiveMax;
    /// `nn.LPPoolNd`.
    LpPool = PoolKind::Lp(2.0);
}

/// The row of pooling `P`.
pub const fn row<P: Pooling>(name: &'static str) -> OpCase<PoolSample> {
    OpCase {
        name,
        samples: samples::<P>,
        bad_inputs: bad_inputs::<P>,
        unsupported: |kind| pool_unsupported(kind, P::KIND),
        ..family_row(pool_inputs, run_pool, pool_reference)
    }
}

/// The samples of pooling `P` (the same in every dtype).
fn samples<P: Pooling>(_: ElementKind) -> Vec<PoolSample> {
    let mut v = match P::KIND {
        PoolKind::Max => max_pool_samples(),
        PoolKind::Avg => avg_pool_samples(),
        PoolKind::AdaptiveAvg => adaptive_avg_pool_samples(),
        PoolKind::AdaptiveMax => adaptive_max_pool_samples(),
        PoolKind::Lp(_) => lp_pool_samples(),
    };
    v.extend(size_one(P::KIND));
    v
}

/// The bad inputs of pooling `P`.
fn bad_inputs<P: Pooling>() -> Result<usize, String> {
    match P::KIND {
        PoolKind::Max => window_pool_bad_inputs::<PoolMax>(P::KIND),
        PoolKind::Avg => window_pool_bad_inputs::<PoolAvg>(P::KIND),
        PoolKind::AdaptiveAvg => adaptive_pool_bad_inputs::<PoolAvg>(P::KIND),
        PoolKind::AdaptiveMax => adaptive_pool_bad_inputs::<PoolMax>(P::KIND),
        PoolKind::Lp(_) => lp_pool_bad_inputs(),
    }
}

// ---------------------------------------------------------------------------
// Samples
// ---------------------------------------------------------------------------

/// A pooling problem: the reference's geometry (output extents included),
/// ceil_mode and the layout.
#[derive(Clone, Debug)]
pub struct PoolSample {
    g: PoolGeometry,
    ceil: bool,
    layout: ConvLayout,
}

impl PoolSample {
    /// A windowed pooling (max, avg, Lp) of `g`, its output extents
    /// from the descriptor's formula (`g.output` is ignored).
    fn windowed(g: PoolGeometry, ceil: bool, layout: ConvLayout) -> Self {
        let mut s = PoolSample { g, ceil, layout };
        let output = by_rank!(s.g.input.len(), N, _R => s
            .descriptor::<N>(ElementKind::F32)
            .output()
            .map(|o| o.to_vec())
            .map_err(|e| e.to_string()));
        s.g.output = output.expect("a sample's window fits its input");
        s
    }
    /// An adaptive pooling of `input` to `output`.
    fn adaptive(
        kind: PoolKind,
        (batch, channels): (usize, usize),
        input: &[usize],
        output: &[usize],
        layout: ConvLayout,
    ) -> Self {
        let mut g = geometry(kind, (batch, channels), input, &vec![1; input.len()]);
        g.output = output.to_vec();
        PoolSample {
            g,
            ceil: false,
            layout,
        }
    }
    fn rank(&self) -> usize {
        self.g.input.len()
    }
    fn is_max(&self) -> bool {
        matches!(self.g.kind, PoolKind::Max | PoolKind::AdaptiveMax)
    }
    /// Logical shapes of `x` and `y`.
    fn shapes(&self) -> (Vec<usize>, Vec<usize>) {
        let g = &self.g;
        (
            shape(g.batch, g.channels, &g.input),
            shape(g.batch, g.channels, &g.output),
        )
    }
    fn window<const N: usize>(&self) -> Window<N> {
        let g = &self.g;
        Window {
            kernel: arr(&g.window),
            stride: arr(&g.stride),
            padding: arr(&g.padding),
            padding_end: arr(&g.padding_end),
            dilation: arr(&g.dilation),
        }
    }
    /// The max / avg descriptor (Lp pooling has the same output formula).
    fn descriptor<const N: usize>(&self, element: ElementKind) -> PoolDescriptor<N> {
        let g = &self.g;
        PoolDescriptor {
            batch: g.batch,
            channels: g.channels,
            input: arr(&g.input),
            window: self.window(),
            ceil_mode: self.ceil,
            count_include_pad: g.count_include_pad,
            divisor_override: g.divisor_override,
            element,
            layout: self.layout,
        }
    }
}

/// A geometry of `kind` over `input` with a `kernel` window: stride 1, no
/// padding, dilation 1, padding counted in averages, no divisor override,
/// output to be filled in.
fn geometry(
    kind: PoolKind,
    (batch, channels): (usize, usize),
    input: &[usize],
    kernel: &[usize],
) -> PoolGeometry {
    let rank = input.len();
    PoolGeometry {
        batch,
        channels,
        input: input.to_vec(),
        output: Vec::new(),
        window: kernel.to_vec(),
        stride: vec![1; rank],
        padding: vec![0; rank],
        padding_end: vec![0; rank],
        dilation: vec![1; rank],
        kind,
        count_include_pad: true,
        divisor_override: None,
    }
}

/// A setting a sweep draws windows for.
#[derive(Copy, Clone)]
struct Setting {
    kind: PoolKind,
    ceil: bool,
    include_pad: bool,
    divisor: Option<usize>,
}

impl Setting {
    fn of(kind: PoolKind) -> Self {
        Setting {
            kind,
            ceil: false,
            include_pad: true,
            divisor: None,
        }
    }
}

/// 24 random samples of a setting: rank `1 + i % 3`, both layouts, batch
/// 1-2, 1-5 channels, kernel and stride 1-3; max and avg windows with
/// padding up to half the kernel per side (unequal on a third) and
/// dilation 2 on a third; adaptive outputs of 1 to 2 past the input.
fn sweep(setting: Setting, seed: u64) -> Vec<PoolSample> {
    let mut rng = Rng::new(seed);
    let windowed = matches!(setting.kind, PoolKind::Max | PoolKind::Avg);
    (0..24)
        .map(|i| {
            let rank = 1 + i % 3;
            let layout = LAYOUTS[(i / 3) % 2];
            let mut draw = |n: u64| rng.below(n) as usize;
            let planes = (1 + draw(2), 1 + draw(5));
            let dilation = if windowed && draw(3) == 0 { 2 } else { 1 };
            let asymmetric = windowed && draw(3) == 0;
            let mut g = geometry(setting.kind, planes, &vec![1; rank], &vec![1; rank]);
            for a in 0..rank {
                g.window[a] = 1 + draw(3);
                g.stride[a] = 1 + draw(3);
                g.dilation[a] = dilation;
                let half = g.window[a] as u64 / 2 + 1;
                if windowed {
                    g.padding[a] = draw(half);
                    g.padding_end[a] = if asymmetric { draw(half) } else { g.padding[a] };
                }
                let span = dilation * (g.window[a] - 1) + 1;
                g.input[a] = span + draw([0, 14, 7, 5][rank]);
            }
            g.count_include_pad = setting.include_pad;
            g.divisor_override = setting.divisor;
            match setting.kind {
                PoolKind::AdaptiveAvg | PoolKind::AdaptiveMax => {
                    let output: Vec<usize> =
                        g.input.iter().map(|&e| 1 + draw(e as u64 + 2)).collect();
                    PoolSample::adaptive(setting.kind, planes, &g.input, &output, layout)
                }
                _ => PoolSample::windowed(g, setting.ceil, layout),
            }
        })
        .collect()
}

/// Global average pooling of `kind` (`Avg`: a window as large as the
/// input, 2-D with stride [2, 1]; `AdaptiveAvg`: every output extent 1):
/// both layouts; 16 and 320 channels (vN; 320 / 8 = 40 bf16 vectors, more
/// than the 32 of one channels-last CTA), 13 and 67 (v1); 512 positions
/// (64 bf16 vectors per channels-first plane: two passes per lane), 7x7
/// (ResNet's head) and 3x5x7.
fn global_avg(kind: PoolKind) -> Vec<PoolSample> {
    let mut v = Vec::new();
    for layout in LAYOUTS {
        for planes in [(3, 16), (2, 13), (3, 320), (2, 67)] {
            for input in [&[512][..], &[7, 7], &[3, 5, 7]] {
                v.push(if kind == PoolKind::Avg {
                    let mut g = geometry(kind, planes, input, input);
                    if input.len() == 2 {
                        g.stride = vec![2, 1];
                    }
                    PoolSample::windowed(g, false, layout)
                } else {
                    PoolSample::adaptive(kind, planes, input, &vec![1; input.len()], layout)
                });
            }
        }
    }
    v
}

/// Size 1: one element, rank 1 channels-first and rank 3 channels-last.
fn size_one(kind: PoolKind) -> Vec<PoolSample> {
    [
        (&[1][..], ConvLayout::ChannelsFirst),
        (&[1, 1, 1][..], ConvLayout::ChannelsLast),
    ]
    .into_iter()
    .map(|(unit, layout)| match kind {
        PoolKind::AdaptiveAvg | PoolKind::AdaptiveMax => {
            PoolSample::adaptive(kind, (1, 1), unit, unit, layout)
        }
        _ => PoolSample::windowed(geometry(kind, (1, 1), unit, unit), false, layout),
    })
    .collect()
}

/// A realistic square window: `k` taps, stride `stride`, padding `pad`.
fn square(
    kind: PoolKind,
    planes: (usize, usize),
    input: &[usize],
    (k, stride, pad): (usize, usize, usize),
    layout: ConvLayout,
) -> PoolSample {
    let rank = input.len();
    let mut g = geometry(kind, planes, input, &vec![k; rank]);
    g.stride = vec![stride; rank];
    g.padding = vec![pad; rank];
    g.padding_end = vec![pad; rank];
    PoolSample::windowed(g, false, layout)
}

fn max_pool_samples() -> Vec<PoolSample> {
    let mut v = sweep(Setting::of(PoolKind::Max), 21);
    v.extend(sweep(
        Setting {
            ceil: true,
            ..Setting::of(PoolKind::Max)
        },
        121,
    ));
    // ResNet's stem pool: 3x3/2, padding 1, on 64 x 112 x 112.
    for layout in LAYOUTS {
        v.push(square(
            PoolKind::Max,
            (2, 64),
            &[112, 112],
            (3, 2, 1),
            layout,
        ));
    }
    v
}

fn avg_pool_samples() -> Vec<PoolSample> {
    let avg = Setting::of(PoolKind::Avg);
    let mut v = sweep(avg, 22);
    let exclude_pad = Setting {
        ceil: true,
        include_pad: false,
        ..avg
    };
    v.extend(sweep(exclude_pad, 122));
    let divisor = Setting {
        ceil: true,
        divisor: Some(3),
        ..avg
    };
    v.extend(sweep(divisor, 222));
    v.extend(global_avg(PoolKind::Avg));
    // DenseNet's transition: 2x2/2 on 256 x 28 x 28, channels-last.
    let cl = ConvLayout::ChannelsLast;
    v.push(square(PoolKind::Avg, (2, 256), &[28, 28], (2, 2, 0), cl));
    v
}

fn adaptive_avg_pool_samples() -> Vec<PoolSample> {
    let mut v = sweep(Setting::of(PoolKind::AdaptiveAvg), 23);
    v.extend(global_avg(PoolKind::AdaptiveAvg));
    // ResNet-50's head: 2048 x 7 x 7 to 1 x 1, batch 4.
    for layout in LAYOUTS {
        v.push(PoolSample::adaptive(
            PoolKind::AdaptiveAvg,
            (4, 2048),
            &[7, 7],
            &[1, 1],
            layout,
        ));
    }
    v
}

fn adaptive_max_pool_samples() -> Vec<PoolSample> {
    let mut v = sweep(Setting::of(PoolKind::AdaptiveMax), 123);
    // 512 x 14 x 14 down to 7 x 7.
    let cl = ConvLayout::ChannelsLast;
    v.push(PoolSample::adaptive(
        PoolKind::AdaptiveMax,
        (2, 512),
        &[14, 14],
        &[7, 7],
        cl,
    ));
    v
}

fn lp_pool_samples() -> Vec<PoolSample> {
    let mut v = sweep(Setting::of(PoolKind::Lp(2.0)), 24);
    let ceil = Setting {
        ceil: true,
        ..Setting::of(PoolKind::Lp(1.5))
    };
    v.extend(sweep(ceil, 124));
    // p = 2 over 2x2/2 windows of 64 x 56 x 56.
    let cf = ConvLayout::ChannelsFirst;
    v.push(square(PoolKind::Lp(2.0), (2, 64), &[56, 56], (2, 2, 0), cf));
    v
}

// ---------------------------------------------------------------------------
// Inputs, run, reference
// ---------------------------------------------------------------------------

/// `x` (positive for Lp pooling: at least 0.25) and `dy`.
fn pool_inputs(s: &PoolSample, rng: &mut Rng) -> Tensors {
    let (xs, ys) = s.shapes();
    let mut x = rng.vec(n_elems(&xs), -1.0, 1.0);
    if let PoolKind::Lp(_) = s.g.kind {
        x.iter_mut().for_each(|v| *v = v.abs() + 0.25);
    }
    let mut t = Tensors::default();
    t.push("x", x);
    t.push("dy", rng.vec(n_elems(&ys), -1.0, 1.0));
    t
}

fn run_pool(
    kind: ElementKind,
    s: &PoolSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    crate::with_float!(kind, T => by_rank!(s.rank(), N, R =>
        run_pool_n::<T, N, R>(s, inputs, backward)))
}

fn run_pool_n<T: Element, const N: usize, const R: usize>(
    s: &PoolSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String>
where
    Rank<N, R>: SpatialRank,
{
    let pref = PlanPreference::default();
    let g = &s.g;
    let (input, output) = (arr(&g.input), arr(&g.output));
    let adaptive = AdaptivePoolDescriptor::new(g.batch, g.channels, input, output, T::KIND)
        .with_layout(s.layout);
    match g.kind {
        PoolKind::Max => {
            let plan = select::<PoolPlan<T, PoolMax, N, R>>(&s.descriptor(T::KIND), &pref)?;
            run_pool_plan(&plan, s, inputs, backward)
        }
        PoolKind::Avg => {
            let plan = select::<PoolPlan<T, PoolAvg, N, R>>(&s.descriptor(T::KIND), &pref)?;
            run_pool_plan(&plan, s, inputs, backward)
        }
        PoolKind::AdaptiveMax => {
            let plan = select::<AdaptivePoolPlan<T, PoolMax, N, R>>(&adaptive, &pref)?;
            run_pool_plan(&plan, s, inputs, backward)
        }
        PoolKind::AdaptiveAvg => {
            let plan = select::<AdaptivePoolPlan<T, PoolAvg, N, R>>(&adaptive, &pref)?;
            run_pool_plan(&plan, s, inputs, backward)
        }
        PoolKind::Lp(p) => {
            let d = LpPoolDescriptor {
                batch: g.batch,
                channels: g.channels,
                input,
                window: s.window(),
                p,
                ceil_mode: s.ceil,
                element: T::KIND,
                layout: s.layout,
            };
            run_pool_plan(
                &select::<LpPoolPlan<T, N, R>>(&d, &pref)?,
                s,
                inputs,
                backward,
            )
        }
    }
}

/// Forward (with argmax indices for the max modes) and backward of any
/// pooling plan; the backward is given the forward's `x`, `y` and indices,
/// as each mode needs. Outputs `y`, `indices` (max), `dx`.
fn run_pool_plan<T: Element, const R: usize, P>(
    plan: &P,
    s: &PoolSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String>
where
    P: for<'a> Plan<Args<'a> = PoolArgs<'a, T, R>>
        + for<'a> Backward<BwArgs<'a> = PoolBwArgs<'a, T, R>>,
{
    let st = &gpu().stream;
    let (xs, ys) = s.shapes();
    let l = s.layout;
    let x = Dense::<T>::upload(inputs.get("x"), &xs, l);
    let dy = Dense::<T>::upload(inputs.get("dy"), &ys, l);
    let mut y = Out::<T>::new(&ys, l);
    let max = s.is_max();
    let mut indices = operand_if(max, || Out::<i64>::new(&ys, l));
    let args = PoolArgs {
        x: x.view(),
        y: y.view_mut(),
        indices: if max { Some(indices.view_mut()) } else { None },
    };
    plan.run(st, Workspace::None, args)
        .map_err(|e| format!("run: {e}"))?;
    let mut out = Tensors::default();
    out.push("y", y.result("y")?);
    if max {
        out.push("indices", indices.result("indices")?);
    }
    if !backward {
        return Ok(out);
    }
    let mut dx = Out::<T>::new(&xs, l);
    let args = PoolBwArgs {
        dy: dy.view(),
        indices: if max { Some(indices.view()) } else { None },
        x: Some(x.view()),
        y: Some(y.view()),
        dx: dx.view_mut(),
    };
    plan.run_bw(st, Workspace::None, args)
        .map_err(|e| format!("run_bw: {e}"))?;
    out.push("dx", dx.result("dx")?);
    Ok(out)
}

/// The f64 reference of [`run_pool_plan`]'s outputs: the backward routes
/// through the reference's own argmax, and Lp's reads the reference output
/// rounded as the device stores it.
fn pool_reference(kind: ElementKind, s: &PoolSample, inputs: &Tensors, _: &Tensors) -> Tensors {
    let (x, dy) = (inputs.get("x"), inputs.get("dy"));
    let (y, indices) = r::pool_fw(&s.g, x);
    let dx = r::pool_bw(&s.g, dy, &indices, x, &round_to(kind, &y));
    let mut t = Tensors::default();
    t.push("y", y);
    if s.is_max() {
        t.push("indices", indices.iter().map(|&i| i as f64).collect());
    }
    t.push("dx", dx);
    t
}
