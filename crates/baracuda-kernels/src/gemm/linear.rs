//! A fully connected layer, PyTorch's `F.linear` with a fused activation:
//!
//! FW  `Z = X W^T + b`, `Y = act(Z)`               (X: `[tokens, in]`,
//!     W: `[out, in]`, b: `[out]`, Y and Z: `[tokens, out]`, row-major)
//! BW  `dZ = dY * act'(Z)` (skipped for no activation)
//!     `dX = dZ W`, `dW = dZ^T X`, `db = sum_tokens dZ`
//!
//! `db` comes either out of the `dW` matmul through cuBLASLt's BGRADB
//! epilogue, where cuBLASLt offers it for the problem, or from a two-pass
//! column-sum kernel after a plain `dW` matmul. The fused epilogue saves a
//! pass over `dZ` but runs a different matmul kernel, which can cost more
//! than the pass (H200, bf16 8192 x 4096 -> 14336: 1.32 ms fused against
//! 1.18 ms + 0.06 ms). Heuristic selection takes the fused epilogue when
//! it exists; measured autotuning times both and keeps the faster.
//! `act'` runs in the epilogue kernel (cuBLASLt's DGELU/DRELU epilogues
//! apply the derivative to a matmul *output*, which is the previous layer's
//! `dX`, not this layer's `dY`).

use baracuda_driver::{LtCompute, LtEpilogue, Stream};
use baracuda_kernels_types::{
    Activation, DeviceSlice, DeviceSliceMut, Element, EpilogueKind, Error, Grad, Grads, KernelSku,
    MatrixMut, MatrixOrder, MatrixRef, PlanPreference, Result, Workspace,
};

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::epilogue::{
    act_code, kernel_args, skinny_fits, ColSumSplit, EpilogueKernels, SKINNY_MAX_TOKENS,
};
use super::gemm::{
    check_bias, check_mat, compute_for, mat_mut, mat_ref, problem, GemmArgs, GemmDescriptor,
    GemmPlan,
};
use super::matmul::{scalar, Prepared, Ptrs};
use super::plain::LinearMatmul;
use crate::plan::check_grads;
use crate::scratch::{fastest, operand_sets, random_bytes};
use crate::{Backward, Plan};
use baracuda_driver::DeviceBuffer;
use baracuda_kernels_types::{Autotune, ElementKind};

const OP: &str = "linear";

/// A linear layer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LinearDescriptor {
    /// Rows of `X` and `Y`.
    pub tokens: usize,
    /// Columns of `X` and `W`.
    pub in_features: usize,
    /// Rows of `W`, columns of `Y`.
    pub out_features: usize,
    /// Bias and activation.
    pub epilogue: EpilogueKind,
    /// Store `Z` in the forward (needed by the backward when there is an
    /// activation).
    pub save_aux: bool,
}

/// Forward tensors (row-major, packed).
#[derive(Debug)]
pub struct LinearArgs<'a, T> {
    /// `X`, `[tokens, in]`.
    pub x: MatrixRef<'a, T>,
    /// `W`, `[out, in]`.
    pub w: MatrixRef<'a, T>,
    /// `b`, `[out]`, when the epilogue has a bias.
    pub bias: Option<DeviceSlice<'a, T>>,
    /// `Y`, `[tokens, out]`, written.
    pub y: MatrixMut<'a, T>,
    /// `Z`, `[tokens, out]`, written when `save_aux`.
    pub aux: Option<MatrixMut<'a, T>>,
}

/// Backward tensors; each gradient is computed only when given.
#[derive(Debug)]
pub struct LinearBwArgs<'a, T> {
    /// `X` of the forward.
    pub x: MatrixRef<'a, T>,
    /// `W` of the forward.
    pub w: MatrixRef<'a, T>,
    /// `dY`, `[tokens, out]`.
    pub dy: MatrixRef<'a, T>,
    /// `Z` saved by the forward (needed when there is an activation).
    pub aux: Option<MatrixRef<'a, T>>,
    /// `dX`, `[tokens, in]`, written.
    pub dx: Option<MatrixMut<'a, T>>,
    /// `dW`, `[out, in]`, written.
    pub dw: Option<MatrixMut<'a, T>>,
    /// `dbias`, `[out]`, written (needs `dw`, and a bias in the epilogue).
    pub dbias: Option<DeviceSliceMut<'a, T>>,
}

