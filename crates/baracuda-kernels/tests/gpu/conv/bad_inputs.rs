//! The conv family's bad inputs, each returning its `Error` variant and
//! writing nothing (its outputs stay poisoned, guards included), and each
//! row's check that the dtypes it does not claim are `Unsupported`.

use baracuda_kernels::reference::conv::PoolKind;
use baracuda_kernels::*;
use half::bf16;

use super::{borrowed, dense_view, n_elems, shape, Dense, Out};
use crate::harness::*;
use crate::table::BadInputs;

// ---------------------------------------------------------------------------
// Convolution and transposed convolution
// ---------------------------------------------------------------------------

pub(super) fn conv_unsupported<const N: usize, const R: usize>(
    kind: ElementKind,
) -> Result<(), String>
where
    Rank<N, R>: SpatialRank,
{
    let what = format!("conv{N}d {kind}");
    let d = ConvDescriptor::<N>::new(1, 2, 2, [4; N], [1; N], kind);
    crate::with_element!(kind, T => expect_unsupported::<ConvPlan<T, N, R>>(&what, &d))
}

pub(super) fn transpose_unsupported(kind: ElementKind) -> Result<(), String> {
    every_rank!(N, R => {
        let what = format!("conv_transpose{N}d {kind}");
        let d = ConvTransposeDescriptor::<N>::new(1, 2, 2, [4; N], [1; N], kind);
        crate::with_element!(kind, T =>
            expect_unsupported::<ConvTransposePlan<T, N, R>>(&what, &d))
    })
}

/// `n` seeded values on the device, as an input of logical `shape` in
/// channels-first order.
fn filled(shape: &[usize]) -> Dense<f32> {
    let values = Rng::new(n_elems(shape) as u64).vec(n_elems(shape), -1.0, 1.0);
    Dense::upload(&values, shape, ConvLayout::ChannelsFirst)
}

/// A slice of `data`'s address and length on a context that does not
/// exist.
fn foreign<T: Element>(data: DeviceSlice<'_, T>) -> DeviceSlice<'_, T> {
    // SAFETY: the slice is only handed to `run`, which rejects its context
    // before it reads the address.
    unsafe { DeviceSlice::from_raw_parts(data.addr(), data.len(), 0xDEAD) }
}

/// `run_bw`'s inputs, no gradient asked for, no forward output.
fn bw_inputs<'a, const R: usize>(
    x: &'a Dense<f32>,
    w: &'a Dense<f32>,
    dy: &'a Dense<f32>,
) -> ConvBwArgs<'a, f32, R> {
    ConvBwArgs {
        x: x.view(),
        w: w.view(),
        y: None,
        dy: dy.view(),
        dx: None,
        dw: None,
        dbias: None,
    }
}

