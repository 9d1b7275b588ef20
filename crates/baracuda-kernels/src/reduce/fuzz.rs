//! Property tests of the reduce family's host-side validation: random
//! shapes, dims, keepdim and element types go through the checks
//! [`LogicalReducePlan`](super::LogicalReducePlan)'s `select` runs before
//! it touches the GPU; nothing panics, and every answer is the kernel's
//! (width, float) pair or a typed `Error`.

use baracuda_kernels_types::{ElementKind, Error};
use proptest::prelude::*;

use super::logical_reduce::validate;
use super::{LogicalReduceDescriptor, LogicalReduceOp};
use crate::fuzz::{config, sizes, typed};

proptest! {
    #![proptest_config(config())]

    #[test]
    fn logical_descriptors_are_accepted_or_typed_errors(
        shape in sizes::<3>(),
        dims in 0u32..16,
        keepdim in any::<bool>(),
        op in 0usize..3,
        element in proptest::sample::select(ElementKind::ALL.to_vec()),
    ) {
        let op = LogicalReduceOp::ALL[op];
        let desc = LogicalReduceDescriptor { op, element, shape, dims, keepdim };
        let rank = if keepdim { 3 } else { 3 - (dims & 7).count_ones() as usize };
        // An f32 plan with bool output of rank 1 (count_nonzero: i64).
        let got = if op == LogicalReduceOp::CountNonzero {
            validate::<f32, i64, 3, 1>(&desc)
        } else {
            validate::<f32, bool, 3, 1>(&desc)
        };
        let ok = element == ElementKind::F32 && dims < 8 && rank == 1;
        match got {
            Ok(storage) => {
                prop_assert!(ok, "{desc:?} accepted");
                prop_assert_eq!(storage, (4, true));
            }
            Err(e) => {
                prop_assert!(!ok, "{desc:?}: {e}");
                typed("logical_reduce", &e)?;
            }
        }
        // The wrong output type is a DtypeMismatch naming y.
        let desc = LogicalReduceDescriptor { element: ElementKind::F32, ..desc };
        let wrong = if op == LogicalReduceOp::CountNonzero {
            validate::<f32, bool, 3, 1>(&desc)
        } else {
            validate::<f32, i64, 3, 1>(&desc)
        };
        let mismatch = matches!(wrong, Err(Error::DtypeMismatch { arg: "y", .. }));
        prop_assert!(mismatch, "{desc:?}: {wrong:?}");
    }
}
