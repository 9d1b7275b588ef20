//! A fully connected layer, PyTorch's `F.linear` with a fused activation:
//!
//! FW  `Z = X W^T + b`, `Y = act(Z)`               (X: `[tokens, in]`,
//!     W: `[out, in]`, b: `[out]`, Y and Z: `[tokens, out]`, row-major,
//!     each with its own row stride: see [`LinearDescriptor`])
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
//! `dX`, not this layer's `dY`). The measured choices live in `tuning.rs`.

use baracuda_driver::{LtCompute, LtEpilogue, Stream};
use baracuda_kernels_types::{
    Activation, Autotune, DevPtr, DevPtrMut, Element, EpilogueKind, Error, Grad, Grads, KernelSku,
    MatrixMut, MatrixOrder, MatrixRef, PlanPreference, Result, TensorMut, TensorRef, Workspace,
};

use super::args::{check_bias_mut, check_disjoint, GemmC, Region};
use super::epilogue::{
    act_code, kernel_args, skinny_fits, ColSumSplit, EpilogueKernels, SKINNY_MAX_TOKENS,
};
use super::gemm::{compute_for, problem, GemmArgs, GemmDescriptor, GemmPlan};
use super::matmul::{scalar, Prepared, Ptrs};
use super::plain::LinearMatmul;
use crate::checks::{check_at_least, check_grads, check_mat, mat_mut, mat_ref};
use crate::{Backward, Plan};

mod tuning;
use tuning::{fused_db_is_faster, skinny_is_faster};

const OP: &str = "linear";

/// A linear layer. Every matrix is row-major; its leading dimension (the
/// elements between consecutive rows) may exceed its row length, as for a
/// slice of a wider tensor (a fused QKV projection's output, say).
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
    /// Leading dimension of `X` (forward and backward), at least
    /// `in_features`.
    pub ldx: usize,
    /// Leading dimension of `W` (forward and backward), at least
    /// `in_features`.
    pub ldw: usize,
    /// Leading dimension of `Y` and of the saved `Z`, at least
    /// `out_features`.
    pub ldy: usize,
    /// Leading dimension of `dX`, at least `in_features`.
    pub lddx: usize,
    /// Leading dimension of `dW`, at least `in_features`.
    pub lddw: usize,
    /// Leading dimension of `dY`, at least `out_features`.
    pub lddy: usize,
}

impl LinearDescriptor {
    /// A layer with packed matrices and no epilogue.
    pub fn new(tokens: usize, in_features: usize, out_features: usize) -> Self {
        LinearDescriptor {
            tokens,
            in_features,
            out_features,
            epilogue: EpilogueKind::Identity,
            save_aux: false,
            ldx: in_features,
            ldw: in_features,
            ldy: out_features,
            lddx: in_features,
            lddw: in_features,
            lddy: out_features,
        }
    }
    epilogue_builders!();
    /// Set the leading dimensions of `X`, `W` and `Y` (and `Z`).
    #[must_use]
    pub fn with_forward_ld(mut self, ldx: usize, ldw: usize, ldy: usize) -> Self {
        (self.ldx, self.ldw, self.ldy) = (ldx, ldw, ldy);
        self
    }
    /// Set the leading dimensions of `dX`, `dW` and `dY`.
    #[must_use]
    pub fn with_backward_ld(mut self, lddx: usize, lddw: usize, lddy: usize) -> Self {
        (self.lddx, self.lddw, self.lddy) = (lddx, lddw, lddy);
        self
    }

    /// Check sizes and leading dimensions, naming the layer's fields (the
    /// matmuls' own checks follow in `select`).
    pub(crate) fn validate(&self) -> Result<()> {
        let (t, i, o) = (self.tokens, self.in_features, self.out_features);
        for (field, v) in [("tokens", t), ("in_features", i), ("out_features", o)] {
            if v == 0 {
                return Err(Error::InvalidDescriptor {
                    op: OP,
                    field,
                    value: "0".into(),
                    reason: "must be at least 1".into(),
                });
            }
        }
        for (field, ld, row) in [
            ("ldx", self.ldx, i),
            ("ldw", self.ldw, i),
            ("ldy", self.ldy, o),
            ("lddx", self.lddx, i),
            ("lddw", self.lddw, i),
            ("lddy", self.lddy, o),
        ] {
            check_at_least(OP, field, ld, row, || format!("the row length {row}"))?;
        }
        Ok(())
    }

