//! Execution plans (an engine config finalized for one handle, with its
//! workspace size) and variant packs (the addresses one execution binds to
//! the graph's tensor uids, and the workspace).

use std::ffi::c_void;

use baracuda_kernels_types::Result;
use cudarc::cudnn::sys as dnn;

use super::descriptor::{Descriptor, Value, A, D};
use super::engine::{EngineConfig, KnobChoice};
use crate::context::Stream;
use crate::handles::CudnnHandle;
use crate::libs::{ensure_loaded, CudaLib};
use crate::status::cudnn_error;

/// A finalized execution plan. `Send + Sync`: one plan may execute from
/// many threads at once, each with its own handle.
pub struct ExecutionPlan {
    desc: Descriptor,
    cfg: EngineConfig,
    engine_index: Option<i64>,
    knobs: Vec<KnobChoice>,
    workspace_bytes: usize,
}

impl std::fmt::Debug for ExecutionPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutionPlan")
            .field("tag", &self.tag())
            .field("workspace_bytes", &self.workspace_bytes)
            .finish()
    }
}

impl ExecutionPlan {
    /// Finalize `cfg` on `handle`, bound to `stream`: cuDNN picks or
    /// compiles the kernels and fixes the workspace size. The config's
    /// engine index and knobs are read first.
    ///
    /// # Errors
    /// `Cudnn` when cuDNN cannot build the config for this graph (an
    /// unsupported engine or knob value, a failed run-time compile).
    pub fn new(handle: &CudnnHandle, stream: &Stream, cfg: EngineConfig) -> Result<ExecutionPlan> {
        let engine_index = match cfg.engine()? {
            Some(e) => Some(e.global_index()?),
            None => None,
        };
        let knobs = cfg.knobs()?;
        let h = handle.bind(stream)?;
        let mut plan = Descriptor::new(D::CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)?;
        plan.set(A::CUDNN_ATTR_EXECUTION_PLAN_HANDLE, Value::Handle(h))?;
        plan.set(
            A::CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
            Value::Descriptors(&[&cfg.desc]),
        )?;
        plan.finalize()?;
        let workspace_bytes = plan
            .get_i64(A::CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)?
            .max(0) as usize;
        Ok(ExecutionPlan {
            desc: plan,
            cfg,
            engine_index,
            knobs,
            workspace_bytes,
        })
    }

    /// Workspace an execution needs, in bytes.
    pub fn workspace_bytes(&self) -> usize {
        self.workspace_bytes
    }

    /// The global index of the engine it runs (`None` when its config
    /// named no engine).
    pub fn engine_index(&self) -> Option<i64> {
        self.engine_index
    }

    /// The knob choices it runs with.
    pub fn knobs(&self) -> &[KnobChoice] {
        &self.knobs
    }

    /// The config it was built from.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// A short name of engine and knobs, as cudnn-frontend tags plans
    /// (`eng12_k0=1_k3=2`): with the graph's own key, a key for a cache of
    /// chosen plans.
    pub fn tag(&self) -> String {
        let mut tag = match self.engine_index {
            Some(i) => format!("eng{i}"),
            None => "eng?".to_string(),
        };
        for (t, v) in &self.knobs {
            tag += &format!("_k{t}={v}");
        }
        tag
    }

    /// cuDNN's JSON description of the plan (engine, knobs and the graph),
    /// which a later process can key a cache on.
    ///
    /// # Errors
    /// `Cudnn` when cuDNN cannot serialize the plan.
    pub fn json(&self) -> Result<String> {
        self.desc
            .get_string(A::CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION)
    }

    /// Enqueue the plan on `stream` with the addresses of `pack`.
    ///
    /// # Errors
    /// `Cudnn` when cuDNN rejects the execution (a uid of the graph left
    /// unbound, say).
    ///
    /// # Safety
    /// Each address in `pack` must hold its tensor (the dims, strides and
    /// dtype the graph gave its uid; a host value for a by-value tensor)
    /// on the stream's context, aligned as the tensor declares; outputs
    /// must not overlap inputs; the workspace must hold
    /// [`ExecutionPlan::workspace_bytes`]; all must stay valid until the
    /// work ends.
    pub unsafe fn execute(
        &self,
        handle: &CudnnHandle,
        stream: &Stream,
        pack: &VariantPack,
    ) -> Result<()> {
        let h = handle.bind(stream)?;
        // SAFETY: live handle, finalized plan and variant pack; the
        // caller guarantees the addresses the pack binds.
        unsafe { dnn::cudnnBackendExecute(h, self.desc.raw(), pack.desc.raw()) }
            .result()
            .map_err(|e| cudnn_error("cudnnBackendExecute", e))
    }
}

/// The addresses of one execution: a device address per tensor uid, and
/// the workspace.
pub struct VariantPack {
    desc: Descriptor,
    uids: Vec<i64>,
}

impl std::fmt::Debug for VariantPack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VariantPack(uids {:?})", self.uids)
    }
}

impl VariantPack {
    /// Bind each `(uid, address)` of `tensors`, and the workspace at
    /// `workspace` (0 for none). Only records the numbers:
    /// [`ExecutionPlan::execute`] is where they must be valid.
    ///
    /// # Errors
    /// `LibraryNotFound`; `Cudnn` on failure.
    pub fn new(tensors: &[(i64, u64)], workspace: u64) -> Result<VariantPack> {
        ensure_loaded(CudaLib::Cudnn)?;
        let uids: Vec<i64> = tensors.iter().map(|&(u, _)| u).collect();
        let ptrs: Vec<*mut c_void> = tensors.iter().map(|&(_, p)| p as *mut c_void).collect();
        let mut vp = Descriptor::new(D::CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)?;
        vp.set(A::CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, Value::I64(&uids))?;
        vp.set(
            A::CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
            Value::Pointers(&ptrs),
        )?;
        vp.set(
            A::CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
            Value::Pointers(&[workspace as *mut c_void]),
        )?;
        vp.finalize()?;
        Ok(VariantPack { desc: vp, uids })
    }

    /// The uids it binds, in order.
    pub fn uids(&self) -> &[i64] {
        &self.uids
    }
}
