//! GPU rows of [`LayoutPlan`]: repeat, repeat_interleave, diagonal,
//! diag_embed, diag, unfold and strided slices, forward and backward,
//! against `reference::shape`.
//!
//! Samples cover size-1 and empty dims (and empty outputs of non-empty
//! inputs, and the reverse: diag_embed of an empty diagonal with an
//! offset), tails, transposed, broadcast (stride 0) and misaligned
//! inputs, strided outputs, rank 8 on the input or output side, NaN and
//! infinities (moved as they are), the warp-per-row kernel (2048 rows or
//! more of 32 or more) and one large shape per op. Forwards move values
//! and are exact; the backwards of repeat, repeat_interleave and unfold
//! sum their copies in f32 (f64) and round once, bounded by the term
//! count; the others are exact.

use baracuda_kernels::reference::shape as r;
use baracuda_kernels::*;

use crate::harness::*;
use crate::reduce::{nan_marked, out_layout, run_twice, view_result, x_layout, Layout};
use crate::table::{BadInputs, OpCase, Tensors};

/// `$body` with `N` and `M` bound to the input and output ranks, for the
/// pairs the samples use.
macro_rules! by_ranks {
    ($n:expr, $m:expr, $N:ident, $M:ident => $body:expr) => {
        by_ranks!(@ ($n, $m), $N, $M, $body;
            (0, 0) (1, 1) (2, 2) (3, 3) (4, 4) (8, 8)
            (2, 1) (3, 2) (4, 3) (8, 7)
            (1, 2) (2, 3) (3, 4) (7, 8))
    };
    (@ $nm:expr, $N:ident, $M:ident, $body:expr; $(($a:literal, $b:literal))*) => {
        match $nm {
            $(($a, $b) => {
                const $N: usize = $a;
                const $M: usize = $b;
                $body
            })*
            (n, m) => Err(format!("no test instance for ranks {n} -> {m}")),
        }
    };
}