    /// Whether `X`, `W`, `Y` (and `Z`) are packed, as the skinny forward
    /// kernel assumes.
    fn packed_forward(&self) -> bool {
        self.ldx == self.in_features
            && self.ldw == self.in_features
            && self.ldy == self.out_features
    }

    /// Leading dimension of `dZ` in the backward: `dY`'s when there is no
    /// activation (`dZ` is `dY`), else packed (the epilogue kernel writes
    /// it into the workspace).
    fn dz_ld(&self) -> usize {
        if self.epilogue.activation() == Activation::Identity {
            self.lddy
        } else {
            self.out_features
        }
    }

    fn shape(&self) -> (usize, usize, usize) {
        (self.tokens, self.in_features, self.out_features)
    }

    /// The forward GEMM: `Y [t, o] = X [t, i] W^T`, W read column-major.
    fn fw_desc(&self) -> GemmDescriptor {
        LinearMatmul::Forward
            .desc(self.shape())
            .with_ld(self.ldx, self.ldw, self.ldy, self.ldy)
            .with_epilogue(self.epilogue)
            .with_aux(self.save_aux)
    }

    /// `dX [t, i] = dZ [t, o] W [o, i]`.
    fn dx_desc(&self) -> GemmDescriptor {
        let dz = self.dz_ld();
        LinearMatmul::DataGrad
            .desc(self.shape())
            .with_ld(dz, self.ldw, self.lddx, self.lddx)
    }

    /// `dW [o, i] = dZ^T [o, t] X [t, i]`: dZ row-major read as
    /// column-major.
    fn dw_desc(&self) -> GemmDescriptor {
        let dz = self.dz_ld();
        LinearMatmul::WeightGrad
            .desc(self.shape())
            .with_ld(dz, self.ldx, self.lddw, self.lddw)
    }

    /// Check the forward's `x`, `w`, `y` and `aux` on context `ctx` against
    /// the descriptor, and that `y` and `aux` overlap no input and not each
    /// other, under the layer's names (the forward GEMM's checks, bias
    /// included, follow in `run`).
    fn check_fw<T: Element>(&self, ctx: usize, args: &LinearArgs<'_, T>) -> Result<()> {
        let (t, i, o) = self.shape();
        let row = MatrixOrder::RowMajor;
        check_mat(OP, "x", mat_ref(&args.x), (t, i, row, self.ldx), ctx)?;
        check_mat(OP, "w", mat_ref(&args.w), (o, i, row, self.ldw), ctx)?;
        check_mat(OP, "y", mat_mut(&args.y), (t, o, row, self.ldy), ctx)?;
        let mut inputs = vec![("x", Region::matrix(&args.x)), ("w", Region::matrix(&args.w))];
        inputs.extend(args.bias.as_ref().map(|b| ("bias", Region::vector(b))));
        let y = Region::matrix_mut(&args.y);
        check_disjoint(OP, ("y", y), &inputs)?;
        if let Some(z) = &args.aux {
            check_mat(OP, "aux", mat_mut(z), (t, o, row, self.ldy), ctx)?;
            inputs.push(("y", y));
            check_disjoint(OP, ("aux", Region::matrix_mut(z)), &inputs)?;
        }
        Ok(())
    }

