//! GPU tests of the ternary ops (`TernaryPlan`: lerp, addcmul, addcdiv,
//! clamp; `WherePlan`): the table rows' checks, samples and bad inputs.

use baracuda_kernels::reference::elementwise as reference;
use baracuda_kernels::*;

use crate::elementwise::{compare_specials, Layout, Operand};
use crate::harness::*;

/// `([a, b, c] shapes, layout)` of every ternary sample: empty, size 1,
/// tails, one realistic large shape, bias-like and column broadcasts, a
/// scalar-like input (one output summing 2M terms: the split reduction),
/// empty output with broadcast inputs (their gradients must be zeros),
/// transposed, strided and misaligned operands, rank 3 with every input
/// broadcast, rank 8.
fn ternary_samples() -> Vec<([Vec<usize>; 3], Layout)> {
    let same = |s: &[usize]| [s.to_vec(), s.to_vec(), s.to_vec()];
    vec![
        (same(&[1, 0]), Layout::Contiguous),
        (same(&[1, 1]), Layout::Contiguous),
        (same(&[1, 7]), Layout::Contiguous),
        (same(&[3, 1000003]), Layout::Contiguous),
        (same(&[1024, 4099]), Layout::Contiguous),
        (
            [vec![257, 131], vec![1, 131], vec![257, 1]],
            Layout::Contiguous,
        ),
        (
            [vec![4096, 513], vec![4096, 513], vec![1, 1]],
            Layout::Contiguous,
        ),
        (
            [vec![1, 1], vec![4096, 1024], vec![1, 1024]],
            Layout::Contiguous,
        ),
        ([vec![0, 3], vec![1, 3], vec![0, 1]], Layout::Contiguous),
        (same(&[64, 33]), Layout::Transposed),
        (
            [vec![19, 37], vec![1, 37], vec![19, 37]],
            Layout::StridedOut,
        ),
        (same(&[5, 1029]), Layout::Misaligned),
        (
            [vec![64, 1, 33], vec![1, 17, 33], vec![64, 17, 1]],
            Layout::Contiguous,
        ),
        (
            [
                vec![2, 3, 1, 2, 3, 2, 1, 5],
                vec![2, 1, 4, 2, 1, 2, 3, 5],
                vec![1, 3, 4, 1, 3, 2, 3, 1],
            ],
            Layout::Contiguous,
        ),
    ]
}

/// Inputs of `op`'s operand `which` (0: a, 1: b, 2: c; `None`: where's
/// condition): lerp weights in [-1, 2) (both forms); addcdiv's divisor
/// away from 0; clamp's on a coarse grid (ties with the bounds, and
/// min > max where they cross); conditions 0 or 1.
fn ternary_values(op: Option<TernaryOp>, which: usize, rng: &mut Rng, n: usize) -> Vec<f64> {
    match (op, which) {
        (None, 0) => (0..n).map(|_| (rng.next_u64() & 1) as f64).collect(),
        (Some(TernaryOp::Lerp), 2) => rng.vec(n, -1.0, 2.0),
        (Some(TernaryOp::Addcdiv { .. }), 2) => rng
            .vec(n, 0.5, 2.0)
            .into_iter()
            .map(|v| if rng.next_u64() & 1 == 0 { v } else { -v })
            .collect(),
        (Some(TernaryOp::Clamp), w) => {
            let (lo, hi) = [(-8.0, 8.0), (-8.0, 2.0), (-2.0, 8.0)][w];
            (0..n).map(|_| rng.uniform(lo, hi).floor() / 4.0).collect()
        }
        _ => rng.vec(n, -2.0, 2.0),
    }
}

/// An input operand of `shape` holding `values` (one extra leading element
/// when misaligned), column-major when `transposed` (rank 2).
fn operand<T: Element>(
    values: &[f64],
    shape: &[usize],
    layout: Layout,
    transposed: bool,
) -> Operand<T> {
    let offset = usize::from(layout == Layout::Misaligned);
    let (buf, host) = upload::<T>(values);
    let strides = if transposed && shape.len() == 2 {
        vec![1, shape[0]]
    } else {
        contiguous(shape)
    };
    Operand {
        buf,
        offset,
        strides,
        host,
    }
}

