//! One prepared cuBLASLt matmul, shared by every GEMM plan.
//!
//! cuBLASLt is column-major. A row-major `D` (`m x n`) is the column-major
//! `D^T` (`n x m`), and `D^T = op(B)^T op(A)^T`, so for a row-major `D` the
//! plan swaps `A` and `B` and computes `D^T`. In both cases an operand is
//! transposed exactly when its storage order differs from `D`'s, which
//! covers all eight [`LayoutSku`]s without copies. A side effect: the
//! cuBLASLt bias (one value per row of the column-major output) is one value
//! per *column* of a row-major `D`, the PyTorch convention, so the fused
//! bias epilogue is used only for a row-major `D`.

use std::sync::Mutex;

use crate::autotune::{self, Choice};
use crate::checks::{check_ctx, ALIGN_BYTES};
use crate::scratch::{fastest, operand_sets, random_bytes};
use baracuda_driver::{
    lt_heuristic, lt_matmul, CudaLib, DeviceBuffer, LtAlgo, LtCompute, LtEpilogue, LtLayout,
    LtLayouts, LtMatmulDesc, LtPointers, LtPreference, LtScalar, Stream,
};
use baracuda_kernels_types::{
    Autotune, BackendKind, DevPtr, DevPtrMut, ElementKind, KernelSku, LayoutSku, MathPrecision,
    MatrixOrder, PlanPreference, PrecisionGuarantee, Result,
};

/// Default workspace cap: 32 MiB, what PyTorch gives cuBLASLt on Hopper.
pub(crate) const DEFAULT_MAX_WORKSPACE: usize = 32 << 20;

/// A GEMM problem in user terms: `D (m x n) = op(A) (m x k) op(B) (k x n)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Problem {
    pub op: &'static str,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub layout: LayoutSku,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
    pub ldd: usize,
    pub a_kind: ElementKind,
    pub b_kind: ElementKind,
    pub c_kind: ElementKind,
    pub d_kind: ElementKind,
    pub compute: LtCompute,
    pub float_scale: bool,
    pub epilogue: LtEpilogue,
    pub bias_kind: Option<ElementKind>,
    pub aux_ld: usize,
    pub batch: Batch,
    pub fp8_scales: bool,
}

/// How a strided batch lays out its entries: their count, and the elements
/// between the matrices (or vectors) of consecutive entries of each
/// operand; a stride of 0 repeats one. [`Batch::ONE`] when not batched.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Batch {
    pub count: usize,
    pub a: usize,
    pub b: usize,
    pub c: usize,
    pub d: usize,
    /// Between bias vectors (the epilogue's `n` values per entry).
    pub bias: usize,
    /// Between aux matrices (the epilogue's saved pre-activation).
    pub aux: usize,
}

impl Batch {
    /// A single GEMM.
    pub const ONE: Batch = Batch {
        count: 1,
        a: 0,
        b: 0,
        c: 0,
        d: 0,
        bias: 0,
        aux: 0,
    };
}

impl Problem {
    /// True when cuBLASLt computes `D^T` with `A` and `B` swapped.
    pub fn swapped(&self) -> bool {
        self.layout.c() == MatrixOrder::RowMajor
    }
}

/// A column-major view (`rows`, `cols` of the stored matrix) of an operand
/// of `r x c` elements stored in `order`.
fn stored(order: MatrixOrder, r: usize, c: usize) -> (usize, usize) {
    match order {
        MatrixOrder::ColMajor => (r, c),
        MatrixOrder::RowMajor => (c, r),
    }
}

/// A prepared matmul: descriptor, layouts and the chosen algorithm.
pub(crate) struct Prepared {
    desc: Mutex<LtMatmulDesc>,
    la: LtLayout,
    lb: LtLayout,
    lc: LtLayout,
    ld: LtLayout,
    pub algo: LtAlgo,
    swap: bool,
    epilogue: LtEpilogue,
    fp8_scales: bool,
    pub measured: bool,
    /// The context the plan was selected on (its epilogue kernels and
    /// cuBLASLt handle live there).
    ctx: usize,
}

/// A measured cuBLASLt algorithm stays in the process's autotune cache
/// (its opaque configuration is not written to the autotune file).
impl Choice for LtAlgo {}

