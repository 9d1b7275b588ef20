//! Host test: the elementwise f64 oracles against PyTorch goldens
//! (`tests/golden/elementwise.safetensors`, written by
//! `scripts/make_goldens.py` from `scripts/goldens/elementwise.py`).

use baracuda_kernels::reference::elementwise as r;
use baracuda_kernels::{BinaryOp, UnaryOp};
use safetensors::SafeTensors;

#[path = "support/golden.rs"]
mod golden;
use golden::get;

fn close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-13 * (1.0 + w.abs()),
            "{what}[{i}]: ours {g:e}, PyTorch {w:e}"
        );
    }
}

#[test]
fn unary_reference_matches_pytorch() {
    let data = golden::bytes("elementwise");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    for op in UnaryOp::ALL {
        let k = |s: &str| format!("unary.{}.{s}", op.name());
        let x = get(&t, &k("x"));
        close(&k("y"), &r::unary(op, &x), &get(&t, &k("y")));
        close(
            &k("dx"),
            &r::unary_backward(op, &x, &get(&t, &k("dy"))),
            &get(&t, &k("dx")),
        );
    }
}

#[test]
fn binary_reference_matches_pytorch() {
    let data = golden::bytes("elementwise");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    for op in BinaryOp::ALL {
        let k = |s: &str| format!("binary.{}.{s}", op.name());
        let (a, b, dy) = (get(&t, &k("a")), get(&t, &k("b")), get(&t, &k("dy")));
        close(
            &k("out"),
            &r::binary(op, &a, &[4, 3], &b, &[1, 3]),
            &get(&t, &k("out")),
        );
        let g = r::binary_backward(op, &a, &[4, 3], &b, &[1, 3], &dy);
        close(&k("da"), &g.da, &get(&t, &k("da")));
        close(&k("db"), &g.db, &get(&t, &k("db")));
    }
}
