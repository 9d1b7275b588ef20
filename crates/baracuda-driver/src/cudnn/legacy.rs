//! cuDNN's legacy (pre-graph) convolution API for one problem: tensor,
//! filter and convolution descriptors, `cudnnGetConvolution*Algorithm_v7`
//! heuristics, `cudnnFindConvolution*AlgorithmEx` timing, workspace
//! queries and the three convolution calls. The graph API (`super::graph`)
//! is what normally runs; this one serves what the graph API cannot (in
//! `baracuda-kernels`: operands that are not 16-byte aligned, directions
//! it offers no engine for).
//!
//! A direction is named by the graph node kind that computes it:
//! [`OpKind::ConvolutionForward`], [`OpKind::ConvolutionBackwardData`] or
//! [`OpKind::ConvolutionBackwardFilter`]; other kinds are `Unsupported`.

use std::ffi::{c_int, c_void};

use baracuda_kernels_types::{ElementKind, Error, Result};
use cudarc::cudnn::sys as dnn;

use super::graph::{data_type, OpKind};
use crate::context::Stream;
use crate::handles::CudnnHandle;
use crate::libs::{ensure_loaded, CudaLib};
use crate::status::cudnn_error;

const OP: &str = "cudnn convolution";

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

/// One algorithm of one direction as cuDNN reported it.
#[derive(Clone, Debug, PartialEq)]
pub struct LegacyAlgo {
    /// The `cudnnConvolution*Algo_t` number.
    pub id: u32,
    /// The math mode cuDNN reported for it.
    pub math: ConvMath,
    /// Workspace it needs, in bytes.
    pub workspace_bytes: usize,
    /// cuDNN says its result bits do not depend on scheduling.
    pub deterministic: bool,
    /// Measured time in ms, or -1 when not measured.
    pub time_ms: f32,
}

/// The descriptors of one problem, as cuDNN's Nd descriptors take them
/// (at least 4 dims: `[n, c, spatial...]`; a 1-D problem is padded by the
/// caller).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LegacyConvShape<'a> {
    /// Element type of x, w and y.
    pub dtype: ElementKind,
    /// Accumulation type of the convolution descriptor.
    pub compute: ElementKind,
    /// Extents of x.
    pub x_dims: &'a [i32],
    /// Strides of x, in elements.
    pub x_strides: &'a [i32],
    /// Extents of y.
    pub y_dims: &'a [i32],
    /// Strides of y, in elements.
    pub y_strides: &'a [i32],
    /// Extents of w: `[c_out, c_in / groups, filter...]`.
    pub w_dims: &'a [i32],
    /// w stored channels innermost (`CUDNN_TENSOR_NHWC`), else
    /// `CUDNN_TENSOR_NCHW`.
    pub w_channels_last: bool,
    /// Zero padding per spatial axis (both sides).
    pub pad: &'a [i32],
    /// Stride per spatial axis.
    pub stride: &'a [i32],
    /// Dilation per spatial axis.
    pub dilation: &'a [i32],
    /// Group count.
    pub groups: i32,
}

/// The legacy descriptors of one convolution problem: one convolution
/// descriptor per direction, so each keeps its own math mode.
///
/// Descriptors are written only through `&mut self` (selection); running
/// takes `&self` and only reads them, so one problem may run from many
/// threads at once, each with its own handle from the context's registry.
pub struct LegacyConv {
    x: dnn::cudnnTensorDescriptor_t,
    y: dnn::cudnnTensorDescriptor_t,
    w: dnn::cudnnFilterDescriptor_t,
    conv: [dnn::cudnnConvolutionDescriptor_t; 3],
    double_scalars: bool,
}

// SAFETY: the raw descriptors are host structs owned by this value. They
// are written only through `&mut self`; `&self` methods pass them to cuDNN
// as read-only inputs, which cuDNN allows from several threads at once as
// long as each thread uses its own handle (the registry's guarantee).
unsafe impl Send for LegacyConv {}
// SAFETY: as above.
unsafe impl Sync for LegacyConv {}

impl std::fmt::Debug for LegacyConv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LegacyConv")
    }
}

/// The per-direction slot of a convolution kind.
fn slot(op: OpKind) -> Result<usize> {
    match op {
        OpKind::ConvolutionForward => Ok(0),
        OpKind::ConvolutionBackwardData => Ok(1),
        OpKind::ConvolutionBackwardFilter => Ok(2),
        other => Err(Error::Unsupported {
            op: OP,
            what: format!("{other:?} through the legacy convolution API"),
        }),
    }
}

