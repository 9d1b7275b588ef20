//! Backend tensor descriptors: element type, dims and strides (in
//! elements), a unique id (the key a variant pack binds an address to),
//! byte alignment, and whether the tensor is virtual (an intermediate
//! that never reaches memory) or passed by value (a host scalar).

use std::sync::Arc;

use baracuda_kernels_types::{ElementKind, Error, Result};
use cudarc::cudnn::sys as dnn;

use super::descriptor::{Descriptor, Value, A, D, T};
use crate::libs::{ensure_loaded, CudaLib};

/// The most dimensions a cuDNN tensor takes (`CUDNN_DIM_MAX`).
pub const MAX_DIMS: usize = 8;

/// cuDNN's data type for an element kind, where it has one.
pub(crate) fn data_type(kind: ElementKind) -> Option<dnn::cudnnDataType_t> {
    use dnn::cudnnDataType_t as Dt;
    Some(match kind {
        ElementKind::F32 => Dt::CUDNN_DATA_FLOAT,
        ElementKind::F64 => Dt::CUDNN_DATA_DOUBLE,
        ElementKind::F16 => Dt::CUDNN_DATA_HALF,
        ElementKind::Bf16 => Dt::CUDNN_DATA_BFLOAT16,
        ElementKind::I8 => Dt::CUDNN_DATA_INT8,
        ElementKind::U8 => Dt::CUDNN_DATA_UINT8,
        ElementKind::I32 => Dt::CUDNN_DATA_INT32,
        ElementKind::I64 => Dt::CUDNN_DATA_INT64,
        ElementKind::Bool => Dt::CUDNN_DATA_BOOLEAN,
        ElementKind::Fp8E4M3 => Dt::CUDNN_DATA_FP8_E4M3,
        ElementKind::Fp8E5M2 => Dt::CUDNN_DATA_FP8_E5M2,
        ElementKind::I16 | ElementKind::U32 => return None,
    })
}

/// `data_type(kind)` as the attribute value of a data-type attribute, or
/// `Unsupported` naming `op`.
pub(crate) fn data_type_value(op: &'static str, kind: ElementKind) -> Result<Value<'static>> {
    let dt = data_type(kind).ok_or_else(|| Error::Unsupported {
        op,
        what: format!("{kind} elements (cuDNN has no such data type)"),
    })?;
    Ok(Value::Enum(T::CUDNN_TYPE_DATA_TYPE, dt as u32))
}

const OP: &str = "cudnn tensor";

/// A finalized backend tensor descriptor. Cheap to clone (the descriptor
/// is shared); operations keep the tensors they name alive.
#[derive(Clone)]
pub struct Tensor {
    pub(crate) desc: Arc<Descriptor>,
    uid: i64,
    dtype: ElementKind,
    dims: Vec<i64>,
    strides: Vec<i64>,
    is_virtual: bool,
    by_value: bool,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("uid", &self.uid)
            .field("dtype", &self.dtype)
            .field("dims", &self.dims)
            .field("strides", &self.strides)
            .field("is_virtual", &self.is_virtual)
            .field("by_value", &self.by_value)
            .finish()
    }
}

impl Tensor {
    /// Start describing tensor `uid` of `dtype` elements.
    pub fn builder(uid: i64, dtype: ElementKind) -> TensorBuilder {
        TensorBuilder {
            uid,
            dtype,
            dims: Vec::new(),
            strides: Vec::new(),
            alignment: None,
            is_virtual: false,
            by_value: false,
        }
    }
    /// The unique id a variant pack binds an address to.
    pub fn uid(&self) -> i64 {
        self.uid
    }
    /// Element type.
    pub fn dtype(&self) -> ElementKind {
        self.dtype
    }
    /// Extents.
    pub fn dims(&self) -> &[i64] {
        &self.dims
    }
    /// Strides in elements.
    pub fn strides(&self) -> &[i64] {
        &self.strides
    }
    /// An intermediate of the graph that needs no address.
    pub fn is_virtual(&self) -> bool {
        self.is_virtual
    }
    /// A host scalar passed by value.
    pub fn is_by_value(&self) -> bool {
        self.by_value
    }
}

/// The attributes of a [`Tensor`] before it is finalized.
#[derive(Clone, Debug)]
pub struct TensorBuilder {
    uid: i64,
    dtype: ElementKind,
    dims: Vec<i64>,
    strides: Vec<i64>,
    alignment: Option<i64>,
    is_virtual: bool,
    by_value: bool,
}

