//! The `linear` row, `Y = act(X W^T + b)` forward and backward, against
//! `reference::gemm`.
//!
//! - Every epilogue (aux saved with an activation) on two shapes, packed,
//!   with odd leading-dimension paddings (rows off 16 bytes, an aux ld that
//!   is not a multiple of 8: cuBLASLt without its GELU aux epilogue, the
//!   column sum without 16-byte loads) and with paddings of 8 (everything
//!   aligned, the fused paths); `db` through BGRADB where chosen and
//!   through the column-sum kernel (`with_column_sum_db`).
//! - Enough tokens (300 to 1000) for the column sum to split rows into
//!   chunks, with `out_features` that allow 16-byte loads and that do not,
//!   packed and strided, `db` both ways.
//! - The skinny forward (1 to 4 tokens, enough outputs to fill the GPU)
//!   forced with `with_skinny_forward`: every epilogue, K not a multiple of
//!   the kernel's 4 slices of 32 lanes x 2 unrolled loads, an odd number of
//!   outputs (the last block holds a warp group with one live row and one
//!   with none), K of one vector (three of four slices empty), a
//!   4096-wide layer; the same layer under heuristic selection (which
//!   keeps cuBLASLt) and measured autotuning (either kernel). Strided `X`,
//!   `W` or `Y` under measured autotuning keep cuBLASLt; strided backward
//!   matrices leave the skinny forward free.
//! - GPT-2's MLP up-projection of 128 tokens.
//!
//! Every sample checks `Y` (and `Z`), then `dX`, `dW` and `db` in one
//! `run_bw`, then `dX` alone and `dW` (with `db`) without `dX`: the
//! gradients not asked for must stay poison. The backward's reference
//! starts from the `Z` the device saved. Heuristic selection must never
//! pick the skinny kernel, and f32 must run IEEE math.

use baracuda_kernels::*;

use super::bad_inputs::{linear_bad_inputs, linear_unsupported};
use super::{
    borrowed, bound, product, r, upload_operand, vector, vector_mut, Mat, MatOut, Outputs,
};
use crate::harness::*;
use crate::table::{OpCase, Tensors};

/// `F.linear` with a fused activation, and its backward.
pub static LINEAR: OpCase<LinearSample> = OpCase {
    name: "linear",
    dtypes: FLOATS,
    backward: true,
    samples: linear_samples,
    inputs: linear_inputs,
    run: run_linear,
    reference: linear_reference,
    tolerance: |kind, s, _, want, _| bound(s.tol(kind), want),
    bad_inputs: linear_bad_inputs,
    unsupported: linear_unsupported,
};

/// Leading-dimension paddings of a linear layer: `X`, `W`, `Y`, `dX`,
/// `dW`, `dY`.
pub(super) type Pads = [usize; 6];

/// Packed; odd paddings; paddings of 8.
const PADS: [Pads; 3] = [[0; 6], [3, 5, 7, 1, 2, 9], [8; 6]];

/// `desc` with each leading dimension padded as `pads` says.
pub(super) fn padded(desc: LinearDescriptor, p: Pads) -> LinearDescriptor {
    let (i, o) = (desc.in_features, desc.out_features);
    desc.with_forward_ld(i + p[0], i + p[1], o + p[2])
        .with_backward_ld(i + p[3], i + p[4], o + p[5])
}

/// Outputs enough for the skinny kernel on this GPU (8 per SM), and odd:
/// the last block holds a warp group with one live row and one with none.
pub(super) fn skinny_outputs() -> usize {
    8 * gpu().stream.context().device().sm_count as usize + 25
}

/// How a sample selects its plan.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Pick {
    /// `select` with the default preference: never the skinny kernel.
    Default,
    /// `Autotune::Measured`: the skinny kernel where it is faster, never
    /// for strided `X`, `W` or `Y`.
    Measured,
    /// The default, then `with_skinny_forward`.
    Skinny,
}

/// A linear layer.
#[derive(Clone, Debug)]
pub struct LinearSample {
    t: usize,
    i: usize,
    o: usize,
    epilogue: EpilogueKind,
    pads: Pads,
    /// `db` through the column-sum kernel (`with_column_sum_db`).
    column_sum: bool,
    pick: Pick,
}

