//! GPU tests of the softmax family: one op-table row per [`SoftmaxOp`],
//! against `reference::softmax`; rows of softmax and log-softmax under a
//! keep mask and an additive mask (against `reference::masked_softmax`),
//! and with an f32 output for f16 and bf16 inputs.
//!
//! Every row runs the same samples: extents 1, small, a few thousand (rows
//! cached in shared memory), over 2^17 and over 2^20 (the online pass),
//! rows with tails, the dim strided (few rows: a thread group per row;
//! many rows: a thread per row), transposed, broadcast (stride 0),
//! misaligned and strided-output views, rank 8, empty tensors, and rows
//! holding NaN, +inf, -inf and only -inf (forward). Each forward runs
//! twice, the second time into a zero-filled output: both must agree bit
//! for bit (deterministic, and every output written).
//!
//! The masked rows run their own samples: the mask laid out in full,
//! broadcast along the rows (`[1, n]`), constant along the dim (`[rows,
//! 1]`: rows all kept or all masked), causal over a batch, transposed and
//! misaligned, over every kernel (registers, cached, a thread per row),
//! with rows holding nothing kept (NaN forward, dx 0 under a keep mask)
//! and -inf in additive masks.

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
    /// The mask and how it is laid out.
    mask: Option<(SoftmaxMask, MaskLayout)>,
    /// y (and dy) in f32 for an f16 or bf16 x.
    widen: bool,
}

/// How a sample's mask is stored.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MaskLayout {
    /// Row-major, x's shape.
    Full,
    /// Varies along the softmax dim only (stride 0 on every other dim: a
    /// `[1, n]` mask expanded).
    Along,
    /// Constant along the softmax dim (stride 0 there: a `[rows, 1]`
    /// mask): each row all kept or all masked.
    Across,
    /// `keep[.., q, k] = k <= q` over the last two dims (square), stride 0
    /// on the others; the softmax along the last.
    Causal,
    /// Stored with its dims in reverse order.
    Reversed,
    /// Row-major, one element into its buffer (no vector loads).
    Offset,
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

/// The masks of the masked rows, by index.
const MASKS: [SoftmaxMask; 2] = [SoftmaxMask::Keep, SoftmaxMask::Add];

/// The row of op `SoftmaxOp::ALL[OP]` under mask `MASKS[M]`.
pub const fn masked_row<const OP: usize, const M: usize>(
    name: &'static str,
) -> OpCase<SoftmaxSample> {
    OpCase {
        name,
        dtypes: FLOATS,
        backward: true,
        samples: |_| masked_samples(SoftmaxOp::ALL[OP], MASKS[M]),
        inputs,
        run,
        reference,
        tolerance,
        bad_inputs: || masked_bad_inputs(SoftmaxOp::ALL[OP], MASKS[M]),
        unsupported: |kind| masked_unsupported(SoftmaxOp::ALL[OP], MASKS[M], kind),
    }
}

/// The row of op `SoftmaxOp::ALL[OP]` on f16 and bf16 with an f32 y.
pub const fn widened_row<const OP: usize>(name: &'static str) -> OpCase<SoftmaxSample> {
    OpCase {
        name,
        dtypes: &[ElementKind::F16, ElementKind::Bf16],
        backward: true,
        samples: |_| widened_samples(SoftmaxOp::ALL[OP]),
        inputs,
        run,
        reference,
        tolerance,
        bad_inputs: || widened_bad_inputs(SoftmaxOp::ALL[OP]),
        unsupported: |kind| widened_unsupported(SoftmaxOp::ALL[OP], kind),
    }
}

/// The family's rows of the op table.
pub(crate) static ROWS: &[&dyn crate::table::Row] = &[
    &row::<0>("softmax_softmax"),
    &row::<1>("softmax_log_softmax"),
    &row::<2>("softmax_softmin"),
    &masked_row::<0, 0>("softmax_softmax_keep_mask"),
    &masked_row::<1, 0>("softmax_log_softmax_keep_mask"),
    &masked_row::<0, 1>("softmax_softmax_add_mask"),
    &masked_row::<1, 1>("softmax_log_softmax_add_mask"),
    &widened_row::<0>("softmax_softmax_f32_out"),
    &widened_row::<1>("softmax_log_softmax_f32_out"),
    &widened_row::<2>("softmax_softmin_f32_out"),
];

