//! [`CudnnConv`]: what cuDNN runs for each direction of one convolution
//! problem. Per direction, a backend (graph) execution plan chosen among
//! the candidates of `cudnn_graph.rs`, and a legacy-API algorithm as
//! fallback: it runs when an operand is not [`ALIGNMENT`](super::cudnn_graph::ALIGNMENT)-byte aligned
//! (the backend tensors are declared aligned), and alone when the backend
//! API offers no engine for the direction. Which candidate or algorithm
//! wins is decided by `cudnn_core.rs`.
//!
//! Selection takes `&mut self`; running takes `&self` and only reads, so
//! one problem may run from many threads at once, each with its own
//! handle from the context's registry.

use baracuda_driver::{
    ensure_loaded, ConvMath, CudaLib, CudnnHandle, LegacyConv, LegacyConvShape, Stream,
};
use baracuda_kernels_types::{DevPtrMut, ElementKind, Error, Result};

use super::cudnn_graph::{
    aligned, compute_type, layout_strides, ConvAlgo, ConvApi, ConvDirection, ConvGraph,
    ConvTensors, CudnnConvProblem, EngineFilter, ExecPlan, Operands,
};

const OP: &str = "cudnn convolution";

/// Backend plans and legacy algorithms of one convolution problem.
pub(crate) struct CudnnConv {
    /// The legacy descriptors (the fallback's).
    /// None when the problem pads its two sides differently.
    legacy_api: Option<LegacyConv>,
    /// Legacy algorithm per direction (the fallback).
    legacy: [Option<ConvAlgo>; 3],
    /// Backend tensors and convolution; `Err` when the backend API
    /// rejected the problem (the legacy path then serves it).
    tensors: std::result::Result<ConvTensors, Error>,
    /// Backend graph per direction, built on first use.
    graphs: [Option<ConvGraph>; 3],
    /// Backend plans under consideration, per direction.
    candidates: [Vec<ExecPlan>; 3],
    /// The backend plan chosen per direction.
    plans: [Option<ExecPlan>; 3],
}

impl std::fmt::Debug for CudnnConv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let chosen: Vec<Option<ConvAlgo>> =
            ConvDirection::ALL.iter().map(|&d| self.chosen(d)).collect();
        write!(f, "CudnnConv({chosen:?})")
    }
}

/// Why a problem padded unequally has no legacy algorithms.
fn no_legacy() -> Error {
    Error::Unsupported {
        op: OP,
        what: "legacy cuDNN convolutions pad both sides alike; this problem runs on backend \
               engines only, with 16-byte aligned operands"
            .into(),
    }
}

