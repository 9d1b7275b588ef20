//! Operation nodes of a graph.
//!
//! An operation is an [`OpKind`] plus values for its ports: tensors
//! ([`Port::X`], [`Port::W`], ...), scalars ([`Port::Alpha`], ...) and one
//! parameter descriptor ([`OpParams`]: the convolution, pointwise, matmul
//! or reduction settings). Which ports a kind has, and the cuDNN attribute
//! each one is written to, is a table (`schema`); every kind is built by
//! the same [`OperationBuilder`]. Adding a kind (normalization, attention)
//! means adding a variant and its row, not new unsafe code.

use std::sync::Arc;

use baracuda_kernels_types::{Error, Result};

use super::descriptor::{Descriptor, Value, A, D};
use super::params::{OpParams, ParamsKind, Scalar};
use super::tensor::Tensor;
use crate::{ensure_loaded, CudaLib};

/// The kinds of operation node.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// `Y = alpha * conv(X, W) + beta * Y`; ports X, W, Y, Alpha, Beta;
    /// [`OpParams::convolution`].
    ConvolutionForward,
    /// `DX = alpha * conv_transpose(DY, W) + beta * DX`; ports DX, W, DY,
    /// Alpha, Beta; [`OpParams::convolution`].
    ConvolutionBackwardData,
    /// `DW = alpha * corr(X, DY) + beta * DW`; ports X, DW, DY, Alpha,
    /// Beta; [`OpParams::convolution`].
    ConvolutionBackwardFilter,
    /// Elementwise `Y = op(alpha1 * X, alpha2 * B)` (binary and unary
    /// modes), or a backward activation `DX = op'(X or Y, DY)`; ports X,
    /// B, Y, DX, DY, T (the condition of a select), Alpha1, Alpha2;
    /// [`OpParams::pointwise`].
    Pointwise,
    /// `C = A B`, batched over leading dims; ports A, B, C;
    /// [`OpParams::matmul`].
    Matmul,
    /// `Y = reduce(X)` over the axes where Y has extent 1; ports X, Y;
    /// [`OpParams::reduction`].
    Reduction,
    /// `Y` is `X` seen with other dims and strides (a transpose inside a
    /// graph); ports X, Y; no parameters.
    Reshape,
}

/// A slot of an operation node, named as cuDNN names the attribute.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Port {
    /// Input activations.
    X,
    /// Filter.
    W,
    /// Output.
    Y,
    /// Gradient of X (an output).
    DX,
    /// Gradient of W (an output).
    DW,
    /// Gradient of Y (an input).
    DY,
    /// Matmul left operand.
    A,
    /// Matmul right operand; pointwise second operand.
    B,
    /// Matmul output.
    C,
    /// Pointwise select condition.
    T,
    /// Scale of the result.
    Alpha,
    /// Scale of the prior output, added.
    Beta,
    /// Pointwise scale of X.
    Alpha1,
    /// Pointwise scale of B.
    Alpha2,
}

/// What a port takes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Slot {
    Tensor,
    Scalar,
}

/// One kind's descriptor type, parameter attribute (if it takes
/// parameters) and ports.
struct Schema {
    ty: D,
    params: Option<(A, ParamsKind)>,
    ports: &'static [(Port, A, Slot)],
}

