//! The cuDNN core shared by [`ConvPlan`](super::ConvPlan) and
//! [`ConvTransposePlan`](super::ConvTransposePlan): per direction, one
//! execution plan of cuDNN's backend (graph) API, plus a legacy-API
//! algorithm as fallback. The convolution graph and the engine filters
//! are in `cudnn_graph.rs`, the per-direction plans and the fallback in
//! `cudnn_conv.rs`, both on the driver's generic cuDNN layer; this file
//! decides what to select.
//!
//! Selection, per direction:
//! 1. Backend engine configs from heuristic mode A, then FALLBACK, in rank
//!    order, filtered as PyTorch does: never `DOWN_CONVERT_INPUTS` or
//!    `REDUCED_PRECISION_REDUCTION` (the SKU promises f32 accumulation);
//!    no `NONDETERMINISTIC` when `deterministic`; f32 without `allow_tf32`
//!    takes no `TENSOR_CORE` engine (those run TF32); plans above
//!    `max_workspace_bytes` are dropped. `Autotune::Heuristic` takes the
//!    first plan that finalizes. `Autotune::Measured` times up to
//!    [`measured_candidates`] on the select stream (as
//!    `cudnn.benchmark=True` does) and keeps the fastest; the winner
//!    (engine index + knobs) is cached per problem, filter, device model
//!    and cuDNN version in the crate's autotune cache (`crate::autotune`),
//!    and in `BARACUDA_AUTOTUNE_FILE` when set.
//! 2. A legacy algorithm (`_v7` heuristics, IEEE `CUDNN_FMA_MATH` for f32
//!    unless `allow_tf32`), within the backend plan's workspace. It runs
//!    when an operand is not 16-byte aligned (the backend tensors are
//!    declared 16-byte aligned), and alone when the backend API offers no
//!    engine for the direction; the SKU then names it `legacy:`.
//! 3. A pointwise convolution (1x1 filter, unit stride, no padding, one
//!    group, channels-last) is a linear layer over batch x positions
//!    (`crate::gemm::LinearMatmul`), so cuBLASLt can run each direction.
//!    `Autotune::Measured` times that matmul with cuDNN's candidates and
//!    keeps whichever is fastest (cached like an engine, as
//!    [`GEMM_ENGINE`]); `backend: Some(CublasLt)` forces it for all three
//!    directions (16-byte aligned operands only). In f16 and bf16 with
//!    32, 64, 96 or 128 channels in and out, the narrow kernel
//!    (`crate::gemm::NarrowMatmul`) also competes for the forward and the
//!    data gradient ([`NARROW_ENGINE`]), and `backend: Some(Baracuda)`
//!    forces it for those two (the weight gradient, a reduction over the
//!    positions, stays with cuDNN). Otherwise cuDNN runs.

use std::sync::{Arc, OnceLock};

use baracuda_driver::{
    ConvMath, CudaLib, CudnnHandle, DeviceBuffer, Function, LaunchArgs, LaunchConfig, Stream,
};
use baracuda_kernels_types::{
    Autotune, BackendKind, DevPtr, DevPtrMut, ElementKind, Error, KernelSku, MathPrecision, PlanPreference,
    PrecisionGuarantee, Result, Workspace,
};

use super::cudnn_conv::CudnnConv;
use super::cudnn_graph::{
    ConvAlgo, ConvApi, ConvDirection, CudnnConvProblem, EngineFilter, Operands,
};
use super::descriptor::{full_shape_i32};
use crate::autotune::{self, Choice};
use crate::kernel_sources::{typed_spec, CONV_BIAS, CONV_LAYOUT};
use crate::gemm::{narrow_fits, LinearKernel, LinearMatmul, NarrowMatmul, PlainMatmul};
use crate::scratch::{fastest, operand_sets, random_bytes};
use crate::checks::{check_ctx, check_i32_elems};

/// Backend plans timed per direction by `Autotune::Measured`, taken in
/// heuristic rank order, unless `BARACUDA_CONV_CANDIDATES` says otherwise.
/// It bounds select time: after 50 ms of heating, each candidate is timed
/// in five bursts of about 1 ms (`scratch::fastest`), so 12 candidates
/// cost ~110 ms per direction (plus plan finalization).
pub(crate) const MEASURED_CANDIDATES: usize = 12;

/// [`MEASURED_CANDIDATES`], or `BARACUDA_CONV_CANDIDATES` (1 to 256) when
/// set: a wider search for one process, to find which engine a faster
/// library choice comes from (read once).
fn measured_candidates() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("BARACUDA_CONV_CANDIDATES")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .map_or(MEASURED_CANDIDATES, |n| n.clamp(1, 256))
    })
}

/// Timing scratch of `Autotune::Measured` is capped at 1 GiB of workspace
/// when the preference sets no cap.
const MEASURED_WORKSPACE_CAP: usize = 1 << 30;

/// The engine id an autotune cache entry records for a direction that
/// cuBLASLt runs (a pointwise convolution's matmul; no cuDNN engine has
/// this id).
const GEMM_ENGINE: u32 = u32::MAX;

/// The engine id an autotune cache entry records for a direction that the
/// narrow kernel runs.
const NARROW_ENGINE: u32 = u32::MAX - 1;

