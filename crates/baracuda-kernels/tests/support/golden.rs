//! Reading the PyTorch goldens (`tests/golden/<family>.safetensors`,
//! written by `scripts/make_goldens.py`). The crate's `tests/golden` links
//! to the repository's `tests/golden`, and the files ship in the published
//! package, so a missing file is a failure, not a skip; except through
//! [`bytes_if_generated`], for a new family's file not generated yet.

use safetensors::SafeTensors;

/// The bytes of `tests/golden/<family>.safetensors`.
pub fn bytes(family: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{family}.safetensors"));
    std::fs::read(&p).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (regenerate with `python3 scripts/make_goldens.py`)",
            p.display()
        )
    })
}

/// The bytes of `tests/golden/<family>.safetensors`, or None with a note
/// on stderr when the file is not there: for a family whose goldens are
/// generated on a GPU machine after the family lands (its test passes,
/// saying what it skipped, until the file is committed).
#[allow(dead_code)] // each golden test binary includes this file; not all use it
pub fn bytes_if_generated(family: &str) -> Option<Vec<u8>> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{family}.safetensors"));
    if !p.exists() {
        eprintln!(
            "note: {} is not generated yet (run `python3 scripts/make_goldens.py` where \
             PyTorch is installed); the {family} goldens are skipped",
            p.display()
        );
        return None;
    }
    Some(bytes(family))
}

/// The f64 tensor `k`, flattened.
pub fn get(t: &SafeTensors<'_>, k: &str) -> Vec<f64> {
    let v = t.tensor(k).unwrap_or_else(|e| panic!("{k}: {e}"));
    assert_eq!(v.dtype(), safetensors::Dtype::F64, "{k}");
    v.data()
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect()
}

/// The integer tensor `k` (int32 or int64), flattened and widened to
/// i64, and its dtype.
#[allow(dead_code)] // each golden test binary includes this file; not all use it
pub fn get_ints(t: &SafeTensors<'_>, k: &str) -> (Vec<i64>, baracuda_kernels::ElementKind) {
    use baracuda_kernels::ElementKind;
    let v = t.tensor(k).unwrap_or_else(|e| panic!("{k}: {e}"));
    match v.dtype() {
        safetensors::Dtype::I64 => (
            v.data()
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
                .collect(),
            ElementKind::I64,
        ),
        safetensors::Dtype::I32 => (
            v.data()
                .chunks_exact(4)
                .map(|b| i64::from(i32::from_le_bytes(b.try_into().expect("4 bytes"))))
                .collect(),
            ElementKind::I32,
        ),
        other => panic!("{k}: dtype {other:?}, expected int32 or int64"),
    }
}

/// The elements of `got` not equal to `want` within 1e-12 relative (NaN
/// and infinities where PyTorch has them), described.
#[allow(dead_code)] // each golden test binary includes this file; not all compare this way
pub fn mismatches(what: &str, got: &[f64], want: &[f64]) -> Vec<String> {
    differing(what, got, want, |g, w| {
        if w.is_nan() || w.is_infinite() {
            g.is_nan() == w.is_nan() && (w.is_nan() || g == w)
        } else {
            (g - w).abs() <= 1e-12 * (1.0 + w.abs())
        }
    })
}

/// The elements of `got` not exactly `want` (bools, integers), described.
#[allow(dead_code)] // each golden test binary includes this file; not all compare this way
pub fn unequal(what: &str, got: &[f64], want: &[f64]) -> Vec<String> {
    differing(what, got, want, |g, w| g == w)
}

/// The elements of `got` for which `same(got, want)` fails, described
/// (or the two lengths when they differ).
fn differing(
    what: &str,
    got: &[f64],
    want: &[f64],
    same: impl Fn(f64, f64) -> bool,
) -> Vec<String> {
    if got.len() != want.len() {
        return vec![format!(
            "{what}: length {} against {}",
            got.len(),
            want.len()
        )];
    }
    got.iter()
        .zip(want)
        .enumerate()
        .filter(|(_, (g, w))| !same(**g, **w))
        .map(|(i, (g, w))| format!("{what}[{i}]: ours {g:e}, PyTorch {w:e}"))
        .collect()
}

/// Equal within 1e-12 relative, NaN and infinities where PyTorch has them.
#[allow(dead_code)] // each golden test binary includes this file; not all compare this way
pub fn close(what: &str, got: &[f64], want: &[f64]) {
    let bad = mismatches(what, got, want);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