/// The layout of the gradients of a sample laid out as `layout`.
pub(crate) fn grad_layout(layout: Layout) -> Layout {
    if layout == Layout::StridedOut {
        Layout::StridedOut
    } else {
        Layout::Contiguous
    }
}

/// Allowance of a gradient reduced from `n_out` terms to `n_in` elements:
/// `2 u sqrt(n) sum|terms|` in the accumulator.
fn slack(kind: ElementKind, abs: &[f64], n_out: usize, n_in: usize) -> Vec<f64> {
    let n_red = (n_out / n_in.max(1)).max(1) as f64;
    abs.iter()
        .map(|s| 2.0 * acc_roundoff(kind) * n_red.sqrt() * s)
        .collect()
}

/// A poisoned workspace of `bytes` (at least one, so that a plan needing
/// none still checks the one it is lent).
fn lend(ws: &mut DeviceBuffer<u8>, bytes: usize) -> Workspace<'_> {
    debug_assert!(ws.len() >= bytes);
    Workspace::Borrowed(ws.as_slice_mut())
}

#[allow(clippy::too_many_lines)] // one sample end to end: fw, bw, checks
fn check_ternary_sample<T: Element, const N: usize>(
    op: TernaryOp,
    shapes: &[Vec<usize>; 3],
    layout: Layout,
    rng: &mut Rng,
) -> Result<(), String> {
    let g = gpu();
    let what = format!("{} {} {shapes:?} {layout:?}", op.name(), T::KIND);
    let desc = TernaryDescriptor {
        op,
        element: T::KIND,
        a_shape: arr::<N>(&shapes[0]),
        b_shape: arr::<N>(&shapes[1]),
        c_shape: arr::<N>(&shapes[2]),
    };
    let out_shape = desc.out_shape().map_err(|e| e.to_string())?.to_vec();
    let off = usize::from(layout == Layout::Misaligned);
    let ins: Vec<Operand<T>> = (0..3)
        .map(|k| {
            let n: usize = shapes[k].iter().product();
            let v = ternary_values(Some(op), k, rng, n + off);
            operand(
                &v,
                &shapes[k],
                layout,
                k == 0 && layout == Layout::Transposed,
            )
        })
        .collect();
    let logical: Vec<Vec<f64>> = (0..3).map(|k| ins[k].logical(&shapes[k])).collect();
    let plan = select::<TernaryPlan<T, N>>(&desc, &PlanPreference::default())?;
    let mut out = Operand::<T>::output(&out_shape, layout);
    plan.run(
        &g.stream,
        Workspace::None,
        TernaryArgs {
            a: ins[0].view(&shapes[0]),
            b: ins[1].view(&shapes[1]),
            c: ins[2].view(&shapes[2]),
            out: out.view_mut(&out_shape),
        },
    )
    .map_err(|e| format!("{what}: {e}"))?;
    let refs = |k: usize| (logical[k].as_slice(), shapes[k].as_slice());
    let want = reference::ternary(op, [refs(0), refs(1), refs(2)]);
    let tol = pointwise_tol(T::KIND);
    compare(
        &format!("{what} fw"),
        &out.result(&what, &out_shape)?,
        &want,
        tol,
        None,
    )?;

    let dy = Operand::<T>::input(rng, &out_shape, layout, false, -1.0, 1.0);
    let mut grads: Vec<Operand<T>> = (0..3)
        .map(|k| Operand::<T>::output(&shapes[k], grad_layout(layout)))
        .collect();
    let bytes = plan.bw_workspace_size(Grad::A | Grad::B | Grad::C);
    let mut ws = workspace(bytes);
    {
        let [ga, gb, gc] = &mut grads[..] else {
            return Err("three gradients".into());
        };
        plan.run_bw(
            &g.stream,
            lend(&mut ws, bytes),
            TernaryBwArgs {
                a: ins[0].view(&shapes[0]),
                b: ins[1].view(&shapes[1]),
                c: ins[2].view(&shapes[2]),
                dy: dy.view(&out_shape),
                da: Some(ga.view_mut(&shapes[0])),
                db: Some(gb.view_mut(&shapes[1])),
                dc: Some(gc.view_mut(&shapes[2])),
            },
        )
        .map_err(|e| format!("{what} bw: {e}"))?;
    }
    let want =
        reference::ternary_backward(op, [refs(0), refs(1), refs(2)], &dy.logical(&out_shape));
    let n_out: usize = out_shape.iter().product();
    for (k, name) in ["da", "db", "dc"].iter().enumerate() {
        let n_in: usize = shapes[k].iter().product();
        let extra = slack(T::KIND, &want.abs[k], n_out, n_in);
        compare(
            &format!("{what} {name}"),
            &grads[k].result(&what, &shapes[k])?,
            &want.grads[k],
            tol,
            Some(&extra),
        )?;
    }
    Ok(())
}

