//! GPU tests of the mixed-dtype binary ops (`PromotedBinaryPlan`): each row
//! is one op, its dtypes the result dtypes (f32, f64), each checked over
//! the input pairs that promote to it, forward and backward against the
//! f64 reference of `BinaryOp` on the inputs' exact values.

use baracuda_kernels::reference::elementwise as reference;
use baracuda_kernels::*;
use half::{bf16, f16};

use crate::elementwise::{compare_specials, identical, specials_dy, values, Layout, Operand};
use crate::harness::*;
use crate::table::{CheckCase, Row};

/// `(a_shape, b_shape, layout)` of every sample: empty, size 1, tails,
/// long rows, the realistic large shape, bias and column broadcasts, a
/// scalar-like b (the split reduction), both broadcast, an empty output
/// with a broadcast input, transposed, strided output, misaligned.
fn samples() -> Vec<(Vec<usize>, Vec<usize>, Layout)> {
    vec![
        (vec![1, 0], vec![1, 0], Layout::Contiguous),
        (vec![1, 1], vec![1, 1], Layout::Contiguous),
        (vec![1, 7], vec![1, 7], Layout::Contiguous),
        (vec![3, 100003], vec![3, 100003], Layout::Contiguous),
        (vec![1024, 4099], vec![1024, 4099], Layout::Contiguous),
        (vec![257, 131], vec![1, 131], Layout::Contiguous),
        (vec![257, 1], vec![257, 131], Layout::Contiguous),
        (vec![4096, 513], vec![1, 1], Layout::Contiguous),
        (vec![0, 3], vec![1, 3], Layout::Contiguous),
        (vec![64, 33], vec![64, 33], Layout::Transposed),
        (vec![19, 37], vec![1, 37], Layout::StridedOut),
        (vec![5, 1029], vec![5, 1029], Layout::Misaligned),
        (vec![64, 1, 33], vec![1, 17, 33], Layout::Contiguous),
    ]
}

/// Every pair of input dtypes whose result is `kind`, run through `f`.
macro_rules! for_pairs {
    ($kind:expr, $f:ident ( $($arg:expr),* )) => {
        match $kind {
            ElementKind::F32 => {
                let mut n = $f::<bf16, f32>($($arg),*)?;
                n += $f::<f16, bf16>($($arg),*)?;
                n += $f::<f32, f16>($($arg),*)?;
                Ok(n)
            }
            ElementKind::F64 => {
                let mut n = $f::<f32, f64>($($arg),*)?;
                n += $f::<f64, bf16>($($arg),*)?;
                n += $f::<f16, f64>($($arg),*)?;
                Ok(n)
            }
            other => Err(format!("no promoted pair gives {other}")),
        }
    };
}

/// Forward and backward of `op` over every sample and the special values,
/// for every input pair whose result dtype is `kind`.
pub fn check_promoted(op: BinaryOp, kind: ElementKind) -> Result<usize, String> {
    for_pairs!(kind, check_pair(op))
}

fn check_pair<A: Promote<B>, B: Element>(op: BinaryOp) -> Result<usize, String> {
    let mut rng = Rng::new(0x9B ^ (u64::from(op.index()) << 8) ^ ((A::KIND as u64) << 20));
    let out_elems = |(a, b, _): &(Vec<usize>, Vec<usize>, Layout)| {
        a.iter().zip(b).map(|(x, y)| *x.max(y)).product()
    };
    let mut n = 0;
    for (a, b, layout) in small_samples(samples(), out_elems) {
        match a.len() {
            2 => check_sample::<A, B, 2>(op, &a, &b, layout, &mut rng)?,
            3 => check_sample::<A, B, 3>(op, &a, &b, layout, &mut rng)?,
            r => return Err(format!("no sample runner for rank {r}")),
        }
        n += 1;
    }
    check_specials::<A, B>(op, &mut rng)?;
    Ok(n + 2)
}

/// The gradient tolerance: the gradient's own dtype's bound, plus
/// `2 u sqrt(n) sum|terms|` for sums of n terms in the accumulator.
fn grad_slack(kind: ElementKind, abs: &[f64], n_out: usize, n_in: usize) -> Vec<f64> {
    let n_red = (n_out / n_in.max(1)).max(1) as f64;
    abs.iter()
        .map(|s| 2.0 * acc_roundoff(kind) * n_red.sqrt() * s)
        .collect()
}

