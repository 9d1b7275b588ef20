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
//!
//! The rows of the ops that take integers (all but logcumsumexp) also
//! claim i32 and i64: the same samples on integer values (running sums
//! that leave i32 and wrap around i64, odd factors whose products wrap
//! around, the dtype's limits where the floats hold NaN and infinities),
//! against `reference::reduce::scan::scan_i64`, exactly (the i64 outputs
//! compared with their low 32 bits too); their backward must be
//! `Unsupported`.

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
    /// The integer dtype the values are drawn for (i32, i64), or None.
    int: Option<ElementKind>,
    /// JAX's `associative_scan` ([`ScanDescriptor::associative`]): y in
    /// x's dtype, max and min without indices; forward only.
    assoc: bool,
}

impl ScanSample {
    /// Whether the run writes indices.
    fn indices(&self) -> bool {
        self.op.has_indices() && !self.assoc
    }
    fn descriptor<const N: usize>(&self, kind: ElementKind) -> ScanDescriptor<N> {
        let shape = arr::<N>(&self.shape);
        if self.assoc {
            ScanDescriptor::associative(self.op, kind, shape, self.dim, self.reverse)
        } else {
            ScanDescriptor::new(self.op, kind, shape, self.dim)
                .with_exclusive(self.exclusive)
                .with_reverse(self.reverse)
        }
    }
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
        dtypes: if ScanOp::ALL[OP].takes_integers() {
            NUMERIC
        } else {
            FLOATS
        },
        backward: true,
        samples: |kind| samples(ScanOp::ALL[OP], kind),
        inputs,
        run,
        reference,
        tolerance,
        bad_inputs: || bad_inputs(ScanOp::ALL[OP]),
        unsupported: |kind| unsupported(ScanOp::ALL[OP], kind),
    }
}

/// JAX's `associative_scan` with add, multiply, maximum and minimum
/// ([`ScanDescriptor::associative`]): y in x's dtype (i32 sums and
/// products wrap around i32), max and min without indices; forward only
/// (JAX differentiates through the combine; the plan's backward is the
/// cumsum/cumprod/cummax/cummin rows').
pub const ASSOCIATIVE: OpCase<ScanSample> = OpCase {
    name: "scan_associative",
    dtypes: NUMERIC,
    backward: false,
    samples: associative_samples,
    inputs,
    run,
    reference,
    tolerance,
    bad_inputs: associative_bad_inputs,
    unsupported: |kind| unsupported(ScanOp::CumSum, kind),
};

/// The scan rows of the reduce family's op table.
pub(crate) static ROWS: &[&dyn crate::table::Row] = &[
    &row::<0>("scan_cumsum"),
    &row::<1>("scan_cumprod"),
    &row::<2>("scan_cummax"),
    &row::<3>("scan_cummin"),
    &row::<4>("scan_logcumsumexp"),
    &ASSOCIATIVE,
];

crate::table_tests!(
    ROWS;
    scan_cumsum,
    scan_cumprod,
    scan_cummax,
    scan_cummin,
    scan_logcumsumexp,
    scan_associative,
);

// ---------------------------------------------------------------------------
// Samples
// ---------------------------------------------------------------------------

