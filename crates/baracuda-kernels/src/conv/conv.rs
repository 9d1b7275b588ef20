//! N-d convolution through cuDNN (PyTorch `nn.Conv1d/2d/3d`).
//!
//! `y[n, k, o] = sum_{c in group(k), r} x[n, c, o*stride - pad + r*dilation] * w[k, c, r]`
//! (cross-correlation; out-of-range x reads as 0). Backward:
//! `dx = conv_transpose(dy, w)`, `dw[k, c, r] = sum_{n, o} dy[n, k, o] * x[n, c, ...]`,
//! `db[k] = sum_{n, o} dy[n, k, o]`.
//!
//! Engine choice, per direction, happens in `select`, on cuDNN's backend
//! (graph) API: see `cudnn_core.rs` for the heuristics, filters,
//! measured autotuning and the legacy fallback.

use std::marker::PhantomData;

use baracuda_driver::{
    ConvAlgo, ConvDirection, CudnnConvProblem, Function, LaunchArgs, LaunchConfig, Stream,
};
use baracuda_kernels_types::{
    Element, KernelSku, PlanPreference, Result, TensorMut, TensorRef, Workspace,
};

use super::cudnn_core::ConvCore;
use super::descriptor::{
    check_tensor, checked_output, full_shape, validate_common, ConvDescriptor,
};
use super::{check_dtype, ConvLayout};
use crate::Plan;

/// Forward operands (also the transposed conv's forward): `y = op(x, w)`.
#[derive(Debug)]
pub struct ConvArgs<'a, T, const R: usize> {
    /// Input activations `[N, C_in, spatial...]` (layout strides).
    pub x: TensorRef<'a, T, R>,
    /// Filter.
    pub w: TensorRef<'a, T, R>,
    /// Output, overwritten.
    pub y: TensorMut<'a, T, R>,
}

/// Backward-data operands: `dx = d(loss)/dx` from `w` and `dy`.
#[derive(Debug)]
pub struct ConvBwArgs<'a, T, const R: usize> {
    /// Filter.
    pub w: TensorRef<'a, T, R>,
    /// Gradient of the output.
    pub dy: TensorRef<'a, T, R>,
    /// Gradient of the input, overwritten.
    pub dx: TensorMut<'a, T, R>,
}

/// Backward-filter operands: `dw = d(loss)/dw` from `x` and `dy`.
#[derive(Debug)]
pub struct ConvDwArgs<'a, T, const R: usize> {
    /// Input activations.
    pub x: TensorRef<'a, T, R>,
    /// Gradient of the output.
    pub dy: TensorRef<'a, T, R>,
    /// Gradient of the filter, overwritten.
    pub dw: TensorMut<'a, T, R>,
}

/// Conv1d forward args (`[N, C, L]`).
pub type Conv1dArgs<'a, T> = ConvArgs<'a, T, 3>;
/// Conv2d forward args.
pub type Conv2dArgs<'a, T> = ConvArgs<'a, T, 4>;
/// Conv3d forward args.
pub type Conv3dArgs<'a, T> = ConvArgs<'a, T, 5>;
/// Conv1d backward-data args.
pub type Conv1dBwArgs<'a, T> = ConvBwArgs<'a, T, 3>;
/// Conv2d backward-data args.
pub type Conv2dBwArgs<'a, T> = ConvBwArgs<'a, T, 4>;
/// Conv3d backward-data args.
pub type Conv3dBwArgs<'a, T> = ConvBwArgs<'a, T, 5>;
/// Conv1d backward-filter args.
pub type Conv1dDwArgs<'a, T> = ConvDwArgs<'a, T, 3>;
/// Conv2d backward-filter args.
pub type Conv2dDwArgs<'a, T> = ConvDwArgs<'a, T, 4>;
/// Conv3d backward-filter args.
pub type Conv3dDwArgs<'a, T> = ConvDwArgs<'a, T, 5>;