impl Prepared {
    /// Build descriptors and ask the heuristic; `Ok(None)` when cuBLASLt
    /// has no algorithm for the problem.
    pub fn new(stream: &Stream, p: &Problem, pref: &PlanPreference) -> Result<Option<Prepared>> {
        let swap = p.swapped();
        let d_order = p.layout.c();
        // cuBLASLt's A is the user's B when swapped, and vice versa.
        let (ua, ub) = if swap {
            (
                (p.layout.b(), p.k, p.n, p.ldb, p.b_kind),
                (p.layout.a(), p.m, p.k, p.lda, p.a_kind),
            )
        } else {
            (
                (p.layout.a(), p.m, p.k, p.lda, p.a_kind),
                (p.layout.b(), p.k, p.n, p.ldb, p.b_kind),
            )
        };
        let (mc, nc) = if swap { (p.n, p.m) } else { (p.m, p.n) };
        let (ar, ac) = stored(ua.0, ua.1, ua.2);
        let (br, bc) = stored(ub.0, ub.1, ub.2);
        let mut la = LtLayout::new(ua.4, ar, ac, ua.3)?;
        let mut lb = LtLayout::new(ub.4, br, bc, ub.3)?;
        let mut lc = LtLayout::new(p.c_kind, mc, nc, p.ldc)?;
        let mut ld = LtLayout::new(p.d_kind, mc, nc, p.ldd)?;
        let bt = p.batch;
        if bt.count > 1 {
            let (sa, sb) = if swap { (bt.b, bt.a) } else { (bt.a, bt.b) };
            la.set_batch(bt.count, sa)?;
            lb.set_batch(bt.count, sb)?;
            lc.set_batch(bt.count, bt.c)?;
            ld.set_batch(bt.count, bt.d)?;
        }
        let mut desc = LtMatmulDesc::new(p.compute, p.float_scale)?;
        desc.set_transposes(ua.0 != d_order, ub.0 != d_order)?;
        desc.set_epilogue(p.epilogue)?;
        if let Some(k) = p.bias_kind {
            desc.set_bias_type(k)?;
        }
        // The heuristic may inspect the epilogue pointers' alignment; give
        // it aligned placeholders, replaced by the real ones in `enqueue`.
        if p.epilogue.uses_bias() {
            desc.set_bias_pointer(DevPtr::from_addr(256))?;
            if bt.count > 1 {
                desc.set_bias_batch_stride(bt.bias)?;
            }
        }
        if p.epilogue.uses_aux() {
            desc.set_aux(DevPtrMut::from_addr(256), p.aux_ld)?;
            if bt.count > 1 {
                desc.set_aux_batch_stride(bt.aux)?;
            }
        }
        if p.fp8_scales {
            desc.set_scale_pointers(DevPtr::from_addr(256), DevPtr::from_addr(256))?;
        }
        let max_ws = pref.max_workspace_bytes.unwrap_or(DEFAULT_MAX_WORKSPACE);
        let mut lpref = LtPreference::new(max_ws, ALIGN_BYTES as u32)?;
        if pref.deterministic {
            lpref.forbid_split_k_reduction()?;
        }
        let layouts = LtLayouts {
            a: &la,
            b: &lb,
            c: &lc,
            d: &ld,
        };
        let want = if pref.autotune == Autotune::Measured {
            8
        } else {
            1
        };
        let mut algos = lt_heuristic(stream, &desc, &layouts, &lpref, want.max(4))?;
        if pref.deterministic {
            algos.retain(|a| a.is_deterministic());
        }
        if algos.is_empty() {
            return Ok(None);
        }
        let mut prepared = Prepared {
            desc: Mutex::new(desc),
            la,
            lb,
            lc,
            ld,
            algo: algos[0],
            swap,
            epilogue: p.epilogue,
            fp8_scales: p.fp8_scales,
            measured: false,
            ctx: stream.context().id(),
        };
        if pref.autotune == Autotune::Measured && algos.len() > 1 {
            // The workspace cap decides which candidates the heuristic
            // offers, so it is part of the problem.
            let problem = format!("{p:?}:{}:{max_ws}", pref.deterministic);
            let key = autotune::Key {
                family: "gemm",
                library: Some(CudaLib::CublasLt),
                problem: &problem,
            };
            prepared.algo = autotune::get_or_measure(stream, key, || {
                prepared.time_candidates(stream, p, &algos)
            })?;
            prepared.measured = true;
        }
        Ok(Some(prepared))
    }

