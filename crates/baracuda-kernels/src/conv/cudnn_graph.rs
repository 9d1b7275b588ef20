//! A convolution as a cuDNN graph: the vocabulary of the family's cuDNN
//! core ([`ConvDirection`], [`CudnnConvProblem`], [`ConvAlgo`]), the
//! one-operation graph of each direction, and which engine configs a
//! selection may use, all built on the driver's generic graph layer
//! ([`baracuda_driver::cudnn::graph`]).
//!
//! Tensor uids: x = 1, w = 2, y = 3 in all three graphs (dx has x's uid,
//! dy y's, dw w's). Every tensor is declared [`ALIGNMENT`]-byte aligned;
//! the caller checks the addresses before executing.
//!
//! Engine filters, as PyTorch applies them: never `DOWN_CONVERT_INPUTS` or
//! `REDUCED_PRECISION_REDUCTION` (the SKU promises f32 accumulation); no
//! `NONDETERMINISTIC` when determinism is asked for; f32 without
//! `allow_tf32` takes no `TENSOR_CORE` engine (those run TF32); plans
//! above the workspace cap are dropped.

use super::ConvLayout;
use baracuda_driver::cudnn::graph::{
    BehaviorNote, ConvolutionMode, ConvolutionParams, Engine, EngineConfig, ExecutionPlan,
    HeurMode, KnobChoice, NumericalNote, OpKind, OpParams, Operation, OperationGraph, Port, Scalar,
    Tensor, VariantPack,
};
use baracuda_driver::{legacy_algo_name, ConvMath, CudnnHandle, Stream};
use baracuda_kernels_types::{DevPtr, DevPtrMut, ElementKind, Error, Result};

const OP: &str = "cudnn convolution";

/// The three passes of a convolution.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConvDirection {
    /// `y = conv(x, w)`.
    Forward,
    /// `dx = conv_transpose(dy, w)`.
    BackwardData,
    /// `dw = corr(x, dy)`.
    BackwardFilter,
}

impl ConvDirection {
    /// All directions, in index order.
    pub const ALL: [ConvDirection; 3] = [
        ConvDirection::Forward,
        ConvDirection::BackwardData,
        ConvDirection::BackwardFilter,
    ];

    /// Position in per-direction arrays.
    pub fn index(self) -> usize {
        match self {
            ConvDirection::Forward => 0,
            ConvDirection::BackwardData => 1,
            ConvDirection::BackwardFilter => 2,
        }
    }

    /// The graph node that computes the direction (also how the legacy
    /// API names it).
    pub(crate) fn op_kind(self) -> OpKind {
        match self {
            ConvDirection::Forward => OpKind::ConvolutionForward,
            ConvDirection::BackwardData => OpKind::ConvolutionBackwardData,
            ConvDirection::BackwardFilter => OpKind::ConvolutionBackwardFilter,
        }
    }

    /// The node's ports of x, w and y (dx, dw, dy where they are
    /// gradients).
    fn ports(self) -> [Port; 3] {
        match self {
            ConvDirection::Forward => [Port::X, Port::W, Port::Y],
            ConvDirection::BackwardData => [Port::DX, Port::W, Port::DY],
            ConvDirection::BackwardFilter => [Port::X, Port::DW, Port::DY],
        }
    }

    /// The uids of the direction's operands in the order `run` takes them
    /// (`(a, b, out)`, see `CudnnConv::run`).
    fn operand_uids(self) -> [i64; 3] {
        match self {
            ConvDirection::Forward => [UID_X, UID_W, UID_Y],
            ConvDirection::BackwardData => [UID_W, UID_Y, UID_X],
            ConvDirection::BackwardFilter => [UID_X, UID_Y, UID_W],
        }
    }
}

/// Which cuDNN API a [`ConvAlgo`] belongs to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConvApi {
    /// Backend (graph) API engine config: `id` is the engine's global
    /// index, `knobs` its knob choices.
    Backend,
    /// Legacy API algorithm: `id` is the `cudnnConvolution*Algo_t` number.
    Legacy,
}

