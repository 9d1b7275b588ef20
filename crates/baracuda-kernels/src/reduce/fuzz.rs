//! Property tests of the reduce family's host-side validation: random
//! shapes, dims, keepdim and element types (and ops and corrections) go
//! through the checks [`LogicalReducePlan`](super::LogicalReducePlan)'s,
//! [`VarMeanPlan`](super::VarMeanPlan)'s and [`ScanPlan`](super::ScanPlan)'s
//! (op, exclusive, reverse, `keep_dtype`, output dtype) `select` run before they
//! touch the GPU; nothing panics, and every answer is the kernel's choice
//! or a typed `Error`.

use baracuda_kernels_types::{ElementKind, Error, PlanPreference};
use proptest::prelude::*;

use super::logical_reduce::validate;
use super::scan::validate as validate_scan;
use super::{LogicalReduceDescriptor, LogicalReduceOp, ReduceDescriptor, ReduceOp};
use super::{ScanDescriptor, ScanOp};
use crate::fuzz::{config, sizes, typed};

proptest! {
    #![proptest_config(config())]

    #[test]
    fn scan_descriptors_are_accepted_or_typed_errors(
        shape in sizes::<2>(),
        dim in 0usize..4,
        op in 0usize..5,
        exclusive in any::<bool>(),
        reverse in any::<bool>(),
        keep_dtype in any::<bool>(),
        element in proptest::sample::select(ElementKind::ALL.to_vec()),
    ) {
        let op = ScanOp::ALL[op];
        let desc = ScanDescriptor { op, element, shape, dim, exclusive, reverse, keep_dtype };
        let well_formed = dim < 2 && !(exclusive && op.has_indices());
        // an f32 plan
        let got = validate_scan::<f32, 2, f32>(&desc);
        match got {
            Ok(_) => prop_assert!(element == ElementKind::F32 && well_formed, "{desc:?} accepted"),
            Err(e) => {
                prop_assert!(!(element == ElementKind::F32 && well_formed), "{desc:?}: {e}");
                typed("scan", &e)?;
            }
        }
        // an i32 plan with PyTorch's i64 output: cumsum and cumprod only,
        // and not when y keeps x's dtype
        let sum_like = matches!(op, ScanOp::CumSum | ScanOp::CumProd);
        let got = validate_scan::<i32, 2, i64>(&desc);
        let ok = element == ElementKind::I32 && well_formed && sum_like && !keep_dtype;
        match got {
            Ok(_) => prop_assert!(ok, "{desc:?} accepted for i32 -> i64"),
            Err(e) => {
                prop_assert!(!ok, "{desc:?}: {e}");
                typed("scan", &e)?;
            }
        }
        // an i32 plan with an i32 output: cummax, cummin, and the others
        // that keep the dtype; never logcumsumexp
        let got = validate_scan::<i32, 2, i32>(&desc);
        let ok = element == ElementKind::I32
            && well_formed
            && op.takes_integers()
            && (!sum_like || keep_dtype);
        match got {
            Ok(_) => prop_assert!(ok, "{desc:?} accepted for i32 -> i32"),
            Err(e) => {
                prop_assert!(!ok, "{desc:?}: {e}");
                typed("scan", &e)?;
            }
        }
    }

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

    #[test]
    fn var_mean_descriptors_are_accepted_or_typed_errors(
        shape in sizes::<3>(),
        dims in 0u32..16,
        keepdim in any::<bool>(),
        op in 0usize..ReduceOp::ALL.len(),
        correction in prop_oneof![4 => -2.0f64..4.0, 1 => Just(f64::NAN)],
        element in proptest::sample::select(ElementKind::ALL.to_vec()),
    ) {
        let op = ReduceOp::ALL[op];
        let desc = ReduceDescriptor { op, element, shape, dims, keepdim, correction, p: 2.0 };
        let rank = if keepdim { 3 } else { 3 - (dims & 7).count_ones() as usize };
        // An f32 plan with output rank 1.
        let got = super::var_mean::validate::<f32, 3, 1>(&desc, &PlanPreference::default());
        let moment = matches!(op, ReduceOp::Var | ReduceOp::Std);
        let ok = moment && element == ElementKind::F32 && dims < 8 && rank == 1
            && !correction.is_nan();
        match got {
            Ok((dtype, std)) => {
                prop_assert!(ok, "{desc:?} accepted");
                prop_assert_eq!((dtype, std), (0, op == ReduceOp::Std));
            }
            Err(e) => {
                prop_assert!(!ok, "{desc:?}: {e}");
                typed("var_mean", &e)?;
            }
        }
    }
}
