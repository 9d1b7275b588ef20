//! GPU tests of [`TracePlan`]: `torch.trace` and its backward, against
//! `reference::reduce::trace`.
//!
//! Samples: square and non-square matrices (more rows or more columns),
//! size 1, empty rows, columns or both (a trace of 0, nothing to write
//! back), transposed, padded and misaligned rows, every other column,
//! broadcast rows and a broadcast scalar (stride 0), diagonals whose sum
//! splits over blocks, NaN and infinities on the diagonal, NaN everywhere
//! off it (not read: the trace stays finite), a strided `dx`, and in f32 an
//! [8192, 8192] matrix. Each forward runs twice, the second time into a
//! zero-filled output; the gradient must be `dy` on the diagonal and
//! exactly 0 everywhere else, every element written. i32 and i64: the same
//! samples on integer values (over the dtype's range, so that i32 traces
//! leave i32 and i64 ones wrap around; the dtype's limits where the floats
//! hold NaN and infinities), the i64 trace exact against
//! `reference::reduce::trace_i64`; the integer backward must be
//! `Unsupported`.

use baracuda_kernels::reference::reduce as r;
use baracuda_kernels::*;

use crate::harness::*;
use crate::reduce::{nan_marked, run_twice, view_result, Layout};
use crate::table::{BadInputs, OpCase, Tensors};

/// How a sample lays out x.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum XLayout {
    /// Row-major, 16-byte aligned.
    Contiguous,
    /// Column-major.
    Transposed,
    /// Rows padded by 3 elements, starting one element into the buffer.
    PaddedRows,
    /// Every other column of a matrix twice as wide.
    EveryOtherColumn,
    /// One row repeated (strides `(0, 1)`).
    BroadcastRow,
    /// One value repeated (strides `(0, 0)`).
    BroadcastScalar,
}

/// Special values a sample's input holds.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Values {
    /// Random in [-2, 2).
    Random,
    /// A NaN on the diagonal.
    NanOnDiagonal,
    /// +inf on the diagonal.
    InfOnDiagonal,
    /// +inf and -inf on the diagonal (NaN).
    BothInfs,
    /// NaN everywhere off the diagonal.
    NanOffDiagonal,
}

/// One trace problem.
#[derive(Clone, Debug)]
pub struct TraceSample {
    shape: [usize; 2],
    layout: XLayout,
    values: Values,
    /// dx with rows padded by one element.
    padded_dx: bool,
    /// The integer dtype the values are drawn for (i32, i64), or None.
    int: Option<ElementKind>,
}

impl TraceSample {
    /// x's strides, buffer length and offset.
    fn x_layout(&self) -> ([usize; 2], usize, usize) {
        let [m, n] = self.shape;
        match self.layout {
            XLayout::Contiguous => ([n, 1], m * n, 0),
            XLayout::Transposed => ([1, m], m * n, 0),
            XLayout::PaddedRows => ([n + 3, 1], m * (n + 3), 1),
            XLayout::EveryOtherColumn => ([2 * n, 2], m * 2 * n, 0),
            XLayout::BroadcastRow => ([0, 1], n, 0),
            XLayout::BroadcastScalar => ([0, 0], 1, 0),
        }
    }
    /// dx's strides and buffer length.
    fn dx_layout(&self) -> ([usize; 2], usize) {
        let [m, n] = self.shape;
        if self.padded_dx {
            ([n + 1, 1], m * (n + 1))
        } else {
            ([n, 1], m * n)
        }
    }
    /// The sum over the diagonal as a reduction sample: the forward's
    /// bound.
    fn diagonal_sum(&self) -> crate::reduce::ReduceSample {
        let k = self.shape[0].min(self.shape[1]);
        crate::reduce::sample(ReduceOp::Sum, &[k], &[0], Layout::Contiguous)
    }
}

/// The trace row of the op table.
pub(crate) static ROWS: &[&dyn crate::table::Row] = &[&OpCase {
    name: "reduce_trace",
    dtypes: NUMERIC,
    backward: true,
    samples,
    inputs,
    run,
    reference,
    tolerance,
    bad_inputs,
    unsupported,
}];

crate::table_tests!(ROWS; reduce_trace);

