//! LayerNorm and RMSNorm over the last `K` dims of a rank-`N` tensor, and
//! their backward.
//!
//! The math and the work split are at the top of `kernels/norm/norm.cu`.
//! One generic plan, [`NormPlan`], serves both kinds ([`LayerNorm`],
//! [`RmsNorm`]); [`LayerNormPlan`] and [`RmsNormPlan`] name them.

use core::marker::PhantomData;

use baracuda_driver::{Function, LaunchConfig, Module, ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtr, DevPtrMut, DeviceSlice, DeviceSliceMut, Element, ElementKind, Error, Grad,
    Grads, KernelSku, PlanPreference, Result, Shape, TensorMut, TensorRef,
    Workspace, MAX_RANK,
};

use crate::checks::{
    check_alias, check_grads, float_dtype_code, invalid_descriptor, optional_arg, span_bytes,
    Extent,
};
use crate::kernel_sources;
use crate::launch::launch_params;
use crate::plan::own_float_sku;
use crate::{Backward, Plan};

const OP: &str = "norm";

mod sealed {
    pub trait Sealed {}
}

/// Which normalization a [`NormPlan`] computes.
pub trait NormKind: sealed::Sealed + Send + Sync + 'static {
    /// `BARACUDA_NORM` of norm.cu.
    #[doc(hidden)]
    const CODE: u32;
    /// The op's name (PyTorch's).
    const NAME: &'static str;
    /// The statistics hold the mean (LayerNorm) besides `rstd`.
    const SAVES_MEAN: bool;
}

/// `y = (x - mean) / sqrt(var + eps) * weight + bias`, the biased variance
/// over the normalized dims (`torch.nn.functional.layer_norm`).
#[derive(Copy, Clone, Debug)]
pub enum LayerNorm {}
/// `y = x / sqrt(mean(x^2) + eps) * weight` over the normalized dims
/// (`torch.nn.functional.rms_norm`).
#[derive(Copy, Clone, Debug)]
pub enum RmsNorm {}

impl sealed::Sealed for LayerNorm {}
impl sealed::Sealed for RmsNorm {}
impl NormKind for LayerNorm {
    const CODE: u32 = 0;
    const NAME: &'static str = "layer_norm";
    const SAVES_MEAN: bool = true;
}
impl NormKind for RmsNorm {
    const CODE: u32 = 1;
    const NAME: &'static str = "rms_norm";
    const SAVES_MEAN: bool = false;
}

/// A normalization over the last `normalized_dims` dims of `shape`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct NormDescriptor<const N: usize> {
    /// Element type of every tensor operand.
    pub element: ElementKind,
    /// Shape of `x` (and `y`, `dy`, `dx`).
    pub shape: [usize; N],
    /// How many trailing dims are normalized (PyTorch's
    /// `len(normalized_shape)`); the plan's `K`.
    pub normalized_dims: usize,
    /// Added to the variance (mean square) before the square root.
    pub eps: f64,
    /// The op takes a weight of the normalized shape.
    pub weight: bool,
    /// The op takes a bias of the normalized shape (LayerNorm only).
    pub bias: bool,
    /// The residual form: the forward normalizes `s = x + residual`
    /// (rounded to the element type) and writes `s` besides `y`; the
    /// backward takes `s` as its `x` and may add a `ds`.
    pub residual: bool,
}

impl<const N: usize> NormDescriptor<N> {
    /// LayerNorm with PyTorch's defaults: eps 1e-5, weight and bias.
    pub fn layer_norm(element: ElementKind, shape: [usize; N], normalized_dims: usize) -> Self {
        NormDescriptor {
            element,
            shape,
            normalized_dims,
            eps: 1e-5,
            weight: true,
            bias: true,
            residual: false,
        }
    }
    /// RMSNorm with PyTorch's defaults: eps the machine epsilon of
    /// `element` (`torch.finfo(dtype).eps`), a weight, no bias.
    pub fn rms_norm(element: ElementKind, shape: [usize; N], normalized_dims: usize) -> Self {
        NormDescriptor {
            element,
            shape,
            normalized_dims,
            eps: 2.0 * element.unit_roundoff(),
            weight: true,
            bias: false,
            residual: false,
        }
    }
    affine_setters!();
    /// Whether the op is the residual form (`y = norm(x + residual)`,
    /// writing the sum).
    pub fn with_residual(mut self, residual: bool) -> Self {
        self.residual = residual;
        self
    }
    /// Elements normalized together (the product of the normalized dims).
    pub fn hidden(&self) -> usize {
        self.shape[N.saturating_sub(self.normalized_dims).min(N)..]
            .iter()
            .product()
    }
    /// Rows normalized (the product of the other dims).
    pub fn rows(&self) -> usize {
        self.shape[..N.saturating_sub(self.normalized_dims)]
            .iter()
            .product()
    }
}

