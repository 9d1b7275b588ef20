//! GPU tests of GroupNorm and InstanceNorm: the `group_norm` row of the
//! norm family's op table, against `reference::norm::GroupNorm`.
//!
//! Samples: groups 1, some, and C (InstanceNorm), both layouts, ranks 3 to
//! 5, odd extents (tails of every block), a group of one element, weight
//! and bias absent and present, a group large enough to be split over
//! several statistics blocks, and (bf16) a realistic [32, 512, 64, 64] in
//! 32 groups. Each sample checks y, the saved mean and rstd, dx, dweight
//! and dbias (those it has), and that nothing outside the views was
//! written.

use baracuda_kernels::reference::norm::GroupNorm;
use baracuda_kernels::*;

use crate::harness::*;
use crate::norm::{
    affine_bw_checks, affine_tolerance, grad_view, param_view, push_grads, push_param_grads,
    stats_values,
};
use crate::reduce::view_result;
use crate::table::{BadInputs, OpCase, Tensors};

/// One GroupNorm problem.
#[derive(Clone, Debug)]
pub struct GroupSample {
    shape: Vec<usize>,
    groups: usize,
    weight: bool,
    bias: bool,
    layout: ConvLayout,
    eps: f64,
}

impl GroupSample {
    fn spatial(&self) -> usize {
        self.shape[2..].iter().product()
    }
    fn reference(&self) -> GroupNorm {
        GroupNorm {
            batch: self.shape[0],
            channels: self.shape[1],
            spatial: self.spatial(),
            groups: self.groups,
            eps: self.eps,
        }
    }
    fn descriptor<const R: usize>(&self, kind: ElementKind) -> GroupNormDescriptor<R> {
        let shape: [usize; R] = std::array::from_fn(|i| self.shape[i]);
        GroupNormDescriptor::group_norm(kind, shape, self.groups)
            .with_eps(self.eps)
            .with_weight(self.weight)
            .with_bias(self.bias)
            .with_layout(self.layout)
    }
    fn strides(&self) -> Vec<usize> {
        strides_of(&self.shape, self.layout)
    }
}

/// Dense strides of a logical `[n, c, spatial...]` shape in `layout`.
fn strides_of(shape: &[usize], layout: ConvLayout) -> Vec<usize> {
    match layout {
        ConvLayout::ChannelsFirst => contiguous(shape),
        ConvLayout::ChannelsLast => {
            let mut st = vec![1; shape.len()];
            let mut acc = shape[1];
            for a in (2..shape.len()).rev() {
                st[a] = acc;
                acc *= shape[a];
            }
            st[0] = acc;
            st
        }
    }
}

/// The row.
pub const ROW: OpCase<GroupSample> = OpCase {
    name: "group_norm",
    dtypes: FLOATS,
    backward: true,
    samples,
    inputs,
    run,
    reference,
    tolerance,
    bad_inputs,
    unsupported: unsupported_dtype,
};

fn samples(kind: ElementKind) -> Vec<GroupSample> {
    use ConvLayout::{ChannelsFirst as Cf, ChannelsLast as Cl};
    let s = |shape: &[usize], groups, layout| GroupSample {
        shape: shape.to_vec(),
        groups,
        weight: true,
        bias: true,
        layout,
        eps: 1e-5,
    };
    let bare = |mut x: GroupSample| {
        x.weight = false;
        x.bias = false;
        x
    };
    let weight_only = |mut x: GroupSample| {
        x.bias = false;
        x
    };
    // A group of one element: xhat = 0, so a large eps keeps dx
    // well-conditioned.
    let mut one = s(&[3, 4, 1], 4, Cf);
    one.eps = 0.5;
    let mut one_cl = s(&[2, 6, 1, 1], 6, Cl);
    one_cl.eps = 0.5;
    let mut v = vec![
        one,
        one_cl,
        s(&[2, 6, 7], 1, Cf),
        s(&[2, 6, 7], 3, Cl),
        s(&[3, 8, 5, 3], 4, Cf),
        s(&[3, 8, 5, 3], 4, Cl),
        bare(s(&[2, 12, 9, 11], 12, Cf)),
        bare(s(&[2, 12, 9, 11], 12, Cl)),
        weight_only(s(&[2, 10, 3, 4, 5], 5, Cf)),
        s(&[2, 10, 3, 4, 5], 2, Cl),
        s(&[1, 35, 33], 7, Cl),
        s(&[0, 4, 3], 2, Cf),
        // one group of 2^18 elements: split over statistics blocks
        s(&[1, 16, 128, 128], 1, Cf),
        s(&[1, 16, 128, 128], 1, Cl),
        // InstanceNorm on a channels-last image
        bare(s(&[4, 64, 16, 16], 64, Cl)),
    ];
    if kind == ElementKind::Bf16 {
        v.push(s(&[32, 512, 64, 64], 32, Cf));
    }
    v
}

