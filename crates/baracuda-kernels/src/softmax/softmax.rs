//! Softmax along one dim: with `z = x` (softmin: `z = -x`),
//! `y = exp(z - max z) / sum exp(z - max z)` (log-softmax: its log), and
//! the backward `dx` from `y` and `dy`.
//!
//! Softmax and log-softmax also take a mask ([`SoftmaxMask`]: a bool keep
//! mask or an additive one, read in the same pass as x), and 16-bit inputs
//! may give f32 outputs (PyTorch's `dtype=torch.float32`).
//!
//! The math of each op is in [`SoftmaxOp`] and at the top of
//! `kernels/softmax/softmax.cu`.

use core::marker::PhantomData;

use baracuda_driver::{Function, LaunchConfig, ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtr, DevPtrMut, Element, ElementKind, Error, KernelSku, PlanPreference,
    Result, TensorMut, TensorRef, Workspace, MAX_RANK,
};

use crate::checks::{
    byte_span, check_dim, check_disjoint, check_output_element, check_views, float_dtype_code,
    ByteSpan, View,
};
use crate::kernel_sources;
use crate::launch::{grid_x, launch_params, padded};
use crate::plan::own_float_sku;
use crate::{Backward, Plan};

/// A softmax-like op along one dim.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SoftmaxOp {
    /// `y = exp(x - m) / sum exp(x - m)`, `m = max x`. Gradient
    /// `dx = y (dy - sum(dy y))`.
    Softmax,
    /// `y = (x - m) - log sum exp(x - m)`. Gradient
    /// `dx = dy - exp(y) sum(dy)`.
    LogSoftmax,
    /// `softmax(-x)`. Gradient `dx = -y (dy - sum(dy y))`.
    Softmin,
}

impl SoftmaxOp {
    /// Every op, in declaration order.
    pub const ALL: [SoftmaxOp; 3] = [
        SoftmaxOp::Softmax,
        SoftmaxOp::LogSoftmax,
        SoftmaxOp::Softmin,
    ];

    /// The op's name (PyTorch's).
    pub fn name(self) -> &'static str {
        match self {
            SoftmaxOp::Softmax => "softmax",
            SoftmaxOp::LogSoftmax => "log_softmax",
            SoftmaxOp::Softmin => "softmin",
        }
    }

    /// `BARACUDA_OP` of softmax.cu.
    fn code(self) -> u32 {
        match self {
            SoftmaxOp::Softmax => 0,
            SoftmaxOp::LogSoftmax => 1,
            SoftmaxOp::Softmin => 2,
        }
    }
}

/// The mask a softmax or log-softmax applies to `x` along its dim.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SoftmaxMask {
    /// No mask.
    None,
    /// A bool mask, true = kept: the op of `x.masked_fill(~keep, -inf)`
    /// (the form of `scaled_dot_product_attention`'s bool `attn_mask`).
    /// The backward is the composite's: masked elements get `dx = 0`.
    Keep,
    /// An additive mask of `x`'s dtype: the op of `x + mask` (the sum
    /// rounded to the dtype, as PyTorch adds). The backward is the op's
    /// own (the gradient of `x + mask` with respect to `x` is the identity);
    /// it does not read the mask.
    Add,
}

impl SoftmaxMask {
    /// Every mask.
    pub const ALL: [SoftmaxMask; 3] = [SoftmaxMask::None, SoftmaxMask::Keep, SoftmaxMask::Add];

    /// `MASK_*` of softmax.cu (its `BARACUDA_MASK`).
    fn code(self) -> u32 {
        match self {
            SoftmaxMask::None => 0,
            SoftmaxMask::Keep => 1,
            SoftmaxMask::Add => 2,
        }
    }
}

/// A softmax of a rank-`N` tensor of one element type along `dim`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct SoftmaxDescriptor<const N: usize> {
    /// The op.
    pub op: SoftmaxOp,
    /// Element type of `x` and `dx` (and of `y` and `dy` unless `dtype`).
    pub element: ElementKind,
    /// Shape of `x` (and of `y`, `dy`, `dx` and the mask).
    pub shape: [usize; N],
    /// The dim the softmax runs along.
    pub dim: usize,
    /// PyTorch's `dtype`: the element type of `y` (and of the backward's
    /// `y` and `dy`), or None for `element`. f32 for an f16 or bf16 `x`
    /// (`softmax(x, dim, dtype=torch.float32)`: computed in f32 as
    /// always, stored unrounded); any other type but `element` is
    /// `Unsupported`.
    pub dtype: Option<ElementKind>,
    /// The mask (softmax and log-softmax only).
    pub mask: SoftmaxMask,
}

