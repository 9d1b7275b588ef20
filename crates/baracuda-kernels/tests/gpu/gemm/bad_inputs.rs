//! The GEMM family's bad inputs, each returning its `Error` variant and
//! writing nothing (its outputs stay poison, guards included), and each
//! row's check that the dtypes it does not claim are `Unsupported`.

use baracuda_kernels::*;
use float8::{F8E4M3, F8E5M2};
use half::{bf16, f16};

use super::grouped::GROUPS;
use super::linear::{padded, skinny_outputs, Pads};
use super::{batch_bias, borrowed, vector, vector_mut, Mat, MatOut};
use crate::harness::*;
use crate::table::BadInputs;

// ---------------------------------------------------------------------------
// Dtypes a row does not claim
// ---------------------------------------------------------------------------

/// A problem every claimed dtype of every row takes.
fn problem() -> GemmDescriptor {
    GemmDescriptor::new(64, 48, 96, LayoutSku::Rcr)
}

pub(super) fn gemm_unsupported(kind: ElementKind) -> Result<(), String> {
    let what = format!("gemm {kind}");
    crate::with_element!(kind, T => expect_unsupported::<GemmPlan<T>>(&what, &problem()))
}

pub(super) fn batched_unsupported(kind: ElementKind) -> Result<(), String> {
    let what = format!("batched_gemm {kind}");
    let d = BatchedGemmDescriptor::packed(problem(), 3);
    crate::with_element!(kind, T => expect_unsupported::<BatchedGemmPlan<T>>(&what, &d))
}

pub(super) fn grouped_unsupported(kind: ElementKind) -> Result<(), String> {
    let what = format!("grouped_gemm {kind}");
    let d = GroupedGemmDescriptor::new(vec![(64, 48, 96), (0, 48, 96)], LayoutSku::Rcr);
    crate::with_element!(kind, T => expect_unsupported::<GroupedGemmPlan<T>>(&what, &d))
}

pub(super) fn linear_unsupported(kind: ElementKind) -> Result<(), String> {
    let what = format!("linear {kind}");
    let d = LinearDescriptor::new(64, 96, 48).with_epilogue(EpilogueKind::Bias);
    crate::with_element!(kind, T => expect_unsupported::<LinearPlan<T>>(&what, &d))
}

/// `kind` as the output of s8 x s8.
pub(super) fn int_unsupported(kind: ElementKind) -> Result<(), String> {
    let what = format!("int8 -> {kind}");
    let d = IntGemmDescriptor { gemm: problem() };
    crate::with_element!(kind, T => expect_unsupported::<IntGemmPlan<T>>(&what, &d))
}

/// `kind` as `A` of `A x e4m3 -> bf16`.
pub(super) fn fp8_unsupported(kind: ElementKind) -> Result<(), String> {
    let what = format!("{kind} x e4m3 -> bf16");
    let d = Fp8GemmDescriptor {
        gemm: problem(),
        amax: false,
    };
    crate::with_element!(kind, T =>
        expect_unsupported::<Fp8GemmPlan<T, F8E4M3, bf16>>(&what, &d))
}

/// Selecting `P` for `desc` must return `Unsupported`: a dtype pair or a
/// shape no plan of the row takes.
fn refused<P: Plan>(bad: &mut BadInputs, what: &str, desc: &P::Descriptor) -> Result<(), String> {
    let r = P::select(&gpu().stream, desc, &PlanPreference::default());
    bad.expect(what, r, unsupported, &[])
}

/// What every row's bad inputs start from: the shared stream, the default
/// preference, none checked yet.
fn start() -> (&'static Stream, PlanPreference, BadInputs) {
    (
        &gpu().stream,
        PlanPreference::default(),
        BadInputs::default(),
    )
}

/// `n` seeded values on the device.
fn filled<T: Element>(n: usize) -> DeviceBuffer<T> {
    upload::<T>(&Rng::new(n as u64).vec(n, -1.0, 1.0)).0
}

