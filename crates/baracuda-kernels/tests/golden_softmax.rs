//! Host test: the softmax family's f64 oracles against PyTorch goldens
//! (`tests/golden/softmax.safetensors`, written by
//! `scripts/make_goldens.py` from `scripts/goldens/softmax.py`): every op
//! along each dim of a [4, 5, 6] tensor, forward and gradient, and rows
//! holding -inf, only -inf, +inf and NaN; softmax and log-softmax under a
//! keep mask and an additive mask; every op of a 16-bit x with an f32 y;
//! Gumbel-softmax with given gumbels, soft and hard; sparsemax (from the
//! golden script's torch implementation).
//! Cases absent from the file (generated before they were added) are
//! skipped with a note.

use baracuda_kernels::reference::softmax as r;
use baracuda_kernels::SoftmaxOp;
use safetensors::SafeTensors;

#[path = "support/golden.rs"]
mod golden;
use golden::{bytes, close, get};

const SHAPE: [usize; 3] = [4, 5, 6];

#[test]
fn softmax_and_gradients_match_pytorch() {
    let data = bytes("softmax");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    for op in SoftmaxOp::ALL {
        for dim in 0..3 {
            let k = |s: &str| format!("{}.{dim}.{s}", op.name());
            let x = get(&t, &k("x"));
            let y = get(&t, &k("y"));
            close(&k("y"), &r::softmax(op, &SHAPE, dim, &x), &y);
            close(
                &k("dx"),
                &r::softmax_backward(op, &SHAPE, dim, &y, &get(&t, &k("dy"))),
                &get(&t, &k("dx")),
            );
        }
    }
}

#[test]
fn special_rows_match_pytorch() {
    let data = bytes("softmax");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    for op in SoftmaxOp::ALL {
        let k = |s: &str| format!("special.{}.{s}", op.name());
        let x = get(&t, &k("x"));
        close(&k("y"), &r::softmax(op, &[5, 3], 1, &x), &get(&t, &k("y")));
    }
}

/// Whether the file holds case `key` (its `.x`), with a note when not.
fn has(t: &SafeTensors<'_>, key: &str) -> bool {
    let there = t.tensor(&format!("{key}.x")).is_ok();
    if !there {
        eprintln!(
            "note: {key} is not in softmax.safetensors yet (regenerate the goldens); skipped"
        );
    }
    there
}

#[test]
fn masked_softmax_and_gradients_match_pytorch() {
    let data = bytes("softmax");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    for op in [SoftmaxOp::Softmax, SoftmaxOp::LogSoftmax] {
        for kind in ["keep", "add"] {
            for dim in 0..3 {
                let key = format!("masked.{}.{kind}.{dim}", op.name());
                if !has(&t, &key) {
                    continue;
                }
                let k = |s: &str| format!("{key}.{s}");
                let (x, m, y) = (get(&t, &k("x")), get(&t, &k("mask")), get(&t, &k("y")));
                let keep: Vec<bool> = m.iter().map(|&v| v != 0.0).collect();
                let mask = if kind == "keep" {
                    r::Mask::Keep(&keep)
                } else {
                    r::Mask::Add(&m)
                };
                close(&k("y"), &r::masked_softmax(op, &SHAPE, dim, &x, mask), &y);
                let dx = r::masked_softmax_backward(op, &SHAPE, dim, &y, &get(&t, &k("dy")), mask);
                close(&k("dx"), &dx, &get(&t, &k("dx")));
            }
        }
    }
}

/// `got` within `rtol` relative (plus `atol`) of PyTorch's `want`.
fn near(what: &str, got: &[f64], want: &[f64], rtol: f64, atol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rtol * w.abs() + atol,
            "{what}[{i}]: ours {g:e}, PyTorch {w:e}"
        );
    }
}

/// PyTorch's `op(x, dim, dtype=torch.float32)` of a 16-bit x: y in f32
/// (the f64 reference within f32 rounding), and autograd's dx in x's dtype
/// from y and the f32 dy (within one rounding to that dtype).
#[test]
fn widened_outputs_match_pytorch() {
    let data = bytes("softmax");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    for op in SoftmaxOp::ALL {
        for (dt, u) in [("bf16", 2f64.powi(-8)), ("f16", 2f64.powi(-11))] {
            for dim in 0..3 {
                let key = format!("dtype.{}.{dt}.{dim}", op.name());
                if !has(&t, &key) {
                    continue;
                }
                let k = |s: &str| format!("{key}.{s}");
                let (x, y) = (get(&t, &k("x")), get(&t, &k("y")));
                let f32_u = 2f64.powi(-24);
                near(
                    &k("y"),
                    &r::softmax(op, &SHAPE, dim, &x),
                    &y,
                    16.0 * f32_u,
                    16.0 * f32_u,
                );
                let dx = r::softmax_backward(op, &SHAPE, dim, &y, &get(&t, &k("dy")));
                near(&k("dx"), &dx, &get(&t, &k("dx")), 2.0 * u, 1e-5);
            }
        }
    }
}

#[test]
fn gumbel_softmax_matches_pytorch() {
    let data = bytes("softmax");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    let tau = 0.7;
    for hard in [false, true] {
        for dim in 0..3 {
            let key = format!("gumbel.{}.{dim}", if hard { "hard" } else { "soft" });
            if !has(&t, &key) {
                continue;
            }
            let k = |s: &str| format!("{key}.{s}");
            let (x, g, soft) = (get(&t, &k("x")), get(&t, &k("g")), get(&t, &k("soft")));
            close(
                &k("soft"),
                &r::gumbel_softmax(&SHAPE, dim, tau, false, &x, &g),
                &soft,
            );
            // the one-hot of PyTorch's own soft sample (ties cannot flip)
            let y = r::hard_sample(&SHAPE, dim, &soft, |v| v);
            if hard {
                close(&k("y"), &y, &get(&t, &k("y")));
            }
            let dx = r::gumbel_softmax_backward(&SHAPE, dim, tau, &soft, &get(&t, &k("dy")));
            close(&k("dx"), &dx, &get(&t, &k("dx")));
        }
    }
}

#[test]
fn sparsemax_matches_the_torch_implementation() {
    let data = bytes("softmax");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    for dim in 0..3 {
        let key = format!("sparsemax.{dim}");
        if !has(&t, &key) {
            continue;
        }
        let k = |s: &str| format!("{key}.{s}");
        let (x, y) = (get(&t, &k("x")), get(&t, &k("y")));
        close(&k("y"), &r::sparsemax(&SHAPE, dim, &x), &y);
        let dx = r::sparsemax_backward(&SHAPE, dim, &y, &get(&t, &k("dy")));
        close(&k("dx"), &dx, &get(&t, &k("dx")));
    }
}