/// The matmuls that compete with cuDNN for `dir` of a pointwise
/// convolution of `shape` under measured autotuning: cuBLASLt's, then the
/// narrow kernel where it fits. `only` restricts them to the one a cache
/// entry recorded.
fn contenders(
    op: &'static str,
    stream: &Stream,
    dir: ConvDirection,
    shape: (usize, usize, usize),
    p: &CudnnConvProblem,
    pref: &PlanPreference,
    only: Option<u32>,
) -> Result<Vec<LinearKernel>> {
    let role = linear_role(dir);
    let mut v = Vec::new();
    if only.is_none_or(|id| id == GEMM_ENGINE) {
        v.extend(PlainMatmul::new(op, stream, role, shape, p.dtype, pref)?.map(LinearKernel::Lt));
    }
    if only.is_none_or(|id| id == NARROW_ENGINE) {
        v.extend(NarrowMatmul::new(stream, role, shape, p.dtype)?.map(LinearKernel::Narrow));
    }
    Ok(v)
}

/// The cache id of a contender.
fn contender_id(k: &LinearKernel) -> u32 {
    match k {
        LinearKernel::Lt(_) => GEMM_ENGINE,
        LinearKernel::Narrow(_) => NARROW_ENGINE,
    }
}

/// `(M, Cin, Cout)` of a convolution that is a linear layer over
/// `M` = batch x positions: channels-last, every filter extent 1, unit
/// stride, no padding, one group, a float dtype. Dilation does not matter
/// with a 1-wide filter.
fn pointwise_shape(p: &CudnnConvProblem) -> Option<(usize, usize, usize)> {
    let float = matches!(
        p.dtype,
        ElementKind::F32 | ElementKind::F64 | ElementKind::F16 | ElementKind::Bf16
    );
    let ok = float
        && p.channels_last
        && p.groups == 1
        && p.w_spatial.iter().all(|&k| k == 1)
        && p.stride.iter().all(|&s| s == 1)
        && p.pad.iter().chain(&p.pad_end).all(|&q| q == 0)
        && p.x_spatial == p.y_spatial;
    let m = p.x_spatial.iter().map(|&e| e as usize).product::<usize>() * p.batch as usize;
    ok.then_some((m, p.c_in as usize, p.c_out as usize))
}

/// The linear-layer matmul of a pointwise convolution's direction.
fn linear_role(dir: ConvDirection) -> LinearMatmul {
    match dir {
        ConvDirection::Forward => LinearMatmul::Forward,
        ConvDirection::BackwardData => LinearMatmul::DataGrad,
        ConvDirection::BackwardFilter => LinearMatmul::WeightGrad,
    }
}

/// The `(A, B, D)` of that matmul from a direction's operands in the order
/// cuDNN takes them: forward `(x, w, y)` gives `(x, w, y)`, backward data
/// `(w, dy, dx)` gives `(dy, w, dx)`, backward filter `(x, dy, dw)` gives
/// `(dy, x, dw)`.
fn gemm_operands(dir: ConvDirection, (a, b, c): Operands) -> Operands {
    match dir {
        ConvDirection::Forward => (a, b, c),
        ConvDirection::BackwardData => (b, a, c),
        ConvDirection::BackwardFilter => (b, a, c),
    }
}

/// The elementwise kernels of `kernels/conv/bias.cu`.
#[derive(Clone, Debug)]
pub(crate) struct Epilogue {
    pub bias_act: Function,
    pub bias_bw: Function,
    pub relu_bw: Function,
    pub pad: Function,
}

/// Backend plans, legacy fallbacks and their workspaces.
pub(crate) struct ConvCore {
    pub(crate) cudnn: CudnnConv,
    pub(crate) workspace: [usize; 3],
    pub(crate) sku: KernelSku,
    pub(crate) kernels: std::result::Result<Epilogue, Error>,
    /// f64 channels-last problems: cuDNN runs channels-first on copies.
    shim: Option<LayoutShim>,
    /// Directions a matmul runs (pointwise convolutions): cuBLASLt's or
    /// the narrow kernel.
    gemm: [Option<LinearKernel>; 3],
    /// cuBLASLt was forced: no cuDNN path to fall back on.
    gemm_only: bool,
    /// The handle the plans were finalized with, kept alive with them.
    _handle: Arc<CudnnHandle>,
    /// The context the plans, kernels and handle belong to.
    ctx: usize,
}

/// cuDNN 9 has no f64 algorithm for channels-last (NHWC-strided) tensors in
/// any direction (measured on H200). Such a plan selects cuDNN for the
/// channels-first problem and runs it on transposed copies in its
/// workspace: each input of a direction is copied to channels-first, cuDNN
/// runs, and the output is copied back. The copies cost two passes over
/// each operand; the workspace holds cuDNN's bytes, then x, w and y.
struct LayoutShim {
    transpose: Function,
    /// `(outer, spatial, channels)` of x, w and y as stored channels-last.
    x: [usize; 3],
    w: [usize; 3],
    y: [usize; 3],
    /// cuDNN's own workspace bytes per direction (the copies follow).
    cudnn_ws: [usize; 3],
}

/// Byte offset alignment of the copies in the workspace.
const SLOT_ALIGN: usize = 256;

fn slot_bytes(dims: [usize; 3]) -> usize {
    (dims.iter().product::<usize>() * std::mem::size_of::<f64>()).next_multiple_of(SLOT_ALIGN)
}

impl LayoutShim {
    /// Workspace bytes of direction `i`: cuDNN's, then the three copies.
    fn workspace(&self, i: usize) -> usize {
        self.cudnn_ws[i].next_multiple_of(SLOT_ALIGN)
            + slot_bytes(self.x)
            + slot_bytes(self.w)
            + slot_bytes(self.y)
    }

