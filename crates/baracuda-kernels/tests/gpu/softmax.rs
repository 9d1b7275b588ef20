//! GPU tests of the softmax family: one op-table row per [`SoftmaxOp`],
//! against `reference::softmax`.
//!
//! Every row runs the same samples: extents 1, small, a few thousand (rows
//! cached in shared memory), over 2^17 and over 2^20 (the online pass),
//! rows with tails, the dim strided (few rows: a thread group per row;
//! many rows: a thread per row), transposed, broadcast (stride 0),
//! misaligned and strided-output views, rank 8, empty tensors, and rows
//! holding NaN, +inf, -inf and only -inf (forward). Each forward runs
//! twice, the second time into a zero-filled output: both must agree bit
//! for bit (deterministic, and every output written).

use baracuda_kernels::reference::softmax as r;
use baracuda_kernels::*;

use crate::harness::*;
use crate::reduce::{
    nan_marked, out_layout, run_twice, subnormal_spacing, view_result, x_layout, Layout,
};
use crate::table::{BadInputs, OpCase, Tensors};

/// One softmax problem of a row.
#[derive(Clone, Debug)]
pub struct SoftmaxSample {
    op: SoftmaxOp,
    shape: Vec<usize>,
    dim: usize,
    layout: Layout,
    /// NaN, +inf and -inf in the first rows (forward only).
    special: bool,
}

impl SoftmaxSample {
    fn n(&self) -> usize {
        self.shape[self.dim]
    }
    /// Row-major indices of the elements of row `k` (rows in row-major
    /// order of the other dims).
    fn row(&self, k: usize) -> Vec<usize> {
        let inner: usize = self.shape[self.dim + 1..].iter().product();
        let (o, j) = (k / inner, k % inner);
        (0..self.n())
            .map(|i| (o * self.n() + i) * inner + j)
            .collect()
    }
}

/// Largest |x| of the samples.
const X_MAX: f64 = 4.0;

/// The row of op `SoftmaxOp::ALL[OP]`.
pub const fn row<const OP: usize>(name: &'static str) -> OpCase<SoftmaxSample> {
    OpCase {
        name,
        dtypes: FLOATS,
        backward: true,
        samples: |_| samples(SoftmaxOp::ALL[OP]),
        inputs,
        run,
        reference,
        tolerance,
        bad_inputs: || bad_inputs(SoftmaxOp::ALL[OP]),
        unsupported: |kind| unsupported(SoftmaxOp::ALL[OP], kind),
    }
}

/// The family's rows of the op table.
pub(crate) static ROWS: &[&dyn crate::table::Row] = &[
    &row::<0>("softmax_softmax"),
    &row::<1>("softmax_log_softmax"),
    &row::<2>("softmax_softmin"),
];

crate::table_tests!(
    ROWS;
    softmax_softmax,
    softmax_log_softmax,
    softmax_softmin,
);

// ---------------------------------------------------------------------------
// Samples
// ---------------------------------------------------------------------------

