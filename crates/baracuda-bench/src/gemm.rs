//! GEMM benchmark cases, from `bench/cases/gemm.json` (which
//! `bench/torch_cases/gemm.py` reads too):
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
//! - an MoE expert layer: 64 experts, 16384 tokens split unevenly (the
//!   file's `tokens_per_expert`), each `x_e [t_e, 4096] W_e^T -> [t_e,
//!   14336]`.
//!
//! Layouts match what the PyTorch call runs (`a @ b` of row-major tensors is
//! `rrr`; `F.linear` and `Q K^T` are `rcr`). Plans use measured autotuning
//! (cuBLASLt's heuristic candidates timed in `select`), which PyTorch does
//! not do; the warm-up of `time_ms` keeps `select` out of the numbers.

use baracuda_kernels::*;
use float8::F8E4M3;
use half::{bf16, f16};
use serde::Deserialize;

use crate::cases::{bad_pass, by_dtype, de_dtype, de_layout, Checked, Job, RawCase, Row, RunFn};
use crate::harness::{
    emit, part, part_mut, random_buffer, rotation_of, time_ms, time_passes, time_rotating_ms,
};

/// `D [m, n] = A [m, k] B [k, n]`, each stored in `layout`'s order.
#[derive(Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct Gemm {
    m: usize,
    n: usize,
    k: usize,
    #[serde(deserialize_with = "de_layout")]
    layout: LayoutSku,
}

/// A plain GEMM case (`matmul`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Matmul {
    #[serde(flatten)]
    gemm: Gemm,
    /// f32 inputs may run on TF32 tensor cores (default: IEEE f32).
    #[serde(default)]
    allow_tf32: bool,
}

/// A GEMM with a wider output type (`scaled_mm`, `int_mm`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Widening {
    #[serde(flatten)]
    gemm: Gemm,
    #[serde(deserialize_with = "de_dtype")]
    out_dtype: ElementKind,
}

/// `nn.Linear`: `Y [tokens, out] = X [tokens, in] W^T`, W `[out, in]`,
/// all row-major.
#[derive(Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct Linear {
    tokens: usize,
    in_features: usize,
    out_features: usize,
    epilogue: Epilogue,
    /// Reports GB/s instead of TFLOP/s and rotates its operands over
    /// buffer sets (the decode GEMV, whose weight is about L2-sized).
    #[serde(default)]
    memory_bound: bool,
}

/// The linear epilogues the bench times.
#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Epilogue {
    Identity,
    Bias,
}

/// Packed batches of `Gemm`s.
#[derive(Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct Bmm {
    batch: usize,
    #[serde(flatten)]
    gemm: Gemm,
}

/// One linear layer per expert over its share of the tokens, in one
/// grouped plan: `y[tokens of e] = x[tokens of e] W_e^T`, W_e `[out, in]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupedLinear {
    tokens_per_expert: Vec<usize>,
    in_features: usize,
    out_features: usize,
}

fn pref() -> PlanPreference {
    PlanPreference::default().with_autotune(Autotune::Measured)
}

fn workspace(s: &Stream, bytes: usize) -> Result<DeviceBuffer<u8>> {
    DeviceBuffer::zeros(s, bytes.max(1))
}