    /// `out[b][j][i] = in[b][i][j]` over `batch x rows x cols` f64.
    fn transpose(
        &self,
        stream: &Stream,
        from: DevPtr<f64>,
        to: DevPtrMut<f64>,
        (batch, rows, cols): (usize, usize, usize),
    ) -> Result<()> {
        let tiles = rows.div_ceil(32) * cols.div_ceil(32);
        let tiles = u32::try_from(tiles)
            .ok()
            .filter(|&t| t <= i32::MAX as u32)
            .ok_or_else(|| Error::Unsupported {
                op: "conv",
                what: format!("a {rows} x {cols} channels-last copy ({tiles} tiles)"),
            })?;
        let cfg = LaunchConfig {
            grid: (tiles, 1, batch.min(65_535) as u32),
            block: (32, 8, 1),
            smem_bytes: 0,
        };
        let mut a = LaunchArgs::new();
        a.push(from)?;
        a.push(to)?;
        a.push(batch as u64)?;
        a.push(rows as u64)?;
        a.push(cols as u64)?;
        // SAFETY: `from` and `to` each hold batch x rows x cols f64 (a
        // checked user operand or a workspace slot sized by `slot_bytes`);
        // the arguments match transpose_batched's signature.
        unsafe { self.transpose.launch(stream, cfg, &mut a) }
    }

    /// Run direction `dir` on `ops` (user addresses, channels-last, in the
    /// direction's order) through channels-first copies at `ws`.
    fn run(
        &self,
        cudnn: &CudnnConv,
        handle: &CudnnHandle,
        stream: &Stream,
        dir: ConvDirection,
        ops: Operands,
        ws: DevPtrMut<u8>,
    ) -> Result<()> {
        let i = dir.index();
        let xs = ws.byte_add(self.cudnn_ws[i].next_multiple_of(SLOT_ALIGN));
        let wsl = xs.byte_add(slot_bytes(self.x));
        let ys = wsl.byte_add(slot_bytes(self.w));
        // (user address, slot, dims) of x, w, y; which one is the output.
        let (a, b, out) = (ops.0, ops.1, ops.2.as_const());
        let (x, w, y) = match dir {
            ConvDirection::Forward => (a, b, out),
            ConvDirection::BackwardData => (out, a, b),
            ConvDirection::BackwardFilter => (a, out, b),
        };
        let roles = [(x, xs, self.x), (w, wsl, self.w), (y, ys, self.y)];
        let written = match dir {
            ConvDirection::Forward => 2,
            ConvDirection::BackwardData => 0,
            ConvDirection::BackwardFilter => 1,
        };
        for (k, &(user, slot, [o, sp, c])) in roles.iter().enumerate() {
            if k != written {
                self.transpose(stream, user.cast(), slot.cast(), (o, sp, c))?;
            }
        }
        let slots = match dir {
            ConvDirection::Forward => (xs.as_const(), wsl.as_const(), ys),
            ConvDirection::BackwardData => (wsl.as_const(), ys.as_const(), xs),
            ConvDirection::BackwardFilter => (xs.as_const(), ys.as_const(), wsl),
        };
        // SAFETY: the slots hold channels-first copies of this problem's
        // operands (sized by `slot_bytes`, 256-byte aligned in a workspace
        // the caller checked), cuDNN's part of the workspace comes first.
        unsafe { cudnn.run(handle, stream, dir, slots, ws, self.cudnn_ws[i]) }?;
        let (_, slot, [o, sp, c]) = roles[written];
        self.transpose(stream, slot.as_const().cast(), ops.2.cast(), (o, c, sp))
    }
}

impl std::fmt::Debug for ConvCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConvCore")
            .field("cudnn", &self.cudnn)
            .field("workspace", &self.workspace)
            .field("sku", &self.sku)
            .finish_non_exhaustive()
    }
}

/// How the legacy math mode is set for the query and for the run.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
struct MathPolicy {
    query: ConvMath,
    /// When set, the run uses this mode whatever cuDNN reported (IEEE f32).
    forced: Option<ConvMath>,
}

fn math_policy(kind: ElementKind, allow_tf32: bool) -> MathPolicy {
    match kind {
        ElementKind::F32 if !allow_tf32 => MathPolicy {
            query: ConvMath::Fma,
            forced: Some(ConvMath::Fma),
        },
        ElementKind::F16 | ElementKind::Bf16 => MathPolicy {
            query: ConvMath::TensorOp,
            forced: None,
        },
        _ => MathPolicy {
            query: ConvMath::Default,
            forced: None,
        },
    }
}

/// A cached backend engine config: engine global index and knob choices.
type CacheEntry = [(u32, Vec<(u32, i64)>); 3];

/// A measured configuration persists as `engine:knob=value,...` per
/// direction (fw, bw_data, dw), joined by `|`.
impl Choice for CacheEntry {
    fn encode(&self) -> Option<String> {
        let dirs: Vec<String> = self
            .iter()
            .map(|(id, knobs)| {
                let k: Vec<String> = knobs.iter().map(|(t, v)| format!("{t}={v}")).collect();
                format!("{id}:{}", k.join(","))
            })
            .collect();
        Some(dirs.join("|"))
    }

    fn decode(text: &str) -> Option<CacheEntry> {
        let mut parts = text.split('|');
        let mut e: CacheEntry = Default::default();
        for slot in e.iter_mut() {
            let (id, knobs) = parts.next()?.split_once(':')?;
            let knobs = knobs
                .split(',')
                .filter(|k| !k.is_empty())
                .map(|k| {
                    let (t, v) = k.split_once('=')?;
                    Some((t.parse().ok()?, v.parse().ok()?))
                })
                .collect::<Option<Vec<_>>>()?;
            *slot = (id.parse().ok()?, knobs);
        }
        parts.next().is_none().then_some(e)
    }
}