/// The row of `kind`.
fn schema(kind: OpKind) -> &'static Schema {
    use Port as P;
    use Slot::{Scalar as S, Tensor as Tn};
    match kind {
        OpKind::ConvolutionForward => &Schema {
            ty: D::CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
            params: Some((
                A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                ParamsKind::Convolution,
            )),
            ports: &[
                (P::X, A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, Tn),
                (P::W, A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, Tn),
                (P::Y, A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, Tn),
                (
                    P::Alpha,
                    A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                    S,
                ),
                (P::Beta, A::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, S),
            ],
        },
        OpKind::ConvolutionBackwardData => &Schema {
            ty: D::CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
            params: Some((
                A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                ParamsKind::Convolution,
            )),
            ports: &[
                (P::DX, A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, Tn),
                (P::W, A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, Tn),
                (P::DY, A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, Tn),
                (
                    P::Alpha,
                    A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                    S,
                ),
                (
                    P::Beta,
                    A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
                    S,
                ),
            ],
        },
        OpKind::ConvolutionBackwardFilter => &Schema {
            ty: D::CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
            params: Some((
                A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                ParamsKind::Convolution,
            )),
            ports: &[
                (P::X, A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, Tn),
                (P::DW, A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, Tn),
                (P::DY, A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, Tn),
                (
                    P::Alpha,
                    A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                    S,
                ),
                (
                    P::Beta,
                    A::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
                    S,
                ),
            ],
        },
        OpKind::Pointwise => &Schema {
            ty: D::CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
            params: Some((
                A::CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                ParamsKind::Pointwise,
            )),
            ports: &[
                (P::X, A::CUDNN_ATTR_OPERATION_POINTWISE_XDESC, Tn),
                (P::B, A::CUDNN_ATTR_OPERATION_POINTWISE_BDESC, Tn),
                (P::Y, A::CUDNN_ATTR_OPERATION_POINTWISE_YDESC, Tn),
                (P::DX, A::CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, Tn),
                (P::DY, A::CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, Tn),
                (P::T, A::CUDNN_ATTR_OPERATION_POINTWISE_TDESC, Tn),
                (P::Alpha1, A::CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, S),
                (P::Alpha2, A::CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, S),
            ],
        },
        OpKind::Matmul => &Schema {
            ty: D::CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR,
            params: Some((A::CUDNN_ATTR_OPERATION_MATMUL_DESC, ParamsKind::Matmul)),
            ports: &[
                (P::A, A::CUDNN_ATTR_OPERATION_MATMUL_ADESC, Tn),
                (P::B, A::CUDNN_ATTR_OPERATION_MATMUL_BDESC, Tn),
                (P::C, A::CUDNN_ATTR_OPERATION_MATMUL_CDESC, Tn),
            ],
        },
        OpKind::Reduction => &Schema {
            ty: D::CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR,
            params: Some((
                A::CUDNN_ATTR_OPERATION_REDUCTION_DESC,
                ParamsKind::Reduction,
            )),
            ports: &[
                (P::X, A::CUDNN_ATTR_OPERATION_REDUCTION_XDESC, Tn),
                (P::Y, A::CUDNN_ATTR_OPERATION_REDUCTION_YDESC, Tn),
            ],
        },
        OpKind::Reshape => &Schema {
            ty: D::CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR,
            params: None,
            ports: &[
                (P::X, A::CUDNN_ATTR_OPERATION_RESHAPE_XDESC, Tn),
                (P::Y, A::CUDNN_ATTR_OPERATION_RESHAPE_YDESC, Tn),
            ],
        },
    }
}

const OP: &str = "cudnn operation";

/// One value given to an [`OperationBuilder`].
enum Item<'a> {
    Tensor(Port, &'a Tensor),
    Scalar(Port, Scalar),
    Params(&'a OpParams),
}

/// The ports of one operation before it is finalized.
pub struct OperationBuilder<'a> {
    kind: OpKind,
    items: Vec<Item<'a>>,
}

/// A finalized operation node. Cheap to clone; it keeps the tensors and
/// parameters it names alive.
#[derive(Clone)]
pub struct Operation {
    pub(crate) desc: Arc<Descriptor>,
    kind: OpKind,
    tensors: Vec<(Port, Tensor)>,
    _params: Option<OpParams>,
}

impl std::fmt::Debug for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operation")
            .field("kind", &self.kind)
            .field("tensors", &self.tensors)
            .finish_non_exhaustive()
    }
}

impl Operation {
    /// Start an operation of `kind`.
    pub fn builder<'a>(kind: OpKind) -> OperationBuilder<'a> {
        OperationBuilder {
            kind,
            items: Vec::new(),
        }
    }
    /// Its kind.
    pub fn kind(&self) -> OpKind {
        self.kind
    }
    /// The tensor bound to `port`, if any.
    pub fn tensor(&self, port: Port) -> Option<&Tensor> {
        self.tensors
            .iter()
            .find(|(p, _)| *p == port)
            .map(|(_, t)| t)
    }
}

impl<'a> OperationBuilder<'a> {
    /// Bind tensor `t` to `port`.
    pub fn tensor(mut self, port: Port, t: &'a Tensor) -> Self {
        self.items.push(Item::Tensor(port, t));
        self
    }
    /// Set scalar `port` (alpha, beta) to `v`.
    pub fn scalar(mut self, port: Port, v: Scalar) -> Self {
        self.items.push(Item::Scalar(port, v));
        self
    }
    /// The kind's parameter descriptor.
    pub fn params(mut self, p: &'a OpParams) -> Self {
        self.items.push(Item::Params(p));
        self
    }