/// Arguments of [`NormPlan`]'s [`Plan::run`].
pub struct NormArgs<'a, T, const N: usize, const K: usize> {
    /// Input; the normalized dims dense, the others any strides.
    pub x: TensorRef<'a, T, N>,
    /// The weight, dense, of the normalized shape: given exactly when the
    /// descriptor has `weight`.
    pub weight: Option<TensorRef<'a, T, K>>,
    /// The bias, likewise with `bias`.
    pub bias: Option<TensorRef<'a, T, K>>,
    /// The residual added to `x` (shape and layout as `x`): given exactly
    /// when the descriptor has `residual`.
    pub residual: Option<TensorRef<'a, T, N>>,
    /// Where the residual form writes `s = x + residual` (given exactly
    /// with `residual`; laid out as `x` may be). It may be `residual` or
    /// `x` itself (the same view: the residual stream updated in place);
    /// it shares no other memory with an operand.
    pub sum: Option<TensorMut<'a, T, N>>,
    /// Output; laid out as `x` may be, disjoint from every input.
    pub y: TensorMut<'a, T, N>,
    /// Where to save the statistics the backward reads
    /// ([`NormPlan::stats_bytes`] bytes), or None.
    pub stats: Option<DeviceSliceMut<'a, u8>>,
}

/// Arguments of [`NormPlan`]'s [`Backward::run_bw`].
pub struct NormBwArgs<'a, T, const N: usize, const K: usize> {
    /// The forward input: the tensor normalized, which for the residual
    /// form is the sum `s` the forward wrote.
    pub x: TensorRef<'a, T, N>,
    /// The forward weight (given exactly when the descriptor has one).
    pub weight: Option<TensorRef<'a, T, K>>,
    /// The statistics the forward saved.
    pub stats: DeviceSlice<'a, u8>,
    /// Gradient of `y`.
    pub dy: TensorRef<'a, T, N>,
    /// The residual form's gradient of `s` from its other uses (the
    /// residual stream), added to `dx`; only with the residual form, and
    /// read only when `dx` is asked.
    pub ds: Option<TensorRef<'a, T, N>>,
    /// Gradient of `x` (for the residual form the gradient of `s`, which
    /// is both `dx` and `dresidual`). It may be `ds` itself (the same
    /// view: in place); it shares no other memory with an operand.
    pub dx: Option<TensorMut<'a, T, N>>,
    /// Gradient of the weight (dense, the normalized shape).
    pub dweight: Option<TensorMut<'a, T, K>>,
    /// Gradient of the bias (dense, the normalized shape).
    pub dbias: Option<TensorMut<'a, T, K>>,
}

/// A LayerNorm or RMSNorm ([`NormKind`]) over the last `K` dims of a
/// rank-`N` tensor, forward and backward. Deterministic: dweight and
/// dbias are per-block partial sums in the workspace added in a fixed
/// order.
///
/// # Math
/// Per row `r` of `h` = [`NormDescriptor::hidden`] elements (`w = 1` and
/// `b = 0` when the descriptor has none):
/// - LayerNorm: `mean = sum_j x / h`, `var = sum_j (x - mean)^2 / h`
///   (biased), `rstd = 1 / sqrt(var + eps)`, `xhat = (x - mean) rstd`;
/// - RMSNorm: `rstd = 1 / sqrt(sum_j x^2 / h + eps)`, `xhat = x rstd`;
/// - `y = xhat w + b`.
///
/// The residual form ([`NormDescriptor::residual`]) normalizes
/// `s = x + residual`, added in the accumulator type and rounded to `T`
/// (as PyTorch's `s = x + r; y = layer_norm(s)` in 16-bit dtypes), and
/// writes `s` (`sum`) besides `y`, reading `x` and `residual` once. Its
/// backward takes `s` as `x` and returns `dx = d_norm + ds`, the gradient
/// of both `x` and `residual`.
///
/// Backward, with `g = dy w`: `dx = rstd (g - c - xhat a)` where
/// `a = sum_j g xhat / h` and `c = sum_j g / h` (LayerNorm; 0 for
/// RMSNorm); `dweight[j] = sum_r dy xhat`, `dbias[j] = sum_r dy`.
/// # Shapes
/// `x`, `residual`, `sum`, `y`, `dy`, `ds`, `dx`: `desc.shape`; `weight`, `bias`, `dweight`,
/// `dbias`: its last `K` dims (`K >= 1`, `desc.normalized_dims == K`).
/// # Layout
/// The normalized dims of every operand dense (row-major); the row dims
/// any strides (0 broadcasts an input). Rows of a multiple of 16 bytes,
/// 16-byte aligned, up to 4096 vectors are held in registers (x read
/// once); other rows take the element-wise kernel.
/// # Workspace
/// The forward takes none (`workspace_size()` is 0, the `workspace`
/// argument is not read). The backward's `bw_workspace_size(wants)` holds
/// per-block partial rows of dweight (and dbias) in f32 (f64 for f64); 0
/// when only `dx` is asked.
/// # Statistics
/// The forward saves, per row in row-major order, LayerNorm's mean then
/// (after every row's mean) the rstd `1 / sqrt(var + eps)`, RMSNorm's rstd
/// only, as f32 (f64 for f64): [`NormPlan::stats_bytes`] bytes, aligned
/// to their type.
/// # Dtypes
/// f32, f64, f16, bf16; weight and bias in the same dtype as `x`.
/// Statistics and arithmetic in f32 (f64 for f64). Others:
/// `Error::Unsupported`.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND`;
/// `Unsupported` for another dtype or a rank `N > 8`; `InvalidDescriptor`
/// for a `normalized_dims` other than `K`, a `K` of 0 or past `N`, no
/// normalized elements, a negative or non-finite eps, a bias on RMSNorm;
/// `PreferenceRejected` when `pref` forces a backend other than
/// `Baracuda`; the kernel JIT's errors. From `run` and `run_bw`:
/// `ShapeMismatch` for a view of another shape; `ContextMismatch` for a
/// view, the statistics or the workspace on another context;
/// `WorkspaceTooSmall` (`run_bw`); `InvalidArgument` for a weight or bias
/// given against the descriptor or missing, a `residual` or `sum` given
/// against the descriptor or missing, a `ds` without the residual form, a
/// `dweight` or `dbias` the descriptor has no parameter for, non-dense
/// normalized dims, overlapping operands (other than `sum` as `residual`
/// or `x`, and `dx` as `ds`, each the same view), and short or misaligned
/// statistics.
pub struct NormPlan<T: Element, Kind: NormKind, const N: usize, const K: usize = 1> {
    desc: NormDescriptor<N>,
    sku: KernelSku,
    /// The forward (the residual form's when the descriptor has it).
    fw: Kernels,
    bw: Kernels,
    params: Function,
    sm_count: u32,
    _t: PhantomData<(T, Kind)>,
}