fn elem_count(n: i32, c: i32, sp: &[i32]) -> usize {
    sp.iter()
        .fold(n as usize * c as usize, |a, &d| a * d as usize)
}

/// Device scratch operands for timing candidates (allocated once per
/// select; run never allocates): [`operand_sets`] sets of x, y and w, which
/// successive timed launches rotate through.
struct Scratch {
    sets: Vec<[DeviceBuffer<u8>; 3]>,
}

impl Scratch {
    fn new(stream: &Stream, p: &CudnnConvProblem) -> Result<Scratch> {
        let b = p.dtype.size_bytes();
        let xb = elem_count(p.batch, p.c_in, &p.x_spatial) * b;
        let yb = elem_count(p.batch, p.c_out, &p.y_spatial) * b;
        let wb = elem_count(p.c_out, p.c_in / p.groups, &p.w_spatial) * b;
        // Seeded random values in [-1, 1): engines are timed on data like
        // real data (tensor-core power, and so clocks, depend on the bits;
        // a constant or zero fill favours the wrong engine).
        let n = operand_sets(stream, xb + yb + wb);
        let mut sets = Vec::with_capacity(n);
        for i in 0..n as u64 {
            sets.push([
                random_bytes(stream, p.dtype, xb.max(1), 3 * i + 1)?,
                random_bytes(stream, p.dtype, yb.max(1), 3 * i + 2)?,
                random_bytes(stream, p.dtype, wb.max(1), 3 * i + 3)?,
            ]);
        }
        Ok(Scratch { sets })
    }

    /// The operands of `dir` in set `k % sets` (the order
    /// `CudnnConv::run_candidate` takes them in).
    fn ops(&self, dir: ConvDirection, k: usize) -> Operands {
        let [x, y, w] = &self.sets[k % self.sets.len()];
        let (x, y, w) = (x.as_slice().ptr(), y.as_slice().ptr(), w.as_slice().ptr());
        // The timed runs write the direction's output into its set's
        // buffer: scratch that nothing reads, owned by this struct.
        match dir {
            ConvDirection::Forward => (x, w, DevPtrMut::from_addr(y.addr())),
            ConvDirection::BackwardData => (w, y, DevPtrMut::from_addr(x.addr())),
            ConvDirection::BackwardFilter => (x, y, DevPtrMut::from_addr(w.addr())),
        }
    }
}

/// The elementwise kernels of `dtype` (an error kept for the passes that
/// need them to report when they cannot be built).
fn epilogue(
    op: &'static str,
    ctx: &baracuda_driver::Context,
    dtype: ElementKind,
) -> std::result::Result<Epilogue, Error> {
    typed_spec(&CONV_BIAS, dtype)
        .ok_or_else(|| Error::Unsupported {
            op,
            what: format!("bias kernels for {dtype}"),
        })
        .and_then(|spec| ctx.module(&spec))
        .and_then(|m| {
            Ok(Epilogue {
                bias_act: m.function("bias_act_fw")?,
                bias_bw: m.function("bias_bw")?,
                relu_bw: m.function("relu_bw")?,
                pad: m.function("pad_copy")?,
            })
        })
}

