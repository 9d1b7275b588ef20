//! Safe RAII wrappers over cuBLASLt matmul: descriptors, matrix layouts,
//! heuristic preferences, algorithms and the `cublasLtMatmul` call.
//!
//! This is the only file that calls `cudarc::cublaslt::{sys, result}`.
//! Descriptors are host objects; creating them costs no device memory. The
//! only unsafe entry point is [`lt_matmul`], whose caller vouches for the
//! device addresses.

use std::ffi::c_void;

use baracuda_kernels_types::{DevPtr, DevPtrMut, ElementKind, Error, Result};
use cudarc::cublaslt::result as r;
use cudarc::cublaslt::sys as lt;

use crate::context::Stream;
use crate::handles::CublasLtHandle;
use crate::libs::{ensure_loaded, CudaLib};
use crate::status::cublas_error;

fn data_type(op: &'static str, kind: ElementKind) -> Result<lt::cudaDataType> {
    use lt::cudaDataType_t as D;
    Ok(match kind {
        ElementKind::F32 => D::CUDA_R_32F,
        ElementKind::F64 => D::CUDA_R_64F,
        ElementKind::F16 => D::CUDA_R_16F,
        ElementKind::Bf16 => D::CUDA_R_16BF,
        ElementKind::I8 => D::CUDA_R_8I,
        ElementKind::I32 => D::CUDA_R_32I,
        ElementKind::Fp8E4M3 => D::CUDA_R_8F_E4M3,
        ElementKind::Fp8E5M2 => D::CUDA_R_8F_E5M2,
        other => {
            return Err(Error::Unsupported {
                op,
                what: format!("cuBLASLt has no {other} matrix type"),
            })
        }
    })
}

/// The arithmetic of a cuBLASLt matmul.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LtCompute {
    /// IEEE f32 accumulation (f16/bf16/fp8 products on tensor cores; f32
    /// products in full precision).
    F32,
    /// f32 accumulation with TF32 tensor-core products for f32 inputs.
    F32FastTf32,
    /// IEEE f64.
    F64,
    /// Exact 32-bit integer accumulation.
    I32,
}

/// A cuBLASLt epilogue.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LtEpilogue {
    /// Store the matmul result.
    Default,
    /// ReLU.
    Relu,
    /// Add a bias along the output rows.
    Bias,
    /// Bias, then ReLU.
    ReluBias,
    /// GELU (tanh approximation).
    Gelu,
    /// Bias, then GELU (tanh).
    GeluBias,
    /// GELU (tanh), storing the pre-activation in the aux buffer.
    GeluAux,
    /// Bias, GELU (tanh), pre-activation into the aux buffer.
    GeluAuxBias,
    /// Store the matmul result and the bias gradient (sum over the `k`
    /// dimension of `B`) in the bias buffer.
    BgradB,
}

impl LtEpilogue {
    fn raw(self) -> lt::cublasLtEpilogue_t {
        use lt::cublasLtEpilogue_t as E;
        match self {
            LtEpilogue::Default => E::CUBLASLT_EPILOGUE_DEFAULT,
            LtEpilogue::Relu => E::CUBLASLT_EPILOGUE_RELU,
            LtEpilogue::Bias => E::CUBLASLT_EPILOGUE_BIAS,
            LtEpilogue::ReluBias => E::CUBLASLT_EPILOGUE_RELU_BIAS,
            LtEpilogue::Gelu => E::CUBLASLT_EPILOGUE_GELU,
            LtEpilogue::GeluBias => E::CUBLASLT_EPILOGUE_GELU_BIAS,
            LtEpilogue::GeluAux => E::CUBLASLT_EPILOGUE_GELU_AUX,
            LtEpilogue::GeluAuxBias => E::CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
            LtEpilogue::BgradB => E::CUBLASLT_EPILOGUE_BGRADB,
        }
    }
    /// True when the epilogue reads or writes the bias pointer.
    pub fn uses_bias(self) -> bool {
        matches!(
            self,
            LtEpilogue::Bias
                | LtEpilogue::ReluBias
                | LtEpilogue::GeluBias
                | LtEpilogue::GeluAuxBias
                | LtEpilogue::BgradB
        )
    }
    /// True when the epilogue writes the aux buffer.
    pub fn uses_aux(self) -> bool {
        matches!(self, LtEpilogue::GeluAux | LtEpilogue::GeluAuxBias)
    }
}

/// A host scalar (`alpha`, `beta`) in the matmul's scale type.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum LtScalar {
    /// For f32 scale type.
    F32(f32),
    /// For f64 scale type.
    F64(f64),
    /// For i32 scale type.
    I32(i32),
}

