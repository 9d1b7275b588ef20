//! Safe wrappers over cuDNN convolutions for one problem: the backend
//! (graph) API in `backend` (engine heuristics A and FALLBACK, engine
//! configs with knobs, execution plans), which is what runs, and the
//! legacy API (tensor, filter and convolution descriptors, `_v7`
//! heuristics, `Find*Ex`), kept as a per-direction fallback for what the
//! backend API cannot express or offers no engine for, and for operands
//! that are not 16-byte aligned.
//!
//! This module tree is the only code of the workspace that calls
//! `cudarc::cudnn`. A [`CudnnConv`] owns every descriptor of one
//! convolution problem and the plan or algorithm chosen for each
//! direction. Descriptors are written only while the caller holds `&mut`
//! (selection); running takes `&self` and only reads them, so one problem
//! may run from many threads at once, each with its own handle from the
//! context's registry.
//!
//! [`graph`] is the same backend API for any graph, which the convolution
//! code here is to be rebuilt on.

mod backend;
pub mod graph;

pub use backend::EngineFilter;

use std::ffi::{c_int, c_void};

use baracuda_kernels_types::{ElementKind, Error, Result};
use cudarc::cudnn::sys as dnn;

use crate::context::Stream;
use crate::handles::CudnnHandle;
use crate::status::cudnn_error;

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
}

/// cuDNN's math mode of a convolution descriptor.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConvMath {
    /// Library default (on Ampere and newer, f32 may use TF32 tensor cores).
    Default,
    /// Tensor-core kernels allowed (f16/bf16 operands).
    TensorOp,
    /// Tensor cores with down-conversion of f32 operands.
    TensorOpAllowConversion,
    /// FMA kernels only: IEEE f32, no TF32.
    Fma,
}

impl ConvMath {
    fn raw(self) -> dnn::cudnnMathType_t {
        match self {
            ConvMath::Default => dnn::cudnnMathType_t::CUDNN_DEFAULT_MATH,
            ConvMath::TensorOp => dnn::cudnnMathType_t::CUDNN_TENSOR_OP_MATH,
            ConvMath::TensorOpAllowConversion => {
                dnn::cudnnMathType_t::CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
            }
            ConvMath::Fma => dnn::cudnnMathType_t::CUDNN_FMA_MATH,
        }
    }
    fn from_raw(m: dnn::cudnnMathType_t) -> ConvMath {
        match m {
            dnn::cudnnMathType_t::CUDNN_DEFAULT_MATH => ConvMath::Default,
            dnn::cudnnMathType_t::CUDNN_TENSOR_OP_MATH => ConvMath::TensorOp,
            dnn::cudnnMathType_t::CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION => {
                ConvMath::TensorOpAllowConversion
            }
            dnn::cudnnMathType_t::CUDNN_FMA_MATH => ConvMath::Fma,
        }
    }
    /// Short name for SKUs and cache files.
    pub fn name(self) -> &'static str {
        match self {
            ConvMath::Default => "default_math",
            ConvMath::TensorOp => "tensor_op_math",
            ConvMath::TensorOpAllowConversion => "tensor_op_math_allow_conversion",
            ConvMath::Fma => "fma_math",
        }
    }
    /// Inverse of [`ConvMath::name`].
    pub fn from_name(s: &str) -> Option<ConvMath> {
        [
            ConvMath::Default,
            ConvMath::TensorOp,
            ConvMath::TensorOpAllowConversion,
            ConvMath::Fma,
        ]
        .into_iter()
        .find(|m| m.name() == s)
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
            ConvApi::Legacy => format!("legacy:{}", self.legacy_name()),
        }
    }

    fn legacy_name(&self) -> &'static str {
        const FWD: [&str; 8] = [
            "IMPLICIT_GEMM",
            "IMPLICIT_PRECOMP_GEMM",
            "GEMM",
            "DIRECT",
            "FFT",
            "FFT_TILING",
            "WINOGRAD",
            "WINOGRAD_NONFUSED",
        ];
        const BWD_DATA: [&str; 6] = [
            "ALGO_0",
            "ALGO_1",
            "FFT",
            "FFT_TILING",
            "WINOGRAD",
            "WINOGRAD_NONFUSED",
        ];
        const BWD_FILTER: [&str; 7] = [
            "ALGO_0",
            "ALGO_1",
            "FFT",
            "ALGO_3",
            "WINOGRAD",
            "WINOGRAD_NONFUSED",
            "FFT_TILING",
        ];
        let table: &[&'static str] = match self.direction {
            ConvDirection::Forward => &FWD,
            ConvDirection::BackwardData => &BWD_DATA,
            ConvDirection::BackwardFilter => &BWD_FILTER,
        };
        table.get(self.id as usize).copied().unwrap_or("UNKNOWN")
    }
}