/// The error a bad argument must return, naming the argument.
#[derive(Copy, Clone, Debug)]
enum Want {
    /// `ShapeMismatch`.
    Shape(&'static str),
    /// `InvalidArgument`.
    Invalid(&'static str),
}

impl Want {
    fn matches(self, e: &Error) -> bool {
        match self {
            Want::Shape(arg) => shape_mismatch(arg)(e),
            Want::Invalid(arg) => invalid_argument(arg)(e),
        }
    }
}

/// An error of `select`, as a message.
fn selected<P>(r: Result<P>) -> Result<P, String> {
    r.map_err(|e| format!("select: {e}"))
}

// ---------------------------------------------------------------------------
// gemm and batched_gemm
// ---------------------------------------------------------------------------

/// What [`gemm_bad_inputs`] spoils of good arguments: `a` 4 bytes into its
/// buffer, 16 x 8, or column-major; `beta` 1 without `c`; `c` with leading
/// dimension 17; a bias or aux the plan does not take; `d` 16 x 8.
#[derive(Copy, Clone, Debug, PartialEq)]
enum GemmSpoil {
    MisalignedA,
    NarrowA,
    ColumnMajorA,
    BetaWithoutC,
    WideC,
    UnexpectedBias,
    UnexpectedAux,
    NarrowD,
}

/// Descriptors (an empty `m`, a short `lda`, aux without activation), a
/// backend, dtype pairs; then the arguments of `run`: `a` misaligned, of
/// the wrong shape or order; `beta` without `c`; `c`'s leading dimension;
/// a bias or aux the plan does not take; `d`'s shape.
pub(super) fn gemm_bad_inputs() -> Result<usize, String> {
    let (st, pref, mut bad) = start();
    let d = GemmDescriptor::new(16, 16, 16, LayoutSku::Rrr);
    let select = |d: &GemmDescriptor, pref: &PlanPreference| GemmPlan::<f32>::select(st, d, pref);
    let empty = GemmDescriptor::new(0, 16, 16, LayoutSku::Rrr);
    bad.expect("m = 0", select(&empty, &pref), invalid_descriptor("m"), &[])?;
    let short = d.clone().with_ld(15, 16, 16, 16);
    bad.expect(
        "lda 15",
        select(&short, &pref),
        invalid_descriptor("lda"),
        &[],
    )?;
    let aux = d.clone().with_epilogue(EpilogueKind::Bias).with_aux(true);
    let no_act = invalid_descriptor("save_aux");
    bad.expect("aux without activation", select(&aux, &pref), no_act, &[])?;
    let cudnn = pref.with_backend(BackendKind::Cudnn);
    let backend = preference_rejected("backend");
    bad.expect("cuDNN backend", select(&d, &cudnn), backend, &[])?;
    refused::<GemmPlan<f32, f16>>(&mut bad, "f32 -> f16", &d)?;
    refused::<GemmPlan<f64, f32>>(&mut bad, "f64 -> f32", &d)?;
    refused::<GemmPlan<f16, bf16>>(&mut bad, "f16 -> bf16", &d)?;
    refused::<GemmPlan<bf16, f16>>(&mut bad, "bf16 -> f16", &d)?;
    refused::<GemmPlan<i8, i32>>(&mut bad, "i8 -> i32", &d)?;

    // Arguments of the 16 x 16 x 16 row-major plan.
    let plan = selected(select(&d, &pref))?;
    let mut ws = workspace(plan.workspace_size());
    let (row, col) = (MatrixOrder::RowMajor, MatrixOrder::ColMajor);
    let (m, narrow) = (Mat::packed(16, 16, row), Mat::packed(16, 8, row));
    let buf = filled::<f32>(300);
    let view = |mat: Mat, from: usize| mat.view(buf.as_slice().slice(from..300).expect("in buf"));
    let (mut out, mut aux) = (MatOut::<f32>::new(m), MatOut::<f32>::new(m));
    let cases = [
        (GemmSpoil::MisalignedA, Want::Invalid("a")),
        (GemmSpoil::NarrowA, Want::Shape("a")),
        (GemmSpoil::ColumnMajorA, Want::Invalid("a")),
        (GemmSpoil::BetaWithoutC, Want::Invalid("c")),
        (GemmSpoil::WideC, Want::Invalid("c")),
        (GemmSpoil::UnexpectedBias, Want::Invalid("bias")),
        (GemmSpoil::UnexpectedAux, Want::Invalid("aux")),
        (GemmSpoil::NarrowD, Want::Shape("d")),
    ];
    for (spoil, want) in cases {
        let d = if spoil == GemmSpoil::NarrowD {
            out.view_mut_as(narrow)
        } else {
            out.view_mut()
        };
        let mut args = GemmArgs {
            a: view(m, 0),
            b: view(m, 0),
            c: GemmC::None,
            d,
            bias: None,
            aux: None,
            alpha: 1.0,
            beta: 0.0,
        };
        match spoil {
            GemmSpoil::MisalignedA => args.a = view(m, 1),
            GemmSpoil::NarrowA => args.a = view(narrow, 0),
            GemmSpoil::ColumnMajorA => args.a = view(Mat::packed(16, 16, col), 0),
            GemmSpoil::BetaWithoutC => args.beta = 1.0,
            GemmSpoil::WideC => {
                (args.c, args.beta) = (GemmC::Tensor(view(Mat::row_major(16, 16, 17), 0)), 1.0)
            }
            GemmSpoil::UnexpectedBias => args.bias = Some(vector(buf.as_slice())),
            GemmSpoil::UnexpectedAux => args.aux = Some(aux.view_mut()),
            GemmSpoil::NarrowD => {}
        }
        let r = plan.run(st, borrowed(&mut ws), args);
        bad.expect(&format!("{spoil:?}"), r, |e| want.matches(e), &[&out, &aux])?;
    }
    bad.done()
}

/// What [`batched_bad_inputs`] spoils of good arguments: the bias one
/// element short per entry, 4 bytes into its buffer, strided along `n`,
/// or missing; aux missing; `a` one entry short; `beta` 1 without `c`.
#[derive(Copy, Clone, Debug)]
enum BatchedSpoil {
    ShortBias,
    MisalignedBias,
    StridedBias,
    NoBias,
    NoAux,
    ShortA,
    BetaWithoutC,
}

/// Descriptors (an empty batch, overlapping `D` or aux entries), dtype
/// pairs; then the arguments of a batch of 3 with bias, ReLU and aux: `a`
/// one entry short, the bias of the wrong shape, off 16 bytes or strided,
/// no bias, no aux, `beta` without `c`.
pub(super) fn batched_bad_inputs() -> Result<usize, String> {
    let (st, pref, mut bad) = start();
    let g = GemmDescriptor::new(16, 16, 16, LayoutSku::Rcr)
        .with_epilogue(EpilogueKind::BiasRelu)
        .with_aux(true);
    let desc = BatchedGemmDescriptor::packed(g.clone(), 3);
    let select = |d: &BatchedGemmDescriptor| BatchedGemmPlan::<f32>::select(st, d, &pref);
    let empty = BatchedGemmDescriptor::packed(g, 0);
    bad.expect("batch 0", select(&empty), invalid_descriptor("batch"), &[])?;
    let overlap_d = BatchedGemmDescriptor {
        stride_d: 255,
        ..desc.clone()
    };
    let overlap_aux = BatchedGemmDescriptor {
        stride_aux: 255,
        ..desc.clone()
    };
    for (overlap, field) in [(overlap_d, "stride_d"), (overlap_aux, "stride_aux")] {
        let what = format!("overlapping entries: {field} 255");
        bad.expect(&what, select(&overlap), invalid_descriptor(field), &[])?;
    }
    refused::<BatchedGemmPlan<f32, f16>>(&mut bad, "f32 -> f16", &desc)?;
    refused::<BatchedGemmPlan<f64, f32>>(&mut bad, "f64 -> f32", &desc)?;

    let plan = selected(select(&desc))?;
    let mut ws = workspace(plan.workspace_size());
    let m = Mat::packed(16, 16, MatrixOrder::RowMajor);
    let ab = filled::<f32>(3 * 256);
    let bias = filled::<f32>(3 * 16 + 4);
    let (all, biases) = (ab.as_slice(), bias.as_slice());
    let (mut d, mut aux) = (
        MatOut::<f32>::batch(m, 3, 256),
        MatOut::<f32>::batch(m, 3, 256),
    );
    let part = |from: usize, shape: [usize; 2], strides: [usize; 2]| {
        let s = biases.slice(from..3 * 16 + 4).expect("in the buffer");
        TensorRef::new(s, shape, strides).expect("in the buffer")
    };
    let cases = [
        (BatchedSpoil::ShortBias, Want::Shape("bias")),
        (BatchedSpoil::MisalignedBias, Want::Invalid("bias")),
        (BatchedSpoil::StridedBias, Want::Invalid("bias")),
        (BatchedSpoil::NoBias, Want::Invalid("bias")),
        (BatchedSpoil::NoAux, Want::Invalid("aux")),
        (BatchedSpoil::ShortA, Want::Shape("a")),
        (BatchedSpoil::BetaWithoutC, Want::Invalid("c")),
    ];
    for (spoil, want) in cases {
        let mut args = BatchedGemmArgs {
            a: all,
            b: all,
            c: GemmC::None,
            d: d.slice_mut(),
            bias: Some(batch_bias(&desc, biases)),
            aux: Some(aux.slice_mut()),
            alpha: 1.0,
            beta: 0.0,
        };
        match spoil {
            BatchedSpoil::ShortBias => args.bias = Some(part(0, [3, 15], [16, 1])),
            BatchedSpoil::MisalignedBias => args.bias = Some(part(1, [3, 16], [16, 1])),
            BatchedSpoil::StridedBias => args.bias = Some(part(0, [3, 16], [8, 2])),
            BatchedSpoil::NoBias => args.bias = None,
            BatchedSpoil::NoAux => args.aux = None,
            BatchedSpoil::ShortA => args.a = all.slice(0..2 * 256).expect("in the buffer"),
            BatchedSpoil::BetaWithoutC => args.beta = 1.0,
        }
        let r = plan.run(st, borrowed(&mut ws), args);
        bad.expect(&format!("{spoil:?}"), r, |e| want.matches(e), &[&d, &aux])?;
    }
    bad.done()
}

// ---------------------------------------------------------------------------
// grouped_gemm
// ---------------------------------------------------------------------------

/// One group's operands on the device, each in an allocation of its own.
struct GroupIn {
    mats: [Mat; 3],
    a: DeviceBuffer<f32>,
    b: DeviceBuffer<f32>,
    c: DeviceBuffer<f32>,
    bias: DeviceBuffer<f32>,
}

/// A, B, C and the bias of every group, `D` from `outs`, `beta` 1.
fn grouped_args<'a>(ins: &'a [GroupIn], outs: &'a mut [MatOut<f32>]) -> GroupedGemmArgs<'a, f32> {
    GroupedGemmArgs {
        a: ins.iter().map(|g| g.mats[0].view(g.a.as_slice())).collect(),
        b: ins.iter().map(|g| g.mats[1].view(g.b.as_slice())).collect(),
        c: GemmC::Tensor(ins.iter().map(|g| g.mats[2].view(g.c.as_slice())).collect()),
        d: outs.iter_mut().map(MatOut::view_mut).collect(),
        bias: Some(ins.iter().map(|g| vector(g.bias.as_slice())).collect()),
        aux: None,
        alpha: 1.0,
        beta: 1.0,
    }
}

/// What [`grouped_bad_inputs`] spoils of good arguments: the last group's
/// bias one element short, or its C column-major (the plan takes
/// row-major); the C list one group short; no bias list; the empty group's
/// D 0 x 8 (a spare output) where it is 0 x 16.
#[derive(Copy, Clone, Debug)]
enum GroupedSpoil {
    LastBias,
    LastC,
    CList,
    NoBias,
    EmptyD,
}

/// Descriptors (no groups, `n` of 0); then a bad argument in one group
/// (the last, or the empty one) or list, refused before any group is
/// written.
pub(super) fn grouped_bad_inputs() -> Result<usize, String> {
    let (st, pref, mut bad) = start();
    let row = MatrixOrder::RowMajor;
    let select = |d: &GroupedGemmDescriptor| GroupedGemmPlan::<f32>::select(st, d, &pref);
    let none = GroupedGemmDescriptor::new(Vec::new(), LayoutSku::Rcr);
    bad.expect(
        "no groups",
        select(&none),
        invalid_descriptor("problems"),
        &[],
    )?;
    let flat = GroupedGemmDescriptor::new(vec![(4, 0, 8)], LayoutSku::Rcr);
    bad.expect("n = 0", select(&flat), invalid_descriptor("n"), &[])?;

    let desc = GroupedGemmDescriptor::new(GROUPS.to_vec(), LayoutSku::Rcr)
        .with_epilogue(EpilogueKind::BiasRelu);
    let plan = selected(select(&desc))?;
    let mut ws = workspace(plan.workspace_size());
    let ins: Vec<GroupIn> = GROUPS
        .iter()
        .map(|&(m, n, k)| {
            let mats = [
                Mat::packed(m, k, row),
                Mat::packed(k, n, MatrixOrder::ColMajor),
                Mat::packed(m, n, row),
            ];
            GroupIn {
                a: filled(mats[0].span().max(1)),
                b: filled(mats[1].span()),
                c: filled(mats[2].span().max(1)),
                bias: filled(n),
                mats,
            }
        })
        .collect();
    let mut outs: Vec<MatOut<f32>> = ins.iter().map(|g| MatOut::new(g.mats[2])).collect();
    let last = GROUPS.len() - 1;
    let (m, n, _) = GROUPS[last];
    let empty = GROUPS
        .iter()
        .position(|g| g.0 == 0)
        .expect("an empty group");
    let mut spare = MatOut::<f32>::new(Mat::packed(0, 8, row));
    let cases = [
        (GroupedSpoil::LastBias, Want::Shape("bias")),
        (GroupedSpoil::LastC, Want::Invalid("c")),
        (GroupedSpoil::CList, Want::Shape("c")),
        (GroupedSpoil::NoBias, Want::Invalid("bias")),
        (GroupedSpoil::EmptyD, Want::Shape("d")),
    ];
    for (spoil, want) in cases {
        let mut args = grouped_args(&ins, &mut outs);
        match spoil {
            GroupedSpoil::LastBias => {
                let bias = args.bias.as_mut().expect("a bias list");
                let short = ins[last]
                    .bias
                    .as_slice()
                    .slice(0..n - 1)
                    .expect("in the bias");
                bias[last] = vector(short);
            }
            GroupedSpoil::LastC => {
                let c = Mat::packed(m, n, MatrixOrder::ColMajor).view(ins[last].c.as_slice());
                if let GemmC::Tensor(list) = &mut args.c {
                    list[last] = c;
                }
            }
            GroupedSpoil::CList => {
                if let GemmC::Tensor(list) = &mut args.c {
                    list.pop();
                }
            }
            GroupedSpoil::NoBias => args.bias = None,
            GroupedSpoil::EmptyD => args.d[empty] = spare.view_mut(),
        }
        let r = plan.run(st, borrowed(&mut ws), args);
        let mut written: Vec<&dyn Poisoned> = outs.iter().map(|o| o as &dyn Poisoned).collect();
        written.push(&spare);
        bad.expect(&format!("{spoil:?}"), r, |e| want.matches(e), &written)?;
    }
    bad.done()
}

// ---------------------------------------------------------------------------
// linear
// ---------------------------------------------------------------------------

/// `rows x cols` of `buf`, row-major with leading dimension `ld`.
fn rows(buf: &DeviceBuffer<f32>, rows: usize, cols: usize, ld: usize) -> MatrixRef<'_, f32> {
    Mat::row_major(rows, cols, ld).view(buf.as_slice())
}

/// `run_bw`'s inputs, no gradient asked for, no aux.
fn bw_args<'a>(
    x: MatrixRef<'a, f32>,
    w: MatrixRef<'a, f32>,
    dy: MatrixRef<'a, f32>,
) -> LinearBwArgs<'a, f32> {
    LinearBwArgs {
        x,
        w,
        dy,
        aux: None,
        dx: None,
        dw: None,
        dbias: None,
    }
}

