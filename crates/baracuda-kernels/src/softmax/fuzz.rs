//! Property tests of the softmax family's host-side validation: random
//! shapes, dims and element types go through the checks `select` runs
//! before it touches the GPU; nothing panics, and every answer is the
//! kernel's dtype code or a typed `Error`.

use baracuda_kernels_types::ElementKind;
use proptest::prelude::*;

use super::softmax::validate;
use super::{SoftmaxDescriptor, SoftmaxOp};
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
        match validate::<f32, 3>(&desc) {
            Ok(code) => {
                prop_assert!(dim < 3 && element == ElementKind::F32);
                prop_assert_eq!(code, 0);
            }
            Err(e) => {
                prop_assert!(dim >= 3 || element != ElementKind::F32);
                typed("softmax", &e)?;
            }
        }
        let desc = SoftmaxDescriptor::new(SoftmaxOp::ALL[op], ElementKind::I32, shape);
        let unsupported = matches!(
            validate::<i32, 3>(&desc),
            Err(baracuda_kernels_types::Error::Unsupported { .. })
        );
        prop_assert!(unsupported, "i32 softmax is unsupported");
    }
}
