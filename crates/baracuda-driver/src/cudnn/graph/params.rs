//! The parameter descriptors operation nodes take ([`OpParams`]: a
//! convolution's padding and strides, a pointwise node's function, a
//! matmul's or reduction's accumulation type) and the scalars set on
//! nodes.

use std::sync::Arc;

use baracuda_kernels_types::{ElementKind, Error, Result};
use cudarc::cudnn::sys as dnn;

use super::descriptor::{Descriptor, Value, A, D, T};
use super::tensor::data_type_value;
use crate::libs::{ensure_loaded, CudaLib};

const OP: &str = "cudnn operation";

/// The kinds of parameter descriptor.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ParamsKind {
    /// `CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR`.
    Convolution,
    /// `CUDNN_BACKEND_POINTWISE_DESCRIPTOR`.
    Pointwise,
    /// `CUDNN_BACKEND_MATMUL_DESCRIPTOR`.
    Matmul,
    /// `CUDNN_BACKEND_REDUCTION_DESCRIPTOR`.
    Reduction,
}

/// A scalar attribute value: f64 for f64 graphs, f32 otherwise, as cuDNN
/// requires of alpha and beta.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Scalar {
    /// `CUDNN_TYPE_FLOAT`.
    F32(f32),
    /// `CUDNN_TYPE_DOUBLE`.
    F64(f64),
}

impl Scalar {
    /// `v` as the scalar type of a graph computing in `compute`: f64 for
    /// f64, else f32.
    pub fn for_compute(compute: ElementKind, v: f64) -> Scalar {
        if compute == ElementKind::F64 {
            Scalar::F64(v)
        } else {
            Scalar::F32(v as f32)
        }
    }
    pub(crate) fn value(self) -> Value<'static> {
        match self {
            Scalar::F32(v) => Value::F32(v),
            Scalar::F64(v) => Value::F64(v),
        }
    }
}

/// A finalized parameter descriptor. Cheap to clone; operations keep the
/// parameters they take alive.
#[derive(Clone)]
pub struct OpParams {
    pub(crate) desc: Arc<Descriptor>,
    pub(crate) kind: ParamsKind,
}

impl std::fmt::Debug for OpParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OpParams({:?})", self.kind)
    }
}

/// cuDNN's two convolution modes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConvolutionMode {
    /// `y[o] = sum_r x[o + r] w[r]` (what deep-learning frameworks call
    /// convolution).
    CrossCorrelation,
    /// The filter flipped: `y[o] = sum_r x[o + r] w[R - 1 - r]`.
    Convolution,
}

/// The settings of a convolution node, one value per spatial axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvolutionParams<'a> {
    /// Accumulation type.
    pub compute: ElementKind,
    /// Cross-correlation or convolution.
    pub mode: ConvolutionMode,
    /// Zero padding before each axis.
    pub pre_padding: &'a [i64],
    /// Zero padding after each axis.
    pub post_padding: &'a [i64],
    /// Filter strides.
    pub strides: &'a [i64],
    /// Filter dilations.
    pub dilations: &'a [i64],
}

/// The elementwise functions of a pointwise node (`cudnnPointwiseMode_t`).
#[allow(missing_docs)] // each variant is cuDNN's mode of the same name
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum PointwiseMode {
    Add,
    AddSquare,
    Div,
    Max,
    Min,
    Mod,
    Mul,
    Pow,
    Sub,
    Abs,
    Ceil,
    Cos,
    Exp,
    Floor,
    Log,
    Neg,
    Rsqrt,
    Sin,
    Sqrt,
    Tan,
    Erf,
    Identity,
    Reciprocal,
    Atan2,
    ReluFwd,
    TanhFwd,
    SigmoidFwd,
    EluFwd,
    GeluFwd,
    SoftplusFwd,
    SwishFwd,
    GeluApproxTanhFwd,
    ReluBwd,
    TanhBwd,
    SigmoidBwd,
    EluBwd,
    GeluBwd,
    SoftplusBwd,
    SwishBwd,
    GeluApproxTanhBwd,
    CmpEq,
    CmpNeq,
    CmpGt,
    CmpGe,
    CmpLt,
    CmpLe,
    LogicalAnd,
    LogicalOr,
    LogicalNot,
    GenIndex,
    BinarySelect,
}

