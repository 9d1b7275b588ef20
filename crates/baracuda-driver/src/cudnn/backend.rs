//! cuDNN's backend (graph) API for one convolution problem: RAII backend
//! descriptors, the one-operation graph of each direction, engine configs
//! from the heuristics (mode A, then FALLBACK) or rebuilt from an engine
//! index and knob choices, execution plans and their execution.
//!
//! This is the API PyTorch 2.x reaches through cudnn-frontend. Unlike the
//! legacy `cudnnGetConvolution*Algorithm_v7` list it exposes every engine
//! of the installed cuDNN, the Hopper-specific ones included.
//!
//! Tensor UIDs: x = 1, w = 2, y = 3 in all three graphs (dx has x's UID,
//! dy y's, dw w's). Every tensor is declared 16-byte aligned; the caller
//! checks the addresses before executing (see [`ALIGNMENT`]).

use std::ffi::c_void;

use baracuda_kernels_types::{ElementKind, Error, Result};
use cudarc::cudnn::sys as dnn;
use dnn::cudnnBackendAttributeName_t as A;
use dnn::cudnnBackendAttributeType_t as T;
use dnn::cudnnBackendDescriptorType_t as D;

use super::{ConvAlgo, ConvApi, ConvDirection, ConvMath, CudnnConvProblem};
use crate::status::cudnn_error;

/// Byte alignment declared for every operand: the vectorised engines want
/// it, and device allocations (256-byte aligned) always satisfy it.
pub(crate) const ALIGNMENT: u64 = 16;

const UID_X: i64 = 1;
const UID_W: i64 = 2;
const UID_Y: i64 = 3;

/// Numerical notes (`cudnnBackendNumericalNote_t`) the filters look at.
const NOTE_TENSOR_CORE: u32 = 0;
const NOTE_DOWN_CONVERT_INPUTS: u32 = 1;
const NOTE_REDUCED_PRECISION_REDUCTION: u32 = 2;
const NOTE_NONDETERMINISTIC: u32 = 4;
/// Behaviour note `CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION`.
const BEHAVIOR_RUNTIME_COMPILATION: u32 = 0;

/// The most knob choices one engine config carries (cuDNN 9.x defines
/// 44 knob types).
const MAX_KNOBS: usize = 64;

/// One backend descriptor, destroyed on drop.
pub(crate) struct Desc(dnn::cudnnBackendDescriptor_t);

impl Desc {
    fn new(ty: D) -> Result<Desc> {
        let mut raw: dnn::cudnnBackendDescriptor_t = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer.
        unsafe { dnn::cudnnBackendCreateDescriptor(ty, &mut raw) }
            .result()
            .map_err(|e| cudnn_error("cudnnBackendCreateDescriptor", e))?;
        Ok(Desc(raw))
    }

    /// # Safety
    /// `vals` must point to `n` elements of the C type `ty` names, alive
    /// for the call.
    unsafe fn set_raw(&self, name: A, ty: T, n: usize, vals: *const c_void) -> Result<()> {
        // SAFETY: live descriptor; the caller guarantees `vals`.
        unsafe { dnn::cudnnBackendSetAttribute(self.0, name, ty, n as i64, vals) }
            .result()
            .map_err(|e| cudnn_error("cudnnBackendSetAttribute", e))
    }

    fn set_i64(&self, name: A, v: &[i64]) -> Result<()> {
        // SAFETY: `v` holds `v.len()` int64 values.
        unsafe { self.set_raw(name, T::CUDNN_TYPE_INT64, v.len(), v.as_ptr().cast()) }
    }

    /// An attribute of a C enum type (4-byte int): data type, heuristic
    /// mode, convolution mode, knob type.
    fn set_enum(&self, name: A, ty: T, v: u32) -> Result<()> {
        // SAFETY: one 4-byte value, which is how C passes these enums.
        unsafe { self.set_raw(name, ty, 1, (&v as *const u32).cast()) }
    }

    fn set_descs(&self, name: A, v: &[&Desc]) -> Result<()> {
        let raws: Vec<dnn::cudnnBackendDescriptor_t> = v.iter().map(|d| d.0).collect();
        // SAFETY: `raws` holds live descriptors, one pointer each.
        unsafe {
            self.set_raw(
                name,
                T::CUDNN_TYPE_BACKEND_DESCRIPTOR,
                raws.len(),
                raws.as_ptr().cast(),
            )
        }
    }

