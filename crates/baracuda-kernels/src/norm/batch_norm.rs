//! BatchNorm over `[N, C, spatial...]` (BatchNorm1d, 2d and 3d in one
//! generic plan), training and eval, forward and backward.
//!
//! The math and the work split are at the top of
//! `kernels/norm/batch_norm.cu`.

use core::marker::PhantomData;

use baracuda_driver::{Function, LaunchConfig, ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtr, DevPtrMut, DeviceSlice, DeviceSliceMut, Element, ElementKind, Error, Grad,
    Grads, KernelSku, PlanPreference, Result, TensorMut, TensorRef, Workspace,
};

use super::norm::{
    acc_bytes, affine_grads, affine_setters, check_outputs_disjoint, check_stats, span_of, Acc,
    Span, AFFINE_WHY,
};
use crate::checks::{
    check_element, check_grads, check_tensor, float_dtype_code, invalid_descriptor, optional_arg,
};
use crate::conv::ConvLayout;
use crate::kernel_sources::{typed_spec, BATCH_NORM};
use crate::launch::launch_params;
use crate::plan::own_float_sku;
use crate::{Backward, Plan};

const OP: &str = "batch_norm";

/// Threads per block of every kernel.
const THREADS: u32 = 256;
/// Statistics blocks aimed for, per SM.
const BLOCKS_PER_SM: usize = 4;
/// Fewest elements of a channel a channels-first statistics block takes.
const MIN_CHUNK_CF: usize = 1 << 12;
/// Fewest rows a channels-last statistics block takes (8 thread rows of
/// 8 rows each).
const MIN_CHUNK_CL: usize = 64;
/// Most elements of a channel one statistics block takes (its count stays
/// exact in f32).
const MAX_CHUNK: usize = 1 << 22;
/// Most elements of `x`.
const MAX_ELEMENTS: usize = 1 << 56;
/// Most blocks a grid-stride launch starts.
const MAX_GRID: usize = 1 << 30;

/// A BatchNorm of `x` of logical shape `[N, C, spatial...]` (rank `R`, 2
/// to 5: BatchNorm1d on `[N, C]` and `[N, C, L]`, 2d, 3d).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct BatchNormDescriptor<const R: usize> {
    /// Element type of `x`, `y`, `dy`, `dx`.
    pub element: ElementKind,
    /// Element type of the weight, bias, running statistics, dweight and
    /// dbias: `element`, or f32 for f16 and bf16 `element` (PyTorch's
    /// mixed precision: a half module with float parameters).
    pub param: ElementKind,
    /// Logical shape `[N, C, spatial...]` of `x` (and `y`, `dy`, `dx`),
    /// whatever the layout.
    pub shape: [usize; R],
    /// Added to the variance before the square root.
    pub eps: f64,
    /// Weight of the batch statistics in the running-statistics update:
    /// `running = (1 - momentum) running + momentum batch` (PyTorch's
    /// `momentum`; its `momentum=None`, the cumulative average, is the
    /// caller passing `1 / num_batches_tracked`).
    pub momentum: f64,
    /// Training (batch statistics) or eval (the running statistics).
    pub training: bool,
    /// The op takes running statistics: updated in training, read in
    /// eval (which needs them).
    pub running_stats: bool,
    /// The op takes a weight of `C` elements.
    pub weight: bool,
    /// The op takes a bias of `C` elements.
    pub bias: bool,
    /// Memory order of the `[N, C, spatial...]` operands. Default
    /// channels-first.
    pub layout: ConvLayout,
}