/// cuDNN's name of legacy algorithm `id` of direction `op`
/// (`IMPLICIT_PRECOMP_GEMM`, `ALGO_1`, ...), `UNKNOWN` for a number it
/// does not define.
pub fn legacy_algo_name(op: OpKind, id: u32) -> &'static str {
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
    let table: &[&'static str] = match op {
        OpKind::ConvolutionForward => &FWD,
        OpKind::ConvolutionBackwardData => &BWD_DATA,
        OpKind::ConvolutionBackwardFilter => &BWD_FILTER,
        _ => &[],
    };
    table.get(id as usize).copied().unwrap_or("UNKNOWN")
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

fn raw_data_type(kind: ElementKind) -> Result<dnn::cudnnDataType_t> {
    data_type(kind).ok_or_else(|| Error::Unsupported {
        op: OP,
        what: format!("cuDNN convolution of {kind} elements"),
    })
}

/// The first `n` (at most 16) entries of a `cudnnConvolution*AlgoPerf_t`
/// array that cuDNN marked successful, as [`LegacyAlgo`]s whose time is
/// `time` (an expression of the entry `r`).
macro_rules! successful {
    ($perf:expr, $n:expr, |$r:ident| $time:expr) => {
        $perf[..($n.max(0) as usize).min(16)]
            .iter()
            .filter(|$r| $r.status == dnn::cudnnStatus_t::CUDNN_STATUS_SUCCESS)
            .map(|$r| LegacyAlgo {
                id: $r.algo as u32,
                math: ConvMath::from_raw($r.mathType),
                workspace_bytes: $r.memory,
                deterministic: $r.determinism == dnn::cudnnDeterminism_t::CUDNN_DETERMINISTIC,
                time_ms: $time,
            })
            .collect()
    };
}

impl LegacyConv {
    /// Build every descriptor of `s`.
    ///
    /// # Errors
    /// `Unsupported` for an element kind cuDNN lacks; `LibraryNotFound`;
    /// `Cudnn` when cuDNN rejects the shapes.
    pub fn new(s: &LegacyConvShape<'_>) -> Result<LegacyConv> {
        ensure_loaded(CudaLib::Cudnn)?;
        let dt = raw_data_type(s.dtype)?;
        let compute = raw_data_type(s.compute)?;
        let rank = s.pad.len();
        if s.stride.len() != rank || s.dilation.len() != rank {
            return Err(Error::InvalidArgument {
                op: OP,
                arg: "shape",
                reason: format!(
                    "pad, stride and dilation of lengths {rank}, {}, {}",
                    s.stride.len(),
                    s.dilation.len()
                ),
            });
        }
        let mut me = LegacyConv {
            x: std::ptr::null_mut(),
            y: std::ptr::null_mut(),
            w: std::ptr::null_mut(),
            conv: [std::ptr::null_mut(); 3],
            double_scalars: s.dtype == ElementKind::F64,
        };
        me.x = tensor_desc(dt, s.x_dims, s.x_strides)?;
        me.y = tensor_desc(dt, s.y_dims, s.y_strides)?;
        me.w = cudarc::cudnn::result::create_filter_descriptor()
            .map_err(|e| cudnn_error("cudnnCreateFilterDescriptor", e))?;
        let fmt = if s.w_channels_last {
            dnn::cudnnTensorFormat_t::CUDNN_TENSOR_NHWC
        } else {
            dnn::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW
        };
        let wd = s.w_dims;
        // SAFETY: `me.w` was just created; `wd` holds `wd.len()` ints.
        unsafe { dnn::cudnnSetFilterNdDescriptor(me.w, dt, fmt, wd.len() as c_int, wd.as_ptr()) }
            .result()
            .map_err(|e| cudnn_error("cudnnSetFilterNdDescriptor", e))?;
        for i in 0..3 {
            me.conv[i] = cudarc::cudnn::result::create_convolution_descriptor()
                .map_err(|e| cudnn_error("cudnnCreateConvolutionDescriptor", e))?;
            // SAFETY: the descriptor was just created; the three arrays
            // each hold `rank` ints (checked above).
            unsafe {
                dnn::cudnnSetConvolutionNdDescriptor(
                    me.conv[i],
                    rank as c_int,
                    s.pad.as_ptr(),
                    s.stride.as_ptr(),
                    s.dilation.as_ptr(),
                    dnn::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
                    compute,
                )
            }
            .result()
            .map_err(|e| cudnn_error("cudnnSetConvolutionNdDescriptor", e))?;
            // SAFETY: live descriptor.
            unsafe { dnn::cudnnSetConvolutionGroupCount(me.conv[i], s.groups) }
                .result()
                .map_err(|e| cudnn_error("cudnnSetConvolutionGroupCount", e))?;
        }
        Ok(me)
    }

