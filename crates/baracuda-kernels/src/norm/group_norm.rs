//! GroupNorm over `[N, C, spatial...]`, and InstanceNorm as its case of
//! one channel per group; forward and backward.
//!
//! The math and the work split are at the top of
//! `kernels/norm/group_norm.cu`.

use core::marker::PhantomData;

use baracuda_driver::{Function, LaunchConfig, ModuleSpec, Stream};
use baracuda_kernels_types::{
    BackendKind, DevPtr, DevPtrMut, DeviceSlice, DeviceSliceMut, Element, ElementKind, Error, Grad,
    Grads, KernelSku, PlanPreference, Result, TensorMut, TensorRef, Workspace,
};

use super::norm::{
    acc_bytes, affine_grads, affine_setters, check_disjoint_in, check_outputs_disjoint,
    check_stats, saved_stats, span_of, Acc, Span, AFFINE_WHY,
};
use crate::checks::{check_grads, check_tensor, float_dtype_code, invalid_descriptor, optional_arg};
use crate::conv::ConvLayout;
use crate::kernel_sources::{typed_spec, GROUP_NORM};
use crate::launch::launch_params;
use crate::plan::own_float_sku;
use crate::{Backward, Plan};

const OP: &str = "group_norm";

/// Threads per block of the one-dimensional kernels.
const THREADS: u32 = 256;
/// Forward statistics blocks aimed for, per SM.
const FW_BLOCKS_PER_SM: usize = 4;
/// Fewest elements a statistics block takes when a group is split.
const MIN_CHUNK: usize = 1 << 14;
/// Most elements one statistics block takes (its counts stay exact).
const MAX_CHUNK: usize = 1 << 22;
/// Most channels per group.
const MAX_GROUP_CHANNELS: usize = 1 << 24;
/// Most elements of `x` (and of one batch item).
const MAX_ELEMENTS: usize = 1 << 56;
/// Most blocks a grid-stride launch starts.
const MAX_GRID: usize = 1 << 30;

/// A GroupNorm of `x` of logical shape `[N, C, spatial...]` (rank `R`, 3
/// to 5) in `groups` groups of `C / groups` channels.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct GroupNormDescriptor<const R: usize> {
    /// Element type of every tensor operand.
    pub element: ElementKind,
    /// Logical shape `[N, C, spatial...]` of `x` (and `y`, `dy`, `dx`),
    /// whatever the layout.
    pub shape: [usize; R],
    /// Groups; divides `C`. `C` groups is InstanceNorm.
    pub groups: usize,
    /// Added to the variance before the square root.
    pub eps: f64,
    /// The op takes a weight of `C` elements.
    pub weight: bool,
    /// The op takes a bias of `C` elements.
    pub bias: bool,
    /// Memory order of the `[N, C, spatial...]` operands. Default
    /// channels-first.
    pub layout: ConvLayout,
}

impl<const R: usize> GroupNormDescriptor<R> {
    /// `torch.nn.GroupNorm(groups, C)`'s defaults: eps 1e-5, weight and
    /// bias, channels-first.
    pub fn group_norm(element: ElementKind, shape: [usize; R], groups: usize) -> Self {
        GroupNormDescriptor {
            element,
            shape,
            groups,
            eps: 1e-5,
            weight: true,
            bias: true,
            layout: ConvLayout::ChannelsFirst,
        }
    }
    /// `torch.nn.functional.instance_norm(x, use_input_stats=True)` with
    /// no running statistics: one group per channel, eps 1e-5, no weight,
    /// no bias.
    pub fn instance_norm(element: ElementKind, shape: [usize; R]) -> Self {
        GroupNormDescriptor {
            groups: shape.get(1).copied().unwrap_or(0),
            weight: false,
            bias: false,
            ..Self::group_norm(element, shape, 1)
        }
    }
    affine_setters!();
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
    /// Spatial positions (the product of the dims after `C`).
    pub fn spatial(&self) -> usize {
        self.shape.iter().skip(2).product()
    }
    /// Channels per group.
    pub fn group_channels(&self) -> usize {
        self.channels().checked_div(self.groups).unwrap_or(0)
    }
    /// Elements normalized together: `C / groups` times the spatial size.
    pub fn group_elements(&self) -> usize {
        self.group_channels() * self.spatial()
    }
    /// Statistics saved: `N * groups`.
    pub fn stat_rows(&self) -> usize {
        self.batch() * self.groups
    }