    fn set_handle(&self, name: A, h: dnn::cudnnHandle_t) -> Result<()> {
        // SAFETY: one live handle.
        unsafe {
            self.set_raw(
                name,
                T::CUDNN_TYPE_HANDLE,
                1,
                (&h as *const dnn::cudnnHandle_t).cast(),
            )
        }
    }

    fn set_scalar(&self, name: A, double: bool, v: f64) -> Result<()> {
        let f = v as f32;
        // SAFETY: one f64 or one f32, as the type says.
        unsafe {
            if double {
                self.set_raw(name, T::CUDNN_TYPE_DOUBLE, 1, (&v as *const f64).cast())
            } else {
                self.set_raw(name, T::CUDNN_TYPE_FLOAT, 1, (&f as *const f32).cast())
            }
        }
    }

    fn finalize(&self) -> Result<()> {
        // SAFETY: live descriptor.
        unsafe { dnn::cudnnBackendFinalize(self.0) }
            .result()
            .map_err(|e| cudnn_error("cudnnBackendFinalize", e))
    }

    fn get_i64(&self, name: A) -> Result<i64> {
        let (mut n, mut v) = (0i64, 0i64);
        // SAFETY: room for one int64.
        unsafe {
            dnn::cudnnBackendGetAttribute(
                self.0,
                name,
                T::CUDNN_TYPE_INT64,
                1,
                &mut n,
                (&mut v as *mut i64).cast(),
            )
        }
        .result()
        .map_err(|e| cudnn_error("cudnnBackendGetAttribute", e))?;
        Ok(v)
    }

    /// An array attribute of a C enum type, read as raw 4-byte values (an
    /// unknown value from a newer cuDNN must not become a Rust enum).
    fn get_enums(&self, name: A, ty: T, max: usize) -> Result<Vec<u32>> {
        let mut v = vec![0u32; max];
        let mut n = 0i64;
        // SAFETY: `v` has room for `max` 4-byte values.
        unsafe {
            dnn::cudnnBackendGetAttribute(
                self.0,
                name,
                ty,
                max as i64,
                &mut n,
                v.as_mut_ptr().cast(),
            )
        }
        .result()
        .map_err(|e| cudnn_error("cudnnBackendGetAttribute", e))?;
        v.truncate((n.max(0) as usize).min(max));
        Ok(v)
    }

    /// An array attribute of backend descriptors of type `ty`: cuDNN fills
    /// descriptors created here.
    fn get_descs(&self, name: A, ty: D, max: usize) -> Result<Vec<Desc>> {
        let out: Vec<Desc> = (0..max).map(|_| Desc::new(ty)).collect::<Result<_>>()?;
        let mut raws: Vec<dnn::cudnnBackendDescriptor_t> = out.iter().map(|d| d.0).collect();
        let mut n = 0i64;
        // SAFETY: `raws` holds `max` live descriptors of the element type.
        unsafe {
            dnn::cudnnBackendGetAttribute(
                self.0,
                name,
                T::CUDNN_TYPE_BACKEND_DESCRIPTOR,
                max as i64,
                &mut n,
                raws.as_mut_ptr().cast(),
            )
        }
        .result()
        .map_err(|e| cudnn_error("cudnnBackendGetAttribute", e))?;
        let mut out = out;
        out.truncate((n.max(0) as usize).min(max));
        Ok(out)
    }

    fn count(&self, name: A) -> Result<usize> {
        let mut n = 0i64;
        // SAFETY: a count query: no elements requested, none written.
        unsafe {
            dnn::cudnnBackendGetAttribute(
                self.0,
                name,
                T::CUDNN_TYPE_BACKEND_DESCRIPTOR,
                0,
                &mut n,
                std::ptr::null_mut(),
            )
        }
        .result()
        .map_err(|e| cudnn_error("cudnnBackendGetAttribute", e))?;
        Ok(n.max(0) as usize)
    }
}

impl Drop for Desc {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: created by cudnnBackendCreateDescriptor, destroyed once.
            let _ = unsafe { dnn::cudnnBackendDestroyDescriptor(self.0) };
        }
    }
}

