//! [`LinearKernel`]: a [`LinearMatmul`](super::plain::LinearMatmul)
//! role's matmul as another family runs it, either cuBLASLt's
//! ([`PlainMatmul`]) or the narrow kernel ([`NarrowMatmul`]) for the same
//! role. It sits above both, so neither implementation module depends on
//! the other.

use baracuda_driver::Stream;
use baracuda_kernels_types::{DevPtr, DevPtrMut, Result};

use super::narrow::NarrowMatmul;
use super::plain::PlainMatmul;

/// A [`LinearMatmul`](super::plain::LinearMatmul) role's matmul as
/// another family runs it: through cuBLASLt, or through the narrow kernel
/// where it fits.
pub(crate) enum LinearKernel {
    /// cuBLASLt.
    Lt(PlainMatmul),
    /// `kernels/gemm/narrow_matmul.cu`.
    Narrow(NarrowMatmul),
}

impl LinearKernel {
    /// Workspace bytes (none for the narrow kernel).
    pub(crate) fn workspace_bytes(&self) -> usize {
        match self {
            LinearKernel::Lt(g) => g.workspace_bytes(),
            LinearKernel::Narrow(_) => 0,
        }
    }

    /// Whether results are bitwise reproducible (the narrow kernel sums in
    /// a fixed order).
    pub(crate) fn is_deterministic(&self) -> bool {
        match self {
            LinearKernel::Lt(g) => g.is_deterministic(),
            LinearKernel::Narrow(_) => true,
        }
    }

    /// Whether the matmul runs TF32 math (the narrow kernel takes 16-bit
    /// inputs only).
    pub(crate) fn is_tf32(&self) -> bool {
        match self {
            LinearKernel::Lt(g) => g.is_tf32(),
            LinearKernel::Narrow(_) => false,
        }
    }

    /// The SKU fragment.
    pub(crate) fn describe(&self) -> String {
        match self {
            LinearKernel::Lt(g) => g.describe(),
            LinearKernel::Narrow(n) => n.describe(),
        }
    }

    /// Enqueue the role's `D = A B` on `(a, b, d)` with `workspace` (at
    /// least [`LinearKernel::workspace_bytes`] bytes at that address).
    ///
    /// # Safety
    /// As [`PlainMatmul::enqueue`]: the role's packed row-major matrices,
    /// 16-byte aligned, `d` disjoint from `a` and `b`, valid until the
    /// work completes.
    pub(crate) unsafe fn enqueue(
        &self,
        stream: &Stream,
        abd: (DevPtr<u8>, DevPtr<u8>, DevPtrMut<u8>),
        workspace: DevPtrMut<u8>,
    ) -> Result<()> {
        match self {
            // SAFETY: forwarded from the caller.
            LinearKernel::Lt(g) => unsafe { g.enqueue(stream, abd, workspace) },
            // SAFETY: forwarded from the caller; the narrow kernel's A, w
            // and D are the role's A, B and D.
            LinearKernel::Narrow(n) => unsafe { n.enqueue(stream, abd) },
        }
    }
}
