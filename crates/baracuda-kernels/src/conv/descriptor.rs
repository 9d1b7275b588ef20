//! Convolution descriptors (rank-generic, with the seed API's `Conv1d` /
//! `Conv2d` / `Conv3d` constructors and setters), their validation and
//! output-size math, and the tensor checks every plan of the family runs.
//!
//! Output size, per spatial axis (PyTorch):
//! - conv:      `out = (in + 2*pad - dilation*(k-1) - 1) / stride + 1`
//! - transpose: `out = (in-1)*stride - 2*pad + dilation*(k-1) + output_padding + 1`

use baracuda_kernels_types::{Activation, Element, Error, Result, Shape, TensorRef};

use super::ConvLayout;
use baracuda_kernels_types::ElementKind;

/// A convolution of spatial rank `N` (1, 2 or 3), PyTorch `nn.ConvNd`
/// semantics: cross-correlation, zero padding on both sides, dilation,
/// groups.
///
/// `x`: `[batch, c_in, input...]`; `w`: `[c_out, c_in / groups, filter...]`;
/// `y`: `[batch, c_out, output...]`. Build with `new` and the `with_*`
/// setters (defaults: padding 0, stride 1, dilation 1, groups 1,
/// channels-first).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ConvDescriptor<const N: usize> {
    /// Batch `N`.
    pub batch: i32,
    /// Input channels.
    pub c_in: i32,
    /// Output channels.
    pub c_out: i32,
    /// Input spatial extents (`[l]`, `[h, w]`, `[d, h, w]`).
    pub input: [i32; N],
    /// Filter spatial extents.
    pub filter: [i32; N],
    /// Zero padding on each side, per axis.
    pub padding: [i32; N],
    /// Stride per axis.
    pub stride: [i32; N],
    /// Dilation per axis.
    pub dilation: [i32; N],
    /// Group count; must divide `c_in` and `c_out`.
    pub groups: i32,
    /// Element type of x, w, y.
    pub element: ElementKind,
    /// Memory order of x, w, y.
    pub layout: ConvLayout,
    /// Applied after the convolution and the bias: identity (default) or
    /// ReLU.
    pub activation: Activation,
}

/// A transposed convolution of spatial rank `N`, PyTorch
/// `nn.ConvTransposeNd` semantics (the gradient of conv with respect to
/// its input).
///
/// `x`: `[batch, c_in, input...]`; `w`: `[c_in, c_out / groups,
/// filter...]`; `y`: `[batch, c_out, output...]`. Defaults: padding 0,
/// stride 1, dilation 1, output_padding 0, groups 1, channels-first.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ConvTransposeDescriptor<const N: usize> {
    /// Batch `N`.
    pub batch: i32,
    /// Input channels.
    pub c_in: i32,
    /// Output channels.
    pub c_out: i32,
    /// Input spatial extents.
    pub input: [i32; N],
    /// Filter spatial extents.
    pub filter: [i32; N],
    /// Padding removed from each side of the output, per axis.
    pub padding: [i32; N],
    /// Stride per axis.
    pub stride: [i32; N],
    /// Dilation per axis.
    pub dilation: [i32; N],
    /// Extra output extent on the high side, per axis (< stride).
    pub output_padding: [i32; N],
    /// Group count; must divide `c_in` and `c_out`.
    pub groups: i32,
    /// Element type.
    pub element: ElementKind,
    /// Memory order.
    pub layout: ConvLayout,
    /// Applied after the transposed convolution and the bias: identity
    /// (default) or ReLU.
    pub activation: Activation,
}

/// 1-D convolution descriptor (`[N, C, L]`).
pub type Conv1dDescriptor = ConvDescriptor<1>;
/// 2-D convolution descriptor (`[N, C, H, W]`).
pub type Conv2dDescriptor = ConvDescriptor<2>;
/// 3-D convolution descriptor (`[N, C, D, H, W]`).
pub type Conv3dDescriptor = ConvDescriptor<3>;
/// 1-D transposed convolution descriptor.
pub type ConvTranspose1dDescriptor = ConvTransposeDescriptor<1>;
/// 2-D transposed convolution descriptor.
pub type ConvTranspose2dDescriptor = ConvTransposeDescriptor<2>;
/// 3-D transposed convolution descriptor.
pub type ConvTranspose3dDescriptor = ConvTransposeDescriptor<3>;

