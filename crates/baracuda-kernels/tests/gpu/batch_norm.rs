//! GPU tests of BatchNorm: the `batch_norm` row of the norm family's op
//! table, against `reference::norm::BatchNorm`.
//!
//! Samples: ranks 2 to 5, both layouts, odd extents (tails of every
//! block, channel counts that are not whole vectors), training with and
//! without running statistics (several momenta), eval, weight and bias
//! absent and present, parameters in the activations' dtype and (f16,
//! bf16) in f32, two values per channel (the fewest training takes), one
//! value per channel in eval, an empty batch, channels split over several
//! statistics blocks, NaN and infinities (forward), and (bf16) the
//! realistic channels-last [64, 256, 56, 56] with f32 parameters. Each
//! sample checks y, the saved mean and rstd, the running statistics, dx,
//! dweight and dbias (those it has), that dweight alone and (eval) dx
//! alone give the same values, and that nothing outside the views was
//! written.

use baracuda_kernels::reference::norm::BatchNorm;
use baracuda_kernels::*;

use crate::harness::*;
use crate::norm::{
    affine_bw_checks, affine_tolerance, grad_view, param_view, push_grads, stats_values,
};
use crate::reduce::{nan_marked, view_result};
use crate::table::{BadInputs, OpCase, Tensors};

/// One BatchNorm problem.
#[derive(Clone, Debug)]
pub struct BatchSample {
    shape: Vec<usize>,
    weight: bool,
    bias: bool,
    /// Running statistics given (updated in training, read in eval).
    running: bool,
    training: bool,
    momentum: f64,
    layout: ConvLayout,
    eps: f64,
    /// Weight, bias and running statistics in f32 (f16 and bf16 only).
    param_f32: bool,
    /// NaN and infinities in x (forward only).
    special: bool,
}