impl ConvCore {
    pub(crate) fn select(
        op: &'static str,
        stream: &Stream,
        p: CudnnConvProblem,
        pref: &PlanPreference,
        sku_op: &str,
    ) -> Result<ConvCore> {
        let pointwise = pointwise_shape(&p);
        // The narrow kernel's two directions, when it fits both.
        let narrow = pointwise.filter(|&s| {
            [LinearMatmul::Forward, LinearMatmul::DataGrad]
                .iter()
                .all(|&r| narrow_fits(r, s, p.dtype))
        });
        match (pointwise, narrow) {
            (Some(_), Some(_)) => pref.check_backend(
                op,
                &[
                    BackendKind::Cudnn,
                    BackendKind::CublasLt,
                    BackendKind::Baracuda,
                ],
            )?,
            (Some(_), None) => {
                pref.check_backend(op, &[BackendKind::Cudnn, BackendKind::CublasLt])?
            }
            _ => pref.check_backend(op, &[BackendKind::Cudnn])?,
        }
        let forced_narrow = pref.backend == Some(BackendKind::Baracuda);
        if let (Some(shape), Some(BackendKind::CublasLt)) = (pointwise, pref.backend) {
            return Self::select_gemm(op, stream, &p, shape, pref, sku_op);
        }
        let mut p = p;
        let shim_dims = (p.dtype == ElementKind::F64 && p.channels_last).then(|| {
            p.channels_last = false;
            let prod = |v: &[i32]| v.iter().map(|&e| e as usize).product::<usize>();
            let g = p.groups.max(1) as usize;
            [
                [p.batch as usize, prod(&p.x_spatial), p.c_in as usize],
                [p.c_out as usize, prod(&p.w_spatial), p.c_in as usize / g],
                [p.batch as usize, prod(&p.y_spatial), p.c_out as usize],
            ]
        });
        let x_shape = full_shape_i32(p.batch, p.c_in, &p.x_spatial);
        let y_shape = full_shape_i32(p.batch, p.c_out, &p.y_spatial);
        check_i32_elems(op, "x", &x_shape)?;
        check_i32_elems(op, "y", &y_shape)?;
        let ctx = stream.context();
        let handle = ctx.handle::<CudnnHandle>()?;
        let mut cudnn = CudnnConv::new(&p)?;
        let policy = math_policy(p.dtype, pref.allow_tf32);
        let measured = pref.autotune == Autotune::Measured;
        let filter = EngineFilter {
            deterministic: pref.deterministic,
            allow_tf32: pref.allow_tf32,
            max_workspace_bytes: match (pref.max_workspace_bytes, measured) {
                (Some(cap), _) => Some(cap),
                (None, true) => Some(MEASURED_WORKSPACE_CAP),
                (None, false) => None,
            },
        };
        let dev = ctx.device();
        // The user's layout too: an f64 channels-last problem runs cuDNN on
        // the channels-first one (`p` above), but only it may take the
        // pointwise matmul.
        let problem = format!(
            "{p:?}|{filter:?}|pointwise={}|forced={:?}",
            pointwise.is_some(),
            pref.backend
        );
        let key = autotune::Key {
            family: "conv",
            library: Some(CudaLib::Cudnn),
            problem: &problem,
        };
        let cached: Option<CacheEntry> = if measured {
            autotune::lookup(stream, key)
        } else {
            None
        };
        let mut scratch: Option<Scratch> = None;
        let mut gemm: [Option<LinearKernel>; 3] = Default::default();
        let mut workspace = [0usize; 3];
        let mut entry: CacheEntry = Default::default();
        let mut all_backend = true;
        for dir in ConvDirection::ALL {
            let i = dir.index();
            let mut rejected = Vec::new();
            let mut backend_ws = None;
            let mut won = None;
            if let Some(c) = &cached {
                let (id, knobs) = &c[i];
                if *id == GEMM_ENGINE || *id == NARROW_ENGINE {
                    won = Some(*id);
                } else {
                    backend_ws = cudnn
                        .engine_from_config(&handle, stream, dir, *id, knobs, &filter)
                        .and_then(|_| cudnn.choose_candidate(dir, 0, -1.0))
                        .ok();
                }
            }
            // A pointwise convolution's matmuls compete under measured
            // autotuning (not when the narrow kernel is forced).
            let open = won.is_some() || backend_ws.is_none();
            let mut contender = match (pointwise, measured && !forced_narrow, open) {
                (Some(shape), true, true) => contenders(op, stream, dir, shape, &p, pref, won)?,
                _ => Vec::new(),
            };
            if won.is_some() && !contender.is_empty() {
                gemm[i] = contender.pop();
            } else if backend_ws.is_none() {
                let max = if measured { measured_candidates() } else { 1 };
                match cudnn.engine_candidates(&handle, stream, dir, &filter, max) {
                    Ok((cands, why)) => {
                        rejected.extend(why);
                        if !cands.is_empty() {
                            let pick = if measured && (cands.len() > 1 || !contender.is_empty()) {
                                if scratch.is_none() {
                                    scratch = Some(Scratch::new(stream, &p)?);
                                }
                                let s = scratch.as_ref().ok_or_else(|| Error::Unsupported {
                                    op,
                                    what: "timing scratch".into(),
                                })?;
                                let ranked = time_candidates(
                                    &cudnn,
                                    &handle,
                                    stream,
                                    dir,
                                    (&cands, &contender),
                                    s,
                                    &p,
                                )?;
                                if let Some(w) = ranked.matmul {
                                    gemm[i] = Some(contender.swap_remove(w));
                                }
                                ranked.cudnn
                            } else {
                                Some((0, -1.0))
                            };
                            if let Some((idx, ms)) = pick {
                                backend_ws = Some(cudnn.choose_candidate(dir, idx, ms)?);
                            }
                        }
                    }
                    Err(e) => rejected.push(format!("backend graph: {e}")),
                }
            }
            // `backend: Baracuda`: the narrow kernel takes the forward and
            // the data gradient; cuDNN's plan stays for unaligned operands.
            if let (true, Some(shape), false) =
                (forced_narrow, narrow, dir == ConvDirection::BackwardFilter)
            {
                let n = NarrowMatmul::new(stream, linear_role(dir), shape, p.dtype)?.ok_or_else(
                    || Error::PreferenceRejected {
                        op,
                        field: "backend",
                        reason: format!("the narrow kernel does not fit the {dir:?} pass of {p:?}"),
                    },
                )?;
                gemm[i] = Some(LinearKernel::Narrow(n));
            }
            if let Some(g) = &gemm[i] {
                entry[i] = (contender_id(g), Vec::new());
            } else if let Some(a) = cudnn.chosen(dir).filter(|a| a.api == ConvApi::Backend) {
                entry[i] = (a.id, a.knobs);
            } else {
                all_backend = false;
            }
            // The legacy fallback, within the backend plan's workspace.
            let legacy_cap = backend_ws.or(pref.max_workspace_bytes);
            let legacy = Self::pick_legacy(
                &mut cudnn,
                &handle,
                stream,
                dir,
                policy,
                pref.deterministic,
                legacy_cap,
                &mut rejected,
            );
            let gemm_ws = gemm[i].as_ref().map(LinearKernel::workspace_bytes);
            workspace[i] = match (backend_ws, legacy, gemm_ws) {
                (Some(b), Some(l), g) => b.max(l).max(g.unwrap_or(0)),
                (Some(b), None, g) => b.max(g.unwrap_or(0)),
                (None, Some(l), g) => l.max(g.unwrap_or(0)),
                (None, None, Some(g)) => g,
                (None, None, None) => return Err(no_algorithm(op, dir, pref, rejected)),
            };
        }
        if measured && all_backend && cached.is_none() {
            autotune::insert(stream, key, entry.clone());
        }
        let mut sku = Self::sku(&cudnn, &gemm, &p, pref, sku_op, dev.arch);
        if forced_narrow {
            sku.backend = BackendKind::Baracuda;
        }
        let shim = match shim_dims {
            None => None,
            Some([x, w, y]) => {
                let spec = typed_spec(&CONV_LAYOUT, p.dtype).ok_or_else(|| Error::Unsupported {
                    op,
                    what: format!("layout copies for {}", p.dtype),
                })?;
                let shim = LayoutShim {
                    transpose: ctx.module(&spec)?.function("transpose_batched")?,
                    x,
                    w,
                    y,
                    cudnn_ws: workspace,
                };
                for (i, ws) in workspace.iter_mut().enumerate() {
                    let g = gemm[i].as_ref().map_or(0, LinearKernel::workspace_bytes);
                    *ws = shim.workspace(i).max(g);
                    pref.check_workspace(op, *ws)?;
                }
                sku.variant = format!(
                    "channels_last through channels-first copies in the workspace (cuDNN has no f64 NHWC algorithm); {}",
                    sku.variant
                );
                Some(shim)
            }
        };
        Ok(ConvCore {
            cudnn,
            workspace,
            sku,
            kernels: epilogue(op, ctx, p.dtype),
            shim,
            gemm,
            gemm_only: false,
            _handle: handle,
            ctx: ctx.id(),
        })
    }

