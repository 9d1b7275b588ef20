//! Conversion of each CUDA library's status codes into [`Error`]. Each
//! library's status is converted here and nowhere else.

use baracuda_kernels_types::{Error, LibraryStatus};
use cudarc::driver::DriverError;

/// A CUDA driver status as an [`Error::Cuda`].
pub fn cuda_error(call: &'static str, e: DriverError) -> Error {
    Error::Cuda {
        call,
        status: library_status(e.0, e.0 as i64),
    }
}

/// A failed allocation of `bytes` bytes: [`Error::OutOfMemory`] when the
/// driver reports `CUDA_ERROR_OUT_OF_MEMORY`, else as [`cuda_error`].
pub fn alloc_error(call: &'static str, bytes: usize, e: DriverError) -> Error {
    if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        Error::OutOfMemory { op: call, bytes }
    } else {
        cuda_error(call, e)
    }
}

/// A cuBLAS / cuBLASLt status as an [`Error::Cublas`].
pub fn cublas_error(call: &'static str, e: cudarc::cublaslt::result::CublasError) -> Error {
    Error::Cublas {
        call,
        status: library_status(e.0, e.0 as i64),
    }
}

/// A cuDNN status as an [`Error::Cudnn`].
pub fn cudnn_error(call: &'static str, e: cudarc::cudnn::result::CudnnError) -> Error {
    Error::Cudnn {
        call,
        status: library_status(e.0, e.0 as i64),
    }
}

/// A library's status: its numeric `code` and its name (the status
/// enum's variant, as `Debug` writes it).
fn library_status(status: impl core::fmt::Debug, code: i64) -> LibraryStatus {
    LibraryStatus {
        code,
        name: format!("{status:?}"),
    }
}

/// Shorthand: map a driver result into ours.
pub(crate) trait CudaResultExt<T> {
    fn call(self, call: &'static str) -> Result<T, Error>;
}

impl<T> CudaResultExt<T> for Result<T, DriverError> {
    fn call(self, call: &'static str) -> Result<T, Error> {
        self.map_err(|e| cuda_error(call, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::driver::sys::CUresult;

    /// An allocation the device cannot hold is `OutOfMemory` with its size;
    /// any other failed allocation keeps the driver's status.
    #[test]
    fn allocation_failures_map_to_out_of_memory() {
        let oom = alloc_error(
            "cuMemAlloc",
            1 << 40,
            DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY),
        );
        assert_eq!(
            oom,
            Error::OutOfMemory {
                op: "cuMemAlloc",
                bytes: 1 << 40
            }
        );
        assert_eq!(
            oom.to_string(),
            "cuMemAlloc: out of memory allocating 1099511627776 bytes"
        );
        let other = alloc_error(
            "cuMemAlloc",
            8,
            DriverError(CUresult::CUDA_ERROR_INVALID_VALUE),
        );
        assert!(matches!(
            other,
            Error::Cuda {
                call: "cuMemAlloc",
                ..
            }
        ));
    }
}
