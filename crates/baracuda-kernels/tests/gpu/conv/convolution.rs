//! The convolution rows of the conv family: `conv1d`, `conv2d`, `conv3d`
//! and `conv_transpose`, against `reference::conv`.
//!
//! - `conv1d`, `conv2d`, `conv3d`: a random sweep of 72 geometries per rank
//!   (stride, padding, dilation, groups with depthwise, both layouts, a
//!   bias with ReLU on one in five); realistic shapes; size 1; padding
//!   that differs before and after (`padding='same'` with even kernels,
//!   per-side padding with a stride), which runs through a padded copy;
//!   pointwise
//!   convolutions forced through cuBLASLt and under measured autotuning,
//!   and in f16 / bf16 the narrow kernel forced and measured; `conv2d` adds
//!   a zero workspace cap (f32) and a deterministic selection (bf16) whose
//!   gradients must come out bit-identical three times. Every f32 plan must
//!   run IEEE math (no TF32 without `allow_tf32`).
//! - `conv_transpose`: a random sweep over ranks with output_padding,
//!   groups, ReLU and bias; a decoder-sized shape; size 1; output_padding
//!   at or past the stride (below the dilation) in every rank.
//!
//! Every sample checks the forward, all gradients in one `run_bw`, and
//! `dx` and `dw` each alone in a workspace sized for it alone (the other
//! must stay poisoned).

use baracuda_kernels::reference::conv::{self as r, ConvGeometry};
use baracuda_kernels::*;

use super::bad_inputs::{conv_bad_inputs, conv_unsupported};
use super::bad_inputs::{transpose_bad_inputs, transpose_unsupported};
use super::{borrowed, family_row, n_elems, shape, Dense, Out, LAYOUTS};
use crate::harness::*;
use crate::table::{OpCase, Tensors};

/// The rank-`N` convolution's row (`nn.Conv1d`, `Conv2d`, `Conv3d`).
pub const fn conv_row<const N: usize, const R: usize>(name: &'static str) -> OpCase<ConvSample>
where
    Rank<N, R>: SpatialRank,
{
    OpCase {
        name,
        samples: conv_samples::<N>,
        bad_inputs: conv_bad_inputs::<N, R>,
        unsupported: conv_unsupported::<N, R>,
        ..CONV
    }
}

/// `nn.ConvTranspose1d/2d/3d`.
pub static CONV_TRANSPOSE: OpCase<ConvSample> = OpCase {
    name: "conv_transpose",
    samples: transpose_samples,
    bad_inputs: transpose_bad_inputs,
    unsupported: transpose_unsupported,
    ..CONV
};

/// What every convolution row shares.
const CONV: OpCase<ConvSample> = family_row(conv_inputs, run_conv, conv_reference);

// ---------------------------------------------------------------------------
// Convolution and transposed convolution: samples
// ---------------------------------------------------------------------------

/// How a sample selects its plan, and what the selection must show.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Pref {
    /// `PlanPreference::default()`.
    Default,
    /// `max_workspace_bytes: 0`: the forward must need no workspace.
    NoWorkspace,
    /// `Autotune::Measured`: cuDNN's engines timed, and on a pointwise
    /// convolution cuBLASLt's matmul and (f16 / bf16, 32 to 128 channels)
    /// the narrow kernel with them.
    Measured,
    /// `backend: CublasLt` (pointwise only): the SKU must name cuBLASLt for
    /// the forward.
    CublasLt,
    /// `backend: Baracuda` (pointwise f16 / bf16, 32 to 128 channels): the
    /// narrow kernel for the forward and the data gradient, cuDNN for the
    /// weight gradient.
    Narrow,
    /// `deterministic: true`: the plan must promise it, and three backward
    /// runs must give the same bits.
    Deterministic,
}