/// The rank-`N` convolution's bad inputs: descriptors (groups, an empty
/// batch, a window longer than the input, the dtype, an activation without
/// an epilogue), backends that cannot run the problem, and the arguments
/// of `run` and `run_bw` (outputs overlapping inputs or each other
/// included), none of which may write.
#[allow(clippy::too_many_lines)] // one list of cases
pub(super) fn conv_bad_inputs<const N: usize, const R: usize>() -> Result<usize, String>
where
    Rank<N, R>: SpatialRank,
{
    let st = &gpu().stream;
    let pref = PlanPreference::default();
    let mut bad = BadInputs::default();
    let d = ConvDescriptor::<N>::new(2, 4, 6, [8; N], [3; N], ElementKind::F32);
    let f32_plan =
        |d: &ConvDescriptor<N>, pref: &PlanPreference| ConvPlan::<f32, N, R>::select(st, d, pref);
    bad.expect(
        "groups 3",
        f32_plan(&d.with_groups(3), &pref),
        invalid_descriptor("groups"),
        &[],
    )?;
    let empty = ConvDescriptor { batch: 0, ..d };
    bad.expect(
        "batch 0",
        f32_plan(&empty, &pref),
        invalid_descriptor("batch"),
        &[],
    )?;
    let short = ConvDescriptor {
        input: std::array::from_fn(|a| if a == 0 { 2 } else { 8 }),
        ..d
    };
    bad.expect(
        "window past the input",
        f32_plan(&short, &pref),
        invalid_descriptor("output"),
        &[],
    )?;
    let r = ConvPlan::<f64, N, R>::select(st, &d, &pref);
    bad.expect("f64 plan of an f32 descriptor", r, dtype_mismatch, &[])?;
    let gelu = d.with_activation(Activation::GeluErf);
    bad.expect("GELU epilogue", f32_plan(&gelu, &pref), unsupported, &[])?;

    // cuBLASLt takes pointwise convolutions only (1x1, unit stride, no
    // padding, one group, channels-last); the narrow kernel those in f16 /
    // bf16 with 32, 64, 96 or 128 channels.
    let backend = preference_rejected("backend");
    let lt = pref.with_backend(BackendKind::CublasLt);
    let narrow = pref.with_backend(BackendKind::Baracuda);
    let cl = ConvLayout::ChannelsLast;
    let bf16_plan =
        |d: &ConvDescriptor<N>, pref: &PlanPreference| ConvPlan::<bf16, N, R>::select(st, d, pref);
    let pw = |c_in, k| ConvDescriptor::<N>::new(2, c_in, 64, [12; N], [k; N], ElementKind::Bf16);
    let d3x3 = pw(64, 3).with_padding([1; N]).with_layout(cl);
    bad.expect("cuBLASLt, 3x3", bf16_plan(&d3x3, &lt), &backend, &[])?;
    bad.expect(
        "cuBLASLt, channels-first",
        bf16_plan(&pw(64, 1), &lt),
        &backend,
        &[],
    )?;
    bad.expect("cuBLASLt, f32 3x3", f32_plan(&d, &lt), &backend, &[])?;
    bad.expect("narrow, 3x3", bf16_plan(&d3x3, &narrow), &backend, &[])?;
    let c48 = pw(48, 1).with_layout(cl);
    bad.expect(
        "narrow, 48 channels",
        bf16_plan(&c48, &narrow),
        &backend,
        &[],
    )?;
    let f32_pw = ConvDescriptor {
        element: ElementKind::F32,
        ..pw(64, 1).with_layout(cl)
    };
    bad.expect("narrow, f32", f32_plan(&f32_pw, &narrow), &backend, &[])?;

    // Arguments: x [2, 4, 8..], w [6, 4, 3..], y [2, 6, 6..], channels-first.
    let plan = f32_plan(&d, &pref).map_err(|e| e.to_string())?;
    let cf = ConvLayout::ChannelsFirst;
    let (xs, ws, ys) = (
        shape(2, 4, &[8; N]),
        shape(6, 4, &[3; N]),
        shape(2, 6, &[6; N]),
    );
    let (x, w, dy) = (filled(&xs), filled(&ws), filled(&ys));
    let all = Grad::X | Grad::Weight | Grad::Bias;
    let mut wsb = workspace(plan.workspace_size().max(plan.bw_workspace_size(all)));
    let mut y = Out::<f32>::new(&ys, cf);
    let short_x = shape(
        2,
        4,
        &std::array::from_fn::<usize, N, _>(|a| if a == 0 { 7 } else { 8 }),
    );
    let short_y = shape(
        2,
        6,
        &std::array::from_fn::<usize, N, _>(|a| if a == 0 { 5 } else { 6 }),
    );
    let bias5 = filled(&[5]);
    let bias_view = || TensorRef::contiguous(bias5.buf.as_slice(), [5]).expect("bias view");
    // `run` with w and the workspace right and the rest as given, which
    // must fail as `pred` says and leave y poisoned; a macro, as each call
    // borrows y only for the call.
    macro_rules! bad_run {
        ($what:expr, $pred:expr, $x:expr, $bias:expr, $y:expr) => {{
            let args = ConvArgs {
                x: $x,
                w: w.view(),
                bias: $bias,
                y: $y,
            };
            let r = plan.run(st, borrowed(&mut wsb), args);
            bad.expect($what, r, $pred, &[&y])?;
        }};
    }
    let short_x = dense_view(x.buf.as_slice(), &short_x, cf);
    bad_run!("x shape", shape_mismatch("x"), short_x, None, y.view_mut());
    let x_cl = dense_view(x.buf.as_slice(), &xs, cl);
    bad_run!(
        "channels-last x",
        invalid_argument("x"),
        x_cl,
        None,
        y.view_mut()
    );
    let x_foreign = dense_view(foreign(x.buf.as_slice()), &xs, cf);
    let context = |e: &Error| matches!(e, Error::ContextMismatch { arg: "x", .. });
    bad_run!(
        "x on another context",
        context,
        x_foreign,
        None,
        y.view_mut()
    );
    let short_y = y.view_mut_as(&short_y, cf);
    bad_run!("y shape", shape_mismatch("y"), x.view(), None, short_y);
    let bias = Some(bias_view());
    bad_run!(
        "bias of 5",
        shape_mismatch("bias"),
        x.view(),
        bias,
        y.view_mut()
    );
    if plan.workspace_size() > 0 {
        let args = ConvArgs {
            x: x.view(),
            w: w.view(),
            bias: None,
            y: y.view_mut(),
        };
        let r = plan.run(st, Workspace::None, args);
        bad.expect("no workspace", r, workspace_too_small, &[&y])?;
    }

    // Backward.
    let base = || bw_inputs(&x, &w, &dy);
    let mut dx = Out::<f32>::new(&xs, cf);
    let mut dw = Out::<f32>::new(&ws, cf);
    let mut db = Out::<f32>::new(&[5], cf);
    let args = ConvBwArgs {
        dx: Some(dx.view_mut()),
        dbias: Some(db.view_mut()),
        ..base()
    };
    let r = plan.run_bw(st, borrowed(&mut wsb), args);
    bad.expect("dbias of 5", r, shape_mismatch("dbias"), &[&dx, &db])?;
    let args = ConvBwArgs {
        dw: Some(dw.view_mut_as(&shape(6, 4, &[2; N]), cf)),
        ..base()
    };
    let r = plan.run_bw(st, borrowed(&mut wsb), args);
    bad.expect("dw shape", r, shape_mismatch("dw"), &[&dw])?;
    if plan.bw_workspace_size(Grad::X.into()) > 0 {
        let args = ConvBwArgs {
            dx: Some(dx.view_mut()),
            ..base()
        };
        let r = plan.run_bw(st, Workspace::None, args);
        bad.expect("no backward workspace", r, workspace_too_small, &[&dx])?;
    }
    // A ReLU plan's backward reads the forward output.
    let relu = f32_plan(&d.with_activation(Activation::Relu), &pref).map_err(|e| e.to_string())?;
    let args = ConvBwArgs {
        dx: Some(dx.view_mut()),
        ..base()
    };
    let r = relu.run_bw(st, borrowed(&mut wsb), args);
    bad.expect("ReLU backward without y", r, invalid_argument("y"), &[&dx])?;
    alias_bad_inputs(&mut bad, &plan, (&xs, &ws, &ys))?;
    bad.done()
}

