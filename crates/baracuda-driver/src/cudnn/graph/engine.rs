//! Operation graphs and how cuDNN runs them: engine heuristics, engines
//! with their numerical and behaviour notes, and engine configs (an
//! engine plus knob choices).

use std::sync::Arc;

use baracuda_kernels_types::Result;
use cudarc::cudnn::sys as dnn;

use super::descriptor::{Descriptor, Value, A, D, T};
use super::operation::Operation;
use crate::context::Stream;
use crate::handles::CudnnHandle;

/// The most knob choices one engine config carries (cuDNN 9.x defines 44
/// knob types).
const MAX_KNOBS: usize = 64;

/// The most numerical or behaviour notes read from one engine.
const MAX_NOTES: usize = 32;

struct GraphInner {
    desc: Descriptor,
    ops: Vec<Operation>,
}

/// A finalized operation graph: operations that exchange tensors by uid,
/// bound to a handle. Cheap to clone; engines, configs and plans built
/// from it keep it alive.
#[derive(Clone)]
pub struct OperationGraph {
    inner: Arc<GraphInner>,
}

impl std::fmt::Debug for OperationGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperationGraph")
            .field("ops", &self.inner.ops)
            .finish()
    }
}

/// How cuDNN ranks the engine configs of a graph.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum HeurMode {
    /// `CUDNN_HEUR_MODE_INSTANT`: fast, rule-based.
    Instant,
    /// `CUDNN_HEUR_MODE_B`: a heavier model; may fall back to instant.
    B,
    /// `CUDNN_HEUR_MODE_FALLBACK`: engines that support the graph, without
    /// ranking for speed.
    Fallback,
    /// `CUDNN_HEUR_MODE_A`: the neural-net ranking PyTorch uses first.
    A,
}

impl HeurMode {
    fn raw(self) -> dnn::cudnnBackendHeurMode_t {
        use dnn::cudnnBackendHeurMode_t as H;
        match self {
            HeurMode::Instant => H::CUDNN_HEUR_MODE_INSTANT,
            HeurMode::B => H::CUDNN_HEUR_MODE_B,
            HeurMode::Fallback => H::CUDNN_HEUR_MODE_FALLBACK,
            HeurMode::A => H::CUDNN_HEUR_MODE_A,
        }
    }
}

impl std::fmt::Display for HeurMode {
    /// cuDNN's name of the mode (`CUDNN_HEUR_MODE_A`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.raw())
    }
}

impl OperationGraph {
    /// Finalize a graph of `ops` on `handle`, bound to `stream`.
    ///
    /// # Errors
    /// `Cudnn` when cuDNN rejects the graph (an operation it cannot fuse,
    /// tensors that do not connect).
    pub fn new(handle: &CudnnHandle, stream: &Stream, ops: &[Operation]) -> Result<OperationGraph> {
        let h = handle.bind(stream)?;
        let mut graph = Descriptor::new(D::CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)?;
        graph.set(A::CUDNN_ATTR_OPERATIONGRAPH_HANDLE, Value::Handle(h))?;
        let descs: Vec<&Descriptor> = ops.iter().map(|o| o.desc.as_ref()).collect();
        graph.set(A::CUDNN_ATTR_OPERATIONGRAPH_OPS, Value::Descriptors(&descs))?;
        graph.finalize()?;
        Ok(OperationGraph {
            inner: Arc::new(GraphInner {
                desc: graph,
                ops: ops.to_vec(),
            }),
        })
    }

    /// Its operations.
    pub fn ops(&self) -> &[Operation] {
        &self.inner.ops
    }