#[allow(clippy::too_many_lines)] // one sample end to end: fw, bw, checks
fn check_sample<A: Promote<B>, B: Element, const N: usize>(
    op: BinaryOp,
    a_shape: &[usize],
    b_shape: &[usize],
    layout: Layout,
    rng: &mut Rng,
) -> Result<(), String> {
    type O<A, B> = <A as Promote<B>>::Out;
    let g = gpu();
    let okind = O::<A, B>::KIND;
    let what = format!(
        "{} {}+{}->{okind} {a_shape:?}x{b_shape:?} {layout:?}",
        op.name(),
        A::KIND,
        B::KIND
    );
    let desc = PromotedBinaryDescriptor {
        op,
        a_element: A::KIND,
        b_element: B::KIND,
        a_shape: arr::<N>(a_shape),
        b_shape: arr::<N>(b_shape),
    };
    let out_shape = desc.out_shape().map_err(|e| e.to_string())?.to_vec();
    let na: usize = a_shape.iter().product();
    let nb: usize = b_shape.iter().product();
    let off = usize::from(layout == Layout::Misaligned);
    let (abuf, ahost) = upload::<A>(&values(op, rng, na + off, false));
    let (bbuf, bhost) = upload::<B>(&values(op, rng, nb + off, true));
    let a = Operand {
        buf: abuf,
        offset: off,
        strides: if layout == Layout::Transposed {
            vec![1, a_shape[0]]
        } else {
            contiguous(a_shape)
        },
        host: ahost,
    };
    let b = Operand {
        buf: bbuf,
        offset: off,
        strides: contiguous(b_shape),
        host: bhost,
    };
    let (av, bv) = (a.logical(a_shape), b.logical(b_shape));

    let plan = PromotedBinaryPlan::<A, B, N>::select(&g.stream, &desc, &PlanPreference::default())
        .map_err(|e| format!("{what}: {e}"))?;
    if plan.out_element() != okind || desc.out_element().ok() != Some(okind) {
        return Err(format!("{what}: out_element {}", plan.out_element()));
    }
    let mut out = Operand::<O<A, B>>::output(&out_shape, layout);
    plan.run(
        &g.stream,
        Workspace::None,
        PromotedBinaryArgs {
            a: a.view(a_shape),
            b: b.view(b_shape),
            out: out.view_mut(&out_shape),
        },
    )
    .map_err(|e| format!("{what}: {e}"))?;
    let got = out.result(&what, &out_shape)?;
    if op == BinaryOp::Nextafter {
        // one step on the result type's grid: exact
        let ab = reference::broadcast(&av, a_shape, &out_shape);
        let bb = reference::broadcast(&bv, b_shape, &out_shape);
        let want: Vec<f64> = ab
            .iter()
            .zip(&bb)
            .map(|(&x, &y)| reference::nextafter_in(okind, x, y))
            .collect();
        identical(&format!("{what} fw"), &got, &want)?;
    } else {
        let want = reference::binary(op, &av, a_shape, &bv, b_shape);
        compare(
            &format!("{what} fw"),
            &got,
            &want,
            pointwise_tol(okind),
            None,
        )?;
    }

    let dy = operand_if(op.has_backward(), || {
        Operand::<O<A, B>>::input(rng, &out_shape, layout, false, -1.0, 1.0)
    });
    if !op.has_backward() {
        let mut da = not_an_operand(|| Operand::<A>::output(a_shape, Layout::Contiguous));
        let r = plan.run_bw(
            &g.stream,
            Workspace::None,
            PromotedBinaryBwArgs {
                a: a.view(a_shape),
                b: b.view(b_shape),
                dy: dy.view(&out_shape),
                da: Some(da.view_mut(a_shape)),
                db: None,
            },
        );
        return match r {
            Err(Error::Unsupported { .. }) => da.result(&what, &[0]).map(|_| ()),
            other => Err(format!("{what} bw: expected Unsupported, got {other:?}")),
        };
    }
    let grad_layout = if layout == Layout::StridedOut {
        Layout::StridedOut
    } else {
        Layout::Contiguous
    };
    let mut da = Operand::<A>::output(a_shape, grad_layout);
    let mut db = Operand::<B>::output(b_shape, grad_layout);
    let mut ws = workspace(plan.bw_workspace_size(Grad::A | Grad::B));
    plan.run_bw(
        &g.stream,
        Workspace::Borrowed(ws.as_slice_mut()),
        PromotedBinaryBwArgs {
            a: a.view(a_shape),
            b: b.view(b_shape),
            dy: dy.view(&out_shape),
            da: Some(da.view_mut(a_shape)),
            db: Some(db.view_mut(b_shape)),
        },
    )
    .map_err(|e| format!("{what} bw: {e}"))?;
    let grads = reference::binary_backward(op, &av, a_shape, &bv, b_shape, &dy.logical(&out_shape));
    let n_out: usize = out_shape.iter().product();
    let ea = grad_slack(okind, &grads.da_abs, n_out, na);
    let eb = grad_slack(okind, &grads.db_abs, n_out, nb);
    compare(
        &format!("{what} da"),
        &da.result(&what, a_shape)?,
        &grads.da,
        pointwise_tol(A::KIND),
        Some(&ea),
    )?;
    compare(
        &format!("{what} db"),
        &db.result(&what, b_shape)?,
        &grads.db,
        pointwise_tol(B::KIND),
        Some(&eb),
    )
}