/// The transposed convolution's bad inputs: output_padding against stride
/// and dilation, the dtype, an empty batch; errors that name the
/// transposed convolution's own arguments (it runs the equivalent conv's
/// passes with the roles swapped); outputs overlapping inputs or each
/// other; none writing anything.
pub(super) fn transpose_bad_inputs() -> Result<usize, String> {
    let st = &gpu().stream;
    let pref = PlanPreference::default();
    let mut bad = BadInputs::default();
    let t = ConvTranspose2dDescriptor::new(1, 2, 2, [4, 4], [3, 3], ElementKind::F32)
        .with_stride([2, 2]);
    let plan_of = |t: &ConvTranspose2dDescriptor| ConvTranspose2dPlan::<f32>::select(st, t, &pref);
    let r = plan_of(&t.with_output_padding([2, 0]));
    bad.expect(
        "output_padding >= stride and dilation",
        r,
        invalid_descriptor("output_padding"),
        &[],
    )?;
    let r = ConvTranspose2dPlan::<f64>::select(st, &t, &pref);
    bad.expect("f64 plan of an f32 descriptor", r, dtype_mismatch, &[])?;
    let empty = ConvTransposeDescriptor { batch: 0, ..t };
    bad.expect("batch 0", plan_of(&empty), invalid_descriptor("batch"), &[])?;

    // x [1, 2, 4, 4], w [2, 2, 3, 3], y [1, 2, 9, 9] (stride 2).
    let plan = plan_of(&t).map_err(|e| e.to_string())?;
    if plan.output_dims() != [9, 9] {
        return Err(format!(
            "output dims {:?}, expected [9, 9]",
            plan.output_dims()
        ));
    }
    // A shape mismatch that names the transposed convolution's `arg`.
    let own = |arg: &'static str| {
        move |e: &Error| {
            matches!(
                e,
                Error::ShapeMismatch {
                    op: "conv_transpose",
                    ..
                }
            ) && shape_mismatch(arg)(e)
        }
    };
    let cf = ConvLayout::ChannelsFirst;
    let (xs, ws, ys) = ([1, 2, 4, 4], [2, 2, 3, 3], [1, 2, 9, 9]);
    let (x, w, dy) = (filled(&xs), filled(&ws), filled(&ys));
    let all = Grad::X | Grad::Weight;
    let mut wsb = workspace(plan.workspace_size().max(plan.bw_workspace_size(all)));
    let mut y = Out::<f32>::new(&ys, cf);
    let mut dx = Out::<f32>::new(&xs, cf);
    let mut dw = Out::<f32>::new(&ws, cf);
    let args = ConvArgs {
        x: dense_view(x.buf.as_slice(), &[1, 2, 4, 3], cf),
        w: w.view(),
        bias: None,
        y: y.view_mut(),
    };
    let r = plan.run(st, borrowed(&mut wsb), args);
    bad.expect("x shape", r, own("x"), &[&y])?;
    let base = || bw_inputs(&x, &w, &dy);
    let args = ConvBwArgs {
        dy: x.view(),
        dx: Some(dx.view_mut()),
        ..base()
    };
    let r = plan.run_bw(st, borrowed(&mut wsb), args);
    bad.expect("dy of x's shape", r, own("dy"), &[&dx])?;
    let args = ConvBwArgs {
        dw: Some(dw.view_mut_as(&[2, 2, 3, 2], cf)),
        ..base()
    };
    let r = plan.run_bw(st, borrowed(&mut wsb), args);
    bad.expect("dw shape", r, own("dw"), &[&dw])?;
    alias_bad_inputs(&mut bad, &plan, (&xs, &ws, &ys))?;
    bad.done()
}