    /// `backend: Some(CublasLt)` on a pointwise convolution: every
    /// direction through its cuBLASLt matmul, no cuDNN plan.
    fn select_gemm(
        op: &'static str,
        stream: &Stream,
        p: &CudnnConvProblem,
        shape: (usize, usize, usize),
        pref: &PlanPreference,
        sku_op: &str,
    ) -> Result<ConvCore> {
        let ctx = stream.context();
        let mut gemm: [Option<LinearKernel>; 3] = Default::default();
        let mut workspace = [0usize; 3];
        for dir in ConvDirection::ALL {
            let i = dir.index();
            let g = PlainMatmul::new(op, stream, linear_role(dir), shape, p.dtype, pref)?
                .ok_or_else(|| Error::PreferenceRejected {
                    op,
                    field: "backend",
                    reason: format!("cuBLASLt offers no algorithm for the {dir:?} matmul of {p:?}"),
                })?;
            workspace[i] = g.workspace_bytes();
            pref.check_workspace(op, workspace[i])?;
            gemm[i] = Some(LinearKernel::Lt(g));
        }
        // Descriptors only (no plan is built), for `ConvPlan::algorithm`
        // and the SKU; channels-first, which cuDNN describes in every dtype.
        let cudnn = CudnnConv::new(&CudnnConvProblem {
            channels_last: false,
            ..p.clone()
        })?;
        let mut sku = Self::sku(&cudnn, &gemm, p, pref, sku_op, ctx.device().arch);
        sku.backend = BackendKind::CublasLt;
        Ok(ConvCore {
            cudnn,
            workspace,
            sku,
            kernels: epilogue(op, ctx, p.dtype),
            shim: None,
            gemm,
            gemm_only: true,
            _handle: ctx.handle::<CudnnHandle>()?,
            ctx: ctx.id(),
        })
    }

    fn sku(
        cudnn: &CudnnConv,
        gemm: &[Option<LinearKernel>; 3],
        p: &CudnnConvProblem,
        pref: &PlanPreference,
        sku_op: &str,
        arch: baracuda_kernels_types::ArchSku,
    ) -> KernelSku {
        let mut all: Vec<ConvAlgo> = Vec::new();
        let mut parts = Vec::new();
        let (mut gemm_det, mut gemm_tf32) = (true, false);
        for dir in ConvDirection::ALL {
            let name = match dir {
                ConvDirection::Forward => "fw",
                ConvDirection::BackwardData => "bw_data",
                ConvDirection::BackwardFilter => "dw",
            };
            if let Some(g) = &gemm[dir.index()] {
                // Aligned operands take the matmul, others the legacy
                // algorithm (as for a backend plan).
                gemm_det &= g.is_deterministic();
                gemm_tf32 |= g.is_tf32();
                let mut part = format!("{name}={} ws={}", g.describe(), g.workspace_bytes());
                if let Some(l) = cudnn.legacy(dir) {
                    part += &format!(" unaligned={}/{}", l.name(), l.math.name());
                    all.push(l);
                }
                parts.push(part);
                continue;
            }
            let Some(a) = cudnn.chosen(dir) else { continue };
            let mut part = format!(
                "{name}={}/{} ws={}",
                a.name(),
                a.math.name(),
                a.workspace_bytes
            );
            if a.api == ConvApi::Backend {
                if let Some(l) = cudnn.legacy(dir) {
                    part += &format!(" unaligned={}/{}", l.name(), l.math.name());
                    all.push(l);
                }
            }
            all.push(a);
            parts.push(part);
        }
        let deterministic = gemm_det && all.iter().all(|a| a.deterministic);
        let tf32 = p.dtype == ElementKind::F32
            && (gemm_tf32 || all.iter().any(|a| a.math != ConvMath::Fma));
        let math = match p.dtype {
            ElementKind::F64 => MathPrecision::F64,
            ElementKind::F16 => MathPrecision::F16,
            ElementKind::Bf16 => MathPrecision::Bf16,
            _ if tf32 => MathPrecision::Tf32,
            _ => MathPrecision::F32,
        };
        let layout = if p.channels_last {
            "channels_last"
        } else {
            "channels_first"
        };
        KernelSku {
            op: sku_op.to_string(),
            element: p.dtype,
            backend: BackendKind::Cudnn,
            arch,
            variant: format!("{layout}; cudnn backend API; {}", parts.join("; ")),
            precision: PrecisionGuarantee {
                math,
                accumulator: p.dtype.float_accumulator(),
                deterministic,
                bit_stable_on_same_hardware: deterministic && pref.autotune == Autotune::Heuristic,
            },
        }
    }