fn fwd_algo(id: u32) -> Option<dnn::cudnnConvolutionFwdAlgo_t> {
    use dnn::cudnnConvolutionFwdAlgo_t as A;
    Some(match id {
        0 => A::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
        1 => A::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
        2 => A::CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
        3 => A::CUDNN_CONVOLUTION_FWD_ALGO_DIRECT,
        4 => A::CUDNN_CONVOLUTION_FWD_ALGO_FFT,
        5 => A::CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING,
        6 => A::CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD,
        7 => A::CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
        _ => return None,
    })
}

fn bwd_data_algo(id: u32) -> Option<dnn::cudnnConvolutionBwdDataAlgo_t> {
    use dnn::cudnnConvolutionBwdDataAlgo_t as A;
    Some(match id {
        0 => A::CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
        1 => A::CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
        2 => A::CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT,
        3 => A::CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING,
        4 => A::CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD,
        5 => A::CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
        _ => return None,
    })
}

fn bwd_filter_algo(id: u32) -> Option<dnn::cudnnConvolutionBwdFilterAlgo_t> {
    use dnn::cudnnConvolutionBwdFilterAlgo_t as A;
    Some(match id {
        0 => A::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
        1 => A::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
        2 => A::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT,
        3 => A::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3,
        4 => A::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD,
        5 => A::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
        6 => A::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING,
        _ => return None,
    })
}

fn data_type(op: &'static str, e: ElementKind) -> Result<dnn::cudnnDataType_t> {
    Ok(match e {
        ElementKind::F32 => dnn::cudnnDataType_t::CUDNN_DATA_FLOAT,
        ElementKind::F64 => dnn::cudnnDataType_t::CUDNN_DATA_DOUBLE,
        ElementKind::F16 => dnn::cudnnDataType_t::CUDNN_DATA_HALF,
        ElementKind::Bf16 => dnn::cudnnDataType_t::CUDNN_DATA_BFLOAT16,
        other => {
            return Err(Error::Unsupported {
                op,
                what: format!("cuDNN convolution of {other} elements"),
            })
        }
    })
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
    /// Zero padding per spatial axis (both sides).
    pub pad: Vec<i32>,
    /// Stride per spatial axis.
    pub stride: Vec<i32>,
    /// Dilation per spatial axis.
    pub dilation: Vec<i32>,
    /// Group count.
    pub groups: i32,
}

/// Dense strides (in elements) of `dims` = `[n, c, s0, s1, ...]` for the
/// given layout.
fn layout_strides(dims: &[i32], channels_last: bool) -> Vec<i32> {
    let r = dims.len();
    let mut st = vec![0i32; r];
    if channels_last {
        // physical order n, s0, s1, ..., c
        let mut acc = 1i32;
        st[1] = 1;
        acc *= dims[1];
        for i in (2..r).rev() {
            st[i] = acc;
            acc *= dims[i];
        }
        st[0] = acc;
    } else {
        let mut acc = 1i32;
        for i in (0..r).rev() {
            st[i] = acc;
            acc *= dims[i];
        }
    }
    st
}