// ---------------------------------------------------------------------------
// Pooling
// ---------------------------------------------------------------------------

/// Select the pooling of `mode` with `kind` in every rank: `Unsupported`.
pub(super) fn pool_unsupported(kind: ElementKind, mode: PoolKind) -> Result<(), String> {
    every_rank!(N, R => {
        let what = format!("{mode:?} pool{N}d {kind}");
        let d = PoolDescriptor::<N>::new(1, 1, [4; N], [2; N], kind);
        let a = AdaptivePoolDescriptor::<N>::new(1, 1, [4; N], [2; N], kind);
        let lp = LpPoolDescriptor::<N>::new(1, 1, [4; N], [2; N], 2.0, kind);
        crate::with_element!(kind, T => match mode {
            PoolKind::Max => expect_unsupported::<PoolPlan<T, PoolMax, N, R>>(&what, &d),
            PoolKind::Avg => expect_unsupported::<PoolPlan<T, PoolAvg, N, R>>(&what, &d),
            PoolKind::AdaptiveMax => {
                expect_unsupported::<AdaptivePoolPlan<T, PoolMax, N, R>>(&what, &a)
            }
            PoolKind::AdaptiveAvg => {
                expect_unsupported::<AdaptivePoolPlan<T, PoolAvg, N, R>>(&what, &a)
            }
            PoolKind::Lp(_) => expect_unsupported::<LpPoolPlan<T, N, R>>(&what, &lp),
        })
    })
}

/// The operands of the 2-D bad-input runs, channels-first: x [1, 2, 8, 8]
/// and the [1, 2, 2, 2] y, indices and dy of a 3x3/3 window (or an
/// adaptive pooling to 2x2).
struct Operands {
    x: Dense<f32>,
    dy: Dense<f32>,
    y: Out<f32>,
    indices: Out<i64>,
}

const CF: ConvLayout = ConvLayout::ChannelsFirst;
const XS: [usize; 4] = [1, 2, 8, 8];
const YS: [usize; 4] = [1, 2, 2, 2];

impl Operands {
    fn new() -> Self {
        let mut rng = Rng::new(5);
        Operands {
            x: Dense::upload(&rng.vec(128, 0.5, 1.0), &XS, CF),
            dy: Dense::upload(&rng.vec(8, -1.0, 1.0), &YS, CF),
            y: Out::new(&YS, CF),
            indices: Out::new(&YS, CF),
        }
    }
    /// `run_bw`'s operands into `dx`, with every input some mode's
    /// backward reads.
    fn bw<'a>(&'a self, dx: TensorMut<'a, f32, 4>) -> PoolBwArgs<'a, f32, 4> {
        PoolBwArgs {
            dy: self.dy.view(),
            indices: Some(self.indices.view()),
            x: Some(self.x.view()),
            y: Some(self.y.view()),
            dx,
        }
    }
}