/// A convolution of spatial rank `N` on rank-`R = N + 2` tensors, through
/// cuDNN, with its algorithm for each direction chosen in `select`.
///
/// # Shapes
/// `x`: `[batch, c_in, input...]`, `w`: `[c_out, c_in/groups, filter...]`,
/// `y`: `[batch, c_out, output...]` (see [`ConvDescriptor::output`]);
/// bias `[c_out]`.
/// # Layout
/// Dense in the descriptor's [`ConvLayout`] (NCHW-style or NHWC-style;
/// filters in the matching order). Shapes are always given as `[N, C, ...]`.
/// # Dtypes
/// f32 (IEEE unless `allow_tf32`), f64, f16 and bf16 (f32 accumulation).
/// Others: `Unsupported`.
/// # Errors
/// `select`: `InvalidDescriptor` naming the field, `DtypeMismatch`,
/// `Unsupported`, `PreferenceRejected` (backend other than cuDNN, no
/// algorithm within `max_workspace_bytes` or deterministic), `Cudnn`.
/// `run_*`: `ShapeMismatch`, `InvalidArgument` (strides), `ContextMismatch`,
/// `WorkspaceTooSmall`. `run_*` only enqueue: no allocation, no sync.
#[derive(Debug)]
pub struct ConvPlan<T: Element, const N: usize, const R: usize> {
    desc: ConvDescriptor<N>,
    output: [i32; N],
    core: ConvCore,
    roles: Roles,
    _t: PhantomData<T>,
}

