//! GPU tests of sparsemax: one op-table row, against
//! `reference::softmax::sparsemax` (the sorted-row threshold in f64).
//!
//! Samples: extent 1, tails, rows with many and few elements in the
//! support (inputs spread over [-4, 4] and over [-0.01, 0.01]), a row per
//! block and many, the dim strided (few and many rows), transposed,
//! broadcast, strided and misaligned outputs, rank 8, empty, NaN/inf rows
//! (forward), a long row and a realistic [256, 4096]. The backward is
//! compared at the device's own y (its support).

use baracuda_kernels::reference::softmax as r;
use baracuda_kernels::*;

use crate::harness::*;
use crate::reduce::{
    nan_marked, out_layout, run_twice, subnormal_spacing, view_result, x_layout, Layout,
};
use crate::table::{BadInputs, OpCase, Tensors};

/// One sparsemax problem.
#[derive(Clone, Debug)]
pub struct SparsemaxSample {
    shape: Vec<usize>,
    dim: usize,
    layout: Layout,
    /// Largest |x|: 4 spreads the support thin, 0.01 puts most of a row in
    /// it.
    scale: f64,
    /// NaN, +inf and -inf in the first rows (forward only).
    special: bool,
}

impl SparsemaxSample {
    fn n(&self) -> usize {
        self.shape[self.dim]
    }
    fn row(&self, k: usize) -> Vec<usize> {
        let inner: usize = self.shape[self.dim + 1..].iter().product();
        let (o, j) = (k / inner, k % inner);
        (0..self.n())
            .map(|i| (o * self.n() + i) * inner + j)
            .collect()
    }
}

/// The sparsemax row.
pub const fn row(name: &'static str) -> OpCase<SparsemaxSample> {
    OpCase {
        name,
        dtypes: FLOATS,
        backward: true,
        samples: |_| samples(),
        inputs,
        run,
        reference,
        tolerance,
        bad_inputs,
        unsupported,
    }
}

/// The sparsemax rows of the op table.
pub(crate) static ROWS: &[&dyn crate::table::Row] = &[&row("sparsemax")];

crate::table_tests!(ROWS; sparsemax);

fn samples() -> Vec<SparsemaxSample> {
    use Layout::*;
    let s = |shape: &[usize], dim: usize, layout, scale: f64| SparsemaxSample {
        shape: shape.to_vec(),
        dim,
        layout,
        scale,
        special: false,
    };
    let mut special = s(&[6, 33], 1, Contiguous, 4.0);
    special.special = true;
    vec![
        s(&[1], 0, Contiguous, 4.0),
        s(&[7, 1], 1, Contiguous, 4.0),
        s(&[37, 29], 1, Contiguous, 4.0),
        s(&[37, 29], 1, Contiguous, 0.01),
        s(&[300, 7], 1, StridedOut, 1.0),
        s(&[5, 100], 1, Misaligned, 0.1),
        s(&[9, 4099], 1, Contiguous, 0.01),
        s(&[2, 40000], 1, StridedOut, 4.0),
        s(&[4097, 3], 0, Contiguous, 1.0),
        s(&[40, 8200], 0, Contiguous, 0.01),
        s(&[3, 5, 7, 9], 2, Contiguous, 1.0),
        s(&[6, 50, 70], 2, Transposed, 0.1),
        s(&[8, 300], 0, Broadcast, 1.0),
        s(&[8, 300], 1, Broadcast, 0.1),
        s(&[2, 3, 1, 2, 3, 2, 1, 5], 4, Contiguous, 1.0),
        s(&[0, 7], 1, Contiguous, 1.0),
        s(&[5, 0], 1, Contiguous, 1.0),
        special,
        s(&[1, 300_000], 1, Contiguous, 0.001),
        s(&[256, 4096], 1, Contiguous, 4.0),
    ]
}

fn inputs(s: &SparsemaxSample, rng: &mut Rng) -> Tensors {
    let n: usize = s.shape.iter().product();
    let mut x = rng.vec(n, -s.scale, s.scale);
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
        // -inf elements in an otherwise finite row: 0, outside the support
        x[s.row(3)[0]] = -inf;
        x[s.row(4)[3]] = -inf;
    }
    let mut t = Tensors::default();
    t.push("x", x);
    t.push("dy", rng.vec(n, -1.0, 1.0));
    t
}

fn reference(_: ElementKind, s: &SparsemaxSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let mut t = Tensors::default();
    t.push(
        "y",
        nan_marked(r::sparsemax(&s.shape, s.dim, inputs.get("x"))),
    );
    if got.find("dx").is_some() {
        let dx = r::sparsemax_backward(&s.shape, s.dim, got.get("y"), inputs.get("dy"));
        t.push("dx", dx);
    }
    t
}