impl Pref {
    fn preference(self) -> PlanPreference {
        let p = PlanPreference::default();
        match self {
            Pref::Default => p,
            Pref::NoWorkspace => p.with_max_workspace_bytes(0),
            Pref::Measured => p.with_autotune(Autotune::Measured),
            Pref::CublasLt => p.with_backend(BackendKind::CublasLt),
            Pref::Narrow => p.with_backend(BackendKind::Baracuda),
            Pref::Deterministic => p.with_deterministic(true),
        }
    }

    /// What the selection must show: the preference's promise, and IEEE
    /// math in f32 (no sample allows TF32).
    fn check<P: Plan>(self, plan: &P) -> Result<(), String> {
        let (sku, precision) = (plan.sku(), plan.precision_guarantee());
        let v = &sku.variant;
        let kept = match self {
            Pref::Default | Pref::Measured => true,
            Pref::NoWorkspace => plan.workspace_size() == 0,
            Pref::CublasLt => sku.backend == BackendKind::CublasLt && v.contains("fw=cublasLt"),
            Pref::Narrow => {
                sku.backend == BackendKind::Baracuda
                    && v.contains("fw=narrow")
                    && v.contains("bw_data=narrow")
                    && !v.contains("dw=narrow")
            }
            Pref::Deterministic => precision.deterministic,
        };
        if !kept {
            return Err(format!("{self:?} selected {sku}"));
        }
        if sku.element == ElementKind::F32 && precision.math != MathPrecision::F32 {
            return Err(format!(
                "f32 without allow_tf32 runs {:?} math: {sku}",
                precision.math
            ));
        }
        Ok(())
    }
}

/// A convolution or transposed-convolution problem.
#[derive(Clone, Debug)]
pub struct ConvSample {
    /// The op's own geometry (a transposed conv's input, channels and
    /// window as PyTorch's `ConvTranspose` takes them).
    g: ConvGeometry,
    /// `Some(output_padding)`: a transposed convolution.
    output_padding: Option<Vec<usize>>,
    layout: ConvLayout,
    bias: bool,
    relu: bool,
    pref: Pref,
}

impl ConvSample {
    /// A convolution; `bias` adds a bias and the ReLU epilogue.
    fn conv(g: ConvGeometry, layout: ConvLayout, bias: bool) -> Self {
        ConvSample {
            g,
            output_padding: None,
            layout,
            bias,
            relu: bias,
            pref: Pref::Default,
        }
    }
    fn with_pref(self, pref: Pref) -> Self {
        ConvSample { pref, ..self }
    }
    /// The convolution whose passes the plan runs: the sample's own, or,
    /// for a transposed convolution, the one it is the data gradient of.
    fn c(&self) -> ConvGeometry {
        let g = &self.g;
        match &self.output_padding {
            None => g.clone(),
            Some(opad) => ConvGeometry::for_transpose(
                g.batch,
                g.c_in,
                g.c_out,
                &g.input,
                &g.filter,
                &g.padding,
                &g.stride,
                &g.dilation,
                opad,
                g.groups,
            ),
        }
    }
    /// Logical shapes of the plan's `x`, `w` and `y`.
    fn shapes(&self) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
        let g = &self.g;
        let x = shape(g.batch, g.c_in, &g.input);
        match self.output_padding {
            None => (
                x,
                shape(g.c_out, g.c_in / g.groups, &g.filter),
                shape(g.batch, g.c_out, &g.output()),
            ),
            Some(_) => (
                x,
                shape(g.c_in, g.c_out / g.groups, &g.filter),
                shape(g.batch, g.c_out, &self.c().input),
            ),
        }
    }
}

/// A geometry with the same kernel, stride and padding on every axis,
/// dilation 1, one group.
fn square(
    (batch, c_in, c_out): (usize, usize, usize),
    input: &[usize],
    k: usize,
    stride: usize,
    pad: usize,
) -> ConvGeometry {
    let rank = input.len();
    ConvGeometry {
        batch,
        c_in,
        c_out,
        input: input.to_vec(),
        filter: vec![k; rank],
        padding: vec![pad; rank],
        padding_end: vec![pad; rank],
        stride: vec![stride; rank],
        dilation: vec![1; rank],
        groups: 1,
        output_padding: Vec::new(),
    }
}