    /// `InvalidDescriptor` (or `Unsupported` for the rank) unless the plan
    /// can run the descriptor.
    pub(crate) fn validate(&self) -> Result<()> {
        if !(3..=5).contains(&R) {
            return Err(Error::Unsupported {
                op: OP,
                what: format!("rank {R}; GroupNorm takes [N, C, spatial] of rank 3 to 5"),
            });
        }
        let shape = format!("{:?}", self.shape);
        if self.shape[1..].contains(&0) {
            return Err(invalid_descriptor(OP, "shape", shape, "C and every spatial extent must be > 0"));
        }
        let count = |dims: &[usize]| dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let fits = |n: Option<usize>| n.is_some_and(|n| n <= MAX_ELEMENTS);
        if !fits(count(&self.shape)) || !fits(count(&self.shape[1..])) {
            return Err(invalid_descriptor(
                OP,
                "shape",
                shape,
                &format!("more than {MAX_ELEMENTS} elements"),
            ));
        }
        if self.groups == 0 || self.channels() % self.groups != 0 {
            return Err(invalid_descriptor(
                OP,
                "groups",
                self.groups.to_string(),
                &format!("must divide the {} channels", self.channels()),
            ));
        }
        if self.channels() > u32::MAX as usize {
            return Err(invalid_descriptor(OP, "shape", shape, "more than 2^32 - 1 channels"));
        }
        if self.group_channels() > MAX_GROUP_CHANNELS {
            return Err(invalid_descriptor(
                OP,
                "groups",
                self.groups.to_string(),
                &format!("more than {MAX_GROUP_CHANNELS} channels per group"),
            ));
        }
        if !self.eps.is_finite() || self.eps < 0.0 {
            let eps = self.eps.to_string();
            return Err(invalid_descriptor(OP, "eps", eps, "must be finite and >= 0"));
        }
        Ok(())
    }
}

/// The checks of `select` before it touches the GPU: the dtype code, or
/// the typed error.
pub(super) fn validate<T: Element, const R: usize>(desc: &GroupNormDescriptor<R>) -> Result<u32> {
    let code = float_dtype_code::<T, R>(OP, desc.element, "GroupNorm takes")?;
    desc.validate()?;
    Ok(code)
}

/// Arguments of [`GroupNormPlan`]'s [`Plan::run`].
pub struct GroupNormArgs<'a, T, const R: usize> {
    /// Input, dense in the descriptor's layout.
    pub x: TensorRef<'a, T, R>,
    /// The weight `[C]`, dense: given exactly when the descriptor has
    /// `weight`.
    pub weight: Option<TensorRef<'a, T, 1>>,
    /// The bias `[C]`, likewise with `bias`.
    pub bias: Option<TensorRef<'a, T, 1>>,
    /// Output, dense in the layout, disjoint from every input.
    pub y: TensorMut<'a, T, R>,
    /// Where to save the statistics the backward reads
    /// ([`GroupNormPlan::stats_bytes`] bytes), or None.
    pub stats: Option<DeviceSliceMut<'a, u8>>,
}