/// One ranked engine config or algorithm of one direction, as cuDNN
/// reported it.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvAlgo {
    /// Direction it computes.
    pub direction: ConvDirection,
    /// The API it runs through.
    pub api: ConvApi,
    /// Engine global index (backend) or algorithm number (legacy).
    pub id: u32,
    /// Backend knob choices as `(cudnnBackendKnobType_t, value)`; empty
    /// for legacy algorithms.
    pub knobs: Vec<(u32, i64)>,
    /// Math it runs with (backend: derived from the engine's numerical
    /// notes: tensor-core engines are `TensorOp`, or
    /// `TensorOpAllowConversion` for f32, i.e. TF32).
    pub math: ConvMath,
    /// Workspace it needs, in bytes.
    pub workspace_bytes: usize,
    /// cuDNN says its result bits do not depend on scheduling.
    pub deterministic: bool,
    /// Measured time in ms, or -1 when not measured.
    pub time_ms: f32,
}

impl ConvAlgo {
    /// Short name: `eng12{k0=1,k3=2}` for a backend engine config (knob
    /// type numbers of `cudnnBackendKnobType_t`), cuDNN's algorithm name
    /// (`IMPLICIT_PRECOMP_GEMM`, `ALGO_1`, ...) prefixed `legacy:` for a
    /// legacy algorithm.
    pub fn name(&self) -> String {
        match self.api {
            ConvApi::Backend => {
                let k = self
                    .knobs
                    .iter()
                    .map(|(t, v)| format!("k{t}={v}"))
                    .collect::<Vec<_>>()
                    .join(",");
                format!("eng{}{{{k}}}", self.id)
            }
            ConvApi::Legacy => format!(
                "legacy:{}",
                legacy_algo_name(self.direction.op_kind(), self.id)
            ),
        }
    }
}

/// One convolution problem as cuDNN sees it. `x` is `[batch, c_in,
/// spatial...]`, `w` is `[c_out, c_in / groups, filter...]`, `y` is
/// `[batch, c_out, y_spatial...]`; spatial rank 1 to 3.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CudnnConvProblem {
    /// Element type of x, w and y.
    pub dtype: ElementKind,
    /// NHWC-style (channels innermost) memory order for x, w and y.
    pub channels_last: bool,
    /// Batch.
    pub batch: i32,
    /// Input channels.
    pub c_in: i32,
    /// Output channels.
    pub c_out: i32,
    /// Input spatial extents.
    pub x_spatial: Vec<i32>,
    /// Filter spatial extents.
    pub w_spatial: Vec<i32>,
    /// Output spatial extents.
    pub y_spatial: Vec<i32>,
    /// Zero padding before each spatial axis.
    pub pad: Vec<i32>,
    /// Zero padding after each spatial axis (equal to `pad` but for
    /// PyTorch's `padding='same'` with an even kernel, and JAX's explicit
    /// padding pairs).
    pub pad_end: Vec<i32>,
    /// Stride per spatial axis.
    pub stride: Vec<i32>,
    /// Dilation per spatial axis.
    pub dilation: Vec<i32>,
    /// Group count.
    pub groups: i32,
}

/// The accumulation type of a problem in `dtype`: f64 for f64, else f32.
pub(crate) fn compute_type(dtype: ElementKind) -> ElementKind {
    dtype.float_accumulator()
}

/// Dense strides (in elements) of `dims` = `[n, c, s0, s1, ...]` for the
/// given layout.
pub(crate) fn layout_strides(dims: &[i32], channels_last: bool) -> Vec<i32> {
    let layout = if channels_last {
        ConvLayout::ChannelsLast
    } else {
        ConvLayout::ChannelsFirst
    };
    let dims: Vec<usize> = dims.iter().map(|&d| d.max(0) as usize).collect();
    // The problem's extents were checked to fit cuDNN's i32 descriptors.
    crate::checks::layout_strides(&dims, layout)
        .into_iter()
        .map(|s| s as i32)
        .collect()
}