/// Special values of the ternary ops (every one exact in every dtype, and
/// no product of three of them overflows f16, so f32 arithmetic and the
/// f64 reference meet the same infinities).
const SPECIALS: [f64; 10] = [
    0.0,
    -0.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1.0,
    -1.0,
    0.5,
    -0.5,
    3.0,
];

/// Every triple of [`SPECIALS`] (1000 elements: the vectorised kernel and
/// its tail), forward and backward, contiguous and same-shaped: NaN where
/// the reference (rounded to `T`) has NaN, the same infinities, the bound
/// elsewhere.
fn check_ternary_specials<T: Element>(op: TernaryOp, rng: &mut Rng) -> Result<(), String> {
    let g = gpu();
    let k = SPECIALS.len();
    let n = k * k * k;
    let pick = |i: usize, axis: u32| SPECIALS[i / k.pow(axis) % k];
    let v: Vec<Vec<f64>> = (0..3)
        .map(|ax| (0..n).map(|i| pick(i, ax)).collect())
        .collect();
    let desc = TernaryDescriptor {
        op,
        element: T::KIND,
        a_shape: [n],
        b_shape: [n],
        c_shape: [n],
    };
    let plan = select::<TernaryPlan<T, 1>>(&desc, &PlanPreference::default())?;
    let (a, av) = upload::<T>(&v[0]);
    let (b, bv) = upload::<T>(&v[1]);
    let (c, cv) = upload::<T>(&v[2]);
    let (dy, dyv) = upload::<T>(&rng.vec(n, -1.0, 1.0));
    fn view<T: Element>(buf: &DeviceBuffer<T>, n: usize) -> TensorRef<'_, T, 1> {
        TensorRef::contiguous(buf.as_slice(), [n]).unwrap()
    }
    let mut outs: Vec<DeviceBuffer<T>> = (0..4).map(|_| poisoned::<T>(n)).collect();
    let what = format!("{} {} specials", op.name(), T::KIND);
    {
        let [out, da, db, dc] = &mut outs[..] else {
            return Err("four outputs".into());
        };
        let out = TensorMut::contiguous(out.as_slice_mut(), [n]).unwrap();
        let args = TernaryArgs {
            a: view(&a, n),
            b: view(&b, n),
            c: view(&c, n),
            out,
        };
        plan.run(&g.stream, Workspace::None, args)
            .map_err(|e| format!("{what}: {e}"))?;
        let grads = TernaryBwArgs {
            a: view(&a, n),
            b: view(&b, n),
            c: view(&c, n),
            dy: view(&dy, n),
            da: Some(TensorMut::contiguous(da.as_slice_mut(), [n]).unwrap()),
            db: Some(TensorMut::contiguous(db.as_slice_mut(), [n]).unwrap()),
            dc: Some(TensorMut::contiguous(dc.as_slice_mut(), [n]).unwrap()),
        };
        plan.run_bw(&g.stream, Workspace::None, grads)
            .map_err(|e| format!("{what} bw: {e}"))?;
    }
    let shape: &[usize] = &[n];
    let ins = [(&av[..], shape), (&bv[..], shape), (&cv[..], shape)];
    let fw = reference::ternary(op, ins);
    let bw = reference::ternary_backward(op, ins, &dyv);
    let tol = pointwise_tol(T::KIND);
    let wants = [&fw, &bw.grads[0], &bw.grads[1], &bw.grads[2]];
    for ((name, got), want) in ["out", "da", "db", "dc"].iter().zip(&outs).zip(wants) {
        let want = round_to(T::KIND, want);
        compare_specials(
            &format!("{what} {name}"),
            &av,
            &download(got),
            &want,
            tol,
            None,
        )?;
    }
    Ok(())
}

