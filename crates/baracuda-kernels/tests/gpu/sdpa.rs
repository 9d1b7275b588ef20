//! GPU tests of [`SdpaPlan`] (cuDNN fused attention, forward and backward)
//! against `reference::attention::{sdpa, sdpa_backward}`: GQA and MQA, sq != sk, head dims 64, 128
//! and 256, a separate value head dim, custom scale, causal masks of both
//! alignments, an additive bias broadcast over batch or heads, sequence
//! lengths off the tile size, and a realistic [1, 16, 1024, 128] causal
//! case. O is compared at bf16/f16 attention's error level (P rounds to
//! the element type before the second matmul, as in every flash kernel);
//! the logsumexp in f32; dQ, dK, dV at the same level relative to their
//! largest element.

use baracuda_kernels::reference::attention as r;
use baracuda_kernels::*;

use crate::harness::*;
use crate::table::{BadInputs, OpCase, Tensors};

/// One problem of the row.
#[derive(Clone, Debug)]
pub struct SdpaSample {
    /// batch, heads_q, heads_kv, seq_q, seq_k, head_dim, head_dim_v
    sizes: [usize; 7],
    scale: Option<f64>,
    causal: Option<CausalAlign>,
    bias: Option<(usize, usize)>,
}

/// The row.
pub const ROW: OpCase<SdpaSample> = OpCase {
    name: "attention_sdpa",
    dtypes: &[ElementKind::F16, ElementKind::Bf16],
    backward: true,
    samples: |_| samples(),
    inputs,
    run,
    reference,
    tolerance,
    bad_inputs,
    unsupported,
};

/// The family's rows of the op table.
pub(crate) static ROWS: &[&dyn crate::table::Row] = &[&ROW];

crate::table_tests!(ROWS; attention_sdpa,);

fn samples() -> Vec<SdpaSample> {
    let s = |sizes| SdpaSample {
        sizes,
        scale: None,
        causal: None,
        bias: None,
    };
    let causal = |mut x: SdpaSample, a| {
        x.causal = Some(a);
        x
    };
    let bias = |mut x: SdpaSample, b| {
        x.bias = Some(b);
        x
    };
    let mut scaled = s([2, 4, 2, 77, 77, 64, 64]);
    scaled.scale = Some(0.05);
    vec![
        s([1, 1, 1, 1, 1, 64, 64]),
        s([2, 4, 4, 128, 128, 64, 64]),
        // GQA and MQA, sq != sk, lengths off the tile
        s([2, 8, 2, 100, 257, 128, 128]),
        s([1, 8, 1, 33, 65, 64, 64]),
        scaled,
        // head dims
        s([1, 2, 2, 64, 64, 256, 256]),
        s([1, 2, 2, 64, 96, 128, 64]),
        // causal, both alignments (bottom-right with sq < sk)
        causal(s([2, 4, 2, 128, 128, 64, 64]), CausalAlign::TopLeft),
        causal(s([2, 4, 2, 64, 200, 64, 64]), CausalAlign::BottomRight),
        causal(s([1, 2, 2, 96, 160, 128, 128]), CausalAlign::TopLeft),
        // bias broadcast over batch, over heads, full
        bias(s([2, 4, 4, 64, 96, 64, 64]), (1, 4)),
        bias(s([2, 4, 4, 64, 96, 64, 64]), (2, 1)),
        causal(
            bias(s([2, 2, 2, 80, 80, 64, 64]), (2, 2)),
            CausalAlign::TopLeft,
        ),
        // realistic
        causal(s([1, 16, 16, 1024, 1024, 128, 128]), CausalAlign::TopLeft),
    ]
}

impl SdpaSample {
    fn problem(&self) -> r::Attention {
        let [b, hq, hk, sq, sk, d, dv] = self.sizes;
        let mut p = r::Attention::new(b, hq, hk, sq, sk, d);
        p.head_dim_v = dv;
        if let Some(s) = self.scale {
            p.scale = s;
        }
        p.causal = self.causal;
        p
    }
    fn descriptor(&self, element: ElementKind) -> SdpaDescriptor {
        let [b, hq, hk, sq, sk, d, dv] = self.sizes;
        let mut desc = SdpaDescriptor::new(element, b, hq, hk, sq, sk, d);
        desc.head_dim_v = dv;
        desc.scale = self.scale;
        desc.causal = self.causal;
        desc.bias = self.bias;
        desc
    }
    fn bias_len(&self) -> usize {
        let [_, _, _, sq, sk, _, _] = self.sizes;
        self.bias.map_or(0, |(b, h)| b * h * sq * sk)
    }
}

fn inputs(s: &SdpaSample, rng: &mut Rng) -> Tensors {
    let [nq, nk, nv, _] = s.problem().sizes();
    let mut t = Tensors::default();
    t.push("q", rng.vec(nq, -1.0, 1.0));
    t.push("k", rng.vec(nk, -1.0, 1.0));
    t.push("v", rng.vec(nv, -1.0, 1.0));
    if s.bias.is_some() {
        t.push("bias", rng.vec(s.bias_len(), -1.0, 1.0));
    }
    let no = s.problem().sizes()[3];
    t.push("do", rng.vec(no, -1.0, 1.0));
    t
}

