//! Max and average pooling, spatial rank 1 to 3 (PyTorch `MaxPoolNd`,
//! `AvgPoolNd`), and the generic pooling core the adaptive and Lp plans
//! share.
//!
//! Per spatial axis, window `o` covers inputs `[o*stride - pad, o*stride -
//! pad + window)`; `out = floor_or_ceil((in + 2*pad - window) / stride) + 1`,
//! and with `ceil_mode` a last window that would start in the right padding
//! is dropped (PyTorch's rule). Max: NaN propagates; `indices` (optional)
//! receive the flat spatial input index of each maximum, as PyTorch returns
//! them. Avg: divisor is `divisor_override`, else the window clipped to
//! `[-pad, in + pad)` (`count_include_pad`, the default), else the count of
//! in-bounds elements.
//!
//! Kernels: `kernels/conv/pool.cu`, one generic N-d forward and one gather
//! backward (deterministic, no atomics), plus 32-bit fast paths:
//! channels-last windows, and global average (an avg window covering the
//! whole input with no padding, or adaptive avg to 1x1) as a fixed-order
//! block/warp reduction forward and a broadcast backward. cuDNN's pooling
//! lacks indices, ceil_mode, divisor_override and adaptive windows, so it
//! is not used.


use baracuda_driver::{Function, LaunchArgs, LaunchConfig, Stream};
use baracuda_kernels_types::{
    ArchSku, BackendKind, DevPtr, DevPtrMut, Element, ElementKind, Error, KernelSku,
    PlanPreference, PrecisionGuarantee, Result, TensorMut, TensorRef, Workspace,
};

use super::descriptor::full_shape;
use super::window::{invalid, to_i32, to_i32s, window_setters, Window};
use super::{check_dtype, ConvLayout, Rank, SpatialRank};
use crate::kernel_sources::{typed_spec, POOL};
use crate::checks::{byte_span, check_disjoint, check_tensor};

/// A max or average pooling of spatial rank `N`; the plan's type says
/// which ([`MaxPool2dPlan`], [`AvgPool2dPlan`], ...).
///
/// Defaults: stride = kernel (PyTorch), padding 0, dilation 1, ceil_mode
/// false, count_include_pad true, no divisor override, channels-first.
///
/// ```
/// # use baracuda_kernels::*;
/// // PyTorch: nn.MaxPool2d(3, stride=2, padding=1) on [64, 64, 112, 112]
/// let d = Pool2dDescriptor::new(64, 64, [112, 112], [3, 3], ElementKind::Bf16)
///     .with_stride([2, 2])
///     .with_padding([1, 1]);
/// assert_eq!(d.output().unwrap(), [56, 56]);
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct PoolDescriptor<const N: usize> {
    /// Batch.
    pub batch: usize,
    /// Channels.
    pub channels: usize,
    /// Input spatial extents.
    pub input: [usize; N],
    /// Kernel, stride, padding (each side at most half the kernel) and
    /// dilation.
    pub window: Window<N>,
    /// Round the output size up instead of down.
    pub ceil_mode: bool,
    /// Avg: count padded positions in the divisor.
    pub count_include_pad: bool,
    /// Avg: divide by this instead.
    pub divisor_override: Option<usize>,
    /// Element type.
    pub element: ElementKind,
    /// Memory order of x, y, indices.
    pub layout: ConvLayout,
}

rank_aliases!("pooling descriptor", PoolDescriptor<N> => Pool1dDescriptor, Pool2dDescriptor, Pool3dDescriptor);

window_setters!(PoolDescriptor);

impl<const N: usize> PoolDescriptor<N> {
    /// A pooling of `kernel` over `input` with PyTorch's defaults (stride =
    /// kernel).
    pub fn new(
        batch: usize,
        channels: usize,
        input: [usize; N],
        kernel: [usize; N],
        element: ElementKind,
    ) -> Self {
        PoolDescriptor {
            batch,
            channels,
            input,
            window: Window::new(kernel).with_stride(kernel),
            ceil_mode: false,
            count_include_pad: true,
            divisor_override: None,
            element,
            layout: ConvLayout::ChannelsFirst,
        }
    }
    /// Ceil instead of floor in the output size. Default false.
    pub fn with_ceil_mode(mut self, ceil_mode: bool) -> Self {
        self.ceil_mode = ceil_mode;
        self
    }
    /// Avg: include padding in the divisor. Default true.
    pub fn with_count_include_pad(mut self, include: bool) -> Self {
        self.count_include_pad = include;
        self
    }
    /// Avg: fixed divisor. Default none.
    pub fn with_divisor_override(mut self, divisor: Option<usize>) -> Self {
        self.divisor_override = divisor;
        self
    }
    /// Output spatial extents (PyTorch's `pooling_output_shape`).
    ///
    /// # Errors
    /// `InvalidDescriptor` when a descriptor field is out of range.
    pub fn output(&self) -> Result<[usize; N]> {
        validate_window(
            OP,
            (self.batch, self.channels),
            &self.input,
            &self.window,
            self.ceil_mode,
        )
    }
}

