//! The `int_gemm` and `fp8_gemm` rows, against `reference::gemm`.
//!
//! - `int_gemm` (its dtype is the output's: i32, f32, bf16): s8 x s8 in
//!   both layouts cuBLASLt's int8 kernels take (`Rcr`, `Rcc`), at 40 x 24
//!   x 64, with a tail in the extent the layout leaves free, and with that
//!   extent 1; an int8 projection of 128 tokens, 4096 -> 1024. s32 output
//!   unscaled, f32 and bf16 scaled by 1/2.
//! - `fp8_gemm` (its dtype is `A`'s): every `B` (e4m3 x e5m2 and e5m2 x
//!   e4m3 too) and output (bf16, f16, f32) in `Rcr` and `Rcc`, at 64 x 48 x
//!   96 and at sizes within cuBLASLt's fp8 rules with a tail or a 1 in the
//!   free extent, amax written; one sample without amax (its buffer must
//!   stay poison); a 256-token projection, 1024 -> 2048. Scales 1/4 and
//!   1/8, each in an allocation of its own.

use baracuda_kernels::*;

use super::bad_inputs::{fp8_bad_inputs, fp8_unsupported, int_bad_inputs, int_unsupported};
use super::{
    borrowed, bound, product, tol, upload_operand, vector, vector_mut, Mat, MatOut, Outputs,
};
use crate::harness::*;
use crate::table::{OpCase, Tensors};

/// `D = scale (A B)`, s8 operands, exact s32 accumulation.
pub static INT_GEMM: OpCase<IntSample> = OpCase {
    name: "int_gemm",
    dtypes: &[ElementKind::I32, ElementKind::F32, ElementKind::Bf16],
    backward: false,
    samples: int_samples,
    inputs: int_inputs,
    run: run_int,
    reference: int_reference,
    tolerance: |kind, _, _, want, _| match kind {
        // s32 accumulation of s8 products is exact.
        ElementKind::I32 => Tolerance::EXACT,
        // The exact sum, scaled by a power of two and rounded once to f32
        // (exact below 2^24): up to the bound's slack.
        ElementKind::F32 => bound(1e-7, want),
        // One rounding of the exact scaled sum to bf16 (u = 3.9e-3): 2u.
        _ => bound(2.0 * ElementKind::Bf16.unit_roundoff(), want),
    },
    bad_inputs: int_bad_inputs,
    unsupported: int_unsupported,
};

/// `D = (scale_a scale_b) (A B)` with e4m3 / e5m2 operands.
pub static FP8_GEMM: OpCase<Fp8Sample> = OpCase {
    name: "fp8_gemm",
    dtypes: &[ElementKind::Fp8E4M3, ElementKind::Fp8E5M2],
    backward: false,
    samples: fp8_samples,
    inputs: fp8_inputs,
    run: run_fp8,
    reference: fp8_reference,
    tolerance: |kind, s, tensor, want, _| match tensor {
        // The max of the stored D, exactly.
        "amax" => Tolerance::EXACT,
        _ => bound(tol(kind, s.out, s.p.k, false), want),
    },
    bad_inputs: fp8_bad_inputs,
    unsupported: fp8_unsupported,
};

/// The per-tensor scales of the fp8 samples.
const SCALE_A: f32 = 0.25;
const SCALE_B: f32 = 0.125;

/// An 8-bit GEMM's problem: `A` (`m x k`) row-major and `B` (`k x n`)
/// column-major, packed, and `D` packed in the layout's order (`Rcr` or
/// `Rcc`: what cuBLASLt's int8 and fp8 kernels take).
#[derive(Copy, Clone, Debug)]
pub struct Tn {
    m: usize,
    n: usize,
    k: usize,
    layout: LayoutSku,
}

impl Tn {
    fn gemm(&self) -> GemmDescriptor {
        GemmDescriptor::new(self.m, self.n, self.k, self.layout)
    }
    /// `A`, `B`, `D`.
    fn mats(&self) -> [Mat; 3] {
        let l = self.layout;
        [
            Mat::packed(self.m, self.k, l.a()),
            Mat::packed(self.k, self.n, l.b()),
            Mat::packed(self.m, self.n, l.c()),
        ]
    }
    /// The inputs `a` and `b`, drawn by `draw` (a count of values).
    fn inputs(&self, mut draw: impl FnMut(usize) -> Vec<f64>) -> Tensors {
        let [a, b, _] = self.mats();
        let mut t = Tensors::default();
        t.push("a", draw(a.span()));
        t.push("b", draw(b.span()));
        t
    }
    /// The reference `d = alpha A B` of `a` and `b`.
    fn reference(&self, a: &[f64], b: &[f64], alpha: f64) -> Tensors {
        let [am, bm, _] = self.mats();
        let (a, b) = (am.stored(a, 0), bm.stored(b, 0));
        let mut t = Tensors::default();
        t.push("d", product(self.m, self.n, self.k, a, b, alpha));
        t
    }
}

