//! GPU tests of Gumbel-softmax: one op-table row per form (soft, hard) and
//! noise (given, Philox), against `reference::softmax::gumbel_softmax`.
//!
//! Given noise: the device's `z = (logits + g) / tau` is PyTorch's in the
//! dtype (the reference rounds the same way), the soft sample is compared
//! with the f64 softmax of it, the hard sample with the one-hot of the
//! device's own soft sample (so near-ties cannot flip the check), dx with
//! the straight-through gradient at the device's soft sample. Philox noise:
//! `run_noise`'s gumbels against the host Philox-4x32-10 stream and
//! PyTorch's transform, then the Philox forward bit for bit against the
//! given-noise forward of those gumbels, and the rest as above. Samples:
//! extent 1, tails, a row per block and many, the dim strided (element
//! loads over few and many rows), transposed, broadcast logits,
//! strided and misaligned outputs, rank 8, empty, NaN/inf rows, several
//! temperatures, and a realistic [256, 4096].

use baracuda_kernels::reference::softmax as r;
use baracuda_kernels::*;

use crate::harness::*;
use crate::reduce::{nan_marked, out_layout, subnormal_spacing, view_result, x_layout, Layout};
use crate::table::{BadInputs, OpCase, Tensors};

/// One Gumbel-softmax problem of a row.
#[derive(Clone, Debug)]
pub struct GumbelSample {
    shape: Vec<usize>,
    dim: usize,
    layout: Layout,
    tau: f64,
    hard: bool,
    noise: GumbelNoise,
    /// NaN, +inf and -inf logits in the first rows (forward only).
    special: bool,
}

impl GumbelSample {
    fn n(&self) -> usize {
        self.shape[self.dim]
    }
    /// Row-major indices of the elements of row `k`.
    fn row(&self, k: usize) -> Vec<usize> {
        let inner: usize = self.shape[self.dim + 1..].iter().product();
        let (o, j) = (k / inner, k % inner);
        (0..self.n())
            .map(|i| (o * self.n() + i) * inner + j)
            .collect()
    }
}

/// The Philox key and offset every Philox sample draws with.
const SEED: u64 = 0x5EED_2026;
const OFFSET: u64 = 12;

/// The row of the hard (`HARD`) or soft form with Philox (`PHILOX`) or
/// given noise.
pub const fn row<const HARD: bool, const PHILOX: bool>(name: &'static str) -> OpCase<GumbelSample> {
    OpCase {
        name,
        dtypes: FLOATS,
        backward: true,
        samples: |_| {
            samples(
                HARD,
                if PHILOX {
                    GumbelNoise::Philox
                } else {
                    GumbelNoise::Given
                },
            )
        },
        inputs,
        run,
        reference,
        tolerance,
        bad_inputs: || bad_inputs(HARD),
        unsupported,
    }
}

/// The Gumbel-softmax rows of the op table.
pub(crate) static ROWS: &[&dyn crate::table::Row] = &[
    &row::<false, false>("gumbel_softmax_soft"),
    &row::<true, false>("gumbel_softmax_hard"),
    &row::<false, true>("gumbel_softmax_soft_philox"),
    &row::<true, true>("gumbel_softmax_hard_philox"),
];

crate::table_tests!(
    ROWS;
    gumbel_softmax_soft,
    gumbel_softmax_hard,
    gumbel_softmax_soft_philox,
    gumbel_softmax_hard_philox,
);