impl PointwiseMode {
    fn raw(self) -> dnn::cudnnPointwiseMode_t {
        use dnn::cudnnPointwiseMode_t as M;
        use PointwiseMode as P;
        match self {
            P::Add => M::CUDNN_POINTWISE_ADD,
            P::AddSquare => M::CUDNN_POINTWISE_ADD_SQUARE,
            P::Div => M::CUDNN_POINTWISE_DIV,
            P::Max => M::CUDNN_POINTWISE_MAX,
            P::Min => M::CUDNN_POINTWISE_MIN,
            P::Mod => M::CUDNN_POINTWISE_MOD,
            P::Mul => M::CUDNN_POINTWISE_MUL,
            P::Pow => M::CUDNN_POINTWISE_POW,
            P::Sub => M::CUDNN_POINTWISE_SUB,
            P::Abs => M::CUDNN_POINTWISE_ABS,
            P::Ceil => M::CUDNN_POINTWISE_CEIL,
            P::Cos => M::CUDNN_POINTWISE_COS,
            P::Exp => M::CUDNN_POINTWISE_EXP,
            P::Floor => M::CUDNN_POINTWISE_FLOOR,
            P::Log => M::CUDNN_POINTWISE_LOG,
            P::Neg => M::CUDNN_POINTWISE_NEG,
            P::Rsqrt => M::CUDNN_POINTWISE_RSQRT,
            P::Sin => M::CUDNN_POINTWISE_SIN,
            P::Sqrt => M::CUDNN_POINTWISE_SQRT,
            P::Tan => M::CUDNN_POINTWISE_TAN,
            P::Erf => M::CUDNN_POINTWISE_ERF,
            P::Identity => M::CUDNN_POINTWISE_IDENTITY,
            P::Reciprocal => M::CUDNN_POINTWISE_RECIPROCAL,
            P::Atan2 => M::CUDNN_POINTWISE_ATAN2,
            P::ReluFwd => M::CUDNN_POINTWISE_RELU_FWD,
            P::TanhFwd => M::CUDNN_POINTWISE_TANH_FWD,
            P::SigmoidFwd => M::CUDNN_POINTWISE_SIGMOID_FWD,
            P::EluFwd => M::CUDNN_POINTWISE_ELU_FWD,
            P::GeluFwd => M::CUDNN_POINTWISE_GELU_FWD,
            P::SoftplusFwd => M::CUDNN_POINTWISE_SOFTPLUS_FWD,
            P::SwishFwd => M::CUDNN_POINTWISE_SWISH_FWD,
            P::GeluApproxTanhFwd => M::CUDNN_POINTWISE_GELU_APPROX_TANH_FWD,
            P::ReluBwd => M::CUDNN_POINTWISE_RELU_BWD,
            P::TanhBwd => M::CUDNN_POINTWISE_TANH_BWD,
            P::SigmoidBwd => M::CUDNN_POINTWISE_SIGMOID_BWD,
            P::EluBwd => M::CUDNN_POINTWISE_ELU_BWD,
            P::GeluBwd => M::CUDNN_POINTWISE_GELU_BWD,
            P::SoftplusBwd => M::CUDNN_POINTWISE_SOFTPLUS_BWD,
            P::SwishBwd => M::CUDNN_POINTWISE_SWISH_BWD,
            P::GeluApproxTanhBwd => M::CUDNN_POINTWISE_GELU_APPROX_TANH_BWD,
            P::CmpEq => M::CUDNN_POINTWISE_CMP_EQ,
            P::CmpNeq => M::CUDNN_POINTWISE_CMP_NEQ,
            P::CmpGt => M::CUDNN_POINTWISE_CMP_GT,
            P::CmpGe => M::CUDNN_POINTWISE_CMP_GE,
            P::CmpLt => M::CUDNN_POINTWISE_CMP_LT,
            P::CmpLe => M::CUDNN_POINTWISE_CMP_LE,
            P::LogicalAnd => M::CUDNN_POINTWISE_LOGICAL_AND,
            P::LogicalOr => M::CUDNN_POINTWISE_LOGICAL_OR,
            P::LogicalNot => M::CUDNN_POINTWISE_LOGICAL_NOT,
            P::GenIndex => M::CUDNN_POINTWISE_GEN_INDEX,
            P::BinarySelect => M::CUDNN_POINTWISE_BINARY_SELECT,
        }
    }
}

/// The settings of a pointwise node: the mode, its math type, and the
/// optional parameters some modes read (unset ones keep cuDNN's default).
#[derive(Clone, Debug, PartialEq)]
pub struct PointwiseParams {
    /// The function.
    pub mode: PointwiseMode,
    /// Math type (`CUDNN_ATTR_POINTWISE_MATH_PREC`).
    pub compute: ElementKind,
    /// Whether NaN inputs propagate (max, min, relu).
    pub nan_propagation: Option<bool>,
    /// Relu: values below this clip to it.
    pub relu_lower_clip: Option<f64>,
    /// Relu: values above this clip to it.
    pub relu_upper_clip: Option<f64>,
    /// Relu: slope below the lower clip (leaky relu).
    pub relu_lower_clip_slope: Option<f64>,
    /// Elu's alpha.
    pub elu_alpha: Option<f64>,
    /// Softplus's beta.
    pub softplus_beta: Option<f64>,
    /// Swish's beta.
    pub swish_beta: Option<f64>,
    /// GenIndex: the axis whose index is generated.
    pub axis: Option<i64>,
}