impl<const N: usize> SoftmaxDescriptor<N> {
    /// `op` along the last dim of `shape`, unmasked, `y` of `element`.
    pub fn new(op: SoftmaxOp, element: ElementKind, shape: [usize; N]) -> Self {
        SoftmaxDescriptor {
            op,
            element,
            shape,
            dim: N.saturating_sub(1),
            dtype: None,
            mask: SoftmaxMask::None,
        }
    }
    /// Run along `dim`.
    pub fn with_dim(mut self, dim: usize) -> Self {
        self.dim = dim;
        self
    }
    /// Store `y` as `dtype` (PyTorch's `dtype` argument).
    pub fn with_dtype(mut self, dtype: ElementKind) -> Self {
        self.dtype = Some(dtype);
        self
    }
    /// Apply `mask`.
    pub fn with_mask(mut self, mask: SoftmaxMask) -> Self {
        self.mask = mask;
        self
    }
    /// Element type of `y` and `dy`: `dtype`, else `element`.
    pub fn output_element(&self) -> ElementKind {
        self.dtype.unwrap_or(self.element)
    }
}

/// The mask operand of [`SoftmaxArgs`] and [`SoftmaxBwArgs`]: the kind the
/// descriptor names, of the plan's shape, any strides (0 = broadcast, so a
/// `[1, n]` or `[rows, 1]` mask is expanded by its strides).
pub enum SoftmaxMaskRef<'a, T, const N: usize> {
    /// No mask ([`SoftmaxMask::None`]).
    None,
    /// True = kept ([`SoftmaxMask::Keep`]).
    Keep(TensorRef<'a, bool, N>),
    /// Added to `x` ([`SoftmaxMask::Add`]).
    Add(TensorRef<'a, T, N>),
}

// Manual: a derive would ask `T: Copy`, but the views are Copy for any T.
impl<T, const N: usize> Clone for SoftmaxMaskRef<'_, T, N> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const N: usize> Copy for SoftmaxMaskRef<'_, T, N> {}

/// Arguments of [`SoftmaxPlan`]'s [`Plan::run`].
pub struct SoftmaxArgs<'a, T, const N: usize, Y = T> {
    /// Input, any strides (0 = broadcast).
    pub x: TensorRef<'a, T, N>,
    /// The mask the descriptor names.
    pub mask: SoftmaxMaskRef<'a, T, N>,
    /// Output, any non-overlapping strides; must not overlap `x` or the
    /// mask.
    pub y: TensorMut<'a, Y, N>,
}

/// Arguments of [`SoftmaxPlan`]'s [`Backward::run_bw`].
pub struct SoftmaxBwArgs<'a, T, const N: usize, Y = T> {
    /// The forward output.
    pub y: TensorRef<'a, Y, N>,
    /// Gradient of the output.
    pub dy: TensorRef<'a, Y, N>,
    /// The forward's mask (a keep mask is read: masked elements get
    /// `dx = 0`; an additive one is checked but not read).
    pub mask: SoftmaxMaskRef<'a, T, N>,
    /// Gradient of the input; must not overlap `y`, `dy` or the mask.
    pub dx: TensorMut<'a, T, N>,
}