impl CudnnConv {
    /// Build every descriptor of `p`. Algorithms are chosen afterwards with
    /// [`CudnnConv::choose`] and [`CudnnConv::choose_candidate`].
    ///
    /// # Errors
    /// `Unsupported` for a dtype cuDNN does not take or a spatial rank
    /// outside 1..=3; `LibraryNotFound`; `Cudnn` when cuDNN rejects the
    /// shapes.
    pub(crate) fn new(p: &CudnnConvProblem) -> Result<CudnnConv> {
        ensure_loaded(CudaLib::Cudnn)?;
        let rank = p.x_spatial.len();
        if !(1..=3).contains(&rank)
            || [
                p.w_spatial.len(),
                p.y_spatial.len(),
                p.pad.len(),
                p.pad_end.len(),
                p.stride.len(),
                p.dilation.len(),
            ]
            .iter()
            .any(|&l| l != rank)
        {
            return Err(Error::Unsupported {
                op: OP,
                what: format!("spatial rank {rank}"),
            });
        }
        if !matches!(
            p.dtype,
            ElementKind::F32 | ElementKind::F64 | ElementKind::F16 | ElementKind::Bf16
        ) {
            return Err(Error::Unsupported {
                op: OP,
                what: format!("cuDNN convolution of {} elements", p.dtype),
            });
        }
        // cuDNN's Nd descriptors need at least 4 dims: a 1-D problem gets a
        // leading unit axis (extent 1, pad 0, stride 1, dilation 1), so the
        // length is the innermost spatial axis (`[N, C, 1, L]`, as PyTorch
        // passes conv1d to cuDNN) and the engines tuned for wide W apply.
        let ext = |v: &[i32], fill: i32| -> Vec<i32> {
            let mut v = v.to_vec();
            if v.len() == 1 {
                v.insert(0, fill);
            }
            v
        };
        let xs = ext(&p.x_spatial, 1);
        let ws = ext(&p.w_spatial, 1);
        let ys = ext(&p.y_spatial, 1);
        let pad = ext(&p.pad, 0);
        let pad_end = ext(&p.pad_end, 0);
        let stride = ext(&p.stride, 1);
        let dil = ext(&p.dilation, 1);
        let mut xd = vec![p.batch, p.c_in];
        xd.extend(&xs);
        let mut yd = vec![p.batch, p.c_out];
        yd.extend(&ys);
        let mut wd = vec![p.c_out, p.c_in / p.groups.max(1)];
        wd.extend(&ws);

        let tensors = ConvTensors::new(p, &xd, &wd, &yd, (&pad, &pad_end, &stride, &dil));
        // The legacy descriptors pad both sides alike: a problem padded
        // unequally runs on backend engines only.
        let symmetric = pad == pad_end;
        let legacy_api = symmetric
            .then(|| {
                LegacyConv::new(&LegacyConvShape {
            dtype: p.dtype,
            compute: compute_type(p.dtype),
            x_dims: &xd,
            x_strides: &layout_strides(&xd, p.channels_last),
            y_dims: &yd,
            y_strides: &layout_strides(&yd, p.channels_last),
            w_dims: &wd,
            w_channels_last: p.channels_last,
            pad: &pad,
            stride: &stride,
            dilation: &dil,
            groups: p.groups,
                })
            })
            .transpose()?;
        Ok(CudnnConv {
            legacy_api,
            legacy: [None, None, None],
            tensors,
            graphs: [None, None, None],
            candidates: [Vec::new(), Vec::new(), Vec::new()],
            plans: [None, None, None],
        })
    }

    /// cuDNN's heuristic ranking of the legacy algorithms of `dir` under
    /// `math` (`cudnnGetConvolution*Algorithm_v7`), best first,
    /// unsupported ones dropped.
    ///
    /// # Errors
    /// `Cudnn` on failure.
    pub(crate) fn heuristics(
        &mut self,
        handle: &CudnnHandle,
        stream: &Stream,
        dir: ConvDirection,
        math: ConvMath,
    ) -> Result<Vec<ConvAlgo>> {
        let algos = self
            .legacy_descriptors_mut()?
            .heuristics(handle, stream, dir.op_kind(), math)?;
        Ok(algos
            .into_iter()
            .map(|a| ConvAlgo {
                direction: dir,
                api: ConvApi::Legacy,
                id: a.id,
                knobs: Vec::new(),
                math: a.math,
                workspace_bytes: a.workspace_bytes,
                deterministic: a.deterministic,
                time_ms: a.time_ms,
            })
            .collect())
    }

    /// Make legacy `algo` (run under `math`) the fallback of its direction
    /// and return the workspace it needs in bytes, as cuDNN reports for
    /// the final descriptor.
    ///
    /// # Errors
    /// `Cudnn` when cuDNN rejects the algorithm under this math mode.
    pub(crate) fn choose(
        &mut self,
        handle: &CudnnHandle,
        stream: &Stream,
        algo: ConvAlgo,
        math: ConvMath,
    ) -> Result<usize> {
        let dir = algo.direction;
        let bytes = self
            .legacy_descriptors_mut()?
            .workspace_bytes(handle, stream, dir.op_kind(), algo.id, math)?;
        self.legacy[dir.index()] = Some(ConvAlgo {
            math,
            workspace_bytes: bytes,
            ..algo
        });
        Ok(bytes)
    }