/// Checks of windowed pooling (max, avg, lp) shared by the plans; the
/// output extents.
pub(crate) fn validate_window<const N: usize>(
    op: &'static str,
    planes: (usize, usize),
    input: &[usize; N],
    window: &Window<N>,
    ceil: bool,
) -> Result<[usize; N]> {
    validate_planes::<N>(op, planes, input)?;
    window.validate(op)?;
    // PyTorch's rule, whatever the dilation: no window lies wholly in the
    // padding.
    for (field, pad) in [
        ("padding", &window.padding),
        ("padding_end", &window.padding_end),
    ] {
        if (0..N).any(|a| pad[a] > window.kernel[a] / 2) {
            return Err(invalid(
                op,
                field,
                pad,
                format!("must be at most half the kernel {:?}", window.kernel),
            ));
        }
    }
    window.output(op, input, ceil)
}

pub(crate) fn validate_planes<const N: usize>(
    op: &'static str,
    (batch, channels): (usize, usize),
    input: &[usize; N],
) -> Result<()> {
    if !(1..=3).contains(&N) {
        return Err(Error::Unsupported {
            op,
            what: format!("spatial rank {N} (takes 1, 2, 3)"),
        });
    }
    for (field, v) in [("batch", batch), ("channels", channels)] {
        if v == 0 {
            return Err(invalid(op, field, v, "must be > 0"));
        }
    }
    if input.contains(&0) {
        return Err(invalid(op, "input", input, "every extent must be > 0"));
    }
    Ok(())
}

/// Forward operands of every pooling plan.
#[derive(Debug)]
pub struct PoolArgs<'a, T, const R: usize> {
    /// Input `[N, C, input...]`.
    pub x: TensorRef<'a, T, R>,
    /// Output `[N, C, output...]`, overwritten.
    pub y: TensorMut<'a, T, R>,
    /// Max modes only: argmax indices, same shape and layout as `y`.
    pub indices: Option<TensorMut<'a, i64, R>>,
}

/// Backward operands. Max modes need `indices` (from the forward); Lp needs
/// `x` and `y`; Avg needs neither.
#[derive(Debug)]
pub struct PoolBwArgs<'a, T, const R: usize> {
    /// Gradient of the output.
    pub dy: TensorRef<'a, T, R>,
    /// Max modes: indices written by the forward.
    pub indices: Option<TensorRef<'a, i64, R>>,
    /// Lp: the forward input.
    pub x: Option<TensorRef<'a, T, R>>,
    /// Lp: the forward output.
    pub y: Option<TensorRef<'a, T, R>>,
    /// Gradient of the input, overwritten.
    pub dx: TensorMut<'a, T, R>,
}

/// Kernel mode numbers of `pool.cu`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum KernelMode {
    Max = 0,
    Avg = 1,
    Lp = 2,
    AdaptiveAvg = 3,
    AdaptiveMax = 4,
}

/// Mirror of `struct PoolParams` in pool.cu.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct PoolParams {
    n_out: i64,
    n_in: i64,
    batch: i32,
    channels: i32,
    input: [i32; 3],
    output: [i32; 3],
    k: [i32; 3],
    s: [i32; 3],
    p: [i32; 3],
    pe: [i32; 3],
    dl: [i32; 3],
    mode: i32,
    channels_last: i32,
    count_include_pad: i32,
    divisor_override: i32,
    norm_p: f32,
    has_indices: i32,
}

/// What the pooling core needs to know (the kernels pad the spatial axes
/// in front with unit extents to 3).
#[derive(Clone, Debug)]
pub(crate) struct PoolProblem<const N: usize> {
    pub(crate) op: &'static str,
    pub(crate) sku_op: String,
    pub(crate) mode: KernelMode,
    pub(crate) layout: ConvLayout,
    pub(crate) batch: usize,
    pub(crate) channels: usize,
    pub(crate) input: [usize; N],
    pub(crate) output: [usize; N],
    /// Adaptive modes: unit windows (their windows follow from the
    /// extents).
    pub(crate) window: Window<N>,
    pub(crate) count_include_pad: bool,
    pub(crate) divisor_override: usize,
    pub(crate) norm_p: f32,
}

