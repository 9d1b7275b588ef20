//! GPU tests of the GEMM family: its rows of the op table, run by the
//! shared table runner (`table.rs`). The family's files:
//!
//! - `gemm/general.rs`: `gemm` and `batched_gemm` (every layout, epilogue
//!   and output dtype; strides, broadcasts, the fused epilogues' claims;
//!   TF32, determinism and measured autotuning);
//! - `gemm/grouped.rs`: `grouped_gemm` (MoE shapes with empty groups);
//! - `gemm/quantized.rs`: `int_gemm` and `fp8_gemm`;
//! - `gemm/linear.rs`: `linear`, forward and backward (strided, db both
//!   ways, the skinny forward forced, refused and autotuned);
//! - `gemm/bad_inputs.rs`: every row's bad inputs and its check that the
//!   dtypes it does not claim are `Unsupported`;
//! - `gemm/aliasing.rs`: the in-place forms (`C = D`) against separate
//!   runs, and every other overlap of an output refused;
//!
//! and here, what they share: stored matrices, outputs between poisoned
//! guards, and the family's error bound.
//!
//! A row's dtype is the one its plan's SKU names: the operands' (`A`'s for
//! `fp8_gemm`), except `int_gemm`, whose operands are always s8 and whose
//! dtype is the output's. A sample carries the rest: the output dtype of a
//! 16-bit GEMM (its own, or f32), fp8's `B` and output.
//!
//! An operand tensor is the buffer the plan reads, not a logical matrix:
//! the padding of its leading dimension and the gaps of a batch are drawn
//! at random like its elements (a kernel that read them would err). The
//! outputs are logical, row-major, entry after entry; the padding, gaps and
//! guards around them must still be poison.

/// `$body` with `$t` bound to the operand type of `$kind` and `$o` to the
/// output type `$out`, for the pairs the GEMM rows claim: each float dtype
/// into itself, f16 and bf16 into f32. `$body` is a `Result<_, String>`.
macro_rules! with_pair {
    ($kind:expr, $out:expr, $t:ident, $o:ident => $body:expr) => {{
        use baracuda_kernels::ElementKind as K;
        match ($kind, $out) {
            (K::F16, K::F32) => {
                type $t = half::f16;
                type $o = f32;
                $body
            }
            (K::Bf16, K::F32) => {
                type $t = half::bf16;
                type $o = f32;
                $body
            }
            (k, o) if k == o => crate::with_float!(k, $t => {
                type $o = $t;
                $body
            }),
            (k, o) => Err(format!("{k} -> {o} is not a pair the GEMM rows claim")),
        }
    }};
}

mod aliasing;
mod bad_inputs;
mod general;
mod grouped;
mod linear;
mod quantized;

use baracuda_kernels::reference::gemm as r;
use baracuda_kernels::*;

use crate::harness::*;
use crate::table::{Row, Tensors};

/// The GEMM family's rows of the op table.
pub(crate) static ROWS: &[&dyn Row] = &[
    &general::GEMM,
    &general::BATCHED_GEMM,
    &grouped::GROUPED_GEMM,
    &quantized::INT_GEMM,
    &quantized::FP8_GEMM,
    &linear::LINEAR,
];

crate::table_tests!(
    ROWS;
    gemm,
    batched_gemm,
    grouped_gemm,
    int_gemm,
    fp8_gemm,
    linear,
);

// ---------------------------------------------------------------------------
// Stored matrices and their outputs
// ---------------------------------------------------------------------------

/// A stored matrix: `rows x cols` in `order`, `ld` elements between
/// consecutive rows (row-major) or columns (column-major).
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct Mat {
    rows: usize,
    cols: usize,
    ld: usize,
    order: MatrixOrder,
}