fn samples(op: SoftmaxOp) -> Vec<SoftmaxSample> {
    use Layout::*;
    let s = |shape: &[usize], dim: usize, layout| SoftmaxSample {
        op,
        shape: shape.to_vec(),
        dim,
        layout,
        special: false,
    };
    let special = |mut x: SoftmaxSample| {
        x.special = true;
        x
    };
    vec![
        // extent 1
        s(&[1], 0, Contiguous),
        s(&[7, 1], 1, Contiguous),
        // small rows with tails, several rows per block
        s(&[37, 29], 1, Contiguous),
        s(&[300, 7], 1, StridedOut),
        s(&[5, 100], 1, Misaligned),
        // a few thousand: cached in shared memory
        s(&[16, 3000], 1, Contiguous),
        s(&[9, 4099], 1, Misaligned),
        // over 2^17: cached (f32, f64) and online (16-bit and f32 at 140000)
        s(&[3, 40000], 1, Contiguous),
        s(&[2, 140_000], 1, StridedOut),
        // over 2^20: one row, online
        s(&[1, 1_100_000], 1, Contiguous),
        // the dim strided: few rows (a group per row), many (a thread per row)
        s(&[4097, 3], 0, Contiguous),
        s(&[40, 8200], 0, Contiguous),
        s(&[3, 5, 7, 9], 1, Contiguous),
        s(&[3, 5, 7, 9], 2, StridedOut),
        // transposed: dim strided (column) or contiguous in x only
        s(&[6, 50, 70], 2, Transposed),
        s(&[6, 50, 70], 0, Transposed),
        // broadcast: along the stride-0 dim (uniform rows) and across it
        s(&[8, 300], 0, Broadcast),
        s(&[8, 300], 1, Broadcast),
        // rank 8
        s(&[2, 3, 1, 2, 3, 2, 1, 5], 4, Contiguous),
        // empty
        s(&[0, 7], 1, Contiguous),
        s(&[5, 0], 1, Contiguous),
        // NaN, +inf, -inf, all -inf rows: row, strided and column kernels
        special(s(&[6, 33], 1, Contiguous)),
        special(s(&[6, 3000], 1, Contiguous)),
        special(s(&[33, 6], 0, Contiguous)),
        special(s(&[12, 8192], 0, Contiguous)),
        // realistic: attention scores, a vocabulary
        s(&[256, 4096], 1, Contiguous),
        s(&[4, 32000], 1, Contiguous),
    ]
}

/// x (logical, row-major) and dy.
fn inputs(s: &SoftmaxSample, rng: &mut Rng) -> Tensors {
    let n: usize = s.shape.iter().product();
    let mut x = rng.vec(n, -X_MAX, X_MAX);
    if s.layout == Layout::Broadcast {
        // dim 0 has stride 0: every slice along it repeats the first
        let inner = n / s.shape[0].max(1);
        for i in inner..n {
            x[i] = x[i % inner];
        }
    }
    if s.special {
        let inf = f64::INFINITY;
        // row 0: a NaN; row 1: +inf; row 2: only -inf; row 3: one -inf;
        // row 4: two -inf and a +inf; row 5 stays finite
        x[s.row(0)[1]] = f64::NAN;
        x[s.row(1)[2]] = inf;
        for i in s.row(2) {
            x[i] = -inf;
        }
        x[s.row(3)[0]] = -inf;
        let r4 = s.row(4);
        x[r4[0]] = -inf;
        x[r4[3]] = inf;
        x[r4[5]] = -inf;
    }
    let mut t = Tensors::default();
    t.push("x", x);
    t.push("dy", rng.vec(n, -1.0, 1.0));
    t
}

fn reference(_: ElementKind, s: &SoftmaxSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let mut t = Tensors::default();
    t.push(
        "y",
        nan_marked(r::softmax(s.op, &s.shape, s.dim, inputs.get("x"))),
    );
    if got.find("dx").is_some() {
        // the gradient at the output the device produced (rounded to T)
        let y = got.get("y");
        let dx = r::softmax_backward(s.op, &s.shape, s.dim, y, inputs.get("dy"));
        t.push("dx", dx);
    }
    t
}

fn tolerance(
    kind: ElementKind,
    s: &SoftmaxSample,
    name: &str,
    want: &[f64],
    _inputs: &Tensors,
) -> Tolerance {
    let (u_t, u_acc) = (kind.unit_roundoff(), acc_roundoff(kind));
    let n = s.n().max(1);
    // Terms one thread adds in sequence, plus the merge tree: short rows
    // take up to 64 elements a thread (a thread per row when the dim is
    // strided over many rows: those samples are short), long rows n / 1024.
    let k = (n.min(64) + n / 1024 + 12) as f64;
    let tiny = subnormal_spacing(kind);
    match (name, s.op) {
        // log s and z - m absolutely, one rounding to T relatively
        ("y", SoftmaxOp::LogSoftmax) => Tolerance {
            rtol: 2.0 * u_t + 4.0 * u_acc,
            atol: 4.0 * k * u_acc + 16.0 * X_MAX * u_acc,
        },
        // every element of a row shares the sum's relative error
        ("y", _) => Tolerance {
            rtol: 2.0 * u_t + (16.0 + 8.0 * X_MAX + 4.0 * k) * u_acc,
            atol: tiny,
        },
        // dy - exp(y) sum(dy): sum(dy) over n terms of at most 1
        ("dx", SoftmaxOp::LogSoftmax) => {
            let mut t = Tolerance::of_max(4.0 * u_t + 8.0 * u_acc, 4.0 * u_t, want);
            t.atol += 64.0 * k * u_acc + tiny;
            t
        }
        // y (dy - sum(dy y)): the sum of terms of total at most 1
        _ => {
            let mut t =
                Tolerance::of_max(4.0 * u_t + 8.0 * u_acc, 4.0 * u_t + 8.0 * k * u_acc, want);
            t.atol += tiny;
            t
        }
    }
}

