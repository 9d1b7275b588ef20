//! Host test: the shape family's f64 oracles against PyTorch goldens
//! (`tests/golden/shape.safetensors`, written by `scripts/make_goldens.py`
//! from `scripts/goldens/shape.py`): flip, roll, tril, triu, the four pad
//! modes (negative pads too), repeat, repeat_interleave, diagonal,
//! diag_embed, diag, unfold, strided slices, cat and stack, forward and
//! gradient. Each case carries its parameters in the file (`<case>.shape`,
//! `.dims`, ...), so the case list is the script's.

use std::collections::BTreeSet;

use baracuda_kernels::reference::shape as r;
use baracuda_kernels::PadMode;
use safetensors::SafeTensors;

#[path = "support/golden.rs"]
mod golden;
use golden::{close, get};

/// `get` of integer parameters.
fn ints(t: &SafeTensors<'_>, k: &str) -> Vec<i64> {
    get(t, k).iter().map(|&v| v as i64).collect()
}

fn usizes(t: &SafeTensors<'_>, k: &str) -> Vec<usize> {
    get(t, k).iter().map(|&v| v as usize).collect()
}

/// `dim` wrapped into `[0, rank)`.
fn wrap(dim: i64, rank: usize) -> usize {
    dim.rem_euclid(rank as i64) as usize
}

