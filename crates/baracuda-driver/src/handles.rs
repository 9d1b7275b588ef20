//! Per-context registry of library handles (cuBLASLt, cuDNN, ...).
//!
//! Plans hold no handle. At `run` they ask the context for the handle of
//! the calling thread, created on first use and kept until the context is
//! dropped, so one plan can run from many threads at once and a handle is
//! never shared by two threads.

use std::sync::Arc;

use baracuda_kernels_types::Result;
use cudarc::cublaslt::sys as lt;
use cudarc::cudnn::sys as dnn;

use crate::context::{Context, Stream};
use crate::libs::{ensure_loaded, CudaLib};
use crate::status::{cublas_error, cudnn_error};

/// A library handle the registry can create and destroy.
pub trait LibraryHandle: Send + Sync + Sized + 'static {
    /// Create a handle on the current context.
    ///
    /// # Errors
    /// `LibraryNotFound` or the library's status.
    fn create(ctx: &Context) -> Result<Self>;
}

impl Context {
    /// The calling thread's handle of type `H` on this context.
    ///
    /// # Errors
    /// As [`LibraryHandle::create`] on first use.
    pub fn handle<H: LibraryHandle>(&self) -> Result<Arc<H>> {
        let thread = std::thread::current().id();
        self.inner.registry.get_or_create(Some(thread), || {
            self.bind_to_thread()?;
            H::create(self)
        })
    }
}

/// A cuBLASLt handle.
pub struct CublasLtHandle {
    raw: lt::cublasLtHandle_t,
}

// SAFETY: the registry hands each thread its own handle; the raw pointer is
// only used by that thread while the context lives.
unsafe impl Send for CublasLtHandle {}
// SAFETY: as above.
unsafe impl Sync for CublasLtHandle {}

impl LibraryHandle for CublasLtHandle {
    fn create(_ctx: &Context) -> Result<Self> {
        ensure_loaded(CudaLib::CublasLt)?;
        let raw = cudarc::cublaslt::result::create_handle()
            .map_err(|e| cublas_error("cublasLtCreate", e))?;
        Ok(CublasLtHandle { raw })
    }
}

impl CublasLtHandle {
    /// The raw handle, for the driver's cuBLASLt wrappers.
    pub fn raw(&self) -> lt::cublasLtHandle_t {
        self.raw
    }
}

impl Drop for CublasLtHandle {
    fn drop(&mut self) {
        // SAFETY: created by cublasLtCreate; destroyed once.
        let _ = unsafe { cudarc::cublaslt::result::destroy_handle(self.raw) };
    }
}

/// A cuDNN handle.
pub struct CudnnHandle {
    raw: dnn::cudnnHandle_t,
}

// SAFETY: as for CublasLtHandle: one handle per thread.
unsafe impl Send for CudnnHandle {}
// SAFETY: as above.
unsafe impl Sync for CudnnHandle {}

impl LibraryHandle for CudnnHandle {
    fn create(_ctx: &Context) -> Result<Self> {
        ensure_loaded(CudaLib::Cudnn)?;
        let raw =
            cudarc::cudnn::result::create_handle().map_err(|e| cudnn_error("cudnnCreate", e))?;
        Ok(CudnnHandle { raw })
    }
}

impl CudnnHandle {
    /// Bind the handle to `stream` and return the raw handle, for the
    /// driver's cuDNN wrappers. Binding is cheap and allowed under graph
    /// capture.
    ///
    /// # Errors
    /// `Cudnn` on failure.
    pub fn bind(&self, stream: &Stream) -> Result<dnn::cudnnHandle_t> {
        // cuDNN works on the calling thread's current context, which other
        // code on this thread may have changed since the handle was made.
        stream.context().bind_to_thread()?;
        // SAFETY: the handle is live and owned by the calling thread; the
        // stream is live on the same context.
        unsafe { cudarc::cudnn::result::set_stream(self.raw, stream.raw() as dnn::cudaStream_t) }
            .map_err(|e| cudnn_error("cudnnSetStream", e))?;
        Ok(self.raw)
    }
}

impl Drop for CudnnHandle {
    fn drop(&mut self) {
        // SAFETY: created by cudnnCreate; destroyed once.
        let _ = unsafe { cudarc::cudnn::result::destroy_handle(self.raw) };
    }
}
