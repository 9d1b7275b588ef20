//! The `grouped_gemm` row, against `reference::gemm` per group.
//!
//! Five MoE-like groups (one expert with no tokens, one with a single
//! token, a different width per group): every epilogue (a bias per group,
//! aux saved with an activation), with and without `C`, in `Rcr`; three
//! more layouts with and without an epilogue; one 1 x 1 x 1 group; groups
//! that are all empty (nothing may be written); and an MoE layer's experts
//! (eight of 0 to 200 tokens, 1024 -> 1408). Each group's operands have an
//! allocation of their own; an empty group's outputs must stay poison.

use baracuda_kernels::*;

use super::bad_inputs::{grouped_bad_inputs, grouped_unsupported};
use super::{borrowed, bound, entries, entry, scalars, tol, upload_operand};
use super::{vector, Mat, MatOut, Outputs};
use crate::harness::*;
use crate::table::{OpCase, Tensors};

/// Many GEMMs of different shapes in one call.
pub static GROUPED_GEMM: OpCase<GroupedSample> = OpCase {
    name: "grouped_gemm",
    dtypes: FLOATS,
    backward: false,
    samples: grouped_samples,
    inputs: grouped_inputs,
    run: run_grouped,
    reference: grouped_reference,
    tolerance: |kind, s, _, want, _| bound(tol(kind, kind, s.max_k(), false), want),
    bad_inputs: grouped_bad_inputs,
    unsupported: grouped_unsupported,
};

/// MoE-like groups: token counts with an expert that got none and one
/// that got one, and a different width per group.
pub(super) const GROUPS: [(usize, usize, usize); 5] = [
    (5, 48, 32),
    (0, 16, 32),
    (17, 40, 32),
    (1, 8, 32),
    (64, 24, 32),
];

/// An MoE layer's experts, 1024 -> 1408 (DeepSeek-MoE's expert width):
/// the tokens routed to each, unevenly, two experts idle.
const MOE_TOKENS: [usize; 8] = [96, 0, 13, 200, 1, 64, 0, 37];

/// A grouped problem.
#[derive(Clone, Debug)]
pub struct GroupedSample {
    groups: Vec<(usize, usize, usize)>,
    layout: LayoutSku,
    epilogue: EpilogueKind,
    /// `C` given, with `beta != 0`.
    with_c: bool,
}

impl GroupedSample {
    fn new(groups: &[(usize, usize, usize)], layout: LayoutSku, epilogue: EpilogueKind) -> Self {
        GroupedSample {
            groups: groups.to_vec(),
            layout,
            epilogue,
            with_c: false,
        }
    }
    fn c(self, with_c: bool) -> Self {
        GroupedSample { with_c, ..self }
    }
    /// Aux saved when the epilogue has an activation.
    fn desc(&self) -> GroupedGemmDescriptor {
        let e = self.epilogue;
        GroupedGemmDescriptor::new(self.groups.clone(), self.layout)
            .with_epilogue(e)
            .with_aux(e.activation() != Activation::Identity)
    }
    fn max_k(&self) -> usize {
        self.groups.iter().map(|g| g.2).max().unwrap_or(1)
    }
    /// `A`, `B`, `C`/`D` and the bias of each group, packed.
    fn mats(&self) -> Vec<[Mat; 4]> {
        let l = self.layout;
        self.groups
            .iter()
            .map(|&(m, n, k)| {
                [
                    Mat::packed(m, k, l.a()),
                    Mat::packed(k, n, l.b()),
                    Mat::packed(m, n, l.c()),
                    Mat::packed(1, n, MatrixOrder::RowMajor),
                ]
            })
            .collect()
    }
    /// Where each group's operand `which` (an index into [`Self::mats`])
    /// starts in the operand's tensor, the groups back to back; and the
    /// tensor's length.
    fn starts(&self, which: usize) -> (Vec<usize>, usize) {
        let mut end = 0;
        let starts = self
            .mats()
            .iter()
            .map(|m| {
                let start = end;
                end += m[which].span();
                start
            })
            .collect();
        (starts, end)
    }
}

