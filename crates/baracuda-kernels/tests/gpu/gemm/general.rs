//! The `gemm` and `batched_gemm` rows, against `reference::gemm`.
//!
//! - `gemm`: every layout over sizes with tails (size 1, one row, one
//!   column, k = 2049), with and without `C`, packed and with every leading
//!   dimension padded by 3; every epilogue (aux saved with an activation)
//!   in three layouts at two sizes, without `C`, with `C`, and with every
//!   leading dimension padded by 8; GPT-2's MLP up-projection of 256 tokens
//!   with bias and GELU-tanh. Each in every output dtype the input dtype
//!   claims (f16 and bf16: also f32). f32 adds TF32 under `allow_tf32` (and
//!   every other f32 plan must run IEEE math); bf16 adds 64 x 4096 x 8192
//!   under deterministic, measured selection, whose plan must promise
//!   determinism and repeat its bits.
//! - `batched_gemm`: 5 entries in a row-major `D` layout (`Rcr`, whose
//!   operands `matmul.rs` swaps) and a column-major one (`Crc`): `A`, `B`
//!   or `C` broadcast by stride 0; every epilogue with shared, packed and
//!   padded bias vectors, `D` (and aux) entries 8-element aligned or not,
//!   with and without `C`; a batch of one, 1 x 1 x 1 entries, and a
//!   transformer's attention scores (16 heads of 128 x 128 x 64). In bf16,
//!   the fused-epilogue claims: per-entry and shared biases with GELU-tanh
//!   aux run no epilogue kernel, a bias off 16 bytes runs one.

use baracuda_kernels::*;

use super::bad_inputs::{batched_bad_inputs, batched_unsupported};
use super::bad_inputs::{gemm_bad_inputs, gemm_unsupported};
use super::{batch_bias, vector, Mat, MatOut, Outputs};
use super::{borrowed, bound, entries, entry, same_bits, scalars, tol, upload_operand};
use crate::harness::*;
use crate::table::{OpCase, Tensors};

/// `D = act(alpha op(A) op(B) + beta C + bias)`.
pub static GEMM: OpCase<GemmSample> = OpCase {
    name: "gemm",
    samples: gemm_samples,
    run: |k, s, inputs, _| with_pair!(k, s.out, T, O => run_general::<T, O>(s, inputs, false)),
    bad_inputs: gemm_bad_inputs,
    unsupported: gemm_unsupported,
    ..GENERAL
};

/// Strided batches of GEMMs, stride 0 broadcasting.
pub static BATCHED_GEMM: OpCase<GemmSample> = OpCase {
    name: "batched_gemm",
    samples: batched_samples,
    run: |k, s, inputs, _| with_pair!(k, s.out, T, O => run_general::<T, O>(s, inputs, true)),
    bad_inputs: batched_bad_inputs,
    unsupported: batched_unsupported,
    ..GENERAL
};

/// What both rows share (a plain GEMM is a batch of one here).
const GENERAL: OpCase<GemmSample> = OpCase {
    name: "general GEMM row",
    dtypes: FLOATS,
    backward: false,
    samples: |_| Vec::new(),
    inputs: gemm_inputs,
    run: |_, _, _, _| Err("the row runs nothing".into()),
    reference: gemm_reference,
    tolerance: |kind, s, _, want, _| bound(tol(kind, s.out, s.k, s.pref == Pref::Tf32), want),
    bad_inputs: || Ok(0),
    unsupported: |_| Err("the row checks no other dtype".into()),
};

// ---------------------------------------------------------------------------
// Samples
// ---------------------------------------------------------------------------

/// How a sample selects its plan, and what the selection must show.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Pref {
    /// `PlanPreference::default()`.
    Default,
    /// `allow_tf32` (f32): the plan must run TF32.
    Tf32,
    /// `deterministic` and `Autotune::Measured`: the plan must promise
    /// determinism, and two more runs must give the same bits.
    DeterministicMeasured,
    /// The default, and the epilogue must fuse into cuBLASLt.
    Fused,
    /// The default, and the epilogue must run in the epilogue kernel.
    EpilogueKernel,
}

