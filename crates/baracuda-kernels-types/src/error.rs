//! The one error type of the baracuda workspace.

use core::fmt;

use crate::{ElementKind, Shape};

/// Result alias used across baracuda.
pub type Result<T, E = Error> = core::result::Result<T, E>;

/// A status code returned by a CUDA library, with its symbolic name
/// (`CUDA_ERROR_ILLEGAL_ADDRESS`, `CUDNN_STATUS_NOT_SUPPORTED`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibraryStatus {
    /// The numeric code as the library returned it.
    pub code: i64,
    /// The library's name for the code.
    pub name: String,
}

impl fmt::Display for LibraryStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.code)
    }
}

/// Everything that can go wrong in baracuda, with the values needed to fix
/// it. `Display` reads as one sentence that starts with the op's name.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// A tensor argument has the wrong shape.
    ShapeMismatch {
        /// Op reporting the error.
        op: &'static str,
        /// Argument name (`x`, `dy`, ...).
        arg: &'static str,
        /// Shape the plan was built for.
        expected: Shape,
        /// Shape that was passed.
        got: Shape,
    },
    /// Two shapes cannot be broadcast together.
    BroadcastMismatch {
        /// Op reporting the error.
        op: &'static str,
        /// First shape.
        a: Shape,
        /// Second shape.
        b: Shape,
    },
    /// A tensor argument or descriptor has the wrong element type.
    DtypeMismatch {
        /// Op reporting the error.
        op: &'static str,
        /// Argument or field name.
        arg: &'static str,
        /// Element kind the plan needs.
        expected: ElementKind,
        /// Element kind that was passed.
        got: ElementKind,
    },
    /// The op does not implement this combination (dtype, layout, arch...).
    Unsupported {
        /// Op reporting the error.
        op: &'static str,
        /// What is not supported, and where known, why.
        what: String,
    },
    /// A descriptor field holds an invalid value.
    InvalidDescriptor {
        /// Op reporting the error.
        op: &'static str,
        /// Field name.
        field: &'static str,
        /// The value as given.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A run argument is invalid for a reason other than shape or dtype
    /// (overlapping output, misaligned pointer, aliasing...).
    InvalidArgument {
        /// Op reporting the error.
        op: &'static str,
        /// Argument name.
        arg: &'static str,
        /// Why it is invalid.
        reason: String,
    },
    /// A tensor view would reach elements outside its buffer.
    ViewOutOfBounds {
        /// View shape.
        shape: Shape,
        /// View strides in elements.
        strides: Vec<usize>,
        /// Elements the view needs (largest reachable index + 1).
        needed: usize,
        /// Elements the buffer holds.
        len: usize,
    },
    /// A mutable view would write one element through two indices.
    OverlappingView {
        /// View shape.
        shape: Shape,
        /// View strides in elements.
        strides: Vec<usize>,
    },
    /// A buffer belongs to a different CUDA context than the stream.
    ContextMismatch {
        /// Op reporting the error.
        op: &'static str,
        /// Argument name.
        arg: &'static str,
    },
    /// The workspace passed to `run` is smaller than `workspace_size()`.
    WorkspaceTooSmall {
        /// Op reporting the error.
        op: &'static str,
        /// Bytes the plan needs.
        needed: usize,
        /// Bytes that were passed.
        got: usize,
    },
    /// A [`PlanPreference`](crate::PlanPreference) field cannot be honoured.
    PreferenceRejected {
        /// Op reporting the error.
        op: &'static str,
        /// The preference field.
        field: &'static str,
        /// Why it cannot be honoured.
        reason: String,
    },
    /// The device (or pinned host) memory an allocation asked for is not
    /// available: returned by the allocating call, before anything runs.
    OutOfMemory {
        /// The allocating call.
        op: &'static str,
        /// Bytes asked for.
        bytes: usize,
    },
    /// A size computation overflowed.
    Overflow {
        /// Op reporting the error.
        op: &'static str,
        /// What overflowed.
        what: String,
    },
    /// A CUDA shared library could not be loaded.
    LibraryNotFound {
        /// Library name (`nvrtc`, `cuda`, `cublasLt`, `cudnn`).
        lib: &'static str,
        /// Every path and name that was tried.
        searched: Vec<String>,
        /// How to fix it.
        hint: &'static str,
    },
    /// The CUDA headers that kernels include were not found.
    CudaHeadersNotFound {
        /// Every directory that was tried.
        searched: Vec<String>,
    },
    /// No CUDA device with this ordinal.
    NoDevice {
        /// Ordinal asked for.
        ordinal: usize,
        /// Devices present.
        count: usize,
    },
    /// NVRTC rejected a kernel source.
    Nvrtc {
        /// Kernel source name.
        kernel: String,
        /// Compile options.
        options: Vec<String>,
        /// NVRTC's status and program log.
        log: String,
    },
    /// A compiled cubin could not be post-processed (a register floor for
    /// a kernel it lacks, or a layout the editor does not know).
    Cubin {
        /// Kernel source name.
        module: String,
        /// What went wrong.
        what: String,
    },
    /// A CUDA driver call failed.
    Cuda {
        /// The driver function.
        call: &'static str,
        /// Its status.
        status: LibraryStatus,
    },
    /// A cuBLAS or cuBLASLt call failed.
    Cublas {
        /// The library function.
        call: &'static str,
        /// Its status.
        status: LibraryStatus,
    },
    /// A cuDNN call failed.
    Cudnn {
        /// The library function.
        call: &'static str,
        /// Its status.
        status: LibraryStatus,
    },
    /// A file-system operation failed (kernel cache, goldens, autotune cache).
    Io {
        /// The path involved.
        path: String,
        /// The OS error.
        message: String,
    },
}