/// The bad arguments of `run` and `run_bw` every pooling plan has, on
/// [`Operands`]: x, y, indices (max), dy and dx of the wrong shape,
/// channels-last strides on a channels-first plan, indices given to a
/// mode that writes none, and each input the mode's backward needs left
/// out (indices for max, x and y for Lp). None may write. Counts them in
/// with the row's others (`bad`).
fn pool_run_bad_inputs<P>(mut bad: BadInputs, plan: &P, mode: PoolKind) -> Result<usize, String>
where
    P: for<'a> Plan<Args<'a> = PoolArgs<'a, f32, 4>>
        + for<'a> Backward<BwArgs<'a> = PoolBwArgs<'a, f32, 4>>,
{
    let st = &gpu().stream;
    let max = matches!(mode, PoolKind::Max | PoolKind::AdaptiveMax);
    let mut o = Operands::new();
    let args = PoolArgs {
        x: dense_view(o.x.buf.as_slice(), &[1, 2, 8, 7], CF),
        y: o.y.view_mut(),
        indices: None,
    };
    let r = plan.run(st, Workspace::None, args);
    bad.expect("x shape", r, shape_mismatch("x"), &[&o.y])?;
    let args = PoolArgs {
        x: o.x.view(),
        y: o.y.view_mut_as(&[1, 2, 4, 1], CF),
        indices: None,
    };
    let r = plan.run(st, Workspace::None, args);
    bad.expect("y shape", r, shape_mismatch("y"), &[&o.y])?;
    let args = PoolArgs {
        x: o.x.view(),
        y: o.y.view_mut_as(&YS, ConvLayout::ChannelsLast),
        indices: None,
    };
    let r = plan.run(st, Workspace::None, args);
    bad.expect("channels-last y", r, invalid_argument("y"), &[&o.y])?;
    let indices = if max {
        o.indices.view_mut_as(&[1, 2, 1, 4], CF)
    } else {
        o.indices.view_mut()
    };
    let args = PoolArgs {
        x: o.x.view(),
        y: o.y.view_mut(),
        indices: Some(indices),
    };
    let r = plan.run(st, Workspace::None, args);
    // Max modes check their shape; the others take none at all.
    let written = [&o.y as &dyn Poisoned, &o.indices];
    if max {
        bad.expect("indices shape", r, shape_mismatch("indices"), &written)?;
    } else {
        let what = "indices of a mode without them";
        bad.expect(what, r, invalid_argument("indices"), &written)?;
    }

    let mut dx = Out::<f32>::new(&XS, CF);
    let args = PoolBwArgs {
        dy: dense_view(o.dy.buf.as_slice(), &[1, 2, 1, 4], CF),
        ..o.bw(dx.view_mut())
    };
    let r = plan.run_bw(st, Workspace::None, args);
    bad.expect("dy shape", r, shape_mismatch("dy"), &[&dx])?;
    let args = o.bw(dx.view_mut_as(&[1, 2, 8, 7], CF));
    let r = plan.run_bw(st, Workspace::None, args);
    bad.expect("dx shape", r, shape_mismatch("dx"), &[&dx])?;
    if max {
        let args = PoolBwArgs {
            indices: None,
            ..o.bw(dx.view_mut())
        };
        let r = plan.run_bw(st, Workspace::None, args);
        bad.expect(
            "backward without indices",
            r,
            invalid_argument("indices"),
            &[&dx],
        )?;
    }
    if let PoolKind::Lp(_) = mode {
        let args = PoolBwArgs {
            x: None,
            ..o.bw(dx.view_mut())
        };
        let r = plan.run_bw(st, Workspace::None, args);
        bad.expect("backward without x", r, invalid_argument("x"), &[&dx])?;
        let args = PoolBwArgs {
            y: None,
            ..o.bw(dx.view_mut())
        };
        let r = plan.run_bw(st, Workspace::None, args);
        bad.expect("backward without y", r, invalid_argument("y"), &[&dx])?;
    }

    // Outputs over inputs or each other, through views of one buffer.
    let (nx, ny) = (n_elems(&XS), n_elems(&YS));
    let sh = Shared::new(nx + 3 * ny);
    let args = PoolArgs {
        x: sh.at(0, &XS),
        y: sh.at_mut(nx - 1, &YS),
        indices: None,
    };
    let r = plan.run(st, Workspace::None, args);
    bad.expect("y over the end of x", r, invalid_argument("y"), &[&sh])?;
    if max {
        let args = PoolArgs {
            x: o.x.view(),
            y: sh.at_mut(0, &YS),
            indices: Some(sh.at_mut(ny / 2, &YS)),
        };
        let r = plan.run(st, Workspace::None, args);
        bad.expect("indices over y", r, invalid_argument("y"), &[&sh])?;
    }
    let args = PoolBwArgs {
        dy: sh.at(0, &YS),
        ..o.bw(sh.at_mut(1, &XS))
    };
    let r = plan.run_bw(st, Workspace::None, args);
    bad.expect("dx over dy", r, invalid_argument("dx"), &[&sh])?;
    bad.done()
}