/// Descriptors, backend plans and legacy algorithms of one convolution
/// problem.
pub struct CudnnConv {
    x: dnn::cudnnTensorDescriptor_t,
    y: dnn::cudnnTensorDescriptor_t,
    w: dnn::cudnnFilterDescriptor_t,
    conv: [dnn::cudnnConvolutionDescriptor_t; 3],
    /// Legacy algorithm per direction (the fallback).
    legacy: [Option<ConvAlgo>; 3],
    double_scalars: bool,
    /// Backend tensors and convolution; `Err` when the backend API
    /// rejected the problem (the legacy path then serves it).
    tensors: std::result::Result<backend::ConvTensors, Error>,
    /// Backend graph per direction, built on first use.
    graphs: [Option<backend::OpGraph>; 3],
    /// Backend plans under consideration, per direction.
    candidates: [Vec<backend::ExecPlan>; 3],
    /// The backend plan chosen per direction.
    plans: [Option<backend::ExecPlan>; 3],
}

// SAFETY: the raw descriptors are host structs owned by this value. They
// are written only through `&mut self`; `&self` methods pass them to cuDNN
// as read-only inputs, which cuDNN allows from several threads at once as
// long as each thread uses its own handle (the registry's guarantee).
unsafe impl Send for CudnnConv {}
// SAFETY: as above.
unsafe impl Sync for CudnnConv {}

impl std::fmt::Debug for CudnnConv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let chosen: Vec<Option<ConvAlgo>> =
            ConvDirection::ALL.iter().map(|&d| self.chosen(d)).collect();
        write!(f, "CudnnConv({chosen:?})")
    }
}

const OP: &str = "cudnn convolution";

