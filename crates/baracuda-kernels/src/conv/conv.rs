//! N-d convolution through cuDNN (PyTorch `nn.Conv1d/2d/3d`).
//!
//! `y[n, k, o] = sum_{c in group(k), r} x[n, c, o*stride - pad + r*dilation] * w[k, c, r]`
//! (cross-correlation; out-of-range x reads as 0). Backward:
//! `dx = conv_transpose(dz, w)`, `dw[k, c, r] = sum_{n, o} dz[n, k, o] * x[n, c, ...]`,
//! `dbias[k] = sum_{n, o} dz[n, k, o]`, where `dz = dy` (or `dy` where the
//! output is > 0, when the descriptor's activation is ReLU).
//!
//! Engine choice, per direction, happens in `select`, on cuDNN's backend
//! (graph) API: see `cudnn_core.rs` for the heuristics, filters,
//! measured autotuning and the legacy fallback. Padding that differs
//! before and after an axis runs through a zero-padded copy in the
//! workspace (`staging.rs`).

use std::marker::PhantomData;

use baracuda_driver::{Function, LaunchArgs, LaunchConfig, Stream};
use baracuda_kernels_types::{
    Activation, DevPtr, DevPtrMut, Element, Error, Grad, Grads, KernelSku, PlanPreference, Result,
    TensorMut, TensorRef, Workspace,
};

use super::cudnn_core::{ConvCore, Epilogue};
use super::cudnn_graph::{ConvAlgo, ConvDirection, CudnnConvProblem};
use super::descriptor::{full_shape, validate_common, ConvDescriptor};
use super::staging::{elementwise_grid, CudnnPadding, Staging};
use super::window::{to_i32, to_i32s};
use super::{check_dtype, ConvLayout, Rank, SpatialRank};
use crate::checks::{byte_span, check_disjoint, check_tensor};
use crate::{Backward, Plan};

/// Forward operands of a convolution or transposed convolution:
/// `y = act(op(x, w) + bias)`.
#[derive(Debug)]
pub struct ConvArgs<'a, T, const R: usize> {
    /// Input activations `[N, C_in, spatial...]` (layout strides).
    pub x: TensorRef<'a, T, R>,
    /// Filter: `[c_out, c_in/groups, kernel...]` for a convolution,
    /// `[c_in, c_out/groups, kernel...]` for a transposed one (layout
    /// strides).
    pub w: TensorRef<'a, T, R>,
    /// Bias `[c_out]`, dense, added per output channel when given.
    pub bias: Option<TensorRef<'a, T, 1>>,
    /// Output `[N, C_out, output...]` (layout strides), overwritten.
    pub y: TensorMut<'a, T, R>,
}

/// Backward operands of a convolution or transposed convolution; each
/// gradient is computed when given.
#[derive(Debug)]
pub struct ConvBwArgs<'a, T, const R: usize> {
    /// Input activations of the forward (read for `dw`).
    pub x: TensorRef<'a, T, R>,
    /// Filter (read for `dx`).
    pub w: TensorRef<'a, T, R>,
    /// Output of the forward; needed when the descriptor's activation is
    /// ReLU (the gradient passes where `y > 0`).
    pub y: Option<TensorRef<'a, T, R>>,
    /// Gradient of the output.
    pub dy: TensorRef<'a, T, R>,
    /// Gradient of the input, overwritten.
    pub dx: Option<TensorMut<'a, T, R>>,
    /// Gradient of the filter, overwritten.
    pub dw: Option<TensorMut<'a, T, R>>,
    /// Gradient of the bias `[c_out]`, overwritten. Deterministic
    /// (fixed-order reduction).
    pub dbias: Option<TensorMut<'a, T, 1>>,
}