/// What every pooling plan `P` checks past its descriptor's fields, on
/// the f32 `desc`: the dtype (`P64` is the same plan in f64) and a backend
/// other than baracuda; then [`pool_run_bad_inputs`] on `P`'s plan.
fn pool_plan_bad_inputs<P, P64>(
    mut bad: BadInputs,
    desc: &P::Descriptor,
    mode: PoolKind,
) -> Result<usize, String>
where
    P: for<'a> Plan<Args<'a> = PoolArgs<'a, f32, 4>>
        + for<'a> Backward<BwArgs<'a> = PoolBwArgs<'a, f32, 4>>,
    P64: Plan<Descriptor = P::Descriptor>,
{
    let st = &gpu().stream;
    let pref = PlanPreference::default();
    let r = P64::select(st, desc, &pref);
    bad.expect("f64 plan of an f32 descriptor", r, dtype_mismatch, &[])?;
    let r = P::select(st, desc, &pref.with_backend(BackendKind::Cudnn));
    bad.expect("cuDNN backend", r, preference_rejected("backend"), &[])?;
    let plan = P::select(st, desc, &pref).map_err(|e| e.to_string())?;
    pool_run_bad_inputs(bad, &plan, mode)
}

/// Max (`M` = [`PoolMax`], `mode` = `Max`) or average pooling's bad
/// inputs: padding above half the kernel on either side, a divisor
/// override the mode refuses (any on max, 0 on avg), a zero kernel, a
/// window past the input, an empty batch; then [`pool_plan_bad_inputs`].
pub(super) fn window_pool_bad_inputs<M: PoolReduce>(mode: PoolKind) -> Result<usize, String> {
    let st = &gpu().stream;
    let pref = PlanPreference::default();
    let mut bad = BadInputs::default();
    // 3x3, stride 3, over [1, 2, 8, 8].
    let d = Pool2dDescriptor::new(1, 2, [8, 8], [3, 3], ElementKind::F32);
    let plan_of =
        |d: &Pool2dDescriptor, pref: &PlanPreference| PoolPlan::<f32, M, 2, 4>::select(st, d, pref);
    let r = plan_of(&d.with_padding([2, 2]), &pref);
    bad.expect("padding 2 of 3", r, invalid_descriptor("padding"), &[])?;
    let r = plan_of(&d.with_padding_ends([0, 0], [2, 2]), &pref);
    bad.expect(
        "end padding 2 of 3",
        r,
        invalid_descriptor("padding_end"),
        &[],
    )?;
    let divisor = if mode == PoolKind::Max { 2 } else { 0 };
    let r = plan_of(&d.with_divisor_override(Some(divisor)), &pref);
    let what = format!("divisor {divisor}");
    bad.expect(&what, r, invalid_descriptor("divisor_override"), &[])?;
    let mut no_taps = d;
    no_taps.window.kernel = [0, 3];
    let r = plan_of(&no_taps, &pref);
    bad.expect("kernel 0", r, invalid_descriptor("kernel"), &[])?;
    let r = plan_of(&Pool2dDescriptor { input: [2, 8], ..d }, &pref);
    bad.expect(
        "window past the input",
        r,
        invalid_descriptor("output"),
        &[],
    )?;
    let r = plan_of(&Pool2dDescriptor { batch: 0, ..d }, &pref);
    bad.expect("batch 0", r, invalid_descriptor("batch"), &[])?;
    pool_plan_bad_inputs::<PoolPlan<f32, M, 2, 4>, PoolPlan<f64, M, 2, 4>>(bad, &d, mode)
}

