//! Convolution descriptors, their validation and output-size math, and the
//! tensor checks every plan of the family runs. Output size, per spatial
//! axis, is [`Window`](super::Window)'s formula; a transposed conv's is
//! `(in-1)*stride - padding - padding_end + dilation*(k-1) + output_padding + 1`.

use baracuda_kernels_types::{Activation, ElementKind, Result};

use super::window::{invalid, overflow, Window};

use super::ConvLayout;

/// A convolution of spatial rank `N` (1, 2 or 3), PyTorch `nn.ConvNd`
/// semantics: cross-correlation, zero padding, dilation, groups.
///
/// `x`: `[batch, c_in, input...]`; `w`: `[c_out, c_in / groups, kernel...]`;
/// `y`: `[batch, c_out, output...]`. Build with [`ConvDescriptor::new`] and
/// the `with_*` setters (defaults: stride 1, padding 0, dilation 1, groups
/// 1, channels-first, no activation), or as a struct literal.
///
/// ```
/// # use baracuda_kernels::*;
/// // PyTorch: nn.Conv2d(64, 128, 3, stride=2, padding=1) on [8, 64, 56, 56]
/// let d = Conv2dDescriptor::new(8, 64, 128, [56, 56], [3, 3], ElementKind::Bf16)
///     .with_stride([2, 2])
///     .with_padding([1, 1])
///     .with_layout(ConvLayout::ChannelsLast);
/// assert_eq!(d.output().unwrap(), [28, 28]);
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConvDescriptor<const N: usize> {
    /// Batch `N`.
    pub batch: usize,
    /// Input channels.
    pub c_in: usize,
    /// Output channels.
    pub c_out: usize,
    /// Input spatial extents (`[l]`, `[h, w]`, `[d, h, w]`).
    pub input: [usize; N],
    /// Filter extents, stride, padding (per side) and dilation.
    pub window: Window<N>,
    /// Group count; must divide `c_in` and `c_out`.
    pub groups: usize,
    /// Element type of x, w, y.
    pub element: ElementKind,
    /// Memory order of x, w, y.
    pub layout: ConvLayout,
    /// Applied after the convolution and the bias: identity (default) or
    /// ReLU.
    pub activation: Activation,
}

/// A transposed convolution of spatial rank `N`, PyTorch
/// `nn.ConvTransposeNd` semantics (the gradient of a convolution with
/// respect to its input).
///
/// `x`: `[batch, c_in, input...]`; `w`: `[c_in, c_out / groups,
/// kernel...]`; `y`: `[batch, c_out, output...]`. Defaults as
/// [`ConvDescriptor`], output_padding 0.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConvTransposeDescriptor<const N: usize> {
    /// Batch `N`.
    pub batch: usize,
    /// Input channels.
    pub c_in: usize,
    /// Output channels.
    pub c_out: usize,
    /// Input spatial extents.
    pub input: [usize; N],
    /// Filter extents, stride, dilation, and the padding removed from each
    /// side of the output.
    pub window: Window<N>,
    /// Extra output extent on the high side, per axis (smaller than the
    /// stride or the dilation).
    pub output_padding: [usize; N],
    /// Group count; must divide `c_in` and `c_out`.
    pub groups: usize,
    /// Element type.
    pub element: ElementKind,
    /// Memory order.
    pub layout: ConvLayout,
    /// Applied after the transposed convolution and the bias: identity
    /// (default) or ReLU.
    pub activation: Activation,
}

rank_aliases!("convolution descriptor", ConvDescriptor<N> => Conv1dDescriptor, Conv2dDescriptor, Conv3dDescriptor);
rank_aliases!("transposed convolution descriptor", ConvTransposeDescriptor<N> => ConvTranspose1dDescriptor, ConvTranspose2dDescriptor, ConvTranspose3dDescriptor);

/// The setters the two convolution descriptors add to the window's.
macro_rules! conv_setters {
    ($ty:ident) => {
        super::window::window_setters!($ty);
        impl<const N: usize> $ty<N> {
            /// Group count. Default 1.
            pub fn with_groups(mut self, groups: usize) -> Self {
                self.groups = groups;
                self
            }
            /// Activation after the bias. Default identity.
            pub fn with_activation(mut self, activation: Activation) -> Self {
                self.activation = activation;
                self
            }
        }
    };
}
conv_setters!(ConvDescriptor);
conv_setters!(ConvTransposeDescriptor);

impl<const N: usize> ConvDescriptor<N> {
    /// A convolution of `kernel` over `input`, with PyTorch's defaults.
    pub fn new(
        batch: usize,
        c_in: usize,
        c_out: usize,
        input: [usize; N],
        kernel: [usize; N],
        element: ElementKind,
    ) -> Self {
        ConvDescriptor {
            batch,
            c_in,
            c_out,
            input,
            window: Window::new(kernel),
            groups: 1,
            element,
            layout: ConvLayout::ChannelsFirst,
            activation: Activation::Identity,
        }
    }
    /// PyTorch's `padding='same'` (stride 1): half of `dilation * (kernel
    /// - 1)` before, the rest after.
    pub fn with_same_padding(mut self) -> Self {
        self.window = self.window.with_same_padding();
        self
    }
    /// Output spatial extents.
    ///
    /// # Errors
    /// `InvalidDescriptor` (field `output`) when a window does not fit the
    /// padded input.
    pub fn output(&self) -> Result<[usize; N]> {
        self.window.conv_output("conv", &self.input)
    }
}