impl LtScalar {
    fn ptr(&self) -> *const c_void {
        match self {
            LtScalar::F32(v) => v as *const f32 as *const c_void,
            LtScalar::F64(v) => v as *const f64 as *const c_void,
            LtScalar::I32(v) => v as *const i32 as *const c_void,
        }
    }
}

/// A `cublasLtMatmulDesc_t`.
#[derive(Debug)]
pub struct LtMatmulDesc {
    raw: lt::cublasLtMatmulDesc_t,
}

// SAFETY: the descriptor is a host object; `&mut self` guards every
// mutation and cuBLASLt only reads it during calls made through `&self`.
unsafe impl Send for LtMatmulDesc {}
// SAFETY: as above.
unsafe impl Sync for LtMatmulDesc {}

impl LtMatmulDesc {
    /// A descriptor with this compute type; the scale type (of `alpha`,
    /// `beta`) follows from it (f64 for F64, i32 for I32 unless
    /// `float_scale`, f32 otherwise).
    ///
    /// # Errors
    /// `LibraryNotFound` without cuBLASLt;
    /// `Cublas` on failure.
    pub fn new(compute: LtCompute, float_scale: bool) -> Result<Self> {
        ensure_loaded(CudaLib::CublasLt)?;
        use lt::cublasComputeType_t as C;
        use lt::cudaDataType_t as D;
        let (c, s) = match compute {
            LtCompute::F32 => (C::CUBLAS_COMPUTE_32F, D::CUDA_R_32F),
            LtCompute::F32FastTf32 => (C::CUBLAS_COMPUTE_32F_FAST_TF32, D::CUDA_R_32F),
            LtCompute::F64 => (C::CUBLAS_COMPUTE_64F, D::CUDA_R_64F),
            LtCompute::I32 if float_scale => (C::CUBLAS_COMPUTE_32I, D::CUDA_R_32F),
            LtCompute::I32 => (C::CUBLAS_COMPUTE_32I, D::CUDA_R_32I),
        };
        let raw =
            r::create_matmul_desc(c, s).map_err(|e| cublas_error("cublasLtMatmulDescCreate", e))?;
        Ok(LtMatmulDesc { raw })
    }

    fn set<V>(&mut self, attr: lt::cublasLtMatmulDescAttributes_t, v: &V) -> Result<()> {
        // SAFETY: `raw` is live (owned by self); `v` points to a value of the
        // size passed, which cuBLASLt copies before returning.
        unsafe {
            r::set_matmul_desc_attribute(
                self.raw,
                attr,
                v as *const V as *const c_void,
                std::mem::size_of::<V>(),
            )
        }
        .map_err(|e| cublas_error("cublasLtMatmulDescSetAttribute", e))
    }

    /// Transpose `A` and/or `B`.
    ///
    /// # Errors
    /// `Cublas` on failure.
    pub fn set_transposes(&mut self, trans_a: bool, trans_b: bool) -> Result<()> {
        use lt::cublasLtMatmulDescAttributes_t as A;
        // cublasOperation_t: CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 (cudarc's
        // cuBLASLt bindings do not carry the cuBLAS enum).
        let op = |t: bool| -> i32 { i32::from(t) };
        self.set(A::CUBLASLT_MATMUL_DESC_TRANSA, &op(trans_a))?;
        self.set(A::CUBLASLT_MATMUL_DESC_TRANSB, &op(trans_b))
    }

    /// Choose the epilogue.
    ///
    /// # Errors
    /// `Cublas` on failure.
    pub fn set_epilogue(&mut self, e: LtEpilogue) -> Result<()> {
        self.set(
            lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_EPILOGUE,
            &e.raw(),
        )
    }

    /// The element type of the bias vector.
    ///
    /// # Errors
    /// `Unsupported` for a type cuBLASLt lacks; `Cublas` on failure.
    pub fn set_bias_type(&mut self, kind: ElementKind) -> Result<()> {
        let t = data_type("cublasLt bias", kind)?;
        self.set(
            lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
            &t,
        )
    }

    /// Device address of the bias vector the bias epilogues read.
    ///
    /// # Errors
    /// `Cublas` on failure.
    pub fn set_bias_pointer(&mut self, bias: DevPtr<u8>) -> Result<()> {
        self.set(
            lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
            &bias.addr(),
        )
    }