rank_aliases!("convolution forward args", ConvArgs<'a, T> => Conv1dArgs, Conv2dArgs, Conv3dArgs);
rank_aliases!("convolution backward args", ConvBwArgs<'a, T> => Conv1dBwArgs, Conv2dBwArgs, Conv3dBwArgs);

/// A convolution of spatial rank `N` on rank-`R = N + 2` tensors, through
/// cuDNN, with its algorithm for each direction chosen in `select`.
///
/// Forward (`run`): `y = act(conv(x, w) + bias)`, the bias and activation
/// (identity or ReLU, [`ConvDescriptor::activation`]) as one elementwise
/// pass after cuDNN's convolution. Backward ([`Backward::run_bw`]):
/// `dz = dy` (or `dy * (y > 0)` under ReLU, written to the workspace), then
/// `dx = conv_transpose(dz, w)`, `dw = corr(x, dz)`, `dbias = sum dz` over
/// batch and positions, each when asked.
///
/// Padding may differ before and after an axis (PyTorch's
/// `padding='same'` with an even kernel): cuDNN then runs the smaller
/// padding on both sides of a copy of `x` padded by the difference in the
/// workspace, and `dx` is cropped from a gradient computed there; the
/// workspace sizes count that copy.
///
/// # Shapes
/// `x`, `dx`: `[batch, c_in, input...]`, `w`, `dw`: `[c_out, c_in/groups,
/// filter...]`, `y`, `dy`: `[batch, c_out, output...]` (see
/// [`ConvDescriptor::output`]); bias, `dbias`: `[c_out]`.
/// # Layout
/// Dense in the descriptor's [`ConvLayout`] (NCHW-style or NHWC-style;
/// filters in the matching order); strides of extent-1 dims are free.
/// Shapes are always given as `[N, C, ...]`. Bias and `dbias` dense. The
/// workspace is `workspace_size()` bytes for `run` and
/// `bw_workspace_size(wants)` for `run_bw`.
/// # Aliasing
/// None: every output (`y`; `dx`, `dw`, `dbias`) differs in shape and
/// indexing from every input, so an output that overlaps an input (`x`,
/// `w`, `bias`; `x`, `w`, `y`, `dy`) or another output is
/// `InvalidArgument` naming it, and nothing is written.
/// # Dtypes
/// f32 (IEEE unless `allow_tf32`), f64, f16 and bf16 (f32 accumulation).
/// Others: `Unsupported`.
/// # Errors
/// `select`: `InvalidDescriptor` naming the field (a zero batch, channel
/// count, extent, kernel, stride, dilation or group count, groups not
/// dividing both channel counts, a window that does not fit the padded
/// input); `Overflow` when a padded extent does not fit in `usize`;
/// `DtypeMismatch` when `desc.element` is not `T`; `Unsupported` (another
/// dtype, activations other than identity and ReLU, an extent past
/// 2^31 - 1, or no cuDNN engine for a direction); `PreferenceRejected`
/// (a forced backend the problem has no path on: cuBLASLt and baracuda
/// run pointwise convolutions only; no algorithm within
/// `max_workspace_bytes` or deterministic when asked); `LibraryNotFound`
/// and `Cudnn` from loading and querying cuDNN. `run`, `run_bw`:
/// `ShapeMismatch`; `InvalidArgument` (strides not the layout's dense
/// ones; `y` missing under ReLU; overlapping outputs; operands not
/// 16-byte aligned when `CublasLt` was forced); `ContextMismatch` (an
/// operand or the workspace on another context, or a stream of another
/// context than `select`'s); `WorkspaceTooSmall`. Both only enqueue: no
/// allocation, no sync.
#[derive(Debug)]
pub struct ConvPlan<T: Element, const N: usize, const R: usize>
where
    Rank<N, R>: SpatialRank,
{
    desc: ConvDescriptor<N>,
    output: [usize; N],
    core: ConvCore,
    roles: Roles,
    /// `C`'s input through a padded copy, when cuDNN cannot run its
    /// padding as given.
    staging: Option<Staging<N>>,
    _t: PhantomData<T>,
}

/// The op name a plan's errors give, and how its passes map onto cuDNN's
/// directions of the convolution `C` the plan holds. A plain convolution is
/// `C`; a transposed one runs `C`'s backward data as its forward
/// ([`super::ConvTransposePlan`]). Errors name the plan's own arguments.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Roles {
    pub op: &'static str,
    /// The plan is the transposed convolution of `C`.
    pub transposed: bool,
}

/// A plain convolution's roles.
const CONV_ROLES: Roles = Roles {
    op: "conv",
    transposed: false,
};

rank_aliases!("nn.Conv", ConvPlan<T> => Conv1dPlan, Conv2dPlan, Conv3dPlan);

#[cfg(test)]
const OP: &str = CONV_ROLES.op;

/// The operands of one pass in the plan's own order: forward `(x, w, y)`,
/// backward data `(w, dz, dx)`, backward filter `(x, dz, dw)`.
type PassOperands<T> = (DevPtr<T>, DevPtr<T>, DevPtrMut<T>);

impl<T: Element, const N: usize, const R: usize> Plan for ConvPlan<T, N, R>
where
    Rank<N, R>: SpatialRank,
{
    type Descriptor = ConvDescriptor<N>;
    type Args<'a> = ConvArgs<'a, T, R>;

    fn select(stream: &Stream, desc: &ConvDescriptor<N>, pref: &PlanPreference) -> Result<Self> {
        Self::select_as(CONV_ROLES, &format!("conv{N}d"), stream, desc, [0; N], pref)
    }

    fn sku(&self) -> &KernelSku {
        &self.core.sku
    }

    fn workspace_size(&self) -> usize {
        self.stage_bytes() + self.core.workspace[self.dir(Pass::Forward).index()]
    }

    fn run(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: ConvArgs<'_, T, R>,
    ) -> Result<()> {
        let ConvArgs { x, w, bias, y } = args;
        let ctx = stream.context().id();
        let (op, layout) = (self.roles.op, self.desc.layout);
        self.core.check_stream(op, stream)?;
        let (channels, dims) = self.out_geometry();
        if let Some(b) = &bias {
            check_tensor(op, "bias", b, &[channels], ConvLayout::ChannelsFirst, ctx)?;
        }
        let (xs, ws, ys) = self.plan_shapes();
        check_tensor(op, "x", &x, &xs, layout, ctx)?;
        check_tensor(op, "w", &w, &ws, layout, ctx)?;
        check_tensor(op, "y", &y.as_const(), &ys, layout, ctx)?;
        let mut inputs = vec![byte_span("x", &x), byte_span("w", &w)];
        inputs.extend(bias.as_ref().map(|b| byte_span("bias", b)));
        check_disjoint(op, &[byte_span("y", &y.as_const())], &inputs)?;
        let relu = self.desc.activation == Activation::Relu;
        let kernels = if bias.is_some() || relu || self.staging.is_some() {
            Some(self.kernels()?)
        } else {
            None
        };
        workspace.check(op, self.workspace_size(), ctx)?;
        let (stage, rest) = self.split_stage(workspace, ctx)?;
        let y_ptr = y.data().ptr();
        let ops = (x.data().ptr(), w.data().ptr(), y_ptr);
        self.run_pass(stream, (stage, &rest), Pass::Forward, ops)?;
        match kernels {
            Some(k) if bias.is_some() || relu => launch_bias_act(
                stream,
                &k.bias_act,
                y_ptr,
                bias.as_ref().map_or(DevPtr::NULL, |b| b.data().ptr()),
                (self.desc.batch, channels, &dims),
                layout,
                relu,
            ),
            _ => Ok(()),
        }
    }
}

impl<T: Element, const N: usize, const R: usize> Backward for ConvPlan<T, N, R>
where
    Rank<N, R>: SpatialRank,
{
    type BwArgs<'a> = ConvBwArgs<'a, T, R>;

    fn grads(&self) -> Grads {
        Grad::X | Grad::Weight | Grad::Bias
    }

    fn bw_workspace_size(&self, wants: Grads) -> usize {
        let ws = &self.core.workspace;
        let pass = |g, p| {
            if wants.contains(g) {
                ws[self.dir(p).index()]
            } else {
                0
            }
        };
        let passes = pass(Grad::X, Pass::BackwardData).max(pass(Grad::Weight, Pass::BackwardFilter));
        let stage = if wants.contains(Grad::X) || wants.contains(Grad::Weight) {
            self.stage_bytes()
        } else {
            0
        };
        self.mask_bytes(wants) + stage + passes
    }

    fn run_bw(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: ConvBwArgs<'_, T, R>,
    ) -> Result<()> {
        let ConvBwArgs {
            x,
            w,
            y,
            dy,
            dx,
            dw,
            dbias,
        } = args;
        let wants = Grads::present(&[
            (Grad::X, dx.is_some()),
            (Grad::Weight, dw.is_some()),
            (Grad::Bias, dbias.is_some()),
        ]);
        let ctx = stream.context().id();
        let (op, layout) = (self.roles.op, self.desc.layout);
        self.core.check_stream(op, stream)?;
        let (xs, ws, ys) = self.plan_shapes();
        let (channels, dims) = self.out_geometry();
        // Every check before the first launch, so a bad argument writes
        // nothing.
        check_tensor(op, "x", &x, &xs, layout, ctx)?;
        check_tensor(op, "w", &w, &ws, layout, ctx)?;
        check_tensor(op, "dy", &dy, &ys, layout, ctx)?;
        if let Some(g) = &dx {
            check_tensor(op, "dx", &g.as_const(), &xs, layout, ctx)?;
        }
        if let Some(g) = &dw {
            check_tensor(op, "dw", &g.as_const(), &ws, layout, ctx)?;
        }
        if let Some(g) = &dbias {
            let cf = ConvLayout::ChannelsFirst;
            check_tensor(op, "dbias", &g.as_const(), &[channels], cf, ctx)?;
        }
        let mask = self.mask_bytes(wants);
        let y = match (y, mask) {
            (_, 0) => None,
            (Some(y), _) => {
                check_tensor(op, "y", &y, &ys, layout, ctx)?;
                Some(y)
            }
            (None, _) => {
                return Err(Error::InvalidArgument {
                    op,
                    arg: "y",
                    reason: "the ReLU backward reads the forward output".into(),
                })
            }
        };
        let mut inputs = vec![byte_span("x", &x), byte_span("w", &w), byte_span("dy", &dy)];
        inputs.extend(y.as_ref().map(|y| byte_span("y", y)));
        let outputs: Vec<_> = [
            dx.as_ref().map(|g| byte_span("dx", &g.as_const())),
            dw.as_ref().map(|g| byte_span("dw", &g.as_const())),
            dbias.as_ref().map(|g| byte_span("dbias", &g.as_const())),
        ]
        .into_iter()
        .flatten()
        .collect();
        check_disjoint(op, &outputs, &inputs)?;
        let kernels = if mask > 0 || dbias.is_some() || self.staging.is_some() {
            Some(self.kernels()?)
        } else {
            None
        };
        workspace.check(op, self.bw_workspace_size(wants), ctx)?;
        let (head, rest) = workspace.split_at(op, mask)?;

        // dz: dy, or dy masked by y > 0 in the head of the workspace (the
        // kernels are loaded whenever there is a mask).
        let dz = match (&y, &kernels) {
            (Some(y), Some(k)) => {
                let dz = head.check_ptr(op, mask, ctx)?.cast::<T>();
                let (dy, y) = (dy.data().ptr(), y.data().ptr());
                launch_relu_bw(stream, &k.relu_bw, dz, dy, y, n_elems(&ys))?;
                dz.as_const()
            }
            _ => dy.data().ptr(),
        };
        if dx.is_some() || dw.is_some() {
            // Stream order keeps the passes' uses of the staged copy apart.
            let (stage, rest) = self.split_stage(rest, ctx)?;
            if let Some(g) = &dx {
                let ops = (w.data().ptr(), dz, g.data().ptr());
                self.run_pass(stream, (stage, &rest), Pass::BackwardData, ops)?;
            }
            if let Some(g) = &dw {
                let ops = (x.data().ptr(), dz, g.data().ptr());
                self.run_pass(stream, (stage, &rest), Pass::BackwardFilter, ops)?;
            }
        }
        if let (Some(k), Some(g)) = (&kernels, &dbias) {
            launch_bias_bw(
                stream,
                &k.bias_bw,
                dz,
                g.data().ptr(),
                (self.desc.batch, channels, &dims),
                layout,
            )?;
        }
        Ok(())
    }
}

/// Elements of a tensor of `shape`.
fn n_elems(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// A pass of the plan (not of `C`): its forward and two gradients.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Pass {
    Forward,
    BackwardData,
    BackwardFilter,
}

/// Which operand of a pass (in the plan's order) is `C`'s input, and
/// whether the pass reads or writes it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum CInput {
    /// Input operand 0 or 1.
    Read(usize),
    /// The output.
    Written,
}