/// The job of one case of the gemm case file.
pub(crate) fn job(c: &RawCase) -> Checked<Job> {
    let dtype = c.dtype()?;
    let fw = || c.passes(&["fw"]);
    let mnk = |g: Gemm| (format!("m{} n{} k{}", g.m, g.n, g.k), 2 * g.m * g.n * g.k);
    let run: RunFn;
    let rows: Vec<Row>;
    match c.op.as_str() {
        "matmul" => {
            let Matmul { gemm, allow_tf32 } = c.params()?;
            let (shape, flops) = mnk(gemm);
            rows = c.rows(&fw()?, dtype, &shape, |r| r.flops(flops));
            let pref = pref().with_allow_tf32(allow_tf32);
            run = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32, F64 => f64], T => {
                Box::new(move |s: &Stream, rows: &[Row]| matmul::<T>(s, gemm, &pref, rows))
            });
        }
        "scaled_mm" | "int_mm" => {
            let Widening { gemm, out_dtype } = c.params()?;
            let (shape, flops) = mnk(gemm);
            rows = c.rows(&fw()?, dtype, &shape, |r| r.flops(flops));
            run = match (c.op.as_str(), dtype, out_dtype) {
                ("scaled_mm", ElementKind::Fp8E4M3, ElementKind::Bf16) => {
                    Box::new(move |s: &Stream, rows: &[Row]| fp8(s, gemm, rows))
                }
                ("int_mm", ElementKind::I8, ElementKind::I32) => {
                    Box::new(move |s: &Stream, rows: &[Row]| int8(s, gemm, rows))
                }
                _ => return Err(c.error(format!("{dtype} -> {out_dtype} is not implemented"))),
            };
        }
        "linear" => {
            let l: Linear = c.params()?;
            let (t, i, o) = (l.tokens, l.in_features, l.out_features);
            let shape = format!("x[{t}, {i}] w[{o}, {i}]");
            if l.memory_bound {
                let bytes = (o * i + t * i + t * o) * dtype.size_bytes();
                rows = c.rows(&fw()?, dtype, &shape, |r| r.bytes(bytes).rotation(bytes));
            } else {
                let passes = c.passes(&["fw", "bw_data", "dw"])?;
                rows = c.rows(&passes, dtype, &shape, |r| r.flops(2 * t * i * o));
            }
            run = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32], T => {
                Box::new(move |s: &Stream, rows: &[Row]| match l.memory_bound {
                    true => linear_decode::<T>(s, l, rows),
                    false => linear::<T>(s, l, rows),
                })
            });
        }
        "bmm" => {
            let b: Bmm = c.params()?;
            let Gemm { m, n, k, .. } = b.gemm;
            let shape = format!("b{} m{m} n{n} k{k}", b.batch);
            rows = c.rows(&fw()?, dtype, &shape, |r| r.flops(2 * b.batch * m * n * k));
            run = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32], T => {
                Box::new(move |s: &Stream, rows: &[Row]| batched::<T>(s, b, rows))
            });
        }
        "grouped_linear" => {
            let g: GroupedLinear = c.params()?;
            let (e, t) = (
                g.tokens_per_expert.len(),
                g.tokens_per_expert.iter().sum::<usize>(),
            );
            let (i, o) = (g.in_features, g.out_features);
            let shape = format!("e{e} t{t} k{i} n{o}");
            rows = c.rows(&fw()?, dtype, &shape, |r| r.flops(2 * t * o * i));
            let g = std::sync::Arc::new(g);
            run = by_dtype!(c, dtype, [Bf16 => bf16, F16 => f16, F32 => f32], T => {
                let g = g.clone();
                Box::new(move |s: &Stream, rows: &[Row]| grouped::<T>(s, &g, rows))
            });
        }
        _ => return Err(c.unknown_op()),
    }
    Ok(c.job(rows, run))
}

/// Leading dimension of a `rows x cols` matrix stored in `order`.
fn ld(rows: usize, cols: usize, order: MatrixOrder) -> usize {
    match order {
        MatrixOrder::RowMajor => cols,
        MatrixOrder::ColMajor => rows,
    }
}