impl<const R: usize> BatchNormDescriptor<R> {
    /// `torch.nn.BatchNorm{1,2,3}d(C)` in training mode: eps 1e-5,
    /// momentum 0.1, weight, bias and running statistics in the dtype of
    /// `x`, channels-first.
    pub fn batch_norm(element: ElementKind, shape: [usize; R]) -> Self {
        BatchNormDescriptor {
            element,
            param: element,
            shape,
            eps: 1e-5,
            momentum: 0.1,
            training: true,
            running_stats: true,
            weight: true,
            bias: true,
            layout: ConvLayout::ChannelsFirst,
        }
    }
    affine_setters!();
    /// Element type of the parameters and running statistics.
    pub fn with_param(mut self, param: ElementKind) -> Self {
        self.param = param;
        self
    }
    /// The momentum of the running-statistics update.
    pub fn with_momentum(mut self, momentum: f64) -> Self {
        self.momentum = momentum;
        self
    }
    /// Training (true) or eval.
    pub fn with_training(mut self, training: bool) -> Self {
        self.training = training;
        self
    }
    /// Whether the op takes running statistics.
    pub fn with_running_stats(mut self, running_stats: bool) -> Self {
        self.running_stats = running_stats;
        self
    }
    /// Memory order. Default channels-first.
    pub fn with_layout(mut self, layout: ConvLayout) -> Self {
        self.layout = layout;
        self
    }
    /// Batch `N`.
    pub fn batch(&self) -> usize {
        self.shape.first().copied().unwrap_or(0)
    }
    /// Channels `C`.
    pub fn channels(&self) -> usize {
        self.shape.get(1).copied().unwrap_or(0)
    }
    /// Spatial positions (the product of the dims after `C`; 1 for
    /// `[N, C]`).
    pub fn spatial(&self) -> usize {
        self.shape.iter().skip(2).product()
    }
    /// Elements per channel: `N * spatial`.
    pub fn channel_elements(&self) -> usize {
        self.batch() * self.spatial()
    }
    /// Whether the memory is rows of `C` channels: channels-last, or no
    /// spatial dims (then both layouts are the same memory).
    fn rows_of_channels(&self) -> bool {
        self.layout == ConvLayout::ChannelsLast || self.spatial() == 1
    }

    /// `InvalidDescriptor` (or `Unsupported` for the rank and the
    /// parameter type) unless the plan can run the descriptor.
    pub(crate) fn validate(&self) -> Result<()> {
        if !(2..=5).contains(&R) {
            return Err(Error::Unsupported {
                op: OP,
                what: format!("rank {R}; BatchNorm takes [N, C, spatial...] of rank 2 to 5"),
            });
        }
        let mixed = self.param == ElementKind::F32
            && matches!(self.element, ElementKind::F16 | ElementKind::Bf16);
        if self.param != self.element && !mixed {
            return Err(Error::Unsupported {
                op: OP,
                what: format!(
                    "parameters in {} for {} activations; they take the activations' dtype, \
                     or f32 for f16 and bf16",
                    self.param, self.element
                ),
            });
        }
        let shape = format!("{:?}", self.shape);
        if self.shape[1..].contains(&0) {
            return Err(invalid_descriptor(OP, "shape", shape, "C and every spatial extent must be > 0"));
        }
        // also without N: an empty batch must not hide an overflowing
        // channel size
        let count = |dims: &[usize]| dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let big = |n: Option<usize>| n.is_none_or(|n| n > MAX_ELEMENTS);
        if big(count(&self.shape)) || big(count(&self.shape[1..])) {
            return Err(invalid_descriptor(
                OP,
                "shape",
                shape,
                &format!("more than {MAX_ELEMENTS} elements"),
            ));
        }
        if self.channels() > u32::MAX as usize {
            return Err(invalid_descriptor(OP, "shape", shape, "more than 2^32 - 1 channels"));
        }
        if self.training && self.channel_elements() == 1 {
            return Err(invalid_descriptor(
                OP,
                "shape",
                shape,
                "expected more than 1 value per channel when training",
            ));
        }
        if !self.training && !self.running_stats {
            return Err(invalid_descriptor(
                OP,
                "running_stats",
                "false".into(),
                "eval normalizes with the running statistics",
            ));
        }
        if !self.eps.is_finite() || self.eps < 0.0 {
            let eps = self.eps.to_string();
            return Err(invalid_descriptor(OP, "eps", eps, "must be finite and >= 0"));
        }
        if !self.momentum.is_finite() {
            let m = self.momentum.to_string();
            return Err(invalid_descriptor(OP, "momentum", m, "must be finite"));
        }
        Ok(())
    }
}

/// The checks of `select` before it touches the GPU.
pub(super) fn validate<T: Element, P: Element, const R: usize>(
    desc: &BatchNormDescriptor<R>,
) -> Result<()> {
    float_dtype_code::<T, R>(OP, desc.element, "BatchNorm takes")?;
    check_element::<P>(OP, "desc.param", desc.param)?;
    desc.validate()
}

/// Arguments of [`BatchNormPlan`]'s [`Plan::run`].
pub struct BatchNormArgs<'a, T, const R: usize, P = T> {
    /// Input, dense in the descriptor's layout.
    pub x: TensorRef<'a, T, R>,
    /// The weight `[C]`, dense: given exactly when the descriptor has
    /// `weight`.
    pub weight: Option<TensorRef<'a, P, 1>>,
    /// The bias `[C]`, likewise with `bias`.
    pub bias: Option<TensorRef<'a, P, 1>>,
    /// The running mean `[C]`, dense: given exactly when the descriptor
    /// has `running_stats`; updated in place in training, read in eval.
    pub running_mean: Option<TensorMut<'a, P, 1>>,
    /// The running variance `[C]`, likewise.
    pub running_var: Option<TensorMut<'a, P, 1>>,
    /// Output, dense in the layout, disjoint from every other operand.
    pub y: TensorMut<'a, T, R>,
    /// Where to save the statistics the backward reads
    /// ([`BatchNormPlan::stats_bytes`] bytes), or None.
    pub stats: Option<DeviceSliceMut<'a, u8>>,
}