/// Forward and backward over every pair of special values (±0, NaN, ±inf,
/// 1, -1, tiny, large, 2.5, -0.5), at offset 0 (the vectorised kernel and
/// its tail) and 1 (the strided kernel): NaN where the reference has NaN,
/// the same infinities, the sign of an exact zero forward result, the
/// pointwise bound elsewhere; `nextafter` exactly.
fn check_specials<A: Promote<B>, B: Element>(op: BinaryOp, rng: &mut Rng) -> Result<(), String> {
    type O<A, B> = <A as Promote<B>>::Out;
    let g = gpu();
    let sp = [
        0.0,
        -0.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1.0,
        -1.0,
        1e-5,
        100.0,
        2.5,
        -0.5,
    ];
    let (av, bv): (Vec<f64>, Vec<f64>) = sp
        .iter()
        .flat_map(|&x| sp.iter().map(move |&y| (x, y)))
        .unzip();
    let n = av.len();
    let desc = PromotedBinaryDescriptor {
        op,
        a_element: A::KIND,
        b_element: B::KIND,
        a_shape: [n],
        b_shape: [n],
    };
    let plan = PromotedBinaryPlan::<A, B, 1>::select(&g.stream, &desc, &PlanPreference::default())
        .map_err(|e| e.to_string())?;
    let okind = O::<A, B>::KIND;
    for offset in [0usize, 1] {
        let pad = |v: &[f64]| {
            let mut p = vec![0.5; offset];
            p.extend(v);
            p
        };
        let (ab, ah) = upload::<A>(&pad(&av));
        let (bb, bh) = upload::<B>(&pad(&bv));
        let (dyb, dyh) = upload::<O<A, B>>(&specials_dy(rng, n + offset));
        let (a_s, b_s, dy_s) = (&ah[offset..], &bh[offset..], &dyh[offset..]);
        let what = format!(
            "{} {}+{} specials offset {offset}",
            op.name(),
            A::KIND,
            B::KIND
        );
        fn at<T: Element>(
            b: &DeviceBuffer<T>,
            offset: usize,
            n: usize,
        ) -> Result<TensorRef<'_, T, 1>, String> {
            let s = b.as_slice().slice(offset..offset + n).ok_or("slice")?;
            TensorRef::contiguous(s, [n]).map_err(|e| e.to_string())
        }
        fn at_mut<T: Element>(
            b: &mut DeviceBuffer<T>,
            offset: usize,
            n: usize,
        ) -> Result<TensorMut<'_, T, 1>, String> {
            let s = b.as_slice_mut().split_at(offset).ok_or("split")?.1;
            TensorMut::contiguous(s, [n]).map_err(|e| e.to_string())
        }
        let mut out = poisoned::<O<A, B>>(n + offset);
        plan.run(
            &g.stream,
            Workspace::None,
            PromotedBinaryArgs {
                a: at(&ab, offset, n)?,
                b: at(&bb, offset, n)?,
                out: at_mut(&mut out, offset, n)?,
            },
        )
        .map_err(|e| format!("{what}: {e}"))?;
        let got_out = download(&out)[offset..].to_vec();
        if op == BinaryOp::Nextafter {
            let want: Vec<f64> = a_s
                .iter()
                .zip(b_s)
                .map(|(&x, &y)| reference::nextafter_in(okind, x, y))
                .collect();
            identical(&format!("{what} fw"), &got_out, &want)?;
            continue;
        }
        let exact = reference::binary(op, a_s, &[n], b_s, &[n]);
        compare_specials(
            &format!("{what} fw"),
            a_s,
            &got_out,
            &round_to(okind, &exact),
            pointwise_tol(okind),
            Some(&exact),
        )?;
        let mut da = poisoned::<A>(n + offset);
        let mut db = poisoned::<B>(n + offset);
        plan.run_bw(
            &g.stream,
            Workspace::None,
            PromotedBinaryBwArgs {
                a: at(&ab, offset, n)?,
                b: at(&bb, offset, n)?,
                dy: at(&dyb, offset, n)?,
                da: Some(at_mut(&mut da, offset, n)?),
                db: Some(at_mut(&mut db, offset, n)?),
            },
        )
        .map_err(|e| format!("{what}: {e}"))?;
        let grads = reference::binary_backward(op, a_s, &[n], b_s, &[n], dy_s);
        // the gradient in the accumulator, rounded to the result type's
        // accumulator and then to the input's type
        let r = |k: ElementKind, v: &[f64]| round_to(k, &round_to(okind, v));
        compare_specials(
            &format!("{what} da"),
            a_s,
            &download(&da)[offset..],
            &r(A::KIND, &grads.da),
            pointwise_tol(A::KIND),
            None,
        )?;
        compare_specials(
            &format!("{what} db"),
            a_s,
            &download(&db)[offset..],
            &r(B::KIND, &grads.db),
            pointwise_tol(B::KIND),
            None,
        )?;
    }
    Ok(())
}