/// Byte alignment declared for every operand: the vectorised engines want
/// it, and device allocations (256-byte aligned) always satisfy it.
pub(crate) const ALIGNMENT: u64 = 16;

const UID_X: i64 = 1;
const UID_W: i64 = 2;
const UID_Y: i64 = 3;

/// The operands of one direction in the order cuDNN takes them (see
/// `CudnnConv::run`): two inputs, then the output; untyped, as the
/// element type is the problem's.
pub(crate) type Operands = (DevPtr<u8>, DevPtr<u8>, DevPtrMut<u8>);

/// Every operand (and the workspace, when there is one) on the backend
/// plans' declared alignment.
pub(crate) fn aligned((a, b, out): Operands, ws: DevPtrMut<u8>) -> bool {
    [a, b, out.as_const(), ws.as_const()]
        .iter()
        .all(|p| p.addr() % ALIGNMENT == 0)
}

/// Which engine configs a selection may use.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct EngineFilter {
    /// Reject engines with `CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC`.
    pub(crate) deterministic: bool,
    /// f32 only: allow tensor-core (TF32) engines. f32 engines with
    /// `CUDNN_NUMERICAL_NOTE_TENSOR_CORE` are rejected when false.
    pub(crate) allow_tf32: bool,
    /// Reject plans needing more workspace than this.
    pub(crate) max_workspace_bytes: Option<usize>,
}

/// The per-problem, handle-free part: tensors and the convolution.
pub(crate) struct ConvTensors {
    x: Tensor,
    w: Tensor,
    y: Tensor,
    conv: OpParams,
    dtype: ElementKind,
}

fn tensor(dtype: ElementKind, uid: i64, dims: &[i32], channels_last: bool) -> Result<Tensor> {
    let dims64: Vec<i64> = dims.iter().map(|&v| v as i64).collect();
    let strides: Vec<i64> = layout_strides(dims, channels_last)
        .iter()
        .map(|&v| v as i64)
        .collect();
    Tensor::builder(uid, dtype)
        .dims(&dims64)
        .strides(&strides)
        .alignment(ALIGNMENT as i64)
        .build()
}

impl ConvTensors {
    /// The tensors (already padded to 4-d for 1-D problems by the caller)
    /// and the convolution descriptor. Groups are implied by the filter's
    /// channel extent (`c_in / groups`), as the backend API defines them.
    pub(crate) fn new(
        p: &CudnnConvProblem,
        xd: &[i32],
        wd: &[i32],
        yd: &[i32],
        (pad, pad_end, stride, dil): (&[i32], &[i32], &[i32], &[i32]),
    ) -> Result<ConvTensors> {
        let x = tensor(p.dtype, UID_X, xd, p.channels_last)?;
        let w = tensor(p.dtype, UID_W, wd, p.channels_last)?;
        let y = tensor(p.dtype, UID_Y, yd, p.channels_last)?;
        let v64 = |v: &[i32]| v.iter().map(|&a| a as i64).collect::<Vec<i64>>();
        let conv = OpParams::convolution(&ConvolutionParams {
            compute: compute_type(p.dtype),
            mode: ConvolutionMode::CrossCorrelation,
            pre_padding: &v64(pad),
            post_padding: &v64(pad_end),
            strides: &v64(stride),
            dilations: &v64(dil),
        })?;
        Ok(ConvTensors {
            x,
            w,
            y,
            conv,
            dtype: p.dtype,
        })
    }