/// `size` in both layouts, with a tail (33) and with 1 in the extent of `D`
/// the layout leaves free (`m` for a row-major `D`, `n` for a
/// column-major one), `k` a multiple of 16 throughout.
fn problems(size: (usize, usize, usize)) -> Vec<Tn> {
    let mut v = Vec::new();
    for layout in [LayoutSku::Rcr, LayoutSku::Rcc] {
        let edges = match layout.c() {
            MatrixOrder::RowMajor => [(33, 48, 112), (1, 48, 16)],
            MatrixOrder::ColMajor => [(48, 33, 112), (48, 1, 16)],
        };
        for (m, n, k) in [size].into_iter().chain(edges) {
            v.push(Tn { m, n, k, layout });
        }
    }
    v
}

/// A projection of `m` tokens, `k -> n`, in `Rcr`.
fn projection(m: usize, k: usize, n: usize) -> Tn {
    Tn {
        m,
        n,
        k,
        layout: LayoutSku::Rcr,
    }
}

// ---------------------------------------------------------------------------
// int_gemm
// ---------------------------------------------------------------------------

/// An s8 x s8 GEMM.
#[derive(Clone, Debug)]
pub struct IntSample {
    p: Tn,
    scale: f32,
}

fn int_samples(kind: ElementKind) -> Vec<IntSample> {
    // s32 output takes no scale; 1/2 is a power of two.
    let scale = if kind == ElementKind::I32 { 1.0 } else { 0.5 };
    let mut v = problems((40, 24, 64));
    v.push(projection(128, 4096, 1024));
    v.into_iter().map(|p| IntSample { p, scale }).collect()
}

/// `n` s8 values, none zero.
fn int8(rng: &mut Rng, n: usize) -> Vec<f64> {
    rng.vec(n, -1.0, 1.0)
        .into_iter()
        .map(|v| (v * 127.0).round())
        .map(|x| if x == 0.0 { 1.0 } else { x })
        .collect()
}

fn int_inputs(s: &IntSample, rng: &mut Rng) -> Tensors {
    s.p.inputs(|n| int8(rng, n))
}

fn run_int(kind: ElementKind, s: &IntSample, inputs: &Tensors, _: bool) -> Result<Tensors, String> {
    crate::with_kinds!(kind, O => run_int_plan::<O>(s, inputs);
        I32 => i32, F32 => f32, Bf16 => half::bf16;
        other => Err(format!("{other} is not an int_gemm output")))
}

fn run_int_plan<O: Element>(s: &IntSample, inputs: &Tensors) -> Result<Tensors, String> {
    let desc = IntGemmDescriptor { gemm: s.p.gemm() };
    let plan = select::<IntGemmPlan<O>>(&desc, &PlanPreference::default())?;
    let [am, bm, dm] = s.p.mats();
    let a = upload_operand::<i8>(inputs.get("a"));
    let b = upload_operand::<i8>(inputs.get("b"));
    let mut d = MatOut::<O>::new(dm);
    let mut ws = workspace(plan.workspace_size());
    let args = IntGemmArgs {
        a: am.view(a.as_slice()),
        b: bm.view(b.as_slice()),
        d: d.view_mut(),
        scale: s.scale,
    };
    let mut out = Outputs::of(&plan, plan.run(&gpu().stream, borrowed(&mut ws), args))?;
    out.take("d", true, &d)?;
    Ok(out.tensors())
}

fn int_reference(_: ElementKind, s: &IntSample, inputs: &Tensors, _: &Tensors) -> Tensors {
    let scale = f64::from(s.scale);
    s.p.reference(inputs.get("a"), inputs.get("b"), scale)
}

// ---------------------------------------------------------------------------
// fp8_gemm
// ---------------------------------------------------------------------------

/// An fp8 GEMM: `A` in the row's dtype, `B` and `D` as given.
#[derive(Clone, Debug)]
pub struct Fp8Sample {
    p: Tn,
    b: ElementKind,
    out: ElementKind,
    amax: bool,
}