impl Pref {
    fn preference(self) -> PlanPreference {
        let p = PlanPreference::default();
        match self {
            Pref::Tf32 => p.with_allow_tf32(true),
            Pref::DeterministicMeasured => {
                p.with_deterministic(true).with_autotune(Autotune::Measured)
            }
            Pref::Default | Pref::Fused | Pref::EpilogueKernel => p,
        }
    }

    /// What the selection must show: the preference's promise, and IEEE
    /// math in f32 unless TF32 was allowed.
    fn check<P: Plan>(self, plan: &P) -> Result<(), String> {
        let (sku, precision) = (plan.sku(), plan.precision_guarantee());
        let kernel = sku.variant.contains("epilogue kernel");
        let kept = match self {
            Pref::Default => true,
            Pref::Tf32 => precision.math == MathPrecision::Tf32,
            Pref::DeterministicMeasured => precision.deterministic,
            Pref::Fused => !kernel,
            Pref::EpilogueKernel => kernel,
        };
        if !kept {
            return Err(format!("{self:?} selected {sku}"));
        }
        let tf32 = self == Pref::Tf32;
        if sku.element == ElementKind::F32 && !tf32 && precision.math != MathPrecision::F32 {
            return Err(format!(
                "f32 without allow_tf32 runs {:?} math: {sku}",
                precision.math
            ));
        }
        Ok(())
    }
}

/// Which operand of a batch is one matrix, broadcast by stride 0.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Operand {
    A,
    B,
    C,
}

/// How a batch lays out its bias vectors.
#[derive(Copy, Clone, Debug, PartialEq)]
enum BiasStride {
    /// One vector for every entry (stride 0).
    Shared,
    /// `n` apart (`n` = 24 in the epilogue samples: 16-byte multiples in
    /// every dtype, so cuBLASLt can fuse).
    Packed,
    /// `n + 3` apart: entries off 16 bytes, so the epilogue kernel runs.
    Padded,
}

/// A GEMM problem, or a strided batch of them.
#[derive(Clone, Debug)]
pub struct GemmSample {
    m: usize,
    n: usize,
    k: usize,
    layout: LayoutSku,
    epilogue: EpilogueKind,
    /// `C` given, with `beta != 0`.
    with_c: bool,
    /// Added to the packed `lda`, `ldb`, `ldc`, `ldd`.
    pads: [usize; 4],
    /// Dtype of `C`, `D`, the bias and aux.
    out: ElementKind,
    /// Entries (a plain GEMM: 1).
    batch: usize,
    broadcast: Option<Operand>,
    bias: BiasStride,
    pref: Pref,
}

impl GemmSample {
    /// A packed problem without `C` or epilogue.
    fn new((m, n, k): (usize, usize, usize), layout: LayoutSku, out: ElementKind) -> Self {
        GemmSample {
            m,
            n,
            k,
            layout,
            epilogue: EpilogueKind::Identity,
            with_c: false,
            pads: [0; 4],
            out,
            batch: 1,
            broadcast: None,
            bias: BiasStride::Packed,
            pref: Pref::Default,
        }
    }
    fn epilogue(self, epilogue: EpilogueKind) -> Self {
        GemmSample { epilogue, ..self }
    }
    fn c(self, with_c: bool) -> Self {
        GemmSample { with_c, ..self }
    }
    fn pads(self, pads: [usize; 4]) -> Self {
        GemmSample { pads, ..self }
    }
    fn pref(self, pref: Pref) -> Self {
        GemmSample { pref, ..self }
    }
    fn batch(self, batch: usize, bias: BiasStride) -> Self {
        GemmSample {
            batch,
            bias,
            ..self
        }
    }
    fn broadcast(self, operand: Operand) -> Self {
        GemmSample {
            broadcast: Some(operand),
            with_c: operand == Operand::C,
            ..self
        }
    }