impl LinearSample {
    fn new((t, i, o): (usize, usize, usize), epilogue: EpilogueKind) -> Self {
        LinearSample {
            t,
            i,
            o,
            epilogue,
            pads: [0; 6],
            column_sum: false,
            pick: Pick::Default,
        }
    }
    fn pads(self, pads: Pads) -> Self {
        LinearSample { pads, ..self }
    }
    fn column_sum(self, column_sum: bool) -> Self {
        LinearSample { column_sum, ..self }
    }
    fn pick(self, pick: Pick) -> Self {
        LinearSample { pick, ..self }
    }
    /// Aux saved when the epilogue has an activation.
    fn desc(&self) -> LinearDescriptor {
        let e = self.epilogue;
        let d = LinearDescriptor::new(self.t, self.i, self.o)
            .with_epilogue(e)
            .with_aux(e.activation() != Activation::Identity);
        padded(d, self.pads)
    }
    /// `X`, `W`, `Y` (and `Z`), `dX`, `dW`, `dY`.
    fn mats(&self) -> [Mat; 6] {
        let d = self.desc();
        let (t, i, o) = (self.t, self.i, self.o);
        [
            Mat::row_major(t, i, d.ldx),
            Mat::row_major(o, i, d.ldw),
            Mat::row_major(t, o, d.ldy),
            Mat::row_major(t, i, d.lddx),
            Mat::row_major(o, i, d.lddw),
            Mat::row_major(t, o, d.lddy),
        ]
    }
    /// The relative bound of every output in `kind`.
    fn tol(&self, kind: ElementKind) -> f64 {
        match kind {
            // 2e-2 where a sum runs over 512 tokens or more (dW, db) or
            // over 4096 inputs (Y).
            ElementKind::Bf16 if self.t >= 512 || self.i >= 4096 => 2e-2,
            ElementKind::Bf16 => 1e-2,
            // Y, dX, dW, db each rounded once to f16 (u = 4.9e-4), dZ once
            // more before the backward GEMMs: 4u.
            ElementKind::F16 => 4.0 * ElementKind::F16.unit_roundoff(),
            ElementKind::F32 => 3e-5,
            // f64 GEMMs err ~sqrt(k) u64.
            _ => 1e-12,
        }
    }
    /// What the selection must show.
    fn check(&self, sku: &KernelSku) -> Result<(), String> {
        let v = &sku.variant;
        let strided_forward = self.pads[..3] != [0; 3];
        let forward = match self.pick {
            Pick::Skinny => v.contains("skinny kernel (forced"),
            Pick::Default => !v.contains("skinny"),
            Pick::Measured => !strided_forward || !v.contains("skinny"),
        };
        if !forward || (self.column_sum && !v.contains("db column-sum")) {
            return Err(format!("{:?} selected {sku}", self.pick));
        }
        if sku.element == ElementKind::F32 && sku.precision.math != MathPrecision::F32 {
            return Err(format!("f32 runs {:?} math: {sku}", sku.precision.math));
        }
        Ok(())
    }
}

/// `db` both ways where there is one.
fn column_sums(e: EpilogueKind) -> &'static [bool] {
    if e.has_bias() {
        &[false, true]
    } else {
        &[false]
    }
}