/// PyTorch's `padding='same'` (stride 1): `dilation * (k - 1)` split with
/// the odd element after, so an even `k` pads one more after than before.
fn same(
    channels: (usize, usize, usize),
    input: &[usize],
    k: usize,
    dilation: usize,
) -> ConvGeometry {
    let mut g = square(channels, input, k, 1, 0);
    let total = dilation * (k - 1);
    g.dilation = vec![dilation; input.len()];
    g.padding = vec![total / 2; input.len()];
    g.padding_end = vec![total - total / 2; input.len()];
    g
}

/// A random geometry of `rank`: dense, grouped, depthwise or odd channel
/// counts; kernel 1-3, padding 0-2, stride 1-3, dilation 1-2, extents
/// 2-23 (rank 1), 2-9 (rank 2), 2-6 (rank 3), redrawn until the window
/// fits.
fn random_geometry(rng: &mut Rng, rank: usize) -> ConvGeometry {
    let mut draw = |n: u64| rng.below(n) as usize;
    loop {
        let base = 1 + draw(3);
        let (c_in, c_out, groups) = match draw(4) {
            0 => (base * 2, 1 + draw(6), 1),
            1 => (base * 2, base * 4, 2),
            2 => (base * 3, base * 3, base * 3),
            _ => (1 + draw(5), 1 + draw(9), 1),
        };
        let max_extent = [0, 23, 9, 6][rank];
        let input: Vec<usize> = (0..rank).map(|_| 2 + draw(max_extent - 1)).collect();
        let filter: Vec<usize> = (0..rank).map(|_| 1 + draw(3)).collect();
        let padding: Vec<usize> = (0..rank).map(|_| draw(3)).collect();
        let stride: Vec<usize> = (0..rank).map(|_| 1 + draw(3)).collect();
        let dilation: Vec<usize> = (0..rank).map(|_| 1 + draw(2)).collect();
        let fits = (0..rank).all(|a| input[a] + 2 * padding[a] > dilation[a] * (filter[a] - 1));
        if fits {
            return ConvGeometry {
                batch: 1 + draw(3),
                c_in,
                c_out,
                input,
                filter,
                padding_end: padding.clone(),
                padding,
                stride,
                dilation,
                groups,
                output_padding: Vec::new(),
            };
        }
    }
}

/// A channels-last 1x1 convolution (unit stride, no padding, one group)
/// with a bias: what cuBLASLt and the narrow kernel take.
fn pointwise(channels: (usize, usize, usize), input: &[usize], pref: Pref) -> ConvSample {
    ConvSample::conv(
        square(channels, input, 1, 1, 0),
        ConvLayout::ChannelsLast,
        true,
    )
    .with_pref(pref)
}

