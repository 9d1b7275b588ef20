//! GPU tests of the scans: one op-table row per [`ScanOp`], against
//! `reference::reduce::scan`.
//!
//! Every row runs the same samples: one long line (many tiles of the
//! block kernel), lines with tails, outer-dim scans (the thread kernel and
//! the block kernel over strided lines), transposed, broadcast (stride
//! 0), misaligned and strided-output views, size-1 and empty dims, rank 8,
//! ties, NaN/inf (forward), zeros (cumprod), and two realistic shapes;
//! each in turn inclusive or exclusive (not cummax/cummin) and forward or
//! reversed. Each forward runs twice, the second time into a zero-filled
//! output: both must agree bit for bit.

use baracuda_kernels::reference::reduce::scan::{self as r, Scan};
use baracuda_kernels::*;

use crate::harness::*;
use crate::reduce::{view_result, Layout, Values};
use crate::table::{BadInputs, OpCase, Tensors};

/// One scan problem of a row.
#[derive(Clone, Debug)]
pub struct ScanSample {
    op: ScanOp,
    shape: Vec<usize>,
    dim: usize,
    exclusive: bool,
    reverse: bool,
    layout: Layout,
    values: Values,
}

impl ScanSample {
    fn problem(&self) -> Scan {
        Scan {
            op: self.op,
            shape: self.shape.clone(),
            dim: self.dim,
            exclusive: self.exclusive,
            reverse: self.reverse,
        }
    }
    fn len(&self) -> usize {
        self.shape[self.dim]
    }
    fn n(&self) -> usize {
        self.shape.iter().product()
    }
    /// x's strides, buffer length and offset.
    fn x_layout(&self) -> (Vec<usize>, usize, usize) {
        let s = &self.shape;
        let n = self.n();
        match self.layout {
            Layout::Transposed => {
                let mut st = vec![1; s.len()];
                for d in 1..s.len() {
                    st[d] = st[d - 1] * s[d - 1].max(1);
                }
                (st, n, 0)
            }
            Layout::Broadcast => {
                let mut st = contiguous(s);
                st[0] = 0;
                (st, n / s[0].max(1), 0)
            }
            Layout::Misaligned => (contiguous(s), n + 1, 1),
            _ => (contiguous(s), n, 0),
        }
    }
    /// Strides and buffer length of an output (y, indices, dx).
    fn out_layout(&self) -> (Vec<usize>, usize) {
        let n = self.n();
        match self.layout {
            Layout::StridedOut => (
                contiguous(&self.shape).iter().map(|s| 2 * s).collect(),
                2 * n,
            ),
            _ => (contiguous(&self.shape), n),
        }
    }
    /// Flat indices of the first `k` elements of each of the first
    /// `lines` lines, in scan order.
    fn line_starts(&self, lines: usize, k: usize) -> Vec<Vec<usize>> {
        let inner: usize = self.shape[self.dim + 1..].iter().product();
        let len = self.len();
        let outer: usize = self.shape[..self.dim].iter().product();
        let mut v = Vec::new();
        for o in 0..outer {
            for i in 0..inner {
                if v.len() == lines {
                    return v;
                }
                let pos = |p: usize| (o * len + p) * inner + i;
                let order: Vec<usize> = (0..len.min(k))
                    .map(|p| pos(if self.reverse { len - 1 - p } else { p }))
                    .collect();
                v.push(order);
            }
        }
        v
    }
}

/// The row of op `ScanOp::ALL[OP]`.
pub const fn row<const OP: usize>(name: &'static str) -> OpCase<ScanSample> {
    OpCase {
        name,
        dtypes: FLOATS,
        backward: true,
        samples: |_| samples(ScanOp::ALL[OP]),
        inputs,
        run,
        reference,
        tolerance,
        bad_inputs: || bad_inputs(ScanOp::ALL[OP]),
        unsupported: |kind| unsupported(ScanOp::ALL[OP], kind),
    }
}