    /// The one-operation graph of `dir` on `handle`: the direction's node
    /// with alpha 1, beta 0.
    pub(crate) fn graph(
        &self,
        handle: &CudnnHandle,
        stream: &Stream,
        dir: ConvDirection,
    ) -> Result<ConvGraph> {
        let [px, pw, py] = dir.ports();
        let compute = compute_type(self.dtype);
        let op = Operation::builder(dir.op_kind())
            .tensor(px, &self.x)
            .tensor(pw, &self.w)
            .tensor(py, &self.y)
            .params(&self.conv)
            .scalar(Port::Alpha, Scalar::for_compute(compute, 1.0))
            .scalar(Port::Beta, Scalar::for_compute(compute, 0.0))
            .build()?;
        Ok(ConvGraph {
            graph: OperationGraph::new(handle, stream, &[op])?,
            dir,
            dtype: self.dtype,
        })
    }
}

/// A finalized operation graph of one direction.
pub(crate) struct ConvGraph {
    graph: OperationGraph,
    dir: ConvDirection,
    dtype: ElementKind,
}

/// A finalized execution plan and what it is.
pub(crate) struct ExecPlan {
    plan: ExecutionPlan,
    pub(crate) algo: ConvAlgo,
}

impl ExecPlan {
    /// Enqueue the plan: `ops` are the device addresses of the operands
    /// in the direction's `(a, b, out)` order (see `CudnnConv::run`).
    ///
    /// # Safety
    /// The addresses must hold the problem's operands on the stream's
    /// context, be [`ALIGNMENT`]-aligned, and `ws` must hold the plan's
    /// workspace, until the work ends.
    pub(crate) unsafe fn execute(
        &self,
        handle: &CudnnHandle,
        stream: &Stream,
        (a, b, out): Operands,
        ws: DevPtrMut<u8>,
    ) -> Result<()> {
        let [ua, ub, uo] = self.algo.direction.operand_uids();
        let bound = [(ua, a.addr()), (ub, b.addr()), (uo, out.addr())];
        let pack = VariantPack::new(&bound, ws.addr())?;
        // SAFETY: the caller's contract: the three uids are bound to this
        // problem's operands and the workspace holds the plan's bytes.
        unsafe { self.plan.execute(handle, stream, &pack) }
    }
}

/// What [`ConvGraph::examine`] learns of an engine config the filter
/// accepts.
struct Examined {
    id: u32,
    knobs: Vec<KnobChoice>,
    notes: Vec<NumericalNote>,
    runtime_compiled: bool,
}

impl ConvGraph {
    /// Engine configs from heuristic mode A, then FALLBACK, in rank order,
    /// made into execution plans and filtered; at most `max` plans (engines
    /// that compile at run time are built only when nothing else is left).
    /// Also returns why each rejected config was rejected.
    pub(crate) fn candidates(
        &self,
        handle: &CudnnHandle,
        stream: &Stream,
        filter: &EngineFilter,
        max: usize,
    ) -> (Vec<ExecPlan>, Vec<String>) {
        let mut cfgs = Vec::new();
        let mut rejected = Vec::new();
        for mode in [HeurMode::A, HeurMode::Fallback] {
            match self.graph.heuristics(mode) {
                Ok(v) => cfgs.extend(v),
                Err(e) => rejected.push(format!("heuristics {mode}: {e}")),
            }
        }
        let mut plans: Vec<ExecPlan> = Vec::new();
        let mut deferred = Vec::new();
        for cfg in cfgs {
            if plans.len() >= max {
                break;
            }
            match self.examine(&cfg, filter) {
                Ok(Some(ex)) => {
                    let dup = plans
                        .iter()
                        .any(|p| p.algo.id == ex.id && p.algo.knobs == ex.knobs);
                    if dup {
                        continue;
                    }
                    if ex.runtime_compiled {
                        deferred.push(cfg);
                        continue;
                    }
                    match self.plan(handle, stream, cfg, filter, ex.notes) {
                        Ok(p) => plans.push(p),
                        Err(e) => rejected.push(format!("engine {}: {e}", ex.id)),
                    }
                }
                Ok(None) => {}
                Err(e) => rejected.push(e.to_string()),
            }
        }
        if plans.is_empty() {
            for cfg in deferred {
                if plans.len() >= max {
                    break;
                }
                if let Ok(Some(ex)) = self.examine(&cfg, filter) {
                    match self.plan(handle, stream, cfg, filter, ex.notes) {
                        Ok(p) => plans.push(p),
                        Err(e) => rejected.push(format!("runtime-compiled engine: {e}")),
                    }
                }
            }
        }
        (plans, rejected)
    }

