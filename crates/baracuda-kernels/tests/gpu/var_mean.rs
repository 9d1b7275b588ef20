//! GPU tests of [`VarMeanPlan`]: `torch.var_mean` and `torch.std_mean`,
//! both outputs and the backward, against `reference::reduce::var_mean`.
//!
//! The samples are the var and std rows' (`reduce.rs`: long vectors that
//! split, rows with tails, columns, several dims, transposed, broadcast,
//! misaligned and strided outputs, keepdim, empty reductions and outputs,
//! size-1 and no reduced dims, rank 8, ties, NaN and infinities in the
//! forward, several corrections), each backward with `dy` and `dmean`,
//! `dy` alone or `dmean` alone in turn, and in f32 the var_mean of the
//! last dim of a [16384, 8192] activation. Each forward runs twice, the
//! second time into zero-filled outputs: both outputs must agree bit for
//! bit.

use baracuda_kernels::reference::reduce as r;
use baracuda_kernels::*;

use crate::harness::*;
use crate::reduce::{
    by_ranks, descriptor_checks, nan_marked, run_twice_each, split_workspace_checks, view_result,
    xy_run_checks, ReduceSample, Values,
};
use crate::table::{BadInputs, OpCase, Tensors};

/// Which output gradients a sample's backward is given.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Given {
    /// `dy` and `dmean`.
    Both,
    /// `dy` only.
    Y,
    /// `dmean` only.
    Mean,
}

/// One var_mean (std_mean) problem: the var (std) reduction sample and
/// the gradients its backward is given.
#[derive(Clone, Debug)]
pub struct VarMeanSample {
    s: ReduceSample,
    given: Given,
}

impl VarMeanSample {
    fn is_std(&self) -> bool {
        self.s.op == ReduceOp::Std
    }
    /// The same problem as a mean: the bound of the mean output.
    fn mean_sample(&self) -> ReduceSample {
        ReduceSample {
            op: ReduceOp::Mean,
            ..self.s.clone()
        }
    }
}

/// The row of var_mean (`STD` false) or std_mean.
pub const fn row<const STD: bool>(name: &'static str) -> OpCase<VarMeanSample> {
    OpCase {
        name,
        dtypes: FLOATS,
        backward: true,
        samples: |kind| samples(kind, STD),
        inputs,
        run,
        reference,
        tolerance,
        bad_inputs: || bad_inputs(STD),
        unsupported: |kind| unsupported(STD, kind),
    }
}

/// The var_mean rows of the op table.
pub(crate) static ROWS: &[&dyn crate::table::Row] = &[
    &row::<false>("reduce_var_mean"),
    &row::<true>("reduce_std_mean"),
];

crate::table_tests!(ROWS; reduce_var_mean, reduce_std_mean);

fn samples(kind: ElementKind, std: bool) -> Vec<VarMeanSample> {
    let op = if std { ReduceOp::Std } else { ReduceOp::Var };
    let given = [Given::Both, Given::Y, Given::Mean];
    let mut v: Vec<VarMeanSample> = crate::reduce::samples(op)
        .into_iter()
        .enumerate()
        .map(|(i, s)| VarMeanSample {
            s,
            given: given[i % given.len()],
        })
        .collect();
    if kind == ElementKind::F32 {
        // realistic: the statistics of a [16384, 8192] activation's rows
        let mut s =
            crate::reduce::sample(op, &[16384, 8192], &[1], crate::reduce::Layout::Contiguous);
        s.correction = 0.0;
        v.push(VarMeanSample {
            s,
            given: Given::Both,
        });
    }
    v
}

/// x, dy (the var/std rows' inputs) and dmean.
fn inputs(s: &VarMeanSample, rng: &mut Rng) -> Tensors {
    let mut t = crate::reduce::inputs(&s.s, rng);
    let n_out: usize = s.s.out_shape().iter().product();
    t.push("dmean", rng.vec(n_out, -1.0, 1.0));
    t
}

fn reference(_: ElementKind, s: &VarMeanSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let red = s.s.reduction();
    let x = inputs.get("x");
    let (y, mean) = r::var_mean(&red, x);
    let mut t = Tensors::default();
    t.push("y", nan_marked(y));
    t.push("mean", nan_marked(mean));
    if got.find("dx").is_some() {
        // the gradient at the y the device produced (rounded to T)
        let dy = (s.given != Given::Mean).then(|| inputs.get("dy"));
        let dmean = (s.given != Given::Y).then(|| inputs.get("dmean"));
        t.push("dx", r::var_mean_backward(&red, x, got.get("y"), dy, dmean));
    }
    t
}