/// Arguments of [`BatchNormPlan`]'s [`Backward::run_bw`].
pub struct BatchNormBwArgs<'a, T, const R: usize, P = T> {
    /// The forward input.
    pub x: TensorRef<'a, T, R>,
    /// The forward weight (given exactly when the descriptor has one).
    pub weight: Option<TensorRef<'a, P, 1>>,
    /// The statistics the forward saved.
    pub stats: DeviceSlice<'a, u8>,
    /// Gradient of `y`.
    pub dy: TensorRef<'a, T, R>,
    /// Gradient of `x`.
    pub dx: Option<TensorMut<'a, T, R>>,
    /// Gradient of the weight `[C]`.
    pub dweight: Option<TensorMut<'a, P, 1>>,
    /// Gradient of the bias `[C]`.
    pub dbias: Option<TensorMut<'a, P, 1>>,
}

/// BatchNorm (`torch.nn.functional.batch_norm(x, running_mean,
/// running_var, weight, bias, training, momentum, eps)`, as
/// `torch.native_batch_norm` and its backward) over a rank-`R` tensor
/// `[N, C, spatial...]`, R from 2 to 5, forward and backward.
/// Deterministic: every sum is taken in a fixed order, no atomics.
///
/// # Math
/// Channel `c` holds `M = N * spatial` elements. Training: `mean`, `var`
/// (biased) over them; with running statistics, `running_mean = (1 -
/// momentum) running_mean + momentum mean` and `running_var = (1 -
/// momentum) running_var + momentum var M / (M - 1)`. Eval: `mean`, `var`
/// are the running statistics. `rstd = 1 / sqrt(var + eps)`, `y = (x -
/// mean) rstd w[c] + b[c]` (`w = 1`, `b = 0` when absent).
///
/// Backward (PyTorch's `native_batch_norm_backward`, `train` =
/// `desc.training`): `dbias[c] = sum dy`, `dweight[c] = sum dy xhat`;
/// training `dx = w rstd (dy - mean(dy) - xhat mean(dy xhat))`, eval
/// `dx = w rstd dy`.
/// # Shapes
/// `x`, `y`, `dy`, `dx`: `desc.shape`; `weight`, `bias`, `running_mean`,
/// `running_var`, `dweight`, `dbias`: `[C]`. `N` may be 0: nothing is
/// written but zero `dweight` and `dbias` (PyTorch's empty batch).
/// # Layout
/// `x`, `y`, `dy`, `dx` dense in `desc.layout` ([`ConvLayout`]:
/// channels-first `[N, C, spatial...]` or channels-last
/// `[N, spatial..., C]` in memory, the views' shape logical either way);
/// the `[C]` operands dense.
/// # Workspace
/// The forward's `workspace_size()` holds per-block partial moments
/// (training) and per-channel coefficients; the backward's
/// `bw_workspace_size(wants)` per-block partial sums and the `dx`
/// coefficients; f32 (f64 for f64).
/// # Statistics
/// The forward saves the mean of every channel, then its rstd (PyTorch's
/// `save_mean` and `save_invstd`; in eval those of the running
/// statistics), as f32 (f64 for f64): [`BatchNormPlan::stats_bytes`]
/// bytes, aligned to their type.
/// # Dtypes
/// `T`: f32, f64, f16, bf16; `P` (weight, bias, running statistics,
/// dweight, dbias): `T`, or f32 for f16 and bf16. Statistics and
/// arithmetic in f32 (f64 for f64). Others: `Error::Unsupported`.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND` or
/// `desc.param != P::KIND`; `Unsupported` for another dtype or parameter
/// dtype or a rank other than 2 to 5; `InvalidDescriptor` for a zero
/// channel count or spatial extent, more than 2^32 - 1 channels or 2^56
/// elements, one value per channel in training, eval without running
/// statistics, a negative or non-finite eps, a non-finite momentum;
/// `PreferenceRejected` when `pref` forces a backend other than
/// `Baracuda` or caps the workspace below `workspace_size()`; the kernel
/// JIT's errors. From `run` and `run_bw`: `ShapeMismatch` for a view of
/// another shape; `ContextMismatch` for a view, the statistics or the
/// workspace on another context; `WorkspaceTooSmall`; `InvalidArgument`
/// for a weight, bias or running statistic given against the descriptor
/// or missing, a `dweight` or `dbias` the descriptor has no parameter for,
/// a view not dense in the layout, overlapping operands, and short or
/// misaligned statistics. Nothing is written when an error is returned.
pub struct BatchNormPlan<T: Element, const R: usize, P: Element = T> {
    desc: BatchNormDescriptor<R>,
    sku: KernelSku,
    k: BnKernels,
    splits: usize,
    chunk: usize,
    _t: PhantomData<(T, P)>,
}

