//! Property tests of the norm family's host-side validation: random
//! shapes, group counts, eps and element types go through the checks
//! GroupNorm's `select` runs before it touches the GPU; nothing panics, and
//! every answer is the kernel's dtype code or a typed `Error`.

use baracuda_kernels_types::{ElementKind, Error};
use proptest::prelude::*;

use super::group_norm::validate;
use super::GroupNormDescriptor;
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
}