    /// The first legacy `_v7` algorithm that passes the filters, chosen
    /// as the direction's fallback; its workspace, or None (reasons go to
    /// `rejected`).
    #[allow(clippy::too_many_arguments)] // the pieces of one selection step
    fn pick_legacy(
        cudnn: &mut CudnnConv,
        handle: &CudnnHandle,
        stream: &Stream,
        dir: ConvDirection,
        policy: MathPolicy,
        deterministic: bool,
        cap: Option<usize>,
        rejected: &mut Vec<String>,
    ) -> Option<usize> {
        let cands = match cudnn.heuristics(handle, stream, dir, policy.query) {
            Ok(c) => c,
            Err(e) => {
                rejected.push(format!("legacy heuristics: {e}"));
                return None;
            }
        };
        for c in cands {
            if deterministic && !c.deterministic {
                rejected.push(format!("{} (not deterministic)", c.name()));
                continue;
            }
            let math = policy.forced.unwrap_or(c.math);
            match cudnn.choose(handle, stream, c.clone(), math) {
                Ok(ws) if cap.is_some_and(|cap| ws > cap) => {
                    rejected.push(format!("{} ({ws} bytes of workspace)", c.name()));
                }
                Ok(ws) => return Some(ws),
                Err(e) => rejected.push(format!("{} ({e})", c.name())),
            }
        }
        cudnn.clear_legacy(dir);
        None
    }

    /// `ContextMismatch` unless `stream` is on the context the plan was
    /// selected on (its cuDNN plans, handle and kernels live there).
    pub(crate) fn check_stream(&self, op: &'static str, stream: &Stream) -> Result<()> {
        check_ctx(op, "stream", stream, self.ctx)
    }

    pub(crate) fn run(
        &self,
        op: &'static str,
        stream: &Stream,
        dir: ConvDirection,
        ops: Operands,
        workspace: &Workspace<'_>,
    ) -> Result<()> {
        self.check_stream(op, stream)?;
        let needed = self.workspace[dir.index()];
        let ws = workspace.check_ptr(op, needed, stream.context().id())?;
        if let Some(g) = &self.gemm[dir.index()] {
            let abd = gemm_operands(dir, ops);
            let aligned = [abd.0.addr(), abd.1.addr(), abd.2.addr()]
                .iter()
                .all(|a| a % 16 == 0);
            if aligned {
                // SAFETY: the caller checked every operand's shape, dense
                // layout and context against this problem, which is the
                // matmul's (pointwise_shape); all three are 16-byte
                // aligned; the output overlaps no input (the plan's
                // check_disjoint, or a workspace copy); the workspace holds
                // the matmul's bytes.
                return unsafe { g.enqueue(stream, abd, ws) };
            }
            if self.gemm_only {
                return Err(Error::InvalidArgument {
                    op,
                    arg: "operands",
                    reason: "the cuBLASLt path (backend: CublasLt) needs 16-byte aligned tensors"
                        .into(),
                });
            }
        }
        let handle = stream.context().handle::<CudnnHandle>()?;
        if let Some(shim) = &self.shim {
            return shim.run(&self.cudnn, &handle, stream, dir, ops, ws);
        }
        // SAFETY: the caller checked every operand's shape, dense layout
        // and context against this problem (check_tensor), the output
        // overlaps no input (the plan's check_disjoint, or a workspace
        // copy) and the workspace holds at least the chosen plan's and
        // algorithm's bytes.
        unsafe {
            self.cudnn
                .run(&handle, stream, dir, ops, ws, workspace.bytes())
        }
    }
}

/// What [`time_candidates`] found.
struct Ranked {
    /// The fastest cuDNN candidate's index and time; None when none ran.
    cudnn: Option<(usize, f32)>,
    /// The index of the matmul that beat every cuDNN candidate, if one did.
    matmul: Option<usize>,
}