fn samples(hard: bool, noise: GumbelNoise) -> Vec<GumbelSample> {
    use Layout::*;
    let s = |shape: &[usize], dim: usize, layout, tau: f64| GumbelSample {
        shape: shape.to_vec(),
        dim,
        layout,
        tau,
        hard,
        noise,
        special: false,
    };
    let mut special = s(&[6, 33], 1, Contiguous, 1.0);
    special.special = true;
    vec![
        s(&[1], 0, Contiguous, 1.0),
        s(&[7, 1], 1, Contiguous, 0.5),
        s(&[37, 29], 1, Contiguous, 1.0),
        s(&[300, 7], 1, StridedOut, 2.0),
        s(&[5, 100], 1, Misaligned, 0.7),
        s(&[9, 4099], 1, Contiguous, 1.0),
        s(&[2, 40000], 1, StridedOut, 0.25),
        s(&[4097, 3], 0, Contiguous, 1.0),
        s(&[40, 8200], 0, Contiguous, 1.5),
        s(&[3, 5, 7, 9], 2, Contiguous, 1.0),
        s(&[6, 50, 70], 2, Transposed, 0.5),
        s(&[8, 300], 1, Broadcast, 1.0),
        s(&[2, 3, 1, 2, 3, 2, 1, 5], 4, Contiguous, 1.0),
        s(&[0, 7], 1, Contiguous, 1.0),
        s(&[5, 0], 1, Contiguous, 1.0),
        special,
        s(&[256, 4096], 1, Contiguous, 1.0),
    ]
}

fn inputs(s: &GumbelSample, rng: &mut Rng) -> Tensors {
    let n: usize = s.shape.iter().product();
    let mut x = rng.vec(n, -4.0, 4.0);
    if s.layout == Layout::Broadcast {
        let inner = n / s.shape[0].max(1);
        for i in inner..n {
            x[i] = x[i % inner];
        }
    }
    if s.special {
        let inf = f64::INFINITY;
        x[s.row(0)[1]] = f64::NAN;
        x[s.row(1)[2]] = inf;
        for i in s.row(2) {
            x[i] = -inf;
        }
        x[s.row(3)[0]] = -inf;
    }
    let mut t = Tensors::default();
    t.push("logits", x);
    if s.noise == GumbelNoise::Given {
        // gumbels as PyTorch draws them: -log(-log u)
        let g = rng
            .vec(n, 1e-6, 1.0)
            .into_iter()
            .map(|u| -(-u.ln()).ln())
            .collect();
        t.push("g", g);
    }
    t.push("dy", rng.vec(n, -1.0, 1.0));
    t
}

/// `1 / tau` as the device takes it: in f32 but on f64.
fn inv_tau(kind: ElementKind, tau: f64) -> f64 {
    if kind == ElementKind::F64 {
        1.0 / tau
    } else {
        f64::from(1.0f32 / tau as f32)
    }
}

/// Half of `kind`'s machine epsilon... doubled: PyTorch's epsilon.
fn epsilon(kind: ElementKind) -> f64 {
    match kind {
        ElementKind::F64 => f64::EPSILON,
        ElementKind::F16 => 2f64.powi(-10),
        ElementKind::Bf16 => 2f64.powi(-7),
        _ => f64::from(f32::EPSILON),
    }
}

fn reference(kind: ElementKind, s: &GumbelSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let round = |v: f64| round_to(kind, &[v])[0];
    let mut t = Tensors::default();
    let g: Vec<f64> = match s.noise {
        GumbelNoise::Given => inputs.get("g").to_vec(),
        _ => {
            let n: usize = s.shape.iter().product();
            let wide = kind == ElementKind::F64;
            let g: Vec<f64> = (0..n as u64)
                .map(|i| {
                    r::gumbel_of_uniform(
                        r::gumbel_uniform(i, OFFSET, SEED, wide),
                        epsilon(kind),
                        round,
                    )
                })
                .collect();
            t.push("g", g);
            // the forward reads the device's gumbels (compared just above)
            got.get("g").to_vec()
        }
    };
    let inv = inv_tau(kind, s.tau);
    let z: Vec<f64> = inputs
        .get("logits")
        .iter()
        .zip(&g)
        .map(|(x, g)| round(round(x + g) * inv))
        .collect();
    let soft = r::softmax(SoftmaxOp::Softmax, &s.shape, s.dim, &z);
    let soft_name = if s.hard { "soft" } else { "y" };
    t.push(soft_name, nan_marked(soft));
    if s.hard {
        // the device's soft sample, its NaN (marked) restored
        let soft_got: Vec<f64> = got
            .get("soft")
            .iter()
            .map(|&v| if v == f64::MAX { f64::NAN } else { v })
            .collect();
        t.push(
            "y",
            nan_marked(r::hard_sample(&s.shape, s.dim, &soft_got, round)),
        );
    }
    if got.find("dx").is_some() {
        let soft_got = got.get(soft_name);
        let dx = r::gumbel_softmax_backward(&s.shape, s.dim, s.tau, soft_got, inputs.get("dy"));
        t.push("dx", dx);
    }
    t
}