fn linear_samples(kind: ElementKind) -> Vec<LinearSample> {
    use EpilogueKind::{Bias, BiasGeluErf, BiasGeluTanh, BiasRelu, Identity};
    let mut v = Vec::new();
    for size in [(64, 96, 40), (7, 33, 18)] {
        for e in EpilogueKind::ALL {
            for pads in PADS {
                for &column_sum in column_sums(e) {
                    let s = LinearSample::new(size, e).pads(pads);
                    v.push(s.column_sum(column_sum));
                }
            }
        }
    }
    // Enough tokens for the column sum to split rows into several chunks,
    // with out_features that allow 16-byte loads (40 in every dtype, 20
    // and 36 in some) and that do not (18 but in f64).
    let tall = [
        ((1000, 64, 40), Bias),
        ((517, 33, 18), BiasRelu),
        ((517, 33, 20), Bias),
        ((700, 32, 36), Bias),
        ((300, 16, 18), Bias),
    ];
    for (size, e) in tall {
        for pads in PADS {
            for column_sum in [false, true] {
                v.push(LinearSample::new(size, e).pads(pads).column_sum(column_sum));
            }
        }
    }
    // The skinny forward. K not a multiple of 4 slices x 32 lanes x 2
    // loads of 16-byte vectors; K of one vector.
    let o = skinny_outputs();
    let i = match kind {
        ElementKind::F32 => 300,
        ElementKind::F64 => 302,
        _ => 296,
    };
    for t in 1..=4 {
        for e in [Identity, Bias, BiasRelu, BiasGeluErf, BiasGeluTanh] {
            v.push(LinearSample::new((t, i, o), e).pick(Pick::Skinny));
        }
    }
    let one_vector = 16 / kind.size_bytes();
    for t in [1, 4] {
        v.push(LinearSample::new((t, one_vector, o), Bias).pick(Pick::Skinny));
    }
    // A 4096-wide layer: forced, heuristic, measured.
    v.push(LinearSample::new((1, 4096, o), Bias).pick(Pick::Skinny));
    v.push(LinearSample::new((1, 4096, o), Bias));
    for t in [1, 3] {
        v.push(LinearSample::new((t, 4096, o), BiasGeluErf).pick(Pick::Measured));
    }
    // Strided X, W or Y: measured autotuning keeps cuBLASLt. Strided dX,
    // dW and dY: the skinny forward still serves.
    for t in [1, 4] {
        for e in [Bias, BiasGeluErf] {
            let s = LinearSample::new((t, 296, o), e);
            for pads in [[8, 0, 0, 0, 0, 0], [0, 8, 0, 0, 0, 0], [0, 0, 8, 0, 0, 0]] {
                v.push(s.clone().pads(pads).pick(Pick::Measured));
            }
            v.push(s.pads([0, 0, 0, 8, 8, 8]).pick(Pick::Skinny));
        }
    }
    // GPT-2's MLP up-projection, 768 -> 3072, of 128 tokens.
    v.push(LinearSample::new((128, 768, 3072), BiasGeluTanh));
    v
}

/// `x`, `w`, `dy` as stored, and `bias` when the epilogue has one.
fn linear_inputs(s: &LinearSample, rng: &mut Rng) -> Tensors {
    let [x, w, _, _, _, dy] = s.mats();
    let mut t = Tensors::default();
    t.push("x", rng.vec(x.span(), -1.0, 1.0));
    t.push("w", rng.vec(w.span(), -1.0, 1.0));
    if s.epilogue.has_bias() {
        t.push("bias", rng.vec(s.o, -1.0, 1.0));
    }
    t.push("dy", rng.vec(dy.span(), -1.0, 1.0));
    t
}

fn run_linear(
    kind: ElementKind,
    s: &LinearSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    crate::with_float!(kind, T => run_linear_plan::<T>(s, inputs, backward))
}