/// `Y = act(X W^T + b)` and its backward.
///
/// # Shapes
/// See the module doc; every matrix row-major and packed.
/// # Dtypes
/// `T` = f32 (IEEE unless `allow_tf32`), f64, f16 or bf16, every tensor of
/// forward and backward in `T` (f32 accumulation; f64 for f64). Others:
/// `Unsupported`.
/// # Errors
/// As [`GemmPlan`]; `InvalidArgument` when `aux` is missing for a backward
/// through an activation or `db` is asked without `dw` or without a bias.
pub struct LinearPlan<T: Element> {
    desc: LinearDescriptor,
    fw: GemmPlan<T>,
    /// The forward runs the skinny kernel instead of `fw`'s matmul.
    skinny: bool,
    compute: LtCompute,
    dx: Prepared,
    dw: Prepared,
    dw_bgrad: Option<Prepared>,
    /// `db` through `dw_bgrad` (else the column-sum kernel).
    db_fused: bool,
    kernels: EpilogueKernels,
    dz_offset: usize,
    /// The column sum's split and the offset of its partials in the
    /// workspace (when the epilogue has a bias).
    col_sum: Option<(ColSumSplit, usize)>,
    workspace_bytes: usize,
    sku: KernelSku,
}

fn round_up(x: usize) -> usize {
    x.div_ceil(256) * 256
}

/// A measured either/or choice of a linear layer's plan (`which` names
/// it), computed by `time` once per device, descriptor, dtype and
/// preference for the process and cached.
fn cached_choice<T: Element>(
    which: &str,
    stream: &Stream,
    desc: &LinearDescriptor,
    pref: &PlanPreference,
    time: impl FnOnce() -> Result<bool>,
) -> Result<bool> {
    static CACHE: OnceLock<Mutex<HashMap<String, bool>>> = OnceLock::new();
    let key = format!(
        "{which}:{}:{desc:?}:{:?}:{}:{}",
        stream.context().device().ordinal,
        T::KIND,
        pref.deterministic,
        pref.allow_tf32
    );
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(&f) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(f);
    }
    let f = time()?;
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, f);
    Ok(f)
}

/// Whether `dW` with `db` runs faster through the BGRADB epilogue (`fused`)
/// than as the plain `dW` matmul followed by the column sum, timed on
/// random scratch operands; cached per device, descriptor, dtype and
/// preference for the process.
fn fused_db_is_faster<T: Element>(
    stream: &Stream,
    desc: &LinearDescriptor,
    pref: &PlanPreference,
    compute: LtCompute,
    (plain, fused): (&Prepared, &Prepared),
    kernels: &EpilogueKernels,
    split: ColSumSplit,
) -> Result<bool> {
    cached_choice::<T>("db", stream, desc, pref, || {
        let (t, i, o) = (desc.tokens, desc.in_features, desc.out_features);
        let size = T::KIND.size_bytes();
        let dz = random_bytes(stream, T::KIND, t * o * size, 3)?;
        let x = random_bytes(stream, T::KIND, t * i * size, 4)?;
        let mut dw = DeviceBuffer::<u8>::zeros(stream, o * i * size)?;
        let mut db =
            DeviceBuffer::<u8>::zeros(stream, o * size.max(ElementKind::F64.size_bytes()))?;
        let lt_ws = plain.algo.workspace_bytes.max(fused.algo.workspace_bytes);
        let cs_off = round_up(lt_ws);
        let mut ws = DeviceBuffer::<u8>::zeros(
            stream,
            (cs_off + kernels.col_sum_workspace(split, o)).max(1),
        )?;
        let ws_addr = ws.as_slice_mut().addr();
        let db_addr = db.as_slice_mut().addr();
        let dw_addr = dw.as_slice_mut().addr();
        let one = scalar(compute, true, 1.0);
        let zero = scalar(compute, true, 0.0);
        let ptrs = |p: &Prepared| Ptrs {
            a: dz.as_slice().addr(),
            b: x.as_slice().addr(),
            c: dw_addr,
            d: dw_addr,
            workspace: ws_addr,
            workspace_bytes: p.algo.workspace_bytes,
            bias: db_addr,
            aux: 0,
            scales: None,
        };
        let timing = fastest(stream, 2, |c| {
            // SAFETY: dz, x, dw and db are scratch buffers of the shapes the
            // matmuls and the column sum reach; ws covers the larger matmul
            // workspace and the column-sum partials at cs_off. `fastest`
            // synchronizes before they drop.
            unsafe {
                if c == 0 {
                    fused.enqueue(stream, one, zero, ptrs(fused))
                } else {
                    plain.enqueue(stream, one, zero, ptrs(plain))?;
                    kernels.col_sum(
                        stream,
                        dz.as_slice().addr(),
                        (t, o, o),
                        split,
                        db_addr,
                        ws_addr + cs_off as u64,
                    )
                }
            }
        })?;
        timing.log(&format!("linear dW + db {desc:?} {:?}", T::KIND), |c| {
            if c == 0 {
                format!("BGRADB epilogue: {}", fused.describe())
            } else {
                format!("plain dW + column sum: {}", plain.describe())
            }
        });
        Ok(match (timing.best, timing.first_error) {
            (Some((c, _)), _) => c == 0,
            (None, Some(e)) => return Err(e),
            (None, None) => true,
        })
    })
}