/// Forward and backward of `op` over every sample and the special values,
/// plus a backward asking for `dc` alone with a broadcast `c`.
pub fn check_ternary<T: Element>(op: TernaryOp) -> Result<usize, String> {
    let mut rng = Rng::new(0x7E ^ (u64::from(op.index()) << 8));
    let mut n = 0;
    let out_elems = |(s, _): &([Vec<usize>; 3], Layout)| -> usize {
        (0..s[0].len())
            .map(|d| s.iter().map(|v| v[d]).max().unwrap_or(1))
            .product()
    };
    for (shapes, layout) in small_samples(ternary_samples(), out_elems) {
        match shapes[0].len() {
            2 => check_ternary_sample::<T, 2>(op, &shapes, layout, &mut rng)?,
            3 => check_ternary_sample::<T, 3>(op, &shapes, layout, &mut rng)?,
            8 => check_ternary_sample::<T, 8>(op, &shapes, layout, &mut rng)?,
            r => return Err(format!("no sample runner for rank {r}")),
        }
        n += 1;
    }
    check_ternary_specials::<T>(op, &mut rng)?;
    check_ternary_in_place::<T>(op, &mut rng)?;
    // Only dc asked for, c broadcast: its partials start the workspace.
    let g = gpu();
    let desc = TernaryDescriptor {
        op,
        element: T::KIND,
        a_shape: [33, 64],
        b_shape: [33, 64],
        c_shape: [33, 1],
    };
    let plan = select::<TernaryPlan<T, 2>>(&desc, &PlanPreference::default())?;
    let v: Vec<Vec<f64>> = [33 * 64, 33 * 64, 33]
        .iter()
        .enumerate()
        .map(|(k, &len)| ternary_values(Some(op), k, &mut rng, len))
        .collect();
    let (a, av) = upload::<T>(&v[0]);
    let (b, bv) = upload::<T>(&v[1]);
    let (c, cv) = upload::<T>(&v[2]);
    let (dy, dyv) = upload::<T>(&rng.vec(33 * 64, -1.0, 1.0));
    let mut dc = poisoned::<T>(33);
    let bytes = plan.bw_workspace_size(Grad::C.into());
    let mut ws = workspace(bytes);
    plan.run_bw(
        &g.stream,
        lend(&mut ws, bytes),
        TernaryBwArgs {
            a: TensorRef::contiguous(a.as_slice(), [33, 64]).unwrap(),
            b: TensorRef::contiguous(b.as_slice(), [33, 64]).unwrap(),
            c: TensorRef::contiguous(c.as_slice(), [33, 1]).unwrap(),
            dy: TensorRef::contiguous(dy.as_slice(), [33, 64]).unwrap(),
            da: None,
            db: None,
            dc: Some(TensorMut::contiguous(dc.as_slice_mut(), [33, 1]).unwrap()),
        },
    )
    .map_err(|e| e.to_string())?;
    let full: &[usize] = &[33, 64];
    let col: &[usize] = &[33, 1];
    let want = reference::ternary_backward(
        op,
        [
            (av.as_slice(), full),
            (bv.as_slice(), full),
            (cv.as_slice(), col),
        ],
        &dyv,
    );
    let extra = slack(T::KIND, &want.abs[2], 33 * 64, 33);
    compare(
        &format!("{} {} dc only", op.name(), T::KIND),
        &download(&dc),
        &want.grads[2],
        pointwise_tol(T::KIND),
        Some(&extra),
    )?;
    Ok(n + 3)
}