impl<T: Element, const N: usize, const R: usize> ConvPlan<T, N, R>
where
    Rank<N, R>: SpatialRank,
{
    /// `select` with the errors, passes and SKU (`sku_name`) of another
    /// plan built on this one; `output_padding` is a transposed plan's
    /// (zeros for a convolution), see `staging.rs`.
    pub(crate) fn select_as(
        roles: Roles,
        sku_name: &str,
        stream: &Stream,
        desc: &ConvDescriptor<N>,
        output_padding: [usize; N],
        pref: &PlanPreference,
    ) -> Result<Self> {
        let op = roles.op;
        let d = desc;
        validate::<T, N>(op, d)?;
        let padding = CudnnPadding::of(&d.window, &d.input, &output_padding);
        // The window cuDNN runs, over the extents it sees.
        let w = padding.window(&d.window);
        let output = w.conv_output(op, &padding.padded)?;
        let problem = CudnnConvProblem {
            dtype: T::KIND,
            channels_last: d.layout == ConvLayout::ChannelsLast,
            batch: to_i32(op, "batch", d.batch)?,
            c_in: to_i32(op, "c_in", d.c_in)?,
            c_out: to_i32(op, "c_out", d.c_out)?,
            x_spatial: to_i32s(op, "input", &padding.padded)?,
            w_spatial: to_i32s(op, "kernel", &w.kernel)?,
            y_spatial: to_i32s(op, "output", &output)?,
            pad: to_i32s(op, "padding", &w.padding)?,
            pad_end: to_i32s(op, "padding_end", &w.padding_end)?,
            stride: to_i32s(op, "stride", &w.stride)?,
            dilation: to_i32s(op, "dilation", &w.dilation)?,
            groups: to_i32(op, "groups", d.groups)?,
        };
        let core = ConvCore::select(op, stream, problem, pref, sku_name)?;
        let staging = Staging::new(
            (d.batch, d.c_in),
            &d.input,
            &padding,
            d.layout,
            || Ok(core.kernels.as_ref().map_err(Clone::clone)?.pad.clone()),
        )?;
        // The padded copy counts against the workspace cap, with each
        // direction's own bytes.
        let stage = staging.as_ref().map_or(0, Staging::bytes::<T>);
        for bytes in core.workspace {
            pref.check_workspace(op, stage + bytes)?;
        }
        Ok(ConvPlan {
            desc: *desc,
            output,
            core,
            roles,
            staging,
            _t: PhantomData,
        })
    }

    /// Output spatial extents of the plan (of `C` for a convolution, of
    /// `C`'s input for a transposed one).
    pub fn output_dims(&self) -> [usize; N] {
        self.out_geometry().1
    }
    /// Output spatial extents of `C`.
    pub(crate) fn c_output(&self) -> [usize; N] {
        self.output
    }
    /// The cuDNN algorithm chosen for `dir` of `C`. Where cuBLASLt runs the
    /// direction (a pointwise convolution, see the SKU), this is the one
    /// operands that are not 16-byte aligned fall back on, or None when
    /// cuBLASLt was forced.
    pub fn algorithm(&self, dir: ConvDirection) -> Option<ConvAlgo> {
        self.core.cudnn.chosen(dir)
    }

    /// The elementwise kernels, or the error that kept them from loading.
    fn kernels(&self) -> Result<&Epilogue> {
        self.core.kernels.as_ref().map_err(Clone::clone)
    }

    /// `C`'s direction that runs pass `p` of the plan.
    fn dir(&self, p: Pass) -> ConvDirection {
        match (p, self.roles.transposed) {
            (Pass::Forward, false) | (Pass::BackwardData, true) => ConvDirection::Forward,
            (Pass::BackwardData, false) | (Pass::Forward, true) => ConvDirection::BackwardData,
            (Pass::BackwardFilter, _) => ConvDirection::BackwardFilter,
        }
    }

    /// Where `C`'s input is among pass `p`'s operands (the plan's order):
    /// a convolution's `x` (read) or `dx` (written); a transposed one's
    /// `y` (written) or `dz` (read).
    fn c_input(&self, p: Pass) -> CInput {
        match (p, self.roles.transposed) {
            (Pass::Forward, false) | (Pass::BackwardFilter, false) => CInput::Read(0),
            (Pass::BackwardData, false) | (Pass::Forward, true) => CInput::Written,
            (Pass::BackwardData, true) | (Pass::BackwardFilter, true) => CInput::Read(1),
        }
    }

    /// Full shapes of `C`'s `x`, `w` and `y`.
    fn c_shapes(&self) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
        let d = &self.desc;
        (
            full_shape(d.batch, d.c_in, &d.input),
            full_shape(d.c_out, d.c_in / d.groups, &d.window.kernel),
            full_shape(d.batch, d.c_out, &self.output),
        )
    }

    /// Full shapes of the plan's own `x`, `w` and `y`.
    fn plan_shapes(&self) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
        let (xs, ws, ys) = self.c_shapes();
        if self.roles.transposed {
            (ys, ws, xs)
        } else {
            (xs, ws, ys)
        }
    }

    /// Channels and spatial extents of the plan's `y`.
    fn out_geometry(&self) -> (usize, [usize; N]) {
        let d = &self.desc;
        if self.roles.transposed {
            (d.c_in, d.input)
        } else {
            (d.c_out, self.output)
        }
    }

    /// Workspace bytes of the ReLU-masked `dy` (256-aligned), when the
    /// gradients in `wants` need it.
    fn mask_bytes(&self, wants: Grads) -> usize {
        if self.desc.activation != Activation::Relu || wants.is_empty() {
            return 0;
        }
        let n: usize = self.plan_shapes().2.iter().product();
        (n * std::mem::size_of::<T>()).next_multiple_of(256)
    }

    /// Workspace bytes of the padded copy of `C`'s input (0 when cuDNN
    /// runs the padding as given).
    fn stage_bytes(&self) -> usize {
        self.staging.as_ref().map_or(0, Staging::bytes::<T>)
    }

    /// Split the head of `workspace` off for the padded copy of `C`'s
    /// input: its address (null when nothing is staged) and the rest.
    fn split_stage<'w>(
        &self,
        workspace: Workspace<'w>,
        ctx: usize,
    ) -> Result<(DevPtrMut<T>, Workspace<'w>)> {
        let op = self.roles.op;
        let bytes = self.stage_bytes();
        let (head, rest) = workspace.split_at(op, bytes)?;
        Ok((head.check_ptr(op, bytes, ctx)?.cast::<T>(), rest))
    }

    /// Enqueue pass `p` on checked operands in the plan's own order (see
    /// [`PassOperands`]); when the plan stages `C`'s input, through
    /// `stage` (from [`ConvPlan::split_stage`]). `rest` is the workspace
    /// of `C`'s direction.
    fn run_pass(
        &self,
        stream: &Stream,
        (stage, rest): (DevPtrMut<T>, &Workspace<'_>),
        p: Pass,
        ops: PassOperands<T>,
    ) -> Result<()> {
        let (mut a, mut b, mut out) = ops;
        let mut crop = None;
        if let Some(s) = &self.staging {
            match self.c_input(p) {
                CInput::Read(k) => {
                    let src = if k == 0 { &mut a } else { &mut b };
                    s.pad(stream, *src, stage)?;
                    *src = stage.as_const();
                }
                CInput::Written => {
                    crop = Some((s, out));
                    out = stage;
                }
            }
        }
        // C's operand order per direction: forward (x, w, y), backward data
        // (w, dy, dx), backward filter (x, dy, dw). The transposed plan's
        // forward (x, w, y) is C's backward data (w, x, y); its backward
        // data (w, dz, dx) is C's forward (dz, w, dx); its backward filter
        // (x, dz, dw) is C's (dz, x, dw): the first two swap in each.
        if self.roles.transposed {
            std::mem::swap(&mut a, &mut b);
        }
        let untyped = (a.cast::<u8>(), b.cast::<u8>(), out.cast::<u8>());
        self.core
            .run(self.roles.op, stream, self.dir(p), untyped, rest)?;
        match crop {
            Some((s, user)) => s.crop(stream, stage.as_const(), user),
            None => Ok(()),
        }
    }
}