fn grouped_samples(_: ElementKind) -> Vec<GroupedSample> {
    use LayoutSku::{Ccc, Crc, Rcr, Rrr};
    let mut v = Vec::new();
    for e in EpilogueKind::ALL {
        for with_c in [false, true] {
            v.push(GroupedSample::new(&GROUPS, Rcr, e).c(with_c));
        }
    }
    for layout in [Rrr, Crc, Ccc] {
        v.push(GroupedSample::new(&GROUPS, layout, EpilogueKind::Identity));
        v.push(GroupedSample::new(&GROUPS, layout, EpilogueKind::BiasGeluErf).c(true));
    }
    v.push(GroupedSample::new(&[(1, 1, 1)], Rcr, EpilogueKind::Bias).c(true));
    let idle = [(0, 16, 32), (0, 8, 16)];
    v.push(GroupedSample::new(&idle, Rcr, EpilogueKind::BiasRelu).c(true));
    let moe = MOE_TOKENS.map(|tokens| (tokens, 1408, 1024));
    v.push(GroupedSample::new(&moe, Rcr, EpilogueKind::Identity));
    v
}

/// Every group's operands, as stored, back to back: `a`, `b`, `c` (when
/// given) and `bias` (when the epilogue has one).
fn grouped_inputs(s: &GroupedSample, rng: &mut Rng) -> Tensors {
    let mut t = Tensors::default();
    let mut draw = |name: &str, which: usize| {
        let len = s.starts(which).1;
        t.push(name, rng.vec(len, -1.0, 1.0));
    };
    draw("a", 0);
    draw("b", 1);
    if s.with_c {
        draw("c", 2);
    }
    if s.epilogue.has_bias() {
        draw("bias", 3);
    }
    t
}

fn run_grouped(
    kind: ElementKind,
    s: &GroupedSample,
    inputs: &Tensors,
    _: bool,
) -> Result<Tensors, String> {
    crate::with_float!(kind, T => run_grouped_plan::<T>(s, inputs))
}

fn run_grouped_plan<T: Element>(s: &GroupedSample, inputs: &Tensors) -> Result<Tensors, String> {
    let st = &gpu().stream;
    let desc = s.desc();
    let plan = select::<GroupedGemmPlan<T>>(&desc, &PlanPreference::default())?;
    let mats = s.mats();
    // Group g's operand `which`, in an allocation of its own.
    let upload_each = |name: &str, which: usize| -> Vec<DeviceBuffer<T>> {
        let Some(values) = inputs.find(name) else {
            return Vec::new();
        };
        let (starts, _) = s.starts(which);
        let each = starts.iter().zip(&mats);
        each.map(|(&at, m)| upload_operand(&values[at..at + m[which].span()]))
            .collect()
    };
    let (a, b, c, bias) = (
        upload_each("a", 0),
        upload_each("b", 1),
        upload_each("c", 2),
        upload_each("bias", 3),
    );
    let outputs = || -> Vec<MatOut<T>> { mats.iter().map(|m| MatOut::new(m[2])).collect() };
    let (mut d, mut aux) = (outputs(), operand_if(desc.save_aux, outputs));
    let (alpha, beta) = scalars(s.with_c);
    let args = GroupedGemmArgs {
        a: views(&a, &mats, 0),
        b: views(&b, &mats, 1),
        c: s.with_c.then(|| views(&c, &mats, 2)).into(),
        d: d.iter_mut().map(MatOut::view_mut).collect(),
        bias: desc
            .epilogue
            .has_bias()
            .then(|| bias.iter().map(|b| vector(b.as_slice())).collect()),
        aux: desc
            .save_aux
            .then(|| aux.iter_mut().map(MatOut::view_mut).collect()),
        alpha,
        beta,
    };
    let mut ws = workspace(plan.workspace_size());
    let mut out = Outputs::of(&plan, plan.run(st, borrowed(&mut ws), args))?;
    out.take("d", true, &d)?;
    out.take("aux", desc.save_aux, &aux)?;
    Ok(out.tensors())
}

/// Each group's operand `which` (an index into its [`Mat`]s) in `bufs`.
fn views<'a, T: Element>(
    bufs: &'a [DeviceBuffer<T>],
    mats: &[[Mat; 4]],
    which: usize,
) -> Vec<MatrixRef<'a, T>> {
    bufs.iter()
        .zip(mats)
        .map(|(buf, m)| m[which].view(buf.as_slice()))
        .collect()
}

/// Every group's `D` and, when saved, `Z`, back to back (an empty group
/// has none).
fn grouped_reference(_: ElementKind, s: &GroupedSample, inputs: &Tensors, _: &Tensors) -> Tensors {
    let starts = [0, 1, 2, 3].map(|which| s.starts(which).0);
    let (ab, act) = (scalars(s.with_c), s.epilogue.activation());
    let each = s.mats().into_iter().enumerate().map(|(g, [a, b, c, _])| {
        let at = [0, 1, 2, 3].map(|which| starts[which][g]);
        entry(inputs, [a, b, c], at, ab, act)
    });
    entries(s.desc().save_aux, each)
}