/// Which engine configs a selection may use.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct EngineFilter {
    /// Reject engines with `CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC`.
    pub deterministic: bool,
    /// f32 only: allow tensor-core (TF32) engines. f32 engines with
    /// `CUDNN_NUMERICAL_NOTE_TENSOR_CORE` are rejected when false.
    pub allow_tf32: bool,
    /// Reject plans needing more workspace than this.
    pub max_workspace_bytes: Option<usize>,
}

/// The per-problem, handle-free part: tensors and the convolution.
pub(crate) struct ConvTensors {
    x: Desc,
    w: Desc,
    y: Desc,
    conv: Desc,
    double: bool,
    dtype: ElementKind,
}

fn dtype_raw(e: ElementKind) -> Option<u32> {
    Some(match e {
        ElementKind::F32 => dnn::cudnnDataType_t::CUDNN_DATA_FLOAT as u32,
        ElementKind::F64 => dnn::cudnnDataType_t::CUDNN_DATA_DOUBLE as u32,
        ElementKind::F16 => dnn::cudnnDataType_t::CUDNN_DATA_HALF as u32,
        ElementKind::Bf16 => dnn::cudnnDataType_t::CUDNN_DATA_BFLOAT16 as u32,
        _ => return None,
    })
}

fn tensor(dt: u32, uid: i64, dims: &[i32], channels_last: bool) -> Result<Desc> {
    let d = Desc::new(D::CUDNN_BACKEND_TENSOR_DESCRIPTOR)?;
    let dims64: Vec<i64> = dims.iter().map(|&v| v as i64).collect();
    let st: Vec<i64> = super::layout_strides(dims, channels_last)
        .iter()
        .map(|&v| v as i64)
        .collect();
    d.set_enum(A::CUDNN_ATTR_TENSOR_DATA_TYPE, T::CUDNN_TYPE_DATA_TYPE, dt)?;
    d.set_i64(A::CUDNN_ATTR_TENSOR_DIMENSIONS, &dims64)?;
    d.set_i64(A::CUDNN_ATTR_TENSOR_STRIDES, &st)?;
    d.set_i64(A::CUDNN_ATTR_TENSOR_UNIQUE_ID, &[uid])?;
    d.set_i64(A::CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, &[ALIGNMENT as i64])?;
    d.finalize()?;
    Ok(d)
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
        pad: &[i32],
        stride: &[i32],
        dil: &[i32],
    ) -> Result<ConvTensors> {
        let dt = dtype_raw(p.dtype).ok_or_else(|| Error::Unsupported {
            op: "cudnn convolution",
            what: format!("{} elements", p.dtype),
        })?;
        let double = p.dtype == ElementKind::F64;
        let x = tensor(dt, UID_X, xd, p.channels_last)?;
        let w = tensor(dt, UID_W, wd, p.channels_last)?;
        let y = tensor(dt, UID_Y, yd, p.channels_last)?;
        let conv = Desc::new(D::CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR)?;
        let comp = if double {
            dnn::cudnnDataType_t::CUDNN_DATA_DOUBLE as u32
        } else {
            dnn::cudnnDataType_t::CUDNN_DATA_FLOAT as u32
        };
        let v64 = |v: &[i32]| v.iter().map(|&a| a as i64).collect::<Vec<i64>>();
        conv.set_i64(A::CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, &[pad.len() as i64])?;
        conv.set_enum(
            A::CUDNN_ATTR_CONVOLUTION_COMP_TYPE,
            T::CUDNN_TYPE_DATA_TYPE,
            comp,
        )?;
        conv.set_enum(
            A::CUDNN_ATTR_CONVOLUTION_CONV_MODE,
            T::CUDNN_TYPE_CONVOLUTION_MODE,
            dnn::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION as u32,
        )?;
        conv.set_i64(A::CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, &v64(pad))?;
        conv.set_i64(A::CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, &v64(pad))?;
        conv.set_i64(A::CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, &v64(stride))?;
        conv.set_i64(A::CUDNN_ATTR_CONVOLUTION_DILATIONS, &v64(dil))?;
        conv.finalize()?;
        Ok(ConvTensors {
            x,
            w,
            y,
            conv,
            double,
            dtype: p.dtype,
        })
    }

    /// The one-operation graph of `dir` on handle `h`.
    pub(crate) fn graph(&self, h: dnn::cudnnHandle_t, dir: ConvDirection) -> Result<OpGraph> {
        let (ty, alpha, beta, conv, slots) = match dir {
            ConvDirection::Forward => (
                D::CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
                A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                [
                    (A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, &self.x),
                    (A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, &self.w),
                    (A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, &self.y),
                ],
            ),
            ConvDirection::BackwardData => (
                D::CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
                A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                [
                    (A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, &self.x),
                    (A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, &self.w),
                    (A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, &self.y),
                ],
            ),
            ConvDirection::BackwardFilter => (
                D::CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
                A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
                A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                [
                    (A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, &self.x),
                    (A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, &self.w),
                    (A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, &self.y),
                ],
            ),
        };
        let op = Desc::new(ty)?;
        for (name, t) in slots {
            op.set_descs(name, &[t])?;
        }
        op.set_descs(conv, &[&self.conv])?;
        op.set_scalar(alpha, self.double, 1.0)?;
        op.set_scalar(beta, self.double, 0.0)?;
        op.finalize()?;
        let graph = Desc::new(D::CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)?;
        graph.set_handle(A::CUDNN_ATTR_OPERATIONGRAPH_HANDLE, h)?;
        graph.set_descs(A::CUDNN_ATTR_OPERATIONGRAPH_OPS, &[&op])?;
        graph.finalize()?;
        Ok(OpGraph {
            graph,
            _op: op,
            dir,
            dtype: self.dtype,
        })
    }
}