/// `a = f(a, b, c)` in place with a broadcast `c`, contiguous (the
/// vectorised kernel) and over every other element of `a`'s buffer (the
/// strided kernel, the elements between untouched): the out-of-place
/// reference.
fn check_ternary_in_place<T: Element>(op: TernaryOp, rng: &mut Rng) -> Result<(), String> {
    let g = gpu();
    let (rows, cols) = (33, 64);
    let desc = TernaryDescriptor {
        op,
        element: T::KIND,
        a_shape: [rows, cols],
        b_shape: [rows, cols],
        c_shape: [1, cols],
    };
    let plan = select::<TernaryPlan<T, 2>>(&desc, &PlanPreference::default())?;
    for layout in [Layout::Contiguous, Layout::StridedOut] {
        let what = format!("{} {} in place {layout:?}", op.name(), T::KIND);
        let n = rows * cols;
        let (len, strides, _) = crate::elementwise::output_layout(&[rows, cols], layout);
        let av = ternary_values(Some(op), 0, rng, n);
        let mut host = vec![f64::NAN; len];
        for (i, off) in view_offsets(&[rows, cols], &strides)
            .into_iter()
            .enumerate()
        {
            host[off] = av[i];
        }
        let (mut abuf, ahost) = upload::<T>(&host);
        let av = gather(&ahost, 0, &[rows, cols], &strides);
        let (b, bv) = upload::<T>(&ternary_values(Some(op), 1, rng, n));
        let (c, cv) = upload::<T>(&ternary_values(Some(op), 2, rng, cols));
        let a = TensorMut::new(abuf.as_slice_mut(), [rows, cols], arr(&strides))
            .map_err(|e| e.to_string())?;
        plan.run_in_place_a(
            &g.stream,
            Workspace::None,
            a,
            TensorRef::contiguous(b.as_slice(), [rows, cols]).unwrap(),
            TensorRef::contiguous(c.as_slice(), [1, cols]).unwrap(),
        )
        .map_err(|e| format!("{what}: {e}"))?;
        let all = download(&abuf);
        for (i, (got, was)) in all.iter().zip(&ahost).enumerate() {
            if was.is_nan() && !got.is_nan() {
                return Err(format!(
                    "{what}: element {i} between the view's was written"
                ));
            }
        }
        let full: &[usize] = &[rows, cols];
        let row: &[usize] = &[1, cols];
        let want = reference::ternary(op, [(&av[..], full), (&bv[..], full), (&cv[..], row)]);
        let got = gather(&all, 0, full, &strides);
        compare(&what, &got, &want, pointwise_tol(T::KIND), None)?;
    }
    Ok(())
}

/// Select a ternary op with `kind`, which it does not claim: `Unsupported`.
pub fn ternary_unsupported(kind: ElementKind) -> Result<(), String> {
    let desc = TernaryDescriptor {
        op: TernaryOp::Lerp,
        element: kind,
        a_shape: [4],
        b_shape: [4],
        c_shape: [4],
    };
    crate::with_element!(kind, T => expect_unsupported::<TernaryPlan<T, 1>>("ternary", &desc))
}