    /// The engine configs heuristic `mode` proposes, best first.
    ///
    /// # Errors
    /// `Cudnn` when the heuristic fails (for example mode A on a graph it
    /// does not model).
    pub fn heuristics(&self, mode: HeurMode) -> Result<Vec<EngineConfig>> {
        let mut heur = Descriptor::new(D::CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)?;
        heur.set(
            A::CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
            Value::Descriptors(&[&self.inner.desc]),
        )?;
        heur.set(
            A::CUDNN_ATTR_ENGINEHEUR_MODE,
            Value::Enum(T::CUDNN_TYPE_HEUR_MODE, mode.raw() as u32),
        )?;
        heur.finalize()?;
        let n = heur.count(
            A::CUDNN_ATTR_ENGINEHEUR_RESULTS,
            T::CUDNN_TYPE_BACKEND_DESCRIPTOR,
        )?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let cfgs = heur.get_descriptors(
            A::CUDNN_ATTR_ENGINEHEUR_RESULTS,
            D::CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
            n,
        )?;
        Ok(cfgs
            .into_iter()
            .map(|desc| EngineConfig {
                desc,
                _engine: None,
                _knobs: Vec::new(),
                graph: self.clone(),
            })
            .collect())
    }
}

/// A numerical note of an engine (`cudnnBackendNumericalNote_t`): how its
/// results may differ from the plain computation.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum NumericalNote {
    /// Runs on tensor cores (for f32 operands: TF32).
    TensorCore,
    /// Converts inputs to a narrower type first.
    DownConvertInputs,
    /// Accumulates in a narrower type than the compute type.
    ReducedPrecisionReduction,
    /// Uses an FFT.
    Fft,
    /// Results may differ from run to run (atomics).
    Nondeterministic,
    /// Uses a Winograd transform.
    Winograd,
    /// Winograd with 4x4 tiles.
    WinogradTile4x4,
    /// Winograd with 6x6 tiles.
    WinogradTile6x6,
    /// Winograd with 13x13 tiles.
    WinogradTile13x13,
    /// Propagates NaN strictly.
    StrictNanProp,
    /// A note this build does not know (a newer cuDNN), by number.
    Other(u32),
}

impl NumericalNote {
    /// The note of cuDNN's value `v`.
    pub fn from_raw(v: u32) -> NumericalNote {
        use dnn::cudnnBackendNumericalNote_t as N;
        const KNOWN: [(N, NumericalNote); 10] = [
            (
                N::CUDNN_NUMERICAL_NOTE_TENSOR_CORE,
                NumericalNote::TensorCore,
            ),
            (
                N::CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS,
                NumericalNote::DownConvertInputs,
            ),
            (
                N::CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION,
                NumericalNote::ReducedPrecisionReduction,
            ),
            (N::CUDNN_NUMERICAL_NOTE_FFT, NumericalNote::Fft),
            (
                N::CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC,
                NumericalNote::Nondeterministic,
            ),
            (N::CUDNN_NUMERICAL_NOTE_WINOGRAD, NumericalNote::Winograd),
            (
                N::CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4,
                NumericalNote::WinogradTile4x4,
            ),
            (
                N::CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6,
                NumericalNote::WinogradTile6x6,
            ),
            (
                N::CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13,
                NumericalNote::WinogradTile13x13,
            ),
            (
                N::CUDNN_NUMERICAL_NOTE_STRICT_NAN_PROP,
                NumericalNote::StrictNanProp,
            ),
        ];
        KNOWN
            .iter()
            .find(|(n, _)| *n as u32 == v)
            .map_or(NumericalNote::Other(v), |&(_, note)| note)
    }
}

/// A behaviour note of an engine (`cudnnBackendBehaviorNote_t`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum BehaviorNote {
    /// Compiles its kernel at run time when its plan is finalized (slow
    /// the first time).
    RuntimeCompilation,
    /// Needs its int8x32 filter reordered.
    RequiresFilterInt8x32Reorder,
    /// Needs its int8x32 bias reordered.
    RequiresBiasInt8x32Reorder,
    /// Can be captured with CUDA graphs' native API.
    SupportsCudaGraphNativeApi,
    /// Runs through cuBLASLt.
    CublasLtDependency,
    /// A note this build does not know (a newer cuDNN), by number.
    Other(u32),
}

