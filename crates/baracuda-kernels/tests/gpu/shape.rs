//! GPU tests of the shape family: one op-table row per op (flip, roll,
//! tril, triu, the four pad modes, cat, stack; and in `shape/layout.rs`
//! repeat, repeat_interleave, diagonal, diag_embed, diag, unfold, slice),
//! against `reference::shape`.
//!
//! Samples cover size-1 and empty dims, tails (extents that are no
//! multiple of the 16-byte vector), the vector path (a contiguous last dim
//! of whole vectors) and its reversed and misaligned loads, the
//! warp-per-row kernels (2048 rows or more of 32 or more), transposed,
//! broadcast (stride 0) and misaligned inputs, strided outputs, rank 8,
//! NaN and infinities (moved as they are), and one large shape per op.
//! Forwards run twice, the second time into a zero-filled output, and
//! must agree bit for bit. Cat and stack move bytes and claim every dtype
//! but bool (integers and fp8 included), on values in [-100, 100). Values are moved, so forwards and gathering
//! backwards are exact; the pad backward of reflect, replicate and
//! circular sums, bounded by its term count.

use baracuda_kernels::reference::shape as r;
use baracuda_kernels::*;

use crate::harness::*;
use crate::reduce::{nan_marked, out_layout, run_twice, view_result, x_layout, Layout};
use crate::table::{BadInputs, OpCase, Row, Tensors};

mod layout;
use layout::layout_row;