fn tolerance(
    kind: ElementKind,
    s: &GumbelSample,
    name: &str,
    want: &[f64],
    _: &Tensors,
) -> Tolerance {
    let (u_t, u_acc) = (kind.unit_roundoff(), acc_roundoff(kind));
    let n = s.n().max(1);
    let k = (n.div_ceil(1024).max(1) * 4 + 12) as f64;
    let tiny = subnormal_spacing(kind);
    let z_max = 24.0 / s.tau;
    match (name, s.hard) {
        // a gumbel from another log: one rounding of E may differ, which
        // moves g by about u_t absolutely
        ("g", _) => Tolerance {
            rtol: 4.0 * u_t + 16.0 * u_acc,
            atol: 4.0 * u_t,
        },
        // the one-hot of the device's own soft sample, one rounding each
        ("y", true) => Tolerance {
            rtol: 2.0 * u_t,
            atol: tiny,
        },
        ("y", false) | ("soft", _) => Tolerance {
            rtol: 2.0 * u_t + (16.0 + 8.0 * z_max + 4.0 * k) * u_acc,
            atol: tiny,
        },
        // soft (dy - sum(dy soft)) rounded, then times 1 / tau rounded
        _ => {
            let mut t =
                Tolerance::of_max(6.0 * u_t + 8.0 * u_acc, 4.0 * u_t + 8.0 * k * u_acc, want);
            t.atol += tiny;
            t
        }
    }
}

macro_rules! by_rank {
    ($n:expr, $N:ident => $body:expr) => {
        by_rank!(@ $n, $N, $body; 1 2 3 4 8)
    };
    (@ $n:expr, $N:ident, $body:expr; $($a:literal)*) => {
        match $n {
            $($a => {
                const $N: usize = $a;
                $body
            })*
            other => Err(format!("no test instance for rank {other}")),
        }
    };
}

fn run(
    kind: ElementKind,
    s: &GumbelSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    crate::with_float!(kind, T => by_rank!(s.shape.len(), N => run_ranked::<T, N>(s, inputs, backward)))
}

