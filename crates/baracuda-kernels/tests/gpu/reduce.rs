//! GPU tests of the reduce family: one op-table row per [`ReduceOp`],
//! against `reference::reduce`, and the tensor of more than 2^31
//! elements.
//!
//! Every row runs the same samples (with the op's input range): long
//! vectors that split over blocks, rows with tails, column reductions that
//! split, reductions over several non-adjacent dims, transposed,
//! broadcast (stride 0), misaligned and strided-output views, keepdim,
//! empty reductions and empty outputs, size-1 and no reduced dims, rank 8,
//! ties, NaN/inf (forward), zeros (prod), and two realistic shapes. Each
//! forward runs twice, the second time into a zero-filled output: both
//! must agree bit for bit (deterministic, and every output written).
//!
//! The rows of the ops that take integers (sum, nansum, prod, amax, amin)
//! also claim i32 and i64: the same samples on integer values (sums that
//! leave i32 and wrap around i64, odd factors whose products wrap around,
//! the dtype's limits where the floats hold NaN and infinities), against
//! `reference::reduce_i64`, exactly (the i64 outputs compared with their
//! low 32 bits too); their backward must be `Unsupported`.

use baracuda_kernels::reference::reduce::{self as r, Reduction};
use baracuda_kernels::*;

use crate::harness::*;
use crate::table::{BadInputs, OpCase, Tensors};

/// How a sample lays out x and its outputs.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Layout {
    /// Row-major, 16-byte aligned.
    Contiguous,
    /// x stored with its dims in reverse order (column-major).
    Transposed,
    /// x's dim 0 has stride 0 (its values repeat along it).
    Broadcast,
    /// x starts one element into its buffer (no 16-byte loads).
    Misaligned,
    /// y and dx every other element; the ones between stay untouched.
    StridedOut,
}

/// Special values a sample's input holds.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Values {
    /// Random in the op's range.
    Random,
    /// On a grid of 0.5 (many ties).
    Ties,
    /// NaN, inf and -inf in some outputs' sets (forward only).
    Special,
    /// One zero in the first output's set, two in the second's.
    Zeros,
}

/// One reduction problem of a row.
#[derive(Clone, Debug)]
pub struct ReduceSample {
    pub(crate) op: ReduceOp,
    pub(crate) shape: Vec<usize>,
    pub(crate) dims: Vec<usize>,
    pub(crate) keepdim: bool,
    pub(crate) layout: Layout,
    pub(crate) values: Values,
    pub(crate) correction: f64,
    pub(crate) p: f64,
    /// The integer dtype the values are drawn for (i32, i64), or None.
    pub(crate) int: Option<ElementKind>,
}

impl ReduceSample {
    pub(crate) fn reduction(&self) -> Reduction {
        Reduction {
            op: self.op,
            shape: self.shape.clone(),
            reduced: (0..self.shape.len())
                .map(|d| self.dims.contains(&d))
                .collect(),
            correction: self.correction,
            p: self.p,
        }
    }
    pub(crate) fn descriptor<const N: usize>(&self, element: ElementKind) -> ReduceDescriptor<N> {
        ReduceDescriptor::new(self.op, element, arr(&self.shape))
            .with_dims(&self.dims)
            .with_keepdim(self.keepdim)
            .with_correction(self.correction)
            .with_p(self.p)
    }
    /// y's shape: the reduced dims dropped, or 1 with keepdim.
    pub(crate) fn out_shape(&self) -> Vec<usize> {
        reduced_shape(&self.shape, |d| self.dims.contains(&d), self.keepdim)
    }
    /// Index of the output that input element `lin` (row-major) folds into.
    fn output_of(&self, lin: usize) -> usize {
        let (mut rem, mut o, mut scale) = (lin, 0, 1);
        for d in (0..self.shape.len()).rev() {
            let c = rem % self.shape[d];
            rem /= self.shape[d];
            if !self.dims.contains(&d) {
                o += c * scale;
                scale *= self.shape[d];
            }
        }
        o
    }
    pub(crate) fn n_red(&self) -> usize {
        self.reduction().n_red()
    }
    /// x's strides, buffer length and offset.
    pub(crate) fn x_layout(&self) -> (Vec<usize>, usize, usize) {
        x_layout(self.layout, &self.shape)
    }
    /// Strides and buffer length of an output of `shape` (y or dx).
    pub(crate) fn out_layout(&self, shape: &[usize]) -> (Vec<usize>, usize) {
        out_layout(self.layout, shape)
    }
    /// The input range of the op (prod: the signs; its magnitudes are
    /// drawn in `inputs`).
    fn range(&self) -> (f64, f64) {
        match self.op {
            ReduceOp::Prod => (-1.0, 1.0),
            ReduceOp::LogSumExp => (-5.0, 5.0),
            _ => (-2.0, 2.0),
        }
    }
    /// Largest |x|.
    fn x_max(&self) -> f64 {
        let (lo, hi) = self.range();
        lo.abs().max(hi.abs())
    }
}

