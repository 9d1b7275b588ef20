//! Host test: the f64 GroupNorm oracle against PyTorch goldens
//! (`tests/golden/group_norm.safetensors`, written by
//! `scripts/make_goldens.py` from `scripts/goldens/group_norm.py`):
//! F.group_norm with 1 and several groups over ranks 3 to 5, with and
//! without weight and bias, and F.instance_norm (use_input_stats=True, no
//! running statistics) as groups = C: outputs, statistics and every
//! gradient.

#[path = "support/golden.rs"]
mod golden;

use baracuda_kernels::reference::norm::GroupNorm;
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

/// (key prefix, batch, channels, spatial, groups, weight, bias), as
/// `CASES` of scripts/goldens/group_norm.py.
const CASES: &[(&str, usize, usize, usize, usize, bool, bool)] = &[
    ("g1.wb", 2, 6, 5, 1, true, true),
    ("g3.wb", 2, 6, 5, 3, true, true),
    ("g3.none", 2, 6, 5, 3, false, false),
    ("g2.r4.w", 2, 4, 6, 2, true, false),
    ("g4.r5.wb", 1, 4, 12, 4, true, true),
    ("inst.wb", 2, 6, 5, 6, true, true),
    ("inst.none", 3, 4, 6, 4, false, false),
];

#[test]
fn group_norm_matches_pytorch() {
    let data = bytes("group_norm");
    let t = SafeTensors::deserialize(&data).expect("group_norm goldens");
    for &(name, batch, channels, spatial, groups, has_w, has_b) in CASES {
        let k = |t: &str| format!("{name}.{t}");
        let p = GroupNorm {
            batch,
            channels,
            spatial,
            groups,
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