/// The scan rows of the reduce family's op table.
pub(crate) static ROWS: &[&dyn crate::table::Row] = &[
    &row::<0>("scan_cumsum"),
    &row::<1>("scan_cumprod"),
    &row::<2>("scan_cummax"),
    &row::<3>("scan_cummin"),
    &row::<4>("scan_logcumsumexp"),
];

crate::table_tests!(
    ROWS;
    scan_cumsum,
    scan_cumprod,
    scan_cummax,
    scan_cummin,
    scan_logcumsumexp,
);

// ---------------------------------------------------------------------------
// Samples
// ---------------------------------------------------------------------------

fn samples(op: ScanOp) -> Vec<ScanSample> {
    use Layout::*;
    let s = |shape: &[usize], dim: usize, layout| ScanSample {
        op,
        shape: shape.to_vec(),
        dim,
        exclusive: false,
        reverse: false,
        layout,
        values: Values::Random,
    };
    let with = |mut x: ScanSample, v| {
        x.values = v;
        x
    };
    let mut v = vec![
        // one long line: many tiles with a carried prefix
        s(&[1_000_003], 0, Contiguous),
        // rows with tails
        s(&[37, 1029], 1, Contiguous),
        s(&[64, 4099], 1, Misaligned),
        s(&[300, 7], 1, StridedOut),
        // outer dims: strided lines in blocks (few lines), a thread per
        // line (many)
        s(&[4097, 67], 0, StridedOut),
        s(&[600, 1100], 0, Contiguous),
        s(&[3, 5, 7, 9], 2, Contiguous),
        s(&[3, 5, 7, 9], 1, Contiguous),
        // transposed: the scanned dim contiguous, or strided
        s(&[6, 50, 70], 0, Transposed),
        s(&[6, 50, 70], 2, Transposed),
        // broadcast: along the stride-0 dim, and across it
        s(&[8, 300], 0, Broadcast),
        s(&[8, 300], 1, Broadcast),
        // size 1, rank 8, empty
        s(&[1, 1], 0, Contiguous),
        s(&[4, 1, 3], 1, Contiguous),
        s(&[2, 3, 1, 2, 3, 2, 1, 5], 7, Contiguous),
        s(&[2, 3, 1, 2, 3, 2, 1, 5], 4, StridedOut),
        s(&[0, 7], 1, Contiguous),
        s(&[5, 0], 1, Contiguous),
        // ties; NaN and infinities
        with(s(&[16, 40], 1, Contiguous), Values::Ties),
        with(s(&[40, 16], 0, Contiguous), Values::Ties),
        with(s(&[6, 2000], 1, Contiguous), Values::Ties),
        with(s(&[6, 33], 1, Contiguous), Values::Special),
        with(s(&[33, 6], 0, Contiguous), Values::Special),
        // realistic: rows of a hidden state, and along the sequence
        s(&[512, 4096], 1, Contiguous),
        s(&[2048, 1024], 0, Contiguous),
    ];
    if op == ScanOp::CumProd {
        v.push(with(s(&[6, 40], 1, Contiguous), Values::Zeros));
        v.push(with(s(&[40, 6], 0, Contiguous), Values::Zeros));
        v.push(with(s(&[6, 3000], 1, Contiguous), Values::Zeros));
    }
    // every direction and kind in turn
    for (i, x) in v.iter_mut().enumerate() {
        let (exclusive, reverse) =
            [(false, false), (false, true), (true, false), (true, true)][i % 4];
        x.exclusive = exclusive && !op.has_indices();
        x.reverse = reverse;
    }
    v
}