/// Every check of a convolution descriptor, in `select`'s order; the
/// output extents.
fn validate<T: Element, const N: usize>(
    op: &'static str,
    d: &ConvDescriptor<N>,
) -> Result<[usize; N]> {
    check_dtype::<T>(op, d.element)?;
    let w = &d.window;
    validate_common(op, (d.batch, d.c_in, d.c_out), &d.input, w, d.groups)?;
    check_activation(op, d.activation)?;
    w.conv_output(op, &d.input)
}

/// The activations the bias epilogue applies.
fn check_activation(op: &'static str, a: Activation) -> Result<()> {
    match a {
        Activation::Identity | Activation::Relu => Ok(()),
        other => Err(Error::Unsupported {
            op,
            what: format!("activation {} (identity and relu are)", other.name()),
        }),
    }
}

/// `y = act(y + b)` in place over `(batch, channels, dims)` in `layout`;
/// a null `b` adds no bias.
fn launch_bias_act<T: Element>(
    stream: &Stream,
    f: &Function,
    y: DevPtrMut<T>,
    b: DevPtr<T>,
    (batch, channels, dims): (usize, usize, &[usize]),
    layout: ConvLayout,
    relu: bool,
) -> Result<()> {
    let spatial = dims.iter().product::<usize>() as i64;
    let n = (batch * channels) as i64 * spatial;
    if n == 0 {
        return Ok(());
    }
    let mut a = LaunchArgs::new();
    // `select` checked every size fits cuDNN's i32 descriptors.
    a.push(y)?
        .push(b)?
        .push(n)?
        .push(channels as i32)?
        .push(spatial)?;
    a.push((layout == ConvLayout::ChannelsLast) as i32)?
        .push(relu as i32)?;
    // SAFETY: y holds n elements and b (when not null) `channels` (checked
    // by the caller); the argument list matches bias_act_fw's signature.
    unsafe { f.launch(stream, elementwise_grid(n as u64), &mut a) }
}

