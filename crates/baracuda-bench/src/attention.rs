//! Attention benchmark cases, from `bench/cases/attention.json` (which
//! `bench/torch_cases/attention.py` reads too): scaled dot-product
//! attention forward on dense BHSD bf16 tensors (causal or not, GQA), NeoX
//! RoPE over whole heads of a contiguous `[batch, seq, heads, head_dim]`
//! tensor at the sequence index, forward and backward, and the copy that
//! sets the bandwidth ceiling. Work: attention 4 b hq sq sk d FLOPs (half
//! when causal, FlashAttention's count); RoPE reads one tensor and writes
//! one.

use baracuda_kernels::*;
use half::{bf16, f16};
use serde::Deserialize;

use crate::cases::{bad_pass, by_dtype, Checked, Job, RawCase, Row, RunFn};
use crate::harness::{random_buffer, rotation_of, time_passes, time_rotating_ms};

/// A RoPE case's parameters.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    /// `[batch, seq, heads, head_dim]`.
    shape: [usize; 4],
}

/// An attention case's parameters.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SdpaParams {
    /// `[batch, heads_q, heads_kv, seq_q, seq_k, head_dim]`.
    shape: [usize; 6],
    /// Top-left causal mask.
    causal: bool,
}

/// The job of one case of the attention case file.
pub(crate) fn job(c: &RawCase) -> Checked<Job> {
    if c.op == "copy" {
        return crate::reduce::copy_job(c);
    }
    if c.op == "sdpa" {
        return sdpa_job(c);
    }
    if c.op != "rope" {
        return Err(c.unknown_op());
    }
    let dtype = c.dtype()?;
    let passes = c.passes(&["fw", "bw"])?;
    let Params { shape } = c.params()?;
    let bytes = shape.iter().product::<usize>() * dtype.size_bytes();
    let rows = c.rows(&passes, dtype, &format!("{shape:?}"), |r| {
        r.bytes(2 * bytes).rotation(2 * bytes)
    });
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32, F64 => f64], T => {
        Box::new(move |s: &Stream, rows: &[Row]| rope::<T>(s, shape, rows))
    });
    Ok(c.job(rows, run))
}

fn sdpa_job(c: &RawCase) -> Checked<Job> {
    let dtype = c.dtype()?;
    let passes = c.passes(&["fw", "bw"])?;
    let SdpaParams { shape, causal } = c.params()?;
    let [b, hq, hk, sq, sk, d] = shape;
    let full = 4 * b * hq * sq * sk * d;
    let flops = if causal { full / 2 } else { full };
    let shape_s = format!(
        "b{b} hq{hq} hkv{hk} sq{sq} sk{sk} d{d}{}",
        if causal { " causal" } else { "" }
    );
    // the backward's five matmuls against the forward's two
    let rows = c.rows(&passes, dtype, &shape_s, |r| {
        let work = if r.pass == "fw" { flops } else { flops * 5 / 2 };
        r.flops(work)
    });
    let run: RunFn = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16], T => {
        Box::new(move |s: &Stream, rows: &[Row]| sdpa::<T>(s, shape, causal, rows))
    });
    Ok(c.job(rows, run))
}