macro_rules! conv_ctors {
    ($n:literal, [$($i:ident),+], [$($k:ident),+], [$($p:ident),+], [$($s:ident),+], [$($d:ident),+], [$($o:ident),+]) => {
        impl ConvDescriptor<$n> {
            /// A descriptor with PyTorch's defaults (padding 0, stride 1,
            /// dilation 1, groups 1) and channels-first layout.
            #[allow(clippy::too_many_arguments)] // the seed API's positional constructor
            pub fn new(batch: i32, c_in: i32, $($i: i32,)+ c_out: i32, $($k: i32,)+ element: ElementKind) -> Self {
                ConvDescriptor {
                    batch, c_in, c_out, input: [$($i),+], filter: [$($k),+],
                    padding: [0; $n], stride: [1; $n], dilation: [1; $n], groups: 1,
                    element, layout: ConvLayout::ChannelsFirst, activation: Activation::Identity,
                }
            }
            /// Zero padding on each side, per axis. Default 0.
            pub fn with_padding(mut self, $($p: i32),+) -> Self { self.padding = [$($p),+]; self }
            /// Stride per axis. Default 1.
            pub fn with_stride(mut self, $($s: i32),+) -> Self { self.stride = [$($s),+]; self }
            /// Dilation per axis. Default 1.
            pub fn with_dilation(mut self, $($d: i32),+) -> Self { self.dilation = [$($d),+]; self }
        }
        impl ConvTransposeDescriptor<$n> {
            /// A descriptor with PyTorch's defaults (padding 0, stride 1,
            /// dilation 1, output_padding 0, groups 1), channels-first.
            #[allow(clippy::too_many_arguments)] // the seed API's positional constructor
            pub fn new(batch: i32, c_in: i32, $($i: i32,)+ c_out: i32, $($k: i32,)+ element: ElementKind) -> Self {
                ConvTransposeDescriptor {
                    batch, c_in, c_out, input: [$($i),+], filter: [$($k),+],
                    padding: [0; $n], stride: [1; $n], dilation: [1; $n], output_padding: [0; $n],
                    groups: 1, element, layout: ConvLayout::ChannelsFirst,
                    activation: Activation::Identity,
                }
            }
            /// Padding per axis. Default 0.
            pub fn with_padding(mut self, $($p: i32),+) -> Self { self.padding = [$($p),+]; self }
            /// Stride per axis. Default 1.
            pub fn with_stride(mut self, $($s: i32),+) -> Self { self.stride = [$($s),+]; self }
            /// Dilation per axis. Default 1.
            pub fn with_dilation(mut self, $($d: i32),+) -> Self { self.dilation = [$($d),+]; self }
            /// Output padding per axis. Default 0.
            pub fn with_output_padding(mut self, $($o: i32),+) -> Self { self.output_padding = [$($o),+]; self }
        }
    };
}

conv_ctors!(
    1,
    [l_in],
    [l_filt],
    [pad_l],
    [stride_l],
    [dilation_l],
    [output_pad_l]
);
conv_ctors!(
    2,
    [h_in, w_in],
    [h_filt, w_filt],
    [pad_h, pad_w],
    [stride_h, stride_w],
    [dilation_h, dilation_w],
    [output_pad_h, output_pad_w]
);
conv_ctors!(
    3,
    [d_in, h_in, w_in],
    [d_filt, h_filt, w_filt],
    [pad_d, pad_h, pad_w],
    [stride_d, stride_h, stride_w],
    [dilation_d, dilation_h, dilation_w],
    [output_pad_d, output_pad_h, output_pad_w]
);

