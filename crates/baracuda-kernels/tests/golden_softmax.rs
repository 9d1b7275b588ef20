//! Host test: the softmax family's f64 oracles against PyTorch goldens
//! (`tests/golden/softmax.safetensors`, written by
//! `scripts/make_goldens.py` from `scripts/goldens/softmax.py`): every op
//! along each dim of a [4, 5, 6] tensor, forward and gradient, and rows
//! holding -inf, only -inf, +inf and NaN.

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