/// Whether the forward runs faster through the skinny kernel than through
/// the cuBLASLt plan `fw`, timed on random scratch operands rotated over
/// [`operand_sets`] sets; cached per device, descriptor, dtype and
/// preference for the process.
fn skinny_is_faster<T: Element>(
    stream: &Stream,
    desc: &LinearDescriptor,
    pref: &PlanPreference,
    fw: &GemmPlan<T>,
    kernels: &EpilogueKernels,
) -> Result<bool> {
    cached_choice::<T>("skinny", stream, desc, pref, || {
        let (t, i, o) = (desc.tokens, desc.in_features, desc.out_features);
        let size = T::KIND.size_bytes();
        let has_bias = desc.epilogue.has_bias();
        let set_bytes = (t * i + o * i + 2 * t * o + o) * size;
        let n_sets = operand_sets(stream, set_bytes);
        let mut sets = Vec::with_capacity(n_sets);
        for s in 0..n_sets as u64 {
            sets.push((
                random_bytes(stream, T::KIND, t * i * size, 3 * s + 1)?,
                random_bytes(stream, T::KIND, o * i * size, 3 * s + 2)?,
                random_bytes(stream, T::KIND, o * size, 3 * s + 3)?,
                DeviceBuffer::<u8>::zeros(stream, t * o * size)?,
                DeviceBuffer::<u8>::zeros(stream, t * o * size)?,
            ));
        }
        let mut ws = DeviceBuffer::<u8>::zeros(stream, fw.workspace_size().max(1))?;
        let ws_addr = ws.as_slice_mut().addr();
        let ptrs: Vec<Ptrs> = sets
            .iter_mut()
            .map(|(x, w, b, y, z)| Ptrs {
                a: x.as_slice().addr(),
                b: w.as_slice().addr(),
                c: y.as_slice_mut().addr(),
                d: y.as_slice_mut().addr(),
                workspace: ws_addr,
                workspace_bytes: fw.workspace_size(),
                bias: if has_bias { b.as_slice().addr() } else { 0 },
                aux: if desc.save_aux {
                    z.as_slice_mut().addr()
                } else {
                    0
                },
                scales: None,
            })
            .collect();
        let one = scalar(fw.compute(), true, 1.0);
        let zero = scalar(fw.compute(), true, 0.0);
        let act = act_code(desc.epilogue.activation());
        let mut launches = 0usize;
        let timing = fastest(stream, 2, |c| {
            let p = ptrs[launches % ptrs.len()];
            launches += 1;
            // SAFETY: every scratch buffer holds the elements of its operand
            // (x [t, i], w [o, i], bias [o], y and aux [t, o]), device
            // allocations are 256-byte aligned, `skinny_fits` held for the
            // shape (the caller checked), and ws covers fw's workspace;
            // `fastest` synchronizes before they drop.
            unsafe {
                if c == 0 {
                    kernels.skinny(stream, (t, i, o), (p.a, p.b, p.bias), (p.d, p.aux), act)
                } else {
                    fw.enqueue_checked(stream, one, zero, p)
                }
            }
        })?;
        timing.log(&format!("linear forward {desc:?} {:?}", T::KIND), |c| {
            if c == 0 {
                "skinny kernel".to_string()
            } else {
                format!("cuBLASLt: {}", fw.sku().variant)
            }
        });
        Ok(match (timing.best, timing.first_error) {
            (Some((c, _)), _) => c == 0,
            (None, Some(e)) => return Err(e),
            (None, None) => false,
        })
    })
}

