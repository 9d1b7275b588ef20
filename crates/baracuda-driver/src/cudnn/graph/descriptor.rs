//! One backend descriptor (`cudnnBackendDescriptor_t`), destroyed on drop,
//! and typed access to its attributes. Every call of the backend API that
//! sets or reads an attribute goes through [`Descriptor::set`] and the
//! getters here, so a new kind of operation node is a table of attribute
//! names (see `operation.rs`), never new unsafe code.

use std::ffi::c_void;

use baracuda_kernels_types::Result;
use cudarc::cudnn::sys as dnn;

use crate::status::cudnn_error;

pub(crate) use dnn::cudnnBackendAttributeName_t as A;
pub(crate) use dnn::cudnnBackendAttributeType_t as T;
pub(crate) use dnn::cudnnBackendDescriptorType_t as D;

/// A value to write into one attribute: the Rust type fixes the C type
/// and the element count cuDNN is told.
pub(crate) enum Value<'a> {
    /// `CUDNN_TYPE_INT64` array.
    I64(&'a [i64]),
    /// `CUDNN_TYPE_BOOLEAN` (a C `bool`).
    Bool(bool),
    /// `CUDNN_TYPE_FLOAT`.
    F32(f32),
    /// `CUDNN_TYPE_DOUBLE`.
    F64(f64),
    /// One value of a C enum type (4 bytes), with the attribute type that
    /// names the enum (`CUDNN_TYPE_DATA_TYPE`, `CUDNN_TYPE_HEUR_MODE`, ...).
    Enum(T, u32),
    /// `CUDNN_TYPE_BACKEND_DESCRIPTOR` array.
    Descriptors(&'a [&'a Descriptor]),
    /// `CUDNN_TYPE_HANDLE`.
    Handle(dnn::cudnnHandle_t),
    /// `CUDNN_TYPE_VOID_PTR` array: addresses cuDNN stores, never reads
    /// while setting them.
    Pointers(&'a [*mut c_void]),
}

/// One backend descriptor.
///
/// Invariant: `raw` was created by `cudnnBackendCreateDescriptor` and is
/// destroyed once, on drop. It is written (attributes set, finalized) only
/// through `&mut self`; through `&self` it is only read (attributes got,
/// passed as an input of another descriptor or of an execution).
pub(crate) struct Descriptor {
    raw: dnn::cudnnBackendDescriptor_t,
}

// SAFETY: a backend descriptor is a host object owned by this value. It is
// written only through `&mut self`; `&self` only lets cuDNN read it, which
// cuDNN allows from several threads at once as long as each thread uses
// its own handle (the context's registry gives each thread its own).
unsafe impl Send for Descriptor {}
// SAFETY: as above.
unsafe impl Sync for Descriptor {}

impl Descriptor {
    /// A new descriptor of type `ty`. cuDNN must be loaded
    /// ([`crate::ensure_loaded`]); the public entry points of the graph
    /// layer make sure of it.
    pub(crate) fn new(ty: D) -> Result<Descriptor> {
        let mut raw: dnn::cudnnBackendDescriptor_t = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer.
        unsafe { dnn::cudnnBackendCreateDescriptor(ty, &mut raw) }
            .result()
            .map_err(|e| cudnn_error("cudnnBackendCreateDescriptor", e))?;
        Ok(Descriptor { raw })
    }

    /// The raw descriptor, for `cudnnBackendExecute`.
    pub(crate) fn raw(&self) -> dnn::cudnnBackendDescriptor_t {
        self.raw
    }

    /// Set attribute `name` to `v`.
    pub(crate) fn set(&mut self, name: A, v: Value<'_>) -> Result<()> {
        let raws: Vec<dnn::cudnnBackendDescriptor_t>;
        let (ty, n, ptr): (T, usize, *const c_void) = match &v {
            Value::I64(s) => (T::CUDNN_TYPE_INT64, s.len(), s.as_ptr().cast()),
            Value::Bool(b) => (T::CUDNN_TYPE_BOOLEAN, 1, (b as *const bool).cast()),
            Value::F32(f) => (T::CUDNN_TYPE_FLOAT, 1, (f as *const f32).cast()),
            Value::F64(f) => (T::CUDNN_TYPE_DOUBLE, 1, (f as *const f64).cast()),
            Value::Enum(ty, e) => (*ty, 1, (e as *const u32).cast()),
            Value::Descriptors(d) => {
                raws = d.iter().map(|d| d.raw).collect();
                (
                    T::CUDNN_TYPE_BACKEND_DESCRIPTOR,
                    raws.len(),
                    raws.as_ptr().cast(),
                )
            }
            Value::Handle(h) => (
                T::CUDNN_TYPE_HANDLE,
                1,
                (h as *const dnn::cudnnHandle_t).cast(),
            ),
            Value::Pointers(p) => (T::CUDNN_TYPE_VOID_PTR, p.len(), p.as_ptr().cast()),
        };
        // SAFETY: live descriptor, exclusively borrowed; `ptr` points to
        // `n` elements of the C type `ty` names (a 4-byte value for the
        // enum types, one pointer per descriptor, handle or address), all
        // borrowed from `v` or `raws`, alive for the call.
        unsafe { dnn::cudnnBackendSetAttribute(self.raw, name, ty, n as i64, ptr) }
            .result()
            .map_err(|e| cudnn_error("cudnnBackendSetAttribute", e))
    }