/// x (logical, row-major) and dy.
fn inputs(s: &ScanSample, rng: &mut Rng) -> Tensors {
    let n = s.n();
    let mut x = match s.op {
        // products stay in every dtype's range when the factors' logs sum
        // to O(1): exp(u), |u| < 2/sqrt(len), random signs
        ScanOp::CumProd => {
            let a = (2.0 / (s.len().max(1) as f64).sqrt()).min(0.25);
            (0..n)
                .map(|_| {
                    let sign = if rng.uniform(-1.0, 1.0) < 0.0 {
                        -1.0
                    } else {
                        1.0
                    };
                    sign * rng.uniform(-a, a).exp()
                })
                .collect()
        }
        ScanOp::LogCumSumExp => rng.vec(n, -5.0, 5.0),
        _ => rng.vec(n, -2.0, 2.0),
    };
    if s.layout == Layout::Broadcast {
        let inner = n / s.shape[0].max(1);
        for i in inner..n {
            x[i] = x[i % inner];
        }
    }
    let firsts = s.line_starts(4, 8);
    match s.values {
        Values::Random => {}
        Values::Ties => x.iter_mut().for_each(|v| *v = (*v * 2.0).round() / 2.0),
        Values::Special => {
            let mut put = |l: usize, k: usize, v: f64| {
                if let Some(&i) = firsts.get(l).and_then(|f| f.get(k)) {
                    x[i] = v;
                }
            };
            put(0, 1, f64::NAN);
            put(1, 2, f64::INFINITY);
            put(2, 0, f64::NEG_INFINITY);
            put(3, 1, f64::INFINITY);
            put(3, 2, f64::NEG_INFINITY);
        }
        Values::Zeros => {
            for (l, k) in [(0, 3), (1, 1), (1, 4), (2, 0)] {
                if let Some(&i) = firsts.get(l).and_then(|f| f.get(k)) {
                    x[i] = 0.0;
                }
            }
        }
    }
    let mut t = Tensors::default();
    t.push("x", x);
    t.push("dy", rng.vec(n, -1.0, 1.0));
    t
}

/// NaN as f64::MAX, so that compare() accepts a NaN where one is due.
fn nan_marked(v: Vec<f64>) -> Vec<f64> {
    v.into_iter()
        .map(|x| if x.is_nan() { f64::MAX } else { x })
        .collect()
}

fn reference(_: ElementKind, s: &ScanSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let p = s.problem();
    let x = inputs.get("x");
    let (y, idx) = r::scan(&p, x);
    let mut t = Tensors::default();
    t.push("y", nan_marked(y));
    if s.op.has_indices() {
        t.push("indices", idx);
    }
    if got.find("dx").is_some() {
        // the gradient at the device's outputs (y rounded to T, and its
        // indices)
        let y = got.find("y").unwrap_or(&[]);
        let idx = got.find("indices").unwrap_or(&[]);
        t.push("dx", r::scan_backward(&p, x, y, idx, inputs.get("dy")));
    }
    t
}

fn tolerance(kind: ElementKind, s: &ScanSample, name: &str, want: &[f64]) -> Tolerance {
    let (u_t, u_acc) = (kind.unit_roundoff(), acc_roundoff(kind));
    let len = s.len().max(1) as f64;
    let depth = (len + 2.0).log2();
    let walk = 16.0 * len.sqrt() * u_acc * depth;
    match (s.op, name) {
        (_, "indices") => Tolerance::EXACT,
        (ScanOp::CumMax | ScanOp::CumMin, "y") => Tolerance::EXACT,
        // running sums: the error follows the magnitudes summed (|x| <= 2,
        // |dy| <= 1), up to len of them
        (ScanOp::CumSum, _) | (ScanOp::CumMax | ScanOp::CumMin, _) => Tolerance {
            rtol: 4.0 * u_t,
            atol: 8.0 * u_acc * len,
        },
        (ScanOp::CumProd, "y") => Tolerance {
            rtol: 2.0 * u_t + walk,
            atol: 0.0,
        },
        (ScanOp::LogCumSumExp, "y") => Tolerance {
            rtol: 2.0 * u_t + 16.0 * u_acc,
            atol: walk,
        },
        // gradients that sum many products (cumprod) or cancel positive
        // and negative parts (logcumsumexp): bounded by the largest
        (ScanOp::LogCumSumExp, _) => Tolerance::of_max(4.0 * u_t + 64.0 * u_acc, 4.0 * walk, want),
        _ => Tolerance::of_max(4.0 * u_t + 64.0 * u_acc, walk, want),
    }
}

// ---------------------------------------------------------------------------
// Device runs
// ---------------------------------------------------------------------------