/// LayerNorm over the last `K` dims ([`NormPlan`]).
pub type LayerNormPlan<T, const N: usize, const K: usize = 1> = NormPlan<T, LayerNorm, N, K>;
/// RMSNorm over the last `K` dims ([`NormPlan`]).
pub type RmsNormPlan<T, const N: usize, const K: usize = 1> = NormPlan<T, RmsNorm, N, K>;

/// The module of kind `kind` on dtype code `dtype`.
pub(crate) fn spec(dtype: u32, kind: u32) -> ModuleSpec {
    ModuleSpec::new(&kernel_sources::NORM)
        .define("BARACUDA_DTYPE", dtype)
        .define("BARACUDA_NORM", kind)
}

/// Register-row kernels by vectors per thread, and the element-wise one.
struct Kernels {
    regs: [Function; 4],
    any: Function,
}

/// Vectors per thread of `Kernels::regs`.
const REG_VECS: [usize; 4] = [1, 2, 4, 8];
/// Most threads per block (`__launch_bounds__(512)`).
const MAX_THREADS: usize = 512;
/// Backward blocks per SM (each writes a partial row of dw and db).
const BW_BLOCKS_PER_SM: usize = 4;

impl Kernels {
    fn load(module: &Module, dir: &str) -> Result<Self> {
        let f = |v: usize| module.function(&format!("norm_{dir}_v{v}"));
        Ok(Kernels {
            regs: [f(1)?, f(2)?, f(4)?, f(8)?],
            any: module.function(&format!("norm_{dir}_loop"))?,
        })
    }
}

/// The accumulator type of the statistics and partials (f32 or f64), a
/// marker for typed addresses.
pub(super) enum Acc {}

/// `NormParams` of norm.cu, field for field.
#[repr(C)]
#[derive(Copy, Clone)]
struct NormParams<T> {
    x: DevPtr<T>,
    dy: DevPtr<T>,
    r: DevPtr<T>,
    s: DevPtrMut<T>,
    out: DevPtrMut<T>,
    w: DevPtr<T>,
    b: DevPtr<T>,
    mean: DevPtrMut<Acc>,
    rstd: DevPtrMut<Acc>,
    dw: DevPtrMut<T>,
    db: DevPtrMut<T>,
    partial: DevPtrMut<Acc>,
    rows: u64,
    h: u64,
    eps: f64,
    shape: [u64; MAX_RANK],
    sx: [i64; MAX_RANK],
    so: [i64; MAX_RANK],
    sdy: [i64; MAX_RANK],
    sr: [i64; MAX_RANK],
    ss: [i64; MAX_RANK],
    rank: u32,
    blocks: u32,
}