/// Descriptors (no tokens, a leading dimension below its row length);
/// arguments whose leading dimensions differ from the plan's (under the
/// layer's names), `aux` missing for a backward through an activation,
/// `db` without `dw`; and the skinny forward refused (bf16) for five
/// tokens, too few outputs, K not whole vectors, and strided `X`, `W` or
/// `Y`.
#[allow(clippy::too_many_lines)] // one list of cases
pub(super) fn linear_bad_inputs() -> Result<usize, String> {
    let (st, pref, mut bad) = start();
    let (t, i, o) = (16, 32, 24);
    let desc = LinearDescriptor::new(t, i, o)
        .with_epilogue(EpilogueKind::Bias)
        .with_forward_ld(40, 32, 24)
        .with_backward_ld(32, 32, 32);
    let select = |d: &LinearDescriptor| LinearPlan::<f32>::select(st, d, &pref);
    let none = LinearDescriptor::new(0, i, o);
    bad.expect("tokens 0", select(&none), invalid_descriptor("tokens"), &[])?;
    for (d, field) in [
        (desc.clone().with_forward_ld(40, 31, 24), "ldw"),
        (desc.clone().with_backward_ld(32, 32, 23), "lddy"),
    ] {
        bad.expect(field, select(&d), invalid_descriptor(field), &[])?;
    }

    // The strided plan: X ld 40, W and Y packed; dX, dW, dY ld 32.
    let plan = selected(select(&desc))?;
    let mut ws = workspace(plan.workspace_size());
    let (x, w, b, dy) = (
        filled::<f32>(t * 40),
        filled(o * i),
        filled(2 * o),
        filled(t * 32),
    );
    let bias = vector(b.as_slice().slice(0..o).expect("in the buffer"));
    let mut y = MatOut::<f32>::new(Mat::row_major(t, o, o));
    let args = LinearArgs {
        x: rows(&x, t, i, i),
        w: rows(&w, o, i, i),
        bias: Some(bias),
        y: y.view_mut(),
        aux: None,
    };
    let r = plan.run(st, borrowed(&mut ws), args);
    bad.expect(
        "x packed, the plan strided",
        r,
        invalid_argument("x"),
        &[&y],
    )?;
    let strided = TensorRef::new(b.as_slice(), [o], [2]).expect("in the buffer");
    let args = LinearArgs {
        x: rows(&x, t, i, 40),
        w: rows(&w, o, i, i),
        bias: Some(strided),
        y: y.view_mut(),
        aux: None,
    };
    let r = plan.run(st, borrowed(&mut ws), args);
    bad.expect("bias of stride 2", r, invalid_argument("bias"), &[&y])?;
    let mut dx = MatOut::<f32>::new(Mat::row_major(t, i, 32));
    let mut dw = MatOut::<f32>::new(Mat::row_major(o, i, 32));
    let mut db = Guarded::<f32>::new(o);
    let (x_strided, w_packed) = (rows(&x, t, i, 40), rows(&w, o, i, i));
    let args = LinearBwArgs {
        dx: Some(dx.view_mut()),
        dw: Some(dw.view_mut()),
        dbias: Some(vector_mut(db.slice_mut())),
        ..bw_args(x_strided, w_packed, rows(&dy, t, o, o))
    };
    let r = plan.run_bw(st, borrowed(&mut ws), args);
    let grads: [&dyn Poisoned; 3] = [&dx, &dw, &db];
    bad.expect(
        "dy packed, the plan strided",
        r,
        invalid_argument("dy"),
        &grads,
    )?;
    let args = LinearBwArgs {
        dx: Some(dx.view_mut()),
        dbias: Some(vector_mut(db.slice_mut())),
        ..bw_args(x_strided, w_packed, rows(&dy, t, o, 32))
    };
    let r = plan.run_bw(st, borrowed(&mut ws), args);
    let grads: [&dyn Poisoned; 3] = [&dx, &dw, &db];
    bad.expect("db without dw", r, invalid_argument("dbias"), &grads)?;
    let mut db2 = Guarded::<f32>::new(2 * o);
    let args = LinearBwArgs {
        dx: Some(dx.view_mut()),
        dw: Some(dw.view_mut()),
        dbias: Some(TensorMut::new(db2.slice_mut(), [o], [2]).expect("in the buffer")),
        ..bw_args(x_strided, w_packed, rows(&dy, t, o, 32))
    };
    let r = plan.run_bw(st, borrowed(&mut ws), args);
    let grads: [&dyn Poisoned; 3] = [&dx, &dw, &db2];
    bad.expect("dbias of stride 2", r, invalid_argument("dbias"), &grads)?;

    // A backward through ReLU without the saved pre-activation.
    let relu = LinearDescriptor::new(t, i, o)
        .with_epilogue(EpilogueKind::BiasRelu)
        .with_aux(true);
    let plan = selected(select(&relu))?;
    let mut ws = workspace(plan.workspace_size());
    let args = LinearBwArgs {
        dx: Some(dx.view_mut()),
        ..bw_args(rows(&x, t, i, i), rows(&w, o, i, i), rows(&dy, t, o, o))
    };
    let r = plan.run_bw(st, borrowed(&mut ws), args);
    bad.expect("no aux through ReLU", r, invalid_argument("aux"), &[&dx])?;

    // The skinny forward, on layers it does not suit.
    let wide = skinny_outputs();
    let skinny_refused = |e: &Error| matches!(e, Error::Unsupported { op: "linear", .. });
    let mut refuse = |what: String, desc: LinearDescriptor| -> Result<(), String> {
        let plan = selected(LinearPlan::<bf16>::select(st, &desc, &pref))?;
        bad.expect(&what, plan.with_skinny_forward(st), skinny_refused, &[])
    };
    for (t, i, o) in [(5, 296, wide), (1, 296, 40), (1, 297, wide)] {
        let desc = LinearDescriptor::new(t, i, o).with_epilogue(EpilogueKind::Bias);
        refuse(format!("skinny forward of {t} x {i} -> {o}"), desc)?;
    }
    let strided: [Pads; 3] = [[8, 0, 0, 0, 0, 0], [0, 8, 0, 0, 0, 0], [0, 0, 8, 0, 0, 0]];
    for t in [1, 4] {
        for e in [EpilogueKind::Bias, EpilogueKind::BiasGeluErf] {
            let base = LinearDescriptor::new(t, 296, wide)
                .with_epilogue(e)
                .with_aux(e.activation() != Activation::Identity);
            for pads in strided {
                let what = format!("skinny forward of {t} tokens, {e}, padded {pads:?}");
                refuse(what, padded(base.clone(), pads))?;
            }
        }
    }
    bad.done()
}