/// Bad inputs of the ternary plan: each returns its error and writes
/// nothing.
pub fn ternary_bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let s = &g.stream;
    let pref = PlanPreference::default();
    let mut bad = crate::table::BadInputs::default();
    let desc = TernaryDescriptor {
        op: TernaryOp::Addcmul { value: 0.5 },
        element: ElementKind::F32,
        a_shape: [4096, 513],
        b_shape: [4096, 513],
        c_shape: [1, 1],
    };
    let other = TernaryDescriptor {
        element: ElementKind::F16,
        ..desc
    };
    bad.own_kernel_select::<TernaryPlan<f32, 2>>(&desc, &other)?;
    let mismatch = TernaryDescriptor {
        c_shape: [2, 513],
        ..desc
    };
    bad.expect(
        "shapes that do not broadcast",
        TernaryPlan::<f32, 2>::select(s, &mismatch, &pref),
        |e| matches!(e, Error::BroadcastMismatch { op: "ternary", .. }),
        &[],
    )?;
    let plan = TernaryPlan::<f32, 2>::select(s, &desc, &pref).map_err(|e| e.to_string())?;
    let n = 4096 * 513;
    let (a, _) = upload::<f32>(&Rng::new(5).vec(n, -1.0, 1.0));
    let (c, _) = upload::<f32>(&[0.5]);
    let full = || TensorRef::contiguous(a.as_slice(), [4096, 513]).unwrap();
    let one = || TensorRef::contiguous(c.as_slice(), [1, 1]).unwrap();
    let mut out = poisoned::<f32>(n);
    let r = plan.run(
        s,
        Workspace::None,
        TernaryArgs {
            a: full(),
            b: full(),
            c: one(),
            out: TensorMut::contiguous(out.as_slice_mut(), [513, 4096]).unwrap(),
        },
    );
    bad.expect("out shape", r, shape_mismatch("out"), &[])?;
    let r = plan.run(
        s,
        Workspace::None,
        TernaryArgs {
            a: full(),
            b: full(),
            c: TensorRef::contiguous(a.as_slice(), [1, 2]).unwrap(),
            out: TensorMut::contiguous(out.as_slice_mut(), [4096, 513]).unwrap(),
        },
    );
    bad.expect("c shape", r, shape_mismatch("c"), &[])?;
    // in place over a broadcast a
    let bcast = TernaryDescriptor {
        a_shape: [1, 513],
        ..desc
    };
    let bplan = TernaryPlan::<f32, 2>::select(s, &bcast, &pref).map_err(|e| e.to_string())?;
    let (io, _) = out.as_slice_mut().split_at(513).ok_or("split")?;
    let r = bplan.run_in_place_a(
        s,
        Workspace::None,
        TensorMut::contiguous(io, [1, 513]).unwrap(),
        full(),
        one(),
    );
    bad.expect("in place over a broadcast a", r, invalid_argument("a"), &[])?;
    check_untouched::<f32>("ternary bad forward", &download(&out), &[])?;
    // backward: the split reduction of dc needs its workspace
    let bytes = plan.bw_workspace_size(Grad::C.into());
    if bytes == 0 {
        return Err("a 2M-term reduction should use split partials".into());
    }
    let mut dc = poisoned::<f32>(1);
    let r = plan.run_bw(
        s,
        Workspace::None,
        TernaryBwArgs {
            a: full(),
            b: full(),
            c: one(),
            dy: full(),
            da: None,
            db: None,
            dc: Some(TensorMut::contiguous(dc.as_slice_mut(), [1, 1]).unwrap()),
        },
    );
    bad.expect("workspace", r, workspace_too_small, &[])?;
    check_untouched::<f32>("ternary bw bad workspace", &download(&dc), &[])?;
    let mut ws = poisoned::<u8>(plan.bw_workspace_size(Grad::A | Grad::B | Grad::C).max(1));
    let mut da = poisoned::<f32>(n);
    let r = plan.run_bw(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        TernaryBwArgs {
            a: full(),
            b: full(),
            c: one(),
            dy: full(),
            da: Some(TensorMut::contiguous(da.as_slice_mut(), [513, 4096]).unwrap()),
            db: None,
            dc: None,
        },
    );
    bad.expect("da shape", r, shape_mismatch("da"), &[])?;
    let r = plan.run_bw(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        TernaryBwArgs {
            a: full(),
            b: full(),
            c: one(),
            dy: TensorRef::contiguous(a.as_slice(), [513, 4096]).unwrap(),
            da: Some(TensorMut::contiguous(da.as_slice_mut(), [4096, 513]).unwrap()),
            db: None,
            dc: None,
        },
    );
    bad.expect("dy shape", r, shape_mismatch("dy"), &[])?;
    check_untouched::<f32>("ternary bw bad da, dy", &download(&da), &[])?;
    // a reduced gradient written over an input: out of one buffer, dc is
    // the first element of b's memory
    let (b2, _) = upload::<f32>(&Rng::new(6).vec(n, -1.0, 1.0));
    // SAFETY: the writable view aliases b2's memory on purpose: run_bw must
    // reject it before any kernel touches it.
    let alias =
        unsafe { DeviceSliceMut::<f32>::from_raw_parts(b2.as_slice().addr(), 1, s.context().id()) };
    let r = plan.run_bw(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        TernaryBwArgs {
            a: full(),
            b: TensorRef::contiguous(b2.as_slice(), [4096, 513]).unwrap(),
            c: one(),
            dy: full(),
            da: None,
            db: None,
            dc: Some(TensorMut::contiguous(alias, [1, 1]).unwrap()),
        },
    );
    bad.expect("dc over b", r, invalid_argument("dc"), &[])?;
    bad.done()
}