    /// One entry's problem (aux saved when the epilogue has an activation).
    fn gemm(&self) -> GemmDescriptor {
        let base = GemmDescriptor::new(self.m, self.n, self.k, self.layout);
        let [pa, pb, pc, pd] = self.pads;
        let e = self.epilogue;
        base.clone()
            .with_ld(base.lda + pa, base.ldb + pb, base.ldc + pc, base.ldd + pd)
            .with_epilogue(e)
            .with_aux(e.activation() != Activation::Identity)
    }
    /// The batch: packed entries, but for the broadcast and the bias.
    fn batched(&self) -> BatchedGemmDescriptor {
        let mut d = BatchedGemmDescriptor::packed(self.gemm(), self.batch);
        match self.broadcast {
            Some(Operand::A) => d.stride_a = 0,
            Some(Operand::B) => d.stride_b = 0,
            Some(Operand::C) => d.stride_c = 0,
            None => {}
        }
        d.stride_bias = match self.bias {
            BiasStride::Shared => 0,
            BiasStride::Packed => self.n,
            BiasStride::Padded => self.n + 3,
        };
        d
    }
    /// `A`, `B`, `C` and `D` of one entry.
    fn mats(&self) -> [Mat; 4] {
        let g = self.gemm();
        let l = g.layout;
        [
            Mat::new(g.m, g.k, g.lda, l.a()),
            Mat::new(g.k, g.n, g.ldb, l.b()),
            Mat::new(g.m, g.n, g.ldc, l.c()),
            Mat::new(g.m, g.n, g.ldd, l.c()),
        ]
    }
}

/// The output dtypes of input dtype `kind`: its own, and f32 for f16 and
/// bf16.
fn outputs(kind: ElementKind) -> Vec<ElementKind> {
    match kind {
        ElementKind::F16 | ElementKind::Bf16 => vec![kind, ElementKind::F32],
        _ => vec![kind],
    }
}

/// Sizes with tails: size 1, one row, one column, a long k.
const SIZES: [(usize, usize, usize); 6] = [
    (1, 1, 1),
    (17, 33, 9),
    (64, 1, 300),
    (1, 96, 64),
    (3, 5, 2049),
    (130, 72, 40),
];

fn gemm_samples(kind: ElementKind) -> Vec<GemmSample> {
    use LayoutSku::{Ccr, Rcr, Rrc};
    let mut v = Vec::new();
    for out in outputs(kind) {
        for layout in LayoutSku::ALL {
            for size in SIZES {
                let s = GemmSample::new(size, layout, out);
                v.push(s.clone());
                v.push(s.c(true).pads([3; 4]));
            }
        }
        for layout in [Rcr, Rrc, Ccr] {
            for e in EpilogueKind::ALL {
                for size in [(33, 40, 24), (128, 256, 64)] {
                    let s = GemmSample::new(size, layout, out).epilogue(e);
                    v.push(s.clone());
                    v.push(s.clone().c(true));
                    v.push(s.pads([8; 4]));
                }
            }
        }
        // GPT-2's MLP up-projection (768 -> 3072) of 256 tokens.
        let mlp = GemmSample::new((256, 3072, 768), Rcr, out);
        v.push(mlp.epilogue(EpilogueKind::BiasGeluTanh));
    }
    match kind {
        ElementKind::F32 => {
            v.push(GemmSample::new((256, 256, 512), Rcr, kind).pref(Pref::Tf32));
        }
        ElementKind::Bf16 => {
            let s = GemmSample::new((64, 4096, 8192), Rcr, kind);
            v.push(s.pref(Pref::DeterministicMeasured));
        }
        _ => {}
    }
    v
}