struct BnKernels {
    fw_partial: Function,
    fw_stats: Function,
    fw_apply: Function,
    bw_partial: Function,
    bw_stats: Function,
    bw_apply: Function,
}

/// The module of activations `element` with parameters `param`.
fn spec(element: ElementKind, param: ElementKind) -> Option<ModuleSpec> {
    typed_spec(&BATCH_NORM, element).map(|s| s.define("BARACUDA_PARAM_F32", (param != element) as u32))
}

/// Every module of the plan: one per float dtype, and f16 and bf16 with
/// f32 parameters.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    let mixed = [ElementKind::F16, ElementKind::Bf16].map(|k| (k, ElementKind::F32));
    crate::conv::FLOAT_KINDS
        .iter()
        .map(|&k| (k, k))
        .chain(mixed)
        .filter_map(|(k, p)| spec(k, p))
        .collect()
}

/// `BnParams` of batch_norm.cu, field for field.
#[repr(C)]
#[derive(Copy, Clone)]
struct BnParams<T, P> {
    x: DevPtr<T>,
    dy: DevPtr<T>,
    out: DevPtrMut<T>,
    w: DevPtr<P>,
    b: DevPtr<P>,
    run_mean: DevPtrMut<P>,
    run_var: DevPtrMut<P>,
    mean: DevPtrMut<Acc>,
    rstd: DevPtrMut<Acc>,
    coef: DevPtrMut<Acc>,
    part: DevPtrMut<Acc>,
    dw: DevPtrMut<P>,
    db: DevPtrMut<P>,
    m: u64,
    channels: u64,
    spatial: u64,
    chunk: u64,
    total: u64,
    eps: f64,
    momentum: f64,
    splits: u32,
    channels_last: u32,
    training: u32,
    vec_red: u32,
    vec_apply: u32,
    small: u32,
}

/// How the `m` elements of each channel are split over statistics blocks
/// when `lanes` blocks already cover one split of every channel, on `sms`
/// SMs: (splits, chunk), chunk a multiple of `unit` and at least `least`
/// (when the channel has that many).
///
/// Example: bf16 channels-last [64, 56, 56, 256] on 132 SMs: one tile of
/// 256 channels (lanes 1), m = 200704 rows; 527 splits of 381 rows, so
/// each of the 8 thread rows of a block reads 48 rows of 512 bytes.
fn split_channels(lanes: usize, m: usize, unit: usize, least: usize, sms: usize) -> (usize, usize) {
    let target = BLOCKS_PER_SM * sms.max(1);
    let want = target.div_ceil(lanes.max(1));
    let most = m.div_ceil(least).max(1);
    let fewest = m.div_ceil(MAX_CHUNK).max(1);
    let splits = want.min(most).max(fewest);
    let chunk = m.div_ceil(splits).div_ceil(unit).max(1) * unit;
    (m.div_ceil(chunk).max(1), chunk)
}

fn grid(blocks: usize) -> u32 {
    blocks.clamp(1, MAX_GRID) as u32
}

fn span_ref<T: Element, const R: usize>(arg: &'static str, v: &TensorRef<'_, T, R>) -> Span {
    span_of(arg, v.data().ptr(), v.shape(), v.strides())
}

fn span_mut<T: Element, const R: usize>(arg: &'static str, v: &TensorMut<'_, T, R>) -> Span {
    span_of(arg, v.data().ptr().as_const(), v.shape(), v.strides())
}