/// y and dx: the var (std) row's bounds (the backward's mean, read from
/// the forward's output in T, is within them); the mean: the mean row's.
fn tolerance(
    kind: ElementKind,
    s: &VarMeanSample,
    name: &str,
    want: &[f64],
    inputs: &Tensors,
) -> Tolerance {
    match name {
        "mean" => crate::reduce::tolerance(kind, &s.mean_sample(), "y", want, inputs),
        _ => crate::reduce::tolerance(kind, &s.s, name, want, inputs),
    }
}

fn run(
    kind: ElementKind,
    s: &VarMeanSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let m = s.s.out_shape().len();
    crate::with_float!(kind, T => by_ranks!(s.s.shape.len(), m, N, M => run_ranked::<T, N, M>(s, inputs, backward)))
}

fn run_ranked<T: Element, const N: usize, const M: usize>(
    vs: &VarMeanSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let s = &vs.s;
    let name = if vs.is_std() { "std_mean" } else { "var_mean" };
    let what = format!("{name} {} {:?} dims {:?}", T::KIND, s.shape, s.dims);
    let plan =
        select::<VarMeanPlan<T, N, M>>(&s.descriptor::<N>(T::KIND), &PlanPreference::default())?;
    let (xs, x_len, x_off) = s.x_layout();
    let xbuf = upload_strided::<T>(inputs.get("x"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<N>(&s.shape)?;
    let out_shape = s.out_shape();
    let (ys, y_len) = s.out_layout(&out_shape);
    let mut ws = workspace(plan.workspace_size());
    let forward = |mut outs: Vec<DeviceSliceMut<'_, T>>| {
        let mean = out_mut::<T, M>(outs.pop().expect("mean"), &out_shape, &ys)?;
        let y = out_mut::<T, M>(outs.pop().expect("y"), &out_shape, &ys)?;
        plan.run(
            &g.stream,
            Workspace::Borrowed(ws.as_slice_mut()),
            VarMeanArgs { x, y, mean },
        )
        .map_err(|e| format!("{what}: {e}"))
    };
    let out = (y_len, out_shape.as_slice(), ys.as_slice());
    let mut outs = run_twice_each(&what, &[out, out], forward)?;
    let (mean, mean_vals) = outs.pop().expect("mean");
    let (y, y_vals) = outs.pop().expect("y");
    let mut t = Tensors::default();
    t.push("y", nan_marked(y_vals));
    t.push("mean", nan_marked(mean_vals));
    if !backward || s.values == Values::Special {
        return Ok(t);
    }
    let dense = contiguous(&out_shape);
    let grad = |name: &str, given: bool| given.then(|| upload::<T>(inputs.get(name)).0);
    let dy = grad("dy", vs.given != Given::Mean);
    let dmean = grad("dmean", vs.given != Given::Y);
    let (dxs, dx_len) = s.out_layout(&s.shape);
    let mut dx = Guarded::<T>::new(dx_len);
    plan.run_bw(
        &g.stream,
        Workspace::None,
        VarMeanBwArgs {
            x,
            // var_mean's backward does not read y: leave it out there
            y: if vs.is_std() {
                Some(out_ref::<T, M>(y.slice(), &out_shape, &ys)?)
            } else {
                None
            },
            mean: out_ref::<T, M>(mean.slice(), &out_shape, &ys)?,
            dy: dy
                .as_ref()
                .map(|b| out_ref::<T, M>(b.as_slice(), &out_shape, &dense))
                .transpose()?,
            dmean: dmean
                .as_ref()
                .map(|b| out_ref::<T, M>(b.as_slice(), &out_shape, &dense))
                .transpose()?,
            dx: TensorMut::new(dx.slice_mut(), arr::<N>(&s.shape), arr::<N>(&dxs))
                .map_err(|e| e.to_string())?,
        },
    )
    .map_err(|e| format!("{what} backward: {e}"))?;
    t.push(
        "dx",
        view_result(&format!("{what} dx"), &dx, &s.shape, &dxs)?,
    );
    Ok(t)
}

/// A writable view of `shape` and `strides` (rank `M`) over `o`.
fn out_mut<'a, T: Element, const M: usize>(
    o: DeviceSliceMut<'a, T>,
    shape: &[usize],
    strides: &[usize],
) -> Result<TensorMut<'a, T, M>, String> {
    TensorMut::new(o, arr::<M>(shape), arr::<M>(strides)).map_err(|e| e.to_string())
}

