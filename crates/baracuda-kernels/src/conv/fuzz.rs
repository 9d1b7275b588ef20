//! Property tests of the conv family's host-side validation: every
//! descriptor (convolution, transposed convolution, pooling, adaptive and
//! Lp pooling) with random sizes, windows and ranks goes through the checks
//! `select` runs before it touches the GPU, and through the public
//! `output()`: nothing panics, every answer is the output extents or a
//! typed `Error`, and every window of an accepted descriptor starts inside
//! its padded input (and, without `ceil_mode`, ends inside it).

use baracuda_kernels_types::ElementKind;
use proptest::prelude::*;

use super::adaptive_pool::validate_adaptive;
use super::descriptor::validate_common;
use super::lp_pool::validate_lp;
use super::pool::validate_pool;
use super::transpose::validate_transpose;
use super::{
    AdaptivePoolDescriptor, ConvDescriptor, ConvLayout, ConvTransposeDescriptor, LpPoolDescriptor,
    PoolDescriptor, Window,
};
use crate::fuzz::{config, size, sizes, typed};
use crate::Activation;

fn window<const N: usize>() -> impl Strategy<Value = Window<N>> {
    (sizes(), sizes(), sizes(), sizes(), sizes()).prop_map(
        |(kernel, stride, padding, padding_end, dilation)| Window {
            kernel,
            stride,
            padding,
            padding_end,
            dilation,
        },
    )
}

fn element() -> impl Strategy<Value = ElementKind> {
    proptest::sample::select(ElementKind::ALL.to_vec())
}

fn layout() -> impl Strategy<Value = ConvLayout> {
    prop_oneof![Just(ConvLayout::ChannelsFirst), Just(ConvLayout::ChannelsLast)]
}

/// Every output extent is at least 1, and each axis's last window starts
/// inside the padded input (ends inside it too unless `ceil`), in `u128`.
fn windows_fit<const N: usize>(
    what: &str,
    w: &Window<N>,
    input: &[usize; N],
    out: &[usize; N],
    ceil: bool,
) -> Result<(), TestCaseError> {
    for a in 0..N {
        let wide = |v: usize| v as u128;
        let padded = wide(input[a]) + wide(w.padding[a]) + wide(w.padding_end[a]);
        let first_of_last = (wide(out[a]).max(1) - 1) * wide(w.stride[a]);
        let span = wide(w.dilation[a]) * wide(w.kernel[a]).saturating_sub(1) + 1;
        let fits = if ceil {
            first_of_last < padded
        } else {
            first_of_last + span <= padded
        };
        prop_assert!(
            out[a] >= 1 && fits,
            "{what}: axis {a} output {} for input {} and {w:?}",
            out[a],
            input[a]
        );
    }
    Ok(())
}

fn conv<const N: usize>(d: ConvDescriptor<N>) -> Result<(), TestCaseError> {
    let planes = (d.batch, d.c_in, d.c_out);
    match validate_common("conv", planes, &d.input, &d.window, d.groups).and_then(|()| d.output())
    {
        Ok(out) => windows_fit("conv", &d.window, &d.input, &out, false),
        Err(e) => typed("conv", &e),
    }?;
    match d.output() {
        Ok(_) => Ok(()),
        Err(e) => typed("conv output()", &e),
    }
}

fn transpose<const N: usize>(d: ConvTransposeDescriptor<N>) -> Result<(), TestCaseError> {
    match validate_transpose(&d) {
        Ok(out) => prop_assert!(out.iter().all(|&o| o >= 1), "transpose output {out:?}"),
        Err(e) => typed("conv_transpose", &e)?,
    }
    match d.output() {
        Ok(_) => Ok(()),
        Err(e) => typed("conv_transpose output()", &e),
    }
}

fn pool<const N: usize>(d: PoolDescriptor<N>, max: bool) -> Result<(), TestCaseError> {
    match validate_pool(&d, max) {
        Ok(out) => windows_fit("pool", &d.window, &d.input, &out, d.ceil_mode),
        Err(e) => typed("pool", &e),
    }
}

fn lp<const N: usize>(d: LpPoolDescriptor<N>) -> Result<(), TestCaseError> {
    match validate_lp(&d) {
        Ok(out) => windows_fit("lp_pool", &d.window, &d.input, &out, d.ceil_mode),
        Err(e) => typed("lp_pool", &e),
    }
}

fn adaptive<const N: usize>(d: AdaptivePoolDescriptor<N>) -> Result<(), TestCaseError> {
    match validate_adaptive(&d) {
        Ok(()) => prop_assert!(!d.output.contains(&0) && !d.input.contains(&0)),
        Err(e) => typed("adaptive_pool", &e)?,
    }
    Ok(())
}

/// The properties of every conv-family descriptor of spatial rank `N`.
macro_rules! rank_properties {
    ($rank:ident, $n:literal) => {
        mod $rank {
            use super::*;

            proptest! {
                #![proptest_config(config())]

                #[test]
                fn convolution(
                    (batch, c_in, c_out, groups) in (size(), size(), size(), size()),
                    input in sizes::<$n>(), window in window::<$n>(),
                    element in element(), layout in layout(),
                ) {
                    conv(ConvDescriptor {
                        batch, c_in, c_out, input, window, groups, element, layout,
                        activation: Activation::Identity,
                    })?;
                }

                #[test]
                fn transposed_convolution(
                    (batch, c_in, c_out, groups) in (size(), size(), size(), size()),
                    input in sizes::<$n>(), window in window::<$n>(),
                    output_padding in sizes::<$n>(), element in element(),
                ) {
                    transpose(ConvTransposeDescriptor {
                        batch, c_in, c_out, input, window, output_padding, groups, element,
                        layout: ConvLayout::ChannelsFirst,
                        activation: Activation::Relu,
                    })?;
                }

                #[test]
                fn pooling(
                    (batch, channels) in (size(), size()),
                    input in sizes::<$n>(), window in window::<$n>(),
                    (ceil_mode, count_include_pad, max) in (any::<bool>(), any::<bool>(), any::<bool>()),
                    divisor_override in proptest::option::of(size()),
                    element in element(), layout in layout(),
                ) {
                    pool(PoolDescriptor {
                        batch, channels, input, window, ceil_mode, count_include_pad,
                        divisor_override, element, layout,
                    }, max)?;
                }

                #[test]
                fn lp_pooling(
                    (batch, channels) in (size(), size()),
                    input in sizes::<$n>(), window in window::<$n>(),
                    p in prop_oneof![Just(0.0), Just(-1.0), Just(f64::NAN), Just(f64::INFINITY), 0.1f64..8.0],
                    ceil_mode in any::<bool>(), element in element(), layout in layout(),
                ) {
                    lp(LpPoolDescriptor { batch, channels, input, window, p, ceil_mode, element, layout })?;
                }

                #[test]
                fn adaptive_pooling(
                    (batch, channels) in (size(), size()),
                    input in sizes::<$n>(), output in sizes::<$n>(),
                    element in element(), layout in layout(),
                ) {
                    adaptive(AdaptivePoolDescriptor { batch, channels, input, output, element, layout })?;
                }
            }
        }
    };
}

rank_properties!(rank1, 1);
rank_properties!(rank2, 2);
rank_properties!(rank3, 3);
rank_properties!(rank4, 4);