/// What a plan's errors call things: the op, and the argument names of
/// the three cuDNN directions' operands, in the order each takes them:
/// forward `(x, w, y)`, backward data `(w, dy, dx)`, backward filter
/// `(x, dy, dw)`. A transposed conv runs the same directions with its
/// tensors in other roles ([`super::ConvTransposePlan`]), and its errors
/// name its own arguments.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Roles {
    pub op: &'static str,
    pub names: [[&'static str; 3]; 3],
}

/// A plain convolution's roles.
const CONV_ROLES: Roles = Roles {
    op: "conv",
    names: [["x", "w", "y"], ["w", "dy", "dx"], ["x", "dy", "dw"]],
};

/// 1-D convolution plan.
pub type Conv1dPlan<T> = ConvPlan<T, 1, 3>;
/// 2-D convolution plan.
pub type Conv2dPlan<T> = ConvPlan<T, 2, 4>;
/// 3-D convolution plan.
pub type Conv3dPlan<T> = ConvPlan<T, 3, 5>;

#[cfg(test)]
const OP: &str = CONV_ROLES.op;

impl<T: Element, const N: usize, const R: usize> Plan for ConvPlan<T, N, R> {
    type Descriptor = ConvDescriptor<N>;
    type Args<'a> = ConvArgs<'a, T, R>;

    fn select(stream: &Stream, desc: &ConvDescriptor<N>, pref: &PlanPreference) -> Result<Self> {
        Self::select_as(CONV_ROLES, &format!("conv{N}d"), stream, desc, pref)
    }

    fn sku(&self) -> &KernelSku {
        &self.core.sku
    }

    /// The largest workspace of the three directions.
    fn workspace_size(&self) -> usize {
        self.core.workspace.iter().copied().max().unwrap_or(0)
    }

    fn run(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: ConvArgs<'_, T, R>,
    ) -> Result<()> {
        self.run_fw(stream, workspace, args)
    }
}

impl<T: Element, const N: usize, const R: usize> ConvPlan<T, N, R> {
    /// `select` with the errors and the SKU (`sku_name`) of another plan
    /// built on this one.
    pub(crate) fn select_as(
        roles: Roles,
        sku_name: &str,
        stream: &Stream,
        desc: &ConvDescriptor<N>,
        pref: &PlanPreference,
    ) -> Result<Self> {
        const { assert!(R == N + 2, "tensor rank R must be spatial rank N + 2") };
        let op = roles.op;
        check_dtype::<T>(op, desc.element)?;
        let d = desc;
        validate_common(
            op,
            d.batch,
            d.c_in,
            d.c_out,
            &d.input,
            &d.filter,
            &d.padding,
            &d.stride,
            &d.dilation,
            d.groups,
        )?;
        let output = checked_output(op, d.output())?;
        let problem = CudnnConvProblem {
            dtype: T::KIND,
            channels_last: d.layout == ConvLayout::ChannelsLast,
            batch: d.batch,
            c_in: d.c_in,
            c_out: d.c_out,
            x_spatial: d.input.to_vec(),
            w_spatial: d.filter.to_vec(),
            y_spatial: output.to_vec(),
            pad: d.padding.to_vec(),
            stride: d.stride.to_vec(),
            dilation: d.dilation.to_vec(),
            groups: d.groups,
        };
        let core = ConvCore::select(op, stream, problem, pref, sku_name)?;
        Ok(ConvPlan {
            desc: *desc,
            output,
            core,
            roles,
            _t: PhantomData,
        })
    }

    /// Output spatial extents.
    pub fn output_dims(&self) -> [i32; N] {
        self.output
    }
    /// The descriptor the plan was selected for.
    pub(crate) fn descriptor(&self) -> &ConvDescriptor<N> {
        &self.desc
    }
    /// Workspace of the forward pass, in bytes.
    pub fn workspace_size_fw(&self) -> usize {
        self.core.workspace[0]
    }
    /// Workspace of the backward-data pass, in bytes.
    pub fn workspace_size_bw_data(&self) -> usize {
        self.core.workspace[1]
    }
    /// Workspace of the backward-filter pass, in bytes.
    pub fn workspace_size_dw(&self) -> usize {
        self.core.workspace[2]
    }
    /// The cuDNN algorithm chosen for `dir`. Where cuBLASLt runs the
    /// direction (a pointwise convolution, see the SKU), this is the one
    /// operands that are not 16-byte aligned fall back on, or None when
    /// cuBLASLt was forced.
    pub fn algorithm(&self, dir: ConvDirection) -> Option<ConvAlgo> {
        self.core.cudnn.chosen(dir)
    }

    /// Full shapes of `x`, `w` and `y`.
    pub(crate) fn shapes(&self) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
        let d = &self.desc;
        (
            full_shape(d.batch, d.c_in, &d.input),
            full_shape(d.c_out, d.c_in / d.groups, &d.filter),
            full_shape(d.batch, d.c_out, &self.output),
        )
    }

    /// Check the operands of cuDNN direction `dir`, given in the order it
    /// takes them with their expected shapes, and enqueue it. Errors name
    /// the operands as the plan's roles do.
    fn pass(
        &self,
        stream: &Stream,
        workspace: &Workspace<'_>,
        dir: ConvDirection,
        operands: [(&TensorRef<'_, T, R>, &[usize]); 3],
    ) -> Result<()> {
        let names = self.roles.names[dir.index()];
        let (op, l, ctx) = (self.roles.op, self.desc.layout, stream.context().id());
        let mut addr = [0u64; 3];
        for (a, ((t, shape), name)) in addr.iter_mut().zip(operands.into_iter().zip(names)) {
            *a = check_tensor(op, name, t, shape, l, ctx)?;
        }
        self.core
            .run(op, stream, dir, (addr[0], addr[1], addr[2]), workspace)
    }

    /// `y = conv(x, w)`.
    ///
    /// # Errors
    /// See [`ConvPlan`].
    pub fn run_fw(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: ConvArgs<'_, T, R>,
    ) -> Result<()> {
        let (xs, ws, ys) = self.shapes();
        let y = args.y.as_const();
        self.pass(
            stream,
            &workspace,
            ConvDirection::Forward,
            [(&args.x, &xs), (&args.w, &ws), (&y, &ys)],
        )
    }

    /// `y = act(conv(x, w) + bias)`, act = ReLU when `relu`, else identity.
    /// The bias and activation run as one elementwise pass after cuDNN's
    /// convolution, on the same stream.
    ///
    /// # Errors
    /// As [`ConvPlan::run_fw`]; `ShapeMismatch` when bias is not `[c_out]`;
    /// the NVRTC error when the epilogue kernel could not be built.
    pub fn run_fw_bias(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: ConvArgs<'_, T, R>,
        bias: TensorRef<'_, T, 1>,
        relu: bool,
    ) -> Result<()> {
        let y = args.y.data().addr();
        let out = (self.desc.c_out, &self.output[..]);
        self.then_bias(stream, y, out, bias, relu, || {
            self.run_fw(stream, workspace, args)
        })
    }

    /// `db[k] = sum over batch and output positions of dy[n, k, ...]`.
    /// Deterministic (fixed-order reduction).
    ///
    /// # Errors
    /// `ShapeMismatch`, `InvalidArgument`, `ContextMismatch`; the NVRTC
    /// error when the kernel could not be built.
    pub fn run_bw_bias(
        &self,
        stream: &Stream,
        dy: TensorRef<'_, T, R>,
        db: TensorMut<'_, T, 1>,
    ) -> Result<()> {
        let (_, _, ys) = self.shapes();
        self.bias_grad(stream, (dy, &ys), (self.desc.c_out, &self.output[..]), db)
    }

    /// Check `bias` against `channels`, run `conv` (which writes `y`, of
    /// `channels` channels and spatial extents `dims` in the plan's
    /// layout), then add the bias and apply the activation in place. A
    /// transposed conv passes its own forward (this plan's backward data).
    pub(crate) fn then_bias(
        &self,
        stream: &Stream,
        y: u64,
        (channels, dims): (i32, &[i32]),
        bias: TensorRef<'_, T, 1>,
        relu: bool,
        conv: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let ctx = stream.context().id();
        let b = check_tensor(
            self.roles.op,
            "bias",
            &bias,
            &[channels as usize],
            ConvLayout::ChannelsFirst,
            ctx,
        )?;
        let bias_fns = self.core.bias.as_ref().map_err(Clone::clone)?;
        conv()?;
        let spatial: i64 = dims.iter().map(|&v| v as i64).product();
        let n = self.desc.batch as i64 * channels as i64 * spatial;
        launch_bias_act(
            stream,
            &bias_fns.0,
            y,
            b,
            n,
            channels,
            spatial,
            self.desc.layout,
            relu,
        )
    }

    /// `db[k] = sum of dy[n, k, ...]` for a `dy` of shape `dy_shape`
    /// (`[batch, channels, dims...]`).
    pub(crate) fn bias_grad(
        &self,
        stream: &Stream,
        (dy, dy_shape): (TensorRef<'_, T, R>, &[usize]),
        (channels, dims): (i32, &[i32]),
        db: TensorMut<'_, T, 1>,
    ) -> Result<()> {
        let (op, layout, ctx) = (self.roles.op, self.desc.layout, stream.context().id());
        let dy_a = check_tensor(op, "dy", &dy, dy_shape, layout, ctx)?;
        let db_a = check_tensor(
            op,
            "db",
            &db.as_const(),
            &[channels as usize],
            ConvLayout::ChannelsFirst,
            ctx,
        )?;
        let bias_fns = self.core.bias.as_ref().map_err(Clone::clone)?;
        let spatial: i64 = dims.iter().map(|&v| v as i64).product();
        launch_bias_bw(
            stream,
            &bias_fns.1,
            dy_a,
            db_a,
            self.desc.batch,
            channels,
            spatial,
            layout,
        )
    }

    /// `dx = conv_transpose(dy, w)`.
    ///
    /// # Errors
    /// See [`ConvPlan`].
    pub fn run_bw_data(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: ConvBwArgs<'_, T, R>,
    ) -> Result<()> {
        let (xs, ws, ys) = self.shapes();
        let dx = args.dx.as_const();
        self.pass(
            stream,
            &workspace,
            ConvDirection::BackwardData,
            [(&args.w, &ws), (&args.dy, &ys), (&dx, &xs)],
        )
    }

    /// `dw = corr(x, dy)`.
    ///
    /// # Errors
    /// See [`ConvPlan`].
    pub fn run_dw(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: ConvDwArgs<'_, T, R>,
    ) -> Result<()> {
        let (xs, ws, ys) = self.shapes();
        let dw = args.dw.as_const();
        self.pass(
            stream,
            &workspace,
            ConvDirection::BackwardFilter,
            [(&args.x, &xs), (&args.dy, &ys), (&dw, &ws)],
        )
    }
}

#[allow(clippy::too_many_arguments)] // kernel parameters
fn launch_bias_act(
    stream: &Stream,
    f: &Function,
    y: u64,
    b: u64,
    n: i64,
    channels: i32,
    spatial: i64,
    layout: ConvLayout,
    relu: bool,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let threads = 256u32;
    let blocks = ((n as u64).div_ceil(threads as u64)).min(65535 * 8) as u32;
    let mut a = LaunchArgs::new();
    a.push(y)?.push(b)?.push(n)?.push(channels)?.push(spatial)?;
    a.push((layout == ConvLayout::ChannelsLast) as i32)?
        .push(relu as i32)?;
    // SAFETY: y holds n elements and b holds `channels` (checked by the
    // caller); the argument list matches bias_act_fw's signature.
    unsafe { f.launch(stream, LaunchConfig::linear(blocks, threads), &mut a) }
}

#[allow(clippy::too_many_arguments)] // kernel parameters
fn launch_bias_bw(
    stream: &Stream,
    f: &Function,
    dy: u64,
    db: u64,
    batch: i32,
    channels: i32,
    spatial: i64,
    layout: ConvLayout,
) -> Result<()> {
    let mut a = LaunchArgs::new();
    a.push(dy)?
        .push(db)?
        .push(batch)?
        .push(channels)?
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

    fn bad<T: Element>(d: &ConvDescriptor<2>) -> Error {
        // Validation runs before any CUDA call, so no device is needed.
        check_dtype::<T>(OP, d.element)
            .and_then(|_| {
                validate_common(
                    OP,
                    d.batch,
                    d.c_in,
                    d.c_out,
                    &d.input,
                    &d.filter,
                    &d.padding,
                    &d.stride,
                    &d.dilation,
                    d.groups,
                )
            })
            .and_then(|_| checked_output(OP, d.output()).map(|_| ()))
            .unwrap_err()
    }

    fn base() -> Conv2dDescriptor {
        Conv2dDescriptor::new(2, 4, 8, 8, 6, 3, 3, ElementKind::F32)
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
        assert_eq!(
            field(bad::<f32>(
                &Conv2dDescriptor::new(2, 4, 8, 8, 6, 3, 3, ElementKind::F32).with_groups(4)
            )),
            "groups"
        );
        assert_eq!(field(bad::<f32>(&base().with_stride(0, 1))), "stride");
        assert_eq!(field(bad::<f32>(&base().with_dilation(1, -1))), "dilation");
        assert_eq!(field(bad::<f32>(&base().with_padding(-1, 0))), "padding");
        let mut d = base();
        d.input = [8, 0];
        assert_eq!(field(bad::<f32>(&d)), "input");
        let mut d = base();
        d.filter = [9, 3];
        assert_eq!(field(bad::<f32>(&d)), "output");
        assert_eq!(field(bad::<f32>(&base().with_dilation(5, 1))), "output");
    }

    #[test]
    fn dtype_checks() {
        assert!(matches!(
            bad::<f64>(&base()),
            Error::DtypeMismatch { arg: "element", .. }
        ));
        let d = Conv2dDescriptor::new(2, 4, 8, 8, 6, 3, 3, ElementKind::I32);
        assert!(matches!(bad::<i32>(&d), Error::Unsupported { .. }));
    }

    #[test]
    fn plans_are_send_sync() {
        fn is<P: Send + Sync>() {}
        is::<Conv2dPlan<f32>>();
        is::<Conv1dPlan<half::bf16>>();
    }
}