/// Adaptive max or average pooling's bad inputs: a zero output, input or
/// channel count; then [`pool_plan_bad_inputs`].
pub(super) fn adaptive_pool_bad_inputs<M: PoolReduce>(mode: PoolKind) -> Result<usize, String> {
    let st = &gpu().stream;
    let pref = PlanPreference::default();
    let mut bad = BadInputs::default();
    // [1, 2, 8, 8] to 2x2.
    let a = AdaptivePool2dDescriptor::new(1, 2, [8, 8], [2, 2], ElementKind::F32);
    let plan_of = |a: &AdaptivePool2dDescriptor, pref: &PlanPreference| {
        AdaptivePoolPlan::<f32, M, 2, 4>::select(st, a, pref)
    };
    let (mut no_output, mut no_input, mut no_channels) = (a, a, a);
    no_output.output = [2, 0];
    no_input.input = [0, 8];
    no_channels.channels = 0;
    let r = plan_of(&no_output, &pref);
    bad.expect("output 0", r, invalid_descriptor("output"), &[])?;
    let r = plan_of(&no_input, &pref);
    bad.expect("input 0", r, invalid_descriptor("input"), &[])?;
    let r = plan_of(&no_channels, &pref);
    bad.expect("channels 0", r, invalid_descriptor("channels"), &[])?;
    pool_plan_bad_inputs::<AdaptivePoolPlan<f32, M, 2, 4>, AdaptivePoolPlan<f64, M, 2, 4>>(
        bad, &a, mode,
    )
}

/// Lp pooling's bad inputs: p not finite and positive, padding, dilation;
/// then [`pool_plan_bad_inputs`].
pub(super) fn lp_pool_bad_inputs() -> Result<usize, String> {
    let st = &gpu().stream;
    let pref = PlanPreference::default();
    let mut bad = BadInputs::default();
    let lp = LpPool2dDescriptor::new(1, 2, [8, 8], [3, 3], 2.0, ElementKind::F32);
    let plan_of = |d: &LpPool2dDescriptor| LpPool2dPlan::<f32>::select(st, d, &pref);
    for p in [-1.0, 0.0, f64::NAN] {
        let r = plan_of(&LpPool2dDescriptor { p, ..lp });
        bad.expect(&format!("p = {p}"), r, invalid_descriptor("p"), &[])?;
    }
    let r = plan_of(&lp.with_padding([1, 1]));
    bad.expect("padding", r, invalid_descriptor("padding"), &[])?;
    let r = plan_of(&lp.with_dilation([2, 2]));
    bad.expect("dilation", r, invalid_descriptor("dilation"), &[])?;
    pool_plan_bad_inputs::<LpPool2dPlan<f32>, LpPool2dPlan<f64>>(bad, &lp, PoolKind::Lp(2.0))
}

// ---------------------------------------------------------------------------
// Aliasing
// ---------------------------------------------------------------------------

/// One device buffer of seeded values that views of several operands are
/// cut from, so that they overlap as a caller holding raw pointers could
/// make them; untouched while it still holds those values.
struct Shared {
    buf: Dense<f32>,
    before: Vec<f64>,
}

impl Shared {
    fn new(len: usize) -> Self {
        let buf = filled(&[len]);
        let before = download(&buf.buf);
        Shared { buf, before }
    }

    /// A dense channels-first view of `shape` from element `start` on.
    fn at<const R: usize>(&self, start: usize, shape: &[usize]) -> TensorRef<'_, f32, R> {
        let part = self.buf.buf.as_slice().slice(start..start + n_elems(shape));
        dense_view(
            part.expect("inside the shared buffer"),
            shape,
            ConvLayout::ChannelsFirst,
        )
    }

    /// A writable view of `U` elements of `shape` from (f32) element
    /// `start` on, over the same memory as every other view of the buffer.
    fn at_mut<U: Element, const R: usize>(
        &self,
        start: usize,
        shape: &[usize],
    ) -> TensorMut<'_, U, R> {
        let s = self.buf.buf.as_slice();
        let n = n_elems(shape);
        let bytes = n * std::mem::size_of::<U>();
        assert!(start * 4 + bytes <= s.len() * 4, "inside the shared buffer");
        // SAFETY: the range lies inside the buffer (asserted); the view is
        // handed only to a `run` that must reject the overlap before it
        // enqueues anything, so nothing writes through it.
        let data =
            unsafe { DeviceSliceMut::from_raw_parts(s.ptr().add(start).addr(), n, s.ctx_id()) };
        TensorMut::new(
            data,
            std::array::from_fn(|a| shape[a]),
            std::array::from_fn(|a| contiguous(shape)[a]),
        )
        .expect("dense view")
    }
}

impl Poisoned for Shared {
    fn untouched(&self, what: &str) -> Result<(), String> {
        if download(&self.buf.buf) != self.before {
            return Err(format!("{what}: the shared buffer was written"));
        }
        Ok(())
    }
}