/// Compiled kernels and launch parameters of one pooling problem.
#[derive(Debug)]
pub(crate) struct PoolCore {
    op: &'static str,
    params: PoolParams,
    mode: KernelMode,
    layout: ConvLayout,
    x_shape: Vec<usize>,
    y_shape: Vec<usize>,
    fw: Function,
    bw: Function,
    /// Fast paths `[v1, vN]` (see pool.cu): channels-last window FW/BW,
    /// the global-average reduction FW and broadcast BW.
    fw_cl: [Function; 2],
    bw_cl: [Function; 2],
    fw_global_avg: [Function; 2],
    bw_global_avg: [Function; 2],
    /// Elements per 16 bytes (the vN width).
    vec: usize,
    sku: KernelSku,
}

/// Which of the `[v1, vN]` fast kernels a launch uses and its thread count.
fn vec_choice(vec: usize, vec_ok: bool, n: i64) -> (usize, i64) {
    if vec_ok && vec > 1 {
        (1, n / vec as i64)
    } else {
        (0, n)
    }
}

/// Every pointer 16-byte aligned (the vN kernels' vector accesses).
fn aligned16<T>(ptrs: &[DevPtr<T>]) -> bool {
    ptrs.iter().all(|p| p.addr() % 16 == 0)
}

/// `v` as i32, padded in front with `fill` to 3 axes.
fn pad3(op: &'static str, field: &str, v: &[usize], fill: i32) -> Result<[i32; 3]> {
    let mut o = [fill; 3];
    o[3 - v.len()..].copy_from_slice(&to_i32s(op, field, v)?);
    Ok(o)
}

impl PoolCore {
    pub(crate) fn new<const N: usize>(
        stream: &Stream,
        kind: ElementKind,
        pref: &PlanPreference,
        pb: PoolProblem<N>,
    ) -> Result<PoolCore> {
        let op = pb.op;
        pref.check_backend(op, &[BackendKind::Baracuda])?;
        // Always deterministic, no workspace, no alternatives: the other
        // preference fields are satisfied as asked.
        let x_shape = full_shape(pb.batch, pb.channels, &pb.input);
        let y_shape = full_shape(pb.batch, pb.channels, &pb.output);
        let w = &pb.window;
        let count = |s: &[usize]| {
            s.iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .filter(|&n| n <= i64::MAX as usize)
                .ok_or_else(|| Error::Overflow {
                    op,
                    what: format!("element count of {s:?}"),
                })
        };
        let params = PoolParams {
            n_out: count(&y_shape)? as i64,
            n_in: count(&x_shape)? as i64,
            batch: to_i32(op, "batch", pb.batch)?,
            channels: to_i32(op, "channels", pb.channels)?,
            input: pad3(op, "input", &pb.input, 1)?,
            output: pad3(op, "output", &pb.output, 1)?,
            k: pad3(op, "kernel", &w.kernel, 1)?,
            s: pad3(op, "stride", &w.stride, 1)?,
            p: pad3(op, "padding", &w.padding, 0)?,
            pe: pad3(op, "padding_end", &w.padding_end, 0)?,
            dl: pad3(op, "dilation", &w.dilation, 1)?,
            mode: pb.mode as i32,
            channels_last: (pb.layout == ConvLayout::ChannelsLast) as i32,
            count_include_pad: pb.count_include_pad as i32,
            divisor_override: to_i32(op, "divisor_override", pb.divisor_override)?,
            norm_p: pb.norm_p,
            has_indices: 0,
        };
        let spec = typed_spec(&POOL, kind).ok_or_else(|| Error::Unsupported {
            op,
            what: format!("{kind} pooling"),
        })?;
        let m = stream.context().module(&spec)?;
        let arch: ArchSku = stream.context().device().arch;
        let sku = KernelSku {
            op: pb.sku_op,
            element: kind,
            backend: BackendKind::Baracuda,
            arch,
            variant: format!(
                "pool.cu pool_fw/pool_bw (32-bit channels-last and global-average fast paths) {:?} {:?}",
                pb.mode, pb.layout
            ),
            precision: PrecisionGuarantee::float(kind, true),
        };
        Ok(PoolCore {
            op,
            params,
            mode: pb.mode,
            layout: pb.layout,
            x_shape,
            y_shape,
            fw: m.function("pool_fw")?,
            bw: m.function("pool_bw")?,
            fw_cl: [m.function("pool_fw_cl_v1")?, m.function("pool_fw_cl_vn")?],
            bw_cl: [m.function("pool_bw_cl_v1")?, m.function("pool_bw_cl_vn")?],
            fw_global_avg: [
                m.function("pool_fw_global_avg_v1")?,
                m.function("pool_fw_global_avg_vn")?,
            ],
            bw_global_avg: [
                m.function("pool_bw_global_avg_v1")?,
                m.function("pool_bw_global_avg_vn")?,
            ],
            vec: 16 / kind.size_bytes().max(1),
            sku,
        })
    }