impl<T: Element, const R: usize, P: Element> BatchNormPlan<T, R, P> {
    /// Elements of T in a 16-byte vector (`VEC` of dtype.cuh).
    fn vec() -> usize {
        16 / core::mem::size_of::<T>()
    }
    /// Bytes of the statistics the forward saves and the backward reads:
    /// `2 * C` accumulators.
    pub fn stats_bytes(&self) -> usize {
        2 * self.desc.channels() * acc_bytes::<T>()
    }
    /// The descriptor.
    pub fn descriptor(&self) -> &BatchNormDescriptor<R> {
        &self.desc
    }
    /// Whether the partial kernels may load vectors from `x` (and `dy`)
    /// at `addrs`: the rows (channels-last) or the channel runs and chunks
    /// (channels-first) are whole vectors, 16-byte aligned.
    fn vec_red(&self, addrs: &[u64]) -> bool {
        let (d, v) = (&self.desc, Self::vec());
        let whole = if d.rows_of_channels() {
            d.channels() % v == 0
        } else {
            d.spatial() % v == 0 && self.chunk % v == 0
        };
        whole && addrs.iter().all(|a| a % 16 == 0)
    }
    /// Whether the apply kernels may load vectors from operands at `addrs`
    /// (null ones ignored): a vector never straddles two channels
    /// (channels-first) or two rows (channels-last).
    fn vec_apply(&self, addrs: &[u64]) -> bool {
        let d = &self.desc;
        let len = if d.rows_of_channels() {
            d.channels()
        } else {
            d.spatial()
        };
        len % Self::vec() == 0 && addrs.iter().all(|a| a % 16 == 0)
    }
    /// Bytes of the partials: two accumulators per (split, channel).
    fn part_bytes(&self) -> usize {
        2 * self.splits * self.desc.channels() * acc_bytes::<T>()
    }
    /// Check a `[N, C, spatial...]` view; its address.
    fn check_big(&self, arg: &'static str, v: &TensorRef<'_, T, R>, ctx: usize) -> Result<u64> {
        check_tensor(OP, arg, v, &self.desc.shape, self.desc.layout, ctx)
    }
    /// Check a `[C]` view; its address.
    fn check_vec(&self, arg: &'static str, v: &TensorRef<'_, P, 1>, ctx: usize) -> Result<u64> {
        let c = [self.desc.channels()];
        check_tensor(OP, arg, v, &c, ConvLayout::ChannelsFirst, ctx)
    }
    fn params(&self) -> BnParams<T, P> {
        let d = &self.desc;
        let total = d.channel_elements() * d.channels();
        BnParams {
            x: DevPtr::NULL,
            dy: DevPtr::NULL,
            out: DevPtrMut::NULL,
            w: DevPtr::NULL,
            b: DevPtr::NULL,
            run_mean: DevPtrMut::NULL,
            run_var: DevPtrMut::NULL,
            mean: DevPtrMut::NULL,
            rstd: DevPtrMut::NULL,
            coef: DevPtrMut::NULL,
            part: DevPtrMut::NULL,
            dw: DevPtrMut::NULL,
            db: DevPtrMut::NULL,
            m: d.channel_elements() as u64,
            channels: d.channels() as u64,
            spatial: d.spatial() as u64,
            chunk: self.chunk as u64,
            total: total as u64,
            eps: d.eps,
            momentum: d.momentum,
            splits: self.splits as u32,
            channels_last: d.rows_of_channels() as u32,
            training: d.training as u32,
            vec_red: 0,
            vec_apply: 0,
            small: (total < u32::MAX as usize) as u32,
        }
    }
    /// The launch of the partial kernels.
    fn partial_cfg(&self, vec: bool) -> LaunchConfig {
        let d = &self.desc;
        if d.rows_of_channels() {
            let v = if vec { Self::vec() } else { 1 };
            let tiles = (d.channels() / v).div_ceil(32);
            LaunchConfig {
                grid: (grid(tiles * self.splits), 1, 1),
                block: (32, 8, 1),
                smem_bytes: 0,
            }
        } else {
            LaunchConfig::linear(grid(d.channels() * self.splits), THREADS)
        }
    }
    /// The launch of the apply kernels: rows of channels take the partial
    /// kernels' grid; channels-first a thread per vector (or element).
    fn apply_cfg(&self, vec: bool) -> LaunchConfig {
        let d = &self.desc;
        if d.rows_of_channels() {
            return self.partial_cfg(vec);
        }
        let units = d.channel_elements() * d.channels() / if vec { Self::vec() } else { 1 };
        LaunchConfig::linear(grid(units.div_ceil(THREADS as usize)), THREADS)
    }
    /// The launch of the per-channel kernels: a warp per channel.
    fn channel_cfg(&self) -> LaunchConfig {
        let per_block = THREADS as usize / 32;
        LaunchConfig::linear(grid(self.desc.channels().div_ceil(per_block)), THREADS)
    }
}