/// Backward args without `y` (no ReLU).
fn bw<'a, const R: usize>(
    x: TensorRef<'a, f32, R>,
    w: TensorRef<'a, f32, R>,
    dy: TensorRef<'a, f32, R>,
    dx: Option<TensorMut<'a, f32, R>>,
    dw: Option<TensorMut<'a, f32, R>>,
    dbias: Option<TensorMut<'a, f32, 1>>,
) -> ConvBwArgs<'a, f32, R> {
    ConvBwArgs {
        x,
        w,
        y: None,
        dy,
        dx,
        dw,
        dbias,
    }
}

/// Each output of a convolution plan (`y`; `dx`, `dw`, `dbias`) placed
/// over an input's memory or another output's: `InvalidArgument` naming
/// the output, nothing written (the shared buffer and the real outputs
/// keep their values). `shapes` are the plan's `x`, `w`, `y`
/// (channels-first).
fn alias_bad_inputs<P, const R: usize>(
    bad: &mut BadInputs,
    plan: &P,
    (xs, ws, ys): (&[usize], &[usize], &[usize]),
) -> Result<(), String>
where
    P: for<'a> Plan<Args<'a> = ConvArgs<'a, f32, R>>
        + for<'a> Backward<BwArgs<'a> = ConvBwArgs<'a, f32, R>>,
{
    let st = &gpu().stream;
    let cf = ConvLayout::ChannelsFirst;
    let (nx, nw, ny) = (n_elems(xs), n_elems(ws), n_elems(ys));
    let sh = Shared::new(nx + nw + ny);
    let (x, w, dy) = (filled(xs), filled(ws), filled(ys));
    let all = Grad::X | Grad::Weight | Grad::Bias;
    let mut wsb = workspace(plan.workspace_size().max(plan.bw_workspace_size(all)));
    let mut dx = Out::<f32>::new(xs, cf);
    let mut dw = Out::<f32>::new(ws, cf);
    let channels = [ys[1]];

    // One `run` or `run_bw` on the given operands, which must fail naming
    // `$arg` and leave `$outs` as they were; a macro, as each call borrows
    // the outputs only for the call.
    macro_rules! fw {
        ($what:expr, $arg:expr, $x:expr, $w:expr, $bias:expr, $y:expr) => {{
            let args = ConvArgs {
                x: $x,
                w: $w,
                bias: $bias,
                y: $y,
            };
            let r = plan.run(st, borrowed(&mut wsb), args);
            bad.expect($what, r, invalid_argument($arg), &[&sh])?;
        }};
    }
    macro_rules! bw {
        ($what:expr, $arg:expr, $outs:expr, $($op:expr),+) => {{
            let r = plan.run_bw(st, borrowed(&mut wsb), bw($($op),+));
            bad.expect($what, r, invalid_argument($arg), $outs)?;
        }};
    }
    let bias = || Some(sh.at(ny - channels[0], &channels));
    fw!(
        "y over the end of x",
        "y",
        sh.at(0, xs),
        w.view(),
        None,
        sh.at_mut(nx - 1, ys)
    );
    fw!(
        "y over w",
        "y",
        x.view(),
        sh.at(0, ws),
        None,
        sh.at_mut(1, ys)
    );
    fw!(
        "y over the bias",
        "y",
        x.view(),
        w.view(),
        bias(),
        sh.at_mut(0, ys)
    );
    let (dx_at, dw_at) = (|k| Some(sh.at_mut(k, xs)), |k| Some(sh.at_mut(k, ws)));
    bw!(
        "dx in place of x",
        "dx",
        &[&sh, &dw],
        sh.at(0, xs),
        w.view(),
        dy.view(),
        dx_at(0),
        Some(dw.view_mut()),
        None
    );
    bw!(
        "dx over dy",
        "dx",
        &[&sh],
        x.view(),
        w.view(),
        sh.at(0, ys),
        dx_at(ny / 2),
        None,
        None
    );
    bw!(
        "dw in place of w",
        "dw",
        &[&sh, &dx],
        x.view(),
        sh.at(0, ws),
        dy.view(),
        Some(dx.view_mut()),
        dw_at(0),
        None
    );
    bw!(
        "dbias over the end of dx",
        "dx",
        &[&sh],
        x.view(),
        w.view(),
        dy.view(),
        dx_at(0),
        None,
        Some(sh.at_mut(nx - 1, &channels))
    );
    Ok(())
}