impl<const N: usize> ConvDescriptor<N> {
    /// Group count. Default 1.
    pub fn with_groups(mut self, groups: i32) -> Self {
        self.groups = groups;
        self
    }
    /// Memory order. Default channels-first.
    pub fn with_layout(mut self, layout: ConvLayout) -> Self {
        self.layout = layout;
        self
    }
    /// Activation after the bias. Default identity.
    pub fn with_activation(mut self, activation: Activation) -> Self {
        self.activation = activation;
        self
    }
    /// Output spatial extents (may be <= 0 for an invalid descriptor).
    pub fn output(&self) -> [i64; N] {
        let mut o = [0i64; N];
        for (a, out) in o.iter_mut().enumerate() {
            let eff = self.dilation[a] as i64 * (self.filter[a] as i64 - 1) + 1;
            let num = self.input[a] as i64 + 2 * self.padding[a] as i64 - eff;
            *out = if num < 0 || self.stride[a] <= 0 {
                0
            } else {
                num / self.stride[a] as i64 + 1
            };
        }
        o
    }
}

impl<const N: usize> ConvTransposeDescriptor<N> {
    /// Group count. Default 1.
    pub fn with_groups(mut self, groups: i32) -> Self {
        self.groups = groups;
        self
    }
    /// Memory order. Default channels-first.
    pub fn with_layout(mut self, layout: ConvLayout) -> Self {
        self.layout = layout;
        self
    }
    /// Activation after the bias. Default identity.
    pub fn with_activation(mut self, activation: Activation) -> Self {
        self.activation = activation;
        self
    }
    /// Output spatial extents (may be <= 0 for an invalid descriptor).
    pub fn output(&self) -> [i64; N] {
        let mut o = [0i64; N];
        for (a, out) in o.iter_mut().enumerate() {
            *out = (self.input[a] as i64 - 1) * self.stride[a] as i64 - 2 * self.padding[a] as i64
                + self.dilation[a] as i64 * (self.filter[a] as i64 - 1)
                + self.output_padding[a] as i64
                + 1;
        }
        o
    }
}

pub(crate) fn invalid(
    op: &'static str,
    field: &'static str,
    value: impl core::fmt::Debug,
    reason: impl Into<String>,
) -> Error {
    Error::InvalidDescriptor {
        op,
        field,
        value: format!("{value:?}"),
        reason: reason.into(),
    }
}

/// Checks shared by conv and transposed conv.
#[allow(clippy::too_many_arguments)] // one per descriptor field
pub(crate) fn validate_common<const N: usize>(
    op: &'static str,
    batch: i32,
    c_in: i32,
    c_out: i32,
    input: &[i32; N],
    filter: &[i32; N],
    padding: &[i32; N],
    stride: &[i32; N],
    dilation: &[i32; N],
    groups: i32,
) -> Result<()> {
    if !(1..=3).contains(&N) {
        return Err(Error::Unsupported {
            op,
            what: format!("spatial rank {N} (takes 1, 2, 3)"),
        });
    }
    for (field, v) in [("batch", batch), ("c_in", c_in), ("c_out", c_out)] {
        if v <= 0 {
            return Err(invalid(op, field, v, "must be > 0"));
        }
    }
    for (field, arr, min) in [
        ("input", input, 1),
        ("filter", filter, 1),
        ("padding", padding, 0),
        ("stride", stride, 1),
        ("dilation", dilation, 1),
    ] {
        if arr.iter().any(|&v| v < min) {
            return Err(invalid(
                op,
                field,
                arr,
                format!("every extent must be >= {min}"),
            ));
        }
    }
    if groups <= 0 {
        return Err(invalid(op, "groups", groups, "must be > 0"));
    }
    if c_in % groups != 0 {
        return Err(invalid(
            op,
            "groups",
            groups,
            format!("does not divide c_in = {c_in}"),
        ));
    }
    if c_out % groups != 0 {
        return Err(invalid(
            op,
            "groups",
            groups,
            format!("does not divide c_out = {c_out}"),
        ));
    }
    Ok(())
}

/// Output extents as i32, or `InvalidDescriptor` naming the output when an
/// extent is <= 0 or beyond `i32`.
pub(crate) fn checked_output<const N: usize>(op: &'static str, out: [i64; N]) -> Result<[i32; N]> {
    let mut o = [0i32; N];
    for a in 0..N {
        if out[a] <= 0 || out[a] > i32::MAX as i64 {
            return Err(invalid(
                op,
                "output",
                out,
                "every output extent must be in 1..=i32::MAX",
            ));
        }
        o[a] = out[a] as i32;
    }
    Ok(o)
}