fn tolerance(
    kind: ElementKind,
    s: &SparsemaxSample,
    name: &str,
    want: &[f64],
    _: &Tensors,
) -> Tolerance {
    let (u_t, u_acc) = (kind.unit_roundoff(), acc_roundoff(kind));
    let n = s.n().max(1) as f64;
    let tiny = subnormal_spacing(kind);
    match name {
        // y = x - tau, rounded once to T: tau = (sum_S x - 1) / |S| carries
        // the sum's rounding over |S| (terms of at most `scale`: about
        // scale u_acc per term a thread folds), the subtraction u_acc of
        // |x| + |tau| <= scale + 1
        "y" => Tolerance {
            rtol: 2.0 * u_t,
            atol: 4.0 * u_acc * (s.scale + 1.0)
                + 4.0 * u_acc * s.scale * (n / 1024.0 + 24.0)
                + tiny,
        },
        // dy - mean: the mean's rounding, and an element at the support's
        // edge on either side (its y about 0) may take dy - mean or 0
        _ => {
            let mut t = Tolerance::of_max(2.0 * u_t + 8.0 * u_acc, 4.0 * u_t, want);
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
    s: &SparsemaxSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    crate::with_float!(kind, T => by_rank!(s.shape.len(), N => run_ranked::<T, N>(s, inputs, backward)))
}

fn run_ranked<T: Element, const N: usize>(
    s: &SparsemaxSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!("sparsemax {} {:?} dim {}", T::KIND, s.shape, s.dim);
    let desc = SparsemaxDescriptor::new(T::KIND, arr::<N>(&s.shape)).with_dim(s.dim);
    let plan = select::<SparsemaxPlan<T, N>>(&desc, &PlanPreference::default())?;
    let (xs, x_len, x_off) = x_layout(s.layout, &s.shape);
    let xbuf = upload_strided::<T>(inputs.get("x"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<N>(&s.shape)?;
    let (ys, y_len) = out_layout(s.layout, &s.shape);
    let forward = |y: DeviceSliceMut<'_, T>| {
        let y = TensorMut::new(y, arr::<N>(&s.shape), arr::<N>(&ys)).map_err(|e| e.to_string())?;
        plan.run(&g.stream, Workspace::None, SparsemaxArgs { x, y })
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
        SparsemaxBwArgs {
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

/// Every select and run check, each returning its error and writing
/// nothing.
fn bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let st = &g.stream;
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let desc = SparsemaxDescriptor::new(ElementKind::F32, [4, 96]);
    let f64_desc = SparsemaxDescriptor {
        element: ElementKind::F64,
        ..desc
    };
    b.own_kernel_select::<SparsemaxPlan<f32, 2>>(&desc, &f64_desc)?;
    b.expect(
        "dim 2 of rank 2",
        SparsemaxPlan::<f32, 2>::select(st, &desc.with_dim(2), &pref),
        invalid_descriptor("dim"),
        &[],
    )?;
    let plan = SparsemaxPlan::<f32, 2>::select(st, &desc, &pref).map_err(|e| e.to_string())?;
    let mut rng = Rng::new(0x59A7);
    let (xb, _) = upload::<f32>(&rng.vec(8 * 96, -1.0, 1.0));
    let x = TensorRef::contiguous(xb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let x3 = TensorRef::contiguous(xb.as_slice(), [3, 96]).map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(4 * 96);
    let r = plan.run(
        st,
        Workspace::None,
        SparsemaxArgs {
            x: x3,
            y: view(&mut y)?,
        },
    );
    b.expect("x [3, 96]", r, shape_mismatch("x"), &[&y])?;
    let xs = xb.as_slice();
    // SAFETY: a bad-input test: the run must reject the aliasing view
    // before anything is enqueued, so nothing reads or writes through it.
    let alias =
        unsafe { DeviceSliceMut::<f32>::from_raw_parts(xs.addr() + 16, 4 * 96, xs.ctx_id()) };
    let r = plan.run(
        st,
        Workspace::None,
        SparsemaxArgs {
            x,
            y: TensorMut::contiguous(alias, [4, 96]).map_err(|e| e.to_string())?,
        },
    );
    b.expect("y overlapping x", r, invalid_argument("y"), &[])?;
    let (dyb, _) = upload::<f32>(&rng.vec(4 * 96, -1.0, 1.0));
    let dy = TensorRef::contiguous(dyb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let mut dx = Guarded::<f32>::new(4 * 96);
    let r = plan.run_bw(
        st,
        Workspace::None,
        SparsemaxBwArgs {
            y: x3,
            dy,
            dx: view(&mut dx)?,
        },
    );
    b.expect("y [3, 96]", r, shape_mismatch("y"), &[&dx])?;
    let r = plan.run_bw(
        st,
        Workspace::None,
        SparsemaxBwArgs {
            y: x,
            dy: x3,
            dx: view(&mut dx)?,
        },
    );
    b.expect("dy [3, 96]", r, shape_mismatch("dy"), &[&dx])?;
    let ds = dyb.as_slice();
    // SAFETY: as above: rejected before anything is enqueued.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(ds.addr(), 4 * 96, ds.ctx_id()) };
    let r = plan.run_bw(
        st,
        Workspace::None,
        SparsemaxBwArgs {
            y: x,
            dy,
            dx: TensorMut::contiguous(alias, [4, 96]).map_err(|e| e.to_string())?,
        },
    );
    b.expect("dx over dy", r, invalid_argument("dx"), &[])?;
    b.done()
}

/// A `[4, 96]` view of `o`.
fn view(o: &mut Guarded<f32>) -> Result<TensorMut<'_, f32, 2>, String> {
    TensorMut::contiguous(o.slice_mut(), [4, 96]).map_err(|e| e.to_string())
}

/// Selecting on `kind`, which the row does not claim, is `Unsupported`.
fn unsupported(kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = SparsemaxDescriptor::new(kind, [8, 3]);
        expect_unsupported::<SparsemaxPlan<T, 2>>(&format!("sparsemax on {kind}"), &desc)
    })
}