impl<T: Element> LinearPlan<T> {
    fn fw_desc(d: &LinearDescriptor) -> GemmDescriptor {
        LinearMatmul::Forward
            .desc((d.tokens, d.in_features, d.out_features))
            .with_epilogue(d.epilogue)
            .with_aux(d.save_aux)
    }

    /// Compute `db` with the column-sum kernel even where the BGRADB
    /// epilogue was chosen: a fixed summation order for a given shape and
    /// device, the same for every dtype. Changes neither the workspace
    /// size nor `dX`/`dW`.
    #[must_use]
    pub fn with_column_sum_db(mut self) -> Self {
        if self.db_fused {
            self.db_fused = false;
            self.sku.variant = self
                .sku
                .variant
                .replace(" | db fused (BGRADB)", " | db column-sum kernel");
        }
        self
    }

    /// Run the forward through the skinny kernel (1 to 4 tokens: four warps
    /// per four rows of `W`, each over a quarter of `in_features`, summed in
    /// a fixed order) whatever the selection chose.
    ///
    /// # Errors
    /// `Unsupported` when the shape does not suit it: more than 4 tokens,
    /// `in_features` not a whole number of 16-byte vectors, or too few
    /// `out_features` to give each SM 4 warps.
    pub fn with_skinny_forward(mut self, stream: &Stream) -> Result<Self> {
        let d = &self.desc;
        let sms = stream.context().device().sm_count;
        if !skinny_fits(T::KIND, sms, d.tokens, d.in_features, d.out_features) {
            return Err(Error::Unsupported {
                op: OP,
                what: format!(
                    "the skinny forward takes 1 to {SKINNY_MAX_TOKENS} tokens, in_features a \
                     multiple of {} and at least {} out_features on this GPU; got {d:?}",
                    16 / T::KIND.size_bytes(),
                    (8 * sms).saturating_sub(1)
                ),
            });
        }
        if !self.skinny {
            self.skinny = true;
            let fw = format!("fw [{}]", self.fw.sku().variant);
            let tokens = d.tokens;
            self.sku.variant = self
                .sku
                .variant
                .replace(&fw, &format!("fw [skinny kernel (forced, {tokens} rows)]"));
        }
        Ok(self)
    }