    /// Device address of the bias gradient `BgradB` writes (the same
    /// attribute as [`Self::set_bias_pointer`]).
    ///
    /// # Errors
    /// `Cublas` on failure.
    pub fn set_bias_grad_pointer(&mut self, dbias: DevPtrMut<u8>) -> Result<()> {
        self.set_bias_pointer(dbias.as_const())
    }

    /// Device address and leading dimension (elements) of the aux buffer.
    ///
    /// # Errors
    /// `Cublas` on failure.
    pub fn set_aux(&mut self, aux: DevPtrMut<u8>, ld: usize) -> Result<()> {
        use lt::cublasLtMatmulDescAttributes_t as A;
        self.set_aux_pointer(aux)?;
        self.set(A::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &(ld as i64))
    }

    /// Device address of the aux buffer (its ld set by [`Self::set_aux`]).
    ///
    /// # Errors
    /// `Cublas` on failure.
    pub fn set_aux_pointer(&mut self, aux: DevPtrMut<u8>) -> Result<()> {
        self.set(
            lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
            &aux.addr(),
        )
    }

    /// Elements between the bias vectors (or bias gradients) of
    /// consecutive entries of a strided batch; 0, the default, gives every
    /// entry the same vector.
    ///
    /// # Errors
    /// `Cublas` on failure.
    pub fn set_bias_batch_stride(&mut self, stride: usize) -> Result<()> {
        self.set(
            lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE,
            &(stride as i64),
        )
    }

    /// Elements between the aux matrices of consecutive entries of a
    /// strided batch.
    ///
    /// # Errors
    /// `Cublas` on failure.
    pub fn set_aux_batch_stride(&mut self, stride: usize) -> Result<()> {
        self.set(
            lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE,
            &(stride as i64),
        )
    }

    /// Device addresses of the f32 per-tensor scale factors of `A` and `B`
    /// (fp8 matmuls).
    ///
    /// # Errors
    /// `Cublas` on failure.
    pub fn set_scale_pointers(&mut self, a: DevPtr<f32>, b: DevPtr<f32>) -> Result<()> {
        use lt::cublasLtMatmulDescAttributes_t as A;
        self.set(A::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a.addr())?;
        self.set(A::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b.addr())
    }
}

impl Drop for LtMatmulDesc {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        let _ = unsafe { r::destroy_matmul_desc(self.raw) };
    }
}

/// A column-major `cublasLtMatrixLayout_t`, optionally strided-batched.
#[derive(Debug)]
pub struct LtLayout {
    raw: lt::cublasLtMatrixLayout_t,
}

// SAFETY: a host object, only mutated through `&mut self`.
unsafe impl Send for LtLayout {}
// SAFETY: as above.
unsafe impl Sync for LtLayout {}

impl LtLayout {
    /// A column-major `rows x cols` matrix with leading dimension `ld`.
    ///
    /// # Errors
    /// `LibraryNotFound` without cuBLASLt;
    /// `Unsupported` for a type cuBLASLt lacks; `Cublas` on failure.
    pub fn new(kind: ElementKind, rows: usize, cols: usize, ld: usize) -> Result<Self> {
        ensure_loaded(CudaLib::CublasLt)?;
        let t = data_type("cublasLt layout", kind)?;
        let raw = r::create_matrix_layout(t, rows as u64, cols as u64, ld as i64)
            .map_err(|e| cublas_error("cublasLtMatrixLayoutCreate", e))?;
        Ok(LtLayout { raw })
    }

    /// Make it a strided batch of `count` matrices, `stride` elements apart
    /// (0 repeats one matrix).
    ///
    /// # Errors
    /// `Cublas` on failure.
    pub fn set_batch(&mut self, count: usize, stride: usize) -> Result<()> {
        use lt::cublasLtMatrixLayoutAttribute_t as A;
        let count = count as i32;
        let stride = stride as i64;
        // SAFETY: `raw` is live; each value has the size passed.
        unsafe {
            r::set_matrix_layout_attribute(
                self.raw,
                A::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                &count as *const i32 as *const c_void,
                4,
            )
        }
        .map_err(|e| cublas_error("cublasLtMatrixLayoutSetAttribute", e))?;
        // SAFETY: as above.
        unsafe {
            r::set_matrix_layout_attribute(
                self.raw,
                A::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                &stride as *const i64 as *const c_void,
                8,
            )
        }
        .map_err(|e| cublas_error("cublasLtMatrixLayoutSetAttribute", e))
    }
}

impl Drop for LtLayout {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        let _ = unsafe { r::destroy_matrix_layout(self.raw) };
    }
}

/// Heuristic search preferences.
#[derive(Debug)]
pub struct LtPreference {
    raw: lt::cublasLtMatmulPreference_t,
}