/// Arguments of [`GroupNormPlan`]'s [`Backward::run_bw`].
pub struct GroupNormBwArgs<'a, T, const R: usize> {
    /// The forward input.
    pub x: TensorRef<'a, T, R>,
    /// The forward weight (given exactly when the descriptor has one).
    pub weight: Option<TensorRef<'a, T, 1>>,
    /// The statistics the forward saved.
    pub stats: DeviceSlice<'a, u8>,
    /// Gradient of `y`.
    pub dy: TensorRef<'a, T, R>,
    /// Gradient of `x`.
    pub dx: Option<TensorMut<'a, T, R>>,
    /// Gradient of the weight `[C]`.
    pub dweight: Option<TensorMut<'a, T, 1>>,
    /// Gradient of the bias `[C]`.
    pub dbias: Option<TensorMut<'a, T, 1>>,
}

/// GroupNorm (`torch.nn.functional.group_norm(x, groups, weight, bias,
/// eps)`) over a rank-`R` tensor `[N, C, spatial...]`, forward and
/// backward; with `groups == C` it is InstanceNorm without running
/// statistics (`torch.nn.functional.instance_norm(x, weight=, bias=,
/// use_input_stats=True)`, [`GroupNormDescriptor::instance_norm`]).
/// Deterministic: every sum is taken in a fixed order, no atomics.
///
/// # Math
/// Group `(n, g)` holds channels `g C/G .. (g+1) C/G - 1` at every
/// spatial position, `M` = [`GroupNormDescriptor::group_elements`]
/// elements: `mean`, `var` (biased) over them, `rstd = 1 / sqrt(var +
/// eps)`, `xhat = (x - mean) rstd`, `y = xhat w[c] + b[c]` (`w = 1`,
/// `b = 0` when absent).
///
/// Backward, with `g = dy w[c]`: `dx = rstd (g - mean(g) - xhat
/// mean(g xhat))`, the means over the group; `dweight[c] = sum dy xhat`
/// and `dbias[c] = sum dy` over the batch and the spatial positions.
/// # Shapes
/// `x`, `y`, `dy`, `dx`: `desc.shape`; `weight`, `bias`, `dweight`,
/// `dbias`: `[C]`.
/// # Layout
/// `x`, `y`, `dy`, `dx` dense in `desc.layout` ([`ConvLayout`]:
/// channels-first `[N, C, spatial...]` or channels-last
/// `[N, spatial..., C]` in memory, the views' shape logical either way);
/// `weight`, `bias`, `dweight`, `dbias` dense.
/// # Workspace
/// The forward's `workspace_size()` holds per-block partial moments (a
/// large group is split over several blocks, combined in order) and the
/// statistics; the backward's `bw_workspace_size(wants)` holds per-(n, c)
/// sums and per-group coefficients; f32 (f64 for f64).
/// # Statistics
/// The forward saves the mean of every group `(n, g)` in row-major order,
/// then the rstd of every group, as f32 (f64 for f64):
/// [`GroupNormPlan::stats_bytes`] bytes, aligned to their type.
/// # Dtypes
/// f32, f64, f16, bf16; weight and bias in the dtype of `x`. Statistics
/// and arithmetic in f32 (f64 for f64). Others: `Error::Unsupported`.
/// # Errors
/// From `select`: `DtypeMismatch` if `desc.element != T::KIND`;
/// `Unsupported` for another dtype or a rank other than 3 to 5;
/// `InvalidDescriptor` for a zero channel count or spatial extent, more
/// than 2^32 - 1 channels or 2^56 elements, a
/// `groups` of 0 or not dividing `C`, more than 2^24 channels per group,
/// a negative or non-finite eps; `PreferenceRejected` when `pref` forces a
/// backend other than `Baracuda` or caps the workspace below
/// `workspace_size()`; the kernel JIT's errors. From `run` and `run_bw`:
/// `ShapeMismatch` for a view of another shape; `ContextMismatch` for a
/// view, the statistics or the workspace on another context;
/// `WorkspaceTooSmall`; `InvalidArgument` for a weight or bias given
/// against the descriptor or missing, a `dweight` or `dbias` the
/// descriptor has no parameter for, a view not dense in the layout,
/// overlapping operands, and short or misaligned statistics. Nothing is
/// written when an error is returned.
pub struct GroupNormPlan<T: Element, const R: usize> {
    desc: GroupNormDescriptor<R>,
    sku: KernelSku,
    k: GnKernels,
    splits: usize,
    chunk: usize,
    _t: PhantomData<T>,
}

