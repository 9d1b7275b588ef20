//! Host test: the elementwise f64 oracles against PyTorch goldens
//! (`tests/golden/elementwise.safetensors`, written by
//! `scripts/make_goldens.py` from `scripts/goldens/elementwise.py`).

use baracuda_kernels::reference::elementwise as r;
use baracuda_kernels::{BinaryOp, ElementKind, GatedOp, UnaryLogicOp, UnaryOp};
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

/// Where PyTorch's own f64 CUDA math is the less accurate side, the
/// elements of `dx` it may differ at and the bound `(rtol, atol)` there,
/// with the reason; `None`: the default comparison.
fn known_deviation(name: &str, x: f64) -> Option<(f64, f64)> {
    match name {
        _ if x.is_nan() => None,
        // trigamma: PyTorch's series is good to ~1e-9 relative; at the
        // poles (0, the negative integers, every negative f64 past 2^52)
        // it evaluates sin(pi x) to a large finite value where the
        // reference has the pole's infinity
        "digamma" if x <= 0.0 && x == x.floor() => Some((f64::INFINITY, 0.0)),
        "digamma" => Some((1e-8, 0.0)),
        // sinc' = (cos(pi x) pi x - sin(pi x)) / (pi x^2) cancels near 0 in
        // PyTorch's formula (to 0 below 1e-8); the reference takes the
        // series there, |sinc'(x)| <= pi^2 |x| / 3 < 4 |x|
        "sinc" if x.abs() < 1e-3 => Some((1e-3, 4.0 * x.abs())),
        // i1' = i0 - i1 / x: where i0 overflows f64 (|x| > 713.98)
        // PyTorch's inf - inf is NaN; the reference's (i0e - i1e / |x|) e^|x|
        // is the derivative's +inf
        "i1" if x.is_finite() && x.abs() > 713.0 => Some((f64::INFINITY, 0.0)),
        _ => None,
    }
}

