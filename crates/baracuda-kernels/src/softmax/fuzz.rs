//! Property tests of the softmax family's host-side validation: random
//! shapes, dims and element types go through the checks `select` runs
//! before it touches the GPU; nothing panics, and every answer is the
//! kernel's dtype code or a typed `Error`.

use baracuda_kernels_types::ElementKind;
use proptest::prelude::*;

use super::softmax::validate;
use super::{SoftmaxDescriptor, SoftmaxMask, SoftmaxOp};
use crate::fuzz::{config, sizes, typed};

fn element() -> impl Strategy<Value = ElementKind> {
    prop_oneof![
        Just(ElementKind::F32),
        Just(ElementKind::F64),
        Just(ElementKind::F16),
        Just(ElementKind::Bf16),
        Just(ElementKind::I32),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn descriptors_are_accepted_or_typed_errors(
        shape in sizes::<3>(),
        dim in 0usize..6,
        op in 0usize..3,
        element in element(),
    ) {
        let desc = SoftmaxDescriptor::new(SoftmaxOp::ALL[op], element, shape).with_dim(dim);
        match validate::<f32, 3, f32>(&desc) {
            Ok(code) => {
                prop_assert!(dim < 3 && element == ElementKind::F32);
                prop_assert_eq!(code, (0, false));
            }
            Err(e) => {
                prop_assert!(dim >= 3 || element != ElementKind::F32);
                typed("softmax", &e)?;
            }
        }
        let desc = SoftmaxDescriptor::new(SoftmaxOp::ALL[op], ElementKind::I32, shape);
        let unsupported = matches!(
            validate::<i32, 3, i32>(&desc),
            Err(baracuda_kernels_types::Error::Unsupported { .. })
        );
        prop_assert!(unsupported, "i32 softmax is unsupported");
    }

    /// Output dtypes and masks: f32 y only for 16-bit x, masks on softmax
    /// and log-softmax only.
    #[test]
    fn output_dtypes_and_masks_are_accepted_or_typed_errors(
        shape in sizes::<2>(),
        op in 0usize..3,
        mask in 0usize..3,
        out in element(),
    ) {
        let mask = [SoftmaxMask::None, SoftmaxMask::Keep, SoftmaxMask::Add][mask];
        let op = SoftmaxOp::ALL[op];
        let desc = SoftmaxDescriptor::new(op, ElementKind::Bf16, shape)
            .with_dtype(out)
            .with_mask(mask);
        let softmin_masked = op == SoftmaxOp::Softmin && mask != SoftmaxMask::None;
        let widened = validate::<half::bf16, 2, f32>(&desc);
        let same = validate::<half::bf16, 2, half::bf16>(&desc);
        match out {
            ElementKind::F32 => {
                prop_assert_eq!(widened.is_ok(), !softmin_masked);
                if let Ok(code) = widened {
                    prop_assert_eq!(code, (3, true));
                }
                let dtype_mismatch = matches!(
                    same,
                    Err(baracuda_kernels_types::Error::DtypeMismatch { arg: "y", .. })
                );
                prop_assert!(dtype_mismatch);
            }
            ElementKind::Bf16 => {
                prop_assert_eq!(same.is_ok(), !softmin_masked);
                prop_assert!(widened.is_err());
            }
            _ => {
                let unsupported = matches!(
                    widened,
                    Err(baracuda_kernels_types::Error::Unsupported { .. })
                );
                prop_assert!(unsupported, "bf16 to {out}");
            }
        }
        for r in [widened, same] {
            if let Err(e) = r {
                typed("softmax", &e)?;
            }
        }
        // f32 and f64 inputs keep their dtype
        let f32_to_f64 = SoftmaxDescriptor::new(op, ElementKind::F32, shape)
            .with_dtype(ElementKind::F64);
        let unsupported = matches!(
            validate::<f32, 2, f64>(&f32_to_f64),
            Err(baracuda_kernels_types::Error::Unsupported { .. })
        );
        prop_assert!(unsupported);
    }
}