/// `A [m, k]` of `g` over `data`.
fn mat_a<T: Element>(data: DeviceSlice<'_, T>, g: Gemm) -> Result<MatrixRef<'_, T>> {
    let o = g.layout.a();
    MatrixRef::new(data, g.m, g.k, ld(g.m, g.k, o), o)
}

/// `B [k, n]` of `g` over `data`.
fn mat_b<T: Element>(data: DeviceSlice<'_, T>, g: Gemm) -> Result<MatrixRef<'_, T>> {
    let o = g.layout.b();
    MatrixRef::new(data, g.k, g.n, ld(g.k, g.n, o), o)
}

/// `D [m, n]` of `g` over `data`.
fn mat_d<T: Element>(data: DeviceSliceMut<'_, T>, g: Gemm) -> Result<MatrixMut<'_, T>> {
    let o = g.layout.c();
    MatrixMut::new(data, g.m, g.n, ld(g.m, g.n, o), o)
}

/// The only pass of a forward-only case: its row, or the error that the
/// rows ask for another.
fn fw_row(rows: &[Row]) -> Result<&Row> {
    match rows {
        [r] if r.pass == "fw" => Ok(r),
        _ => Err(bad_pass(
            rows.iter()
                .map(|r| r.pass)
                .find(|&p| p != "fw")
                .unwrap_or("none"),
        )),
    }
}

/// Time the forward-only `run` with a workspace of `workspace_bytes`
/// and print the case's one row.
fn time_fw(
    s: &Stream,
    row: &Row,
    workspace_bytes: usize,
    mut run: impl FnMut(Workspace<'_>) -> Result<()>,
) -> Result<()> {
    let mut ws = workspace(s, workspace_bytes)?;
    let ms = time_ms(s, || run(Workspace::Borrowed(ws.as_slice_mut())))?;
    emit(row, ms);
    Ok(())
}

/// `D = A B` (`a @ b` in PyTorch).
fn matmul<T: Element>(s: &Stream, g: Gemm, pref: &PlanPreference, rows: &[Row]) -> Result<()> {
    let row = fw_row(rows)?;
    let a = random_buffer::<T>(s, g.m * g.k, 11, -1.0, 1.0)?;
    let b = random_buffer::<T>(s, g.k * g.n, 12, -1.0, 1.0)?;
    let mut d = DeviceBuffer::<T>::uninit(s, g.m * g.n)?;
    let desc = GemmDescriptor::new(g.m, g.n, g.k, g.layout);
    let plan = GemmPlan::<T>::select(s, &desc, pref)?;
    time_fw(s, row, plan.workspace_size(), |ws| {
        plan.run(
            s,
            ws,
            GemmArgs {
                a: mat_a(a.as_slice(), g)?,
                b: mat_b(b.as_slice(), g)?,
                c: GemmC::None,
                d: mat_d(d.as_slice_mut(), g)?,
                bias: None,
                aux: None,
                alpha: 1.0,
                beta: 0.0,
            },
        )
    })
}

/// e4m3 x e4m3 -> bf16 with unit per-tensor scales (`rcr`: row-major A,
/// column-major B, as `torch._scaled_mm` takes it).
fn fp8(s: &Stream, g: Gemm, rows: &[Row]) -> Result<()> {
    let row = fw_row(rows)?;
    let a = random_buffer::<F8E4M3>(s, g.m * g.k, 13, -4.0, 4.0)?;
    let b = random_buffer::<F8E4M3>(s, g.k * g.n, 14, -4.0, 4.0)?;
    let scale_a = DeviceBuffer::<f32>::from_host(s, &[1.0])?;
    let scale_b = DeviceBuffer::<f32>::from_host(s, &[1.0])?;
    let mut d = DeviceBuffer::<bf16>::uninit(s, g.m * g.n)?;
    let desc = Fp8GemmDescriptor {
        gemm: GemmDescriptor::new(g.m, g.n, g.k, g.layout),
        amax: false,
    };
    let plan = Fp8GemmPlan::<F8E4M3, F8E4M3, bf16>::select(s, &desc, &pref())?;
    time_fw(s, row, plan.workspace_size(), |ws| {
        plan.run(
            s,
            ws,
            Fp8GemmArgs {
                a: mat_a(a.as_slice(), g)?,
                b: mat_b(b.as_slice(), g)?,
                d: mat_d(d.as_slice_mut(), g)?,
                scale_a: TensorRef::contiguous(scale_a.as_slice(), [1])?,
                scale_b: TensorRef::contiguous(scale_b.as_slice(), [1])?,
                amax: None,
            },
        )
    })
}

/// s8 x s8 -> s32 (`rcr`, as `torch._int_mm(a, b_t.t())` takes it).
fn int8(s: &Stream, g: Gemm, rows: &[Row]) -> Result<()> {
    let row = fw_row(rows)?;
    let a = random_buffer::<i8>(s, g.m * g.k, 15, -127.0, 127.0)?;
    let b = random_buffer::<i8>(s, g.k * g.n, 16, -127.0, 127.0)?;
    let mut d = DeviceBuffer::<i32>::uninit(s, g.m * g.n)?;
    let desc = IntGemmDescriptor {
        gemm: GemmDescriptor::new(g.m, g.n, g.k, g.layout),
    };
    let plan = IntGemmPlan::<i32>::select(s, &desc, &pref())?;
    time_fw(s, row, plan.workspace_size(), |ws| {
        plan.run(
            s,
            ws,
            IntGemmArgs {
                a: mat_a(a.as_slice(), g)?,
                b: mat_b(b.as_slice(), g)?,
                d: mat_d(d.as_slice_mut(), g)?,
                scale: 1.0,
            },
        )
    })
}

/// The linear layer of case `l`.
fn linear_descriptor(l: Linear) -> LinearDescriptor {
    LinearDescriptor::new(l.tokens, l.in_features, l.out_features).with_epilogue(match l.epilogue {
        Epilogue::Identity => EpilogueKind::Identity,
        Epilogue::Bias => EpilogueKind::Bias,
    })
}

/// `Y = X W^T` (+ b with the bias epilogue) and its two backward matmuls,
/// each timed alone (`run_bw` computes only the gradients it is given; a
/// biased layer's `dw` pass computes `db` with `dW`, which BGRADB fuses
/// into the dW matmul where cuBLASLt offers it).
fn linear<T: Element>(s: &Stream, l: Linear, rows: &[Row]) -> Result<()> {
    let (t, i, o) = (l.tokens, l.in_features, l.out_features);
    let bias = matches!(l.epilogue, Epilogue::Bias);
    let row = MatrixOrder::RowMajor;
    let x = random_buffer::<T>(s, t * i, 21, -1.0, 1.0)?;
    let w = random_buffer::<T>(s, o * i, 22, -0.05, 0.05)?;
    let dy = random_buffer::<T>(s, t * o, 23, -1.0, 1.0)?;
    let b = random_buffer::<T>(s, o, 24, -1.0, 1.0)?;
    let mut y = DeviceBuffer::<T>::uninit(s, t * o)?;
    let mut dx = DeviceBuffer::<T>::uninit(s, t * i)?;
    let mut dw = DeviceBuffer::<T>::uninit(s, o * i)?;
    let mut db = DeviceBuffer::<T>::uninit(s, o)?;
    let plan = LinearPlan::<T>::select(s, &linear_descriptor(l), &pref())?;
    let mut ws = workspace(s, plan.workspace_size())?;
    let inputs = (&x, &w, &dy);
    time_passes(rows, |pass| match pass {
        "fw" => time_ms(s, || {
            plan.run(
                s,
                Workspace::Borrowed(ws.as_slice_mut()),
                LinearArgs {
                    x: MatrixRef::new(x.as_slice(), t, i, i, row)?,
                    w: MatrixRef::new(w.as_slice(), o, i, i, row)?,
                    bias: if bias {
                        Some(TensorRef::contiguous(b.as_slice(), [o])?)
                    } else {
                        None
                    },
                    y: MatrixMut::new(y.as_slice_mut(), t, o, o, row)?,
                    aux: None,
                },
            )
        }),
        "bw_data" => time_linear_bw(s, &plan, l, &mut ws, inputs, (Some(&mut dx), None, None)),
        "dw" => {
            let db = bias.then_some(&mut db);
            time_linear_bw(s, &plan, l, &mut ws, inputs, (None, Some(&mut dw), db))
        }
        p => Err(bad_pass(p)),
    })
}

/// The gradient buffers `(dx, dw, db)` a backward pass writes; None: not
/// computed.
type GradBuffers<'a, T> = (
    Option<&'a mut DeviceBuffer<T>>,
    Option<&'a mut DeviceBuffer<T>>,
    Option<&'a mut DeviceBuffer<T>>,
);

/// Device ms of `plan.run_bw` over linear `l`'s packed row-major
/// `(x, w, dy)`, computing the gradients given.
fn time_linear_bw<T: Element>(
    s: &Stream,
    plan: &LinearPlan<T>,
    l: Linear,
    ws: &mut DeviceBuffer<u8>,
    (x, w, dy): (&DeviceBuffer<T>, &DeviceBuffer<T>, &DeviceBuffer<T>),
    (mut dx, mut dw, mut db): GradBuffers<'_, T>,
) -> Result<f64> {
    let (t, i, o) = (l.tokens, l.in_features, l.out_features);
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
                dbias: match db.as_deref_mut() {
                    Some(b) => Some(TensorMut::contiguous(b.as_slice_mut(), [o])?),
                    None => None,
                },
            },
        )
    })
}