/// An operand's memory, for the overlap checks: name, first byte, bytes.
pub(super) type Span = (&'static str, DevPtr<u8>, usize);

pub(super) fn span_of<T>(arg: &'static str, ptr: DevPtr<T>, shape: &[usize], strides: &[usize]) -> Span {
    (arg, ptr.cast(), span_bytes::<T>(shape, strides))
}

/// `InvalidArgument` when output `out` shares a byte with any of `others`.
fn check_disjoint(out: &Span, others: &[Span]) -> Result<()> {
    check_disjoint_in(OP, out, others)
}

/// [`check_disjoint`] reporting op `op`.
pub(super) fn check_disjoint_in(op: &'static str, out: &Span, others: &[Span]) -> Result<()> {
    let one = [1usize];
    let (o_len, o_one) = ([out.2], one);
    let o = Extent::new(out.0, out.1, &o_len, &o_one);
    for s in others {
        let len = [s.2];
        check_alias(op, &o, &Extent::new(s.0, s.1, &len, &one), false)?;
    }
    Ok(())
}

/// `with_eps`, `with_weight` and `with_bias`, the setters of a
/// normalization descriptor with `eps`, `weight` and `bias` fields.
macro_rules! affine_setters {
    () => {
        /// The eps.
        pub fn with_eps(mut self, eps: f64) -> Self {
            self.eps = eps;
            self
        }
        /// Whether the op takes a weight.
        pub fn with_weight(mut self, weight: bool) -> Self {
            self.weight = weight;
            self
        }
        /// Whether the op takes a bias.
        pub fn with_bias(mut self, bias: bool) -> Self {
            self.bias = bias;
            self
        }
    };
}
pub(super) use affine_setters;

/// Why a weight or bias is refused: given against a descriptor without
/// one, or missing (for [`optional_arg`]).
pub(super) const AFFINE_WHY: (&str, &str) = ("the descriptor has none", "the descriptor has one");

/// Why a residual, sum or ds is refused.
const RESIDUAL_WHY: (&str, &str) = (
    "the descriptor is not the residual form",
    "the descriptor is the residual form",
);

/// The gradients of a normalization with (or asked for) `x`, a weight and
/// a bias.
pub(super) fn affine_grads(x: bool, weight: bool, bias: bool) -> Grads {
    Grads::present(&[(Grad::X, x), (Grad::Weight, weight), (Grad::Bias, bias)])
}

/// Bytes of the accumulator of element type `T` (f32, f64 for f64): the
/// statistics' and the partials' type.
pub(super) fn acc_bytes<T: Element>() -> usize {
    T::KIND.float_accumulator().size_bytes()
}

/// Check op `op`'s statistics buffer (address, length, context): on the
/// stream's context, at least `need` bytes, aligned to `align`.
pub(super) fn check_stats(
    op: &'static str,
    stream: &Stream,
    (ptr, len, ctx): (DevPtr<u8>, usize, usize),
    need: usize,
    align: usize,
) -> Result<()> {
    if stream.context().id() != ctx {
        return Err(Error::ContextMismatch { op, arg: "stats" });
    }
    if len < need || ptr.addr() % align as u64 != 0 {
        return Err(Error::InvalidArgument {
            op,
            arg: "stats",
            reason: format!(
                "{len} bytes at {:#x}; the statistics need {need} bytes aligned to {align}",
                ptr.addr()
            ),
        });
    }
    Ok(())
}

/// Where the forward saves its statistics: null without `stats`, else the
/// checked buffer ([`check_stats`]), disjoint from `inputs` and from the
/// output `y`, which it adds to `inputs`.
pub(super) fn saved_stats(
    op: &'static str,
    stream: &Stream,
    stats: Option<&DeviceSliceMut<'_, u8>>,
    (need, align): (usize, usize),
    y: Span,
    inputs: &mut Vec<Span>,
) -> Result<DevPtrMut<u8>> {
    let Some(s) = stats else {
        return Ok(DevPtrMut::NULL);
    };
    check_stats(op, stream, (s.ptr().as_const(), s.len(), s.ctx_id()), need, align)?;
    inputs.push(y);
    check_disjoint_in(op, &("stats", s.ptr().as_const(), need), inputs)?;
    Ok(s.ptr())
}

/// Each of `outputs` disjoint from every input and from the outputs
/// before it.
pub(super) fn check_outputs_disjoint(op: &'static str, outputs: &[Span], mut inputs: Vec<Span>) -> Result<()> {
    for o in outputs {
        check_disjoint_in(op, o, &inputs)?;
        inputs.push(*o);
    }
    Ok(())
}

fn shape_mismatch(arg: &'static str, expected: &[usize], got: &[usize]) -> Error {
    Error::ShapeMismatch {
        op: OP,
        arg,
        expected: Shape::from(expected),
        got: Shape::from(got),
    }
}

/// Check an operand's shape, context and dense normalized dims (its last
/// `dense` dims).
fn check_operand(
    arg: &'static str,
    (shape, strides, ctx): (&[usize], &[usize], usize),
    expected: &[usize],
    dense: usize,
    stream: &Stream,
) -> Result<()> {
    if shape != expected {
        return Err(shape_mismatch(arg, expected, shape));
    }
    if stream.context().id() != ctx {
        return Err(Error::ContextMismatch { op: OP, arg });
    }
    let r = shape.len();
    let mut want = 1usize;
    for d in (r - dense..r).rev() {
        if shape[d] != 1 && strides[d] != want {
            return Err(Error::InvalidArgument {
                op: OP,
                arg,
                reason: format!(
                    "strides {strides:?}: the normalized dims must be dense (row-major)"
                ),
            });
        }
        want *= shape[d];
    }
    Ok(())
}

fn parts<'s, T: Element, const R: usize>(
    v: &'s TensorRef<'_, T, R>,
) -> (&'s [usize], &'s [usize], usize) {
    (v.shape(), v.strides(), v.data().ctx_id())
}

