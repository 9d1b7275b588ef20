//! Property tests of the norm family's host-side validation: random
//! shapes, group counts, eps, momenta and element types go through the
//! checks GroupNorm's and BatchNorm's `select` run before they touch the
//! GPU; nothing panics, and every answer is the kernel's dtype code (or
//! Ok) or a typed `Error`.

use baracuda_kernels_types::{ElementKind, Error};
use proptest::prelude::*;

use super::group_norm::validate;
use super::{BatchNormDescriptor, GroupNormDescriptor};
use crate::conv::ConvLayout;
use crate::fuzz::{config, size, sizes, typed};

fn element() -> impl Strategy<Value = ElementKind> {
    prop_oneof![
        Just(ElementKind::F32),
        Just(ElementKind::F64),
        Just(ElementKind::Bf16),
        Just(ElementKind::I32),
    ]
}

fn eps() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => 0.0f64..1.0,
        1 => Just(-1e-5),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn group_norm_descriptors_are_accepted_or_typed_errors(
        shape in sizes::<4>(),
        groups in size(),
        eps in eps(),
        last in any::<bool>(),
        element in element(),
    ) {
        let layout = if last { ConvLayout::ChannelsLast } else { ConvLayout::ChannelsFirst };
        let desc = GroupNormDescriptor::group_norm(element, shape, groups)
            .with_eps(eps)
            .with_layout(layout);
        match validate::<f32, 4>(&desc) {
            Ok(code) => {
                prop_assert_eq!(code, 0);
                prop_assert!(element == ElementKind::F32);
                prop_assert!(groups > 0 && shape[1] % groups == 0);
                prop_assert!(shape[1] > 0 && shape[2] > 0 && shape[3] > 0);
                prop_assert!(eps.is_finite() && eps >= 0.0);
                // The sizes the plan derives do not overflow.
                let _ = (desc.stat_rows(), desc.group_elements());
            }
            Err(e) => {
                let bad = element != ElementKind::F32
                    || groups == 0
                    || shape[1] % groups.max(1) != 0
                    || shape[1..].contains(&0)
                    || !eps.is_finite()
                    || eps < 0.0
                    || shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).is_none_or(|n| n > 1 << 56)
                    || desc.group_channels() > 1 << 24
                    || shape[1] > u32::MAX as usize
                    || shape[1..].iter().try_fold(1usize, |a, &d| a.checked_mul(d)).is_none_or(|n| n > 1 << 56);
                prop_assert!(bad, "{desc:?} rejected: {e}");
                typed("group_norm", &e)?;
            }
        }
        let instance = GroupNormDescriptor::instance_norm(ElementKind::F64, shape);
        if let Ok(code) = validate::<f64, 4>(&instance) {
            prop_assert_eq!(code, 1);
            prop_assert_eq!(instance.group_channels(), 1);
        }
        let rank2 = GroupNormDescriptor::group_norm(ElementKind::F32, [2, 4], 2);
        let unsupported = matches!(validate::<f32, 2>(&rank2), Err(Error::Unsupported { .. }));
        prop_assert!(unsupported, "rank 2 is unsupported");
    }

    #[test]
    fn batch_norm_descriptors_are_accepted_or_typed_errors(
        shape in sizes::<4>(),
        eps in eps(),
        momentum in eps(),
        last in any::<bool>(),
        training in any::<bool>(),
        running in any::<bool>(),
        element in element(),
        f32_params in any::<bool>(),
    ) {
        let layout = if last { ConvLayout::ChannelsLast } else { ConvLayout::ChannelsFirst };
        let param = if f32_params { ElementKind::F32 } else { element };
        let desc = BatchNormDescriptor::batch_norm(element, shape)
            .with_param(param)
            .with_eps(eps)
            .with_momentum(momentum)
            .with_training(training)
            .with_running_stats(running)
            .with_layout(layout);
        let count = |dims: &[usize]| dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let big = |n: Option<usize>| n.is_none_or(|n| n > 1 << 56);
        match super::batch_norm::validate::<half::bf16, f32, 4>(&desc) {
            Ok(()) => {
                prop_assert!(element == ElementKind::Bf16 && param == ElementKind::F32);
                prop_assert!(shape[1..].iter().all(|&d| d > 0));
                prop_assert!(eps.is_finite() && eps >= 0.0 && momentum.is_finite());
                prop_assert!(!training || desc.channel_elements() != 1);
                prop_assert!(training || running);
            }
            Err(e) => {
                let bad = element != ElementKind::Bf16
                    || param != ElementKind::F32
                    || shape[1..].contains(&0)
                    || !eps.is_finite()
                    || eps < 0.0
                    || !momentum.is_finite()
                    || big(count(&shape))
                    || big(count(&shape[1..]))
                    || shape[1] > u32::MAX as usize
                    || (training && desc.channel_elements() == 1)
                    || (!training && !running);
                prop_assert!(bad, "{desc:?} rejected: {e}");
                typed("batch_norm", &e)?;
            }
        }
    }
}