/// x (logical channels-first order, off-centre), weight, bias, dy.
fn inputs(s: &GroupSample, rng: &mut Rng) -> Tensors {
    let n: usize = s.shape.iter().product();
    let c = s.shape[1];
    let mut x = rng.vec(n, -2.0, 2.0);
    x.iter_mut().for_each(|v| *v += 1.5);
    let mut t = Tensors::default();
    t.push("x", x);
    if s.weight {
        t.push("weight", rng.vec(c, 0.5, 1.5));
    }
    if s.bias {
        t.push("bias", rng.vec(c, -1.0, 1.0));
    }
    t.push("dy", rng.vec(n, -1.0, 1.0));
    t
}

fn reference(_: ElementKind, s: &GroupSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let r = s.reference();
    let x = inputs.get("x");
    let (w, b) = (inputs.find("weight"), inputs.find("bias"));
    let out = r.forward(x, w, b);
    let mut t = Tensors::default();
    t.push("y", out.y);
    t.push("mean", out.mean);
    t.push("rstd", out.rstd);
    if got.find("dx").is_some() {
        push_grads(
            &mut t,
            r.backward(x, w, inputs.get("dy")),
            (s.weight, s.bias),
        );
    }
    t
}

fn tolerance(
    kind: ElementKind,
    s: &GroupSample,
    name: &str,
    want: &[f64],
    _inputs: &Tensors,
) -> Tolerance {
    let m = (s.shape[1] / s.groups * s.spatial()) as f64;
    let terms = (s.shape[0] * s.spatial()) as f64;
    affine_tolerance(kind, name, (m + 2.0).log2(), terms, want)
}

// ---------------------------------------------------------------------------
// Device runs
// ---------------------------------------------------------------------------

fn run(
    kind: ElementKind,
    s: &GroupSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    crate::with_float!(kind, T => match s.shape.len() {
        3 => run_ranked::<T, 3>(s, inputs, backward),
        4 => run_ranked::<T, 4>(s, inputs, backward),
        5 => run_ranked::<T, 5>(s, inputs, backward),
        other => Err(format!("no test instance for rank {other}")),
    })
}