// ---------------------------------------------------------------------------
// where
// ---------------------------------------------------------------------------

fn check_where_sample<T: Element, const N: usize>(
    shapes: &[Vec<usize>; 3],
    layout: Layout,
    rng: &mut Rng,
) -> Result<(), String> {
    let g = gpu();
    let what = format!("where {} {shapes:?} {layout:?}", T::KIND);
    let desc = WhereDescriptor {
        element: T::KIND,
        cond_shape: arr::<N>(&shapes[0]),
        a_shape: arr::<N>(&shapes[1]),
        b_shape: arr::<N>(&shapes[2]),
    };
    let out_shape = desc.out_shape().map_err(|e| e.to_string())?.to_vec();
    let off = usize::from(layout == Layout::Misaligned);
    let len = |k: usize| shapes[k].iter().product::<usize>() + off;
    let transposed = layout == Layout::Transposed;
    let cond = operand::<bool>(
        &ternary_values(None, 0, rng, len(0)),
        &shapes[0],
        layout,
        transposed,
    );
    let a = operand::<T>(
        &ternary_values(None, 1, rng, len(1)),
        &shapes[1],
        layout,
        false,
    );
    let b = operand::<T>(
        &ternary_values(None, 2, rng, len(2)),
        &shapes[2],
        layout,
        false,
    );
    let (kv, av, bv) = (
        cond.logical(&shapes[0]),
        a.logical(&shapes[1]),
        b.logical(&shapes[2]),
    );
    let plan = select::<WherePlan<T, N>>(&desc, &PlanPreference::default())?;
    let mut out = Operand::<T>::output(&out_shape, layout);
    plan.run(
        &g.stream,
        Workspace::None,
        WhereArgs {
            cond: cond.view(&shapes[0]),
            a: a.view(&shapes[1]),
            b: b.view(&shapes[2]),
            out: out.view_mut(&out_shape),
        },
    )
    .map_err(|e| format!("{what}: {e}"))?;
    let k = (kv.as_slice(), shapes[0].as_slice());
    let want = reference::where_(
        k,
        (av.as_slice(), shapes[1].as_slice()),
        (bv.as_slice(), shapes[2].as_slice()),
    );
    compare(
        &format!("{what} fw"),
        &out.result(&what, &out_shape)?,
        &want,
        Tolerance::EXACT,
        None,
    )?;

    let dy = Operand::<T>::input(rng, &out_shape, layout, false, -1.0, 1.0);
    let mut da = Operand::<T>::output(&shapes[1], grad_layout(layout));
    let mut db = Operand::<T>::output(&shapes[2], grad_layout(layout));
    let bytes = plan.bw_workspace_size(Grad::A | Grad::B);
    let mut ws = workspace(bytes);
    plan.run_bw(
        &g.stream,
        lend(&mut ws, bytes),
        WhereBwArgs {
            cond: cond.view(&shapes[0]),
            dy: dy.view(&out_shape),
            da: Some(da.view_mut(&shapes[1])),
            db: Some(db.view_mut(&shapes[2])),
        },
    )
    .map_err(|e| format!("{what} bw: {e}"))?;
    let want = reference::where_backward(k, &shapes[1], &shapes[2], &dy.logical(&out_shape));
    let n_out: usize = out_shape.iter().product();
    let tol = pointwise_tol(T::KIND);
    for (k, (name, grad)) in [("da", &da), ("db", &db)].into_iter().enumerate() {
        let shape = &shapes[k + 1];
        let extra = slack(T::KIND, &want.abs[k], n_out, shape.iter().product());
        compare(
            &format!("{what} {name}"),
            &grad.result(&what, shape)?,
            &want.grads[k],
            tol,
            Some(&extra),
        )?;
    }
    Ok(())
}