impl TensorBuilder {
    /// Extents, outermost first (1 to [`MAX_DIMS`] of them).
    pub fn dims(mut self, dims: &[i64]) -> Self {
        self.dims = dims.to_vec();
        self
    }
    /// Strides in elements, one per dim.
    pub fn strides(mut self, strides: &[i64]) -> Self {
        self.strides = strides.to_vec();
        self
    }
    /// Byte alignment every address bound to the tensor will have (cuDNN
    /// picks vectorised engines from it). Unset: the element size for a
    /// tensor in memory, 16 for a virtual or by-value one (cuDNN rejects a
    /// tensor without one).
    pub fn alignment(mut self, bytes: i64) -> Self {
        self.alignment = Some(bytes);
        self
    }
    /// Mark the tensor virtual: an intermediate between two operations of
    /// one graph, never in memory.
    pub fn is_virtual(mut self, is_virtual: bool) -> Self {
        self.is_virtual = is_virtual;
        self
    }
    /// Mark the tensor as a host scalar passed by value.
    pub fn by_value(mut self, by_value: bool) -> Self {
        self.by_value = by_value;
        self
    }

    /// Finalize the descriptor. Attributes are set in the order data type,
    /// dims, strides, uid, alignment, virtual, by value.
    ///
    /// # Errors
    /// `InvalidArgument` for no dims, more than [`MAX_DIMS`], or strides
    /// that do not match the dims one for one; `Unsupported` for an
    /// element kind cuDNN has no data type for; `LibraryNotFound`;
    /// `Cudnn` when cuDNN rejects the tensor.
    pub fn build(self) -> Result<Tensor> {
        let bad = |reason: String| Error::InvalidArgument {
            op: OP,
            arg: "dims",
            reason,
        };
        if self.dims.is_empty() || self.dims.len() > MAX_DIMS {
            return Err(bad(format!("{} dims (1 to {MAX_DIMS})", self.dims.len())));
        }
        if self.strides.len() != self.dims.len() {
            return Err(bad(format!(
                "{} strides for {} dims",
                self.strides.len(),
                self.dims.len()
            )));
        }
        let dt = data_type_value(OP, self.dtype)?;
        ensure_loaded(CudaLib::Cudnn)?;
        let mut d = Descriptor::new(D::CUDNN_BACKEND_TENSOR_DESCRIPTOR)?;
        d.set(A::CUDNN_ATTR_TENSOR_DATA_TYPE, dt)?;
        d.set(A::CUDNN_ATTR_TENSOR_DIMENSIONS, Value::I64(&self.dims))?;
        d.set(A::CUDNN_ATTR_TENSOR_STRIDES, Value::I64(&self.strides))?;
        d.set(A::CUDNN_ATTR_TENSOR_UNIQUE_ID, Value::I64(&[self.uid]))?;
        let bytes = self
            .alignment
            .unwrap_or(if self.is_virtual || self.by_value {
                16
            } else {
                self.dtype.size_bytes() as i64
            });
        d.set(A::CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, Value::I64(&[bytes]))?;
        if self.is_virtual {
            d.set(A::CUDNN_ATTR_TENSOR_IS_VIRTUAL, Value::Bool(true))?;
        }
        if self.by_value {
            d.set(A::CUDNN_ATTR_TENSOR_IS_BY_VALUE, Value::Bool(true))?;
        }
        d.finalize()?;
        Ok(Tensor {
            desc: Arc::new(d),
            uid: self.uid,
            dtype: self.dtype,
            dims: self.dims,
            strides: self.strides,
            is_virtual: self.is_virtual,
            by_value: self.by_value,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_checks_dims_before_touching_cudnn() {
        let e = Tensor::builder(1, ElementKind::F32).build().unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument { arg: "dims", .. }),
            "{e}"
        );
        let e = Tensor::builder(1, ElementKind::F32)
            .dims(&[2, 3])
            .strides(&[3])
            .build()
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
        let e = Tensor::builder(1, ElementKind::U32)
            .dims(&[2])
            .strides(&[1])
            .build()
            .unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    }

    #[test]
    fn data_types() {
        use dnn::cudnnDataType_t as Dt;
        assert_eq!(data_type(ElementKind::Bf16), Some(Dt::CUDNN_DATA_BFLOAT16));
        assert_eq!(data_type(ElementKind::F64), Some(Dt::CUDNN_DATA_DOUBLE));
        assert_eq!(data_type(ElementKind::I16), None);
    }
}