fn batched_samples(kind: ElementKind) -> Vec<GemmSample> {
    use BiasStride::{Packed, Padded, Shared};
    use LayoutSku::{Crc, Rcr, Rrr};
    let mut v = Vec::new();
    for out in outputs(kind) {
        // Rcr swaps A and B inside matmul.rs (row-major D); Crc does not.
        for layout in [Rcr, Crc] {
            for operand in [Operand::A, Operand::B, Operand::C] {
                let s = GemmSample::new((33, 20, 17), layout, out).batch(5, Packed);
                v.push(s.broadcast(operand));
            }
            for e in EpilogueKind::ALL {
                let biases: &[BiasStride] = if e.has_bias() {
                    &[Shared, Packed, Padded]
                } else {
                    &[Packed]
                };
                for &bias in biases {
                    for pad in [0, 1] {
                        for with_c in [false, true] {
                            let s = GemmSample::new((33, 24, 17), layout, out)
                                .epilogue(e)
                                .pads([0, 0, 0, pad])
                                .c(with_c);
                            v.push(s.batch(5, bias));
                        }
                    }
                }
            }
        }
        let bias = EpilogueKind::BiasRelu;
        v.push(GemmSample::new((9, 7, 5), Rcr, out).epilogue(bias).c(true));
        v.push(
            GemmSample::new((1, 1, 1), Crc, out)
                .batch(3, Shared)
                .epilogue(bias),
        );
        // Attention scores Q K^T: 16 heads, 128 queries and keys, 64 wide.
        let scores = GemmSample::new((128, 128, 64), Rcr, out).batch(16, Packed);
        v.push(scores.c(true));
        // And the weighted values P V.
        v.push(GemmSample::new((128, 64, 128), Rrr, out).batch(16, Packed));
    }
    // The claim that the batched bias and aux ride on cuBLASLt's batch
    // strides: a row-major bf16 batch with per-entry or shared biases and
    // GELU-tanh aux, all 16-byte aligned, runs no epilogue kernel; a bias
    // off 16 bytes does.
    if kind == ElementKind::Bf16 {
        let s = |e, bias, pref| {
            let s = GemmSample::new((33, 24, 17), Rcr, kind).epilogue(e);
            s.batch(5, bias).pref(pref)
        };
        v.push(s(EpilogueKind::BiasGeluTanh, Shared, Pref::Fused));
        v.push(s(EpilogueKind::BiasGeluTanh, Packed, Pref::Fused));
        v.push(s(EpilogueKind::Bias, Padded, Pref::EpilogueKernel));
    }
    v
}

// ---------------------------------------------------------------------------
// Inputs, run, reference
// ---------------------------------------------------------------------------

/// Every entry's operands, as stored: `a`, `b`, `c` (when given) and
/// `bias` (when the epilogue has one).
fn gemm_inputs(s: &GemmSample, rng: &mut Rng) -> Tensors {
    let d = s.batched();
    let [a, b, c, _] = s.mats();
    let mut t = Tensors::default();
    t.push("a", rng.vec(a.span_of(s.batch, d.stride_a), -1.0, 1.0));
    t.push("b", rng.vec(b.span_of(s.batch, d.stride_b), -1.0, 1.0));
    if s.with_c {
        t.push("c", rng.vec(c.span_of(s.batch, d.stride_c), -1.0, 1.0));
    }
    if s.epilogue.has_bias() {
        let bias = Mat::row_major(1, s.n, s.n);
        t.push(
            "bias",
            rng.vec(bias.span_of(s.batch, d.stride_bias), -1.0, 1.0),
        );
    }
    t
}

/// The operands on the device: `A` and `B` in `T`, `C` and the bias in
/// `O`.
struct Operands<T: Element, O: Element> {
    a: DeviceBuffer<T>,
    b: DeviceBuffer<T>,
    c: Option<DeviceBuffer<O>>,
    bias: Option<DeviceBuffer<O>>,
}

impl<T: Element, O: Element> Operands<T, O> {
    fn upload(inputs: &Tensors) -> Self {
        Operands {
            a: upload_operand(inputs.get("a")),
            b: upload_operand(inputs.get("b")),
            c: inputs.find("c").map(upload_operand),
            bias: inputs.find("bias").map(upload_operand),
        }
    }
}

