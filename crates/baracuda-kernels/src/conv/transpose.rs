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
//! The plan is a [`ConvPlan`] of `C` (with `Roles::transposed`, which maps
//! the plan's forward and gradients onto `C`'s directions as above), whose
//! errors and SKU speak of the transposed conv's own arguments; the bias,
//! ReLU and their gradients apply to `y` as for a convolution.
//!
//! `out = (in-1)*stride - padding - padding_end + dilation*(k-1) +
//! output_padding + 1`;
//! `output_padding` must be smaller than the stride or the dilation
//! (PyTorch's rule). From the stride up, and wherever the two paddings
//! differ, `C`'s input (our `y`, `dy`) runs through a padded copy in the
//! workspace (`staging.rs`): the last output elements that no window
//! reaches receive only the bias.

use baracuda_driver::Stream;
use baracuda_kernels_types::{Element, Error, Grads, KernelSku, PlanPreference, Result, Workspace};

use super::check_dtype;
use super::conv::{ConvArgs, ConvBwArgs, ConvPlan, Roles};
use super::cudnn_graph::{ConvAlgo, ConvDirection};
use super::descriptor::{validate_common, ConvDescriptor, ConvTransposeDescriptor};
use super::window::invalid;
use super::{Rank, SpatialRank};
use crate::{Backward, Plan};

/// A transposed convolution of spatial rank `N` on rank-`R = N + 2`
/// tensors, through cuDNN: `y = act(conv_transpose(x, w) + bias)`, and its
/// backward `dx = conv(dz, w)`, `dw`, `dbias` (`dz` as in [`ConvPlan`]).
///
/// Per spatial position (`c` and `k` in the same group, `q` the window
/// position, out-of-range positions dropped):
/// `y[n, k, i*stride - pad + q*dilation] += x[n, c, i] * w[c, k, q]`, then
/// the bias per channel `k` and the activation. Backward, with
/// `o = i*stride - pad + q*dilation`:
/// `dx[n, c, i] = sum_{k, q} dz[n, k, o] * w[c, k, q]`,
/// `dw[c, k, q] = sum_{n, i} x[n, c, i] * dz[n, k, o]`,
/// `dbias[k] = sum_{n, o} dz[n, k, o]`.
///
/// # Shapes
/// `x`, `dx`: `[batch, c_in, input...]`, `w`, `dw`: `[c_in, c_out/groups,
/// filter...]`, `y`, `dy`: `[batch, c_out, output...]` (see
/// [`ConvTransposeDescriptor::output`]); bias, `dbias`: `[c_out]`.
/// # Layout
/// Dense in the descriptor's [`ConvLayout`](super::ConvLayout); shapes in
/// `[N, C, ...]` order. Workspace as [`ConvPlan`]'s.
/// # Dtypes
/// f32 (IEEE unless `allow_tf32`), f64, f16, bf16, as [`ConvPlan`].
/// Others: `Unsupported`.
/// # Aliasing
/// None, as [`ConvPlan`]: an output overlapping an input or another
/// output is `InvalidArgument` naming it.
/// # Errors
/// As [`ConvPlan`], plus `InvalidDescriptor` for `output_padding` out of
/// `0..max(stride, dilation)`.
#[derive(Debug)]
pub struct ConvTransposePlan<T: Element, const N: usize, const R: usize>
where
    Rank<N, R>: SpatialRank,
{
    /// The equivalent conv `C` (module doc): its input is our output, its
    /// `c_in` our `c_out`; it runs our passes through [`Roles::transposed`].
    conv: ConvPlan<T, N, R>,
}

rank_aliases!("nn.ConvTranspose", ConvTransposePlan<T> => ConvTranspose1dPlan, ConvTranspose2dPlan, ConvTranspose3dPlan);

const OP: &str = "conv_transpose";

const ROLES: Roles = Roles {
    op: OP,
    transposed: true,
};

pub(crate) fn validate_transpose<const N: usize>(
    d: &ConvTransposeDescriptor<N>,
) -> Result<[usize; N]> {
    let w = &d.window;
    validate_common(OP, (d.batch, d.c_in, d.c_out), &d.input, w, d.groups)?;
    for a in 0..N {
        let op_ = d.output_padding[a];
        if op_ >= w.stride[a] && op_ >= w.dilation[a] {
            return Err(invalid(
                OP,
                "output_padding",
                d.output_padding,
                format!(
                    "must be smaller than stride {:?} or dilation {:?}",
                    w.stride, w.dilation
                ),
            ));
        }
    }
    d.output()
}