    /// Backward: `dX`, `dW`, `db` as requested in `args`.
    fn backward(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: LinearBwArgs<'_, T>,
    ) -> Result<()> {
        let wants = Grads::present(&[
            (Grad::X, args.dx.is_some()),
            (Grad::Weight, args.dw.is_some()),
            (Grad::Bias, args.dbias.is_some()),
        ]);
        check_grads(OP, wants, self.grads())?;
        let d = &self.desc;
        let ctx = stream.context().id();
        let (t, i, o) = (d.tokens, d.in_features, d.out_features);
        let row = MatrixOrder::RowMajor;
        check_mat(OP, "x", mat_ref(&args.x), (t, i, row, i), ctx)?;
        check_mat(OP, "w", mat_ref(&args.w), (o, i, row, i), ctx)?;
        check_mat(OP, "dy", mat_ref(&args.dy), (t, o, row, o), ctx)?;
        let act = d.epilogue.activation();
        let z = match (&args.aux, act) {
            (_, Activation::Identity) => 0,
            (Some(z), _) => {
                check_mat(OP, "aux", mat_ref(z), (t, o, row, o), ctx)?;
                z.data().addr()
            }
            (None, _) => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    arg: "aux",
                    reason: format!(
                        "the backward through {} needs the saved pre-activation",
                        act.name()
                    ),
                })
            }
        };
        if let Some(dx) = &args.dx {
            check_mat(OP, "dx", mat_mut(dx), (t, i, row, i), ctx)?;
        }
        if let Some(dw) = &args.dw {
            check_mat(OP, "dw", mat_mut(dw), (o, i, row, i), ctx)?;
        }
        let db = match &args.dbias {
            Some(_) if args.dw.is_none() => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    arg: "dbias",
                    reason: "dbias is computed with dw; pass dw too".into(),
                })
            }
            Some(db) => check_bias(
                OP,
                "dbias",
                d.epilogue.has_bias(),
                Some(db.as_const()),
                o,
                ctx,
            )?,
            None => 0,
        };
        let ws = workspace.check(OP, self.workspace_bytes, ctx)?;
        let one = scalar(self.compute, true, 1.0);
        let zero = scalar(self.compute, true, 0.0);
        // dZ: the epilogue kernel writes it into the workspace, or it is dY.
        let dz = if act == Activation::Identity {
            args.dy.data().addr()
        } else {
            let dz = ws + self.dz_offset as u64;
            let mut a = kernel_args(|a| {
                a.push(args.dy.data().addr())?
                    .push(o as i64)?
                    .push(z)?
                    .push(o as i64)?;
                a.push(dz)?
                    .push(o as i64)?
                    .push(t as i64)?
                    .push(o as i64)?
                    .push(act_code(act))?;
                Ok(())
            })?;
            // SAFETY: dy and z were checked to hold tokens x out packed
            // elements; dz lies in the workspace at dz_offset, which
            // `select` sized for tokens x out elements.
            unsafe {
                self.kernels
                    .dact
                    .launch(stream, self.kernels.cfg(t * o), &mut a)
            }?;
            dz
        };
        if let Some(dx) = &args.dx {
            let p = Ptrs {
                a: dz,
                b: args.w.data().addr(),
                c: dx.data().addr(),
                d: dx.data().addr(),
                workspace: ws,
                workspace_bytes: self.dx.algo.workspace_bytes,
                bias: 0,
                aux: 0,
                scales: None,
            };
            // SAFETY: dz holds tokens x out (dy, checked, or the workspace),
            // w and dx were checked above; the workspace's first
            // dz_offset bytes cover every algorithm's workspace.
            unsafe { self.dx.enqueue(stream, one, zero, p) }?;
        }
        if let Some(dw) = &args.dw {
            let fused = db != 0 && self.db_fused;
            let plan = match (&self.dw_bgrad, fused) {
                (Some(p), true) => p,
                _ => &self.dw,
            };
            let p = Ptrs {
                a: dz,
                b: args.x.data().addr(),
                c: dw.data().addr(),
                d: dw.data().addr(),
                workspace: ws,
                workspace_bytes: plan.algo.workspace_bytes,
                bias: db,
                aux: 0,
                scales: None,
            };
            // SAFETY: as above; dw was checked, db holds `out` elements.
            unsafe { plan.enqueue(stream, one, zero, p) }?;
            if let (true, false, Some((split, off))) = (db != 0, fused, self.col_sum) {
                // SAFETY: dz holds tokens x out packed elements, db `out`;
                // `select` sized the workspace past `off` for this split.
                unsafe {
                    self.kernels
                        .col_sum(stream, dz, (t, o, o), split, db, ws + off as u64)
                }?;
            }
        }
        Ok(())
    }
}

impl<T: Element> Backward for LinearPlan<T> {
    type BwArgs<'a> = LinearBwArgs<'a, T>;

    fn grads(&self) -> Grads {
        if self.desc.epilogue.has_bias() {
            Grad::X | Grad::Weight | Grad::Bias
        } else {
            Grad::X | Grad::Weight
        }
    }

    /// One layout serves every choice of gradients: the dZ buffer (under an
    /// activation), the largest cuBLASLt workspace and the column-sum
    /// partials.
    fn bw_workspace_size(&self, _wants: Grads) -> usize {
        self.workspace_bytes
    }