impl PointwiseParams {
    /// `mode` in `compute`, every optional parameter unset.
    pub fn new(mode: PointwiseMode, compute: ElementKind) -> PointwiseParams {
        PointwiseParams {
            mode,
            compute,
            nan_propagation: None,
            relu_lower_clip: None,
            relu_upper_clip: None,
            relu_lower_clip_slope: None,
            elu_alpha: None,
            softplus_beta: None,
            swish_beta: None,
            axis: None,
        }
    }
}

/// The reductions of a reduction node (`cudnnReduceTensorOp_t`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReductionOp {
    /// Sum.
    Add,
    /// Product.
    Mul,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Maximum of absolute values.
    Amax,
    /// Mean.
    Avg,
    /// Sum of absolute values.
    Norm1,
    /// Euclidean norm.
    Norm2,
    /// Product of the non-zero values.
    MulNoZeros,
}

impl ReductionOp {
    fn raw(self) -> dnn::cudnnReduceTensorOp_t {
        use dnn::cudnnReduceTensorOp_t as R;
        match self {
            ReductionOp::Add => R::CUDNN_REDUCE_TENSOR_ADD,
            ReductionOp::Mul => R::CUDNN_REDUCE_TENSOR_MUL,
            ReductionOp::Min => R::CUDNN_REDUCE_TENSOR_MIN,
            ReductionOp::Max => R::CUDNN_REDUCE_TENSOR_MAX,
            ReductionOp::Amax => R::CUDNN_REDUCE_TENSOR_AMAX,
            ReductionOp::Avg => R::CUDNN_REDUCE_TENSOR_AVG,
            ReductionOp::Norm1 => R::CUDNN_REDUCE_TENSOR_NORM1,
            ReductionOp::Norm2 => R::CUDNN_REDUCE_TENSOR_NORM2,
            ReductionOp::MulNoZeros => R::CUDNN_REDUCE_TENSOR_MUL_NO_ZEROS,
        }
    }
}

impl OpParams {
    /// What kind of parameters these are.
    pub fn kind(&self) -> ParamsKind {
        self.kind
    }

    fn finish(mut d: Descriptor, kind: ParamsKind) -> Result<OpParams> {
        d.finalize()?;
        Ok(OpParams {
            desc: Arc::new(d),
            kind,
        })
    }

    /// A convolution descriptor. Attributes are set in the order spatial
    /// rank, compute type, mode, pre and post padding, strides, dilations.
    ///
    /// # Errors
    /// `InvalidArgument` when the four per-axis lists differ in length or
    /// are empty; `Unsupported` for a compute type cuDNN lacks;
    /// `LibraryNotFound`; `Cudnn` when cuDNN rejects the settings.
    pub fn convolution(p: &ConvolutionParams<'_>) -> Result<OpParams> {
        let rank = p.pre_padding.len();
        if rank == 0
            || [p.post_padding.len(), p.strides.len(), p.dilations.len()]
                .iter()
                .any(|&l| l != rank)
        {
            return Err(Error::InvalidArgument {
                op: OP,
                arg: "convolution",
                reason: format!(
                    "per-axis lists of lengths {}, {}, {}, {}",
                    rank,
                    p.post_padding.len(),
                    p.strides.len(),
                    p.dilations.len()
                ),
            });
        }
        let comp = data_type_value(OP, p.compute)?;
        let mode = match p.mode {
            ConvolutionMode::CrossCorrelation => {
                dnn::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION
            }
            ConvolutionMode::Convolution => dnn::cudnnConvolutionMode_t::CUDNN_CONVOLUTION,
        };
        ensure_loaded(CudaLib::Cudnn)?;
        let mut d = Descriptor::new(D::CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR)?;
        d.set(
            A::CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS,
            Value::I64(&[rank as i64]),
        )?;
        d.set(A::CUDNN_ATTR_CONVOLUTION_COMP_TYPE, comp)?;
        d.set(
            A::CUDNN_ATTR_CONVOLUTION_CONV_MODE,
            Value::Enum(T::CUDNN_TYPE_CONVOLUTION_MODE, mode as u32),
        )?;
        d.set(
            A::CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS,
            Value::I64(p.pre_padding),
        )?;
        d.set(
            A::CUDNN_ATTR_CONVOLUTION_POST_PADDINGS,
            Value::I64(p.post_padding),
        )?;
        d.set(
            A::CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES,
            Value::I64(p.strides),
        )?;
        d.set(A::CUDNN_ATTR_CONVOLUTION_DILATIONS, Value::I64(p.dilations))?;
        OpParams::finish(d, ParamsKind::Convolution)
    }

