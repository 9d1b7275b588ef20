//! What the property tests of the families' host-side validation share:
//! the fixed-seed configuration and the strategies for sizes. Each family
//! keeps its properties in its own `fuzz.rs`, next to the validators
//! (crate-private) that `select` runs before it touches the GPU.

use baracuda_kernels_types::Error;
use proptest::prelude::*;
use proptest::test_runner::{RngAlgorithm, RngSeed};

/// Fixed seed, `PROPTEST_CASES` cases (256 by default), no failure files:
/// the same cases on every run, in CI too.
pub(crate) fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: RngSeed::Fixed(0xBA5A_C0DA),
        ..ProptestConfig::default()
    }
}

/// A size: mostly small (0 included), sometimes large or at the top of
/// `usize`.
pub(crate) fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => 0usize..9,
        2 => 0usize..5000,
        1 => (1usize << 20)..(1 << 40),
        1 => (usize::MAX - 8)..=usize::MAX,
    ]
}

/// `N` sizes.
pub(crate) fn sizes<const N: usize>() -> impl Strategy<Value = [usize; N]> {
    proptest::array::uniform(size())
}

/// A failure unless `e` is a descriptor error: the typed answers to a bad
/// descriptor (`InvalidDescriptor`, `Unsupported`, `Overflow`,
/// `BroadcastMismatch`, `DtypeMismatch`, `InvalidArgument`).
pub(crate) fn typed(what: &str, e: &Error) -> Result<(), TestCaseError> {
    match e {
        Error::InvalidDescriptor { .. }
        | Error::Unsupported { .. }
        | Error::Overflow { .. }
        | Error::BroadcastMismatch { .. }
        | Error::DtypeMismatch { .. }
        | Error::InvalidArgument { .. } => Ok(()),
        other => Err(TestCaseError::fail(format!("{what}: unexpected {other}"))),
    }
}

/// The elementwise family's public host-side check (its `select` checks
/// are private to each plan's file): a broadcast output shape takes each
/// axis from an operand whose other operand is equal or 1, or is a typed
/// error.
mod elementwise {
    use super::*;
    use crate::{BinaryDescriptor, BinaryOp, ElementKind};

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn binary_broadcast(a_shape in sizes::<4>(), b_shape in sizes::<4>(), mix in sizes::<4>()) {
            // Often share or broadcast an axis, so that some shapes agree.
            let b_shape: [usize; 4] = std::array::from_fn(|i| match mix[i] % 3 {
                0 => a_shape[i],
                1 => 1,
                _ => b_shape[i],
            });
            let d = BinaryDescriptor { op: BinaryOp::Add, element: ElementKind::F32, a_shape, b_shape };
            match d.out_shape() {
                Ok(out) => {
                    for i in 0..4 {
                        let (a, b) = (a_shape[i], b_shape[i]);
                        prop_assert!(
                            (out[i] == a && (b == a || b == 1)) || (out[i] == b && a == 1),
                            "{a_shape:?} and {b_shape:?} gave {out:?}"
                        );
                    }
                }
                Err(e) => typed("binary out_shape", &e)?,
            }
        }
    }
}