    /// Check every value against the kind's ports, then create the node,
    /// set the values in the order they were given, and finalize it.
    ///
    /// # Errors
    /// `InvalidArgument` for a port the kind lacks or given twice, a
    /// tensor where a scalar goes or the reverse, parameters of another
    /// kind, twice or not at all; `Cudnn` when cuDNN rejects the node.
    pub fn build(self) -> Result<Operation> {
        let kind = self.kind;
        let s = schema(kind);

        let bad = |arg: &'static str, reason: String| Error::InvalidArgument {
            op: OP,
            arg,
            reason,
        };
        // Every check before the first cuDNN call: the attribute of each
        // item, in the order given.
        let mut attrs = Vec::with_capacity(self.items.len());
        let mut seen: Vec<Port> = Vec::new();
        let mut params = None;
        for item in &self.items {
            let (port, given) = match item {
                Item::Params(_) if params.is_some() => {
                    return Err(bad("params", format!("{kind:?} given parameters twice")));
                }
                Item::Params(p) => match s.params {
                    None => return Err(bad("params", format!("{kind:?} takes no parameters"))),
                    Some((_, k)) if p.kind != k => {
                        return Err(bad(
                            "params",
                            format!("{kind:?} takes {k:?} parameters, got {:?}", p.kind),
                        ));
                    }
                    Some((attr, _)) => {
                        params = Some((*p).clone());
                        attrs.push(attr);
                        continue;
                    }
                },
                Item::Tensor(port, _) => (*port, Slot::Tensor),
                Item::Scalar(port, _) => (*port, Slot::Scalar),
            };
            let Some(&(_, attr, slot)) = s.ports.iter().find(|(p, _, _)| *p == port) else {
                return Err(bad("port", format!("{kind:?} has no port {port:?}")));
            };
            if slot != given {
                return Err(bad(
                    "port",
                    format!("{kind:?} port {port:?} takes a {slot:?}, got a {given:?}"),
                ));
            }
            if seen.contains(&port) {
                return Err(bad("port", format!("{kind:?} port {port:?} given twice")));
            }
            seen.push(port);
            attrs.push(attr);
        }
        if let (Some((_, k)), None) = (s.params, &params) {
            return Err(bad("params", format!("{kind:?} needs {k:?} parameters")));
        }
        if params.is_none() {
            ensure_loaded(CudaLib::Cudnn)?;
        }
        let mut d = Descriptor::new(s.ty)?;
        let mut tensors = Vec::new();
        for (item, &attr) in self.items.iter().zip(&attrs) {
            match item {
                Item::Tensor(port, t) => {
                    d.set(attr, Value::Descriptors(&[t.desc.as_ref()]))?;
                    tensors.push((*port, (*t).clone()));
                }
                Item::Scalar(_, v) => d.set(attr, v.value())?,
                Item::Params(p) => d.set(attr, Value::Descriptors(&[p.desc.as_ref()]))?,
            }
        }
        d.finalize()?;
        Ok(Operation {
            desc: Arc::new(d),
            kind,
            tensors,
            _params: params,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_names_each_port_once() {
        for kind in [
            OpKind::ConvolutionForward,
            OpKind::ConvolutionBackwardData,
            OpKind::ConvolutionBackwardFilter,
            OpKind::Pointwise,
            OpKind::Matmul,
            OpKind::Reduction,
            OpKind::Reshape,
        ] {
            let ports = schema(kind).ports;
            for (i, (p, a, _)) in ports.iter().enumerate() {
                assert!(
                    ports[i + 1..].iter().all(|(q, b, _)| q != p && b != a),
                    "{kind:?} {p:?}"
                );
            }
        }
    }

    #[test]
    fn ports_are_checked_before_cudnn_is_called() {
        // No parameters: refused without creating a descriptor (no cuDNN
        // needed).
        let e = Operation::builder(OpKind::Matmul).build().unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument { arg: "params", .. }),
            "{e}"
        );
        let e = Operation::builder(OpKind::Reduction)
            .scalar(Port::Alpha, Scalar::F32(1.0))
            .build()
            .unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument { arg: "port", .. }),
            "{e}"
        );
        let e = Operation::builder(OpKind::ConvolutionForward)
            .scalar(Port::Alpha, Scalar::F32(1.0))
            .scalar(Port::Alpha, Scalar::F32(2.0))
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
    }
}