/// The shape of a reduction's output: the dims of `shape` for which
/// `reduced(d)` holds dropped, or 1 with `keepdim`.
pub(crate) fn reduced_shape(
    shape: &[usize],
    reduced: impl Fn(usize) -> bool,
    keepdim: bool,
) -> Vec<usize> {
    (0..shape.len())
        .filter_map(|d| match (reduced(d), keepdim) {
            (false, _) => Some(shape[d]),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// Strides, buffer length and offset of an input of shape `s` laid out
/// as `layout`.
pub(crate) fn x_layout(layout: Layout, s: &[usize]) -> (Vec<usize>, usize, usize) {
    let n: usize = s.iter().product();
    match layout {
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

/// Strides and buffer length of an output of `shape` laid out as `layout`.
pub(crate) fn out_layout(layout: Layout, shape: &[usize]) -> (Vec<usize>, usize) {
    let n: usize = shape.iter().product();
    match layout {
        Layout::StridedOut => (contiguous(shape).iter().map(|s| 2 * s).collect(), 2 * n),
        _ => (contiguous(shape), n),
    }
}

/// The row of op `ReduceOp::ALL[OP]`: the floats, and i32 and i64 for
/// the ops that take integers.
pub const fn row<const OP: usize>(name: &'static str) -> OpCase<ReduceSample> {
    OpCase {
        name,
        dtypes: if ReduceOp::ALL[OP].takes_integers() {
            NUMERIC
        } else {
            FLOATS
        },
        backward: true,
        samples: |kind| samples_in(ReduceOp::ALL[OP], kind),
        inputs,
        run,
        reference,
        tolerance,
        bad_inputs: || bad_inputs(ReduceOp::ALL[OP]),
        unsupported: |kind| unsupported(ReduceOp::ALL[OP], kind),
    }
}

/// The family's rows of the op table.
pub(crate) static ROWS: &[&dyn crate::table::Row] = &[
    &row::<0>("reduce_sum"),
    &row::<1>("reduce_mean"),
    &row::<2>("reduce_nansum"),
    &row::<3>("reduce_nanmean"),
    &row::<4>("reduce_prod"),
    &row::<5>("reduce_amax"),
    &row::<6>("reduce_amin"),
    &row::<7>("reduce_var"),
    &row::<8>("reduce_std"),
    &row::<9>("reduce_logsumexp"),
    &row::<10>("reduce_norm"),
];

crate::table_tests!(
    ROWS;
    reduce_sum,
    reduce_mean,
    reduce_nansum,
    reduce_nanmean,
    reduce_prod,
    reduce_amax,
    reduce_amin,
    reduce_var,
    reduce_std,
    reduce_logsumexp,
    reduce_norm,
);

// ---------------------------------------------------------------------------
// Samples
// ---------------------------------------------------------------------------

pub(crate) fn sample(
    op: ReduceOp,
    shape: &[usize],
    dims: &[usize],
    layout: Layout,
) -> ReduceSample {
    ReduceSample {
        op,
        shape: shape.to_vec(),
        dims: dims.to_vec(),
        keepdim: false,
        layout,
        values: Values::Random,
        correction: 1.0,
        p: 2.0,
        int: None,
    }
}

/// The samples of `op` in `kind`: [`samples`], their values drawn as
/// integers for i32 and i64.
pub(crate) fn samples_in(op: ReduceOp, kind: ElementKind) -> Vec<ReduceSample> {
    let mut v = samples(op);
    if !kind.is_float() {
        v.iter_mut().for_each(|s| s.int = Some(kind));
    }
    v
}

/// The samples of `op`; the norm runs each sample with one of its orders
/// (every order several times over the list).
pub(crate) fn samples(op: ReduceOp) -> Vec<ReduceSample> {
    use Layout::*;
    let s = |shape: &[usize], dims: &[usize], layout| sample(op, shape, dims, layout);
    let keep = |mut x: ReduceSample| {
        x.keepdim = true;
        x
    };
    let with = |mut x: ReduceSample, v| {
        x.values = v;
        x
    };
    let mut v = vec![
        // one long vector: split over many blocks, then combined
        s(&[1_000_003], &[0], Contiguous),
        // rows with tails; keepdim
        keep(s(&[37, 1029], &[1], Contiguous)),
        s(&[64, 4099], &[1], Misaligned),
        s(&[300, 7], &[1], StridedOut),
        // columns, split over the reduced dim
        s(&[4097, 67], &[0], StridedOut),
        s(&[20000, 8], &[0], Contiguous),
        // several non-adjacent dims (column and segmented row)
        s(&[3, 5, 7, 9], &[0, 2], Contiguous),
        keep(s(&[3, 5, 7, 9], &[1, 3], Contiguous)),
        // transposed: reduced dim strided (column) or contiguous (row)
        s(&[6, 50, 70], &[2], Transposed),
        s(&[6, 50, 70], &[0], Transposed),
        // broadcast: over the stride-0 dim, and along it
        s(&[8, 300], &[0], Broadcast),
        s(&[8, 300], &[1], Broadcast),
        // size 1, nothing reduced, everything reduced, rank 8
        s(&[1, 1], &[0, 1], Contiguous),
        s(&[4, 1, 3], &[1], Contiguous),
        s(&[2, 3, 4], &[], Contiguous),
        s(&[5, 6, 7], &[0, 1, 2], Contiguous),
        keep(s(&[2, 3, 1, 2, 3, 2, 1, 5], &[1, 3, 5, 7], Contiguous)),
        s(&[2, 3, 1, 2, 3, 2, 1, 5], &[0, 2, 4, 6], StridedOut),
        // an empty output
        s(&[0, 7], &[1], Contiguous),
        // ties; NaN and infinities
        with(s(&[16, 40], &[1], Contiguous), Values::Ties),
        with(s(&[40, 16], &[0], Contiguous), Values::Ties),
        with(s(&[6, 33], &[1], Contiguous), Values::Special),
        with(s(&[33, 6], &[0], Contiguous), Values::Special),
        // realistic: rows of a hidden state, NCHW over (N, H, W)
        s(&[1024, 4096], &[1], Contiguous),
        s(&[8, 64, 56, 56], &[0, 2, 3], Contiguous),
    ];
    // empty reductions: PyTorch raises for these ops (bad inputs check it)
    if !matches!(op, ReduceOp::Amax | ReduceOp::Amin) {
        v.push(s(&[5, 0], &[1], Contiguous));
    }
    if op == ReduceOp::Prod {
        v.push(with(s(&[6, 40], &[1], Contiguous), Values::Zeros));
        v.push(with(s(&[40, 6], &[0], Contiguous), Values::Zeros));
    }
    match op {
        // var/std over one element is NaN with correction 1: correction 0
        // there, and other corrections elsewhere.
        ReduceOp::Var | ReduceOp::Std => {
            for (i, x) in v.iter_mut().enumerate() {
                x.correction = if x.n_red() <= 1 {
                    0.0
                } else {
                    [1.0, 0.0, 2.5, -1.0][i % 4]
                };
            }
        }
        ReduceOp::Norm => {
            let orders = [
                2.0,
                1.0,
                0.0,
                f64::INFINITY,
                f64::NEG_INFINITY,
                3.0,
                0.5,
                1.5,
            ];
            for (i, x) in v.iter_mut().enumerate() {
                x.p = orders[i % orders.len()];
            }
            // the inf norms raise over an empty set
            v.retain(|x| !(x.p.is_infinite() && x.n_red() == 0));
        }
        _ => {}
    }
    v
}

/// x (logical, row-major) and dy.
pub(crate) fn inputs(s: &ReduceSample, rng: &mut Rng) -> Tensors {
    let n: usize = s.shape.iter().product();
    let n_out: usize = s.out_shape().iter().product();
    let (lo, hi) = s.range();
    let mut x = match s.int {
        Some(kind) => {
            let draw = match (s.values, s.op) {
                (Values::Ties, _) => IntDraw::Small,
                (_, ReduceOp::Prod) => IntDraw::Factors,
                _ => IntDraw::Wide,
            };
            int_values(kind, draw, n, rng)
        }
        None => rng.vec(n, lo, hi),
    };
    if s.op == ReduceOp::Prod && s.int.is_none() {
        // Products of many factors leave every dtype's range unless the
        // factors' logs sum to O(1): exp(u), |u| < 2/sqrt(n), random signs.
        let a = (2.0 / (s.n_red().max(1) as f64).sqrt()).min(0.25);
        for v in x.iter_mut() {
            *v = v.signum() * rng.uniform(-a, a).exp();
        }
    }
    if s.layout == Layout::Broadcast {
        // dim 0 has stride 0: every slice along it repeats the first
        let inner = n / s.shape[0].max(1);
        for i in inner..n {
            x[i] = x[i % inner];
        }
    }
    let firsts = match s.values {
        Values::Special | Values::Zeros => first_elements(s, n, 4),
        _ => Vec::new(),
    };
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
            let put = |x: &mut Vec<f64>, o: usize, k: usize, v: f64| {
                if let Some(&i) = firsts.get(o).and_then(|f| f.get(k)) {
                    x[i] = v;
                }
            };
            put(&mut x, 0, 1, nan);
            put(&mut x, 1, 2, inf);
            put(&mut x, 2, 0, neg_inf);
            put(&mut x, 3, 1, inf);
            put(&mut x, 3, 2, neg_inf);
        }
        Values::Zeros => {
            for (o, k) in [(0, 3), (1, 1), (1, 4)] {
                x[firsts[o][k]] = 0.0;
            }
        }
    }
    let mut t = Tensors::default();
    t.push("x", x);
    t.push("dy", rng.vec(n_out, -1.0, 1.0));
    t
}

/// Input positions of the first 8 elements of each of the first
/// `outputs` outputs.
fn first_elements(s: &ReduceSample, n: usize, outputs: usize) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); outputs];
    for i in 0..n {
        let o = s.output_of(i);
        if o < outputs && groups[o].len() < 8 {
            groups[o].push(i);
        }
    }
    groups
}