    pub(crate) fn sku(&self) -> &KernelSku {
        &self.sku
    }

    /// Output spatial extents.
    pub(crate) fn output_dims<const N: usize>(&self) -> [usize; N] {
        std::array::from_fn(|a| self.y_shape[2 + a])
    }

    fn is_max(&self) -> bool {
        matches!(self.mode, KernelMode::Max | KernelMode::AdaptiveMax)
    }

    /// Every element count fits the fast paths' 32-bit index math.
    fn fits_i32(&self) -> bool {
        self.params.n_in <= i32::MAX as i64 && self.params.n_out <= i32::MAX as i64
    }

    /// Global average: every output extent is 1 and its window is the
    /// whole input divided by `prod(in)` (adaptive avg to 1x1, or an avg
    /// window equal to the input with no padding and no divisor override),
    /// with counts in i32. Takes the `pool_{fw,bw}_global_avg` kernels.
    fn global_avg(&self) -> bool {
        let p = &self.params;
        let whole_window = self.mode == KernelMode::Avg
            && p.k == p.input
            && p.p == [0, 0, 0]
            && p.pe == [0, 0, 0]
            && p.dl == [1, 1, 1]
            && p.divisor_override == 0;
        (self.mode == KernelMode::AdaptiveAvg || whole_window)
            && p.output == [1, 1, 1]
            && self.fits_i32()
    }

    /// Undilated max / avg windows on channels-last tensors take the fast
    /// kernels.
    fn window_cl(&self) -> bool {
        matches!(self.mode, KernelMode::Max | KernelMode::Avg)
            && self.params.dl == [1, 1, 1]
            && self.layout == ConvLayout::ChannelsLast
            && self.fits_i32()
    }

    fn launch_cfg(&self, stream: &Stream, n: i64) -> LaunchConfig {
        let threads = 256u32;
        let sms = stream.context().device().sm_count.max(1) as u64;
        // Grid-stride: enough CTAs to fill the GPU several times over,
        // never more than one per 256 elements.
        let blocks = (n as u64).div_ceil(threads as u64).min(sms * 32).max(1);
        LaunchConfig::linear(blocks as u32, threads)
    }

    pub(crate) fn run_fw<T: Element, const R: usize>(
        &self,
        stream: &Stream,
        args: PoolArgs<'_, T, R>,
    ) -> Result<()> {
        let (op, l, ctx) = (self.op, self.layout, stream.context().id());
        check_tensor(op, "x", &args.x, &self.x_shape, l, ctx)?;
        check_tensor(op, "y", &args.y.as_const(), &self.y_shape, l, ctx)?;
        let mut params = self.params;
        let mut outputs = vec![byte_span("y", &args.y.as_const())];
        let idx = match &args.indices {
            Some(i) if self.is_max() => {
                params.has_indices = 1;
                check_tensor(op, "indices", &i.as_const(), &self.y_shape, l, ctx)?;
                outputs.push(byte_span("indices", &i.as_const()));
                i.data().ptr()
            }
            Some(_) => {
                return Err(Error::InvalidArgument {
                    op,
                    arg: "indices",
                    reason: "only max pooling writes indices".into(),
                })
            }
            None => DevPtrMut::NULL,
        };
        check_disjoint(op, &outputs, &[byte_span("x", &args.x)])?;
        let (x, y) = (args.x.data().ptr(), args.y.data().ptr());
        if params.n_out == 0 {
            return Ok(());
        }
        if self.global_avg() {
            return self.run_fw_global_avg(stream, x, y);
        }
        let mut a = LaunchArgs::new();
        a.push(params)?.push(x)?.push(y)?.push(idx)?;
        let (f, threads) = if self.window_cl() {
            let ok = self.params.channels as usize % self.vec == 0
                && aligned16(&[x, y.as_const()]);
            let (v, t) = vec_choice(self.vec, ok, params.n_out);
            (&self.fw_cl[v], t)
        } else {
            (&self.fw, params.n_out)
        };
        // SAFETY: x, y and indices were checked against the problem's
        // shapes, dense layout and context above, and the outputs overlap
        // nothing; the kernel reads only
        // in-window x elements and writes n_out outputs (and indices only
        // when has_indices). The vN kernel runs only when channels are a
        // multiple of its width and x, y are 16-byte aligned; the 32-bit
        // kernels only when every count fits in i32. The args match the
        // pool_fw signature all of them share.
        unsafe { f.launch(stream, self.launch_cfg(stream, threads), &mut a) }
    }