/// `$body` with `N` bound to the input rank.
macro_rules! by_rank {
    ($n:expr, $N:ident => $body:expr) => {
        by_rank!(@ $n, $N, $body; 0 1 2 3 4 7 8)
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

/// Which op a layout row tests.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum LayoutKind {
    Repeat,
    RepeatInterleave,
    Diagonal,
    DiagEmbed,
    Diag,
    Unfold,
    Slice,
}

/// Every layout row's op, in row order.
pub const LAYOUT_KINDS: [LayoutKind; 7] = [
    LayoutKind::Repeat,
    LayoutKind::RepeatInterleave,
    LayoutKind::Diagonal,
    LayoutKind::DiagEmbed,
    LayoutKind::Diag,
    LayoutKind::Unfold,
    LayoutKind::Slice,
];

/// One problem of a layout row.
#[derive(Clone, Debug)]
pub struct LayoutSample {
    op: LayoutOp,
    shape: Vec<usize>,
    layout: Layout,
    /// NaN, +inf, -inf and -0 among x's first elements (forward only).
    special: bool,
}

/// The row of `LAYOUT_KINDS[K]`.
pub const fn layout_row<const K: usize>(name: &'static str) -> OpCase<LayoutSample> {
    OpCase {
        name,
        dtypes: FLOATS,
        backward: true,
        samples: |_| layout_samples(LAYOUT_KINDS[K]),
        inputs: layout_inputs,
        run: layout_run,
        reference: layout_reference,
        tolerance: layout_tolerance,
        bad_inputs: || layout_bad_inputs(LAYOUT_KINDS[K]),
        unsupported: layout_unsupported,
    }
}

/// [`LayoutDescriptor::output_shape`] of a sample; panics naming it when
/// select's checks reject it.
pub fn out_shape(s: &LayoutSample) -> Vec<usize> {
    let r: Result<Vec<usize>, String> = by_rank!(s.shape.len(), N =>
        LayoutDescriptor::new(s.op.clone(), ElementKind::F32, arr::<N>(&s.shape))
            .output_shape()
            .map_err(|e| e.to_string()));
    r.unwrap_or_else(|e| panic!("{:?} on {:?}: {e}", s.op, s.shape))
}

fn ls(op: LayoutOp, shape: &[usize], layout: Layout) -> LayoutSample {
    LayoutSample {
        op,
        shape: shape.to_vec(),
        layout,
        special: false,
    }
}

fn special(mut s: LayoutSample) -> LayoutSample {
    s.special = true;
    s
}

pub fn layout_samples(kind: LayoutKind) -> Vec<LayoutSample> {
    match kind {
        LayoutKind::Repeat => repeat_samples(),
        LayoutKind::RepeatInterleave => interleave_samples(),
        LayoutKind::Diagonal => diagonal_samples(),
        LayoutKind::DiagEmbed => embed_samples(),
        LayoutKind::Diag => diag_samples(),
        LayoutKind::Unfold => unfold_samples(),
        LayoutKind::Slice => slice_samples(),
    }
}

fn repeat_samples() -> Vec<LayoutSample> {
    use Layout::*;
    let r = LayoutOp::repeat;
    vec![
        ls(r(&[]), &[], Contiguous),
        ls(r(&[5]), &[1], Contiguous),
        ls(r(&[3]), &[7], Contiguous),
        ls(r(&[1, 1]), &[3, 4], Contiguous),
        ls(r(&[2, 3]), &[37, 29], Contiguous),
        ls(r(&[3, 1]), &[37, 29], Transposed),
        ls(r(&[1, 4]), &[30, 7], StridedOut),
        ls(r(&[2, 2]), &[5, 100], Misaligned),
        ls(r(&[2, 3]), &[8, 30], Broadcast),
        ls(r(&[1, 2, 1, 3]), &[3, 5, 7, 9], Contiguous),
        ls(
            r(&[1, 2, 1, 3, 1, 1, 2, 1]),
            &[2, 1, 3, 1, 2, 1, 1, 5],
            Contiguous,
        ),
        ls(r(&[3, 2]), &[0, 7], Contiguous),
        ls(r(&[0, 2]), &[4, 5], Contiguous),
        special(ls(r(&[1, 2]), &[6, 40], Contiguous)),
        // a warp per row
        ls(r(&[1, 2]), &[2100, 33], Contiguous),
        ls(r(&[2, 4]), &[512, 1024], Contiguous),
        // a warp per row in vectors (2048 rows or more of 32 vectors or
        // more), forward
        ls(r(&[1, 4]), &[2048, 128], Contiguous),
        ls(r(&[2, 4]), &[1100, 64], Contiguous),
    ]
}

/// Counts 0 to 3 per index, seeded by `seed`.
fn counts(n: usize, seed: usize) -> Vec<i64> {
    (0..n).map(|i| ((i * 7 + seed) % 11 % 4) as i64).collect()
}

fn interleave_samples() -> Vec<LayoutSample> {
    use Layout::*;
    let sc = LayoutOp::repeat_interleave;
    let per = |n: usize, seed: usize, dim: i64, size: bool| {
        let c = counts(n, seed);
        let total: i64 = c.iter().sum();
        LayoutOp::repeat_interleave_per_index(&c, dim, size.then_some(total as usize))
    };
    vec![
        ls(sc(3, 0), &[7], Contiguous),
        ls(sc(1, 1), &[3, 4], Contiguous),
        ls(sc(0, 0), &[3, 4], Contiguous),
        ls(sc(2, -1), &[37, 29], Transposed),
        ls(per(37, 1, 0, false), &[37, 29], Contiguous),
        ls(per(29, 2, 1, true), &[37, 29], StridedOut),
        ls(
            LayoutOp::repeat_interleave_per_index(&[3], 1, Some(300)),
            &[5, 100],
            Misaligned,
        ),
        ls(per(30, 3, 1, false), &[8, 30], Broadcast),
        ls(
            LayoutOp::repeat_interleave_per_index(&[0, 0, 5, 0], 0, None),
            &[4, 9],
            Contiguous,
        ),
        ls(per(5, 4, 7, true), &[2, 1, 3, 1, 2, 1, 1, 5], Contiguous),
        ls(
            LayoutOp::repeat_interleave_per_index(&[], 0, Some(0)),
            &[0, 5],
            Contiguous,
        ),
        ls(sc(3, 1), &[4, 0], Contiguous),
        special(ls(per(40, 5, 1, false), &[6, 40], Contiguous)),
        // a warp per row: scalar and per-index counts along the row
        ls(sc(2, 1), &[2100, 40], Contiguous),
        ls(per(40, 6, 1, true), &[2100, 40], Contiguous),
        ls(sc(4, 0), &[1024, 1024], Contiguous),
        ls(per(1024, 7, 1, false), &[1024, 1024], Contiguous),
    ]
}

fn diagonal_op(offset: i64, dim1: i64, dim2: i64) -> LayoutOp {
    LayoutOp::Diagonal { offset, dim1, dim2 }
}

fn embed_op(offset: i64, dim1: i64, dim2: i64) -> LayoutOp {
    LayoutOp::DiagEmbed { offset, dim1, dim2 }
}

fn diagonal_samples() -> Vec<LayoutSample> {
    use Layout::*;
    let d = diagonal_op;
    vec![
        ls(d(0, 0, 1), &[1, 1], Contiguous),
        ls(d(0, 0, 1), &[5, 5], Contiguous),
        ls(d(3, 0, 1), &[37, 29], Contiguous),
        ls(d(-5, 0, 1), &[37, 29], Transposed),
        ls(d(0, 1, 0), &[37, 29], StridedOut),
        ls(d(10, -2, -1), &[5, 100], Misaligned),
        ls(d(0, 1, 2), &[8, 30, 30], Broadcast),
        ls(d(1, 0, 2), &[3, 5, 7, 9], Contiguous),
        ls(d(-2, -1, 1), &[3, 5, 7, 9], Contiguous),
        ls(d(100, 0, 1), &[9, 11], Contiguous),
        ls(d(-1, 2, 6), &[2, 1, 3, 1, 2, 1, 3, 2], Contiguous),
        ls(d(0, 1, 2), &[0, 5, 5], Contiguous),
        special(ls(d(2, 0, 1), &[6, 40], Contiguous)),
        // a warp per row (the diagonal along the row)
        ls(d(1, 1, 2), &[2100, 40, 40], Contiguous),
        ls(d(-3, -2, -1), &[64, 512, 512], Contiguous),
    ]
}

fn embed_samples() -> Vec<LayoutSample> {
    use Layout::*;
    let e = embed_op;
    vec![
        ls(e(0, -2, -1), &[1], Contiguous),
        ls(e(0, 0, 1), &[5], Contiguous),
        ls(e(2, 0, 1), &[5], Contiguous),
        ls(e(-3, 1, 0), &[5], Contiguous),
        ls(e(0, -2, -1), &[37, 29], Contiguous),
        ls(e(1, 0, 2), &[37, 29], Transposed),
        ls(e(-2, 2, 0), &[37, 29], StridedOut),
        ls(e(0, 1, 2), &[5, 100], Misaligned),
        ls(e(0, -2, -1), &[8, 30], Broadcast),
        ls(e(2, 1, 3), &[3, 5, 7], Contiguous),
        ls(e(1, 0, 7), &[2, 1, 3, 1, 2, 1, 4], Contiguous),
        ls(e(0, -2, -1), &[0, 5], Contiguous),
        ls(e(2, -2, -1), &[4, 0], Contiguous),
        special(ls(e(1, -2, -1), &[6, 40], Contiguous)),
        // a warp per row (the batch along the row)
        ls(e(0, 0, 1), &[2100, 64], Contiguous),
        ls(e(-1, -2, -1), &[32, 384], Contiguous),
    ]
}

fn diag_samples() -> Vec<LayoutSample> {
    use Layout::*;
    let d = |offset| LayoutOp::Diag { offset };
    vec![
        ls(d(0), &[1], Contiguous),
        ls(d(2), &[7], Contiguous),
        ls(d(-3), &[7], Misaligned),
        ls(d(1), &[40], StridedOut),
        ls(d(0), &[0], Contiguous),
        ls(d(0), &[5, 5], Contiguous),
        ls(d(3), &[37, 29], Transposed),
        ls(d(-4), &[29, 37], StridedOut),
        ls(d(1), &[5, 100], Misaligned),
        ls(d(0), &[8, 30], Broadcast),
        ls(d(20), &[9, 11], Contiguous),
        ls(d(0), &[0, 5], Contiguous),
        special(ls(d(1), &[6, 40], Contiguous)),
        special(ls(d(-1), &[40], Contiguous)),
        ls(d(5), &[2000], Contiguous),
        ls(d(-7), &[2048, 2048], Contiguous),
    ]
}

fn unfold_samples() -> Vec<LayoutSample> {
    use Layout::*;
    let u = |dim, size, step| LayoutOp::Unfold { dim, size, step };
    vec![
        ls(u(0, 1, 1), &[1], Contiguous),
        ls(u(0, 3, 2), &[7], Contiguous),
        ls(u(0, 7, 1), &[7], Contiguous),
        ls(u(0, 0, 1), &[7], Contiguous),
        ls(u(1, 5, 3), &[37, 29], Contiguous),
        ls(u(0, 4, 1), &[37, 29], Transposed),
        ls(u(-1, 29, 1), &[37, 29], StridedOut),
        ls(u(1, 10, 10), &[5, 100], Misaligned),
        ls(u(0, 3, 2), &[8, 30], Broadcast),
        ls(u(1, 3, 1), &[5, 7, 9], Contiguous),
        ls(u(6, 2, 2), &[2, 1, 3, 1, 2, 1, 6], Contiguous),
        ls(u(1, 3, 1), &[0, 7], Contiguous),
        ls(u(1, 0, 1), &[4, 0], Contiguous),
        // windows with gaps between them
        ls(u(1, 2, 5), &[5, 20], Contiguous),
        special(ls(u(1, 4, 3), &[6, 40], Contiguous)),
        // a warp per row (the window along the row)
        ls(u(1, 40, 1), &[4, 600], Contiguous),
        ls(u(1, 64, 16), &[64, 16000], Contiguous),
        // 2048 rows or more of dx: the vector kernel still (sums)
        ls(u(1, 64, 32), &[2048, 512], Contiguous),
    ]
}

fn slice_samples() -> Vec<LayoutSample> {
    use Layout::*;
    let s = LayoutOp::slice;
    let end = i64::MAX;
    vec![
        ls(s(0, 0, 1, 1), &[1], Contiguous),
        ls(s(0, 1, 6, 2), &[7], Contiguous),
        ls(s(0, -3, end, 1), &[7], Contiguous),
        ls(s(0, -100, 100, 3), &[7], Contiguous),
        ls(s(1, 2, 27, 4), &[37, 29], Contiguous),
        ls(s(0, -10, -2, 3), &[37, 29], Transposed),
        ls(s(0, 5, 30, 1), &[37, 29], StridedOut),
        ls(s(1, 1, 99, 1), &[5, 100], Misaligned),
        ls(s(0, 1, 8, 2), &[8, 30], Broadcast),
        ls(s(3, 0, 9, 4), &[3, 5, 7, 9], Contiguous),
        ls(s(7, 1, 5, 2), &[2, 1, 3, 1, 2, 1, 3, 5], Contiguous),
        ls(s(1, 7, 2, 1), &[4, 9], Contiguous),
        ls(s(0, 0, 5, 1), &[0, 5], Contiguous),
        special(ls(s(1, 3, 40, 3), &[6, 40], Contiguous)),
        // a warp per row
        ls(s(1, 5, 75, 2), &[2100, 80], Contiguous),
        ls(s(1, 100, 4000, 3), &[512, 4096], Contiguous),
    ]
}

/// x (logical order; repeated along dim 0 for a broadcast layout) and dy.
fn layout_inputs(s: &LayoutSample, rng: &mut Rng) -> Tensors {
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

/// `dim` wrapped into `[0, rank)`.
fn wrap(dim: i64, rank: usize) -> usize {
    dim.rem_euclid(rank.max(1) as i64) as usize
}

fn layout_reference(_: ElementKind, s: &LayoutSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let dy = got.find("dx").map(|_| inputs.get("dy"));
    let (y, dx) = r::layout(&s.op, &s.shape, inputs.get("x"), dy);
    let mut t = Tensors::default();
    t.push("y", nan_marked(y));
    if let Some(dx) = dx {
        t.push("dx", dx);
    }
    t
}

/// The most `dy` terms one `dx` element sums.
fn terms(s: &LayoutSample) -> usize {
    match &s.op {
        LayoutOp::Repeat { repeats } => repeats.as_slice().iter().map(|&r| r as usize).product(),
        LayoutOp::RepeatInterleave { repeats, dim, .. } => {
            let d = wrap(*dim, s.shape.len());
            r::interleave_counts(repeats, s.shape[d])
                .into_iter()
                .max()
                .unwrap_or(0)
        }
        LayoutOp::Unfold { size, step, .. } => (*size as usize).div_ceil(*step as usize),
        _ => 1,
    }
}

fn layout_tolerance(
    kind: ElementKind,
    s: &LayoutSample,
    name: &str,
    _: &[f64],
    _inputs: &Tensors,
) -> Tolerance {
    let t = terms(s);
    if name == "dx" && t > 1 {
        // sums in f32 (f64) of at most `t` values of |dy| <= 1, rounded once
        Tolerance {
            rtol: 2.0 * kind.unit_roundoff(),
            atol: 2.0 * t as f64 * acc_roundoff(kind),
        }
    } else {
        Tolerance::EXACT
    }
}

fn layout_run(
    kind: ElementKind,
    s: &LayoutSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let m = out_shape(s).len();
    crate::with_float!(kind, T => by_ranks!(s.shape.len(), m, N, M =>
        layout_run_ranked::<T, N, M>(s, inputs, backward)))
}

fn layout_run_ranked<T: Element, const N: usize, const M: usize>(
    s: &LayoutSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!("{} {} {:?} {:?}", s.op.name(), T::KIND, s.shape, s.layout);
    let desc = LayoutDescriptor::new(s.op.clone(), T::KIND, arr::<N>(&s.shape));
    let plan = select::<LayoutPlan<T, N, M>>(&desc, &PlanPreference::default())?;
    let ys_shape = plan.output_shape().to_vec();
    let (xs, x_len, x_off) = x_layout(s.layout, &s.shape);
    let xbuf = upload_strided::<T>(inputs.get("x"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<N>(&s.shape)?;
    let (ys, y_len) = out_layout(s.layout, &ys_shape);
    let forward = |y: DeviceSliceMut<'_, T>| {
        let y = TensorMut::new(y, arr::<M>(&ys_shape), arr::<M>(&ys)).map_err(|e| e.to_string())?;
        plan.run(&g.stream, Workspace::None, LayoutArgs { x, y })
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
        arr::<M>(&ys_shape),
        arr::<M>(&contiguous(&ys_shape)),
    )
    .map_err(|e| e.to_string())?;
    let (dxs, dx_len) = out_layout(s.layout, &s.shape);
    let mut dx = Guarded::<T>::new(dx_len);
    plan.run_bw(
        &g.stream,
        Workspace::None,
        LayoutBwArgs {
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

/// The op a row's bad inputs run on a [4, 24] input, and the descriptors
/// (with the field each names) that `select` rejects.
fn bad_ops(kind: LayoutKind) -> (LayoutOp, Vec<(&'static str, LayoutOp, &'static str)>) {
    let per = LayoutOp::repeat_interleave_per_index;
    let unfold = |dim, size, step| LayoutOp::Unfold { dim, size, step };
    match kind {
        LayoutKind::Repeat => (
            LayoutOp::repeat(&[2, 3]),
            vec![
                ("one repeat for two dims", LayoutOp::repeat(&[2]), "repeats"),
                ("a negative repeat", LayoutOp::repeat(&[2, -1]), "repeats"),
            ],
        ),
        LayoutKind::RepeatInterleave => (
            LayoutOp::repeat_interleave(2, 1),
            vec![
                ("dim 2", LayoutOp::repeat_interleave(2, 2), "dim"),
                (
                    "a negative count",
                    LayoutOp::repeat_interleave(-1, 0),
                    "repeats",
                ),
                ("3 counts along 4", per(&[1, 2, 3], 0, None), "repeats"),
                (
                    "a negative per-index count",
                    per(&[1, -2, 3, 4], 0, None),
                    "repeats",
                ),
                (
                    "output_size not the sum",
                    per(&[1, 2, 3, 4], 0, Some(9)),
                    "output_size",
                ),
            ],
        ),
        LayoutKind::Diagonal => (
            diagonal_op(1, 0, 1),
            vec![
                ("identical dims", diagonal_op(0, 1, -1), "dim2"),
                ("dim1 2", diagonal_op(0, 2, 1), "dim1"),
            ],
        ),
        LayoutKind::DiagEmbed => (
            embed_op(1, -2, -1),
            vec![
                ("identical dims", embed_op(0, 0, -3), "dim2"),
                ("dim2 3", embed_op(0, 0, 3), "dim2"),
            ],
        ),
        LayoutKind::Diag => (LayoutOp::Diag { offset: -1 }, vec![]),
        LayoutKind::Unfold => (
            unfold(1, 5, 3),
            vec![
                ("size past the extent", unfold(1, 25, 1), "size"),
                ("a negative size", unfold(1, -1, 1), "size"),
                ("step 0", unfold(1, 2, 0), "step"),
                ("dim -3", unfold(-3, 2, 1), "dim"),
            ],
        ),
        LayoutKind::Slice => (
            LayoutOp::slice(1, 1, 20, 3),
            vec![
                ("step 0", LayoutOp::slice(1, 0, 4, 0), "step"),
                ("a negative step", LayoutOp::slice(1, 4, 0, -1), "step"),
                ("dim 2", LayoutOp::slice(2, 0, 4, 1), "dim"),
            ],
        ),
    }
}

/// Every select and run check of a layout row, each returning its error
/// and writing nothing.
fn layout_bad_inputs(kind: LayoutKind) -> Result<usize, String> {
    match kind {
        LayoutKind::Diagonal | LayoutKind::Diag => bad_inputs_ranked::<1>(kind),
        LayoutKind::DiagEmbed | LayoutKind::Unfold => bad_inputs_ranked::<3>(kind),
        _ => bad_inputs_ranked::<2>(kind),
    }
}

/// A slice of `data`'s address and length on a context that does not
/// exist.
fn foreign<T: Element>(data: DeviceSlice<'_, T>) -> DeviceSlice<'_, T> {
    // SAFETY: the slice is only handed to `run`, which rejects its context
    // before it reads the address.
    unsafe { DeviceSlice::from_raw_parts(data.addr(), data.len(), 0xDEAD) }
}

fn bad_inputs_ranked<const M: usize>(kind: LayoutKind) -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let (op, rejected) = bad_ops(kind);
    let shape = [4usize, 24];
    let desc = LayoutDescriptor::new(op.clone(), ElementKind::F32, shape);
    let f64_desc = LayoutDescriptor {
        element: ElementKind::F64,
        ..desc.clone()
    };
    b.own_kernel_select::<LayoutPlan<f32, 2, M>>(&desc, &f64_desc)?;
    for (what, bad_op, field) in rejected {
        let d = LayoutDescriptor {
            op: bad_op,
            ..desc.clone()
        };
        b.expect(
            what,
            LayoutPlan::<f32, 2, M>::select(&g.stream, &d, &pref),
            invalid_descriptor(field),
            &[],
        )?;
    }
    // the plan's output rank is the op's
    b.expect(
        "output rank 5",
        LayoutPlan::<f32, 2, 5>::select(&g.stream, &desc, &pref),
        invalid_descriptor("rank"),
        &[],
    )?;
    match kind {
        LayoutKind::Diagonal => {
            let d1 = LayoutDescriptor::new(op.clone(), ElementKind::F32, [24]);
            b.expect(
                "rank 1",
                LayoutPlan::<f32, 1, 0>::select(&g.stream, &d1, &pref),
                invalid_descriptor("shape"),
                &[],
            )?;
        }
        LayoutKind::Diag => {
            let d3 = LayoutDescriptor::new(op.clone(), ElementKind::F32, [2, 3, 4]);
            b.expect(
                "rank 3",
                LayoutPlan::<f32, 3, 2>::select(&g.stream, &d3, &pref),
                invalid_descriptor("shape"),
                &[],
            )?;
        }
        LayoutKind::Unfold => {
            let d8 = LayoutDescriptor::new(op.clone(), ElementKind::F32, [2; 8]);
            b.expect(
                "output rank 9",
                LayoutPlan::<f32, 8, 9>::select(&g.stream, &d8, &pref),
                unsupported,
                &[],
            )?;
        }
        _ => {}
    }
    let plan =
        LayoutPlan::<f32, 2, M>::select(&g.stream, &desc, &pref).map_err(|e| e.to_string())?;
    let ys = plan.output_shape();
    let n_y: usize = ys.iter().product();
    let mut longer = ys;
    longer[0] += 1;
    let n_longer: usize = longer.iter().product();
    let mut rng = Rng::new(0x1A70);
    let (xb, _) = upload::<f32>(&rng.vec(5 * 30, -1.0, 1.0));
    let x = TensorRef::contiguous(xb.as_slice(), shape).map_err(|e| e.to_string())?;
    let x3 = TensorRef::contiguous(xb.as_slice(), [3, 24]).map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(n_longer + 64);
    let run = |x: TensorRef<'_, f32, 2>, y: TensorMut<'_, f32, M>| {
        plan.run(&g.stream, Workspace::None, LayoutArgs { x, y })
    };
    let r = run(x3, view_mut(y.slice_mut(), ys)?);
    b.expect("x [3, 24]", r, shape_mismatch("x"), &[&y])?;
    let r = run(x, view_mut(y.slice_mut(), longer)?);
    b.expect("y one longer along dim 0", r, shape_mismatch("y"), &[&y])?;
    let xf = TensorRef::contiguous(foreign(xb.as_slice()), shape).map_err(|e| e.to_string())?;
    let r = run(xf, view_mut(y.slice_mut(), ys)?);
    b.expect(
        "x on another context",
        r,
        |e| matches!(e, Error::ContextMismatch { arg: "x", .. }),
        &[&y],
    )?;
    // y on another context
    let yf = {
        let s = y.slice();
        // SAFETY: rejected (context) before anything is enqueued.
        unsafe { DeviceSliceMut::<f32>::from_raw_parts(s.addr(), n_y, 0xDEAD) }
    };
    let r = run(x, view_mut(yf, ys)?);
    b.expect(
        "y on another context",
        r,
        |e| matches!(e, Error::ContextMismatch { arg: "y", .. }),
        &[&y],
    )?;
    // y inside x's memory
    let shared = Guarded::<f32>::new(4 * 24 + n_y + 96);
    let xs = TensorRef::contiguous(shared.slice(), shape).map_err(|e| e.to_string())?;
    let s = shared.slice();
    // SAFETY: a bad-input test: the run must reject the aliasing view
    // before anything is enqueued, so nothing reads or writes through it.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(s.addr() + 16, n_y, s.ctx_id()) };
    let r = run(xs, view_mut(alias, ys)?);
    b.expect("y overlapping x", r, invalid_argument("y"), &[&shared])?;

    // Backward.
    let (dyb, _) = upload::<f32>(&rng.vec(n_longer + 64, -1.0, 1.0));
    let dy = TensorRef::contiguous(dyb.as_slice(), ys).map_err(|e| e.to_string())?;
    let dy_bad = TensorRef::contiguous(dyb.as_slice(), longer).map_err(|e| e.to_string())?;
    let mut dx = Guarded::<f32>::new(5 * 24 + 30);
    let run_bw = |dy: TensorRef<'_, f32, M>, dx: TensorMut<'_, f32, 2>| {
        plan.run_bw(&g.stream, Workspace::None, LayoutBwArgs { dy, dx })
    };
    let r = run_bw(dy_bad, view_mut(dx.slice_mut(), shape)?);
    b.expect("dy one longer along dim 0", r, shape_mismatch("dy"), &[&dx])?;
    let r = run_bw(dy, view_mut(dx.slice_mut(), [5, 24])?);
    b.expect("dx [5, 24]", r, shape_mismatch("dx"), &[&dx])?;
    let dyf = TensorRef::contiguous(foreign(dyb.as_slice()), ys).map_err(|e| e.to_string())?;
    let r = run_bw(dyf, view_mut(dx.slice_mut(), shape)?);
    b.expect(
        "dy on another context",
        r,
        |e| matches!(e, Error::ContextMismatch { arg: "dy", .. }),
        &[&dx],
    )?;
    let dxf = {
        let s = dx.slice();
        // SAFETY: rejected (context) before anything is enqueued.
        unsafe { DeviceSliceMut::<f32>::from_raw_parts(s.addr(), 4 * 24, 0xDEAD) }
    };
    let r = run_bw(dy, view_mut(dxf, shape)?);
    b.expect(
        "dx on another context",
        r,
        |e| matches!(e, Error::ContextMismatch { arg: "dx", .. }),
        &[&dx],
    )?;
    let dys = TensorRef::contiguous(shared.slice(), ys).map_err(|e| e.to_string())?;
    // SAFETY: as above: rejected before anything is enqueued.
    // (one element in: every op's dy, a diagonal's included, holds more)
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(s.addr() + 4, 96, s.ctx_id()) };
    let r = run_bw(dys, view_mut(alias, shape)?);
    b.expect("dx overlapping dy", r, invalid_argument("dx"), &[&shared])?;
    b.done()
}

/// A contiguous writable view of `shape`, its error as a message.
fn view_mut<const R: usize>(
    y: DeviceSliceMut<'_, f32>,
    shape: [usize; R],
) -> Result<TensorMut<'_, f32, R>, String> {
    TensorMut::contiguous(y, shape).map_err(|e| e.to_string())
}

/// Selecting a layout op on `kind`, which no row claims, is `Unsupported`.
fn layout_unsupported(kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = LayoutDescriptor::new(LayoutOp::repeat(&[2, 1]), kind, [8, 3]);
        expect_unsupported::<LayoutPlan<T, 2, 2>>(&format!("repeat on {kind}"), &desc)
    })
}

/// Every sample of the layout rows is a problem PyTorch accepts and has a
/// test instance for its ranks: a bad sample would fail on the GPU
/// machine only.
#[test]
fn every_layout_sample_is_valid() {
    for kind in LAYOUT_KINDS {
        for s in layout_samples(kind) {
            let m = out_shape(&s).len();
            let known: Result<(), String> = by_ranks!(s.shape.len(), m, N, M => {
                let _ = (N, M);
                Ok(())
            });
            known.unwrap_or_else(|e| panic!("{s:?}: {e}"));
        }
    }
}

/// The references of the sample shapes agree with the descriptor's output
/// shape (host check of the samples' sizes).
#[test]
fn layout_references_have_the_output_shape() {
    for kind in LAYOUT_KINDS {
        for s in layout_samples(kind) {
            let n: usize = s.shape.iter().product();
            if n > 100_000 {
                continue;
            }
            let x = vec![1.0; n];
            let m: usize = out_shape(&s).iter().product();
            let (y, dx) = r::layout(&s.op, &s.shape, &x, Some(&vec![1.0; m]));
            assert_eq!(y.len(), m, "{s:?}");
            assert_eq!(dx.map(|d| d.len()), Some(n), "{s:?}");
        }
    }
}
