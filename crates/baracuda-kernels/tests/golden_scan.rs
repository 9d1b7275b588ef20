//! Host test: the scans' f64 oracles against PyTorch goldens
//! (`tests/golden/scan.safetensors`, written by `scripts/make_goldens.py`
//! from `scripts/goldens/scan.py`): every scan along each dim of a
//! [4, 5, 6] tensor, forward and reversed, values, indices and gradients,
//! and lines with ties, NaN, zeros and infinities.

use baracuda_kernels::reference::reduce::scan::{self as r, Scan};
use baracuda_kernels::ScanOp;
use safetensors::SafeTensors;

#[path = "support/golden.rs"]
mod golden;
use golden::{bytes, close, get};

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