struct GnKernels {
    fw_partial: Function,
    fw_stats: Function,
    fw_apply: Function,
    bw_reduce_cf: Function,
    bw_reduce_cl: Function,
    bw_params: Function,
    bw_apply: Function,
}

/// Every module of the plan: one per float dtype.
pub(crate) fn module_specs() -> Vec<ModuleSpec> {
    crate::conv::FLOAT_KINDS
        .iter()
        .filter_map(|&k| typed_spec(&GROUP_NORM, k))
        .collect()
}

/// `GnParams` of group_norm.cu, field for field.
#[repr(C)]
#[derive(Copy, Clone)]
struct GnParams<T> {
    x: DevPtr<T>,
    dy: DevPtr<T>,
    out: DevPtrMut<T>,
    w: DevPtr<T>,
    b: DevPtr<T>,
    mean: DevPtrMut<Acc>,
    rstd: DevPtrMut<Acc>,
    ws: DevPtrMut<Acc>,
    dw: DevPtrMut<T>,
    db: DevPtrMut<T>,
    batch: u64,
    channels: u64,
    spatial: u64,
    groups: u64,
    cg: u64,
    chunk: u64,
    eps: f64,
    splits: u32,
    channels_last: u32,
    vec_group: u32,
    vec_line: u32,
}

/// How a group of `m` elements is split over statistics blocks for `rows`
/// groups on `sms` SMs: (splits, chunk), chunk a multiple of `unit` (whole
/// positions of the group's channels, whole vectors).
fn split_groups(rows: usize, m: usize, unit: usize, sms: usize) -> (usize, usize) {
    let target = FW_BLOCKS_PER_SM * sms.max(1);
    let want = target.div_ceil(rows.max(1));
    let most = m.div_ceil(MIN_CHUNK).max(1);
    let least = m.div_ceil(MAX_CHUNK).max(1);
    let splits = want.min(most).max(least);
    let chunk = m.div_ceil(splits).div_ceil(unit) * unit;
    (m.div_ceil(chunk), chunk)
}

fn grid(blocks: usize) -> u32 {
    blocks.clamp(1, MAX_GRID) as u32
}

