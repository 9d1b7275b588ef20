//! The `Plan` trait every op implements.
//!
//! Lifecycle: `Descriptor -> Plan::select -> workspace_size -> Args -> run`.
//! `select` validates the descriptor, compiles or looks up kernels, builds
//! library descriptors and picks the implementation; `run` checks the
//! arguments against the plan and only enqueues work on the given stream.
//! It never allocates device memory, never synchronizes and never prints,
//! so a plan works under CUDA graph capture and from many threads.
//!
//! # Backward
//!
//! A differentiable op's plan also implements [`Backward`]: the same plan,
//! selected once, runs the forward with [`Plan::run`] and the gradients with
//! [`Backward::run_bw`]. Its `BwArgs` hold the tensors the backward reads
//! (the forward's inputs or saved outputs, and `dy`) and one `Option` per
//! gradient it can compute; a gradient is computed exactly when its output
//! is given. [`Backward::bw_workspace_size`] takes the same choice as a
//! [`Grads`] set, so the workspace is sized for what is asked:
//!
//! ```ignore
//! let plan = Conv2dPlan::<bf16>::select(&stream, &desc, &pref)?;
//! plan.run(&stream, ws_fw, Conv2dArgs { x, w, bias: None, y })?;
//! let wants = Grad::X | Grad::Weight;
//! assert!(ws_bw.bytes() >= plan.bw_workspace_size(wants));
//! plan.run_bw(&stream, ws_bw, Conv2dBwArgs { x, w, dy, dx: Some(dx), dw: Some(dw), dbias: None })?;
//! ```
//!
//! Asking for a gradient the plan does not compute (not in
//! [`Backward::grads`]) is `Error::InvalidArgument`; a workspace smaller
//! than `bw_workspace_size` of the gradients given is
//! `Error::WorkspaceTooSmall`. Nothing is written when a check fails.

use baracuda_driver::Stream;
use baracuda_kernels_types::{
    BackendKind, Element, ElementKind, Grad, Grads, KernelSku, MathPrecision, PlanPreference,
    PrecisionGuarantee, Result, Workspace,
};

/// The [`KernelSku`] of a plan that runs this crate's own deterministic
/// float kernels on element type `T` on `stream`'s device: `op` and
/// `variant` as given, [`PrecisionGuarantee::float`].
pub(crate) fn own_float_sku<T: Element>(stream: &Stream, op: String, variant: &str) -> KernelSku {
    KernelSku {
        op,
        element: T::KIND,
        backend: BackendKind::Baracuda,
        arch: stream.context().device().arch,
        variant: variant.into(),
        precision: PrecisionGuarantee::float(T::KIND, true),
    }
}

/// [`own_float_sku`] for kernels that also take integer `T` (the
/// reductions and scans): on i32 and i64, exact integer math accumulated
/// in i64.
pub(crate) fn own_numeric_sku<T: Element>(stream: &Stream, op: String, variant: &str) -> KernelSku {
    let mut sku = own_float_sku::<T>(stream, op, variant);
    if !T::KIND.is_float() {
        sku.precision = PrecisionGuarantee {
            math: MathPrecision::Integer,
            accumulator: ElementKind::I64,
            deterministic: true,
            bit_stable_on_same_hardware: true,
        };
    }
    sku
}

/// A selected implementation of one op for one problem.
pub trait Plan: Sized + Send + Sync {
    /// The problem description `select` takes.
    type Descriptor;
    /// The tensors `run` takes.
    type Args<'a>;

    /// Validate `desc`, choose an implementation and prepare it (compile
    /// kernels, build library descriptors). May time candidates on `stream`
    /// when `pref.autotune` is `Measured`.
    ///
    /// # Errors
    /// `InvalidDescriptor`, `Unsupported` (dtype, layout, arch the op does
    /// not implement), `PreferenceRejected`, and library or compile errors.
    fn select(stream: &Stream, desc: &Self::Descriptor, pref: &PlanPreference) -> Result<Self>;

    /// What was selected.
    fn sku(&self) -> &KernelSku;

    /// The numerical guarantee of the selection.
    fn precision_guarantee(&self) -> PrecisionGuarantee {
        self.sku().precision
    }

    /// Device scratch `run` needs, in bytes.
    fn workspace_size(&self) -> usize;

    /// Check `args` against the plan and enqueue the work on `stream`.
    ///
    /// # Errors
    /// `ShapeMismatch`, `DtypeMismatch`, `ContextMismatch`,
    /// `WorkspaceTooSmall`, `InvalidArgument`, and launch errors. Nothing is
    /// written when an argument check fails.
    fn run(&self, stream: &Stream, workspace: Workspace<'_>, args: Self::Args<'_>) -> Result<()>;
}

/// The backward of a differentiable [`Plan`]; see the module doc.
pub trait Backward: Plan {
    /// The tensors `run_bw` takes: what the backward reads, and an
    /// `Option` per gradient (computed when `Some`).
    type BwArgs<'a>;

    /// The gradients this plan can compute; by default the input's alone.
    fn grads(&self) -> Grads {
        Grad::X.into()
    }

    /// Device scratch `run_bw` needs to compute `wants`, in bytes; by
    /// default none. Gradients outside [`Backward::grads`] add nothing.
    fn bw_workspace_size(&self, wants: Grads) -> usize {
        let _ = wants;
        0
    }

    /// Check `args` against the plan and enqueue the gradients they ask for
    /// on `stream`.
    ///
    /// # Errors
    /// As [`Plan::run`]; `InvalidArgument` when a gradient outside
    /// [`Backward::grads`] is asked for, or an input that gradient needs is
    /// missing. Nothing is written when a check fails.
    fn run_bw(
        &self,
        stream: &Stream,
        workspace: Workspace<'_>,
        args: Self::BwArgs<'_>,
    ) -> Result<()>;
}