    pub(crate) fn run_bw<T: Element, const R: usize>(
        &self,
        stream: &Stream,
        args: PoolBwArgs<'_, T, R>,
    ) -> Result<()> {
        let (op, l, ctx) = (self.op, self.layout, stream.context().id());
        check_tensor(op, "dy", &args.dy, &self.y_shape, l, ctx)?;
        let mut inputs = vec![byte_span("dy", &args.dy)];
        let missing = |arg: &'static str| Error::InvalidArgument {
            op,
            arg,
            reason: format!("the {:?} backward needs it", self.mode),
        };
        let idx = if self.is_max() {
            let i = args.indices.as_ref().ok_or_else(|| missing("indices"))?;
            check_tensor(op, "indices", i, &self.y_shape, l, ctx)?;
            inputs.push(byte_span("indices", i));
            i.data().ptr()
        } else {
            DevPtr::NULL
        };
        let (x, y) = if self.mode == KernelMode::Lp {
            let x = args.x.as_ref().ok_or_else(|| missing("x"))?;
            let y = args.y.as_ref().ok_or_else(|| missing("y"))?;
            check_tensor(op, "x", x, &self.x_shape, l, ctx)?;
            check_tensor(op, "y", y, &self.y_shape, l, ctx)?;
            inputs.extend([byte_span("x", x), byte_span("y", y)]);
            (x.data().ptr(), y.data().ptr())
        } else {
            (DevPtr::NULL, DevPtr::NULL)
        };
        let dx_view = args.dx.as_const();
        check_tensor(op, "dx", &dx_view, &self.x_shape, l, ctx)?;
        check_disjoint(op, &[byte_span("dx", &dx_view)], &inputs)?;
        let (dy, dx) = (args.dy.data().ptr(), args.dx.data().ptr());
        if self.params.n_in == 0 {
            return Ok(());
        }
        let mut a = LaunchArgs::new();
        a.push(self.params)?
            .push(dy)?
            .push(idx)?
            .push(x)?
            .push(y)?
            .push(dx)?;
        let n_in = self.params.n_in;
        let (f, threads) = if self.global_avg() {
            let in_sp = self.params.input.iter().product::<i32>() as usize;
            let contiguous = if self.layout == ConvLayout::ChannelsLast {
                self.params.channels as usize % self.vec == 0 && aligned16(&[dy])
            } else {
                in_sp % self.vec == 0
            };
            let ok = contiguous && n_in as usize % self.vec == 0 && aligned16(&[dx.as_const()]);
            let mut b = LaunchArgs::new();
            b.push(self.params)?.push(dy)?.push(dx)?;
            let (v, t) = vec_choice(self.vec, ok, n_in);
            // SAFETY: dy and dx were checked above against the problem's
            // shapes, layout and context; every count fits in i32; the vN
            // kernel runs only when its vectors stay within one plane
            // (checked) and dx (and dy for channels-last) are 16-byte
            // aligned. The args match pool_bw_global_avg's signature.
            return unsafe {
                self.bw_global_avg[v].launch(stream, self.launch_cfg(stream, t), &mut b)
            };
        } else if self.window_cl() {
            let ok = self.params.channels as usize % self.vec == 0
                && aligned16(&[dy, dx.as_const()]);
            let (v, t) = vec_choice(self.vec, ok, n_in);
            (&self.bw_cl[v], t)
        } else {
            (&self.bw, n_in)
        };
        // SAFETY: every operand the mode reads was checked above against
        // the problem's shapes, layout and context (the unused ones are
        // null and never dereferenced for this mode), and dx overlaps none
        // of them; dx receives n_in writes.
        // The fast kernels share pool_bw's signature (they ignore x and y),
        // run only when counts fit in i32, and the vN one only with
        // channels a multiple of its width and 16-byte aligned dy, dx.
        unsafe { f.launch(stream, self.launch_cfg(stream, threads), &mut a) }
    }

    /// Global-average forward (see `global_avg`) on checked addresses.
    fn run_fw_global_avg<T>(&self, stream: &Stream, x: DevPtr<T>, y: DevPtrMut<T>) -> Result<()>
    where
        T: Copy + 'static,
    {
        let p = &self.params;
        let in_sp = p.input.iter().product::<i32>() as usize;
        let channels = p.channels as usize;
        let channels_last = self.layout == ConvLayout::ChannelsLast;
        let ok = if channels_last {
            channels % self.vec == 0 && aligned16(&[x, y.as_const()])
        } else {
            in_sp % self.vec == 0 && aligned16(&[x])
        };
        let v = usize::from(ok && self.vec > 1);
        let sms = stream.context().device().sm_count.max(1) as u64;
        // Both kernels grid-stride over their work items, so the grid is
        // capped at 32 CTAs per SM like launch_cfg.
        let cfg = if channels_last {
            // One (32, 8) CTA per (sample, 32 channel-vectors). E.g.
            // [64, 2048, 7, 7] bf16: 2048 / 8 = 256 vectors -> 8 CTAs per
            // sample, 512 CTAs.
            let width = if v == 1 { self.vec } else { 1 };
            let blocks = (p.batch as u64) * (channels / width).div_ceil(32) as u64;
            LaunchConfig {
                grid: (blocks.min(sms * 32).max(1) as u32, 1, 1),
                block: (32, 8, 1),
                smem_bytes: 0,
            }
        } else {
            // One warp per (n, c) plane, 8 warps per CTA.
            let planes = p.batch as u64 * channels as u64;
            LaunchConfig::linear(planes.div_ceil(8).min(sms * 32).max(1) as u32, 256)
        };
        let mut a = LaunchArgs::new();
        a.push(*p)?.push(x)?.push(y)?;
        // SAFETY: run_fw checked x and y against the problem's shapes,
        // dense layout and context; global_avg() guarantees every count
        // fits the kernel's 32-bit index math. The kernel reads the n_in
        // elements of x and writes the n_out of y. The vN kernel runs only
        // when its vectors stay within one channel row (channels % V == 0,
        // channels-last) or one plane (prod(in) % V == 0, channels-first)
        // and the pointers it vector-accesses are 16-byte aligned. The args
        // match pool_fw_global_avg's (params, x, y) signature, and the
        // block shape is the (32, 8) its channels-last branch assumes.
        unsafe { self.fw_global_avg[v].launch(stream, cfg, &mut a) }
    }
}