fn run(
    kind: ElementKind,
    s: &ScanSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    crate::with_float!(kind, T => match s.shape.len() {
        1 => run_ranked::<T, 1>(s, inputs, backward),
        2 => run_ranked::<T, 2>(s, inputs, backward),
        3 => run_ranked::<T, 3>(s, inputs, backward),
        4 => run_ranked::<T, 4>(s, inputs, backward),
        8 => run_ranked::<T, 8>(s, inputs, backward),
        r => Err(format!("no test instance for rank {r}")),
    })
}

fn run_ranked<T: Element, const N: usize>(
    s: &ScanSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!(
        "{} {} {:?} dim {} excl {} rev {}",
        s.op.name(),
        T::KIND,
        s.shape,
        s.dim,
        s.exclusive,
        s.reverse
    );
    let desc = ScanDescriptor::new(s.op, T::KIND, arr::<N>(&s.shape), s.dim)
        .with_exclusive(s.exclusive)
        .with_reverse(s.reverse);
    let plan = select::<ScanPlan<T, N>>(&desc, &PlanPreference::default())?;
    let (xs, x_len, x_off) = s.x_layout();
    let xbuf = upload_strided::<T>(inputs.get("x"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<N>(&s.shape)?;
    let shape = arr::<N>(&s.shape);
    let (os, o_len) = s.out_layout();
    let ostrides = arr::<N>(&os);
    let forward = |y: DeviceSliceMut<'_, T>, idx: Option<DeviceSliceMut<'_, i64>>| {
        let y = TensorMut::new(y, shape, ostrides).map_err(|e| e.to_string())?;
        let indices = match idx {
            Some(i) => Some(TensorMut::new(i, shape, ostrides).map_err(|e| e.to_string())?),
            None => None,
        };
        plan.run(&g.stream, Workspace::None, ScanArgs { x, y, indices })
            .map_err(|e| format!("{what}: {e}"))
    };
    let mut y = Guarded::<T>::new(o_len);
    let mut idx = Guarded::<i64>::new(if s.op.has_indices() { o_len } else { 0 });
    forward(y.slice_mut(), s.op.has_indices().then(|| idx.slice_mut()))?;
    let y_vals = view_result(&what, &y, &s.shape, &os)?;
    // again into zeros: the same bits, every output written
    let mut z =
        DeviceBuffer::<T>::filled_bytes(&g.stream, o_len.max(1), 0).map_err(|e| e.to_string())?;
    let z_slice = z.as_slice_mut().split_at(o_len).expect("y in buffer").0;
    let mut zi =
        DeviceBuffer::<i64>::filled_bytes(&g.stream, o_len.max(1), 0).map_err(|e| e.to_string())?;
    let zi_slice = zi
        .as_slice_mut()
        .split_at(o_len)
        .expect("indices in buffer")
        .0;
    forward(z_slice, s.op.has_indices().then_some(zi_slice))?;
    let z_vals = gather(&download(&z), 0, &s.shape, &os);
    if let Some(i) = (0..y_vals.len()).find(|&i| {
        let (a, b) = (y_vals[i], z_vals[i]);
        !(a == b || (a.is_nan() && b.is_nan()))
    }) {
        return Err(format!(
            "{what}: y[{i}] is {} on the first run and {} on the second",
            y_vals[i], z_vals[i]
        ));
    }
    let mut t = Tensors::default();
    t.push("y", nan_marked(y_vals));
    if s.op.has_indices() {
        let i_vals = view_result(&format!("{what} indices"), &idx, &s.shape, &os)?;
        if gather(&download(&zi), 0, &s.shape, &os) != i_vals {
            return Err(format!("{what}: indices differ between two runs"));
        }
        t.push("indices", i_vals);
    }
    if !backward || s.values == Values::Special {
        return Ok(t);
    }
    let (dy, _) = upload::<T>(inputs.get("dy"));
    let dy = TensorRef::contiguous(dy.as_slice(), shape).map_err(|e| e.to_string())?;
    let mut dx = Guarded::<T>::new(o_len);
    let mut ws = workspace(plan.bw_workspace_size(Grad::X.into()));
    let y_view = TensorRef::new(y.slice(), shape, ostrides).map_err(|e| e.to_string())?;
    let i_view = match s.op.has_indices() {
        true => Some(TensorRef::new(idx.slice(), shape, ostrides).map_err(|e| e.to_string())?),
        false => None,
    };
    plan.run_bw(
        &g.stream,
        Workspace::Borrowed(ws.as_slice_mut()),
        ScanBwArgs {
            x,
            y: (s.op == ScanOp::LogCumSumExp).then_some(y_view),
            indices: i_view,
            dy,
            dx: TensorMut::new(dx.slice_mut(), shape, ostrides).map_err(|e| e.to_string())?,
        },
    )
    .map_err(|e| format!("{what} backward: {e}"))?;
    t.push(
        "dx",
        view_result(&format!("{what} dx"), &dx, &s.shape, &os)?,
    );
    Ok(t)
}

// ---------------------------------------------------------------------------
// Bad inputs and other dtypes
// ---------------------------------------------------------------------------

/// Every select and run check of `op`, each returning its error and
/// writing nothing.
fn bad_inputs(op: ScanOp) -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let desc = ScanDescriptor::new(op, ElementKind::F32, [4, 96], 1);
    let sel =
        |d: &ScanDescriptor<2>, p: &PlanPreference| ScanPlan::<f32, 2>::select(&g.stream, d, p);
    let f64_desc = ScanDescriptor {
        element: ElementKind::F64,
        ..desc
    };
    b.own_kernel_select::<ScanPlan<f32, 2>>(&desc, &f64_desc)?;
    b.expect(
        "dim 2 of rank 2",
        sel(&ScanDescriptor { dim: 2, ..desc }, &pref),
        invalid_descriptor("dim"),
        &[],
    )?;
    if op.has_indices() {
        b.expect(
            "exclusive",
            sel(&desc.with_exclusive(true), &pref),
            invalid_descriptor("exclusive"),
            &[],
        )?;
    }
    if op == ScanOp::CumProd {
        let capped = pref.with_max_workspace_bytes(16);
        b.expect(
            "workspace cap 16 bytes",
            sel(&desc, &capped),
            preference_rejected("max_workspace_bytes"),
            &[],
        )?;
    }
    let plan = sel(&desc, &pref).map_err(|e| e.to_string())?;
    let mut rng = Rng::new(0x5CA7);
    let (xb, _) = upload::<f32>(&rng.vec(4 * 96, 0.5, 1.0));
    let x = TensorRef::contiguous(xb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let x3 = TensorRef::contiguous(xb.as_slice(), [3, 96]).map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(4 * 96);
    let mut idx = Guarded::<i64>::new(4 * 96);
    let with_idx = op.has_indices();
    let r = run_fw(
        &plan,
        x3,
        view(&mut y, [4, 96])?,
        if with_idx {
            Some(view(&mut idx, [4, 96])?)
        } else {
            None
        },
    );
    b.expect("x [3, 96]", r, shape_mismatch("x"), &[&y, &idx])?;
    let mut y5 = Guarded::<f32>::new(5 * 96);
    let r = run_fw(
        &plan,
        x,
        view(&mut y5, [5, 96])?,
        if with_idx {
            Some(view(&mut idx, [4, 96])?)
        } else {
            None
        },
    );
    b.expect("y [5, 96]", r, shape_mismatch("y"), &[&y5, &idx])?;
    let r = run_fw(
        &plan,
        x,
        view(&mut y, [4, 96])?,
        if with_idx {
            None
        } else {
            Some(view(&mut idx, [4, 96])?)
        },
    );
    let why = if with_idx {
        "indices missing"
    } else {
        "indices given"
    };
    b.expect(why, r, invalid_argument("indices"), &[&y, &idx])?;
    // y inside x's memory
    let shared = Guarded::<f32>::new(4 * 96 + 4);
    let sl = shared.slice();
    let xs = TensorRef::contiguous(sl.slice(0..4 * 96).expect("in buffer"), [4, 96])
        .map_err(|e| e.to_string())?;
    // SAFETY: a bad-input test: the run must reject the aliasing view
    // before anything is enqueued, so nothing reads or writes through it.
    let alias =
        unsafe { DeviceSliceMut::<f32>::from_raw_parts(sl.addr() + 16, 4 * 96, sl.ctx_id()) };
    let alias = TensorMut::contiguous(alias, [4, 96]).map_err(|e| e.to_string())?;
    let r = run_fw(
        &plan,
        xs,
        alias,
        if with_idx {
            Some(view(&mut idx, [4, 96])?)
        } else {
            None
        },
    );
    b.expect(
        "y overlapping x",
        r,
        invalid_argument("y"),
        &[&shared, &idx],
    )?;

    // Backward.
    let (dyb, _) = upload::<f32>(&rng.vec(4 * 96, -1.0, 1.0));
    let dy = TensorRef::contiguous(dyb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let (yb, _) = upload::<f32>(&rng.vec(4 * 96, 0.5, 1.0));
    let yr = TensorRef::contiguous(yb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let ib = DeviceBuffer::<i64>::filled_bytes(&g.stream, 4 * 96, 0).map_err(|e| e.to_string())?;
    let ir = TensorRef::contiguous(ib.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let needs_y = op == ScanOp::LogCumSumExp;
    let (y_arg, i_arg) = (needs_y.then_some(yr), with_idx.then_some(ir));
    let mut ws = workspace(plan.bw_workspace_size(Grad::X.into()));
    let mut dx = Guarded::<f32>::new(4 * 96);
    let mut dx5 = Guarded::<f32>::new(5 * 96);
    let bw = |ws: Workspace<'_>, y, indices, dx: TensorMut<'_, f32, 2>| {
        plan.run_bw(
            &g.stream,
            ws,
            ScanBwArgs {
                x,
                y,
                indices,
                dy,
                dx,
            },
        )
    };
    let r = bw(
        Workspace::Borrowed(ws.as_slice_mut()),
        y_arg,
        i_arg,
        view(&mut dx5, [5, 96])?,
    );
    b.expect("dx [5, 96]", r, shape_mismatch("dx"), &[&dx5])?;
    // the forward output each op's backward reads, left out
    let missing = match op {
        ScanOp::LogCumSumExp => Some("y"),
        ScanOp::CumMax | ScanOp::CumMin => Some("indices"),
        _ => None,
    };
    if let Some(arg) = missing {
        let r = bw(
            Workspace::Borrowed(ws.as_slice_mut()),
            None,
            None,
            view(&mut dx, [4, 96])?,
        );
        b.expect(
            &format!("backward without {arg}"),
            r,
            invalid_argument(arg),
            &[&dx],
        )?;
    }
    if op == ScanOp::CumProd {
        let r = bw(Workspace::None, None, None, view(&mut dx, [4, 96])?);
        b.expect("backward without workspace", r, workspace_too_small, &[&dx])?;
    }
    b.done()
}

/// `plan.run` without a workspace.
fn run_fw(
    plan: &ScanPlan<f32, 2>,
    x: TensorRef<'_, f32, 2>,
    y: TensorMut<'_, f32, 2>,
    indices: Option<TensorMut<'_, i64, 2>>,
) -> baracuda_kernels::Result<()> {
    plan.run(&gpu().stream, Workspace::None, ScanArgs { x, y, indices })
}

/// A contiguous `shape` view of a guarded output.
fn view<E: Element>(
    out: &mut Guarded<E>,
    shape: [usize; 2],
) -> Result<TensorMut<'_, E, 2>, String> {
    TensorMut::contiguous(out.slice_mut(), shape).map_err(|e| e.to_string())
}

/// Selecting `op` on `kind`, which no row claims, is `Unsupported`.
fn unsupported(op: ScanOp, kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = ScanDescriptor::new(op, kind, [8, 3], 1);
        expect_unsupported::<ScanPlan<T, 2>>(&format!("{} on {kind}", op.name()), &desc)
    })
}