impl Mat {
    fn new(rows: usize, cols: usize, ld: usize, order: MatrixOrder) -> Self {
        Mat {
            rows,
            cols,
            ld,
            order,
        }
    }
    /// Packed: the leading dimension is the contiguous extent (at least
    /// 1), as the descriptors' constructors make it.
    fn packed(rows: usize, cols: usize, order: MatrixOrder) -> Self {
        let ld = match order {
            MatrixOrder::RowMajor => cols,
            MatrixOrder::ColMajor => rows,
        };
        Mat::new(rows, cols, ld.max(1), order)
    }
    fn row_major(rows: usize, cols: usize, ld: usize) -> Self {
        Mat::new(rows, cols, ld, MatrixOrder::RowMajor)
    }
    /// Buffer offset of element `(r, c)`.
    fn offset(&self, r: usize, c: usize) -> usize {
        match self.order {
            MatrixOrder::RowMajor => r * self.ld + c,
            MatrixOrder::ColMajor => c * self.ld + r,
        }
    }
    /// Elements the matrix reaches (0 when it is empty).
    fn span(&self) -> usize {
        if self.rows == 0 || self.cols == 0 {
            0
        } else {
            self.offset(self.rows - 1, self.cols - 1) + 1
        }
    }
    /// Elements `count` matrices `stride` apart reach.
    fn span_of(&self, count: usize, stride: usize) -> usize {
        match (count, self.span()) {
            (0, _) | (_, 0) => 0,
            (count, span) => (count - 1) * stride + span,
        }
    }
    /// The matrix starting `offset` elements into `buf`, as the reference
    /// reads it.
    fn stored<'a>(&self, buf: &'a [f64], offset: usize) -> r::Stored<'a> {
        (&buf[offset..], self.ld, self.order)
    }
    fn view<'a, T: Element>(&self, data: DeviceSlice<'a, T>) -> MatrixRef<'a, T> {
        MatrixRef::new(data, self.rows, self.cols, self.ld, self.order)
            .expect("a sample's matrix fits its buffer")
    }
    fn view_mut<'a, T: Element>(&self, data: DeviceSliceMut<'a, T>) -> MatrixMut<'a, T> {
        MatrixMut::new(data, self.rows, self.cols, self.ld, self.order)
            .expect("a sample's matrix fits its buffer")
    }
}

/// `values` on the device, rounded to `T` (one element when there are
/// none: an empty group's operand still needs an address).
fn upload_operand<T: Element>(values: &[f64]) -> DeviceBuffer<T> {
    let one = [1.0];
    upload::<T>(if values.is_empty() { &one } else { values }).0
}

/// An output of `count` matrices `stride` apart, NaN-poisoned, between
/// poisoned guards.
pub(crate) struct MatOut<T: Element> {
    buf: Guarded<T>,
    mat: Mat,
    count: usize,
    stride: usize,
}

impl<T: Element> MatOut<T> {
    fn new(mat: Mat) -> Self {
        MatOut::batch(mat, 1, 0)
    }
    fn batch(mat: Mat, count: usize, stride: usize) -> Self {
        MatOut {
            buf: Guarded::new(mat.span_of(count, stride)),
            mat,
            count,
            stride,
        }
    }
    /// The whole output, every entry (a batched plan's argument).
    fn slice_mut(&mut self) -> DeviceSliceMut<'_, T> {
        self.buf.slice_mut()
    }
    fn view(&self) -> MatrixRef<'_, T> {
        self.mat.view(self.buf.slice())
    }
    fn view_mut(&mut self) -> MatrixMut<'_, T> {
        let mat = self.mat;
        self.view_mut_as(mat)
    }
    /// A writable view of the output's elements as another matrix (for
    /// bad inputs).
    fn view_mut_as(&mut self, mat: Mat) -> MatrixMut<'_, T> {
        mat.view_mut(self.buf.slice_mut())
    }
    /// Every entry's logical values, back to back; an error when anything
    /// else (a guard, the padding of the leading dimension, a gap between
    /// entries) was written.
    fn result(&self, what: &str) -> Result<Vec<f64>, String> {
        let all = self.buf.result(what)?;
        let (m, stride) = (self.mat, self.stride);
        let offsets: Vec<usize> = (0..self.count)
            .flat_map(|e| {
                (0..m.rows).flat_map(move |r| (0..m.cols).map(move |c| e * stride + m.offset(r, c)))
            })
            .collect();
        let mut covered = vec![false; all.len()];
        for &o in &offsets {
            covered[o] = true;
        }
        let stray = (0..all.len()).find(|&i| !covered[i] && !is_poison::<T>(all[i]));
        if let Some(i) = stray {
            return Err(format!(
                "{what}: element {i} of the buffer, outside every matrix, was written ({})",
                all[i]
            ));
        }
        Ok(offsets.into_iter().map(|o| all[o]).collect())
    }
}