impl BehaviorNote {
    /// The note of cuDNN's value `v`.
    pub fn from_raw(v: u32) -> BehaviorNote {
        use dnn::cudnnBackendBehaviorNote_t as N;
        const KNOWN: [(N, BehaviorNote); 5] = [
            (
                N::CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION,
                BehaviorNote::RuntimeCompilation,
            ),
            (
                N::CUDNN_BEHAVIOR_NOTE_REQUIRES_FILTER_INT8x32_REORDER,
                BehaviorNote::RequiresFilterInt8x32Reorder,
            ),
            (
                N::CUDNN_BEHAVIOR_NOTE_REQUIRES_BIAS_INT8x32_REORDER,
                BehaviorNote::RequiresBiasInt8x32Reorder,
            ),
            (
                N::CUDNN_BEHAVIOR_NOTE_SUPPORTS_CUDA_GRAPH_NATIVE_API,
                BehaviorNote::SupportsCudaGraphNativeApi,
            ),
            (
                N::CUDNN_BEHAVIOR_NOTE_CUBLASLT_DEPENDENCY,
                BehaviorNote::CublasLtDependency,
            ),
        ];
        KNOWN
            .iter()
            .find(|(n, _)| *n as u32 == v)
            .map_or(BehaviorNote::Other(v), |&(_, note)| note)
    }
}

/// One engine of a graph: a kernel family, identified by its global
/// index, with notes on its numerics and behaviour.
pub struct Engine {
    desc: Descriptor,
    graph: OperationGraph,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Engine({:?})", self.global_index().ok())
    }
}

impl Engine {
    /// Engine `global_index` of `graph` (an index an engine config
    /// reported, for example from a cache).
    ///
    /// # Errors
    /// `Cudnn` when the graph has no such engine.
    pub fn new(graph: &OperationGraph, global_index: i64) -> Result<Engine> {
        let mut engine = Descriptor::new(D::CUDNN_BACKEND_ENGINE_DESCRIPTOR)?;
        engine.set(
            A::CUDNN_ATTR_ENGINE_OPERATION_GRAPH,
            Value::Descriptors(&[&graph.inner.desc]),
        )?;
        engine.set(
            A::CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
            Value::I64(&[global_index]),
        )?;
        engine.finalize()?;
        Ok(Engine {
            desc: engine,
            graph: graph.clone(),
        })
    }

    /// Its global index.
    ///
    /// # Errors
    /// `Cudnn` on failure.
    pub fn global_index(&self) -> Result<i64> {
        self.desc.get_i64(A::CUDNN_ATTR_ENGINE_GLOBAL_INDEX)
    }

    /// Its numerical notes.
    ///
    /// # Errors
    /// `Cudnn` on failure.
    pub fn numerical_notes(&self) -> Result<Vec<NumericalNote>> {
        Ok(self
            .desc
            .get_enums(
                A::CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                T::CUDNN_TYPE_NUMERICAL_NOTE,
                MAX_NOTES,
            )?
            .into_iter()
            .map(NumericalNote::from_raw)
            .collect())
    }

    /// Its behaviour notes.
    ///
    /// # Errors
    /// `Cudnn` on failure (older cuDNN builds lack the attribute).
    pub fn behavior_notes(&self) -> Result<Vec<BehaviorNote>> {
        Ok(self
            .desc
            .get_enums(
                A::CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                T::CUDNN_TYPE_BEHAVIOR_NOTE,
                MAX_NOTES,
            )?
            .into_iter()
            .map(BehaviorNote::from_raw)
            .collect())
    }
}

/// One knob choice of an engine config: `(knob, value)`, the knob as its
/// `cudnnBackendKnobType_t` number (stable across cuDNN releases, so it
/// can be cached).
pub type KnobChoice = (u32, i64);

