//! Host test: the scans' f64 oracles against PyTorch goldens
//! (`tests/golden/scan.safetensors`, written by `scripts/make_goldens.py`
//! from `scripts/goldens/scan.py`): every scan along each dim of a
//! [4, 5, 6] tensor, forward and reversed, values, indices and gradients,
//! and lines with ties, NaN, zeros and infinities. The integer cases
//! (`tests/golden/scan_int.safetensors`, from `scripts/goldens/scan_int.py`):
//! cumsum, cumprod, cummax and cummin of int32 and int64 along each dim,
//! forward and reversed, and long lines whose running products and sums
//! wrap around, against `scan_i64`, exactly, and the output dtypes against
//! `ScanDescriptor::output_element`. A missing file fails.

use baracuda_kernels::reference::reduce::scan::{self as r, Scan};
use baracuda_kernels::{ScanDescriptor, ScanOp};
use safetensors::SafeTensors;

#[path = "support/golden.rs"]
mod golden;
use golden::{bytes, close, get, get_ints};

/// Check the case stored under `key`: values, indices (cummax, cummin) and
/// the gradient from PyTorch's own values and indices.
fn check(t: &SafeTensors<'_>, key: &str, s: &Scan) {
    let k = |n: &str| format!("{key}.{n}");
    let x = get(t, &k("x"));
    let (y, idx) = r::scan(s, &x);
    let want_y = get(t, &k("y"));
    close(&k("y"), &y, &want_y);
    let want_i = if s.op.has_indices() {
        let want_i = get(t, &k("i"));
        close(&k("i"), &idx, &want_i);
        want_i
    } else {
        Vec::new()
    };
    let dx = r::scan_backward(s, &x, &want_y, &want_i, &get(t, &k("dy")));
    close(&k("dx"), &dx, &get(t, &k("dx")));
}

#[test]
fn scans_and_gradients_match_pytorch() {
    let data = bytes("scan");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    for op in ScanOp::ALL {
        for dim in 0..3 {
            for reverse in [false, true] {
                let s = Scan {
                    op,
                    shape: vec![4, 5, 6],
                    dim,
                    exclusive: false,
                    reverse,
                };
                let dir = if reverse { "rev" } else { "fwd" };
                check(&t, &format!("{}.{dim}.{dir}", op.name()), &s);
            }
        }
    }
}

#[test]
fn special_lines_match_pytorch() {
    let data = bytes("scan");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    for op in [
        ScanOp::CumMax,
        ScanOp::CumMin,
        ScanOp::CumProd,
        ScanOp::LogCumSumExp,
    ] {
        let key = format!("special.{}", op.name());
        let rows = t.tensor(&format!("{key}.x")).expect("special x").shape()[0];
        let s = Scan {
            op,
            shape: vec![rows, 6],
            dim: 1,
            exclusive: false,
            reverse: false,
        };
        check(&t, &key, &s);
    }
}

/// The integer goldens of `key`: values in PyTorch's output dtype and the
/// indices of cummax/cummin, exactly.
fn check_int(t: &SafeTensors<'_>, key: &str, s: &Scan) {
    let k = |n: &str| format!("{key}.{n}");
    let (x, kind) = get_ints(t, &k("x"));
    let (y, idx) = r::scan_i64(s, &x);
    let (want_y, out_kind) = get_ints(t, &k("y"));
    let desc = ScanDescriptor::new(s.op, kind, [1], 0);
    assert_eq!(out_kind, desc.output_element(), "{}", k("y"));
    assert_eq!(y, want_y, "{}", k("y"));
    if s.op.has_indices() {
        let want_i: Vec<f64> = get_ints(t, &k("i")).0.iter().map(|&i| i as f64).collect();
        assert_eq!(idx, want_i, "{}", k("i"));
    }
}

#[test]
fn integer_scans_match_pytorch() {
    let data = bytes("scan_int");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    for dtype in ["int32", "int64"] {
        for op in [
            ScanOp::CumSum,
            ScanOp::CumProd,
            ScanOp::CumMax,
            ScanOp::CumMin,
        ] {
            for dim in 0..3 {
                for reverse in [false, true] {
                    let s = Scan {
                        op,
                        shape: vec![4, 5, 6],
                        dim,
                        exclusive: false,
                        reverse,
                    };
                    let dir = if reverse { "rev" } else { "fwd" };
                    check_int(&t, &format!("{dtype}.{}.{dim}.{dir}", op.name()), &s);
                }
            }
        }
        for op in [ScanOp::CumProd, ScanOp::CumSum] {
            let s = Scan {
                op,
                shape: vec![3, 40],
                dim: 1,
                exclusive: false,
                reverse: false,
            };
            check_int(&t, &format!("{dtype}.long.{}", op.name()), &s);
        }
    }
}