// ---------------------------------------------------------------------------
// int_gemm and fp8_gemm
// ---------------------------------------------------------------------------

/// Descriptors (a layout or epilogue the int8 kernels do not take, `lda`
/// not a multiple of 16); `scale` other than 1 with s32 output; `d` of the
/// wrong shape.
pub(super) fn int_bad_inputs() -> Result<usize, String> {
    let (st, pref, mut bad) = start();
    let (m, n, k) = (40, 24, 64);
    let int = |gemm: GemmDescriptor| IntGemmDescriptor { gemm };
    let rcr = GemmDescriptor::new(m, n, k, LayoutSku::Rcr);
    let rrr = int(GemmDescriptor::new(m, n, k, LayoutSku::Rrr));
    refused::<IntGemmPlan<i32>>(&mut bad, "layout rrr", &rrr)?;
    let bias = int(rcr.clone().with_epilogue(EpilogueKind::Bias));
    refused::<IntGemmPlan<f32>>(&mut bad, "a bias epilogue", &bias)?;
    let k72 = int(GemmDescriptor::new(m, n, 72, LayoutSku::Rcr));
    let select = |d: &IntGemmDescriptor| IntGemmPlan::<i32>::select(st, d, &pref);
    bad.expect("lda 72", select(&k72), invalid_descriptor("lda"), &[])?;

    let plan = selected(select(&int(rcr)))?;
    let mut ws = workspace(plan.workspace_size());
    let ab = filled::<i8>(m * k);
    let a = Mat::packed(m, k, MatrixOrder::RowMajor).view(ab.as_slice());
    let b = Mat::packed(k, n, MatrixOrder::ColMajor).view(ab.as_slice());
    let dm = Mat::packed(m, n, MatrixOrder::RowMajor);
    let mut d = MatOut::<i32>::new(dm);
    let args = IntGemmArgs {
        a,
        b,
        d: d.view_mut(),
        scale: 0.5,
    };
    let r = plan.run(st, borrowed(&mut ws), args);
    bad.expect("s32 output, scale 0.5", r, invalid_argument("scale"), &[&d])?;
    let args = IntGemmArgs {
        a,
        b,
        d: d.view_mut_as(Mat::packed(m, n - 8, MatrixOrder::RowMajor)),
        scale: 1.0,
    };
    let r = plan.run(st, borrowed(&mut ws), args);
    bad.expect("d 40 x 16", r, shape_mismatch("d"), &[&d])?;
    bad.done()
}

