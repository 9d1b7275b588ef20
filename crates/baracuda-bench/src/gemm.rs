//! GEMM benchmark cases (same names, shapes and dtypes as
//! `bench/torch_cases/gemm.py`):
//!
//! - square 8192^3: bf16, IEEE f32, TF32 (allowed), fp8 e4m3 -> bf16 and
//!   s8 -> s32 (TFLOP/s);
//! - an LLM prefill linear, 8192 tokens x 4096 -> 14336 bf16: forward,
//!   `dX = dY W` (`bw_data`), `dW = dY^T X` (`dw`), and `dW` with the bias
//!   gradient `db = sum_tokens dY` of a biased layer;
//! - the decode linear, 1 token x 4096 -> 14336 bf16: memory bound (it
//!   reads the 117 MB weight once), so it reports GB/s;
//! - attention-shaped batched GEMMs, batch 128: `Q K^T` (4096 x 4096 x 128)
//!   and `P V` (4096 x 128 x 4096);
//! - an MoE expert layer: 64 experts, 16384 tokens split unevenly by a
//!   fixed seed ([`moe_tokens`]), each `x_e [t_e, 4096] W_e^T -> [t_e, 14336]`.
//!
//! Layouts match what the PyTorch call runs (`a @ b` of row-major tensors is
//! `Rrr`; `F.linear` and `Q K^T` are `Rcr`). Plans use measured autotuning
//! (cuBLASLt's heuristic candidates timed in `select`), which PyTorch does
//! not do; the warm-up of `time_ms` keeps `select` out of the numbers.

use baracuda_kernels::*;
use float8::F8E4M3;
use half::bf16;

use crate::harness::{
    case, emit, part, part_mut, random_buffer, rotation, time_ms, time_rotating_ms, Record,
};

/// Side of the square problems.
const SQ: usize = 8192;
/// The prefill/decode linear: in and out features.
const IN: usize = 4096;
const OUT: usize = 14336;
/// Prefill tokens.
const TOKENS: usize = 8192;
/// MoE: experts and tokens routed in total.
const EXPERTS: usize = 64;
const MOE_TOKENS: usize = 16384;

fn pref() -> PlanPreference {
    PlanPreference::default().with_autotune(Autotune::Measured)
}

fn workspace(s: &Stream, bytes: usize) -> Result<DeviceBuffer<u8>> {
    DeviceBuffer::zeros(s, bytes.max(1))
}

fn gemm_flops(batch: usize, m: usize, n: usize, k: usize) -> Option<f64> {
    Some(2.0 * (batch * m * n) as f64 * k as f64)
}

fn square_shape() -> String {
    format!("m{SQ} n{SQ} k{SQ}")
}

/// `D = A B` with row-major A, B, D (`a @ b` in PyTorch).
fn square<T: Element>(s: &Stream, op: &str, pref: &PlanPreference) -> Result<()> {
    let n = SQ;
    let a = random_buffer::<T>(s, n * n, 11, -1.0, 1.0)?;
    let b = random_buffer::<T>(s, n * n, 12, -1.0, 1.0)?;
    let mut d = DeviceBuffer::<T>::uninit(s, n * n)?;
    let desc = GemmDescriptor::new(n, n, n, LayoutSku::Rrr);
    let plan = GemmPlan::<T>::select(s, &desc, pref)?;
    let mut ws = workspace(s, plan.workspace_size())?;
    let row = MatrixOrder::RowMajor;
    let ms = time_ms(s, || {
        plan.run(
            s,
            Workspace::Borrowed(ws.as_slice_mut()),
            GemmArgs {
                a: MatrixRef::new(a.as_slice(), n, n, n, row)?,
                b: MatrixRef::new(b.as_slice(), n, n, n, row)?,
                c: None,
                d: MatrixMut::new(d.as_slice_mut(), n, n, n, row)?,
                bias: None,
                aux: None,
                alpha: 1.0,
                beta: 0.0,
            },
        )
    })?;
    emit(&Record {
        op,
        pass: "fw",
        dtype: T::KIND,
        shape: square_shape(),
        ms,
        bytes: None,
        flops: gemm_flops(1, n, n, n),
    });
    Ok(())
}