    /// Time each candidate on scratch buffers (select may allocate and
    /// synchronize; run may not) and return the fastest; the first error
    /// when none of them runs.
    fn time_candidates(&self, stream: &Stream, p: &Problem, algos: &[LtAlgo]) -> Result<LtAlgo> {
        let bt = p.batch;
        let span = |rows: usize, cols: usize, ld: usize, order: MatrixOrder, stride: usize| {
            let (outer, inner) = match order {
                MatrixOrder::RowMajor => (rows, cols),
                MatrixOrder::ColMajor => (cols, rows),
            };
            ((outer - 1) * ld + inner + (bt.count - 1) * stride).max(1)
        };
        let bytes = |k: ElementKind, n: usize| n * k.size_bytes() + 256;
        let a_bytes = bytes(p.a_kind, span(p.m, p.k, p.lda, p.layout.a(), bt.a));
        let b_bytes = bytes(p.b_kind, span(p.k, p.n, p.ldb, p.layout.b(), bt.b));
        let dn = span(
            p.m,
            p.n,
            p.ldd.max(p.ldc).max(p.aux_ld),
            p.layout.c(),
            bt.c.max(bt.d).max(bt.aux),
        );
        // The bias (or bias gradient) of every entry, in the widest type.
        let bias_n = p.m.max(p.n) + (bt.count - 1) * bt.bias;
        // Operand sets that successive launches rotate through (A, B and
        // D; C, bias and aux are shared), and seeded random values:
        // tensor-core power, and so the ranking, depends on the bits.
        let n_sets = operand_sets(stream, a_bytes + b_bytes + bytes(p.d_kind, dn));
        let mut sets = Vec::with_capacity(n_sets);
        for i in 0..n_sets as u64 {
            sets.push((
                random_bytes(stream, p.a_kind, a_bytes, 2 * i + 1)?,
                random_bytes(stream, p.b_kind, b_bytes, 2 * i + 2)?,
                DeviceBuffer::<u8>::zeros(stream, bytes(p.d_kind, dn))?,
            ));
        }
        let c = DeviceBuffer::<u8>::zeros(stream, bytes(p.c_kind, dn))?;
        let mut aux = DeviceBuffer::<u8>::zeros(stream, bytes(p.d_kind, dn))?;
        let mut bias = DeviceBuffer::<u8>::zeros(stream, bytes(ElementKind::F64, bias_n) + 256)?;
        let ws_bytes = algos.iter().map(|a| a.workspace_bytes).max().unwrap_or(0);
        let mut ws = DeviceBuffer::<u8>::zeros(stream, ws_bytes.max(1))?;
        // Two scales 256 bytes apart: fp8 kernels want each 16-byte aligned.
        let mut ones = [0.0f32; 128];
        ones[0] = 1.0;
        ones[64] = 1.0;
        let scales = DeviceBuffer::<f32>::from_host(stream, &ones)?;
        let one = scalar(p.compute, p.float_scale, 1.0);
        let zero = scalar(p.compute, p.float_scale, 0.0);
        let (bias_ptr, aux_ptr) = (bias.as_slice_mut().ptr(), aux.as_slice_mut().ptr());
        let shared = Ptrs {
            mat: LtPointers {
                c: c.as_slice().ptr(),
                workspace: ws.as_slice_mut().ptr(),
                workspace_bytes: ws_bytes,
                ..LtPointers::default()
            },
            bias: bias_ptr.as_const(),
            dbias: bias_ptr,
            aux: aux_ptr,
            scales: Some((scales.as_slice().ptr(), scales.as_slice().ptr().add(64))),
        };
        let ptrs: Vec<Ptrs> = sets
            .iter_mut()
            .map(|(a, b, d)| Ptrs {
                mat: LtPointers {
                    a: a.as_slice().ptr(),
                    b: b.as_slice().ptr(),
                    d: d.as_slice_mut().ptr(),
                    ..shared.mat
                },
                ..shared
            })
            .collect();
        let mut launches = 0usize;
        let timing = fastest(stream, algos.len(), |i| {
            let set = ptrs[launches % ptrs.len()];
            launches += 1;
            // SAFETY: every scratch buffer above covers the span its layout
            // reaches (computed by `span`), plus slack; `fastest`
            // synchronizes the stream before they drop.
            unsafe { self.enqueue_with(stream, &algos[i], one, zero, set) }
        })?;
        timing.log(&format!("{p:?}"), |i| algos[i].describe());
        // When no candidate ran, `run` would fail the same way: fail here,
        // in `select`, instead.
        match (timing.best, timing.first_error) {
            (Some((i, _)), _) => Ok(algos[i]),
            (None, Some(e)) => Err(e),
            (None, None) => Ok(algos[0]),
        }
    }

    /// The SKU variant string: `cublasLt algo 21 tile 18 splitk 1`.
    pub fn describe(&self) -> String {
        let how = if self.measured {
            "measured"
        } else {
            "heuristic"
        };
        format!(
            "cublasLt {} ({how}, {:?})",
            self.algo.describe(),
            self.epilogue
        )
    }