impl<T: Element, const R: usize> GroupNormPlan<T, R> {
    /// Elements of T in a 16-byte vector (`VEC` of dtype.cuh).
    fn vec() -> usize {
        16 / core::mem::size_of::<T>()
    }
    /// Whether gn_fw_partial may load vectors from `x` at `addr`: every
    /// group chunk (and channels-last position run) starts on 16 bytes.
    fn vec_group(&self, addr: u64) -> bool {
        let (d, v) = (&self.desc, Self::vec());
        addr % 16 == 0
            && match d.layout {
                ConvLayout::ChannelsFirst => d.group_elements() % v == 0,
                ConvLayout::ChannelsLast => d.group_channels() % v == 0 && d.channels() % v == 0,
            }
    }
    /// Whether the line kernels may load vectors from operands at `addrs`
    /// (null ones ignored): lines of whole vectors, 16-byte aligned.
    fn vec_line(&self, addrs: &[u64]) -> bool {
        let d = &self.desc;
        let len = match d.layout {
            ConvLayout::ChannelsFirst => d.spatial(),
            ConvLayout::ChannelsLast => d.channels(),
        };
        len % Self::vec() == 0 && addrs.iter().all(|a| a % 16 == 0)
    }
    /// Bytes of the statistics the forward saves and the backward reads:
    /// `2 * N * groups` accumulators.
    pub fn stats_bytes(&self) -> usize {
        2 * self.desc.stat_rows() * acc_bytes::<T>()
    }
    /// The statistics' bytes and alignment.
    fn stats_layout(&self) -> (usize, usize) {
        (self.stats_bytes(), acc_bytes::<T>())
    }
    /// The descriptor.
    pub fn descriptor(&self) -> &GroupNormDescriptor<R> {
        &self.desc
    }
    fn nc(&self) -> usize {
        self.desc.batch() * self.desc.channels()
    }
    /// Check a `[N, C, spatial...]` view; its address.
    fn check_big(&self, arg: &'static str, v: &TensorRef<'_, T, R>, ctx: usize) -> Result<u64> {
        check_tensor(OP, arg, v, &self.desc.shape, self.desc.layout, ctx)
    }
    /// Check a `[C]` view; its address.
    fn check_vec(&self, arg: &'static str, v: &TensorRef<'_, T, 1>, ctx: usize) -> Result<u64> {
        let c = [self.desc.channels()];
        check_tensor(OP, arg, v, &c, ConvLayout::ChannelsFirst, ctx)
    }
    fn params(&self) -> GnParams<T> {
        let d = &self.desc;
        GnParams {
            x: DevPtr::NULL,
            dy: DevPtr::NULL,
            out: DevPtrMut::NULL,
            w: DevPtr::NULL,
            b: DevPtr::NULL,
            mean: DevPtrMut::NULL,
            rstd: DevPtrMut::NULL,
            ws: DevPtrMut::NULL,
            dw: DevPtrMut::NULL,
            db: DevPtrMut::NULL,
            batch: d.batch() as u64,
            channels: d.channels() as u64,
            spatial: d.spatial() as u64,
            groups: d.groups as u64,
            cg: d.group_channels() as u64,
            chunk: self.chunk as u64,
            eps: d.eps,
            splits: self.splits as u32,
            channels_last: (d.layout == ConvLayout::ChannelsLast) as u32,
            vec_group: 0,
            vec_line: 0,
        }
    }
    /// Blocks of the line kernels (fw and bw apply).
    fn lines(&self) -> usize {
        let d = &self.desc;
        d.batch()
            * match d.layout {
                ConvLayout::ChannelsFirst => d.channels(),
                ConvLayout::ChannelsLast => d.spatial(),
            }
    }
    /// Threads of the line kernels.
    fn line_threads(&self) -> u32 {
        let d = &self.desc;
        let len = match d.layout {
            ConvLayout::ChannelsFirst => d.spatial(),
            ConvLayout::ChannelsLast => d.channels(),
        };
        len.next_power_of_two().clamp(32, THREADS as usize) as u32
    }
}

fn span_ref<T: Element, const R: usize>(arg: &'static str, v: &TensorRef<'_, T, R>) -> Span {
    span_of(arg, v.data().ptr(), v.shape(), v.strides())
}

fn span_mut<T: Element, const R: usize>(arg: &'static str, v: &TensorMut<'_, T, R>) -> Span {
    span_of(arg, v.data().ptr().as_const(), v.shape(), v.strides())
}

