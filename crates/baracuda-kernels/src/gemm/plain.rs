//! The three matmuls of a linear layer as a plan of another family uses
//! them: a 1x1 convolution with unit stride, no padding and one group over
//! channels-last tensors is the linear layer `Y[M, Cout] = X[M, Cin]
//! W[Cout, Cin]^T` over `M` = batch x positions, and its backward passes
//! are the layer's `dX` and `dW` matmuls. [`LinearMatmul`] names the three
//! and builds their descriptors; [`PlainMatmul`] is one of them prepared
//! (descriptors, layouts and algorithm built once) with `alpha = 1`,
//! `beta = 0` and no epilogue. The narrow kernel (`super::narrow`) takes
//! the same roles, and `super::linear_kernel` chooses between the two.

use baracuda_driver::{LtCompute, LtEpilogue, Stream};
use baracuda_kernels_types::{DevPtr, DevPtrMut, ElementKind, LayoutSku, PlanPreference, Result};

use super::gemm::{compute_for, problem, GemmDescriptor};
use super::matmul::{scalar, Prepared, Ptrs};

/// One matmul of a linear layer of `tokens` rows, `in` inputs and `out`
/// outputs, every matrix row-major and packed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum LinearMatmul {
    /// `Y [t, o] = X [t, i] W [o, i]^T`: A = X, B = W.
    Forward,
    /// `dX [t, i] = dY [t, o] W [o, i]`: A = dY, B = W.
    DataGrad,
    /// `dW [o, i] = dY [t, o]^T X [t, i]`: A = dY (read column-major),
    /// B = X.
    WeightGrad,
}

impl LinearMatmul {
    /// The GEMM descriptor of this matmul for `(tokens, in, out)`.
    pub(crate) fn desc(self, (t, i, o): (usize, usize, usize)) -> GemmDescriptor {
        match self {
            LinearMatmul::Forward => GemmDescriptor::new(t, o, i, LayoutSku::Rcr),
            LinearMatmul::DataGrad => GemmDescriptor::new(t, i, o, LayoutSku::Rrr),
            LinearMatmul::WeightGrad => GemmDescriptor::new(o, i, t, LayoutSku::Crr),
        }
    }
}

/// A prepared matmul of a [`LinearMatmul`] role: `D = A B` in `kind`,
/// accumulating in f32 (f64 for f64; TF32 for f32 only when the
/// preference allows it).
pub(crate) struct PlainMatmul {
    prepared: Prepared,
    compute: LtCompute,
}

impl PlainMatmul {
    /// Build the matmul (measured autotuning when `pref` asks for it);
    /// `Ok(None)` when cuBLASLt has no algorithm for it.
    ///
    /// # Errors
    /// `Unsupported` for a dtype cuBLASLt does not multiply; cuBLASLt
    /// errors.
    pub(crate) fn new(
        op: &'static str,
        stream: &Stream,
        role: LinearMatmul,
        shape: (usize, usize, usize),
        kind: ElementKind,
        pref: &PlanPreference,
    ) -> Result<Option<PlainMatmul>> {
        let (compute, _, _) = compute_for(op, kind, kind, pref)?;
        let p = problem(
            op,
            &role.desc(shape),
            (kind, kind),
            kind,
            compute,
            LtEpilogue::Default,
        );
        Ok(Prepared::new(stream, &p, pref)?.map(|prepared| PlainMatmul { prepared, compute }))
    }

    /// Workspace bytes of the chosen algorithm.
    pub(crate) fn workspace_bytes(&self) -> usize {
        self.prepared.algo.workspace_bytes
    }

    /// Whether the chosen algorithm sums in a fixed order.
    pub(crate) fn is_deterministic(&self) -> bool {
        self.prepared.algo.is_deterministic()
    }

    /// Whether the matmul runs TF32 tensor-core math.
    pub(crate) fn is_tf32(&self) -> bool {
        self.compute == LtCompute::F32FastTf32
    }

    /// The SKU fragment: `cublasLt algo 21 tile 18 splitk 1 (measured, ...)`.
    pub(crate) fn describe(&self) -> String {
        self.prepared.describe()
    }

    /// Enqueue `D = A B` on `(a, b, d)` with `workspace` (at least
    /// [`PlainMatmul::workspace_bytes`] bytes at that address).
    ///
    /// # Safety
    /// `a`, `b` and `d` must hold the matrices of the role's descriptor
    /// (packed, row-major as [`LinearMatmul`] says), be 16-byte aligned,
    /// `d` must not overlap `a` or `b`, and all must stay valid until the
    /// work completes.
    pub(crate) unsafe fn enqueue(
        &self,
        stream: &Stream,
        (a, b, d): (DevPtr<u8>, DevPtr<u8>, DevPtrMut<u8>),
        workspace: DevPtrMut<u8>,
    ) -> Result<()> {
        let one = scalar(self.compute, true, 1.0);
        let zero = scalar(self.compute, true, 0.0);
        let ptrs = Ptrs::matmul(a, b, d).with_workspace(workspace, self.workspace_bytes());
        // SAFETY: forwarded from the caller; beta = 0, so C (= D) is not
        // read.
        unsafe { self.prepared.enqueue(stream, one, zero, ptrs) }
    }
}