fn sdpa<T: Element>(s: &Stream, shape: [usize; 6], causal: bool, rows: &[Row]) -> Result<()> {
    let [b, hq, hk, sq, sk, d] = shape;
    let mut desc = SdpaDescriptor::new(T::KIND, b, hq, hk, sq, sk, d);
    if causal {
        desc = desc.with_causal(CausalAlign::TopLeft);
    }
    let plan = SdpaPlan::<T>::select(s, &desc, &PlanPreference::default())?;
    let q = random_buffer::<T>(s, b * hq * sq * d, 21, -1.0, 1.0)?;
    let k = random_buffer::<T>(s, b * hk * sk * d, 22, -1.0, 1.0)?;
    let v = random_buffer::<T>(s, b * hk * sk * d, 23, -1.0, 1.0)?;
    let mut o = DeviceBuffer::<T>::uninit(s, b * hq * sq * d)?;
    let mut lse = DeviceBuffer::<f32>::uninit(s, b * hq * sq)?;
    let all = Grad::Q | Grad::K | Grad::V;
    let ws_bytes = plan.workspace_size().max(plan.bw_workspace_size(all));
    let mut ws = DeviceBuffer::<u8>::uninit(s, ws_bytes.max(1))?;
    let d_o = random_buffer::<T>(s, b * hq * sq * d, 24, -1.0, 1.0)?;
    let mut dq = DeviceBuffer::<T>::uninit(s, b * hq * sq * d)?;
    let mut dk = DeviceBuffer::<T>::uninit(s, b * hk * sk * d)?;
    let mut dv = DeviceBuffer::<T>::uninit(s, b * hk * sk * d)?;
    let forward =
        |ws: &mut DeviceBuffer<u8>, o: &mut DeviceBuffer<T>, lse: &mut DeviceBuffer<f32>| {
            plan.run(
                s,
                Workspace::Borrowed(ws.as_slice_mut()),
                SdpaArgs {
                    q: TensorRef::contiguous(q.as_slice(), [b, hq, sq, d])?,
                    k: TensorRef::contiguous(k.as_slice(), [b, hk, sk, d])?,
                    v: TensorRef::contiguous(v.as_slice(), [b, hk, sk, d])?,
                    bias: None,
                    o: TensorMut::contiguous(o.as_slice_mut(), [b, hq, sq, d])?,
                    lse: Some(TensorMut::contiguous(lse.as_slice_mut(), [b, hq, sq])?),
                },
            )
        };
    // the backward reads the forward's O and logsumexp
    if rows.iter().any(|r| r.pass == "bw") {
        forward(&mut ws, &mut o, &mut lse)?;
    }
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, 1, |_| forward(&mut ws, &mut o, &mut lse)),
        "bw" => time_rotating_ms(s, 1, |_| {
            plan.run_bw(
                s,
                Workspace::Borrowed(ws.as_slice_mut()),
                SdpaBwArgs {
                    q: TensorRef::contiguous(q.as_slice(), [b, hq, sq, d])?,
                    k: TensorRef::contiguous(k.as_slice(), [b, hk, sk, d])?,
                    v: TensorRef::contiguous(v.as_slice(), [b, hk, sk, d])?,
                    o: TensorRef::contiguous(o.as_slice(), [b, hq, sq, d])?,
                    lse: TensorRef::contiguous(lse.as_slice(), [b, hq, sq])?,
                    bias: None,
                    d_o: TensorRef::contiguous(d_o.as_slice(), [b, hq, sq, d])?,
                    dq: Some(TensorMut::contiguous(dq.as_slice_mut(), [b, hq, sq, d])?),
                    dk: Some(TensorMut::contiguous(dk.as_slice_mut(), [b, hk, sk, d])?),
                    dv: Some(TensorMut::contiguous(dv.as_slice_mut(), [b, hk, sk, d])?),
                },
            )
        }),
        p => Err(bad_pass(p)),
    })
}

fn rope<T: Element>(s: &Stream, shape: [usize; 4], rows: &[Row]) -> Result<()> {
    let desc = RopeDescriptor::new(T::KIND, shape, 10000.0);
    let plan = RopePlan::<T>::select(s, &desc, &PlanPreference::default())?;
    let sets = rotation_of(s, rows)?;
    let n = shape.iter().product();
    let xs = (0..sets as u64)
        .map(|i| random_buffer::<T>(s, n, 17 + 16 * i, -2.0, 2.0))
        .collect::<Result<Vec<_>>>()?;
    let mut out = DeviceBuffer::<T>::uninit(s, n)?;
    let run = |i: usize, out: &mut DeviceBuffer<T>, inverse: bool| {
        let x = TensorRef::contiguous(xs[i].as_slice(), shape)?;
        let y = TensorMut::contiguous(out.as_slice_mut(), shape)?;
        if inverse {
            let args = RopeBwArgs {
                dy: x,
                positions: None,
                table: None,
                dx: y,
            };
            plan.run_bw(s, Workspace::None, args)
        } else {
            let args = RopeArgs {
                x,
                positions: None,
                table: None,
                y,
            };
            plan.run(s, Workspace::None, args)
        }
    };
    time_passes(rows, |pass| match pass {
        "fw" => time_rotating_ms(s, sets, |i| run(i, &mut out, false)),
        "bw" => time_rotating_ms(s, sets, |i| run(i, &mut out, true)),
        p => Err(bad_pass(p)),
    })
}