impl<T: Element, const R: usize, P: Element> Plan for BatchNormPlan<T, R, P> {
    type Descriptor = BatchNormDescriptor<R>;
    type Args<'a> = BatchNormArgs<'a, T, R, P>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        validate::<T, P, R>(desc)?;
        pref.check_backend(OP, &[BackendKind::Baracuda])?;
        let spec = spec(T::KIND, P::KIND).expect("a float dtype");
        let module = stream.context().module(&spec)?;
        let f = |name: &str| module.function(name);
        let sms = stream.context().device().sm_count as usize;
        let v = Self::vec();
        let (splits, chunk) = if desc.rows_of_channels() {
            let lanes = desc.channels().div_ceil(v).div_ceil(32);
            split_channels(lanes, desc.channel_elements(), 1, MIN_CHUNK_CL, sms)
        } else {
            split_channels(desc.channels(), desc.channel_elements(), v, MIN_CHUNK_CF, sms)
        };
        let plan = BatchNormPlan {
            desc: *desc,
            sku: own_float_sku::<T>(
                stream,
                "norm.batch_norm".into(),
                "split channel moments, element-wise apply, fixed-order sums",
            ),
            k: BnKernels {
                fw_partial: f("bn_fw_partial")?,
                fw_stats: f("bn_fw_stats")?,
                fw_apply: f("bn_fw_apply")?,
                bw_partial: f("bn_bw_partial")?,
                bw_stats: f("bn_bw_stats")?,
                bw_apply: f("bn_bw_apply")?,
            },
            splits,
            chunk,
            _t: PhantomData,
        };
        pref.check_workspace(OP, plan.workspace_size())?;
        Ok(plan)
    }

    fn sku(&self) -> &KernelSku {
        &self.sku
    }

    /// The coefficients (3 per channel), the partial moments (training)
    /// and room for the statistics.
    fn workspace_size(&self) -> usize {
        let part = if self.desc.training {
            self.part_bytes()
        } else {
            0
        };
        5 * self.desc.channels() * acc_bytes::<T>() + part
    }

    fn run(&self, stream: &Stream, workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let ctx = stream.context().id();
        let d = &self.desc;
        let xp = self.check_big("x", &args.x, ctx)?;
        let yp = self.check_big("y", &args.y.as_const(), ctx)?;
        let w = optional_arg(OP, "weight", args.weight.as_ref(), d.weight, AFFINE_WHY, |v| {
            self.check_vec("weight", v, ctx)
        })?;
        let b = optional_arg(OP, "bias", args.bias.as_ref(), d.bias, AFFINE_WHY, |v| {
            self.check_vec("bias", v, ctx)
        })?;
        let why = (
            "the descriptor has no running statistics",
            "the descriptor has running statistics",
        );
        let rm = optional_arg(OP, "running_mean", args.running_mean.as_ref(), d.running_stats, why, |v| {
            self.check_vec("running_mean", &v.as_const(), ctx)
        })?;
        let rv = optional_arg(OP, "running_var", args.running_var.as_ref(), d.running_stats, why, |v| {
            self.check_vec("running_var", &v.as_const(), ctx)
        })?;
        let mut inputs = vec![span_ref("x", &args.x)];
        if let Some(v) = &args.weight {
            inputs.push(span_ref("weight", v));
        }
        if let Some(v) = &args.bias {
            inputs.push(span_ref("bias", v));
        }
        let mut outputs = vec![span_mut("y", &args.y)];
        if let Some(v) = &args.running_mean {
            outputs.push(span_mut("running_mean", v));
        }
        if let Some(v) = &args.running_var {
            outputs.push(span_mut("running_var", v));
        }
        let stats = match &args.stats {
            Some(s) => {
                let (need, align) = (self.stats_bytes(), acc_bytes::<T>());
                check_stats(OP, stream, (s.ptr().as_const(), s.len(), s.ctx_id()), need, align)?;
                outputs.push(("stats", s.ptr().as_const().cast(), need));
                s.ptr()
            }
            None => DevPtrMut::NULL,
        };
        check_outputs_disjoint(OP, &outputs, inputs)?;
        let ws = workspace.check_ptr(OP, self.workspace_size(), ctx)?;
        if d.channel_elements() == 0 {
            // PyTorch's empty batch: an empty y, the running statistics
            // and the saved ones untouched.
            return Ok(());
        }
        let (c, acc) = (d.channels(), acc_bytes::<T>());
        let stats = if stats.is_null() {
            ws.byte_add(3 * c * acc)
        } else {
            stats
        };
        let mut p = self.params();
        p.x = DevPtr::from_addr(xp);
        p.out = DevPtrMut::from_addr(yp);
        p.w = DevPtr::from_addr(w);
        p.b = DevPtr::from_addr(b);
        p.run_mean = DevPtrMut::from_addr(rm);
        p.run_var = DevPtrMut::from_addr(rv);
        p.coef = ws.cast();
        p.mean = stats.cast();
        p.rstd = stats.byte_add(c * acc).cast();
        p.part = ws.byte_add(5 * c * acc).cast();
        p.vec_red = self.vec_red(&[xp]) as u32;
        p.vec_apply = self.vec_apply(&[xp, yp]) as u32;
        // SAFETY: x, y, weight, bias and the running statistics were
        // checked against the descriptor's shapes, dense in its layout,
        // pairwise disjoint where one is written; the workspace holds the
        // coefficients, the statistics (when none are given) and, in
        // training, the partials; the statistics stats_bytes. The launches
        // run in order on one stream.
        unsafe {
            if d.training {
                launch_params(stream, &self.k.fw_partial, self.partial_cfg(p.vec_red != 0), p)?;
            }
            launch_params(stream, &self.k.fw_stats, self.channel_cfg(), p)?;
            launch_params(stream, &self.k.fw_apply, self.apply_cfg(p.vec_apply != 0), p)
        }
    }
}