fn parts_mut<'s, T: Element, const R: usize>(
    v: &'s TensorMut<'_, T, R>,
) -> (&'s [usize], &'s [usize], usize) {
    (v.shape(), v.strides(), v.data().ctx_id())
}

impl<T: Element, Kind: NormKind, const N: usize, const K: usize> NormPlan<T, Kind, N, K> {
    fn rows(&self) -> usize {
        self.desc.rows()
    }
    fn hidden(&self) -> usize {
        self.desc.hidden()
    }
    /// Bytes of the statistics the forward saves and the backward reads.
    pub fn stats_bytes(&self) -> usize {
        let per_row = if Kind::SAVES_MEAN { 2 } else { 1 };
        self.rows() * per_row * acc_bytes::<T>()
    }
    /// The statistics' bytes and alignment.
    fn stats_layout(&self) -> (usize, usize) {
        (self.stats_bytes(), acc_bytes::<T>())
    }
    /// The normalized shape (the last `K` dims).
    fn normalized_shape(&self) -> [usize; K] {
        core::array::from_fn(|i| self.desc.shape[N - K + i])
    }
    /// Blocks of the backward (partial rows of dw and db).
    fn bw_blocks(&self) -> usize {
        self.rows()
            .min(BW_BLOCKS_PER_SM * self.sm_count.max(1) as usize)
    }
    /// The register kernel's vectors per thread (index into `REG_VECS`) and
    /// threads, when every row of every operand is 16-byte aligned and
    /// `h` is whole vectors; else the element-wise kernel's threads.
    fn launch_shape(&self, ptrs: &[u64], row_strides: &[&[usize]]) -> (Option<usize>, u32) {
        let h = self.hidden();
        let vec = 16 / core::mem::size_of::<T>();
        let outer = N - K;
        let aligned = h % vec == 0
            && ptrs.iter().all(|p| p % 16 == 0)
            && row_strides.iter().all(|s| {
                (0..outer).all(|d| self.desc.shape[d] == 1 || s[d] % vec == 0)
            });
        let chunks = h / vec;
        if aligned && chunks <= MAX_THREADS * REG_VECS[3] {
            let threads = chunks.div_ceil(2).next_power_of_two().clamp(32, MAX_THREADS);
            let per = chunks.div_ceil(threads).next_power_of_two();
            let i = REG_VECS.iter().position(|&v| v == per).unwrap_or(3);
            return (Some(i), threads as u32);
        }
        let threads = h.div_ceil(8).next_power_of_two().clamp(32, MAX_THREADS);
        (None, threads as u32)
    }
    /// Parameters with the row geometry and scalars filled, pointers null.
    fn params(&self, sx: &[usize; N], so: &[usize; N], sdy: &[usize; N]) -> NormParams<T> {
        let mut p = NormParams {
            x: DevPtr::NULL,
            dy: DevPtr::NULL,
            r: DevPtr::NULL,
            s: DevPtrMut::NULL,
            out: DevPtrMut::NULL,
            w: DevPtr::NULL,
            b: DevPtr::NULL,
            mean: DevPtrMut::NULL,
            rstd: DevPtrMut::NULL,
            dw: DevPtrMut::NULL,
            db: DevPtrMut::NULL,
            partial: DevPtrMut::NULL,
            rows: self.rows() as u64,
            h: self.hidden() as u64,
            eps: self.desc.eps,
            shape: [1; MAX_RANK],
            sx: [0; MAX_RANK],
            so: [0; MAX_RANK],
            sdy: [0; MAX_RANK],
            sr: [0; MAX_RANK],
            ss: [0; MAX_RANK],
            rank: (N - K) as u32,
            blocks: 0,
        };
        for d in 0..N - K {
            p.shape[d] = self.desc.shape[d] as u64;
            p.sx[d] = sx[d] as i64;
            p.so[d] = so[d] as i64;
            p.sdy[d] = sdy[d] as i64;
        }
        p
    }
    /// The row (outer-dim) strides of `strides` into `out`.
    fn row_strides(&self, out: &mut [i64; MAX_RANK], strides: &[usize; N]) {
        for d in 0..N - K {
            out[d] = strides[d] as i64;
        }
    }
    /// Stats pointers (mean, rstd) at `base`.
    fn stat_ptrs(&self, base: DevPtrMut<u8>) -> (DevPtrMut<Acc>, DevPtrMut<Acc>) {
        if base.is_null() {
            return (DevPtrMut::NULL, DevPtrMut::NULL);
        }
        if Kind::SAVES_MEAN {
            let rstd = base.byte_add(self.rows() * acc_bytes::<T>());
            (base.cast(), rstd.cast())
        } else {
            (DevPtrMut::NULL, base.cast())
        }
    }
}