/// A memory-bound linear (one token through the 4096 -> 14336 projection:
/// a GEMV in disguise, bound by reading W, 14336 * 4096 * 2 B = 117 MB,
/// beyond the 50 MB L2): operands rotate over buffer sets (W is about 2.3
/// times the H200's L2: two sets keep any of it from staying cached
/// between calls).
fn linear_decode<T: Element>(s: &Stream, l: Linear, rows: &[Row]) -> Result<()> {
    let (t, i, o) = (l.tokens, l.in_features, l.out_features);
    let row = MatrixOrder::RowMajor;
    let out = fw_row(rows)?;
    let sets = rotation_of(s, rows)?;
    let x = random_buffer::<T>(s, sets * t * i, 31, -1.0, 1.0)?;
    let w = random_buffer::<T>(s, sets * o * i, 32, -0.05, 0.05)?;
    let b = random_buffer::<T>(s, o, 33, -1.0, 1.0)?;
    let bias = matches!(l.epilogue, Epilogue::Bias);
    let mut y = DeviceBuffer::<T>::uninit(s, t * o)?;
    let plan = LinearPlan::<T>::select(s, &linear_descriptor(l), &pref())?;
    let mut ws = workspace(s, plan.workspace_size())?;
    let ms = time_rotating_ms(s, sets, |k| {
        plan.run(
            s,
            Workspace::Borrowed(ws.as_slice_mut()),
            LinearArgs {
                x: MatrixRef::new(part(&x, k, t * i)?, t, i, i, row)?,
                w: MatrixRef::new(part(&w, k, o * i)?, o, i, i, row)?,
                bias: if bias {
                    Some(TensorRef::contiguous(b.as_slice(), [o])?)
                } else {
                    None
                },
                y: MatrixMut::new(part_mut(&mut y, 0, t * o)?, t, o, o, row)?,
                aux: None,
            },
        )
    })?;
    emit(out, ms);
    Ok(())
}