    /// What runs `dir`: the chosen backend plan, else the legacy
    /// algorithm, if any.
    pub(crate) fn chosen(&self, dir: ConvDirection) -> Option<ConvAlgo> {
        self.plans[dir.index()]
            .as_ref()
            .map(|p| p.algo.clone())
            .or_else(|| self.legacy[dir.index()].clone())
    }

    /// The legacy API's descriptors, or `Unsupported` for a problem they
    /// cannot express (unequal padding before and after).
    fn legacy_descriptors(&self) -> Result<&LegacyConv> {
        self.legacy_api.as_ref().ok_or_else(no_legacy)
    }

    /// [`CudnnConv::legacy_descriptors`], mutable.
    fn legacy_descriptors_mut(&mut self) -> Result<&mut LegacyConv> {
        self.legacy_api.as_mut().ok_or_else(no_legacy)
    }

    /// Forget the legacy algorithm of `dir` (none qualified).
    pub(crate) fn clear_legacy(&mut self, dir: ConvDirection) {
        self.legacy[dir.index()] = None;
    }

    /// The legacy algorithm chosen for `dir` (the fallback), if any.
    pub(crate) fn legacy(&self, dir: ConvDirection) -> Option<ConvAlgo> {
        self.legacy[dir.index()].clone()
    }

    fn graph(
        &mut self,
        handle: &CudnnHandle,
        stream: &Stream,
        dir: ConvDirection,
    ) -> Result<&ConvGraph> {
        let i = dir.index();
        if self.graphs[i].is_none() {
            let t = self.tensors.as_ref().map_err(Clone::clone)?;
            self.graphs[i] = Some(t.graph(handle, stream, dir)?);
        }
        self.graphs[i].as_ref().ok_or_else(|| Error::Unsupported {
            op: OP,
            what: format!("no backend graph for {dir:?}"),
        })
    }

    /// Backend engine configs of `dir` (heuristic mode A, then FALLBACK,
    /// in rank order) that pass `filter`, finalized as execution plans, at
    /// most `max` of them. They become this direction's candidates,
    /// replacing earlier ones, and are returned in the same order with the
    /// reasons the others were rejected.
    ///
    /// # Errors
    /// `Unsupported` or `Cudnn` when the backend API cannot express the
    /// problem (no graph); rejections of single engines are reasons, not
    /// errors.
    pub(crate) fn engine_candidates(
        &mut self,
        handle: &CudnnHandle,
        stream: &Stream,
        dir: ConvDirection,
        filter: &EngineFilter,
        max: usize,
    ) -> Result<(Vec<ConvAlgo>, Vec<String>)> {
        let (plans, rejected) = self
            .graph(handle, stream, dir)?
            .candidates(handle, stream, filter, max);
        let algos = plans.iter().map(|p| p.algo.clone()).collect();
        self.candidates[dir.index()] = plans;
        Ok((algos, rejected))
    }

    /// Rebuild backend engine `id` with `knobs` (an autotune cache entry)
    /// as the only candidate of its direction.
    ///
    /// # Errors
    /// `Cudnn` when cuDNN no longer accepts the config;
    /// `PreferenceRejected` when it fails `filter`.
    pub(crate) fn engine_from_config(
        &mut self,
        handle: &CudnnHandle,
        stream: &Stream,
        dir: ConvDirection,
        id: u32,
        knobs: &[(u32, i64)],
        filter: &EngineFilter,
    ) -> Result<ConvAlgo> {
        let plan = self
            .graph(handle, stream, dir)?
            .rebuild(handle, stream, id, knobs, filter)?;
        let algo = plan.algo.clone();
        self.candidates[dir.index()] = vec![plan];
        Ok(algo)
    }

