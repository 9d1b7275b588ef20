//! N-d transposed convolution (PyTorch `nn.ConvTranspose1d/2d/3d`).
//!
//! A transposed conv with input `x` `[N, c_in, in...]`, filter `w`
//! `[c_in, c_out/g, k...]` and output `y` `[N, c_out, out...]` is the
//! backward-data pass of the ordinary conv `C` whose input has `y`'s shape,
//! output has `x`'s shape and filter is `w` (`C` maps c_out -> c_in
//! channels). So, with `C`'s three cuDNN directions:
//! - forward:  `y  = C.backward_data(dy = x, w)`
//! - bw data:  `dx = C.forward(x = dy, w)`
//! - bw filter:`dw = C.backward_filter(x = dy, dy = x)`
//!
//! `out = (in-1)*stride - 2*pad + dilation*(k-1) + output_padding + 1`;
//! `output_padding` must be smaller than the stride (PyTorch also allows
//! `< dilation`; cuDNN cannot express that case, which is `Unsupported`).

use std::marker::PhantomData;

use baracuda_driver::{ConvAlgo, ConvDirection, CudnnConvProblem, Stream};
use baracuda_kernels_types::{Element, Error, KernelSku, PlanPreference, Result, Workspace};

use super::conv::{ConvArgs, ConvBwArgs, ConvDwArgs};
use super::cudnn_core::ConvCore;
use super::descriptor::{
    check_tensor, checked_output, full_shape, invalid, validate_common, ConvTransposeDescriptor,
};
use super::{check_dtype, ConvLayout};
use crate::Plan;

/// A transposed convolution of spatial rank `N` on rank-`R = N + 2`
/// tensors, through cuDNN.
///
/// # Shapes
/// `x`: `[batch, c_in, input...]`, `w`: `[c_in, c_out/groups, filter...]`,
/// `y`: `[batch, c_out, output...]` (see [`ConvTransposeDescriptor::output`]).
/// # Layout
/// Dense in the descriptor's [`ConvLayout`]; shapes in `[N, C, ...]` order.
/// # Dtypes
/// f32 (IEEE unless `allow_tf32`), f64, f16, bf16.
/// # Errors
/// As [`ConvPlan`](super::ConvPlan), plus `InvalidDescriptor` for
/// `output_padding` out of `0..max(stride, dilation)` and `Unsupported` for
/// `stride <= output_padding < dilation`.
#[derive(Debug)]
pub struct ConvTransposePlan<T: Element, const N: usize, const R: usize> {
    desc: ConvTransposeDescriptor<N>,
    output: [i32; N],
    core: ConvCore,
    _t: PhantomData<T>,
}

/// 1-D transposed convolution plan.
pub type ConvTranspose1dPlan<T> = ConvTransposePlan<T, 1, 3>;
/// 2-D transposed convolution plan.
pub type ConvTranspose2dPlan<T> = ConvTransposePlan<T, 2, 4>;
/// 3-D transposed convolution plan.
pub type ConvTranspose3dPlan<T> = ConvTransposePlan<T, 3, 5>;

const OP: &str = "conv_transpose";

pub(crate) fn validate_transpose<const N: usize>(
    d: &ConvTransposeDescriptor<N>,
) -> Result<[i32; N]> {
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
    )?;
    for a in 0..N {
        let op_ = d.output_padding[a];
        if op_ < 0 || (op_ >= d.stride[a] && op_ >= d.dilation[a]) {
            return Err(invalid(
                OP,
                "output_padding",
                d.output_padding,
                format!(
                    "must be >= 0 and smaller than stride {:?} or dilation {:?}",
                    d.stride, d.dilation
                ),
            ));
        }
        if op_ >= d.stride[a] {
            return Err(Error::Unsupported {
                op: OP,
                what: format!(
                    "output_padding {:?} >= stride {:?} (allowed by PyTorch when smaller than the dilation, \
                     but cuDNN cannot express it)",
                    d.output_padding, d.stride
                ),
            });
        }
    }
    checked_output(OP, d.output())
}

impl<T: Element, const N: usize, const R: usize> Plan for ConvTransposePlan<T, N, R> {
    type Descriptor = ConvTransposeDescriptor<N>;
    type Args<'a> = ConvArgs<'a, T, R>;

    fn select(
        stream: &Stream,
        desc: &ConvTransposeDescriptor<N>,
        pref: &PlanPreference,
    ) -> Result<Self> {
        const { assert!(R == N + 2, "tensor rank R must be spatial rank N + 2") };
        check_dtype::<T>(OP, desc.element)?;
        let d = desc;
        let output = validate_transpose(d)?;
        // The equivalent conv C: input = our output, output = our input.
        let problem = CudnnConvProblem {
            dtype: T::KIND,
            channels_last: d.layout == ConvLayout::ChannelsLast,
            batch: d.batch,
            c_in: d.c_out,
            c_out: d.c_in,
            x_spatial: output.to_vec(),
            w_spatial: d.filter.to_vec(),
            y_spatial: d.input.to_vec(),
            pad: d.padding.to_vec(),
            stride: d.stride.to_vec(),
            dilation: d.dilation.to_vec(),
            groups: d.groups,
        };
        let core = ConvCore::select(OP, stream, problem, pref, &format!("conv_transpose{N}d"))?;
        Ok(ConvTransposePlan {
            desc: *desc,
            output,
            core,
            _t: PhantomData,
        })
    }