/// e4m3 x e4m3 -> bf16 with unit per-tensor scales, TN (row-major A,
/// column-major B), as `torch._scaled_mm` takes it.
fn fp8(s: &Stream) -> Result<()> {
    let n = SQ;
    let a = random_buffer::<F8E4M3>(s, n * n, 13, -4.0, 4.0)?;
    let b = random_buffer::<F8E4M3>(s, n * n, 14, -4.0, 4.0)?;
    let scale_a = DeviceBuffer::<f32>::from_host(s, &[1.0])?;
    let scale_b = DeviceBuffer::<f32>::from_host(s, &[1.0])?;
    let mut d = DeviceBuffer::<bf16>::uninit(s, n * n)?;
    let desc = Fp8GemmDescriptor {
        gemm: GemmDescriptor::new(n, n, n, LayoutSku::Rcr),
        amax: false,
    };
    let plan = Fp8GemmPlan::<F8E4M3, F8E4M3, bf16>::select(s, &desc, &pref())?;
    let mut ws = workspace(s, plan.workspace_size())?;
    let ms = time_ms(s, || {
        plan.run(
            s,
            Workspace::Borrowed(ws.as_slice_mut()),
            Fp8GemmArgs {
                a: MatrixRef::new(a.as_slice(), n, n, n, MatrixOrder::RowMajor)?,
                b: MatrixRef::new(b.as_slice(), n, n, n, MatrixOrder::ColMajor)?,
                d: MatrixMut::new(d.as_slice_mut(), n, n, n, MatrixOrder::RowMajor)?,
                scale_a: scale_a.as_slice(),
                scale_b: scale_b.as_slice(),
                amax: None,
            },
        )
    })?;
    emit(&Record {
        op: "gemm_fp8_e4m3_8192",
        pass: "fw",
        dtype: ElementKind::Fp8E4M3,
        shape: square_shape(),
        ms,
        bytes: None,
        flops: gemm_flops(1, n, n, n),
    });
    Ok(())
}

/// s8 x s8 -> s32, TN, as `torch._int_mm(a, b_t.t())` takes it.
fn int8(s: &Stream) -> Result<()> {
    let n = SQ;
    let a = random_buffer::<i8>(s, n * n, 15, -127.0, 127.0)?;
    let b = random_buffer::<i8>(s, n * n, 16, -127.0, 127.0)?;
    let mut d = DeviceBuffer::<i32>::uninit(s, n * n)?;
    let desc = IntGemmDescriptor {
        gemm: GemmDescriptor::new(n, n, n, LayoutSku::Rcr),
    };
    let plan = IntGemmPlan::<i32>::select(s, &desc, &pref())?;
    let mut ws = workspace(s, plan.workspace_size())?;
    let ms = time_ms(s, || {
        plan.run(
            s,
            Workspace::Borrowed(ws.as_slice_mut()),
            IntGemmArgs {
                a: MatrixRef::new(a.as_slice(), n, n, n, MatrixOrder::RowMajor)?,
                b: MatrixRef::new(b.as_slice(), n, n, n, MatrixOrder::ColMajor)?,
                d: MatrixMut::new(d.as_slice_mut(), n, n, n, MatrixOrder::RowMajor)?,
                scale: 1.0,
            },
        )
    })?;
    emit(&Record {
        op: "gemm_int8_8192",
        pass: "fw",
        dtype: ElementKind::I8,
        shape: square_shape(),
        ms,
        bytes: None,
        flops: gemm_flops(1, n, n, n),
    });
    Ok(())
}

fn linear_shape(tokens: usize) -> String {
    format!("x[{tokens}, {IN}] w[{OUT}, {IN}]")
}