    /// Make candidate `i` of `dir` its backend plan (dropping the other
    /// candidates) and return its workspace in bytes.
    ///
    /// # Errors
    /// `InvalidArgument` when there is no candidate `i`.
    pub(crate) fn choose_candidate(
        &mut self,
        dir: ConvDirection,
        i: usize,
        time_ms: f32,
    ) -> Result<usize> {
        let c = &mut self.candidates[dir.index()];
        if i >= c.len() {
            return Err(Error::InvalidArgument {
                op: OP,
                arg: "candidate",
                reason: format!("{dir:?} has {} candidates, asked for {i}", c.len()),
            });
        }
        let mut plan = c.swap_remove(i);
        c.clear();
        plan.algo.time_ms = time_ms;
        let ws = plan.algo.workspace_bytes;
        self.plans[dir.index()] = Some(plan);
        Ok(ws)
    }

    /// Enqueue candidate `i` of `dir` (for timing).
    ///
    /// # Errors
    /// `InvalidArgument` when there is no candidate `i` or an operand is
    /// not 16-byte aligned; `Cudnn` on failure.
    ///
    /// # Safety
    /// As [`CudnnConv::run`], with `ws` holding at least the candidate's
    /// workspace.
    pub(crate) unsafe fn run_candidate(
        &self,
        handle: &CudnnHandle,
        stream: &Stream,
        dir: ConvDirection,
        i: usize,
        ops: Operands,
        ws: DevPtrMut<u8>,
    ) -> Result<()> {
        let plan = self.candidates[dir.index()]
            .get(i)
            .ok_or_else(|| Error::InvalidArgument {
                op: OP,
                arg: "candidate",
                reason: format!("{dir:?} has no candidate {i}"),
            })?;
        if !aligned(ops, ws) {
            return Err(Error::InvalidArgument {
                op: OP,
                arg: "operands",
                reason: "backend plans need 16-byte aligned operands".into(),
            });
        }
        // SAFETY: the caller's contract; alignment checked above.
        unsafe { plan.execute(handle, stream, ops, ws) }
    }

    /// Enqueue direction `dir` on `stream`: Forward `out = conv(a = x, b =
    /// w)`; BackwardData `out = dx` from `a = w, b = dy`; BackwardFilter
    /// `out = dw` from `a = x, b = dy`. `out` is overwritten (beta 0).
    /// Runs the backend plan when one was chosen and every address is
    /// [`ALIGNMENT`](super::cudnn_graph::ALIGNMENT)-byte aligned, else the legacy algorithm.
    ///
    /// # Errors
    /// `Unsupported` when neither can run; `Cudnn` on failure.
    ///
    /// # Safety
    /// The addresses must hold this problem's operands on the stream's
    /// context, `out` must not overlap the inputs, and `ws` must hold
    /// `ws_bytes >=` the chosen plan's and algorithm's workspace, until the
    /// work ends.
    pub(crate) unsafe fn run(
        &self,
        handle: &CudnnHandle,
        stream: &Stream,
        dir: ConvDirection,
        ops: Operands,
        ws: DevPtrMut<u8>,
        ws_bytes: usize,
    ) -> Result<()> {
        if let Some(plan) = &self.plans[dir.index()] {
            if aligned(ops, ws) {
                // SAFETY: the caller's contract; alignment checked above.
                return unsafe { plan.execute(handle, stream, ops, ws) };
            }
        }
        let algo = self.legacy[dir.index()].clone().ok_or_else(|| Error::Unsupported {
            op: OP,
            what: format!(
                "{dir:?}: the backend plan needs 16-byte aligned operands and no legacy algorithm was chosen"
            ),
        })?;
        let legacy = self.legacy_descriptors()?;
        let ops = (ops.0.addr(), ops.1.addr(), ops.2.addr());
        // SAFETY: the caller's contract; `choose` put the direction's
        // descriptor in the math mode `algo` runs under.
        unsafe {
            legacy.run(
                handle,
                stream,
                dir.op_kind(),
                algo.id,
                ops,
                ws.addr(),
                ws_bytes,
            )
        }
    }
}