impl<T: Element> Poisoned for MatOut<T> {
    fn untouched(&self, what: &str) -> Result<(), String> {
        self.buf.untouched(what)
    }
}

/// An output a run fills.
trait Output: Poisoned {
    /// Its values; an error when the run wrote outside them.
    fn values(&self, what: &str) -> Result<Vec<f64>, String>;
}

impl<T: Element> Output for MatOut<T> {
    fn values(&self, what: &str) -> Result<Vec<f64>, String> {
        self.result(what)
    }
}

impl<T: Element> Output for Guarded<T> {
    fn values(&self, what: &str) -> Result<Vec<f64>, String> {
        self.result(what)
    }
}

/// One output per group (a grouped GEMM's): every group's values, back
/// to back.
impl<T: Element> Poisoned for Vec<MatOut<T>> {
    fn untouched(&self, what: &str) -> Result<(), String> {
        let group = |g| format!("{what} of group {g}");
        self.iter()
            .enumerate()
            .try_for_each(|(g, o)| o.untouched(&group(g)))
    }
}

impl<T: Element> Output for Vec<MatOut<T>> {
    fn values(&self, what: &str) -> Result<Vec<f64>, String> {
        let mut v = Vec::new();
        for (g, o) in self.iter().enumerate() {
            v.extend(o.result(&format!("{what} of group {g}"))?);
        }
        Ok(v)
    }
}

/// The outputs of one run, each named `"<name> by <the SKU's variant>"`:
/// the runner compares the name's first word (the tensor) with the
/// reference, and a failure shows what ran.
struct Outputs {
    how: String,
    tensors: Tensors,
}

impl Outputs {
    fn new(sku: &KernelSku) -> Self {
        Outputs {
            how: format!("by {}", sku.variant),
            tensors: Tensors::default(),
        }
    }
    /// The outputs of `plan`'s run that returned `r`; its error as a
    /// message.
    fn of<P: Plan>(plan: &P, r: Result<()>) -> Result<Self, String> {
        r.map_err(|e| format!("run: {e}"))?;
        Ok(Outputs::new(plan.sku()))
    }
    /// `out`'s values as `name` when it was `given` to the run; else `out`
    /// must still be poison.
    fn take(&mut self, name: &str, given: bool, out: &dyn Output) -> Result<(), String> {
        if given {
            let values = out.values(name)?;
            self.tensors.push(format!("{name} {}", self.how), values);
            Ok(())
        } else {
            out.untouched(&format!("{name}, not asked for"))
        }
    }
    fn tensors(self) -> Tensors {
        self.tensors
    }
}

/// The whole of `s` as a vector view (a bias).
pub(crate) fn vector<T: Element>(s: DeviceSlice<'_, T>) -> TensorRef<'_, T, 1> {
    TensorRef::contiguous(s, [s.len()]).expect("a slice is a contiguous vector")
}

/// The whole of `s` as a writable vector view (a bias gradient).
pub(crate) fn vector_mut<T: Element>(s: DeviceSliceMut<'_, T>) -> TensorMut<'_, T, 1> {
    let n = s.len();
    TensorMut::contiguous(s, [n]).expect("a slice is a contiguous vector")
}

/// The bias vectors of batch `d` in `s`: `[batch, n]` at
/// `[stride_bias, 1]` (stride 0 broadcasts a shared bias).
pub(crate) fn batch_bias<'a, T: Element>(
    d: &BatchedGemmDescriptor,
    s: DeviceSlice<'a, T>,
) -> TensorRef<'a, T, 2> {
    TensorRef::new(s, [d.batch, d.gemm.n], [d.stride_bias, 1])
        .expect("the sample's bias buffer holds every entry's vector")
}

/// `buf` as a workspace.
fn borrowed(buf: &mut DeviceBuffer<u8>) -> Workspace<'_> {
    Workspace::Borrowed(buf.as_slice_mut())
}

/// `alpha` and `beta` of a sample that gives `C` (`beta != 0`) or not.
fn scalars(with_c: bool) -> (f64, f64) {
    if with_c {
        (1.25, -0.5)
    } else {
        (0.75, 0.0)
    }
}