crate::table_tests!(
    ROWS;
    softmax_softmax,
    softmax_log_softmax,
    softmax_softmin,
    softmax_softmax_keep_mask,
    softmax_log_softmax_keep_mask,
    softmax_softmax_add_mask,
    softmax_log_softmax_add_mask,
    softmax_softmax_f32_out,
    softmax_log_softmax_f32_out,
    softmax_softmin_f32_out,
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
        mask: None,
        widen: false,
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

/// The samples of `op` under `mask`: every kernel, every mask layout.
fn masked_samples(op: SoftmaxOp, mask: SoftmaxMask) -> Vec<SoftmaxSample> {
    use Layout::*;
    use MaskLayout::*;
    let s = |shape: &[usize], dim: usize, layout, m| SoftmaxSample {
        op,
        shape: shape.to_vec(),
        dim,
        layout,
        special: false,
        mask: Some((mask, m)),
        widen: false,
    };
    let mut v = vec![
        // extent 1 (a masked element is a row with nothing kept)
        s(&[7, 1], 1, Contiguous, Full),
        // small rows with tails: registers, mask in full and broadcast
        s(&[37, 29], 1, Contiguous, Full),
        s(&[300, 7], 1, StridedOut, Along),
        s(&[5, 100], 1, Misaligned, Offset),
        s(&[16, 3000], 1, Contiguous, Along),
        s(&[9, 4099], 1, Contiguous, Full),
        // cached rows, the mask read in both passes; a tail read twice
        s(&[3, 40000], 1, Contiguous, Full),
        s(&[2, 140_000], 1, StridedOut, Along),
        // the dim strided: a group per row, a thread per row
        s(&[4097, 3], 0, Contiguous, Full),
        s(&[40, 8200], 0, Contiguous, Along),
        s(&[40, 8200], 0, Contiguous, Across),
        // rows all kept or all masked; transposed masks
        s(&[3, 5, 7, 9], 2, Contiguous, Across),
        s(&[6, 50, 70], 2, Transposed, Reversed),
        s(&[6, 50, 70], 0, Contiguous, Reversed),
        // rank 8
        s(&[2, 3, 1, 2, 3, 2, 1, 5], 4, Contiguous, Full),
        // empty
        s(&[0, 7], 1, Contiguous, Full),
        s(&[5, 0], 1, Contiguous, Along),
        // realistic: causal attention scores, a broadcast padding mask
        s(&[4, 256, 256], 2, Contiguous, Causal),
        s(&[256, 4096], 1, Contiguous, Along),
    ];
    // NaN, +inf and -inf in x under the mask (forward)
    let mut special = s(&[6, 33], 1, Contiguous, Full);
    special.special = true;
    v.push(special);
    v
}

/// The samples of `op` with an f32 y: the kernels' paths with y and dy
/// twice x's width.
fn widened_samples(op: SoftmaxOp) -> Vec<SoftmaxSample> {
    use Layout::*;
    let s = |shape: &[usize], dim: usize, layout| SoftmaxSample {
        op,
        shape: shape.to_vec(),
        dim,
        layout,
        special: false,
        mask: None,
        widen: true,
    };
    let mut v = vec![
        s(&[7, 1], 1, Contiguous),
        s(&[37, 29], 1, Contiguous),
        s(&[300, 7], 1, StridedOut),
        s(&[5, 100], 1, Misaligned),
        s(&[9, 4099], 1, Contiguous),
        s(&[3, 40000], 1, Contiguous),
        s(&[2, 140_000], 1, StridedOut),
        s(&[4097, 3], 0, Contiguous),
        s(&[40, 8200], 0, Contiguous),
        s(&[6, 50, 70], 2, Transposed),
        s(&[8, 300], 1, Broadcast),
        s(&[0, 7], 1, Contiguous),
        s(&[256, 4096], 1, Contiguous),
    ];
    if op != SoftmaxOp::Softmin {
        // with a mask too
        let mut m = s(&[64, 1000], 1, Contiguous);
        m.mask = Some((SoftmaxMask::Keep, MaskLayout::Along));
        v.push(m);
    }
    v
}

/// Strides, buffer length and offset of a mask of `shape` laid out as
/// `layout` for a softmax along `dim`.
fn mask_layout(layout: MaskLayout, shape: &[usize], dim: usize) -> (Vec<usize>, usize, usize) {
    let n: usize = shape.iter().product();
    let rank = shape.len();
    match layout {
        MaskLayout::Full => (contiguous(shape), n, 0),
        MaskLayout::Offset => (contiguous(shape), n + 1, 1),
        MaskLayout::Reversed => x_layout(Layout::Transposed, shape),
        MaskLayout::Along => {
            let mut st = vec![0; rank];
            st[dim] = 1;
            (st, shape[dim], 0)
        }
        MaskLayout::Across => {
            let mut st = contiguous(shape);
            let e = shape[dim].max(1);
            for (d, v) in st.iter_mut().enumerate() {
                if d < dim {
                    *v /= e;
                }
            }
            st[dim] = 0;
            (st, n / e, 0)
        }
        MaskLayout::Causal => {
            let mut st = vec![0; rank];
            st[rank - 2] = shape[rank - 1];
            st[rank - 1] = 1;
            (st, shape[rank - 2] * shape[rank - 1], 0)
        }
    }
}

/// The logical (row-major) mask of a sample: 0/1 for keep, the added
/// values for add, repeating where the layout broadcasts.
fn mask_values(
    s: &SoftmaxSample,
    mask: SoftmaxMask,
    layout: MaskLayout,
    rng: &mut Rng,
) -> Vec<f64> {
    let n: usize = s.shape.iter().product();
    let (st, len, _) = mask_layout(layout, &s.shape, s.dim);
    // draw the stored elements, then read them through the strides: what
    // the device sees
    let mut stored: Vec<f64> = rng
        .vec(len, 0.0, 1.0)
        .into_iter()
        .map(|u| match mask {
            SoftmaxMask::Keep => f64::from(u8::from(u < 0.75)),
            // a bias in [-2, 2], -inf one time in six
            _ if u < 1.0 / 6.0 => f64::NEG_INFINITY,
            _ => u * 4.0 - 2.0,
        })
        .collect();
    let offsets = view_offsets(&s.shape, &st);
    if mask == SoftmaxMask::Add && s.n() > 0 {
        // no row all -inf (its dx would be NaN, from a NaN y): un-mask the
        // first element of each such row (broadcast rows share it, and
        // only lose a -inf)
        for k in 0..n / s.n() {
            let row = s.row(k);
            if row.iter().all(|&i| stored[offsets[i]] == f64::NEG_INFINITY) {
                stored[offsets[row[0]]] = 0.0;
            }
        }
    }
    let mut v: Vec<f64> = offsets.iter().map(|&o| stored[o]).collect();
    if layout == MaskLayout::Causal {
        let l = s.shape[s.shape.len() - 1];
        for (i, m) in v.iter_mut().enumerate() {
            let (q, k) = ((i / l) % l, i % l);
            *m = match (mask, k <= q) {
                (SoftmaxMask::Keep, keep) => f64::from(u8::from(keep)),
                (_, true) => 0.0,
                (_, false) => f64::NEG_INFINITY,
            };
        }
    } else if s.n() > 0 && n > 0 && matches!(layout, MaskLayout::Full | MaskLayout::Offset) {
        // row 0 with nothing kept (keep masks: NaN forward, dx 0; additive
        // masks all -inf only in forward-only samples), row 1 all kept
        let rows = n / s.n();
        if mask == SoftmaxMask::Keep || s.special {
            let fill = if mask == SoftmaxMask::Keep {
                0.0
            } else {
                f64::NEG_INFINITY
            };
            s.row(0).into_iter().for_each(|i| v[i] = fill);
        }
        if rows > 1 {
            let keep = if mask == SoftmaxMask::Keep { 1.0 } else { 0.0 };
            s.row(1).into_iter().for_each(|i| v[i] = keep);
        }
    }
    v
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
    match s.mask {
        Some((SoftmaxMask::Keep, layout)) => {
            t.push_exact("mask", mask_values(s, SoftmaxMask::Keep, layout, rng))
        }
        Some((mask, layout)) => t.push("mask", mask_values(s, mask, layout, rng)),
        None => {}
    }
    t
}

/// The reference's view of a sample's mask: keep flags, or the added
/// values.
fn reference_mask<'a>(s: &SoftmaxSample, keep: &'a [bool], inputs: &'a Tensors) -> r::Mask<'a> {
    match s.mask {
        Some((SoftmaxMask::Keep, _)) => r::Mask::Keep(keep),
        Some(_) => r::Mask::Add(inputs.get("mask")),
        None => r::Mask::None,
    }
}

fn reference(kind: ElementKind, s: &SoftmaxSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let keep: Vec<bool> = inputs
        .find("mask")
        .map_or(Vec::new(), |m| m.iter().map(|&v| v != 0.0).collect());
    let mask = reference_mask(s, &keep, inputs);
    let x = match mask {
        // PyTorch adds in the dtype: x + mask rounded to it
        r::Mask::Add(m) => {
            let z: Vec<f64> = inputs.get("x").iter().zip(m).map(|(a, b)| a + b).collect();
            round_to(kind, &z)
        }
        _ => inputs.get("x").to_vec(),
    };
    let z_mask = match mask {
        r::Mask::Add(_) => r::Mask::None,
        m => m,
    };
    let mut t = Tensors::default();
    t.push(
        "y",
        nan_marked(r::masked_softmax(s.op, &s.shape, s.dim, &x, z_mask)),
    );
    if got.find("dx").is_some() {
        // the gradient at the output the device produced (rounded to y's
        // dtype; NaN rows of keep masks are zeroed)
        let y = got.get("y");
        let dx = r::masked_softmax_backward(s.op, &s.shape, s.dim, y, inputs.get("dy"), mask);
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
    let u_acc = acc_roundoff(kind);
    // y and dy of a widened sample are f32: y is stored unrounded to x's
    // dtype, and must be that close
    let u_t = if s.widen && name == "y" {
        ElementKind::F32.unit_roundoff()
    } else {
        kind.unit_roundoff()
    };
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
    if s.widen {
        return crate::with_float!(kind, T => by_rank!(s.shape.len(), N => run_ranked::<T, N, f32>(s, inputs, backward)));
    }
    crate::with_float!(kind, T => by_rank!(s.shape.len(), N => run_ranked::<T, N, T>(s, inputs, backward)))
}

fn run_ranked<T: Element, const N: usize, Y: Element>(
    s: &SoftmaxSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let what = format!(
        "{} {} {:?} dim {} mask {:?} y {}",
        s.op.name(),
        T::KIND,
        s.shape,
        s.dim,
        s.mask,
        Y::KIND
    );
    let mut desc = SoftmaxDescriptor::new(s.op, T::KIND, arr::<N>(&s.shape)).with_dim(s.dim);
    if s.widen {
        desc = desc.with_dtype(Y::KIND);
    }
    if let Some((m, _)) = s.mask {
        desc = desc.with_mask(m);
    }
    let plan = select::<SoftmaxPlan<T, N, Y>>(&desc, &PlanPreference::default())?;
    let (xs, x_len, x_off) = x_layout(s.layout, &s.shape);
    let xbuf = upload_strided::<T>(inputs.get("x"), &s.shape, &xs, x_len, x_off);
    let x = xbuf.view::<N>(&s.shape)?;
    let keep_buf: Strided<bool>;
    let add_buf: Strided<T>;
    let mask = match s.mask {
        None => SoftmaxMaskRef::None,
        Some((m, layout)) => {
            let (ms, m_len, m_off) = mask_layout(layout, &s.shape, s.dim);
            let vals = inputs.get("mask");
            if m == SoftmaxMask::Keep {
                keep_buf = upload_strided::<bool>(vals, &s.shape, &ms, m_len, m_off);
                SoftmaxMaskRef::Keep(keep_buf.view::<N>(&s.shape)?)
            } else {
                add_buf = upload_strided::<T>(vals, &s.shape, &ms, m_len, m_off);
                SoftmaxMaskRef::Add(add_buf.view::<N>(&s.shape)?)
            }
        }
    };
    let (ys, y_len) = out_layout(s.layout, &s.shape);
    let forward = |y: DeviceSliceMut<'_, Y>| {
        let y = TensorMut::new(y, arr::<N>(&s.shape), arr::<N>(&ys)).map_err(|e| e.to_string())?;
        plan.run(&g.stream, Workspace::None, SoftmaxArgs { x, mask, y })
            .map_err(|e| format!("{what}: {e}"))
    };
    let (y, y_vals) = run_twice(&what, y_len, &s.shape, &ys, forward)?;
    let mut t = Tensors::default();
    t.push("y", nan_marked(y_vals));
    if !backward || s.special {
        return Ok(t);
    }
    let (dy, _) = upload::<Y>(inputs.get("dy"));
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
            mask,
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
    let mask = SoftmaxMaskRef::None;
    plan.run(&gpu().stream, Workspace::None, SoftmaxArgs { x, mask, y })
}

/// `plan.run_bw` without a workspace.
fn run_bw(
    plan: &SoftmaxPlan<f32, 2>,
    y: TensorRef<'_, f32, 2>,
    dy: TensorRef<'_, f32, 2>,
    dx: TensorMut<'_, f32, 2>,
) -> baracuda_kernels::Result<()> {
    let mask = SoftmaxMaskRef::None;
    plan.run_bw(
        &gpu().stream,
        Workspace::None,
        SoftmaxBwArgs { y, dy, mask, dx },
    )
}

/// Selecting `op` on `kind`, which no row claims, is `Unsupported`.
fn unsupported(op: SoftmaxOp, kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = SoftmaxDescriptor::new(op, kind, [8, 3]);
        expect_unsupported::<SoftmaxPlan<T, 2>>(&format!("{} on {kind}", op.name()), &desc)
    })
}