fn run_ranked<T: Element, const R: usize>(
    s: &GroupSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!(
        "group_norm {} {:?} {} {:?}",
        T::KIND,
        s.shape,
        s.groups,
        s.layout
    );
    let e = |e: Error| format!("{what}: {e}");
    let v = |e: Error| e.to_string();
    let plan = select::<GroupNormPlan<T, R>>(&s.descriptor::<R>(T::KIND), &Default::default())?;
    let shape: [usize; R] = std::array::from_fn(|i| s.shape[i]);
    let st = s.strides();
    let strides: [usize; R] = std::array::from_fn(|i| st[i]);
    let n: usize = s.shape.iter().product();
    let c = s.shape[1];
    let (xbuf, _) = upload::<T>(&scatter(inputs.get("x"), &s.shape, &st, n));
    let x = TensorRef::new(xbuf.as_slice(), shape, strides).map_err(v)?;
    let param = |name: &str| inputs.find(name).map(upload::<T>).map(|(b, _)| b);
    let (wbuf, bbuf) = (param("weight"), param("bias"));
    let (weight, bias) = (param_view(&wbuf, [c])?, param_view(&bbuf, [c])?);
    let mut y = Guarded::<T>::new(n);
    let mut stats = Guarded::<u8>::new(plan.stats_bytes());
    let mut ws = workspace(plan.workspace_size());
    plan.run(
        &g.stream,
        Workspace::Borrowed(ws.as_slice_mut()),
        GroupNormArgs {
            x,
            weight,
            bias,
            y: TensorMut::new(y.slice_mut(), shape, strides).map_err(v)?,
            stats: Some(stats.slice_mut()),
        },
    )
    .map_err(e)?;
    let mut t = Tensors::default();
    t.push("y", view_result(&what, &y, &s.shape, &st)?);
    let sv = stats_values(T::KIND, &stats.result(&format!("{what} stats"))?);
    let rows = s.shape[0] * s.groups;
    t.push("mean", sv[..rows].to_vec());
    t.push("rstd", sv[rows..].to_vec());
    if !backward {
        return Ok(t);
    }
    let (dybuf, _) = upload::<T>(&scatter(inputs.get("dy"), &s.shape, &st, n));
    let dy = TensorRef::new(dybuf.as_slice(), shape, strides).map_err(v)?;
    let mut dx = Guarded::<T>::new(n);
    let mut dw = operand_if(s.weight, || Guarded::<T>::new(c));
    let mut db = operand_if(s.bias, || Guarded::<T>::new(c));
    let bw = |wants: Grads,
              dx: Option<TensorMut<'_, T, R>>,
              dweight: Option<TensorMut<'_, T, 1>>,
              dbias: Option<TensorMut<'_, T, 1>>| {
        let mut bws = workspace(plan.bw_workspace_size(wants));
        let args = GroupNormBwArgs {
            x,
            weight,
            stats: stats.slice(),
            dy,
            dx,
            dweight,
            dbias,
        };
        plan.run_bw(&g.stream, Workspace::Borrowed(bws.as_slice_mut()), args)
    };
    bw(
        plan.grads(),
        Some(TensorMut::new(dx.slice_mut(), shape, strides).map_err(v)?),
        grad_view(&mut dw, s.weight, [c])?,
        grad_view(&mut db, s.bias, [c])?,
    )
    .map_err(|e| format!("{what} backward: {e}"))?;
    t.push(
        "dx",
        view_result(&format!("{what} dx"), &dx, &s.shape, &st)?,
    );
    push_param_grads(&mut t, &what, [(&dw, s.weight), (&db, s.bias)])?;
    if s.weight && s.shape[0] > 0 {
        // dweight alone: the same values, dx untouched.
        let dx2 = not_an_operand(|| Guarded::<T>::new(n));
        let mut dw2 = Guarded::<T>::new(c);
        let wants = Grads::present(&[(Grad::Weight, true)]);
        bw(wants, None, grad_view(&mut dw2, true, [c])?, None)
            .map_err(|e| format!("{what} dweight alone: {e}"))?;
        t.push(
            "dweight alone",
            dw2.result(&format!("{what} dweight alone"))?,
        );
        dx2.untouched(&format!("{what} dx (not asked)"))?;
    }
    Ok(t)
}

// ---------------------------------------------------------------------------
// Bad inputs and other dtypes
// ---------------------------------------------------------------------------

const BAD_SHAPE: [usize; 3] = [2, 8, 12];