/// `$body` with `N` bound to the rank.
macro_rules! by_rank {
    ($n:expr, $N:ident => $body:expr) => {
        by_rank!(@ $n, $N, $body; 0 1 2 3 4 5 8)
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

// ---------------------------------------------------------------------------
// Index-map ops: flip, roll, tril, triu, pad
// ---------------------------------------------------------------------------

/// One problem of an index-map row.
#[derive(Clone, Debug)]
pub struct MapSample {
    op: ShapeOp,
    shape: Vec<usize>,
    layout: Layout,
    /// NaN, +inf and -inf among x's first elements (forward only).
    special: bool,
}

fn out_shape(s: &MapSample) -> Vec<usize> {
    let n = s.shape.len();
    by_rank_shape(&s.op, &s.shape, n)
}

/// [`ShapeDescriptor::output_shape`] for a shape of any tested rank.
fn by_rank_shape(op: &ShapeOp, shape: &[usize], n: usize) -> Vec<usize> {
    let r: Result<Vec<usize>, String> = by_rank!(n, N => ShapeDescriptor::new(*op, ElementKind::F32, arr::<N>(shape))
        .output_shape()
        .map(|s| s.to_vec())
        .map_err(|e| e.to_string()));
    r.unwrap_or_else(|e| panic!("{op:?} on {shape:?}: {e}"))
}

/// Every map row's op, in [`ROWS`] order.
const MAP_KINDS: [MapKind; 8] = [
    MapKind::Flip,
    MapKind::Roll,
    MapKind::Tril,
    MapKind::Triu,
    MapKind::Pad(PadMode::Constant),
    MapKind::Pad(PadMode::Reflect),
    MapKind::Pad(PadMode::Replicate),
    MapKind::Pad(PadMode::Circular),
];

/// The row of the map op `MAP_KINDS[K]` (its parameters come with each
/// sample).
pub const fn map_row<const K: usize>(name: &'static str) -> OpCase<MapSample> {
    OpCase {
        name,
        dtypes: FLOATS,
        backward: true,
        samples: |_| map_samples(MAP_KINDS[K]),
        inputs: map_inputs,
        run: map_run,
        reference: map_reference,
        tolerance: map_tolerance,
        bad_inputs: || map_bad_inputs(MAP_KINDS[K]),
        unsupported: map_unsupported,
    }
}

fn map_samples(kind: MapKind) -> Vec<MapSample> {
    match kind {
        MapKind::Flip => flip_samples(),
        MapKind::Roll => roll_samples(),
        MapKind::Tril => tri_samples(true),
        MapKind::Triu => tri_samples(false),
        MapKind::Pad(mode) => pad_samples(mode),
    }
}

/// Which op a map row tests.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum MapKind {
    Flip,
    Roll,
    Tril,
    Triu,
    Pad(PadMode),
}

/// The family's rows of the op table.
pub(crate) static ROWS: &[&dyn Row] = &[
    &map_row::<0>("shape_flip"),
    &map_row::<1>("shape_roll"),
    &map_row::<2>("shape_tril"),
    &map_row::<3>("shape_triu"),
    &map_row::<4>("shape_pad_constant"),
    &map_row::<5>("shape_pad_reflect"),
    &map_row::<6>("shape_pad_replicate"),
    &map_row::<7>("shape_pad_circular"),
    &CAT_ROW,
    &STACK_ROW,
    &layout_row::<0>("shape_repeat"),
    &layout_row::<1>("shape_repeat_interleave"),
    &layout_row::<2>("shape_diagonal"),
    &layout_row::<3>("shape_diag_embed"),
    &layout_row::<4>("shape_diag"),
    &layout_row::<5>("shape_unfold"),
    &layout_row::<6>("shape_slice"),
];

crate::table_tests!(
    ROWS;
    shape_flip,
    shape_roll,
    shape_tril,
    shape_triu,
    shape_pad_constant,
    shape_pad_reflect,
    shape_pad_replicate,
    shape_pad_circular,
    shape_cat,
    shape_stack,
    shape_repeat,
    shape_repeat_interleave,
    shape_diagonal,
    shape_diag_embed,
    shape_diag,
    shape_unfold,
    shape_slice,
);

fn ms(op: ShapeOp, shape: &[usize], layout: Layout) -> MapSample {
    MapSample {
        op,
        shape: shape.to_vec(),
        layout,
        special: false,
    }
}

fn special(mut s: MapSample) -> MapSample {
    s.special = true;
    s
}

fn flip_samples() -> Vec<MapSample> {
    use Layout::*;
    let f = ShapeOp::flip;
    vec![
        ms(f(&[]), &[], Contiguous),
        ms(f(&[0]), &[1], Contiguous),
        ms(f(&[0]), &[7], Contiguous),
        ms(f(&[]), &[3, 4], Contiguous),
        ms(f(&[1]), &[37, 29], Contiguous),
        ms(f(&[0, 1]), &[37, 29], Transposed),
        ms(f(&[0]), &[300, 7], StridedOut),
        ms(f(&[-1]), &[5, 100], Misaligned),
        ms(f(&[1, 3]), &[3, 5, 7, 9], Contiguous),
        ms(f(&[0, 1]), &[8, 300], Broadcast),
        ms(f(&[0, 4, 7]), &[2, 3, 1, 2, 3, 2, 1, 5], Contiguous),
        ms(f(&[1]), &[0, 7], Contiguous),
        ms(f(&[0, 1]), &[5, 0], Contiguous),
        // the vector path: reversed loads (last dim), straight loads
        ms(f(&[1]), &[64, 256], Contiguous),
        ms(f(&[0]), &[64, 256], Contiguous),
        ms(f(&[-1, -3]), &[4, 6, 5, 64], Contiguous),
        special(ms(f(&[1]), &[6, 40], Contiguous)),
        // a warp per row (2048 rows or more, no whole vectors)
        ms(f(&[1]), &[2100, 33], Contiguous),
        ms(f(&[0, 1]), &[512, 4096], Contiguous),
        // a warp per row in vectors (2048 rows or more of 32 vectors or
        // more; 33 bf16 vectors leave one lane a second), reversed loads
        ms(f(&[0, 1]), &[2048, 264], Contiguous),
    ]
}

fn roll_samples() -> Vec<MapSample> {
    use Layout::*;
    let r = ShapeOp::roll;
    vec![
        ms(r(&[5], &[]), &[], Contiguous),
        ms(r(&[3], &[0]), &[1], Contiguous),
        ms(r(&[3], &[0]), &[7], Contiguous),
        ms(r(&[3], &[1]), &[37, 29], Contiguous),
        ms(r(&[-1, 7], &[0, 1]), &[37, 29], Transposed),
        ms(r(&[2, -5], &[1, 1]), &[37, 29], StridedOut),
        ms(r(&[5], &[]), &[37, 29], Contiguous),
        ms(r(&[-100], &[]), &[37, 29], Transposed),
        ms(r(&[0], &[1]), &[5, 100], Misaligned),
        ms(r(&[1, 2, 3], &[0, 2, 3]), &[3, 5, 7, 9], Contiguous),
        ms(r(&[3], &[0]), &[8, 300], Broadcast),
        ms(r(&[1, -1], &[0, 7]), &[2, 3, 1, 2, 3, 2, 1, 5], Contiguous),
        ms(r(&[4], &[1]), &[0, 7], Contiguous),
        ms(r(&[4], &[]), &[5, 0], Contiguous),
        // the vector path: aligned (shift 16) and unaligned (3) loads
        ms(r(&[16], &[1]), &[64, 256], Contiguous),
        ms(r(&[3, 5], &[1, 0]), &[64, 256], Contiguous),
        special(ms(r(&[7], &[1]), &[6, 40], Contiguous)),
        // a warp per row; a dense flattened roll (one rolled dim, vectors)
        ms(r(&[2, 5], &[0, 1]), &[2100, 33], Contiguous),
        ms(r(&[-3], &[]), &[64, 40], Contiguous),
        ms(r(&[-3], &[]), &[64, 40], StridedOut),
        ms(r(&[129, -77], &[0, 1]), &[512, 4096], Contiguous),
        ms(r(&[1000], &[]), &[512, 4096], Contiguous),
    ]
}

fn tri_samples(lower: bool) -> Vec<MapSample> {
    use Layout::*;
    let t = |diagonal| {
        if lower {
            ShapeOp::Tril { diagonal }
        } else {
            ShapeOp::Triu { diagonal }
        }
    };
    vec![
        ms(t(0), &[1, 1], Contiguous),
        ms(t(0), &[5, 5], Contiguous),
        ms(t(-3), &[37, 29], Contiguous),
        ms(t(2), &[37, 29], Transposed),
        ms(t(1), &[300, 7], StridedOut),
        ms(t(-1), &[5, 100], Misaligned),
        ms(t(5), &[2, 3, 17, 33], Contiguous),
        ms(t(0), &[8, 30, 30], Broadcast),
        ms(t(100), &[9, 11], Contiguous),
        ms(t(-100), &[9, 11], Contiguous),
        ms(t(0), &[2, 1, 3, 1, 2, 1, 9, 7], Contiguous),
        ms(t(0), &[0, 5, 5], Contiguous),
        ms(t(0), &[4, 0, 3], Contiguous),
        // the vector path: whole, zero and mixed vectors
        ms(t(0), &[3, 64, 64], Contiguous),
        ms(t(-9), &[2, 40, 128], Contiguous),
        special(ms(t(0), &[6, 40], Contiguous)),
        // a warp per row
        ms(t(2), &[3, 700, 35], Contiguous),
        ms(t(1), &[8, 512, 512], Contiguous),
        ms(t(3), &[8, 300, 264], Contiguous),
    ]
}

fn pad_samples(mode: PadMode) -> Vec<MapSample> {
    use Layout::*;
    use PadMode::*;
    let p = |pad: &[i64]| ShapeOp::pad(mode, pad, if mode == Constant { 1.5 } else { 0.0 });
    let mut v = vec![
        ms(p(&[1, 2]), &[3, 5], Contiguous),
        ms(p(&[2, 1]), &[1, 37, 29], Transposed),
        ms(p(&[3, 3, 3, 3]), &[2, 3, 9, 11], Contiguous),
        ms(p(&[1, 0, 2, 3]), &[3, 10, 7], StridedOut),
        ms(p(&[0, 2, 1, 1]), &[2, 3, 5, 100], Misaligned),
        ms(p(&[1, 2, 2, 1, 1, 1]), &[1, 2, 5, 6, 7], Contiguous),
        ms(p(&[1, 2, 2, 1, 1, 1]), &[2, 5, 6, 7], Broadcast),
        // cropping
        ms(p(&[-1, 2, 3, -2]), &[2, 3, 9, 11], Contiguous),
        ms(p(&[-2, -1]), &[4, 8], Contiguous),
        // the vector path: aligned pads (straight loads) and not
        ms(p(&[8, 8]), &[16, 64, 240], Contiguous),
        ms(p(&[3, 5, 3, 3]), &[2, 8, 30, 59], Contiguous),
        // empty batch
        ms(p(&[1, 1]), &[0, 3, 4], Contiguous),
        special(ms(p(&[2, 2]), &[6, 40], Contiguous)),
        // a warp per row, forward and backward
        ms(p(&[-1, 3]), &[2, 1050, 33], Contiguous),
        ms(p(&[-1, 3]), &[2, 1050, 33], StridedOut),
        ms(p(&[3, 3, 3, 3]), &[8, 16, 64, 64], Contiguous),
        // three padded dims by rows: border rows and planes sum several
        ms(p(&[1, 2, 2, 1, 3, 1]), &[4, 24, 24, 40], Contiguous),
    ];
    match mode {
        Constant => {
            v.push(ms(p(&[1, 1, 2, 0, 0, 1, 1, 1]), &[2, 3, 4, 5], Contiguous));
            v.push(ms(
                p(&[1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1]),
                &[2, 1, 3, 1, 2, 1, 4, 3],
                Contiguous,
            ));
            v.push(ms(p(&[-3, -2]), &[4, 5], Contiguous));
            v.push(ms(p(&[2, 3]), &[4, 0], Contiguous));
        }
        Reflect => {
            v.push(ms(p(&[9, 9]), &[2, 5, 10], Contiguous));
            v.push(ms(p(&[3, 4]), &[5, 10], Contiguous));
            v.push(ms(p(&[0, 1]), &[3, 2], Contiguous));
        }
        Replicate => {
            v.push(ms(p(&[20, 1]), &[3, 5], Contiguous));
            v.push(ms(p(&[7, 9, 5, 4]), &[2, 3, 2, 3], Contiguous));
            v.push(ms(p(&[4, 4]), &[3, 1], Contiguous));
        }
        Circular => {
            v.push(ms(p(&[10, 3]), &[2, 5, 10], Contiguous));
            v.push(ms(p(&[-2, 4, 3, -1]), &[2, 3, 9, 11], Contiguous));
            v.push(ms(p(&[1, 1]), &[3, 1], Contiguous));
        }
    }
    v
}

/// x (logical order; repeated along dim 0 for a broadcast layout) and dy.
fn map_inputs(s: &MapSample, rng: &mut Rng) -> Tensors {
    let n: usize = s.shape.iter().product();
    let mut x = rng.vec(n, -2.0, 2.0);
    if s.layout == Layout::Broadcast {
        let inner = n / s.shape[0].max(1);
        for i in inner..n {
            x[i] = x[i % inner];
        }
    }
    if s.special {
        let v = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0];
        for (i, &e) in v.iter().enumerate() {
            x[3 * i + 1] = e;
        }
    }
    let mut t = Tensors::default();
    t.push("x", x);
    let m: usize = out_shape(s).iter().product();
    t.push("dy", rng.vec(m, -1.0, 1.0));
    t
}