    fn run_bw(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: LinearBwArgs<'_, T>,
    ) -> Result<()> {
        self.backward(stream, workspace, args)
    }
}

impl<T: Element> Plan for LinearPlan<T> {
    type Descriptor = LinearDescriptor;
    type Args<'a> = LinearArgs<'a, T>;

    fn select(stream: &Stream, desc: &LinearDescriptor, pref: &PlanPreference) -> Result<Self> {
        let fwd = Self::fw_desc(desc);
        let fw = GemmPlan::<T>::select_as(OP, stream, &fwd, pref)?;
        let (compute, _, _) = compute_for(OP, T::KIND, T::KIND, pref)?;
        let (t, i, o) = (desc.tokens, desc.in_features, desc.out_features);
        let no_algo = |what: &str| Error::Unsupported {
            op: OP,
            what: format!("cuBLASLt has no algorithm for the {what} of {desc:?}"),
        };
        // dX [t, i] = dZ [t, o] W [o, i]
        let dxd = LinearMatmul::DataGrad.desc((t, i, o));
        let dx = Prepared::new(
            stream,
            &problem(
                OP,
                &dxd,
                (T::KIND, T::KIND),
                T::KIND,
                compute,
                LtEpilogue::Default,
            ),
            pref,
        )?
        .ok_or_else(|| no_algo("dX matmul"))?;
        // dW [o, i] = dZ^T [o, t] X [t, i]: dZ row-major read as column-major.
        let dwd = LinearMatmul::WeightGrad.desc((t, i, o));
        let dw = Prepared::new(
            stream,
            &problem(
                OP,
                &dwd,
                (T::KIND, T::KIND),
                T::KIND,
                compute,
                LtEpilogue::Default,
            ),
            pref,
        )?
        .ok_or_else(|| no_algo("dW matmul"))?;
        let dw_bgrad = if desc.epilogue.has_bias() {
            Prepared::new(
                stream,
                &problem(
                    OP,
                    &dwd,
                    (T::KIND, T::KIND),
                    T::KIND,
                    compute,
                    LtEpilogue::BgradB,
                ),
                pref,
            )?
        } else {
            None
        };
        let kernels = EpilogueKernels::load(stream, T::KIND)?;
        let sm_count = stream.context().device().sm_count;
        // Only measured autotuning takes the skinny kernel: on H200 it
        // streams the decode weight (bf16 4096 -> 14336) at 0.0346 ms
        // against cuBLASLt's 0.0324, so it is a candidate, not a default.
        let skinny = pref.autotune == Autotune::Measured
            && skinny_fits(T::KIND, sm_count, t, i, o)
            && skinny_is_faster::<T>(stream, desc, pref, &fw, &kernels)?;
        let split = desc
            .epilogue
            .has_bias()
            .then(|| kernels.col_sum_split(t, o, o));
        let lt_ws = [
            fw.workspace_size(),
            dx.algo.workspace_bytes,
            dw.algo.workspace_bytes,
        ]
        .into_iter()
        .chain(dw_bgrad.as_ref().map(|p| p.algo.workspace_bytes))
        .max()
        .unwrap_or(0);
        let dz_offset = round_up(lt_ws);
        let dz_bytes = if desc.epilogue.activation() == Activation::Identity {
            0
        } else {
            t * o * T::KIND.size_bytes()
        };
        let dz_end = if dz_bytes == 0 {
            lt_ws
        } else {
            dz_offset + dz_bytes
        };
        let col_sum = split.map(|sp| (sp, round_up(dz_end)));
        let workspace_bytes = match col_sum {
            Some((sp, off)) => off + kernels.col_sum_workspace(sp, o),
            None => dz_end,
        };
        pref.check_workspace(OP, workspace_bytes)?;
        let db_fused = match (&dw_bgrad, col_sum) {
            (Some(fused), Some((split, _))) if pref.autotune == Autotune::Measured => {
                fused_db_is_faster::<T>(stream, desc, pref, compute, (&dw, fused), &kernels, split)?
            }
            (Some(_), _) => true,
            (None, _) => false,
        };
        let mut sku = fw.sku().clone();
        sku.op = OP.to_string();
        let fw_variant = if skinny {
            format!("skinny kernel (measured, {t} rows)")
        } else {
            fw.sku().variant.clone()
        };
        sku.variant = format!(
            "fw [{fw_variant}] | dX {} | dW {}{}",
            dx.describe(),
            dw.describe(),
            match (db_fused, desc.epilogue.has_bias()) {
                (true, _) => " | db fused (BGRADB)",
                (false, true) => " | db column-sum kernel",
                (false, false) => "",
            }
        );
        let det = [Some(&dx), Some(&dw), dw_bgrad.as_ref().filter(|_| db_fused)]
            .iter()
            .flatten()
            .all(|p| p.algo.is_deterministic())
            && sku.precision.deterministic;
        sku.precision.deterministic = det;
        sku.precision.bit_stable_on_same_hardware = det;
        Ok(LinearPlan {
            desc: desc.clone(),
            fw,
            skinny,
            compute,
            dx,
            dw,
            dw_bgrad,
            db_fused,
            kernels,
            dz_offset,
            col_sum,
            workspace_bytes,
            sku,
        })
    }
    fn sku(&self) -> &KernelSku {
        &self.sku
    }
    /// Workspace of forward and backward (the backward's `dZ` included).
    fn workspace_size(&self) -> usize {
        self.workspace_bytes
    }
    fn run(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: LinearArgs<'_, T>,
    ) -> Result<()> {
        let d = &self.desc;
        let row = MatrixOrder::RowMajor;
        check_mat(
            OP,
            "w",
            mat_ref(&args.w),
            (d.out_features, d.in_features, row, d.in_features),
            stream.context().id(),
        )?;
        // W [out, in] row-major is W^T [in, out] column-major with ld = in.
        let wt = MatrixRef::new(
            args.w.data(),
            d.in_features,
            d.out_features,
            d.in_features,
            MatrixOrder::ColMajor,
        )?;
        let gemm_args = GemmArgs {
            a: args.x,
            b: wt,
            c: None,
            d: args.y,
            bias: args.bias,
            aux: args.aux,
            alpha: 1.0,
            beta: 0.0,
        };
        let (p, alpha, beta) = self.fw.checked(OP, stream, workspace, &gemm_args)?;
        if self.skinny {
            let act = act_code(d.epilogue.activation());
            let shape = (d.tokens, d.in_features, d.out_features);
            // SAFETY: `checked` proved x [tokens, in], W [out, in], y and
            // aux [tokens, out] packed row-major, 16-byte aligned, on this
            // context, and the bias `out` elements; `select` chose the
            // skinny kernel only where `skinny_fits` holds; y and aux are
            // exclusive borrows, disjoint from the inputs.
            unsafe {
                self.kernels
                    .skinny(stream, shape, (p.a, p.b, p.bias), (p.d, p.aux), act)
            }
        } else {
            // SAFETY: the addresses come from `checked` of this plan; the
            // borrows in `gemm_args` keep them alive and D exclusive.
            unsafe { self.fw.enqueue_checked(stream, alpha, beta, p) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baracuda_kernels_types::LayoutSku;

    #[test]
    fn forward_is_an_rcr_gemm() {
        let d = LinearDescriptor {
            tokens: 8192,
            in_features: 4096,
            out_features: 14336,
            epilogue: EpilogueKind::BiasGeluTanh,
            save_aux: true,
        };
        let g = LinearPlan::<f32>::fw_desc(&d);
        assert_eq!(
            (g.m, g.n, g.k, g.layout),
            (8192, 14336, 4096, LayoutSku::Rcr)
        );
        assert_eq!((g.lda, g.ldb, g.ldd), (4096, 4096, 14336));
        assert!(g.validate(OP).is_ok());
        let bad = LinearDescriptor { tokens: 0, ..d };
        assert!(matches!(
            LinearPlan::<f32>::fw_desc(&bad).validate(OP),
            Err(Error::InvalidDescriptor { field: "m", .. })
        ));
    }

    #[test]
    fn workspace_rounding() {
        assert_eq!(round_up(0), 0);
        assert_eq!(round_up(1), 256);
        assert_eq!(round_up(512), 512);
    }
}