/// `kind` as a result dtype no pair produces, or any other dtype: a
/// same-dtype pair of it has no promoted result (`Unsupported`), and
/// neither has it with f32 unless it is a float.
pub fn promoted_unsupported(kind: ElementKind) -> Result<(), String> {
    let desc = PromotedBinaryDescriptor {
        op: BinaryOp::Add,
        a_element: kind,
        b_element: kind,
        a_shape: [4],
        b_shape: [4],
    };
    expect_err("promoted same dtype", desc.out_element(), unsupported)?;
    if !FLOATS.contains(&kind) {
        let mixed = PromotedBinaryDescriptor {
            b_element: ElementKind::F32,
            ..desc
        };
        expect_err("promoted non-float", mixed.out_element(), unsupported)?;
    }
    Ok(())
}

/// Each bad input returns its `Error` and writes nothing.
#[allow(clippy::too_many_lines)] // one list of cases
pub fn promoted_bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let s = &g.stream;
    let pref = PlanPreference::default();
    let desc = PromotedBinaryDescriptor {
        op: BinaryOp::Mul,
        a_element: ElementKind::Bf16,
        b_element: ElementKind::F32,
        a_shape: [4096, 513],
        b_shape: [1, 1],
    };
    // descriptor dtypes that are not the plan's
    let wrong_a = PromotedBinaryDescriptor {
        a_element: ElementKind::F16,
        ..desc
    };
    expect_err(
        "a dtype",
        PromotedBinaryPlan::<bf16, f32, 2>::select(s, &wrong_a, &pref),
        |e| {
            matches!(
                e,
                Error::DtypeMismatch {
                    arg: "desc.a_element",
                    ..
                }
            )
        },
    )?;
    let wrong_b = PromotedBinaryDescriptor {
        b_element: ElementKind::F64,
        ..desc
    };
    expect_err(
        "b dtype",
        PromotedBinaryPlan::<bf16, f32, 2>::select(s, &wrong_b, &pref),
        |e| {
            matches!(
                e,
                Error::DtypeMismatch {
                    arg: "desc.b_element",
                    ..
                }
            )
        },
    )?;
    // shapes that do not broadcast
    let bad = PromotedBinaryDescriptor {
        a_shape: [3, 1],
        b_shape: [4, 1],
        ..desc
    };
    expect_err(
        "broadcast",
        PromotedBinaryPlan::<bf16, f32, 2>::select(s, &bad, &pref),
        |e| matches!(e, Error::BroadcastMismatch { .. }),
    )?;
    // a forced backend other than ours
    let forced = PlanPreference::default().with_backend(BackendKind::Cudnn);
    expect_err(
        "backend",
        PromotedBinaryPlan::<bf16, f32, 2>::select(s, &desc, &forced),
        |e| matches!(e, Error::PreferenceRejected { .. }),
    )?;
    let plan =
        PromotedBinaryPlan::<bf16, f32, 2>::select(s, &desc, &pref).map_err(|e| e.to_string())?;
    let n = 4096 * 513;
    let (a, _) = upload::<bf16>(&Rng::new(3).vec(n, -1.0, 1.0));
    let (b, _) = upload::<f32>(&[0.5]);
    let (dy, _) = upload::<f32>(&Rng::new(4).vec(n, -1.0, 1.0));
    let av = || TensorRef::contiguous(a.as_slice(), [4096, 513]).unwrap();
    let bv = || TensorRef::contiguous(b.as_slice(), [1, 1]).unwrap();
    // output of the wrong shape
    let mut out = poisoned::<f32>(n);
    let r = plan.run(
        s,
        Workspace::None,
        PromotedBinaryArgs {
            a: av(),
            b: bv(),
            out: TensorMut::contiguous(out.as_slice_mut(), [513, 4096]).unwrap(),
        },
    );
    expect_err("out shape", r, shape_mismatch("out"))?;
    check_untouched::<f32>("promoted bad out", &download(&out), &[])?;
    // a of the wrong shape
    let r = plan.run(
        s,
        Workspace::None,
        PromotedBinaryArgs {
            a: TensorRef::contiguous(a.as_slice(), [513, 4096]).unwrap(),
            b: bv(),
            out: TensorMut::contiguous(out.as_slice_mut(), [4096, 513]).unwrap(),
        },
    );
    expect_err("a shape", r, shape_mismatch("a"))?;
    check_untouched::<f32>("promoted bad a", &download(&out), &[])?;
    // out overlapping b (of out's dtype, not the same view)
    let ob = poisoned::<f32>(n + 1);
    let base = ob.as_slice().addr();
    // SAFETY: both views lie inside `ob`, which outlives them; run rejects
    // the overlap before it enqueues anything.
    let (b_alias, out_alias) = unsafe {
        (
            DeviceSlice::<f32>::from_raw_parts(base + 4, 1, g.ctx.id()),
            DeviceSliceMut::<f32>::from_raw_parts(base, n, g.ctx.id()),
        )
    };
    let r = plan.run(
        s,
        Workspace::None,
        PromotedBinaryArgs {
            a: av(),
            b: TensorRef::contiguous(b_alias, [1, 1]).unwrap(),
            out: TensorMut::contiguous(out_alias, [4096, 513]).unwrap(),
        },
    );
    expect_err("out over b", r, invalid_argument("out"))?;
    check_untouched::<f32>("promoted out over b", &download(&ob), &[])?;
    // backward: workspace too small (the 2M-term split reduction of db)
    let ws_bytes = plan.bw_workspace_size(Grad::B.into());
    if ws_bytes == 0 {
        return Err("a 2M-term reduction should use split partials".into());
    }
    let mut db = poisoned::<f32>(1);
    let r = plan.run_bw(
        s,
        Workspace::None,
        PromotedBinaryBwArgs {
            a: av(),
            b: bv(),
            dy: TensorRef::contiguous(dy.as_slice(), [4096, 513]).unwrap(),
            da: None,
            db: Some(TensorMut::contiguous(db.as_slice_mut(), [1, 1]).unwrap()),
        },
    );
    expect_err("workspace", r, workspace_too_small)?;
    check_untouched::<f32>("promoted bw bad workspace", &download(&db), &[])?;
    // dy of the wrong shape
    let mut da = poisoned::<bf16>(n);
    let r = plan.run_bw(
        s,
        Workspace::None,
        PromotedBinaryBwArgs {
            a: av(),
            b: bv(),
            dy: TensorRef::contiguous(dy.as_slice(), [513, 4096]).unwrap(),
            da: Some(TensorMut::contiguous(da.as_slice_mut(), [4096, 513]).unwrap()),
            db: None,
        },
    );
    expect_err("dy shape", r, shape_mismatch("dy"))?;
    check_untouched::<bf16>("promoted bw bad dy", &download(&da), &[])?;
    // a gradient over an operand: da written over a (the same view)
    let a2 = poisoned::<bf16>(n);
    let base = a2.as_slice().addr();
    // SAFETY: both views are `a2`, which outlives them; run_bw rejects the
    // overlap before it enqueues anything.
    let (a_alias, da_alias) = unsafe {
        (
            DeviceSlice::<bf16>::from_raw_parts(base, n, g.ctx.id()),
            DeviceSliceMut::<bf16>::from_raw_parts(base, n, g.ctx.id()),
        )
    };
    let r = plan.run_bw(
        s,
        Workspace::None,
        PromotedBinaryBwArgs {
            a: TensorRef::contiguous(a_alias, [4096, 513]).unwrap(),
            b: bv(),
            dy: TensorRef::contiguous(dy.as_slice(), [4096, 513]).unwrap(),
            da: Some(TensorMut::contiguous(da_alias, [4096, 513]).unwrap()),
            db: None,
        },
    );
    expect_err("da over a", r, invalid_argument("da"))?;
    check_untouched::<bf16>("promoted da over a", &download(&a2), &[])?;
    // no backward for nextafter
    let next = PromotedBinaryDescriptor {
        op: BinaryOp::Nextafter,
        ..desc
    };
    let plan =
        PromotedBinaryPlan::<bf16, f32, 2>::select(s, &next, &pref).map_err(|e| e.to_string())?;
    if plan.grads() != Grads::NONE {
        return Err("nextafter claims gradients".into());
    }
    let r = plan.run_bw(
        s,
        Workspace::None,
        PromotedBinaryBwArgs {
            a: av(),
            b: bv(),
            dy: TensorRef::contiguous(dy.as_slice(), [4096, 513]).unwrap(),
            da: Some(TensorMut::contiguous(da.as_slice_mut(), [4096, 513]).unwrap()),
            db: None,
        },
    );
    expect_err("nextafter bw", r, unsupported)?;
    check_untouched::<bf16>("promoted nextafter bw", &download(&da), &[])?;
    Ok(10)
}