    /// Enqueue the matmul with the chosen algorithm.
    ///
    /// # Safety
    /// As [`lt_matmul`]: every address must cover what the layouts reach.
    pub unsafe fn enqueue(
        &self,
        stream: &Stream,
        alpha: LtScalar,
        beta: LtScalar,
        ptrs: Ptrs,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.enqueue_with(stream, &self.algo, alpha, beta, ptrs) }
    }

    unsafe fn enqueue_with(
        &self,
        stream: &Stream,
        algo: &LtAlgo,
        alpha: LtScalar,
        beta: LtScalar,
        ptrs: Ptrs,
    ) -> Result<()> {
        check_ctx("gemm", "stream", stream, self.ctx)?;
        // Pointers of the epilogue live in the descriptor; the lock keeps
        // concurrent runs of one plan from mixing them. cuBLASLt reads the
        // descriptor while enqueueing, so the lock is held only for that.
        let mut desc = self.desc.lock().unwrap_or_else(|e| e.into_inner());
        match self.epilogue {
            LtEpilogue::BgradB => desc.set_bias_grad_pointer(ptrs.dbias)?,
            e if e.uses_bias() => desc.set_bias_pointer(ptrs.bias)?,
            _ => {}
        }
        if self.epilogue.uses_aux() {
            desc.set_aux_pointer(ptrs.aux)?;
        }
        if self.fp8_scales {
            if let Some((sa, sb)) = ptrs.scales {
                // cuBLASLt's A is the user's B when swapped.
                let (x, y) = if self.swap { (sb, sa) } else { (sa, sb) };
                desc.set_scale_pointers(x, y)?;
            }
        }
        let mut lp = ptrs.mat;
        if self.swap {
            (lp.a, lp.b) = (lp.b, lp.a);
        }
        let layouts = LtLayouts {
            a: &self.la,
            b: &self.lb,
            c: &self.lc,
            d: &self.ld,
        };
        // SAFETY: forwarded from the caller.
        unsafe { lt_matmul(stream, &desc, &layouts, algo, alpha, beta, lp) }
    }
}

/// Device addresses for one enqueue, untyped (the layouts carry the
/// element types): `A`, `B`, `C`, `D` and the workspace in user terms
/// (`A` and `B` not swapped), and the epilogue's vectors, null where the
/// epilogue takes none.
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct Ptrs {
    pub mat: LtPointers,
    /// The bias the bias epilogues read.
    pub bias: DevPtr<u8>,
    /// The bias gradient `BgradB` writes.
    pub dbias: DevPtrMut<u8>,
    /// The pre-activation the aux epilogues write.
    pub aux: DevPtrMut<u8>,
    /// The f32 scales of `A` and `B` (fp8).
    pub scales: Option<(DevPtr<f32>, DevPtr<f32>)>,
}

impl Ptrs {
    /// `D = A B` for `beta = 0`, with `C = D` (unread; the layouts of a
    /// plain matmul's `C` and `D` match) and no epilogue vectors.
    pub fn matmul(a: DevPtr<u8>, b: DevPtr<u8>, d: DevPtrMut<u8>) -> Ptrs {
        Ptrs {
            mat: LtPointers {
                a,
                b,
                c: d.as_const(),
                d,
                ..LtPointers::default()
            },
            ..Ptrs::default()
        }
    }

    /// The same addresses with `bytes` of workspace at `ws`.
    pub fn with_workspace(mut self, ws: DevPtrMut<u8>, bytes: usize) -> Ptrs {
        self.mat.workspace = ws;
        self.mat.workspace_bytes = bytes;
        self
    }
}

/// The SKU of a cuBLASLt-backed plan: `op` on `stream`'s device with
/// operands `element`, what ran (`variant`), its math and accumulator, and
/// whether it sums in a fixed order (then also bit-stable on the same
/// hardware).
pub(crate) fn lt_sku(
    op: &'static str,
    stream: &Stream,
    element: ElementKind,
    variant: String,
    (math, accumulator, deterministic): (MathPrecision, ElementKind, bool),
) -> KernelSku {
    KernelSku {
        op: op.to_string(),
        element,
        backend: BackendKind::CublasLt,
        arch: stream.context().device().arch,
        variant,
        precision: PrecisionGuarantee {
            math,
            accumulator,
            deterministic,
            bit_stable_on_same_hardware: deterministic,
        },
    }
}

/// The host scalar for `v` in the scale type of `compute`.
pub(crate) fn scalar(compute: LtCompute, float_scale: bool, v: f64) -> LtScalar {
    match compute {
        LtCompute::F64 => LtScalar::F64(v),
        LtCompute::I32 if !float_scale => LtScalar::I32(v as i32),
        _ => LtScalar::F32(v as f32),
    }
}