impl<T: Element, const N: usize, const R: usize> Plan for ConvTransposePlan<T, N, R>
where
    Rank<N, R>: SpatialRank,
{
    type Descriptor = ConvTransposeDescriptor<N>;
    type Args<'a> = ConvArgs<'a, T, R>;

    fn select(
        stream: &Stream,
        desc: &ConvTransposeDescriptor<N>,
        pref: &PlanPreference,
    ) -> Result<Self> {
        check_dtype::<T>(OP, desc.element)?;
        let output = validate_transpose(desc)?;
        let d = desc;
        // C: input = our output, output = our input, c_in and c_out swapped,
        // the same filter tensor.
        let c = ConvDescriptor {
            batch: d.batch,
            c_in: d.c_out,
            c_out: d.c_in,
            input: output,
            window: d.window,
            groups: d.groups,
            element: d.element,
            layout: d.layout,
            activation: d.activation,
        };
        let (sku, op_) = (format!("conv_transpose{N}d"), d.output_padding);
        let conv = ConvPlan::select_as(ROLES, &sku, stream, &c, op_, pref)?;
        // Holds for every valid descriptor (tested in `staging.rs`);
        // checked so that no descriptor can run C on shapes other than
        // ours.
        if conv.c_output() != d.input {
            return Err(Error::Unsupported {
                op: OP,
                what: format!(
                    "no conv maps the output {output:?} back to the input {:?} ({d:?})",
                    d.input
                ),
            });
        }
        Ok(ConvTransposePlan { conv })
    }

    fn sku(&self) -> &KernelSku {
        self.conv.sku()
    }

    fn workspace_size(&self) -> usize {
        self.conv.workspace_size()
    }

    fn run(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: ConvArgs<'_, T, R>,
    ) -> Result<()> {
        self.conv.run(stream, workspace, args)
    }
}

impl<T: Element, const N: usize, const R: usize> Backward for ConvTransposePlan<T, N, R>
where
    Rank<N, R>: SpatialRank,
{
    type BwArgs<'a> = ConvBwArgs<'a, T, R>;

    fn grads(&self) -> Grads {
        self.conv.grads()
    }

    fn bw_workspace_size(&self, wants: Grads) -> usize {
        self.conv.bw_workspace_size(wants)
    }

    fn run_bw(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: ConvBwArgs<'_, T, R>,
    ) -> Result<()> {
        self.conv.run_bw(stream, workspace, args)
    }
}

impl<T: Element, const N: usize, const R: usize> ConvTransposePlan<T, N, R>
where
    Rank<N, R>: SpatialRank,
{
    /// Output spatial extents.
    pub fn output_dims(&self) -> [usize; N] {
        self.conv.output_dims()
    }
    /// The cuDNN algorithm chosen for a direction of the equivalent conv.
    pub fn algorithm(&self, dir: ConvDirection) -> Option<ConvAlgo> {
        self.conv.algorithm(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::ConvTranspose2dDescriptor;
    use baracuda_kernels_types::ElementKind;

    fn d() -> ConvTranspose2dDescriptor {
        ConvTranspose2dDescriptor::new(2, 4, 6, [5, 5], [3, 3], ElementKind::F32)
            .with_stride([2, 2])
    }

    #[test]
    fn equivalent_conv_maps_output_back_to_input() {
        for (inp, k, s, p, dil) in [
            (5, 3, 2, 1, 1),
            (7, 4, 3, 0, 2),
            (1, 1, 1, 0, 1),
            (9, 2, 4, 1, 3),
        ] {
            for op in 0..s {
                let t =
                    ConvTranspose2dDescriptor::new(1, 2, 3, [inp, inp], [k, k], ElementKind::F32)
                        .with_stride([s, s])
                        .with_padding([p, p])
                        .with_dilation([dil, dil])
                        .with_output_padding([op, op]);
                let Ok(out) = validate_transpose(&t) else {
                    continue;
                };
                let c = crate::conv::Conv2dDescriptor::new(1, 3, 2, out, [k, k], ElementKind::F32)
                    .with_stride([s, s])
                    .with_padding([p, p])
                    .with_dilation([dil, dil]);
                assert_eq!(c.output().unwrap(), t.input, "{t:?}");
            }
        }
    }

    #[test]
    fn output_padding_rules() {
        assert_eq!(
            validate_transpose(&d().with_output_padding([1, 1])).unwrap(),
            [12, 12]
        );
        assert!(matches!(
            validate_transpose(&d().with_output_padding([2, 0])),
            Err(Error::InvalidDescriptor {
                field: "output_padding",
                ..
            })
        ));
        // PyTorch allows output_padding below the dilation too.
        assert_eq!(
            validate_transpose(
                &d().with_stride([1, 1])
                    .with_dilation([3, 1])
                    .with_output_padding([2, 0])
            )
            .unwrap(),
            [13, 7]
        );
        assert!(matches!(
            validate_transpose(&d().with_groups(4)),
            Err(Error::InvalidDescriptor {
                field: "groups",
                ..
            })
        ));
        assert!(matches!(
            validate_transpose(
                &ConvTranspose2dDescriptor::new(1, 1, 1, [1, 1], [1, 1], ElementKind::F32)
                    .with_padding([1, 0])
            ),
            Err(Error::InvalidDescriptor {
                field: "output",
                ..
            })
        ));
    }
}
