//! Sliding-window geometry shared by the convolution and pooling
//! descriptors (PyTorch's `kernel_size`, `stride`, `padding`, `dilation`;
//! JAX's `window_dimensions`, `window_strides`, `padding` pairs,
//! `window_dilation`), its validation and the output-extent formulas.
//!
//! Per spatial axis, window `o` has taps at `o*stride - padding + j*dilation`
//! for `j in 0..kernel`; taps outside `[0, input)` read the padding.
//! - convolution: `out = (in + padding + padding_end - span) / stride + 1`
//! - pooling: the same with `ceil_mode` rounding up, where a last window
//!   that would start in the end padding is dropped (PyTorch's rule)
//!
//! with `span = dilation * (kernel - 1) + 1`.

use baracuda_kernels_types::{Error, Result};


/// The sliding window of a convolution or pooling over `N` spatial axes.
/// Padding is given per side: `padding` before each axis, `padding_end`
/// after it (equal unless set apart with [`Window::with_padding_ends`] or
/// [`Window::with_same_padding`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Window<const N: usize> {
    /// Taps per axis (`kernel_size`).
    pub kernel: [usize; N],
    /// Step between windows per axis.
    pub stride: [usize; N],
    /// Padding before each axis.
    pub padding: [usize; N],
    /// Padding after each axis.
    pub padding_end: [usize; N],
    /// Step between taps per axis.
    pub dilation: [usize; N],
}

impl<const N: usize> Window<N> {
    /// A window of `kernel` taps: stride 1, no padding, dilation 1.
    pub fn new(kernel: [usize; N]) -> Self {
        Window {
            kernel,
            stride: [1; N],
            padding: [0; N],
            padding_end: [0; N],
            dilation: [1; N],
        }
    }
    /// Stride per axis.
    pub fn with_stride(mut self, stride: [usize; N]) -> Self {
        self.stride = stride;
        self
    }
    /// The same padding on both sides of each axis.
    pub fn with_padding(mut self, padding: [usize; N]) -> Self {
        self.padding = padding;
        self.padding_end = padding;
        self
    }
    /// Padding before (`begin`) and after (`end`) each axis.
    pub fn with_padding_ends(mut self, begin: [usize; N], end: [usize; N]) -> Self {
        self.padding = begin;
        self.padding_end = end;
        self
    }
    /// Dilation per axis.
    pub fn with_dilation(mut self, dilation: [usize; N]) -> Self {
        self.dilation = dilation;
        self
    }
    /// PyTorch's `padding='same'`: `dilation * (kernel - 1)` in all, half
    /// before and the odd one after (a 4-tap kernel pads 1 before, 2 after).
    /// Keeps the input extent when the stride is 1 (PyTorch requires that;
    /// the descriptor's validation does too).
    pub fn with_same_padding(mut self) -> Self {
        for a in 0..N {
            let total = self.dilation[a] * self.kernel[a].saturating_sub(1);
            self.padding[a] = total / 2;
            self.padding_end[a] = total - total / 2;
        }
        self
    }

    /// `dilation * (kernel - 1) + 1` along axis `a` (a kernel of 0 spans
    /// 1).
    ///
    /// # Errors
    /// `Overflow` when it does not fit in `usize`.
    pub(crate) fn span(&self, op: &'static str, a: usize) -> Result<usize> {
        self.dilation[a]
            .checked_mul(self.kernel[a].saturating_sub(1))
            .and_then(|v| v.checked_add(1))
            .ok_or_else(|| overflow(op, format!("the window span of axis {a}")))
    }

    /// `input + padding + padding_end` along axis `a`.
    ///
    /// # Errors
    /// `Overflow` when it does not fit in `usize`.
    pub(crate) fn padded(&self, op: &'static str, input: usize, a: usize) -> Result<usize> {
        input
            .checked_add(self.padding[a])
            .and_then(|v| v.checked_add(self.padding_end[a]))
            .ok_or_else(|| overflow(op, format!("the padded input of axis {a}")))
    }

    /// Rank 1 to 3, every kernel, stride and dilation at least 1.
    pub(crate) fn validate(&self, op: &'static str) -> Result<()> {
        if !(1..=3).contains(&N) {
            return Err(Error::Unsupported {
                op,
                what: format!("spatial rank {N} (takes 1, 2, 3)"),
            });
        }
        for (field, arr) in [
            ("kernel", &self.kernel),
            ("stride", &self.stride),
            ("dilation", &self.dilation),
        ] {
            if arr.contains(&0) {
                return Err(invalid(op, field, arr, "every extent must be >= 1"));
            }
        }
        Ok(())
    }

    /// Output extents of a convolution over `input`.
    pub(crate) fn conv_output(&self, op: &'static str, input: &[usize; N]) -> Result<[usize; N]> {
        self.output(op, input, false)
    }