/// The forward (`y`, and `aux` when saved), then every gradient in one
/// `run_bw` (`dx`, `dw`, `db` with a bias), then `dx alone` and `dw
/// without dx` (with `db without dx`).
fn run_linear_plan<T: Element>(
    s: &LinearSample,
    inputs: &Tensors,
    backward: bool,
) -> Result<Tensors, String> {
    let st = &gpu().stream;
    let desc = s.desc();
    let preference = match s.pick {
        Pick::Measured => PlanPreference::default().with_autotune(Autotune::Measured),
        Pick::Default | Pick::Skinny => PlanPreference::default(),
    };
    let mut plan = select::<LinearPlan<T>>(&desc, &preference)?;
    if s.pick == Pick::Skinny {
        plan = plan
            .with_skinny_forward(st)
            .map_err(|e| format!("with_skinny_forward: {e}"))?;
    }
    if s.column_sum {
        plan = plan.with_column_sum_db();
    }
    s.check(plan.sku())?;
    let [xm, wm, ym, dxm, dwm, dym] = s.mats();
    let x = upload_operand::<T>(inputs.get("x"));
    let w = upload_operand::<T>(inputs.get("w"));
    let dy = upload_operand::<T>(inputs.get("dy"));
    let bias = inputs.find("bias").map(upload_operand::<T>);
    let mut ws = workspace(plan.workspace_size());
    let mut y = MatOut::<T>::new(ym);
    let mut z = operand_if(desc.save_aux, || MatOut::<T>::new(ym));
    let args = LinearArgs {
        x: xm.view(x.as_slice()),
        w: wm.view(w.as_slice()),
        bias: bias.as_ref().map(|b| vector(b.as_slice())),
        y: y.view_mut(),
        aux: desc.save_aux.then(|| z.view_mut()),
    };
    let mut out = Outputs::of(&plan, plan.run(st, borrowed(&mut ws), args))?;
    out.take("y", true, &y)?;
    out.take("aux", desc.save_aux, &z)?;
    if !backward {
        return Ok(out.tensors());
    }
    let mut grads =
        |dx: Option<&mut MatOut<T>>, dw: Option<&mut MatOut<T>>, db: Option<&mut Guarded<T>>| {
            let args = LinearBwArgs {
                x: xm.view(x.as_slice()),
                w: wm.view(w.as_slice()),
                dy: dym.view(dy.as_slice()),
                aux: desc.save_aux.then(|| z.view()),
                dx: dx.map(MatOut::view_mut),
                dw: dw.map(MatOut::view_mut),
                dbias: db.map(|g| vector_mut(g.slice_mut())),
            };
            plan.run_bw(st, borrowed(&mut ws), args)
                .map_err(|e| format!("run_bw: {e}"))
        };
    let has_bias = desc.epilogue.has_bias();
    // fresh gradients; those a run is not given are no operand of it
    let fresh = |with_dx: bool, with_dw: bool| {
        (
            operand_if(with_dx, || MatOut::<T>::new(dxm)),
            operand_if(with_dw, || MatOut::<T>::new(dwm)),
            operand_if(with_dw && has_bias, || Guarded::<T>::new(s.o)),
        )
    };
    let (mut dx, mut dw, mut db) = fresh(true, true);
    grads(Some(&mut dx), Some(&mut dw), has_bias.then_some(&mut db))?;
    out.take("dx", true, &dx)?;
    out.take("dw", true, &dw)?;
    out.take("db", has_bias, &db)?;
    let (mut dx, dw, db) = fresh(true, false);
    grads(Some(&mut dx), None, None)?;
    out.take("dx alone", true, &dx)?;
    out.take("dw in the dx-alone run", false, &dw)?;
    out.take("db in the dx-alone run", false, &db)?;
    let (dx, mut dw, mut db) = fresh(false, true);
    grads(None, Some(&mut dw), has_bias.then_some(&mut db))?;
    out.take("dw without dx", true, &dw)?;
    out.take("db without dx", has_bias, &db)?;
    out.take("dx in the dw run", false, &dx)?;
    Ok(out.tensors())
}

/// `y`, `aux` (when saved), `dx`, `dw` and `db` (with a bias). The
/// backward starts from the `Z` the run saved (what the device's backward
/// reads), else from the reference's own.
fn linear_reference(
    kind: ElementKind,
    s: &LinearSample,
    inputs: &Tensors,
    got: &Tensors,
) -> Tensors {
    let (t, i, o) = (s.t, s.i, s.o);
    let [xm, wm, _, _, _, dym] = s.mats();
    let (x, w, dy) = (inputs.get("x"), inputs.get("w"), inputs.get("dy"));
    let (row, col) = (MatrixOrder::RowMajor, MatrixOrder::ColMajor);
    let act = s.epilogue.activation();
    // W [o, i] row-major is W^T [i, o] column-major.
    let w_t = (w, wm.ld, col);
    let (y, z) = r::gemm(
        t,
        o,
        i,
        xm.stored(x, 0),
        w_t,
        None,
        inputs.find("bias"),
        1.0,
        0.0,
        act,
    );
    let saved = got.output("aux").unwrap_or(&z);
    let dz: Vec<f64> = (0..t * o)
        .map(|p| dy[dym.offset(p / o, p % o)] * r::act_grad(act, saved[p]))
        .collect();
    // The backward's epilogue kernel stores dZ in the dtype.
    let dz = round_to(kind, &dz);
    let dx = product(t, i, o, (&dz, o, row), wm.stored(w, 0), 1.0);
    let dw = product(o, i, t, (&dz, o, col), xm.stored(x, 0), 1.0);
    let db: Vec<f64> = (0..o)
        .map(|j| (0..t).map(|r| dz[r * o + j]).sum())
        .collect();
    let mut out = Tensors::default();
    out.push("y", y);
    if s.desc().save_aux {
        out.push("aux", z.clone());
    }
    out.push("dx", dx);
    out.push("dw", dw);
    if s.epilogue.has_bias() {
        out.push("db", db);
    }
    out
}
