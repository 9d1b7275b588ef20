//! Property tests of every view constructor: random shapes, strides,
//! offsets, leading dimensions and permutations never panic, and every view
//! that is built reaches only elements of its buffer (a writable one never
//! reaches one element twice); everything else is a typed `Error`.
//!
//! The views sit on a fake device address: constructors only check
//! arithmetic, nothing is read. Fixed seed, `PROPTEST_CASES` cases (256 by
//! default), no failure files: the same cases on every run.

use baracuda_kernels_types::{
    DeviceSlice, DeviceSliceMut, Error, MatrixMut, MatrixOrder, MatrixRef, TensorMut, TensorRef,
    Workspace,
};
use proptest::prelude::*;
use proptest::test_runner::{RngAlgorithm, RngSeed};

/// Base address of every fake buffer.
const BASE: u64 = 0x7000_0000_0000;
/// Context id of every fake buffer.
const CTX: usize = 7;

fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: RngSeed::Fixed(0xBA5A_C0DA),
        ..ProptestConfig::default()
    }
}

fn slice<'a>(len: usize) -> DeviceSlice<'a, f32> {
    // SAFETY: the views are only inspected on the host; nothing reads the
    // fake address.
    unsafe { DeviceSlice::from_raw_parts(BASE, len, CTX) }
}

fn slice_mut<'a>(len: usize) -> DeviceSliceMut<'a, f32> {
    // SAFETY: as above.
    unsafe { DeviceSliceMut::from_raw_parts(BASE, len, CTX) }
}

/// An extent: mostly small, sometimes 0, 1 or huge.
fn extent() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => 0usize..8,
        2 => 0usize..100_000,
        1 => Just(usize::MAX),
        1 => (usize::MAX / 4)..=usize::MAX,
    ]
}

/// A stride: mostly small (0 included), sometimes huge.
fn stride() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => 0usize..64,
        2 => 0usize..1_000_000,
        1 => (usize::MAX / 8)..=usize::MAX,
    ]
}

/// A buffer length: mostly small, sometimes huge, always a buffer that
/// fits the address space (`from_raw_parts` promises an allocation).
fn length() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => 0usize..4096,
        1 => 0usize..(1 << 44),
        1 => Just(1usize << 44),
    ]
}

/// An offset or count into a buffer: like [`length`], or past any buffer.
fn offset() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => length(),
        1 => Just(usize::MAX),
    ]
}

/// Index of the first element of `data` in the fake buffer.
fn start(addr: u64) -> u128 {
    u128::from((addr - BASE) / 4)
}

/// The last element a view reaches, if it reaches any.
fn last(shape: &[usize], strides: &[usize]) -> Option<u128> {
    if shape.contains(&0) {
        return None;
    }
    Some(
        shape
            .iter()
            .zip(strides)
            .map(|(&d, &s)| (d as u128 - 1) * s as u128)
            .sum(),
    )
}

/// `Ok` when a view starting at element `first` of a buffer of `len`
/// elements reaches only elements of it.
fn inside(first: u128, shape: &[usize], strides: &[usize], len: usize) -> Result<(), String> {
    match last(shape, strides) {
        Some(l) if first + l >= len as u128 => Err(format!(
            "view {shape:?} / {strides:?} at {first} reaches element {} of {len}",
            first + l
        )),
        _ => Ok(()),
    }
}

/// `Ok` when no two indices of a small view reach one element.
fn no_overlap(shape: &[usize], strides: &[usize]) -> Result<(), String> {
    if shape.contains(&0) {
        return Ok(());
    }
    let n = shape
        .iter()
        .try_fold(1u128, |a, &d| a.checked_mul(d as u128));
    let Some(n) = n.filter(|&n| n <= 4096) else {
        return Ok(());
    };
    let mut seen = std::collections::HashSet::new();
    for lin in 0..n {
        let (mut rem, mut off) = (lin, 0u128);
        for (&d, &s) in shape.iter().zip(strides).rev() {
            off += (rem % d as u128) * s as u128;
            rem /= d as u128;
        }
        if !seen.insert(off) {
            return Err(format!(
                "{shape:?} / {strides:?} writes element {off} twice"
            ));
        }
    }
    Ok(())
}

/// Whether `e` is one of the errors a view constructor may return.
fn view_error(e: &Error) -> bool {
    matches!(
        e,
        Error::ViewOutOfBounds { .. }
            | Error::Overflow { .. }
            | Error::OverlappingView { .. }
            | Error::InvalidArgument { .. }
            | Error::BroadcastMismatch { .. }
    )
}

fn check_err<T>(what: &str, r: &Result<T, Error>) -> Result<(), TestCaseError> {
    match r {
        Err(e) if !view_error(e) => Err(TestCaseError::fail(format!("{what}: unexpected {e}"))),
        _ => Ok(()),
    }
}

fn ok(r: Result<(), String>) -> Result<(), TestCaseError> {
    r.map_err(TestCaseError::fail)
}