    /// Engine index, knob choices, numerical notes and whether it compiles
    /// at run time, or None (silently) when the filter rejects the notes.
    fn examine(&self, cfg: &EngineConfig, filter: &EngineFilter) -> Result<Option<Examined>> {
        let engine = cfg.engine()?.ok_or_else(|| Error::Unsupported {
            op: OP,
            what: "an engine config without an engine".into(),
        })?;
        let id = engine.global_index()? as u32;
        let notes = engine.numerical_notes()?;
        let behavior = engine.behavior_notes().unwrap_or_default();
        if !self.accepts(&notes, filter) {
            return Ok(None);
        }
        let knobs = cfg.knobs()?;
        Ok(Some(Examined {
            id,
            knobs,
            notes,
            runtime_compiled: behavior.contains(&BehaviorNote::RuntimeCompilation),
        }))
    }

    fn accepts(&self, notes: &[NumericalNote], filter: &EngineFilter) -> bool {
        if notes.contains(&NumericalNote::DownConvertInputs)
            || notes.contains(&NumericalNote::ReducedPrecisionReduction)
        {
            return false;
        }
        if filter.deterministic && notes.contains(&NumericalNote::Nondeterministic) {
            return false;
        }
        if self.dtype == ElementKind::F32
            && !filter.allow_tf32
            && notes.contains(&NumericalNote::TensorCore)
        {
            return false;
        }
        true
    }

    fn math(&self, notes: &[NumericalNote]) -> ConvMath {
        let tc = notes.contains(&NumericalNote::TensorCore);
        match self.dtype {
            ElementKind::F32 if tc => ConvMath::TensorOpAllowConversion,
            ElementKind::F32 => ConvMath::Fma,
            ElementKind::F16 | ElementKind::Bf16 if tc => ConvMath::TensorOp,
            _ => ConvMath::Default,
        }
    }

    /// Finalize a plan for `cfg` and check its workspace against the cap.
    fn plan(
        &self,
        handle: &CudnnHandle,
        stream: &Stream,
        cfg: EngineConfig,
        filter: &EngineFilter,
        notes: Vec<NumericalNote>,
    ) -> Result<ExecPlan> {
        let plan = ExecutionPlan::new(handle, stream, cfg)?;
        let id = plan.engine_index().map_or(0, |i| i as u32);
        let ws = plan.workspace_bytes();
        if filter.max_workspace_bytes.is_some_and(|cap| ws > cap) {
            return Err(Error::PreferenceRejected {
                op: OP,
                field: "max_workspace_bytes",
                reason: format!("engine {id} needs {ws} bytes of workspace"),
            });
        }
        let algo = ConvAlgo {
            direction: self.dir,
            api: ConvApi::Backend,
            id,
            knobs: plan.knobs().to_vec(),
            math: self.math(&notes),
            workspace_bytes: ws,
            deterministic: !notes.contains(&NumericalNote::Nondeterministic),
            time_ms: -1.0,
        };
        Ok(ExecPlan { plan, algo })
    }