/// `dz = y > 0 ? dy : 0` over `n` elements of one dense layout.
fn launch_relu_bw<T: Element>(
    stream: &Stream,
    f: &Function,
    dz: DevPtrMut<T>,
    dy: DevPtr<T>,
    y: DevPtr<T>,
    n: usize,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let mut a = LaunchArgs::new();
    a.push(dz)?.push(dy)?.push(y)?.push(n as i64)?;
    // SAFETY: dy and y were checked to hold n elements in the same dense
    // layout, dz is workspace of at least n elements (mask_bytes); the
    // argument list matches relu_bw's signature.
    unsafe { f.launch(stream, elementwise_grid(n as u64), &mut a) }
}

/// `db[c] = sum of dy[n, c, ...]` over `(batch, channels, dims)`.
fn launch_bias_bw<T: Element>(
    stream: &Stream,
    f: &Function,
    dy: DevPtr<T>,
    db: DevPtrMut<T>,
    (batch, channels, dims): (usize, usize, &[usize]),
    layout: ConvLayout,
) -> Result<()> {
    let spatial = dims.iter().product::<usize>() as i64;
    let mut a = LaunchArgs::new();
    // `select` checked every size fits cuDNN's i32 descriptors.
    a.push(dy)?
        .push(db)?
        .push(batch as i32)?
        .push(channels as i32)?
        .push(spatial)?;
    a.push((layout == ConvLayout::ChannelsLast) as i32)?;
    // SAFETY: dy holds batch*channels*spatial elements and db `channels`
    // (checked by the caller); bias_bw needs exactly 256 threads per block.
    unsafe { f.launch(stream, LaunchConfig::linear(channels as u32, 256), &mut a) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::Conv2dDescriptor;
    use baracuda_kernels_types::{ElementKind, Error};

    fn check<T: Element>(d: &ConvDescriptor<2>) -> Result<[usize; 2]> {
        // Validation runs before any CUDA call, so no device is needed.
        validate::<T, 2>(OP, d)
    }

    fn bad<T: Element>(d: &ConvDescriptor<2>) -> Error {
        check::<T>(d).unwrap_err()
    }

    fn base() -> Conv2dDescriptor {
        Conv2dDescriptor::new(2, 4, 6, [8, 8], [3, 3], ElementKind::F32)
    }

    #[test]
    fn descriptor_errors_name_the_field() {
        let field = |e: Error| match e {
            Error::InvalidDescriptor { field, .. } => field,
            other => panic!("unexpected {other:?}"),
        };
        let mut d = base();
        d.batch = 0;
        assert_eq!(field(bad::<f32>(&d)), "batch");
        assert_eq!(field(bad::<f32>(&base().with_groups(3))), "groups");
        assert_eq!(field(bad::<f32>(&base().with_groups(4))), "groups");
        assert_eq!(field(bad::<f32>(&base().with_stride([0, 1]))), "stride");
        assert_eq!(field(bad::<f32>(&base().with_dilation([1, 0]))), "dilation");
        let mut d = base();
        d.input = [8, 0];
        assert_eq!(field(bad::<f32>(&d)), "input");
        let mut d = base();
        d.window.kernel = [9, 3];
        assert_eq!(field(bad::<f32>(&d)), "output");
        assert_eq!(field(bad::<f32>(&base().with_dilation([5, 1]))), "output");
        assert!(check::<f32>(&base().with_padding_ends([1, 1], [2, 1])).is_ok());
    }

    #[test]
    fn dtype_checks() {
        assert!(matches!(
            bad::<f64>(&base()),
            Error::DtypeMismatch { arg: "element", .. }
        ));
        let d = Conv2dDescriptor::new(2, 4, 6, [8, 8], [3, 3], ElementKind::I32);
        assert!(matches!(bad::<i32>(&d), Error::Unsupported { .. }));
    }

    #[test]
    fn activation_rule() {
        assert!(check_activation(OP, Activation::Relu).is_ok());
        assert!(matches!(
            check_activation(OP, Activation::GeluErf),
            Err(Error::Unsupported { .. })
        ));
    }

    #[test]
    fn plans_are_send_sync() {
        fn is<P: Send + Sync>() {}
        is::<Conv2dPlan<f32>>();
        is::<Conv1dPlan<half::bf16>>();
    }
}