fn fp8_samples(kind: ElementKind) -> Vec<Fp8Sample> {
    use ElementKind::{Bf16, Fp8E4M3, Fp8E5M2, F16, F32};
    // e5m2 x e5m2 is not claimed (a bad input).
    let bs: &[ElementKind] = if kind == Fp8E4M3 {
        &[Fp8E4M3, Fp8E5M2]
    } else {
        &[Fp8E4M3]
    };
    let mut v = Vec::new();
    for &b in bs {
        for out in [Bf16, F16, F32] {
            let each = problems((64, 48, 96)).into_iter();
            v.extend(each.map(|p| Fp8Sample {
                p,
                b,
                out,
                amax: true,
            }));
        }
    }
    let sample = |p, amax| Fp8Sample {
        p,
        b: Fp8E4M3,
        out: Bf16,
        amax,
    };
    v.push(sample(problems((64, 48, 96))[0], false));
    // A projection of 256 tokens, 1024 -> 2048.
    v.push(sample(projection(256, 1024, 2048), true));
    v
}

/// `a` and `b`, in [-8, 8).
fn fp8_inputs(s: &Fp8Sample, rng: &mut Rng) -> Tensors {
    s.p.inputs(|n| rng.vec(n, -8.0, 8.0))
}

fn run_fp8(kind: ElementKind, s: &Fp8Sample, inputs: &Tensors, _: bool) -> Result<Tensors, String> {
    use float8::{F8E4M3, F8E5M2};
    crate::with_kinds!(kind, A => crate::with_kinds!(s.b, B => crate::with_kinds!(s.out, O =>
            run_fp8_plan::<A, B, O>(s, inputs);
            Bf16 => half::bf16, F16 => half::f16, F32 => f32;
            o => Err(format!("{o} is not an fp8_gemm output")));
        Fp8E4M3 => F8E4M3, Fp8E5M2 => F8E5M2;
        b => Err(format!("{b} is not an fp8 operand")));
    Fp8E4M3 => F8E4M3, Fp8E5M2 => F8E5M2;
    a => Err(format!("{a} is not an fp8 operand")))
}

fn run_fp8_plan<A: Element, B: Element, O: Element>(
    s: &Fp8Sample,
    inputs: &Tensors,
) -> Result<Tensors, String> {
    let st = &gpu().stream;
    let desc = Fp8GemmDescriptor {
        gemm: s.p.gemm(),
        amax: s.amax,
    };
    let plan = select::<Fp8GemmPlan<A, B, O>>(&desc, &PlanPreference::default())?;
    let [am, bm, dm] = s.p.mats();
    let a = upload_operand::<A>(inputs.get("a"));
    let b = upload_operand::<B>(inputs.get("b"));
    // Each scale in its own (aligned) allocation, as cuBLASLt wants.
    let scale = |v: f32| DeviceBuffer::<f32>::from_host(st, &[v]).expect("a scale");
    let (scale_a, scale_b) = (scale(SCALE_A), scale(SCALE_B));
    let mut d = MatOut::<O>::new(dm);
    let mut amax = Guarded::<f32>::new(1);
    let mut ws = workspace(plan.workspace_size());
    let args = Fp8GemmArgs {
        a: am.view(a.as_slice()),
        b: bm.view(b.as_slice()),
        d: d.view_mut(),
        scale_a: vector(scale_a.as_slice()),
        scale_b: vector(scale_b.as_slice()),
        amax: s.amax.then(|| vector_mut(amax.slice_mut())),
    };
    let mut out = Outputs::of(&plan, plan.run(st, borrowed(&mut ws), args))?;
    out.take("d", true, &d)?;
    out.take("amax", s.amax, &amax)?;
    Ok(out.tensors())
}

/// `D`, and `amax` as the max |D| the run stored.
fn fp8_reference(_: ElementKind, s: &Fp8Sample, inputs: &Tensors, got: &Tensors) -> Tensors {
    // The row rounded B to A's dtype; the device holds it rounded again
    // to B's.
    let b = round_to(s.b, inputs.get("b"));
    let scale = f64::from(SCALE_A) * f64::from(SCALE_B);
    let mut t = s.p.reference(inputs.get("a"), &b, scale);
    if s.amax {
        let stored = got.output("d").unwrap_or(&[]);
        t.push("amax", vec![stored.iter().fold(0.0, |m, v| v.abs().max(m))]);
    }
    t
}