fn map_reference(_: ElementKind, s: &MapSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let x = inputs.get("x");
    let shape = &s.shape;
    let n = shape.len();
    let wrap = |d: i64| d.rem_euclid(n as i64) as usize;
    let dims = |l: &IntList| l.as_slice().iter().map(|&d| wrap(d)).collect::<Vec<_>>();
    let mut t = Tensors::default();
    let y = match s.op {
        ShapeOp::Flip { dims: d } => r::flip(shape, x, &dims(&d)),
        ShapeOp::Roll { shifts, dims: d } if d.is_empty() => r::roll_flat(x, shifts.as_slice()[0]),
        ShapeOp::Roll { shifts, dims: d } => r::roll(shape, x, shifts.as_slice(), &dims(&d)),
        ShapeOp::Tril { diagonal } => r::triangle(shape, x, diagonal, true),
        ShapeOp::Triu { diagonal } => r::triangle(shape, x, diagonal, false),
        ShapeOp::Pad { mode, pad, value } => r::pad(shape, x, pad.as_slice(), mode, value).1,
    };
    t.push("y", nan_marked(y));
    if got.find("dx").is_some() {
        let dy = inputs.get("dy");
        let dx = match s.op {
            ShapeOp::Flip { dims: d } => r::flip(shape, dy, &dims(&d)),
            ShapeOp::Roll { shifts, dims: d } if d.is_empty() => {
                r::roll_flat(dy, -shifts.as_slice()[0])
            }
            ShapeOp::Roll { shifts, dims: d } => {
                let neg: Vec<i64> = shifts.as_slice().iter().map(|v| -v).collect();
                r::roll(shape, dy, &neg, &dims(&d))
            }
            ShapeOp::Tril { diagonal } => r::triangle(shape, dy, diagonal, true),
            ShapeOp::Triu { diagonal } => r::triangle(shape, dy, diagonal, false),
            ShapeOp::Pad { mode, pad, .. } => r::pad_backward(shape, dy, pad.as_slice(), mode),
        };
        t.push("dx", dx);
    }
    t
}

fn map_tolerance(
    kind: ElementKind,
    s: &MapSample,
    name: &str,
    _: &[f64],
    _inputs: &Tensors,
) -> Tolerance {
    match (name, s.op) {
        ("dx", ShapeOp::Pad { mode, pad, .. }) if mode != PadMode::Constant => {
            // sums in f32 (f64) of at most `terms` values of |dy| <= 1,
            // rounded once
            let p = pad.as_slice();
            let terms: i64 = p.chunks(2).map(|c| c[0].abs() + c[1].abs() + 1).product();
            Tolerance {
                rtol: 2.0 * kind.unit_roundoff(),
                atol: 2.0 * terms as f64 * acc_roundoff(kind),
            }
        }
        _ => Tolerance::EXACT,
    }
}

fn map_run(
    kind: ElementKind,
    s: &MapSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    crate::with_float!(kind, T => by_rank!(s.shape.len(), N => map_run_ranked::<T, N>(s, inputs, backward)))
}