    /// Rebuild the engine config `id` with `knobs` (an autotune cache
    /// entry) and make it a plan, if the filter still accepts it.
    pub(crate) fn rebuild(
        &self,
        handle: &CudnnHandle,
        stream: &Stream,
        id: u32,
        knobs: &[KnobChoice],
        filter: &EngineFilter,
    ) -> Result<ExecPlan> {
        let engine = Engine::new(&self.graph, id as i64)?;
        let notes = engine.numerical_notes()?;
        if !self.accepts(&notes, filter) {
            return Err(Error::PreferenceRejected {
                op: OP,
                field: "deterministic",
                reason: format!("cached engine {id} no longer passes the filter"),
            });
        }
        let cfg = EngineConfig::new(engine, knobs)?;
        self.plan(handle, stream, cfg, filter, notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_per_layout() {
        assert_eq!(layout_strides(&[2, 3, 4, 5], false), vec![60, 20, 5, 1]);
        assert_eq!(layout_strides(&[2, 3, 4, 5], true), vec![60, 1, 15, 3]);
        assert_eq!(
            layout_strides(&[2, 3, 4, 5, 6], true),
            vec![360, 1, 90, 18, 3]
        );
    }

    #[test]
    fn algo_names() {
        let a = ConvAlgo {
            direction: ConvDirection::Forward,
            api: ConvApi::Legacy,
            id: 1,
            knobs: Vec::new(),
            math: ConvMath::TensorOp,
            workspace_bytes: 0,
            deterministic: true,
            time_ms: -1.0,
        };
        assert_eq!(a.name(), "legacy:IMPLICIT_PRECOMP_GEMM");
        let b = ConvAlgo {
            api: ConvApi::Backend,
            id: 12,
            knobs: vec![(0, 1), (3, 2)],
            ..a
        };
        assert_eq!(b.name(), "eng12{k0=1,k3=2}");
        let ops = |b| {
            (
                DevPtr::from_addr(256),
                DevPtr::from_addr(b),
                DevPtrMut::from_addr(1024),
            )
        };
        assert!(aligned(ops(512), DevPtrMut::NULL));
        assert!(!aligned(ops(514), DevPtrMut::NULL));
        assert_eq!(ConvMath::from_name("fma_math"), Some(ConvMath::Fma));
    }

    #[test]
    fn autotune_keys_keep_their_spelling() {
        // `cudnn_core.rs` keys its autotune cache entries (and the
        // BARACUDA_AUTOTUNE_FILE lines) on these Debug forms.
        let f = EngineFilter {
            deterministic: true,
            allow_tf32: false,
            max_workspace_bytes: Some(1 << 30),
        };
        assert_eq!(
            format!("{f:?}"),
            "EngineFilter { deterministic: true, allow_tf32: false, max_workspace_bytes: Some(1073741824) }"
        );
        let p = CudnnConvProblem {
            dtype: ElementKind::Bf16,
            channels_last: true,
            batch: 2,
            c_in: 3,
            c_out: 4,
            x_spatial: vec![5],
            w_spatial: vec![1],
            y_spatial: vec![5],
            pad: vec![0],
            pad_end: vec![0],
            stride: vec![1],
            dilation: vec![1],
            groups: 1,
        };
        assert_eq!(
            format!("{p:?}"),
            "CudnnConvProblem { dtype: Bf16, channels_last: true, batch: 2, c_in: 3, c_out: 4, \
             x_spatial: [5], w_spatial: [1], y_spatial: [5], pad: [0], pad_end: [0], stride: [1], \
             dilation: [1], \
             groups: 1 }"
        );
    }

    #[test]
    fn directions_name_their_nodes_and_operands() {
        // `run` takes fw (x, w, y), bw_data (w, dy, dx), dw (x, dy, dw).
        assert_eq!(
            ConvDirection::BackwardData.operand_uids(),
            [UID_W, UID_Y, UID_X]
        );
        assert_eq!(
            ConvDirection::BackwardFilter.ports(),
            [Port::X, Port::DW, Port::DY]
        );
        assert_eq!(
            ConvDirection::BackwardData.op_kind(),
            OpKind::ConvolutionBackwardData
        );
        assert_eq!(compute_type(ElementKind::F16), ElementKind::F32);
        assert_eq!(compute_type(ElementKind::F64), ElementKind::F64);
    }
}