/// Run `forward` into a poisoned output of `len` elements and again into
/// zeros: both runs must agree bit for bit (deterministic, and every
/// element of the view written) and nothing outside the view (`shape`,
/// `strides`) may be written. The first output and its view's values.
pub(crate) fn run_twice<T: Element>(
    what: &str,
    len: usize,
    shape: &[usize],
    strides: &[usize],
    mut forward: impl FnMut(DeviceSliceMut<'_, T>) -> Result<(), String>,
) -> Result<Written<T>, String> {
    let mut outs = run_twice_each(what, &[(len, shape, strides)], |mut ys| {
        forward(ys.pop().expect("one output"))
    })?;
    Ok(outs.pop().expect("one output"))
}

/// An output of a [`run_twice_each`] forward: buffer length, view shape
/// and strides.
pub(crate) type OutView<'s> = (usize, &'s [usize], &'s [usize]);

/// An output written by a run and its view's values.
pub(crate) type Written<T> = (Guarded<T>, Vec<f64>);

/// [`run_twice`] for a forward with several outputs (`outs`, in the order
/// `forward` takes their slices): every output agrees bit for bit between
/// the poisoned and the zeroed run, and none is written outside its view.
/// Each first output and its view's values.
pub(crate) fn run_twice_each<T: Element>(
    what: &str,
    outs: &[OutView<'_>],
    mut forward: impl FnMut(Vec<DeviceSliceMut<'_, T>>) -> Result<(), String>,
) -> Result<Vec<Written<T>>, String> {
    let g = gpu();
    let mut ys: Vec<Guarded<T>> = outs.iter().map(|o| Guarded::<T>::new(o.0)).collect();
    forward(ys.iter_mut().map(|y| y.slice_mut()).collect())?;
    let mut zs = outs
        .iter()
        .map(|o| DeviceBuffer::<T>::filled_bytes(&g.stream, o.0.max(1), 0))
        .collect::<baracuda_kernels::Result<Vec<_>>>()
        .map_err(|e| e.to_string())?;
    let z_slices = zs
        .iter_mut()
        .zip(outs)
        .map(|(z, o)| z.as_slice_mut().split_at(o.0).expect("y in buffer").0)
        .collect();
    forward(z_slices)?;
    let mut firsts = Vec::with_capacity(outs.len());
    for ((y, z), &(_, shape, strides)) in ys.into_iter().zip(&zs).zip(outs) {
        let y_vals = view_result(what, &y, shape, strides)?;
        let z_vals = gather(&download(z), 0, shape, strides);
        if let Some(i) = (0..y_vals.len()).find(|&i| {
            let (a, b) = (y_vals[i], z_vals[i]);
            !(a == b || (a.is_nan() && b.is_nan()))
        }) {
            return Err(format!(
                "{what}: output {i} is {} on the first run and {} on the second",
                y_vals[i], z_vals[i]
            ));
        }
        firsts.push((y, y_vals));
    }
    Ok(firsts)
}

/// NaN as f64::MAX, so that compare() accepts a NaN where one is due.
pub(crate) fn nan_marked(v: Vec<f64>) -> Vec<f64> {
    v.into_iter()
        .map(|x| if x.is_nan() { f64::MAX } else { x })
        .collect()
}

fn reference(_: ElementKind, s: &ReduceSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let r = s.reduction();
    let x = inputs.get("x");
    let mut t = Tensors::default();
    if s.int.is_some() {
        // i64 arithmetic with wrap-around; the inputs are exact in f64
        let xi: Vec<i64> = x.iter().map(|&v| v as i64).collect();
        t.push_i64("y", &r::reduce_i64(&r, &xi));
        return t;
    }
    t.push("y", nan_marked(r::reduce(&r, x)));
    if got.find("dx").is_some() {
        // the gradient of the output the device produced (rounded to T)
        let y = got.get("y");
        t.push("dx", r::reduce_backward(&r, x, y, inputs.get("dy")));
    }
    t
}

/// The spacing of `kind`'s subnormals (its smallest positive value).
pub(crate) fn subnormal_spacing(kind: ElementKind) -> f64 {
    match kind {
        ElementKind::F16 => 2f64.powi(-24),
        ElementKind::Bf16 => 2f64.powi(-133),
        ElementKind::F32 => 2f64.powi(-149),
        _ => 0.0,
    }
}

pub(crate) fn tolerance(
    kind: ElementKind,
    s: &ReduceSample,
    name: &str,
    want: &[f64],
    _inputs: &Tensors,
) -> Tolerance {
    if !kind.is_float() {
        return Tolerance::EXACT;
    }
    let (u_t, u_acc) = (kind.unit_roundoff(), acc_roundoff(kind));
    let n = s.n_red().max(1) as f64;
    let depth = (n + 2.0).log2();
    let xm = s.x_max();
    if name == "dx" {
        let mut rtol = 4.0 * u_t + 64.0 * u_acc;
        if s.op == ReduceOp::Prod {
            rtol += 8.0 * n.sqrt() * u_acc * depth;
        }
        let mut t = Tolerance::of_max(rtol, rtol, want);
        // var's gradient 2 dy (x - mean) / (n - c) (|dy| <= 1) cancels in
        // x - mean: its error follows x's magnitude, not the result's.
        if matches!(s.op, ReduceOp::Var | ReduceOp::Std) {
            t.atol += rtol * 2.0 * xm / (n - s.correction).max(1.0);
        }
        // A gradient that rounds to a subnormal of T is off by up to half
        // its spacing, whatever the relative bound says.
        t.atol += subnormal_spacing(kind);
        return t;
    }
    // forward: one rounding to T, plus the f32 (f64) fold's error, which
    // follows the magnitudes summed rather than the result
    let fold = 8.0 * u_acc * depth;
    let atol = match s.op {
        ReduceOp::Sum | ReduceOp::NanSum => fold * n.sqrt() * xm * 4.0,
        ReduceOp::Mean | ReduceOp::NanMean => fold * xm * 4.0,
        ReduceOp::Var | ReduceOp::Std => fold * xm * xm * 4.0,
        _ => 0.0,
    };
    let rtol = match s.op {
        ReduceOp::Prod => 2.0 * u_t + 8.0 * n.sqrt() * u_acc * depth,
        ReduceOp::Norm | ReduceOp::LogSumExp | ReduceOp::Var | ReduceOp::Std => {
            2.0 * u_t + fold * 4.0
        }
        _ => 2.0 * u_t + fold,
    };
    Tolerance { rtol, atol }
}

// ---------------------------------------------------------------------------
// Device runs
// ---------------------------------------------------------------------------

/// `$body` with `N` and `M` bound to the ranks of x and y, for the rank
/// pairs below or (`@` form) those listed after the body.
macro_rules! by_ranks {
    ($n:expr, $m:expr, $N:ident, $M:ident => $body:expr) => {
        by_ranks!(@ $n, $m, $N, $M, $body;
            (1, 0) (1, 1) (2, 0) (2, 1) (2, 2) (3, 0) (3, 1) (3, 2) (3, 3)
            (4, 0) (4, 1) (4, 2) (4, 3) (4, 4) (8, 4) (8, 8))
    };
    (@ $n:expr, $m:expr, $N:ident, $M:ident, $body:expr; $(($a:literal, $b:literal))*) => {
        match ($n, $m) {
            $(($a, $b) => {
                const $N: usize = $a;
                const $M: usize = $b;
                $body
            })*
            other => Err(format!("no test instance for ranks {other:?}")),
        }
    };
}
pub(crate) use by_ranks;

fn run(
    kind: ElementKind,
    s: &ReduceSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let m = s.out_shape().len();
    match kind {
        ElementKind::I32 => by_ranks!(s.shape.len(), m, N, M => run_int::<i32, N, M>(s, inputs)),
        ElementKind::I64 => by_ranks!(s.shape.len(), m, N, M => run_int::<i64, N, M>(s, inputs)),
        _ => {
            crate::with_float!(kind, T => by_ranks!(s.shape.len(), m, N, M => run_ranked::<T, N, M>(s, inputs, backward)))
        }
    }
}

/// An integer sample: the output is i64 for sum, nansum and prod, `T`
/// for amax and amin.
fn run_int<T: Element + Into<i64>, const N: usize, const M: usize>(
    s: &ReduceSample,
    inputs: &Tensors,
) -> Result<Tensors, String> {
    if matches!(s.op, ReduceOp::Sum | ReduceOp::NanSum | ReduceOp::Prod) {
        run_int_out::<T, i64, N, M>(s, inputs)
    } else {
        run_int_out::<T, T, N, M>(s, inputs)
    }
}

/// The forward of an integer plan (run twice, as the floats'), its output
/// read back exactly; and its backward, which must be `Unsupported` and
/// write nothing.
fn run_int_out<T: Element, O: Element + Into<i64>, const N: usize, const M: usize>(
    s: &ReduceSample,
    inputs: &Tensors,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!(
        "{} {} {:?} dims {:?}",
        s.op.name(),
        T::KIND,
        s.shape,
        s.dims
    );
    let desc = s.descriptor::<N>(T::KIND);
    let plan = select::<ReducePlan<T, N, M, O>>(&desc, &PlanPreference::default())?;
    let (xs, x_len, x_off) = s.x_layout();
    let xbuf = upload_strided::<T>(inputs.get("x"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<N>(&s.shape)?;
    let out_shape = s.out_shape();
    let (ys, y_len) = s.out_layout(&out_shape);
    let mut ws = workspace(plan.workspace_size());
    let forward = |y: DeviceSliceMut<'_, O>| {
        let y =
            TensorMut::new(y, arr::<M>(&out_shape), arr::<M>(&ys)).map_err(|e| e.to_string())?;
        plan.run(
            &g.stream,
            Workspace::Borrowed(ws.as_slice_mut()),
            ReduceArgs { x, y },
        )
        .map_err(|e| format!("{what}: {e}"))
    };
    let (y, _) = run_twice(&what, y_len, &out_shape, &ys, forward)?;
    let mut t = Tensors::default();
    t.push_i64("y", &view_ints(&what, &y, &out_shape, &ys)?);
    // no gradient of an integer output
    let dy = TensorRef::new(y.slice(), arr::<M>(&out_shape), arr::<M>(&ys))
        .map_err(|e| e.to_string())?;
    let n: usize = s.shape.iter().product();
    let mut dx = Guarded::<T>::new(n);
    let r = plan.run_bw(
        &g.stream,
        Workspace::None,
        ReduceBwArgs {
            x,
            y: Some(dy),
            dy,
            dx: TensorMut::contiguous(dx.slice_mut(), arr::<N>(&s.shape))
                .map_err(|e| e.to_string())?,
        },
    );
    expect_err(&format!("{what} backward"), r, crate::harness::unsupported)?;
    dx.untouched(&format!("{what} backward"))?;
    Ok(t)
}

/// A strided view's values in logical order, after checking that nothing
/// else in its buffer (guards included) was written.
pub(crate) fn view_result<T: Element>(
    what: &str,
    out: &Guarded<T>,
    shape: &[usize],
    strides: &[usize],
) -> Result<Vec<f64>, String> {
    let all = out.result(what)?;
    check_untouched::<T>(what, &all, &view_offsets(shape, strides))?;
    Ok(gather(&all, 0, shape, strides))
}

fn run_ranked<T: Element, const N: usize, const M: usize>(
    s: &ReduceSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!(
        "{} {} {:?} dims {:?}",
        s.op.name(),
        T::KIND,
        s.shape,
        s.dims
    );
    let plan =
        select::<ReducePlan<T, N, M>>(&s.descriptor::<N>(T::KIND), &PlanPreference::default())?;
    let (xs, x_len, x_off) = s.x_layout();
    let xbuf = upload_strided::<T>(inputs.get("x"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<N>(&s.shape)?;
    let out_shape = s.out_shape();
    let (ys, y_len) = s.out_layout(&out_shape);
    let mut ws = workspace(plan.workspace_size());
    let forward = |y: DeviceSliceMut<'_, T>| {
        let y =
            TensorMut::new(y, arr::<M>(&out_shape), arr::<M>(&ys)).map_err(|e| e.to_string())?;
        plan.run(
            &g.stream,
            Workspace::Borrowed(ws.as_slice_mut()),
            ReduceArgs { x, y },
        )
        .map_err(|e| format!("{what}: {e}"))
    };
    let (y, y_vals) = run_twice(&what, y_len, &out_shape, &ys, forward)?;
    let mut t = Tensors::default();
    t.push("y", nan_marked(y_vals));
    if !backward || s.values == Values::Special {
        return Ok(t);
    }
    let (dy, _) = upload::<T>(inputs.get("dy"));
    let dy = TensorRef::new(
        dy.as_slice(),
        arr::<M>(&out_shape),
        arr::<M>(&contiguous(&out_shape)),
    )
    .map_err(|e| e.to_string())?;
    let (dxs, dx_len) = s.out_layout(&s.shape);
    let mut dx = Guarded::<T>::new(dx_len);
    let mut ws = workspace(plan.bw_workspace_size(Grad::X.into()));
    let y_view = TensorRef::new(y.slice(), arr::<M>(&out_shape), arr::<M>(&ys))
        .map_err(|e| e.to_string())?;
    plan.run_bw(
        &g.stream,
        Workspace::Borrowed(ws.as_slice_mut()),
        ReduceBwArgs {
            x,
            y: Some(y_view),
            dy,
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

// ---------------------------------------------------------------------------
// Bad inputs and other dtypes
// ---------------------------------------------------------------------------

/// Every select and run check of `op`, each returning its error and
/// writing nothing.
fn bad_inputs(op: ReduceOp) -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let desc = ReduceDescriptor::new(op, ElementKind::F32, [4, 96]).with_dims(&[1]);
    let sel = |d: &ReduceDescriptor<2>, p: &PlanPreference| {
        ReducePlan::<f32, 2, 1>::select(&g.stream, d, p)
    };
    descriptor_checks::<ReducePlan<f32, 2, 1>>(&mut b, &desc)?;
    let empty = ReduceDescriptor::new(op, ElementKind::F32, [4, 0]).with_dims(&[1]);
    match op {
        ReduceOp::Amax | ReduceOp::Amin => {
            b.expect(
                "over an empty dim",
                sel(&empty, &pref),
                invalid_argument("desc.shape"),
                &[],
            )?;
        }
        ReduceOp::Norm => {
            b.expect(
                "p NaN",
                sel(&desc.with_p(f64::NAN), &pref),
                invalid_descriptor("p"),
                &[],
            )?;
            let inf = empty.with_p(f64::NEG_INFINITY);
            b.expect(
                "-inf norm over an empty dim",
                sel(&inf, &pref),
                invalid_argument("desc.shape"),
                &[],
            )?;
        }
        _ => {}
    }
    // A split reduction needs a workspace.
    let long = ReduceDescriptor::new(op, ElementKind::F32, [4, 65536]).with_dims(&[1]);
    let mut rng = Rng::new(0x5ED0);
    split_workspace_checks(
        &mut b,
        "reduction",
        &mut rng,
        |p| sel(&long, p),
        |b, plan, x| {
            let mut y = Guarded::<f32>::new(4);
            let y_view = TensorMut::contiguous(y.slice_mut(), [4]).map_err(|e| e.to_string())?;
            let r = plan.run(&g.stream, Workspace::None, ReduceArgs { x, y: y_view });
            b.expect("no workspace", r, workspace_too_small, &[&y])
        },
    )?;

    if op.takes_integers() {
        // an integer plan whose y is not the output dtype (i64 for the
        // sums and products, else the input's)
        let int = ReduceDescriptor::new(op, ElementKind::I32, [4, 96]).with_dims(&[1]);
        let wrong = if int.output_element() == ElementKind::I64 {
            ReducePlan::<i32, 2, 1, i32>::select(&g.stream, &int, &pref).map(|_| ())
        } else {
            ReducePlan::<i32, 2, 1, i64>::select(&g.stream, &int, &pref).map(|_| ())
        };
        b.expect(
            "i32 with a y of the wrong dtype",
            wrong,
            dtype_mismatch,
            &[],
        )?;
    }
    let plan = sel(&desc, &pref).map_err(|e| e.to_string())?;
    let (xb, _) = upload::<f32>(&rng.vec(4 * 96, 0.5, 1.0));
    xy_run_checks::<f32, f32>(&mut b, &xb, |x, y| {
        plan.run(&g.stream, Workspace::None, ReduceArgs { x, y })
    })?;
    let x = TensorRef::contiguous(xb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;

    // Backward.
    let (dyb, _) = upload::<f32>(&rng.vec(4, -1.0, 1.0));
    let dy = TensorRef::contiguous(dyb.as_slice(), [4]).map_err(|e| e.to_string())?;
    let (yb, _) = upload::<f32>(&rng.vec(4, 0.5, 1.0));
    let yv = TensorRef::contiguous(yb.as_slice(), [4]).map_err(|e| e.to_string())?;
    let mut dx = Guarded::<f32>::new(4 * 96);
    let mut ws = workspace(plan.bw_workspace_size(Grad::X.into()));
    let bw = |ws: &mut DeviceBuffer<u8>, y, dx: TensorMut<'_, f32, 2>| {
        plan.run_bw(
            &g.stream,
            Workspace::Borrowed(ws.as_slice_mut()),
            ReduceBwArgs { x, y, dy, dx },
        )
    };
    let mut dx5 = Guarded::<f32>::new(5 * 96);
    let r = bw(
        &mut ws,
        Some(yv),
        TensorMut::contiguous(dx5.slice_mut(), [5, 96]).map_err(|e| e.to_string())?,
    );
    b.expect("dx [5, 96]", r, shape_mismatch("dx"), &[&dx5])?;
    let needs_y = match op {
        ReduceOp::Amax | ReduceOp::Amin | ReduceOp::Std | ReduceOp::LogSumExp => true,
        ReduceOp::Norm => true, // p = 2
        _ => false,
    };
    if needs_y {
        let r = bw(
            &mut ws,
            None,
            TensorMut::contiguous(dx.slice_mut(), [4, 96]).map_err(|e| e.to_string())?,
        );
        b.expect("backward without y", r, invalid_argument("y"), &[&dx])?;
    }
    b.done()
}

/// The select checks of a plan `P` of [`ReduceDescriptor`]s, from `desc`
/// (f32 [4, 96] over dim 1, a rank-1 y): another dtype, a cuDNN backend,
/// a dim past the rank, keepdim, and for var and std a NaN correction.
pub(crate) fn descriptor_checks<P: Plan<Descriptor = ReduceDescriptor<2>>>(
    b: &mut BadInputs,
    desc: &ReduceDescriptor<2>,
) -> Result<(), String> {
    let pref = PlanPreference::default();
    let sel = |d: &ReduceDescriptor<2>| P::select(&gpu().stream, d, &pref);
    let f64_desc = ReduceDescriptor {
        element: ElementKind::F64,
        ..*desc
    };
    b.own_kernel_select::<P>(desc, &f64_desc)?;
    b.expect(
        "dim 2 of rank 2",
        sel(&desc.with_dims(&[2])),
        invalid_descriptor("dims"),
        &[],
    )?;
    b.expect(
        "keepdim, rank-1 y",
        sel(&desc.with_keepdim(true)),
        invalid_descriptor("keepdim"),
        &[],
    )?;
    if matches!(desc.op, ReduceOp::Var | ReduceOp::Std) {
        b.expect(
            "correction NaN",
            sel(&desc.with_correction(f64::NAN)),
            invalid_descriptor("correction"),
            &[],
        )?;
    }
    Ok(())
}

/// The workspace checks of a reduction plan `P` (`name` in messages) over
/// an f32 `[4, 65536]` tensor, which splits: selected (`sel`) under a
/// 16-byte workspace cap it is `PreferenceRejected`; `no_workspace` runs it
/// on values drawn from `rng` without a workspace and checks in `b` that
/// this is `WorkspaceTooSmall`.
pub(crate) fn split_workspace_checks<P: Plan>(
    b: &mut BadInputs,
    name: &str,
    rng: &mut Rng,
    sel: impl Fn(&PlanPreference) -> baracuda_kernels::Result<P>,
    no_workspace: impl FnOnce(&mut BadInputs, &P, TensorRef<'_, f32, 2>) -> Result<(), String>,
) -> Result<(), String> {
    let pref = PlanPreference::default();
    b.expect(
        "workspace cap 16 bytes",
        sel(&pref.with_max_workspace_bytes(16)),
        preference_rejected("max_workspace_bytes"),
        &[],
    )?;
    let plan = sel(&pref).map_err(|e| e.to_string())?;
    if plan.workspace_size() == 0 {
        return Err(format!("a [4, 65536] {name} over dim 1 should split"));
    }
    let (xl, _) = upload::<f32>(&rng.vec(4 * 65536, -1.0, 1.0));
    let xl = TensorRef::contiguous(xl.as_slice(), [4, 65536]).map_err(|e| e.to_string())?;
    no_workspace(b, &plan, xl)
}

/// The run checks of a plan from an f32 `x [4, 96]` (in `xb`) to a
/// `y [4]` of `O` (written into a `Guarded<B>` of `O`'s size): x of
/// `[3, 96]`, y of `[5]`, y inside x's memory. `run` runs the plan
/// without a workspace.
pub(crate) fn xy_run_checks<O: Element, B: Element>(
    b: &mut BadInputs,
    xb: &DeviceBuffer<f32>,
    run: impl Fn(TensorRef<'_, f32, 2>, TensorMut<'_, O, 1>) -> baracuda_kernels::Result<()>,
) -> Result<(), String> {
    let x = TensorRef::contiguous(xb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let x3 = TensorRef::contiguous(xb.as_slice(), [3, 96]).map_err(|e| e.to_string())?;
    let mut y = Guarded::<B>::new(4);
    let r = run(
        x3,
        TensorMut::contiguous(y.slice_mut_as::<O>(), [4]).map_err(|e| e.to_string())?,
    );
    b.expect("x [3, 96]", r, shape_mismatch("x"), &[&y])?;
    let mut y5 = Guarded::<B>::new(5);
    let r = run(
        x,
        TensorMut::contiguous(y5.slice_mut_as::<O>(), [5]).map_err(|e| e.to_string())?,
    );
    b.expect("y [5]", r, shape_mismatch("y"), &[&y5])?;
    // y inside x's memory
    let shared = Guarded::<f32>::new(4 * 96);
    let xs = TensorRef::contiguous(shared.slice(), [4, 96]).map_err(|e| e.to_string())?;
    let sh = shared.slice();
    // SAFETY: a bad-input test: the run must reject the aliasing view
    // before anything is enqueued, so nothing reads or writes through it.
    let alias = unsafe { DeviceSliceMut::<O>::from_raw_parts(sh.addr() + 16, 4, sh.ctx_id()) };
    let r = run(
        xs,
        TensorMut::contiguous(alias, [4]).map_err(|e| e.to_string())?,
    );
    b.expect("y overlapping x", r, invalid_argument("y"), &[&shared])
}

/// Selecting `op` on `kind`, which no row claims, is `Unsupported`.
fn unsupported(op: ReduceOp, kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = ReduceDescriptor::new(op, kind, [8, 3]).with_dims(&[1]);
        expect_unsupported::<ReducePlan<T, 2, 1>>(&format!("{} on {kind}", op.name()), &desc)
    })
}

// ---------------------------------------------------------------------------
// More than 2^31 elements
// ---------------------------------------------------------------------------

/// Sums of a bf16 tensor of 2^31 + 2^20 elements, as 2 rows (the second
/// starts past 2^31) and as 64 columns (rows reach past 2^31), and the
/// mean's backward writing 2^32 + 2^20 elements (64-bit linear index).
/// The values repeat `i * 7 mod 17 - 8`, so every partial sum is a small
/// integer and the results are exact.
pub fn check_64bit() -> Result<(), String> {
    type T = half::bf16;
    let g = gpu();
    let n = (1usize << 31) + (1 << 20);
    let v = |i: usize| ((i * 7) % 17) as i64 - 8;
    let host: Vec<T> = (0..n).map(|i| T::from_f64(v(i) as f64)).collect();
    let xb = DeviceBuffer::from_host(&g.stream, &host).map_err(|e| e.to_string())?;
    drop(host);
    let cols = n / 2;
    let (mut rows_want, mut cols_want) = ([0i64; 2], [0i64; 64]);
    for i in 0..n {
        rows_want[i / cols] += v(i);
        cols_want[i % 64] += v(i);
    }
    let sum = |shape: [usize; 2], dim: usize, m: usize| -> Result<Vec<f64>, String> {
        let desc = ReduceDescriptor::new(ReduceOp::Sum, ElementKind::Bf16, shape).with_dims(&[dim]);
        let plan = select::<ReducePlan<T, 2, 1>>(&desc, &PlanPreference::default())?;
        let mut ws = workspace(plan.workspace_size());
        let mut y = Guarded::<T>::new(m);
        plan.run(
            &g.stream,
            Workspace::Borrowed(ws.as_slice_mut()),
            ReduceArgs {
                x: TensorRef::contiguous(xb.as_slice(), shape).map_err(|e| e.to_string())?,
                y: TensorMut::contiguous(y.slice_mut(), [m]).map_err(|e| e.to_string())?,
            },
        )
        .map_err(|e| e.to_string())?;
        y.result(&format!("sum {shape:?} over dim {dim}"))
    };
    let exact = |w: &[i64]| w.iter().map(|&x| x as f64).collect::<Vec<f64>>();
    compare(
        "rows",
        &sum([2, cols], 1, 2)?,
        &exact(&rows_want),
        Tolerance::EXACT,
        None,
    )?;
    compare(
        "columns",
        &sum([n / 64, 64], 0, 64)?,
        &exact(&cols_want),
        Tolerance::EXACT,
        None,
    )?;
    drop(xb);

    // mean's backward over a broadcast x of 2^32 + 2^20 elements
    let m = (1usize << 32) + (1 << 20);
    let desc = ReduceDescriptor::new(ReduceOp::Mean, ElementKind::Bf16, [m]);
    let plan = select::<ReducePlan<T, 1, 0>>(&desc, &PlanPreference::default())?;
    let (one, _) = upload::<T>(&[0.5]);
    let (dy, _) = upload::<T>(&[0.75]);
    let mut dx = DeviceBuffer::<T>::filled_bytes(&g.stream, m, 0xFF).map_err(|e| e.to_string())?;
    plan.run_bw(
        &g.stream,
        Workspace::None,
        ReduceBwArgs {
            x: TensorRef::new(one.as_slice(), [m], [0]).map_err(|e| e.to_string())?,
            y: None,
            dy: TensorRef::new(dy.as_slice(), [], []).map_err(|e| e.to_string())?,
            dx: TensorMut::contiguous(dx.as_slice_mut(), [m]).map_err(|e| e.to_string())?,
        },
    )
    .map_err(|e| e.to_string())?;
    let want = T::from_f64(f64::from(0.75f32 / m as f32));
    let got = dx.to_host(&g.stream).map_err(|e| e.to_string())?;
    match got.iter().position(|&d| d != want) {
        Some(i) => Err(format!(
            "mean backward: dx[{i}] is {}, expected {want}",
            got[i]
        )),
        None => Ok(()),
    }
}