/// The select and run checks of `op` under `mask`, each returning its
/// error and writing nothing: a mask on softmin, a missing mask, one of
/// the other kind or shape, and outputs overlapping the mask.
fn masked_bad_inputs(op: SoftmaxOp, mask: SoftmaxMask) -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let desc = SoftmaxDescriptor::new(op, ElementKind::F32, [4, 96]).with_mask(mask);
    let sel = |d: &SoftmaxDescriptor<2>| SoftmaxPlan::<f32, 2>::select(&g.stream, d, &pref);
    let softmin = SoftmaxDescriptor {
        op: SoftmaxOp::Softmin,
        ..desc
    };
    b.expect(
        "a mask on softmin",
        sel(&softmin),
        crate::harness::unsupported,
        &[],
    )?;
    let plan = sel(&desc).map_err(|e| e.to_string())?;
    let mut rng = Rng::new(0x3A5C);
    let (xb, _) = upload::<f32>(&rng.vec(4 * 96, -1.0, 1.0));
    let x = TensorRef::contiguous(xb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    // Keep masks of 16 * 96 bools: 4 * 96 f32 bytes, for the f32 views over
    // the mask's memory below.
    let (kb, _) = upload::<bool>(&rng.vec(16 * 96, 0.0, 1.0));
    let (ab, _) = upload::<f32>(&rng.vec(8 * 96, -1.0, 1.0));
    let keep = |shape: [usize; 2]| {
        TensorRef::contiguous(kb.as_slice(), shape).map(SoftmaxMaskRef::<f32, 2>::Keep)
    };
    let add =
        |shape: [usize; 2]| TensorRef::contiguous(ab.as_slice(), shape).map(SoftmaxMaskRef::Add);
    let (good, other) = match mask {
        SoftmaxMask::Keep => (keep([4, 96]), add([4, 96])),
        _ => (add([4, 96]), keep([4, 96])),
    };
    let (good, other) = (
        good.map_err(|e| e.to_string())?,
        other.map_err(|e| e.to_string())?,
    );
    let short = match mask {
        SoftmaxMask::Keep => keep([3, 96]),
        _ => add([3, 96]),
    }
    .map_err(|e| e.to_string())?;
    let mut y = Guarded::<f32>::new(4 * 96);
    let st = &g.stream;
    let fw = |plan: &SoftmaxPlan<f32, 2>, mask, y: TensorMut<'_, f32, 2>| {
        plan.run(st, Workspace::None, SoftmaxArgs { x, mask, y })
    };
    let r = fw(&plan, SoftmaxMaskRef::None, out_view(&mut y)?);
    b.expect("no mask", r, invalid_argument("mask"), &[&y])?;
    let r = fw(&plan, other, out_view(&mut y)?);
    b.expect(
        "a mask of the other kind",
        r,
        invalid_argument("mask"),
        &[&y],
    )?;
    let r = fw(&plan, short, out_view(&mut y)?);
    b.expect("mask [3, 96]", r, shape_mismatch("mask"), &[&y])?;
    // y over the mask's memory (an f32 view at its address)
    let (m_addr, m_ctx) = match good {
        SoftmaxMaskRef::Keep(k) => (k.data().addr(), k.data().ctx_id()),
        SoftmaxMaskRef::Add(a) => (a.data().addr(), a.data().ctx_id()),
        SoftmaxMaskRef::None => unreachable!("a masked row"),
    };
    // SAFETY: a bad-input test: the run must reject the aliasing view
    // before anything is enqueued, so nothing reads or writes through it.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(m_addr, 4 * 96, m_ctx) };
    let r = fw(
        &plan,
        good,
        TensorMut::contiguous(alias, [4, 96]).map_err(|e| e.to_string())?,
    );
    b.expect("y over the mask", r, invalid_argument("y"), &[])?;

    // Backward: the same checks.
    let (dyb, _) = upload::<f32>(&rng.vec(4 * 96, -1.0, 1.0));
    let dy = TensorRef::contiguous(dyb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let mut dx = Guarded::<f32>::new(4 * 96);
    let bw = |mask, dx: TensorMut<'_, f32, 2>| {
        plan.run_bw(st, Workspace::None, SoftmaxBwArgs { y: x, dy, mask, dx })
    };
    let r = bw(SoftmaxMaskRef::None, out_view(&mut dx)?);
    b.expect(
        "backward without a mask",
        r,
        invalid_argument("mask"),
        &[&dx],
    )?;
    let r = bw(other, out_view(&mut dx)?);
    b.expect(
        "backward, the other kind",
        r,
        invalid_argument("mask"),
        &[&dx],
    )?;
    let r = bw(short, out_view(&mut dx)?);
    b.expect("backward, mask [3, 96]", r, shape_mismatch("mask"), &[&dx])?;
    // SAFETY: as above: rejected before anything is enqueued.
    let alias = unsafe { DeviceSliceMut::<f32>::from_raw_parts(m_addr, 4 * 96, m_ctx) };
    let r = bw(
        good,
        TensorMut::contiguous(alias, [4, 96]).map_err(|e| e.to_string())?,
    );
    b.expect("dx over the mask", r, invalid_argument("dx"), &[])?;
    b.done()
}