/// The samples of the rank-`N` convolution row in `kind`.
fn conv_samples<const N: usize>(kind: ElementKind) -> Vec<ConvSample> {
    let mut rng = Rng::new(0xC0FFEE + N as u64);
    let mut v: Vec<ConvSample> = (0..72)
        .map(|i| ConvSample::conv(random_geometry(&mut rng, N), LAYOUTS[i % 2], i % 5 == 0))
        .collect();
    let (cl, cf) = (ConvLayout::ChannelsLast, ConvLayout::ChannelsFirst);
    // Realistic shapes.
    match N {
        // wav2vec2's first conv: k10 s5, 1 -> 512 over 4000 samples.
        1 => v.push(ConvSample::conv(
            square((1, 1, 512), &[4000], 10, 5, 0),
            cl,
            false,
        )),
        2 => {
            // ResNet-50's 3x3 64 -> 64 at 56x56, batch 2; its stem, 7x7/2
            // on a 112x112 crop.
            let resnet = square((2, 64, 64), &[56, 56], 3, 1, 1);
            v.push(ConvSample::conv(resnet.clone(), cl, false));
            v.push(ConvSample::conv(resnet, cf, true));
            v.push(ConvSample::conv(
                square((1, 3, 64), &[112, 112], 7, 2, 3),
                cl,
                false,
            ));
        }
        // A UNet's 3x3x3 32 -> 32 on 16^3.
        _ => v.push(ConvSample::conv(
            square((1, 32, 32), &[16; 3], 3, 1, 1),
            cl,
            false,
        )),
    }
    // Size 1.
    for l in LAYOUTS {
        v.push(ConvSample::conv(
            square((1, 1, 1), &[1; N], 1, 1, 0),
            l,
            false,
        ));
    }
    // Unequal padding before and after (a padded copy in the workspace):
    // 'same' with even kernels (one dilated by 3: 1 before, 2 after), one
    // with a bias and ReLU; and
    // padding set per side with a stride.
    let (extents, k) = match N {
        1 => (vec![13], 4),
        2 => (vec![9, 10], 4),
        _ => (vec![5, 6, 4], 2),
    };
    v.push(ConvSample::conv(same((2, 3, 5), &extents, k, 1), cf, true));
    v.push(ConvSample::conv(same((1, 4, 6), &extents, 2, 3), cl, false));
    let mut per_side = square((2, 2, 3), &extents, 3, 2, 0);
    per_side.padding = (0..N).map(|a| a % 2).collect();
    per_side.padding_end = (0..N).map(|a| 2 - a % 2).collect();
    v.push(ConvSample::conv(per_side, LAYOUTS[N % 2], false));
    // Pointwise: cuBLASLt forced and measured autotuning, every dtype.
    let input = [&[37][..], &[9, 11], &[3, 5, 7]][N - 1];
    for pref in [Pref::CublasLt, Pref::Measured] {
        v.push(pointwise((3, 16 + 8 * N, 40), input, pref));
    }
    // The narrow kernel (f16 / bf16 only: it takes no other dtype), with
    // row counts that are not whole tiles, and one problem large enough
    // that every warp takes two chunks.
    if matches!(kind, ElementKind::F16 | ElementKind::Bf16) {
        let shapes = match N {
            1 => vec![((3, 64, 64), vec![37])],
            2 => vec![
                ((3, 32, 96), vec![9, 11]),
                ((2, 96, 32), vec![5, 9]),
                ((4, 64, 64), vec![160, 160]),
            ],
            _ => vec![((3, 128, 128), vec![3, 5, 7])],
        };
        for (channels, input) in shapes {
            for pref in [Pref::Narrow, Pref::Measured] {
                v.push(pointwise(channels, &input, pref));
            }
        }
    }
    if N == 2 {
        let small = square((2, 16, 16), &[12, 12], 3, 1, 1);
        v.push(ConvSample::conv(small.clone(), cf, false));
        // A zero workspace cap, as f32 has always been checked with.
        if kind == ElementKind::F32 {
            v.push(ConvSample::conv(small, cf, false).with_pref(Pref::NoWorkspace));
        }
        // Determinism, as bf16 (tensor cores, split reductions) tests it.
        if kind == ElementKind::Bf16 {
            let g = square((4, 32, 48), &[20, 20], 3, 1, 1);
            v.push(ConvSample::conv(g, cl, false).with_pref(Pref::Deterministic));
        }
    }
    v
}

