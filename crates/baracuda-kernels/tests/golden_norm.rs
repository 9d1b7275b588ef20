//! Host test: the norm family's f64 oracles against PyTorch goldens
//! (`tests/golden/norm.safetensors`, written by `scripts/make_goldens.py`
//! from `scripts/goldens/norm.py`): F.layer_norm and F.rms_norm over one
//! and two trailing dims of a [3, 4, 5] tensor with and without weight and
//! bias, and layer_norm over rows of one element: outputs, statistics and
//! every gradient.

#[path = "support/golden.rs"]
mod golden;

use baracuda_kernels::reference::norm::Norm;
use golden::{bytes, get};
use safetensors::SafeTensors;

/// Equal within 1e-12 relative.
fn close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-12 * (1.0 + w.abs()),
            "{what}[{i}]: ours {g:e}, PyTorch {w:e}"
        );
    }
}

/// (key prefix, LayerNorm, rows, h, weight, bias)
const CASES: &[(&str, bool, usize, usize, bool, bool)] = &[
    ("layer.1.wb", true, 12, 5, true, true),
    ("layer.1.w", true, 12, 5, true, false),
    ("layer.1.none", true, 12, 5, false, false),
    ("layer.2.wb", true, 3, 20, true, true),
    ("layer.h1.wb", true, 6, 1, true, true),
    ("rms.1.w", false, 12, 5, true, false),
    ("rms.1.none", false, 12, 5, false, false),
    ("rms.2.w", false, 3, 20, true, false),
];

#[test]
fn norms_match_pytorch() {
    let data = bytes("norm");
    let t = SafeTensors::deserialize(&data).expect("norm goldens");
    for &(name, layer, rows, h, has_w, has_b) in CASES {
        let k = |t: &str| format!("{name}.{t}");
        let p = Norm {
            layer,
            rows,
            h,
            eps: 1e-5,
        };
        let x = get(&t, &k("x"));
        let w = has_w.then(|| get(&t, &k("weight")));
        let b = has_b.then(|| get(&t, &k("bias")));
        let out = p.forward(&x, w.as_deref(), b.as_deref());
        close(&k("y"), &out.y, &get(&t, &k("y")));
        close(&k("mean"), &out.mean, &get(&t, &k("mean")));
        close(&k("rstd"), &out.rstd, &get(&t, &k("rstd")));
        let grads = p.backward(&x, w.as_deref(), &get(&t, &k("dy")));
        close(&k("dx"), &grads.dx, &get(&t, &k("dx")));
        if has_w {
            close(&k("dweight"), &grads.dweight, &get(&t, &k("dweight")));
        }
        if has_b {
            close(&k("dbias"), &grads.dbias, &get(&t, &k("dbias")));
        }
    }
}
