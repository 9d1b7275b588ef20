//! GPU tests of the gated activations (`GatedPlan`: glu, swiglu, geglu,
//! reglu): the table rows' checks, samples and bad inputs.

use baracuda_kernels::reference::elementwise as reference;
use baracuda_kernels::*;

use crate::elementwise::{compare_specials, Layout, Operand};
use crate::harness::*;
use crate::ternary::grad_layout;

/// `(x_shape, dim, layout)` of every gated sample: empty, one pair, an odd
/// half (no whole vector: the map kernels), whole-vector halves (the split
/// kernels) with several blocks, one realistic large shape (an MLP's
/// `[tokens, 2 * 2816]`), a split along the first and a middle dim,
/// transposed, strided-output and misaligned x (the map kernels), rank 8.
fn gated_samples() -> Vec<(Vec<usize>, usize, Layout)> {
    vec![
        (vec![0, 8], 1, Layout::Contiguous),
        (vec![1, 2], 1, Layout::Contiguous),
        (vec![3, 14], 1, Layout::Contiguous),
        (vec![33, 128], 1, Layout::Contiguous),
        (vec![512, 5632], 1, Layout::Contiguous),
        (vec![6, 5, 8], 0, Layout::Contiguous),
        (vec![4, 6, 16], 1, Layout::Contiguous),
        (vec![64, 34], 1, Layout::Transposed),
        (vec![19, 38], 1, Layout::StridedOut),
        (vec![5, 1030], 1, Layout::Misaligned),
        (vec![2, 3, 1, 2, 3, 2, 2, 5], 6, Layout::Contiguous),
    ]
}

fn check_gated_sample<T: Element, const N: usize>(
    op: GatedOp,
    x_shape: &[usize],
    dim: usize,
    layout: Layout,
    rng: &mut Rng,
) -> Result<(), String> {
    let g = gpu();
    let what = format!("{} {} {x_shape:?} dim {dim} {layout:?}", op.name(), T::KIND);
    let desc = GatedDescriptor {
        op,
        element: T::KIND,
        x_shape: arr::<N>(x_shape),
        dim,
    };
    let y_shape = desc.y_shape().map_err(|e| e.to_string())?.to_vec();
    let x = Operand::<T>::input(
        rng,
        x_shape,
        layout,
        layout == Layout::Transposed,
        -4.0,
        4.0,
    );
    let xv = x.logical(x_shape);
    let plan = select::<GatedPlan<T, N>>(&desc, &PlanPreference::default())?;
    let mut y = Operand::<T>::output(&y_shape, layout);
    plan.run(
        &g.stream,
        Workspace::None,
        GatedArgs {
            x: x.view(x_shape),
            y: y.view_mut(&y_shape),
        },
    )
    .map_err(|e| format!("{what}: {e}"))?;
    let want = reference::gated(op, &xv, x_shape, dim);
    let tol = gated_tol(op, T::KIND);
    compare(
        &format!("{what} fw"),
        &y.result(&what, &y_shape)?,
        &want,
        tol,
        None,
    )?;
    let dy = Operand::<T>::input(rng, &y_shape, layout, false, -1.0, 1.0);
    let mut dx = Operand::<T>::output(x_shape, grad_layout(layout));
    plan.run_bw(
        &g.stream,
        Workspace::None,
        GatedBwArgs {
            x: x.view(x_shape),
            dy: dy.view(&y_shape),
            dx: dx.view_mut(x_shape),
        },
    )
    .map_err(|e| format!("{what} bw: {e}"))?;
    let want = reference::gated_backward(op, &xv, x_shape, dim, &dy.logical(&y_shape));
    compare(
        &format!("{what} dx"),
        &dx.result(&what, x_shape)?,
        &want,
        tol,
        None,
    )
}

/// The bound of a gated op: the pointwise one, on f32 widened to the
/// activation's f32 evaluation error times a half of up to 4 (the unary
/// rows' 33 ulp on the activation, which the product carries).
fn gated_tol(op: GatedOp, kind: ElementKind) -> Tolerance {
    let t = pointwise_tol(kind);
    match (op, kind) {
        (GatedOp::Reglu, _) => t,
        (_, ElementKind::F32) => Tolerance {
            rtol: 8e-6,
            atol: 8e-6,
        },
        _ => t,
    }
}

/// Every pair of these as (a, b), forward and backward (x `[pairs, 2]`
/// split along dim 1: the map kernels): NaN where the reference (rounded
/// to `T`) has NaN, the bound elsewhere. No infinities: the activations'
/// own rows check those.
fn check_gated_specials<T: Element>(op: GatedOp, rng: &mut Rng) -> Result<(), String> {
    const S: [f64; 10] = [0.0, -0.0, f64::NAN, 1.0, -1.0, 0.5, -3.0, 3.0, 20.0, -20.0];
    let g = gpu();
    let pairs = S.len() * S.len();
    let x: Vec<f64> = (0..pairs)
        .flat_map(|i| [S[i % S.len()], S[i / S.len()]])
        .collect();
    let desc = GatedDescriptor {
        op,
        element: T::KIND,
        x_shape: [pairs, 2],
        dim: 1,
    };
    let plan = select::<GatedPlan<T, 2>>(&desc, &PlanPreference::default())?;
    let (xb, xv) = upload::<T>(&x);
    let (dy, dyv) = upload::<T>(&rng.vec(pairs, -1.0, 1.0));
    let mut y = poisoned::<T>(pairs);
    let mut dx = poisoned::<T>(2 * pairs);
    let what = format!("{} {} specials", op.name(), T::KIND);
    let xt = || TensorRef::contiguous(xb.as_slice(), [pairs, 2]).unwrap();
    let args = GatedArgs {
        x: xt(),
        y: TensorMut::contiguous(y.as_slice_mut(), [pairs, 1]).unwrap(),
    };
    plan.run(&g.stream, Workspace::None, args)
        .map_err(|e| format!("{what}: {e}"))?;
    let args = GatedBwArgs {
        x: xt(),
        dy: TensorRef::contiguous(dy.as_slice(), [pairs, 1]).unwrap(),
        dx: TensorMut::contiguous(dx.as_slice_mut(), [pairs, 2]).unwrap(),
    };
    plan.run_bw(&g.stream, Workspace::None, args)
        .map_err(|e| format!("{what} bw: {e}"))?;
    let tol = gated_tol(op, T::KIND);
    let want = round_to(T::KIND, &reference::gated(op, &xv, &[pairs, 2], 1));
    let a: Vec<f64> = xv.iter().step_by(2).copied().collect();
    compare_specials(&format!("{what} y"), &a, &download(&y), &want, tol, None)?;
    let want = reference::gated_backward(op, &xv, &[pairs, 2], 1, &dyv);
    let want = round_to(T::KIND, &want);
    compare_specials(&format!("{what} dx"), &xv, &download(&dx), &want, tol, None)
}