/// A `[4, 96]` view of `y`.
fn out_view(y: &mut Guarded<f32>) -> Result<TensorMut<'_, f32, 2>, String> {
    TensorMut::contiguous(y.slice_mut(), [4, 96]).map_err(|e| e.to_string())
}

/// Selecting `op` under `mask` on `kind`, which no row claims, is
/// `Unsupported`.
fn masked_unsupported(op: SoftmaxOp, mask: SoftmaxMask, kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = SoftmaxDescriptor::new(op, kind, [8, 3]).with_mask(mask);
        expect_unsupported::<SoftmaxPlan<T, 2>>(&format!("masked {} on {kind}", op.name()), &desc)
    })
}

/// The select and run checks of `op` with an f32 y: y's type against the
/// descriptor's dtype both ways, a dtype other than f32, and the views'
/// shapes.
fn widened_bad_inputs(op: SoftmaxOp) -> Result<usize, String> {
    use half::bf16;
    let g = gpu();
    let st = &g.stream;
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let desc = SoftmaxDescriptor::new(op, ElementKind::Bf16, [4, 96]).with_dtype(ElementKind::F32);
    b.expect(
        "dtype f32, y bf16",
        SoftmaxPlan::<bf16, 2, bf16>::select(st, &desc, &pref),
        dtype_mismatch,
        &[],
    )?;
    let plain = SoftmaxDescriptor::new(op, ElementKind::Bf16, [4, 96]);
    b.expect(
        "no dtype, y f32",
        SoftmaxPlan::<bf16, 2, f32>::select(st, &plain, &pref),
        dtype_mismatch,
        &[],
    )?;
    b.expect(
        "dtype f64 for bf16",
        SoftmaxPlan::<bf16, 2, f64>::select(st, &plain.with_dtype(ElementKind::F64), &pref),
        crate::harness::unsupported,
        &[],
    )?;
    let plan = SoftmaxPlan::<bf16, 2, f32>::select(st, &desc, &pref).map_err(|e| e.to_string())?;
    let mut rng = Rng::new(0x3A5D);
    let (xb, _) = upload::<bf16>(&rng.vec(5 * 96, -1.0, 1.0));
    let x = TensorRef::contiguous(xb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let mut y5 = Guarded::<f32>::new(5 * 96);
    let r = plan.run(
        st,
        Workspace::None,
        SoftmaxArgs {
            x,
            mask: SoftmaxMaskRef::None,
            y: TensorMut::contiguous(y5.slice_mut(), [5, 96]).map_err(|e| e.to_string())?,
        },
    );
    b.expect("y [5, 96]", r, shape_mismatch("y"), &[&y5])?;
    let (yb, _) = upload::<f32>(&rng.vec(5 * 96, 0.0, 1.0));
    let y = TensorRef::contiguous(yb.as_slice(), [4, 96]).map_err(|e| e.to_string())?;
    let dy3 = TensorRef::contiguous(yb.as_slice(), [3, 96]).map_err(|e| e.to_string())?;
    let mut dx = Guarded::<bf16>::new(4 * 96);
    let r = plan.run_bw(
        st,
        Workspace::None,
        SoftmaxBwArgs {
            y,
            dy: dy3,
            mask: SoftmaxMaskRef::None,
            dx: TensorMut::contiguous(dx.slice_mut(), [4, 96]).map_err(|e| e.to_string())?,
        },
    );
    b.expect("dy [3, 96]", r, shape_mismatch("dy"), &[&dx])?;
    b.done()
}

/// An f32 y on `kind`, which the widened rows do not claim: f32 and f64
/// inputs keep their dtype (f32 to f64 is asked on f32, whose f32 y is the
/// plain row's), other dtypes take no softmax.
fn widened_unsupported(op: SoftmaxOp, kind: ElementKind) -> Result<(), String> {
    if kind == ElementKind::F32 {
        let desc = SoftmaxDescriptor::new(op, kind, [8, 3]).with_dtype(ElementKind::F64);
        return expect_unsupported::<SoftmaxPlan<f32, 2, f64>>("f32 to f64", &desc);
    }
    crate::with_element!(kind, T => {
        let desc = SoftmaxDescriptor::new(op, kind, [8, 3]).with_dtype(ElementKind::F32);
        expect_unsupported::<SoftmaxPlan<T, 2, f32>>(&format!("{kind} to f32"), &desc)
    })
}