    /// Finalize: cuDNN checks the attributes and fixes the descriptor.
    pub(crate) fn finalize(&mut self) -> Result<()> {
        // SAFETY: live descriptor, exclusively borrowed.
        unsafe { dnn::cudnnBackendFinalize(self.raw) }
            .result()
            .map_err(|e| cudnn_error("cudnnBackendFinalize", e))
    }

    /// Read up to `max` elements of attribute `name` as C type `ty` into
    /// `out`; returns how many elements the attribute holds (which may
    /// exceed `max`; `max` 0 with a null `out` only counts).
    ///
    /// # Safety
    /// `out` must have room for `max` elements of the C type `ty` names,
    /// or be null when `max` is 0.
    unsafe fn get_raw(&self, name: A, ty: T, max: usize, out: *mut c_void) -> Result<usize> {
        let mut n = 0i64;
        // SAFETY: live descriptor; the caller guarantees `out`.
        unsafe { dnn::cudnnBackendGetAttribute(self.raw, name, ty, max as i64, &mut n, out) }
            .result()
            .map_err(|e| cudnn_error("cudnnBackendGetAttribute", e))?;
        Ok(n.max(0) as usize)
    }

    /// One `CUDNN_TYPE_INT64` attribute.
    pub(crate) fn get_i64(&self, name: A) -> Result<i64> {
        let mut v = 0i64;
        // SAFETY: room for one int64.
        unsafe { self.get_raw(name, T::CUDNN_TYPE_INT64, 1, (&mut v as *mut i64).cast()) }?;
        Ok(v)
    }

    /// An array attribute of a C enum type, at most `max` values, read as
    /// raw 4-byte values (a value a newer cuDNN added must not become a
    /// Rust enum).
    pub(crate) fn get_enums(&self, name: A, ty: T, max: usize) -> Result<Vec<u32>> {
        let mut v = vec![0u32; max];
        // SAFETY: `v` has room for `max` 4-byte values.
        let n = unsafe { self.get_raw(name, ty, max, v.as_mut_ptr().cast()) }?;
        v.truncate(n.min(max));
        Ok(v)
    }

    /// An array attribute of backend descriptors of type `ty`, at most
    /// `max`: cuDNN fills descriptors created here.
    pub(crate) fn get_descriptors(&self, name: A, ty: D, max: usize) -> Result<Vec<Descriptor>> {
        let mut out: Vec<Descriptor> = (0..max)
            .map(|_| Descriptor::new(ty))
            .collect::<Result<_>>()?;
        let mut raws: Vec<dnn::cudnnBackendDescriptor_t> = out.iter().map(|d| d.raw).collect();
        // SAFETY: `raws` holds `max` live descriptors of the element type,
        // owned by `out` and not shared yet.
        let n = unsafe {
            self.get_raw(
                name,
                T::CUDNN_TYPE_BACKEND_DESCRIPTOR,
                max,
                raws.as_mut_ptr().cast(),
            )
        }?;
        out.truncate(n.min(max));
        Ok(out)
    }

    /// How many elements array attribute `name` of type `ty` holds.
    pub(crate) fn count(&self, name: A, ty: T) -> Result<usize> {
        // SAFETY: a count query: no elements requested, none written.
        unsafe { self.get_raw(name, ty, 0, std::ptr::null_mut()) }
    }

    /// A `CUDNN_TYPE_CHAR` attribute (a string such as the execution
    /// plan's JSON), without its NUL terminator.
    pub(crate) fn get_string(&self, name: A) -> Result<String> {
        let len = self.count(name, T::CUDNN_TYPE_CHAR)?;
        let mut buf = vec![0u8; len.max(1)];
        // SAFETY: `buf` has room for `buf.len()` chars.
        let n =
            unsafe { self.get_raw(name, T::CUDNN_TYPE_CHAR, buf.len(), buf.as_mut_ptr().cast()) }?;
        buf.truncate(n.min(buf.len()));
        let text = String::from_utf8_lossy(&buf);
        Ok(text.trim_end_matches('\0').to_string())
    }
}

impl Drop for Descriptor {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: created by cudnnBackendCreateDescriptor (the type's
            // invariant), destroyed once, here.
            let _ = unsafe { dnn::cudnnBackendDestroyDescriptor(self.raw) };
        }
    }
}