/// An engine config: an engine and a choice for some of its knobs (tile
/// sizes, split-K, ...), from [`OperationGraph::heuristics`] or
/// [`EngineConfig::new`].
pub struct EngineConfig {
    pub(crate) desc: Descriptor,
    _engine: Option<Engine>,
    _knobs: Vec<Descriptor>,
    graph: OperationGraph,
}

impl std::fmt::Debug for EngineConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EngineConfig({:?})", self.knobs().ok())
    }
}

impl EngineConfig {
    /// A config of `engine` with `knobs` (say, an autotune cache entry).
    ///
    /// # Errors
    /// `Cudnn` when cuDNN rejects a knob or its value.
    pub fn new(engine: Engine, knobs: &[KnobChoice]) -> Result<EngineConfig> {
        let mut knob_descs = Vec::with_capacity(knobs.len());
        for &(ty, v) in knobs {
            let mut k = Descriptor::new(D::CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR)?;
            k.set(
                A::CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                Value::Enum(T::CUDNN_TYPE_KNOB_TYPE, ty),
            )?;
            k.set(A::CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, Value::I64(&[v]))?;
            k.finalize()?;
            knob_descs.push(k);
        }
        let mut cfg = Descriptor::new(D::CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)?;
        cfg.set(
            A::CUDNN_ATTR_ENGINECFG_ENGINE,
            Value::Descriptors(&[&engine.desc]),
        )?;
        if !knob_descs.is_empty() {
            let refs: Vec<&Descriptor> = knob_descs.iter().collect();
            cfg.set(
                A::CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                Value::Descriptors(&refs),
            )?;
        }
        cfg.finalize()?;
        Ok(EngineConfig {
            desc: cfg,
            graph: engine.graph.clone(),
            _engine: Some(engine),
            _knobs: knob_descs,
        })
    }

    /// The graph it runs.
    pub fn graph(&self) -> &OperationGraph {
        &self.graph
    }

    /// Its engine, read back from the config (`None` when the config has
    /// none).
    ///
    /// # Errors
    /// `Cudnn` on failure.
    pub fn engine(&self) -> Result<Option<Engine>> {
        Ok(self
            .desc
            .get_descriptors(
                A::CUDNN_ATTR_ENGINECFG_ENGINE,
                D::CUDNN_BACKEND_ENGINE_DESCRIPTOR,
                1,
            )?
            .pop()
            .map(|desc| Engine {
                desc,
                graph: self.graph.clone(),
            }))
    }

    /// Its knob choices, in the order cuDNN lists them.
    ///
    /// # Errors
    /// `Cudnn` on failure.
    pub fn knobs(&self) -> Result<Vec<KnobChoice>> {
        let descs = self.desc.get_descriptors(
            A::CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
            D::CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR,
            MAX_KNOBS,
        )?;
        let mut out = Vec::with_capacity(descs.len());
        for k in &descs {
            let ty = k
                .get_enums(
                    A::CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                    T::CUDNN_TYPE_KNOB_TYPE,
                    1,
                )?
                .first()
                .copied()
                .unwrap_or(0);
            out.push((ty, k.get_i64(A::CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE)?));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_round_trip_cudnn_numbers() {
        assert_eq!(NumericalNote::from_raw(0), NumericalNote::TensorCore);
        assert_eq!(NumericalNote::from_raw(4), NumericalNote::Nondeterministic);
        assert_eq!(NumericalNote::from_raw(77), NumericalNote::Other(77));
        assert_eq!(BehaviorNote::from_raw(0), BehaviorNote::RuntimeCompilation);
        assert_eq!(BehaviorNote::from_raw(9), BehaviorNote::Other(9));
        assert_eq!(HeurMode::A.to_string(), "CUDNN_HEUR_MODE_A");
        assert_eq!(HeurMode::Fallback.to_string(), "CUDNN_HEUR_MODE_FALLBACK");
    }
}