/// The reduction of a pooling plan, chosen by type: [`PoolMax`] or
/// [`PoolAvg`] (for windowed and adaptive pooling alike).
pub trait PoolReduce: Send + Sync + std::fmt::Debug + 'static {
    /// `"max"` or `"avg"`.
    const NAME: &'static str;
    #[doc(hidden)]
    const MAX: bool;
}

/// Maximum (NaN propagates); optionally writes argmax indices.
#[derive(Debug)]
pub struct PoolMax;
/// Mean; see `count_include_pad` and `divisor_override`.
#[derive(Debug)]
pub struct PoolAvg;
impl PoolReduce for PoolMax {
    const NAME: &'static str = "max";
    const MAX: bool = true;
}
impl PoolReduce for PoolAvg {
    const NAME: &'static str = "avg";
    const MAX: bool = false;
}

pool_plan!(
    /// Max or average pooling (`M`) of spatial rank `N` on rank-`R = N + 2`
    /// tensors.
    ///
    /// Output `o` pools the taps `o*stride - padding + j*dilation`,
    /// `j < kernel`, per spatial axis, that lie in the input. Max:
    /// `y[o] = max x` over them (NaN wins) and `indices[o]` the flat
    /// spatial input index of the first maximum. Avg: `y[o] = sum x /
    /// divisor(o)`, the divisor `divisor_override`, else the window
    /// clipped to `[-padding, input + padding)` (`count_include_pad`),
    /// else the count of in-bounds taps. Backward (a gather, no atomics):
    /// max `dx[i] = sum of dy[o] over the outputs with indices[o] == i`;
    /// avg `dx[i] = sum of dy[o] / divisor(o) over the windows holding i`.
    ///
    /// # Shapes
    /// `x`, `dx`: `[batch, channels, input...]`; `y`, `dy` and `indices`:
    /// `[batch, channels, output...]` (see [`PoolDescriptor::output`]).
    /// # Layout
    /// Dense channels-first or channels-last (descriptor's `layout`);
    /// strides of extent-1 dims are free. No workspace: `workspace_size`
    /// and `bw_workspace_size` are 0 and the `workspace` argument is not
    /// read.
    /// # Aliasing
    /// None: `y` and `indices` (forward) and `dx` (backward) are indexed
    /// unlike every input, so an output overlapping an input or the other
    /// output is `InvalidArgument` naming it, and nothing is written.
    /// # Dtypes
    /// f32, f64, f16, bf16 (f32 accumulation; f64 in f64); indices i64.
    /// # Errors
    /// From `select`: `InvalidDescriptor` (zero extents, a kernel, stride
    /// or dilation of 0, padding above half the kernel, empty output, a
    /// divisor override of 0 or on max), `Overflow` (an extent or element
    /// count past `usize` or `i64`), `DtypeMismatch` when `desc.element`
    /// is not `T`, `Unsupported` (another dtype, a size past 2^31 - 1),
    /// `PreferenceRejected` for a backend other than baracuda, and the
    /// kernel JIT's errors. From `run` and `run_bw`: `ShapeMismatch`;
    /// `InvalidArgument` (strides not the layout's dense ones, indices on
    /// avg, missing indices in max backward, overlapping outputs);
    /// `ContextMismatch` for an operand on another context.
    [T: Element, M: PoolReduce, const N: usize, const R: usize] PoolPlan<T, M, N, R>,
    (T, M),
    PoolDescriptor<N>
);