impl BatchSample {
    fn spatial(&self) -> usize {
        self.shape[2..].iter().product()
    }
    fn m(&self) -> usize {
        self.shape[0] * self.spatial()
    }
    fn reference(&self) -> BatchNorm {
        BatchNorm {
            batch: self.shape[0],
            channels: self.shape[1],
            spatial: self.spatial(),
            eps: self.eps,
            training: self.training,
            momentum: self.momentum,
        }
    }
    fn descriptor<const R: usize>(&self, kind: ElementKind) -> BatchNormDescriptor<R> {
        let shape: [usize; R] = std::array::from_fn(|i| self.shape[i]);
        let param = if self.param_f32 {
            ElementKind::F32
        } else {
            kind
        };
        BatchNormDescriptor::batch_norm(kind, shape)
            .with_param(param)
            .with_eps(self.eps)
            .with_momentum(self.momentum)
            .with_training(self.training)
            .with_running_stats(self.running)
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
pub const ROW: OpCase<BatchSample> = OpCase {
    name: "batch_norm",
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

fn samples(kind: ElementKind) -> Vec<BatchSample> {
    use ConvLayout::{ChannelsFirst as Cf, ChannelsLast as Cl};
    let s = |shape: &[usize], layout| BatchSample {
        shape: shape.to_vec(),
        weight: true,
        bias: true,
        running: true,
        training: true,
        momentum: 0.1,
        layout,
        eps: 1e-5,
        param_f32: false,
        special: false,
    };
    let bare = |mut x: BatchSample| {
        x.weight = false;
        x.bias = false;
        x.running = false;
        x
    };
    let eval = |mut x: BatchSample| {
        x.training = false;
        x
    };
    let momentum = |mut x: BatchSample, m| {
        x.momentum = m;
        x
    };
    let mut weight_only = s(&[2, 12, 9, 11], Cf);
    weight_only.bias = false;
    weight_only.running = false;
    let mut special = s(&[6, 5, 4], Cf);
    special.special = true;
    let mut special_cl = s(&[3, 5, 2, 4], Cl);
    special_cl.special = true;
    // One value per channel (eval only): xhat can be anything, eps large.
    let mut one = eval(s(&[1, 4, 1, 1], Cl));
    one.eps = 0.5;
    let mut v = vec![
        s(&[5, 7], Cf),
        s(&[2, 5], Cf),
        s(&[1, 3, 2], Cf),
        s(&[4, 6, 9], Cf),
        s(&[4, 6, 9], Cl),
        momentum(s(&[3, 8, 5, 3], Cf), 0.3),
        momentum(s(&[3, 8, 5, 3], Cl), 1.0),
        bare(s(&[2, 10, 3, 4, 5], Cf)),
        bare(s(&[2, 10, 3, 4, 5], Cl)),
        weight_only,
        s(&[2, 300, 3, 3], Cl),
        s(&[16, 1000], Cf),
        eval(s(&[4, 6, 9], Cf)),
        eval(s(&[4, 6, 9], Cl)),
        eval(bare(s(&[3, 16, 8, 8], Cl))).with_running(),
        one,
        s(&[0, 4, 3], Cf),
        eval(s(&[0, 4, 3, 2], Cl)),
        special,
        special_cl,
        // channels split over several statistics blocks
        s(&[1, 16, 128, 128], Cf),
        s(&[8, 32, 64, 64], Cl),
    ];
    if matches!(kind, ElementKind::F16 | ElementKind::Bf16) {
        let f32_params = |mut x: BatchSample| {
            x.param_f32 = true;
            x
        };
        v.push(f32_params(s(&[3, 8, 5, 3], Cl)));
        v.push(f32_params(eval(s(&[4, 6, 9], Cf))));
        v.push(f32_params(s(&[16, 1000], Cf)));
    }
    if kind == ElementKind::Bf16 {
        let mut big = s(&[64, 256, 56, 56], Cl);
        big.param_f32 = true;
        v.push(big);
    }
    v
}

impl BatchSample {
    /// With running statistics (eval needs them).
    fn with_running(mut self) -> Self {
        self.running = true;
        self
    }
}

/// x (logical channels-first order, off-centre), weight, bias, running
/// mean and variance, dy. Parameters in f32 are pushed exact, rounded to
/// f32.
fn inputs(s: &BatchSample, rng: &mut Rng) -> Tensors {
    let n: usize = s.shape.iter().product();
    let c = s.shape[1];
    let mut x = rng.vec(n, -2.0, 2.0);
    x.iter_mut().for_each(|v| *v += 1.5);
    if s.special {
        // one special value in each of three channels (channels-first
        // order: channel c of batch 0 starts at c * spatial)
        let sp = s.spatial();
        x[1] = f64::NAN;
        x[sp + 1] = f64::INFINITY;
        x[2 * sp] = f64::NEG_INFINITY;
    }
    let mut t = Tensors::default();
    t.push("x", x);
    let param = |t: &mut Tensors, name: &str, v: Vec<f64>| {
        if s.param_f32 {
            t.push_exact(name, round_to(ElementKind::F32, &v));
        } else {
            t.push(name, v);
        }
    };
    if s.weight {
        param(&mut t, "weight", rng.vec(c, 0.5, 1.5));
    }
    if s.bias {
        param(&mut t, "bias", rng.vec(c, -1.0, 1.0));
    }
    if s.running {
        param(&mut t, "running_mean", rng.vec(c, -0.5, 0.5));
        param(&mut t, "running_var", rng.vec(c, 0.5, 2.0));
    }
    t.push("dy", rng.vec(n, -1.0, 1.0));
    t
}

fn reference(_: ElementKind, s: &BatchSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let r = s.reference();
    let x = inputs.get("x");
    let (w, b) = (inputs.find("weight"), inputs.find("bias"));
    let running = inputs
        .find("running_mean")
        .map(|m| (m, inputs.get("running_var")));
    let out = r.forward(x, w, b, running);
    let mut t = Tensors::default();
    t.push("y", nan_marked(out.y));
    t.push("mean", nan_marked(out.mean));
    t.push("rstd", nan_marked(out.rstd));
    if s.running {
        t.push("running_mean", nan_marked(out.running_mean));
        t.push("running_var", nan_marked(out.running_var));
    }
    if got.find("dx").is_some() {
        let g = r.backward(x, w, inputs.get("dy"), running);
        push_grads(&mut t, g, (s.weight, s.bias));
    }
    t
}

/// dx's bound follows the terms it sums, not its value: in a channel of
/// two elements they cancel to a dx smaller by `eps / (var + eps)`.
fn tolerance(
    kind: ElementKind,
    s: &BatchSample,
    name: &str,
    want: &[f64],
    inputs: &Tensors,
) -> Tolerance {
    let m = s.m() as f64;
    let depth = (m + 2.0).log2();
    if name != "dx" {
        return affine_tolerance(kind, name, depth, m, want);
    }
    let running = inputs
        .find("running_mean")
        .map(|rm| (rm, inputs.get("running_var")));
    let terms = s.reference().dx_terms(
        inputs.get("x"),
        inputs.find("weight"),
        inputs.get("dy"),
        running,
    );
    let scaled = affine_tolerance(kind, name, depth, m, &terms);
    Tolerance {
        rtol: affine_tolerance(kind, name, depth, m, want).rtol,
        atol: scaled.atol,
    }
}

// ---------------------------------------------------------------------------
// Device runs
// ---------------------------------------------------------------------------

fn run(
    kind: ElementKind,
    s: &BatchSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    crate::with_float!(kind, T => if s.param_f32 {
        run_rank::<T, f32>(s, inputs, backward)
    } else {
        run_rank::<T, T>(s, inputs, backward)
    })
}

fn run_rank<T: Element, P: Element>(
    s: &BatchSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    match s.shape.len() {
        2 => run_ranked::<T, 2, P>(s, inputs, backward),
        3 => run_ranked::<T, 3, P>(s, inputs, backward),
        4 => run_ranked::<T, 4, P>(s, inputs, backward),
        5 => run_ranked::<T, 5, P>(s, inputs, backward),
        other => Err(format!("no test instance for rank {other}")),
    }
}

fn run_ranked<T: Element, const R: usize, P: Element>(
    s: &BatchSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let mode = if s.training { "training" } else { "eval" };
    let what = format!(
        "batch_norm {} (params {}) {:?} {:?} {mode}",
        T::KIND,
        P::KIND,
        s.shape,
        s.layout
    );
    let e = |e: Error| format!("{what}: {e}");
    let v = |e: Error| e.to_string();
    let plan = select::<BatchNormPlan<T, R, P>>(&s.descriptor::<R>(T::KIND), &Default::default())?;
    let shape: [usize; R] = std::array::from_fn(|i| s.shape[i]);
    let st = s.strides();
    let strides: [usize; R] = std::array::from_fn(|i| st[i]);
    let n: usize = s.shape.iter().product();
    let c = s.shape[1];
    let (xbuf, _) = upload::<T>(&scatter(inputs.get("x"), &s.shape, &st, n));
    let x = TensorRef::new(xbuf.as_slice(), shape, strides).map_err(v)?;
    let param = |name: &str| inputs.find(name).map(upload::<P>).map(|(b, _)| b);
    let (wbuf, bbuf) = (param("weight"), param("bias"));
    let (weight, bias) = (param_view(&wbuf, [c])?, param_view(&bbuf, [c])?);
    let (mut rmbuf, mut rvbuf) = (param("running_mean"), param("running_var"));
    let mut y = Guarded::<T>::new(n);
    let mut stats = Guarded::<u8>::new(plan.stats_bytes());
    let mut ws = workspace(plan.workspace_size());
    plan.run(
        &g.stream,
        Workspace::Borrowed(ws.as_slice_mut()),
        BatchNormArgs {
            x,
            weight,
            bias,
            running_mean: running_view(&mut rmbuf, c)?,
            running_var: running_view(&mut rvbuf, c)?,
            y: TensorMut::new(y.slice_mut(), shape, strides).map_err(v)?,
            stats: Some(stats.slice_mut()),
        },
    )
    .map_err(e)?;
    let mut t = Tensors::default();
    t.push("y", nan_marked(view_result(&what, &y, &s.shape, &st)?));
    if s.m() > 0 {
        let sv = stats_values(T::KIND, &stats.result(&format!("{what} stats"))?);
        t.push("mean", nan_marked(sv[..c].to_vec()));
        t.push("rstd", nan_marked(sv[c..].to_vec()));
    } else {
        // PyTorch's empty batch saves nothing (the reference has no
        // statistics either)
        stats.untouched(&format!("{what} stats of an empty batch"))?;
        t.push("mean", Vec::new());
        t.push("rstd", Vec::new());
    }
    for (name, b) in [("running_mean", &rmbuf), ("running_var", &rvbuf)] {
        if let Some(b) = b {
            t.push(name, nan_marked(download(b)));
        }
    }
    if !backward || s.special {
        return Ok(t);
    }
    let (dybuf, _) = upload::<T>(&scatter(inputs.get("dy"), &s.shape, &st, n));
    let dy = TensorRef::new(dybuf.as_slice(), shape, strides).map_err(v)?;
    let mut dx = Guarded::<T>::new(n);
    let mut dw = operand_if(s.weight, || Guarded::<P>::new(c));
    let mut db = operand_if(s.bias, || Guarded::<P>::new(c));
    let bw = |wants: Grads,
              dx: Option<TensorMut<'_, T, R>>,
              dweight: Option<TensorMut<'_, P, 1>>,
              dbias: Option<TensorMut<'_, P, 1>>| {
        let mut bws = workspace(plan.bw_workspace_size(wants));
        let args = BatchNormBwArgs {
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
    for (name, (buf, on)) in ["dweight", "dbias"]
        .into_iter()
        .zip([(&dw, s.weight), (&db, s.bias)])
    {
        if on {
            t.push(name, buf.result(&format!("{what} {name}"))?);
        } else {
            buf.untouched(&format!("{what} {name} (not asked)"))?;
        }
    }
    if s.weight {
        // dweight alone: the same values, dx untouched.
        let dx2 = not_an_operand(|| Guarded::<T>::new(n));
        let mut dw2 = Guarded::<P>::new(c);
        let wants = Grads::present(&[(Grad::Weight, true)]);
        bw(wants, None, grad_view(&mut dw2, true, [c])?, None)
            .map_err(|e| format!("{what} dweight alone: {e}"))?;
        t.push(
            "dweight alone",
            dw2.result(&format!("{what} dweight alone"))?,
        );
        dx2.untouched(&format!("{what} dx (not asked)"))?;
    }
    if !s.training && n > 0 {
        // dx alone in eval takes no sums: the same values.
        let mut dx3 = Guarded::<T>::new(n);
        let wants = Grads::present(&[(Grad::X, true)]);
        let dxv = Some(TensorMut::new(dx3.slice_mut(), shape, strides).map_err(v)?);
        bw(wants, dxv, None, None).map_err(|e| format!("{what} dx alone: {e}"))?;
        t.push(
            "dx alone",
            view_result(&format!("{what} dx alone"), &dx3, &s.shape, &st)?,
        );
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
    let desc = BatchNormDescriptor::batch_norm(ElementKind::F32, BAD_SHAPE);
    let sel = |d: &BatchNormDescriptor<3>, p: &PlanPreference| {
        BatchNormPlan::<f32, 3>::select(&g.stream, d, p)
    };
    let f64_desc = BatchNormDescriptor {
        element: ElementKind::F64,
        ..desc
    };
    b.own_kernel_select::<BatchNormPlan<f32, 3>>(&desc, &f64_desc)?;
    b.expect(
        "parameters in f64 for an f32 plan",
        sel(&desc.with_param(ElementKind::F64), &pref),
        dtype_mismatch,
        &[],
    )?;
    b.expect(
        "f32 activations with f16 parameters",
        BatchNormPlan::<f32, 3, half::f16>::select(
            &g.stream,
            &desc.with_param(ElementKind::F16),
            &pref,
        ),
        unsupported,
        &[],
    )?;
    b.expect(
        "one value per channel in training",
        BatchNormPlan::<f32, 2>::select(
            &g.stream,
            &BatchNormDescriptor::batch_norm(ElementKind::F32, [1, 8]),
            &pref,
        ),
        invalid_descriptor("shape"),
        &[],
    )?;
    b.expect(
        "eval without running statistics",
        sel(&desc.with_training(false).with_running_stats(false), &pref),
        invalid_descriptor("running_stats"),
        &[],
    )?;
    let empty = BatchNormDescriptor {
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
    b.expect(
        "momentum infinite",
        sel(&desc.with_momentum(f64::INFINITY), &pref),
        invalid_descriptor("momentum"),
        &[],
    )?;
    let rank1 = BatchNormDescriptor::batch_norm(ElementKind::F32, [8]);
    b.expect(
        "rank 1",
        BatchNormPlan::<f32, 1>::select(&g.stream, &rank1, &pref),
        unsupported,
        &[],
    )?;

    let plan = sel(&desc, &pref).map_err(|e| e.to_string())?;
    let n: usize = BAD_SHAPE.iter().product();
    let mut rng = Rng::new(0xB47C);
    let (xb, _) = upload::<f32>(&rng.vec(n, -1.0, 1.0));
    let (wb, _) = upload::<f32>(&rng.vec(8, 0.5, 1.5));
    let mut rm = Guarded::<f32>::new(8);
    let mut rv = Guarded::<f32>::new(8);
    let x = TensorRef::contiguous(xb.as_slice(), BAD_SHAPE).map_err(|e| e.to_string())?;
    let w = TensorRef::contiguous(wb.as_slice(), [8]).map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(n);
    let mut st = Guarded::<u8>::new(plan.stats_bytes());
    let mut ws = workspace(plan.workspace_size());
    // The running statistics are Guarded (NaN): the bad inputs must leave
    // them so.
    macro_rules! fw {
        ($x:expr, $w:expr, $bias:expr, $rm:expr, $y:expr, $stats:expr, $with_ws:expr) => {{
            let ws = if $with_ws {
                Workspace::Borrowed(ws.as_slice_mut())
            } else {
                Workspace::None
            };
            let args = BatchNormArgs {
                x: $x,
                weight: $w,
                bias: $bias,
                running_mean: $rm,
                running_var: Some(TensorMut::contiguous(rv.slice_mut(), [8]).expect("rv")),
                y: $y,
                stats: $stats,
            };
            plan.run(&g.stream, ws, args)
        }};
    }
    let x5 = TensorRef::contiguous(xb.as_slice(), [2, 8, 5]).map_err(|e| e.to_string())?;
    let r = fw!(x5, Some(w), Some(w), rmv(&mut rm), yv(&mut y), None, true);
    b.expect("x [2, 8, 5]", r, shape_mismatch("x"), &[&y, &rm, &rv])?;
    // channels-last strides given to a channels-first plan
    let xl = TensorRef::new(xb.as_slice(), BAD_SHAPE, [96, 1, 8]).map_err(|e| e.to_string())?;
    let r = fw!(xl, Some(w), Some(w), rmv(&mut rm), yv(&mut y), None, true);
    b.expect("x channels-last", r, invalid_argument("x"), &[&y, &rm, &rv])?;
    let r = fw!(x, None, Some(w), rmv(&mut rm), yv(&mut y), None, true);
    b.expect(
        "weight missing",
        r,
        invalid_argument("weight"),
        &[&y, &rm, &rv],
    )?;
    let w4 = TensorRef::contiguous(wb.as_slice().slice(0..4).expect("w4"), [4])
        .map_err(|e| e.to_string())?;
    let r = fw!(x, Some(w), Some(w4), rmv(&mut rm), yv(&mut y), None, true);
    b.expect("bias [4]", r, shape_mismatch("bias"), &[&y, &rm, &rv])?;
    let r = fw!(x, Some(w), Some(w), None, yv(&mut y), None, true);
    b.expect(
        "running mean missing",
        r,
        invalid_argument("running_mean"),
        &[&y, &rv],
    )?;
    let mut rm4 = Guarded::<f32>::new(4);
    let rm4v = Some(TensorMut::contiguous(rm4.slice_mut(), [4]).expect("rm4"));
    let r = fw!(x, Some(w), Some(w), rm4v, yv(&mut y), None, true);
    b.expect(
        "running mean [4]",
        r,
        shape_mismatch("running_mean"),
        &[&y, &rm4, &rv],
    )?;
    // SAFETY: never dereferenced: run rejects the context first.
    let foreign = unsafe { DeviceSlice::<f32>::from_raw_parts(xb.as_slice().addr(), n, 0xDEAD) };
    let xf = TensorRef::contiguous(foreign, BAD_SHAPE).map_err(|e| e.to_string())?;
    let r = fw!(xf, Some(w), Some(w), rmv(&mut rm), yv(&mut y), None, true);
    b.expect(
        "x on another context",
        r,
        |e| matches!(e, Error::ContextMismatch { arg: "x", .. }),
        &[&y, &rm, &rv],
    )?;
    let mut short = Guarded::<u8>::new(8);
    let r = fw!(
        x,
        Some(w),
        Some(w),
        rmv(&mut rm),
        yv(&mut y),
        Some(short.slice_mut()),
        true
    );
    b.expect(
        "statistics of 8 bytes",
        r,
        invalid_argument("stats"),
        &[&y, &short, &rm, &rv],
    )?;
    let r = fw!(x, Some(w), Some(w), rmv(&mut rm), yv(&mut y), None, false);
    b.expect("no workspace", r, workspace_too_small, &[&y, &rm, &rv])?;
    // the running mean inside the weight's memory
    let ws_ = wb.as_slice();
    // SAFETY: a bad-input test: the run must reject the aliasing view
    // before anything is enqueued.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(ws_.addr(), 8, ws_.ctx_id()) };
    let rma = Some(TensorMut::contiguous(alias, [8]).expect("alias"));
    let r = fw!(x, Some(w), Some(w), rma, yv(&mut y), None, true);
    b.expect(
        "running mean over the weight",
        r,
        invalid_argument("running_mean"),
        &[&y, &rv],
    )?;
    // y inside x's memory
    let xs = xb.as_slice();
    // SAFETY: as above.
    let alias =
        unsafe { DeviceSliceMut::<f32>::from_raw_parts(xs.addr() + 32, n - 8, xs.ctx_id()) };
    let ya = TensorMut::contiguous(alias, [2, 8, 11]).expect("alias");
    let x11 = TensorRef::contiguous(xs.slice(0..176).expect("x11"), [2, 8, 11])
        .map_err(|e| e.to_string())?;
    let plan11 = sel(
        &BatchNormDescriptor {
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
        BatchNormArgs {
            x: x11,
            weight: Some(w),
            bias: Some(w),
            running_mean: rmv(&mut rm),
            running_var: Some(TensorMut::contiguous(rv.slice_mut(), [8]).expect("rv")),
            y: ya,
            stats: None,
        },
    );
    b.expect("y overlapping x", r, invalid_argument("y"), &[&rm, &rv])?;
    let bare = sel(
        &desc
            .with_weight(false)
            .with_bias(false)
            .with_running_stats(false),
        &pref,
    )
    .map_err(|e| e.to_string())?;
    let mut bws0 = workspace(bare.workspace_size());
    let r = bare.run(
        &g.stream,
        Workspace::Borrowed(bws0.as_slice_mut()),
        BatchNormArgs {
            x,
            weight: None,
            bias: Some(w),
            running_mean: None,
            running_var: None,
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
    let r = bare.run(
        &g.stream,
        Workspace::Borrowed(bws0.as_slice_mut()),
        BatchNormArgs {
            x,
            weight: None,
            bias: None,
            running_mean: rmv(&mut rm),
            running_var: None,
            y: yv(&mut y),
            stats: None,
        },
    );
    b.expect(
        "running mean without running statistics in the descriptor",
        r,
        invalid_argument("running_mean"),
        &[&y, &rm],
    )?;

    // Backward: statistics from a good forward first (running statistics
    // from a plan without them, so the NaN guards above stay meaningful).
    let r = bare.run(
        &g.stream,
        Workspace::Borrowed(bws0.as_slice_mut()),
        BatchNormArgs {
            x,
            weight: None,
            bias: None,
            running_mean: None,
            running_var: None,
            y: yv(&mut y),
            stats: Some(st.slice_mut()),
        },
    );
    r.map_err(|e| format!("a good forward: {e}"))?;
    let (dyb, _) = upload::<f32>(&rng.vec(n, -1.0, 1.0));
    let dy = TensorRef::contiguous(dyb.as_slice(), BAD_SHAPE).map_err(|e| e.to_string())?;
    let mut bws = workspace(plan.bw_workspace_size(plan.grads()));
    let bw = |plan: &BatchNormPlan<f32, 3>,
              ws: Option<&mut DeviceBuffer<u8>>,
              weight,
              stats,
              dx: Option<TensorMut<'_, f32, 3>>,
              dweight: Option<TensorMut<'_, f32, 1>>| {
        let ws = ws.map_or(Workspace::None, |w| Workspace::Borrowed(w.as_slice_mut()));
        let args = BatchNormBwArgs {
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

/// A running statistic's view, when the sample has it.
fn running_view<P: Element>(
    b: &mut Option<DeviceBuffer<P>>,
    c: usize,
) -> Result<Option<TensorMut<'_, P, 1>>, String> {
    b.as_mut()
        .map(|b| TensorMut::contiguous(b.as_slice_mut(), [c]).map_err(|e| e.to_string()))
        .transpose()
}

/// A running statistic of `BAD_SHAPE`'s 8 channels as a view.
fn rmv(rm: &mut Guarded<f32>) -> Option<TensorMut<'_, f32, 1>> {
    Some(TensorMut::contiguous(rm.slice_mut(), [8]).expect("running statistic"))
}

/// `y` as a `BAD_SHAPE` view.
fn yv(y: &mut Guarded<f32>) -> TensorMut<'_, f32, 3> {
    TensorMut::contiguous(y.slice_mut(), BAD_SHAPE).expect("y")
}

/// Selecting on `kind`, which the row does not claim, is `Unsupported`.
fn unsupported_dtype(kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = BatchNormDescriptor::batch_norm(kind, [2, 4, 3]);
        expect_unsupported::<BatchNormPlan<T, 3>>(&format!("batch_norm on {kind}"), &desc)
    })
}