impl<T: Element, const R: usize, P: Element> Backward for BatchNormPlan<T, R, P> {
    type BwArgs<'a> = BatchNormBwArgs<'a, T, R, P>;

    fn grads(&self) -> Grads {
        affine_grads(true, self.desc.weight, self.desc.bias)
    }

    /// The `dx` coefficients (4 per channel) and, when a sum is needed
    /// (dweight, dbias, or dx in training), the partial sums.
    fn bw_workspace_size(&self, wants: Grads) -> usize {
        let dx = wants.contains(Grad::X);
        let params = wants.contains(Grad::Weight) || wants.contains(Grad::Bias);
        let coef = if dx {
            4 * self.desc.channels() * acc_bytes::<T>()
        } else {
            0
        };
        let part = if params || (dx && self.desc.training) {
            self.part_bytes()
        } else {
            0
        };
        coef + part
    }

    fn run_bw(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()> {
        let wants = affine_grads(args.dx.is_some(), args.dweight.is_some(), args.dbias.is_some());
        check_grads(OP, wants, self.grads())?;
        let ctx = stream.context().id();
        let d = &self.desc;
        let xp = self.check_big("x", &args.x, ctx)?;
        let dyp = self.check_big("dy", &args.dy, ctx)?;
        let w = optional_arg(OP, "weight", args.weight.as_ref(), d.weight, AFFINE_WHY, |v| {
            self.check_vec("weight", v, ctx)
        })?;
        let s = &args.stats;
        check_stats(OP, stream, (s.ptr(), s.len(), s.ctx_id()), self.stats_bytes(), acc_bytes::<T>())?;
        let dx = match &args.dx {
            Some(v) => self.check_big("dx", &v.as_const(), ctx)?,
            None => 0,
        };
        let dw = match &args.dweight {
            Some(v) => self.check_vec("dweight", &v.as_const(), ctx)?,
            None => 0,
        };
        let db = match &args.dbias {
            Some(v) => self.check_vec("dbias", &v.as_const(), ctx)?,
            None => 0,
        };
        let mut inputs = vec![
            span_ref("x", &args.x),
            span_ref("dy", &args.dy),
            ("stats", s.ptr(), self.stats_bytes()),
        ];
        if let Some(v) = &args.weight {
            inputs.push(span_ref("weight", v));
        }
        let mut outputs = Vec::new();
        if let Some(v) = &args.dx {
            outputs.push(span_mut("dx", v));
        }
        if let Some(v) = &args.dweight {
            outputs.push(span_mut("dweight", v));
        }
        if let Some(v) = &args.dbias {
            outputs.push(span_mut("dbias", v));
        }
        check_outputs_disjoint(OP, &outputs, inputs)?;
        let ws = workspace.check_ptr(OP, self.bw_workspace_size(wants), ctx)?;
        let params_wanted = dw != 0 || db != 0;
        let m = d.channel_elements();
        if !params_wanted && (m == 0 || dx == 0) {
            return Ok(());
        }
        let (c, acc) = (d.channels(), acc_bytes::<T>());
        let sums = m > 0 && (params_wanted || d.training);
        let coef = if dx != 0 { 4 * c * acc } else { 0 };
        let mut p = self.params();
        p.x = DevPtr::from_addr(xp);
        p.dy = DevPtr::from_addr(dyp);
        p.out = DevPtrMut::from_addr(dx);
        p.w = DevPtr::from_addr(w);
        p.mean = DevPtrMut::from_addr(s.addr());
        p.rstd = DevPtrMut::from_addr(s.addr() + (c * acc) as u64);
        p.coef = if dx != 0 { ws.cast() } else { DevPtrMut::NULL };
        p.part = if sums {
            ws.byte_add(coef).cast()
        } else {
            DevPtrMut::NULL
        };
        p.dw = DevPtrMut::from_addr(dw);
        p.db = DevPtrMut::from_addr(db);
        p.vec_red = self.vec_red(&[xp, dyp]) as u32;
        p.vec_apply = self.vec_apply(&[xp, dyp, dx]) as u32;
        // SAFETY: every view was checked against the descriptor's shapes,
        // dense in its layout, the outputs disjoint from every operand; the
        // statistics hold stats_bytes, the workspace the coefficients (dx)
        // and the partials (when a sum is taken). The launches run in
        // order on one stream; the kernels reading the statistics through
        // mutable pointers only read them. With no elements only the
        // per-channel kernel runs: it writes zero dweight and dbias and
        // reads nothing else.
        unsafe {
            if sums {
                launch_params(stream, &self.k.bw_partial, self.partial_cfg(p.vec_red != 0), p)?;
            }
            launch_params(stream, &self.k.bw_stats, self.channel_cfg(), p)?;
            if dx != 0 && m > 0 {
                launch_params(stream, &self.k.bw_apply, self.apply_cfg(p.vec_apply != 0), p)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_checks_follow_pytorch() {
        let d = BatchNormDescriptor::batch_norm(ElementKind::Bf16, [64, 256, 56, 56]);
        assert!(d.validate().is_ok());
        assert_eq!((d.channel_elements(), d.spatial()), (64 * 56 * 56, 56 * 56));
        assert!(d.with_param(ElementKind::F32).validate().is_ok());
        let bad = d.with_param(ElementKind::F64).validate();
        assert!(matches!(bad, Err(Error::Unsupported { .. })), "{bad:?}");
        let f32_half = BatchNormDescriptor::batch_norm(ElementKind::F32, [2, 3]).with_param(ElementKind::F16);
        assert!(matches!(f32_half.validate(), Err(Error::Unsupported { .. })));
        let one = BatchNormDescriptor::batch_norm(ElementKind::F32, [1, 3]);
        assert!(matches!(one.validate(), Err(Error::InvalidDescriptor { field: "shape", .. })));
        assert!(one.with_training(false).validate().is_ok());
        let one_pos = BatchNormDescriptor::batch_norm(ElementKind::F32, [1, 3, 1, 1]);
        assert!(one_pos.validate().is_err());
        assert!(BatchNormDescriptor::batch_norm(ElementKind::F32, [0, 3, 4]).validate().is_ok());
        let no_running = one.with_training(false).with_running_stats(false).validate();
        assert!(matches!(no_running, Err(Error::InvalidDescriptor { field: "running_stats", .. })));
        let nan = d.with_momentum(f64::NAN).validate();
        assert!(matches!(nan, Err(Error::InvalidDescriptor { field: "momentum", .. })));
        let rank1 = BatchNormDescriptor::batch_norm(ElementKind::F32, [4]);
        assert!(matches!(rank1.validate(), Err(Error::Unsupported { .. })));
        assert!(!d.rows_of_channels());
        assert!(BatchNormDescriptor::batch_norm(ElementKind::F32, [4, 3]).rows_of_channels());
        assert!(d.with_layout(ConvLayout::ChannelsLast).rows_of_channels());
    }

    #[test]
    fn splits_cover_each_channel() {
        for (lanes, m, unit, least) in [
            (1, 200_704, 1, MIN_CHUNK_CL),
            (256, 200_704, 8, MIN_CHUNK_CF),
            (3, 7, 4, MIN_CHUNK_CF),
            (1, 1 << 30, 1, MIN_CHUNK_CL),
            (5, 0, 8, MIN_CHUNK_CF),
        ] {
            let (splits, chunk) = split_channels(lanes, m, unit, least, 132);
            assert_eq!(chunk % unit, 0);
            assert!(chunk <= MAX_CHUNK + unit);
            assert!(splits >= 1 && splits * chunk >= m && (splits - 1) * chunk < m.max(1));
        }
        assert_eq!(split_channels(1, 200_704, 1, MIN_CHUNK_CL, 132), (527, 381));
    }
}