/// Softmax, log-softmax or softmin along one dim of a strided tensor, and
/// its backward. Deterministic: each row is folded in a fixed order
/// inside one thread group, no atomics.
///
/// # Math
/// Along `desc.dim`, with `m = max x`: softmax `y = exp(x - m) / sum
/// exp(x - m)`, log-softmax `y = (x - m) - log sum exp(x - m)`, softmin
/// the softmax of `-x`. The backward reads the forward's `y` (not `x`):
/// softmax `dx = y (dy - sum(dy y))`, log-softmax `dx = dy - exp(y)
/// sum(dy)`, softmin `dx = -y (dy - sum(dy y))`, the sums along the dim
/// ([`SoftmaxOp`]).
/// # Shapes
/// Every operand (`x`, `y`, `dy`, `dx`) `desc.shape` (rank `1 <= N <=
/// 8`), any extent along `desc.dim` (an empty tensor writes nothing). No
/// workspace: `workspace_size` and `bw_workspace_size` are 0 and the
/// `workspace` argument is not read.
/// # Layout
/// Any strides; `x`, `y` (backward) and `dy` may broadcast (stride 0).
/// When the dim is contiguous in every operand, or the rows are few, a
/// group of threads runs each row (16-byte loads when aligned; rows that
/// fit in shared memory are read once); otherwise one thread runs each
/// row, with neighbouring threads on neighbouring rows. Offsets are
/// 64-bit.
/// # Dtypes
/// f32, f64, f16, bf16; f16/bf16 compute in f32, f64 in f64. Others:
/// `Error::Unsupported`.
/// # Masks
/// Softmax and log-softmax take a [`SoftmaxMask`] (softmin:
/// `Unsupported`), read in the same pass as `x`: a bool keep mask (the op
/// of `x.masked_fill(~keep, -inf)`; backward `dx = 0` where masked, as the
/// composite's autograd) or an additive mask of `x`'s dtype (the op of `x +
/// mask`, rounded to the dtype as PyTorch adds; backward the op's own). A
/// row with nothing kept (or all -inf after the add) is NaN forward, as the
/// composite; under a keep mask its `dx` is 0.
/// # Output dtype
/// `desc.dtype = Some(F32)` on f16 or bf16 stores `y` in f32 (PyTorch's
/// `dtype=torch.float32`); the backward then reads `y` and `dy` in f32 and
/// writes `dx` in `x`'s dtype, as autograd does.
/// # Special values
/// A row holding NaN or +inf, or only -inf, is NaN throughout, as
/// PyTorch's.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND` or
/// `desc.output_element() != Y::KIND` (arg `y`); `Unsupported` for another
/// dtype, a `dtype` other than `element` or f32 on f16/bf16, a mask on
/// softmin, or a rank `N > 8`; `InvalidDescriptor` for a `dim` past the
/// rank (or rank 0); `PreferenceRejected` when `pref` forces a backend
/// other than `Baracuda`; the kernel JIT's errors. From `run` and `run_bw`:
/// `ShapeMismatch` for a view of another shape, `ContextMismatch` for a
/// view on another context, and `InvalidArgument` for a mask of another
/// kind than the descriptor's (arg `mask`) or an output overlapping an
/// input (in place included).
pub struct SoftmaxPlan<T: Element, const N: usize, Y: Element = T> {
    desc: SoftmaxDescriptor<N>,
    sku: KernelSku,
    fw_reg: [Function; REG_VECS.len()],
    bw_reg: [Function; REG_VECS.len()],
    fw_row: Function,
    fw_col: Function,
    bw_row: Function,
    bw_col: Function,
    sm_count: u32,
    /// Dynamic shared memory the row kernels may take, in bytes.
    smem_limit_bytes: usize,
    _t: PhantomData<(T, Y)>,
}

const OP: &str = "softmax";

/// The module of `op` on dtype code `dtype`, `y` in f32 when `out_f32`
/// (f16 and bf16 only), reading `mask`.
pub(crate) fn spec(dtype: u32, op: SoftmaxOp, out_f32: bool, mask: SoftmaxMask) -> ModuleSpec {
    ModuleSpec::new(&kernel_sources::SOFTMAX)
        .define("BARACUDA_DTYPE", dtype)
        .define("BARACUDA_OP", op.code())
        .define("BARACUDA_OUT_F32", out_f32 as u32)
        .define("BARACUDA_MASK", mask.code())
}

/// The checks `select` runs before it touches the GPU: the kernel dtype
/// code of a valid descriptor and whether `y` is a widened f32, else the
/// typed error.
pub(crate) fn validate<T: Element, const N: usize, Y: Element>(
    desc: &SoftmaxDescriptor<N>,
) -> Result<(u32, bool)> {
    let dtype = float_dtype_code::<T, N>(OP, desc.element, "softmax takes")?;
    let out = desc.output_element();
    let widened = out != desc.element;
    let sixteen = matches!(desc.element, ElementKind::F16 | ElementKind::Bf16);
    if widened && !(sixteen && out == ElementKind::F32) {
        return Err(Error::Unsupported {
            op: OP,
            what: format!(
                "dtype {out} for an input of {}; y takes the input's dtype, or f32 for f16 and \
                 bf16",
                desc.element
            ),
        });
    }
    check_output_element::<Y>(OP, out)?;
    if desc.mask != SoftmaxMask::None && desc.op == SoftmaxOp::Softmin {
        return Err(Error::Unsupported {
            op: OP,
            what: "a mask on softmin; softmax and log_softmax take masks".into(),
        });
    }
    check_dim::<N>(OP, desc.dim)?;
    Ok((dtype, widened))
}