impl<T: Element, Kind: NormKind, const N: usize, const K: usize> Plan for NormPlan<T, Kind, N, K> {
    type Descriptor = NormDescriptor<N>;
    type Args<'a> = NormArgs<'a, T, N, K>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let dtype = float_dtype_code::<T, N>(OP, desc.element, "normalizations take")?;
        if desc.normalized_dims != K || K == 0 || K > N {
            return Err(invalid_descriptor(
                OP,
                "normalized_dims",
                desc.normalized_dims.to_string(),
                &format!("the plan normalizes the last K = {K} of {N} dims (K >= 1)"),
            ));
        }
        if desc.hidden() == 0 {
            return Err(invalid_descriptor(
                OP,
                "shape",
                format!("{:?}", desc.shape),
                "the normalized dims hold no elements",
            ));
        }
        if !desc.eps.is_finite() || desc.eps < 0.0 {
            let eps = desc.eps.to_string();
            return Err(invalid_descriptor(OP, "eps", eps, "must be finite and >= 0"));
        }
        if desc.bias && !Kind::SAVES_MEAN {
            return Err(invalid_descriptor(OP, "bias", "true".into(), "RMSNorm has no bias"));
        }
        pref.check_backend(OP, &[BackendKind::Baracuda])?;
        let module = stream.context().module(&spec(dtype, Kind::CODE))?;
        let plan = NormPlan {
            desc: *desc,
            sku: own_float_sku::<T>(
                stream,
                format!("norm.{}", Kind::NAME),
                "row in registers / element-wise rows, fixed-order dweight",
            ),
            fw: Kernels::load(&module, if desc.residual { "fw_res" } else { "fw" })?,
            bw: Kernels::load(&module, "bw")?,
            params: module.function("norm_bw_params")?,
            sm_count: stream.context().device().sm_count,
            _t: PhantomData,
        };
        pref.check_workspace(OP, plan.workspace_size())?;
        Ok(plan)
    }

    fn sku(&self) -> &KernelSku {
        &self.sku
    }

    fn workspace_size(&self) -> usize {
        0
    }

    fn run(&self, stream: &Stream, _workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let shape = self.desc.shape;
        let norm = self.normalized_shape();
        check_operand("x", parts(&args.x), &shape, K, stream)?;
        check_operand("y", parts_mut(&args.y), &shape, K, stream)?;
        let affine = |arg, v: Option<TensorRef<'_, T, K>>, wanted| {
            optional_arg(OP, arg, v, wanted, AFFINE_WHY, |v| {
                check_operand(arg, parts(&v), &norm, K, stream)?;
                Ok(v.data().addr())
            })
        };
        let w = affine("weight", args.weight, self.desc.weight)?;
        let b = affine("bias", args.bias, self.desc.bias)?;
        let res = self.desc.residual;
        let r = optional_arg(OP, "residual", args.residual, res, RESIDUAL_WHY, |v| {
            check_operand("residual", parts(&v), &shape, K, stream)?;
            Ok(v.data().addr())
        })?;
        let sum = optional_arg(OP, "sum", args.sum.as_ref(), res, RESIDUAL_WHY, |v| {
            check_operand("sum", parts_mut(v), &shape, K, stream)?;
            Ok(v.data().addr())
        })?;
        let (xp, yp) = (args.x.data().ptr(), args.y.data().ptr());
        let mut inputs = vec![span_of("x", xp, args.x.shape(), args.x.strides())];
        if let (Some(rv), Some(sv)) = (&args.residual, &args.sum) {
            // s may be x or residual itself (each element is read before
            // the thread that read it writes it), else disjoint from both
            let se = Extent::of_mut("sum", sv);
            check_alias(OP, &se, &Extent::of("x", &args.x), true)?;
            check_alias(OP, &se, &Extent::of("residual", rv), true)?;
            inputs.push(span_of("residual", rv.data().ptr(), rv.shape(), rv.strides()));
        }
        if let Some(v) = &args.weight {
            inputs.push(span_of("weight", v.data().ptr(), v.shape(), v.strides()));
        }
        if let Some(v) = &args.bias {
            inputs.push(span_of("bias", v.data().ptr(), v.shape(), v.strides()));
        }
        let y_span = span_of("y", yp.as_const(), args.y.shape(), args.y.strides());
        check_disjoint(&y_span, &inputs)?;
        let mut params = inputs[1 + usize::from(res)..].to_vec();
        if let Some(sv) = &args.sum {
            // s against the weight, the bias and y (x and residual above)
            let s_span = span_of("sum", sv.data().ptr().as_const(), sv.shape(), sv.strides());
            params.push(y_span);
            check_disjoint(&s_span, &params)?;
            inputs.push(s_span);
        }
        let stats = args.stats.as_ref();
        let stats = saved_stats(OP, stream, stats, self.stats_layout(), y_span, &mut inputs)?;
        if self.rows() == 0 {
            return Ok(());
        }
        let (mean, rstd) = self.stat_ptrs(stats);
        let mut p = self.params(args.x.strides(), args.y.strides(), &[0; N]);
        p.x = xp;
        p.out = yp;
        p.w = DevPtr::from_addr(w);
        p.b = DevPtr::from_addr(b);
        p.mean = mean;
        p.rstd = rstd;
        let (rs, ss) = (
            args.residual.as_ref().map_or([0; N], |v| *v.strides()),
            args.sum.as_ref().map_or([0; N], |v| *v.strides()),
        );
        if res {
            p.r = DevPtr::from_addr(r);
            p.s = DevPtrMut::from_addr(sum);
            self.row_strides(&mut p.sr, &rs);
            self.row_strides(&mut p.ss, &ss);
        }
        let (regs, threads) = self.launch_shape(
            &[xp.addr(), yp.addr(), w, b, r, sum],
            &[args.x.strides(), args.y.strides(), &rs, &ss],
        );
        let f = regs.map_or(&self.fw.any, |i| &self.fw.regs[i]);
        let grid = self.rows().min(1 << 30) as u32;
        // SAFETY: x, y, weight, bias, residual and sum were checked
        // against the plan's shapes (their bounds proven at construction)
        // with dense normalized dims; the statistics hold stats_bytes.
        unsafe { launch_params(stream, f, LaunchConfig::linear(grid, threads), p) }
    }
}