/// The transposed-convolution samples: 48 random ones over rank, layout
/// and groups, with output_padding = stride - 1, padding 1 where the
/// kernel is wider than 1, ReLU on half and a bias on two in three; a
/// decoder's 4x4/2 upsampling; size 1; output_padding from the stride up
/// to the dilation (PyTorch's `output_padding < max(stride, dilation)`)
/// in every rank, where the last outputs may lie outside every window.
fn transpose_samples(_: ElementKind) -> Vec<ConvSample> {
    let mut rng = Rng::new(99);
    let mut v = Vec::new();
    for i in 0..48 {
        let rank = 1 + i % 3;
        let groups = [1, 2][i % 2];
        let mut draw = |n: u64| rng.below(n) as usize;
        let (batch, c_out, extent) = (1 + draw(2), 2 * (1 + draw(2)), 3 + draw(4));
        let (k, stride) = (1 + draw(3), 1 + draw(3));
        let mut g = square(
            (batch, 2 * groups, c_out),
            &vec![extent; rank],
            k,
            stride,
            usize::from(k > 1),
        );
        g.groups = groups;
        let (relu, bias) = (draw(2) == 0, draw(3) != 0);
        v.push(ConvSample {
            g,
            output_padding: Some(vec![stride - 1; rank]),
            layout: LAYOUTS[(i / 3) % 2],
            bias,
            relu,
            pref: Pref::Default,
        });
    }
    // (channels, input, k, stride, padding, dilation, output_padding).
    let past_stride = [
        ((1, 2, 3), vec![5], 3, 1, 0, 3, vec![2]),
        ((2, 4, 4), vec![4, 5], 2, 2, 1, 3, vec![2, 1]),
        ((1, 3, 2), vec![3, 4, 3], 3, 1, 1, 2, vec![1, 1, 0]),
    ];
    for (i, (channels, input, k, stride, pad, dilation, opad)) in
        past_stride.into_iter().enumerate()
    {
        let mut g = square(channels, &input, k, stride, pad);
        g.dilation = vec![dilation; input.len()];
        g.groups = 1 + usize::from(i == 1);
        v.push(ConvSample {
            g,
            output_padding: Some(opad),
            layout: LAYOUTS[i % 2],
            bias: i != 2,
            relu: i == 1,
            pref: Pref::Default,
        });
    }
    let decoder = square((2, 64, 32), &[16, 16], 4, 2, 1);
    let unit = square((1, 1, 1), &[1], 1, 1, 0);
    for (g, layout, epilogue) in [
        (decoder, ConvLayout::ChannelsLast, true),
        (unit.clone(), ConvLayout::ChannelsFirst, false),
        (unit, ConvLayout::ChannelsLast, false),
    ] {
        let rank = g.input.len();
        v.push(ConvSample {
            g,
            output_padding: Some(vec![0; rank]),
            layout,
            bias: epilogue,
            relu: epilogue,
            pref: Pref::Default,
        });
    }
    v
}

// ---------------------------------------------------------------------------
// Convolution and transposed convolution: inputs, run, reference
// ---------------------------------------------------------------------------

fn conv_inputs(s: &ConvSample, rng: &mut Rng) -> Tensors {
    let (xs, ws, ys) = s.shapes();
    let mut t = Tensors::default();
    t.push("x", rng.vec(n_elems(&xs), -1.0, 1.0));
    t.push("w", rng.vec(n_elems(&ws), -1.0, 1.0));
    t.push("dy", rng.vec(n_elems(&ys), -1.0, 1.0));
    if s.bias {
        t.push("bias", rng.vec(ys[1], -1.0, 1.0));
    }
    t
}

fn run_conv(
    kind: ElementKind,
    s: &ConvSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    crate::with_float!(kind, T => by_rank!(s.g.input.len(), N, R =>
        run_conv_n::<T, N, R>(s, inputs, backward)))
}