/// `Y = X W^T` (no bias, as in an LLM MLP) and its two backward matmuls,
/// each timed alone (`run_bw` computes only the gradients it is given).
fn linear_prefill(s: &Stream) -> Result<()> {
    let (t, i, o) = (TOKENS, IN, OUT);
    let row = MatrixOrder::RowMajor;
    let x = random_buffer::<bf16>(s, t * i, 21, -1.0, 1.0)?;
    let w = random_buffer::<bf16>(s, o * i, 22, -0.05, 0.05)?;
    let dy = random_buffer::<bf16>(s, t * o, 23, -1.0, 1.0)?;
    let mut y = DeviceBuffer::<bf16>::uninit(s, t * o)?;
    let mut dx = DeviceBuffer::<bf16>::uninit(s, t * i)?;
    let mut dw = DeviceBuffer::<bf16>::uninit(s, o * i)?;
    let desc = LinearDescriptor {
        tokens: t,
        in_features: i,
        out_features: o,
        epilogue: EpilogueKind::Identity,
        save_aux: false,
    };
    let plan = LinearPlan::<bf16>::select(s, &desc, &pref())?;
    let mut ws = workspace(s, plan.workspace_size())?;
    let record = |pass: &'static str, ms: f64| {
        emit(&Record {
            op: "linear_prefill_bf16",
            pass,
            dtype: ElementKind::Bf16,
            shape: linear_shape(t),
            ms,
            bytes: None,
            flops: gemm_flops(1, t, o, i),
        })
    };
    let ms = time_ms(s, || {
        plan.run(
            s,
            Workspace::Borrowed(ws.as_slice_mut()),
            LinearArgs {
                x: MatrixRef::new(x.as_slice(), t, i, i, row)?,
                w: MatrixRef::new(w.as_slice(), o, i, i, row)?,
                bias: None,
                y: MatrixMut::new(y.as_slice_mut(), t, o, o, row)?,
                aux: None,
            },
        )
    })?;
    record("fw", ms);
    let inputs = (&x, &w, &dy);
    let ms = time_linear_bw(s, &plan, &mut ws, inputs, (Some(&mut dx), None, None))?;
    record("bw_data", ms);
    let ms = time_linear_bw(s, &plan, &mut ws, inputs, (None, Some(&mut dw), None))?;
    record("dw", ms);

    // A biased layer's weight gradient: dW and db together (BGRADB fuses
    // the column sum into the dW matmul where cuBLASLt offers it).
    let bdesc = LinearDescriptor {
        epilogue: EpilogueKind::Bias,
        ..desc
    };
    let bplan = LinearPlan::<bf16>::select(s, &bdesc, &pref())?;
    let mut bws = workspace(s, bplan.workspace_size())?;
    let mut db = DeviceBuffer::<bf16>::uninit(s, o)?;
    let grads = (None, Some(&mut dw), Some(&mut db));
    let ms = time_linear_bw(s, &bplan, &mut bws, inputs, grads)?;
    emit(&Record {
        op: "linear_prefill_bias_bf16",
        pass: "dw",
        dtype: ElementKind::Bf16,
        shape: linear_shape(t),
        ms,
        bytes: None,
        flops: gemm_flops(1, t, o, i),
    });
    Ok(())
}

/// The gradient buffers `(dx, dw, db)` a backward pass writes; None: not
/// computed.
type GradBuffers<'a> = (
    Option<&'a mut DeviceBuffer<bf16>>,
    Option<&'a mut DeviceBuffer<bf16>>,
    Option<&'a mut DeviceBuffer<bf16>>,
);

/// Device ms of `plan.run_bw` over the prefill's packed row-major
/// `(x, w, dy)`, computing the gradients given.
fn time_linear_bw(
    s: &Stream,
    plan: &LinearPlan<bf16>,
    ws: &mut DeviceBuffer<u8>,
    (x, w, dy): (
        &DeviceBuffer<bf16>,
        &DeviceBuffer<bf16>,
        &DeviceBuffer<bf16>,
    ),
    (mut dx, mut dw, mut db): GradBuffers<'_>,
) -> Result<f64> {
    let (t, i, o) = (TOKENS, IN, OUT);
    let row = MatrixOrder::RowMajor;
    time_ms(s, || {
        plan.run_bw(
            s,
            Workspace::Borrowed(ws.as_slice_mut()),
            LinearBwArgs {
                x: MatrixRef::new(x.as_slice(), t, i, i, row)?,
                w: MatrixRef::new(w.as_slice(), o, i, i, row)?,
                dy: MatrixRef::new(dy.as_slice(), t, o, o, row)?,
                aux: None,
                dx: match dx.as_deref_mut() {
                    Some(b) => Some(MatrixMut::new(b.as_slice_mut(), t, i, i, row)?),
                    None => None,
                },
                dw: match dw.as_deref_mut() {
                    Some(b) => Some(MatrixMut::new(b.as_slice_mut(), o, i, i, row)?),
                    None => None,
                },
                dbias: db.as_deref_mut().map(|b| b.as_slice_mut()),
            },
        )
    })
}