impl<T: Element, Kind: NormKind, const N: usize, const K: usize> Backward
    for NormPlan<T, Kind, N, K>
{
    type BwArgs<'a> = NormBwArgs<'a, T, N, K>;

    fn grads(&self) -> Grads {
        affine_grads(true, self.desc.weight, self.desc.bias)
    }

    fn bw_workspace_size(&self, wants: Grads) -> usize {
        let sets = if wants.contains(Grad::Bias) && self.desc.bias {
            2
        } else if wants.contains(Grad::Weight) && self.desc.weight {
            1
        } else {
            0
        };
        sets * self.bw_blocks() * self.hidden() * acc_bytes::<T>()
    }

    fn run_bw(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let wants = affine_grads(args.dx.is_some(), args.dweight.is_some(), args.dbias.is_some());
        check_grads(OP, wants, self.grads())?;
        let shape = self.desc.shape;
        let norm = self.normalized_shape();
        check_operand("x", parts(&args.x), &shape, K, stream)?;
        check_operand("dy", parts(&args.dy), &shape, K, stream)?;
        let w = optional_arg(OP, "weight", args.weight, self.desc.weight, AFFINE_WHY, |v| {
            check_operand("weight", parts(&v), &norm, K, stream)?;
            Ok(v.data().addr())
        })?;
        let s = &args.stats;
        let (need, align) = self.stats_layout();
        check_stats(OP, stream, (s.ptr(), s.len(), s.ctx_id()), need, align)?;
        if let Some(v) = &args.dx {
            check_operand("dx", parts_mut(v), &shape, K, stream)?;
        }
        if let Some(v) = &args.ds {
            if !self.desc.residual {
                return Err(Error::InvalidArgument {
                    op: OP,
                    arg: "ds",
                    reason: RESIDUAL_WHY.0.into(),
                });
            }
            check_operand("ds", parts(v), &shape, K, stream)?;
        }
        for (arg, v) in [("dweight", &args.dweight), ("dbias", &args.dbias)] {
            if let Some(v) = v {
                check_operand(arg, parts_mut(v), &norm, K, stream)?;
            }
        }
        let mut inputs = vec![
            span_of("x", args.x.data().ptr(), args.x.shape(), args.x.strides()),
            span_of("dy", args.dy.data().ptr(), args.dy.shape(), args.dy.strides()),
            ("stats", s.ptr(), self.stats_bytes()),
        ];
        if let Some(v) = &args.weight {
            inputs.push(span_of("weight", v.data().ptr(), v.shape(), v.strides()));
        }
        let outputs: Vec<Span> = [("dx", &args.dx)]
            .into_iter()
            .filter_map(|(a, v)| {
                v.as_ref()
                    .map(|v| span_of(a, v.data().ptr().as_const(), v.shape(), v.strides()))
            })
            .chain(
                [("dweight", &args.dweight), ("dbias", &args.dbias)]
                    .into_iter()
                    .filter_map(|(a, v)| {
                        v.as_ref().map(|v| {
                            span_of(a, v.data().ptr().as_const(), v.shape(), v.strides())
                        })
                    }),
            )
            .collect();
        if let Some(ds) = &args.ds {
            // dx may be ds itself (each element read before it is written
            // by the same thread); dweight and dbias share nothing with it
            let dse = Extent::of("ds", ds);
            if let Some(dx) = &args.dx {
                check_alias(OP, &Extent::of_mut("dx", dx), &dse, true)?;
            }
            let ds_span = span_of("ds", ds.data().ptr(), ds.shape(), ds.strides());
            check_outputs_disjoint(OP, &outputs[usize::from(args.dx.is_some())..], vec![ds_span])?;
        }
        check_outputs_disjoint(OP, &outputs, inputs)?;
        let ctx = stream.context().id();
        let ws = workspace.check_ptr(OP, self.bw_workspace_size(wants), ctx)?;
        let params_wanted = args.dweight.is_some() || args.dbias.is_some();
        let dx = args.dx.as_ref().map_or(DevPtrMut::NULL, |v| v.data().ptr());
        let dx_strides = args.dx.as_ref().map_or([0; N], |v| *v.strides());
        let (mean, rstd) = self.stat_ptrs(DevPtrMut::from_addr(s.addr()));
        let mut p = self.params(args.x.strides(), &dx_strides, args.dy.strides());
        p.x = args.x.data().ptr();
        p.dy = args.dy.data().ptr();
        p.out = dx;
        p.w = DevPtr::from_addr(w);
        p.mean = mean;
        p.rstd = rstd;
        p.blocks = self.bw_blocks() as u32;
        let ds_strides = args.ds.as_ref().map_or([0; N], |v| *v.strides());
        if let Some(ds) = args.ds.as_ref().filter(|_| args.dx.is_some()) {
            p.r = ds.data().ptr();
            self.row_strides(&mut p.sr, &ds_strides);
        }
        if params_wanted {
            p.partial = ws.cast();
            p.dw = args.dweight.as_ref().map_or(DevPtrMut::NULL, |v| v.data().ptr());
            p.db = args.dbias.as_ref().map_or(DevPtrMut::NULL, |v| v.data().ptr());
        }
        if self.rows() > 0 && (args.dx.is_some() || params_wanted) {
            let (regs, threads) = self.launch_shape(
                &[p.x.addr(), p.dy.addr(), dx.addr(), w, p.r.addr()],
                &[args.x.strides(), args.dy.strides(), &dx_strides, &ds_strides],
            );
            let f = regs.map_or(&self.bw.any, |i| &self.bw.regs[i]);
            let cfg = LaunchConfig::linear(p.blocks, threads);
            // SAFETY: every operand was checked against the plan's shapes
            // with dense normalized dims; the statistics hold stats_bytes
            // and the workspace blocks * h accumulators per gradient.
            unsafe { launch_params(stream, f, cfg, p) }?;
        }
        if params_wanted {
            let cfg = LaunchConfig {
                grid: (self.hidden().div_ceil(32).min(i32::MAX as usize) as u32, 1, 1),
                block: (32, 8, 1),
                smem_bytes: 0,
            };
            // SAFETY: as above; the partials were written by the launch
            // before on the same stream (none when there are no rows).
            unsafe { launch_params(stream, &self.params, cfg, p) }?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_hidden_follow_normalized_dims() {
        let d = NormDescriptor::layer_norm(ElementKind::F32, [2, 3, 4, 5], 2);
        assert_eq!((d.rows(), d.hidden()), (6, 20));
        let all = NormDescriptor::rms_norm(ElementKind::Bf16, [7, 9], 2);
        assert_eq!((all.rows(), all.hidden()), (1, 63));
        assert_eq!(all.eps, 2f64.powi(-7));
        assert!(!all.bias && all.weight);
    }

    #[test]
    fn the_residual_form_is_asked_for() {
        let d = NormDescriptor::layer_norm(ElementKind::F16, [4, 8], 1);
        assert!(!d.residual);
        let r = d.with_residual(true);
        assert!(r.residual && r.weight && r.bias);
        assert_eq!((r.rows(), r.hidden()), (4, 8));
    }

    #[test]
    fn overlapping_operands_are_found() {
        let p = DevPtr::<u8>::from_addr;
        assert!(check_disjoint(&("y", p(0x1000), 16), &[("x", p(0x100c), 8)]).is_err());
        assert!(check_disjoint(&("y", p(0x1000), 16), &[("x", p(0x1010), 8)]).is_ok());
        assert!(check_disjoint(&("y", p(0x1000), 0), &[("x", p(0x0), 0x2000)]).is_ok());
    }
}