rank_aliases!("nn.MaxPool", PoolPlan<T, PoolMax> => MaxPool1dPlan, MaxPool2dPlan, MaxPool3dPlan);
rank_aliases!("nn.AvgPool", PoolPlan<T, PoolAvg> => AvgPool1dPlan, AvgPool2dPlan, AvgPool3dPlan);

const OP: &str = "pool";

pub(crate) fn validate_pool<const N: usize>(
    d: &PoolDescriptor<N>,
    max: bool,
) -> Result<[usize; N]> {
    let out = d.output()?;
    if let Some(div) = d.divisor_override {
        if div == 0 {
            return Err(invalid(OP, "divisor_override", div, "must be > 0"));
        }
        if max {
            return Err(invalid(
                OP,
                "divisor_override",
                div,
                "applies to average pooling only",
            ));
        }
    }
    Ok(out)
}

impl<T: Element, M: PoolReduce, const N: usize, const R: usize> PoolPlan<T, M, N, R>
where
    Rank<N, R>: SpatialRank,
{
    fn core(stream: &Stream, d: &PoolDescriptor<N>, pref: &PlanPreference) -> Result<PoolCore> {
        check_dtype::<T>(OP, d.element)?;
        let output = validate_pool(d, M::MAX)?;
        let mode = if M::MAX {
            KernelMode::Max
        } else {
            KernelMode::Avg
        };
        PoolCore::new(
            stream,
            T::KIND,
            pref,
            PoolProblem {
                op: OP,
                sku_op: format!("{}_pool{N}d", M::NAME),
                mode,
                layout: d.layout,
                batch: d.batch,
                channels: d.channels,
                input: d.input,
                output,
                window: d.window,
                count_include_pad: d.count_include_pad,
                divisor_override: d.divisor_override.unwrap_or(0),
                norm_p: 1.0,
            },
        )
    }
}