// ---------------------------------------------------------------------------
// Device runs
// ---------------------------------------------------------------------------

/// `$body` with `N` bound to the rank of x.
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
    s: &SoftmaxSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    crate::with_float!(kind, T => by_rank!(s.shape.len(), N => run_ranked::<T, N>(s, inputs, backward)))
}

fn run_ranked<T: Element, const N: usize>(
    s: &SoftmaxSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!("{} {} {:?} dim {}", s.op.name(), T::KIND, s.shape, s.dim);
    let desc = SoftmaxDescriptor::new(s.op, T::KIND, arr::<N>(&s.shape)).with_dim(s.dim);
    let plan = select::<SoftmaxPlan<T, N>>(&desc, &PlanPreference::default())?;
    let (xs, x_len, x_off) = x_layout(s.layout, &s.shape);
    let xbuf = upload_strided::<T>(inputs.get("x"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<N>(&s.shape)?;
    let (ys, y_len) = out_layout(s.layout, &s.shape);
    let forward = |y: DeviceSliceMut<'_, T>| {
        let y = TensorMut::new(y, arr::<N>(&s.shape), arr::<N>(&ys)).map_err(|e| e.to_string())?;
        plan.run(&g.stream, Workspace::None, SoftmaxArgs { x, y })
            .map_err(|e| format!("{what}: {e}"))
    };
    let (y, y_vals) = run_twice(&what, y_len, &s.shape, &ys, forward)?;
    let mut t = Tensors::default();
    t.push("y", nan_marked(y_vals));
    if !backward || s.special {
        return Ok(t);
    }
    let (dy, _) = upload::<T>(inputs.get("dy"));
    let dy = TensorRef::new(
        dy.as_slice(),
        arr::<N>(&s.shape),
        arr::<N>(&contiguous(&s.shape)),
    )
    .map_err(|e| e.to_string())?;
    let mut dx = Guarded::<T>::new(y_len);
    let y_view =
        TensorRef::new(y.slice(), arr::<N>(&s.shape), arr::<N>(&ys)).map_err(|e| e.to_string())?;
    plan.run_bw(
        &g.stream,
        Workspace::None,
        SoftmaxBwArgs {
            y: y_view,
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

// ---------------------------------------------------------------------------
// Bad inputs and other dtypes
// ---------------------------------------------------------------------------

/// Every select and run check of `op`, each returning its error and
/// writing nothing.
fn bad_inputs(op: SoftmaxOp) -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let desc = SoftmaxDescriptor::new(op, ElementKind::F32, [4, 96]);
    let sel = |d: &SoftmaxDescriptor<2>, p: &PlanPreference| {
        SoftmaxPlan::<f32, 2>::select(&g.stream, d, p)
    };
    let f64_desc = SoftmaxDescriptor {
        element: ElementKind::F64,
        ..desc
    };
    b.own_kernel_select::<SoftmaxPlan<f32, 2>>(&desc, &f64_desc)?;
    b.expect(
        "dim 2 of rank 2",
        sel(&desc.with_dim(2), &pref),
        invalid_descriptor("dim"),
        &[],
    )?;
    let plan = sel(&desc, &pref).map_err(|e| e.to_string())?;
    let mut rng = Rng::new(0x50F7);
    let (xb, _) = upload::<f32>(&rng.vec(5 * 96, -1.0, 1.0));
    let x = TensorRef::contiguous(xb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let x3 = TensorRef::contiguous(xb.as_slice(), [3, 96]).map_err(|e| e.to_string())?;
    let x5 = TensorRef::contiguous(xb.as_slice(), [5, 96]).map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(4 * 96);
    let r = run_fw(
        &plan,
        x3,
        TensorMut::contiguous(y.slice_mut(), [4, 96]).map_err(|e| e.to_string())?,
    );
    b.expect("x [3, 96]", r, shape_mismatch("x"), &[&y])?;
    let mut y5 = Guarded::<f32>::new(5 * 96);
    let r = run_fw(
        &plan,
        x,
        TensorMut::contiguous(y5.slice_mut(), [5, 96]).map_err(|e| e.to_string())?,
    );
    b.expect("y [5, 96]", r, shape_mismatch("y"), &[&y5])?;
    // y inside x's memory
    let shared = Guarded::<f32>::new(8 * 96);
    let xs = TensorRef::contiguous(shared.slice(), [4, 96]).map_err(|e| e.to_string())?;
    let s = shared.slice();
    // SAFETY: a bad-input test: the run must reject the aliasing view
    // before anything is enqueued, so nothing reads or writes through it.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(s.addr() + 16, 4 * 96, s.ctx_id()) };
    let r = run_fw(
        &plan,
        xs,
        TensorMut::contiguous(alias, [4, 96]).map_err(|e| e.to_string())?,
    );
    b.expect("y overlapping x", r, invalid_argument("y"), &[&shared])?;

    // Backward.
    let (dyb, _) = upload::<f32>(&rng.vec(4 * 96, -1.0, 1.0));
    let dy = TensorRef::contiguous(dyb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let mut dx5 = Guarded::<f32>::new(5 * 96);
    let r = run_bw(
        &plan,
        x,
        dy,
        TensorMut::contiguous(dx5.slice_mut(), [5, 96]).map_err(|e| e.to_string())?,
    );
    b.expect("dx [5, 96]", r, shape_mismatch("dx"), &[&dx5])?;
    let mut dx = Guarded::<f32>::new(4 * 96);
    let r = run_bw(
        &plan,
        x5,
        dy,
        TensorMut::contiguous(dx.slice_mut(), [4, 96]).map_err(|e| e.to_string())?,
    );
    b.expect("y [5, 96]", r, shape_mismatch("y"), &[&dx])?;
    let r = run_bw(
        &plan,
        x,
        x3,
        TensorMut::contiguous(dx.slice_mut(), [4, 96]).map_err(|e| e.to_string())?,
    );
    b.expect("dy [3, 96]", r, shape_mismatch("dy"), &[&dx])?;
    // dx inside dy's memory
    let dys = TensorRef::contiguous(shared.slice(), [4, 96]).map_err(|e| e.to_string())?;
    // SAFETY: as above: rejected before anything is enqueued.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(s.addr() + 64, 4 * 96, s.ctx_id()) };
    let r = run_bw(
        &plan,
        x,
        dys,
        TensorMut::contiguous(alias, [4, 96]).map_err(|e| e.to_string())?,
    );
    b.expect("dx overlapping dy", r, invalid_argument("dx"), &[&shared])?;
    b.done()
}

/// `plan.run` without a workspace.
fn run_fw(
    plan: &SoftmaxPlan<f32, 2>,
    x: TensorRef<'_, f32, 2>,
    y: TensorMut<'_, f32, 2>,
) -> baracuda_kernels::Result<()> {
    plan.run(&gpu().stream, Workspace::None, SoftmaxArgs { x, y })
}

/// `plan.run_bw` without a workspace.
fn run_bw(
    plan: &SoftmaxPlan<f32, 2>,
    y: TensorRef<'_, f32, 2>,
    dy: TensorRef<'_, f32, 2>,
    dx: TensorMut<'_, f32, 2>,
) -> baracuda_kernels::Result<()> {
    plan.run_bw(&gpu().stream, Workspace::None, SoftmaxBwArgs { y, dy, dx })
}

/// Selecting `op` on `kind`, which no row claims, is `Unsupported`.
fn unsupported(op: SoftmaxOp, kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = SoftmaxDescriptor::new(op, kind, [8, 3]);
        expect_unsupported::<SoftmaxPlan<T, 2>>(&format!("{} on {kind}", op.name()), &desc)
    })
}