/// One token through the 4096 -> 14336 projection: a GEMV in disguise,
/// bound by reading W (14336 * 4096 * 2 B = 117 MB, beyond the 50 MB L2).
fn linear_decode(s: &Stream) -> Result<()> {
    let (t, i, o) = (1, IN, OUT);
    let row = MatrixOrder::RowMajor;
    // W (117 MB) is about 2.3 times the H200's L2: two sets keep any of it
    // from staying cached between calls.
    let sets = rotation(s, (o * i + t * i + t * o) * 2);
    let x = random_buffer::<bf16>(s, sets * t * i, 31, -1.0, 1.0)?;
    let w = random_buffer::<bf16>(s, sets * o * i, 32, -0.05, 0.05)?;
    let mut y = DeviceBuffer::<bf16>::uninit(s, t * o)?;
    let desc = LinearDescriptor {
        tokens: t,
        in_features: i,
        out_features: o,
        epilogue: EpilogueKind::Identity,
        save_aux: false,
    };
    let plan = LinearPlan::<bf16>::select(s, &desc, &pref())?;
    let mut ws = workspace(s, plan.workspace_size())?;
    let ms = time_rotating_ms(s, sets, |k| {
        plan.run(
            s,
            Workspace::Borrowed(ws.as_slice_mut()),
            LinearArgs {
                x: MatrixRef::new(part(&x, k, t * i)?, t, i, i, row)?,
                w: MatrixRef::new(part(&w, k, o * i)?, o, i, i, row)?,
                bias: None,
                y: MatrixMut::new(part_mut(&mut y, 0, t * o)?, t, o, o, row)?,
                aux: None,
            },
        )
    })?;
    emit(&Record {
        op: "linear_decode_bf16",
        pass: "fw",
        dtype: ElementKind::Bf16,
        shape: linear_shape(t),
        ms,
        bytes: Some(((o * i + t * i + t * o) * 2) as f64),
        flops: None,
    });
    Ok(())
}

/// A packed batch of row-major `m x k` A and `k x n` B in `layout`'s B
/// order (`Rcr`: B stored as `[n, k]`, i.e. `K^T`).
fn batched(
    s: &Stream,
    op: &str,
    (batch, m, n, k): (usize, usize, usize, usize),
    layout: LayoutSku,
) -> Result<()> {
    let a = random_buffer::<bf16>(s, batch * m * k, 41, -1.0, 1.0)?;
    let b = random_buffer::<bf16>(s, batch * k * n, 42, -1.0, 1.0)?;
    let mut d = DeviceBuffer::<bf16>::uninit(s, batch * m * n)?;
    let desc = BatchedGemmDescriptor::packed(GemmDescriptor::new(m, n, k, layout), batch);
    let plan = BatchedGemmPlan::<bf16>::select(s, &desc, &pref())?;
    let mut ws = workspace(s, plan.workspace_size())?;
    let ms = time_ms(s, || {
        plan.run(
            s,
            Workspace::Borrowed(ws.as_slice_mut()),
            BatchedGemmArgs {
                a: a.as_slice(),
                b: b.as_slice(),
                c: None,
                d: d.as_slice_mut(),
                alpha: 1.0,
                beta: 0.0,
            },
        )
    })?;
    emit(&Record {
        op,
        pass: "fw",
        dtype: ElementKind::Bf16,
        shape: format!("b{batch} m{m} n{n} k{k}"),
        ms,
        bytes: None,
        flops: gemm_flops(batch, m, n, k),
    });
    Ok(())
}

/// Tokens per expert: a fixed, uneven split of [`MOE_TOKENS`] over
/// [`EXPERTS`] (weights `1 + (x >> 33) % 100` from a 64-bit LCG seeded with
/// 2024, floors, remainder to the first experts). `moe_tokens()` in
/// `bench/torch_cases/gemm.py` computes the same list: 5 to 554 tokens.
pub fn moe_tokens() -> Vec<usize> {
    let mut x: u64 = 2024;
    let w: Vec<usize> = (0..EXPERTS)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            1 + ((x >> 33) % 100) as usize
        })
        .collect();
    let total: usize = w.iter().sum();
    let mut t: Vec<usize> = w.iter().map(|v| MOE_TOKENS * v / total).collect();
    let short = MOE_TOKENS - t.iter().sum::<usize>();
    for v in t.iter_mut().take(short) {
        *v += 1;
    }
    t
}