fn samples(op: ScanOp, kind: ElementKind) -> Vec<ScanSample> {
    use Layout::*;
    let s = |shape: &[usize], dim: usize, layout| ScanSample {
        op,
        shape: shape.to_vec(),
        dim,
        exclusive: false,
        reverse: false,
        layout,
        values: Values::Random,
        int: (!kind.is_float()).then_some(kind),
        assoc: false,
    };
    let with = |mut x: ScanSample, v| {
        x.values = v;
        x
    };
    let mut v = vec![
        // long lines, too few to fill the GPU: cut into segments (one
        // line; three, reversed; two strided, exclusive)
        s(&[1_000_003], 0, Contiguous),
        s(&[3, 100_003], 1, Contiguous),
        s(&[40_000, 2], 0, StridedOut),
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

/// Each combine forward and reversed over lines with tails, an outer dim
/// (threads cut into segments), rank 8 with a strided output and an empty
/// dim; one long line (blocks cut into segments) for add, three reversed
/// for max; NaN and infinities for max and min.
fn associative_samples(kind: ElementKind) -> Vec<ScanSample> {
    use Layout::*;
    let s = |op, shape: &[usize], dim, layout, reverse| ScanSample {
        op,
        shape: shape.to_vec(),
        dim,
        exclusive: false,
        reverse,
        layout,
        values: Values::Random,
        int: (!kind.is_float()).then_some(kind),
        assoc: true,
    };
    let mut v = Vec::new();
    for op in [
        ScanOp::CumSum,
        ScanOp::CumProd,
        ScanOp::CumMax,
        ScanOp::CumMin,
    ] {
        v.push(s(op, &[37, 1029], 1, Contiguous, false));
        v.push(s(op, &[600, 1100], 0, Contiguous, true));
        v.push(s(op, &[2, 3, 1, 2, 3, 2, 1, 5], 4, StridedOut, true));
        v.push(s(op, &[0, 7], 1, Contiguous, false));
    }
    v.push(s(ScanOp::CumSum, &[1_000_003], 0, Contiguous, false));
    v.push(s(ScanOp::CumMax, &[3, 100_003], 1, Contiguous, true));
    for op in [ScanOp::CumMax, ScanOp::CumMin] {
        let mut x = s(op, &[6, 33], 1, Contiguous, false);
        x.values = Values::Special;
        v.push(x);
    }
    v
}

/// An associative scan's y keeps x's dtype: an i64 y for an i32 sum is a
/// mismatch; max and min run without indices, but no op takes indices
/// it does not write.
fn associative_bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let desc = ScanDescriptor::associative(ScanOp::CumSum, ElementKind::I32, [4, 96], 1, false);
    b.expect(
        "i64 y of an i32 associative cumsum",
        ScanPlan::<i32, 2, i64>::select(&g.stream, &desc, &pref),
        dtype_mismatch,
        &[],
    )?;
    let desc = ScanDescriptor::associative(ScanOp::CumSum, ElementKind::F32, [4, 96], 1, false);
    let plan = ScanPlan::<f32, 2>::select(&g.stream, &desc, &pref).map_err(|e| e.to_string())?;
    let (xb, _) = upload::<f32>(&Rng::new(5).vec(4 * 96, -1.0, 1.0));
    let x = TensorRef::contiguous(xb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(4 * 96);
    let mut idx = Guarded::<i64>::new(4 * 96);
    let r = run_fw(
        &plan,
        x,
        view(&mut y, [4, 96])?,
        Some(view(&mut idx, [4, 96])?),
    );
    b.expect(
        "indices of an associative sum",
        r,
        invalid_argument("indices"),
        &[&y, &idx],
    )?;
    b.done()
}

/// x (logical, row-major) and dy.
fn inputs(s: &ScanSample, rng: &mut Rng) -> Tensors {
    let n = s.n();
    let mut x = match (s.int, s.op) {
        (Some(kind), op) => {
            let draw = match (s.values, op) {
                (Values::Ties, _) => IntDraw::Small,
                (_, ScanOp::CumProd) => IntDraw::Factors,
                _ => IntDraw::Wide,
            };
            int_values(kind, draw, n, rng)
        }
        (None, op) => float_values(s, op, n, rng),
    };
    if s.layout == Layout::Broadcast {
        let inner = n / s.shape[0].max(1);
        for i in inner..n {
            x[i] = x[i % inner];
        }
    }
    let firsts = s.line_starts(4, 8);
    // integers: the dtype's limits where the floats hold NaN, inf, -inf
    let (nan, inf, neg_inf) = match s.int {
        Some(kind) => {
            let (min, max) = int_limits(kind);
            (min, max, min)
        }
        None => (f64::NAN, f64::INFINITY, f64::NEG_INFINITY),
    };
    match s.values {
        Values::Random => {}
        Values::Ties => x.iter_mut().for_each(|v| *v = (*v * 2.0).round() / 2.0),
        Values::Special => {
            let mut put = |l: usize, k: usize, v: f64| {
                if let Some(&i) = firsts.get(l).and_then(|f| f.get(k)) {
                    x[i] = v;
                }
            };
            put(0, 1, nan);
            put(1, 2, inf);
            put(2, 0, neg_inf);
            put(3, 1, inf);
            put(3, 2, neg_inf);
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

/// Float values of `n` elements in `op`'s range.
fn float_values(s: &ScanSample, op: ScanOp, n: usize, rng: &mut Rng) -> Vec<f64> {
    match op {
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
    }
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
    let mut t = Tensors::default();
    if s.int.is_some() {
        // i64 arithmetic with wrap-around; the inputs are exact in f64
        let xi: Vec<i64> = x.iter().map(|&v| v as i64).collect();
        let (mut y, idx) = r::scan_i64(&p, &xi);
        if s.assoc && s.int == Some(ElementKind::I32) {
            // y in i32: the low 32 bits of the wrapping i64 result
            y.iter_mut().for_each(|v| *v = i64::from(*v as i32));
        }
        t.push_i64("y", &y);
        if s.indices() {
            t.push("indices", idx);
        }
        return t;
    }
    let (y, idx) = r::scan(&p, x);
    t.push("y", nan_marked(y));
    if s.indices() {
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

fn tolerance(
    kind: ElementKind,
    s: &ScanSample,
    name: &str,
    want: &[f64],
    _inputs: &Tensors,
) -> Tolerance {
    if !kind.is_float() {
        return Tolerance::EXACT;
    }
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
    // An integer run's output: i64 for cumsum and cumprod (but
    // associative scans), else T.
    let sum_like = matches!(s.op, ScanOp::CumSum | ScanOp::CumProd) && !s.assoc;
    macro_rules! int_ranked {
        ($t:ty, $o:ty) => {
            match s.shape.len() {
                1 => run_int::<$t, $o, 1>(s, inputs),
                2 => run_int::<$t, $o, 2>(s, inputs),
                3 => run_int::<$t, $o, 3>(s, inputs),
                4 => run_int::<$t, $o, 4>(s, inputs),
                8 => run_int::<$t, $o, 8>(s, inputs),
                r => Err(format!("no test instance for rank {r}")),
            }
        };
    }
    match (kind, sum_like) {
        (ElementKind::I32, true) => int_ranked!(i32, i64),
        (ElementKind::I32, false) => int_ranked!(i32, i32),
        (ElementKind::I64, _) => int_ranked!(i64, i64),
        _ => crate::with_float!(kind, T => match s.shape.len() {
            1 => run_ranked::<T, 1>(s, inputs, backward),
            2 => run_ranked::<T, 2>(s, inputs, backward),
            3 => run_ranked::<T, 3>(s, inputs, backward),
            4 => run_ranked::<T, 4>(s, inputs, backward),
            8 => run_ranked::<T, 8>(s, inputs, backward),
            r => Err(format!("no test instance for rank {r}")),
        }),
    }
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
    let desc = s.descriptor::<N>(T::KIND);
    let plan = select::<ScanPlan<T, N>>(&desc, &PlanPreference::default())?;
    let (xs, x_len, x_off) = s.x_layout();
    let xbuf = upload_strided::<T>(inputs.get("x"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<N>(&s.shape)?;
    let shape = arr::<N>(&s.shape);
    let (os, o_len) = s.out_layout();
    let ostrides = arr::<N>(&os);
    // the segment states of few long lines
    let mut fw_ws = workspace(plan.workspace_size());
    let mut forward = |y: DeviceSliceMut<'_, T>, idx: Option<DeviceSliceMut<'_, i64>>| {
        let y = TensorMut::new(y, shape, ostrides).map_err(|e| e.to_string())?;
        let indices = match idx {
            Some(i) => Some(TensorMut::new(i, shape, ostrides).map_err(|e| e.to_string())?),
            None => None,
        };
        let ws = Workspace::Borrowed(fw_ws.as_slice_mut());
        plan.run(&g.stream, ws, ScanArgs { x, y, indices })
            .map_err(|e| format!("{what}: {e}"))
    };
    let mut y = Guarded::<T>::new(o_len);
    let mut idx = operand_if(s.indices(), || Guarded::<i64>::new(o_len));
    forward(y.slice_mut(), s.indices().then(|| idx.slice_mut()))?;
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
    forward(z_slice, s.indices().then_some(zi_slice))?;
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
    if s.indices() {
        let i_vals = view_result(&format!("{what} indices"), &idx, &s.shape, &os)?;
        if gather(&download(&zi), 0, &s.shape, &os) != i_vals {
            return Err(format!("{what}: indices differ between two runs"));
        }
        t.push("indices", i_vals);
    }
    if !backward || s.values == Values::Special || s.assoc {
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

/// An integer sample: the forward run twice (both runs the same, every
/// output written), its outputs read back exactly; and its backward,
/// which must be `Unsupported` and write nothing.
fn run_int<T: Element, O: Element + Into<i64>, const N: usize>(
    s: &ScanSample,
    inputs: &Tensors,
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
    let desc = s.descriptor::<N>(T::KIND);
    let plan = select::<ScanPlan<T, N, O>>(&desc, &PlanPreference::default())?;
    let (xs, x_len, x_off) = s.x_layout();
    let xbuf = upload_strided::<T>(inputs.get("x"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<N>(&s.shape)?;
    let shape = arr::<N>(&s.shape);
    let (os, o_len) = s.out_layout();
    let ostrides = arr::<N>(&os);
    let with_idx = s.indices();
    // the segment states of few long lines
    let mut fw_ws = workspace(plan.workspace_size());
    let mut forward = |y: DeviceSliceMut<'_, O>, idx: Option<DeviceSliceMut<'_, i64>>| {
        let y = TensorMut::new(y, shape, ostrides).map_err(|e| e.to_string())?;
        let indices = match idx {
            Some(i) => Some(TensorMut::new(i, shape, ostrides).map_err(|e| e.to_string())?),
            None => None,
        };
        let ws = Workspace::Borrowed(fw_ws.as_slice_mut());
        plan.run(&g.stream, ws, ScanArgs { x, y, indices })
            .map_err(|e| format!("{what}: {e}"))
    };
    // into poisoned outputs (all ones: -1), then into zeros: the same
    // values, and every output written
    let mut y = Guarded::<O>::new(o_len);
    let mut idx = operand_if(with_idx, || Guarded::<i64>::new(o_len));
    forward(y.slice_mut(), with_idx.then(|| idx.slice_mut()))?;
    let y_vals = view_ints(&what, &y, &s.shape, &os)?;
    let i_vals = match with_idx {
        true => view_ints(&format!("{what} indices"), &idx, &s.shape, &os)?,
        false => Vec::new(),
    };
    let zeros = |n: usize| DeviceBuffer::<O>::filled_bytes(&g.stream, n.max(1), 0);
    let mut z = zeros(o_len).map_err(|e| e.to_string())?;
    let mut zi =
        DeviceBuffer::<i64>::filled_bytes(&g.stream, o_len.max(1), 0).map_err(|e| e.to_string())?;
    let z_slice = z.as_slice_mut().split_at(o_len).expect("y in buffer").0;
    let zi_slice = zi
        .as_slice_mut()
        .split_at(o_len)
        .expect("indices in buffer")
        .0;
    forward(z_slice, with_idx.then_some(zi_slice))?;
    let offsets = view_offsets(&s.shape, &os);
    let zh = z.to_host(&g.stream).map_err(|e| e.to_string())?;
    let z_vals: Vec<i64> = offsets.iter().map(|&o| zh[o].into()).collect();
    let zih = zi.to_host(&g.stream).map_err(|e| e.to_string())?;
    let zi_vals: Vec<i64> = offsets.iter().map(|&o| zih[o]).collect();
    if z_vals != y_vals || (with_idx && zi_vals != i_vals) {
        return Err(format!(
            "{what}: the runs into poison and into zeros differ"
        ));
    }
    let mut t = Tensors::default();
    t.push_i64("y", &y_vals);
    if with_idx {
        t.push("indices", i_vals.iter().map(|&i| i as f64).collect());
    }
    // no gradient of an integer output
    let dy = TensorRef::new(y.slice(), shape, ostrides).map_err(|e| e.to_string())?;
    let mut dx = Guarded::<T>::new(s.n());
    let r = plan.run_bw(
        &g.stream,
        Workspace::None,
        ScanBwArgs {
            x,
            y: None,
            indices: None,
            dy,
            dx: TensorMut::contiguous(dx.slice_mut(), shape).map_err(|e| e.to_string())?,
        },
    );
    expect_err(&format!("{what} backward"), r, crate::harness::unsupported)?;
    dx.untouched(&format!("{what} backward"))?;
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
    if with_idx {
        // the values alone (JAX's associative max and min): a run, not an
        // error, that writes y and leaves the indices' buffer alone
        let mut values = Guarded::<f32>::new(4 * 96);
        run_fw(&plan, x, view(&mut values, [4, 96])?, None)
            .map_err(|e| format!("{} without indices: {e}", op.name()))?;
        let written = values.result(&format!("{} without indices", op.name()))?;
        if written.iter().any(|v| v.is_nan()) {
            return Err(format!("{} without indices: y not written", op.name()));
        }
        idx.untouched(&format!("{} without indices", op.name()))?;
    } else {
        let r = run_fw(
            &plan,
            x,
            view(&mut y, [4, 96])?,
            Some(view(&mut idx, [4, 96])?),
        );
        b.expect("indices given", r, invalid_argument("indices"), &[&y, &idx])?;
    }
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
    // few long lines, cut into segments: the forward needs their states
    let long = [2, 1 << 16];
    let desc = ScanDescriptor::new(op, ElementKind::F32, long, 1);
    let cut = select::<ScanPlan<f32, 2>>(&desc, &PlanPreference::default())?;
    if cut.workspace_size() == 0 {
        return Err(format!(
            "{}: a [2, 65536] scan asks no workspace",
            op.name()
        ));
    }
    let (lx, _) = upload::<f32>(&rng.vec(2 << 16, 0.5, 1.0));
    let lx = TensorRef::contiguous(lx.as_slice(), long).map_err(|e| e.to_string())?;
    let mut ly = Guarded::<f32>::new(2 << 16);
    let mut li = operand_if(with_idx, || Guarded::<i64>::new(2 << 16));
    let indices = if with_idx {
        Some(TensorMut::contiguous(li.slice_mut(), long).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let y = TensorMut::contiguous(ly.slice_mut(), long).map_err(|e| e.to_string())?;
    let r = cut.run(&g.stream, Workspace::None, ScanArgs { x: lx, y, indices });
    b.expect(
        "segmented forward without workspace",
        r,
        workspace_too_small,
        &[&ly, &li],
    )?;
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