impl<T: Element, const R: usize> Plan for GroupNormPlan<T, R> {
    type Descriptor = GroupNormDescriptor<R>;
    type Args<'a> = GroupNormArgs<'a, T, R>;

    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self> {
        validate::<T, R>(desc)?;
        pref.check_backend(OP, &[BackendKind::Baracuda])?;
        let spec = typed_spec(&GROUP_NORM, T::KIND).expect("a float dtype");
        let module = stream.context().module(&spec)?;
        let f = |name: &str| module.function(name);
        let sms = stream.context().device().sm_count as usize;
        let unit = desc.group_channels() * Self::vec();
        let (splits, chunk) = split_groups(desc.stat_rows(), desc.group_elements(), unit, sms);
        let plan = GroupNormPlan {
            desc: *desc,
            sku: own_float_sku::<T>(
                stream,
                "norm.group_norm".into(),
                "split group moments, line apply, fixed-order dweight",
            ),
            k: GnKernels {
                fw_partial: f("gn_fw_partial")?,
                fw_stats: f("gn_fw_stats")?,
                fw_apply: f("gn_fw_apply")?,
                bw_reduce_cf: f("gn_bw_reduce_cf")?,
                bw_reduce_cl: f("gn_bw_reduce_cl")?,
                bw_params: f("gn_bw_params")?,
                bw_apply: f("gn_bw_apply")?,
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

    /// Partial moments (3 accumulators per statistics block) and the
    /// statistics.
    fn workspace_size(&self) -> usize {
        let rows = self.desc.stat_rows();
        (3 * rows * self.splits + 2 * rows) * acc_bytes::<T>()
    }

    fn run(&self, stream: &Stream, workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()> {
        let ctx = stream.context().id();
        let xp = self.check_big("x", &args.x, ctx)?;
        let yp = self.check_big("y", &args.y.as_const(), ctx)?;
        let w = optional_arg(OP, "weight", args.weight.as_ref(), self.desc.weight, AFFINE_WHY, |v| {
            self.check_vec("weight", v, ctx)
        })?;
        let b = optional_arg(OP, "bias", args.bias.as_ref(), self.desc.bias, AFFINE_WHY, |v| {
            self.check_vec("bias", v, ctx)
        })?;
        let mut inputs = vec![span_ref("x", &args.x)];
        if let Some(v) = &args.weight {
            inputs.push(span_ref("weight", v));
        }
        if let Some(v) = &args.bias {
            inputs.push(span_ref("bias", v));
        }
        let y_span = span_mut("y", &args.y);
        check_disjoint_in(OP, &y_span, &inputs)?;
        let stats = args.stats.as_ref();
        let stats = saved_stats(OP, stream, stats, self.stats_layout(), y_span, &mut inputs)?;
        let ws = workspace.check_ptr(OP, self.workspace_size(), ctx)?;
        let rows = self.desc.stat_rows();
        if rows == 0 {
            return Ok(());
        }
        let acc = acc_bytes::<T>();
        let stats = if stats.is_null() {
            ws.byte_add(3 * rows * self.splits * acc)
        } else {
            stats
        };
        let mut p = self.params();
        p.x = DevPtr::from_addr(xp);
        p.out = DevPtrMut::from_addr(yp);
        p.w = DevPtr::from_addr(w);
        p.b = DevPtr::from_addr(b);
        p.ws = ws.cast();
        p.mean = stats.cast();
        p.rstd = stats.byte_add(rows * acc).cast();
        p.vec_group = self.vec_group(xp) as u32;
        p.vec_line = self.vec_line(&[xp, yp]) as u32;
        let lin = |blocks: usize| LaunchConfig::linear(grid(blocks), THREADS);
        // SAFETY: x, y, weight and bias were checked against the
        // descriptor's shapes, dense in its layout; the workspace holds the
        // partial moments (and the statistics when none are given), the
        // statistics stats_bytes. The launches run in order on one stream.
        unsafe {
            launch_params(stream, &self.k.fw_partial, lin(rows * self.splits), p)?;
            launch_params(stream, &self.k.fw_stats, lin(rows.div_ceil(THREADS as usize)), p)?;
            let cfg = LaunchConfig::linear(grid(self.lines()), self.line_threads());
            launch_params(stream, &self.k.fw_apply, cfg, p)
        }
    }
}

impl<T: Element, const R: usize> Backward for GroupNormPlan<T, R> {
    type BwArgs<'a> = GroupNormBwArgs<'a, T, R>;

    fn grads(&self) -> Grads {
        affine_grads(true, self.desc.weight, self.desc.bias)
    }

    /// Per-(n, c) sums `A`, `B` and, for `dx`, two coefficients per group.
    fn bw_workspace_size(&self, wants: Grads) -> usize {
        let wanted = self.grads().iter().any(|g| wants.contains(g));
        if !wanted {
            return 0;
        }
        let coef = if wants.contains(Grad::X) {
            2 * self.desc.stat_rows()
        } else {
            0
        };
        (2 * self.nc() + coef) * acc_bytes::<T>()
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
        let xp = self.check_big("x", &args.x, ctx)?;
        let dyp = self.check_big("dy", &args.dy, ctx)?;
        let w = optional_arg(OP, "weight", args.weight.as_ref(), self.desc.weight, AFFINE_WHY, |v| {
            self.check_vec("weight", v, ctx)
        })?;
        let s = &args.stats;
        let (need, align) = self.stats_layout();
        check_stats(OP, stream, (s.ptr(), s.len(), s.ctx_id()), need, align)?;
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
        let rows = self.desc.stat_rows();
        if !params_wanted && (rows == 0 || dx == 0) {
            return Ok(());
        }
        let acc = acc_bytes::<T>();
        let mut p = self.params();
        p.x = DevPtr::from_addr(xp);
        p.dy = DevPtr::from_addr(dyp);
        p.out = DevPtrMut::from_addr(dx);
        p.w = DevPtr::from_addr(w);
        p.ws = ws.cast();
        p.mean = DevPtrMut::from_addr(s.addr());
        p.rstd = DevPtrMut::from_addr(s.addr() + (rows * acc) as u64);
        p.dw = DevPtrMut::from_addr(dw);
        p.db = DevPtrMut::from_addr(db);
        p.vec_line = self.vec_line(&[xp, dyp, dx]) as u32;
        let d = &self.desc;
        let reduce = match d.layout {
            ConvLayout::ChannelsFirst => (
                &self.k.bw_reduce_cf,
                LaunchConfig::linear(grid(self.nc()), THREADS),
            ),
            ConvLayout::ChannelsLast => (
                &self.k.bw_reduce_cl,
                LaunchConfig {
                    grid: (grid(d.batch() * d.channels().div_ceil(32)), 1, 1),
                    block: (32, 8, 1),
                    smem_bytes: 0,
                },
            ),
        };
        let params_threads = rows.max(d.channels());
        // SAFETY: every view was checked against the descriptor's shapes,
        // dense in its layout; the statistics hold stats_bytes, the
        // workspace 2 N C sums (and 2 N G coefficients when dx is asked).
        // The launches run in order on one stream; the kernels reading the
        // statistics through mutable pointers only read them. With no
        // batch only the parameter kernel runs: it writes zero dweight
        // and dbias and reads nothing.
        unsafe {
            if rows > 0 {
                launch_params(stream, reduce.0, reduce.1, p)?;
            }
            let cfg = LaunchConfig::linear(grid(params_threads.div_ceil(THREADS as usize)), THREADS);
            launch_params(stream, &self.k.bw_params, cfg, p)?;
            if dx != 0 && rows > 0 {
                let cfg = LaunchConfig::linear(grid(self.lines()), self.line_threads());
                launch_params(stream, &self.k.bw_apply, cfg, p)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_norm_is_one_channel_per_group() {
        let d = GroupNormDescriptor::instance_norm(ElementKind::F32, [2, 6, 4, 5]);
        assert_eq!((d.groups, d.group_channels(), d.group_elements()), (6, 1, 20));
        assert!(!d.weight && !d.bias);
        assert!(d.validate().is_ok());
        let g = GroupNormDescriptor::group_norm(ElementKind::Bf16, [32, 512, 64, 64], 32);
        assert_eq!((g.stat_rows(), g.group_elements()), (1024, 16 * 4096));
    }

    #[test]
    fn splits_cover_the_group_in_whole_positions() {
        for (rows, m, unit) in [(1, 1 << 26, 128), (1024, 65536, 128), (3, 7, 7), (1, 100_003, 8)] {
            let (splits, chunk) = split_groups(rows, m, unit, 132);
            assert_eq!(chunk % unit, 0);
            assert!(chunk <= MAX_CHUNK + unit);
            assert!(splits * chunk >= m && (splits - 1) * chunk < m);
        }
        assert_eq!(split_groups(1024, 65536, 128, 132).0, 1);
    }
}