/// Run the sample through `GemmPlan` or, for the `batched_gemm` row,
/// `BatchedGemmPlan`.
fn run_general<T: Element, O: Element>(
    s: &GemmSample,
    inputs: &Tensors,
    batched: bool,
) -> Result<Tensors, String> {
    let st = &gpu().stream;
    let pref = s.pref.preference();
    let ops = Operands::<T, O>::upload(inputs);
    let (alpha, beta) = scalars(s.with_c);
    if batched {
        let desc = s.batched();
        let plan = select::<BatchedGemmPlan<T, O>>(&desc, &pref)?;
        let mut ws = workspace(plan.workspace_size());
        return collect(s, &plan, |d, aux| {
            let args = BatchedGemmArgs {
                a: ops.a.as_slice(),
                b: ops.b.as_slice(),
                c: ops.c.as_ref().map(DeviceBuffer::as_slice).into(),
                d: d.slice_mut(),
                bias: ops.bias.as_ref().map(|b| batch_bias(&desc, b.as_slice())),
                aux: aux.map(MatOut::slice_mut),
                alpha,
                beta,
            };
            plan.run(st, borrowed(&mut ws), args)
        });
    }
    let plan = select::<GemmPlan<T, O>>(&s.gemm(), &pref)?;
    let [a, b, c, _] = s.mats();
    let mut ws = workspace(plan.workspace_size());
    collect(s, &plan, |d, aux| {
        let args = GemmArgs {
            a: a.view(ops.a.as_slice()),
            b: b.view(ops.b.as_slice()),
            c: ops.c.as_ref().map(|buf| c.view(buf.as_slice())).into(),
            d: d.view_mut(),
            bias: ops.bias.as_ref().map(|b| vector(b.as_slice())),
            aux: aux.map(MatOut::view_mut),
            alpha,
            beta,
        };
        plan.run(st, borrowed(&mut ws), args)
    })
}

/// Check the selection as the sample's preference says, then `run` into
/// fresh outputs (`D`, and aux when the sample saves it): `d` and `aux`.
/// A deterministic plan runs twice more and must give the same bits.
fn collect<O: Element, P: Plan>(
    s: &GemmSample,
    plan: &P,
    mut run: impl FnMut(&mut MatOut<O>, Option<&mut MatOut<O>>) -> Result<()>,
) -> Result<Tensors, String> {
    s.pref.check(plan)?;
    let desc = s.batched();
    let save_aux = desc.gemm.save_aux;
    let dm = s.mats()[3];
    let fresh = || {
        (
            MatOut::<O>::batch(dm, s.batch, desc.stride_d),
            operand_if(save_aux, || {
                MatOut::<O>::batch(dm, s.batch, desc.stride_aux)
            }),
        )
    };
    let (mut d, mut aux) = fresh();
    let mut out = Outputs::of(plan, run(&mut d, save_aux.then_some(&mut aux)))?;
    if s.pref == Pref::DeterministicMeasured {
        for again in 1..3 {
            let (mut d_again, mut aux_again) = fresh();
            let z = save_aux.then_some(&mut aux_again);
            run(&mut d_again, z).map_err(|e| format!("run {again}: {e}"))?;
            if !same_bits(&d_again.result("d")?, &d.result("d")?) {
                return Err(format!("deterministic plan gave other bits on run {again}"));
            }
        }
    }
    out.take("d", true, &d)?;
    out.take("aux", save_aux, &aux)?;
    Ok(out.tensors())
}

/// Every entry's `D` and, when saved, its pre-activation `Z`, back to
/// back.
fn gemm_reference(_: ElementKind, s: &GemmSample, inputs: &Tensors, _: &Tensors) -> Tensors {
    let desc = s.batched();
    let [a, b, c, _] = s.mats();
    let strides = [
        desc.stride_a,
        desc.stride_b,
        desc.stride_c,
        desc.stride_bias,
    ];
    let (ab, act) = (scalars(s.with_c), s.epilogue.activation());
    let each = (0..s.batch).map(|i| entry(inputs, [a, b, c], strides.map(|x| i * x), ab, act));
    entries(desc.gemm.save_aux, each)
}