/// `y[tokens of e] = x[tokens of e] W_e^T` for every expert, in one
/// grouped plan (one cuBLASLt matmul per expert, see `GroupedGemmPlan`).
fn moe(s: &Stream) -> Result<()> {
    let (k, n) = (IN, OUT);
    let tokens = moe_tokens();
    let x = random_buffer::<bf16>(s, MOE_TOKENS * k, 51, -1.0, 1.0)?;
    let w = random_buffer::<bf16>(s, EXPERTS * n * k, 52, -0.05, 0.05)?;
    let mut y = DeviceBuffer::<bf16>::uninit(s, MOE_TOKENS * n)?;
    let desc = GroupedGemmDescriptor {
        problems: tokens.iter().map(|&t| (t, n, k)).collect(),
        layout: LayoutSku::Rcr,
    };
    let plan = GroupedGemmPlan::<bf16>::select(s, &desc, &pref())?;
    let mut ws = workspace(s, plan.workspace_size())?;
    let ms =
        time_ms(s, || {
            let mut a = Vec::with_capacity(EXPERTS);
            let mut b = Vec::with_capacity(EXPERTS);
            let mut d = Vec::with_capacity(EXPERTS);
            let mut rest = y.as_slice_mut();
            let mut start = 0;
            for (e, &t) in tokens.iter().enumerate() {
                let xs = x.as_slice().slice(start * k..(start + t) * k).ok_or(
                    Error::InvalidArgument {
                        op: "moe bench",
                        arg: "x",
                        reason: "token split beyond x".into(),
                    },
                )?;
                let ws_ = w.as_slice().slice(e * n * k..(e + 1) * n * k).ok_or(
                    Error::InvalidArgument {
                        op: "moe bench",
                        arg: "w",
                        reason: "expert beyond w".into(),
                    },
                )?;
                let (ys, tail) = rest.split_at(t * n).ok_or(Error::InvalidArgument {
                    op: "moe bench",
                    arg: "y",
                    reason: "token split beyond y".into(),
                })?;
                rest = tail;
                a.push(MatrixRef::new(xs, t, k, k, MatrixOrder::RowMajor)?);
                // W_e [n, k] row-major is W_e^T [k, n] column-major.
                b.push(MatrixRef::new(ws_, k, n, k, MatrixOrder::ColMajor)?);
                d.push(MatrixMut::new(ys, t, n, n, MatrixOrder::RowMajor)?);
                start += t;
            }
            plan.run(
                s,
                Workspace::Borrowed(ws.as_slice_mut()),
                GroupedGemmArgs {
                    a,
                    b,
                    d,
                    alpha: 1.0,
                },
            )
        })?;
    emit(&Record {
        op: "moe_grouped_bf16",
        pass: "fw",
        dtype: ElementKind::Bf16,
        shape: format!("e{EXPERTS} t{MOE_TOKENS} k{k} n{n}"),
        ms,
        bytes: None,
        flops: gemm_flops(1, MOE_TOKENS, n, k),
    });
    Ok(())
}

/// Run every case; errors are reported per case and do not stop the rest.
pub fn run(s: &Stream) {
    let ieee = pref();
    let tf32 = pref().with_allow_tf32(true);
    case("gemm", "gemm_bf16_8192", || {
        square::<bf16>(s, "gemm_bf16_8192", &ieee)
    });
    case("gemm", "gemm_f32_8192", || {
        square::<f32>(s, "gemm_f32_8192", &ieee)
    });
    case("gemm", "gemm_tf32_8192", || {
        square::<f32>(s, "gemm_tf32_8192", &tf32)
    });
    case("gemm", "gemm_fp8_e4m3_8192", || fp8(s));
    case("gemm", "gemm_int8_8192", || int8(s));
    case("gemm", "linear_prefill", || linear_prefill(s));
    case("gemm", "linear_decode_bf16", || linear_decode(s));
    case("gemm", "bmm_attn_qk_bf16", || {
        batched(
            s,
            "bmm_attn_qk_bf16",
            (128, 4096, 4096, 128),
            LayoutSku::Rcr,
        )
    });
    case("gemm", "bmm_attn_pv_bf16", || {
        batched(
            s,
            "bmm_attn_pv_bf16",
            (128, 4096, 128, 4096),
            LayoutSku::Rrr,
        )
    });
    case("gemm", "moe_grouped_bf16", || moe(s));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moe_split_matches_the_torch_case() {
        let t = moe_tokens();
        assert_eq!(t.len(), EXPERTS);
        assert_eq!(t.iter().sum::<usize>(), MOE_TOKENS);
        // The first and last entries `moe_tokens()` in gemm.py prints.
        assert_eq!(&t[..6], &[17, 150, 194, 532, 548, 72]);
        assert_eq!(&t[60..], &[331, 16, 221, 149]);
        assert_eq!((t.iter().min(), t.iter().max()), (Some(&5), Some(&554)));
    }
}
