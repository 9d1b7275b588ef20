//! Host test: the attention family's f64 oracles against PyTorch goldens
//! (`tests/golden/attention.safetensors`, written by
//! `scripts/make_goldens.py` from `scripts/goldens/attention.py`):
//! `scaled_dot_product_attention` (math backend) and its gradients with
//! GQA, sq != sk, a separate value head dim, a custom scale, both causal
//! alignments, a broadcast boolean mask with a row that sees no key, and an
//! additive mask with its gradient.

#[path = "support/golden.rs"]
mod golden;

use baracuda_kernels::reference::attention::{
    sdpa, sdpa_backward, Attention, Broadcast, CausalAlign,
};
use golden::{bytes, close, get};
use safetensors::SafeTensors;

/// One golden case: its name and the problem's sizes.
struct Case {
    name: &'static str,
    /// batch, heads_q, heads_kv, sq, sk, d, dv
    sizes: [usize; 7],
    scale: Option<f64>,
}

const fn case(name: &'static str, sizes: [usize; 7], scale: Option<f64>) -> Case {
    Case { name, sizes, scale }
}

const CASES: &[Case] = &[
    case("plain", [2, 2, 2, 5, 5, 4, 4], None),
    case("gqa", [2, 4, 2, 3, 5, 4, 3], Some(0.3)),
    case("causal_tl", [1, 2, 2, 3, 5, 4, 4], None),
    case("causal_br", [1, 2, 2, 3, 5, 4, 4], None),
    case("bool", [2, 2, 1, 3, 5, 4, 4], None),
    case("bias", [1, 2, 2, 3, 4, 4, 4], None),
];

#[test]
fn sdpa_and_gradients_match_pytorch() {
    let data = bytes("attention");
    let t = SafeTensors::deserialize(&data).expect("safetensors");
    for &Case { name, sizes, scale } in CASES {
        let [b, hq, hk, sq, sk, d, dv] = sizes;
        let k = |s: &str| format!("{name}.{s}");
        let mut p = Attention::new(b, hq, hk, sq, sk, d);
        p.head_dim_v = dv;
        if let Some(s) = scale {
            p.scale = s;
        }
        match name {
            "causal_tl" => p.causal = Some(CausalAlign::TopLeft),
            "causal_br" => p.causal = Some(CausalAlign::BottomRight),
            "bool" => {
                p.mask = Some(Broadcast {
                    batch: 1,
                    heads: 1,
                    values: get(&t, &k("mask")).iter().map(|&m| m != 0.0).collect(),
                })
            }
            "bias" => {
                p.bias = Some(Broadcast {
                    batch: 1,
                    heads: hq,
                    values: get(&t, &k("bias")),
                })
            }
            _ => {}
        }
        let (q, kk, v, d_o) = (
            get(&t, &k("q")),
            get(&t, &k("k")),
            get(&t, &k("v")),
            get(&t, &k("do")),
        );
        close(&k("o"), &sdpa(&p, &q, &kk, &v).0, &get(&t, &k("o")));
        let g = sdpa_backward(&p, &q, &kk, &v, &d_o);
        close(&k("dq"), &g.dq, &get(&t, &k("dq")));
        close(&k("dk"), &g.dk, &get(&t, &k("dk")));
        close(&k("dv"), &g.dv, &get(&t, &k("dv")));
        if let Some(db) = &g.dbias {
            close(&k("dbias"), db, &get(&t, &k("dbias")));
        }
    }
}