impl<const N: usize> ConvTransposeDescriptor<N> {
    /// A transposed convolution of `kernel` over `input`, with PyTorch's
    /// defaults.
    pub fn new(
        batch: usize,
        c_in: usize,
        c_out: usize,
        input: [usize; N],
        kernel: [usize; N],
        element: ElementKind,
    ) -> Self {
        ConvTransposeDescriptor {
            batch,
            c_in,
            c_out,
            input,
            window: Window::new(kernel),
            output_padding: [0; N],
            groups: 1,
            element,
            layout: ConvLayout::ChannelsFirst,
            activation: Activation::Identity,
        }
    }
    /// Output padding per axis. Default 0.
    pub fn with_output_padding(mut self, output_padding: [usize; N]) -> Self {
        self.output_padding = output_padding;
        self
    }
    /// Output spatial extents: `(in - 1) * stride - padding - padding_end +
    /// span + output_padding`.
    ///
    /// # Errors
    /// `InvalidDescriptor` (field `output`) when an extent would be < 1, or
    /// for a kernel, stride or dilation of 0; `Overflow` when an extent
    /// does not fit in `usize`.
    pub fn output(&self) -> Result<[usize; N]> {
        const OP: &str = "conv_transpose";
        let w = &self.window;
        w.validate(OP)?;
        let mut o = [0usize; N];
        for (a, out) in o.iter_mut().enumerate() {
            let grown = (self.input[a].max(1) - 1)
                .checked_mul(w.stride[a])
                .and_then(|v| v.checked_add(w.span(OP, a).ok()?))
                .and_then(|v| v.checked_add(self.output_padding[a]))
                .ok_or_else(|| overflow(OP, format!("the output extent of axis {a}")))?;
            let cut = w.padded(OP, 0, a)?;
            if grown <= cut {
                return Err(invalid(
                    OP,
                    "output",
                    self.input,
                    format!("axis {a}: the padding {cut} removes the whole output {grown}"),
                ));
            }
            *out = grown - cut;
        }
        Ok(o)
    }
}

/// Checks shared by conv and transposed conv: positive sizes, a valid
/// window, groups dividing both channel counts.
pub(crate) fn validate_common<const N: usize>(
    op: &'static str,
    (batch, c_in, c_out): (usize, usize, usize),
    input: &[usize; N],
    window: &Window<N>,
    groups: usize,
) -> Result<()> {
    window.validate(op)?;
    for (field, v) in [("batch", batch), ("c_in", c_in), ("c_out", c_out)] {
        if v == 0 {
            return Err(invalid(op, field, v, "must be > 0"));
        }
    }
    if input.contains(&0) {
        return Err(invalid(op, "input", input, "every extent must be >= 1"));
    }
    if groups == 0 {
        return Err(invalid(op, "groups", groups, "must be > 0"));
    }
    for (name, c) in [("c_in", c_in), ("c_out", c_out)] {
        if c % groups != 0 {
            return Err(invalid(
                op,
                "groups",
                groups,
                format!("does not divide {name} = {c}"),
            ));
        }
    }
    Ok(())
}



/// `[n, c, spatial...]`.
pub(crate) fn full_shape(n: usize, c: usize, spatial: &[usize]) -> Vec<usize> {
    let mut v = vec![n, c];
    v.extend_from_slice(spatial);
    v
}

/// [`full_shape`] of the positive `i32` sizes cuDNN's problems hold.
pub(crate) fn full_shape_i32(n: i32, c: i32, spatial: &[i32]) -> Vec<usize> {
    let u = |v: i32| v.max(0) as usize;
    let sp: Vec<usize> = spatial.iter().map(|&v| u(v)).collect();
    full_shape(u(n), u(c), &sp)
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conv_output_formula() {
        let d = Conv2dDescriptor::new(1, 3, 64, [224, 224], [7, 7], ElementKind::F32)
            .with_padding([3, 3])
            .with_stride([2, 2]);
        assert_eq!(d.output().unwrap(), [112, 112]);
        let d = Conv1dDescriptor::new(1, 1, 1, [10], [3], ElementKind::F32).with_dilation([2]);
        assert_eq!(d.output().unwrap(), [6]);
        let t = ConvTranspose2dDescriptor::new(1, 4, 2, [5, 5], [3, 3], ElementKind::F32)
            .with_stride([2, 2])
            .with_padding([1, 1])
            .with_output_padding([1, 0]);
        assert_eq!(t.output().unwrap(), [10, 9]);
        let same = Conv1dDescriptor::new(1, 1, 1, [9], [4], ElementKind::F32).with_same_padding();
        assert_eq!(same.output().unwrap(), [9]);
    }
}