/// The reference `(D, Z)` of one GEMM, `alpha A B + beta C + bias`
/// through `act`, its `A`, `B`, `C` and bias starting at `at` in the
/// inputs `a`, `b`, `c` and `bias` (the last two when given).
fn entry(
    inputs: &Tensors,
    [a, b, c]: [Mat; 3],
    at: [usize; 4],
    (alpha, beta): (f64, f64),
    act: Activation,
) -> (Vec<f64>, Vec<f64>) {
    let (m, n, k) = (a.rows, b.cols, a.cols);
    let c = inputs.find("c").map(|v| c.stored(v, at[2]));
    let bias = inputs.find("bias").map(|v| &v[at[3]..][..n]);
    let (a, b) = (
        a.stored(inputs.get("a"), at[0]),
        b.stored(inputs.get("b"), at[1]),
    );
    r::gemm(m, n, k, a, b, c, bias, alpha, beta, act)
}

/// The references `d` and, when `save_aux`, `aux` of GEMMs computed one
/// by one (a batch's entries, a grouped GEMM's groups), back to back.
fn entries(save_aux: bool, each: impl Iterator<Item = (Vec<f64>, Vec<f64>)>) -> Tensors {
    let (mut d, mut z) = (Vec::new(), Vec::new());
    for (di, zi) in each {
        d.extend(di);
        z.extend(zi);
    }
    let mut t = Tensors::default();
    t.push("d", d);
    if save_aux {
        t.push("aux", z);
    }
    t
}

/// `alpha A B`, `m x n` row-major: the reference of a GEMM without `C`,
/// bias or activation.
fn product(
    m: usize,
    n: usize,
    k: usize,
    a: r::Stored<'_>,
    b: r::Stored<'_>,
    alpha: f64,
) -> Vec<f64> {
    r::gemm(m, n, k, a, b, None, None, alpha, 0.0, Activation::Identity).0
}

/// Whether two runs' outputs hold the same bits.
fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

// ---------------------------------------------------------------------------
// The family's bound
// ---------------------------------------------------------------------------

/// The GEMM criterion for a relative bound `rel`: relative L2 error at
/// most `rel`, and every |error| at most `rel |want| + 19 rel max|want|`
/// (so never more than 20 `rel` max|want|).
fn bound(rel: f64, want: &[f64]) -> Tolerance {
    Tolerance::of_max(rel, 19.0 * rel, want)
}

/// The relative bound of a GEMM with `t` inputs, `o` outputs and inner size
/// `k`. The inputs the reference sees are the rounded ones, so only the
/// accumulation and the stores of `D` err.
fn tol(t: ElementKind, o: ElementKind, k: usize, tf32: bool) -> f64 {
    use ElementKind as K;
    let sqrt_k = (k as f64).sqrt();
    let base = match (t, o) {
        // Hopper's fp8 tensor cores keep ~14 mantissa bits while they
        // accumulate (DeepSeek-V3 report, 3.3.2): sqrt(k) 2^-14, x4, plus
        // the one rounding of D to `o`, x2.
        (K::Fp8E4M3 | K::Fp8E5M2, _) => 2.0 * o.unit_roundoff() + 4.0 * sqrt_k * 2f64.powi(-14),
        // f64 accumulation errs ~sqrt(k) u64 < 1e-14 for k <= 8192; the
        // rest is room for cuBLASLt's split-k reduction order.
        (K::F64, _) => 1e-12,
        // TF32 rounds every input to 10 mantissa bits (u = 2^-11): ~2u per
        // product, x5.
        (K::F32, _) if tf32 => 5e-3,
        // Exact products summed in f32: sqrt(k) u32 = 2.7e-6 at k = 2049,
        // x7 for tensor-core truncation and alpha/beta/bias roundings.
        (_, K::F32) => 2e-5,
        // D rounded to f16 (u = 4.9e-4), twice when the epilogue kernel
        // applies the activation to the stored Z: 4u.
        (_, K::F16) => 2e-3,
        // The same two roundings to bf16 (u = 3.9e-3): ~2u.
        _ => 8e-3,
    };
    // Accumulator rounding grows like sqrt(k) u; x4 (binds only past the
    // k the constants above were set for).
    base.max(4.0 * sqrt_k * acc_roundoff(t))
}