/// Forward and backward of `op` over every gated sample and the special
/// values.
pub fn check_gated<T: Element>(op: GatedOp) -> Result<usize, String> {
    let mut rng = Rng::new(0x6A7E ^ ((op as u64) << 8));
    let mut n = 0;
    let elems = |(s, _, _): &(Vec<usize>, usize, Layout)| s.iter().product::<usize>();
    for (shape, dim, layout) in small_samples(gated_samples(), elems) {
        match shape.len() {
            1 => check_gated_sample::<T, 1>(op, &shape, dim, layout, &mut rng)?,
            2 => check_gated_sample::<T, 2>(op, &shape, dim, layout, &mut rng)?,
            3 => check_gated_sample::<T, 3>(op, &shape, dim, layout, &mut rng)?,
            8 => check_gated_sample::<T, 8>(op, &shape, dim, layout, &mut rng)?,
            r => return Err(format!("no sample runner for rank {r}")),
        }
        n += 1;
    }
    check_gated_specials::<T>(op, &mut rng)?;
    Ok(n + 1)
}

/// Select a gated op with `kind`, which it does not claim: `Unsupported`.
pub fn gated_unsupported(kind: ElementKind) -> Result<(), String> {
    let desc = GatedDescriptor {
        op: GatedOp::Swiglu,
        element: kind,
        x_shape: [4],
        dim: 0,
    };
    crate::with_element!(kind, T => expect_unsupported::<GatedPlan<T, 1>>("gated", &desc))
}

/// Bad inputs of the gated plan.
pub fn gated_bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let s = &g.stream;
    let pref = PlanPreference::default();
    let mut bad = crate::table::BadInputs::default();
    let desc = GatedDescriptor {
        op: GatedOp::Swiglu,
        element: ElementKind::F32,
        x_shape: [64, 256],
        dim: 1,
    };
    let other = GatedDescriptor {
        element: ElementKind::F16,
        ..desc
    };
    bad.own_kernel_select::<GatedPlan<f32, 2>>(&desc, &other)?;
    bad.expect(
        "odd split",
        GatedPlan::<f32, 2>::select(
            s,
            &GatedDescriptor {
                x_shape: [64, 255],
                ..desc
            },
            &pref,
        ),
        invalid_descriptor("x_shape"),
        &[],
    )?;
    bad.expect(
        "dim past the rank",
        GatedPlan::<f32, 2>::select(s, &GatedDescriptor { dim: 2, ..desc }, &pref),
        invalid_descriptor("dim"),
        &[],
    )?;
    let plan = GatedPlan::<f32, 2>::select(s, &desc, &pref).map_err(|e| e.to_string())?;
    let (x, _) = upload::<f32>(&Rng::new(8).vec(64 * 256, -1.0, 1.0));
    let mut y = poisoned::<f32>(64 * 256);
    let r = plan.run(
        s,
        Workspace::None,
        GatedArgs {
            x: TensorRef::contiguous(x.as_slice(), [64, 256]).unwrap(),
            y: TensorMut::contiguous(y.as_slice_mut(), [64, 256]).unwrap(),
        },
    );
    bad.expect("y shape", r, shape_mismatch("y"), &[])?;
    check_untouched::<f32>("gated bad y", &download(&y), &[])?;
    let r = plan.run_bw(
        s,
        Workspace::None,
        GatedBwArgs {
            x: TensorRef::contiguous(x.as_slice(), [64, 256]).unwrap(),
            dy: TensorRef::contiguous(x.as_slice(), [64, 256]).unwrap(),
            dx: TensorMut::contiguous(y.as_slice_mut(), [64, 256]).unwrap(),
        },
    );
    bad.expect("dy shape", r, shape_mismatch("dy"), &[])?;
    check_untouched::<f32>("gated bad dy", &download(&y), &[])?;
    // dx over x (the same memory): rejected, nothing written
    // SAFETY: the writable view aliases x on purpose: run_bw must reject
    // it before any kernel touches it.
    let alias = unsafe {
        DeviceSliceMut::<f32>::from_raw_parts(x.as_slice().addr(), 64 * 256, s.context().id())
    };
    let r = plan.run_bw(
        s,
        Workspace::None,
        GatedBwArgs {
            x: TensorRef::contiguous(x.as_slice(), [64, 256]).unwrap(),
            dy: TensorRef::contiguous(y.as_slice(), [64, 128]).unwrap(),
            dx: TensorMut::contiguous(alias, [64, 256]).unwrap(),
        },
    );
    bad.expect("dx over x", r, invalid_argument("dx"), &[])?;
    bad.done()
}
