//! Host test: the range and eye references against PyTorch goldens
//! (`tests/golden/range.safetensors`, written by `scripts/make_goldens.py`
//! from `scripts/goldens/range.py` on CUDA): arange (with PyTorch's
//! lengths), linspace and eye exactly, logspace within a few units in the
//! last place of f32 (PyTorch's `powf` against the correctly rounded
//! power).

use baracuda_kernels::reference::elementwise as r;
use baracuda_kernels::{arange_len, ElementKind, RangeOp};
use safetensors::SafeTensors;

#[path = "support/golden.rs"]
mod golden;
use golden::get;

const FLOATS: [ElementKind; 4] = [
    ElementKind::F32,
    ElementKind::F64,
    ElementKind::F16,
    ElementKind::Bf16,
];
const INTS: [ElementKind; 5] = [
    ElementKind::I8,
    ElementKind::U8,
    ElementKind::I16,
    ElementKind::I32,
    ElementKind::I64,
];

/// Every case of `op` (its name) for `kind` in the file: (params, y).
fn cases(t: &SafeTensors<'_>, op: &str, kind: ElementKind) -> Vec<(Vec<f64>, Vec<f64>)> {
    (0..)
        .map(|i| format!("{op}.{}.{i}", kind.name()))
        .take_while(|k| t.tensor(&format!("{k}.p")).is_ok())
        .map(|k| (get(t, &format!("{k}.p")), get(t, &format!("{k}.y"))))
        .collect()
}

#[test]
fn ranges_match_pytorch() {
    let data = golden::bytes("range");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    let mut bad = Vec::new();
    let mut checked = 0;
    for kind in FLOATS.into_iter().chain(INTS) {
        for op in ["arange", "linspace", "logspace"] {
            for (i, (p, y)) in cases(&t, op, kind).into_iter().enumerate() {
                let what = format!("{op}.{kind}.{i} {p:?}");
                let rop = match op {
                    "arange" => {
                        let n = arange_len(p[0], p[1], p[2]).expect("arange length");
                        if n != y.len() {
                            bad.push(format!("{what}: length {n}, PyTorch {}", y.len()));
                            continue;
                        }
                        RangeOp::Arange {
                            start: p[0],
                            step: p[2],
                        }
                    }
                    "linspace" => RangeOp::Linspace {
                        start: p[0],
                        end: p[1],
                    },
                    _ => RangeOp::Logspace {
                        start: p[0],
                        end: p[1],
                        base: p[3],
                    },
                };
                let ours = r::range(kind, rop, y.len()).expect("reference");
                for (j, (g, w)) in ours.iter().zip(&y).enumerate() {
                    let ok = if op == "logspace" {
                        let tol =
                            8.0 * ElementKind::F32.unit_roundoff() + 2.0 * kind.unit_roundoff();
                        (g - w).abs() <= tol * w.abs() || g == w
                    } else {
                        g == w || (g.is_nan() && w.is_nan())
                    };
                    if !ok {
                        bad.push(format!("{what}[{j}]: ours {g:e}, PyTorch {w:e}"));
                    }
                }
                checked += 1;
            }
        }
    }
    for kind in [
        ElementKind::F32,
        ElementKind::Bf16,
        ElementKind::I8,
        ElementKind::Bool,
    ] {
        for (p, y) in cases(&t, "eye", kind) {
            let (rows, cols) = (p[0] as usize, p[1] as usize);
            if r::eye(rows, cols) != y {
                bad.push(format!("eye.{kind} {rows}x{cols}"));
            }
            checked += 1;
        }
    }
    assert!(checked > 80, "only {checked} golden cases found");
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
}