impl<T: Element, const N: usize, Y: Element> Plan for SoftmaxPlan<T, N, Y> {
    type Descriptor = SoftmaxDescriptor<N>;
    type Args<'a> = SoftmaxArgs<'a, T, N, Y>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        let (dtype, out_f32) = validate::<T, N, Y>(desc)?;
        pref.check_backend(OP, &[BackendKind::Baracuda])?;
        pref.check_workspace(OP, 0)?;
        let ctx = stream.context();
        let module = ctx.module(&spec(dtype, desc.op, out_f32, desc.mask))?;
        let device = ctx.device();
        // The kernels' static shared memory is under 1 KiB.
        let smem_limit_bytes = device.smem_per_block_optin_bytes.saturating_sub(2048);
        let fw_row = module.function("softmax_fw_row")?;
        let bw_row = module.function("softmax_bw_row")?;
        fw_row.set_max_dynamic_smem(smem_limit_bytes)?;
        bw_row.set_max_dynamic_smem(smem_limit_bytes)?;
        let reg = |pass: &str| -> Result<[Function; REG_VECS.len()]> {
            let f = |v: usize| module.function(&format!("softmax_{pass}_reg{v}"));
            Ok([f(1)?, f(2)?, f(4)?, f(8)?])
        };
        Ok(SoftmaxPlan {
            desc: *desc,
            sku: own_float_sku::<T>(
                stream,
                format!(
                    "softmax.{}{}",
                    desc.op.name(),
                    match desc.mask {
                        SoftmaxMask::Keep => ".keep_mask",
                        SoftmaxMask::Add => ".add_mask",
                        _ => "",
                    }
                ),
                "row groups (in registers, or cached in shared memory) / one thread per row",
            ),
            fw_reg: reg("fw")?,
            bw_reg: reg("bw")?,
            fw_row,
            fw_col: module.function("softmax_fw_col")?,
            bw_row,
            bw_col: module.function("softmax_bw_col")?,
            sm_count: device.sm_count,
            smem_limit_bytes,
            _t: PhantomData,
        })
    }

    fn sku(&self) -> &KernelSku {
        &self.sku
    }

    fn workspace_size(&self) -> usize {
        0
    }

    fn run(&self, stream: &Stream, _workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let (x, y) = (&args.x, &args.y);
        let shape = &self.desc.shape;
        let mask = self.mask_operand(&args.mask)?;
        let mut views = vec![View::of("x", shape, x), View::of_mut("y", shape, y)];
        views.extend(mask.view(shape));
        check_views(OP, stream, &views)?;
        let mut inputs = vec![byte_span("x", x)];
        inputs.extend(mask.span());
        check_disjoint(OP, &[byte_span("y", &y.as_const())], &inputs)?;
        let op = Operands {
            x: (x.data().ptr().cast(), x.strides()),
            g: (DevPtr::NULL, &[0; N]),
            out: (y.data().ptr().cast(), y.strides()),
            mask: mask.operand(),
        };
        // SAFETY: every view was bounds-checked at construction and has
        // the plan's shape; y overlaps no input.
        unsafe { self.launch(stream, Pass::Forward, op) }
    }
}

impl<T: Element, const N: usize, Y: Element> Backward for SoftmaxPlan<T, N, Y> {
    type BwArgs<'a> = SoftmaxBwArgs<'a, T, N, Y>;

    fn run_bw(
        &self,
        stream: &Stream,
        _workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let (y, dy, dx) = (&args.y, &args.dy, &args.dx);
        let shape = &self.desc.shape;
        let mask = self.mask_operand(&args.mask)?;
        let mut views = vec![
            View::of("y", shape, y),
            View::of("dy", shape, dy),
            View::of_mut("dx", shape, dx),
        ];
        views.extend(mask.view(shape));
        check_views(OP, stream, &views)?;
        let mut inputs = vec![byte_span("y", y), byte_span("dy", dy)];
        inputs.extend(mask.span());
        check_disjoint(OP, &[byte_span("dx", &dx.as_const())], &inputs)?;
        let op = Operands {
            x: (y.data().ptr().cast(), y.strides()),
            g: (dy.data().ptr().cast(), dy.strides()),
            out: (dx.data().ptr().cast(), dx.strides()),
            // the gradient of x + mask is the op's own: the additive mask
            // is not read
            mask: match self.desc.mask {
                SoftmaxMask::Keep => mask.operand(),
                _ => MaskOperand::NONE,
            },
        };
        // SAFETY: every view was bounds-checked at construction and has
        // the plan's shape; dx overlaps neither input.
        unsafe { self.launch(stream, Pass::Backward, op) }
    }
}