/// Dtype combinations (e5m2 x e5m2, f64 and fp8 outputs); shapes outside
/// cuBLASLt's fp8 rules; a scale inside a shared buffer; amax missing.
pub(super) fn fp8_bad_inputs() -> Result<usize, String> {
    let (st, pref, mut bad) = start();
    let (m, n, k) = (64, 48, 96);
    let fp8 = |gemm: GemmDescriptor| Fp8GemmDescriptor { gemm, amax: false };
    let d = fp8(GemmDescriptor::new(m, n, k, LayoutSku::Rcr));
    refused::<Fp8GemmPlan<F8E5M2, F8E5M2, bf16>>(&mut bad, "e5m2 x e5m2 -> bf16", &d)?;
    refused::<Fp8GemmPlan<F8E5M2, F8E5M2, f16>>(&mut bad, "e5m2 x e5m2 -> f16", &d)?;
    refused::<Fp8GemmPlan<F8E5M2, F8E5M2, f32>>(&mut bad, "e5m2 x e5m2 -> f32", &d)?;
    refused::<Fp8GemmPlan<F8E4M3, F8E4M3, f64>>(&mut bad, "e4m3 x e4m3 -> f64", &d)?;
    refused::<Fp8GemmPlan<F8E4M3, F8E4M3, F8E4M3>>(&mut bad, "e4m3 x e4m3 -> e4m3", &d)?;
    // The k = 72 case pads lda/ldb to 80 so it reaches the k rule (a
    // packed lda = 72 is already an InvalidDescriptor, as for int8).
    let padded_k = GemmDescriptor::new(64, 48, 72, LayoutSku::Rcr).with_ld(80, 80, 48, 48);
    for gemm in [
        GemmDescriptor::new(64, 40, 96, LayoutSku::Rcr),
        padded_k,
        GemmDescriptor::new(40, 48, 96, LayoutSku::Rcc),
        GemmDescriptor::new(64, 48, 96, LayoutSku::Rrr),
    ] {
        let what = format!("fp8 {}x{}x{} {}", gemm.m, gemm.n, gemm.k, gemm.layout);
        refused::<Fp8GemmPlan<F8E4M3, F8E4M3, bf16>>(&mut bad, &what, &fp8(gemm))?;
    }

    let with_amax = Fp8GemmDescriptor { amax: true, ..d };
    let plan = Fp8GemmPlan::<F8E4M3, F8E4M3, bf16>::select(st, &with_amax, &pref);
    let plan = selected(plan)?;
    let mut ws = workspace(plan.workspace_size());
    let (a, b) = (filled::<F8E4M3>(m * k), filled::<F8E4M3>(k * n));
    let a = Mat::packed(m, k, MatrixOrder::RowMajor).view(a.as_slice());
    let b = Mat::packed(k, n, MatrixOrder::ColMajor).view(b.as_slice());
    let mut out = MatOut::<bf16>::new(Mat::packed(m, n, MatrixOrder::RowMajor));
    let mut amax = Guarded::<f32>::new(1);
    // Two scales in one buffer: the second 4 bytes in.
    let shared = DeviceBuffer::<f32>::from_host(st, &[0.25, 0.125]).expect("scales");
    let scale =
        |r: std::ops::Range<usize>| vector(shared.as_slice().slice(r).expect("in the buffer"));
    let args = Fp8GemmArgs {
        a,
        b,
        d: out.view_mut(),
        scale_a: scale(0..1),
        scale_b: scale(1..2),
        amax: Some(vector_mut(amax.slice_mut())),
    };
    let r = plan.run(st, borrowed(&mut ws), args);
    let what = "scale_b 4 bytes into a buffer";
    bad.expect(what, r, invalid_argument("scale_b"), &[&out, &amax])?;
    let own = DeviceBuffer::<f32>::from_host(st, &[0.125]).expect("a scale");
    let args = Fp8GemmArgs {
        a,
        b,
        d: out.view_mut(),
        scale_a: scale(0..1),
        scale_b: vector(own.as_slice()),
        amax: None,
    };
    let r = plan.run(st, borrowed(&mut ws), args);
    bad.expect("no amax", r, invalid_argument("amax"), &[&out, &amax])?;
    bad.done()
}