fn write_list(f: &mut fmt::Formatter<'_>, items: &[String]) -> fmt::Result {
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        f.write_str(s)?;
    }
    Ok(())
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ShapeMismatch {
                op,
                arg,
                expected,
                got,
            } => {
                write!(f, "{op}: {arg} has shape {got}, expected {expected}")
            }
            Error::BroadcastMismatch { op, a, b } => {
                write!(f, "{op}: shapes {a} and {b} cannot be broadcast together")
            }
            Error::DtypeMismatch {
                op,
                arg,
                expected,
                got,
            } => {
                write!(f, "{op}: {arg} has dtype {got}, expected {expected}")
            }
            Error::Unsupported { op, what } => write!(f, "{op}: unsupported: {what}"),
            Error::InvalidDescriptor {
                op,
                field,
                value,
                reason,
            } => {
                write!(f, "{op}: {field} = {value} is invalid: {reason}")
            }
            Error::InvalidArgument { op, arg, reason } => write!(f, "{op}: {arg}: {reason}"),
            Error::ViewOutOfBounds {
                shape,
                strides,
                needed,
                len,
            } => write!(
                f,
                "tensor view of shape {shape} with strides {strides:?} reaches {needed} elements \
                 but the buffer holds {len}"
            ),
            Error::OverlappingView { shape, strides } => write!(
                f,
                "mutable tensor view of shape {shape} with strides {strides:?} names some \
                 element twice"
            ),
            Error::ContextMismatch { op, arg } => {
                write!(
                    f,
                    "{op}: {arg} lives on a different CUDA context than the stream"
                )
            }
            Error::WorkspaceTooSmall { op, needed, got } => {
                write!(
                    f,
                    "{op}: workspace has {got} bytes, the plan needs {needed}"
                )
            }
            Error::PreferenceRejected { op, field, reason } => {
                write!(f, "{op}: preference {field} cannot be honoured: {reason}")
            }
            Error::OutOfMemory { op, bytes } => {
                write!(f, "{op}: out of memory allocating {bytes} bytes")
            }
            Error::Overflow { op, what } => write!(f, "{op}: {what} overflows"),
            Error::LibraryNotFound {
                lib,
                searched,
                hint,
            } => {
                write!(f, "could not load the CUDA library {lib}; tried ")?;
                write_list(f, searched)?;
                write!(f, ". {hint}")
            }
            Error::CudaHeadersNotFound { searched } => {
                write!(f, "CUDA headers (cuda_fp16.h) not found; tried ")?;
                write_list(f, searched)?;
                write!(
                    f,
                    ". Fix: `pip install nvidia-cuda-runtime==13.0.96` (or set \
                     BARACUDA_CUDA_INCLUDE to a directory holding cuda_fp16.h)."
                )
            }
            Error::NoDevice { ordinal, count } => {
                write!(f, "no CUDA device {ordinal}: {count} device(s) present")
            }
            Error::Nvrtc {
                kernel,
                options,
                log,
            } => {
                write!(
                    f,
                    "NVRTC failed to compile {kernel} with options {options:?}:\n{log}"
                )
            }
            Error::Cubin { module, what } => write!(f, "cubin of {module}: {what}"),
            Error::Cuda { call, status } => write!(f, "{call} failed: {status}"),
            Error::Cublas { call, status } => write!(f, "{call} failed: {status}"),
            Error::Cudnn { call, status } => write!(f, "{call} failed: {status}"),
            Error::Io { path, message } => write!(f, "{path}: {message}"),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_reads_as_a_sentence() {
        let e = Error::ShapeMismatch {
            op: "rms_norm",
            arg: "w",
            expected: Shape::from([4096usize]),
            got: Shape::from([4095usize]),
        };
        assert_eq!(
            e.to_string(),
            "rms_norm: w has shape [4095], expected [4096]"
        );
        let e = Error::Cudnn {
            call: "cudnnBackendFinalize",
            status: LibraryStatus {
                code: 3000,
                name: "CUDNN_STATUS_NOT_SUPPORTED".into(),
            },
        };
        assert_eq!(
            e.to_string(),
            "cudnnBackendFinalize failed: CUDNN_STATUS_NOT_SUPPORTED (3000)"
        );
    }
}