/// Which kernels a launch runs.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Pass {
    Forward,
    Backward,
}

/// A launch's operands (typeless addresses: the kernel knows the types)
/// with their strides: `x` (the backward's `y`), `g` (the backward's `dy`,
/// null forward), `out` and the mask.
struct Operands<'s, const N: usize> {
    x: (DevPtr<u8>, &'s [usize; N]),
    g: (DevPtr<u8>, &'s [usize; N]),
    out: (DevPtrMut<u8>, &'s [usize; N]),
    mask: MaskOperand<N>,
}

/// The mask a kernel reads: its address and strides (the module knows its
/// kind).
#[derive(Copy, Clone)]
struct MaskOperand<const N: usize> {
    ptr: DevPtr<u8>,
    strides: [usize; N],
}

impl<const N: usize> MaskOperand<N> {
    const NONE: Self = MaskOperand {
        ptr: DevPtr::NULL,
        strides: [0; N],
    };
}

/// A checked mask argument: what the view checks and the launch need.
struct MaskArg<'s, 'a, T, const N: usize>(&'s SoftmaxMaskRef<'a, T, N>);

impl<T: Element, const N: usize> MaskArg<'_, '_, T, N> {
    fn view<'v>(&'v self, shape: &'v [usize; N]) -> Option<View<'v>> {
        match self.0 {
            SoftmaxMaskRef::None => None,
            SoftmaxMaskRef::Keep(m) => Some(View::of("mask", shape, m)),
            SoftmaxMaskRef::Add(m) => Some(View::of("mask", shape, m)),
        }
    }
    fn span(&self) -> Option<ByteSpan> {
        match self.0 {
            SoftmaxMaskRef::None => None,
            SoftmaxMaskRef::Keep(m) => Some(byte_span("mask", m)),
            SoftmaxMaskRef::Add(m) => Some(byte_span("mask", m)),
        }
    }
    fn operand(&self) -> MaskOperand<N> {
        match self.0 {
            SoftmaxMaskRef::None => MaskOperand::NONE,
            SoftmaxMaskRef::Keep(m) => MaskOperand {
                ptr: m.data().ptr().cast(),
                strides: *m.strides(),
            },
            SoftmaxMaskRef::Add(m) => MaskOperand {
                ptr: m.data().ptr().cast(),
                strides: *m.strides(),
            },
        }
    }
}

/// `SoftmaxParams` of `softmax.cu`, field for field.
#[repr(C)]
#[derive(Copy, Clone)]
struct SoftmaxParams {
    x: DevPtr<u8>,
    g: DevPtr<u8>,
    out: DevPtrMut<u8>,
    mask: DevPtr<u8>,
    rows: u64,
    n: u64,
    cache_elems: u64,
    rank: u32,
    group: u32,
    vec: u32,
    cache_chunks: u32,
    mvec: u32,
    shape: [u64; MAX_RANK],
    sx: [i64; MAX_RANK],
    sg: [i64; MAX_RANK],
    so: [i64; MAX_RANK],
    sm: [i64; MAX_RANK],
    ax: i64,
    ag: i64,
    ao: i64,
    am: i64,
}

/// Rows below which the group kernel runs even when the dim is strided:
/// one thread per row would leave most of the GPU idle (8192 threads are
/// 62 per SM of an H200).
const COLUMN_MIN_ROWS: usize = 8192;
/// Threads per block of the column kernel (`__launch_bounds__(256)`).
const COLUMN_THREADS: u32 = 256;
/// Threads per block of the row kernel at least (several rows per block
/// when a row takes fewer).
const ROW_MIN_THREADS: usize = 256;

/// Vectors per thread of the register kernels (`softmax_{fw,bw}_reg<V>`).
const REG_VECS: [usize; 4] = [1, 2, 4, 8];
/// Bytes of row values a thread of the register kernels holds at most: 32
/// registers, so that 1024-thread blocks stay within 64 registers a thread.
const REG_BYTES: usize = 128;
/// Most threads a row of the register kernels takes. A 1024-thread row
/// leaves one block per SM, whose loads stop at every reduction: the
/// cached kernel measured faster on f32 [4096, 32768] (0.61 ms against
/// 0.63 on an H200).
const REG_MAX_GROUP: usize = 512;

/// How one launch runs: the kernel choice and its launch shape.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Shape {
    /// Row kernels: threads per row; 0 runs the column kernel.
    group: usize,
    /// Register kernel: index into [`REG_VECS`]; `None` runs the cached
    /// row kernel (or the column kernel).
    regs: Option<usize>,
    threads: usize,
    blocks: usize,
    /// Cached row kernel: leading 16-byte chunks of each row kept in
    /// shared memory.
    cache_chunks: usize,
    smem_bytes: usize,
}

/// The launch of `rows` rows of `n` elements of `elem_bytes` each (x and
/// dx; accumulated in `acc_bytes`): `vec` when the dim is contiguous in
/// every operand, `arrays` input arrays per row (1 forward: x; 2 backward:
/// y and dy, of `cached_bytes` each: f32 when a 16-bit x has an f32 y, else
/// `elem_bytes`).
///
/// A chunk is 16 bytes of x (`16 / elem_bytes` elements). Rows whose
/// chunks fit in the registers of up to 1024 threads ([`REG_BYTES`] a
/// thread: the forward keeps exp(z - max) in `acc_bytes`, the backward y
/// and dy as loaded) of up to [`REG_MAX_GROUP`] threads run
/// the register kernels, each thread holding a power of two of chunks, the
/// group the smallest power of two (from 32) that covers the row. Longer
/// rows run the cached row kernel.
///
/// Example, bf16 [32768, 4096] forward: 512 chunks of 8, 4 chunks (32 f32)
/// a thread, 128 threads a row, two rows a 256-thread block. A
/// 128256-element bf16 row needs more than 1024 threads x 4 chunks: the
/// cached kernel keeps 225 KiB of its 250 KiB in shared memory and reads
/// the last 10% twice.
#[allow(clippy::too_many_arguments)]
fn shape_of(
    rows: usize,
    n: usize,
    elem_bytes: usize,
    cached_bytes: usize,
    acc_bytes: usize,
    vec: bool,
    arrays: usize,
    sm_count: usize,
    smem_limit_bytes: usize,
) -> Shape {
    if !vec && rows >= COLUMN_MIN_ROWS {
        return Shape {
            group: 0,
            regs: None,
            threads: COLUMN_THREADS as usize,
            blocks: rows.div_ceil(COLUMN_THREADS as usize).min(sm_count * 64),
            cache_chunks: 0,
            smem_bytes: 0,
        };
    }
    let per_vec = 16 / elem_bytes;
    let chunks = n.div_ceil(per_vec);
    let held = if arrays == 1 {
        per_vec * acc_bytes
    } else {
        per_vec * cached_bytes * arrays
    };
    let vmax = (REG_BYTES / held).clamp(1, REG_VECS[REG_VECS.len() - 1]);
    let group = chunks.div_ceil(vmax).next_power_of_two().clamp(32, REG_MAX_GROUP);
    let per = chunks.div_ceil(group).next_power_of_two();
    if per <= vmax {
        let threads = group.max(ROW_MIN_THREADS);
        let blocks_per_sm = (2048 / threads).max(1) * 8;
        return Shape {
            group,
            regs: REG_VECS.iter().position(|&v| v == per),
            threads,
            blocks: rows.div_ceil(threads / group).min(sm_count * blocks_per_sm),
            cache_chunks: 0,
            smem_bytes: 0,
        };
    }
    // A forward row that half the shared memory still mostly caches (3/4
    // of it or more) runs in a block of at most 512 threads with that half,
    // two blocks an SM: one row's loads overlap the other's reductions,
    // worth more than caching the rest (f32 [4096, 32768] on an H200:
    // 0.415 ms against 0.494 with one 1024-thread block caching the whole
    // row). Longer rows (the vocabulary's) and the backward keep one block
    // an SM with the whole budget.
    // (The half leaves 1 KiB a block for the static arrays and 1 KiB for
    // the block's reserved shared memory, so two blocks fit an SM's 228 KiB.)
    let chunk_row_bytes = per_vec * cached_bytes * arrays;
    let half_bytes = smem_limit_bytes.saturating_sub(2048) / 2;
    let (cap, budget) = if arrays == 1 && 4 * (half_bytes / chunk_row_bytes) >= 3 * chunks {
        (512, half_bytes)
    } else {
        (1024, smem_limit_bytes)
    };
    let group = n.div_ceil(4 * per_vec).next_power_of_two().clamp(32, cap);
    let threads = group.max(ROW_MIN_THREADS);
    let rows_per_block = threads / group;
    let chunk_bytes = rows_per_block * chunk_row_bytes;
    let cache_chunks = chunks.min(budget / chunk_bytes);
    let blocks_per_sm = (2048 / threads).max(1) * 8;
    Shape {
        group,
        regs: None,
        threads,
        blocks: rows.div_ceil(rows_per_block).min(sm_count * blocks_per_sm),
        cache_chunks,
        smem_bytes: cache_chunks * chunk_bytes,
    }
}

impl<T: Element, const N: usize, Y: Element> SoftmaxPlan<T, N, Y> {
    /// The mask argument, `InvalidArgument` unless it is the descriptor's
    /// kind.
    fn mask_operand<'s, 'a>(
        &self,
        mask: &'s SoftmaxMaskRef<'a, T, N>,
    ) -> Result<MaskArg<'s, 'a, T, N>> {
        let given = match mask {
            SoftmaxMaskRef::None => SoftmaxMask::None,
            SoftmaxMaskRef::Keep(_) => SoftmaxMask::Keep,
            SoftmaxMaskRef::Add(_) => SoftmaxMask::Add,
        };
        if given != self.desc.mask {
            return Err(Error::InvalidArgument {
                op: OP,
                arg: "mask",
                reason: format!(
                    "a {given:?} mask given to a plan of a {:?} mask",
                    self.desc.mask
                ),
            });
        }
        Ok(MaskArg(mask))
    }

    /// Enqueue one pass over every row.
    ///
    /// # Safety
    /// Every non-null operand must hold every element its strides reach
    /// over the plan's shape, of the types the pass reads and writes (x: T,
    /// y: Y forward; y, dy: Y, dx: T backward; the mask bool or T), and
    /// `out` must overlap no input.
    unsafe fn launch(&self, stream: &Stream, pass: Pass, op: Operands<'_, N>) -> Result<()> {
        let dim = self.desc.dim;
        let n = self.desc.shape[dim];
        let outer: Vec<usize> = (0..N).filter(|&d| d != dim).collect();
        let rows: usize = outer.iter().map(|&d| self.desc.shape[d]).product();
        if n == 0 || rows == 0 {
            return Ok(());
        }
        let bw = pass == Pass::Backward;
        let vec = op.x.1[dim] == 1 && op.out.1[dim] == 1 && (!bw || op.g.1[dim] == 1);
        let shape = shape_of(
            rows,
            n,
            core::mem::size_of::<T>(),
            if bw {
                core::mem::size_of::<Y>()
            } else {
                core::mem::size_of::<T>()
            },
            T::KIND.float_accumulator().size_bytes(),
            vec,
            if bw { 2 } else { 1 },
            self.sm_count.max(1) as usize,
            self.smem_limit_bytes,
        );
        let strides = |s: &[usize; N]| padded(outer.iter().map(|&d| s[d] as i64));
        let p = SoftmaxParams {
            x: op.x.0,
            g: op.g.0,
            out: op.out.0,
            mask: op.mask.ptr,
            rows: rows as u64,
            n: n as u64,
            cache_elems: (shape.cache_chunks * (16 / core::mem::size_of::<T>())) as u64,
            rank: outer.len() as u32,
            group: shape.group as u32,
            vec: vec as u32,
            cache_chunks: shape.cache_chunks as u32,
            mvec: (op.mask.strides[dim] == 1) as u32,
            shape: padded(outer.iter().map(|&d| self.desc.shape[d] as u64)),
            sx: strides(op.x.1),
            sg: strides(op.g.1),
            so: strides(op.out.1),
            sm: strides(&op.mask.strides),
            ax: op.x.1[dim] as i64,
            ag: op.g.1[dim] as i64,
            ao: op.out.1[dim] as i64,
            am: op.mask.strides[dim] as i64,
        };
        let f = match (bw, shape.group, shape.regs) {
            (false, _, Some(v)) => &self.fw_reg[v],
            (true, _, Some(v)) => &self.bw_reg[v],
            (false, 0, None) => &self.fw_col,
            (false, _, None) => &self.fw_row,
            (true, 0, None) => &self.bw_col,
            (true, _, None) => &self.bw_row,
        };
        let cfg = LaunchConfig {
            grid: (grid_x(shape.blocks), 1, 1),
            block: (shape.threads as u32, 1, 1),
            smem_bytes: shape.smem_bytes as u32,
        };
        // SAFETY: forwarded from the caller's contract; the kernels reach
        // exactly the offsets the shape and strides give, and the dynamic
        // shared memory is within what `select` allowed.
        unsafe { launch_params(stream, f, cfg, p) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_past_eight_are_unsupported() {
        let desc = SoftmaxDescriptor::new(SoftmaxOp::ALL[0], ElementKind::F32, [1; 9]);
        assert!(matches!(
            validate::<f32, 9, f32>(&desc),
            Err(baracuda_kernels_types::Error::Unsupported { op: OP, .. })
        ));
    }

    #[test]
    fn params_layout_matches_cuda() {
        // 4 pointers, 3 u64, 5 u32 and 4 bytes of padding, 5 arrays of 8,
        // 4 i64
        assert_eq!(
            core::mem::size_of::<SoftmaxParams>(),
            32 + 24 + 24 + 5 * 64 + 32
        );
    }

    #[test]
    fn launch_shapes_follow_the_extent() {
        let limit = 227 * 1024 - 2048;
        // bf16 [32768, 4096] forward: 4 chunks (32 f32) a thread, 128
        // threads a row, two rows a block, in registers
        let s = shape_of(32768, 4096, 2, 2, 4, true, 1, 132, limit);
        assert_eq!((s.group, s.regs, s.threads, s.smem_bytes), (128, Some(2), 256, 0));
        assert_eq!(s.blocks, 132 * 8 * 8);
        // its backward holds y and dy as loaded (packed bf16): 4 chunks
        // of each
        let s = shape_of(32768, 4096, 2, 2, 4, true, 2, 132, limit);
        assert_eq!((s.group, s.regs), (128, Some(2)));
        // with y and dy in f32 (a bf16 x, dtype=f32): 64 bytes a chunk,
        // 2 chunks a thread, 256 threads a row
        let s = shape_of(32768, 4096, 2, 4, 4, true, 2, 132, limit);
        assert_eq!((s.group, s.regs), (256, Some(1)));
        // cached, each chunk of 8 taking 32 bytes of each array
        let s = shape_of(64, 128256, 2, 4, 4, true, 2, 132, limit);
        assert_eq!((s.regs, s.cache_chunks), (None, limit / 64));
        // short rows: a warp a row, eight rows a block, one chunk a thread
        let s = shape_of(1000, 7, 4, 4, 4, true, 1, 132, limit);
        assert_eq!((s.group, s.regs, s.threads), (32, Some(0), 256));
        // f32 [4096, 32768]: 8192 chunks, past the registers; forward in
        // 512 threads caching 7/8 of the row in half the shared memory (two
        // blocks an SM), backward in 1024 with the whole budget
        let s = shape_of(4096, 32768, 4, 4, 4, true, 1, 132, limit);
        assert_eq!((s.group, s.regs, s.cache_chunks), (512, None, (limit - 2048) / 2 / 16));
        assert!(2 * (s.smem_bytes + 2048) <= 228 * 1024);
        // f32 rows of 16384: 512 threads x 8 chunks in registers
        let s = shape_of(4096, 16384, 4, 4, 4, true, 1, 132, limit);
        assert_eq!((s.group, s.regs, s.threads), (512, Some(3), 512));
        let bw = shape_of(4096, 32768, 4, 4, 4, true, 2, 132, limit);
        assert_eq!(bw.regs, None);
        assert_eq!((bw.cache_chunks, bw.smem_bytes), (limit / 32, limit / 32 * 32));
        // the vocabulary row: cached, 225 KiB of 250 KiB
        let s = shape_of(4096, 128256, 2, 2, 4, true, 1, 132, limit);
        assert_eq!((s.group, s.regs, s.cache_chunks), (1024, None, limit / 16));
        assert!(s.smem_bytes <= limit && s.cache_chunks < 128256 / 8);
        // f64 forward: 2 elements a chunk, 16 bytes each held
        let s = shape_of(64, 4096, 8, 8, 8, true, 1, 132, limit);
        assert_eq!((s.group, s.regs), (256, Some(3)));
        // a strided dim over many rows: one thread per row
        let s = shape_of(100_000, 64, 4, 4, 4, false, 1, 132, limit);
        assert_eq!((s.group, s.regs, s.threads, s.smem_bytes), (0, None, 256, 0));
        // a strided dim over few rows: a row group, element loads
        let s = shape_of(300, 70, 4, 4, 4, false, 1, 132, limit);
        assert_eq!((s.group, s.regs), (32, Some(0)));
    }
}