/// The first eight ops (random inputs in [-4, 4)) at 1e-13; every other
/// case of [`r::unary_cases`] (special values, domain edges and random
/// inputs) at 1e-12 with NaN and the infinities where PyTorch has them,
/// except the gradients [`known_deviation`] names. A case the golden file
/// does not hold yet is skipped with a note naming it, until the file is
/// regenerated on a GPU machine (`python3 scripts/make_goldens.py`).
#[test]
fn unary_reference_matches_pytorch() {
    let data = golden::bytes("elementwise");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    let first = UnaryOp::Abs.index();
    let (mut missing, mut bad) = (Vec::new(), Vec::new());
    for (name, op) in r::unary_cases() {
        let k = |s: &str| format!("unary.{name}.{s}");
        if t.tensor(&k("x")).is_err() {
            missing.push(name);
            continue;
        }
        let x = get(&t, &k("x"));
        let (y, dx) = (
            r::unary(op, &x),
            r::unary_backward(op, &x, &get(&t, &k("dy"))),
        );
        if op.index() < first {
            close(&k("y"), &y, &get(&t, &k("y")));
            close(&k("dx"), &dx, &get(&t, &k("dx")));
        } else {
            // polygamma(1) is trigamma, digamma's gradient
            let y_name = if name == "polygamma_1" { "digamma" } else { "" };
            let want_y = get(&t, &k("y"));
            for (i, (xi, (g, w))) in x.iter().zip(y.iter().zip(&want_y)).enumerate() {
                let what = format!("{}[{i}] (x = {xi:e})", k("y"));
                match known_deviation(y_name, *xi) {
                    Some((rtol, _)) if rtol.is_infinite() => {}
                    Some((rtol, atol)) if (g - w).abs() <= rtol * w.abs() + atol => {}
                    Some(_) => bad.push(format!("{what}: ours {g:e}, PyTorch {w:e}")),
                    None => bad.extend(golden::mismatches(&what, &[*g], &[*w])),
                }
            }
            let want_dx = get(&t, &k("dx"));
            for (i, (xi, (g, w))) in x.iter().zip(dx.iter().zip(&want_dx)).enumerate() {
                let what = format!("{}[{i}] (x = {xi:e})", k("dx"));
                let dx_name = if name == "polygamma_0" {
                    "digamma"
                } else {
                    name
                };
                match known_deviation(dx_name, *xi) {
                    Some((rtol, _)) if rtol.is_infinite() => {}
                    Some((rtol, atol)) if (g - w).abs() <= rtol * w.abs() + atol => {}
                    Some(_) => bad.push(format!("{what}: ours {g:e}, PyTorch {w:e}")),
                    None => bad.extend(golden::mismatches(&what, &[*g], &[*w])),
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
    if !missing.is_empty() {
        eprintln!(
            "note: {} unary cases are not in tests/golden/elementwise.safetensors yet \
             (regenerate with scripts/make_goldens.py): {}",
            missing.len(),
            missing.join(" ")
        );
    }
    assert!(
        UnaryOp::ALL[..first as usize]
            .iter()
            .all(|op| !missing.contains(&op.name())),
        "the first eight ops' goldens are missing"
    );
}

/// Every binary case (`add_alpha` and `sub_alpha` with the GPU rows'
/// alpha) over a broadcast [4, 3] x [1, 3] case (special values
/// included), forward and both gradients (the forward alone for an op
/// without a backward), within 1e-12 with NaN and the infinities where
/// PyTorch has them. An op the file does not hold yet is skipped with a
/// note.
#[test]
fn binary_reference_matches_pytorch() {
    let data = golden::bytes("elementwise");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    let (mut missing, mut bad) = (Vec::new(), Vec::new());
    for (name, op) in r::binary_cases() {
        let k = |s: &str| format!("binary.{name}.{s}");
        if t.tensor(&k("a")).is_err() {
            // the ops before xlog1py are in every golden file
            assert!(
                op.index() >= BinaryOp::Xlog1py.index(),
                "no golden for {}",
                k("a")
            );
            missing.push(name.to_string());
            continue;
        }
        let (a, b) = (get(&t, &k("a")), get(&t, &k("b")));
        let out = r::binary(op, &a, &[4, 3], &b, &[1, 3]);
        bad.extend(golden::mismatches(&k("out"), &out, &get(&t, &k("out"))));
        if !op.has_backward() {
            continue;
        }
        let dy = get(&t, &k("dy"));
        let g = r::binary_backward(op, &a, &[4, 3], &b, &[1, 3], &dy);
        bad.extend(golden::mismatches(&k("da"), &g.da, &get(&t, &k("da"))));
        bad.extend(golden::mismatches(&k("db"), &g.db, &get(&t, &k("db"))));
    }
    note_missing("binary", &missing);
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// `note:` naming the cases of `family` the golden file does not hold
/// yet: they are skipped until it is regenerated on a GPU machine
/// (`python3 scripts/make_goldens.py`).
fn note_missing(family: &str, missing: &[String]) {
    if !missing.is_empty() {
        eprintln!(
            "note: {} {family} cases are not in tests/golden/elementwise.safetensors yet \
             (regenerate with scripts/make_goldens.py): {}",
            missing.len(),
            missing.join(" ")
        );
    }
}

/// Every ternary case of [`r::ternary_cases`] over a [4, 3] x [1, 3] x
/// [4, 1] broadcast (clamp with ties, crossed bounds and a NaN), and
/// `where` over cond [4, 1], a [4, 3], b [1, 3]: forward and every
/// gradient within 1e-12, NaN and the infinities where PyTorch has them.
/// A case the file does not hold yet is skipped with a note.
#[test]
fn ternary_reference_matches_pytorch() {
    let data = golden::bytes("elementwise");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    let (mut missing, mut bad) = (Vec::new(), Vec::new());
    let shapes: [&[usize]; 3] = [&[4, 3], &[1, 3], &[4, 1]];
    for (name, op) in r::ternary_cases() {
        let k = |s: &str| format!("ternary.{name}.{s}");
        if t.tensor(&k("a")).is_err() {
            missing.push(name.to_string());
            continue;
        }
        let (a, b, c) = (get(&t, &k("a")), get(&t, &k("b")), get(&t, &k("c")));
        let ins = [
            (&a[..], shapes[0]),
            (&b[..], shapes[1]),
            (&c[..], shapes[2]),
        ];
        let out = r::ternary(op, ins);
        bad.extend(golden::mismatches(&k("out"), &out, &get(&t, &k("out"))));
        let g = r::ternary_backward(op, ins, &get(&t, &k("dy")));
        for (i, d) in ["da", "db", "dc"].iter().enumerate() {
            bad.extend(golden::mismatches(&k(d), &g.grads[i], &get(&t, &k(d))));
        }
    }
    if t.tensor("ternary.where.a").is_ok() {
        let k = |s: &str| format!("ternary.where.{s}");
        let (cond, a, b) = (get(&t, &k("cond")), get(&t, &k("a")), get(&t, &k("b")));
        let c = (&cond[..], shapes[2]);
        let out = r::where_(c, (&a[..], shapes[0]), (&b[..], shapes[1]));
        bad.extend(golden::mismatches(&k("out"), &out, &get(&t, &k("out"))));
        let g = r::where_backward(c, shapes[0], shapes[1], &get(&t, &k("dy")));
        bad.extend(golden::mismatches(
            &k("da"),
            &g.grads[0],
            &get(&t, &k("da")),
        ));
        bad.extend(golden::mismatches(
            &k("db"),
            &g.grads[1],
            &get(&t, &k("db")),
        ));
    } else {
        missing.push("where".into());
    }
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
    note_missing("ternary", &missing);
}

/// Every gated op on x [3, 8] split along the last dim, and glu along dim
/// 0 of x [4, 3]: `y` and `dx` within 1e-12 of PyTorch's (`F.glu`, and
/// `act(a) * b` of the halves). A case the file does not hold yet is
/// skipped with a note.
#[test]
fn gated_reference_matches_pytorch() {
    let data = golden::bytes("elementwise");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    let (mut missing, mut bad) = (Vec::new(), Vec::new());
    let cases = GatedOp::ALL
        .iter()
        .map(|&op| (op.name().to_string(), op, [3usize, 8], 1usize))
        .chain([("glu_dim0".to_string(), GatedOp::Glu, [4, 3], 0)]);
    for (name, op, shape, dim) in cases {
        let k = |s: &str| format!("gated.{name}.{s}");
        if t.tensor(&k("x")).is_err() {
            missing.push(name);
            continue;
        }
        let x = get(&t, &k("x"));
        let y = r::gated(op, &x, &shape, dim);
        bad.extend(golden::mismatches(&k("y"), &y, &get(&t, &k("y"))));
        let dx = r::gated_backward(op, &x, &shape, dim, &get(&t, &k("dy")));
        bad.extend(golden::mismatches(&k("dx"), &dx, &get(&t, &k("dx"))));
    }
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
    note_missing("gated", &missing);
}

/// Every logic case, in every dtype the file holds it in: the binary cases
/// of [`r::binary_logic_cases`] (`logic.<case>.<dtype>.{a,b,out}`, a and b
/// of one shape) and every [`UnaryLogicOp`] (`logic.<op>.<dtype>.{x,out}`),
/// exactly. The inputs hold every pair of the dtype's special values
/// (NaN, ±inf, ±0, the largest finite value, a subnormal; the integers'
/// limits; shift counts past the width and negative) and near ties. A
/// case the file does not hold in any dtype yet is skipped with a note.
#[test]
fn logic_reference_matches_pytorch() {
    let data = golden::bytes("elementwise");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    let (mut missing, mut bad) = (Vec::new(), Vec::new());
    let in_file = |name: &str, last: &str| -> Vec<ElementKind> {
        ElementKind::ALL
            .into_iter()
            .filter(|k| t.tensor(&format!("logic.{name}.{k}.{last}")).is_ok())
            .collect()
    };
    for (name, op) in r::binary_logic_cases() {
        let kinds = in_file(name, "out");
        if kinds.is_empty() {
            missing.push(name.to_string());
        }
        for kind in kinds {
            let k = |s: &str| format!("logic.{name}.{kind}.{s}");
            let (a, b) = (get(&t, &k("a")), get(&t, &k("b")));
            let out = r::binary_logic(op, kind, &a, &[a.len()], &b, &[b.len()]);
            bad.extend(golden::unequal(&k("out"), &out, &get(&t, &k("out"))));
        }
    }
    for op in UnaryLogicOp::ALL {
        let kinds = in_file(op.name(), "out");
        if kinds.is_empty() {
            missing.push(op.name().to_string());
        }
        for kind in kinds {
            let k = |s: &str| format!("logic.{}.{kind}.{s}", op.name());
            let out = r::unary_logic(op, kind, &get(&t, &k("x")));
            bad.extend(golden::unequal(&k("out"), &out, &get(&t, &k("out"))));
        }
    }
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
    note_missing("logic", &missing);
}

/// The mixed-dtype binary ops (`PromotedBinaryPlan`): `promoted.<op>.<a
/// dtype>_<b dtype>` over a [4, 3] x [1, 3] broadcast, PyTorch's output in
/// `torch.result_type(a, b)` and its gradients in the inputs' dtypes,
/// against the f64 reference of the exact inputs, each within two units
/// of roundoff of the dtype it is stored in, relative to `|want| + 4`
/// (the operands are O(1); the accumulator rounds first, and `add_alpha`
/// rounds `alpha b` before the sum), NaN and the infinities where PyTorch has them. A case
/// the file does not hold yet is skipped with a note.
#[test]
fn promoted_reference_matches_pytorch() {
    use ElementKind::{Bf16, F16, F32, F64};
    let data = golden::bytes("elementwise");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    let kinds = [("f32", F32), ("f64", F64), ("f16", F16), ("bf16", Bf16)];
    let kind = |s: &str| kinds.iter().find(|(n, _)| *n == s).map(|k| k.1).unwrap();
    let pairs = [
        ("bf16", "f32"),
        ("f16", "bf16"),
        ("f32", "f64"),
        ("f64", "bf16"),
    ];
    let near = |what: &str, got: &[f64], want: &[f64], k: ElementKind| -> Vec<String> {
        let u = 2.0 * k.unit_roundoff();
        got.iter()
            .zip(want)
            .enumerate()
            .filter(|&(_, (&g, &w))| {
                let same = (g.is_nan() && w.is_nan()) || g == w;
                !same && (g - w).abs() > u * (w.abs() + 4.0)
            })
            .map(|(i, (g, w))| format!("{what}[{i}]: ours {g:e}, PyTorch {w:e}"))
            .collect()
    };
    let (mut missing, mut bad) = (Vec::new(), Vec::new());
    for name in ["add", "mul", "div", "add_alpha"] {
        let op = r::binary_cases()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|c| c.1)
            .expect("a binary case");
        for (ad, bd) in pairs {
            let k = |s: &str| format!("promoted.{name}.{ad}_{bd}.{s}");
            if t.tensor(&k("a")).is_err() {
                missing.push(format!("{name}.{ad}_{bd}"));
                continue;
            }
            let (ak, bk) = (kind(ad), kind(bd));
            let ok = if ak == F64 || bk == F64 { F64 } else { F32 };
            let (a, b, dy) = (get(&t, &k("a")), get(&t, &k("b")), get(&t, &k("dy")));
            let out = r::binary(op, &a, &[4, 3], &b, &[1, 3]);
            bad.extend(near(&k("out"), &out, &get(&t, &k("out")), ok));
            let g = r::binary_backward(op, &a, &[4, 3], &b, &[1, 3], &dy);
            bad.extend(near(&k("da"), &g.da, &get(&t, &k("da")), ak));
            bad.extend(near(&k("db"), &g.db, &get(&t, &k("db")), bk));
        }
    }
    note_missing("promoted binary", &missing);
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
}