/// Forward and backward of `where` over every ternary sample (the first
/// shape is the condition's).
pub fn check_where<T: Element>() -> Result<usize, String> {
    let mut rng = Rng::new(0x3E);
    let mut n = 0;
    let out_elems = |(s, _): &([Vec<usize>; 3], Layout)| -> usize {
        (0..s[0].len())
            .map(|d| s.iter().map(|v| v[d]).max().unwrap_or(1))
            .product()
    };
    for (shapes, layout) in small_samples(ternary_samples(), out_elems) {
        match shapes[0].len() {
            2 => check_where_sample::<T, 2>(&shapes, layout, &mut rng)?,
            3 => check_where_sample::<T, 3>(&shapes, layout, &mut rng)?,
            8 => check_where_sample::<T, 8>(&shapes, layout, &mut rng)?,
            r => return Err(format!("no sample runner for rank {r}")),
        }
        n += 1;
    }
    Ok(n)
}

/// Select `where` with `kind`, which it does not claim: `Unsupported`.
pub fn where_unsupported(kind: ElementKind) -> Result<(), String> {
    let desc = WhereDescriptor {
        element: kind,
        cond_shape: [4],
        a_shape: [4],
        b_shape: [4],
    };
    crate::with_element!(kind, T => expect_unsupported::<WherePlan<T, 1>>("where", &desc))
}

/// Bad inputs of the where plan.
pub fn where_bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let s = &g.stream;
    let pref = PlanPreference::default();
    let mut bad = crate::table::BadInputs::default();
    let desc = WhereDescriptor {
        element: ElementKind::F32,
        cond_shape: [64, 1],
        a_shape: [64, 33],
        b_shape: [1, 1],
    };
    let other = WhereDescriptor {
        element: ElementKind::Bf16,
        ..desc
    };
    bad.own_kernel_select::<WherePlan<f32, 2>>(&desc, &other)?;
    bad.expect(
        "shapes that do not broadcast",
        WherePlan::<f32, 2>::select(
            s,
            &WhereDescriptor {
                b_shape: [2, 1],
                ..desc
            },
            &pref,
        ),
        |e| matches!(e, Error::BroadcastMismatch { op: "where", .. }),
        &[],
    )?;
    let plan = WherePlan::<f32, 2>::select(s, &desc, &pref).map_err(|e| e.to_string())?;
    let (cond, _) = upload::<bool>(&[1.0; 64]);
    let (a, _) = upload::<f32>(&Rng::new(7).vec(64 * 33, -1.0, 1.0));
    let mut out = poisoned::<f32>(64 * 33);
    let r = plan.run(
        s,
        Workspace::None,
        WhereArgs {
            cond: TensorRef::contiguous(cond.as_slice(), [1, 64]).unwrap(),
            a: TensorRef::contiguous(a.as_slice(), [64, 33]).unwrap(),
            b: TensorRef::contiguous(a.as_slice(), [1, 1]).unwrap(),
            out: TensorMut::contiguous(out.as_slice_mut(), [64, 33]).unwrap(),
        },
    );
    bad.expect("cond shape", r, shape_mismatch("cond"), &[])?;
    check_untouched::<f32>("where bad cond", &download(&out), &[])?;
    let mut db = poisoned::<f32>(2);
    let bytes = plan.bw_workspace_size(Grad::B.into());
    let mut ws = poisoned::<u8>(bytes.max(1));
    let r = plan.run_bw(
        s,
        Workspace::Borrowed(ws.as_slice_mut()),
        WhereBwArgs {
            cond: TensorRef::contiguous(cond.as_slice(), [64, 1]).unwrap(),
            dy: TensorRef::contiguous(a.as_slice(), [64, 33]).unwrap(),
            da: None,
            db: Some(TensorMut::contiguous(db.as_slice_mut(), [1, 2]).unwrap()),
        },
    );
    bad.expect("db shape", r, shape_mismatch("db"), &[])?;
    check_untouched::<f32>("where bad db", &download(&db), &[])?;
    bad.done()
}