/// Dense element strides of a logical `[n, c, spatial...]` shape.
pub(crate) fn layout_strides(shape: &[usize], layout: ConvLayout) -> Vec<usize> {
    let r = shape.len();
    let mut st = vec![0usize; r];
    let mut acc = 1usize;
    match layout {
        ConvLayout::ChannelsFirst => {
            for i in (0..r).rev() {
                st[i] = acc;
                acc = acc.saturating_mul(shape[i]);
            }
        }
        ConvLayout::ChannelsLast => {
            st[1] = 1;
            acc = shape[1];
            for i in (2..r).rev() {
                st[i] = acc;
                acc = acc.saturating_mul(shape[i]);
            }
            st[0] = acc;
        }
    }
    st
}

/// A tensor operand of `run`: its address after checking shape, dense
/// layout strides and context. Writable operands are checked through
/// `as_const()`.
pub(crate) fn check_tensor<T: Element, const R: usize>(
    op: &'static str,
    arg: &'static str,
    view: &TensorRef<'_, T, R>,
    expected: &[usize],
    layout: ConvLayout,
    ctx: usize,
) -> Result<u64> {
    let (data, shape, strides) = (view.data(), &view.shape()[..], &view.strides()[..]);
    if shape != expected {
        return Err(Error::ShapeMismatch {
            op,
            arg,
            expected: Shape::from(expected),
            got: Shape::from(shape),
        });
    }
    let want = layout_strides(expected, layout);
    let ok = shape
        .iter()
        .zip(strides.iter().zip(&want))
        .all(|(&e, (&s, &w))| e == 1 || s == w);
    if !ok {
        return Err(Error::InvalidArgument {
            op,
            arg,
            reason: format!("strides {strides:?} are not the dense {layout:?} strides {want:?}"),
        });
    }
    if data.ctx_id() != ctx {
        return Err(Error::ContextMismatch { op, arg });
    }
    Ok(data.addr())
}

/// i32 extents as usize (callers validated them positive).
pub(crate) fn dims(v: &[i32]) -> Vec<usize> {
    v.iter().map(|&x| x.max(0) as usize).collect()
}

/// `[n, c, spatial...]` as usize.
pub(crate) fn full_shape(n: i32, c: i32, spatial: &[i32]) -> Vec<usize> {
    let mut v = vec![n.max(0) as usize, c.max(0) as usize];
    v.extend(dims(spatial));
    v
}

/// `Unsupported` when a tensor of `shape` has more elements than cuDNN's
/// 32-bit legacy descriptors can index.
pub(crate) fn check_i32_elems(op: &'static str, arg: &str, shape: &[usize]) -> Result<()> {
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    match n {
        Some(n) if n <= i32::MAX as usize => Ok(()),
        _ => Err(Error::Unsupported {
            op,
            what: format!(
                "{arg} of shape {} has more than 2^31-1 elements",
                Shape::from(shape)
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conv_output_formula() {
        let d = Conv2dDescriptor::new(1, 3, 224, 224, 64, 7, 7, ElementKind::F32)
            .with_padding(3, 3)
            .with_stride(2, 2);
        assert_eq!(d.output(), [112, 112]);
        let d = Conv1dDescriptor::new(1, 1, 10, 1, 3, ElementKind::F32).with_dilation(2);
        assert_eq!(d.output(), [6]);
        let t = ConvTranspose2dDescriptor::new(1, 4, 5, 5, 2, 3, 3, ElementKind::F32)
            .with_stride(2, 2)
            .with_padding(1, 1)
            .with_output_padding(1, 0);
        assert_eq!(t.output(), [10, 9]);
    }

    #[test]
    fn strides() {
        assert_eq!(
            layout_strides(&[2, 3, 4, 5], ConvLayout::ChannelsLast),
            vec![60, 1, 15, 3]
        );
        assert_eq!(
            layout_strides(&[2, 3, 4], ConvLayout::ChannelsFirst),
            vec![12, 4, 1]
        );
    }
}