    /// Output extents of a pooling over `input`, rounding up with `ceil`.
    ///
    /// # Errors
    /// As [`Window::validate`]; `InvalidDescriptor` (field `output`) when
    /// the window is longer than the padded input; `Overflow`.
    pub(crate) fn output(
        &self,
        op: &'static str,
        input: &[usize; N],
        ceil: bool,
    ) -> Result<[usize; N]> {
        self.validate(op)?;
        let mut out = [0usize; N];
        for a in 0..N {
            let padded = self.padded(op, input[a], a)?;
            let span = self.span(op, a)?;
            let s = self.stride[a];
            if padded < span {
                return Err(invalid(
                    op,
                    "output",
                    input,
                    format!(
                        "axis {a}: the padded input {padded} is shorter than the window span {span}"
                    ),
                ));
            }
            let num = (padded - span)
                .checked_add(if ceil { s - 1 } else { 0 })
                .ok_or_else(|| overflow(op, format!("the rounded-up output of axis {a}")))?;
            let mut o = num / s + 1;
            if ceil && (o - 1) * s >= input[a] + self.padding[a] {
                o -= 1;
            }
            out[a] = o;
        }
        Ok(out)
    }
}

/// The setters of every descriptor with a `window: Window<N>` and a
/// `layout: ConvLayout` field.
macro_rules! window_setters {
    ($ty:ident) => {
        impl<const N: usize> $ty<N> {
            /// Stride per axis.
            pub fn with_stride(mut self, stride: [usize; N]) -> Self {
                self.window.stride = stride;
                self
            }
            /// The same padding on both sides of each axis. Default 0.
            pub fn with_padding(mut self, padding: [usize; N]) -> Self {
                self.window = self.window.with_padding(padding);
                self
            }
            /// Padding before and after each axis.
            pub fn with_padding_ends(mut self, begin: [usize; N], end: [usize; N]) -> Self {
                self.window = self.window.with_padding_ends(begin, end);
                self
            }
            /// Dilation per axis. Default 1.
            pub fn with_dilation(mut self, dilation: [usize; N]) -> Self {
                self.window.dilation = dilation;
                self
            }
            /// Memory order. Default channels-first.
            pub fn with_layout(mut self, layout: $crate::conv::ConvLayout) -> Self {
                self.layout = layout;
                self
            }
        }
    };
}
pub(crate) use window_setters;

/// `InvalidDescriptor` naming `field` of `op`, its value and why.
/// `Overflow` of `what` in `op`.
pub(crate) fn overflow(op: &'static str, what: String) -> Error {
    Error::Overflow { op, what }
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

/// `v` as the `i32` the CUDA libraries and kernels take, or `Unsupported`
/// naming the field.
pub(crate) fn to_i32(op: &'static str, field: &str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::Unsupported {
        op,
        what: format!("{field} = {v} (extents up to 2^31-1)"),
    })
}

/// Every element of `v` as `i32` (see [`to_i32`]).
pub(crate) fn to_i32s(op: &'static str, field: &str, v: &[usize]) -> Result<Vec<i32>> {
    v.iter().map(|&x| to_i32(op, field, x)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_extents_follow_pytorch() {
        // ResNet stem: 224 -> 112 with k7 s2 p3.
        let w = Window::new([7, 7]).with_stride([2, 2]).with_padding([3, 3]);
        assert_eq!(w.conv_output("t", &[224, 224]).unwrap(), [112, 112]);
        // dilation 2: span 5 over 10 -> 6
        let w = Window::new([3]).with_dilation([2]);
        assert_eq!(w.conv_output("t", &[10]).unwrap(), [6]);
        // ceil_mode: 5 with k2 s2 -> 3 (floor gives 2)
        let w = Window::new([2]).with_stride([2]);
        assert_eq!(w.output("t", &[5], true).unwrap(), [3]);
        assert_eq!(w.output("t", &[5], false).unwrap(), [2]);
        // the drop rule: in 6, k2 s2 p1 -> 4; in 5, k3 s3 p1 -> 2
        let w = Window::new([2]).with_stride([2]).with_padding([1]);
        assert_eq!(w.output("t", &[6], true).unwrap(), [4]);
        let w = Window::new([3]).with_stride([3]).with_padding([1]);
        assert_eq!(w.output("t", &[5], true).unwrap(), [2]);
        // a window longer than the padded input
        let w = Window::new([9]);
        assert!(matches!(
            w.conv_output("t", &[8]),
            Err(Error::InvalidDescriptor {
                field: "output",
                ..
            })
        ));
    }

    #[test]
    fn same_padding_keeps_the_extent() {
        for (k, d) in [(3, 1), (4, 1), (4, 2), (1, 1), (6, 3)] {
            let w = Window::new([k]).with_dilation([d]).with_same_padding();
            assert_eq!(w.conv_output("t", &[17]).unwrap(), [17], "k{k} d{d}");
            assert!(w.padding_end[0] - w.padding[0] <= 1);
        }
        let w = Window::new([4]).with_same_padding();
        assert_eq!((w.padding, w.padding_end), ([1], [2]));
        assert_ne!(w.padding, w.padding_end);
    }

    #[test]
    fn validation_names_the_field() {
        let field = |w: Window<2>| match w.validate("t") {
            Err(Error::InvalidDescriptor { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(Window::new([0, 3])), "kernel");
        assert_eq!(field(Window::new([3, 3]).with_stride([1, 0])), "stride");
        assert_eq!(field(Window::new([3, 3]).with_dilation([0, 1])), "dilation");
        assert!(matches!(
            Window::new([1; 4]).validate("t"),
            Err(Error::Unsupported { .. })
        ));
        assert!(matches!(
            to_i32("t", "x", 1 << 31),
            Err(Error::Unsupported { .. })
        ));
    }
}