fn run_ranked<T: Element, const N: usize>(
    s: &GumbelSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let st = &g.stream;
    let what = format!(
        "gumbel_softmax {} {:?} dim {} tau {} hard {} {:?}",
        T::KIND,
        s.shape,
        s.dim,
        s.tau,
        s.hard,
        s.noise
    );
    let desc = GumbelSoftmaxDescriptor::new(T::KIND, arr::<N>(&s.shape), s.tau)
        .with_dim(s.dim)
        .with_hard(s.hard);
    let given = select::<GumbelSoftmaxPlan<T, N>>(&desc, &PlanPreference::default())?;
    let philox = select::<GumbelSoftmaxPlan<T, N>>(
        &desc.with_noise(GumbelNoise::Philox),
        &PlanPreference::default(),
    )?;
    let (xs, x_len, x_off) = x_layout(s.layout, &s.shape);
    let xbuf = upload_strided::<T>(inputs.get("logits"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<N>(&s.shape)?;
    let total: usize = s.shape.iter().product();
    let dense = contiguous(&s.shape);
    let mut t = Tensors::default();
    // the gumbels: given, or Philox's as run_noise writes them
    let (g_buf, _) = match s.noise {
        GumbelNoise::Given => upload::<T>(inputs.get("g")),
        _ => {
            let mut gb = Guarded::<T>::new(total);
            let view = TensorMut::new(gb.slice_mut(), arr::<N>(&s.shape), arr::<N>(&dense))
                .map_err(|e| e.to_string())?;
            philox
                .run_noise(st, SEED, OFFSET, view)
                .map_err(|e| format!("{what} run_noise: {e}"))?;
            let vals = view_result(&format!("{what} g"), &gb, &s.shape, &dense)?;
            t.push("g", vals.clone());
            upload::<T>(&vals)
        }
    };
    let g_view = TensorRef::new(g_buf.as_slice(), arr::<N>(&s.shape), arr::<N>(&dense))
        .map_err(|e| e.to_string())?;
    let (ys, y_len) = out_layout(s.layout, &s.shape);
    let fw = |plan: &GumbelSoftmaxPlan<T, N>,
              noise: GumbelNoiseRef<'_, T, N>,
              outs: Vec<DeviceSliceMut<'_, T>>| {
        let mut outs = outs.into_iter();
        let (shape, strides) = (arr::<N>(&s.shape), arr::<N>(&ys));
        let y =
            TensorMut::new(outs.next().expect("y"), shape, strides).map_err(|e| e.to_string())?;
        let soft = match outs.next() {
            Some(o) => Some(TensorMut::new(o, shape, strides).map_err(|e| e.to_string())?),
            None => None,
        };
        plan.run(
            st,
            Workspace::None,
            GumbelSoftmaxArgs {
                logits: x,
                noise,
                y,
                soft,
            },
        )
        .map_err(|e| format!("{what}: {e}"))
    };
    let outs: Vec<crate::reduce::OutView<'_>> = if s.hard {
        vec![(y_len, &s.shape, &ys), (y_len, &s.shape, &ys)]
    } else {
        vec![(y_len, &s.shape, &ys)]
    };
    let noise = || match s.noise {
        GumbelNoise::Given => GumbelNoiseRef::Given(g_view),
        _ => GumbelNoiseRef::Philox {
            seed: SEED,
            offset: OFFSET,
        },
    };
    let plan = if s.noise == GumbelNoise::Given {
        &given
    } else {
        &philox
    };
    let mut written = crate::reduce::run_twice_each(&what, &outs, |o| fw(plan, noise(), o))?;
    if s.noise != GumbelNoise::Given {
        // the Philox forward is the given-noise forward of its gumbels
        let again = crate::reduce::run_twice_each(&what, &outs, |o| {
            fw(&given, GumbelNoiseRef::Given(g_view), o)
        })?;
        for ((_, a), (_, b)) in written.iter().zip(&again) {
            if let Some(i) =
                (0..a.len()).find(|&i| !(a[i] == b[i] || (a[i].is_nan() && b[i].is_nan())))
            {
                return Err(format!(
                    "{what}: Philox and given-noise runs differ at {i}: {} against {}",
                    a[i], b[i]
                ));
            }
        }
    }
    let soft_written = if s.hard { written.pop() } else { None };
    let (y, y_vals) = written.pop().expect("y");
    t.push("y", nan_marked(y_vals));
    if let Some((_, v)) = &soft_written {
        t.push("soft", nan_marked(v.clone()));
    }
    if !backward || s.special {
        return Ok(t);
    }
    let soft = soft_written.as_ref().map_or(&y, |(b, _)| b);
    let soft_view = TensorRef::new(soft.slice(), arr::<N>(&s.shape), arr::<N>(&ys))
        .map_err(|e| e.to_string())?;
    let (dy, _) = upload::<T>(inputs.get("dy"));
    let dy = TensorRef::new(dy.as_slice(), arr::<N>(&s.shape), arr::<N>(&dense))
        .map_err(|e| e.to_string())?;
    let mut dx = Guarded::<T>::new(y_len);
    plan.run_bw(
        st,
        Workspace::None,
        GumbelSoftmaxBwArgs {
            soft: soft_view,
            dy,
            dx: TensorMut::new(dx.slice_mut(), arr::<N>(&s.shape), arr::<N>(&ys))
                .map_err(|e| e.to_string())?,
        },
    )
    .map_err(|e| format!("{what} backward: {e}"))?;
    t.push(
        "dx",
        view_result(&format!("{what} dx"), &dx, &s.shape, &ys)?,
    );
    Ok(t)
}