    fn sku(&self) -> &KernelSku {
        &self.core.sku
    }

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

impl<T: Element, const N: usize, const R: usize> ConvTransposePlan<T, N, R> {
    /// Output spatial extents.
    pub fn output_dims(&self) -> [i32; N] {
        self.output
    }
    /// Workspace of the forward pass (cuDNN backward-data), in bytes.
    pub fn workspace_size_fw(&self) -> usize {
        self.core.workspace[1]
    }
    /// Workspace of the backward-data pass (cuDNN forward), in bytes.
    pub fn workspace_size_bw_data(&self) -> usize {
        self.core.workspace[0]
    }
    /// Workspace of the backward-filter pass, in bytes.
    pub fn workspace_size_dw(&self) -> usize {
        self.core.workspace[2]
    }
    /// The cuDNN algorithm chosen for a direction of the equivalent conv.
    pub fn algorithm(&self, dir: ConvDirection) -> Option<ConvAlgo> {
        self.core.cudnn.chosen(dir)
    }

    fn shapes(&self) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
        let d = &self.desc;
        (
            full_shape(d.batch, d.c_in, &d.input),
            full_shape(d.c_in, d.c_out / d.groups, &d.filter),
            full_shape(d.batch, d.c_out, &self.output),
        )
    }

    /// `y = conv_transpose(x, w)`.
    ///
    /// # Errors
    /// See [`ConvTransposePlan`].
    pub fn run_fw(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: ConvArgs<'_, T, R>,
    ) -> Result<()> {
        let (xs, ws, ys) = self.shapes();
        let l = self.desc.layout;
        let ctx = stream.context().id();
        let x = check_tensor(OP, "x", &args.x, &xs, l, ctx)?;
        let w = check_tensor(OP, "w", &args.w, &ws, l, ctx)?;
        let y = check_tensor(OP, "y", &args.y.as_const(), &ys, l, ctx)?;
        self.core.run(
            OP,
            stream,
            ConvDirection::BackwardData,
            (w, x, y),
            &workspace,
        )
    }

    /// `dx = d(loss)/dx = conv(dy, w)`.
    ///
    /// # Errors
    /// See [`ConvTransposePlan`].
    pub fn run_bw_data(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: ConvBwArgs<'_, T, R>,
    ) -> Result<()> {
        let (xs, ws, ys) = self.shapes();
        let l = self.desc.layout;
        let ctx = stream.context().id();
        let w = check_tensor(OP, "w", &args.w, &ws, l, ctx)?;
        let dy = check_tensor(OP, "dy", &args.dy, &ys, l, ctx)?;
        let dx = check_tensor(OP, "dx", &args.dx.as_const(), &xs, l, ctx)?;
        self.core
            .run(OP, stream, ConvDirection::Forward, (dy, w, dx), &workspace)
    }

    /// `dw = d(loss)/dw`.
    ///
    /// # Errors
    /// See [`ConvTransposePlan`].
    pub fn run_dw(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: ConvDwArgs<'_, T, R>,
    ) -> Result<()> {
        let (xs, ws, ys) = self.shapes();
        let l = self.desc.layout;
        let ctx = stream.context().id();
        let x = check_tensor(OP, "x", &args.x, &xs, l, ctx)?;
        let dy = check_tensor(OP, "dy", &args.dy, &ys, l, ctx)?;
        let dw = check_tensor(OP, "dw", &args.dw.as_const(), &ws, l, ctx)?;
        self.core.run(
            OP,
            stream,
            ConvDirection::BackwardFilter,
            (dy, x, dw),
            &workspace,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::ConvTranspose2dDescriptor;
    use baracuda_kernels_types::ElementKind;

    fn d() -> ConvTranspose2dDescriptor {
        ConvTranspose2dDescriptor::new(2, 4, 5, 5, 6, 3, 3, ElementKind::F32).with_stride(2, 2)
    }

    #[test]
    fn output_padding_rules() {
        assert_eq!(
            validate_transpose(&d().with_output_padding(1, 1)).unwrap(),
            [12, 12]
        );
        assert!(matches!(
            validate_transpose(&d().with_output_padding(2, 0)),
            Err(Error::InvalidDescriptor {
                field: "output_padding",
                ..
            })
        ));
        assert!(matches!(
            validate_transpose(&d().with_output_padding(-1, 0)),
            Err(Error::InvalidDescriptor {
                field: "output_padding",
                ..
            })
        ));
        assert!(matches!(
            validate_transpose(
                &d().with_stride(1, 1)
                    .with_dilation(3, 1)
                    .with_output_padding(1, 0)
            ),
            Err(Error::Unsupported { .. })
        ));
        assert!(matches!(
            validate_transpose(&d().with_groups(4)),
            Err(Error::InvalidDescriptor {
                field: "groups",
                ..
            })
        ));
        assert!(matches!(
            validate_transpose(
                &ConvTranspose2dDescriptor::new(1, 1, 1, 1, 1, 1, 1, ElementKind::F32)
                    .with_padding(1, 0)
            ),
            Err(Error::InvalidDescriptor {
                field: "output",
                ..
            })
        ));
    }
}