fn samples(kind: ElementKind) -> Vec<TraceSample> {
    use XLayout::*;
    let s = |m: usize, n: usize, layout| TraceSample {
        shape: [m, n],
        layout,
        values: Values::Random,
        padded_dx: false,
        int: (!kind.is_float()).then_some(kind),
    };
    let with = |mut x: TraceSample, v| {
        x.values = v;
        x
    };
    let padded_dx = |mut x: TraceSample| {
        x.padded_dx = true;
        x
    };
    let mut v = vec![
        s(4, 4, Contiguous),
        s(3, 5, Contiguous),
        padded_dx(s(5, 3, Contiguous)),
        s(1, 1, Contiguous),
        s(1, 700, Contiguous),
        // empty: a trace of 0
        s(0, 3, Contiguous),
        s(3, 0, Contiguous),
        s(0, 0, Contiguous),
        // strides
        s(64, 64, Transposed),
        padded_dx(s(100, 37, PaddedRows)),
        s(37, 100, EveryOtherColumn),
        s(300, 300, BroadcastRow),
        s(50, 70, BroadcastScalar),
        // special values
        with(s(6, 6, Contiguous), Values::NanOnDiagonal),
        with(s(6, 9, Contiguous), Values::InfOnDiagonal),
        with(s(9, 6, Transposed), Values::BothInfs),
        with(s(40, 40, Contiguous), Values::NanOffDiagonal),
        // long diagonals: one block, then split over two
        s(1000, 1000, Contiguous),
        s(3000, 2000, PaddedRows),
        padded_dx(s(6000, 4500, BroadcastRow)),
    ];
    if kind == ElementKind::F32 {
        // realistic: an [8192, 8192] matrix (the diagonal splits 4 ways)
        v.push(s(8192, 8192, Contiguous));
    }
    v
}

/// x (logical, row-major) and dy.
fn inputs(s: &TraceSample, rng: &mut Rng) -> Tensors {
    let [m, n] = s.shape;
    let mut x = match s.int {
        Some(kind) => int_values(kind, IntDraw::Wide, m * n, rng),
        None => rng.vec(m * n, -2.0, 2.0),
    };
    // integers: the dtype's limits where the floats hold NaN, inf, -inf
    let (nan, inf, neg_inf) = match s.int {
        Some(kind) => {
            let (min, max) = int_limits(kind);
            (min, max, min)
        }
        None => (f64::NAN, f64::INFINITY, f64::NEG_INFINITY),
    };
    match s.layout {
        XLayout::BroadcastRow => (n..m * n).for_each(|i| x[i] = x[i % n]),
        XLayout::BroadcastScalar => (1..m * n).for_each(|i| x[i] = x[0]),
        _ => {}
    }
    let diag = |i: usize| i * n + i;
    match s.values {
        Values::Random => {}
        Values::NanOnDiagonal => x[diag(2)] = nan,
        Values::InfOnDiagonal => x[diag(3)] = inf,
        Values::BothInfs => {
            x[diag(1)] = inf;
            x[diag(4)] = neg_inf;
        }
        Values::NanOffDiagonal => (0..m * n)
            .filter(|&i| i / n != i % n)
            .for_each(|i| x[i] = nan),
    }
    let mut t = Tensors::default();
    t.push("x", x);
    t.push("dy", rng.vec(1, -1.0, 1.0));
    t
}

fn reference(_: ElementKind, s: &TraceSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let [m, n] = s.shape;
    let mut t = Tensors::default();
    if s.int.is_some() {
        // i64 arithmetic with wrap-around; the inputs are exact in f64
        let xi: Vec<i64> = inputs.get("x").iter().map(|&v| v as i64).collect();
        t.push_i64("y", &[r::trace_i64(m, n, &xi)]);
        return t;
    }
    t.push("y", nan_marked(vec![r::trace(m, n, inputs.get("x"))]));
    if got.find("dx").is_some() {
        t.push("dx", r::trace_backward(m, n, inputs.get("dy")[0]));
    }
    t
}

/// y: the sum's bound over the diagonal; dx: exact (dy copied, zeros).
fn tolerance(
    kind: ElementKind,
    s: &TraceSample,
    name: &str,
    want: &[f64],
    inputs: &Tensors,
) -> Tolerance {
    match name {
        _ if !kind.is_float() => Tolerance::EXACT,
        "dx" => Tolerance::EXACT,
        _ => crate::reduce::tolerance(kind, &s.diagonal_sum(), name, want, inputs),
    }
}