/// A row of one op: its check over the pairs of each result dtype.
macro_rules! promoted_row {
    ($name:literal, $op:expr) => {
        &CheckCase {
            name: $name,
            dtypes: &[ElementKind::F32, ElementKind::F64],
            check: |k| check_promoted($op, k),
            bad_inputs: promoted_bad_inputs,
            unsupported: promoted_unsupported,
        }
    };
}

/// The mixed-dtype binary rows: the arithmetic ops, a NaN-propagating
/// comparison, a transcendental, an op with a parameter, and one without
/// a backward.
pub(crate) static ROWS: &[&dyn Row] = &[
    promoted_row!("binary_promoted_add", BinaryOp::Add),
    promoted_row!("binary_promoted_sub", BinaryOp::Sub),
    promoted_row!("binary_promoted_mul", BinaryOp::Mul),
    promoted_row!("binary_promoted_div", BinaryOp::Div),
    promoted_row!("binary_promoted_maximum", BinaryOp::Maximum),
    promoted_row!("binary_promoted_pow", BinaryOp::Pow),
    promoted_row!(
        "binary_promoted_add_alpha",
        BinaryOp::AddAlpha { alpha: 2.5 }
    ),
    promoted_row!("binary_promoted_nextafter", BinaryOp::Nextafter),
];

crate::table_tests!(
    ROWS;
    binary_promoted_add,
    binary_promoted_sub,
    binary_promoted_mul,
    binary_promoted_div,
    binary_promoted_maximum,
    binary_promoted_pow,
    binary_promoted_add_alpha,
    binary_promoted_nextafter,
);