/// A finalized operation graph of one direction.
pub(crate) struct OpGraph {
    graph: Desc,
    _op: Desc,
    dir: ConvDirection,
    dtype: ElementKind,
}

/// A finalized execution plan and what it is.
pub(crate) struct ExecPlan {
    plan: Desc,
    _cfg: Desc,
    _engine: Option<Desc>,
    _knobs: Vec<Desc>,
    pub(crate) algo: ConvAlgo,
}

impl ExecPlan {
    /// Enqueue the plan: `ops` are the device addresses of the operands
    /// in the direction's `(a, b, out)` order (see `CudnnConv::run`).
    ///
    /// # Safety
    /// The addresses must hold the problem's operands on the handle's
    /// stream's context, be [`ALIGNMENT`]-aligned, and `ws` must hold the
    /// plan's workspace, until the work ends.
    pub(crate) unsafe fn execute(
        &self,
        h: dnn::cudnnHandle_t,
        (a, b, out): (u64, u64, u64),
        ws: u64,
    ) -> Result<()> {
        let uids: [i64; 3] = match self.algo.direction {
            ConvDirection::Forward => [UID_X, UID_W, UID_Y],
            ConvDirection::BackwardData => [UID_W, UID_Y, UID_X],
            ConvDirection::BackwardFilter => [UID_X, UID_Y, UID_W],
        };
        let ptrs: [*mut c_void; 3] = [a as *mut c_void, b as *mut c_void, out as *mut c_void];
        let wsp = ws as *mut c_void;
        let vp = Desc::new(D::CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)?;
        vp.set_i64(A::CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, &uids)?;
        // SAFETY: three device pointers and one workspace pointer, as the
        // VOID_PTR type says.
        unsafe {
            vp.set_raw(
                A::CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                T::CUDNN_TYPE_VOID_PTR,
                3,
                ptrs.as_ptr().cast(),
            )?;
            vp.set_raw(
                A::CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                T::CUDNN_TYPE_VOID_PTR,
                1,
                (&wsp as *const *mut c_void).cast(),
            )?;
        }
        vp.finalize()?;
        // SAFETY: live handle, finalized plan and variant pack; the caller
        // guarantees the operands and workspace.
        unsafe { dnn::cudnnBackendExecute(h, self.plan.0, vp.0) }
            .result()
            .map_err(|e| cudnn_error("cudnnBackendExecute", e))
    }
}