/// Time each candidate of `dir` on `stream` ([`fastest`]), and a
/// pointwise convolution's matmuls `extra` after them. Synchronizes the
/// stream.
fn time_candidates(
    cudnn: &CudnnConv,
    handle: &CudnnHandle,
    stream: &Stream,
    dir: ConvDirection,
    (cands, extra): (&[ConvAlgo], &[LinearKernel]),
    scratch: &Scratch,
    p: &CudnnConvProblem,
) -> Result<Ranked> {
    let ws_bytes = cands
        .iter()
        .map(|c| c.workspace_bytes)
        .chain(extra.iter().map(LinearKernel::workspace_bytes))
        .max()
        .unwrap_or(0);
    let mut ws = DeviceBuffer::<u8>::uninit(stream, ws_bytes.max(1))?;
    let wsa = ws.as_slice_mut().ptr();
    let mut launches = 0usize;
    let n = cands.len() + extra.len();
    let timing = fastest(stream, n, |i| {
        let ops = scratch.ops(dir, launches);
        launches += 1;
        // SAFETY: the scratch buffers hold this problem's operands (sized
        // from the same problem) on the stream's context, device
        // allocations are 256-byte aligned, and `ws` holds the largest
        // candidate workspace; the matmuls' operands are the same buffers
        // (a pointwise convolution's tensors are its matrices). `fastest`
        // synchronizes before they drop.
        unsafe {
            match i.checked_sub(cands.len()).and_then(|j| extra.get(j)) {
                Some(g) => g.enqueue(stream, gemm_operands(dir, ops), wsa),
                None => cudnn.run_candidate(handle, stream, dir, i, ops, wsa),
            }
        }
    })?;
    timing.log(&format!("conv {dir:?} {p:?}"), |i| {
        match i.checked_sub(cands.len()).and_then(|j| extra.get(j)) {
            Some(g) => format!("matmul: {}", g.describe()),
            None => format!("{:?}", cands[i]),
        }
    });
    let best_cudnn = timing
        .times
        .iter()
        .take(cands.len())
        .enumerate()
        .filter_map(|(i, t)| t.map(|t| (i, t)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    let winner = timing.best.and_then(|(i, _)| i.checked_sub(cands.len()));
    Ok(Ranked {
        cudnn: best_cudnn,
        matmul: winner,
    })
}

fn no_algorithm(
    op: &'static str,
    dir: ConvDirection,
    pref: &PlanPreference,
    rejected: Vec<String>,
) -> Error {
    let field = if pref.deterministic {
        "deterministic"
    } else if pref.max_workspace_bytes.is_some() {
        "max_workspace_bytes"
    } else {
        return Error::Unsupported {
            op,
            what: format!(
                "cuDNN offers no {dir:?} engine or algorithm for this problem; tried {rejected:?}"
            ),
        };
    };
    Error::PreferenceRejected {
        op,
        field,
        reason: format!("no cuDNN {dir:?} engine or algorithm qualifies; candidates: {rejected:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(filter: [i32; 2], stride: i32, pad: i32, groups: i32) -> CudnnConvProblem {
        let y = |x: i32, k: i32| (x + 2 * pad - k) / stride + 1;
        CudnnConvProblem {
            dtype: ElementKind::Bf16,
            channels_last: true,
            batch: 64,
            c_in: 64,
            c_out: 256,
            x_spatial: vec![56, 56],
            w_spatial: filter.to_vec(),
            y_spatial: vec![y(56, filter[0]), y(56, filter[1])],
            pad: vec![pad; 2],
            pad_end: vec![pad; 2],
            stride: vec![stride; 2],
            dilation: vec![1; 2],
            groups,
        }
    }

    #[test]
    fn pointwise_convolutions_are_linear_layers() {
        // ResNet-50's 1x1 64 -> 256 at 56x56, batch 64: M = 64 * 56 * 56.
        assert_eq!(
            pointwise_shape(&problem([1, 1], 1, 0, 1)),
            Some((64 * 56 * 56, 64, 256))
        );
        let f64_nhwc = CudnnConvProblem {
            dtype: ElementKind::F64,
            ..problem([1, 1], 1, 0, 1)
        };
        assert!(pointwise_shape(&f64_nhwc).is_some());
        for not in [
            problem([3, 3], 1, 1, 1),
            problem([1, 3], 1, 0, 1),
            problem([1, 1], 2, 0, 1),
            problem([1, 1], 1, 1, 1),
            problem([1, 1], 1, 0, 2),
            CudnnConvProblem {
                channels_last: false,
                ..problem([1, 1], 1, 0, 1)
            },
            CudnnConvProblem {
                dtype: ElementKind::I8,
                ..problem([1, 1], 1, 0, 1)
            },
        ] {
            assert_eq!(pointwise_shape(&not), None, "{not:?}");
        }
    }

    #[test]
    fn gemm_operands_follow_the_linear_roles() {
        // cuDNN orders: fw (x, w, y), bw_data (w, dy, dx), dw (x, dy, dw).
        // Linear roles: fw A = x, B = w; dX A = dy, B = w; dW A = dy, B = x.
        let addrs = |(a, b, d): Operands| (a.addr(), b.addr(), d.addr());
        let ops = (
            DevPtr::from_addr(1),
            DevPtr::from_addr(2),
            DevPtrMut::from_addr(3),
        );
        let abd = |dir| addrs(gemm_operands(dir, ops));
        assert_eq!(abd(ConvDirection::Forward), (1, 2, 3));
        assert_eq!(abd(ConvDirection::BackwardData), (2, 1, 3));
        assert_eq!(abd(ConvDirection::BackwardFilter), (2, 1, 3));
        assert_eq!(linear_role(ConvDirection::Forward), LinearMatmul::Forward);
        assert_eq!(
            linear_role(ConvDirection::BackwardData),
            LinearMatmul::DataGrad
        );
        assert_eq!(
            linear_role(ConvDirection::BackwardFilter),
            LinearMatmul::WeightGrad
        );
    }

    #[test]
    fn cached_configs_round_trip() {
        let e: CacheEntry = [
            (12, vec![(0, 1), (3, -2)]),
            (7, vec![]),
            (3, vec![(41, 128)]),
        ];
        let text = e.encode().unwrap();
        assert_eq!(text, "12:0=1,3=-2|7:|3:41=128");
        assert_eq!(CacheEntry::decode(&text), Some(e));
        // other forms (the legacy id:math entries, a missing direction) do
        // not decode
        assert_eq!(CacheEntry::decode("1:tensor_op_math|0:fma_math|3:default_math"), None);
        assert_eq!(CacheEntry::decode("12:0=1|7:"), None);
    }

    #[test]
    fn math_policies() {
        assert_eq!(
            math_policy(ElementKind::F32, false).forced,
            Some(ConvMath::Fma)
        );
        assert_eq!(math_policy(ElementKind::F32, true).query, ConvMath::Default);
        assert_eq!(
            math_policy(ElementKind::Bf16, false).query,
            ConvMath::TensorOp
        );
    }
}