/// A packed batch of `b.gemm`s in its layout (`rcr`: B stored as `[n, k]`,
/// i.e. `K^T`).
fn batched<T: Element>(s: &Stream, b: Bmm, rows: &[Row]) -> Result<()> {
    let row = fw_row(rows)?;
    let Gemm { m, n, k, layout } = b.gemm;
    let batch = b.batch;
    let a = random_buffer::<T>(s, batch * m * k, 41, -1.0, 1.0)?;
    let bb = random_buffer::<T>(s, batch * k * n, 42, -1.0, 1.0)?;
    let mut d = DeviceBuffer::<T>::uninit(s, batch * m * n)?;
    let desc = BatchedGemmDescriptor::packed(GemmDescriptor::new(m, n, k, layout), batch);
    let plan = BatchedGemmPlan::<T>::select(s, &desc, &pref())?;
    time_fw(s, row, plan.workspace_size(), |ws| {
        plan.run(
            s,
            ws,
            BatchedGemmArgs {
                a: a.as_slice(),
                b: bb.as_slice(),
                c: GemmC::None,
                d: d.as_slice_mut(),
                bias: None,
                aux: None,
                alpha: 1.0,
                beta: 0.0,
            },
        )
    })
}

/// `y[tokens of e] = x[tokens of e] W_e^T` for every expert, in one
/// grouped plan (one cuBLASLt matmul per expert, see `GroupedGemmPlan`).
fn grouped<T: Element>(s: &Stream, g: &GroupedLinear, rows: &[Row]) -> Result<()> {
    let row = fw_row(rows)?;
    let (k, n) = (g.in_features, g.out_features);
    let tokens = &g.tokens_per_expert;
    let (experts, total) = (tokens.len(), tokens.iter().sum::<usize>());
    let x = random_buffer::<T>(s, total * k, 51, -1.0, 1.0)?;
    let w = random_buffer::<T>(s, experts * n * k, 52, -0.05, 0.05)?;
    let mut y = DeviceBuffer::<T>::uninit(s, total * n)?;
    let desc =
        GroupedGemmDescriptor::new(tokens.iter().map(|&t| (t, n, k)).collect(), LayoutSku::Rcr);
    let plan = GroupedGemmPlan::<T>::select(s, &desc, &pref())?;
    time_fw(s, row, plan.workspace_size(), |ws| {
        let mut a = Vec::with_capacity(experts);
        let mut b = Vec::with_capacity(experts);
        let mut d = Vec::with_capacity(experts);
        let mut rest = y.as_slice_mut();
        let mut start = 0;
        for (e, &t) in tokens.iter().enumerate() {
            let xs =
                x.as_slice()
                    .slice(start * k..(start + t) * k)
                    .ok_or(Error::InvalidArgument {
                        op: "moe bench",
                        arg: "x",
                        reason: "token split beyond x".into(),
                    })?;
            let ws_ =
                w.as_slice()
                    .slice(e * n * k..(e + 1) * n * k)
                    .ok_or(Error::InvalidArgument {
                        op: "moe bench",
                        arg: "w",
                        reason: "expert beyond w".into(),
                    })?;
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
            ws,
            GroupedGemmArgs {
                a,
                b,
                c: GemmC::None,
                d,
                bias: None,
                aux: None,
                alpha: 1.0,
                beta: 0.0,
            },
        )
    })
}
