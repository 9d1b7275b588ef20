//! Host test: the cast oracle against PyTorch goldens
//! (`tests/golden/cast.safetensors`, written by `scripts/make_goldens.py`
//! from `scripts/goldens/cast.py` on a GPU machine): special and random
//! values cast between every pair of the twelve kinds with `x.to(dtype)`,
//! and the saturating and scaled fp8 forms. Casts are exact, so values
//! must be equal (NaN equal to NaN, the sign of zero compared).

use baracuda_kernels::reference::elementwise as r;
use baracuda_kernels::{ElementKind, Fp8Mode, CAST_KINDS};
use safetensors::SafeTensors;

#[path = "support/golden.rs"]
mod golden;
use golden::{bytes, get};

/// Mismatches of `got` against `want`: index, input, both values.
fn mismatches(x: &[f64], got: &[f64], want: &[f64]) -> Vec<String> {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .enumerate()
        .filter(|(_, (g, w))| {
            !((g.is_nan() && w.is_nan())
                || (g == w && g.is_sign_negative() == w.is_sign_negative()))
        })
        .take(3)
        .map(|(i, (g, w))| format!("[{i}] x {:e}: {g:e}, torch {w:e}", x[i]))
        .collect()
}

#[test]
fn casts_match_pytorch() {
    let data = bytes("cast");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    let mut failures = Vec::new();
    for from in CAST_KINDS {
        for to in CAST_KINDS {
            let k = format!("{from}.{to}");
            let x = get(&t, &format!("{k}.x"));
            let mut forms = vec![("y", Fp8Mode::NoSaturate, None)];
            if matches!(to, ElementKind::Fp8E4M3 | ElementKind::Fp8E5M2) {
                forms.push(("sat.y", Fp8Mode::Saturate, None));
                forms.push(("scaled.y", Fp8Mode::NoSaturate, Some(3.5f32)));
            }
            for (name, mode, scale) in forms {
                let want = get(&t, &format!("{k}.{name}"));
                let got = r::cast(from, to, &x, mode, scale);
                let bad = mismatches(&x, &got, &want);
                if !bad.is_empty() {
                    failures.push(format!("{k}.{name}: {}", bad.join("; ")));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} casts differ from PyTorch:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