fn run(
    kind: ElementKind,
    s: &TraceSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    match kind {
        ElementKind::I32 => run_int::<i32>(s, inputs),
        ElementKind::I64 => run_int::<i64>(s, inputs),
        _ => crate::with_float!(kind, T => run_typed::<T>(s, inputs, backward)),
    }
}

/// An integer sample: the i64 trace run twice, read back exactly; the
/// backward must be `Unsupported` and write nothing.
fn run_int<T: Element>(s: &TraceSample, inputs: &Tensors) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!("trace {} {:?} {:?}", T::KIND, s.shape, s.layout);
    let desc = TraceDescriptor::new(T::KIND, s.shape[0], s.shape[1]);
    let plan = select::<TracePlan<T, i64>>(&desc, &PlanPreference::default())?;
    let (xs, x_len, x_off) = s.x_layout();
    let xbuf = upload_strided::<T>(inputs.get("x"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<2>(&s.shape)?;
    let mut ws = workspace(plan.workspace_size());
    let forward = |y: DeviceSliceMut<'_, i64>| {
        let y = TensorMut::new(y, [], []).map_err(|e| e.to_string())?;
        plan.run(
            &g.stream,
            Workspace::Borrowed(ws.as_slice_mut()),
            TraceArgs { x, y },
        )
        .map_err(|e| format!("{what}: {e}"))
    };
    let (y, _) = run_twice(&what, 1, &[], &[], forward)?;
    let mut t = Tensors::default();
    t.push_i64("y", &view_ints(&what, &y, &[], &[])?);
    let dy = TensorRef::new(y.slice(), [], []).map_err(|e| e.to_string())?;
    let mut dx = Guarded::<T>::new(s.shape[0] * s.shape[1]);
    let r = plan.run_bw(
        &g.stream,
        Workspace::None,
        TraceBwArgs {
            dy,
            dx: TensorMut::contiguous(dx.slice_mut(), s.shape).map_err(|e| e.to_string())?,
        },
    );
    expect_err(&format!("{what} backward"), r, crate::harness::unsupported)?;
    dx.untouched(&format!("{what} backward"))?;
    Ok(t)
}