impl LtPreference {
    /// Preferences allowing up to `max_workspace_bytes` of workspace and
    /// assuming every pointer is aligned to `min_alignment_bytes`.
    ///
    /// # Errors
    /// `LibraryNotFound` without cuBLASLt;
    /// `Cublas` on failure.
    pub fn new(max_workspace_bytes: usize, min_alignment_bytes: u32) -> Result<Self> {
        ensure_loaded(CudaLib::CublasLt)?;
        let raw = r::create_matmul_pref()
            .map_err(|e| cublas_error("cublasLtMatmulPreferenceCreate", e))?;
        let mut p = LtPreference { raw };
        use lt::cublasLtMatmulPreferenceAttributes_t as A;
        p.set(
            A::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
            &(max_workspace_bytes as u64),
        )?;
        for a in [
            A::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
            A::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
            A::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
            A::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
        ] {
            p.set(a, &min_alignment_bytes)?;
        }
        Ok(p)
    }

    /// Exclude split-K reductions (so results do not depend on reduction
    /// order).
    ///
    /// # Errors
    /// `Cublas` on failure.
    pub fn forbid_split_k_reduction(&mut self) -> Result<()> {
        let none = lt::cublasLtReductionScheme_t::CUBLASLT_REDUCTION_SCHEME_NONE as u32;
        self.set(
            lt::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
            &none,
        )
    }

    fn set<V>(&mut self, attr: lt::cublasLtMatmulPreferenceAttributes_t, v: &V) -> Result<()> {
        // SAFETY: `raw` is live; `v` has the size passed and is copied.
        unsafe {
            r::set_matmul_pref_attribute(
                self.raw,
                attr,
                v as *const V as *const c_void,
                std::mem::size_of::<V>(),
            )
        }
        .map_err(|e| cublas_error("cublasLtMatmulPreferenceSetAttribute", e))
    }
}

impl Drop for LtPreference {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        let _ = unsafe { r::destroy_matmul_pref(self.raw) };
    }
}

/// An algorithm returned by the heuristic, with the workspace it needs.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct LtAlgo {
    raw: lt::cublasLtMatmulAlgo_t,
    /// Workspace the algorithm needs, in bytes.
    pub workspace_bytes: usize,
}

impl LtAlgo {
    fn config_u32(&self, attr: lt::cublasLtMatmulAlgoConfigAttributes_t) -> u32 {
        let mut v: u32 = 0;
        let mut written = 0usize;
        // SAFETY: `raw` is a valid algo struct; `v` has room for 4 bytes.
        let st = unsafe {
            lt::cublasLtMatmulAlgoConfigGetAttribute(
                &self.raw,
                attr,
                &mut v as *mut u32 as *mut c_void,
                4,
                &mut written,
            )
        };
        if st == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            v
        } else {
            0
        }
    }
    /// Algorithm id.
    pub fn id(&self) -> u32 {
        self.config_u32(lt::cublasLtMatmulAlgoConfigAttributes_t::CUBLASLT_ALGO_CONFIG_ID)
    }
    /// Tile id.
    pub fn tile(&self) -> u32 {
        self.config_u32(lt::cublasLtMatmulAlgoConfigAttributes_t::CUBLASLT_ALGO_CONFIG_TILE_ID)
    }
    /// Split-K factor (1 = none).
    pub fn split_k(&self) -> u32 {
        self.config_u32(lt::cublasLtMatmulAlgoConfigAttributes_t::CUBLASLT_ALGO_CONFIG_SPLITK_NUM)
            .max(1)
    }
    /// Split-K reduction scheme (0 = none).
    pub fn reduction_scheme(&self) -> u32 {
        self.config_u32(
            lt::cublasLtMatmulAlgoConfigAttributes_t::CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
        )
    }
    /// True when the algorithm reduces without split-K partial sums, so its
    /// result does not depend on reduction order.
    pub fn is_deterministic(&self) -> bool {
        self.split_k() <= 1 || self.reduction_scheme() == 0
    }
    /// A short description: `algo 21 tile 18 splitk 1`.
    pub fn describe(&self) -> String {
        format!(
            "algo {} tile {} splitk {}",
            self.id(),
            self.tile(),
            self.split_k()
        )
    }
}

/// The matrix layouts of one matmul: `A`, `B`, `C`, `D`.
pub struct LtLayouts<'a> {
    /// Layout of `A`.
    pub a: &'a LtLayout,
    /// Layout of `B`.
    pub b: &'a LtLayout,
    /// Layout of `C`.
    pub c: &'a LtLayout,
    /// Layout of `D`.
    pub d: &'a LtLayout,
}

