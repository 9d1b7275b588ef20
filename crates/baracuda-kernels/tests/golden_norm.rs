//! Host test: the norm family's f64 oracles against PyTorch goldens
//! (written by `scripts/make_goldens.py`): `tests/golden/norm.safetensors`
//! from `scripts/goldens/norm.py`, F.layer_norm and F.rms_norm over one
//! and two trailing dims of a [3, 4, 5] tensor with and without weight and
//! bias, layer_norm over rows of one element, and the residual forms
//! (`s = x + r; y = norm(s)`, with and without a ds into s); and
//! `tests/golden/group_norm.safetensors` from `scripts/goldens/group_norm.py`,
//! F.group_norm with 1 and several groups over ranks 3 to 5, with and
//! without weight and bias, and F.instance_norm (use_input_stats=True, no
//! running statistics) as groups = C. Each compares the outputs, the
//! statistics and every gradient.

#[path = "support/golden.rs"]
mod golden;

use baracuda_kernels::reference::norm::{GroupNorm, Norm, NormGrads, NormOut};
use golden::{bytes, close, get};
use safetensors::SafeTensors;

/// Case `name` of `t` against an oracle: `forward(x, weight, bias)` and
/// `backward(x, weight, dy)`, with a weight and a bias as `has_w` and
/// `has_b` say.
fn check(
    t: &SafeTensors<'_>,
    name: &str,
    (has_w, has_b): (bool, bool),
    forward: impl Fn(&[f64], Option<&[f64]>, Option<&[f64]>) -> NormOut,
    backward: impl Fn(&[f64], Option<&[f64]>, &[f64]) -> NormGrads,
) {
    let k = |t: &str| format!("{name}.{t}");
    let x = get(t, &k("x"));
    let w = has_w.then(|| get(t, &k("weight")));
    let b = has_b.then(|| get(t, &k("bias")));
    let out = forward(&x, w.as_deref(), b.as_deref());
    close(&k("y"), &out.y, &get(t, &k("y")));
    close(&k("mean"), &out.mean, &get(t, &k("mean")));
    close(&k("rstd"), &out.rstd, &get(t, &k("rstd")));
    let grads = backward(&x, w.as_deref(), &get(t, &k("dy")));
    close(&k("dx"), &grads.dx, &get(t, &k("dx")));
    if has_w {
        close(&k("dweight"), &grads.dweight, &get(t, &k("dweight")));
    }
    if has_b {
        close(&k("dbias"), &grads.dbias, &get(t, &k("dbias")));
    }
}

/// (key prefix, LayerNorm, rows, h, weight, bias)
const NORM_CASES: &[(&str, bool, usize, usize, bool, bool)] = &[
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
    for &(name, layer, rows, h, has_w, has_b) in NORM_CASES {
        let p = Norm {
            layer,
            rows,
            h,
            eps: 1e-5,
        };
        check(
            &t,
            name,
            (has_w, has_b),
            |x, w, b| p.forward(x, w, b),
            |x, w, dy| p.backward(x, w, dy),
        );
    }
}

/// (key prefix, LayerNorm, rows, h, weight, bias, ds), as `RESIDUAL_CASES`
/// of scripts/goldens/norm.py.
const RESIDUAL_CASES: &[(&str, bool, usize, usize, bool, bool, bool)] = &[
    ("res.layer.1.wb.ds", true, 12, 5, true, true, true),
    ("res.layer.2.none", true, 3, 20, false, false, false),
    ("res.rms.1.w.ds", false, 12, 5, true, false, true),
    ("res.rms.1.none", false, 12, 5, false, false, false),
];

#[test]
fn residual_norms_match_pytorch() {
    let data = bytes("norm");
    let t = SafeTensors::deserialize(&data).expect("norm goldens");
    // the cases are checked once the golden file has been regenerated
    // with them (scripts/make_goldens.py, which needs PyTorch)
    if t.tensor(&format!("{}.x", RESIDUAL_CASES[0].0)).is_err() {
        eprintln!(
            "skipped: tests/golden/norm.safetensors has no residual cases yet \
             (regenerate it with scripts/make_goldens.py)"
        );
        return;
    }
    for &(name, layer, rows, h, has_w, has_b, has_ds) in RESIDUAL_CASES {
        let p = Norm {
            layer,
            rows,
            h,
            eps: 1e-5,
        };
        let k = |s: &str| format!("{name}.{s}");
        let (x, r) = (get(&t, &k("x")), get(&t, &k("r")));
        let w = has_w.then(|| get(&t, &k("weight")));
        let b = has_b.then(|| get(&t, &k("bias")));
        let (s, out) = p.forward_residual(&x, &r, w.as_deref(), b.as_deref());
        close(&k("s"), &s, &get(&t, &k("s")));
        close(&k("y"), &out.y, &get(&t, &k("y")));
        close(&k("mean"), &out.mean, &get(&t, &k("mean")));
        close(&k("rstd"), &out.rstd, &get(&t, &k("rstd")));
        let ds = has_ds.then(|| get(&t, &k("ds")));
        let g = p.backward_residual(&s, w.as_deref(), &get(&t, &k("dy")), ds.as_deref());
        close(&k("dx"), &g.dx, &get(&t, &k("dx")));
        close(&k("dr"), &g.dx, &get(&t, &k("dr")));
        if has_w {
            close(&k("dweight"), &g.dweight, &get(&t, &k("dweight")));
        }
        if has_b {
            close(&k("dbias"), &g.dbias, &get(&t, &k("dbias")));
        }
    }
}

/// (key prefix, batch, channels, spatial, groups, weight, bias), as
/// `CASES` of scripts/goldens/group_norm.py.
const GROUP_NORM_CASES: &[(&str, usize, usize, usize, usize, bool, bool)] = &[
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
    for &(name, batch, channels, spatial, groups, has_w, has_b) in GROUP_NORM_CASES {
        let p = GroupNorm {
            batch,
            channels,
            spatial,
            groups,
            eps: 1e-5,
        };
        check(
            &t,
            name,
            (has_w, has_b),
            |x, w, b| p.forward(x, w, b),
            |x, w, dy| p.backward(x, w, dy),
        );
    }
}