fn run_typed<T: Element>(
    s: &TraceSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!("trace {} {:?} {:?}", T::KIND, s.shape, s.layout);
    let desc = TraceDescriptor::new(T::KIND, s.shape[0], s.shape[1]);
    let plan = select::<TracePlan<T>>(&desc, &PlanPreference::default())?;
    let (xs, x_len, x_off) = s.x_layout();
    let xbuf = upload_strided::<T>(inputs.get("x"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<2>(&s.shape)?;
    let mut ws = workspace(plan.workspace_size());
    let forward = |y: DeviceSliceMut<'_, T>| {
        let y = TensorMut::new(y, [], []).map_err(|e| e.to_string())?;
        plan.run(
            &g.stream,
            Workspace::Borrowed(ws.as_slice_mut()),
            TraceArgs { x, y },
        )
        .map_err(|e| format!("{what}: {e}"))
    };
    let (_, y_vals) = run_twice(&what, 1, &[], &[], forward)?;
    let mut t = Tensors::default();
    t.push("y", nan_marked(y_vals));
    if !backward {
        return Ok(t);
    }
    let (dyb, _) = upload::<T>(inputs.get("dy"));
    let dy = TensorRef::new(dyb.as_slice(), [], []).map_err(|e| e.to_string())?;
    let (dxs, dx_len) = s.dx_layout();
    let mut dx = Guarded::<T>::new(dx_len);
    plan.run_bw(
        &g.stream,
        Workspace::None,
        TraceBwArgs {
            dy,
            dx: TensorMut::new(dx.slice_mut(), s.shape, dxs).map_err(|e| e.to_string())?,
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

/// Every select, run and run_bw check, each returning its error and
/// writing nothing.
fn bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let desc = TraceDescriptor::new(ElementKind::F32, 4, 4);
    let f64_desc = TraceDescriptor::new(ElementKind::F64, 4, 4);
    b.own_kernel_select::<TracePlan<f32>>(&desc, &f64_desc)?;
    let sel = |d: &TraceDescriptor, p: &PlanPreference| TracePlan::<f32>::select(&g.stream, d, p);

    // A long diagonal splits: a workspace cap below it, and no workspace.
    let long = TraceDescriptor::new(ElementKind::F32, 8192, 8192);
    b.expect(
        "workspace cap 16 bytes",
        sel(&long, &pref.with_max_workspace_bytes(16)),
        preference_rejected("max_workspace_bytes"),
        &[],
    )?;
    let plan = sel(&long, &pref).map_err(|e| e.to_string())?;
    if plan.workspace_size() == 0 {
        return Err("the trace of an [8192, 8192] matrix should split".into());
    }
    let mut rng = Rng::new(0x7ACE);
    let (row, _) = upload::<f32>(&rng.vec(8192, -1.0, 1.0));
    let x_long = TensorRef::new(row.as_slice(), [8192, 8192], [0, 1]).map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(1);
    let y_view = TensorMut::new(y.slice_mut(), [], []).map_err(|e| e.to_string())?;
    let r = plan.run(
        &g.stream,
        Workspace::None,
        TraceArgs {
            x: x_long,
            y: y_view,
        },
    );
    b.expect("no workspace", r, workspace_too_small, &[&y])?;

    let plan = sel(&desc, &pref).map_err(|e| e.to_string())?;
    let shared = Guarded::<f32>::new(4 * 5);
    let x = TensorRef::contiguous(shared.slice(), [4, 4]).map_err(|e| e.to_string())?;
    let x3 = TensorRef::contiguous(shared.slice(), [3, 4]).map_err(|e| e.to_string())?;
    let y_view = TensorMut::new(y.slice_mut(), [], []).map_err(|e| e.to_string())?;
    let r = plan.run(&g.stream, Workspace::None, TraceArgs { x: x3, y: y_view });
    b.expect("x [3, 4]", r, shape_mismatch("x"), &[&y])?;
    // y inside x's memory, off the diagonal
    let sh = shared.slice();
    // SAFETY: a bad-input test: the run must reject the aliasing view
    // before anything is enqueued, so nothing writes through it.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(sh.addr() + 4, 1, sh.ctx_id()) };
    let alias = TensorMut::new(alias, [], []).map_err(|e| e.to_string())?;
    let r = plan.run(&g.stream, Workspace::None, TraceArgs { x, y: alias });
    b.expect("y overlapping x", r, invalid_argument("y"), &[&shared])?;

    // Backward.
    let (dyb, _) = upload::<f32>(&[0.5]);
    let dy = TensorRef::new(dyb.as_slice(), [], []).map_err(|e| e.to_string())?;
    let mut dx = Guarded::<f32>::new(4 * 5);
    let dx45 = TensorMut::contiguous(dx.slice_mut(), [4, 5]).map_err(|e| e.to_string())?;
    let r = plan.run_bw(&g.stream, Workspace::None, TraceBwArgs { dy, dx: dx45 });
    b.expect("dx [4, 5]", r, shape_mismatch("dx"), &[&dx])?;
    // dy inside dx's memory
    let both = Guarded::<f32>::new(16);
    let dy_in = TensorRef::new(both.slice().slice(5..6).expect("in buffer"), [], [])
        .map_err(|e| e.to_string())?;
    let sl = both.slice();
    // SAFETY: as above.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(sl.addr(), 16, sl.ctx_id()) };
    let r = plan.run_bw(
        &g.stream,
        Workspace::None,
        TraceBwArgs {
            dy: dy_in,
            dx: TensorMut::contiguous(alias, [4, 4]).map_err(|e| e.to_string())?,
        },
    );
    b.expect("dx over dy", r, invalid_argument("dx"), &[&both])?;
    // an integer trace is an i64
    let int = TraceDescriptor::new(ElementKind::I32, 4, 4);
    let r = TracePlan::<i32, i32>::select(&g.stream, &int, &pref);
    b.expect("i32 with an i32 y", r, dtype_mismatch, &[])?;
    b.done()
}

/// Selecting trace on `kind`, which the row does not claim, is
/// `Unsupported`.
fn unsupported(kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = TraceDescriptor::new(kind, 3, 3);
        expect_unsupported::<TracePlan<T>>(&format!("trace on {kind}"), &desc)
    })
}