#[test]
fn shape_references_match_pytorch() {
    let Some(data) = golden::bytes_if_generated("shape") else {
        return;
    };
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    // every case: the names before ".y"
    let cases: BTreeSet<String> = t
        .names()
        .iter()
        .filter_map(|n| n.strip_suffix(".y").map(str::to_string))
        .collect();
    let mut seen = BTreeSet::new();
    for case in &cases {
        let k = |s: &str| format!("{case}.{s}");
        let op = case.split('.').next().unwrap_or_default();
        seen.insert(op.to_string());
        let (y, dy) = (get(&t, &k("y")), get(&t, &k("dy")));
        match op {
            "cat" | "stack" => {
                let n = (0..)
                    .take_while(|i| t.tensor(&k(&format!("x{i}"))).is_ok())
                    .count();
                let xs: Vec<Vec<f64>> = (0..n).map(|i| get(&t, &k(&format!("x{i}")))).collect();
                let refs: Vec<&[f64]> = xs.iter().map(Vec::as_slice).collect();
                let dim = ints(&t, &k("dim"))[0];
                let (want_y, dxs) = if op == "cat" {
                    let shapes: Vec<Vec<usize>> = (0..n)
                        .map(|i| usizes(&t, &k(&format!("shape{i}"))))
                        .collect();
                    let d = wrap(dim, shapes[0].len());
                    (r::cat(&shapes, &refs, d), r::cat_backward(&shapes, &dy, d))
                } else {
                    let shape = usizes(&t, &k("shape"));
                    let d = wrap(dim, shape.len() + 1);
                    (
                        r::stack(&shape, &refs, d),
                        r::stack_backward(&shape, n, &dy, d),
                    )
                };
                close(&k("y"), &want_y, &y);
                for (i, dx) in dxs.iter().enumerate() {
                    let name = k(&format!("dx{i}"));
                    close(&name, dx, &get(&t, &name));
                }
            }
            _ => {
                let shape = usizes(&t, &k("shape"));
                let x = get(&t, &k("x"));
                let rank = shape.len();
                let dims = || -> Vec<usize> {
                    ints(&t, &k("dims"))
                        .into_iter()
                        .map(|d| wrap(d, rank))
                        .collect()
                };
                let (want_y, dx) = match op {
                    "flip" => (r::flip(&shape, &x, &dims()), r::flip(&shape, &dy, &dims())),
                    "roll" => {
                        let shifts = ints(&t, &k("shifts"));
                        let neg: Vec<i64> = shifts.iter().map(|s| -s).collect();
                        if dims().is_empty() {
                            (r::roll_flat(&x, shifts[0]), r::roll_flat(&dy, neg[0]))
                        } else {
                            (
                                r::roll(&shape, &x, &shifts, &dims()),
                                r::roll(&shape, &dy, &neg, &dims()),
                            )
                        }
                    }
                    "tril" | "triu" => {
                        let diagonal = ints(&t, &k("diagonal"))[0];
                        let lower = op == "tril";
                        (
                            r::triangle(&shape, &x, diagonal, lower),
                            r::triangle(&shape, &dy, diagonal, lower),
                        )
                    }
                    "repeat" => {
                        let reps = usizes(&t, &k("repeats"));
                        (
                            r::repeat(&shape, &x, &reps).1,
                            r::repeat_backward(&shape, &dy, &reps),
                        )
                    }
                    "repeat_interleave" => {
                        let counts = usizes(&t, &k("repeats"));
                        let d = wrap(ints(&t, &k("dim"))[0], rank);
                        (
                            r::repeat_interleave(&shape, &x, &counts, d).1,
                            r::repeat_interleave_backward(&shape, &dy, &counts, d),
                        )
                    }
                    "diagonal" | "diag_embed" => {
                        let offset = ints(&t, &k("offset"))[0];
                        let out_rank = if op == "diagonal" { rank } else { rank + 1 };
                        let d1 = wrap(ints(&t, &k("dim1"))[0], out_rank);
                        let d2 = wrap(ints(&t, &k("dim2"))[0], out_rank);
                        if op == "diagonal" {
                            (
                                r::diagonal(&shape, &x, offset, d1, d2).1,
                                r::diagonal_backward(&shape, &dy, offset, d1, d2),
                            )
                        } else {
                            (
                                r::diag_embed(&shape, &x, offset, d1, d2).1,
                                r::diag_embed_backward(&shape, &dy, offset, d1, d2),
                            )
                        }
                    }
                    "diag" => {
                        let offset = ints(&t, &k("offset"))[0];
                        if rank == 1 {
                            (
                                r::diag_embed(&shape, &x, offset, 0, 1).1,
                                r::diag_embed_backward(&shape, &dy, offset, 0, 1),
                            )
                        } else {
                            (
                                r::diagonal(&shape, &x, offset, 0, 1).1,
                                r::diagonal_backward(&shape, &dy, offset, 0, 1),
                            )
                        }
                    }
                    "unfold" => {
                        let d = wrap(ints(&t, &k("dim"))[0], rank);
                        let size = usizes(&t, &k("size"))[0];
                        let step = usizes(&t, &k("step"))[0];
                        (
                            r::unfold(&shape, &x, d, size, step).1,
                            r::unfold_backward(&shape, &dy, d, size, step),
                        )
                    }
                    "slice" => {
                        let d = wrap(ints(&t, &k("dim"))[0], rank);
                        let (start, stop) = (ints(&t, &k("start"))[0], ints(&t, &k("stop"))[0]);
                        let step = ints(&t, &k("step"))[0];
                        (
                            r::slice(&shape, &x, d, start, stop, step).1,
                            r::slice_backward(&shape, &dy, d, start, stop, step),
                        )
                    }
                    _ => {
                        let mode = match op {
                            "pad_constant" => PadMode::Constant,
                            "pad_reflect" => PadMode::Reflect,
                            "pad_replicate" => PadMode::Replicate,
                            "pad_circular" => PadMode::Circular,
                            other => panic!("{case}: unknown op {other}"),
                        };
                        let pad = ints(&t, &k("pad"));
                        let value = get(&t, &k("value"))[0];
                        (
                            r::pad(&shape, &x, &pad, mode, value).1,
                            r::pad_backward(&shape, &dy, &pad, mode),
                        )
                    }
                };
                close(&k("y"), &want_y, &y);
                close(&k("dx"), &dx, &get(&t, &k("dx")));
            }
        }
    }
    let ops = [
        "flip",
        "roll",
        "tril",
        "triu",
        "pad_constant",
        "pad_reflect",
        "pad_replicate",
        "pad_circular",
        "cat",
        "stack",
    ];
    for op in ops {
        assert!(seen.contains(op), "no {op} case in shape.safetensors");
    }
    // The layout ops: every one once the file is regenerated with them
    // (any of them present), a note until then.
    let layout = [
        "repeat",
        "repeat_interleave",
        "diagonal",
        "diag_embed",
        "diag",
        "unfold",
        "slice",
    ];
    if layout.iter().any(|op| seen.contains(*op)) {
        for op in layout {
            assert!(seen.contains(op), "no {op} case in shape.safetensors");
        }
    } else {
        eprintln!(
            "note: shape.safetensors predates the layout ops (run `python3 \
             scripts/make_goldens.py` where PyTorch is installed); their goldens are skipped"
        );
    }
}