fn map_run_ranked<T: Element, const N: usize>(
    s: &MapSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!("{} {} {:?} {:?}", s.op.name(), T::KIND, s.shape, s.layout);
    let desc = ShapeDescriptor::new(s.op, T::KIND, arr::<N>(&s.shape));
    let plan = select::<ShapePlan<T, N>>(&desc, &PlanPreference::default())?;
    let ys_shape = plan.output_shape().to_vec();
    let (xs, x_len, x_off) = x_layout(s.layout, &s.shape);
    let xbuf = upload_strided::<T>(inputs.get("x"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<N>(&s.shape)?;
    let (ys, y_len) = out_layout(s.layout, &ys_shape);
    let forward = |y: DeviceSliceMut<'_, T>| {
        let y = TensorMut::new(y, arr::<N>(&ys_shape), arr::<N>(&ys)).map_err(|e| e.to_string())?;
        plan.run(&g.stream, Workspace::None, ShapeArgs { x, y })
            .map_err(|e| format!("{what}: {e}"))
    };
    let (_, y_vals) = run_twice(&what, y_len, &ys_shape, &ys, forward)?;
    let mut t = Tensors::default();
    t.push("y", nan_marked(y_vals));
    if !backward || s.special {
        return Ok(t);
    }
    let (dyb, _) = upload::<T>(inputs.get("dy"));
    let dy = TensorRef::new(
        dyb.as_slice(),
        arr::<N>(&ys_shape),
        arr::<N>(&contiguous(&ys_shape)),
    )
    .map_err(|e| e.to_string())?;
    let (dxs, dx_len) = out_layout(s.layout, &s.shape);
    let mut dx = Guarded::<T>::new(dx_len);
    plan.run_bw(
        &g.stream,
        Workspace::None,
        ShapeBwArgs {
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

/// Every select and run check of a map row, each returning its error and
/// writing nothing.
fn map_bad_inputs(kind: MapKind) -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let (op, rejected, field) = match kind {
        MapKind::Flip => (ShapeOp::flip(&[0]), ShapeOp::flip(&[1, -1]), "dims"),
        MapKind::Roll => (
            ShapeOp::roll(&[1], &[1]),
            ShapeOp::roll(&[1, 2], &[]),
            "shifts",
        ),
        MapKind::Tril => (ShapeOp::Tril { diagonal: 0 }, ShapeOp::flip(&[2]), "dims"),
        MapKind::Triu => (
            ShapeOp::Triu { diagonal: 1 },
            ShapeOp::roll(&[1], &[-3]),
            "dims",
        ),
        MapKind::Pad(mode) => (
            ShapeOp::pad(mode, &[1, 2], 0.5),
            ShapeOp::pad(mode, &[1, 2, 3], 0.5),
            "pad",
        ),
    };
    let shape = [4usize, 24];
    let desc = ShapeDescriptor::new(op, ElementKind::F32, shape);
    let f64_desc = ShapeDescriptor {
        element: ElementKind::F64,
        ..desc
    };
    b.own_kernel_select::<ShapePlan<f32, 2>>(&desc, &f64_desc)?;
    b.expect(
        "PyTorch rejects the parameters",
        ShapePlan::<f32, 2>::select(
            &g.stream,
            &ShapeDescriptor {
                op: rejected,
                ..desc
            },
            &pref,
        ),
        invalid_descriptor(field),
        &[],
    )?;
    if matches!(kind, MapKind::Tril | MapKind::Triu) {
        let d1 = ShapeDescriptor::new(op, ElementKind::F32, [24]);
        b.expect(
            "rank 1",
            ShapePlan::<f32, 1>::select(&g.stream, &d1, &pref),
            invalid_descriptor("shape"),
            &[],
        )?;
    }
    if let MapKind::Pad(PadMode::Reflect) = kind {
        let big = ShapeDescriptor {
            op: ShapeOp::pad(PadMode::Reflect, &[24, 0], 0.0),
            ..desc
        };
        b.expect(
            "reflect pad of the extent",
            ShapePlan::<f32, 2>::select(&g.stream, &big, &pref),
            invalid_descriptor("pad"),
            &[],
        )?;
    }
    let plan = ShapePlan::<f32, 2>::select(&g.stream, &desc, &pref).map_err(|e| e.to_string())?;
    let ys = plan.output_shape();
    let n_y: usize = ys.iter().product();
    let mut rng = Rng::new(0x5A9E);
    let (xb, _) = upload::<f32>(&rng.vec(5 * 30, -1.0, 1.0));
    let x = TensorRef::contiguous(xb.as_slice(), shape).map_err(|e| e.to_string())?;
    let x3 = TensorRef::contiguous(xb.as_slice(), [3, 24]).map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(n_y + 30);
    let r = run_map(
        &plan,
        x3,
        TensorMut::contiguous(y.slice_mut(), ys).map_err(|e| e.to_string())?,
    );
    b.expect("x [3, 24]", r, shape_mismatch("x"), &[&y])?;
    let r = run_map(
        &plan,
        x,
        TensorMut::contiguous(y.slice_mut(), [ys[0] + 1, ys[1]]).map_err(|e| e.to_string())?,
    );
    b.expect("y one row longer", r, shape_mismatch("y"), &[&y])?;
    // y inside x's memory
    let shared = Guarded::<f32>::new(3 * n_y + 96);
    let xs = TensorRef::contiguous(shared.slice(), shape).map_err(|e| e.to_string())?;
    let s = shared.slice();
    // SAFETY: a bad-input test: the run must reject the aliasing view
    // before anything is enqueued, so nothing reads or writes through it.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(s.addr() + 16, n_y, s.ctx_id()) };
    let r = run_map(
        &plan,
        xs,
        TensorMut::contiguous(alias, ys).map_err(|e| e.to_string())?,
    );
    b.expect("y overlapping x", r, invalid_argument("y"), &[&shared])?;
    // y the same view as x (no in-place form)
    if ys == shape {
        // SAFETY: as above: rejected before anything is enqueued.
        let same = unsafe { DeviceSliceMut::<f32>::from_raw_parts(s.addr(), n_y, s.ctx_id()) };
        let r = run_map(
            &plan,
            xs,
            TensorMut::contiguous(same, ys).map_err(|e| e.to_string())?,
        );
        b.expect("y is x", r, invalid_argument("y"), &[&shared])?;
    }

    // Backward.
    let (dyb, _) = upload::<f32>(&rng.vec(n_y + 30, -1.0, 1.0));
    let dy = TensorRef::contiguous(dyb.as_slice(), ys).map_err(|e| e.to_string())?;
    let dy_bad =
        TensorRef::contiguous(dyb.as_slice(), [ys[0], ys[1] + 1]).map_err(|e| e.to_string())?;
    let mut dx = Guarded::<f32>::new(4 * 24 + 30);
    let r = run_map_bw(
        &plan,
        dy_bad,
        TensorMut::contiguous(dx.slice_mut(), shape).map_err(|e| e.to_string())?,
    );
    b.expect("dy one column longer", r, shape_mismatch("dy"), &[&dx])?;
    let r = run_map_bw(
        &plan,
        dy,
        TensorMut::contiguous(dx.slice_mut(), [5, 24]).map_err(|e| e.to_string())?,
    );
    b.expect("dx [5, 24]", r, shape_mismatch("dx"), &[&dx])?;
    let dys = TensorRef::contiguous(shared.slice(), ys).map_err(|e| e.to_string())?;
    // SAFETY: as above: rejected before anything is enqueued.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(s.addr() + 64, 96, s.ctx_id()) };
    let r = run_map_bw(
        &plan,
        dys,
        TensorMut::contiguous(alias, shape).map_err(|e| e.to_string())?,
    );
    b.expect("dx overlapping dy", r, invalid_argument("dx"), &[&shared])?;
    b.done()
}

/// `plan.run` without a workspace.
fn run_map(
    plan: &ShapePlan<f32, 2>,
    x: TensorRef<'_, f32, 2>,
    y: TensorMut<'_, f32, 2>,
) -> baracuda_kernels::Result<()> {
    plan.run(&gpu().stream, Workspace::None, ShapeArgs { x, y })
}

/// `plan.run_bw` without a workspace.
fn run_map_bw(
    plan: &ShapePlan<f32, 2>,
    dy: TensorRef<'_, f32, 2>,
    dx: TensorMut<'_, f32, 2>,
) -> baracuda_kernels::Result<()> {
    plan.run_bw(&gpu().stream, Workspace::None, ShapeBwArgs { dy, dx })
}

/// `plan.run` of a cat without a workspace.
fn run_cat(
    plan: &CatPlan<f32, 2>,
    xs: &[TensorRef<'_, f32, 2>],
    y: TensorMut<'_, f32, 2>,
) -> baracuda_kernels::Result<()> {
    plan.run(&gpu().stream, Workspace::None, CatArgs { xs, y })
}

/// `plan.run` of a stack without a workspace.
fn run_stack(
    plan: &StackPlan<f32, 2, 3>,
    xs: &[TensorRef<'_, f32, 2>],
    y: TensorMut<'_, f32, 3>,
) -> baracuda_kernels::Result<()> {
    plan.run(&gpu().stream, Workspace::None, StackArgs { xs, y })
}

/// Selecting a map op on `kind`, which no row claims, is `Unsupported`.
fn map_unsupported(kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = ShapeDescriptor::new(ShapeOp::flip(&[0]), kind, [8, 3]);
        expect_unsupported::<ShapePlan<T, 2>>(&format!("flip on {kind}"), &desc)
    })
}

// ---------------------------------------------------------------------------
// cat and stack
// ---------------------------------------------------------------------------

/// One cat (`count` None) or stack (all inputs of `shapes[0]`) problem.
#[derive(Clone, Debug)]
pub struct CatSample {
    shapes: Vec<Vec<usize>>,
    dim: i64,
    /// Some for a stack of this many inputs of `shapes[0]`.
    stack: Option<usize>,
    layout: Layout,
}

impl CatSample {
    fn in_shapes(&self) -> Vec<Vec<usize>> {
        match self.stack {
            Some(k) => vec![self.shapes[0].clone(); k],
            None => self.shapes.clone(),
        }
    }
    fn rank(&self) -> usize {
        self.shapes[0].len()
    }
    fn out_shape(&self) -> Vec<usize> {
        let n = self.rank();
        match self.stack {
            Some(k) => {
                let d = self.dim.rem_euclid(n as i64 + 1) as usize;
                let mut s = self.shapes[0].clone();
                s.insert(d, k);
                s
            }
            None => r::cat_shape(&self.shapes, self.dim.rem_euclid(n as i64) as usize),
        }
    }
}

static CAT_ROW: OpCase<CatSample> = OpCase {
    name: "shape_cat",
    dtypes: &CAT_STACK_KINDS,
    backward: true,
    samples: |_| cat_samples(),
    inputs: cat_inputs,
    run: cat_run,
    reference: cat_reference,
    tolerance: |_, _, _, _, _| Tolerance::EXACT,
    bad_inputs: cat_bad_inputs,
    unsupported: cat_unsupported,
};

static STACK_ROW: OpCase<CatSample> = OpCase {
    name: "shape_stack",
    dtypes: &CAT_STACK_KINDS,
    backward: true,
    samples: |_| stack_samples(),
    inputs: cat_inputs,
    run: cat_run,
    reference: cat_reference,
    tolerance: |_, _, _, _, _| Tolerance::EXACT,
    bad_inputs: stack_bad_inputs,
    unsupported: stack_unsupported,
};

fn cs(shapes: &[&[usize]], dim: i64, layout: Layout) -> CatSample {
    CatSample {
        shapes: shapes.iter().map(|s| s.to_vec()).collect(),
        dim,
        stack: None,
        layout,
    }
}

fn cat_samples() -> Vec<CatSample> {
    use Layout::*;
    let many: Vec<Vec<usize>> = (0..11).map(|k| vec![3, k % 4 + 1, 5]).collect();
    let many_refs: Vec<&[usize]> = many.iter().map(|s| s.as_slice()).collect();
    let many_last: Vec<Vec<usize>> = (0..11).map(|k| vec![3, 5, k % 4 + 1]).collect();
    let many_last_refs: Vec<&[usize]> = many_last.iter().map(|s| s.as_slice()).collect();
    let wide: Vec<Vec<usize>> = (0..16).map(|_| vec![1024, 128]).collect();
    let wide_refs: Vec<&[usize]> = wide.iter().map(|s| s.as_slice()).collect();
    vec![
        cs(&[&[1]], 0, Contiguous),
        cs(&[&[3], &[4]], 0, Contiguous),
        cs(&[&[2, 3], &[5, 3]], 0, Contiguous),
        cs(&[&[7, 3], &[7, 1], &[7, 9]], 1, Contiguous),
        cs(&[&[7, 3], &[7, 0], &[7, 9]], -1, Transposed),
        cs(&[&[0, 4], &[0, 4]], 0, Contiguous),
        cs(&[&[0, 4], &[3, 4]], 0, StridedOut),
        cs(&[&[5, 33], &[5, 31]], 1, Misaligned),
        cs(&[&[6, 40], &[6, 40]], 0, Broadcast),
        cs(&many_refs, 1, Contiguous),
        cs(&many_last_refs, 2, StridedOut),
        cs(
            &[&[2, 1, 3, 1, 2, 2, 1, 3], &[2, 1, 3, 1, 4, 2, 1, 3]],
            4,
            Contiguous,
        ),
        // 16-byte words: along the last dim (rows) and along dim 0 (whole)
        cs(&[&[64, 64], &[64, 128], &[64, 8]], 1, Contiguous),
        cs(&[&[64, 64], &[32, 64]], 0, Contiguous),
        cs(&wide_refs, 1, Contiguous),
        cs(&wide_refs, 0, Contiguous),
    ]
}

fn stack_samples() -> Vec<CatSample> {
    use Layout::*;
    let st = |shape: &[usize], k: usize, dim: i64, layout| CatSample {
        shapes: vec![shape.to_vec()],
        dim,
        stack: Some(k),
        layout,
    };
    vec![
        st(&[1], 1, 0, Contiguous),
        st(&[5], 3, 0, Contiguous),
        st(&[5], 3, 1, Contiguous),
        st(&[7, 3], 4, 1, Transposed),
        st(&[7, 3], 4, -1, StridedOut),
        st(&[5, 33], 2, 0, Misaligned),
        st(&[6, 40], 3, 2, Broadcast),
        st(&[0, 4], 2, 1, Contiguous),
        st(&[3, 5, 4], 11, 1, Contiguous),
        st(&[2, 1, 3, 1, 2, 2, 3], 3, 4, Contiguous),
        st(&[64, 64], 5, 0, Contiguous),
        st(&[64, 64], 5, 2, Contiguous),
        st(&[1024, 256], 16, 0, Contiguous),
    ]
}

fn cat_inputs(s: &CatSample, rng: &mut Rng) -> Tensors {
    let mut t = Tensors::default();
    for (k, shape) in s.in_shapes().iter().enumerate() {
        let n: usize = shape.iter().product();
        // wide enough that the integer dtypes hold distinct values
        let mut x = rng.vec(n, -100.0, 100.0);
        // the specials first, so a broadcast layout repeats them too
        if k == 0 && n > 3 {
            x[1] = f64::INFINITY;
            x[2] = -0.0;
        }
        if s.layout == Layout::Broadcast {
            let inner = n / shape[0].max(1);
            for i in inner..n {
                x[i] = x[i % inner];
            }
        }
        t.push(format!("x{k}"), x);
    }
    let m: usize = s.out_shape().iter().product();
    t.push("dy", rng.vec(m, -100.0, 100.0));
    t
}

fn cat_reference(_: ElementKind, s: &CatSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let shapes = s.in_shapes();
    let xs: Vec<&[f64]> = (0..shapes.len())
        .map(|k| inputs.get(&format!("x{k}")))
        .collect();
    let n = s.rank();
    let mut t = Tensors::default();
    let dy = inputs.get("dy");
    match s.stack {
        Some(k) => {
            let d = s.dim.rem_euclid(n as i64 + 1) as usize;
            t.push("y", nan_marked(r::stack(&shapes[0], &xs, d)));
            if got.find("dx0").is_some() {
                for (i, dx) in r::stack_backward(&shapes[0], k, dy, d)
                    .into_iter()
                    .enumerate()
                {
                    t.push(format!("dx{i}"), dx);
                }
            }
        }
        None => {
            let d = s.dim.rem_euclid(n as i64) as usize;
            t.push("y", nan_marked(r::cat(&shapes, &xs, d)));
            if got.find("dx0").is_some() {
                for (i, dx) in r::cat_backward(&shapes, dy, d).into_iter().enumerate() {
                    t.push(format!("dx{i}"), dx);
                }
            }
        }
    }
    t
}

fn cat_run(
    kind: ElementKind,
    s: &CatSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    // every dtype of CAT_STACK_KINDS
    crate::with_kinds!(kind, T => match s.stack {
        None => by_rank!(s.rank(), N => cat_run_ranked::<T, N, N>(s, inputs, backward)),
        Some(_) => match s.rank() {
            1 => cat_run_ranked::<T, 1, 2>(s, inputs, backward),
            2 => cat_run_ranked::<T, 2, 3>(s, inputs, backward),
            3 => cat_run_ranked::<T, 3, 4>(s, inputs, backward),
            7 => cat_run_ranked::<T, 7, 8>(s, inputs, backward),
            other => Err(format!("no stack instance for rank {other}")),
        },
    };
        F32 => f32, F64 => f64, F16 => half::f16, Bf16 => half::bf16,
        I8 => i8, U8 => u8, I16 => i16, I32 => i32, I64 => i64, U32 => u32,
        Fp8E4M3 => float8::F8E4M3, Fp8E5M2 => float8::F8E5M2;
        other => Err(format!("{other} is not a cat or stack dtype")))
}

/// A cat (`N == M`) or stack (`M == N + 1`) sample on the device: the
/// inputs in the sample's layout, the output and the gradients strided
/// when it says so.
fn cat_run_ranked<T: Element, const N: usize, const M: usize>(
    s: &CatSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!(
        "{} {} {:?} dim {}",
        if s.stack.is_some() { "stack" } else { "cat" },
        T::KIND,
        s.shapes,
        s.dim
    );
    let shapes = s.in_shapes();
    let bufs: Vec<Strided<T>> = shapes
        .iter()
        .enumerate()
        .map(|(k, sh)| {
            let (st, len, off) = x_layout(s.layout, sh);
            upload_strided::<T>(inputs.get(&format!("x{k}")), sh, &st, len, off)
        })
        .collect();
    let xs: Vec<TensorRef<'_, T, N>> = bufs
        .iter()
        .zip(&shapes)
        .map(|(b, sh)| b.view::<N>(sh))
        .collect::<Result<_, _>>()?;
    let out = s.out_shape();
    let (ys, y_len) = out_layout(s.layout, &out);
    let pref = PlanPreference::default();
    enum Either<A, B> {
        Cat(A),
        Stack(B),
    }
    let plan = if s.stack.is_some() {
        let desc = StackDescriptor {
            element: T::KIND,
            dim: s.dim,
            shape: arr::<N>(&shapes[0]),
            count: shapes.len(),
        };
        Either::Stack(select::<StackPlan<T, N, M>>(&desc, &pref)?)
    } else {
        let desc = CatDescriptor {
            element: T::KIND,
            dim: s.dim,
            shapes: shapes.iter().map(|sh| arr::<N>(sh)).collect(),
        };
        Either::Cat(select::<CatPlan<T, N>>(&desc, &pref)?)
    };
    let forward = |y: DeviceSliceMut<'_, T>| {
        let r = match &plan {
            Either::Cat(p) => {
                let y =
                    TensorMut::new(y, arr::<N>(&out), arr::<N>(&ys)).map_err(|e| e.to_string())?;
                p.run(&g.stream, Workspace::None, CatArgs { xs: &xs, y })
            }
            Either::Stack(p) => {
                let y =
                    TensorMut::new(y, arr::<M>(&out), arr::<M>(&ys)).map_err(|e| e.to_string())?;
                p.run(&g.stream, Workspace::None, StackArgs { xs: &xs, y })
            }
        };
        r.map_err(|e| format!("{what}: {e}"))
    };
    let (_, y_vals) = run_twice(&what, y_len, &out, &ys, forward)?;
    let mut t = Tensors::default();
    t.push("y", nan_marked(y_vals));
    if !backward {
        return Ok(t);
    }
    let (dyb, _) = upload::<T>(inputs.get("dy"));
    let dx_layouts: Vec<(Vec<usize>, usize)> =
        shapes.iter().map(|sh| out_layout(s.layout, sh)).collect();
    let mut dxs: Vec<Guarded<T>> = dx_layouts
        .iter()
        .map(|(_, len)| Guarded::new(*len))
        .collect();
    {
        let views: Vec<Option<TensorMut<'_, T, N>>> = dxs
            .iter_mut()
            .zip(&dx_layouts)
            .zip(&shapes)
            .map(|((d, (st, _)), sh)| {
                TensorMut::new(d.slice_mut(), arr::<N>(sh), arr::<N>(st))
                    .map(Some)
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<_, _>>()?;
        let r = match &plan {
            Either::Cat(p) => {
                let dy =
                    TensorRef::new(dyb.as_slice(), arr::<N>(&out), arr::<N>(&contiguous(&out)))
                        .map_err(|e| e.to_string())?;
                p.run_bw(&g.stream, Workspace::None, CatBwArgs { dy, dxs: views })
            }
            Either::Stack(p) => {
                let dy =
                    TensorRef::new(dyb.as_slice(), arr::<M>(&out), arr::<M>(&contiguous(&out)))
                        .map_err(|e| e.to_string())?;
                p.run_bw(&g.stream, Workspace::None, StackBwArgs { dy, dxs: views })
            }
        };
        r.map_err(|e| format!("{what} backward: {e}"))?;
    }
    for (k, ((d, (st, _)), sh)) in dxs.iter().zip(&dx_layouts).zip(&shapes).enumerate() {
        t.push(
            format!("dx{k}"),
            view_result(&format!("{what} dx{k}"), d, sh, st)?,
        );
    }
    Ok(t)
}

/// Every select and run check of cat, each returning its error and
/// writing nothing.
fn cat_bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let desc = CatDescriptor {
        element: ElementKind::F32,
        dim: 1,
        shapes: vec![[4, 8], [4, 16]],
    };
    let f64_desc = CatDescriptor {
        element: ElementKind::F64,
        ..desc.clone()
    };
    b.own_kernel_select::<CatPlan<f32, 2>>(&desc, &f64_desc)?;
    let sel = |d: &CatDescriptor<2>| CatPlan::<f32, 2>::select(&g.stream, d, &pref);
    b.expect(
        "no input",
        sel(&CatDescriptor {
            shapes: vec![],
            ..desc.clone()
        }),
        invalid_descriptor("shapes"),
        &[],
    )?;
    b.expect(
        "dim 2 of rank 2",
        sel(&CatDescriptor {
            dim: 2,
            ..desc.clone()
        }),
        invalid_descriptor("dim"),
        &[],
    )?;
    b.expect(
        "shapes differing outside dim",
        sel(&CatDescriptor {
            dim: 0,
            ..desc.clone()
        }),
        invalid_descriptor("shapes"),
        &[],
    )?;
    let plan = sel(&desc).map_err(|e| e.to_string())?;
    let mut rng = Rng::new(0xCA7);
    let (ab, _) = upload::<f32>(&rng.vec(4 * 16, -1.0, 1.0));
    let a = TensorRef::contiguous(ab.as_slice(), [4, 8]).map_err(|e| e.to_string())?;
    let bb = TensorRef::contiguous(ab.as_slice(), [4, 16]).map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(4 * 24 + 8);
    let r = run_cat(
        &plan,
        &[a],
        TensorMut::contiguous(y.slice_mut(), [4, 24]).map_err(|e| e.to_string())?,
    );
    b.expect("one input of two", r, invalid_argument("xs"), &[&y])?;
    let r = run_cat(
        &plan,
        &[a, a],
        TensorMut::contiguous(y.slice_mut(), [4, 24]).map_err(|e| e.to_string())?,
    );
    b.expect(
        "input 1 of the wrong shape",
        r,
        invalid_argument("xs"),
        &[&y],
    )?;
    let r = run_cat(
        &plan,
        &[a, bb],
        TensorMut::contiguous(y.slice_mut(), [4, 25]).map_err(|e| e.to_string())?,
    );
    b.expect("y [4, 25]", r, shape_mismatch("y"), &[&y])?;
    let shared = Guarded::<f32>::new(4 * 64);
    let s = shared.slice();
    let xa = TensorRef::contiguous(s, [4, 8]).map_err(|e| e.to_string())?;
    // SAFETY: a bad-input test: the run must reject the aliasing view
    // before anything is enqueued, so nothing reads or writes through it.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(s.addr() + 64, 96, s.ctx_id()) };
    let r = run_cat(
        &plan,
        &[xa, bb],
        TensorMut::contiguous(alias, [4, 24]).map_err(|e| e.to_string())?,
    );
    b.expect(
        "y overlapping an input",
        r,
        invalid_argument("y"),
        &[&shared],
    )?;
    // Backward: two gradients in one buffer.
    let (dyb, _) = upload::<f32>(&rng.vec(4 * 24, -1.0, 1.0));
    let dy = TensorRef::contiguous(dyb.as_slice(), [4, 24]).map_err(|e| e.to_string())?;
    // SAFETY: as above: rejected before anything is enqueued.
    let (d0, d1) = unsafe {
        (
            DeviceSliceMut::<f32>::from_raw_parts(s.addr(), 32, s.ctx_id()),
            DeviceSliceMut::<f32>::from_raw_parts(s.addr() + 64, 64, s.ctx_id()),
        )
    };
    let r = plan.run_bw(
        &g.stream,
        Workspace::None,
        CatBwArgs {
            dy,
            dxs: vec![
                Some(TensorMut::contiguous(d0, [4, 8]).map_err(|e| e.to_string())?),
                Some(TensorMut::contiguous(d1, [4, 16]).map_err(|e| e.to_string())?),
            ],
        },
    );
    b.expect(
        "dx0 overlapping dx1",
        r,
        invalid_argument("dxs"),
        &[&shared],
    )?;
    let dy_bad = TensorRef::contiguous(dyb.as_slice(), [4, 23]).map_err(|e| e.to_string())?;
    let mut dx0 = Guarded::<f32>::new(32);
    let r = plan.run_bw(
        &g.stream,
        Workspace::None,
        CatBwArgs {
            dy: dy_bad,
            dxs: vec![
                Some(TensorMut::contiguous(dx0.slice_mut(), [4, 8]).map_err(|e| e.to_string())?),
                None,
            ],
        },
    );
    b.expect("dy [4, 23]", r, shape_mismatch("dy"), &[&dx0])?;
    b.done()
}

/// Every select and run check of stack.
fn stack_bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let desc = StackDescriptor {
        element: ElementKind::F32,
        dim: 0,
        shape: [4, 8],
        count: 2,
    };
    let f64_desc = StackDescriptor {
        element: ElementKind::F64,
        ..desc
    };
    b.own_kernel_select::<StackPlan<f32, 2, 3>>(&desc, &f64_desc)?;
    let sel = |d: &StackDescriptor<2>| StackPlan::<f32, 2, 3>::select(&g.stream, d, &pref);
    b.expect(
        "dim 3",
        sel(&StackDescriptor { dim: 3, ..desc }),
        invalid_descriptor("dim"),
        &[],
    )?;
    b.expect(
        "no input",
        sel(&StackDescriptor { count: 0, ..desc }),
        invalid_descriptor("count"),
        &[],
    )?;
    b.expect(
        "output rank 4",
        StackPlan::<f32, 2, 4>::select(&g.stream, &desc, &pref),
        invalid_descriptor("rank"),
        &[],
    )?;
    let plan = sel(&desc).map_err(|e| e.to_string())?;
    let mut rng = Rng::new(0x57AC);
    let (ab, _) = upload::<f32>(&rng.vec(4 * 9, -1.0, 1.0));
    let a = TensorRef::contiguous(ab.as_slice(), [4, 8]).map_err(|e| e.to_string())?;
    let a9 = TensorRef::contiguous(ab.as_slice(), [4, 9]).map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(2 * 4 * 9);
    let r = run_stack(
        &plan,
        &[a, a, a],
        TensorMut::contiguous(y.slice_mut(), [2, 4, 8]).map_err(|e| e.to_string())?,
    );
    b.expect("three inputs of two", r, invalid_argument("xs"), &[&y])?;
    let r = run_stack(
        &plan,
        &[a, a9],
        TensorMut::contiguous(y.slice_mut(), [2, 4, 8]).map_err(|e| e.to_string())?,
    );
    b.expect(
        "input 1 of the wrong shape",
        r,
        invalid_argument("xs"),
        &[&y],
    )?;
    let r = run_stack(
        &plan,
        &[a, a],
        TensorMut::contiguous(y.slice_mut(), [2, 4, 9]).map_err(|e| e.to_string())?,
    );
    b.expect("y [2, 4, 9]", r, shape_mismatch("y"), &[&y])?;
    let shared = Guarded::<f32>::new(4 * 64);
    let s = shared.slice();
    let xa = TensorRef::contiguous(s, [4, 8]).map_err(|e| e.to_string())?;
    // SAFETY: a bad-input test: rejected before anything is enqueued.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(s.addr() + 64, 64, s.ctx_id()) };
    let r = run_stack(
        &plan,
        &[xa, a],
        TensorMut::contiguous(alias, [2, 4, 8]).map_err(|e| e.to_string())?,
    );
    b.expect(
        "y overlapping an input",
        r,
        invalid_argument("y"),
        &[&shared],
    )?;
    b.done()
}

fn cat_unsupported(kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = CatDescriptor { element: kind, dim: 0, shapes: vec![[2, 3], [1, 3]] };
        expect_unsupported::<CatPlan<T, 2>>(&format!("cat on {kind}"), &desc)
    })
}

fn stack_unsupported(kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = StackDescriptor { element: kind, dim: 0, shape: [2, 3], count: 2 };
        expect_unsupported::<StackPlan<T, 2, 3>>(&format!("stack on {kind}"), &desc)
    })
}

/// Every sample of the map rows is a problem PyTorch accepts: a bad sample
/// would fail on the GPU machine only.
#[test]
fn every_map_sample_is_valid() {
    for kind in MAP_KINDS {
        for s in map_samples(kind) {
            // panics naming the sample when select's checks reject it
            let out = out_shape(&s);
            assert_eq!(out.len(), s.shape.len());
        }
    }
}