    fn set_math(&mut self, i: usize, math: ConvMath) -> Result<()> {
        // SAFETY: live descriptor, exclusively borrowed.
        unsafe { dnn::cudnnSetConvolutionMathType(self.conv[i], math.raw()) }
            .result()
            .map_err(|e| cudnn_error("cudnnSetConvolutionMathType", e))
    }

    /// cuDNN's heuristic ranking of the algorithms of `op` under `math`
    /// (`cudnnGetConvolution*Algorithm_v7`), best first, unsupported ones
    /// dropped. Leaves `op`'s descriptor in `math`.
    ///
    /// # Errors
    /// `Unsupported` for a kind that is no convolution; `Cudnn` on
    /// failure.
    pub fn heuristics(
        &mut self,
        handle: &CudnnHandle,
        stream: &Stream,
        op: OpKind,
        math: ConvMath,
    ) -> Result<Vec<LegacyAlgo>> {
        let i = slot(op)?;
        self.set_math(i, math)?;
        let h = handle.bind(stream)?;
        let c = self.conv[i];
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
                successful!(perf, n, |r| -1.0)
            }};
        }
        Ok(match i {
            0 => query!(
                dnn::cudnnConvolutionFwdAlgoPerf_t,
                cudnnGetConvolutionForwardAlgorithm_v7,
                "cudnnGetConvolutionForwardAlgorithm_v7",
                self.x,
                self.w,
                c,
                self.y
            ),
            1 => query!(
                dnn::cudnnConvolutionBwdDataAlgoPerf_t,
                cudnnGetConvolutionBackwardDataAlgorithm_v7,
                "cudnnGetConvolutionBackwardDataAlgorithm_v7",
                self.w,
                self.y,
                c,
                self.x
            ),
            _ => query!(
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

    /// Time every algorithm of `op` under `math` on the device
    /// (`cudnnFindConvolution*AlgorithmEx`), fastest first. Synchronizes.
    /// Leaves `op`'s descriptor in `math`.
    ///
    /// # Errors
    /// `Unsupported` for a kind that is no convolution; `Cudnn` on
    /// failure.
    ///
    /// # Safety
    /// `a`, `b`, `out` must be device addresses of buffers on the stream's
    /// context holding the operands of `op` (forward: x, w, y; backward
    /// data: w, dy, dx; backward filter: x, dy, dw) in this problem's
    /// shapes and dtype; `out` is overwritten. `ws` must hold `ws_bytes`.
    #[allow(clippy::too_many_arguments)] // one argument per cuDNN operand
    pub unsafe fn measure(
        &mut self,
        handle: &CudnnHandle,
        stream: &Stream,
        op: OpKind,
        math: ConvMath,
        (a, b, out): (u64, u64, u64),
        ws: u64,
        ws_bytes: usize,
    ) -> Result<Vec<LegacyAlgo>> {
        let i = slot(op)?;
        self.set_math(i, math)?;
        let h = handle.bind(stream)?;
        let c = self.conv[i];
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
                successful!(perf, n, |r| r.time)
            }};
        }
        Ok(match i {
            0 => find!(
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
            1 => find!(
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
            _ => find!(
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

    /// Put `op`'s descriptor in `math` and return the workspace algorithm
    /// `id` needs under it, in bytes, as cuDNN reports for the final
    /// descriptor.
    ///
    /// # Errors
    /// `Unsupported` for a kind that is no convolution or an algorithm
    /// number cuDNN does not define; `Cudnn` when cuDNN rejects the
    /// algorithm under this math mode.
    pub fn workspace_bytes(
        &mut self,
        handle: &CudnnHandle,
        stream: &Stream,
        op: OpKind,
        id: u32,
        math: ConvMath,
    ) -> Result<usize> {
        let i = slot(op)?;
        self.set_math(i, math)?;
        let h = handle.bind(stream)?;
        let c = self.conv[i];
        let bad = || Error::Unsupported {
            op: OP,
            what: format!("algorithm id {id}"),
        };
        let mut bytes = 0usize;
        // SAFETY (all three arms): live handle and descriptors; `bytes` is
        // a valid out-pointer.
        match i {
            0 => {
                let a = fwd_algo(id).ok_or_else(bad)?;
                // SAFETY: see above.
                unsafe {
                    dnn::cudnnGetConvolutionForwardWorkspaceSize(
                        h, self.x, self.w, c, self.y, a, &mut bytes,
                    )
                }
                .result()
                .map_err(|e| cudnn_error("cudnnGetConvolutionForwardWorkspaceSize", e))
            }
            1 => {
                let a = bwd_data_algo(id).ok_or_else(bad)?;
                // SAFETY: see above.
                unsafe {
                    dnn::cudnnGetConvolutionBackwardDataWorkspaceSize(
                        h, self.w, self.y, c, self.x, a, &mut bytes,
                    )
                }
                .result()
                .map_err(|e| cudnn_error("cudnnGetConvolutionBackwardDataWorkspaceSize", e))
            }
            _ => {
                let a = bwd_filter_algo(id).ok_or_else(bad)?;
                // SAFETY: see above.
                unsafe {
                    dnn::cudnnGetConvolutionBackwardFilterWorkspaceSize(
                        h, self.x, self.y, c, self.w, a, &mut bytes,
                    )
                }
                .result()
                .map_err(|e| cudnn_error("cudnnGetConvolutionBackwardFilterWorkspaceSize", e))
            }
        }?;
        Ok(bytes)
    }

    /// Enqueue `op` with algorithm `id` on `stream`, under the math mode
    /// its descriptor was last put in: forward `out = conv(a = x, b = w)`;
    /// backward data `out = dx` from `a = w, b = dy`; backward filter
    /// `out = dw` from `a = x, b = dy`. `out` is overwritten (beta 0).
    ///
    /// # Errors
    /// `Unsupported` for a kind that is no convolution or an algorithm
    /// number cuDNN does not define; `Cudnn` on failure.
    ///
    /// # Safety
    /// The addresses must hold this problem's operands on the stream's
    /// context, `out` must not overlap the inputs, and `ws` must hold
    /// `ws_bytes >=` the algorithm's workspace, until the work ends.
    #[allow(clippy::too_many_arguments)] // one argument per cuDNN operand
    pub unsafe fn run(
        &self,
        handle: &CudnnHandle,
        stream: &Stream,
        op: OpKind,
        id: u32,
        (a, b, out): (u64, u64, u64),
        ws: u64,
        ws_bytes: usize,
    ) -> Result<()> {
        let i = slot(op)?;
        let h = handle.bind(stream)?;
        let c = self.conv[i];
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
            what: format!("algorithm id {id}"),
        };
        match i {
            0 => {
                let al = fwd_algo(id).ok_or_else(bad)?;
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
            1 => {
                let al = bwd_data_algo(id).ok_or_else(bad)?;
                // SAFETY: as above.
                unsafe {
                    dnn::cudnnConvolutionBackwardData(
                        h, alpha, self.w, a, self.y, b, c, al, wsp, ws_bytes, beta, self.x, out,
                    )
                }
                .result()
                .map_err(|e| cudnn_error("cudnnConvolutionBackwardData", e))
            }
            _ => {
                let al = bwd_filter_algo(id).ok_or_else(bad)?;
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

fn tensor_desc(
    dt: dnn::cudnnDataType_t,
    dims: &[i32],
    strides: &[i32],
) -> Result<dnn::cudnnTensorDescriptor_t> {
    if strides.len() != dims.len() {
        return Err(Error::InvalidArgument {
            op: OP,
            arg: "strides",
            reason: format!("{} strides for {} dims", strides.len(), dims.len()),
        });
    }
    let d = cudarc::cudnn::result::create_tensor_descriptor()
        .map_err(|e| cudnn_error("cudnnCreateTensorDescriptor", e))?;
    // SAFETY: `d` was just created; `dims` and `strides` hold `dims.len()`
    // ints (checked above).
    let r = unsafe {
        dnn::cudnnSetTensorNdDescriptor(d, dt, dims.len() as c_int, dims.as_ptr(), strides.as_ptr())
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

impl Drop for LegacyConv {
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
    fn names_and_math_modes() {
        assert_eq!(
            legacy_algo_name(OpKind::ConvolutionForward, 1),
            "IMPLICIT_PRECOMP_GEMM"
        );
        assert_eq!(
            legacy_algo_name(OpKind::ConvolutionBackwardFilter, 3),
            "ALGO_3"
        );
        assert_eq!(
            legacy_algo_name(OpKind::ConvolutionBackwardData, 9),
            "UNKNOWN"
        );
        assert_eq!(legacy_algo_name(OpKind::Matmul, 0), "UNKNOWN");
        assert_eq!(ConvMath::from_name("fma_math"), Some(ConvMath::Fma));
        assert!(slot(OpKind::Pointwise).is_err());
    }
}