fn run_conv_n<T: Element, const N: usize, const R: usize>(
    s: &ConvSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String>
where
    Rank<N, R>: SpatialRank,
{
    let g = &s.g;
    let pref = s.pref.preference();
    let activation = if s.relu {
        Activation::Relu
    } else {
        Activation::Identity
    };
    let mut d = ConvDescriptor::new(
        g.batch,
        g.c_in,
        g.c_out,
        arr(&g.input),
        arr(&g.filter),
        T::KIND,
    )
    .with_groups(g.groups)
    .with_layout(s.layout)
    .with_activation(activation);
    d.window = Window::new(arr(&g.filter))
        .with_stride(arr(&g.stride))
        .with_padding_ends(arr(&g.padding), arr(&g.padding_end))
        .with_dilation(arr(&g.dilation));
    match &s.output_padding {
        None => run_conv_plan(
            &select::<ConvPlan<T, N, R>>(&d, &pref)?,
            s,
            inputs,
            backward,
        ),
        Some(opad) => {
            let t = transposed(&d, arr(opad));
            let plan = select::<ConvTransposePlan<T, N, R>>(&t, &pref)?;
            run_conv_plan(&plan, s, inputs, backward)
        }
    }
}

/// The transposed convolution of `d`'s fields (its input, channels and
/// window as the transposed convolution's own) with `output_padding`.
fn transposed<const N: usize>(
    d: &ConvDescriptor<N>,
    output_padding: [usize; N],
) -> ConvTransposeDescriptor<N> {
    ConvTransposeDescriptor {
        batch: d.batch,
        c_in: d.c_in,
        c_out: d.c_out,
        input: d.input,
        window: d.window,
        output_padding,
        groups: d.groups,
        element: d.element,
        layout: d.layout,
        activation: d.activation,
    }
}

/// Forward and backward of a convolution or transposed-convolution plan:
/// `y = act(op(x, w) + bias)`; then every gradient in one `run_bw`; then
/// `dx` and `dw` each alone, in a workspace of what it alone needs (the
/// gradient not asked for must stay poisoned). A deterministic plan runs
/// the whole backward twice more and must give the same bits. Outputs `y`,
/// `dx`, `dw`, `dbias` (with a bias), `dx alone`, `dw alone`.
fn run_conv_plan<T: Element, const R: usize, P>(
    plan: &P,
    s: &ConvSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String>
where
    P: for<'a> Plan<Args<'a> = ConvArgs<'a, T, R>>
        + for<'a> Backward<BwArgs<'a> = ConvBwArgs<'a, T, R>>,
{
    let st = &gpu().stream;
    s.pref.check(plan)?;
    let (xs, ws, ys) = s.shapes();
    let l = s.layout;
    let x = Dense::<T>::upload(inputs.get("x"), &xs, l);
    let w = Dense::<T>::upload(inputs.get("w"), &ws, l);
    let dy = Dense::<T>::upload(inputs.get("dy"), &ys, l);
    let bias = inputs.find("bias").map(|b| upload::<T>(b).0);
    let all = Grad::X | Grad::Weight | Grad::Bias;
    let mut wsb = workspace(plan.workspace_size().max(plan.bw_workspace_size(all)));
    let mut y = Out::<T>::new(&ys, l);
    plan.run(
        st,
        borrowed(&mut wsb),
        ConvArgs {
            x: x.view(),
            w: w.view(),
            bias: bias
                .as_ref()
                .map(|b| TensorRef::contiguous(b.as_slice(), [b.len()]).expect("bias view")),
            y: y.view_mut(),
        },
    )
    .map_err(|e| format!("run: {e}"))?;
    let mut out = Tensors::default();
    out.push("y", y.result("y")?);
    if !backward {
        return Ok(out);
    }
    // run_bw writing the gradients whose outputs are given.
    let grads = |ws: &mut DeviceBuffer<u8>,
                 dx: Option<&mut Out<T>>,
                 dw: Option<&mut Out<T>>,
                 dbias: Option<&mut Out<T>>| {
        plan.run_bw(
            st,
            borrowed(ws),
            ConvBwArgs {
                x: x.view(),
                w: w.view(),
                y: s.relu.then(|| y.view()),
                dy: dy.view(),
                dx: dx.map(|o| o.view_mut()),
                dw: dw.map(|o| o.view_mut()),
                dbias: dbias.map(|o| o.view_mut()),
            },
        )
        .map_err(|e| format!("run_bw: {e}"))
    };
    let (mut dx, mut dw) = (Out::<T>::new(&xs, l), Out::<T>::new(&ws, l));
    let mut db = operand_if(s.bias, || {
        Out::<T>::new(&ys[1..2], ConvLayout::ChannelsFirst)
    });
    grads(
        &mut wsb,
        Some(&mut dx),
        Some(&mut dw),
        s.bias.then_some(&mut db),
    )?;
    out.push("dx", dx.result("dx")?);
    out.push("dw", dw.result("dw")?);
    if s.bias {
        out.push("dbias", db.result("dbias")?);
    } else {
        db.untouched("dbias, not asked for")?;
    }
    for alone in ["dx", "dw"] {
        let wants = if alone == "dx" { Grad::X } else { Grad::Weight };
        let mut ws_alone = workspace(plan.bw_workspace_size(wants.into()));
        let x_alone = alone == "dx";
        // the gradient not asked for is no operand of the run
        let mut gx = operand_if(x_alone, || Out::<T>::new(&xs, l));
        let mut gw = operand_if(!x_alone, || Out::<T>::new(&ws, l));
        grads(
            &mut ws_alone,
            x_alone.then_some(&mut gx),
            (!x_alone).then_some(&mut gw),
            None,
        )?;
        let (got, other) = if x_alone { (&gx, &gw) } else { (&gw, &gx) };
        let name = format!("{alone} alone");
        out.push(name.clone(), got.result(&name)?);
        other.untouched(&format!("{name}: the gradient not asked for"))?;
    }
    if s.pref == Pref::Deterministic {
        let bits = |v: &[f64]| v.iter().map(|e| e.to_bits()).collect::<Vec<_>>();
        for again in 1..3 {
            let (mut dx, mut dw) = (Out::<T>::new(&xs, l), Out::<T>::new(&ws, l));
            grads(&mut wsb, Some(&mut dx), Some(&mut dw), None)?;
            let same = bits(&dx.result("dx")?) == bits(out.get("dx"))
                && bits(&dw.result("dw")?) == bits(out.get("dw"));
            if !same {
                return Err(format!(
                    "deterministic plan gave other bits on run {again}: {}",
                    plan.sku()
                ));
            }
        }
    }
    Ok(out)
}

/// The f64 reference of [`run_conv_plan`]'s outputs.
fn conv_reference(kind: ElementKind, s: &ConvSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let c = s.c();
    let (x, w, dy) = (inputs.get("x"), inputs.get("w"), inputs.get("dy"));
    let (_, _, ys) = s.shapes();
    let (channels, spatial) = (ys[1], n_elems(&ys[2..]));
    let transposed = s.output_padding.is_some();
    let mut y = if transposed {
        r::conv_bw_data(&c, w, x)
    } else {
        r::conv_fw(&c, x, w)
    };
    if s.bias || s.relu {
        // The epilogue rounds the convolution to the dtype, then adds the
        // bias and applies the activation.
        y = round_to(kind, &y);
        let zeros = vec![0.0; channels];
        r::bias_act(
            &mut y,
            inputs.find("bias").unwrap_or(&zeros[..]),
            spatial,
            s.relu,
        );
    }
    // The ReLU backward passes dy where the output, as written, is > 0.
    let dz: Vec<f64> = if s.relu {
        dy.iter()
            .zip(got.get("y"))
            .map(|(&g, &v)| if v > 0.0 { g } else { 0.0 })
            .collect()
    } else {
        dy.to_vec()
    };
    let mut t = Tensors::default();
    t.push("y", y);
    if transposed {
        t.push("dx", r::conv_fw(&c, &dz, w));
        t.push("dw", r::conv_bw_filter(&c, &dz, x));
    } else {
        t.push("dx", r::conv_bw_data(&c, w, &dz));
        t.push("dw", r::conv_bw_filter(&c, x, &dz));
    }
    if s.bias {
        t.push("dbias", r::bias_bw(&dz, channels, spatial));
    }
    t
}