impl OpGraph {
    /// Engine configs from heuristic mode A, then FALLBACK, in rank order,
    /// made into execution plans and filtered; at most `max` plans (engines
    /// that compile at run time are built only when nothing else is left).
    /// Also returns why each rejected config was rejected.
    pub(crate) fn candidates(
        &self,
        h: dnn::cudnnHandle_t,
        filter: &EngineFilter,
        max: usize,
    ) -> (Vec<ExecPlan>, Vec<String>) {
        let mut cfgs = Vec::new();
        let mut rejected = Vec::new();
        for mode in [
            dnn::cudnnBackendHeurMode_t::CUDNN_HEUR_MODE_A,
            dnn::cudnnBackendHeurMode_t::CUDNN_HEUR_MODE_FALLBACK,
        ] {
            match self.heuristics(mode) {
                Ok(v) => cfgs.extend(v),
                Err(e) => rejected.push(format!("heuristics {mode:?}: {e}")),
            }
        }
        let mut plans: Vec<ExecPlan> = Vec::new();
        let mut deferred = Vec::new();
        for cfg in cfgs {
            if plans.len() >= max {
                break;
            }
            match self.examine(&cfg, filter) {
                Ok(Some((id, knobs, notes, rtc))) => {
                    let dup = plans
                        .iter()
                        .any(|p| p.algo.id == id && p.algo.knobs == knobs);
                    if dup {
                        continue;
                    }
                    if rtc {
                        deferred.push(cfg);
                        continue;
                    }
                    match self.plan(h, cfg, None, Vec::new(), filter, notes) {
                        Ok(p) => plans.push(p),
                        Err(e) => rejected.push(format!("engine {id}: {e}")),
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
                if let Ok(Some((_, _, notes, _))) = self.examine(&cfg, filter) {
                    match self.plan(h, cfg, None, Vec::new(), filter, notes) {
                        Ok(p) => plans.push(p),
                        Err(e) => rejected.push(format!("runtime-compiled engine: {e}")),
                    }
                }
            }
        }
        (plans, rejected)
    }

    fn heuristics(&self, mode: dnn::cudnnBackendHeurMode_t) -> Result<Vec<Desc>> {
        let heur = Desc::new(D::CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)?;
        heur.set_descs(A::CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, &[&self.graph])?;
        heur.set_enum(
            A::CUDNN_ATTR_ENGINEHEUR_MODE,
            T::CUDNN_TYPE_HEUR_MODE,
            mode as u32,
        )?;
        heur.finalize()?;
        let n = heur.count(A::CUDNN_ATTR_ENGINEHEUR_RESULTS)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        heur.get_descs(
            A::CUDNN_ATTR_ENGINEHEUR_RESULTS,
            D::CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
            n,
        )
    }

    /// Engine index, knob choices, numerical notes and whether it compiles
    /// at run time, or None (silently) when the filter rejects the notes.
    #[allow(clippy::type_complexity)] // one tuple per engine config, private
    fn examine(
        &self,
        cfg: &Desc,
        filter: &EngineFilter,
    ) -> Result<Option<(u32, Vec<(u32, i64)>, Vec<u32>, bool)>> {
        let engine = cfg
            .get_descs(
                A::CUDNN_ATTR_ENGINECFG_ENGINE,
                D::CUDNN_BACKEND_ENGINE_DESCRIPTOR,
                1,
            )?
            .pop()
            .ok_or_else(|| Error::Unsupported {
                op: "cudnn convolution",
                what: "an engine config without an engine".into(),
            })?;
        let id = engine.get_i64(A::CUDNN_ATTR_ENGINE_GLOBAL_INDEX)? as u32;
        let notes = engine.get_enums(
            A::CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
            T::CUDNN_TYPE_NUMERICAL_NOTE,
            32,
        )?;
        let behavior = engine
            .get_enums(
                A::CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                T::CUDNN_TYPE_BEHAVIOR_NOTE,
                32,
            )
            .unwrap_or_default();
        if !self.accepts(&notes, filter) {
            return Ok(None);
        }
        let knobs = read_knobs(cfg)?;
        Ok(Some((
            id,
            knobs,
            notes,
            behavior.contains(&BEHAVIOR_RUNTIME_COMPILATION),
        )))
    }

    fn accepts(&self, notes: &[u32], filter: &EngineFilter) -> bool {
        if notes.contains(&NOTE_DOWN_CONVERT_INPUTS)
            || notes.contains(&NOTE_REDUCED_PRECISION_REDUCTION)
        {
            return false;
        }
        if filter.deterministic && notes.contains(&NOTE_NONDETERMINISTIC) {
            return false;
        }
        if self.dtype == ElementKind::F32 && !filter.allow_tf32 && notes.contains(&NOTE_TENSOR_CORE)
        {
            return false;
        }
        true
    }

    fn math(&self, notes: &[u32]) -> ConvMath {
        let tc = notes.contains(&NOTE_TENSOR_CORE);
        match self.dtype {
            ElementKind::F32 if tc => ConvMath::TensorOpAllowConversion,
            ElementKind::F32 => ConvMath::Fma,
            ElementKind::F16 | ElementKind::Bf16 if tc => ConvMath::TensorOp,
            _ => ConvMath::Default,
        }
    }

    /// Finalize a plan for `cfg` and check its workspace against the cap.
    #[allow(clippy::too_many_arguments)] // the pieces of one plan
    fn plan(
        &self,
        h: dnn::cudnnHandle_t,
        cfg: Desc,
        engine: Option<Desc>,
        knob_descs: Vec<Desc>,
        filter: &EngineFilter,
        notes: Vec<u32>,
    ) -> Result<ExecPlan> {
        let engine_desc = cfg
            .get_descs(
                A::CUDNN_ATTR_ENGINECFG_ENGINE,
                D::CUDNN_BACKEND_ENGINE_DESCRIPTOR,
                1,
            )?
            .pop();
        let id = match &engine_desc {
            Some(e) => e.get_i64(A::CUDNN_ATTR_ENGINE_GLOBAL_INDEX)? as u32,
            None => 0,
        };
        let knobs = read_knobs(&cfg)?;
        let plan = Desc::new(D::CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)?;
        plan.set_handle(A::CUDNN_ATTR_EXECUTION_PLAN_HANDLE, h)?;
        plan.set_descs(A::CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, &[&cfg])?;
        plan.finalize()?;
        let ws = plan
            .get_i64(A::CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)?
            .max(0) as usize;
        if filter.max_workspace_bytes.is_some_and(|cap| ws > cap) {
            return Err(Error::PreferenceRejected {
                op: "cudnn convolution",
                field: "max_workspace_bytes",
                reason: format!("engine {id} needs {ws} bytes of workspace"),
            });
        }
        Ok(ExecPlan {
            plan,
            _cfg: cfg,
            _engine: engine,
            _knobs: knob_descs,
            algo: ConvAlgo {
                direction: self.dir,
                api: ConvApi::Backend,
                id,
                knobs,
                math: self.math(&notes),
                workspace_bytes: ws,
                deterministic: !notes.contains(&NOTE_NONDETERMINISTIC),
                time_ms: -1.0,
            },
        })
    }

    /// Rebuild the engine config `id` with `knobs` (an autotune cache
    /// entry) and make it a plan, if the filter still accepts it.
    pub(crate) fn rebuild(
        &self,
        h: dnn::cudnnHandle_t,
        id: u32,
        knobs: &[(u32, i64)],
        filter: &EngineFilter,
    ) -> Result<ExecPlan> {
        let engine = Desc::new(D::CUDNN_BACKEND_ENGINE_DESCRIPTOR)?;
        engine.set_descs(A::CUDNN_ATTR_ENGINE_OPERATION_GRAPH, &[&self.graph])?;
        engine.set_i64(A::CUDNN_ATTR_ENGINE_GLOBAL_INDEX, &[id as i64])?;
        engine.finalize()?;
        let notes = engine.get_enums(
            A::CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
            T::CUDNN_TYPE_NUMERICAL_NOTE,
            32,
        )?;
        if !self.accepts(&notes, filter) {
            return Err(Error::PreferenceRejected {
                op: "cudnn convolution",
                field: "deterministic",
                reason: format!("cached engine {id} no longer passes the filter"),
            });
        }
        let mut knob_descs = Vec::new();
        for &(ty, v) in knobs {
            let k = Desc::new(D::CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR)?;
            k.set_enum(
                A::CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                T::CUDNN_TYPE_KNOB_TYPE,
                ty,
            )?;
            k.set_i64(A::CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, &[v])?;
            k.finalize()?;
            knob_descs.push(k);
        }
        let cfg = Desc::new(D::CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)?;
        cfg.set_descs(A::CUDNN_ATTR_ENGINECFG_ENGINE, &[&engine])?;
        if !knob_descs.is_empty() {
            let refs: Vec<&Desc> = knob_descs.iter().collect();
            cfg.set_descs(A::CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, &refs)?;
        }
        cfg.finalize()?;
        self.plan(h, cfg, Some(engine), knob_descs, filter, notes)
    }
}

fn read_knobs(cfg: &Desc) -> Result<Vec<(u32, i64)>> {
    let descs = cfg.get_descs(
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