/// Up to `max_count` algorithms for the problem, best first (may be empty).
///
/// # Errors
/// `Cublas` on failure (other than "no algorithm").
pub fn lt_heuristic(
    stream: &Stream,
    desc: &LtMatmulDesc,
    layouts: &LtLayouts<'_>,
    pref: &LtPreference,
    max_count: usize,
) -> Result<Vec<LtAlgo>> {
    let handle = stream.context().handle::<CublasLtHandle>()?;
    stream.context().bind_to_thread()?;
    let max_count = max_count.clamp(1, 64);
    // SAFETY: cublasLtMatmulHeuristicResult_t is plain old data; zero is a
    // valid (empty) value for every field.
    let mut results: Vec<lt::cublasLtMatmulHeuristicResult_t> =
        vec![unsafe { std::mem::zeroed() }; max_count];
    let mut count: i32 = 0;
    // SAFETY: every descriptor is live (owned by the borrowed wrappers);
    // `results` has room for `max_count` entries.
    let st = unsafe {
        lt::cublasLtMatmulAlgoGetHeuristic(
            handle.raw(),
            desc.raw,
            layouts.a.raw,
            layouts.b.raw,
            layouts.c.raw,
            layouts.d.raw,
            pref.raw,
            max_count as i32,
            results.as_mut_ptr(),
            &mut count,
        )
    };
    match st {
        lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS => {}
        lt::cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED => return Ok(Vec::new()),
        other => {
            return Err(cublas_error(
                "cublasLtMatmulAlgoGetHeuristic",
                r::CublasError(other),
            ))
        }
    }
    Ok(results
        .iter()
        .take(count.max(0) as usize)
        .filter(|h| h.state == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS)
        .map(|h| LtAlgo {
            raw: h.algo,
            workspace_bytes: h.workspaceSize,
        })
        .collect())
}

/// Device addresses of one matmul's operands, untyped: the layouts carry
/// the element types.
#[derive(Copy, Clone, Debug, Default)]
pub struct LtPointers {
    /// `A`.
    pub a: DevPtr<u8>,
    /// `B`.
    pub b: DevPtr<u8>,
    /// `C` (may equal `d` when their layouts match; null and unread when
    /// `beta` is 0).
    pub c: DevPtr<u8>,
    /// `D`.
    pub d: DevPtrMut<u8>,
    /// Workspace (null when `workspace_bytes` is 0).
    pub workspace: DevPtrMut<u8>,
    /// Workspace size in bytes.
    pub workspace_bytes: usize,
}

/// Enqueue `D = epilogue(alpha * op(A) op(B) + beta * C)` on `stream`.
///
/// # Errors
/// `Cublas` on failure.
///
/// # Safety
/// Every address in `ptrs` (and the bias/aux/scale pointers set on `desc`)
/// must be device memory of the stream's context holding the elements the
/// layouts describe, stay valid until the work completes, and `D` (and aux
/// or a bias gradient) must not be read or written concurrently by other
/// work. `algo` must come from [`lt_heuristic`] for these descriptors, and
/// the workspace must be at least `algo.workspace_bytes`.
pub unsafe fn lt_matmul(
    stream: &Stream,
    desc: &LtMatmulDesc,
    layouts: &LtLayouts<'_>,
    algo: &LtAlgo,
    alpha: LtScalar,
    beta: LtScalar,
    ptrs: LtPointers,
) -> Result<()> {
    let handle = stream.context().handle::<CublasLtHandle>()?;
    // cuBLASLt enqueues on the calling thread's current context, which other
    // code on this thread may have changed since the handle was made.
    stream.context().bind_to_thread()?;
    // SAFETY: the caller vouches for the addresses; descriptors are live;
    // `alpha`/`beta` live on this stack frame for the call (host pointer
    // mode reads them before returning).
    unsafe {
        r::matmul(
            handle.raw(),
            desc.raw,
            alpha.ptr(),
            beta.ptr(),
            ptrs.a.addr() as *const c_void,
            layouts.a.raw,
            ptrs.b.addr() as *const c_void,
            layouts.b.raw,
            ptrs.c.addr() as *const c_void,
            layouts.c.raw,
            ptrs.d.addr() as *mut c_void,
            layouts.d.raw,
            &algo.raw,
            ptrs.workspace.addr() as *mut c_void,
            ptrs.workspace_bytes,
            stream.raw() as lt::cudaStream_t,
        )
    }
    .map_err(|e| cublas_error("cublasLtMatmul", e))
}