/// Rank-`N` tensor views at an offset into a buffer: `new`, `contiguous`,
/// `channels_last`, `permute` and `broadcast_to`, read-only and writable.
fn check_tensor_views<const N: usize>(
    len: usize,
    offset: usize,
    shape: [usize; N],
    strides: [usize; N],
    perm: [usize; N],
) -> Result<(), TestCaseError> {
    let base = slice(len);
    let Some(data) = base.slice(offset.min(len)..len) else {
        return Err(TestCaseError::fail("an in-range sub-slice was refused"));
    };
    let first = start(data.addr());
    let views = [
        ("new", TensorRef::new(data, shape, strides)),
        ("contiguous", TensorRef::contiguous(data, shape)),
        ("channels_last", TensorRef::channels_last(data, shape)),
    ];
    for (what, r) in views {
        check_err(what, &r)?;
        let Ok(v) = r else { continue };
        ok(inside(first, v.shape(), v.strides(), len))?;
        let p = v.permute(perm);
        check_err("permute", &p)?;
        if let Ok(p) = p {
            ok(inside(first, p.shape(), p.strides(), len))?;
        }
        let mut wide = [1usize; 8];
        wide[8 - N..].copy_from_slice(&shape);
        let b = v.broadcast_to(wide);
        check_err("broadcast_to", &b)?;
        if let Ok(b) = b {
            ok(inside(first, b.shape(), b.strides(), len))?;
        }
    }
    let mut_views = [
        (
            "mut new",
            TensorMut::new(slice_mut(len), shape, strides).map(|v| (*v.shape(), *v.strides())),
        ),
        (
            "mut contiguous",
            TensorMut::contiguous(slice_mut(len), shape).map(|v| (*v.shape(), *v.strides())),
        ),
        (
            "mut channels_last",
            TensorMut::channels_last(slice_mut(len), shape).map(|v| (*v.shape(), *v.strides())),
        ),
        (
            "mut permute",
            TensorMut::new(slice_mut(len), shape, strides)
                .and_then(|v| v.permute(perm))
                .map(|v| (*v.shape(), *v.strides())),
        ),
    ];
    for (what, r) in mut_views {
        check_err(what, &r)?;
        if let Ok((sh, st)) = r {
            ok(inside(0, &sh, &st, len))?;
            ok(no_overlap(&sh, &st))?;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn rank_1_views(len in length(), offset in offset(), shape in [extent()], strides in [stride()]) {
        check_tensor_views(len, offset, shape, strides, [0])?;
    }

    #[test]
    fn rank_2_views(
        len in length(), offset in offset(),
        shape in [extent(), extent()], strides in [stride(), stride()],
        perm in Just([0usize, 1]).prop_shuffle(),
    ) {
        check_tensor_views(len, offset, shape, strides, perm)?;
    }

    #[test]
    fn rank_4_views(
        len in length(), offset in offset(),
        shape in [extent(), extent(), extent(), extent()],
        strides in [stride(), stride(), stride(), stride()],
        perm in prop_oneof![Just([0usize, 1, 2, 3]).prop_shuffle(), Just([0usize, 0, 2, 3]), Just([0usize, 1, 2, 9])],
    ) {
        check_tensor_views(len, offset, shape, strides, perm)?;
    }

    #[test]
    fn rank_5_views(
        len in length(), offset in offset(),
        shape in [extent(), extent(), extent(), extent(), extent()],
        strides in [stride(), stride(), stride(), stride(), stride()],
        perm in Just([0usize, 1, 2, 3, 4]).prop_shuffle(),
    ) {
        check_tensor_views(len, offset, shape, strides, perm)?;
    }

    /// Matrices in either order with any leading dimension.
    #[test]
    fn matrix_views(
        len in length(), rows in extent(), cols in extent(), ld in extent(),
        col_major in any::<bool>(),
    ) {
        let order = if col_major { MatrixOrder::ColMajor } else { MatrixOrder::RowMajor };
        // Row-major: element (r, c) at r * ld + c; column-major: c * ld + r.
        let (shape, strides) = if col_major { ([rows, cols], [1, ld]) } else { ([rows, cols], [ld, 1]) };
        let r = MatrixRef::new(slice(len), rows, cols, ld, order);
        check_err("matrix", &r)?;
        if r.is_ok() {
            ok(inside(0, &shape, &strides, len))?;
        }
        let m = MatrixMut::new(slice_mut(len), rows, cols, ld, order);
        check_err("matrix mut", &m)?;
        if m.is_ok() {
            ok(inside(0, &shape, &strides, len))?;
            ok(no_overlap(&shape, &strides))?;
        }
    }

    /// Sub-slices and splits stay inside their slice; workspaces split and
    /// check without panicking.
    #[test]
    fn slices_and_workspaces(len in length(), a in offset(), b in offset(), need in offset()) {
        let s = slice(len);
        if let Some(sub) = s.slice(a..b) {
            prop_assert!(a <= b && b <= len);
            prop_assert_eq!(sub.len(), b - a);
            prop_assert_eq!(start(sub.addr()), a as u128);
        } else {
            prop_assert!(a > b || b > len);
        }
        match slice_mut(len).split_at(a) {
            Some((head, rest)) => {
                prop_assert!(a <= len);
                prop_assert_eq!(head.len() + rest.len(), len);
                prop_assert_eq!(start(rest.addr()), a as u128);
            }
            None => prop_assert!(a > len),
        }
        // SAFETY: as in `slice`; a byte buffer.
        let bytes = unsafe { DeviceSliceMut::<u8>::from_raw_parts(BASE, len, CTX) };
        match Workspace::Borrowed(bytes).split_at("fuzz", a) {
            Ok((head, rest)) => {
                prop_assert!(a <= len);
                prop_assert_eq!(head.bytes() + rest.bytes(), len);
                let checked = rest.check("fuzz", need, CTX);
                prop_assert_eq!(checked.is_ok(), need <= len - a);
                prop_assert!(rest.check_ptr("fuzz", 0, CTX + 1).is_err() || rest.bytes() == 0);
            }
            Err(e) => {
                let too_small = matches!(e, Error::WorkspaceTooSmall { .. });
                prop_assert!(a > len && too_small, "split_at({a}) of {len}: {e}");
            }
        }
    }
}