fn reference(_: ElementKind, s: &SdpaSample, inputs: &Tensors, got: &Tensors) -> Tensors {
    let mut p = s.problem();
    if let Some((b, h)) = s.bias {
        p.bias = Some(r::Broadcast {
            batch: b,
            heads: h,
            values: inputs.get("bias").to_vec(),
        });
    }
    let (o, lse) = r::sdpa(&p, inputs.get("q"), inputs.get("k"), inputs.get("v"));
    let mut t = Tensors::default();
    if got.find("dq").is_some() {
        let g = r::sdpa_backward(
            &p,
            inputs.get("q"),
            inputs.get("k"),
            inputs.get("v"),
            inputs.get("do"),
        );
        t.push("dq", g.dq);
        t.push("dk", g.dk);
        t.push("dv", g.dv);
    }
    t.push("o", o);
    t.push("lse", lse);
    t
}

fn tolerance(
    kind: ElementKind,
    s: &SdpaSample,
    name: &str,
    want: &[f64],
    _inputs: &Tensors,
) -> Tolerance {
    let u = kind.unit_roundoff();
    match name {
        // P rounds to T before P V; O rounds once more
        "o" => Tolerance::of_max(4.0 * u, 8.0 * u, want),
        // P and dS round to T before their matmuls. dS = P (dP - D) is a
        // difference of two f32 sums of up to dv products of inputs in
        // [-1, 1] (dP = dO V^T, D = sum dO O): where they cancel (one key,
        // a peaked softmax) the gradient is that f32 rounding, times the
        // scale and up to seq_k keys of magnitude 1, however small the
        // exact value.
        "dq" | "dk" | "dv" => {
            let [_, _, _, _, sk, d, dv] = s.sizes;
            let scale = s.scale.unwrap_or(1.0 / (d as f64).sqrt());
            let cancel = 8.0 * ElementKind::F32.unit_roundoff() * dv as f64 * scale * sk as f64;
            let t = Tolerance::of_max(8.0 * u, 16.0 * u, want);
            Tolerance {
                atol: t.atol.max(cancel),
                ..t
            }
        }
        // f32 statistics of logits from T inputs (rounded on both sides)
        _ => Tolerance {
            rtol: 1e-5,
            atol: 1e-3,
        },
    }
}

fn run(
    kind: ElementKind,
    s: &SdpaSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    match kind {
        ElementKind::F16 => run_typed::<half::f16>(s, inputs, backward),
        ElementKind::Bf16 => run_typed::<half::bf16>(s, inputs, backward),
        other => Err(format!("no test instance for {other}")),
    }
}

fn run_typed<T: Element>(
    s: &SdpaSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let g = gpu();
    let [b, hq, hk, sq, sk, d, dv] = s.sizes;
    let what = format!("sdpa {} {:?}", T::KIND, s);
    let plan = select::<SdpaPlan<T>>(&s.descriptor(T::KIND), &PlanPreference::default())?;
    let (qb, _) = upload::<T>(inputs.get("q"));
    let (kb, _) = upload::<T>(inputs.get("k"));
    let (vb, _) = upload::<T>(inputs.get("v"));
    let bb = inputs.find("bias").map(upload::<T>);
    let e = |e: Error| e.to_string();
    let mut o = Guarded::<T>::new(b * hq * sq * dv);
    let mut lse = Guarded::<f32>::new(b * hq * sq);
    let mut ws = workspace(plan.workspace_size());
    let bias = match (&bb, s.bias) {
        (Some((buf, _)), Some((bbat, bh))) => {
            Some(TensorRef::contiguous(buf.as_slice(), [bbat, bh, sq, sk]).map_err(e)?)
        }
        _ => None,
    };
    plan.run(
        &g.stream,
        Workspace::Borrowed(ws.as_slice_mut()),
        SdpaArgs {
            q: TensorRef::contiguous(qb.as_slice(), [b, hq, sq, d]).map_err(e)?,
            k: TensorRef::contiguous(kb.as_slice(), [b, hk, sk, d]).map_err(e)?,
            v: TensorRef::contiguous(vb.as_slice(), [b, hk, sk, dv]).map_err(e)?,
            bias,
            o: TensorMut::contiguous(o.slice_mut(), [b, hq, sq, dv]).map_err(e)?,
            lse: Some(TensorMut::contiguous(lse.slice_mut(), [b, hq, sq]).map_err(e)?),
        },
    )
    .map_err(|err| format!("{what}: {err}"))?;
    let mut t = Tensors::default();
    t.push("o", o.result(&what)?);
    t.push("lse", lse.result(&what)?);
    if !backward {
        return Ok(t);
    }
    let (dob, _) = upload::<T>(inputs.get("do"));
    let mut dq = Guarded::<T>::new(b * hq * sq * d);
    let mut dk = Guarded::<T>::new(b * hk * sk * d);
    let mut dv_ = Guarded::<T>::new(b * hk * sk * dv);
    let mut wsb = workspace(plan.bw_workspace_size(Grad::Q | Grad::K | Grad::V));
    let bias = match (&bb, s.bias) {
        (Some((buf, _)), Some((bbat, bh))) => {
            Some(TensorRef::contiguous(buf.as_slice(), [bbat, bh, sq, sk]).map_err(e)?)
        }
        _ => None,
    };
    plan.run_bw(
        &g.stream,
        Workspace::Borrowed(wsb.as_slice_mut()),
        SdpaBwArgs {
            q: TensorRef::contiguous(qb.as_slice(), [b, hq, sq, d]).map_err(e)?,
            k: TensorRef::contiguous(kb.as_slice(), [b, hk, sk, d]).map_err(e)?,
            v: TensorRef::contiguous(vb.as_slice(), [b, hk, sk, dv]).map_err(e)?,
            o: TensorRef::contiguous(o.slice(), [b, hq, sq, dv]).map_err(e)?,
            lse: TensorRef::contiguous(lse.slice(), [b, hq, sq]).map_err(e)?,
            bias,
            d_o: TensorRef::contiguous(dob.as_slice(), [b, hq, sq, dv]).map_err(e)?,
            dq: Some(TensorMut::contiguous(dq.slice_mut(), [b, hq, sq, d]).map_err(e)?),
            dk: Some(TensorMut::contiguous(dk.slice_mut(), [b, hk, sk, d]).map_err(e)?),
            dv: Some(TensorMut::contiguous(dv_.slice_mut(), [b, hk, sk, dv]).map_err(e)?),
        },
    )
    .map_err(|err| format!("{what} backward: {err}"))?;
    t.push("dq", dq.result(&what)?);
    t.push("dk", dk.result(&what)?);
    t.push("dv", dv_.result(&what)?);
    Ok(t)
}