impl CudnnConv {
    /// Build every descriptor of `p`. Algorithms are chosen afterwards with
    /// [`CudnnConv::choose`].
    ///
    /// # Errors
    /// `Unsupported` for a dtype cuDNN does not take or a spatial rank
    /// outside 1..=3; `LibraryNotFound`; `Cudnn` when cuDNN rejects the
    /// shapes.
    pub fn new(p: &CudnnConvProblem) -> Result<CudnnConv> {
        crate::libs::ensure_loaded(crate::libs::CudaLib::Cudnn)?;
        let rank = p.x_spatial.len();
        if !(1..=3).contains(&rank)
            || [
                p.w_spatial.len(),
                p.y_spatial.len(),
                p.pad.len(),
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
        let dt = data_type(OP, p.dtype)?;
        let compute = if p.dtype == ElementKind::F64 {
            dnn::cudnnDataType_t::CUDNN_DATA_DOUBLE
        } else {
            dnn::cudnnDataType_t::CUDNN_DATA_FLOAT
        };
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
        let stride = ext(&p.stride, 1);
        let dil = ext(&p.dilation, 1);
        let mut xd = vec![p.batch, p.c_in];
        xd.extend(&xs);
        let mut yd = vec![p.batch, p.c_out];
        yd.extend(&ys);
        let mut wd = vec![p.c_out, p.c_in / p.groups.max(1)];
        wd.extend(&ws);

        let mut me = CudnnConv {
            x: std::ptr::null_mut(),
            y: std::ptr::null_mut(),
            w: std::ptr::null_mut(),
            conv: [std::ptr::null_mut(); 3],
            legacy: [None, None, None],
            double_scalars: p.dtype == ElementKind::F64,
            tensors: backend::ConvTensors::new(p, &xd, &wd, &yd, &pad, &stride, &dil),
            graphs: [None, None, None],
            candidates: [Vec::new(), Vec::new(), Vec::new()],
            plans: [None, None, None],
        };
        me.x = tensor_desc(dt, &xd, p.channels_last)?;
        me.y = tensor_desc(dt, &yd, p.channels_last)?;
        me.w = cudarc::cudnn::result::create_filter_descriptor()
            .map_err(|e| cudnn_error("cudnnCreateFilterDescriptor", e))?;
        let fmt = if p.channels_last {
            dnn::cudnnTensorFormat_t::CUDNN_TENSOR_NHWC
        } else {
            dnn::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW
        };
        // SAFETY: `me.w` was just created; `wd` holds `wd.len()` ints.
        unsafe { dnn::cudnnSetFilterNdDescriptor(me.w, dt, fmt, wd.len() as c_int, wd.as_ptr()) }
            .result()
            .map_err(|e| cudnn_error("cudnnSetFilterNdDescriptor", e))?;
        for i in 0..3 {
            me.conv[i] = cudarc::cudnn::result::create_convolution_descriptor()
                .map_err(|e| cudnn_error("cudnnCreateConvolutionDescriptor", e))?;
            // SAFETY: the descriptor was just created; the three arrays
            // each hold `pad.len()` ints.
            unsafe {
                dnn::cudnnSetConvolutionNdDescriptor(
                    me.conv[i],
                    pad.len() as c_int,
                    pad.as_ptr(),
                    stride.as_ptr(),
                    dil.as_ptr(),
                    dnn::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
                    compute,
                )
            }
            .result()
            .map_err(|e| cudnn_error("cudnnSetConvolutionNdDescriptor", e))?;
            // SAFETY: live descriptor.
            unsafe { dnn::cudnnSetConvolutionGroupCount(me.conv[i], p.groups) }
                .result()
                .map_err(|e| cudnn_error("cudnnSetConvolutionGroupCount", e))?;
        }
        Ok(me)
    }

    fn set_math(&mut self, dir: ConvDirection, math: ConvMath) -> Result<()> {
        // SAFETY: live descriptor, exclusively borrowed.
        unsafe { dnn::cudnnSetConvolutionMathType(self.conv[dir.index()], math.raw()) }
            .result()
            .map_err(|e| cudnn_error("cudnnSetConvolutionMathType", e))
    }

    /// cuDNN's heuristic ranking of the algorithms of `dir` under `math`
    /// (`cudnnGetConvolution*Algorithm_v7`), best first, unsupported ones
    /// dropped.
    ///
    /// # Errors
    /// `Cudnn` on failure.
    pub fn heuristics(
        &mut self,
        handle: &CudnnHandle,
        stream: &Stream,
        dir: ConvDirection,
        math: ConvMath,
    ) -> Result<Vec<ConvAlgo>> {
        self.set_math(dir, math)?;
        let h = handle.bind(stream)?;
        let c = self.conv[dir.index()];
        let mut n: c_int = 0;
        macro_rules! query {
            ($perf:ty, $call:ident, $name:literal, $($a:expr),*) => {{
                // SAFETY: all-zero bytes are a valid perf struct (status
                // SUCCESS, algo 0) that cuDNN overwrites.
                let mut perf: [$perf; 16] = unsafe { std::mem::zeroed() };
                // SAFETY: live handle and descriptors; `perf` has room for
                // the 16 results requested.
                unsafe { dnn::$call(h, $($a),*, 16, &mut n, perf.as_mut_ptr()) }
                    .result()
                    .map_err(|e| cudnn_error($name, e))?;
                perf[..(n.max(0) as usize).min(16)]
                    .iter()
                    .filter(|r| r.status == dnn::cudnnStatus_t::CUDNN_STATUS_SUCCESS)
                    .map(|r| ConvAlgo {
                        direction: dir,
                        api: ConvApi::Legacy,
                        id: r.algo as u32,
                        knobs: Vec::new(),
                        math: ConvMath::from_raw(r.mathType),
                        workspace_bytes: r.memory,
                        deterministic: r.determinism
                            == dnn::cudnnDeterminism_t::CUDNN_DETERMINISTIC,
                        time_ms: -1.0,
                    })
                    .collect()
            }};
        }
        Ok(match dir {
            ConvDirection::Forward => query!(
                dnn::cudnnConvolutionFwdAlgoPerf_t,
                cudnnGetConvolutionForwardAlgorithm_v7,
                "cudnnGetConvolutionForwardAlgorithm_v7",
                self.x,
                self.w,
                c,
                self.y
            ),
            ConvDirection::BackwardData => query!(
                dnn::cudnnConvolutionBwdDataAlgoPerf_t,
                cudnnGetConvolutionBackwardDataAlgorithm_v7,
                "cudnnGetConvolutionBackwardDataAlgorithm_v7",
                self.w,
                self.y,
                c,
                self.x
            ),
            ConvDirection::BackwardFilter => query!(
                dnn::cudnnConvolutionBwdFilterAlgoPerf_t,
                cudnnGetConvolutionBackwardFilterAlgorithm_v7,
                "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                self.x,
                self.y,
                c,
                self.w
            ),
        })
    }

    /// Time every algorithm of `dir` under `math` on the device
    /// (`cudnnFindConvolution*AlgorithmEx`), fastest first. Synchronizes.
    ///
    /// # Errors
    /// `Cudnn` on failure.
    ///
    /// # Safety
    /// `a`, `b`, `out` must be device addresses of buffers on the stream's
    /// context holding the operands of `dir` (Forward: x, w, y;
    /// BackwardData: w, dy, dx; BackwardFilter: x, dy, dw) in this problem's
    /// shapes and dtype; `out` is overwritten. `ws` must hold `ws_bytes`.
    #[allow(clippy::too_many_arguments)] // one argument per cuDNN operand
    pub unsafe fn measure(
        &mut self,
        handle: &CudnnHandle,
        stream: &Stream,
        dir: ConvDirection,
        math: ConvMath,
        (a, b, out): (u64, u64, u64),
        ws: u64,
        ws_bytes: usize,
    ) -> Result<Vec<ConvAlgo>> {
        self.set_math(dir, math)?;
        let h = handle.bind(stream)?;
        let c = self.conv[dir.index()];
        let (a, b, out, wsp) = (
            a as *const c_void,
            b as *const c_void,
            out as *mut c_void,
            ws as *mut c_void,
        );
        let mut n: c_int = 0;
        macro_rules! find {
            ($perf:ty, $call:ident, $name:literal, $($a:expr),*) => {{
                // SAFETY: all-zero bytes are a valid perf struct.
                let mut perf: [$perf; 16] = unsafe { std::mem::zeroed() };
                // SAFETY: the caller guarantees the operands and workspace;
                // `perf` has room for 16 results.
                unsafe { dnn::$call(h, $($a),*, 16, &mut n, perf.as_mut_ptr(), wsp, ws_bytes) }
                    .result()
                    .map_err(|e| cudnn_error($name, e))?;
                perf[..(n.max(0) as usize).min(16)]
                    .iter()
                    .filter(|r| r.status == dnn::cudnnStatus_t::CUDNN_STATUS_SUCCESS)
                    .map(|r| ConvAlgo {
                        direction: dir,
                        api: ConvApi::Legacy,
                        id: r.algo as u32,
                        knobs: Vec::new(),
                        math: ConvMath::from_raw(r.mathType),
                        workspace_bytes: r.memory,
                        deterministic: r.determinism
                            == dnn::cudnnDeterminism_t::CUDNN_DETERMINISTIC,
                        time_ms: r.time,
                    })
                    .collect()
            }};
        }
        Ok(match dir {
            ConvDirection::Forward => find!(
                dnn::cudnnConvolutionFwdAlgoPerf_t,
                cudnnFindConvolutionForwardAlgorithmEx,
                "cudnnFindConvolutionForwardAlgorithmEx",
                self.x,
                a,
                self.w,
                b,
                c,
                self.y,
                out
            ),
            ConvDirection::BackwardData => find!(
                dnn::cudnnConvolutionBwdDataAlgoPerf_t,
                cudnnFindConvolutionBackwardDataAlgorithmEx,
                "cudnnFindConvolutionBackwardDataAlgorithmEx",
                self.w,
                a,
                self.y,
                b,
                c,
                self.x,
                out
            ),
            ConvDirection::BackwardFilter => find!(
                dnn::cudnnConvolutionBwdFilterAlgoPerf_t,
                cudnnFindConvolutionBackwardFilterAlgorithmEx,
                "cudnnFindConvolutionBackwardFilterAlgorithmEx",
                self.x,
                a,
                self.y,
                b,
                c,
                self.w,
                out
            ),
        })
    }

    /// Make `algo` (run under `math`) the algorithm of its direction and
    /// return the workspace it needs in bytes, as cuDNN reports for the
    /// final descriptor.
    ///
    /// # Errors
    /// `Cudnn` when cuDNN rejects the algorithm under this math mode.
    pub fn choose(
        &mut self,
        handle: &CudnnHandle,
        stream: &Stream,
        algo: ConvAlgo,
        math: ConvMath,
    ) -> Result<usize> {
        let dir = algo.direction;
        self.set_math(dir, math)?;
        let h = handle.bind(stream)?;
        let c = self.conv[dir.index()];
        let bad = || Error::Unsupported {
            op: OP,
            what: format!("algorithm id {}", algo.id),
        };
        let mut bytes = 0usize;
        // SAFETY (all three arms): live handle and descriptors; `bytes` is
        // a valid out-pointer.
        let st = match dir {
            ConvDirection::Forward => {
                let a = fwd_algo(algo.id).ok_or_else(bad)?;
                // SAFETY: see above.
                unsafe {
                    dnn::cudnnGetConvolutionForwardWorkspaceSize(
                        h, self.x, self.w, c, self.y, a, &mut bytes,
                    )
                }
                .result()
                .map_err(|e| cudnn_error("cudnnGetConvolutionForwardWorkspaceSize", e))
            }
            ConvDirection::BackwardData => {
                let a = bwd_data_algo(algo.id).ok_or_else(bad)?;
                // SAFETY: see above.
                unsafe {
                    dnn::cudnnGetConvolutionBackwardDataWorkspaceSize(
                        h, self.w, self.y, c, self.x, a, &mut bytes,
                    )
                }
                .result()
                .map_err(|e| cudnn_error("cudnnGetConvolutionBackwardDataWorkspaceSize", e))
            }
            ConvDirection::BackwardFilter => {
                let a = bwd_filter_algo(algo.id).ok_or_else(bad)?;
                // SAFETY: see above.
                unsafe {
                    dnn::cudnnGetConvolutionBackwardFilterWorkspaceSize(
                        h, self.x, self.y, c, self.w, a, &mut bytes,
                    )
                }
                .result()
                .map_err(|e| cudnn_error("cudnnGetConvolutionBackwardFilterWorkspaceSize", e))
            }
        };
        st?;
        self.legacy[dir.index()] = Some(ConvAlgo {
            math,
            workspace_bytes: bytes,
            ..algo
        });
        Ok(bytes)
    }

    /// What runs `dir`: the chosen backend plan, else the legacy
    /// algorithm, if any.
    pub fn chosen(&self, dir: ConvDirection) -> Option<ConvAlgo> {
        self.plans[dir.index()]
            .as_ref()
            .map(|p| p.algo.clone())
            .or_else(|| self.legacy[dir.index()].clone())
    }

    /// Forget the legacy algorithm of `dir` (none qualified).
    pub fn clear_legacy(&mut self, dir: ConvDirection) {
        self.legacy[dir.index()] = None;
    }

    /// The legacy algorithm chosen for `dir` (the fallback), if any.
    pub fn legacy(&self, dir: ConvDirection) -> Option<ConvAlgo> {
        self.legacy[dir.index()].clone()
    }

    fn graph(
        &mut self,
        handle: &CudnnHandle,
        stream: &Stream,
        dir: ConvDirection,
    ) -> Result<&backend::OpGraph> {
        let h = handle.bind(stream)?;
        let i = dir.index();
        if self.graphs[i].is_none() {
            let t = self.tensors.as_ref().map_err(Clone::clone)?;
            self.graphs[i] = Some(t.graph(h, dir)?);
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
    pub fn engine_candidates(
        &mut self,
        handle: &CudnnHandle,
        stream: &Stream,
        dir: ConvDirection,
        filter: &EngineFilter,
        max: usize,
    ) -> Result<(Vec<ConvAlgo>, Vec<String>)> {
        let h = handle.bind(stream)?;
        let (plans, rejected) = self.graph(handle, stream, dir)?.candidates(h, filter, max);
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
    pub fn engine_from_config(
        &mut self,
        handle: &CudnnHandle,
        stream: &Stream,
        dir: ConvDirection,
        id: u32,
        knobs: &[(u32, i64)],
        filter: &EngineFilter,
    ) -> Result<ConvAlgo> {
        let h = handle.bind(stream)?;
        let plan = self
            .graph(handle, stream, dir)?
            .rebuild(h, id, knobs, filter)?;
        let algo = plan.algo.clone();
        self.candidates[dir.index()] = vec![plan];
        Ok(algo)
    }

    /// Make candidate `i` of `dir` its backend plan (dropping the other
    /// candidates) and return its workspace in bytes.
    ///
    /// # Errors
    /// `InvalidArgument` when there is no candidate `i`.
    pub fn choose_candidate(
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
    /// As [`CudnnConv::run`], with `ws_bytes` at least the candidate's
    /// workspace.
    pub unsafe fn run_candidate(
        &self,
        handle: &CudnnHandle,
        stream: &Stream,
        dir: ConvDirection,
        i: usize,
        ops: (u64, u64, u64),
        ws: u64,
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
        let h = handle.bind(stream)?;
        // SAFETY: the caller's contract; alignment checked above.
        unsafe { plan.execute(h, ops, ws) }
    }

    /// Enqueue direction `dir` on `stream`: Forward `out = conv(a = x, b =
    /// w)`; BackwardData `out = dx` from `a = w, b = dy`; BackwardFilter
    /// `out = dw` from `a = x, b = dy`. `out` is overwritten (beta 0).
    /// Runs the backend plan when one was chosen and every address is
    /// 16-byte aligned, else the legacy algorithm.
    ///
    /// # Errors
    /// `Unsupported` when neither can run; `Cudnn` on failure.
    ///
    /// # Safety
    /// The addresses must hold this problem's operands on the stream's
    /// context, `out` must not overlap the inputs, and `ws` must hold
    /// `ws_bytes >=` the chosen plan's and algorithm's workspace, until the
    /// work ends.
    pub unsafe fn run(
        &self,
        handle: &CudnnHandle,
        stream: &Stream,
        dir: ConvDirection,
        (a, b, out): (u64, u64, u64),
        ws: u64,
        ws_bytes: usize,
    ) -> Result<()> {
        if let Some(plan) = &self.plans[dir.index()] {
            if aligned((a, b, out), ws) {
                let h = handle.bind(stream)?;
                // SAFETY: the caller's contract; alignment checked above.
                return unsafe { plan.execute(h, (a, b, out), ws) };
            }
        }
        let algo = self.legacy[dir.index()].clone().ok_or_else(|| Error::Unsupported {
            op: OP,
            what: format!(
                "{dir:?}: the backend plan needs 16-byte aligned operands and no legacy algorithm was chosen"
            ),
        })?;
        let h = handle.bind(stream)?;
        let c = self.conv[dir.index()];
        let (one_d, zero_d) = (1.0f64, 0.0f64);
        let (one_f, zero_f) = (1.0f32, 0.0f32);
        let (alpha, beta) = if self.double_scalars {
            (
                &one_d as *const f64 as *const c_void,
                &zero_d as *const f64 as *const c_void,
            )
        } else {
            (
                &one_f as *const f32 as *const c_void,
                &zero_f as *const f32 as *const c_void,
            )
        };
        let (a, b, out, wsp) = (
            a as *const c_void,
            b as *const c_void,
            out as *mut c_void,
            ws as *mut c_void,
        );
        let bad = || Error::Unsupported {
            op: OP,
            what: format!("algorithm id {}", algo.id),
        };
        match dir {
            ConvDirection::Forward => {
                let al = fwd_algo(algo.id).ok_or_else(bad)?;
                // SAFETY: the caller guarantees operands and workspace; the
                // scalars live on this frame for the call.
                unsafe {
                    dnn::cudnnConvolutionForward(
                        h, alpha, self.x, a, self.w, b, c, al, wsp, ws_bytes, beta, self.y, out,
                    )
                }
                .result()
                .map_err(|e| cudnn_error("cudnnConvolutionForward", e))
            }
            ConvDirection::BackwardData => {
                let al = bwd_data_algo(algo.id).ok_or_else(bad)?;
                // SAFETY: as above.
                unsafe {
                    dnn::cudnnConvolutionBackwardData(
                        h, alpha, self.w, a, self.y, b, c, al, wsp, ws_bytes, beta, self.x, out,
                    )
                }
                .result()
                .map_err(|e| cudnn_error("cudnnConvolutionBackwardData", e))
            }
            ConvDirection::BackwardFilter => {
                let al = bwd_filter_algo(algo.id).ok_or_else(bad)?;
                // SAFETY: as above.
                unsafe {
                    dnn::cudnnConvolutionBackwardFilter(
                        h, alpha, self.x, a, self.y, b, c, al, wsp, ws_bytes, beta, self.w, out,
                    )
                }
                .result()
                .map_err(|e| cudnn_error("cudnnConvolutionBackwardFilter", e))
            }
        }
    }
}

/// Every operand (and the workspace, when there is one) on the backend
/// plans' declared alignment.
fn aligned((a, b, out): (u64, u64, u64), ws: u64) -> bool {
    [a, b, out, ws].iter().all(|&p| p % backend::ALIGNMENT == 0)
}

fn tensor_desc(
    dt: dnn::cudnnDataType_t,
    dims: &[i32],
    channels_last: bool,
) -> Result<dnn::cudnnTensorDescriptor_t> {
    let d = cudarc::cudnn::result::create_tensor_descriptor()
        .map_err(|e| cudnn_error("cudnnCreateTensorDescriptor", e))?;
    let st = layout_strides(dims, channels_last);
    // SAFETY: `d` was just created; `dims` and `st` hold `dims.len()` ints.
    let r = unsafe {
        dnn::cudnnSetTensorNdDescriptor(d, dt, dims.len() as c_int, dims.as_ptr(), st.as_ptr())
    }
    .result()
    .map_err(|e| cudnn_error("cudnnSetTensorNdDescriptor", e));
    if let Err(e) = r {
        // SAFETY: created above, destroyed once.
        let _ = unsafe { cudarc::cudnn::result::destroy_tensor_descriptor(d) };
        return Err(e);
    }
    Ok(d)
}

impl Drop for CudnnConv {
    fn drop(&mut self) {
        // SAFETY: each non-null descriptor was created by this value and is
        // destroyed exactly once here.
        unsafe {
            if !self.x.is_null() {
                let _ = cudarc::cudnn::result::destroy_tensor_descriptor(self.x);
            }
            if !self.y.is_null() {
                let _ = cudarc::cudnn::result::destroy_tensor_descriptor(self.y);
            }
            if !self.w.is_null() {
                let _ = cudarc::cudnn::result::destroy_filter_descriptor(self.w);
            }
            for c in self.conv {
                if !c.is_null() {
                    let _ = cudarc::cudnn::result::destroy_convolution_descriptor(c);
                }
            }
        }
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
        assert!(aligned((256, 512, 1024), 0));
        assert!(!aligned((256, 514, 1024), 0));
        assert_eq!(ConvMath::from_name("fma_math"), Some(ConvMath::Fma));
    }
}