/// A pooling plan: the struct `$plan` (generic over `$gen`, which names
/// `T`, `N` and `R`; `$phantom` holds the type parameters without a
/// field), its [`Plan`](crate::Plan) and [`Backward`](crate::Backward) on
/// descriptor `$desc`, and `output_dims`. The plan's inherent
/// `core(stream, desc, pref)` builds its [`PoolCore`]; `run` and `run_bw`
/// go through the core (`dx` from `dy`, and `indices` for max, `x` and `y`
/// for Lp), with no workspace and a deterministic gather.
macro_rules! pool_plan {
    ($(#[$doc:meta])* [$($gen:tt)*] $name:ident<$($arg:tt),*>, $phantom:ty, $desc:ty) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name<$($gen)*>
        where
            $crate::conv::Rank<N, R>: $crate::conv::SpatialRank,
        {
            core: $crate::conv::pool::PoolCore,
            _t: std::marker::PhantomData<$phantom>,
        }

        $crate::conv::pool::pool_plan!(@impls [$($gen)*] $name<$($arg),*>, $desc);
    };
    (@impls [$($gen:tt)*] $plan:ty, $desc:ty) => {
        impl<$($gen)*> $crate::Plan for $plan
        where
            $crate::conv::Rank<N, R>: $crate::conv::SpatialRank,
        {
            type Descriptor = $desc;
            type Args<'a> = $crate::conv::PoolArgs<'a, T, R>;

            fn select(
                stream: &Stream,
                d: &$desc,
                pref: &baracuda_kernels_types::PlanPreference,
            ) -> Result<Self> {
                Ok(Self {
                    core: Self::core(stream, d, pref)?,
                    _t: std::marker::PhantomData,
                })
            }

            fn sku(&self) -> &baracuda_kernels_types::KernelSku {
                self.core.sku()
            }

            fn workspace_size(&self) -> usize {
                0
            }

            fn run(
                &self,
                stream: &Stream,
                _workspace: Workspace<'_>,
                args: Self::Args<'_>,
            ) -> Result<()> {
                self.core.run_fw(stream, args)
            }
        }

        impl<$($gen)*> $plan
        where
            $crate::conv::Rank<N, R>: $crate::conv::SpatialRank,
        {
            /// Output spatial extents.
            pub fn output_dims(&self) -> [usize; N] {
                self.core.output_dims()
            }
        }

        impl<$($gen)*> $crate::Backward for $plan
        where
            $crate::conv::Rank<N, R>: $crate::conv::SpatialRank,
        {
            type BwArgs<'a> = $crate::conv::PoolBwArgs<'a, T, R>;

            fn grads(&self) -> baracuda_kernels_types::Grads {
                baracuda_kernels_types::Grad::X.into()
            }

            fn bw_workspace_size(&self, _wants: baracuda_kernels_types::Grads) -> usize {
                0
            }

            fn run_bw(
                &self,
                stream: &Stream,
                _workspace: Workspace<'_>,
                args: Self::BwArgs<'_>,
            ) -> Result<()> {
                self.core.run_bw(stream, args)
            }
        }
    };
}
pub(crate) use pool_plan;


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_sizes_follow_pytorch() {
        // ResNet stem pool: 112 -> 56 with k3 s2 p1.
        let d = Pool2dDescriptor::new(1, 1, [112, 112], [3, 3], ElementKind::F32)
            .with_stride([2, 2])
            .with_padding([1, 1]);
        assert_eq!(validate_pool(&d, true).unwrap(), [56, 56]);
        // ceil_mode: 5 with k2 s2 -> 3 (floor gives 2)
        let d = Pool1dDescriptor::new(1, 1, [5], [2], ElementKind::F32).with_ceil_mode(true);
        assert_eq!(validate_pool(&d, false).unwrap(), [3]);
        // dilation 2, k3 s1 over 9: span 5 -> 5 outputs
        let d = Pool1dDescriptor::new(1, 1, [9], [3], ElementKind::F32)
            .with_stride([1])
            .with_dilation([2]);
        assert_eq!(validate_pool(&d, true).unwrap(), [5]);
    }

    #[test]
    fn descriptor_errors() {
        let field = |r: Result<[usize; 2]>| match r {
            Err(Error::InvalidDescriptor { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        let d = Pool2dDescriptor::new(1, 1, [8, 8], [3, 3], ElementKind::F32);
        assert_eq!(
            field(validate_pool(&d.with_padding([2, 0]), false)),
            "padding"
        );
        assert_eq!(
            field(validate_pool(&d.with_padding_ends([1, 1], [2, 1]), false)),
            "padding_end"
        );
        // half the kernel, not of the dilated span (PyTorch)
        assert_eq!(
            field(validate_pool(
                &d.with_padding([2, 2]).with_dilation([2, 2]),
                true
            )),
            "padding"
        );
        assert!(validate_pool(&d.with_padding([1, 1]).with_dilation([2, 2]), true).is_ok());
        assert_eq!(
            field(validate_pool(&d.with_stride([0, 1]), false)),
            "stride"
        );
        assert_eq!(
            field(validate_pool(&d.with_divisor_override(Some(0)), false)),
            "divisor_override"
        );
        assert_eq!(
            field(validate_pool(&d.with_divisor_override(Some(2)), true)),
            "divisor_override"
        );
        let small = Pool2dDescriptor::new(1, 1, [2, 8], [3, 3], ElementKind::F32);
        assert_eq!(field(validate_pool(&small, true)), "output");
        let mut z = d;
        z.channels = 0;
        assert_eq!(field(validate_pool(&z, true)), "channels");
    }

    #[test]
    fn params_layout_is_c_compatible() {
        // pool.cu: 2 x i64, then 2 + 21 + 4 ints, a float, an int = 132
        // bytes, padded to 136 for the 8-byte alignment, as nvcc does.
        assert_eq!(std::mem::size_of::<PoolParams>(), 136);
        assert_eq!(std::mem::align_of::<PoolParams>(), 8);
    }
}