fn bad_inputs() -> Result<usize, String> {
    let g = gpu();
    let mut b = BadInputs::default();
    let pref = PlanPreference::default();
    let desc = SdpaDescriptor::new(ElementKind::Bf16, 1, 2, 2, 64, 64, 64);
    let sel = |d: &SdpaDescriptor| SdpaPlan::<half::bf16>::select(&g.stream, d, &pref);
    b.expect(
        "heads_q 3 over heads_kv 2",
        sel(&SdpaDescriptor { heads_q: 3, ..desc }),
        invalid_descriptor("heads_q"),
        &[],
    )?;
    b.expect(
        "head_dim 300",
        sel(&SdpaDescriptor {
            head_dim: 300,
            ..desc
        }),
        crate::harness::unsupported,
        &[],
    )?;
    b.expect(
        "backend Baracuda",
        SdpaPlan::<half::bf16>::select(&g.stream, &desc, &pref.with_backend(BackendKind::Baracuda)),
        preference_rejected("backend"),
        &[],
    )?;
    let plan = sel(&desc).map_err(|e| e.to_string())?;
    let n = 2 * 64 * 64;
    let (qb, _) = upload::<half::bf16>(&Rng::new(7).vec(2 * n, -1.0, 1.0));
    let q = TensorRef::contiguous(qb.as_slice(), [1, 2, 64, 64]).map_err(|e| e.to_string())?;
    let q_short =
        TensorRef::contiguous(qb.as_slice(), [1, 2, 63, 64]).map_err(|e| e.to_string())?;
    let mut ws = workspace(plan.workspace_size());
    let mut o = Guarded::<half::bf16>::new(n);
    let mut lse = Guarded::<f32>::new(2 * 64);
    let r = plan.run(
        &g.stream,
        Workspace::Borrowed(ws.as_slice_mut()),
        SdpaArgs {
            q: q_short,
            k: q,
            v: q,
            bias: None,
            o: TensorMut::contiguous(o.slice_mut(), [1, 2, 64, 64]).map_err(|e| e.to_string())?,
            lse: Some(
                TensorMut::contiguous(lse.slice_mut(), [1, 2, 64]).map_err(|e| e.to_string())?,
            ),
        },
    );
    b.expect("q [1, 2, 63, 64]", r, shape_mismatch("q"), &[&o, &lse])?;
    let mut o = Guarded::<half::bf16>::new(n);
    let r = plan.run(
        &g.stream,
        Workspace::Borrowed(ws.as_slice_mut()),
        SdpaArgs {
            q,
            k: q,
            v: q,
            bias: None,
            o: TensorMut::contiguous(o.slice_mut(), [1, 2, 64, 64]).map_err(|e| e.to_string())?,
            lse: None,
        },
    );
    b.expect("no lse", r, invalid_argument("lse"), &[&o])?;
    b.done()
}

fn unsupported(kind: ElementKind) -> Result<(), String> {
    crate::with_element!(kind, T => {
        let desc = SdpaDescriptor::new(kind, 1, 1, 1, 8, 8, 64);
        expect_unsupported::<SdpaPlan<T>>(&format!("sdpa on {kind}"), &desc)
    })
}