/// A view of `shape` and `strides` (rank `M`) over `o`.
fn out_ref<'a, T: Element, const M: usize>(
    o: DeviceSlice<'a, T>,
    shape: &[usize],
    strides: &[usize],
) -> Result<TensorRef<'a, T, M>, String> {
    TensorRef::new(o, arr::<M>(shape), arr::<M>(strides)).map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------
// Bad inputs and other dtypes
// ---------------------------------------------------------------------------

/// Every select, run and run_bw check, each returning its error and
/// writing nothing.
fn bad_inputs(std: bool) -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let op = if std { ReduceOp::Std } else { ReduceOp::Var };
    let desc = ReduceDescriptor::new(op, ElementKind::F32, [4, 96]).with_dims(&[1]);
    let sel = |d: &ReduceDescriptor<2>, p: &PlanPreference| {
        VarMeanPlan::<f32, 2, 1>::select(&g.stream, d, p)
    };
    descriptor_checks::<VarMeanPlan<f32, 2, 1>>(&mut b, &desc)?;
    b.expect(
        "op sum",
        sel(
            &ReduceDescriptor {
                op: ReduceOp::Sum,
                ..desc
            },
            &pref,
        ),
        invalid_descriptor("op"),
        &[],
    )?;
    // A split reduction needs a workspace.
    let long = ReduceDescriptor::new(op, ElementKind::F32, [4, 65536]).with_dims(&[1]);
    let mut rng = Rng::new(0x5EA4);
    split_workspace_checks(
        &mut b,
        "var_mean",
        &mut rng,
        |p| sel(&long, p),
        |b, plan, x| {
            let (mut y, mut mean) = (Guarded::<f32>::new(4), Guarded::<f32>::new(4));
            let args = VarMeanArgs {
                x,
                y: TensorMut::contiguous(y.slice_mut(), [4]).map_err(|e| e.to_string())?,
                mean: TensorMut::contiguous(mean.slice_mut(), [4]).map_err(|e| e.to_string())?,
            };
            let r = plan.run(&g.stream, Workspace::None, args);
            b.expect("no workspace", r, workspace_too_small, &[&y, &mean])
        },
    )?;

    // Forward: x, y and the aliasing of y over x through the shared
    // checks (the mean elsewhere), then the mean's own checks.
    let plan = sel(&desc, &pref).map_err(|e| e.to_string())?;
    let (xb, _) = upload::<f32>(&rng.vec(4 * 96, 0.5, 1.0));
    let spare = Guarded::<f32>::new(4);
    xy_run_checks::<f32, f32>(&mut b, &xb, |x, y| {
        let sl = spare.slice();
        // SAFETY: `spare` holds 4 f32 (and its guards); no other view of
        // it is in use while the run holds this one.
        let mean = unsafe { DeviceSliceMut::<f32>::from_raw_parts(sl.addr(), 4, sl.ctx_id()) };
        let mean = TensorMut::contiguous(mean, [4])?;
        plan.run(&g.stream, Workspace::None, VarMeanArgs { x, y, mean })
    })?;
    spare.untouched("the mean beside a rejected y")?;
    let x = TensorRef::contiguous(xb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(4);
    let mut mean5 = Guarded::<f32>::new(5);
    let r = plan.run(
        &g.stream,
        Workspace::None,
        VarMeanArgs {
            x,
            y: TensorMut::contiguous(y.slice_mut(), [4]).map_err(|e| e.to_string())?,
            mean: TensorMut::contiguous(mean5.slice_mut(), [5]).map_err(|e| e.to_string())?,
        },
    );
    b.expect("mean [5]", r, shape_mismatch("mean"), &[&y, &mean5])?;
    // y and the mean in one buffer, overlapping
    let mut both = Guarded::<f32>::new(6);
    let sl = both.slice_mut();
    // SAFETY: a bad-input test: the run must reject the aliasing views
    // before anything is enqueued, so nothing writes through them.
    let (ya, ma) = unsafe {
        (
            DeviceSliceMut::<f32>::from_raw_parts(sl.addr(), 4, sl.ctx_id()),
            DeviceSliceMut::<f32>::from_raw_parts(sl.addr() + 8, 4, sl.ctx_id()),
        )
    };
    let r = plan.run(
        &g.stream,
        Workspace::None,
        VarMeanArgs {
            x,
            y: TensorMut::contiguous(ya, [4]).map_err(|e| e.to_string())?,
            mean: TensorMut::contiguous(ma, [4]).map_err(|e| e.to_string())?,
        },
    );
    b.expect("mean overlapping y", r, invalid_argument("y"), &[&both])?;

    // Backward.
    let (ob, _) = upload::<f32>(&rng.vec(4 * 3, 0.5, 1.0));
    let out = |i: usize| {
        let sl = ob.as_slice().slice(4 * i..4 * i + 4).expect("in buffer");
        TensorRef::contiguous(sl, [4]).map_err(|e| e.to_string())
    };
    let (yv, mv, dyv) = (out(0)?, out(1)?, out(2)?);
    let (dm5b, _) = upload::<f32>(&rng.vec(5, -1.0, 1.0));
    let dm5 = TensorRef::contiguous(dm5b.as_slice(), [5]).map_err(|e| e.to_string())?;
    let mut dx = Guarded::<f32>::new(4 * 96);
    let mut dx5 = Guarded::<f32>::new(5 * 96);
    let r = plan.run_bw(
        &g.stream,
        Workspace::None,
        VarMeanBwArgs {
            x,
            y: Some(yv),
            mean: mv,
            dy: Some(dyv),
            dmean: None,
            dx: out_mut::<f32, 2>(dx5.slice_mut(), &[5, 96], &[96, 1])?,
        },
    );
    b.expect("dx [5, 96]", r, shape_mismatch("dx"), &[&dx5])?;
    let r = plan.run_bw(
        &g.stream,
        Workspace::None,
        VarMeanBwArgs {
            x,
            y: Some(yv),
            mean: mv,
            dy: None,
            dmean: Some(dm5),
            dx: out_mut::<f32, 2>(dx.slice_mut(), &[4, 96], &[96, 1])?,
        },
    );
    b.expect("dmean [5]", r, shape_mismatch("dmean"), &[&dx])?;
    // dx [1, 4] over y, the mean and dy of a [1, 4] problem
    let sh = ob.as_slice();
    // SAFETY: as above, the run must reject the view first.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(sh.addr(), 4, sh.ctx_id()) };
    let desc1 = ReduceDescriptor::new(op, ElementKind::F32, [1, 4]).with_dims(&[1]);
    let plan1 = sel(&desc1, &pref).map_err(|e| e.to_string())?;
    let x1 = TensorRef::contiguous(xb.as_slice(), [1, 4]).map_err(|e| e.to_string())?;
    let one = |i: usize| {
        let sl = ob.as_slice().slice(4 * i..4 * i + 1).expect("in buffer");
        TensorRef::contiguous(sl, [1]).map_err(|e| e.to_string())
    };
    let r = plan1.run_bw(
        &g.stream,
        Workspace::None,
        VarMeanBwArgs {
            x: x1,
            y: Some(one(0)?),
            mean: one(1)?,
            dy: Some(one(2)?),
            dmean: None,
            dx: TensorMut::contiguous(alias, [1, 4]).map_err(|e| e.to_string())?,
        },
    );
    b.expect("dx over y and the mean", r, invalid_argument("dx"), &[])?;
    if std {
        let r = plan.run_bw(
            &g.stream,
            Workspace::None,
            VarMeanBwArgs {
                x,
                y: None,
                mean: mv,
                dy: Some(dyv),
                dmean: None,
                dx: out_mut::<f32, 2>(dx.slice_mut(), &[4, 96], &[96, 1])?,
            },
        );
        b.expect(
            "std_mean backward without y",
            r,
            invalid_argument("y"),
            &[&dx],
        )?;
    }
    b.done()
}

/// Selecting var_mean (std_mean) on `kind`, which no row claims, is
/// `Unsupported`.
fn unsupported(std: bool, kind: ElementKind) -> Result<(), String> {
    let op = if std { ReduceOp::Std } else { ReduceOp::Var };
    crate::with_element!(kind, T => {
        let desc = ReduceDescriptor::new(op, kind, [8, 3]).with_dims(&[1]);
        expect_unsupported::<VarMeanPlan<T, 2, 1>>(&format!("{op:?}_mean on {kind}"), &desc)
    })
}