    /// Check backward `args` on context `ctx` against the descriptor (as
    /// `run_bw` does), including that no gradient overlaps an input or
    /// another gradient, and return their addresses (null for those not
    /// given).
    fn check_bw<T: Element>(&self, ctx: usize, args: &LinearBwArgs<'_, T>) -> Result<BwAddrs<T>> {
        let (t, i, o) = self.shape();
        let row = MatrixOrder::RowMajor;
        check_mat(OP, "x", mat_ref(&args.x), (t, i, row, self.ldx), ctx)?;
        check_mat(OP, "w", mat_ref(&args.w), (o, i, row, self.ldw), ctx)?;
        check_mat(OP, "dy", mat_ref(&args.dy), (t, o, row, self.lddy), ctx)?;
        let mut reads = vec![
            ("x", Region::matrix(&args.x)),
            ("w", Region::matrix(&args.w)),
            ("dy", Region::matrix(&args.dy)),
        ];
        let act = self.epilogue.activation();
        let z = match (&args.aux, act) {
            (_, Activation::Identity) => DevPtr::NULL,
            (Some(z), _) => {
                check_mat(OP, "aux", mat_ref(z), (t, o, row, self.ldy), ctx)?;
                reads.push(("aux", Region::matrix(z)));
                z.data().ptr()
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
        let mut writes = Vec::new();
        let dx = match &args.dx {
            Some(dx) => {
                check_mat(OP, "dx", mat_mut(dx), (t, i, row, self.lddx), ctx)?;
                writes.push(("dx", Region::matrix_mut(dx)));
                dx.data().ptr()
            }
            None => DevPtrMut::NULL,
        };
        let dw = match &args.dw {
            Some(dw) => {
                check_mat(OP, "dw", mat_mut(dw), (o, i, row, self.lddw), ctx)?;
                writes.push(("dw", Region::matrix_mut(dw)));
                dw.data().ptr()
            }
            None => DevPtrMut::NULL,
        };
        if args.dbias.is_some() && args.dw.is_none() {
            return Err(Error::InvalidArgument {
                op: OP,
                arg: "dbias",
                reason: "dbias is computed with dw; pass dw too".into(),
            });
        }
        let has_bias = self.epilogue.has_bias() && args.dbias.is_some();
        let db = check_bias_mut(OP, "dbias", has_bias, args.dbias.as_ref(), o, ctx)?;
        if let Some(v) = &args.dbias {
            writes.push(("dbias", Region::vector(&v.as_const())));
        }
        // dX is written before dW and db are computed from dY and X (and
        // each gradient before the next), so no gradient may share a byte
        // with an input or another gradient.
        for (k, &out) in writes.iter().enumerate() {
            reads.extend(writes[..k].iter().copied());
            check_disjoint(OP, out, &reads)?;
            reads.truncate(reads.len() - k);
        }
        Ok(BwAddrs {
            x: args.x.data().ptr(),
            w: args.w.data().ptr(),
            dy: args.dy.data().ptr(),
            z,
            dx,
            dw,
            db,
        })
    }
}

/// Device addresses of a checked backward (null: not given).
#[derive(Debug)]
struct BwAddrs<T> {
    x: DevPtr<T>,
    w: DevPtr<T>,
    dy: DevPtr<T>,
    z: DevPtr<T>,
    dx: DevPtrMut<T>,
    dw: DevPtrMut<T>,
    db: DevPtrMut<T>,
}

/// Forward tensors (row-major, leading dimensions as the descriptor's).
#[derive(Debug)]
pub struct LinearArgs<'a, T> {
    /// `X`, `[tokens, in]`.
    pub x: MatrixRef<'a, T>,
    /// `W`, `[out, in]`.
    pub w: MatrixRef<'a, T>,
    /// `b`, `[out]` with unit stride, when the epilogue has a bias.
    pub bias: Option<TensorRef<'a, T, 1>>,
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
    /// `dbias`, `[out]` with unit stride, written (needs `dw`, and a bias
    /// in the epilogue).
    pub dbias: Option<TensorMut<'a, T, 1>>,
}

/// `Y = act(X W^T + b)` and its backward.
///
/// Forward: `Z = X W^T + b`, `Y = act(Z)` (`act` and the bias from the
/// descriptor's epilogue), and `aux = Z` when the descriptor has
/// `save_aux`. Backward: `dZ = dY * act'(Z)` (`dZ = dY` without an
/// activation), `dX = dZ W`, `dW = dZ^T X`, `db = sum over tokens of dZ`,
/// each when its output is given.
///
/// # Shapes
/// `X`, `dX`: `[tokens, in_features]`; `W`, `dW`: `[out_features,
/// in_features]`; `Y`, `aux`, `dY`: `[tokens, out_features]`; bias,
/// `dbias`: `[out_features]`.
/// # Layout
/// Every matrix row-major, with the descriptor's leading dimension (any
/// at least its row length): `ldx`, `ldw`, `ldy` (also `aux`), `lddx`,
/// `lddw`, `lddy`; every matrix, the bias and `dbias` 16-byte aligned,
/// the bias and `dbias` of unit stride. The skinny forward kernel serves
/// only packed `X`, `W` and `Y`; other layouts run cuBLASLt. One
/// workspace of `workspace_size()` bytes serves forward and backward
/// (`bw_workspace_size` is the same for every choice of gradients).
/// # Dtypes
/// `T` = f32 (IEEE unless `allow_tf32`), f64, f16 or bf16, every tensor of
/// forward and backward in `T` (f32 accumulation; f64 for f64). Others:
/// `Unsupported`.
/// # Errors
/// From `select`: `InvalidDescriptor` (a zero size, a leading dimension
/// below its row length, and [`GemmPlan`]'s descriptor checks of the
/// forward matmul); `Unsupported` (a dtype not listed, or no cuBLASLt
/// algorithm for one of the matmuls); `PreferenceRejected` when `pref`
/// forces a backend other than `CublasLt` or caps the workspace below
/// the plan's; the library and JIT errors as [`GemmPlan`]. From `run` and
/// `run_bw`: as [`GemmPlan`], with the layer's argument names (`x`, `w`,
/// `y`, `aux`, `dy`, `dx`, `dw`, `dbias`) for a matrix of the wrong shape,
/// order or leading dimension, and `WorkspaceTooSmall`;
/// `InvalidArgument` when `aux` is missing for a backward through an
/// activation, `dbias` is asked without `dw` or without a bias in the
/// epilogue, or a bias or `dbias` has a stride other than 1.
/// # Aliasing
/// No output may overlap an input or another output: in the forward `y`
/// and `aux` against `x`, `w`, the bias and each other; in the backward
/// `dx`, `dw` and `dbias` against `x`, `w`, `dy`, `aux` and each other
/// (`run_bw` writes `dX` before it reads `dY` and `X` for `dW` and `db`).
/// Each is `InvalidArgument` naming the output, before anything runs.
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

/// Whether the skinny kernel can run the forward of `desc` on a GPU of
/// `sm_count` SMs: its shape rules ([`skinny_fits`]) and packed `X`, `W`
/// and `Y` (it indexes rows by `in_features` and `out_features`).
fn skinny_suits<T: Element>(desc: &LinearDescriptor, sm_count: u32) -> bool {
    let (t, i, o) = desc.shape();
    desc.packed_forward() && skinny_fits(T::KIND, sm_count, t, i, o)
}

impl<T: Element> LinearPlan<T> {
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
    /// `Unsupported` when the layer does not suit it: more than 4 tokens,
    /// `in_features` not a whole number of 16-byte vectors, too few
    /// `out_features` to give each SM 4 warps, or `X`, `W` or `Y` not
    /// packed.
    pub fn with_skinny_forward(mut self, stream: &Stream) -> Result<Self> {
        let d = &self.desc;
        let sms = stream.context().device().sm_count;
        if !skinny_suits::<T>(d, sms) {
            return Err(Error::Unsupported {
                op: OP,
                what: format!(
                    "the skinny forward takes 1 to {SKINNY_MAX_TOKENS} tokens, in_features a \
                     multiple of {} and at least {} out_features on this GPU, with X, W and Y \
                     packed; got {d:?}",
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
        let (t, o) = (d.tokens, d.out_features);
        let act = d.epilogue.activation();
        let p = d.check_bw(ctx, &args)?;
        let ws = workspace.check_ptr(OP, self.workspace_bytes, ctx)?;
        let one = scalar(self.compute, true, 1.0);
        let zero = scalar(self.compute, true, 0.0);
        // dZ (leading dimension `dz_ld`): the epilogue kernel writes it
        // packed into the workspace, or it is dY.
        let dz_ld = d.dz_ld();
        let dz: DevPtr<T> = if act == Activation::Identity {
            p.dy
        } else {
            let dz: DevPtrMut<T> = ws.byte_add(self.dz_offset).cast();
            let mut a = kernel_args(|a| {
                a.push(p.dy)?
                    .push(d.lddy as i64)?
                    .push(p.z)?
                    .push(d.ldy as i64)?;
                a.push(dz)?
                    .push(dz_ld as i64)?
                    .push(t as i64)?
                    .push(o as i64)?
                    .push(act_code(act))?;
                Ok(())
            })?;
            // SAFETY: dy and z were checked to hold tokens x out elements at
            // lddy and ldy; dz lies in the workspace at dz_offset, which
            // `select` sized for tokens x out packed elements (dz_ld = out).
            unsafe {
                self.kernels
                    .dact
                    .launch(stream, self.kernels.cfg(t * o), &mut a)
            }?;
            dz.as_const()
        };
        // Each matmul writes its output only (C = D, beta = 0).
        let ptrs = |plan: &Prepared, (a, b, d): (DevPtr<T>, DevPtr<T>, DevPtrMut<T>)| {
            Ptrs::matmul(a.cast(), b.cast(), d.cast()).with_workspace(ws, plan.algo.workspace_bytes)
        };
        if !p.dx.is_null() {
            let dx = ptrs(&self.dx, (dz, p.w, p.dx));
            // SAFETY: dz holds tokens x out at dz_ld (dy, checked, or the
            // workspace), w and dx were checked at their leading
            // dimensions, which `select` built the matmul for; the
            // workspace's first dz_offset bytes cover every algorithm's
            // workspace.
            unsafe { self.dx.enqueue(stream, one, zero, dx) }?;
        }
        if !p.dw.is_null() {
            let fused = !p.db.is_null() && self.db_fused;
            let plan = match (&self.dw_bgrad, fused) {
                (Some(f), true) => f,
                _ => &self.dw,
            };
            let mut dw = ptrs(plan, (dz, p.x, p.dw));
            dw.dbias = p.db.cast();
            // SAFETY: as above; x and dw were checked, db holds `out`
            // elements.
            unsafe { plan.enqueue(stream, one, zero, dw) }?;
            if let (false, false, Some((split, off))) = (p.db.is_null(), fused, self.col_sum) {
                let partials = ws.byte_add(off);
                // SAFETY: dz holds tokens x out elements at dz_ld, db `out`;
                // `select` sized the workspace past `off` for this split.
                unsafe {
                    self.kernels.col_sum(
                        stream,
                        dz.cast(),
                        (t, o, dz_ld),
                        split,
                        p.db.cast(),
                        partials,
                    )
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
        desc.validate()?;
        let fw = GemmPlan::<T>::select_as(OP, stream, &desc.fw_desc(), pref)?;
        let (compute, _, _) = compute_for(OP, T::KIND, T::KIND, pref)?;
        let (t, o) = (desc.tokens, desc.out_features);
        let no_algo = |what: &str| Error::Unsupported {
            op: OP,
            what: format!("cuBLASLt has no algorithm for the {what} of {desc:?}"),
        };
        let kind = T::KIND;
        let prepare = |g: &GemmDescriptor, e| {
            Prepared::new(
                stream,
                &problem(OP, g, (kind, kind), kind, compute, e),
                pref,
            )
        };
        let dx =
            prepare(&desc.dx_desc(), LtEpilogue::Default)?.ok_or_else(|| no_algo("dX matmul"))?;
        let dwd = desc.dw_desc();
        let dw = prepare(&dwd, LtEpilogue::Default)?.ok_or_else(|| no_algo("dW matmul"))?;
        let dw_bgrad = if desc.epilogue.has_bias() {
            prepare(&dwd, LtEpilogue::BgradB)?
        } else {
            None
        };
        let kernels = EpilogueKernels::load(stream, T::KIND)?;
        let sm_count = stream.context().device().sm_count;
        // Only measured autotuning takes the skinny kernel: on H200 it
        // streams the decode weight (bf16 4096 -> 14336) at 0.0346 ms
        // against cuBLASLt's 0.0324, so it is a candidate, not a default.
        let skinny = pref.autotune == Autotune::Measured
            && skinny_suits::<T>(desc, sm_count)
            && skinny_is_faster::<T>(stream, desc, pref, &fw, &kernels)?;
        let split = desc
            .epilogue
            .has_bias()
            .then(|| kernels.col_sum_split(t, o, desc.dz_ld()));
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
        d.check_fw(stream.context().id(), &args)?;
        // W [out, in] row-major is W^T [in, out] column-major, same ld.
        let wt = MatrixRef::new(
            args.w.data(),
            d.in_features,
            d.out_features,
            d.ldw,
            MatrixOrder::ColMajor,
        )?;
        let gemm_args = GemmArgs {
            a: args.x,
            b: wt,
            c: GemmC::None,
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
            // aux [tokens, out] row-major at the descriptor's leading
            // dimensions, 16-byte aligned, on this context, and the bias
            // `out` elements; `select` chose the skinny kernel only where
            // `skinny_suits` holds, so those matrices are packed; y and aux
            // are exclusive borrows, disjoint from the inputs.
            unsafe {
                let m = p.mat;
                self.kernels
                    .skinny(stream, shape, (m.a, m.b, p.bias), (m.d, p.aux), act)
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
    use baracuda_kernels_types::{DeviceSlice, DeviceSliceMut, LayoutSku};

    #[test]
    fn forward_is_an_rcr_gemm() {
        let d = LinearDescriptor::new(8192, 4096, 14336)
            .with_epilogue(EpilogueKind::BiasGeluTanh)
            .with_aux(true);
        let g = d.fw_desc();
        assert_eq!(
            (g.m, g.n, g.k, g.layout),
            (8192, 14336, 4096, LayoutSku::Rcr)
        );
        assert_eq!((g.lda, g.ldb, g.ldd), (4096, 4096, 14336));
        assert!(g.validate(OP).is_ok());
        assert!(d.validate().is_ok());
        assert!(d.packed_forward());
    }

    #[test]
    fn bad_descriptors_name_the_field() {
        let d = LinearDescriptor::new(8, 16, 24);
        let bad = [
            (
                LinearDescriptor {
                    tokens: 0,
                    ..d.clone()
                },
                "tokens",
            ),
            (LinearDescriptor::new(8, 0, 24), "in_features"),
            (LinearDescriptor::new(8, 16, 0), "out_features"),
            (d.clone().with_forward_ld(15, 16, 24), "ldx"),
            (d.clone().with_forward_ld(16, 15, 24), "ldw"),
            (d.clone().with_forward_ld(16, 16, 23), "ldy"),
            (d.clone().with_backward_ld(15, 16, 24), "lddx"),
            (d.clone().with_backward_ld(16, 15, 24), "lddw"),
            (d.clone().with_backward_ld(16, 16, 23), "lddy"),
        ];
        for (desc, field) in bad {
            let e = desc.validate().unwrap_err();
            assert!(
                matches!(e, Error::InvalidDescriptor { field: f, .. } if f == field),
                "{field}: {e}"
            );
        }
        // Wider is fine, even on one token.
        let wide = LinearDescriptor::new(1, 16, 24)
            .with_forward_ld(17, 100, 25)
            .with_backward_ld(16, 33, 1000);
        assert!(wide.validate().is_ok());
    }

    #[test]
    fn strided_matmuls_take_the_layer_leading_dimensions() {
        let d = LinearDescriptor::new(8, 16, 24)
            .with_forward_ld(20, 18, 32)
            .with_backward_ld(17, 40, 30);
        assert!(!d.packed_forward());
        let f = d.fw_desc();
        assert_eq!((f.lda, f.ldb, f.ldc, f.ldd), (20, 18, 32, 32));
        // No activation: dZ is dY, at dY's leading dimension.
        assert_eq!(d.dz_ld(), 30);
        let x = d.dx_desc();
        assert_eq!((x.m, x.n, x.k), (8, 16, 24));
        assert_eq!((x.lda, x.ldb, x.ldd), (30, 18, 17));
        let w = d.dw_desc();
        assert_eq!((w.m, w.n, w.k, w.layout), (24, 16, 8, LayoutSku::Crr));
        assert_eq!((w.lda, w.ldb, w.ldd), (30, 20, 40));
        // Through an activation dZ is packed in the workspace.
        let a = d.with_epilogue(EpilogueKind::BiasRelu).with_aux(true);
        assert_eq!(a.dz_ld(), 24);
        assert_eq!((a.dx_desc().lda, a.dw_desc().lda), (24, 24));
        for g in [a.fw_desc(), a.dx_desc(), a.dw_desc()] {
            assert!(g.validate(OP).is_ok(), "{g:?}");
        }
        // Only X, W and Y decide the skinny kernel's layout.
        let bw_only = LinearDescriptor::new(1, 4096, 14336).with_backward_ld(4100, 4100, 14340);
        assert!(bw_only.packed_forward());
        assert!(skinny_suits::<half::bf16>(&bw_only, 132));
        let fw_padded = LinearDescriptor::new(1, 4096, 14336).with_forward_ld(4104, 4096, 14336);
        assert!(!skinny_suits::<half::bf16>(&fw_padded, 132));
    }

    fn fake<'a>(addr: u64, len: usize) -> DeviceSlice<'a, f32> {
        // SAFETY: host-only inspection of a fake address.
        unsafe { DeviceSlice::from_raw_parts(addr, len, 1) }
    }
    fn fake_mut<'a>(addr: u64, len: usize) -> DeviceSliceMut<'a, f32> {
        // SAFETY: as above; each fake slice has its own address.
        unsafe { DeviceSliceMut::from_raw_parts(addr, len, 1) }
    }
    fn mat<'a>(addr: u64, (r, c, ld): (usize, usize, usize)) -> MatrixRef<'a, f32> {
        let s = fake(addr, (r - 1) * ld + c);
        MatrixRef::new(s, r, c, ld, MatrixOrder::RowMajor).unwrap()
    }
    fn mat_mut_<'a>(addr: u64, (r, c, ld): (usize, usize, usize)) -> MatrixMut<'a, f32> {
        let s = fake_mut(addr, (r - 1) * ld + c);
        MatrixMut::new(s, r, c, ld, MatrixOrder::RowMajor).unwrap()
    }

    #[test]
    fn argument_checks_use_the_layer_names() {
        let d = LinearDescriptor::new(8, 16, 24)
            .with_epilogue(EpilogueKind::BiasGeluErf)
            .with_aux(true)
            .with_forward_ld(20, 18, 32)
            .with_backward_ld(17, 40, 30);
        let fw = |x, w, y, z| LinearArgs {
            x: mat(0x10000, x),
            w: mat(0x20000, w),
            bias: Some(TensorRef::new(fake(0x30000, 24), [24], [1]).unwrap()),
            y: mat_mut_(0x40000, y),
            aux: Some(mat_mut_(0x50000, z)),
        };
        let (x, w, y) = ((8, 16, 20), (24, 16, 18), (8, 24, 32));
        assert!(d.check_fw(1, &fw(x, w, y, y)).is_ok());
        let e = |r: Result<()>| r.unwrap_err();
        assert!(matches!(
            e(d.check_fw(1, &fw((8, 16, 16), w, y, y))),
            Error::InvalidArgument { arg: "x", .. }
        ));
        assert!(matches!(
            e(d.check_fw(1, &fw(x, (24, 16, 16), y, y))),
            Error::InvalidArgument { arg: "w", .. }
        ));
        assert!(matches!(
            e(d.check_fw(1, &fw(x, w, (8, 23, 32), y))),
            Error::ShapeMismatch { arg: "y", .. }
        ));
        assert!(matches!(
            e(d.check_fw(1, &fw(x, w, y, (8, 24, 24)))),
            Error::InvalidArgument { arg: "aux", .. }
        ));
        assert!(matches!(
            e(d.check_fw(2, &fw(x, w, y, y))),
            Error::ContextMismatch { arg: "x", .. }
        ));

        let dy = (8, 24, 30);
        let bw = |dy, z: Option<_>, dx, dw: Option<_>, db: Option<usize>| LinearBwArgs {
            x: mat(0x10000, x),
            w: mat(0x20000, w),
            dy: mat(0x60000, dy),
            aux: z.map(|z| mat(0x50000, z)),
            dx: Some(mat_mut_(0x70000, dx)),
            dw: dw.map(|dw| mat_mut_(0x80000, dw)),
            dbias: db.map(|n| TensorMut::new(fake_mut(0x90000, n), [n], [1]).unwrap()),
        };
        let (dx, dw) = ((8, 16, 17), (24, 16, 40));
        let p = d
            .check_bw(1, &bw(dy, Some(y), dx, Some(dw), Some(24)))
            .unwrap();
        assert_eq!(
            (p.dy.addr(), p.z.addr(), p.dx.addr(), p.dw.addr(), p.db.addr()),
            (0x60000, 0x50000, 0x70000, 0x80000, 0x90000)
        );
        let e = |r: Result<BwAddrs<f32>>| r.unwrap_err();
        assert!(matches!(
            e(d.check_bw(1, &bw((8, 24, 24), Some(y), dx, Some(dw), None))),
            Error::InvalidArgument { arg: "dy", .. }
        ));
        assert!(matches!(
            e(d.check_bw(1, &bw(dy, None, dx, Some(dw), None))),
            Error::InvalidArgument { arg: "aux", .. }
        ));
        assert!(matches!(
            e(d.check_bw(1, &bw(dy, Some(y), (8, 16, 16), Some(dw), None))),
            Error::InvalidArgument { arg: "dx", .. }
        ));
        assert!(matches!(
            e(d.check_bw(1, &bw(dy, Some(y), dx, Some((24, 16, 16)), None))),
            Error::InvalidArgument { arg: "dw", .. }
        ));
        assert!(matches!(
            e(d.check_bw(1, &bw(dy, Some(y), dx, None, Some(24)))),
            Error::InvalidArgument { arg: "dbias", .. }
        ));
        assert!(matches!(
            e(d.check_bw(1, &bw(dy, Some(y), dx, Some(dw), Some(23)))),
            Error::ShapeMismatch { arg: "dbias", .. }
        ));
    }

    #[test]
    fn outputs_alias_nothing() {
        let d = LinearDescriptor::new(8, 16, 24)
            .with_epilogue(EpilogueKind::BiasGeluErf)
            .with_aux(true);
        let (x, w, y) = ((8, 16, 16), (24, 16, 16), (8, 24, 24));
        let fw = |y_at, z_at| LinearArgs {
            x: mat(0x10000, x),
            w: mat(0x20000, w),
            bias: Some(TensorRef::new(fake(0x30000, 24), [24], [1]).unwrap()),
            y: mat_mut_(y_at, y),
            aux: Some(mat_mut_(z_at, y)),
        };
        assert!(d.check_fw(1, &fw(0x40000, 0x50000)).is_ok());
        for (y_at, z_at, arg) in [
            (0x10000, 0x50000, "y"),
            (0x20000 + 64, 0x50000, "y"),
            (0x30000 - 16, 0x50000, "y"),
            (0x40000, 0x40000 + 32, "aux"),
            (0x40000, 0x10000, "aux"),
        ] {
            let e = d.check_fw(1, &fw(y_at, z_at)).unwrap_err();
            assert!(
                matches!(e, Error::InvalidArgument { arg: a, .. } if a == arg),
                "{y_at:#x} {z_at:#x}: {e}"
            );
        }
        let bw = |dx_at, dw_at, db_at| LinearBwArgs {
            x: mat(0x10000, x),
            w: mat(0x20000, w),
            dy: mat(0x60000, y),
            aux: Some(mat(0x50000, y)),
            dx: Some(mat_mut_(dx_at, x)),
            dw: Some(mat_mut_(dw_at, w)),
            dbias: Some(TensorMut::new(fake_mut(db_at, 24), [24], [1]).unwrap()),
        };
        assert!(d.check_bw(1, &bw(0x70000, 0x80000, 0x90000)).is_ok());
        for (at, arg) in [
            ((0x60000, 0x80000, 0x90000), "dx"),
            ((0x10000, 0x80000, 0x90000), "dx"),
            ((0x70000, 0x50000, 0x90000), "dw"),
            ((0x70000, 0x70000 + 64, 0x90000), "dw"),
            ((0x70000, 0x80000, 0x80000 + 32), "dbias"),
            ((0x70000, 0x80000, 0x20000), "dbias"),
        ] {
            let e = d.check_bw(1, &bw(at.0, at.1, at.2)).unwrap_err();
            assert!(
                matches!(e, Error::InvalidArgument { arg: a, .. } if a == arg),
                "{at:x?}: {e}"
            );
        }
    }

    #[test]
    fn workspace_rounding() {
        assert_eq!(round_up(0), 0);
        assert_eq!(round_up(1), 256);
        assert_eq!(round_up(512), 512);
    }
}