/// Every select and run check, each returning its error and writing
/// nothing.
fn bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let desc = GroupNormDescriptor::group_norm(ElementKind::F32, BAD_SHAPE, 4);
    let sel = |d: &GroupNormDescriptor<3>, p: &PlanPreference| {
        GroupNormPlan::<f32, 3>::select(&g.stream, d, p)
    };
    let f64_desc = GroupNormDescriptor {
        element: ElementKind::F64,
        ..desc
    };
    b.own_kernel_select::<GroupNormPlan<f32, 3>>(&desc, &f64_desc)?;
    let three = GroupNormDescriptor { groups: 3, ..desc };
    b.expect(
        "8 channels in 3 groups",
        sel(&three, &pref),
        invalid_descriptor("groups"),
        &[],
    )?;
    let zero = GroupNormDescriptor { groups: 0, ..desc };
    b.expect(
        "0 groups",
        sel(&zero, &pref),
        invalid_descriptor("groups"),
        &[],
    )?;
    let empty = GroupNormDescriptor {
        shape: [2, 8, 0],
        ..desc
    };
    b.expect(
        "no spatial positions",
        sel(&empty, &pref),
        invalid_descriptor("shape"),
        &[],
    )?;
    b.expect(
        "eps NaN",
        sel(&desc.with_eps(f64::NAN), &pref),
        invalid_descriptor("eps"),
        &[],
    )?;
    let rank2 = GroupNormDescriptor::group_norm(ElementKind::F32, [2, 8], 4);
    b.expect(
        "rank 2",
        GroupNormPlan::<f32, 2>::select(&g.stream, &rank2, &pref),
        unsupported,
        &[],
    )?;

    let plan = sel(&desc, &pref).map_err(|e| e.to_string())?;
    let n: usize = BAD_SHAPE.iter().product();
    let mut rng = Rng::new(0x6E0B);
    let (xb, _) = upload::<f32>(&rng.vec(n, -1.0, 1.0));
    let (wb, _) = upload::<f32>(&rng.vec(8, 0.5, 1.5));
    let x = TensorRef::contiguous(xb.as_slice(), BAD_SHAPE).map_err(|e| e.to_string())?;
    let w = TensorRef::contiguous(wb.as_slice(), [8]).map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(n);
    let mut st = Guarded::<u8>::new(plan.stats_bytes());
    let mut ws = workspace(plan.workspace_size());
    let mut fw = |x: TensorRef<'_, f32, 3>,
                  weight,
                  bias,
                  y: TensorMut<'_, f32, 3>,
                  stats: Option<DeviceSliceMut<'_, u8>>,
                  with_ws: bool| {
        let ws = if with_ws {
            Workspace::Borrowed(ws.as_slice_mut())
        } else {
            Workspace::None
        };
        let args = GroupNormArgs {
            x,
            weight,
            bias,
            y,
            stats,
        };
        plan.run(&g.stream, ws, args)
    };
    let x5 = TensorRef::contiguous(xb.as_slice(), [2, 8, 5]).map_err(|e| e.to_string())?;
    let r = fw(x5, Some(w), Some(w), yv(&mut y), None, true);
    b.expect("x [2, 8, 5]", r, shape_mismatch("x"), &[&y])?;
    // channels-last strides given to a channels-first plan
    let xl = TensorRef::new(xb.as_slice(), BAD_SHAPE, [96, 1, 8]).map_err(|e| e.to_string())?;
    let r = fw(xl, Some(w), Some(w), yv(&mut y), None, true);
    b.expect("x channels-last", r, invalid_argument("x"), &[&y])?;
    let r = fw(x, None, Some(w), yv(&mut y), None, true);
    b.expect("weight missing", r, invalid_argument("weight"), &[&y])?;
    let w4 = TensorRef::contiguous(wb.as_slice().slice(0..4).expect("w4"), [4])
        .map_err(|e| e.to_string())?;
    let r = fw(x, Some(w), Some(w4), yv(&mut y), None, true);
    b.expect("bias [4]", r, shape_mismatch("bias"), &[&y])?;
    // SAFETY: never dereferenced: run rejects the context first.
    let foreign = unsafe { DeviceSlice::<f32>::from_raw_parts(xb.as_slice().addr(), n, 0xDEAD) };
    let xf = TensorRef::contiguous(foreign, BAD_SHAPE).map_err(|e| e.to_string())?;
    let r = fw(xf, Some(w), Some(w), yv(&mut y), None, true);
    b.expect(
        "x on another context",
        r,
        |e| matches!(e, Error::ContextMismatch { arg: "x", .. }),
        &[&y],
    )?;
    let mut short = Guarded::<u8>::new(8);
    let r = fw(
        x,
        Some(w),
        Some(w),
        yv(&mut y),
        Some(short.slice_mut()),
        true,
    );
    b.expect(
        "statistics of 8 bytes",
        r,
        invalid_argument("stats"),
        &[&y, &short],
    )?;
    let r = fw(x, Some(w), Some(w), yv(&mut y), None, false);
    b.expect("no workspace", r, workspace_too_small, &[&y])?;
    // y inside x's memory
    let xs = xb.as_slice();
    // SAFETY: a bad-input test: the run must reject the aliasing view
    // before anything is enqueued.
    let alias =
        unsafe { DeviceSliceMut::<f32>::from_raw_parts(xs.addr() + 32, n - 8, xs.ctx_id()) };
    let ya = TensorMut::contiguous(alias, [2, 8, 11]).expect("alias");
    let x11 = TensorRef::contiguous(xs.slice(0..176).expect("x11"), [2, 8, 11])
        .map_err(|e| e.to_string())?;
    let plan11 = sel(
        &GroupNormDescriptor {
            shape: [2, 8, 11],
            ..desc
        },
        &pref,
    )
    .map_err(|e| e.to_string())?;
    let mut ws11 = workspace(plan11.workspace_size());
    let r = plan11.run(
        &g.stream,
        Workspace::Borrowed(ws11.as_slice_mut()),
        GroupNormArgs {
            x: x11,
            weight: Some(w),
            bias: Some(w),
            y: ya,
            stats: None,
        },
    );
    b.expect("y overlapping x", r, invalid_argument("y"), &[])?;
    let bare = sel(&desc.with_weight(false).with_bias(false), &pref).map_err(|e| e.to_string())?;
    let mut bws0 = workspace(bare.workspace_size());
    let r = bare.run(
        &g.stream,
        Workspace::Borrowed(bws0.as_slice_mut()),
        GroupNormArgs {
            x,
            weight: None,
            bias: Some(w),
            y: yv(&mut y),
            stats: None,
        },
    );
    b.expect(
        "bias without one in the descriptor",
        r,
        invalid_argument("bias"),
        &[&y],
    )?;

    // Backward: statistics from a good forward first.
    fw(x, Some(w), Some(w), yv(&mut y), Some(st.slice_mut()), true).map_err(|e| e.to_string())?;
    let (dyb, _) = upload::<f32>(&rng.vec(n, -1.0, 1.0));
    let dy = TensorRef::contiguous(dyb.as_slice(), BAD_SHAPE).map_err(|e| e.to_string())?;
    let mut bws = workspace(plan.bw_workspace_size(plan.grads()));
    let bw = |plan: &GroupNormPlan<f32, 3>,
              ws: Option<&mut DeviceBuffer<u8>>,
              weight,
              stats,
              dx: Option<TensorMut<'_, f32, 3>>,
              dweight: Option<TensorMut<'_, f32, 1>>| {
        let ws = ws.map_or(Workspace::None, |w| Workspace::Borrowed(w.as_slice_mut()));
        let args = GroupNormBwArgs {
            x,
            weight,
            stats,
            dy,
            dx,
            dweight,
            dbias: None,
        };
        plan.run_bw(&g.stream, ws, args)
    };
    // dx alone needs the workspace too (the per-group coefficients).
    let mut dx = Guarded::<f32>::new(n);
    let dxv = Some(TensorMut::contiguous(dx.slice_mut(), BAD_SHAPE).expect("dx"));
    let r = bw(&plan, None, Some(w), st.slice(), dxv, None);
    b.expect("dx without a workspace", r, workspace_too_small, &[&dx])?;
    let stats = (st.slice(), short.slice());
    affine_bw_checks(
        &mut b,
        (&plan, &bare),
        (BAD_SHAPE, [2, 8, 13]),
        &mut bws,
        w,
        stats,
        &dyb,
        bw,
    )?;
    b.done()
}

/// `y` as a `BAD_SHAPE` view.
fn yv(y: &mut Guarded<f32>) -> TensorMut<'_, f32, 3> {
    TensorMut::contiguous(y.slice_mut(), BAD_SHAPE).expect("y")
}

/// Selecting on `kind`, which the row does not claim, is `Unsupported`.
fn unsupported_dtype(kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = GroupNormDescriptor::group_norm(kind, [2, 4, 3], 2);
        expect_unsupported::<GroupNormPlan<T, 3>>(&format!("group_norm on {kind}"), &desc)
    })
}