/// Every select and run check, each returning its error and writing
/// nothing.
fn bad_inputs(hard: bool) -> Result<usize, String> {
    let g = gpu();
    let st = &g.stream;
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let desc = GumbelSoftmaxDescriptor::new(ElementKind::F32, [4, 96], 0.5).with_hard(hard);
    let sel = |d: &GumbelSoftmaxDescriptor<2>| GumbelSoftmaxPlan::<f32, 2>::select(st, d, &pref);
    let f64_desc = GumbelSoftmaxDescriptor {
        element: ElementKind::F64,
        ..desc
    };
    b.own_kernel_select::<GumbelSoftmaxPlan<f32, 2>>(&desc, &f64_desc)?;
    b.expect(
        "dim 2 of rank 2",
        sel(&desc.with_dim(2)),
        invalid_descriptor("dim"),
        &[],
    )?;
    for tau in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let bad = GumbelSoftmaxDescriptor { tau, ..desc };
        b.expect(
            &format!("tau {tau}"),
            sel(&bad),
            invalid_descriptor("tau"),
            &[],
        )?;
    }
    let plan = sel(&desc).map_err(|e| e.to_string())?;
    let mut rng = Rng::new(0x6A3B);
    let (xb, _) = upload::<f32>(&rng.vec(8 * 96, -1.0, 1.0));
    let x = TensorRef::contiguous(xb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let x3 = TensorRef::contiguous(xb.as_slice(), [3, 96]).map_err(|e| e.to_string())?;
    let (gb, _) = upload::<f32>(&rng.vec(4 * 96, -1.0, 1.0));
    let gumbels = GumbelNoiseRef::Given(
        TensorRef::contiguous(gb.as_slice(), [4, 96]).map_err(|e| e.to_string())?,
    );
    let mut y = Guarded::<f32>::new(4 * 96);
    let mut soft = Guarded::<f32>::new(4 * 96);
    let r = fw(
        &plan,
        x3,
        gumbels_again(&gb)?,
        view(&mut y)?,
        soft_arg(hard, &mut soft)?,
    );
    b.expect("logits [3, 96]", r, shape_mismatch("logits"), &[&y, &soft])?;
    let r = fw(
        &plan,
        x,
        GumbelNoiseRef::Given(x3),
        view(&mut y)?,
        soft_arg(hard, &mut soft)?,
    );
    b.expect("noise [3, 96]", r, shape_mismatch("noise"), &[&y, &soft])?;
    let r = fw(
        &plan,
        x,
        GumbelNoiseRef::Philox { seed: 1, offset: 0 },
        view(&mut y)?,
        soft_arg(hard, &mut soft)?,
    );
    b.expect(
        "Philox noise to a given-noise plan",
        r,
        invalid_argument("noise"),
        &[&y, &soft],
    )?;
    // soft missing (hard) or given (soft)
    let wrong_soft = if hard { None } else { Some(view(&mut soft)?) };
    let r = fw(&plan, x, gumbels, view(&mut y)?, wrong_soft);
    b.expect(
        "soft of the other form",
        r,
        invalid_argument("soft"),
        &[&y, &soft],
    )?;
    // y over the logits
    let xs = xb.as_slice();
    // SAFETY: a bad-input test: the run must reject the aliasing view
    // before anything is enqueued, so nothing reads or writes through it.
    let alias =
        unsafe { DeviceSliceMut::<f32>::from_raw_parts(xs.addr() + 64, 4 * 96, xs.ctx_id()) };
    let r = fw(
        &plan,
        x,
        gumbels_again(&gb)?,
        TensorMut::contiguous(alias, [4, 96]).map_err(|e| e.to_string())?,
        soft_arg(hard, &mut soft)?,
    );
    b.expect("y over the logits", r, invalid_argument("y"), &[&soft])?;
    if hard {
        // soft over the noise
        let gs = gb.as_slice();
        // SAFETY: as above: rejected before anything is enqueued.
        let alias =
            unsafe { DeviceSliceMut::<f32>::from_raw_parts(gs.addr(), 4 * 96, gs.ctx_id()) };
        let r = fw(
            &plan,
            x,
            gumbels_again(&gb)?,
            view(&mut y)?,
            Some(TensorMut::contiguous(alias, [4, 96]).map_err(|e| e.to_string())?),
        );
        b.expect("soft over the noise", r, invalid_argument("soft"), &[&y])?;
    }
    // run_noise
    let mut g5 = Guarded::<f32>::new(5 * 96);
    let r = plan.run_noise(
        st,
        1,
        0,
        TensorMut::contiguous(g5.slice_mut(), [5, 96]).map_err(|e| e.to_string())?,
    );
    b.expect("run_noise g [5, 96]", r, shape_mismatch("g"), &[&g5])?;
    // Backward.
    let (dyb, _) = upload::<f32>(&rng.vec(4 * 96, -1.0, 1.0));
    let dy = TensorRef::contiguous(dyb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let mut dx = Guarded::<f32>::new(4 * 96);
    let r = bw(&plan, x3, dy, view(&mut dx)?);
    b.expect("soft [3, 96]", r, shape_mismatch("soft"), &[&dx])?;
    let r = bw(&plan, x, x3, view(&mut dx)?);
    b.expect("dy [3, 96]", r, shape_mismatch("dy"), &[&dx])?;
    let ds = dyb.as_slice();
    // SAFETY: as above: rejected before anything is enqueued.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(ds.addr(), 4 * 96, ds.ctx_id()) };
    let r = bw(
        &plan,
        x,
        dy,
        TensorMut::contiguous(alias, [4, 96]).map_err(|e| e.to_string())?,
    );
    b.expect("dx over dy", r, invalid_argument("dx"), &[])?;
    b.done()
}

/// `plan.run` without a workspace.
fn fw(
    plan: &GumbelSoftmaxPlan<f32, 2>,
    logits: TensorRef<'_, f32, 2>,
    noise: GumbelNoiseRef<'_, f32, 2>,
    y: TensorMut<'_, f32, 2>,
    soft: Option<TensorMut<'_, f32, 2>>,
) -> baracuda_kernels::Result<()> {
    let args = GumbelSoftmaxArgs {
        logits,
        noise,
        y,
        soft,
    };
    plan.run(&gpu().stream, Workspace::None, args)
}

/// `plan.run_bw` without a workspace.
fn bw(
    plan: &GumbelSoftmaxPlan<f32, 2>,
    soft: TensorRef<'_, f32, 2>,
    dy: TensorRef<'_, f32, 2>,
    dx: TensorMut<'_, f32, 2>,
) -> baracuda_kernels::Result<()> {
    plan.run_bw(
        &gpu().stream,
        Workspace::None,
        GumbelSoftmaxBwArgs { soft, dy, dx },
    )
}

/// A `[4, 96]` view of `o`.
fn view(o: &mut Guarded<f32>) -> Result<TensorMut<'_, f32, 2>, String> {
    TensorMut::contiguous(o.slice_mut(), [4, 96]).map_err(|e| e.to_string())
}

/// The `soft` argument of the hard form (a `[4, 96]` view of `o`), None
/// for the soft form.
fn soft_arg(hard: bool, o: &mut Guarded<f32>) -> Result<Option<TensorMut<'_, f32, 2>>, String> {
    if hard {
        view(o).map(Some)
    } else {
        Ok(None)
    }
}

/// The given noise of `gb` as a `[4, 96]` view.
fn gumbels_again(gb: &DeviceBuffer<f32>) -> Result<GumbelNoiseRef<'_, f32, 2>, String> {
    Ok(GumbelNoiseRef::Given(
        TensorRef::contiguous(gb.as_slice(), [4, 96]).map_err(|e| e.to_string())?,
    ))
}

/// Selecting on `kind`, which no row claims, is `Unsupported`.
fn unsupported(kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = GumbelSoftmaxDescriptor::new(kind, [8, 3], 1.0);
        expect_unsupported::<GumbelSoftmaxPlan<T, 2>>(&format!("gumbel_softmax on {kind}"), &desc)
    })
}