    /// A pointwise descriptor: mode, math type, then each optional
    /// parameter that is set (real ones as f64 when `compute` is f64, else
    /// f32).
    ///
    /// # Errors
    /// `Unsupported` for a compute type cuDNN lacks; `LibraryNotFound`;
    /// `Cudnn` when cuDNN rejects the settings.
    pub fn pointwise(p: &PointwiseParams) -> Result<OpParams> {
        let prec = data_type_value(OP, p.compute)?;
        ensure_loaded(CudaLib::Cudnn)?;
        let mut d = Descriptor::new(D::CUDNN_BACKEND_POINTWISE_DESCRIPTOR)?;
        d.set(
            A::CUDNN_ATTR_POINTWISE_MODE,
            Value::Enum(T::CUDNN_TYPE_POINTWISE_MODE, p.mode.raw() as u32),
        )?;
        d.set(A::CUDNN_ATTR_POINTWISE_MATH_PREC, prec)?;
        if let Some(nan) = p.nan_propagation {
            let v = if nan {
                dnn::cudnnNanPropagation_t::CUDNN_PROPAGATE_NAN
            } else {
                dnn::cudnnNanPropagation_t::CUDNN_NOT_PROPAGATE_NAN
            };
            d.set(
                A::CUDNN_ATTR_POINTWISE_NAN_PROPAGATION,
                Value::Enum(T::CUDNN_TYPE_NAN_PROPOGATION, v as u32),
            )?;
        }
        let reals = [
            (A::CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, p.relu_lower_clip),
            (A::CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, p.relu_upper_clip),
            (
                A::CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE,
                p.relu_lower_clip_slope,
            ),
            (A::CUDNN_ATTR_POINTWISE_ELU_ALPHA, p.elu_alpha),
            (A::CUDNN_ATTR_POINTWISE_SOFTPLUS_BETA, p.softplus_beta),
            (A::CUDNN_ATTR_POINTWISE_SWISH_BETA, p.swish_beta),
        ];
        for (name, v) in reals {
            if let Some(v) = v {
                d.set(name, Scalar::for_compute(p.compute, v).value())?;
            }
        }
        if let Some(axis) = p.axis {
            d.set(A::CUDNN_ATTR_POINTWISE_AXIS, Value::I64(&[axis]))?;
        }
        OpParams::finish(d, ParamsKind::Pointwise)
    }

    /// A matmul descriptor accumulating in `compute`.
    ///
    /// # Errors
    /// `Unsupported` for a compute type cuDNN lacks; `LibraryNotFound`;
    /// `Cudnn` when cuDNN rejects it.
    pub fn matmul(compute: ElementKind) -> Result<OpParams> {
        let comp = data_type_value(OP, compute)?;
        ensure_loaded(CudaLib::Cudnn)?;
        let mut d = Descriptor::new(D::CUDNN_BACKEND_MATMUL_DESCRIPTOR)?;
        d.set(A::CUDNN_ATTR_MATMUL_COMP_TYPE, comp)?;
        OpParams::finish(d, ParamsKind::Matmul)
    }

    /// A reduction descriptor: `op`, accumulating in `compute`.
    ///
    /// # Errors
    /// `Unsupported` for a compute type cuDNN lacks; `LibraryNotFound`;
    /// `Cudnn` when cuDNN rejects it.
    pub fn reduction(op: ReductionOp, compute: ElementKind) -> Result<OpParams> {
        let comp = data_type_value(OP, compute)?;
        ensure_loaded(CudaLib::Cudnn)?;
        let mut d = Descriptor::new(D::CUDNN_BACKEND_REDUCTION_DESCRIPTOR)?;
        d.set(
            A::CUDNN_ATTR_REDUCTION_OPERATOR,
            Value::Enum(T::CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, op.raw() as u32),
        )?;
        d.set(A::CUDNN_ATTR_REDUCTION_COMP_TYPE, comp)?;
        OpParams::finish(d, ParamsKind::Reduction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_follow_the_compute_type() {
        assert_eq!(Scalar::for_compute(ElementKind::F64, 0.5), Scalar::F64(0.5));
        assert_eq!(Scalar::for_compute(ElementKind::F32, 0.5), Scalar::F32(0.5));
        assert_eq!(
            Scalar::for_compute(ElementKind::Bf16, 1.0),
            Scalar::F32(1.0)
        );
    }
}
